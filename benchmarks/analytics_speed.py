"""Speed of the analytics on a synthetic lake, side by side in one run.

    .venv/bin/python benchmarks/analytics_speed.py --rows 5000000 --incremental-rows 100000

1. full batch (all four result tables) over a lake of ``--rows`` offset rows, in this process
   on the machine's cores (``--engine auto``, ``--batch-runs`` times) and on Spark local[2]
   (``--engine spark``), and their result tables compared row for row
   (``batch_engines_compare.py``);
2. the lag-trend step (series → minute rows with lag in seconds, stored once as the job stores
   them → per-minute trends with their topic and group rollups, written to Parquet) in Spark
   beside the same computation in DuckDB (window LAG, ASOF join for the interpolation,
   per-minute aggregation, grouping sets), alternately, twice each (the first run pays the
   engine's warm-up; the ratio is taken on the second); the two outputs are joined on their
   key and compared, so the reference computes what Spark computes;
3. Spark's floor on the same lake: read, one shuffle by key, one sort, one window column, no
   output (what any per-partition series job costs at least on this machine);
4. one incremental step over one new sweep of ``--incremental-rows`` rows, with 1 day and with
   7 days of history in the lake, timed alternately from the same primed state
   (``--incremental-runs`` each; the ratio of the medians shows whether the cost follows the new
   data), by both engines (``auto``: in this process, ``spark``: on Spark), and the Spark floor
   of such a step (read the sweep and the carried series, one shuffle and
   sort by key, one window, write one table and one state part).

Prints a Markdown report (redirect it to benchmarks/results/analytics_speed.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics.io import read_checkpoint, read_lake
from lagscope.analytics.job import Settings, run_batch, run_incremental
from lagscope.analytics.series import KEY, prepare_series
from lagscope.analytics.session import build_session
from lagscope.analytics.trends import transform_lag_seconds, transform_lag_trends
from lagscope.lake import write_table
from lagscope.schema import MEMBERS, OFFSETS

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


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
    ts = np.array([t0 + dt.timedelta(seconds=i * interval_s) for i in range(sweeps)], dtype="datetime64[ms]")
    n = sweeps * keys
    return _complete(n, pa.table({
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
    }))


def _complete(n: int, table: pa.Table) -> pa.Table:
    """Add the schema's other columns as nulls."""
    for f in OFFSETS.schema:
        if f.name not in table.column_names:
            table = table.append_column(f.name, pa.nulls(n, f.type))
    return table


def members_batch(groups: int, t0: dt.datetime, sweeps: int, interval_s: float) -> pa.Table:
    ts = [t0 + dt.timedelta(seconds=i * interval_s) for i in range(sweeps)]
    rows = [{"sweep_ts": t, "group_id": f"g{g}", "group_state": "Stable", "generation": 1, "member_id": f"m-g{g}",
             "assignment": [{"topic": "events", "partition": 0}]} for t in ts for g in range(groups)]
    return pa.Table.from_pylist(rows, schema=MEMBERS.schema)


def write_lake(root: Path, *, keys: int, groups: int, sweeps: int, interval_s: float, t0: dt.datetime,
               chunk_sweeps: int) -> int:
    total = 0
    for start in range(0, sweeps, chunk_sweeps):
        n = min(chunk_sweeps, sweeps - start)
        t = t0 + dt.timedelta(seconds=start * interval_s)
        write_table(root, OFFSETS, "bench", offsets_batch(keys, groups, t, n, interval_s, seed=start))
        write_table(root, MEMBERS, "bench", members_batch(groups, t, n, interval_s))
        total += n * keys
    return total


