"""The sweep against a real broker: ground truth, owners, Empty groups, topology changes, secrets."""

from __future__ import annotations

import logging
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions, NewTopic
from kafka.structs import OffsetAndMetadata
from typer.testing import CliRunner

from lagscope.cli import app
from lagscope.collector.kafka_client import ClusterClient
from lagscope.collector.loop import Collector, LakeSink
from lagscope.collector.model import Snapshot
from lagscope.collector.reader import read
from lagscope.collector.sweep import sweep
from lagscope.config import ClusterConfig, load_config
from lagscope.devtools.broker import TOOLS_VERSION, ensure_jars
from lagscope.devtools.sim.runner import collect_end_state, run_scenario

pytestmark = pytest.mark.kafka


def _cluster(bootstrap: str, prefix: str, **kw: Any) -> ClusterConfig:
    return ClusterConfig(name="it", bootstrap_servers=bootstrap,  # type: ignore[arg-type]
                         groups={"include": [f"{prefix}.*"]}, **kw)  # type: ignore[arg-type]


def _sweep(bootstrap: str, cluster: ClusterConfig, **kw: Any) -> Snapshot:
    with ClusterClient(cluster, request_timeout_ms=10000) as client:
        client.connect()
        return sweep(client, cluster, **kw)


def _produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for partition, n in counts.items():
            for i in range(n):
                producer.send(topic, f"m{i}".encode(), partition=partition)
        producer.flush()
    finally:
        producer.close()


@pytest.mark.slow
def test_transactional_scenario_lake_equals_ground_truth(bootstrap: str, tmp_path: Path) -> None:
    # the simulator's read_committed consumer behind a transactional producer (aborts included)
    result = run_scenario("transactional", bootstrap, tmp_path / "run")
    group = result.names.group("readers")
    cluster = _cluster(bootstrap, result.names.prefix, read_committed_groups=[f"{result.names.prefix}-readers"])
    # ground truth at the sweep, read independently by kafka-python's admin client (the run is
    # over: nothing moves any more; the open transaction was aborted when its producer stopped)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        truth = collect_end_state(admin, result.names, result.scenario)
    finally:
        admin.close()
    snap = _sweep(bootstrap, cluster)
    assert snap.ok, snap.sweep
    LakeSink(tmp_path / "lake").update(snap)

    rows = {(r["topic"], r["partition"]): r for r in read(tmp_path / "lake", "offsets").to_pylist()}
    committed = truth.committed_of(group)
    assert committed, "the scenario committed nothing"
    assert committed == result.end_state.committed_of(group)  # the consumer's last commits
    assert set(rows) == set(committed)
    for tp, row in rows.items():
        end = truth.end_of(*tp)
        assert row["group_id"] == group
        assert row["committed_offset"] == committed[tp]
        assert row["log_end_offset"] == end.end
        assert row["last_stable_offset"] == end.lso
        assert row["log_start_offset"] == end.log_start
        assert row["lag"] == max(0, end.lso - committed[tp])
        assert row["group_state"] == "Empty"  # every member has ended
        assert row["member_id"] is None
    members = read(tmp_path / "lake", "members").to_pylist()
    assert [(m["group_id"], m["group_state"], m["member_id"]) for m in members] == [(group, "Empty", None)]
    sweeps = read(tmp_path / "lake", "sweeps").to_pylist()
    assert len(sweeps) == 1
    assert sweeps[0]["ok"] is True
    assert sweeps[0]["partitions"] == len(rows)


def test_open_transaction_lag_against_lso_for_read_committed_groups(bootstrap: str, unique: str) -> None:
    topic, rc_group, ru_group = f"{unique}-t", f"{unique}-rc", f"{unique}-ru"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"{unique}-tx")
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic, f"c{i}".encode(), partition=0)
        producer.commit_transaction()  # offsets 0-4 + a commit marker at 5
        producer.begin_transaction()
        for i in range(3):
            producer.send(topic, f"o{i}".encode(), partition=0)
        producer.flush()  # offsets 6-8 written, transaction left open: LSO = 6, HW = 9
        for g in (rc_group, ru_group):
            admin.alter_group_offsets(g, {TopicPartition(topic, 0): OffsetAndMetadata(6, "", -1)})
        snap = _sweep(bootstrap, _cluster(bootstrap, unique, read_committed_groups=[f"{unique}-rc"]))
        assert snap.ok, snap.sweep
        rows = {r["group_id"]: r for r in snap.offsets}
        for r in rows.values():
            assert r["log_end_offset"] == 9
            assert r["last_stable_offset"] == 6
        assert rows[rc_group]["lag"] == 0  # caught up as far as a read_committed consumer can be
        assert rows[ru_group]["lag"] == 3  # read_uncommitted: against the high watermark
    finally:
        producer.close(timeout=5)
        admin.close()


