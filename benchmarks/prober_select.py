"""What the batch prober's candidate selection costs per commit, against a plain per-row reading
of the same rule, side by side on one synthetic corpus (no broker: the selection is pure).

The collector's loop runs :meth:`lagscope.collector.probe.BatchProber.select` over every commits
file the ``__consumer_offsets`` tail writes, in the process that also tails; a busy cluster
commits tens of thousands of offsets a second (the tail itself reads ~33k records/s end to end
here: benchmarks/results/decode.md). The reference is the rule read row by row over Python
objects (``to_pylist`` rows, a datetime per commit, a tuple key per row), as it was first written.

    .venv/bin/python benchmarks/prober_select.py [--commits 600000] [--series 3000] [--repeat 3]

Prints both rates, their ratio, that both found the same candidates, and the load average.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import os
import random
import time
from typing import Any

import pyarrow as pa

from lagscope.collector.probe import BatchProber
from lagscope.schema import COMMITS

T0 = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def corpus(commits: int, series: int, seed: int = 1) -> list[pa.Table]:
    """``commits`` commits round-robin over ``series`` series (50 partitions per group), steady
    advances of 5–15 with a burst of 2,000 on one series in 500, 600 commits a second, cut into
    the tail's 20,000-row files."""
    rng = random.Random(seed)
    pos = [0] * series
    cols: dict[str, list[Any]] = {f.name: [] for f in COMMITS.schema}
    for i in range(commits):
        s = i % series
        pos[s] += rng.randint(5, 15) + (2000 if rng.random() < 0.002 else 0)
        ts = T0 + dt.timedelta(seconds=i / 600)
        for k, v in (("group_id", f"g{s // 50}"), ("topic", "t"), ("partition", s % 50), ("committed_offset", pos[s]),
                     ("leader_epoch", 0), ("metadata", ""), ("commit_ts", ts), ("expire_ts", None), ("record_ts", ts),
                     ("source_partition", 0), ("source_offset", i), ("value_version", 3)):
            cols[k].append(v)
    table = pa.table(cols, schema=COMMITS.schema)
    return [pa.Table.from_batches([b]) for b in table.to_batches(max_chunksize=20_000)]


def reference(tables: list[pa.Table], window_s: float = 900.0) -> list[tuple[str, str, int, int]]:
    """The rule row by row over Python objects: (group, topic, partition, offset) of each candidate."""
    series: dict[tuple[str, str, int], tuple[list[int], collections.deque[tuple[float, int]]]] = {}
    found = []
    for table in tables:
        cols = [table.column(n).to_pylist() for n in ("group_id", "topic", "partition", "committed_offset",
                                                       "commit_ts", "record_ts")]
        for g, topic, part, off, cts, rts in zip(*cols, strict=True):
            key = (g, topic, part)
            if off is None:
                series.pop(key, None)
                continue
            got = series.get(key)
            if got is None:
                series[key] = ([off], collections.deque())
                continue
            last, recent = got
            adv = off - last[0]
            last[0] = off
            if adv <= 0:
                continue
            t = (cts or rts).timestamp()
            while recent and recent[0][0] < t - window_s:
                recent.popleft()
            if recent and adv > recent[0][1]:
                found.append((g, topic, part, off))
            while recent and recent[-1][1] <= adv:
                recent.pop()
            recent.append((t, adv))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commits", type=int, default=600_000)
    ap.add_argument("--series", type=int, default=3000)
    ap.add_argument("--repeat", type=int, default=3, help="runs of each (best reported)")
    args = ap.parse_args()
    tables = corpus(args.commits, args.series)
    load_before = os.getloadavg()
    best_ref = best_new = float("inf")
    ref_found: list[tuple[str, str, int, int]] = []
    new_found: list[tuple[str, str, int, int]] = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        ref_found = reference(tables)
        best_ref = min(best_ref, time.perf_counter() - t)
        prober = BatchProber("bench", "/nonexistent", max_offered=len(tables) + 1)
        for table in tables:
            prober.offer(table)
        t = time.perf_counter()
        got = prober.select()
        best_new = min(best_new, time.perf_counter() - t)
        new_found = [(c.group_id, c.probe.topic, c.probe.partition, c.probe.committed) for c in got]
    n = args.commits
    print(f"corpus: {n:,} commits over {args.series:,} series, {len(tables)} files")
    print(f"reference (row by row, Python objects): {best_ref:.2f} s = {n / best_ref:,.0f} commits/s")
    print(f"BatchProber.select:                     {best_new:.2f} s = {n / best_new:,.0f} commits/s")
    print(f"ratio: {best_ref / best_new:.1f}x; same candidates: {ref_found == new_found} ({len(new_found):,})")
    print(f"load average before: {load_before[0]:.2f}, after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
