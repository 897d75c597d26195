"""Round trips through real brokers: the records Kafka 4.4.0 and 3.9.2 write decode to what we did.

Also KIP-848: Kafka's own console consumer with ``group.protocol=consumer`` makes the new group
coordinator write member, epoch and assignment records, which must decode.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from lagscope.collector.offsets_codec import (
    ConsumerGroupCurrentAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberValue,
    ConsumerGroupMetadataValue,
    DecodedRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_consumer_assignment,
    decode_record,
)
from lagscope.devtools.broker import LEGACY_VERSION, TOOLS_VERSION, LocalBroker, ensure_jars
from lagscope.errors import RecordDecodeError

pytestmark = pytest.mark.kafka

OFFSETS = "__consumer_offsets"


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lagscope-test")
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def _log_ends(bootstrap: str) -> dict[int, int]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, exclude_internal_topics=False, group_id=None,
                      enable_auto_commit=False)
    try:
        parts = c.partitions_for_topic(OFFSETS) or set()
        ends = c.end_offsets([TopicPartition(OFFSETS, p) for p in parts])
        return {tp.partition: off for tp, off in ends.items()}
    finally:
        c.close()


def _read_since(bootstrap: str, since: dict[int, int], until: float = 15.0
                ) -> list[tuple[int, int, bytes, bytes | None]]:
    """Raw (partition, offset, key, value) of __consumer_offsets from ``since`` to the current end."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, exclude_internal_topics=False, group_id=None,
                      enable_auto_commit=False, isolation_level="read_committed")
    try:
        parts = sorted(c.partitions_for_topic(OFFSETS) or set())
        tps = [TopicPartition(OFFSETS, p) for p in parts]
        c.assign(tps)
        for tp in tps:
            c.seek(tp, since.get(tp.partition, 0))
        ends = c.end_offsets(tps)
        out = []
        deadline = time.monotonic() + until
        while any(c.position(tp) < ends[tp] for tp in tps) and time.monotonic() < deadline:
            for tp, recs in c.poll(500).items():
                out.extend((tp.partition, r.offset, r.key, r.value) for r in recs)
        return out
    finally:
        c.close()


def _commit_and_capture(bootstrap: str, name: str) -> tuple[list[tuple[int, int, str]], list[DecodedRecord]]:
    """Commit known offsets with a classic kafka-python consumer; return them and the decoded log."""
    _create_topic(bootstrap, name, 2)
    since = _log_ends(bootstrap)
    # a leader that assigns before it knows the new topic's partitions assigns nothing ("No
    # partition metadata"), and its rejoin under load did not come within 30 s (CI, Kafka 3.9): know
    # them before subscribing; the short metadata age stays as the fallback
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=name, enable_auto_commit=False,
                      session_timeout_ms=7000, heartbeat_interval_ms=1000, max_poll_interval_ms=23000,
                      metadata_max_age_ms=1000, client_id=f"{name}-client")
    made: list[tuple[int, int, str]] = []
    try:
        deadline = time.monotonic() + 30
        while len(c.partitions_for_topic(name) or ()) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        c.subscribe([name])
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(200)
        assert c.assignment(), "the consumer was never assigned its partitions"
        for i, part in enumerate([0, 1, 0, 1, 0]):
            offset, meta = 10 * (i + 1), f"meta-{i}-ü"
            c.commit({TopicPartition(name, part): OffsetAndMetadata(offset, meta, -1)})
            made.append((part, offset, meta))
    finally:
        c.close()
    raw = _read_since(bootstrap, since)
    decoded = []
    for _, _, key, value in raw:
        try:
            rec = decode_record(key, value)
        except RecordDecodeError as exc:
            raise AssertionError(f"a record the broker wrote did not decode: {exc}") from exc
        if getattr(rec.key, "group", None) == name:
            decoded.append(rec)
    return made, decoded


def _check_round_trip(made: list[tuple[int, int, str]], decoded: list[DecodedRecord], name: str,
                      offset_versions: set[int]) -> None:
    commits = [(r.key.partition, r.value.offset, r.value.metadata) for r in decoded
               if isinstance(r.key, OffsetCommitKey) and isinstance(r.value, OffsetCommitValue)]
    assert commits == made
    versions = {r.value.version for r in decoded if isinstance(r.value, OffsetCommitValue)}
    assert versions <= offset_versions, versions
    now_ms = time.time() * 1000
    for r in decoded:
        if isinstance(r.value, OffsetCommitValue):
            assert r.key == OffsetCommitKey(name, name, r.key.partition)  # type: ignore[union-attr]
            assert now_ms - 120_000 < r.value.commit_timestamp_ms <= now_ms
    gens = [r.value for r in decoded if isinstance(r.value, GroupMetadataValue)]
    assert gens, "no group metadata record for the group"
    stable = [g for g in gens if g.members]
    assert stable, "no generation with members"
    m = stable[-1].members[0]
    assert (m.session_timeout_ms, m.rebalance_timeout_ms, m.client_id) == (7000, 23000, f"{name}-client")
    assert stable[-1].protocol_type == "consumer"
    assert stable[-1].leader == m.member_id
    assigned = decode_consumer_assignment(stable[-1].members[0].assignment)
    assert sorted(assigned) == [(name, 0), (name, 1)]
    assert all(isinstance(r.key, GroupMetadataKey) for r in decoded if isinstance(r.value, GroupMetadataValue))


