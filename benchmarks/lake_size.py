"""Bytes per offsets row in the lake, per-sweep files vs one compacted hour, and the result tables
of that hour, for sizing (``collector.retention``, ``analytics.retention``).

    .venv/bin/python benchmarks/lake_size.py [--groups 50] [--partitions 20] [--interval 15]

Synthetic but realistic rows: long member ids, hosts, growing offsets, random lag. Writes
one hour of sweeps (a) as one file per sweep, as the collector writes them, and (b) as one
file, as compaction leaves a closed hour. Then (c) analyses that hour as ``lagscope run``'s
analytics loop does, one incremental step per minute (the step's passes in this process, the
state carried in memory; no members rows, so no rebalances), and publishes each step's result
files as the loop does. Prints rows, files, bytes and bytes per row of each.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa

from lagscope.analytics import step as steps
from lagscope.analytics.io import new_staging, publish_incremental, spark_arrow_schema, stage_arrow
from lagscope.analytics.job import RESULT_TABLES
from lagscope.config import AnalyticsConfig
from lagscope.lake import write_rows
from lagscope.results import inc_tag
from lagscope.schema import OFFSETS


def sweep_rows(ts: dt.datetime, s: int, groups: int, partitions: int, rng: random.Random) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for g in range(groups):
        for p in range(partitions):
            end = 10_000_000 + s * 500 + p
            committed = end - rng.randint(0, 300)
            rows.append({"sweep_ts": ts, "group_id": f"service-{g}-consumer", "topic": f"topic-{g % 10}",
                         "partition": p, "committed_offset": committed, "commit_leader_epoch": 3,
                         "log_start_offset": 0, "log_end_offset": end, "last_stable_offset": end,
                         "member_id": f"consumer-{g}-{p % 4}-8f2a1c7e-1b2c-4d5e-9f00-123456789abc",
                         "client_id": f"consumer-{g}-{p % 4}", "host": f"/10.0.{g}.{p % 4}",
                         "group_state": "Stable", "lag": end - committed, "lag_basis": "hw"})
    return rows


def analyse_per_minute(sweeps: list[list[dict[str, object]]], per_minute: int, t0: dt.datetime,
                       results: Path) -> int:
    """One incremental step per minute over ``sweeps`` (``per_minute`` of them each), its result
    files published under ``results`` as the analytics loop does; returns the result rows."""
    state: dict[str, pa.Table] = {}
    members = spark_arrow_schema("members").empty_table().select(steps.READ_COLUMNS["members"])
    rows_out = 0
    for minute in range(len(sweeps) // per_minute):
        rows = [{**r, "cluster": "prod", "date": t0.date().isoformat()}
                for sweep in sweeps[minute * per_minute:(minute + 1) * per_minute] for r in sweep]
        offsets = pa.Table.from_pylist(rows, schema=spark_arrow_schema("offsets")).select(steps.READ_COLUMNS["offsets"])
        until = t0 + dt.timedelta(minutes=minute + 1)
        out = steps.run_step(steps.StepInputs(offsets, members, None, None, state), settings=AnalyticsConfig(),
                             as_of=until)
        state = out.state
        staged = {}
        for name, table in out.tables.items():
            staged[name] = new_staging(results, name)
            stage_arrow(staged[name], name, table)
            rows_out += table.num_rows
        publish_incremental(results, staged, tag=inc_tag(until - dt.timedelta(minutes=1), until))
        shutil.rmtree(results / ".staging", ignore_errors=True)
    return rows_out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--interval", type=float, default=15.0)
    args = ap.parse_args()
    rng = random.Random(1)
    t0 = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
    sweeps = int(3600 / args.interval)
    with (tempfile.TemporaryDirectory() as per_sweep, tempfile.TemporaryDirectory() as hourly,
          tempfile.TemporaryDirectory() as results):
        everything: list[dict[str, object]] = []
        by_sweep: list[list[dict[str, object]]] = []
        for s in range(sweeps):
            rows = sweep_rows(t0 + dt.timedelta(seconds=args.interval * s), s, args.groups, args.partitions, rng)
            write_rows(per_sweep, OFFSETS, "prod", rows)
            everything += rows
            by_sweep.append(rows)
        write_rows(hourly, OFFSETS, "prod", everything)
        result_rows = analyse_per_minute(by_sweep, int(60 / args.interval), t0, Path(results))
        for name, root, n in (("one file per sweep", per_sweep, len(everything)),
                              ("compacted hour", hourly, len(everything)),
                              ("result tables", results, result_rows)):
            files = list(Path(root).rglob("*.parquet"))
            size = sum(f.stat().st_size for f in files)
            print(f"{name:20s} rows {n:>9,}  files {len(files):>6,}  bytes {size:>12,}  bytes/row {size / n:6.1f}"
                  f"  MB/day {size * 24 / 1e6:8.1f}")
        for table in RESULT_TABLES:
            files = list((Path(results) / table).rglob("*.parquet"))
            print(f"  {table:18s} files {len(files):>6,}  bytes {sum(f.stat().st_size for f in files):>12,}")


if __name__ == "__main__":
    main()
