"""The tailer against the real broker: exact commits and generations, and kill -9 / restart."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from lagscope import lake
from lagscope.collector.commitlog import CommitLogTailer, state_path

pytestmark = pytest.mark.kafka


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lagscope-test")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


class Member(threading.Thread):
    """A real consumer-group member that commits a fresh offset per owned partition per loop.

    Ground truth: (partition, offset, wall time the commit call returned) of each commit that
    succeeded.
    """

    def __init__(self, bootstrap: str, topic: str, offsets: itertools.count[int],
                 truth: list[tuple[int, int, float]], lock: threading.Lock) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=topic,
                                      enable_auto_commit=False, session_timeout_ms=6000,
                                      heartbeat_interval_ms=1000, max_poll_interval_ms=20000)
        self.topic = topic
        self.offsets = offsets
        self.truth = truth
        self.lock = lock
        self.stop = threading.Event()
        self.commits = 0
        self.owned = 0  # partitions assigned at the last poll

    def run(self) -> None:
        c = self.consumer
        try:
            # learn the new topic's partitions before joining: a leader that joins without
            # them assigns nothing (kafka-python 3), and the group then never gets going
            deadline = time.monotonic() + 30
            while not c.partitions_for_topic(self.topic) and time.monotonic() < deadline:
                time.sleep(0.1)
            while not self.stop.is_set():
                c.poll(100)
                self.owned = len(c.assignment())
                for tp in sorted(c.assignment()):
                    offset = next(self.offsets)
                    try:
                        c.commit({tp: OffsetAndMetadata(offset, "", -1)})
                    except KafkaError:
                        continue  # rebalancing: this commit was refused, it is not ground truth
                    returned = time.time()
                    with self.lock:
                        self.truth.append((tp.partition, offset, returned))
                    self.commits += 1
                time.sleep(0.05)
        finally:
            c.close()

    def wait_commits(self, n: int, timeout: float = 60.0) -> None:
        target = self.commits + n
        deadline = time.monotonic() + timeout
        while self.commits < target:
            assert time.monotonic() < deadline, f"member made {self.commits} of {target} commits"
            assert self.is_alive(), "member thread died"
            time.sleep(0.05)

    def wait_owned(self, n: int, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.owned != n:
            assert time.monotonic() < deadline, f"member owns {self.owned} partitions, not {n}"
            assert self.is_alive(), "member thread died"
            time.sleep(0.05)


def _start_iso(seconds_back: float = 2.0) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds_back)).isoformat()


def _group_rows(root: Path, table: str, cluster: str, group: str) -> list[dict[str, Any]]:
    rows = lake.read_table(root, table, cluster=cluster).to_pylist()
    return [r for r in rows if r["group_id"] == group]


def test_commits_and_generations_match_ground_truth(bootstrap: str, unique: str, tmp_path: Path) -> None:
    topic = unique
    _create_topic(bootstrap, topic, 2)
    tailer = CommitLogTailer(bootstrap, tmp_path, "live", start=_start_iso(), flush_interval_s=0.3,
                             poll_timeout_ms=100)
    stop = threading.Event()
    tail = threading.Thread(target=tailer.run, args=(stop,), kwargs={"error_backoff_s": 0.5}, daemon=True)
    tail.start()
    truth: list[tuple[int, int, float]] = []
    lock = threading.Lock()
    offsets = itertools.count(1)
    try:
        m1 = Member(bootstrap, topic, offsets, truth, lock)
        m1.start()
        m1.wait_commits(6)
        m2 = Member(bootstrap, topic, offsets, truth, lock)  # join: a rebalance to two members
        m2.start()
        m2.wait_commits(4)
        m1.wait_commits(4)
        m2.stop.set()  # leave: a rebalance back to one member
        m2.join(20)
        # m1 may go on committing in the old generation until its heartbeat learns of the
        # rebalance; owning both partitions again means the one-member generation exists
        m1.wait_owned(2)
        m1.wait_commits(6)
        m1.stop.set()
        m1.join(20)

        deadline = time.monotonic() + 30
        while True:
            commits = _group_rows(tmp_path, "commits", "live", topic)
            if len(commits) >= len(truth) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
    finally:
        stop.set()
        tail.join(30)
    assert not tail.is_alive()
    assert tailer.disabled_reason is None

    by_offset = {(r["partition"], r["committed_offset"]): r for r in commits}
    assert len(truth) >= 20
    for partition, offset, returned in truth:
        row = by_offset.get((partition, offset))
        assert row is not None, f"commit {partition}@{offset} missing from the lake"
        assert row["topic"] == topic
        commit_ts = row["commit_ts"].timestamp()
        # the coordinator stamps the commit before it answers: within 1 s before the return
        assert returned - 1.0 < commit_ts <= returned + 0.05, (commit_ts, returned)
    keys = [(r["source_partition"], r["source_offset"]) for r in commits]
    assert len(keys) == len(set(keys))

    events = sorted(_group_rows(tmp_path, "group_events", "live", topic), key=lambda r: r["source_offset"])
    gens = [e for e in events if e["record_type"] == "group_metadata"]
    generations = [e["generation"] for e in gens]
    assert generations == sorted(generations)
    sizes = [len(e["members"]) for e in gens]
    # one member, then both (join), then one again (leave) -- each a new generation
    first_two = sizes.index(2)
    assert 1 in sizes[:first_two]
    assert 1 in sizes[first_two:]
    two = gens[first_two]
    assert {(m["session_timeout_ms"], m["rebalance_timeout_ms"]) for m in two["members"]} == {(6000, 20000)}
    assert two["protocol_type"] == "consumer"
    assert two["leader"] in {m["member_id"] for m in two["members"]}
    owned = sorted((a["topic"], a["partition"]) for m in two["members"] for a in (m["assignment"] or []))
    assert owned == [(topic, 0), (topic, 1)]
    # the member ids of the two-member generation are those seen before and after it
    ids_two = {m["member_id"] for m in two["members"]}
    assert {m["member_id"] for m in gens[first_two - 1]["members"]} < ids_two


_RUNNER = """
import os, sys
from lagscope.collector.commitlog import CommitLogTailer
bootstrap, lake_root, start, done = sys.argv[1:]
t = CommitLogTailer(bootstrap, lake_root, "killtest", start=start, flush_records=10,
                    flush_interval_s=0.05, poll_timeout_ms=50, max_poll_records=7)