def test_round_trip_kafka_4(bootstrap: str, unique: str) -> None:
    made, decoded = _commit_and_capture(bootstrap, unique)
    # Kafka 4.x writes offset values v4 (tag 0 = topic id) or v3
    _check_round_trip(made, decoded, unique, {3, 4})


@pytest.mark.slow
def test_round_trip_kafka_3_9(tmp_path: Path, unique: str) -> None:
    with LocalBroker(tmp_path, version=LEGACY_VERSION, offsets_partitions=1) as broker:
        made, decoded = _commit_and_capture(broker.bootstrap, unique)
    # Kafka 3.9 writes offset values v3 (v1 only for old clients that ask for a retention time)
    _check_round_trip(made, decoded, unique, {3})


# -- KIP-848 ----------------------------------------------------------------------------------

@pytest.fixture
def console_consumer(bootstrap: str, unique: str, tmp_path: Path) -> Iterator[dict[str, Any]]:
    _create_topic(bootstrap, unique, 3)
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(30):
        p.send(unique, f"m{i}".encode(), partition=i % 3)
    p.flush()
    p.close()
    since = _log_ends(bootstrap)
    libs = ensure_jars(TOOLS_VERSION, tools=True)
    out = (tmp_path / "console.out").open("wb")
    proc = subprocess.Popen(
        ["java", "-Xmx256m", "-cp", f"{libs}/*", "org.apache.kafka.tools.consumer.ConsoleConsumer",
         "--bootstrap-server", bootstrap, "--topic", unique, "--group", unique, "--from-beginning",
         "--consumer-property", "group.protocol=consumer",
         "--consumer-property", "auto.commit.interval.ms=300",
         "--consumer-property", "client.id=lagscope-kip848"],
        stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield {"proc": proc, "since": since, "topic": unique, "log": tmp_path / "console.out"}
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        out.close()


def test_kip848_records_decode(bootstrap: str, console_consumer: dict[str, Any]) -> None:
    name = console_consumer["topic"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        topic_id = uuid.UUID(str(admin.describe_topics([name])[0]["topic_id"]))
    finally:
        admin.close()
    decoded: list[DecodedRecord] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert console_consumer["proc"].poll() is None, console_consumer["log"].read_text()[-2000:]
        decoded = [r for r in (decode_record(k, v) for _, _, k, v in
                               _read_since(bootstrap, console_consumer["since"]))
                   if getattr(r.key, "group", None) == name]
        current = [r for r in decoded if isinstance(r.value, ConsumerGroupCurrentAssignmentValue)
                   and r.value.assigned]
        done = {r.key.partition for r in decoded  # type: ignore[union-attr]
                if isinstance(r.value, OffsetCommitValue) and r.value.offset == 10}
        if current and done == {0, 1, 2}:
            break
        time.sleep(1)
    kinds = {type(r.value).__name__ for r in decoded}
    assert {"ConsumerGroupMetadataValue", "ConsumerGroupMemberValue",
            "ConsumerGroupTargetAssignmentMetadataValue", "ConsumerGroupTargetAssignmentMemberValue",
            "ConsumerGroupCurrentAssignmentValue", "OffsetCommitValue"} <= kinds, kinds
    member = next(r for r in decoded if isinstance(r.value, ConsumerGroupMemberValue))
    assert isinstance(member.key, ConsumerGroupKey)
    assert member.value.client_id == "lagscope-kip848"  # type: ignore[union-attr]
    assert member.value.subscribed_topic_names == (name,)  # type: ignore[union-attr]
    assert member.value.rebalance_timeout_ms == 300_000  # type: ignore[union-attr]
    epochs = [r.value.epoch for r in decoded if isinstance(r.value, ConsumerGroupMetadataValue)]
    assert epochs
    assert epochs[0] >= 1
    cur = [r for r in decoded if isinstance(r.value, ConsumerGroupCurrentAssignmentValue)]
    last = cur[-1].value
    assert isinstance(last, ConsumerGroupCurrentAssignmentValue)
    assert last.member_epoch >= 1
    assert cur[-1].key == ConsumerGroupKey(8, name, member.key.member_id)
    assert [(tp.topic_id, sorted(tp.partitions)) for tp in last.assigned] == [(topic_id, [0, 1, 2])]
    # offsets committed by the new protocol are ordinary commits, 10 messages per partition
    commits = {(r.key.partition, r.value.offset) for r in decoded  # type: ignore[union-attr]
               if isinstance(r.value, OffsetCommitValue)}
    assert {(0, 10), (1, 10), (2, 10)} <= commits