#: the lag-trend table in DuckDB, column for column what ``transform_lag_trends`` computes:
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--interval-s", type=float, default=10.0)
    ap.add_argument("--incremental-rows", type=int, default=100_000)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument("--skip-incremental", action="store_true")
    ap.add_argument("--batch-runs", type=int, default=2,
                    help="timed in-process batches (--engine auto; the Spark batch runs once, after them)")
    ap.add_argument("--incremental-runs", type=int, default=3,
                    help="timed incremental steps per history length, alternating (the median is reported)")
    ap.add_argument("--duckdb-memory", default=None,
                    help="DuckDB's memory_limit (e.g. 12GB); its default, 80 %% of the machine, leaves too little "
                         "beside Spark's driver at 50 M rows")
    ap.add_argument("--incremental-shuffle-partitions", type=int, default=2,
                    help="lagscope analyze --shuffle-partitions for the incremental steps (small data)")
    ap.add_argument("--state-sweeps", type=int, default=70,
                    help="also time the in-process step after this many history sweeps (one day), enough for every "
                         "partition's carried state to reach its caps (64 gap samples, the Burrow window); 0: skip")
    args = ap.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lagscope-bench-"))
    lines = _Echo([f"# analytics speed ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"load average at start {os.getloadavg()[0]:.1f} (shared machine)", ""])
    spark = build_session("local[2]", shuffle_partitions=8, driver_memory="4g")
    try:
        lake = work / "lake"
        sweeps = max(1, args.rows // args.keys)
        t = time.perf_counter()
        n = write_lake(lake, keys=args.keys, groups=args.groups, sweeps=sweeps, interval_s=args.interval_s, t0=T0,
                       chunk_sweeps=max(1, 2_000_000 // args.keys))
        gen_s = time.perf_counter() - t
        lines += [f"Synthetic lake: {n:,} offset rows ({args.keys:,} partitions × {sweeps:,} sweeps every "
                  f"{args.interval_s:g} s, {args.groups} groups), generated in {gen_s:.1f} s.", ""]
        lines += ["| step | rows | seconds | rows/s |", "|---|---:|---:|---:|"]
        if not args.skip_batch:
            lines += _batches(spark, lake, work, n, until=(T0 + dt.timedelta(seconds=sweeps * args.interval_s)).date(),
                              runs=args.batch_runs)
        # lag-trend step, Spark vs DuckDB (both read the lake and write Parquet), each run twice:
        # the first run pays each engine's warm-up (Spark's code generation, DuckDB's first
        # read), the second is the steady state a recurring job sees; the ratio is taken on it
        off = read_lake(spark, lake, "offsets", since=T0.date(), until=T0.date() + dt.timedelta(days=30))
        con = duckdb.connect()
        con.execute("SET threads TO 2")
        con.execute("SET enable_progress_bar = false")
        if args.duckdb_memory:
            con.execute(f"SET memory_limit = '{args.duckdb_memory}'")
        limit = con.execute("SELECT current_setting('memory_limit')").fetchone()[0]  # type: ignore[index]
        lines += ["", f"DuckDB: 2 threads, memory_limit {limit}; Spark: local[2], 4 GB driver.", ""]
        spark_runs, duck_runs = [], []
        for _ in range(2):
            t = time.perf_counter()
            # as the job does: the minute rows are stored once (they feed the partition rows and
            # the rollups; the job's status reads them too), then the table is written
            rows = transform_lag_seconds(prepare_series(off)).localCheckpoint(
                eager=True, storageLevel=StorageLevel.DISK_ONLY)
            transform_lag_trends(rows).write.mode("overwrite").parquet(str(work / "spark-trends"))
            rows._jdf.logicalPlan().rdd().unpersist(False)
            spark_runs.append(time.perf_counter() - t)
            t = time.perf_counter()
            con.execute(f"COPY ({DUCKDB_TRENDS.format(lake=lake)}) TO '{work / 'duck-trends.parquet'}' "
                        "(FORMAT parquet)")
            duck_runs.append(time.perf_counter() - t)
        for i, label in enumerate(("first run", "second run")):
            lines.append(f"| lag-trend step, {label} (Spark local[2]) | {n:,} | {spark_runs[i]:.1f} | "
                         f"{n / spark_runs[i]:,.0f} |")
            lines.append(f"| lag-trend step, {label} (DuckDB, 2 threads) | {n:,} | {duck_runs[i]:.1f} | "
                         f"{n / duck_runs[i]:,.0f} |")
        spark_s, duck_s = spark_runs[1], duck_runs[1]
        # Spark's floor here: the least any per-partition series job does (read the lake, one
        # shuffle by key, one sort, one window column; nothing written)
        key_w = Window.partitionBy("cluster", "group_id", "topic", "partition").orderBy("sweep_ts")
        t = time.perf_counter()
        off.select(F.lag("committed_offset").over(key_w)).write.format("noop").mode("overwrite").save()
        floor_s = time.perf_counter() - t
        lines.append(f"| floor: read, shuffle by key, sort, one window column, no output (Spark local[2]) | {n:,} | "
                     f"{floor_s:.1f} | {n / floor_s:,.0f} |")
        lines += ["", f"Spark / DuckDB on the lag-trend step: **{spark_s / duck_s:.2f}×** on the second runs "
                  f"(target ≤ 1.5×); {spark_runs[0] / duck_runs[0]:.2f}× on the first.", "",
                  _compare_trends(con, work / "spark-trends", work / "duck-trends.parquet"), ""]
        spark.conf.set("spark.sql.shuffle.partitions", str(args.incremental_shuffle_partitions))

        # incremental step with 1 and 7 days of history: both lakes primed first, then the step
        # timed alternately (1 d, 7 d, 1 d, 7 d, …) from the same primed state, so a change in
        # the machine's load hits both histories alike; the ratio is of the medians
        if not args.skip_incremental:
            keys = args.incremental_rows
            t_hist = T0 + dt.timedelta(days=10)
            primed: dict[int, tuple[Path, dt.datetime]] = {}
            for days in (1, 7):
                root = work / f"inc-{days}d"
                # one sweep every 6 hours of history, then the step's sweep
                hist_sweeps = days * 4
                for d in range(hist_sweeps):
                    ts = t_hist + dt.timedelta(hours=6 * d)
                    write_table(root, OFFSETS, "bench", offsets_batch(keys, args.groups, ts, 1, 3600, seed=d))
                step_t = t_hist + dt.timedelta(hours=6 * hist_sweeps)
                write_table(root, OFFSETS, "bench", offsets_batch(keys, args.groups, step_t, 1, 60, seed=999))
                run_incremental(spark, root, root / "primed", settings=Settings(), since=t_hist, until=step_t)
                primed[days] = (root, step_t)
            root, step_t = primed[1]
            shutil.copytree(root / "primed", root / "results")
            floors = [_incremental_floor(spark, root, step_t) for _ in range(2)]
            lines += ["| incremental | rows | seconds | rows/s |", "|---|---:|---:|---:|"]
            lines.append(f"| floor of an incremental step: read the new sweep and the carried series, one "
                         f"shuffle and sort by key, one window, write one table and one state part, second "
                         f"of two runs (Spark local[2]) | {keys:,} | {floors[1]:.2f} | {keys / floors[1]:,.0f} |")
            # each engine from the same primed state: ``auto`` (the step in this process, what a
            # step without a rebalance window runs on) and ``spark`` (the Spark step, what a
            # step with one runs on), alternating
            engines = ("auto", "spark")
            inc_times: dict[tuple[str, int], list[float]] = {(e, d): [] for e in engines for d in primed}
            for _ in range(args.incremental_runs):
                for engine in engines:
                    for days, (root, step_t) in primed.items():
                        shutil.rmtree(root / "results", ignore_errors=True)
                        shutil.copytree(root / "primed", root / "results")
                        # each step starts on a quiet machine: the previous Spark step's cleanup
                        # (its stored rows freed, its shuffle files deleted, the JVM's collector)
                        # runs in the background for a while after it returned
                        time.sleep(3)
                        t = time.perf_counter()
                        run_incremental(spark, root, root / "results", settings=Settings(),
                                        until=step_t + dt.timedelta(minutes=1), engine=engine)
                        inc_times[(engine, days)].append(time.perf_counter() - t)
            med = {k: statistics.median(ts) for k, ts in inc_times.items()}
            label = {"auto": "in this process (--engine auto)",
                     "spark": f"on Spark (--engine spark, --shuffle-partitions {args.incremental_shuffle_partitions})"}
            for (engine, days), ts in inc_times.items():
                runs = ", ".join(f"{x:.2f}" for x in ts)
                lines.append(f"| incremental step {label[engine]}, 1 new sweep, {days} day(s) of history, median "
                             f"of {len(ts)} runs ({runs} s) | {keys:,} | {med[(engine, days)]:.2f} | "
                             f"{keys / med[(engine, days)]:,.0f} |")
            for root, _ in primed.values():
                shutil.rmtree(root, ignore_errors=True)
            lines += [""]
            for engine in engines:
                lines.append(f"Incremental step {label[engine]} at 7 days / 1 day of history: "
                             f"**{med[(engine, 7)] / med[(engine, 1)]:.2f}** (medians; target ≤ 1.2).")
            lines += ["", "The step reads only the new sweep's date partition and the carried state.", ""]
            if args.state_sweeps:
                lines += _full_state_step(spark, work, keys, args.groups, args.state_sweeps, args.incremental_runs)
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def _batches(spark: SparkSession, lake: Path, work: Path, n: int, *, until: dt.date, runs: int) -> list[str]:
    """The full batch by both engines: in this process and its forks on the machine's cores
    (``--engine auto``, ``runs`` times, each after a quiet pause), then on Spark local[2]; the
    rows of each result table from both."""
    out = []
    for i in range(runs):
        shutil.rmtree(work / "results-auto", ignore_errors=True)
        time.sleep(3)
        t = time.perf_counter()
        run_batch(None, lake, work / "results-auto", since=T0.date(), until=until, settings=Settings(),
                  progress=False, engine="auto")
        s = time.perf_counter() - t
        out.append(f"| full batch, 4 result tables, in this process on {os.cpu_count()} cores (--engine auto), "
                   f"run {i + 1} | {n:,} | {s:.1f} | {n / s:,.0f} |")
    time.sleep(3)
    t = time.perf_counter()
    run_batch(spark, lake, work / "results", since=T0.date(), until=until, settings=Settings(), progress=False,
              engine="spark")
    s = time.perf_counter() - t
    out.append(f"| full batch, 4 result tables (--engine spark, Spark local[2]) | {n:,} | {s:.1f} | {n / s:,.0f} |")
    # the two batches row for row (benchmarks/batch_engines_compare.py, this script's folder)
    from batch_engines_compare import compare

    con = duckdb.connect()
    con.execute("SET threads = 2")
    rows = [compare(work / "results-auto", work / "results", table, con)
            for table in ("lag_trends", "status", "anomalies", "rebalances")]
    out += ["", "The two batches' result tables (first: in this process, second: on Spark):", "",
            "| table | rows (first) | rows (second) | rows on one side only (first / second) | "
            "largest relative difference of the doubles | same |", "|---|---:|---:|---:|---|---|",
            *(line for line, _ in rows), "", "| step | rows | seconds | rows/s |", "|---|---:|---:|---:|"]
    if not all(same for _, same in rows):
        print("\n".join(out))
        raise SystemExit("the engines' batches differ (above)")
    return out


def _full_state_step(spark: SparkSession, work: Path, keys: int, groups: int, sweeps: int, runs: int) -> list[str]:
    """The in-process step over one new sweep after ``sweeps`` history sweeps in one day (primed
    by in-process steps of at most 2 M rows): every partition's carried state at its caps, the
    most a step carries. Returns report lines."""
    root = work / "inc-full-state"
    t_hist = T0 + dt.timedelta(days=10)
    every = dt.timedelta(days=1) / sweeps
    for d in range(sweeps):
        write_table(root, OFFSETS, "bench", offsets_batch(keys, groups, t_hist + every * d, 1, 3600, seed=d))
    step_t = t_hist + dt.timedelta(days=1)
    write_table(root, OFFSETS, "bench", offsets_batch(keys, groups, step_t, 1, 60, seed=999))
    per = max(1, 2_000_000 // keys)
    edges = [t_hist + every * i for i in range(per, sweeps, per)] + [step_t]
    run_incremental(spark, root, root / "primed", settings=Settings(), since=t_hist, until=edges[0])
    for edge in edges[1:]:
        run_incremental(spark, root, root / "primed", settings=Settings(), until=edge)
    times = []
    for _ in range(runs):
        shutil.rmtree(root / "results", ignore_errors=True)
        shutil.copytree(root / "primed", root / "results")
        time.sleep(3)
        t = time.perf_counter()
        run_incremental(spark, root, root / "results", settings=Settings(), until=step_t + dt.timedelta(minutes=1))
        times.append(time.perf_counter() - t)
    cp = read_checkpoint(root / "results")
    assert cp is not None
    state_mb = sum(f.stat().st_size for f in (root / "results" / "_state" / cp["version"]).rglob("*.parquet")) / 1e6
    shutil.rmtree(root, ignore_errors=True)
    med = statistics.median(times)
    return ["| incremental | rows | seconds | rows/s |", "|---|---:|---:|---:|",
            f"| incremental step in this process (--engine auto), 1 new sweep after {sweeps} sweeps of history "
            f"(every partition's state at its caps; state {state_mb:.0f} MB), median of {runs} runs "
            f"({', '.join(f'{x:.2f}' for x in times)} s) | {keys:,} | {med:.2f} | {keys / med:,.0f} |", ""]


def _incremental_floor(spark: SparkSession, root: Path, step_t: dt.datetime) -> float:
    """The least an incremental step with a carried state does on this machine: read the new
    sweep and the carried per-key series rows, one shuffle and sort by key, one window (previous
    and next row), write one result table and the next state part. Returns seconds."""
    cp = read_checkpoint(root / "results")
    assert cp is not None
    out = root / "floor-out"
    shutil.rmtree(out, ignore_errors=True)
    t = time.perf_counter()
    off = read_lake(spark, root, "offsets", since=step_t.date(), until=step_t.date())
    until = step_t + dt.timedelta(minutes=1)
    off = off.where((F.col("sweep_ts") >= F.lit(step_t)) & (F.col("sweep_ts") < F.lit(until)))
    fresh = prepare_series(off).withColumn("is_state", F.lit(False))
    carried = spark.read.parquet(str(root / "results" / "_state" / cp["version"] / "series")).select(*fresh.columns)
    w = Window.partitionBy(*KEY).orderBy("t")
    both = fresh.unionByName(carried).withColumns({"prev_committed": F.lag("committed").over(w),
                                                   "next_t": F.lead("t").over(w)})
    both = both.localCheckpoint(eager=True)
    (both.where(~F.col("is_state")).withColumn("date", F.date_format("ts", "yyyy-MM-dd"))
     .write.mode("overwrite").partitionBy("cluster", "date").parquet(str(out / "table")))
    both.where(F.col("next_t").isNull()).write.mode("overwrite").parquet(str(out / "state"))
    s = time.perf_counter() - t
    both._jdf.logicalPlan().rdd().unpersist(False)  # free the stored rows, as a step does
    shutil.rmtree(out, ignore_errors=True)
    return s


def _compare_trends(con: duckdb.DuckDBPyConnection, spark_out: Path, duck_out: Path) -> str:
    """Both engines computed the same table: rows matched on their key, largest differences."""
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
         f"FROM read_parquet('{spark_out}/*.parquet') a FULL JOIN read_parquet('{duck_out}') b ON {on}")
    (row,) = con.sql(q).fetchall()
    total, in_spark, in_duck, *d, flags = row
    worst = ", ".join(f"{c} {v if v is not None else 0:.3g}" for c, v in zip(cols, d, strict=True))
    return (f"Same computation: {total:,} rows after a full join on the key ({in_spark:,} from Spark, "
            f"{in_duck:,} from DuckDB); largest relative differences: {worst}; lower-bound flags differing: {flags}.")


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
