"""Commit gaps from sweeps alone judged across the partition's owner (lagscope.analytics.groups
.judge_gaps, through a whole step as each Spark task runs it: lagscope.analytics.step.run_step over
Arrow, no Spark): hand-computed cases, each with why it expects what it expects.

Sweeps every second over 0–120 s, every partition with a backlog of about 100,000 throughout (work
is always pending). Rules: stall_after_s = stop_after_s = 60 s (gaps shorter than that are commit
gaps, not stalls), gap_min_s = 5 s, at least 5 learned gaps, gap_k = 6 and a MAD floor of 1 s, so
a partition that changed every 2 s (median 2 s, MAD 0) has a threshold of 2 + 6 × 1 = 8 s.

In each case partition 1 changes every 2 s up to 60 s and then stands still until 75 s: a gap of
15 s (from its last change at 60 s to its change at 75 s), beyond its normal.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from analytics_builders import at, members_rows, offsets_rows

from lagscope.analytics import step
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.schema import TABLES

S = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=60, stop_after_s=60, gap_min_s=5, gap_min_samples=5,
                                               gap_k=6, gap_mad_floor_s=1))
T = range(0, 121)
END = 100_000


def lake(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema).select(step.READ_COLUMNS[name])


def commits_lake(rows: list[tuple[float, int, int]], group: str) -> pa.Table:
    """Commit records from ``(t, partition, offset)``, each its own request."""
    recs = [{"cluster": "c", "date": at(t).date().isoformat(), "record_ts": at(t), "commit_ts": at(t),
             "group_id": group, "topic": "t", "partition": p, "committed_offset": off, "source_partition": 0,
             "source_offset": i, "value_version": 3} for i, (t, p, off) in enumerate(rows)]
    return lake("commits", recs)


def p1_steps(t: float) -> int:
    """Partition 1: +10 every 2 s up to 60 s, unchanged in (60, 75), then +10 every 2 s again."""
    if t <= 60:
        return 10 * (int(t) // 2)
    if t < 75:
        return 300
    return 300 + 10 * (1 + (int(t) - 75) // 2)


def steady(t: float) -> int:
    """A partition served every second: +10 a second."""
    return 10 * int(t)


def hung(t: float) -> int:
    """Like ``steady``, unchanged in (60, 75) (its member stopped committing anything)."""
    return 10 * int(min(t, 60)) + (10 * int(t - 74) if t >= 75 else 0)


def early(t: float) -> int:
    """Like ``steady`` up to 70 s, unchanged in (70, 75)."""
    return 10 * int(t) if t <= 70 else (700 if t < 75 else 700 + 10 * (int(t) - 74))


def run(group: str, p0: Any, owners: dict[int, str], commits: pa.Table | None = None,
        split: float | None = None) -> list[tuple[Any, ...]]:
    """The step's commit gaps (partition, start, end); ``split``: as two steps, the sweeps up to
    ``split`` and those after it, the second from the first's state (both steps' gaps)."""
    offsets = (offsets_rows([(t, p0(t), END) for t in T], group=group, partition=0, owner=owners[0])
               + offsets_rows([(t, p1_steps(t), END) for t in T], group=group, partition=1, owner=owners[1]))
    assignment: dict[str, list[int]] = {}
    for p, m in owners.items():
        assignment.setdefault(m, []).append(p)
    members = members_rows([(t, "Stable", 1, [(m, None, ps) for m, ps in assignment.items()]) for t in T],
                           group=group)
    return gaps(offsets, members, commits, split)


def gaps(offsets: list[dict[str, Any]], members: list[dict[str, Any]], commits: pa.Table | None = None,
         split: float | None = None) -> list[tuple[Any, ...]]:
    """The commit gaps (partition, start, end) of one step over the sweeps, or (``split``) of two
    steps, the sweeps up to ``split`` and those after it, the second from the first's state."""
    cuts = [(-1.0, 120.0)] if split is None else [(-1.0, split), (split, 120.0)]
    state: dict[str, pa.Table] = {}
    found = []
    for lo, hi in cuts:
        def part(rows: list[dict[str, Any]], lo: float = lo, hi: float = hi) -> list[dict[str, Any]]:
            return [r for r in rows if at(lo) < r["sweep_ts"] <= at(hi)]

        out = step.run_step(step.StepInputs(offsets=lake("offsets", part(offsets)),
                                            members=lake("members", part(members)), commits=commits,
                                            group_events=None, state=state),
                            settings=S, as_of=at(hi))
        state = out.state
        found += [(r["partition"], r["start_ts"], r["end_ts"]) for r in out.tables["anomalies"].to_pylist()
                  if r["kind"] == "commit_gap"]
    return sorted(found)


