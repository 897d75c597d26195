"""Rebalance windows from sweeps (and exact from the commit stream), table-driven.

Sweeps every 2 s. Defaults: session timeout 10 s, heartbeat 1 s, network 1 s, rebalance
timeout (max.poll.interval) 30 s. Topic ``t`` has partitions 0 and 1; the end grows by 10 per
sweep; each owner commits at every sweep unless a case says otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from analytics_builders import at, cases_df, members_df, members_rows, offsets_rows
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.testing import assertDataFrameEqual
from stepping import run_step

from lagscope.analytics.io import spark_schema
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _release_cache(spark: SparkSession) -> Iterator[None]:
    # run_step persists its intermediate frames: free them for the next test's aggregations
    yield
    spark.catalog.clearCache()

S = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30)
BOTH = [("m1", None, [0, 1])]
SPLIT = [("m1", None, [0]), ("m2", None, [1])]


def _stable(ts: range, gen: int, members: list[Any]) -> list[tuple[Any, ...]]:
    return [(t, "Stable", gen, members) for t in ts]


def _offsets(group: str, last: int, owners: dict[int, list[tuple[int, str | None]]],
             frozen: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Offsets for partitions 0/1 up to ``last``: end = 10·t/2; committed = end unless the
    partition is frozen from a time on (then it stays at that time's end) until its new owner
    resumes; ``owners[p]`` is [(from_t, owner)…]."""
    rows: list[dict[str, Any]] = []
    for p in (0, 1):
        series = []
        for t in range(0, last + 1, 2):
            end = 5 * t
            owner = [o for since, o in owners[p] if since <= t][-1]
            f = (frozen or {}).get(p)
            resumed = f is not None and owner != owners[p][0][1]
            c = 5 * f if f is not None and t >= f and not resumed else end
            series.append((t, c, end, 0, owner))
        rows += offsets_rows(series, group=group, partition=p)
    return rows


