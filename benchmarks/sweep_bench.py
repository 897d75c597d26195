"""Benchmark: one lagscope sweep vs ``kafka-consumer-groups.sh --describe --all-groups``.

Cases (groups with committed offsets on 1,000 topics of 5 partitions, one local broker):

- ``1k``:  1,000 groups × 50 partitions (10 topics each)  = 50,000 group-partitions
- ``10k``: 10,000 groups × 10 partitions (2 topics each)  = 100,000 group-partitions

Offsets are committed with raw OffsetCommit requests pipelined through lagscope's own client
(no live consumers). Each lagscope measurement runs in a fresh subprocess (so its peak RSS is
the sweep's alone): one warm-up sweep, then ``--repeat`` timed sweeps (median reported). The
reference is Apache Kafka's ConsumerGroupCommand (kafka-tools 4.3.1) on the same cluster.

    .venv/bin/python benchmarks/sweep_bench.py                 # both cases, own broker
    .venv/bin/python benchmarks/sweep_bench.py --cases 1k      # one case

Writes the table to stdout (and with ``--out`` to a file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TOPICS = 1000
PARTITIONS = 5
CASES = {"1k": (1000, 10), "10k": (10000, 2)}  # groups, topics per group (× 5 partitions)


def _measure(bootstrap: str, prefix: str, repeat: int) -> None:
    """Subprocess: sweep the cluster (groups ``prefix*``), print durations and peak RSS as JSON."""
    from lagscope.collector.kafka_client import ClusterClient
    from lagscope.collector.sweep import sweep
    from lagscope.config import ClusterConfig

    cluster = ClusterConfig(name="bench", bootstrap_servers=[bootstrap],
                            groups={"include": [f"{prefix}.*"]})  # type: ignore[arg-type]
    out: dict[str, Any] = {"durations_s": [], "cpu_s": [], "load": os.getloadavg()[0]}
    with ClusterClient(cluster, request_timeout_ms=60000) as client:
        client.connect()
        warm = sweep(client, cluster, timeout_s=600)
        assert warm.ok, warm.sweep
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            snap = sweep(client, cluster, timeout_s=600)
            out["durations_s"].append(time.perf_counter() - t0)
            out["cpu_s"].append(time.process_time() - c0)
            assert snap.ok, snap.sweep
            out["groups"] = snap.sweep["groups"]
            out["rows"] = len(snap.offsets)
            del snap
    out["max_rss_mb"] = _peak_rss_mb()
    print(json.dumps(out))


def _peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss over execve, so a
    child of a big parent would report the parent's size at fork time."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _setup(bootstrap: str, prefix: str, groups: int, topics_per_group: int) -> None:
    """Create the topics (once), produce a little, commit offsets for ``groups`` groups."""
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError
    from kafka.protocol.consumer import OffsetCommitRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from lagscope.collector.kafka_client import ClusterClient, gather
    from lagscope.config import ClusterConfig

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=120000)
    names = [f"bench-t{i:04d}" for i in range(TOPICS)]
    existing = set(admin.list_topics())
    todo = [NewTopic(n, PARTITIONS, 1) for n in names if n not in existing]
    for i in range(0, len(todo), 100):
        with contextlib.suppress(TopicAlreadyExistsError):
            admin.create_topics(todo[i:i + 100], timeout_ms=120000)
    admin.close()
    if todo:
        with ClusterClient(ClusterConfig(name="bench", bootstrap_servers=[bootstrap]),
                           request_timeout_ms=120000) as client:
            client.connect()
            errors = client.run(_produce_all, client, names)
        if errors:
            raise SystemExit(f"{errors} partitions failed to produce")

    rng = random.Random(42)
    cluster = ClusterConfig(name="bench", bootstrap_servers=[bootstrap])
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = topic_cls.OffsetCommitRequestPartition
    group_ids = [f"{prefix}{g:05d}" for g in range(groups)]

    plan = {gid: {t: [rng.randint(0, 20) for _ in range(PARTITIONS)] for t in rng.sample(names, topics_per_group)}
            for gid in group_ids}

    async def commit_all(client: ClusterClient) -> int:
        pending = list(group_ids)
        for _ in range(60):  # the offsets topic may still be loading: retry what failed
            coords: dict[str, int] = {}
            for i in range(0, len(pending), 1000):
                resp = await client.send(FindCoordinatorRequest(key_type=0, coordinator_keys=pending[i:i + 1000],
                                                                min_version=4))
                coords.update({c.key: c.node_id for c in resp.coordinators if not c.error_code})
            failed = [g for g in pending if g not in coords]
            todo = [g for g in pending if g in coords]
            for i in range(0, len(todo), 500):  # 500 OffsetCommits in flight at a time
                futures = []
                for gid in todo[i:i + 500]:
                    req = OffsetCommitRequest(
                        group_id=gid, generation_id_or_member_epoch=-1, member_id="", max_version=8,
                        topics=[topic_cls(name=t, partitions=[part_cls(partition_index=p, committed_offset=o,
                                                                       committed_metadata="")
                                                              for p, o in enumerate(offs)])
                                for t, offs in plan[gid].items()])
                    futures.append(client.send(req, node_id=coords[gid]))
                for gid, resp in zip(todo[i:i + 500], await gather(futures), strict=True):
                    if isinstance(resp, Exception) or any(p.error_code for t in resp.topics for p in t.partitions):
                        failed.append(gid)
            pending = failed
            if not pending:
                return 0
            await client.sleep(2.0)
        return len(pending)

    with ClusterClient(cluster, request_timeout_ms=120000) as client:
        client.connect()
        errors = client.run(commit_all, client)
    if errors:
        raise SystemExit(f"{errors} offset commits failed")


async def _produce_all(client: Any, names: list[str]) -> int:
    """20 records into every partition: one ProduceRequest per 100 topics, all in flight together
    (kafka-python's producer fetches metadata topic by topic, which takes minutes for 1,000 topics)."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record import MemoryRecordsBuilder

    from lagscope.collector.kafka_client import gather

    topic_cls = ProduceRequest.TopicProduceData
    part_cls = topic_cls.PartitionProduceData
    now_ms = int(time.time() * 1000)

    def records() -> bytes:
        b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
        for i in range(20):
            b.append(now_ms, None, b"x%09d" % i)
        b.close()
        return bytes(b.buffer())

    batch = records()
    pending = [(n, p) for n in names for p in range(PARTITIONS)]
    for _ in range(200):  # a partition whose topic or leader is not ready yet is retried
        by_topic: dict[str, list[int]] = {}
        for n, p in pending:
            by_topic.setdefault(n, []).append(p)
        topics = sorted(by_topic)
        futures = []
        for i in range(0, len(topics), 100):
            req = ProduceRequest(acks=1, timeout_ms=60000, max_version=12,
                                 topic_data=[topic_cls(name=n, partition_data=[part_cls(index=p, records=batch)
                                                                              for p in by_topic[n]])
                                             for n in topics[i:i + 100]])
            futures.append(client.send(req))
        failed: list[tuple[str, int]] = []
        reasons: dict[str, int] = {}
        for i, resp in zip(range(0, len(topics), 100), await gather(futures), strict=True):
            if isinstance(resp, Exception):
                failed.extend((n, p) for n in topics[i:i + 100] for p in by_topic[n])
                reasons[type(resp).__name__] = reasons.get(type(resp).__name__, 0) + 1
            else:
                for t in resp.responses:
                    for p in t.partition_responses:
                        if p.error_code:
                            failed.append((t.name, p.index))
                            reasons[str(p.error_code)] = reasons.get(str(p.error_code), 0) + 1
        if failed:
            print(f"produce: {len(failed)} partitions to retry: {reasons}", file=sys.stderr)
        pending = failed
        if not pending:
            return 0
        await client.sleep(3.0)
    return len(pending)


def _delete_groups(bootstrap: str, prefix: str, groups: int) -> None:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=120000)
    ids = [f"{prefix}{g:05d}" for g in range(groups)]
    for i in range(0, len(ids), 1000):
        admin.delete_groups(ids[i:i + 1000])
    admin.close()


