"""The __consumer_offsets decoder on exact encodings of every version (pure, no broker)."""

from __future__ import annotations

import uuid

import pytest
from commitlog_records import (
    Group,
    Member,
    cg_current_value,
    cg_key,
    cg_member_value,
    cg_metadata_value,
    cg_partition_metadata_value,
    cg_target_member_value,
    cg_target_metadata_value,
    consumer_assignment,
    group_key,
    group_value,
    i16,
    i32,
    offset_key,
    offset_value,
    string,
)

from lagscope.collector.offsets_codec import (
    ConsumerGroupCurrentAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    TopicPartitions,
    UndecodedRecordType,
    UnknownRecordVersion,
    decode_consumer_assignment,
    decode_record,
)
from lagscope.errors import RecordDecodeError

TID = uuid.UUID("11f37431-23b4-4832-b5df-977a533aa38a")
TID2 = uuid.UUID("8bfc81cc-c46a-4905-8bbd-e482a1ae9714")


# -- offset commits ---------------------------------------------------------------------------

@pytest.mark.parametrize(("key_type", "version", "kwargs", "expected"), [
    # key v0 (pre-0.10 layout, same fields) with value v0: no epoch, no expiry
    (0, 0, {}, OffsetCommitValue(0, 42, None, "meta", 1_700_000_000_123, None)),
    # value v1: written by 2.x for OffsetCommit requests with an explicit retention time
    (1, 1, {"expire_ts": 1_700_000_600_000},
     OffsetCommitValue(1, 42, None, "meta", 1_700_000_000_123, 1_700_000_600_000)),
    # value v1 with expire -1 (no retention given): expire_ts null, not 1969
    (1, 1, {"expire_ts": -1}, OffsetCommitValue(1, 42, None, "meta", 1_700_000_000_123, None)),
    # value v2: same fields as v0 (2.1+ without leader epoch)
    (1, 2, {}, OffsetCommitValue(2, 42, None, "meta", 1_700_000_000_123, None)),
    # value v3: leader epoch (what 2.1+ brokers write)
    (1, 3, {"leader_epoch": 7}, OffsetCommitValue(3, 42, 7, "meta", 1_700_000_000_123, None)),
    # value v3 with epoch -1 (client did not know it): null
    (1, 3, {"leader_epoch": -1}, OffsetCommitValue(3, 42, None, "meta", 1_700_000_000_123, None)),
    # value v4: flexible, tag 0 = topic id (what Kafka 4.x writes)
    (1, 4, {"leader_epoch": 0, "topic_id": TID},
     OffsetCommitValue(4, 42, 0, "meta", 1_700_000_000_123, None, TID)),
    # value v4 without tagged fields
    (1, 4, {"leader_epoch": 3}, OffsetCommitValue(4, 42, 3, "meta", 1_700_000_000_123, None)),
])
def test_offset_commit_versions(key_type: int, version: int, kwargs: dict[str, object],
                                expected: OffsetCommitValue) -> None:
    rec = decode_record(offset_key("g1", "orders", 3, key_type),
                        offset_value(version, 42, "meta", 1_700_000_000_123, **kwargs))  # type: ignore[arg-type]
    assert rec.key == OffsetCommitKey("g1", "orders", 3)
    assert rec.value == expected


def test_offset_tombstone_and_unicode_names() -> None:
    # a null value deletes the offset (expiry or DeleteConsumerGroupOffsets)
    rec = decode_record(offset_key("grüppe-é", "tópic", 0), None)
    assert rec.key == OffsetCommitKey("grüppe-é", "tópic", 0)
    assert rec.value is None


def test_the_key_memo_holds_live_keys_and_forgets_the_ones_a_tombstone_deletes() -> None:
    # keys repeat, so the decoder memoises them; groups that come and go (deleted: a tombstone for
    # each of their offsets and their metadata) must not leave their keys behind for good
    from lagscope.collector import offsets_codec

    before = len(offsets_codec._KEY_CACHE)
    for i in range(300):
        key = offset_key(f"gone-{i}", "t", i % 3)
        first = decode_record(key, offset_value(3, 1, "", 5))
        assert decode_record(key, offset_value(3, 2, "", 6)).key is first.key  # the live key: memoised
        assert len(offsets_codec._KEY_CACHE) == before + 1
        assert decode_record(key, None).key == first.key  # the tombstone still decodes its key
        assert decode_record(group_key(f"gone-{i}"), None).key == GroupMetadataKey(f"gone-{i}")
        assert len(offsets_codec._KEY_CACHE) == before
    live = offset_key("live", "t", 0)
    decode_record(live, offset_value(3, 1, "", 5))
    assert len(offsets_codec._KEY_CACHE) == before + 1  # a key without a tombstone stays
    # a tombstone of a key never seen is not memoised first (a full memo would be cleared for it)
    full = dict.fromkeys(range(offsets_codec._KEY_CACHE_MAX), None)
    saved = dict(offsets_codec._KEY_CACHE)
    try:
        offsets_codec._KEY_CACHE.clear()
        offsets_codec._KEY_CACHE.update(full)  # type: ignore[arg-type]
        decode_record(offset_key("unseen", "t", 0), None)
        assert len(offsets_codec._KEY_CACHE) == offsets_codec._KEY_CACHE_MAX
    finally:
        offsets_codec._KEY_CACHE.clear()
        offsets_codec._KEY_CACHE.update(saved)


