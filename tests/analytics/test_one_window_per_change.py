"""One rebalance window per generation change (:mod:`lagscope.analytics.groups`): a group
restarted through Empty (its members leave, an operator resets its offsets while it has none,
new members join) is one leave, dated from the leaving member's last commit, never from the
operator's; two generations between two sweeps are two windows, the second starting at the
first's record; a window's end is the record of the generation its B saw, not a later one of the
same members. Hand-built lakes (``rebalance_cases``: sweeps every 2 s, session 8 s in the
records); the settings of ``test_groups.S``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
import rebalance_cases as rc
from analytics_builders import at, members_rows, offsets_rows
from pyspark.sql import SparkSession
from test_groups import ANOMALY_SCHEMA, S, Step, anomaly, compare, inputs, reference

from lagscope.analytics import groups
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig


def _rows(out: groups.GroupOutputs) -> list[tuple[Any, ...]]:
    return [(r["cause"], r["start_ts"], r["end_ts"], r["generation_before"], r["generation_after"],
             r["members_before"], r["members_after"]) for r in out.rebalances.to_pylist()]


def _restart(g: str, t0: float, *, old: str, new: str, gens: tuple[int, ...], empty_sweeps: bool = True,
             empty_record: bool = True, operator: bool = True) -> tuple[list[tuple[Any, ...]], list[dict[str, Any]],
                                                                       list[tuple[int, float]]]:
    """One restart of a single-member group through Empty, from ``t0`` (an even second, a settled
    sweep of ``old``): ``old`` commits at t0 + 0.5 and leaves (the Empty record 0.02 s later, a
    generation of its own), the group is Empty at the sweeps t0 + 2 and t0 + 4 while an operator
    resets it (a commit at t0 + 3), ``new`` joins: a record per generation in ``gens`` (the first
    at t0 + 5, then 0.3 s apart), settled from the sweep t0 + 6, committing from t0 + 5.5."""
    sweeps: list[tuple[Any, ...]] = []
    if empty_sweeps:
        sweeps += [(t0 + 2, "Empty", None, []), (t0 + 4, "Empty", None, [])]
    events = [rc.record(g, t0 + 0.52, gens[0] - 1, [])] if empty_record else []
    events += [rc.record(g, t0 + 5 + 0.3 * i, gen, [rc.member(new, parts=(0, 1))]) for i, gen in enumerate(gens)]
    commits = [(0, t0 + 0.5), (1, t0 + 0.5), *([(0, t0 + 3.0)] if operator else []), (0, t0 + 5.5), (1, t0 + 5.5)]
    return sweeps, events, commits


def _restart_step(*, gens: tuple[int, ...] = (3, 4), **kw: bool) -> Step:
    g = "restart"
    sweeps, events, commits = _restart(g, 10, old="m1", new="m2", gens=gens, **kw)
    sweeps = [*rc.stable(range(0, 11, 2), 1, [("m1", None, [0, 1])]), *sweeps,  # type: ignore[arg-type]
              *rc.stable(range(16, 23, 2), gens[-1], [("m2", None, [0, 1])])]  # type: ignore[arg-type]
    events = [rc.record(g, 0.5, 1, [rc.member("m1", parts=(0, 1))]), *events]
    commits = [*rc.regular((0, 1), 10), *commits, *[(p, float(t)) for t in range(16, 23, 2) for p in (0, 1)]]
    owner: dict[int, list[tuple[int, str | None]]] = {p: [(0, "m1"), (12, None), (16, "m2")] for p in (0, 1)}
    return Step(members=members_rows(sorted(sweeps), group=g), offsets=rc.offsets(g, 22, owner),
                events=events, commits=rc.commits(g, commits))


def test_a_restart_through_empty_is_a_leave_from_the_last_members_commit() -> None:
    # m1 left at 10.5 (its commit; the Empty record at 10.52); m2's generations 3 (15.0) and 4
    # (15.3) follow while the group was kept Empty for an operator's reset (a commit at 13.0,
    # no member's): a leave 1 → 3 from m1's last commit to generation 3's record, then the
    # generation change 3 → 4 nobody's membership changed in (unknown), from the middle of the
    # two records (no commit between them) to the second: not a session timeout measured to
    # generation 3's record, nor a window starting at the operator's commit, nor a second window
    # 1 → 4 over the first
    want = [("leave", at(10.5), at(15.0), 1, 3, ["m1"], ["m2"]),
            ("unknown", at(15.15), at(15.3), 3, 4, ["m2"], ["m2"])]
    assert _rows(groups.group_pass(inputs(_restart_step()), S)) == want


def test_each_sight_of_the_group_empty_is_enough() -> None:
    # the departure is bounded by the first sight of the group Empty, a record or a sweep: with
    # either alone it is still a leave (without the Empty record, the first Empty sweep at 12:
    # m1's last progress at 10 is 2 s before it, within the leave gap). Without the Empty record
    # nothing says who wrote the commit at 13.0 (the records say m1 was the member): it starts
    # the window, as the group's last commit in it
    want = ("leave", at(10.5), at(15.0), 1, 3, ["m1"], ["m2"])
    for kw in ({"empty_sweeps": False}, {"operator": False}):
        assert _rows(groups.group_pass(inputs(_restart_step(**kw)), S))[0] == want, kw
    assert _rows(groups.group_pass(inputs(_restart_step(empty_record=False)), S))[0] == (
        "leave", at(13.0), at(15.0), 1, 3, ["m1"], ["m2"])


def test_a_restart_through_empty_seen_by_its_sweeps_alone_is_one_leave() -> None:
    # one generation after Empty: the sweep window itself ends at its record, the Empty record
    # before A⁺ makes its departure a leave (members arriving too, but after the group emptied)
    # and the operator's commit is no bound
    assert _rows(groups.group_pass(inputs(_restart_step(gens=(3,))), S)) == [
        ("leave", at(10.5), at(15.0), 1, 3, ["m1"], ["m2"])]


def test_a_crash_through_empty_stays_a_session_timeout() -> None:
    # m1 (session 8 s) stops at 10 and crashes; the broker expires it at 18 (the Empty record):
    # 8 s of silence is the session, whichever sight of Empty bounds it
    g = "crash"
    sweeps = [*rc.stable(range(0, 17, 2), 1, [("m1", None, [0, 1])]), (18, "Empty", None, []),
              (20, "Empty", None, []), *rc.stable(range(22, 29, 2), 3, [("m2", None, [0, 1])])]  # type: ignore[arg-type]
    events = [rc.record(g, 0.5, 1, [rc.member("m1", parts=(0, 1))]), rc.record(g, 18.0, 2, []),
              rc.record(g, 21.0, 3, [rc.member("m2", parts=(0, 1))])]
    commits = [*rc.regular((0, 1), 10), *[(p, float(t)) for t in range(22, 29, 2) for p in (0, 1)]]
    owner: dict[int, list[tuple[int, str | None]]] = {p: [(0, "m1"), (18, None), (22, "m2")] for p in (0, 1)}
    step = Step(members=members_rows(sweeps, group=g), offsets=rc.offsets(g, 28, owner, frozen={0: 10, 1: 10}),
                events=events, commits=rc.commits(g, commits))
    got = groups.group_pass(inputs(step), S).rebalances.to_pylist()
    assert [(r["cause"], r["generation_before"], r["generation_after"]) for r in got] == [
        ("session_timeout", 1, 3)]


def test_restarts_through_empty_count_once_each_toward_a_storm() -> None:
    # three restarts 10 s apart, each through Empty with two generations: three leaves count
    # (each generation after them is the new member arriving into the Empty group, a formation),
    # a storm at 3 within 60 s; before, each restart was two overlapping windows
    g = "storm"
    sweeps: list[tuple[Any, ...]] = [*rc.stable(range(0, 11, 2), 1, [("m0", None, [0, 1])])]  # type: ignore[arg-type]
    events = [rc.record(g, 0.5, 1, [rc.member("m0", parts=(0, 1))])]
    commits = list(rc.regular((0, 1), 10))
    owner: dict[int, list[tuple[int, str | None]]] = {p: [(0, "m0")] for p in (0, 1)}
    for k in range(3):
        t0 = 10 + 10 * k
        gen = 3 + 3 * k
        s, e, c = _restart(g, t0, old=f"m{k}", new=f"m{k + 1}", gens=(gen, gen + 1))
        sweeps += [*s, *rc.stable(range(t0 + 6, t0 + 11, 2), gen + 1, [(f"m{k + 1}", None, [0, 1])])]  # type: ignore[arg-type]
        events += e
        commits += [*c, *[(p, float(t)) for t in range(t0 + 6, t0 + 11, 2) for p in (0, 1)]]
        for p in (0, 1):
            owner[p] += [(t0 + 2, None), (t0 + 6, f"m{k + 1}")]
    step = Step(members=members_rows(sorted(sweeps), group=g), offsets=rc.offsets(g, 40, owner),
                events=events, commits=rc.commits(g, commits))
    settings = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30,
                               rules=AnalyticsRulesConfig(storm_count=3, storm_window_s=60))
    out = groups.group_pass(inputs(step), settings)
    got = _rows(out)
    assert [r[0] for r in got] == ["leave", "unknown"] * 3
    storms = out.anomalies.filter(pa.compute.equal(out.anomalies.column("kind"), "rebalance_storm")).to_pylist()
    assert [(s["start_ts"], s["magnitude"]) for s in storms] == [(at(10.5), 3.0)]


def _two_step() -> Step:
    g = "two"
    # settled sweeps see generation 4 = {m1, m2} to 10, generation 6 = {m1, m3} from 12; between
    # them m2 left (generation 5 = {m1} at 11.0, m1 revoking at 10.6) and m3 joined (generation 6
    # at 11.5, m1 revoking at 11.3)
    both = [("m1", None, [0]), ("m2", None, [1])]
    after = [("m1", None, [0]), ("m3", None, [1])]
    sweeps = [*rc.stable(range(0, 11, 2), 4, both), *rc.stable(range(12, 17, 2), 6, after)]  # type: ignore[arg-type]
    events = [rc.record(g, 0.5, 4, [rc.member("m1", parts=(0,)), rc.member("m2", parts=(1,))]),
              rc.record(g, 11.0, 5, [rc.member("m1", parts=(0, 1))]),
              rc.record(g, 11.5, 6, [rc.member("m1", parts=(0,)), rc.member("m3", parts=(1,))])]
    commits = [*rc.regular((0, 1), 10), (0, 10.6), (1, 10.6), (0, 11.3), *rc.regular((0, 1), 16)[12:]]
    return Step(members=members_rows(sweeps, group=g),
                offsets=rc.offsets(g, 16, {0: [(0, "m1")], 1: [(0, "m2"), (12, "m3")]}),
                events=events, commits=rc.commits(g, commits))


def test_two_generations_between_two_sweeps_are_two_windows_each_its_own() -> None:
    # 4 → 5 from the records alone (m2 left: the survivor m1's revocation commit at 10.6 → 11.0)
    # and the sweep window ending at generation 6's record, starting at generation 5's: m3
    # joined into {m1} (not {m1, m2} → {m1, m3}), m1's revocation commit at 11.3 → 11.5
    got = groups.group_pass(inputs(_two_step()), S).rebalances.to_pylist()
    assert [(r["cause"], r["start_ts"], r["end_ts"], r["generation_before"], r["generation_after"],
             r["members_before"], r["members_after"], r["partitions_moved"]) for r in got] == [
        ("leave", at(10.6), at(11.0), 4, 5, ["m1", "m2"], ["m1"], 1),
        ("join", at(11.3), at(11.5), 5, 6, ["m1"], ["m1", "m3"], 1)]


def test_a_window_ends_at_the_record_of_the_generation_its_b_saw() -> None:
    # B (the sweep at 12) saw generation 2 = {m1} (11.0); the same member rejoined after it
    # (generation 3 = {m1} at 12.5, before the sweep at 14): the window 1 → 2 ends at 11.0, and
    # 2 → 3 is a window of its own (from the records alone), not the other way round
    g = "rejoin"
    sweeps = [*rc.stable(range(0, 11, 2), 1, rc.SPLIT), *rc.stable(range(12, 17, 2), None, rc.BOTH)]  # type: ignore[arg-type]
    events = [rc.record(g, 0.5, 1, [rc.member("m1", parts=(0,)), rc.member("m2", parts=(1,))]),
              rc.record(g, 11.0, 2, [rc.member("m1", parts=(0, 1))]),
              rc.record(g, 12.5, 3, [rc.member("m1", parts=(0, 1))])]
    commits = [*rc.regular((0, 1), 10), (0, 10.6), *[(p, float(t)) for t in range(12, 17, 2) for p in (0, 1)]]
    step = Step(members=members_rows(sweeps, group=g),
                offsets=rc.offsets(g, 16, {0: [(0, "m1")], 1: [(0, "m2"), (12, "m1")]}),
                events=events, commits=rc.commits(g, commits))
    got = groups.group_pass(inputs(step), S).rebalances.to_pylist()
    assert [(r["end_ts"], r["generation_before"], r["generation_after"]) for r in got] == [
        (at(11.0), 1, 2), (at(12.5), 2, 3)]


def test_commits_while_empty_are_nobodys() -> None:
    # the operator's commit at 13.0 (the group's latest record before it is the Empty one) is
    # dropped; a member's commit 0.02 s before the Empty record is kept, and so is a commit
    # after a member's generation record
    inp = inputs(_restart_step())
    gens = groups.generation_records(inp.group_events)
    empty = groups.empty_records(inp.group_events)
    keys = pa.array(["c\x1frestart"])
    times = groups._commit_times(inp.commits, keys, pa.array([0]).to_numpy())
    kept = groups._member_commits(times, gens, empty, keys)
    assert sorted(set(times.t.tolist()) - set(kept.t.tolist())) == [at(13.0).timestamp()]
    assert {at(10.5).timestamp(), at(15.5).timestamp()} <= set(kept.t.tolist())
    joined = groups.generation_records(inputs(Step(members=[], offsets=[], events=[
        *inp.group_events.to_pylist(), rc.record("restart", 12.5, 9, [rc.member("m9", parts=(0,))])])).group_events)
    assert len(groups._member_commits(times, joined, empty, keys).t) == len(times.t)


def _hung_step(*, stuck_p1_from: float | None = None) -> Step:
    """m1 (session 8 s in the records) rejoins at 11.0 (generation 2, the sweeps see it settled
    to 18) and then does nothing more: no commit, no heartbeat; the broker expires it at 19.0
    (the Empty record, generation 3). The group stays Empty (sweeps 20 … 34) until m2 joins
    (generation 4 at 35.0, 5 at 35.3: the sweeps from 36 see 5; m2 commits from 36). With
    ``stuck_p1_from`` m1 instead keeps committing partition 0 every 2 s to 18 (alive) but
    partition 1 only to that time, and leaves at 18.5 (the Empty record at 18.52); the input
    anomaly is a stop on partition 1 from a second after its last commit to m2's first."""
    g = "hung"
    sweeps = [*rc.stable(range(0, 11, 2), 1, [("m1", None, [0, 1])]),  # type: ignore[arg-type]
              *rc.stable(range(12, 19, 2), 2, [("m1", None, [0, 1])]),  # type: ignore[arg-type]
              *[(t, "Empty", None, []) for t in range(20, 35, 2)],
              *rc.stable(range(36, 41, 2), 5, [("m2", None, [0, 1])])]  # type: ignore[arg-type]
    gone = 19.0 if stuck_p1_from is None else 18.52
    events = [rc.record(g, 0.5, 1, [rc.member("m1", parts=(0, 1))]),
              rc.record(g, 11.0, 2, [rc.member("m1", parts=(0, 1))]), rc.record(g, gone, 3, []),
              rc.record(g, 35.0, 4, [rc.member("m2", parts=(0, 1))]),
              rc.record(g, 35.3, 5, [rc.member("m2", parts=(0, 1))])]
    last = {0: 10.0, 1: 10.0} if stuck_p1_from is None else {0: 18.0, 1: stuck_p1_from}
    mine = [(p, float(t)) for t in range(0, 19, 2) for p in (0, 1) if t <= last[p]]
    commits = sorted([*mine, *[(p, float(t)) for t in range(36, 41, 2) for p in (0, 1)]], key=lambda c: c[1])
    offsets = []
    for p in (0, 1):
        series = []
        for t in range(0, 41, 2):
            owner = "m1" if t < 20 else None if t < 36 else "m2"
            committed = 5 * t if t >= 36 else 5 * min(t, int(last[p]))
            series.append((t, committed, 5 * t, 0, owner))
        offsets += offsets_rows(series, group=g, partition=p)
    anomalies = [] if stuck_p1_from is None else [anomaly(g, "stop", stuck_p1_from + 1, 36.0, 35.0 - stuck_p1_from)]
    return Step(members=members_rows(sorted(sweeps), group=g), offsets=offsets, events=events,
                commits=rc.commits(g, commits), anomalies=anomalies)