def _reference(bootstrap: str) -> tuple[float, int, float]:
    from lagscope.devtools.broker import run_tool

    t0 = time.perf_counter()
    proc = run_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                    ["--bootstrap-server", bootstrap, "--describe", "--all-groups"], timeout=3600,
                    jvm_opts=["-Xmx1g"])
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kafka-consumer-groups failed: {proc.stderr[-2000:]}")
    rows = sum(1 for line in proc.stdout.splitlines() if line.strip() and not line.startswith(("GROUP", "Consumer")))
    return elapsed, rows, _self_rss()


def _self_rss() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bootstrap", help="use this broker instead of starting one (it must be empty of bench-*)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--measure", nargs=2, metavar=("BOOTSTRAP", "PREFIX"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        _measure(args.measure[0], args.measure[1], args.repeat)
        return

    from lagscope.devtools.broker import LocalBroker

    broker = None
    workdir = tempfile.mkdtemp(prefix="lagscope-bench-")
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        broker = LocalBroker(Path(workdir), heap="1g", offsets_partitions=10)
        broker.start()
        bootstrap = broker.bootstrap
    results = []
    try:
        for case in args.cases:
            groups, tpg = CASES[case]
            prefix = f"bench-{case}-g"
            t0 = time.perf_counter()
            _setup(bootstrap, prefix, groups, tpg)
            setup_s = time.perf_counter() - t0
            proc = subprocess.run([sys.executable, __file__, "--measure", bootstrap, prefix, "--repeat",
                                   str(args.repeat)], capture_output=True, text=True, check=False,
                                  env={**os.environ, "PYTHONWARNINGS": "ignore"})
            if proc.returncode != 0:
                raise SystemExit(f"measurement failed: {proc.stderr[-3000:]}")
            ours = json.loads(proc.stdout.strip().splitlines()[-1])
            ref_s, ref_rows, _ = _reference(bootstrap)
            med = statistics.median(ours["durations_s"])
            results.append({"case": case, "groups": groups, "group_partitions": groups * tpg * PARTITIONS,
                            "rows": ours["rows"], "lagscope_s": med, "lagscope_all_s": ours["durations_s"],
                            "rss_mb": ours["max_rss_mb"], "cli_s": ref_s, "cli_rows": ref_rows,
                            "cpu_s": statistics.median(ours["cpu_s"]), "load": ours["load"],
                            "speedup": ref_s / med, "setup_s": setup_s})
            print(json.dumps(results[-1]), flush=True)
            if case != args.cases[-1]:
                _delete_groups(bootstrap, prefix, groups)
    finally:
        if broker is not None:
            broker.stop()
    lines = [
        f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
        f" Kafka broker 4.4.0 (local KRaft, 1 node), kafka-tools 4.3.1",
        "",
        "| case | group-partitions | rows | lagscope sweep (median) | runs | CPU of the sweep process | peak RSS | "
        "kafka-consumer-groups --describe --all-groups | speed-up | load avg |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        runs = ", ".join(f"{d:.2f}" for d in r["lagscope_all_s"])
        lines.append(f"| {r['case']} ({r['groups']} groups) | {r['group_partitions']:,} | {r['rows']:,} | "
                     f"{r['lagscope_s']:.2f} s | {runs} | {r['cpu_s']:.2f} s | {r['rss_mb']:.0f} MB | "
                     f"{r['cli_s']:.1f} s ({r['cli_rows']:,} rows) | {r['speedup']:.0f}× | {r['load']:.1f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