def test_empty_metadata_v3() -> None:
    rec = decode_record(offset_key("g", "t", 0), offset_value(3, 0, "", 5, leader_epoch=0))
    assert rec.value == OffsetCommitValue(3, 0, 0, "", 5, None)


# -- classic group metadata -------------------------------------------------------------------

def _group() -> Group:
    a = consumer_assignment([("orders", [0, 2]), ("audit", [1])])
    return Group(generation=5, protocol="cooperative-sticky", leader="m-1", state_ts=1_700_000_000_999,
                 members=[Member("m-1", client_id="c1", session_timeout=12_000, rebalance_timeout=34_000,
                                 instance_id="static-1", assignment=a, subscription=b"\x00\x00"),
                          Member("m-2", client_id="c2", session_timeout=12_000, rebalance_timeout=34_000)])


@pytest.mark.parametrize(("version", "has_rebalance", "has_state_ts", "has_instance"), [
    (0, False, False, False),  # v0: session timeout only
    (1, True, False, False),   # v1: + rebalance timeout
    (2, True, True, False),    # v2: + current state timestamp
    (3, True, True, True),     # v3 (2.3+, what 3.x/4.x write): + group instance id (static members)
    (4, True, True, True),     # v4: flexible encoding of v3
])
def test_group_metadata_versions(version: int, has_rebalance: bool, has_state_ts: bool,
                                 has_instance: bool) -> None:
    rec = decode_record(group_key("g1"), group_value(version, _group()))
    assert rec.key == GroupMetadataKey("g1")
    v = rec.value
    assert isinstance(v, GroupMetadataValue)
    assert (v.version, v.protocol_type, v.generation, v.protocol, v.leader) == (
        version, "consumer", 5, "cooperative-sticky", "m-1")
    assert v.current_state_timestamp_ms == (1_700_000_000_999 if has_state_ts else None)
    assert [m.member_id for m in v.members] == ["m-1", "m-2"]
    m1 = v.members[0]
    assert m1.session_timeout_ms == 12_000
    assert m1.rebalance_timeout_ms == (34_000 if has_rebalance else None)
    assert m1.group_instance_id == ("static-1" if has_instance else None)
    assert decode_consumer_assignment(m1.assignment) == (("orders", 0), ("orders", 2), ("audit", 1))
    assert decode_consumer_assignment(v.members[1].assignment) == ()


def test_group_metadata_empty_group_and_null_protocol() -> None:
    # an Empty group (all members left) is written with no protocol, leader or members
    rec = decode_record(group_key("g"), group_value(3, Group(protocol_type="", generation=0, protocol=None)))
    assert isinstance(rec.value, GroupMetadataValue)
    assert (rec.value.protocol, rec.value.leader, rec.value.members) == (None, None, ())


def test_group_tombstone() -> None:
    # a null value: the group was deleted (DeleteGroups or expired while empty)
    rec = decode_record(group_key("gone"), None)
    assert rec.key == GroupMetadataKey("gone")
    assert rec.value is None


