"""A rebalance window's processing gap completed by a later step (groups.complete_pending): the
state part ``pending_gaps`` carries a published window whose partitions had a commit at or before
its start and none after it yet; a later step's first commit after both the exact start and that
commit raises the gap, and the window's row is published again with it. The random lakes'
minute steps against one pass are in test_step_withdraw.py; these are the rule's edges."""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa

from lagscope.analytics import groups

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC).timestamp()
GROUPS = pa.array(["c\x1fg", "c\x1fother"])


def _pending(start_s: float, end_s: float, tps: list[str], lbs: list[float], gap: float | None = None,
             group_id: str = "g") -> pa.Table:
    row: dict[str, Any] = dict.fromkeys(groups.PENDING_GAP_SCHEMA.names)
    row.update(cluster="c", group_id=group_id, start_ts=dt.datetime.fromtimestamp(start_s, dt.UTC),
               end_ts=dt.datetime.fromtimestamp(end_s, dt.UTC), cause="join", source="sweeps",
               max_processing_gap_s=gap, start_s=start_s, end_s=end_s, pending_tp=tps, pending_lb=lbs)
    return pa.Table.from_pylist([row], schema=groups.PENDING_GAP_SCHEMA)


def _times(rows: list[tuple[int, str, int, float]]) -> groups._Times:
    g, topic, part, t = zip(*rows, strict=True)
    return groups._Times.of(np.array(g, np.int64), pa.array(topic, pa.string()), pa.array(part, pa.int32()),
                            np.array(t, np.float64))


def test_a_pending_gap_compares_with_the_exact_start() -> None:
    # the window starts 0.4 ms into its millisecond; the partition's last commit before it, 0.2 ms
    # in, is read again by the next step (the commit stream's look-back): it is no first commit
    # after the start (a gap of 0), the commit at +10 s is
    start = T0 + 10.0004
    carried = _pending(start, T0 + 12, ["t/0"], [T0 + 10.0002])
    regapped, still = groups.complete_pending(carried, _times([(0, "t", 0, T0 + 10.0002), (0, "t", 0, T0 + 20)]),
                                              GROUPS, until=T0 + 60)
    assert regapped.num_rows == 1
    assert still.num_rows == 0
    assert regapped.schema == groups.REBALANCE_SCHEMA
    assert abs(regapped.column("max_processing_gap_s")[0].as_py() - 9.9998) < 1e-6


def test_a_gap_only_rises_and_waits_for_every_partition() -> None:
    # two partitions wait; this step completes one with a smaller gap than the window already has
    # (not published again) and the other waits on, with the gap so far
    carried = _pending(T0 + 10, T0 + 20, ["t/0", "t/1"], [T0 + 9, T0 + 8], gap=30.0)
    regapped, still = groups.complete_pending(carried, _times([(0, "t", 0, T0 + 14), (0, "u", 1, T0 + 15)]),
                                              GROUPS, until=T0 + 60)
    assert regapped.num_rows == 0
    assert still.column("pending_tp").to_pylist() == [["t/1"]]
    assert still.column("pending_lb").to_pylist() == [[T0 + 8]]
    assert still.column("max_processing_gap_s").to_pylist() == [30.0]
    # the next step completes it: 50 s after its last commit, more than the 30 s
    regapped, still = groups.complete_pending(still, _times([(0, "t", 1, T0 + 58)]), GROUPS, until=T0 + 120)
    assert regapped.column("max_processing_gap_s").to_pylist() == [50.0]
    assert still.num_rows == 0


def test_a_first_commit_past_the_look_around_is_none_and_the_wait_expires() -> None:
    carried = _pending(T0 + 10, T0 + 20, ["t/0"], [T0 + 9])
    late = _times([(0, "t", 0, T0 + 20 + groups.LOOKAROUND_S + 1)])
    regapped, still = groups.complete_pending(carried, late, GROUPS, until=T0 + 20 + groups.LOOKAROUND_S - 1)
    assert regapped.num_rows == 0
    assert still.num_rows == 1
    regapped, still = groups.complete_pending(still, late, GROUPS, until=T0 + 20 + groups.LOOKAROUND_S + 2)
    assert regapped.num_rows == 0
    assert still.num_rows == 0


def test_another_groups_times_complete_nothing() -> None:
    # the same partition name in another group, and a group the step does not read at all
    carried = pa.concat_tables([_pending(T0 + 10, T0 + 20, ["t/0"], [T0 + 9]),
                                _pending(T0 + 10, T0 + 20, ["t/0"], [T0 + 9], group_id="absent")])
    regapped, still = groups.complete_pending(carried, _times([(1, "t", 0, T0 + 30)]), GROUPS, until=T0 + 60)
    assert regapped.num_rows == 0
    assert still.column("group_id").to_pylist() == ["g", "absent"]


def test_a_state_part_without_the_exact_times_reads_them_from_the_timestamps() -> None:
    # a pending_gaps part written without start_s and end_s (a column a later version added is
    # null): the window's start_ts and end_ts serve
    carried = _pending(T0 + 10, T0 + 20, ["t/0"], [T0 + 9]).drop_columns(["start_s", "end_s"])
    regapped, still = groups.complete_pending(carried, _times([(0, "t", 0, T0 + 10), (0, "t", 0, T0 + 13)]),
                                              GROUPS, until=T0 + 60)
    assert regapped.column("max_processing_gap_s").to_pylist() == [4.0]
    assert still.num_rows == 0


def _sweeps(rows: list[tuple[int, float, bool]]) -> groups._Sweeps:
    g, t, settled = zip(*rows, strict=True)
    return groups._Sweeps(ms=pa.table({"t": pa.array(t)}), g=np.array(g, np.int64), groups=GROUPS,
                          t=np.array(t, np.float64), settled=np.array(settled, bool))


def test_the_bound_is_the_earliest_carried_settled_sweep() -> None:
    # g settled at 100 and rebalancing since (carried: 100, 102, 104); "other" never settled: no
    # later window can start before a settled sweep to come, so it carries nothing (+inf)
    sw = _sweeps([(0, T0 + 100, True), (0, T0 + 102, False), (0, T0 + 104, False),
                  (1, T0 + 100, False), (1, T0 + 102, False)])
    keep = np.ones(5, bool)
    bound = groups.gap_bounds(sw, keep, None, until=T0 + 120, horizon_s=3600)
    assert bound.tolist() == [T0 + 100, np.inf]
    # within the horizon only
    assert groups.gap_bounds(sw, keep, None, until=T0 + 160, horizon_s=30).tolist() == [T0 + 130, np.inf]
    # with group records: halfway to the record in force at the settled sweep, at most
    # LOOKAROUND_S before it
    gens = pa.table({"cluster": ["c", "c"], "group_id": ["g", "g"], "member_ids": [["m1"], ["m1", "m2"]],
                     "gen_t": [T0 + 40, T0 + 100 - 3 * groups.LOOKAROUND_S]})
    assert groups.gap_bounds(sw, keep, gens, until=T0 + 120, horizon_s=3600).tolist() == [T0 + 70, np.inf]
    old = gens.filter(pa.array([False, True]))
    assert groups.gap_bounds(sw, keep, old, until=T0 + 120, horizon_s=9999)[0] == T0 + 100 - groups.LOOKAROUND_S