# (case, member sweeps, offsets, expected:
#  (cause, start s, end s, duration s, before, after, partitions moved, bound s))
CASES: list[tuple[str, list[tuple[Any, ...]], list[dict[str, Any]], tuple[Any, ...]]] = [
    # m2 joins: last settled sweep of gen 1 at 10, Preparing at 12, settled gen 2 at 14 →
    # midpoints 11 … 13 = 2 s; partition 1 moves from m1 to m2; bound = rebalance timeout
    ("join", [*_stable(range(0, 11, 2), 1, BOTH), (12, "PreparingRebalance", 1, BOTH),
              *_stable(range(14, 17, 2), 2, SPLIT)],
     _offsets("join", 16, {0: [(0, "m1")], 1: [(0, "m1"), (14, "m2")]}),
     ("join", 11, 13, 2.0, ["m1"], ["m1", "m2"], 1, 30.0)),
    # m2 leaves promptly (it committed at 10, gone at 12): leave, 11 … 13
    ("leave", [*_stable(range(0, 11, 2), 1, SPLIT), (12, "PreparingRebalance", 1, [("m1", None, [0])]),
               *_stable(range(14, 17, 2), 2, BOTH)],
     _offsets("leave", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m1")]}),
     ("leave", 11, 13, 2.0, ["m1", "m2"], ["m1"], 1, 30.0)),
    # m2 crashes after its commit at 4; the group stays Stable until its session times out
    # (Preparing at 16 = 12 s later ≈ 10 s session timeout, far from 30 s): session_timeout;
    # the rebalance proper 15 … 17; bound 10 + 1 + 1 = 12 s
    ("session", [*_stable(range(0, 15, 2), 1, SPLIT), (16, "PreparingRebalance", 1, [("m1", None, [0])]),
                 *_stable(range(18, 23, 2), 2, BOTH)],
     _offsets("session", 22, {0: [(0, "m1")], 1: [(0, "m2"), (20, "m1")]}, frozen={1: 4}),
     ("session_timeout", 15, 17, 2.0, ["m1", "m2"], ["m1"], 1, 12.0)),
    # m2 stops polling after 4 and is removed 32 s later (≈ 30 s rebalance timeout):
    # max_poll_interval; the rebalance proper 35 … 37; bound 30 s
    ("max-poll", [*_stable(range(0, 35, 2), 1, SPLIT), (36, "PreparingRebalance", 1, [("m1", None, [0])]),
                  *_stable(range(38, 43, 2), 2, BOTH)],
     _offsets("max-poll", 42, {0: [(0, "m1")], 1: [(0, "m2"), (40, "m1")]}, frozen={1: 4}),
     ("max_poll_interval", 35, 37, 2.0, ["m1", "m2"], ["m1"], 1, 30.0)),
    # m2 leaves and m3 joins in the same rebalance (m2 committed at 12, gone at 14): nothing
    # says which came first; a join (joins usually do), 11 … 13; partition 1 moves to m3
    ("join-and-leave", [*_stable(range(0, 11, 2), 1, SPLIT), (12, "PreparingRebalance", 1, SPLIT),
                        *_stable(range(14, 17, 2), 2, [("m1", None, [0]), ("m3", None, [1])])],
     _offsets("join-and-leave", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m3")]}),
     ("join", 11, 13, 2.0, ["m1", "m2"], ["m1", "m3"], 1, 30.0)),
    # static member i2 restarts: same instance, new member id m3, no partition moves (owned
    # by the instance); seen between two settled sweeps 10 and 12 → 11 … 11
    ("static", [*_stable(range(0, 11, 2), 1, [("m1", "i1", [0]), ("m2", "i2", [1])]),
                *_stable(range(12, 15, 2), 1, [("m1", "i1", [0]), ("m3", "i2", [1])])],
     _offsets("static", 14, {0: [(0, "m1")], 1: [(0, "m2"), (12, "m3")]}),
     ("static_member_bounce", 11, 11, 0.0, ["m1", "m2"], ["m1", "m3"], 0, 12.0)),
]


def _rebalances(spark: SparkSession, commits: DataFrame | None = None,
                events: DataFrame | None = None) -> DataFrame:
    offsets = cases_df(spark, [o for _, _, o, _ in CASES])
    members = members_df(spark, [members_rows(m, group=name) for name, m, _, _ in CASES])
    return run_step(offsets, members, settings=S, commits=commits, group_events=events).tables["rebalances"]


def test_rebalance_windows_from_sweeps(spark: SparkSession) -> None:
    got = _rebalances(spark).select(
        "group_id", "cause", "start_ts", "end_ts", F.round("duration_s", 3).alias("duration_s"), "members_before",
        "members_after", "partitions_moved", "bound_s", "source")
    expected = spark.createDataFrame(
        [(name, cause, at(s), at(e), d, b, a, moved, bound, "sweeps")
         for name, _, _, (cause, s, e, d, b, a, moved, bound) in CASES],
        "group_id string, cause string, start_ts timestamp, end_ts timestamp, duration_s double, "
        "members_before array<string>, members_after array<string>, partitions_moved int, bound_s double, "
        "source string")
    assertDataFrameEqual(got, expected)


def test_rebalance_lag_and_processing_gap(spark: SparkSession) -> None:
    # session case: partition 1 frozen at 20 (t=4) while the end grows 10 per sweep: lag 50 at
    # A (t=14: 70 − 20) and 70 at B (t=18: 90 − 20) → 20 messages accumulated. Partition 1's
    # last commit at 4, the new owner's first at 20: a 16 s processing gap. The member's outage,
    # last progress (4) → settled (17) = 13 s, against the 12 s bound
    got = _rebalances(spark).where(F.col("group_id") == "session").select(
        "messages_accumulated", "max_processing_gap_s", F.round("observed_over_bound", 4).alias("ratio"))
    assertDataFrameEqual(got, spark.createDataFrame([(20, 16.0, round(13 / 12, 4))],
                                                    "messages_accumulated long, max_processing_gap_s double, "
                                                    "ratio double"))


def test_commit_stream_gives_exact_bounds(spark: SparkSession) -> None:
    # the __consumer_offsets tail: generation 2 of "session" written at 17.3 s; the group's last
    # commit before it (and after the last settled sweep, 14) at 16.0 (a revocation commit):
    # 16.0 … 17.3 = 1.3 s. m2's partition last committed at 3.6 s, so its outage is 13.7 s
    # against 8 + 1 + 1 = 10 s (timeouts from generation 1's record: session 8 s, rebalance 20 s)
    members = [{"member_id": m, "group_instance_id": None, "client_id": "c", "host": "h",
                "session_timeout_ms": 8000, "rebalance_timeout_ms": 20000, "assignment": []} for m in ("m1", "m2")]
    events = spark.createDataFrame([
        {"cluster": "c", "date": "2026-01-01", "group_id": "session", "record_type": "group_metadata",
         "generation": 1, "members": members, "record_ts": at(0.5), "source_partition": 0, "source_offset": 1},
        {"cluster": "c", "date": "2026-01-01", "group_id": "session", "record_type": "group_metadata",
         "generation": 2, "members": members[:1], "record_ts": at(17.3), "source_partition": 0, "source_offset": 2},
    ], spark_schema("group_events"))
    commits = spark.createDataFrame([
        {"cluster": "c", "date": "2026-01-01", "group_id": "session", "topic": "t", "partition": p,
         "committed_offset": 10, "commit_ts": at(ts), "record_ts": at(ts), "source_partition": 0,
         "source_offset": i} for i, (p, ts) in enumerate([(1, 2.0), (1, 3.6), (0, 3.9), (0, 16.0), (1, 19.0)])
    ], spark_schema("commits"))
    got = _rebalances(spark, commits, events).where(F.col("group_id") == "session").select(
        "cause", "source", "start_ts", "end_ts", F.round("duration_s", 3).alias("d"), "bound_s",
        F.round("observed_over_bound", 3).alias("r"))
    assertDataFrameEqual(got, spark.createDataFrame(
        [("session_timeout", "commit_stream", at(16.0), at(17.3), 1.3, 10.0, 1.37)],
        "cause string, source string, start_ts timestamp, end_ts timestamp, d double, bound_s double, r double"))


# --------------------------------------------------------------------------------------------
# the commit stream on a real classic lake: DescribeGroups gives no generation (members.generation
# is null), so the generation records are matched by their member set and time
# --------------------------------------------------------------------------------------------

STATIC = [("m1", "i1", [0]), ("m2", "i2", [1])]


def _member(mid: str, iid: str | None = None, session_ms: int | None = 8000,
            rebalance_ms: int | None = 20000, parts: tuple[int, ...] = ()) -> dict[str, Any]:
    return {"member_id": mid, "group_instance_id": iid, "client_id": "c", "host": "h",
            "session_timeout_ms": session_ms, "rebalance_timeout_ms": rebalance_ms,
            "assignment": [{"topic": "t", "partition": p} for p in parts]}


def _record(group: str, ts: float, gen: int | None, members: list[dict[str, Any]],
            record_type: str = "group_metadata", member_id: str | None = None) -> dict[str, Any]:
    return {"cluster": "c", "date": "2026-01-01", "group_id": group, "record_type": record_type,
            "generation": gen, "members": members, "record_ts": at(ts), "source_partition": 0,
            "source_offset": int(ts * 1000), "value_version": 0, "member_id": member_id}


def _commits(group: str, commits: list[tuple[int, float]]) -> list[dict[str, Any]]:
    return [{"cluster": "c", "date": "2026-01-01", "group_id": group, "topic": "t", "partition": p,
             "committed_offset": 10, "commit_ts": at(ts), "record_ts": at(ts), "source_partition": 0,
             "source_offset": i} for i, (p, ts) in enumerate(commits)]


def _regular(parts: tuple[int, ...], until: int) -> list[tuple[int, float]]:
    """A commit of each partition at every sweep (every 2 s) up to ``until``."""
    return [(p, float(t)) for t in range(0, until + 1, 2) for p in parts]


# (case, member sweeps (generation null), offsets, group-metadata records, commits,
#  expected: (cause, start s, end s, duration s, bound s, generation before, generation after))
STREAM_CASES: list[tuple[str, list[tuple[Any, ...]], list[dict[str, Any]], list[dict[str, Any]],
                         list[dict[str, Any]], tuple[Any, ...]]] = [
    # m2 crashed after its commit at 3.6; m1 revoked (commit of p0) at 16.0; generation 2 = {m1}
    # written at 17.3 (after A = 14, before the sweep after B = 20): 16.0 … 17.3; timeouts of the
    # record at or before A (generation 1: session 8 s → bound 8 + 1 + 1)
    ("s-crash", [*_stable(range(0, 15, 2), None, SPLIT), (16, "PreparingRebalance", None, [("m1", None, [0])]),
                 *_stable(range(18, 23, 2), None, BOTH)],
     _offsets("s-crash", 22, {0: [(0, "m1")], 1: [(0, "m2"), (20, "m1")]}, frozen={1: 4}),
     [_record("s-crash", 0.5, 1, [_member("m1"), _member("m2")]), _record("s-crash", 17.3, 2, [_member("m1")])],
     _commits("s-crash", [(1, 2.0), (1, 3.6), *_regular((0,), 14), (0, 16.0), (0, 19.0), (1, 19.0)]),
     ("session_timeout", 16.0, 17.3, 1.3, 10.0, 1, 2)),
    # m3 joins; both survivors commit on revocation, m1 at 11.2 and m2 at 11.6: the rebalance
    # reached the group at the first of them, 11.2; generation 2 = {m1, m2, m3} at 12.1 (the
    # sweep at 12 still saw the rebalance) → 11.2 … 12.1; bound = the record's rebalance timeout
    ("s-join", [*_stable(range(0, 11, 2), None, SPLIT), (12, "CompletingRebalance", None, SPLIT),
                *_stable(range(14, 17, 2), None, [*SPLIT, ("m3", None, [])])],
     _offsets("s-join", 16, {0: [(0, "m1")], 1: [(0, "m2")]}),
     [_record("s-join", 0.5, 1, [_member("m1"), _member("m2")]),
      _record("s-join", 12.1, 2, [_member("m1"), _member("m2"), _member("m3")])],
     _commits("s-join", [*_regular((0, 1), 10), (0, 11.2), (1, 11.6), (0, 14.0), (1, 14.0)]),
     ("join", 11.2, 12.1, 0.9, 20.0, 1, 2)),
    # m3 joins and m2 leaves (closing commit 11.4) in one rebalance: join (see "join-and-leave");
    # m1 revoked at 11.0 → 11.0 … 12.1
    ("s-late-leaver", [*_stable(range(0, 11, 2), None, SPLIT), (12, "PreparingRebalance", None, SPLIT),
                       *_stable(range(14, 17, 2), None, [("m1", None, [0]), ("m3", None, [1])])],
     _offsets("s-late-leaver", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m3")]}),
     [_record("s-late-leaver", 0.5, 1, [_member("m1"), _member("m2")]),
      _record("s-late-leaver", 12.1, 2, [_member("m1"), _member("m3")])],
     _commits("s-late-leaver", [*_regular((0, 1), 10), (0, 11.0), (1, 11.4), (0, 14.0), (1, 14.0)]),
     ("join", 11.0, 12.1, 1.1, 20.0, 1, 2)),
    # m2 commits (10.5) and leaves; m1, the survivor, revoked at 11.0 (m2's closing commit is
    # not a revocation of a survivor): 11.0 … 12.1
    ("s-leave", [*_stable(range(0, 11, 2), None, SPLIT), (12, "PreparingRebalance", None, SPLIT),
                 *_stable(range(14, 17, 2), None, BOTH)],
     _offsets("s-leave", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m1")]}),
     [_record("s-leave", 0.5, 1, [_member("m1"), _member("m2")]), _record("s-leave", 12.1, 2, [_member("m1")])],
     _commits("s-leave", [*_regular((0, 1), 10), (1, 10.5), (0, 11.0), (0, 14.0), (1, 14.0)]),
     ("leave", 11.0, 12.1, 1.1, 20.0, 1, 2)),
    # static member i2 closes after its commit at 5.0 and is back as m3: the coordinator rewrites
    # generation 1 with m3 at 7.3 (no rebalance): its absence 5.0 … 7.3 against 8 + 1 + 1
    ("s-static", [*_stable(range(0, 7, 2), None, STATIC),
                  *_stable(range(8, 11, 2), None, [("m1", "i1", [0]), ("m3", "i2", [1])])],
     _offsets("s-static", 10, {0: [(0, "m1")], 1: [(0, "m2"), (8, "m3")]}),
     [_record("s-static", 0.5, 1, [_member("m1", "i1"), _member("m2", "i2")]),
      _record("s-static", 7.3, 1, [_member("m1", "i1"), _member("m3", "i2")])],
     _commits("s-static", [*_regular((0,), 10), (1, 0.0), (1, 2.0), (1, 4.0), (1, 5.0), (1, 8.0), (1, 10.0)]),
     ("static_member_bounce", 5.0, 7.3, 2.3, 10.0, 1, 1)),
]


def test_commit_stream_on_classic_lake(spark: SparkSession) -> None:
    offsets = cases_df(spark, [o for _, _, o, _, _, _ in STREAM_CASES])
    members = members_df(spark, [members_rows(m, group=name) for name, m, _, _, _, _ in STREAM_CASES])
    events = spark.createDataFrame([r for c in STREAM_CASES for r in c[3]], spark_schema("group_events"))
    commits = spark.createDataFrame([r for c in STREAM_CASES for r in c[4]], spark_schema("commits"))
    got = run_step(offsets, members, settings=S, commits=commits, group_events=events).tables["rebalances"].select(
        "group_id", "cause", "source", "start_ts", "end_ts", F.round("duration_s", 3).alias("duration_s"), "bound_s",
        "generation_before", "generation_after")
    expected = spark.createDataFrame(
        [(name, cause, "commit_stream", at(s), at(e), d, bound, gb, ga)
         for name, _, _, _, _, (cause, s, e, d, bound, gb, ga) in STREAM_CASES],
        "group_id string, cause string, source string, start_ts timestamp, end_ts timestamp, duration_s double, "
        "bound_s double, generation_before int, generation_after int")
    assertDataFrameEqual(got, expected)


# (case, member sweeps, offsets, group-metadata records, expected: (cause, bound s))
BOUND_CASES: list[tuple[str, list[tuple[Any, ...]], list[dict[str, Any]], list[dict[str, Any]],
                        tuple[str, float]]] = [
    # classic: m2's record says session 8 s (not the 10 s default) → 8 + 1 + 1; m2 quiet since
    # 4, removed at 16 (12 s: nearer 8 than 20) → session timeout
    ("b-classic", [*_stable(range(0, 15, 2), 1, SPLIT), (16, "PreparingRebalance", 1, [("m1", None, [0])]),
                   *_stable(range(18, 23, 2), 2, BOTH)],
     _offsets("b-classic", 22, {0: [(0, "m1")], 1: [(0, "m2"), (20, "m1")]}, frozen={1: 4}),
     [_record("b-classic", 0.5, 1, [_member("m1"), _member("m2")])],
     ("session_timeout", 10.0)),
    # KIP-848: the member records carry the rebalance timeout (20 s, not the 30 s default) and no
    # session timeout; m2 quiet since 4, removed at 24 (20 s) → max.poll.interval, bound 20 s
    ("b-kip848", [*_stable(range(0, 23, 2), 3, SPLIT), (24, "Reconciling", 4, [("m1", None, [0])]),
                  *_stable(range(26, 31, 2), 5, BOTH)],
     _offsets("b-kip848", 30, {0: [(0, "m1")], 1: [(0, "m2"), (28, "m1")]}, frozen={1: 4}),
     [_record("b-kip848", 0.5, None, [_member(m, session_ms=None)], "consumer_group_member", m)
      for m in ("m1", "m2")],
     ("max_poll_interval", 20.0)),
    # KIP-848 crash: no session timeout in any record → the 10 s default: 10 + 1 + 1; m2 quiet
    # since 4, removed at 14 (10 s) → session timeout
    ("b-kip848-crash", [*_stable(range(0, 13, 2), 3, SPLIT), (14, "Reconciling", 4, [("m1", None, [0])]),
                        *_stable(range(16, 21, 2), 5, BOTH)],
     _offsets("b-kip848-crash", 20, {0: [(0, "m1")], 1: [(0, "m2"), (18, "m1")]}, frozen={1: 4}),
     [_record("b-kip848-crash", 0.5, None, [_member(m, session_ms=None)], "consumer_group_member", m)
      for m in ("m1", "m2")],
     ("session_timeout", 12.0)),
    # a session (10 s) longer than max.poll.interval.ms (3 s): m2 quiet since 4, removed at 10
    # (6 s: nearer 10 than 3 in ratio, but a session timeout cannot come before 10 − 1 − 1 = 8 s
    # of silence) → max.poll.interval, bound 3 s
    ("b-slow-poll", [*_stable(range(0, 9, 2), 1, SPLIT), (10, "PreparingRebalance", 1, [("m1", None, [0])]),
                     *_stable(range(12, 17, 2), 2, BOTH)],
     _offsets("b-slow-poll", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m1")]}, frozen={1: 4}),
     [_record("b-slow-poll", 0.5, 1, [_member(m, session_ms=10_000, rebalance_ms=3_000) for m in ("m1", "m2")])],
     ("max_poll_interval", 3.0)),
]


def test_bound_uses_record_timeouts(spark: SparkSession) -> None:
    offsets = cases_df(spark, [o for _, _, o, _, _ in BOUND_CASES])
    members = members_df(spark, [members_rows(m, group=name) for name, m, _, _, _ in BOUND_CASES])
    events = spark.createDataFrame([r for c in BOUND_CASES for r in c[3]], spark_schema("group_events"))
    got = run_step(offsets, members, settings=S, group_events=events).tables["rebalances"].select(
        "group_id", "cause", "bound_s")
    expected = spark.createDataFrame([(name, cause, bound) for name, _, _, _, (cause, bound) in BOUND_CASES],
                                     "group_id string, cause string, bound_s double")
    assertDataFrameEqual(got, expected)


def test_generations_no_sweep_saw(spark: SparkSession) -> None:
    # sweeps every 2 s see {m1} throughout, but between 10 and 12 m2 joined (generation 2 at
    # 11.0, m1 revoked at 10.6) and left again (generation 3 at 11.5, m1 revoked p0 at 11.3):
    # two windows from the records alone. The join: 10.6 … 11.0; the leave: 11.3 … 11.5 (m2's
    # partition last committed at 10.6, by m1 before the join: before the start, so m2's leave
    # caused it); timeouts from generation 1's record (rebalance 20 s)
    g = "missed"
    sweeps = _stable(range(0, 17, 2), None, BOTH)
    events = [_record(g, 0.5, 1, [_member("m1", parts=(0, 1))]),
              _record(g, 11.0, 2, [_member("m1", parts=(0,)), _member("m2", parts=(1,))]),
              _record(g, 11.5, 3, [_member("m1", parts=(0, 1))])]
    commits = _commits(g, [*_regular((0, 1), 10), (0, 10.6), (1, 10.6), (0, 11.3), *_regular((0, 1), 16)[12:]])
    got = run_step(cases_df(spark, [_offsets(g, 16, {0: [(0, "m1")], 1: [(0, "m1")]})]),
                   members_df(spark, [members_rows(sweeps, group=g)]), settings=S,
                   commits=spark.createDataFrame(commits, spark_schema("commits")),
                   group_events=spark.createDataFrame(events, spark_schema("group_events"))).tables["rebalances"]
    got = got.select("cause", "source", "start_ts", "end_ts", F.round("duration_s", 3).alias("d"), "bound_s",
                     "generation_before", "generation_after", "members_before", "members_after", "partitions_moved")
    assertDataFrameEqual(got, spark.createDataFrame(
        [("join", "commit_stream", at(10.6), at(11.0), 0.4, 20.0, 1, 2, ["m1"], ["m1", "m2"], 1),
         ("leave", "commit_stream", at(11.3), at(11.5), 0.2, 20.0, 2, 3, ["m1", "m2"], ["m1"], 1)],
        "cause string, source string, start_ts timestamp, end_ts timestamp, d double, bound_s double, "
        "generation_before int, generation_after int, members_before array<string>, members_after array<string>, "
        "partitions_moved int"))


def test_prompt_leave_on_an_idle_topic_across_a_step_boundary(spark: SparkSession) -> None:
    # an idle topic, both partitions caught up (committed = end = 100, no commit moves after
    # the first sweep): a member shows progress by being caught up. m2 is last seen at 10 and
    # gone at 12 (Preparing), gen 2 settled at 14: it left promptly (10 → 12 = 2 s ≤ 2.5 s):
    # leave, 11 … 13. The same when a step ends at 10 and the next starts at 12: the state
    # carries m2's last progress (10), not its partition's last commit change (0), which would
    # make it a member gone 12 s after its last progress: a session timeout
    sweeps = [*_stable(range(0, 11, 2), 1, SPLIT), (12, "PreparingRebalance", 1, [("m1", None, [0])]),
              *_stable(range(14, 17, 2), 2, BOTH)]
    owner1 = {t: "m2" if t <= 10 else None if t == 12 else "m1" for t in range(0, 17, 2)}
    offsets = [*offsets_rows([(t, 100, 100, 0, "m1") for t in range(0, 17, 2)], partition=0),
               *offsets_rows([(t, 100, 100, 0, owner1[t]) for t in range(0, 17, 2)], partition=1)]

    def step(upto: int, since: int, state: dict[str, DataFrame] | None = None) -> Any:
        off = cases_df(spark, [[r for r in offsets if at(since) <= r["sweep_ts"] <= at(upto)]])
        mem = members_df(spark, [members_rows([s for s in sweeps if since <= s[0] <= upto])])
        return run_step(off, mem, settings=S, state=state)

    def windows(s: Any) -> list[tuple[Any, ...]]:
        return [(r["cause"], r["duration_s"]) for r in s.tables["rebalances"].collect()]

    batch = step(16, 0)
    first = step(10, 0)
    second = step(16, 12, first.state)
    assert windows(batch) == [("leave", 2.0)]
    assert windows(second) == [("leave", 2.0)]


def test_a_stall_that_outlasts_the_rebalance_is_reported(spark: SparkSession) -> None:
    # the "session" case, but the partition's new owner m1 (from 18) never commits either:
    # partition 1 is frozen at 20 from t=4 to the end (t=40), work pending from 6. The
    # rebalance's outage is m2's last progress (4) → settled (17); the stall (6 s threshold)
    # from 6 is still going at 40, 34 s: not inside the outage, reported (open). Its owner since
    # 18, m1, commits progress on partition 0 all along: starved (test_starved.py), not stopped
    sweeps = [*_stable(range(0, 15, 2), 1, SPLIT), (16, "PreparingRebalance", 1, [("m1", None, [0])]),
              *_stable(range(18, 41, 2), 2, BOTH)]
    ts = range(0, 41, 2)
    offsets = [*offsets_rows([(t, 5 * t, 5 * t, 0, "m1") for t in ts], group="stuck", partition=0),
               *offsets_rows([(t, min(5 * t, 20), 5 * t, 0, "m2" if t <= 14 else None if t == 16 else "m1")
                              for t in ts], group="stuck", partition=1)]
    settings = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=6, stop_after_s=6), session_timeout_s=10,
                               heartbeat_s=1, network_s=1, rebalance_timeout_s=30)
    step = run_step(cases_df(spark, [offsets]), members_df(spark, [members_rows(sweeps, group="stuck")]),
                    settings=settings)
    assert [r["cause"] for r in step.tables["rebalances"].collect()] == ["session_timeout"]
    got = step.tables["anomalies"].where(F.col("kind").isin("stall", "stop", "starved")).select(
        "kind", "partition", "start_ts", "end_ts", "magnitude")
    assertDataFrameEqual(got, spark.createDataFrame(
        [("starved", 1, at(6), None, 34.0)], "kind string, partition int, start_ts timestamp, end_ts timestamp, "
                                           "magnitude double"))


def test_a_sweep_written_twice_gives_the_same_windows(spark: SparkSession) -> None:
    # the "session" case with every row of the sweeps at 14 (A) and 18 (B) in the lake twice (a
    # write repeated after a failure): the same window, partitions moved and messages
    # accumulated (the group's lag at A and B counted once each: 50 → 70)
    name, sweeps, offsets, _ = CASES[2]
    members = members_rows(sweeps, group=name)
    twice = [r for r in members if r["sweep_ts"] in (at(14), at(18))]
    otwice = [r for r in offsets if r["sweep_ts"] in (at(14), at(18))]
    got = run_step(cases_df(spark, [offsets + otwice]), members_df(spark, [members + twice]), settings=S).tables[
        "rebalances"].select("cause", "start_ts", "end_ts", "partitions_moved", "messages_accumulated")
    assertDataFrameEqual(got, spark.createDataFrame(
        [("session_timeout", at(15), at(17), 1, 20)],
        "cause string, start_ts timestamp, end_ts timestamp, partitions_moved int, messages_accumulated long"))
