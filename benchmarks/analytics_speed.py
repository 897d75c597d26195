"""Speed of the analytics (Spark, the one engine) on synthetic lakes, beside DuckDB, in one run.

    .venv/bin/python benchmarks/analytics_speed.py --rows 50000000 --incremental-rows 100000 \\
        --incremental-runs 5 --workdir /tmp/lagscope-speed --duckdb-memory 12GB

Sections (each can be skipped: ``--skip-demo``, ``--skip-batch``, ``--skip-incremental``):

1. **the demo's step** (:func:`demo_lake`: the ``demo`` scenario's 12 partitions in four groups,
   one minute of 1-s sweeps, a crash in ``shipping`` whose rebalance comes after the member's
   session timeout, a stall, a rewind, and the commit stream on: ``commits`` and
   ``group_events``), in a fresh subprocess with the demo's Spark settings (``local[2]``, 2
   shuffle partitions, the demo's rules and timeouts): the Spark session's start plus the first
   step (target ≤ 20 s), then the same step again on the warm session from an empty results
   folder, ``--demo-runs`` times (target ≤ 2 s each). It runs first, before this process starts
   its own Spark session, so that only one JVM runs at a time;
2. **the batch** (``run_batch``) over a lake of ``--rows`` offset rows on Spark ``local[2]``
   (target ≥ 1 M rows/s) and the lag-trend step over the same lake in DuckDB (window ``LAG``,
   ``ASOF`` join for the interpolation, per-minute aggregation, grouping sets: the reference),
   alternately, ``--batch-runs`` times each (the first run pays each engine's warm-up; the
   ratio is taken on the last: target Spark's whole batch ≤ 1.5× DuckDB's lag-trend step); the
   batch's ``lag_trends`` and DuckDB's are joined on their key and compared, so the reference
   computes what Spark computes;
3. **the incremental step** (``run_incremental``) over one new sweep of ``--incremental-rows``
   partitions, warm session, each timed ``--incremental-runs`` times from the same primed state
   (the primed results folder copied before each run), alternating: with 1 day and with 7 days
   of history in the lake (one sweep every ``--history-every-min`` minutes, 20 by default: enough
   sweeps in one day for every part of the carried state to reach its cap — 10 Burrow entries,
   64 commit-gap samples per partition — so that the ratio of the medians shows whether the cost
   grows with the history once the state is at its bound, not the state's warm-up during a
   deployment's first hours: target ≤ 1.2), and with 1 day and a rebalance window in the step
   (in the new sweep ``--rebalanced-groups`` groups have a new generation and member set, so
   their settled sweep differs from the carried one; the count of ``rebalances`` rows the step
   wrote is reported). Target ≤ 3 s each.

For every measurement the peak heap of the Spark driver's JVM (in ``local`` mode also the
executor's) is recorded: the sum over the heap memory pools of their peak usage
(``MemoryPoolMXBean.getPeakUsage``), reset (``resetPeakUsage``) just before the measurement.

Prints a Markdown report with the command line, the machine and the load average at start and
end (the lead records the real runs under benchmarks/results/; do it on a quiet machine).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql import SparkSession

from lagscope.analytics.job import run_batch, run_incremental
from lagscope.analytics.session import build_session
from lagscope.config import AnalyticsConfig
from lagscope.lake import write_table
from lagscope.schema import COMMITS, GROUP_EVENTS, MEMBERS, OFFSETS
from lagscope.storage import Store

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
#: the cluster name of every synthetic lake
CLUSTER = "bench"


# --------------------------------------------------------------------------------------------
# synthetic lakes
# --------------------------------------------------------------------------------------------

def offsets_batch(keys: int, groups: int, t0: dt.datetime, sweeps: int, interval_s: float, seed: int) -> pa.Table:
    """``sweeps`` sweeps of ``keys`` (group, partition) rows from ``t0``: each partition's end
    offset is one function of time (its own rate, ±10 % over an hour: never decreasing, the
    same across batches, so a lake written in chunks stays continuous); consumers keep up with
    a small random lag (seeded by ``seed``)."""
    rng = np.random.default_rng(seed)
    k = np.arange(keys)
    parts_per_group = max(1, keys // groups)
    group = np.array([f"g{i}" for i in range(groups)])[np.minimum(k // parts_per_group, groups - 1)]
    partition = (k % parts_per_group).astype(np.int32)
    shape = np.random.default_rng(0)
    rate, phase = shape.uniform(1, 50, keys), shape.uniform(0, 2 * np.pi, keys)
    elapsed = (t0 - T0).total_seconds() + np.arange(sweeps)[:, None] * interval_s
    ends = np.floor(rate * (elapsed + 60 * np.sin(2 * np.pi * elapsed / 3600 + phase))).astype(np.int64) + 10_000
    lag = rng.integers(0, 20, (sweeps, keys))
    committed = np.maximum(0, ends - lag)
    ts = (np.datetime64(round(t0.timestamp() * 1000), "ms")
          + np.round(np.arange(sweeps) * interval_s * 1000).astype("timedelta64[ms]"))
    n = sweeps * keys
    return _complete(OFFSETS.schema, n, pa.table({
        "sweep_ts": pa.array(np.repeat(ts, keys), pa.timestamp("ms", tz="UTC")),
        "group_id": pa.array(np.tile(group, sweeps)),
        "topic": pa.array(np.full(n, "events")),
        "partition": pa.array(np.tile(partition, sweeps)),
        "committed_offset": pa.array(committed.ravel()),
        "log_start_offset": pa.array(np.zeros(n, dtype=np.int64)),
        "log_end_offset": pa.array(ends.ravel()),
        "last_stable_offset": pa.array(ends.ravel()),
        "member_id": pa.array(np.tile(np.char.add("m-", group), sweeps)),
        "group_state": pa.array(np.full(n, "Stable")),
        "lag": pa.array((ends - committed).ravel()),
        "lag_basis": pa.array(np.full(n, "hw")),
    }))


def _complete(schema: pa.Schema, n: int, table: pa.Table) -> pa.Table:
    """Add the schema's other columns as nulls."""
    for f in schema:
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(n, f.type))
    return table