def test_a_window_through_empty_starts_before_the_group_was_empty() -> None:
    # the records window 2 → 4 (m1 gone, m2 new; generation 3 is the Empty record) has no commit
    # to go by: it starts in the middle of generation 2's record (11.0) and the first sight of
    # the group Empty (the record at 19.0), not of the two records (23.0, four seconds after the
    # broker had recorded the group Empty); m1 silent from its commit at 10 to its removal at 19
    # (9 s ≥ session 8 − heartbeat 1 − network 1) was a session timeout, its outage from 10
    got = groups.group_pass(inputs(_hung_step()), S).rebalances.to_pylist()
    assert [(r["cause"], r["start_ts"], r["end_ts"], r["generation_before"], r["generation_after"])
            for r in got] == [("unknown", at(10.0), at(11.0), 1, 2), ("session_timeout", at(15.0), at(35.0), 2, 4),
                              ("unknown", at(35.15), at(35.3), 4, 5)]


def test_a_stop_short_of_its_threshold_when_the_outage_began_is_the_rebalances() -> None:
    # m1 left at 18.5 (a leave: partition 0 committed at 18), partition 1 stuck from its commit
    # at 10 or 8; the group stays Empty 20 … 34. The leave's outage begins at 14.76, the middle
    # of generation 2's record (11.0) and the Empty record (18.52) (the commits date the window
    # from 18.0; a leave's outage is where the change can have begun). With the thresholds at
    # 5 s, the stop from 11 had lasted 3.76 s then: the rebalance's, not a finding; the stop
    # from 9 had lasted 5.76 s (a stop already): reported (starved: m1 committed partition 0
    # meanwhile). Before 2026-12-03 both were (the
    # outage owned what began from its start − 1 s only, and began at 23.0, after the group had
    # been recorded Empty)
    settings = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30,
                               rules=AnalyticsRulesConfig(stall_after_s=5, stop_after_s=5))
    for stuck, kept in ((10.0, []), (8.0, [("starved", at(9.0))])):
        out = groups.group_pass(inputs(_hung_step(stuck_p1_from=stuck)), settings)
        assert [(r["cause"], r["start_ts"]) for r in out.rebalances.to_pylist()][1] == ("leave", at(18.0))
        stops = [(a["kind"], a["start_ts"]) for a in out.anomalies.to_pylist() if a["kind"] in groups.OUTAGE_KINDS]
        assert stops == kept, stuck


