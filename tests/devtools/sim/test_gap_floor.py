"""Commit-gap faults against the rule's floor (lagscope.devtools.sim.score.gap_verdicts and what
the scorer expects from them), and the commit-gap size sweep scenario. Pure Python."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from helpers.benchmarks import load_benchmark

from lagscope.analytics import np_gaps
from lagscope.config import AnalyticsRulesConfig
from lagscope.devtools.sim import truth
from lagscope.devtools.sim.runner import load_scenario
from lagscope.devtools.sim.score import (
    GAP_ABOVE,
    GAP_BELOW,
    GAP_STALL,
    GAP_UNLEARNED,
    Finding,
    expected_findings,
    gap_faults,
    gap_verdicts,
    partition_gaps,
    real_events,
    score_run,
    stated_gap_floor,
)
from lagscope.devtools.sim.truth import Commit, EndState, Fault, GroupOffset, PartitionEnd, Produce

#: the accuracy benchmark's commit-gap settings (benchmarks/analytics_accuracy.py, bench_rules)
RULES = AnalyticsRulesConfig(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0, gap_mad_floor_s=0.2, gap_k=4)
T, G = "topic", "group"
#: the pauses: (start, the first commit after it) on partition 0
PAUSES = ((110.1, 111.1), (115.1, 117.1), (120.1, 125.1))


def _truth(pauses: tuple[tuple[float, float], ...] = PAUSES, *, jitter: float = 0.0) -> truth.TruthIndex:
    """c1 commits partition 0 every 0.5 s from 100 to 130 (``jitter``: every other commit that
    much later) but within each pause, and once at its end; 10 messages a second, so there is
    always work pending; one ``commit_gap`` fault per pause."""
    times = [100.0 + 0.5 * n + (jitter if n % 2 else 0.0) for n in range(61)]
    times = [t for t in times if not any(a - 0.1 < t < b for a, b in pauses)] + [b for _, b in pauses]
    commits = [Commit(G, "c1", T, 0, max(0, int((t - 100.0) * 10) - 3), t) for t in sorted(times)]
    recs: list[truth.Record] = [
        truth.RunInfo("s", 1, "r", 100.0),
        *[Produce(T, 0, o, 100.0 + o / 10) for o in range(310)],
        *commits,
        *[Fault("commit_gap", G, "c1", a, b - 0.05, {}, ((T, 0),)) for a, b in pauses],
        EndState(131.0, (PartitionEnd(T, 0, 0, 310, 310),), (GroupOffset(G, T, 0, commits[-1].offset),)),
    ]
    recs.sort(key=truth.record_ts)
    return truth.TruthIndex(recs)


def test_each_pause_is_judged_against_the_floor_the_rule_states_for_its_partition() -> None:
    ti = _truth()
    vs = [v for f in ti.faults("commit_gap") for v in gap_verdicts(ti, f, RULES)]
    # the normal cadence is 0.5 s with no spread: the floor is 0.5 + 4 × 0.2 = 1.3 s; the gaps are
    # from the last commit before the pause (110.0, 115.0, 120.0) to the first after it
    assert [round(v.gap_s or 0, 3) for v in vs] == [1.1, 2.1, 5.1]
    assert [v.median_s for v in vs] == [0.5] * 3
    assert [v.floor_s for v in vs] == pytest.approx([1.3] * 3)
    assert [v.verdict for v in vs] == [GAP_BELOW, GAP_ABOVE, GAP_STALL]
    assert vs[0].margin_s == pytest.approx(-0.2)
    # a stricter rule puts the 2.1-s gap at its floor (0.5 + 8 × 0.2): normal, not above it
    strict = RULES.model_copy(update={"gap_k": 8.0})
    assert [v.verdict for f in ti.faults("commit_gap") for v in gap_verdicts(ti, f, strict)] == [
        GAP_BELOW, GAP_BELOW, GAP_STALL]
    # and gap_min_s is a floor of its own
    high_min = RULES.model_copy(update={"gap_min_s": 2.5})
    assert gap_verdicts(ti, ti.faults("commit_gap")[1], high_min)[0].verdict == GAP_BELOW


def test_the_floor_is_the_rules_threshold_on_the_same_gaps() -> None:
    # every other commit 0.15 s late: the gaps alternate 0.65 / 0.35 s, a spread beyond the MAD floor
    ti = _truth(jitter=0.15)
    gaps = partition_gaps(ti, G, T, 0)
    every = np_gaps.Gaps(np.zeros(len(gaps), np.int64), np.array([t for t, _ in gaps]), np.array([g for _, g in gaps]))
    base = np_gaps.gap_baselines(every, None, 1)
    verdicts = [gap_verdicts(ti, f, RULES)[0] for f in ti.faults("commit_gap")]
    v = verdicts[1]
    assert (v.median_s, v.mad_s, v.samples) == pytest.approx((base.gap_median_s[0], base.gap_mad_s[0], base.gap_n[0]))
    assert 1.4826 * v.mad_s > RULES.gap_mad_floor_s
    assert v.floor_s == pytest.approx(v.median_s + RULES.gap_k * 1.4826 * v.mad_s)
    assert v.floor_s > 1.3  # what the same cadence without the spread gives (the first test)
    # the analytics' own rule on those gaps reports exactly the ones the verdicts put above the floor
    found = np_gaps.gap_anomalies(every, base, k=RULES.gap_k, mad_floor_s=RULES.gap_mad_floor_s,
                                  min_gap_s=RULES.gap_min_s, min_samples=RULES.gap_min_samples, max_gap_s=5.0)
    assert [v.verdict for v in verdicts] == [GAP_BELOW, GAP_ABOVE, GAP_STALL]
    assert sorted(round(float(g), 6) for g in found.magnitude) == [
        round(v.gap_s or 0, 6) for v in verdicts if v.verdict == GAP_ABOVE]


def test_a_gap_below_the_floor_is_counted_apart() -> None:
    ti = _truth()
    below, above, stall = ti.faults("commit_gap")
    # the truth calls for the ones the rule can report (a stall-sized one as before: commit_gap)
    assert [e.fault for e in expected_findings(ti, RULES) if e.kind == "commit_gap"] == [above, stall]
    assert [e.fault for e in real_events(ti, rules=RULES) if e.kind == "commit_gap"] == [below]
    # a finding on the one below the floor is neither true nor false; the one above, found
    on_below = Finding("commit_gap", G, T, 0, 110.0, 111.1, "warning")
    on_above = Finding("commit_gap", G, T, 0, 115.0, 117.1, "warning", magnitude=2.1)
    s = score_run(expected_findings(ti, RULES), [on_below, on_above], tolerance_s=2.0,
                  real=real_events(ti, rules=RULES))
    assert (s.matched, s.unmatched, s.informational) == ([on_above], [], [on_below])
    got = {g.fault.start: g for g in gap_faults(ti, RULES, s, tolerance_s=2.0)}
    assert (got[below.start].verdict, got[below.start].found) == (GAP_BELOW, True)
    assert (got[above.start].verdict, got[above.start].found, got[above.start].delay) == (GAP_ABOVE, True, 0.0)
    assert (got[above.start].measured_s, got[below.start].measured_s) == (2.1, None)
    assert (got[stall.start].verdict, got[stall.start].found) == (GAP_STALL, False)
    # within a wide tolerance the finding of the one above also matches the one below, but it
    # belongs to the nearest: the one below is not found by it
    s = score_run(expected_findings(ti, RULES), [on_above], tolerance_s=5.0, real=real_events(ti, rules=RULES))
    got = {g.fault.start: g for g in gap_faults(ti, RULES, s, tolerance_s=5.0)}
    assert (got[below.start].found, got[above.start].found) == (False, True)
    # nothing found: the one above is missed, the one below is not found either (and not expected)
    s = score_run(expected_findings(ti, RULES), [], tolerance_s=2.0, real=real_events(ti, rules=RULES))
    assert [m.expected.fault for m in s.matches if m.expected.kind == "commit_gap" and m.finding is None] == [
        above, stall]
    assert not any(g.found for g in gap_faults(ti, RULES, s, tolerance_s=2.0))


def test_a_gap_before_any_normal_or_without_a_commit_before_it() -> None:
    ti = _truth(((101.1, 102.1), (115.1, 117.1)))
    early = ti.faults("commit_gap")[0]
    (v,) = gap_verdicts(ti, early, RULES)
    assert v.verdict == GAP_UNLEARNED  # 2 gaps before it: fewer than gap_min_samples (5)
    # the open gap at the end: no commit after the pause, the gap runs to where the normal ends
    open_ = Fault("commit_gap", G, "c1", 130.6, 131.0, {}, ((T, 0),))
    (v,) = gap_verdicts(ti, open_, RULES, until=133.0)
    assert v.open
    assert v.gap_s == pytest.approx(133.0 - 130.0)  # the last commit, at 130 s
    # a partition the group never committed: no gap known
    other = Fault("commit_gap", G, "c1", 115.1, 117.0, {}, ((T, 1),))
    (v,) = gap_verdicts(ti, other, RULES)
    assert (v.gap_s, v.verdict, math.isnan(v.floor_s)) == (None, GAP_UNLEARNED, True)


def test_the_stated_floor_of_a_cadence() -> None:
    assert stated_gap_floor(RULES, 0.5) == pytest.approx(1.3)
    assert stated_gap_floor(RULES, 0.25) == pytest.approx(1.05)
    assert stated_gap_floor(RULES, 0.1) == pytest.approx(1.0)  # gap_min_s
    assert stated_gap_floor(AnalyticsRulesConfig(), 5.0) == pytest.approx(11.0)  # the defaults: 5 + 6 × 1


def test_the_sweep_pauses_are_the_stated_multiples_and_stay_commit_gaps() -> None:
    load_benchmark("rebalance_accuracy")  # analytics_accuracy imports it by name
    rules = load_benchmark("analytics_accuracy").bench_rules()
    sc = load_scenario("commit-gaps-sweep")
    (group,) = sc.groups
    (member,) = group.members
    cadence = member.auto_commit_interval_ms / 1000
    floor = stated_gap_floor(rules, cadence)
    pauses = [(a.at, a.duration or 0.0) for a in member.actions if a.kind == "commit_gap"]
    assert sorted(round(d / floor, 6) for _, d in pauses) == [0.5] * 3 + [1.0] * 3 + [2.0] * 3 + [4.0] * 3
    # a pause's gap is at most the pause + one commit interval + a poll (0.1 s): under the stall rule
    assert max(d for _, d in pauses) + cadence + 0.1 < min(rules.stall_after_s, rules.stop_after_s)
    # the smallest pause's gap is at most its pause + cadence + a poll: below gap_min_s whatever the normal
    assert min(d for _, d in pauses) + cadence + 0.1 < rules.gap_min_s
    # apart from each other by more than the scorer's tolerance (2 sweep intervals of 0.5 s + 1 s),
    # the last well before the end (the step cuts the lake there)
    ends = sorted((a, a + d) for a, d in pauses)
    assert all(b[0] - a[1] > 2 * 0.5 + 1 - 0.05 for a, b in itertools.pairwise(ends))
    assert sc.duration - ends[-1][1] >= 2.0