def members_batch(groups: int, t0: dt.datetime, sweeps: int, interval_s: float,
                  rebalanced: Iterable[int] = ()) -> pa.Table:
    """One member per group (``m-g<i>``, generation 1, partition 0 assigned), Stable, per sweep;
    the ``rebalanced`` groups are at generation 2 with a second member (``m-g<i>-b``, partition 1)."""
    moved = set(rebalanced)
    rows = []
    for i in range(sweeps):
        t = t0 + dt.timedelta(seconds=i * interval_s)
        for g in range(groups):
            gen = 2 if g in moved else 1
            rows.append({"sweep_ts": t, "group_id": f"g{g}", "group_state": "Stable", "generation": gen,
                         "member_id": f"m-g{g}", "assignment": [{"topic": "events", "partition": 0}]})
            if g in moved:
                rows.append({"sweep_ts": t, "group_id": f"g{g}", "group_state": "Stable", "generation": gen,
                             "member_id": f"m-g{g}-b", "assignment": [{"topic": "events", "partition": 1}]})
    return pa.Table.from_pylist(rows, schema=MEMBERS.schema)


def write_lake(root: Path | Store, *, keys: int, groups: int, sweeps: int, interval_s: float, t0: dt.datetime,
               chunk_sweeps: int) -> int:
    """The batch's lake: ``sweeps`` sweeps of ``keys`` partitions, in files of ``chunk_sweeps``
    sweeps. Returns the offset rows written."""
    total = 0
    for start in range(0, sweeps, chunk_sweeps):
        n = min(chunk_sweeps, sweeps - start)
        t = t0 + dt.timedelta(seconds=start * interval_s)
        write_table(root, OFFSETS, CLUSTER, offsets_batch(keys, groups, t, n, interval_s, seed=start))
        write_table(root, MEMBERS, CLUSTER, members_batch(groups, t, n, interval_s))
        total += n * keys
    return total


def incremental_lake(root: Path | Store, *, keys: int, groups: int, days: int, t_hist: dt.datetime,
                     rebalanced: int, every_min: int) -> dt.datetime:
    """``days`` of history (one sweep of ``keys`` partitions every ``every_min`` minutes from
    ``t_hist``, with its member sweep) and then the step's sweep, at which ``rebalanced`` groups
    have a new generation and member set. Returns the step's sweep time (a minute boundary)."""
    sweeps = days * 24 * 60 // every_min
    for d in range(sweeps):
        ts = t_hist + dt.timedelta(minutes=every_min * d)
        write_table(root, OFFSETS, CLUSTER, offsets_batch(keys, groups, ts, 1, 60 * every_min, seed=d))
        write_table(root, MEMBERS, CLUSTER, members_batch(groups, ts, 1, 60 * every_min))
    step_t = t_hist + dt.timedelta(minutes=every_min * sweeps)
    write_table(root, OFFSETS, CLUSTER, offsets_batch(keys, groups, step_t, 1, 60, seed=999))
    write_table(root, MEMBERS, CLUSTER, members_batch(groups, step_t, 1, 60, rebalanced=range(rebalanced)))
    return step_t


def prime_incremental(spark: SparkSession, lake: Path | Store, results: Path | Store, *, t_hist: dt.datetime,
                      step_t: dt.datetime, every_min: int) -> None:
    """Prime ``results`` for the timed step at ``step_t`` over an :func:`incremental_lake`: the
    history in one step, then one step over its last sweep alone (as `lagscope run` steps every
    minute: the carried state is then in a steady step's layout, not split in as many files as the
    history's step had buckets); the step before the timed one ends at the timed one's sweep."""
    last_t = step_t - dt.timedelta(minutes=every_min)
    run_incremental(spark, lake, results, settings=AnalyticsConfig(), since=t_hist, until=last_t)
    run_incremental(spark, lake, results, settings=AnalyticsConfig(), until=step_t)