def test_outages_own_what_was_no_stall_or_stop_yet() -> None:
    # the rule itself: an outage from 16 to 36; with idle_after_s 5, a stall or stop that began
    # after 11 and ended by 37 is the outage's, one from 10.5 is not, a commit gap keeps the 1 s
    # (its own threshold is learned per partition), and without idle_after_s only from 15 on
    outages = pa.table({"cluster": ["c"], "group_id": ["o"], "q0_us": [int(at(16).timestamp() * 1e6)],
                        "q1_us": [int(at(36).timestamp() * 1e6)]}, schema=groups.OUTAGE_SCHEMA)
    rows = [anomaly("o", "stop", 13.0, 36.0, 23.0, partition=0), anomaly("o", "stall", 11.5, 36.5, 25.0, partition=1),
            anomaly("o", "stop", 10.5, 36.0, 25.5, partition=2),
            anomaly("o", "commit_gap", 13.0, 20.0, 7.0, partition=3),
            anomaly("o", "stop", 13.0, 40.0, 27.0, partition=4), anomaly("o", "stall", 15.5, 30.0, 14.5, partition=5)]
    table = pa.Table.from_pylist(rows, schema=ANOMALY_SCHEMA)

    def kept(idle: float) -> list[int]:
        return sorted(r["partition"] for r in groups.drop_rebalance_outages(table, outages, idle).to_pylist())

    assert kept(5.0) == [2, 3, 4]
    assert kept(0.0) == [0, 1, 2, 3, 4]


