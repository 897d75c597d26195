"""Speed of the analytics on a synthetic lake, side by side in one run.

    .venv/bin/python benchmarks/analytics_speed.py --rows 5000000 --incremental-rows 100000

1. full batch (all four result tables) over a lake of ``--rows`` offset rows on local[2];
2. the lag-trend step (series → lag in seconds → per-minute trends, written to Parquet) in
   Spark beside the same computation in DuckDB (window LAG, ASOF join for the interpolation,
   per-minute aggregation);
3. one incremental step over one new sweep of ``--incremental-rows`` rows, with 1 day and with
   7 days of history in the lake (the ratio shows whether the cost follows the new data).

Prints a Markdown report (redirect it to benchmarks/results/analytics_speed.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from lagscope.analytics.io import read_lake
from lagscope.analytics.job import Settings, run_batch, run_incremental
from lagscope.analytics.series import enrich_series, prepare_series
from lagscope.analytics.session import build_session
from lagscope.analytics.trends import transform_lag_seconds, transform_lag_trends
from lagscope.lake import write_table
from lagscope.schema import MEMBERS, OFFSETS

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def offsets_batch(keys: int, groups: int, t0: dt.datetime, sweeps: int, interval_s: float, seed: int) -> pa.Table:
    """``sweeps`` sweeps of ``keys`` (group, partition) rows: ends grow ~Poisson, consumers
    keep up with a small random lag."""
    rng = np.random.default_rng(seed)
    k = np.arange(keys)
    parts_per_group = max(1, keys // groups)
    group = np.array([f"g{i}" for i in range(groups)])[np.minimum(k // parts_per_group, groups - 1)]
    partition = (k % parts_per_group).astype(np.int32)
    base_rate = rng.uniform(1, 50, keys)
    ends = np.cumsum(rng.poisson(np.tile(base_rate * interval_s, (sweeps, 1))), axis=0).astype(np.int64)
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


DUCKDB_TRENDS = """
WITH s AS (
  SELECT group_id, topic, "partition", sweep_ts AS ts, epoch_ms(sweep_ts) / 1000.0 AS t,
         committed_offset AS c, log_end_offset AS e, log_start_offset AS ls,
         greatest(0, log_end_offset - committed_offset) AS lag
  FROM read_parquet('{lake}/offsets/*/*/*.parquet')
), w AS (
  SELECT *, lag(t) OVER k AS pt, lag(c) OVER k AS pc, lag(e) OVER k AS pe
  FROM s WINDOW k AS (PARTITION BY group_id, topic, "partition" ORDER BY t)
), pts AS (
  SELECT group_id, topic, "partition", e, t AS tc, coalesce(pt, t) AS tp, coalesce(pe, e) AS ep
  FROM w WHERE pe IS NULL OR e > pe
), j AS (
  SELECT w.*, p.e AS p_e, p.tc, p.tp, p.ep
  FROM w ASOF LEFT JOIN pts p
    ON w.group_id = p.group_id AND w.topic = p.topic AND w."partition" = p."partition" AND w.c < p.e
), ls AS (
  SELECT *, CASE WHEN lag = 0 THEN 0.0
                 WHEN c >= ep THEN t - (tp + (c - ep + 0.5) / (p_e - ep) * (tc - tp))
                 ELSE t - tp END AS lag_s
  FROM j
)
SELECT group_id, topic, "partition", date_trunc('minute', ts) AS window_start,
       arg_max(lag, t) AS lag_last, max(lag) AS lag_max,
       sum(greatest(e - pe, 0)) / sum(t - pt) AS produce_rate,
       sum(greatest(c - pc, 0)) / sum(t - pt) AS consume_rate,
       arg_max(lag_s, t) AS lag_seconds
FROM ls GROUP BY ALL
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
            t = time.perf_counter()
            run_batch(spark, lake, work / "results", since=T0.date(), until=(T0 + dt.timedelta(
                seconds=sweeps * args.interval_s)).date(), settings=Settings(), progress=False)
            s = time.perf_counter() - t
            lines.append(f"| full batch, 4 result tables (Spark local[2]) | {n:,} | {s:.1f} | {n / s:,.0f} |")
        # lag-trend step, Spark vs DuckDB (both read the lake and write Parquet)
        t = time.perf_counter()
        off = read_lake(spark, lake, "offsets", since=T0.date(), until=T0.date() + dt.timedelta(days=30))
        trends = transform_lag_trends(transform_lag_seconds(enrich_series(prepare_series(off))))
        trends.write.mode("overwrite").parquet(str(work / "spark-trends"))
        spark_s = time.perf_counter() - t
        con = duckdb.connect()
        con.execute("SET threads TO 2")
        t = time.perf_counter()
        con.execute(f"COPY ({DUCKDB_TRENDS.format(lake=lake)}) TO '{work / 'duck-trends.parquet'}' (FORMAT parquet)")
        duck_s = time.perf_counter() - t
        lines.append(f"| lag-trend step (Spark local[2]) | {n:,} | {spark_s:.1f} | {n / spark_s:,.0f} |")
        lines.append(f"| lag-trend step (DuckDB, 2 threads) | {n:,} | {duck_s:.1f} | {n / duck_s:,.0f} |")
        lines += ["", f"Spark / DuckDB on the lag-trend step: **{spark_s / duck_s:.2f}×** (target ≤ 1.5×).", ""]

        # incremental step with 1 and 7 days of history
        inc_times = {}
        for days in (1, 7):
            root = work / f"inc-{days}d"
            keys = args.incremental_rows
            # one sweep every 6 hours of history, then the step's sweep
            hist_sweeps = days * 4
            t_hist = T0 + dt.timedelta(days=10)
            for d in range(hist_sweeps):
                ts = t_hist + dt.timedelta(hours=6 * d)
                write_table(root, OFFSETS, "bench", offsets_batch(keys, args.groups, ts, 1, 3600, seed=d))
            step_t = t_hist + dt.timedelta(hours=6 * hist_sweeps)
            write_table(root, OFFSETS, "bench", offsets_batch(keys, args.groups, step_t, 1, 60, seed=999))
            # prime the state with the history (one step), then time the step over the new sweep
            run_incremental(spark, root, root / "results", settings=Settings(), since=t_hist, until=step_t)
            t = time.perf_counter()
            run_incremental(spark, root, root / "results", settings=Settings(),
                            until=step_t + dt.timedelta(minutes=1))
            inc_times[days] = time.perf_counter() - t
            lines.append(f"| incremental step, 1 new sweep, {days} day(s) of history | {keys:,} | "
                         f"{inc_times[days]:.2f} | {keys / inc_times[days]:,.0f} |")
            shutil.rmtree(root, ignore_errors=True)
        lines += ["", f"Incremental step at 7 days / 1 day of history: **{inc_times[7] / inc_times[1]:.2f}** "
                  "(target ≤ 1.2; the step reads only the new sweep's date partition and the carried state).", ""]
    finally:
        spark.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


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
