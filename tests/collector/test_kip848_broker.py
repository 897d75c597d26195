"""ConsumerGroupDescribe against the real broker, with a real KIP-848 consumer (Kafka's console consumer)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from lagscope.collector.kafka_client import ClusterClient
from lagscope.collector.kip848 import ConsumerGroupDescription, describe_consumer_groups, topic_names_by_id
from lagscope.collector.sweep import sweep
from lagscope.config import ClusterConfig
from lagscope.devtools.broker import TOOLS_VERSION, _java, ensure_jars

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PARTITIONS = 3


@pytest.fixture
def admin(bootstrap: str) -> Iterator[KafkaAdminClient]:
    client = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def topic(bootstrap: str, admin: KafkaAdminClient, unique: str) -> str:
    name = f"{unique}-t"
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for p in range(PARTITIONS):
        producer.send(name, b"x", partition=p)
    producer.flush()
    producer.close()
    return name


@pytest.fixture
def kip848_consumer(bootstrap: str, tmp_path: Path) -> Iterator[Callable[[str, str, str], None]]:
    """Start Kafka's console consumer with group.protocol=consumer; every one is stopped by PID."""
    procs: list[subprocess.Popen[bytes]] = []
    libs = ensure_jars(TOOLS_VERSION, tools=True)

    def start(topic: str, group: str, client_id: str) -> None:
        log = (tmp_path / f"{client_id}.log").open("wb")
        procs.append(subprocess.Popen(
            [_java(), "-Xmx256m", "-cp", f"{libs}/*", "org.apache.kafka.tools.consumer.ConsoleConsumer",
             "--bootstrap-server", bootstrap, "--topic", topic, "--group", group, "--from-beginning",
             "--consumer-property", "group.protocol=consumer",
             "--consumer-property", f"client.id={client_id}"],
            stdout=subprocess.DEVNULL, stderr=log))
        log.close()

    yield start
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _wait_described(describe: Callable[[], list[ConsumerGroupDescription]],
                    done: Callable[[ConsumerGroupDescription], bool], timeout: float = 60.0
                    ) -> ConsumerGroupDescription:
    deadline = time.monotonic() + timeout
    while True:
        [desc] = describe()
        if done(desc):
            return desc
        if time.monotonic() > deadline:
            raise AssertionError(f"group not as expected within {timeout:.0f} s: {desc}")
        time.sleep(0.5)


def _fully_assigned(n_members: int) -> Callable[[ConsumerGroupDescription], bool]:
    def check(d: ConsumerGroupDescription) -> bool:
        owned = [tp for m in d.members for tp in m.partitions()]
        return (d.ok and d.state == "Stable" and len(d.members) == n_members and len(owned) == PARTITIONS
                and all(m.partitions() == sorted((ta.topic, p) for ta in m.target_assignment for p in ta.partitions)
                        for m in d.members))
    return check


def test_describe_a_real_kip848_group(admin: KafkaAdminClient, topic: str, unique: str,
                                      kip848_consumer: Callable[[str, str, str], None]) -> None:
    group = f"{unique}-g"
    kip848_consumer(topic, group, "kip848-a")
    desc = _wait_described(lambda: describe_consumer_groups(admin, None, [group]), _fully_assigned(1))
    [m] = desc.members
    assert m.client_id == "kip848-a"
    assert m.client_host.lstrip("/") == "127.0.0.1"
    assert m.subscribed_topic_names == (topic,)
    assert m.partitions() == [(topic, p) for p in range(PARTITIONS)]
    assert m.member_epoch >= 1
    assert desc.group_epoch >= 1
    assert desc.assignor in {"uniform", "range"}  # the broker's server-side assignors
    # the topic id the coordinator sent resolves to the topic through Metadata (the fallback
    # for a name the coordinator leaves empty)
    [ta] = m.assignment
    assert topic_names_by_id(admin)[ta.topic_id] == topic

    # a second member joins: the partitions are split between the two, none twice
    kip848_consumer(topic, group, "kip848-b")
    desc = _wait_described(lambda: describe_consumer_groups(admin, None, [group]), _fully_assigned(2))
    owned = [tp for m in desc.members for tp in m.partitions()]
    assert sorted(owned) == [(topic, p) for p in range(PARTITIONS)]
    assert {m.client_id for m in desc.members} == {"kip848-a", "kip848-b"}
    assert all(m.partitions() for m in desc.members)


def test_unknown_group_is_an_error_value(admin: KafkaAdminClient, unique: str) -> None:
    [desc] = describe_consumer_groups(admin, None, [f"{unique}-nobody"])
    assert not desc.ok
    assert desc.error_code == 69  # GROUP_ID_NOT_FOUND
    assert desc.error is not None
    assert desc.error.startswith("GroupIdNotFoundError")


def test_sweep_records_kip848_members(bootstrap: str, topic: str, unique: str,
                                      kip848_consumer: Callable[[str, str, str], None]) -> None:
    """The sweep (ListGroups v5 → ConsumerGroupDescribe through describe_for_sweep) records the member."""
    group = f"{unique}-g"
    kip848_consumer(topic, group, "kip848-sweep")
    client = ClusterClient(ClusterConfig(name="itest", bootstrap_servers=[bootstrap]))
    client.connect()
    try:
        # the same client as the sweep's, through the plain API too
        desc = _wait_described(lambda: describe_consumer_groups(client, None, [group]), _fully_assigned(1))
        deadline = time.monotonic() + 30
        while True:
            snapshot = sweep(client, client.cluster)
            rows = [r for r in snapshot.members if r["group_id"] == group]
            if rows and rows[0]["assignment"]:
                break
            assert time.monotonic() < deadline, f"group {group} not swept: {snapshot.sweep}"
            time.sleep(0.5)
    finally:
        client.close()
    [row] = rows
    assert row["group_protocol"] == "consumer"
    assert row["member_id"] == desc.members[0].member_id
    assert row["client_id"] == "kip848-sweep"
    assert sorted((a["topic"], a["partition"]) for a in row["assignment"]) == [(topic, p) for p in range(PARTITIONS)]
    owners = {(r["topic"], r["partition"]): r["member_id"] for r in snapshot.offsets if r["group_id"] == group}
    assert owners == {(topic, p): desc.members[0].member_id for p in range(PARTITIONS)}


def test_lag_for_a_named_kip848_group_describes_it_with_consumer_group_describe(
        bootstrap: str, topic: str, unique: str, kip848_consumer: Callable[[str, str, str], None]) -> None:
    """``lagscope lag --group G`` (sweep with group_ids) of a consumer-protocol group: DescribeGroups
    answers such a group as Dead with no members, so the sweep must learn the group's type."""
    group = f"{unique}-g"
    kip848_consumer(topic, group, "kip848-named")
    client = ClusterClient(ClusterConfig(name="itest", bootstrap_servers=[bootstrap]))
    client.connect()
    try:
        desc = _wait_described(lambda: describe_consumer_groups(client, None, [group]), _fully_assigned(1))
        snapshot = sweep(client, client.cluster, group_ids=[group])
    finally:
        client.close()
    assert snapshot.ok, snapshot.sweep["error"]
    [row] = [r for r in snapshot.members if r["group_id"] == group]
    assert (row["group_protocol"], row["group_state"], row["member_id"]) == (
        "consumer", "Stable", desc.members[0].member_id)
    owners = {(r["topic"], r["partition"]): r["member_id"] for r in snapshot.offsets if r["group_id"] == group}
    assert owners == {(topic, p): desc.members[0].member_id for p in range(PARTITIONS)}