@pytest.mark.spark
def _missing_record_step(*, missing: bool = True) -> Step:
    """m1 alone (generation 1, its record at 0.5) to the sweep at 10; m2 replaces it (generation
    2 at 11.0, settled at the sweeps 12 … 16), then m3 (generation 3 at 17.0, 4 at 17.3: the same
    member twice; the sweeps from 18 see it). The sweeps carry no generation. With ``missing``
    generation 2's record is not in the lake (the tail was down while it was written)."""
    g = "missing"
    sweeps = [*rc.stable(range(0, 11, 2), None, [("m1", None, [0, 1])]),  # type: ignore[arg-type]
              *rc.stable(range(12, 17, 2), None, [("m2", None, [0, 1])]),  # type: ignore[arg-type]
              *rc.stable(range(18, 23, 2), None, [("m3", None, [0, 1])])]  # type: ignore[arg-type]
    events = [rc.record(g, 0.5, 1, [rc.member("m1", parts=(0, 1))]),
              *([] if missing else [rc.record(g, 11.0, 2, [rc.member("m2", parts=(0, 1))])]),
              rc.record(g, 17.0, 3, [rc.member("m3", parts=(0, 1))]),
              rc.record(g, 17.3, 4, [rc.member("m3", parts=(0, 1))])]
    commits = [(p, float(t)) for t in range(0, 23, 2) for p in (0, 1)]
    owner: dict[int, list[tuple[int, str | None]]] = {p: [(0, "m1"), (12, "m2"), (18, "m3")] for p in (0, 1)}
    return Step(members=members_rows(sweeps, group=g), offsets=rc.offsets(g, 22, owner), events=events,
                commits=rc.commits(g, commits))