class _Member(threading.Thread):
    """A consumer polling in its own thread (a group member must keep polling through rebalances)."""

    def __init__(self, bootstrap: str, group: str, client_id: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True)
        self.consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=client_id,
                                      enable_auto_commit=False, auto_offset_reset="earliest",
                                      session_timeout_ms=20000, heartbeat_interval_ms=1000,
                                      metadata_max_age_ms=1000)
        # know the new topic's partitions before joining: a leader that assigns without them
        # assigns nothing, and under load its rejoin left a member without partitions for 90 s
        deadline = time.monotonic() + 30
        while len(self.consumer.partitions_for_topic(topic) or ()) < partitions and time.monotonic() < deadline:
            time.sleep(0.2)
        self.consumer.subscribe([topic])
        self.client_id = client_id
        self.assigned: set[TopicPartition] = set()
        self.to_commit: dict[int, int] | None = None
        self.committed = threading.Event()
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.consumer.poll(timeout_ms=100)
            self.assigned = set(self.consumer.assignment())
            if self.to_commit is not None and not self.committed.is_set():
                self.consumer.commit({tp: OffsetAndMetadata(self.to_commit[tp.partition], "", -1)
                                      for tp in self.assigned if tp.partition in self.to_commit})
                self.committed.set()
        self.consumer.close(autocommit=False)


