"""The ``__consumer_offsets`` tail writing a lake in a bucket, killed with SIGKILL during its writes:
``--kills`` times (20), each restart resuming from the bucket's positions object; then one clean
run to the end. Counts what a reader would be harmed by, and times a flush to S3 against disk.

    .venv/bin/python benchmarks/commitlog_s3_kill.py [--kills 20] [--records 3000]

The S3 server is the tests' real gofakes3 process on loopback (``scripts/setup.sh`` installs it);
the tail reads a synthetic ``__consumer_offsets`` (the tests' in-memory consumer: offset commits of
two groups over four partitions, a group generation every tenth record) and flushes every 25
records, so that most kills land inside a flush (its intent saved, its files half-written or its
markers not yet). After each kill it counts, through the lake's reader: rows a reader takes twice,
objects a reader takes that do not read whole, objects left without a marker (invisible), and
whether the kill left a flush's intent (``pending``) in the positions object. At the end: every
record's row is in the bucket exactly once.

Prints one Markdown block (the figures in benchmarks/results/commitlog_s3.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "collector")]

from commitlog_records import Group, Member, consumer_assignment, group_key, group_value, offset_key, offset_value  # noqa: E402
from helpers.s3server import S3Server  # noqa: E402
from test_commitlog import Rec, _factory  # noqa: E402

from lagscope import lake  # noqa: E402
from lagscope.collector.commitlog import CommitLogTailer  # noqa: E402

T0 = 1_790_000_000_000

_CHILD = """
import sys, time
sys.path[:0] = {paths!r}
from commitlog_s3_kill import synthetic_log
from test_commitlog import _factory
from lagscope.collector.commitlog import CommitLogTailer
from lagscope.config import StorageConfig
from lagscope.storage import open_store

store = open_store({url!r}, StorageConfig(endpoint={endpoint!r}, path_style=True, credentials="env"))
t = CommitLogTailer("x:1", store, "bench", start="earliest", consumer_factory=_factory(synthetic_log({n})),
                    max_poll_records=25, flush_records=25, poll_timeout_ms=0)
t.open()
print("open", flush=True)
while True:
    t.run_once(0)
    if t.measure_lag() == 0:
        t.flush()
        print("done", flush=True)
        time.sleep(600)
"""


def synthetic_log(n: int) -> dict[int, list[Rec]]:
    """``n`` offset commits over four partitions, a generation every tenth."""
    log: dict[int, list[Rec]] = {p: [] for p in range(4)}
    a = consumer_assignment([("orders", [0, 1, 2, 3])])
    for i in range(n):
        p = i % 4
        part = log[p]
        ts = T0 + i * 100
        part.append(Rec(len(part), offset_key(f"g{i % 2}", "orders", i % 8), offset_value(3, i, "", ts), ts))
        if i % 10 == 0:
            g = Group(generation=i, leader="m1", state_ts=ts,
                      members=[Member("m1", session_timeout=10_000, rebalance_timeout=20_000, assignment=a)])
            part.append(Rec(len(part), group_key(f"g{i % 2}"), group_value(3, g), ts))
    return log


def _census(store: Any) -> dict[str, int]:
    """What a reader of the bucket's commits and group events would get."""
    out = {"dup_rows": 0, "rows": 0, "unreadable": 0, "unmarked": 0}
    for table in ("commits", "group_events"):
        data = lake.read_table(store, table, cluster="bench", columns=["source_partition", "source_offset"])
        keys = list(zip(data.column("source_partition").to_pylist(), data.column("source_offset").to_pylist(),
                        strict=True))
        out["rows"] += len(keys)
        out["dup_rows"] += len(keys) - len(set(keys))
        _, bad = lake.checked_files(store, table, cluster="bench")
        out["unreadable"] += len(bad)
        for folder in lake.object_date_folders(store, table, "bench", None, None):
            names = store.names(folder)
            marked = set(lake.committed_names(names))
            out["unmarked"] += sum(1 for n in names if n.endswith(".parquet") and not n.startswith("_")
                                   and n not in marked)
    return out


def _flush_times(root: Any, n: int) -> list[float]:
    """Seconds per flush of 25 records (two files, two positions writes) into ``root``."""
    t = CommitLogTailer("x:1", root, "timing", start="earliest", consumer_factory=_factory(synthetic_log(n)),
                        max_poll_records=25, flush_records=10**9, poll_timeout_ms=0)
    t.open()
    times: list[float] = []
    while t.measure_lag() != 0:
        t.poll_batch(0)
        began = time.perf_counter()
        t.flush()
        times.append(time.perf_counter() - began)
    t.close()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--records", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp, S3Server(Path(tmp)) as s3:
        store = s3.store("bench/lake")
        creds = {k: v for k, v in s3.credentials.items() if v}
        os.environ.update(creds)
        code = _CHILD.format(paths=[str(ROOT / "benchmarks"), str(ROOT / "tests"), str(ROOT / "tests" / "collector")],
                             url=store.url, endpoint=s3.endpoint, n=args.records)
        env = {**os.environ, **creds}
        kills = mid_flush = finished_early = 0
        harm = {"dup_rows": 0, "unreadable": 0}
        unmarked_max = 0
        for _ in range(args.kills):
            proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            if line != "open":
                raise SystemExit(f"the tail did not start: {line!r}")
            time.sleep(rng.uniform(0.2, 1.5))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            proc.stdout.close()
            kills += 1
            try:  # none yet: killed before its first flush
                state = json.loads(store.get("_state/commitlog/bench.json"))
            except FileNotFoundError:
                state = {}
            mid_flush += bool(state.get("pending"))
            census = _census(store)
            finished_early += census["rows"] >= args.records + len(range(0, args.records, 10))
            harm["dup_rows"] += census["dup_rows"]
            harm["unreadable"] += census["unreadable"]
            unmarked_max = max(unmarked_max, census["unmarked"])
        final = CommitLogTailer("x:1", store, "bench", start="earliest",
                                consumer_factory=_factory(synthetic_log(args.records)))
        final.open()
        while final.measure_lag() != 0:
            final.run_once(0)
        final.flush()
        final.close()
        end = _census(store)
        expected = args.records + len(range(0, args.records, 10))
        disk = _flush_times(Path(tmp) / "disk-lake", 1000)
        bucket = _flush_times(s3.store("bench/timing"), 1000)
    print(f"kills: {kills} (with a flush's intent pending: {mid_flush}; after the tail had read everything: "
          f"{finished_early})")
    print(f"after the kills: rows read twice {harm['dup_rows']}, objects a reader took that did not read "
          f"{harm['unreadable']}, objects without a marker (invisible) at most {unmarked_max}")
    print(f"at the end: {end['rows']} rows of {expected} records, read twice {end['dup_rows']}, "
          f"missing {expected - end['rows'] + end['dup_rows']}, unreadable {end['unreadable']}")
    print(f"flush of 25 records (2 files + 2 position writes): disk median {statistics.median(disk) * 1000:.1f} ms, "
          f"bucket (gofakes3 on loopback) median {statistics.median(bucket) * 1000:.1f} ms, "
          f"ratio {statistics.median(bucket) / statistics.median(disk):.1f}x")


if __name__ == "__main__":
    main()