def test_no_window_spans_a_generation_whose_record_is_missing() -> None:
    # generation 2 has no record: the records 1 (m1) and 3 (m3) are no window of their own (it
    # would say m1 was replaced by m3 from 0.5 to 17.0, though the sweeps saw m2 settled from 12
    # to 16): the sweep windows have the changes, m1 → m2 and m2 → m3 (to generation 4's record,
    # the latest of m3's at or before its B: 3 → 4 is inside it)
    got = [(r[5], r[6]) for r in _rows(groups.group_pass(inputs(_missing_record_step()), S))]
    assert got == [(["m1"], ["m2"]), (["m2"], ["m3"])]
    # with every record, each generation change is a window: 1 → 2, 2 → 3 and 3 → 4
    full = _rows(groups.group_pass(inputs(_missing_record_step(missing=False)), S))
    assert [(r[3], r[4], r[5], r[6]) for r in full] == [
        (1, 2, ["m1"], ["m2"]), (2, 3, ["m2"], ["m3"]), (3, 4, ["m3"], ["m3"])]


def test_the_cases_equal_the_spark_statement(spark: SparkSession) -> None:
    steps = [_restart_step(), _restart_step(gens=(3,)), _restart_step(empty_record=False),
             _restart_step(empty_sweeps=False), _two_step(), _hung_step(), _missing_record_step(),
             _missing_record_step(missing=False)]
    for step in steps:
        inp = inputs(step)
        compare(groups.group_pass(inp, S), reference(spark, inp, S))
    # the outage's ownership of a stop short of its threshold, with the thresholds at 5 s
    settings = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30,
                               rules=AnalyticsRulesConfig(stall_after_s=5, stop_after_s=5))
    for stuck in (10.0, 8.0):
        inp = inputs(_hung_step(stuck_p1_from=stuck))
        compare(groups.group_pass(inp, settings), reference(spark, inp, settings))