def test_a_partition_its_owner_served_later_while_advancing_another_has_no_commit_gap() -> None:
    # m1 owns both and advances partition 0 every second while partition 1 waits: every commit
    # request of m1 carried partition 1's unchanged position, so sweeps' 15-s gap between changes
    # is no gap in its commits
    assert run("uneven", steady, {0: "m1", 1: "m1"}) == []


def test_a_member_that_stopped_committing_everything_keeps_its_gaps() -> None:
    # m1 stops on both partitions in (60, 75): no progress of its own inside either gap, so both
    # stay (partition 0: 60 → 75; partition 1: 60 → 75)
    assert run("hung", hung, {0: "m1", 1: "m1"}) == [(0, at(60), at(75)), (1, at(60), at(75))]


def test_the_owners_progress_in_an_earlier_step_counts_as_in_one_pass() -> None:
    # m1 advances partition 0 up to 70 s only; the first step ends at 70 s, the second sees
    # partition 1's gap close at 75 s and its owner's progress inside it only through the carried
    # state (partition 0's last change, at 70 s): dropped, as one pass over 0–120 s drops it
    # (partition 0's own 70 → 75 s is within its threshold of 1 + 6 s)
    assert run("early", early, {0: "m1", 1: "m1"}) == []
    assert run("early", early, {0: "m1", 1: "m1"}, split=70) == []
    # the same cut with the member hung on both: the gaps stay, in the second step
    assert run("hung", hung, {0: "m1", 1: "m1"}, split=70) == [(0, at(60), at(75)), (1, at(60), at(75))]


def test_another_members_progress_is_no_evidence_for_the_partition() -> None:
    # m2 advances partition 0; m1, partition 1's owner, shows nothing inside its gap: it stays
    assert run("two", steady, {0: "m2", 1: "m1"}) == [(1, at(60), at(75))]


def test_with_the_commit_stream_a_partition_left_out_of_its_owners_commits_keeps_its_gap() -> None:
    # the stream shows the commits themselves: m1 commits partition 0 every second but partition 1
    # (commitSync(offsets) of chosen partitions) only when it changes, so its 15-s gap is real
    # although its owner advanced partition 0 meanwhile
    recs = [(t - 0.5, 0, steady(t)) for t in T if t > 0]
    recs += [(t - 0.5, 1, p1_steps(t)) for t in T if t > 0 and p1_steps(t) != p1_steps(t - 1)]
    got = run("chosen", steady, {0: "m1", 1: "m1"}, commits=commits_lake(sorted(recs), "chosen"))
    assert got == [(1, at(59.5), at(74.5))]


def test_a_change_seen_while_nobody_owned_the_partition_serves_no_gap_across_steps() -> None:
    # partition 0 has no owner until 68 s; its committed offset changes at 65 s (another consumer's
    # last commit, read while unowned), then m1 takes it over and never changes it. Inside
    # partition 1's gap (60 → 75 s) m1 made no progress of its own: the gap stays, in one pass and
    # in steps cut after the takeover, where the carried row names m1 its owner (the change's own
    # owner was none: it is nobody's progress)
    def p0(t: float) -> int:
        return 0 if t < 65 else 500

    def owner0(t: float) -> str | None:
        return None if t < 68 else "m1"

    offsets = [r for t in T for r in offsets_rows([(t, p0(t), END, 0, owner0(t))], group="g", partition=0)]
    offsets += offsets_rows([(t, p1_steps(t), END) for t in T], group="g", partition=1, owner="m1")
    members = members_rows([(t, "Stable", 1 if t < 68 else 2, [("m1", None, [1] if t < 68 else [0, 1])]) for t in T],
                           group="g")

    one = gaps(offsets, members)
    assert one == [(1, at(60), at(75))]
    for cut in (68.5, 70.0, 72.0):
        assert gaps(offsets, members, split=cut) == one, cut