t.open()
while True:
    t.run_once()
    if os.path.exists(done) and t.measure_lag() == 0:
        t.flush()
        break
t.close()
"""


@pytest.mark.slow
def test_kill_and_restart_loses_nothing_and_duplicates_nothing(bootstrap: str, unique: str,
                                                               tmp_path: Path) -> None:
    topic = unique
    _create_topic(bootstrap, topic, 2)
    script = tmp_path / "runner.py"
    script.write_text(_RUNNER)
    done = tmp_path / "done"
    lake_root = tmp_path / "lake"
    start = _start_iso()
    truth: list[tuple[int, int, float]] = []
    member = Member(bootstrap, topic, itertools.count(1), truth, threading.Lock())
    member.start()
    state = state_path(lake_root, "killtest")
    cmd = [sys.executable, str(script), bootstrap, str(lake_root), start, str(done)]
    kills = 0
    mid_flush = 0
    try:
        for _ in range(2):
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            before = state.stat().st_mtime_ns if state.exists() else 0
            deadline = time.monotonic() + 60
            while (not state.exists() or state.stat().st_mtime_ns == before) and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(random.uniform(0.0, 0.3))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            kills += 1
            if json.loads(state.read_text()).get("pending"):
                mid_flush += 1
        member.wait_commits(5)
    finally:
        member.stop.set()
        member.join(20)
    done.touch()
    final = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert final.returncode == 0, final.stderr[-2000:]

    commits = _group_rows(lake_root, "commits", "killtest", topic)
    keys = [(r["source_partition"], r["source_offset"]) for r in commits]
    assert kills == 2
    assert len(keys) == len(set(keys)), "a row was written twice across the restarts"
    assert sorted((r["partition"], r["committed_offset"]) for r in commits) == sorted(
        (p, o) for p, o, _ in truth), "a commit was lost or invented across the restarts"
    print(f"kills={kills} killed mid-flush={mid_flush} commits={len(commits)}")


def test_collector_runs_the_tail_when_enabled(bootstrap: str, unique: str, tmp_path: Path) -> None:
    from lagscope.collector.loop import Collector
    from lagscope.config import Settings

    topic = unique
    _create_topic(bootstrap, topic, 1)
    settings = Settings(
        clusters=[{"name": "withtail", "bootstrap_servers": bootstrap,  # type: ignore[list-item]
                   "consumer_offsets_tail": {"enabled": True, "start": "30s"}}],
        collector={"interval_s": 0.5, "lake": str(tmp_path / "lake")},  # type: ignore[arg-type]
        metrics={"enabled": False})  # type: ignore[arg-type]
    collector = Collector(settings)
    stop = threading.Event()
    th = threading.Thread(target=collector.run, args=(stop,), daemon=True)
    th.start()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.alter_group_offsets(topic, {TopicPartition(topic, 0): OffsetAndMetadata(7, "", -1)})
        deadline = time.monotonic() + 30
        rows: list[dict[str, Any]] = []
        while not rows and time.monotonic() < deadline:
            time.sleep(0.3)
            rows = _group_rows(tmp_path / "lake", "commits", "withtail", topic)
    finally:
        admin.close()
        stop.set()
        th.join(30)
    assert not th.is_alive()
    assert [(r["partition"], r["committed_offset"]) for r in rows] == [(0, 7)]
    assert collector.commitlog is None  # stopped with the collector
    assert lake.read_table(tmp_path / "lake", "sweeps", cluster="withtail").num_rows >= 1


@pytest.mark.slow
def test_no_read_acl_on_a_real_broker_warns_once_and_stops(tmp_path: Path, unique: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType

    from lagscope.devtools.broker import SCRAM_USER, LocalBroker

    extra = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
             # the PLAINTEXT and controller listeners (the test's admin, the broker itself)
             "super.users": "User:ANONYMOUS",
             "allow.everyone.if.no.acl.found": "false"}
    with LocalBroker(tmp_path / "broker", sasl_ssl=True, offsets_partitions=1, extra_config=extra) as broker:
        _create_topic(broker.bootstrap, unique, 1)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            for _ in range(100):  # the first commit creates __consumer_offsets
                try:
                    admin.alter_group_offsets(unique, {TopicPartition(unique, 0): OffsetAndMetadata(3, "", -1)})
                    break
                except KafkaError:
                    time.sleep(0.3)
            # the SASL user may see the topic (Describe) but not read it
            admin.create_acls([ACL(f"User:{SCRAM_USER}", "*", ACLOperation.DESCRIBE, ACLPermissionType.ALLOW,
                                   ResourcePattern(ResourceType.TOPIC, "__consumer_offsets"))])
        finally:
            admin.close()
        time.sleep(1.0)  # ACLs propagate through the metadata log
        tailer = CommitLogTailer(broker.sasl_client_config(), tmp_path / "lake", "secured", start="earliest",
                                 poll_timeout_ms=200)
        stop = threading.Event()
        with caplog.at_level(logging.WARNING, logger="lagscope.collector.commitlog"):
            th = threading.Thread(target=tailer.run, args=(stop,), kwargs={"error_backoff_s": 0.2}, daemon=True)
            th.start()
            th.join(60)
            stop.set()
        assert not th.is_alive(), "the tail must stop by itself without READ access"
    ours = [r for r in caplog.records if r.name == "lagscope.collector.commitlog"]
    assert len(ours) == 1, [r.getMessage() for r in ours]
    assert "TopicAuthorizationFailed" in ours[0].getMessage()
    assert "sweeps only" in ours[0].getMessage()
    assert broker.scram_password not in ours[0].getMessage()
    assert tailer.disabled_reason is not None
    assert not (tmp_path / "lake" / "commits").exists()


def test_transactional_commits_only_when_the_transaction_commits(bootstrap: str, unique: str,
                                                                 tmp_path: Path) -> None:
    from kafka import KafkaProducer

    _create_topic(bootstrap, unique, 1)
    start = _start_iso()
    tp = TopicPartition(unique, 0)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{unique}-tx")
    producer.init_transactions()
    for i in range(6):  # exactly-once pipelines commit offsets inside their transactions
        producer.begin_transaction()
        producer.send(unique, f"out-{i}".encode(), partition=0)
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(100 + i, "", -1)}, unique)
        if i % 2 == 0:
            producer.commit_transaction()
        else:
            producer.abort_transaction()  # these offsets never took effect
    producer.close()

    tailer = CommitLogTailer(bootstrap, tmp_path, "tx", start=start)
    tailer.open()
    deadline = time.monotonic() + 30
    while tailer.measure_lag() != 0 and time.monotonic() < deadline:
        tailer.run_once(200)
    tailer.flush()
    tailer.close()
    seen = sorted(r["committed_offset"] for r in _group_rows(tmp_path, "commits", "tx", unique))
    assert seen == [100, 102, 104]

    # the aborted offsets are in the log: a read_uncommitted reader would have reported them
    raw = KafkaConsumer(bootstrap_servers=bootstrap, exclude_internal_topics=False, group_id=None,
                        enable_auto_commit=False, isolation_level="read_uncommitted")
    try:
        from lagscope.collector.offsets_codec import OffsetCommitKey, decode_record

        tps = [TopicPartition("__consumer_offsets", p) for p in raw.partitions_for_topic("__consumer_offsets")]
        raw.assign(tps)
        found = raw.offsets_for_times({t: int(dt.datetime.fromisoformat(start).timestamp() * 1000) for t in tps})
        for t in tps:
            hit = found.get(t)
            if hit is None:
                raw.seek_to_end(t)
            else:
                raw.seek(t, hit.offset)
        ends = raw.end_offsets(tps)
        uncommitted: list[int] = []
        while any(raw.position(t) < ends[t] for t in tps):
            for recs in raw.poll(300).values():
                for r in recs:
                    rec = decode_record(r.key, r.value)
                    if isinstance(rec.key, OffsetCommitKey) and rec.key.group == unique and rec.value:
                        uncommitted.append(rec.value.offset)  # type: ignore[union-attr]
    finally:
        raw.close()
    assert sorted(uncommitted) == [100, 101, 102, 103, 104, 105]


def test_the_watermark_passes_transaction_markers_and_every_commit_before_it_is_in_the_lake(
        bootstrap: str, unique: str, tmp_path: Path) -> None:
    # the partition ends with a transaction marker, which no poll returns: the watermark must
    # still pass it (the consumer's position does), and once it is past a time, every commit
    # the coordinator acknowledged before that time is in the lake already
    from kafka import KafkaProducer

    _create_topic(bootstrap, unique, 1)
    start = _start_iso()
    tp = TopicPartition(unique, 0)
    tailer = CommitLogTailer(bootstrap, tmp_path, "wm", start=start, flush_interval_s=0.3, lag_every_s=0.3,
                             poll_timeout_ms=100)
    assert tailer.watermark is None
    stop = threading.Event()
    tail = threading.Thread(target=tailer.run, args=(stop,), kwargs={"error_backoff_s": 0.5}, daemon=True)
    tail.start()
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{unique}-tx")
        producer.init_transactions()
        for i in range(4):
            producer.begin_transaction()
            producer.send(unique, f"out-{i}".encode(), partition=0)
            producer.send_offsets_to_transaction({tp: OffsetAndMetadata(200 + i, "", -1)}, unique)
            if i % 2 == 0:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
        producer.close()
        acknowledged = time.time()  # every commit above was acknowledged before this
        deadline = time.monotonic() + 30
        while (tailer.watermark is None or tailer.watermark < acknowledged) and time.monotonic() < deadline:
            time.sleep(0.05)
        mark = tailer.watermark
        # read while the tail runs: what the analytics would read at this moment
        seen = sorted(r["committed_offset"] for r in _group_rows(tmp_path, "commits", "wm", unique))
    finally:
        stop.set()
        tail.join(30)
    assert mark is not None
    assert mark >= acknowledged, "the watermark did not pass the transactions' markers"
    assert mark <= time.time()
    assert seen == [200, 202]
    assert tailer.stats.snapshot()["watermark_s"] >= mark


@pytest.mark.slow
def test_sim_crash_commits_and_session_timeout_rebalance(bootstrap: str, tmp_path: Path) -> None:
    from lagscope.devtools.sim import run_scenario, truth

    tailer = CommitLogTailer(bootstrap, tmp_path / "lake", "sim", start=_start_iso(),
                             flush_interval_s=0.3, poll_timeout_ms=100)
    stop = threading.Event()
    tail = threading.Thread(target=tailer.run, args=(stop,), kwargs={"error_backoff_s": 0.5}, daemon=True)
    tail.start()
    try:
        result = run_scenario("crash", bootstrap, tmp_path / "out", cleanup=False)
        group = result.names.group("readers")
        records = truth.load(result.truth_path)
        commits_truth = [r for r in records if isinstance(r, truth.Commit) and r.group == group]
        deadline = time.monotonic() + 30
        while True:
            rows = _group_rows(tmp_path / "lake", "commits", "sim", group)
            have = {(r["topic"], r["partition"], r["committed_offset"]) for r in rows}
            if all((c.topic, c.partition, c.offset) in have for c in commits_truth) or time.monotonic() > deadline:
                break
            time.sleep(0.3)
    finally:
        stop.set()
        tail.join(30)

    # every acknowledged commit, with the coordinator's time within 1 s before the acknowledgement
    assert len(commits_truth) >= 10
    for c in commits_truth:
        times = [r["commit_ts"].timestamp() for r in rows
                 if (r["topic"], r["partition"], r["committed_offset"]) == (c.topic, c.partition, c.offset)]
        assert any(c.ts - 1.0 < t <= c.ts + 0.05 for t in times), (c, times)

    # the crash: c2 sends no LeaveGroup; the generation without it is written once its 3 s
    # session has expired -- the exact end of the window, not the next sweep
    crash = next(r for r in records if isinstance(r, truth.Fault) and r.kind == "crash")
    events = sorted(_group_rows(tmp_path / "lake", "group_events", "sim", group), key=lambda r: r["source_offset"])
    gens = [e for e in events if e["record_type"] == "group_metadata" and e["members"]]
    c2_client = f"{result.names.prefix}-readers-c2"
    before = [e for e in gens if any(m["client_id"] == c2_client for m in e["members"])]
    after = [e for e in gens if e["record_ts"].timestamp() > crash.start
             and all(m["client_id"] != c2_client for m in e["members"])]
    assert before
    assert after, "no generation without the crashed member"
    assert {m["session_timeout_ms"] for e in before for m in e["members"]} == {3000}
    delay = after[0]["record_ts"].timestamp() - crash.start
    assert 2.5 <= delay <= 6.0, delay
    assert after[0]["generation"] > before[-1]["generation"]
