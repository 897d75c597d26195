"""The scoring of findings against a run's truth (lagscope.devtools.sim.score), on hand-made
truths and findings. Pure Python."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from lagscope.config import AnalyticsRulesConfig
from lagscope.devtools.sim import truth
from lagscope.devtools.sim.model import ExpectedAdvice
from lagscope.devtools.sim.score import (
    AdviceScore,
    Expected,
    Finding,
    RunScore,
    advice_figures,
    delay_budgets,
    expected_findings,
    fault_verdicts,
    figures,
    real_events,
    score_advice,
    score_run,
    skip_bounds,
    skip_cells,
)
from lagscope.devtools.sim.truth import Assign, Commit, EndState, Fault, GroupOffset, PartitionEnd, Produce, Revoke

RULES = AnalyticsRulesConfig(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0, growth_min_minutes=5)
T = "topic"
G = "group"


def _finding(kind: str, start: float, end: float | None = None, *, group: str = G, partition: int | None = 0,
             severity: str = "warning") -> Finding:
    return Finding(kind, group, None if partition is None else T, partition, start, end, severity)


def _truth(*extra: truth.Record, committed: tuple[int, int] = (50, 50), log_start: int = 0) -> truth.TruthIndex:
    """Two members c1, c2 formed at 100–101, then ``extra``; ends at 200."""
    recs: list[truth.Record] = [
        truth.RunInfo("s", 3, "r", 100.0),
        Assign(G, "c1", ((T, 0),), 100.5, 1), Assign(G, "c2", ((T, 1),), 101.0, 1),
        *[Produce(T, p, o, 100.0 + o) for p in (0, 1) for o in range(60)],
        *[Commit(G, "c1" if p == 0 else "c2", T, p, committed[p], 150.0) for p in (0, 1)],
        *extra,
        EndState(200.0, tuple(PartitionEnd(T, p, log_start, 60, 60) for p in (0, 1)),
                 tuple(GroupOffset(G, T, p, committed[p]) for p in (0, 1))),
    ]
    return truth.TruthIndex(recs)


STALL = Fault("stall", G, "c1", 120.0, 140.0, {}, ((T, 0),))


@pytest.mark.parametrize(("finding", "matched", "why"), [
    (_finding("stall", 118.0, 141.0), True, "dated from the last commit, before the fault: still the stall"),
    (_finding("stall", 125.0, None), True, "an open stall that began within the fault"),
    (_finding("stall", 142.5, 150.0), True, "2.5 s after the fault ended: within the 3 s tolerance"),
    (_finding("stall", 143.5, 150.0), False, "3.5 s after it ended: another episode"),
    (_finding("stall", 110.0, 116.5), False, "ended 3.5 s before the fault began"),
    (_finding("stall", 125.0, 130.0, partition=1), False, "a partition c1 did not hold"),
    (_finding("stall", 125.0, 130.0, partition=None), True, "group-level: names no partition"),
    (_finding("stall", 125.0, 130.0, group="other"), False, "another group"),
    (_finding("stop", 125.0, 130.0), False, "another kind"),
])
def test_a_finding_matches_its_fault(finding: Finding, matched: bool, why: str) -> None:
    ti = _truth(STALL)
    exp = [e for e in expected_findings(ti, RULES) if e.kind == "stall"]
    assert [e.partitions for e in exp] == [((T, 0),)]
    s = score_run(exp, [finding], tolerance_s=3.0)
    assert (s.matched == [finding]) is matched, why
    assert (s.unmatched == [finding]) is not matched, why
    assert (s.matches[0].finding is not None) is matched, why


def test_a_stalled_member_stalls_the_partitions_a_rebalance_gives_it() -> None:
    # c1 stalls at 120 on partition 0; c2 crashes and at 130 the rebalance gives c1 partition 1
    # too: the stall calls for findings on both (a stall found on partition 1 is the fault's)
    ti = _truth(STALL, Assign(G, "c1", ((T, 1),), 130.0, 2))
    (exp,) = [e for e in expected_findings(ti, RULES) if e.kind == "stall"]
    assert exp.partitions == ((T, 0), (T, 1))
    s = score_run([exp], [_finding("stall", 131.0, 140.0, partition=1)], tolerance_s=3.0)
    assert s.unmatched == []
    # an assignment after the stall ended is not part of it
    late = _truth(STALL, Assign(G, "c1", ((T, 1),), 150.0, 2))
    assert [e.partitions for e in expected_findings(late, RULES) if e.kind == "stall"] == [((T, 0),)]


def test_a_stopped_member_stalls_the_partitions_a_rebalance_gives_it() -> None:
    # c1 stops committing at 120 (its partition 0: a stop); at 130 a rebalance gives it partition 1,
    # which it never commits: by the definition that is a stall (no commits of its own that then
    # stopped), called for from the assignment, not a stop
    stop = Fault("stop", G, "c1", 120.0, 140.0, {}, ((T, 0),))
    # (an eager rebalance at 125 gives it back only what it held: the stall dates from 130)
    ti = _truth(stop, Assign(G, "c1", ((T, 0),), 125.0, 2), Assign(G, "c1", ((T, 0), (T, 1)), 130.0, 3))
    called = [e for e in expected_findings(ti, RULES) if e.kind in ("stall", "stop")]
    exp = sorted((e.kind, e.partitions, e.start) for e in called)
    assert exp == [("stall", ((T, 1),), 130.0), ("stop", ((T, 0),), 120.0)]
    found = [_finding("stop", 121.0, 140.0), _finding("stall", 136.0, 140.0, partition=1)]
    s = score_run(called, found, tolerance_s=3.0)
    assert s.unmatched == []
    assert all(m.finding is not None for m in s.matches)
    # a stop found on the gained partition matches nothing
    wrong = score_run(called, [_finding("stop", 136.0, 140.0, partition=1)], tolerance_s=3.0)
    assert len(wrong.unmatched) == 1
    # a member that held nothing when it stopped calls for no stop (an empty list would name the
    # whole group), only the stall of what it is given
    empty = _truth(Fault("stop", G, "c1", 120.0, 140.0, {}, ()), Assign(G, "c1", ((T, 1),), 130.0, 2))
    assert [(e.kind, e.partitions) for e in expected_findings(empty, RULES) if e.kind in ("stall", "stop")] == [
        ("stall", ((T, 1),))]


def test_real_events_the_truth_calls_for_nothing_about_are_informational() -> None:
    # the group formed in two generations (kafka-python's first join may assign nothing: c1 at
    # 100.5 in generation 1, both again at 101 in generation 2), and c2, static, bounced at 150
    # without a rebalance: windows of those are real, not found faults and not false
    bounce = Fault("bounce", G, "c2", 150.0, 152.0, {"static": True}, ((T, 1),))
    ti = _truth(Assign(G, "c1", ((T, 0),), 101.0, 2), Assign(G, "c2", ((T, 1),), 101.2, 2), bounce)
    real = real_events(ti)
    assert sorted((e.kind, e.start) for e in real) == [("rebalance", 100.5), ("rebalance", 101.0),
                                                       ("rebalance", 150.0)]
    formation = _finding("rebalance", 100.8, 101.2, partition=None, severity="info")
    bounced = _finding("rebalance", 150.5, 152.0, partition=None, severity="info")
    stray = _finding("rebalance", 175.0, 176.0, partition=None, severity="info")
    s = score_run(expected_findings(ti, RULES), [formation, bounced, stray], tolerance_s=1.0, real=real)
    assert s.informational == [formation, bounced]
    assert s.unmatched == [stray]
    # a dynamic member's bounce is a real rebalance the truth calls for: not a real-only event
    dynamic = _truth(Fault("bounce", G, "c2", 150.0, 152.0, {"static": False}, ((T, 1),)))
    assert [e.start for e in real_events(dynamic)] == [100.5]


def test_recall_precision_and_delay_of_one_run() -> None:
    rewind = Fault("rewind", G, "c2", 130.0, 130.0, {"messages": 10}, ((T, 1),))
    ti = _truth(STALL, rewind)
    found = [_finding("stall", 121.0, 141.0), _finding("stall", 160.0, 170.0, severity="critical"),
             _finding("skip", 131.0, 131.0, partition=1, severity="critical")]
    s = score_run(expected_findings(ti, RULES), found, tolerance_s=2.0, scenario="s", seed=3, duration_s=100)
    by_kind = {m.expected.kind: m for m in s.matches}
    assert by_kind["stall"].delay == pytest.approx(1.0)
    assert by_kind["rewind"].finding is None  # missed: a skip is not a rewind
    assert [f.kind for f in s.unmatched] == ["skip", "stall"]
    figs = {f.kind: f for f in figures([s], delay_budgets(RULES, 0.5))}
    assert figs["stall"].precision == pytest.approx(0.5)
    assert figs["stall"].recall == 1.0
    assert figs["rewind"].recall == 0.0
    assert math.isnan(figs["rewind"].precision)  # no rewind reported at all
    assert figs["skip"].precision == 0.0
    assert figs["skip"].false_criticals == 1
    # no no-fault traffic in these runs: no rate per hour
    assert math.isnan(figs["skip"].false_criticals_per_h)
    assert figs["stall"].delay_budget == pytest.approx(2 * 0.5 + 5.0)


#: c1's commits of partition 0 every 0.5 s from 100 s: 5 gaps (RULES' gap_min_samples) by 102.5 s,
#: each with work pending (the end, one message a second, above the committed offset)
_COMMITS = [Commit(G, "c1", T, 0, n // 2, 100.0 + 0.5 * n) for n in range(6)]


def test_a_commit_gap_before_the_partition_has_a_normal_calls_for_nothing() -> None:
    # 4 gaps before the fault: the rule has no normal to judge it against yet. A finding for it
    # is informational (a real event), neither found nor false; with 5 gaps it is expected
    early = Fault("commit_gap", G, "c1", 102.2, 103.2, {}, ((T, 0),))
    ti = _truth(*_COMMITS, early)
    assert [e.kind for e in expected_findings(ti, RULES) if e.kind == "commit_gap"] == []
    s = score_run(expected_findings(ti, RULES), [_finding("commit_gap", 102.0, 103.3)], tolerance_s=2.0,
                  real=real_events(ti, rules=RULES))
    assert (len(s.informational), s.unmatched) == (1, [])
    later = Fault("commit_gap", G, "c1", 102.6, 103.6, {}, ((T, 0),))
    assert [e.start for e in expected_findings(_truth(*_COMMITS, later), RULES) if e.kind == "commit_gap"] == [
        102.6]


def test_a_finding_credits_only_the_fault_nearest_it() -> None:
    # two commit gaps 3 s apart (within the tolerance of each other): the finding of the second
    # does not also find the first, which no finding of its own found (a miss, not a late find)
    first = Fault("commit_gap", G, "c1", 103.0, 104.0, {}, ((T, 0),))
    second = Fault("commit_gap", G, "c1", 106.0, 110.0, {}, ((T, 0),))
    expected = expected_findings(_truth(*_COMMITS, first, second), RULES)
    s = score_run(expected, [_finding("commit_gap", 105.8, 110.2)], tolerance_s=2.0)
    got = {m.expected.start: m for m in s.matches if m.expected.kind == "commit_gap"}
    assert got[103.0].finding is None
    assert got[106.0].delay == 0.0
    # each found by its own finding: each credited with it, the delays its own
    s = score_run(expected, [_finding("commit_gap", 103.5, 104.6), _finding("commit_gap", 106.4, 110.2)],
                  tolerance_s=2.0)
    got = {m.expected.start: m for m in s.matches if m.expected.kind == "commit_gap"}
    assert got[103.0].delay == pytest.approx(0.5)
    assert got[106.0].delay == pytest.approx(0.4)
    assert s.unmatched == []


def test_false_alarms_per_hour_of_no_fault_traffic() -> None:
    quiet = [RunScore("q", s, True, 1800.0, unmatched=[
        _finding("skip", 10.0, severity="critical"), _finding("stall", 20.0), _finding("stall", 30.0)])
        for s in (1, 2)]
    # a false finding in a faulty run counts against precision, not against the hour of quiet
    faulty = RunScore("f", 1, False, 600.0, unmatched=[_finding("stall", 5.0)])
    figs = {f.kind: f for f in figures([*quiet, faulty], {})}
    assert figs["stall"].false_warnings_per_h == pytest.approx(4.0)  # 4 in one hour (2 × 1800 s)
    assert figs["stall"].findings == 5
    assert figs["skip"].false_criticals_per_h == pytest.approx(2.0)
    assert figs["skip"].false_warnings_per_h == 0.0


def test_a_crash_calls_for_the_rebalance_it_causes() -> None:
    crash = Fault("crash", G, "c2", 110.0, 110.0, {}, ((T, 1),))
    ti = _truth(crash, Revoke(G, "c1", ((T, 0),), 113.0), Assign(G, "c1", ((T, 0), (T, 1)), 113.5, 2))
    exp = expected_findings(ti, RULES)
    # the group's formation (generation 1) is no rebalance to report; the crash's is
    (rb,) = [e for e in exp if e.kind == "rebalance"]
    # a first join that assigned nothing is not the formation yet
    early = _truth(crash, Assign(G, "c1", (), 99.0, 0), Revoke(G, "c1", ((T, 0),), 113.0),
                   Assign(G, "c1", ((T, 0), (T, 1)), 113.5, 2))
    assert [e.start for e in expected_findings(early, RULES) if e.kind == "rebalance"] == [113.0]
    assert (rb.start, rb.end, rb.fault) == (113.0, 113.5, crash)
    window = Finding("rebalance", G, None, None, 112.8, 113.6, "info", "session_timeout")
    s = score_run(exp, [window], tolerance_s=1.0)
    ((_, ms),) = [v for v in fault_verdicts(s, ti.faults()) if v[0].kind == "crash"]
    assert [m.finding for m in ms] == [window]
    assert ms[0].delay == 0.0
    # and without the window the crash is missed
    ((_, ms),) = [v for v in fault_verdicts(score_run(exp, [], tolerance_s=1.0), [crash])]
    assert [m.finding for m in ms] == [None]


def test_a_bounce_within_the_session_calls_for_nothing() -> None:
    bounce = Fault("bounce", G, "c2", 110.0, 112.0, {}, ((T, 1),))
    ti = _truth(bounce, Assign(G, "c2", ((T, 1),), 112.0, 1))  # back in the same generation
    assert [e for e in expected_findings(ti, RULES) if e.fault == bounce] == []
    assert [e.kind for e in expected_findings(ti, RULES)] == []


def test_retention_loss_from_the_runners_fault_or_the_end_state() -> None:
    overrun = Fault("retention_overrun", G, "", 160.0, 200.0, {"lost": {f"{T}:0": 5}}, ((T, 0),))
    (e,) = expected_findings(_truth(overrun, committed=(50, 60), log_start=55), RULES)
    assert (e.kind, e.partitions, e.start, e.fault) == ("retention_loss", ((T, 0),), 160.0, overrun)
    # an older truth without the fault: from the end state, over the whole run
    (e,) = expected_findings(_truth(committed=(50, 60), log_start=55), RULES)
    assert (e.kind, e.partitions, e.start, e.end) == ("retention_loss", ((T, 0),), 100.0, 200.0)


def test_lag_growth_needs_its_minutes() -> None:
    # one partition produced to for 8 minutes, never committed past 0: lag rises every minute
    recs: list[truth.Record] = [truth.RunInfo("s", 1, "r", 0.0), Assign(G, "c1", ((T, 0),), 1.0, 1),
                                Commit(G, "c1", T, 0, 0, 2.0),
                                *[Produce(T, 0, o, 3.0 + o * 6.0) for o in range(80)],
                                EndState(480.0, (PartitionEnd(T, 0, 0, 80, 80),), (GroupOffset(G, T, 0, 0),))]
    (e,) = expected_findings(truth.TruthIndex(recs), RULES)
    # the whole minutes ending at 120 … 480 each end with more lag than the one before: seven
    # rising minutes (≥ 5), from 60 to 480
    assert (e.kind, e.start, e.end, e.partitions) == ("lag_growth", 60.0, 480.0, ((T, 0),))
    rules = RULES.model_copy(update={"growth_min_minutes": 8})
    assert expected_findings(truth.TruthIndex(recs), rules) == []
    # a run that ends 20 s into a minute: that partial minute, still rising, counts too
    recs[-1] = EndState(500.0, (PartitionEnd(T, 0, 0, 80, 80),), (GroupOffset(G, T, 0, 0),))
    recs[3:3] = [Produce(T, 0, o, 481.0 + o - 80) for o in range(80, 90)]
    (e,) = expected_findings(truth.TruthIndex(recs), rules)
    assert (e.start, e.end) == (60.0, 500.0)


def test_findings_from_result_rows() -> None:
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    f = Finding.from_anomaly({"kind": "stall", "group_id": G, "topic": T, "partition": 2, "start_ts": at,
                              "end_ts": None, "severity": "critical", "detail": "x"})
    assert (f.start, f.end, f.severity, f.where()) == (at.timestamp(), None, "critical", f"{T}:2")
    r = Finding.from_rebalance({"group_id": G, "start_ts": at, "end_ts": at + dt.timedelta(seconds=3),
                                "cause": "session_timeout"})
    assert (r.kind, r.end, r.severity, r.where()) == ("rebalance", at.timestamp() + 3, "info", "group")
    with pytest.raises(ValueError, match="without a start"):
        Finding.from_anomaly({"kind": "stall", "group_id": G, "start_ts": None})


def test_expected_is_plain_data() -> None:
    e = Expected("stall", G, ((T, 0),), 1.0, 2.0)
    assert e.fault is None


def test_a_starved_partition_is_informational_until_it_alarms() -> None:
    # no truth calls for starved: at info it says how the consumer works, neither right nor false;
    # once it escalates to a warning it is an alarm and, unmatched, a false one
    info = _finding("starved", 120.0, 130.0, severity="info")
    long = _finding("starved", 140.0, 190.0, severity="warning")
    stall = _finding("stall", 150.0, 160.0)
    got = score_run([], [info, long, stall], tolerance_s=3.0)
    assert got.informational == [info]
    assert got.unmatched == [long, stall]
    # a rebalance window is info too, but scored: one no truth calls for is a false finding
    window = _finding("rebalance", 110.0, 115.0, partition=None, severity="info")
    assert score_run([], [window], tolerance_s=3.0).unmatched == [window]


PREFIX = "sim-crash-long-session-ab12cd"
SESSION = ExpectedAdvice(group="readers", rule="session_timeout_crash", setting="session.timeout.ms")


def _advice(group: str, rule: str, setting: str) -> dict[str, str]:
    return {"group_id": f"{PREFIX}-{group}", "rule": rule, "setting": setting, "suggested": "x"}


@pytest.mark.parametrize(("rows", "found", "missing", "unexpected"), [
    # the expected row: found, nothing else
    ([_advice("readers", "session_timeout_crash", "session.timeout.ms")], 1, 0, ()),
    # no advice at all: the expected one is missing
    ([], 0, 1, ()),
    # the right rule naming another setting (static membership instead of a shorter timeout) is
    # not what the scenario's faults call for: missing, and the row is false advice
    ([_advice("readers", "session_timeout_crash", "group.instance.id")], 0, 1,
     (("readers", "session_timeout_crash", "group.instance.id"),)),
    # the expected row and one more on another group of the run: the extra is false advice
    ([_advice("readers", "session_timeout_crash", "session.timeout.ms"),
      _advice("bystander", "rewind_after_rebalance", "commit on revocation")], 1, 0,
     (("bystander", "rewind_after_rebalance", "commit on revocation"),)),
    # a row of another run's group (another prefix) is not this run's: ignored
    ([{"group_id": "sim-crash-long-session-ff00ff-readers", "rule": "max_poll_interval",
       "setting": "max.poll.interval.ms"}], 0, 1, ()),
])
def test_advice_found_missing_unexpected(rows: list[dict[str, str]], found: int, missing: int,
                                         unexpected: tuple[tuple[str, str, str], ...]) -> None:
    a = score_advice([SESSION], rows, prefix=PREFIX, scenario="crash-long-session", seed=1)
    assert len(a.found) == found
    assert len(a.missing) == missing
    assert a.unexpected == unexpected
    assert a.recall == found


def test_a_scenario_expecting_none_makes_every_advice_false() -> None:
    a = score_advice([], [_advice("readers", "restart_storm", "group.instance.id")], prefix=PREFIX)
    assert a.expected == ()
    assert math.isnan(a.recall)
    assert a.unexpected == (("readers", "restart_storm", "group.instance.id"),)
    assert score_advice([], [], prefix=PREFIX).unexpected == ()


def test_advice_figures_per_rule() -> None:
    key = ("readers", "session_timeout_crash", "session.timeout.ms")
    storm = ("readers", "restart_storm", "group.instance.id")
    runs = [AdviceScore("crash-long-session", 1, (key,), (key,), (), ()),
            AdviceScore("crash-long-session", 2, (key,), (), (key,), ()),
            AdviceScore("quiet-rolling-restart", 1, (), (), (), (storm,))]
    figs = {f.rule: f for f in advice_figures(runs)}
    assert sorted(figs) == ["restart_storm", "session_timeout_crash"]
    assert (figs["session_timeout_crash"].expected, figs["session_timeout_crash"].found) == (2, 1)
    assert figs["session_timeout_crash"].recall == 0.5
    assert figs["session_timeout_crash"].unexpected == 0
    assert (figs["restart_storm"].expected, figs["restart_storm"].unexpected) == (0, 1)
    assert math.isnan(figs["restart_storm"].recall)


def _skip(start: float, skipped: dict[int, int], *, mechanism: str = "seek", size: int = 100, spread: str = "all",
          state: str = "caught_up", group: str = G, end: float | None = None) -> Fault:
    return Fault("skip", group, "c1", start, start if end is None else end,
                 {"mechanism": mechanism, "size": size, "partitions": spread, "state": state,
                  "skipped": {f"{T}:{p}": n for p, n in skipped.items()}},
                 tuple((T, p) for p, n in sorted(skipped.items()) if n > 0))


def _skip_finding(start: float, partition: int, magnitude: float, *, cause: str = "seek", group: str = G,
                  end: float | None = None) -> Finding:
    return Finding("skip", group, T, partition, start, start if end is None else end, "critical", "", magnitude,
                   cause)


def test_skip_cells_recall_count_error_delay_and_cause() -> None:
    seek = _skip(100.0, {0: 60, 1: 40})
    admin = _skip(110.0, {0: 5, 1: 0}, mechanism="admin_reset", size=1, spread="one", end=111.5)
    findings = [
        _skip_finding(100.4, 0, 60), _skip_finding(100.4, 1, 38),   # both partitions, 2 short
        _skip_finding(111.0, 0, 5, cause="admin_reset"),            # within the reset's interval
    ]
    cells, negatives = skip_cells([([seek, admin], findings)], tolerance_s=2.0)
    by = {(c.cell.mechanism, c.cell.size, c.cell.spread): c for c in cells}
    s = by[("seek", 100, "all")]
    assert (s.skips, s.partitions, s.found, s.recall) == (1, 2, 2, 1.0)
    assert s.lost == [100]
    assert s.reported == [98.0]
    assert s.count_errors == pytest.approx([0.02])
    assert s.delays == pytest.approx([0.4])
    assert (s.cause_right, s.findings, s.false_skips) == (2, 2, 0)
    a = by[("admin_reset", 1, "one")]
    # the partition that lost nothing calls for nothing
    assert (a.partitions, a.found, a.count_errors, a.cause_right) == (1, 1, [0.0], 1)
    assert negatives == {}


def test_skip_cells_missed_false_and_negatives() -> None:
    seek = _skip(100.0, {0: 10}, size=10, spread="one", state="lagging")
    findings = [
        _skip_finding(100.2, 1, 10),                      # a partition that lost nothing: false
        _skip_finding(130.0, 0, 10),                      # long after the skip: false
        _skip_finding(105.0, 0, 3, group="other"),        # a group without skips: a negative's
    ]
    cells, negatives = skip_cells([([seek], findings)], tolerance_s=3.0)
    (c,) = cells
    assert (c.partitions, c.found, c.false_skips) == (1, 0, 2)
    assert math.isnan(c.recall) is False
    assert c.recall == 0.0
    assert math.isnan(c.count_error_max)
    assert c.delays == []
    assert c.reported == []
    assert negatives == {"other": 1}


def test_skip_cells_one_finding_per_skip_the_nearest() -> None:
    # two skips of the same partition 4 s apart: each finding belongs to the nearest
    first, second = _skip(100.0, {0: 10}, size=10), _skip(104.0, {0: 1000}, size=1000)
    cells, _ = skip_cells([([first, second], [_skip_finding(103.5, 0, 990), _skip_finding(100.5, 0, 10)])],
                          tolerance_s=3.0)
    by = {c.cell.size: c for c in cells}
    assert by[10].reported == [10.0]
    assert by[1000].reported == [990.0]
    assert by[1000].count_errors == pytest.approx([0.01])
    # sweeps date a finding from the sweep before: no negative delay
    assert by[1000].delays == [0.0]


def test_a_skip_finding_from_an_anomaly_row_keeps_magnitude_and_cause() -> None:
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    f = Finding.from_anomaly({"kind": "skip", "group_id": G, "topic": T, "partition": 1, "start_ts": ts,
                              "end_ts": ts, "severity": "critical", "magnitude": 42.0, "cause": "admin_reset"})
    assert (f.magnitude, f.cause) == (42.0, "admin_reset")
    g = Finding.from_anomaly({"kind": "stall", "group_id": G, "start_ts": ts})
    assert (g.magnitude, g.cause) == (None, None)


def test_a_run_judged_up_to_a_time_calls_for_nothing_after_it() -> None:
    # the demo's run lingers past the range it judges (its consumers keep consuming until the
    # analytics have covered that range): a lag growth ends there, later faults call for nothing
    recs: list[truth.Record] = [truth.RunInfo("s", 1, "r", 0.0), Assign(G, "c1", ((T, 0),), 1.0, 1),
                                Commit(G, "c1", T, 0, 0, 2.0),
                                *[Produce(T, 0, o, 3.0 + o * 6.0) for o in range(80)],
                                Fault("stall", G, "c1", 330.0, 480.0, {}, ((T, 0),)),
                                Fault("stall", G, "c1", 430.0, 480.0, {}, ((T, 0),)),
                                EndState(480.0, (PartitionEnd(T, 0, 0, 80, 80),), (GroupOffset(G, T, 0, 0),))]
    got = sorted((e.kind, e.start, e.end) for e in expected_findings(truth.TruthIndex(recs), RULES, until=420.0))
    assert got == [("lag_growth", 60.0, 420.0), ("stall", 330.0, 420.0)]
    # without it, the whole run
    got = sorted((e.kind, e.start, e.end) for e in expected_findings(truth.TruthIndex(recs), RULES))
    assert got == [("lag_growth", 60.0, 480.0), ("stall", 330.0, 480.0), ("stall", 430.0, 480.0)]


def test_a_crash_of_the_last_member_calls_for_a_stop_of_its_partitions() -> None:
    # c2 left at 105 (its partition given to c1); c1, now alone, crashes at 110 and nobody takes
    # its partitions: the group stopped, a stop of both from the crash to the end
    leave = Fault("leave", G, "c2", 105.0, 105.0, {}, ((T, 1),))
    alone = [leave, Revoke(G, "c2", ((T, 1),), 105.0, closing=True), Assign(G, "c1", ((T, 0), (T, 1)), 106.0, 2)]
    crash = Fault("crash", G, "c1", 110.0, 110.0, {}, ((T, 0), (T, 1)))
    (stop,) = [e for e in expected_findings(_truth(*alone, crash), RULES) if e.kind == "stop"]
    assert (stop.partitions, stop.start, stop.end, stop.fault) == (((T, 0), (T, 1)), 110.0, 200.0, crash)
    found = _finding("stop", 108.0, None, severity="critical")
    assert score_run([stop], [found], tolerance_s=1.0).unmatched == []
    # with c2 still holding a partition, the crash is a rebalance's cause, no stop
    survivor = Fault("crash", G, "c1", 110.0, 110.0, {}, ((T, 0),))
    assert [e for e in expected_findings(_truth(survivor), RULES) if e.kind == "stop"] == []
    # and a member that joins later and takes the partitions makes a rebalance that owns the outage
    later = _truth(*alone, crash, Assign(G, "c3", ((T, 0), (T, 1)), 150.0, 3))
    assert [e for e in expected_findings(later, RULES) if e.kind == "stop"] == []


def _consumer(rate_in: float, rate_out: float, *, until: float, step: float = 0.5, start: float = 100.0
              ) -> list[truth.Record]:
    """One partition produced at ``rate_in`` messages/s from ``start`` and committed every ``step`` s
    by c1, which processes at most ``rate_out`` messages/s (never past what was produced)."""
    recs: list[truth.Record] = [Produce(T, 0, i, start + i / rate_in) for i in range(int((until - start) * rate_in))]
    done, t = 0.0, start
    while t < until:
        t += step
        end = sum(1 for r in recs if isinstance(r, Produce) and r.ts <= t)
        done = min(float(end), done + rate_out * step)
        recs.append(Commit(G, "c1", T, 0, int(done), t))
    return recs


def _seek_at(recs: list[truth.Record], at: float, extra: int) -> list[truth.Record]:
    """A burst of ``extra`` messages just before ``at``, then c1 seeks to the end and commits it at ``at``
    (its commits after are dropped): a skip of everything between what it processed and the end."""
    before = [r for r in recs if not (isinstance(r, Commit) and r.ts >= at)]
    n = sum(1 for r in before if isinstance(r, Produce) and r.ts < at)
    burst = [Produce(T, 0, n + i, at - 0.01) for i in range(extra)]
    kept = [r for r in before if not (isinstance(r, Produce) and r.ts >= at - 0.01)]
    end = 1 + max(r.offset for r in [*kept, *burst] if isinstance(r, Produce))
    processed = max(r.offset for r in kept if isinstance(r, Commit))
    fault = Fault("skip", G, "c1", at, at, {"mechanism": "seek", "processed": {f"{T}:0": processed},
                                             "after": {f"{T}:0": end}, "skipped": {f"{T}:0": end - processed}},
                  ((T, 0),))
    return [*kept, *burst, Commit(G, "c1", T, 0, end, at + 0.001), fault]


def test_a_lagging_consumers_seek_is_provable_beyond_the_bound_of_its_pace() -> None:
    # 20/s written, 10/s processed: the backlog grows, every interval is saturated at 10/s
    recs = _seek_at(_consumer(20.0, 10.0, until=120.0), 120.0, 200)
    (b,) = skip_bounds(truth.TruthIndex(recs), 5.0).values()
    assert b.pace == pytest.approx(10.0, rel=0.05)
    assert b.interval_s == pytest.approx(0.5, abs=0.01)
    assert b.lost > 400  # the ~200 behind and the 200 of the burst
    assert b.bound == pytest.approx(25.0, rel=0.05)
    assert (b.reason, b.provable) == ("beyond the bound", True)
    # the same consumer's seek of a few messages, no more than a few intervals' worth: consumption
    small = _seek_at(_consumer(14.0, 10.0, until=104.0), 104.0, 0)
    (b,) = skip_bounds(truth.TruthIndex(small), 5.0).values()
    assert 0 < b.lost <= b.bound
    assert (b.reason, b.provable) == ("within the bound", False)


def test_a_partition_starved_while_its_member_served_another_shows_no_pace() -> None:
    # the lagging consumer's partition 0 (saturated at 10/s) committed in the same requests as a
    # partition 1 the member drained at 100/s as it came (caught up: no pace of its own): 0's
    # advance is what the member left over for it, not its pace, as the rule has it (starved)
    recs = _seek_at(_consumer(20.0, 10.0, until=120.0), 120.0, 200)
    other = [Produce(T, 1, i, 100.0 + i / 100.0) for i in range(2000)]
    times = [100.5 + 0.5 * k for k in range(39)]
    other += [Commit(G, "c1", T, 1, int(100 * (t - 100.0)), t) for t in times]
    (b,) = skip_bounds(truth.TruthIndex([*recs, *other]), 5.0).values()
    assert (b.pace, b.reason, b.provable) == (0.0, "no pace", False)
    # written and served at 30/s instead (no more than 5 × its 10/s): 0's pace counts, the seek is
    # provable
    slower: list[truth.Record] = [Produce(T, 1, i, 100.0 + i / 30.0) for i in range(600)]
    slower += [Commit(G, "c1", T, 1, int(30 * (t - 100.0)), t) for t in times]
    (b,) = skip_bounds(truth.TruthIndex([*recs, *slower]), 5.0).values()
    assert b.pace == pytest.approx(10.0, rel=0.05)
    assert (b.reason, b.provable) == ("beyond the bound", True)
    # a margin below 1 starves no partition by its own pace
    (b,) = skip_bounds(truth.TruthIndex(recs), 0.5).values()
    assert b.pace == pytest.approx(10.0, rel=0.05)


def test_a_members_pace_is_what_it_processed_at_once_not_its_partitions_paces_summed() -> None:
    # one member, two partitions committed together every 0.5 s. A backlog of 200 on partition 0
    # at 100 s is read alone at 20/s (partition 1 quiet), then one of 200 on partition 1 at 110 s
    # the same (partition 0 caught up): each shows a pace of 20/s, at different times. From 120 s
    # 100 more on each, read together at 10/s each. At 125 s the member seeks to the end of both,
    # skipping 50 on each: 100 in a 0.5-s commit interval. Summed, the paces (40/s) bound it at
    # 5 × 40 × 0.5 = 100; the member never processed more than 20/s at once: beyond 5 × 20 × 0.5
    recs: list[truth.Record] = [Produce(T, 0, i, 100.0) for i in range(200)]
    recs += [Produce(T, 1, i, 110.0) for i in range(200)]
    recs += [Produce(T, p, 200 + i, 120.0) for p in (0, 1) for i in range(100)]

    def pos(p: int, t: float) -> int:
        if t >= 120.0:
            return 200 + int(10 * (t - 120.0))
        start = 100.0 + 10 * p
        return min(200, max(0, int(20 * (t - start))))

    times = [100.0 + 0.5 * k for k in range(50)]
    recs += [Commit(G, "c1", T, p, pos(p, t), t) for t in times for p in (0, 1)]
    recs += [Fault("skip", G, "c1", 125.0, 125.0, {"mechanism": "seek", "after": {f"{T}:0": 300, f"{T}:1": 300},
                                                   "skipped": {f"{T}:0": 50, f"{T}:1": 50}}, ((T, 0), (T, 1))),
             Commit(G, "c1", T, 0, 300, 125.001), Commit(G, "c1", T, 1, 300, 125.001)]
    (b,) = skip_bounds(truth.TruthIndex(recs), 5.0).values()
    assert b.pace == pytest.approx(20.0, rel=0.05)
    assert b.lost == 100
    assert (b.reason, b.provable) == ("beyond the bound", True)


def test_a_caught_up_consumers_seek_and_a_burst_show_no_pace() -> None:
    # keeps up (10/s written, up to 50/s processed): no interval ends with more waiting than it took
    recs = _seek_at(_consumer(10.0, 50.0, until=120.0), 120.0, 1000)
    (b,) = skip_bounds(truth.TruthIndex(recs), 5.0).values()
    assert b.pace == 0.0
    assert (b.reason, b.provable) == ("no pace", False)
    # a burst of 1,000 taken in two commits by a 1,200/s consumer: a jump to the end is no evidence
    burst = [*(Produce(T, 0, i, 100.0) for i in range(1000)), Commit(G, "c1", T, 0, 0, 99.9),
             Commit(G, "c1", T, 0, 600, 100.5), Commit(G, "c1", T, 0, 1000, 101.0),
             Fault("skip", G, "c1", 101.5, 101.5, {"mechanism": "seek", "after": {f"{T}:0": 1500},
                                                   "skipped": {f"{T}:0": 500}}, ((T, 0),)),
             *(Produce(T, 0, 1000 + i, 101.4) for i in range(500)), Commit(G, "c1", T, 0, 1500, 101.6)]
    (b,) = skip_bounds(truth.TruthIndex(burst), 5.0).values()
    assert (b.pace, b.reason) == (0.0, "no pace")


def test_an_admin_reset_is_provable_at_any_size_and_a_skip_never_committed_is_not() -> None:
    recs = [Produce(T, 0, 0, 100.0), Commit(G, "c1", T, 0, 0, 100.0), Commit(G, "tool", T, 0, 1, 101.0),
            Fault("skip", G, "tool", 101.0, 101.0, {"mechanism": "admin_reset", "after": {f"{T}:0": 1},
                                                    "skipped": {f"{T}:0": 1}}, ((T, 0),)),
            Fault("skip", G, "c1", 105.0, 105.0, {"mechanism": "seek", "after": {f"{T}:0": 9},
                                                  "skipped": {f"{T}:0": 8}}, ((T, 0),))]
    bounds = skip_bounds(truth.TruthIndex(recs), 5.0)
    assert bounds[(G, "tool", 101.0)].reason == "membership"
    assert bounds[(G, "tool", 101.0)].provable
    assert bounds[(G, "c1", 105.0)].reason == "no jump commit"
    assert not bounds[(G, "c1", 105.0)].provable


def test_skip_cells_count_the_skips_offsets_cannot_prove_apart() -> None:
    proven, hidden = _skip(100.0, {0: 500}, size=1000), _skip(110.0, {0: 20, 1: 20}, size=10)
    cells, _ = skip_cells([([proven, hidden], [_skip_finding(100.2, 0, 500), _skip_finding(110.2, 1, 20)])],
                          tolerance_s=2.0, provable=lambda f: f.start < 105)
    by = {c.cell.size: c for c in cells}
    assert (by[1000].skips, by[1000].partitions, by[1000].found, by[1000].apart_skips) == (1, 1, 1, 0)
    assert (by[10].skips, by[10].partitions, by[10].found) == (0, 0, 0)
    assert (by[10].apart_skips, by[10].apart_partitions, by[10].apart_found) == (1, 2, 1)
    assert math.isnan(by[10].recall)
