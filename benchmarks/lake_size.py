"""Bytes per offsets row in the lake, per-sweep files vs one compacted hour, for sizing.

    .venv/bin/python benchmarks/lake_size.py [--groups 50] [--partitions 20] [--interval 15]

Synthetic but realistic rows: long member ids, hosts, growing offsets, random lag. Writes
one hour of sweeps (a) as one file per sweep, as the collector writes them, and (b) as one
file, as compaction leaves a closed hour. Prints rows, bytes and bytes per row for both.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import tempfile
from pathlib import Path

from lagscope.lake import write_rows
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
                         "group_state": "Stable", "lag": end - committed})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--interval", type=float, default=15.0)
    args = ap.parse_args()
    rng = random.Random(1)
    t0 = dt.datetime(2026, 11, 20, 10, tzinfo=dt.UTC)
    sweeps = int(3600 / args.interval)
    with tempfile.TemporaryDirectory() as per_sweep, tempfile.TemporaryDirectory() as hourly:
        everything: list[dict[str, object]] = []
        for s in range(sweeps):
            rows = sweep_rows(t0 + dt.timedelta(seconds=args.interval * s), s, args.groups, args.partitions, rng)
            write_rows(per_sweep, OFFSETS, "prod", rows)
            everything += rows
        write_rows(hourly, OFFSETS, "prod", everything)
        for name, root in (("one file per sweep", per_sweep), ("compacted hour", hourly)):
            size = sum(f.stat().st_size for f in Path(root).rglob("*.parquet"))
            print(f"{name:20s} rows {len(everything):>9,}  bytes {size:>12,}  bytes/row {size / len(everything):6.1f}"
                  f"  MB/day {size * 24 / 1e6:8.1f}")


if __name__ == "__main__":
    main()