def _wait_assigned(members: list[_Member], total: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    stable_since = None
    last: list[set[TopicPartition]] = []
    while time.monotonic() < deadline:
        now = [set(m.assigned) for m in members]
        if all(now) and sum(len(a) for a in now) == total:
            if now != last:
                stable_since = time.monotonic()
            elif stable_since is not None and time.monotonic() - stable_since > 1.0:
                return
        else:
            stable_since = None
        last = now
        time.sleep(0.1)
    raise AssertionError(f"members not assigned in time: {[m.assigned for m in members]}")


def test_live_group_owners_lag_and_an_empty_group(bootstrap: str, unique: str) -> None:
    topic, live, idle = f"{unique}-t", f"{unique}-live", f"{unique}-idle"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    members_: list[_Member] = []
    try:
        admin.create_topics([NewTopic(topic, 4, 1)])
        _produce(bootstrap, topic, {0: 10, 1: 20, 2: 5, 3: 0})
        # the idle group only ever committed (no members): Empty, still recorded
        admin.alter_group_offsets(idle, {TopicPartition(topic, 1): OffsetAndMetadata(7, "", -1)})
        members_ = [_Member(bootstrap, live, f"{unique}-c{i}", topic, 4) for i in range(2)]
        for i, m in enumerate(members_):  # one after another: the second joins a formed group
            m.start()
            _wait_assigned(members_[:i + 1], 4)
        owner_of = {tp.partition: m.client_id for m in members_ for tp in m.assigned}
        for m in members_:  # each commits 3 on its partitions 0-2 (partition 3 stays uncommitted)
            m.to_commit = {0: 3, 1: 3, 2: 3}
        for m in members_:
            assert m.committed.wait(20)

        snap = _sweep(bootstrap, _cluster(bootstrap, unique))
        assert snap.ok, snap.sweep
        assert snap.sweep["groups"] == 2
        rows = {(r["group_id"], r["partition"]): r for r in snap.offsets}
        assert set(rows) == {(live, p) for p in range(4)} | {(idle, 1)}
        ends = {0: 10, 1: 20, 2: 5, 3: 0}
        for p in range(4):
            r = rows[(live, p)]
            assert r["group_state"] == "Stable"
            assert r["client_id"] == owner_of[p]  # the current owner, from the decoded assignment
            assert r["member_id"] is not None
            assert r["host"]
            assert r["log_end_offset"] == ends[p]
            # partition 3 is owned but never committed: a row with a null commit and null lag
            assert r["committed_offset"] == (None if p == 3 else 3)
            assert r["lag"] == (None if p == 3 else ends[p] - 3)
        assert rows[(idle, 1)]["lag"] == 13
        assert rows[(idle, 1)]["member_id"] is None
        assert rows[(idle, 1)]["group_state"] == "Empty"

        members = {(m["group_id"], m["client_id"]): m for m in snap.members}
        assert members[(idle, None)]["member_id"] is None
        for member in members_:
            m = members[(live, member.client_id)]
            assert m["protocol_type"] == "consumer"
            assert m["protocol"] in ("range", "roundrobin", "sticky", "cooperative-sticky")
            assert m["subscribed_topics"] == [topic]
            assert sorted((a["topic"], a["partition"]) for a in m["assignment"]) == \
                sorted((tp.topic, tp.partition) for tp in member.assigned)
        # the same group through `group_ids` (FindCoordinator instead of ListGroups)
        one = _sweep(bootstrap, _cluster(bootstrap, unique), group_ids=[live])
        assert {r["partition"] for r in one.offsets} == {0, 1, 2, 3}
        assert {r["group_id"] for r in one.offsets} == {live}
    finally:
        for m in members_:
            m.halt.set()
        for m in members_:
            if m.ident is not None:  # started
                m.join(15)
            else:
                m.consumer.close(autocommit=False)
        admin.close()


def test_deleted_topic_and_added_partitions_between_sweeps(bootstrap: str, unique: str) -> None:
    keep, gone, group = f"{unique}-keep", f"{unique}-gone", f"{unique}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(keep, 2, 1), NewTopic(gone, 1, 1)])
        _produce(bootstrap, keep, {0: 4, 1: 4})
        _produce(bootstrap, gone, {0: 4})
        admin.alter_group_offsets(group, {TopicPartition(keep, 0): OffsetAndMetadata(1, "", -1),
                                          TopicPartition(keep, 1): OffsetAndMetadata(2, "", -1),
                                          TopicPartition(gone, 0): OffsetAndMetadata(3, "", -1)})
        cluster = _cluster(bootstrap, unique)
        first = _sweep(bootstrap, cluster)
        assert first.ok
        assert {(r["topic"], r["partition"]) for r in first.offsets} == {(keep, 0), (keep, 1), (gone, 0)}

        admin.delete_topics([gone])
        admin.create_partitions({keep: NewPartitions(total_count=3)})
        _produce(bootstrap, keep, {2: 6})
        admin.alter_group_offsets(group, {TopicPartition(keep, 2): OffsetAndMetadata(5, "", -1)})

        second = _sweep(bootstrap, cluster)
        assert second.ok, second.sweep
        rows = {(r["topic"], r["partition"]): r for r in second.offsets}
        assert rows[(keep, 2)]["log_end_offset"] == 6
        assert rows[(keep, 2)]["lag"] == 1
        assert rows[(keep, 0)]["lag"] == 3
        # the deleted topic's commits are either removed by the coordinator or kept with unknown ends
        if (gone, 0) in rows:
            assert rows[(gone, 0)]["log_end_offset"] is None
            assert rows[(gone, 0)]["lag"] is None
    finally:
        admin.close()


def test_secrets_never_reach_the_logs(bootstrap: str, unique: str, caplog: pytest.LogCaptureFixture) -> None:
    # SASL credentials against a PLAINTEXT listener: the handshake fails, everything logs at DEBUG
    password = f"pw-{unique}-never-logged"
    cluster = ClusterConfig(name="sec", bootstrap_servers=bootstrap,  # type: ignore[arg-type]
                            security={"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",  # type: ignore[arg-type]
                                      "username": "lagscope", "password": password})
    with caplog.at_level(logging.DEBUG):
        client = ClusterClient(cluster, request_timeout_ms=1500)
        logging.getLogger("test").info("client %r config %r", client, cluster)
        try:
            snap = sweep(client, cluster, timeout_s=3)
        finally:
            client.close()
    assert snap.ok is False
    assert snap.sweep["error"]
    assert password not in caplog.text
    assert password not in str(snap.sweep)
    assert "**********" in caplog.text  # the config's repr was logged, masked


@pytest.mark.slow
def test_kip848_consumer_protocol_group_is_described_with_owners(bootstrap: str, unique: str) -> None:
    # a real KIP-848 member: Kafka's own console consumer with group.protocol=consumer
    # (kafka-python has no consumer-protocol client); DescribeGroups cannot describe it, the
    # sweep routes it to ConsumerGroupDescribe
    topic, group = f"{unique}-t", f"{unique}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 2, 1)])
    admin.close()
    _produce(bootstrap, topic, {0: 3, 1: 2})
    libs = ensure_jars(TOOLS_VERSION, tools=True)
    java = shutil.which("java") or "java"
    proc = subprocess.Popen(
        [java, "-Xmx192m", "-cp", f"{libs}/*", "org.apache.kafka.tools.consumer.ConsoleConsumer",
         "--bootstrap-server", bootstrap, "--topic", topic, "--group", group, "--from-beginning",
         "--consumer-property", "group.protocol=consumer", "--consumer-property", f"client.id={unique}-java"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        cluster = _cluster(bootstrap, unique)
        deadline = time.monotonic() + 90
        snap = None
        while time.monotonic() < deadline:
            snap = _sweep(bootstrap, cluster)
            owners = {r["partition"]: r["client_id"] for r in snap.offsets}
            if snap.ok and snap.members and snap.members[0]["member_id"] and len(owners) == 2 \
                    and all(owners.values()):
                break
            time.sleep(1)
        assert snap is not None
        assert snap.ok, snap.sweep
        (member,) = snap.members
        assert member["group_protocol"] == "consumer"
        assert member["group_state"] == "Stable"
        assert member["client_id"] == f"{unique}-java"
        assert sorted((a["topic"], a["partition"]) for a in member["assignment"]) == [(topic, 0), (topic, 1)]
        assert {r["partition"]: r["client_id"] for r in snap.offsets} == {0: f"{unique}-java", 1: f"{unique}-java"}
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_collect_once_and_lag_cli_and_metrics_wiring(bootstrap: str, unique: str, tmp_path: Path) -> None:
    topic, group = f"{unique}-t", f"{unique}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
        _produce(bootstrap, topic, {0: 9})
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1)})
    finally:
        admin.close()
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"clusters: [{{name: it, bootstrap_servers: '{bootstrap}', "
                      f"groups: {{include: ['{unique}.*']}}}}]\n"
                      f"collector: {{lake: '{tmp_path / 'lake'}'}}\nmetrics: {{port: 0}}\n")
    runner = CliRunner()
    result = runner.invoke(app, ["collect", "--config", str(config), "--once"])
    assert result.exit_code == 0, result.output
    rows = read(tmp_path / "lake", "offsets").to_pylist()
    assert [(r["group_id"], r["committed_offset"], r["log_end_offset"], r["lag"]) for r in rows] == [(group, 4, 9, 5)]

    result = runner.invoke(app, ["lag", "--bootstrap", bootstrap, "--group", group], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "LOG-END-OFFSET" in result.output
    line = next(x for x in result.output.splitlines() if x.startswith(group))
    assert line.split()[-7:-3] == ["0", "4", "9", "5"]  # PARTITION CURRENT LOG-END LAG

    # the loop hands each Snapshot whole to the metrics server when metrics are enabled
    settings = load_config(config)
    collector = Collector(settings).start()
    try:
        collector.run_once()
        with urllib.request.urlopen(collector.metrics_server.url, timeout=10) as resp:
            body = resp.read().decode()
    finally:
        collector.stop()
    lag_lines = [x for x in body.splitlines() if x.startswith("kafka_consumergroup_lag{") and group in x]
    assert lag_lines
    assert lag_lines[0].endswith(" 5.0")


@pytest.mark.slow
def test_collect_process_runs_until_sigterm(bootstrap: str, unique: str, tmp_path: Path) -> None:
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"clusters: [{{name: it, bootstrap_servers: '{bootstrap}', "
                      f"groups: {{include: ['{unique}.*']}}}}]\n"
                      f"collector: {{lake: '{tmp_path / 'lake'}', interval_s: 0.5}}\nmetrics: {{enabled: false}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "lagscope.cli", "collect", "--config", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and read(tmp_path / "lake", "sweeps").num_rows < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    sweeps = read(tmp_path / "lake", "sweeps").to_pylist()
    assert len(sweeps) >= 2
    assert all(s["ok"] for s in sweeps)
    assert "sweep cluster=it ok" in err  # one log line per sweep