# -- KIP-848 ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "expected_key", "expected_value"), [
    # type 3: group epoch, with the 4.x metadata hash in tag 0
    (cg_key(3, "g"), cg_metadata_value(9, metadata_hash=-77), ConsumerGroupKey(3, "g"),
     ConsumerGroupMetadataValue(0, 9, -77)),
    # type 3 as 3.7-3.9 write it: no tagged field
    (cg_key(3, "g"), cg_metadata_value(2), ConsumerGroupKey(3, "g"), ConsumerGroupMetadataValue(0, 2)),
    # type 5: member metadata, with a classic-protocol tag (upgraded classic member) to skip
    (cg_key(5, "g", "mem-1"),
     cg_member_value(client_id="console", host="/127.0.0.1", topics=["orders", "audit"],
                     rebalance_timeout=45_000, instance_id="i-1", rack="r1", classic_tag=True),
     ConsumerGroupKey(5, "g", "mem-1"),
     ConsumerGroupMemberValue(0, "i-1", "r1", "console", "/127.0.0.1", ("orders", "audit"), None,
                              45_000, "uniform")),
    # type 6: target assignment epoch and (4.x) its timestamp
    (cg_key(6, "g"), cg_target_metadata_value(9, ts=1_700_000_000_500), ConsumerGroupKey(6, "g"),
     ConsumerGroupTargetAssignmentMetadataValue(0, 9, 1_700_000_000_500)),
    # type 7: target partitions of one member
    (cg_key(7, "g", "mem-1"), cg_target_member_value([(TID, [0, 1]), (TID2, [4])]),
     ConsumerGroupKey(7, "g", "mem-1"),
     ConsumerGroupTargetAssignmentMemberValue(0, (TopicPartitions(TID, (0, 1)), TopicPartitions(TID2, (4,))))),
    # type 8: member epoch/state/owned partitions, with the 4.x per-partition epochs tag to skip
    (cg_key(8, "g", "mem-1"), cg_current_value(9, 8, 1, [(TID, [0])], [(TID2, [3])], tag0=True),
     ConsumerGroupKey(8, "g", "mem-1"),
     ConsumerGroupCurrentAssignmentValue(0, 9, 8, 1, (TopicPartitions(TID, (0,)),),
                                         (TopicPartitions(TID2, (3,)),))),
    # type 4: partition metadata (3.7-4.0): topic id -> name
    (cg_key(4, "g"), cg_partition_metadata_value([(TID, "orders", 2)]), ConsumerGroupKey(4, "g"),
     None),
])
def test_kip848_records(key: bytes, value: bytes, expected_key: ConsumerGroupKey,
                        expected_value: object) -> None:
    rec = decode_record(key, value)
    assert rec.key == expected_key
    if expected_value is None:
        assert isinstance(rec.value, ConsumerGroupPartitionMetadataValue)
        assert [(t.topic_id, t.topic_name, t.num_partitions) for t in rec.value.topics] == [(TID, "orders", 2)]
    else:
        assert rec.value == expected_value


def test_kip848_member_tombstone_and_state_name() -> None:
    # a member-record tombstone = the member left the group
    rec = decode_record(cg_key(5, "g", "mem-1"), None)
    assert rec.key == ConsumerGroupKey(5, "g", "mem-1")
    assert rec.value is None
    v = decode_record(cg_key(8, "g", "m"), cg_current_value(3, 2, 0, [])).value
    assert isinstance(v, ConsumerGroupCurrentAssignmentValue)
    assert v.state_name == "stable"


# -- unknown and undecoded --------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "error", "what"), [
    # share group metadata (KIP-932): known, deliberately not decoded
    (i16(11) + string("share-g"), i16(0) + i32(1) + b"\x00", UndecodedRecordType, "share_group_metadata"),
    # streams group topology (KIP-1071): known, not decoded
    (i16(23) + string("streams-g"), None, UndecodedRecordType, "streams_group_topology"),
    # a future key type: unknown, to count and skip
    (i16(99) + string("g"), b"\x00\x00", UnknownRecordVersion, "type 99"),
    # a future offset-commit value version
    (offset_key("g", "t", 0), i16(5) + b"\x00" * 30, UnknownRecordVersion, "version 5"),
    # a future group-metadata value version
    (group_key("g"), i16(9) + b"\x00" * 30, UnknownRecordVersion, "version 9"),
    # a KIP-848 value version other than 0
    (cg_key(3, "g"), i16(1) + i32(1) + b"\x00", UnknownRecordVersion, "version 1"),
])
def test_unknown_and_undecoded(key: bytes, value: bytes | None, error: type[Exception], what: str) -> None:
    with pytest.raises(error, match=what):
        decode_record(key, value)


@pytest.mark.parametrize(("key", "value", "why"), [
    (None, b"", "without a key"),                            # a keyless record is not ours
    (b"\x00", None, "bad key"),                              # one byte: not even the type
    (offset_key("g", "t", 0)[:-1], None, "bad key"),          # partition cut short
    (i16(1) + i16(50) + b"g", None, "past the end"),          # group string longer than the key
    (group_key("g"), i16(3) + i16(-1), "null where"),          # protocol_type must not be null
    (offset_key("g", "t", 0), i16(3) + b"\x00" * 12 + i16(40), "past the end"),
    (group_key("g"), i16(3) + string("consumer") + i32(1) + i16(-1) + i16(-1) + b"\x00" * 8
     + i32(2**30), "cannot fit"),                             # absurd member count: no huge allocation
    (group_key("g"), i16(3) + string("c") + i32(1) + i16(-5), "invalid string length"),
    (cg_key(8, "g", "m"), i16(0) + i32(1) + i32(0) + b"\x00" + b"\xff\xff\xff\xff\xff\x01", "varint"),
    (offset_key("g", "t", 0), i16(3) + b"\x00" * 12 + i16(2) + b"\xff\xfe" + b"\x00" * 8, "bad value"),
])
def test_corrupt_records_raise_typed_errors(key: bytes | None, value: bytes | None, why: str) -> None:
    with pytest.raises(RecordDecodeError, match=why):
        decode_record(key, value)