#: the demo scenario's groups (devtools/sim/scenarios/demo.yaml): name → (topic, partitions,
#: members); 12 partitions in all
DEMO_GROUPS = {"shipping": ("orders", 4, ["ship-1", "ship-2"]), "analytics": ("orders", 4, ["slow-1"]),
               "ledger": ("payments", 2, ["ledger-1"]), "audit": ("payments", 2, ["audit-1"])}
#: when ship-2 crashes, when the coordinator notices (its 6 s session timeout) and when the
#: group is Stable again (seconds into the minute)
DEMO_CRASH_S, DEMO_PREPARING_S, DEMO_STABLE_S = 20.0, 26.0, 27.0


def demo_lake(root: Path, m0: dt.datetime) -> dict[str, int]:
    """One minute (from ``m0``, a minute boundary) of the demo scenario as the collector would
    write it with the commit stream on: 1-s sweeps of the 12 partitions (``offsets``) and the
    groups' members (``members``), every commit (one per partition and second, ``commits``) and
    the generations (``group_events``). shipping: ship-2 (orders 2, 3) crashes at 20 s, its
    partitions stand still, the group rebalances at 26 s and is Stable at 27 s (generation 2,
    ship-1 owning all four); analytics: a slow consumer, lag growing; ledger: stalls at 25 s;
    audit: its committed offset rewinds 200 messages at 30 s for 2 s. Returns rows per table."""
    sweeps = 60
    off_rows: list[dict[str, Any]] = []
    mem_rows: list[dict[str, Any]] = []
    com_rows: list[dict[str, Any]] = []
    seq = 0

    def committed_at(group: str, topic: str, p: int, s: float) -> int:
        end = int(10_000 + 10 * s)
        if group == "shipping" and p >= 2 and s >= DEMO_CRASH_S:
            frozen = int(10_000 + 10 * DEMO_CRASH_S) - 3
            return frozen if s < DEMO_STABLE_S + 1 else end - 3  # ship-1 takes over and catches up
        if group == "analytics":
            return int(10_000 + 6 * s)  # 6 of 10 messages a second: lag grows
        if group == "ledger" and s >= 25:
            return 10_000 + 10 * 25 - 2
        if group == "audit" and 30 <= s < 32:
            return end - 200
        return end - 3

    for i in range(sweeps):
        s = float(i)
        ts = m0 + dt.timedelta(seconds=s)
        for group, (topic, parts, members) in DEMO_GROUPS.items():
            crashed = group == "shipping" and s >= DEMO_PREPARING_S
            preparing = crashed and s < DEMO_STABLE_S
            state = "PreparingRebalance" if preparing else "Stable"
            gen = 2 if group == "shipping" and s >= DEMO_STABLE_S else 1
            alive = ["ship-1"] if crashed else members
            owner = {p: alive[p * len(alive) // parts] for p in range(parts)}
            for p in range(parts):
                end = int(10_000 + 10 * s)
                c = committed_at(group, topic, p, s)
                off_rows.append({"sweep_ts": ts, "group_id": group, "topic": topic, "partition": p,
                                 "committed_offset": c, "log_start_offset": 0, "log_end_offset": end,
                                 "last_stable_offset": end, "member_id": None if preparing else owner[p],
                                 "group_state": state, "lag": max(0, end - c), "lag_basis": "hw"})
            for m in alive:
                mine = [{"topic": topic, "partition": p} for p in range(parts) if owner[p] == m]
                mem_rows.append({"sweep_ts": ts, "group_id": group, "group_state": state, "generation": gen,
                                 "protocol_type": "consumer", "group_protocol": "classic", "member_id": m,
                                 "assignment": [] if preparing else mine})
        # the commits of the second before this sweep (ship-2's stop at its crash; ship-1's
        # revocation commit at the rebalance, then it commits all four)
        for group, (topic, parts, _) in DEMO_GROUPS.items():
            for p in range(parts):
                t_c = s + 0.5
                if group == "shipping" and p >= 2 and DEMO_CRASH_S <= t_c < DEMO_STABLE_S + 0.5:
                    continue
                if group == "ledger" and t_c >= 25:
                    continue
                seq += 1
                com_rows.append({"group_id": group, "topic": topic, "partition": p,
                                 "committed_offset": committed_at(group, topic, p, t_c),
                                 "commit_ts": m0 + dt.timedelta(seconds=t_c),
                                 "record_ts": m0 + dt.timedelta(seconds=t_c),
                                 "source_partition": 7, "source_offset": seq, "value_version": 1})

    def generation(group: str, gen: int, at: dt.datetime, members: list[str]) -> dict[str, Any]:
        topic, parts, _ = DEMO_GROUPS[group]
        return {"group_id": group, "record_type": "group_metadata", "generation": gen, "protocol_type": "consumer",
                "protocol": "range", "leader": members[0], "state_ts": at, "record_ts": at, "source_partition": 7,
                "source_offset": 0, "value_version": 3,
                "members": [{"member_id": m, "client_id": m, "host": "/127.0.0.1", "session_timeout_ms": 6000,
                             "rebalance_timeout_ms": 300_000,
                             "assignment": [{"topic": topic, "partition": p} for p in range(parts)
                                            if members[p * len(members) // parts] == m]} for m in members]}

    before = m0 - dt.timedelta(seconds=30)
    events = [generation(g, 1, before, members) for g, (_, _, members) in DEMO_GROUPS.items()]
    events.append(generation("shipping", 2, m0 + dt.timedelta(seconds=DEMO_STABLE_S - 0.2), ["ship-1"]))
    tables = {OFFSETS: off_rows, MEMBERS: mem_rows, COMMITS: com_rows, GROUP_EVENTS: events}
    out = {}
    for spec, rows in tables.items():
        write_table(root, spec, CLUSTER, pa.Table.from_pylist(rows, schema=spec.schema), date=m0.date())
        out[spec.name] = len(rows)
    return out


# --------------------------------------------------------------------------------------------
# the JVM's heap
# --------------------------------------------------------------------------------------------

class JvmHeap:
    """The Spark driver JVM's heap pools (``java.lang.management``): :meth:`reset` their peaks
    before a measurement, :meth:`peak_mb` after it (the sum of the pools' peaks: an upper bound of
    the heap in use at any one moment)."""

    def __init__(self, spark: SparkSession) -> None:
        jvm = spark._jvm  # type: ignore[attr-defined]
        self._pools = [p for p in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans()
                       if p.getType().name() == "HEAP"]
        self.max_mb = jvm.java.lang.Runtime.getRuntime().maxMemory() / 2**20

    def reset(self) -> None:
        for p in self._pools:
            p.resetPeakUsage()

    def peak_mb(self) -> float:
        return sum(p.getPeakUsage().getUsed() for p in self._pools) / 2**20


def timed(heap: JvmHeap, fn: Callable[[], object], pause_s: float = 0.0) -> tuple[float, float]:
    """``fn()``'s wall time (s) and the JVM's peak heap during it (MB), after ``pause_s`` of quiet
    (the previous step's cleanup, shuffle files and garbage, runs on for a moment after it returns)."""
    if pause_s:
        time.sleep(pause_s)
    heap.reset()
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t, heap.peak_mb()


# --------------------------------------------------------------------------------------------
# the DuckDB reference
# --------------------------------------------------------------------------------------------

#: the lag-trend table in DuckDB, column for column what the batch writes to ``lag_trends``:
#: per-minute partition rows (last and max lag, produce/consume/log-start rates over the
#: intervals ending in the minute, interpolated lag seconds with the lower-bound flag and the
#: method, retention headroom) and their topic and group rollups, with the catch-up ETA
DUCKDB_TRENDS = """
WITH s AS (
  SELECT group_id, topic, "partition", sweep_ts AS ts, epoch_ms(sweep_ts) / 1000.0 AS t,
         committed_offset AS c, log_end_offset AS e, log_start_offset AS ls,
         greatest(0, log_end_offset - committed_offset) AS lag
  FROM read_parquet('{lake}/offsets/*/*/*.parquet')
), w AS (
  SELECT *, lag(t) OVER k AS pt, lag(c) OVER k AS pc, lag(e) OVER k AS pe, lag(ls) OVER k AS pls
  FROM s WINDOW k AS (PARTITION BY group_id, topic, "partition" ORDER BY t)
), pts AS (
  SELECT group_id, topic, "partition", e, t AS tc, coalesce(pt, t) AS tp, coalesce(pe, e) AS ep
  FROM w WHERE pe IS NULL OR e > pe
), j AS (
  SELECT w.*, p.e AS p_e, p.tc, p.tp, p.ep
  FROM w ASOF LEFT JOIN pts p
    ON w.group_id = p.group_id AND w.topic = p.topic AND w."partition" = p."partition" AND w.c < p.e
), ls AS (
  SELECT *,
         CASE WHEN c IS NULL THEN NULL WHEN lag = 0 THEN 1 WHEN p_e IS NOT NULL THEN 2 END AS method,
         CASE WHEN c IS NULL THEN NULL WHEN lag = 0 THEN 0.0
              WHEN p_e IS NULL THEN NULL
              WHEN c >= ep THEN greatest(0.0, t - (tp + (c - ep + 0.5) / (p_e - ep) * (tc - tp)))
              ELSE greatest(0.0, t - tp) END AS lag_s,
         CASE WHEN c IS NULL OR p_e IS NULL AND lag > 0 THEN NULL ELSE lag > 0 AND c < ep END AS lower
  FROM j
), per AS (
  SELECT group_id, topic, "partition", date_trunc('minute', ts) AS window_start,
         arg_max(lag, t) AS lag_last, max(lag) AS lag_max,
         sum(greatest(e - pe, 0)) / sum(t - pt) AS produce_rate,
         sum(greatest(c - pc, 0)) / sum(t - pt) AS consume_rate,
         sum(greatest(ls - pls, 0)) / sum(t - pt) AS ls_rate,
         arg_max(lag_s, t) AS lag_seconds, arg_max(lower, t) AS lower, arg_max(method, t) AS method,
         arg_max(c, t) AS c_last, arg_max(ls, t) AS ls_last
  FROM ls GROUP BY ALL
), head AS (
  SELECT *, CASE WHEN c_last IS NULL OR ls_last IS NULL THEN NULL WHEN c_last < ls_last THEN 0.0
                 WHEN greatest(coalesce(ls_rate, 0), CASE WHEN ls_last > 0 THEN coalesce(produce_rate, 0) ELSE 0 END)
                      - coalesce(consume_rate, 0) > 0
                 THEN (c_last - ls_last) / (greatest(coalesce(ls_rate, 0), CASE WHEN ls_last > 0
                      THEN coalesce(produce_rate, 0) ELSE 0 END) - coalesce(consume_rate, 0)) END AS headroom
  FROM per
), r AS (
  SELECT group_id, topic, "partition", window_start, sum(lag_last) AS lag_last, sum(lag_max) AS lag_max,
         sum(produce_rate) AS produce_rate, sum(consume_rate) AS consume_rate, max(lag_seconds) AS lag_seconds,
         arg_max(lower, lag_seconds) AS lag_seconds_is_lower_bound, arg_max(method, lag_seconds) AS method,
         min(headroom) AS retention_headroom_s
  FROM head
  GROUP BY GROUPING SETS ((group_id, topic, "partition", window_start), (group_id, topic, window_start),
                          (group_id, window_start))
)
SELECT *, CASE WHEN lag_last = 0 THEN 0.0
               WHEN lag_last > 0 AND consume_rate - produce_rate > 1e-9 * greatest(abs(consume_rate), abs(produce_rate))
               THEN lag_last / (consume_rate - produce_rate) END AS catchup_eta_s
FROM r
"""


def _compare_trends(con: duckdb.DuckDBPyConnection, spark_out: Path, duck_out: Path) -> str:
    """The batch's ``lag_trends`` against DuckDB's: rows matched on their key, largest differences."""
    key = ["group_id", "topic", "partition", "window_start"]
    on = " AND ".join(f'a."{k}" IS NOT DISTINCT FROM b."{k}"' for k in key)
    cols = ["lag_last", "lag_max", "produce_rate", "consume_rate", "lag_seconds", "retention_headroom_s",
            "catchup_eta_s"]
    # relative: a rate difference of 1e-13 (summation order) turns a near-zero net rate into
    # very different, equally meaningless ETAs
    diffs = ", ".join(f"max(abs(a.{c} - b.{c}) / greatest(abs(b.{c}), 1))" for c in cols)
    q = (f"SELECT count(*), count(a.group_id), count(b.group_id), {diffs}, "
         "sum(CASE WHEN a.lag_seconds_is_lower_bound IS DISTINCT FROM b.lag_seconds_is_lower_bound "
         "THEN 1 ELSE 0 END) "
         f"FROM read_parquet('{spark_out}/**/*.parquet', hive_partitioning = true) a "
         f"FULL JOIN read_parquet('{duck_out}') b ON {on}")
    (row,) = con.sql(q).fetchall()
    total, in_spark, in_duck, *d, flags = row
    worst = ", ".join(f"{c} {v if v is not None else 0:.3g}" for c, v in zip(cols, d, strict=True))
    same = total == in_spark == in_duck
    return (f"Same computation: {total:,} rows after a full join on the key ({in_spark:,} from the Spark batch, "
            f"{in_duck:,} from DuckDB{'' if same else ': **rows on one side only**'}); largest relative differences: "
            f"{worst}; lower-bound flags differing: {flags}.")


def _rows(results: Path, table: str) -> int:
    """Rows of a result table (0 when none was written)."""
    folder = results / table
    if not folder.is_dir():
        return 0
    return int(ds.dataset(str(folder), format="parquet", partitioning="hive").count_rows())


# --------------------------------------------------------------------------------------------
# the sections
# --------------------------------------------------------------------------------------------

ROW_HEADER = ["| measurement | rows | seconds | rows/s | peak driver heap MB |", "|---|---:|---:|---:|---:|"]


def _row(label: str, rows: int, seconds: float, heap_mb: float) -> str:
    return f"| {label} | {rows:,} | {seconds:.2f} | {rows / seconds:,.0f} | {heap_mb:,.0f} |"


def batch_section(spark: SparkSession, heap: JvmHeap, args: argparse.Namespace, work: Path) -> list[str]:
    """The batch on Spark beside DuckDB's lag-trend step over the same lake (module doc, 2)."""
    lake = work / "lake"
    sweeps = max(1, args.rows // args.keys)
    t = time.perf_counter()
    n = write_lake(lake, keys=args.keys, groups=args.groups, sweeps=sweeps, interval_s=args.interval_s, t0=T0,
                   chunk_sweeps=max(1, 2_000_000 // args.keys))
    gen_s = time.perf_counter() - t
    until = (T0 + dt.timedelta(seconds=(sweeps - 1) * args.interval_s)).date()
    con = duckdb.connect()
    con.execute("SET threads TO 2")
    con.execute("SET enable_progress_bar = false")
    if args.duckdb_memory:
        con.execute(f"SET memory_limit = '{args.duckdb_memory}'")
    limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]  # type: ignore[index]
    out = ["## The batch", "",
           f"Synthetic lake: {n:,} offset rows ({args.keys:,} partitions × {sweeps:,} sweeps every "
           f"{args.interval_s:g} s, {args.groups} groups, one member each), generated in {gen_s:.1f} s. "
           f"Spark: `run_batch` on local[2], all four result tables; DuckDB: 2 threads, memory_limit {limit}, "
           "the lag-trend table only; alternately, each run after a 3 s pause.", "", *ROW_HEADER]
    spark_s, duck_s = [], []
    for i in range(args.batch_runs):
        shutil.rmtree(work / "results", ignore_errors=True)
        s, mb = timed(heap, lambda: run_batch(spark, lake, work / "results", since=T0.date(), until=until,
                                              settings=AnalyticsConfig(), progress=False), pause_s=3)
        spark_s.append(s)
        out.append(_row(f"batch, 4 result tables, Spark local[2], run {i + 1}", n, s, mb))
        time.sleep(3)
        t = time.perf_counter()
        con.execute(f"COPY ({DUCKDB_TRENDS.format(lake=lake)}) TO '{work / 'duck-trends.parquet'}' (FORMAT parquet)")
        duck_s.append(time.perf_counter() - t)
        out.append(f"| lag-trend step, DuckDB 2 threads (reference), run {i + 1} | {n:,} | {duck_s[-1]:.2f} | "
                   f"{n / duck_s[-1]:,.0f} | – |")
    tables = {t: _rows(work / "results", t) for t in ("lag_trends", "status", "anomalies", "rebalances")}
    out += ["", f"Batch: **{n / spark_s[-1]:,.0f} rows/s** on the last run (target ≥ 1,000,000); Spark's batch / "
            f"DuckDB's lag-trend step: **{spark_s[-1] / duck_s[-1]:.2f}×** on the last runs (target ≤ 1.5×)"
            + (f", {spark_s[0] / duck_s[0]:.2f}× on the first." if len(spark_s) > 1 else "."), "",
            "Rows per result table of the batch: " + ", ".join(f"{k} {v:,}" for k, v in tables.items()) + ".", "",
            _compare_trends(con, work / "results" / "lag_trends", work / "duck-trends.parquet"), ""]
    if not args.workdir:
        shutil.rmtree(lake, ignore_errors=True)
    return out


def incremental_section(spark: SparkSession, heap: JvmHeap, args: argparse.Namespace, work: Path) -> list[str]:
    """One sweep's incremental step with 1 and 7 days of history, and with a rebalance window
    (module doc, 3)."""
    keys = args.incremental_rows
    t_hist = T0 + dt.timedelta(days=10)
    variants = {"1 day of history": (1, 0), "7 days of history": (7, 0),
                f"1 day of history, {args.rebalanced_groups} groups rebalancing": (1, args.rebalanced_groups)}
    primed: dict[str, tuple[Path, dt.datetime]] = {}
    t = time.perf_counter()
    for i, (label, (days, moved)) in enumerate(variants.items()):
        root = work / f"inc-{i}"
        step_t = incremental_lake(root, keys=keys, groups=args.groups, days=days, t_hist=t_hist, rebalanced=moved,
                                  every_min=args.history_every_min)
        prime_incremental(spark, root, root / "primed", t_hist=t_hist, step_t=step_t,
                          every_min=args.history_every_min)
        primed[label] = (root, step_t)
    prime_s = time.perf_counter() - t
    times: dict[str, list[tuple[float, float]]] = {label: [] for label in variants}
    rebalances: dict[str, int] = {}
    for _ in range(args.incremental_runs):
        for label, (root, step_t) in primed.items():
            shutil.rmtree(root / "results", ignore_errors=True)
            shutil.copytree(root / "primed", root / "results")
            times[label].append(timed(heap, lambda root=root, step_t=step_t: run_incremental(
                spark, root, root / "results", settings=AnalyticsConfig(), until=step_t + dt.timedelta(minutes=1)),
                pause_s=3))
            rebalances[label] = _rows(root / "results", "rebalances") - _rows(root / "primed", "rebalances")
    med = {label: statistics.median(s for s, _ in ts) for label, ts in times.items()}
    out = ["## The incremental step", "",
           f"One new sweep of {keys:,} partitions ({args.groups} groups) after a history of one sweep every "
           f"{args.history_every_min} minutes ({24 * 60 // args.history_every_min} sweeps a day: "
           + ("every part of the carried state at its cap after one day" if 24 * 60 // args.history_every_min > 64
              else "fewer than 65 a day: the 1-day state is still below its caps, the ratio includes its warm-up")
           + f"), primed by one step over the history (all three lakes primed in {prime_s:.1f} s); each timed step "
           f"from a copy of the primed results folder, after a 3 s pause, the variants alternating; warm session "
           f"(local[2], {args.shuffle_partitions} shuffle partitions).", "", *ROW_HEADER]
    for label, ts in times.items():
        runs = ", ".join(f"{s:.2f}" for s, _ in ts)
        out.append(_row(f"incremental step, 1 new sweep, {label}: median of {len(ts)} ({runs} s); rebalances rows "
                        f"written: {rebalances[label]}", keys, med[label], max(mb for _, mb in ts)))
    labels = list(variants)
    rb = labels[2]
    out += ["", f"7 days / 1 day of history: **{med[labels[1]] / med[labels[0]]:.2f}** (medians; target ≤ 1.2). "
            f"Slowest median {max(med.values()):.2f} s (target ≤ 3 s). The step with a rebalance window wrote "
            f"**{rebalances[rb]}** rebalances rows"
            + (" (0: is the per-group pass in analytics/groups.py in place?)" if not rebalances[rb] else "")
            + f" for the {args.rebalanced_groups} groups given a new generation.", ""]
    if not args.workdir:
        for root, _ in primed.values():
            shutil.rmtree(root, ignore_errors=True)
    return out


def demo_section(args: argparse.Namespace, work: Path) -> list[str]:
    """The demo's step in a fresh subprocess (:func:`demo_child`; module doc, 1)."""
    m0 = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)).replace(second=0, microsecond=0)
    lake = work / "demo-lake"
    shutil.rmtree(lake, ignore_errors=True)
    counts = demo_lake(lake, m0)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--demo-child", str(lake), "--demo-minute", m0.isoformat(),
           "--demo-runs", str(args.demo_runs), "--driver-memory", args.driver_memory, "--workdir", str(work)]
    spawned = time.time()
    proc = subprocess.run([*cmd, "--spawned", repr(spawned)], capture_output=True, text=True, check=False)
    wall = time.time() - spawned
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"the demo's subprocess failed ({proc.returncode}; its Spark log: {work / 'demo-spark.log'})")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    rows = counts["offsets"]
    warm = got["warm"]
    med = statistics.median(s for s, _ in warm) if warm else float("nan")
    out = ["## The demo's step", "",
           "The `demo` scenario's minute as the collector writes it with the commit stream on: "
           + ", ".join(f"{k} {v:,} rows" for k, v in counts.items())
           + " (12 partitions, 60 sweeps at 1 s; shipping's ship-2 crashes at 20 s and the group is Stable "
           "again at 27 s, generation 2; a stall, a rewind, a slow consumer). In a fresh subprocess with the "
           f"demo's settings: local[2], 2 shuffle partitions, driver memory {args.driver_memory}, the demo's rules "
           "and timeouts; each step a first step (no checkpoint) into an empty results folder.", "", *ROW_HEADER,
           f"| Spark session start (`build_session`) | – | {got['session_s']:.2f} | – | "
           f"{got['session_heap_mb']:,.0f} |",
           _row("first step on the new session", rows, got["first_s"], got["first_heap_mb"]),
           f"| **session start + first step** (target ≤ 20 s) | {rows:,} | **{got['session_s'] + got['first_s']:.2f}** "
           f"| – | – |",
           f"| from the subprocess's spawn to the end of its first step (interpreter, imports, JVM, step) | {rows:,} | "
           f"{got['spawn_to_first_s']:.2f} | – | – |"]
    for i, (s, mb) in enumerate(warm):
        out.append(_row(f"warm step, run {i + 1}", rows, s, mb))
    out += ["", f"Warm step: median **{med:.2f} s** of {len(warm)} (target ≤ 2 s). The subprocess took {wall:.1f} s "
            f"in all. Each step wrote {got['rebalances']} rebalances rows"
            + (" (0: is the per-group pass in place?)" if not got["rebalances"] else "")
            + f" and {got['anomalies']} anomalies rows.", ""]
    return out


def demo_child(args: argparse.Namespace) -> None:
    """The demo's subprocess: the session's start, the first step, the warm steps; one JSON line out."""
    from lagscope.devtools.demo import demo_analytics_config

    lake, work = Path(args.demo_child), Path(args.workdir)
    m0 = dt.datetime.fromisoformat(args.demo_minute)
    settings = demo_analytics_config()
    t = time.perf_counter()
    spark = build_session("local[2]", shuffle_partitions=2, driver_memory=args.driver_memory,
                          log_file=work / "demo-spark.log")
    session_s = time.perf_counter() - t
    heap = JvmHeap(spark)
    session_heap = heap.peak_mb()  # since the JVM started (nothing reset it)
    try:
        def step(i: int) -> Callable[[], object]:
            results = work / f"demo-results-{i}"
            shutil.rmtree(results, ignore_errors=True)
            return lambda: run_incremental(spark, lake, results, settings=settings, since=m0,
                                           until=m0 + dt.timedelta(minutes=1))

        first = step(0)
        heap.reset()
        t = time.perf_counter()
        first()
        first_s = time.perf_counter() - t
        first_heap = heap.peak_mb()
        spawn_to_first = time.time() - args.spawned
        warm = [timed(heap, step(i + 1), pause_s=1) for i in range(args.demo_runs)]
        last = work / f"demo-results-{args.demo_runs}"
        print(json.dumps({"session_s": session_s, "session_heap_mb": session_heap, "first_s": first_s,
                          "first_heap_mb": first_heap, "spawn_to_first_s": spawn_to_first, "warm": warm,
                          "rebalances": _rows(last, "rebalances"), "anomalies": _rows(last, "anomalies")}))
    finally:
        spark.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=5_000_000, help="offset rows of the batch's lake (target run: 50 M)")
    ap.add_argument("--keys", type=int, default=5000, help="partitions of the batch's lake")
    ap.add_argument("--groups", type=int, default=100, help="groups of the batch's and the incremental lakes")
    ap.add_argument("--interval-s", type=float, default=10.0, help="sweep interval of the batch's lake")
    ap.add_argument("--batch-runs", type=int, default=2,
                    help="Spark batches and DuckDB lag-trend steps, alternating (the ratio is taken on the last)")
    ap.add_argument("--duckdb-memory", default=None,
                    help="DuckDB's memory_limit (e.g. 12GB); its default, 80 %% of the machine, leaves too little "
                         "beside Spark at 50 M rows")
    ap.add_argument("--incremental-rows", type=int, default=100_000,
                    help="partitions (rows of the new sweep) of the incremental step (target run: 100,000)")
    ap.add_argument("--incremental-runs", type=int, default=3,
                    help="timed incremental steps per variant, alternating (the median is reported)")
    ap.add_argument("--history-every-min", type=int, default=20,
                    help="the incremental lakes' history: one sweep every this many minutes (default 20: 72 a day, "
                         "so that the carried state reaches its caps within the first day)")
    ap.add_argument("--rebalanced-groups", type=int, default=5,
                    help="groups with a new generation and member set in the incremental step's sweep")
    ap.add_argument("--demo-runs", type=int, default=5, help="warm demo steps timed")
    ap.add_argument("--shuffle-partitions", type=int, default=4,
                    help="the session's shuffle partitions and default parallelism for the batch and the incremental "
                         "steps (lagscope run's default; the demo's subprocess uses the demo's 2)")
    ap.add_argument("--driver-memory", default=AnalyticsConfig().driver_memory,
                    help=f"spark.driver.memory (default: analytics.driver_memory's, {AnalyticsConfig().driver_memory})")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="keep the lakes and results here (default: a temporary folder, removed at the end)")
    ap.add_argument("--skip-demo", action="store_true")
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument("--skip-incremental", action="store_true")
    # the demo's subprocess (demo_child)
    ap.add_argument("--demo-child", help=argparse.SUPPRESS)
    ap.add_argument("--demo-minute", help=argparse.SUPPRESS)
    ap.add_argument("--spawned", type=float, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.demo_child:
        demo_child(args)
        return
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lagscope-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    lines = _Echo([f"# analytics speed ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
                   f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`", "",
                   f"Machine: {platform.machine()}, {os.cpu_count()} cores, {mem_gb:.1f} GB, Python "
                   f"{platform.python_version()}; load average at start {_load()}; driver memory "
                   f"{args.driver_memory}.", ""])
    try:
        if not args.skip_demo:
            lines += demo_section(args, work)
        if not (args.skip_batch and args.skip_incremental):
            spark = build_session("local[2]", shuffle_partitions=args.shuffle_partitions,
                                  driver_memory=args.driver_memory, log_file=work / "spark.log")
            try:
                heap = JvmHeap(spark)
                lines += [f"Spark {spark.version}, Java {spark._jvm.java.lang.System.getProperty('java.version')}, "  # type: ignore[attr-defined]
                          f"driver heap max {heap.max_mb:,.0f} MB; Spark's log: {work / 'spark.log'}.", ""]
                if not args.skip_batch:
                    lines += batch_section(spark, heap, args, work)
                if not args.skip_incremental:
                    lines += incremental_section(spark, heap, args, work)
            finally:
                spark.stop()
        lines += [f"Load average at end {_load()}; {time.perf_counter() - started:.0f} s in all.", ""]
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


class _Echo(list[str]):
    """A list of report lines that also prints each line as it is added."""

    def __init__(self, first: list[str]) -> None:
        super().__init__()
        self += first

    def append(self, line: str) -> None:
        super().append(line)
        print(line, flush=True)

    def __iadd__(self, more: object) -> _Echo:
        for line in more:  # type: ignore[attr-defined]
            self.append(line)
        return self


if __name__ == "__main__":
    main()
