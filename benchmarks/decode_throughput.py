"""Decode throughput of the __consumer_offsets reader, in records per second.

Captures a realistic mix of records from a real broker (offset commits from a committing group,
plus group-metadata records from groups that join and leave), then measures:

1. decode only: ``decode_record`` over the captured (key, value) pairs, best of --repeat runs;
2. poll only: kafka-python fetching the same records from the broker, raw bytes;
3. poll + decode;
4. the full tail: poll + decode + rows + Parquet lake files + positions (CommitLogTailer).

    .venv/bin/python benchmarks/decode_throughput.py --bootstrap 127.0.0.1:37779
    .venv/bin/python benchmarks/decode_throughput.py            # starts its own broker
    .venv/bin/python benchmarks/decode_throughput.py --version 3.9.2   # 3.x record formats

Published anchors on 2 cores: Burrow 40-50k offsets/s, KMinion 100-120k offsets/s.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from lagscope.collector.commitlog import CommitLogTailer
from lagscope.collector.offsets_codec import decode_record
from lagscope.devtools.broker import LocalBroker

OFFSETS = "__consumer_offsets"


def _ends(bootstrap: str) -> dict[int, int]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, exclude_internal_topics=False, group_id=None)
    try:
        tps = [TopicPartition(OFFSETS, p) for p in c.partitions_for_topic(OFFSETS) or ()]
        return {tp.partition: o for tp, o in c.end_offsets(tps).items()}
    finally:
        c.close()


def generate(bootstrap: str, commits: int, partitions: int, groups: int) -> None:
    """Offset commits (``commits`` records) and a few rebalancing groups (group metadata)."""
    name = f"bench-{os.getpid()}-{int(time.time())}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()
    tps = [TopicPartition(name, p) for p in range(partitions)]
    # a group that commits every partition at once, like a busy consumer
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=f"{name}-committer", enable_auto_commit=False)
    c.assign(tps)
    for i in range(commits // partitions):
        c.commit({tp: OffsetAndMetadata(i * 10 + tp.partition, "", -1) for tp in tps})
    c.close()
    # groups that join and leave: one generation record per rebalance
    for g in range(groups):
        members = [KafkaConsumer(name, bootstrap_servers=bootstrap, group_id=f"{name}-g{g}",
                                 enable_auto_commit=False, session_timeout_ms=6000,
                                 heartbeat_interval_ms=1000) for _ in range(2)]
        deadline = time.monotonic() + 20
        while not all(m.assignment() for m in members) and time.monotonic() < deadline:
            for m in members:
                m.poll(50)
        for m in members:
            # still rebalancing is fine: the group-metadata records are what this part is for
            with contextlib.suppress(KafkaError):
                m.commit({tp: OffsetAndMetadata(1, "", -1) for tp in m.assignment()})
            m.close()


def capture(bootstrap: str, since: dict[int, int]) -> list[tuple[int, int, int, bytes, bytes | None]]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, exclude_internal_topics=False, group_id=None,
                      enable_auto_commit=False, isolation_level="read_committed", max_poll_records=5000)
    try:
        tps = [TopicPartition(OFFSETS, p) for p in sorted(since)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, since[tp.partition])
        ends = c.end_offsets(tps)
        out = []
        while any(c.position(tp) < ends[tp] for tp in tps):
            for tp, recs in c.poll(500).items():
                out.extend((tp.partition, r.offset, r.timestamp, r.key, r.value) for r in recs)
        return out
    finally:
        c.close()


def bench_decode(pairs: list[tuple[bytes, bytes | None]], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for k, v in pairs:
            decode_record(k, v)
        best = min(best, time.perf_counter() - t0)
    return len(pairs) / best


def bench_poll(bootstrap: str, since: dict[int, int], total: int, decode: bool) -> float:
    c = KafkaConsumer(bootstrap_servers=bootstrap, exclude_internal_topics=False, group_id=None,
                      enable_auto_commit=False, isolation_level="read_committed", max_poll_records=5000,
                      fetch_max_bytes=52_428_800, max_partition_fetch_bytes=10_485_760)
    try:
        tps = [TopicPartition(OFFSETS, p) for p in sorted(since)]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, since[tp.partition])
        n = 0
        t0 = time.perf_counter()
        while n < total:
            for recs in c.poll(500).values():
                n += len(recs)
                if decode:
                    for r in recs:
                        decode_record(r.key, r.value)
        return n / (time.perf_counter() - t0)
    finally:
        c.close()


def bench_tail(bootstrap: str, since: dict[int, int], total: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as lake_root:
        state = Path(lake_root) / "_state" / "commitlog" / "bench.json"
        state.parent.mkdir(parents=True)
        # resume from the capture's start positions
        state.write_text(json.dumps({"version": 1, "cluster": "bench", "pending": None,
                                     "positions": {str(p): o for p, o in since.items()}}))
        t = CommitLogTailer(bootstrap, lake_root, "bench", flush_records=50_000, flush_interval_s=3600,
                            max_poll_records=5000)
        t.open()
        pa.array([0])  # pyarrow imports pandas on first use (seconds): start-up, not throughput
        t0 = time.perf_counter()
        while t.stats.records < total:
            t.run_once()
        t.flush()
        elapsed = time.perf_counter() - t0
        t.close()
        return t.stats.records / elapsed, t.stats.flushes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="use this broker (default: start a LocalBroker)")
    ap.add_argument("--version", default="4.4.0", help="Kafka version of the LocalBroker (e.g. 3.9.2)")
    ap.add_argument("--commits", type=int, default=60_000, help="offset-commit records to generate")
    ap.add_argument("--partitions", type=int, default=100, help="partitions committed per request")
    ap.add_argument("--groups", type=int, default=10, help="rebalancing groups (group metadata)")
    ap.add_argument("--repeat", type=int, default=5, help="decode runs (best is reported)")
    args = ap.parse_args()

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = LocalBroker(Path(tempfile.mkdtemp(prefix="lagscope-bench-")), version=args.version).start()
        bootstrap = broker.bootstrap
    try:
        since = _ends(bootstrap)
        t0 = time.perf_counter()
        generate(bootstrap, args.commits, args.partitions, args.groups)
        gen_s = time.perf_counter() - t0
        # on a fresh broker __consumer_offsets exists only from the first commit on
        since = {p: since.get(p, 0) for p in _ends(bootstrap)}
        records = capture(bootstrap, since)
        kinds = Counter()
        for *_, k, v in records:
            rec = decode_record(k, v)
            kinds[f"{type(rec.key).__name__}/{type(rec.value).__name__}"
                  f"{'' if rec.value is None else ' v' + str(getattr(rec.value, 'version', '?'))}"] += 1
        pairs = [(k, v) for *_, k, v in records]
        decode_rate = bench_decode(pairs, args.repeat)
        poll_rate = bench_poll(bootstrap, since, len(records), decode=False)
        poll_decode_rate = bench_poll(bootstrap, since, len(records), decode=True)
        tail_rate, flushes = bench_tail(bootstrap, since, len(records))
    finally:
        if broker is not None:
            broker.stop()

    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    print(f"date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {os.cpu_count()} cores, {cpu}; Python {sys.version.split()[0]}")
    print(f"broker: {f'LocalBroker {args.version}' if broker else bootstrap}; generated in {gen_s:.1f}s")
    print(f"captured records: {len(records)}")
    for kind, n in kinds.most_common():
        print(f"  {n:>7}  {kind}")
    print(f"decode only:          {decode_rate:>10,.0f} records/s  (best of {args.repeat})")
    print(f"poll only:            {poll_rate:>10,.0f} records/s")
    print(f"poll + decode:        {poll_decode_rate:>10,.0f} records/s")
    print(f"full tail to lake:    {tail_rate:>10,.0f} records/s  ({flushes} flush(es))")


if __name__ == "__main__":
    main()
