"""Property-based tests of the decoder: typed errors on any input, exact round trips."""

from __future__ import annotations

import uuid

import pytest
from commitlog_records import (
    Group,
    Member,
    cg_current_value,
    cg_key,
    cg_member_value,
    cg_target_member_value,
    consumer_assignment,
    group_key,
    group_value,
    i16,
    offset_key,
    offset_value,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lagscope.collector.offsets_codec import (
    ConsumerGroupCurrentAssignmentValue,
    ConsumerGroupMemberValue,
    ConsumerGroupTargetAssignmentMemberValue,
    DecodedRecord,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_consumer_assignment,
    decode_record,
    decode_value,
)
from lagscope.errors import RecordDecodeError

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

names = st.text(min_size=0, max_size=20)
i32s = st.integers(-(2**31), 2**31 - 1)
i64s = st.integers(-(2**63), 2**63 - 1)
uuids = st.uuids()
tps = st.lists(st.tuples(uuids, st.lists(st.integers(0, 2**31 - 1), max_size=5)), max_size=4)


def _decodes_or_typed_error(key: bytes | None, value: bytes | None) -> DecodedRecord | None:
    try:
        return decode_record(key, value)
    except RecordDecodeError:
        return None


@FAST
@given(st.one_of(st.none(), st.binary(max_size=64)), st.one_of(st.none(), st.binary(max_size=256)))
def test_arbitrary_bytes_never_escape(key: bytes | None, value: bytes | None) -> None:
    # anything at all: a record or a RecordDecodeError, never struct.error/IndexError/UnicodeError
    _decodes_or_typed_error(key, value)


@FAST
@given(st.sampled_from([offset_key("g", "t", 1), group_key("g"), cg_key(3, "g"), cg_key(4, "g"),
                        cg_key(5, "g", "m"), cg_key(6, "g"), cg_key(7, "g", "m"), cg_key(8, "g", "m")]),
       st.integers(-2, 6), st.binary(max_size=300))
def test_valid_key_arbitrary_value(key: bytes, version: int, body: bytes) -> None:
    # drive every value decoder with garbage after a plausible version
    _decodes_or_typed_error(key, i16(version) + body)


@FAST
@given(st.binary(max_size=200))
def test_assignment_arbitrary_bytes(data: bytes) -> None:
    try:
        out = decode_consumer_assignment(data)
    except RecordDecodeError:
        return
    assert all(isinstance(t, str) and isinstance(p, int) for t, p in out)


def _all_prefixes_fail(key: bytes, value: bytes) -> None:
    for cut in range(len(value)):
        try:
            decode_record(key, value[:cut])
        except RecordDecodeError:
            continue
        raise AssertionError(f"a {cut}-byte prefix of a {len(value)}-byte value decoded")
    for cut in range(len(key)):
        try:
            decode_record(key[:cut], None)
        except RecordDecodeError:
            continue
        raise AssertionError(f"a {cut}-byte prefix of a {len(key)}-byte key decoded")


@FAST
@given(names, names, i32s, st.sampled_from([0, 1, 2, 3, 4]), i64s, names, i64s,
       st.integers(-1, 2**31 - 1), st.one_of(st.none(), uuids))
def test_offset_commit_round_trip_and_truncation(group: str, topic: str, partition: int, version: int,
                                                 offset: int, metadata: str, ts: int, epoch: int,
                                                 topic_id: uuid.UUID | None) -> None:
    key = offset_key(group, topic, partition)
    value = offset_value(version, offset, metadata, ts, leader_epoch=epoch, expire_ts=ts,
                         topic_id=topic_id if version == 4 else None)
    rec = decode_record(key, value)
    assert rec.key == OffsetCommitKey(group, topic, partition)
    assert isinstance(rec.value, OffsetCommitValue)
    assert (rec.value.offset, rec.value.metadata, rec.value.commit_timestamp_ms) == (offset, metadata, ts)
    assert rec.value.leader_epoch == (epoch if version >= 3 and epoch >= 0 else None)
    assert rec.value.topic_id == (topic_id if version == 4 else None)
    _all_prefixes_fail(key, value)


members = st.builds(Member, member_id=names, client_id=names, host=names, session_timeout=i32s,
                    rebalance_timeout=i32s, instance_id=st.one_of(st.none(), names),
                    subscription=st.binary(max_size=20),
                    assignment=st.lists(st.tuples(names, st.lists(st.integers(0, 100), max_size=4)),
                                        max_size=3).map(consumer_assignment))
groups = st.builds(Group, protocol_type=names, generation=i32s, protocol=st.one_of(st.none(), names),
                   leader=st.one_of(st.none(), names), state_ts=st.integers(0, 2**62),
                   members=st.lists(members, max_size=4))


@FAST
@given(names, st.sampled_from([0, 1, 2, 3, 4]), groups)
def test_group_metadata_round_trip_and_truncation(group_id: str, version: int, g: Group) -> None:
    key = group_key(group_id)
    value = group_value(version, g)
    v = decode_record(key, value).value
    assert isinstance(v, GroupMetadataValue)
    assert (v.protocol_type, v.generation, v.protocol, v.leader) == (
        g.protocol_type, g.generation, g.protocol, g.leader)
    assert [(m.member_id, m.client_id, m.client_host, m.session_timeout_ms, m.assignment)
            for m in v.members] == [(m.member_id, m.client_id, m.host, m.session_timeout, m.assignment)
                                    for m in g.members]
    if version >= 3:
        assert [m.group_instance_id for m in v.members] == [m.instance_id for m in g.members]
    _all_prefixes_fail(key, value)


@FAST
@given(names, names, i32s, i32s, st.integers(0, 3), tps, tps, names, st.lists(names, max_size=4), i32s)
def test_kip848_round_trip_and_truncation(group: str, member: str, epoch: int, prev: int, state: int,
                                          assigned: list[tuple[uuid.UUID, list[int]]],
                                          pending: list[tuple[uuid.UUID, list[int]]], client: str,
                                          topics: list[str], timeout: int) -> None:
    key = cg_key(8, group, member)
    value = cg_current_value(epoch, prev, state, assigned, pending, tag0=True)
    v = decode_record(key, value).value
    assert isinstance(v, ConsumerGroupCurrentAssignmentValue)
    assert (v.member_epoch, v.previous_member_epoch, v.state) == (epoch, prev, state)
    assert [(tp.topic_id, list(tp.partitions)) for tp in v.assigned] == [(t, list(p)) for t, p in assigned]
    assert [(tp.topic_id, list(tp.partitions)) for tp in v.pending_revocation] == [
        (t, list(p)) for t, p in pending]
    _all_prefixes_fail(key, value)

    key = cg_key(5, group, member)
    value = cg_member_value(client_id=client, host="/h", topics=topics, rebalance_timeout=timeout)
    mv = decode_record(key, value).value
    assert isinstance(mv, ConsumerGroupMemberValue)
    assert (mv.client_id, list(mv.subscribed_topic_names), mv.rebalance_timeout_ms) == (client, topics, timeout)
    _all_prefixes_fail(key, value)

    key = cg_key(7, group, member)
    value = cg_target_member_value(assigned)
    tv = decode_record(key, value).value
    assert isinstance(tv, ConsumerGroupTargetAssignmentMemberValue)
    assert [(tp.topic_id, list(tp.partitions)) for tp in tv.topic_partitions] == [
        (t, list(p)) for t, p in assigned]


@FAST
@given(st.sampled_from([3, 4]), i64s, names, i64s, st.integers(-1, 2**31 - 1),
       st.one_of(st.none(), uuids), st.binary(max_size=3))
def test_offset_fast_path_agrees_with_general_path(version: int, offset: int, metadata: str, ts: int,
                                                  epoch: int, topic_id: uuid.UUID | None,
                                                  trailing: bytes) -> None:
    # decode_record takes an inlined path for v3/v4 commits: it must agree with the general one,
    # trailing bytes (which only the general path accepts) included
    value = offset_value(version, offset, metadata, ts, leader_epoch=epoch, topic_id=topic_id) + trailing
    assert decode_record(offset_key("g", "t", 0), value).value == decode_value(1, value)


@FAST
@given(st.sampled_from([3, 4]), st.binary(min_size=20, max_size=60))
def test_offset_fast_path_errors_agree(version: int, body: bytes) -> None:
    value = i16(version) + body
    try:
        expected = decode_value(1, value)
    except RecordDecodeError:
        with pytest.raises(RecordDecodeError):
            decode_record(offset_key("g", "t", 0), value)
        return
    assert decode_record(offset_key("g", "t", 0), value).value == expected
