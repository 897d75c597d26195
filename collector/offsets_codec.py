"""Decode the records of ``__consumer_offsets``: bytes in, a typed record or a typed error out.

Pure: no I/O, no clock, no logging, so it can be fuzzed (tests/collector/test_offsets_codec*.py).

    >>> rec = decode_record(key_bytes, value_bytes)          # doctest: +SKIP
    >>> isinstance(rec.key, OffsetCommitKey), rec.value.offset  # doctest: +SKIP
    (True, 42)

Framing (the same in Kafka 2.x, 3.x and 4.x)
--------------------------------------------
Each record of ``__consumer_offsets`` has

- a **key**: ``int16 type`` then the key's fields. Before Kafka 4 this short was called the key
  *version*; the 4.x coordinator calls it the *record type* (``CoordinatorRecordType``) and the
  numbers stayed the same, so one table serves every release:

  ====  ==========================================  =================================
  type  record                                       decoded?
  ====  ==========================================  =================================
  0     offset commit (legacy key version 0)          yes (same layout as 1)
  1     offset commit                                 yes
  2     classic group metadata                        yes
  3     KIP-848 consumer group metadata (epoch)       yes
  4     KIP-848 consumer group partition metadata     yes (topic id → name)
  5     KIP-848 consumer group member metadata        yes
  6     KIP-848 target assignment metadata            yes
  7     KIP-848 target assignment member              yes
  8     KIP-848 current member assignment             yes
  9     share group partition metadata (3.9 only)     known, not decoded
  10-15 share group records (KIP-932)                 known, not decoded
  16    consumer group regular expression (4.x)       known, not decoded
  17-23 streams group records (KIP-1071)              known, not decoded
  ====  ==========================================  =================================

  Key fields are never flexible: ``STRING`` = ``int16 length`` + UTF-8 bytes.

- a **value**: ``int16 version`` then the value's fields, or **no value at all** (a tombstone):
  an offset tombstone deletes a committed offset (expiry, ``DeleteConsumerGroupOffsets``), a
  group-metadata tombstone deletes a group, a KIP-848 tombstone deletes that member/assignment.

Value versions (schemas from Kafka's ``group-coordinator/src/main/resources/common/message``,
checked against the generated classes of the 3.9.2 and 4.4.0 jars):

- ``OffsetCommitValue`` v0: offset, metadata, commitTimestamp. v1 (+ ``expireTimestamp``,
  written when an old client sets a retention time), v2 = v0 (2.0), v3 (2.1+, adds
  leaderEpoch; what 2.1-3.9 write, seen on 3.9.2), v4 (3.6+, first flexible version: compact
  metadata + tagged fields, written only when a tagged field is set; Kafka 4.x sets tag 0 =
  topicId, so 4.4.0 writes v4).
- ``GroupMetadataValue`` v0 (session timeout only), v1 (+ rebalanceTimeout), v2
  (+ currentStateTimestamp), v3 (2.3+, + groupInstanceId for static members; what 2.3-4.x
  write), v4 (3.6+, flexible; written only when a tagged field is set).
- KIP-848 values (3.7+ with the new coordinator, the default in 4.x): version 0, flexible.
  Known tagged fields are decoded: ConsumerGroupMetadataValue tag 0 = metadataHash (4.x),
  ConsumerGroupTargetAssignmentMetadataValue tag 0 = assignmentTimestamp (4.x),
  ConsumerGroupMemberMetadataValue tag 0 = classic member metadata (skipped),
  current-assignment TopicPartitions tag 0 = assignment epochs (skipped). Unknown tags are
  skipped, as Kafka does.

Flexible encodings: compact strings/bytes/arrays carry ``unsigned varint (length + 1)`` (0 =
null), every struct ends with a tagged-field section ``varint count, (varint tag, varint size,
bytes)*``.

Errors: every failure is a :class:`~lagscope.errors.RecordDecodeError`;
:class:`UnknownRecordVersion` (a type or version this module does not know) is meant to be
counted and skipped, :class:`UndecodedRecordType` marks a type that is known but deliberately
not decoded (share and streams groups).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Final

from lagscope.errors import RecordDecodeError

__all__ = [
    "KNOWN_UNDECODED_TYPES",
    "MEMBER_STATES",
    "ConsumerGroupCurrentAssignmentValue",
    "ConsumerGroupKey",
    "ConsumerGroupMemberValue",
    "ConsumerGroupMetadataValue",
    "ConsumerGroupPartitionMetadataValue",
    "ConsumerGroupTargetAssignmentMemberValue",
    "ConsumerGroupTargetAssignmentMetadataValue",
    "DecodedRecord",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "MemberMetadata",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "RecordType",
    "TopicMetadata",
    "TopicPartitions",
    "UndecodedRecordType",
    "UnknownRecordVersion",
    "decode_consumer_assignment",
    "decode_key",
    "decode_record",
    "decode_value",
]


class UnknownRecordVersion(RecordDecodeError):
    """A key type or value version this decoder does not know: count it and skip the record."""

    def __init__(self, what: str, record_type: int, version: int | None = None) -> None:
        self.record_type = record_type
        self.version = version
        detail = f"type {record_type}" if version is None else f"type {record_type} value version {version}"
        super().__init__(f"unknown {what}: {detail}")


class UndecodedRecordType(RecordDecodeError):
    """A record type Kafka writes that this decoder knows but does not decode (share/streams)."""

    def __init__(self, record_type: int, name: str) -> None:
        self.record_type = record_type
        self.name = name
        super().__init__(f"known record type {record_type} ({name}) is not decoded")


class RecordType:
    """Key types (the key's leading int16); see the module docstring for the table."""

    LEGACY_OFFSET_COMMIT: Final = 0
    OFFSET_COMMIT: Final = 1
    GROUP_METADATA: Final = 2
    CONSUMER_GROUP_METADATA: Final = 3
    CONSUMER_GROUP_PARTITION_METADATA: Final = 4
    CONSUMER_GROUP_MEMBER_METADATA: Final = 5
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: Final = 6
    CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: Final = 7
    CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: Final = 8


#: record types Kafka 3.x/4.x write that are recognised but not decoded (counted by name)
KNOWN_UNDECODED_TYPES: Final[dict[int, str]] = {
    9: "share_group_partition_metadata",
    10: "share_group_member_metadata",
    11: "share_group_metadata",
    12: "share_group_target_assignment_metadata",
    13: "share_group_target_assignment_member",
    14: "share_group_current_member_assignment",
    15: "share_group_state_partition_metadata",
    16: "consumer_group_regular_expression",
    17: "streams_group_metadata",
    18: "streams_group_partition_metadata",
    19: "streams_group_member_metadata",
    20: "streams_group_target_assignment_metadata",
    21: "streams_group_target_assignment_member",
    22: "streams_group_current_member_assignment",
    23: "streams_group_topology",
}

#: KIP-848 MemberState codes (ConsumerGroupCurrentMemberAssignmentValue.State)
MEMBER_STATES: Final[dict[int, str]] = {
    0: "stable",
    1: "unrevoked_partitions",
    2: "unreleased_partitions",
    3: "unknown",
}

# --------------------------------------------------------------------------------------------
# Records. Keys are frozen (they are cached and shared, see decode_record); values are plain
# slotted dataclasses because one is built per record and a frozen __init__ costs ~5x more:
# treat them as read-only.
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    """Key types 0 and 1: which (group, topic, partition) a commit is for."""

    group: str
    topic: str
    partition: int


@dataclass(slots=True)
class OffsetCommitValue:
    """An offset commit. Timestamps are epoch milliseconds as the coordinator wrote them."""

    version: int
    offset: int
    leader_epoch: int | None  # v3+, None when -1 or absent
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None  # v1 only
    topic_id: uuid.UUID | None = None  # v4 tag 0 (Kafka 4.x)


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Key type 2: a classic group."""

    group: str


@dataclass(slots=True)
class MemberMetadata:
    """One member of a classic group's generation. Timeouts in milliseconds."""

    member_id: str
    group_instance_id: str | None  # v3+ (static membership)
    client_id: str
    client_host: str
    rebalance_timeout_ms: int | None  # v1+
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(slots=True)
class GroupMetadataValue:
    """A classic group's generation: written at every rebalance (and on empty/dead)."""

    version: int
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int | None  # v2+, None when -1
    members: tuple[MemberMetadata, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """Key types 3..8: a KIP-848 consumer group record; ``member_id`` for member-scoped types."""

    record_type: int
    group: str
    member_id: str | None = None


@dataclass(slots=True)
class TopicPartitions:
    """Partitions of one topic, named by topic id (KIP-848 records carry ids, not names)."""

    topic_id: uuid.UUID
    partitions: tuple[int, ...]


@dataclass(slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    topic_name: str
    num_partitions: int


@dataclass(slots=True)
class ConsumerGroupMetadataValue:
    """Type 3: the group epoch (bumped when membership or subscriptions change)."""

    version: int
    epoch: int
    metadata_hash: int | None = None


@dataclass(slots=True)
class ConsumerGroupPartitionMetadataValue:
    """Type 4: the subscribed topics' metadata (topic id → name), 3.7-4.0."""

    version: int
    topics: tuple[TopicMetadata, ...]


@dataclass(slots=True)
class ConsumerGroupMemberValue:
    """Type 5: a member joined or changed its subscription."""

    version: int
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMetadataValue:
    """Type 6: the epoch of the group's target assignment (and, 4.x, when it was computed)."""

    version: int
    assignment_epoch: int
    assignment_timestamp_ms: int | None = None


@dataclass(slots=True)
class ConsumerGroupTargetAssignmentMemberValue:
    """Type 7: the partitions the target assignment gives one member."""

    version: int
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(slots=True)
class ConsumerGroupCurrentAssignmentValue:
    """Type 8: a member's current epoch, state and owned/revoking partitions."""

    version: int
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: tuple[TopicPartitions, ...]
    pending_revocation: tuple[TopicPartitions, ...]

    @property
    def state_name(self) -> str:
        return MEMBER_STATES.get(self.state, f"state_{self.state}")


Key = OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey
Value = (OffsetCommitValue | GroupMetadataValue | ConsumerGroupMetadataValue
         | ConsumerGroupPartitionMetadataValue | ConsumerGroupMemberValue
         | ConsumerGroupTargetAssignmentMetadataValue | ConsumerGroupTargetAssignmentMemberValue
         | ConsumerGroupCurrentAssignmentValue)


@dataclass(slots=True)
class DecodedRecord:
    """A decoded key and its value; ``value is None`` for a tombstone."""

    key: Key
    value: Value | None


# --------------------------------------------------------------------------------------------
# Primitive readers. Every reader takes (buf, pos) and returns (value, new_pos); bounds are
# checked explicitly (slices never raise), struct.error is turned into RecordDecodeError by the
# public entry points.
# --------------------------------------------------------------------------------------------

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_Q = struct.Struct(">q")
_B = struct.Struct(">b")
_QI = struct.Struct(">qi")
_HQI = struct.Struct(">hqi")
_II = struct.Struct(">ii")
_IIB = struct.Struct(">iib")
_UUID = struct.Struct(">16s")


class _Truncated(RecordDecodeError):
    pass


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    (n,) = _H.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        raise RecordDecodeError(f"null where a string is required at byte {pos - 2}")
    end = pos + n
    if end > len(buf):
        raise _Truncated(f"string of {n} bytes runs past the end ({len(buf)} bytes)")
    return buf[pos:end].decode(), end


def _nullable_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    (n,) = _H.unpack_from(buf, pos)
    pos += 2
    if n < 0:
        if n != -1:
            raise RecordDecodeError(f"invalid string length {n} at byte {pos - 2}")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise _Truncated(f"string of {n} bytes runs past the end ({len(buf)} bytes)")
    return buf[pos:end].decode(), end


def _bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = _I.unpack_from(buf, pos)
    pos += 4
    if n < 0:
        raise RecordDecodeError(f"null where bytes are required at byte {pos - 4}")
    end = pos + n
    if end > len(buf):
        raise _Truncated(f"bytes of length {n} run past the end ({len(buf)} bytes)")
    return bytes(buf[pos:end]), end


def _array_len(buf: bytes, pos: int) -> tuple[int, int]:
    (n,) = _I.unpack_from(buf, pos)
    if n < 0:
        raise RecordDecodeError(f"invalid array length {n} at byte {pos}")
    # every element takes at least one byte: a bigger count is corrupt, not a big allocation
    if n > len(buf) - pos:
        raise _Truncated(f"array of {n} elements cannot fit in {len(buf) - pos} bytes")
    return n, pos + 4


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise _Truncated("varint runs past the end")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise RecordDecodeError("varint longer than 5 bytes")


def _compact_len(buf: bytes, pos: int) -> tuple[int, int]:
    """Compact length: -1 for null, else the length (checked against the remaining bytes)."""
    n, pos = _uvarint(buf, pos)
    n -= 1
    if n > len(buf) - pos:
        raise _Truncated(f"compact field of {n} bytes/elements runs past the end")
    return n, pos


def _compact_string(buf: bytes, pos: int) -> tuple[str, int]:
    n, pos = _compact_len(buf, pos)
    if n < 0:
        raise RecordDecodeError(f"null where a string is required at byte {pos - 1}")
    return buf[pos:pos + n].decode(), pos + n


def _compact_nullable_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    n, pos = _compact_len(buf, pos)
    if n < 0:
        return None, pos
    return buf[pos:pos + n].decode(), pos + n


def _compact_bytes(buf: bytes, pos: int) -> tuple[bytes, int]:
    n, pos = _compact_len(buf, pos)
    if n < 0:
        raise RecordDecodeError(f"null where bytes are required at byte {pos - 1}")
    return bytes(buf[pos:pos + n]), pos + n


def _compact_array_len(buf: bytes, pos: int) -> tuple[int, int]:
    n, pos = _compact_len(buf, pos)
    if n < 0:
        raise RecordDecodeError(f"null where an array is required at byte {pos - 1}")
    return n, pos


def _tagged(buf: bytes, pos: int) -> tuple[dict[int, bytes], int]:
    """A tagged-field section: ``{tag: raw bytes}`` (empty in the common case)."""
    count, pos = _uvarint(buf, pos)
    if not count:
        return {}, pos
    fields: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = _uvarint(buf, pos)
        size, pos = _uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise _Truncated(f"tagged field {tag} of {size} bytes runs past the end")
        fields[tag] = bytes(buf[pos:end])
        pos = end
    return fields, pos


def _uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
    (raw,) = _UUID.unpack_from(buf, pos)
    return uuid.UUID(bytes=raw), pos + 16


def _compact_topic_partitions(buf: bytes, pos: int) -> tuple[tuple[TopicPartitions, ...], int]:
    n, pos = _compact_array_len(buf, pos)
    out = []
    for _ in range(n):
        topic_id, pos = _uuid(buf, pos)
        m, pos = _compact_array_len(buf, pos)
        if pos + 4 * m > len(buf):
            raise _Truncated(f"{m} partitions run past the end")
        parts = struct.unpack_from(f">{m}i", buf, pos)
        pos += 4 * m
        _, pos = _tagged(buf, pos)  # tag 0 (4.x current assignment): assignment epochs
        out.append(TopicPartitions(topic_id, parts))
    return tuple(out), pos


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------


def decode_key(key: bytes) -> Key:
    """Decode a record key; raises RecordDecodeError (UnknownRecordVersion, UndecodedRecordType)."""
    try:
        return _decode_key(key)
    except RecordDecodeError:
        raise
    except (struct.error, UnicodeDecodeError, IndexError, ValueError) as exc:
        raise RecordDecodeError(f"bad key: {exc}") from exc


def _decode_key(key: bytes) -> Key:
    (kind,) = _H.unpack_from(key, 0)
    if kind <= 1:
        if kind < 0:
            raise UnknownRecordVersion("key", kind)
        # hot path, inlined: int16 type, STRING group, STRING topic, INT32 partition
        (n,) = _H.unpack_from(key, 2)
        p = 4 + n
        if n < 0 or p > len(key):
            raise _Truncated("group string runs past the end of the offset key")
        group = key[4:p].decode()
        (n,) = _H.unpack_from(key, p)
        q = p + 2 + n
        if n < 0 or q > len(key):
            raise _Truncated("topic string runs past the end of the offset key")
        topic = key[p + 2:q].decode()
        (partition,) = _I.unpack_from(key, q)
        return OffsetCommitKey(group, topic, partition)
    if kind == RecordType.GROUP_METADATA:
        group, _ = _string(key, 2)
        return GroupMetadataKey(group)
    if kind in (RecordType.CONSUMER_GROUP_METADATA, RecordType.CONSUMER_GROUP_PARTITION_METADATA,
                RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA):
        group, _ = _string(key, 2)
        return ConsumerGroupKey(kind, group)
    if kind in (RecordType.CONSUMER_GROUP_MEMBER_METADATA,
                RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER,
                RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT):
        group, pos = _string(key, 2)
        member, _ = _string(key, pos)
        return ConsumerGroupKey(kind, group, member)
    name = KNOWN_UNDECODED_TYPES.get(kind)
    if name is not None:
        raise UndecodedRecordType(kind, name)
    raise UnknownRecordVersion("key", kind)


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------


def decode_value(record_type: int, value: bytes) -> Value:
    """Decode a (non-null) value of the given key type."""
    try:
        return _decode_value(record_type, value)
    except RecordDecodeError:
        raise
    except (struct.error, UnicodeDecodeError, IndexError, ValueError, OverflowError) as exc:
        raise RecordDecodeError(f"bad value of type {record_type}: {exc}") from exc


def _decode_value(kind: int, value: bytes) -> Value:
    (version,) = _H.unpack_from(value, 0)
    if kind <= 1:
        return _offset_commit_value(version, value)
    if kind == RecordType.GROUP_METADATA:
        return _group_metadata_value(version, value)
    if version != 0:
        raise UnknownRecordVersion("value", kind, version)
    if kind == RecordType.CONSUMER_GROUP_METADATA:
        (epoch,) = _I.unpack_from(value, 2)
        tags, _ = _tagged(value, 6)
        mh = tags.get(0)
        return ConsumerGroupMetadataValue(0, epoch, _Q.unpack(mh)[0] if mh and len(mh) == 8 else None)
    if kind == RecordType.CONSUMER_GROUP_PARTITION_METADATA:
        return _partition_metadata_value(value)
    if kind == RecordType.CONSUMER_GROUP_MEMBER_METADATA:
        return _member_value(value)
    if kind == RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA:
        (epoch,) = _I.unpack_from(value, 2)
        tags, _ = _tagged(value, 6)
        ts = tags.get(0)
        return ConsumerGroupTargetAssignmentMetadataValue(
            0, epoch, _Q.unpack(ts)[0] if ts and len(ts) == 8 else None)
    if kind == RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER:
        tps, pos = _compact_topic_partitions(value, 2)
        _tagged(value, pos)
        return ConsumerGroupTargetAssignmentMemberValue(0, tps)
    if kind == RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT:
        epoch, prev, state = _IIB.unpack_from(value, 2)
        assigned, pos = _compact_topic_partitions(value, 11)
        pending, pos = _compact_topic_partitions(value, pos)
        _tagged(value, pos)
        return ConsumerGroupCurrentAssignmentValue(0, epoch, prev, state, assigned, pending)
    raise UnknownRecordVersion("value", kind, version)


def _offset_commit_value(version: int, value: bytes) -> OffsetCommitValue:
    # v0/v2: offset INT64, metadata STRING, commit_timestamp INT64
    # v1:    + expire_timestamp INT64
    # v3:    offset INT64, leader_epoch INT32, metadata STRING, commit_timestamp INT64
    # v4:    v3 with a COMPACT_STRING metadata and a tagged section (tag 0 = topic id)
    if version == 3:
        offset, epoch = _QI.unpack_from(value, 2)
        (n,) = _H.unpack_from(value, 14)
        p = 16 + n
        if n < 0 or p > len(value):
            raise _Truncated("metadata string runs past the end of the offset value v3")
        metadata = value[16:p].decode() if n else ""
        (ts,) = _Q.unpack_from(value, p)
        return OffsetCommitValue(3, offset, None if epoch < 0 else epoch, metadata, ts, None)
    if version in (0, 1, 2):
        (offset,) = _Q.unpack_from(value, 2)
        metadata, pos = _string(value, 10)
        (ts,) = _Q.unpack_from(value, pos)
        expire = None
        if version == 1:
            (expire,) = _Q.unpack_from(value, pos + 8)
            if expire < 0:
                expire = None
        return OffsetCommitValue(version, offset, None, metadata, ts, expire)
    if version == 4:
        offset, epoch = _QI.unpack_from(value, 2)
        metadata, pos = _compact_string(value, 14)
        (ts,) = _Q.unpack_from(value, pos)
        tags, _ = _tagged(value, pos + 8)
        raw_id = tags.get(0)
        topic_id = uuid.UUID(bytes=raw_id) if raw_id and len(raw_id) == 16 else None
        return OffsetCommitValue(4, offset, None if epoch < 0 else epoch, metadata, ts, None, topic_id)
    raise UnknownRecordVersion("value", RecordType.OFFSET_COMMIT, version)


def _group_metadata_value(version: int, value: bytes) -> GroupMetadataValue:
    # v0: protocol_type STRING, generation INT32, protocol NULLABLE_STRING, leader NULLABLE_STRING,
    #     members ARRAY(member_id, client_id, client_host, session_timeout, subscription, assignment)
    # v1: members + rebalance_timeout (before session_timeout)
    # v2: + current_state_timestamp INT64 before members
    # v3: members + group_instance_id NULLABLE_STRING after member_id
    # v4: v3 with compact encodings and tagged sections (group and every member)
    if version < 0 or version > 4:
        raise UnknownRecordVersion("value", RecordType.GROUP_METADATA, version)
    flexible = version >= 4
    s = _compact_string if flexible else _string
    ns = _compact_nullable_string if flexible else _nullable_string
    by = _compact_bytes if flexible else _bytes
    protocol_type, pos = s(value, 2)
    (generation,) = _I.unpack_from(value, pos)
    protocol, pos = ns(value, pos + 4)
    leader, pos = ns(value, pos)
    state_ts: int | None = None
    if version >= 2:
        (state_ts,) = _Q.unpack_from(value, pos)
        pos += 8
        if state_ts is not None and state_ts < 0:
            state_ts = None
    n, pos = (_compact_array_len if flexible else _array_len)(value, pos)
    members = []
    for _ in range(n):
        member_id, pos = s(value, pos)
        instance: str | None = None
        if version >= 3:
            instance, pos = ns(value, pos)
        client_id, pos = s(value, pos)
        host, pos = s(value, pos)
        rebalance: int | None = None
        if version >= 1:
            rebalance, session = _II.unpack_from(value, pos)
            pos += 8
        else:
            (session,) = _I.unpack_from(value, pos)
            pos += 4
        subscription, pos = by(value, pos)
        assignment, pos = by(value, pos)
        if flexible:
            _, pos = _tagged(value, pos)
        members.append(MemberMetadata(member_id, instance, client_id, host, rebalance, session,
                                      subscription, assignment))
    if flexible:
        _tagged(value, pos)
    return GroupMetadataValue(version, protocol_type, generation, protocol, leader, state_ts,
                              tuple(members))


def _partition_metadata_value(value: bytes) -> ConsumerGroupPartitionMetadataValue:
    # topics COMPACT_ARRAY(topic_id UUID, topic_name COMPACT_STRING, num_partitions INT32,
    #   partition_metadata COMPACT_ARRAY(partition INT32, racks COMPACT_ARRAY(COMPACT_STRING), tags),
    #   tags), tags
    n, pos = _compact_array_len(value, 2)
    topics = []
    for _ in range(n):
        topic_id, pos = _uuid(value, pos)
        name, pos = _compact_string(value, pos)
        (num,) = _I.unpack_from(value, pos)
        m, pos = _compact_array_len(value, pos + 4)
        for _ in range(m):
            pos += 4
            r, pos = _compact_array_len(value, pos)
            for _ in range(r):
                _, pos = _compact_string(value, pos)
            _, pos = _tagged(value, pos)
        _, pos = _tagged(value, pos)
        topics.append(TopicMetadata(topic_id, name, num))
    _tagged(value, pos)
    return ConsumerGroupPartitionMetadataValue(0, tuple(topics))


def _member_value(value: bytes) -> ConsumerGroupMemberValue:
    # instance_id, rack_id COMPACT_NULLABLE_STRING, client_id, client_host COMPACT_STRING,
    # subscribed_topic_names COMPACT_ARRAY(COMPACT_STRING), subscribed_topic_regex
    # COMPACT_NULLABLE_STRING, rebalance_timeout_ms INT32, server_assignor COMPACT_NULLABLE_STRING,
    # tags (0 = classic member metadata: skipped)
    instance, pos = _compact_nullable_string(value, 2)
    rack, pos = _compact_nullable_string(value, pos)
    client_id, pos = _compact_string(value, pos)
    host, pos = _compact_string(value, pos)
    n, pos = _compact_array_len(value, pos)
    topics = []
    for _ in range(n):
        t, pos = _compact_string(value, pos)
        topics.append(t)
    regex, pos = _compact_nullable_string(value, pos)
    (rebalance,) = _I.unpack_from(value, pos)
    assignor, pos = _compact_nullable_string(value, pos + 4)
    _tagged(value, pos)
    return ConsumerGroupMemberValue(0, instance, rack, client_id, host, tuple(topics), regex,
                                    rebalance, assignor)


# --------------------------------------------------------------------------------------------
# Records and the embedded consumer protocol
# --------------------------------------------------------------------------------------------


_KEY_CACHE: dict[bytes, Key] = {}
_KEY_CACHE_MAX = 100_000
_UUID_CACHE: dict[bytes, uuid.UUID] = {}


def _offset_commit_value_fast(value: bytes) -> OffsetCommitValue | None:
    """The common shapes of OffsetCommitValue v3/v4, inline; None sends it to the general path.

    v3: int16 3, int64 offset, int32 leader epoch, int16 metadata length + bytes, int64 commit ts.
    v4: int16 4, int64 offset, int32 leader epoch, 1-byte compact metadata length, int64 commit
        ts, tagged section that is empty or holds only tag 0 (16-byte topic id).
    """
    size = len(value)
    if size < 23:
        return None
    version, offset, epoch = _HQI.unpack_from(value, 0)
    if version == 4:
        n = value[14]
        if not 0 < n < 0x80:
            return None
        p = 14 + n  # 15 + (n - 1) metadata bytes
        if p + 9 > size:
            return None
        metadata = value[15:p].decode() if n > 1 else ""
        (ts,) = _Q.unpack_from(value, p)
        tags = value[p + 8]
        if tags == 0 and p + 9 == size:
            return OffsetCommitValue(4, offset, None if epoch < 0 else epoch, metadata, ts, None)
        if tags == 1 and p + 27 == size and value[p + 9] == 0 and value[p + 10] == 16:
            raw = value[p + 11:p + 27]
            tid = _UUID_CACHE.get(raw)
            if tid is None:
                if len(_UUID_CACHE) >= _KEY_CACHE_MAX:
                    _UUID_CACHE.clear()
                tid = _UUID_CACHE[raw] = uuid.UUID(bytes=raw)
            return OffsetCommitValue(4, offset, None if epoch < 0 else epoch, metadata, ts, None, tid)
        return None
    if version == 3:
        (n,) = _H.unpack_from(value, 14)
        p = 16 + n
        if n < 0 or p + 8 > size:
            return None
        metadata = value[16:p].decode() if n else ""
        (ts,) = _Q.unpack_from(value, p)
        return OffsetCommitValue(3, offset, None if epoch < 0 else epoch, metadata, ts, None)
    return None


def decode_record(key: bytes | None, value: bytes | None) -> DecodedRecord:
    """Decode one ``__consumer_offsets`` record; ``value=None`` is a tombstone.

    Raises :class:`RecordDecodeError` (never anything else) for bytes it cannot decode;
    :class:`UnknownRecordVersion` and :class:`UndecodedRecordType` are its subclasses for
    records to count and skip.
    """
    if key is None:
        raise RecordDecodeError("record without a key")
    # Keys repeat (the same group/topic/partition commits again and again): memoise them.
    # A tombstone's key is not kept: the group or its offsets are gone (deleted, expired), so is the
    # key's reason to be kept; under groups that come and go the memo holds the live keys only.
    k = _KEY_CACHE.get(key) if type(key) is bytes else None
    if k is None:
        k = decode_key(key)
        if type(key) is bytes and value is not None:
            if len(_KEY_CACHE) >= _KEY_CACHE_MAX:
                _KEY_CACHE.clear()
            _KEY_CACHE[key] = k
    if value is None:
        if type(key) is bytes:
            _KEY_CACHE.pop(key, None)
        return DecodedRecord(k, None)
    if type(k) is OffsetCommitKey:
        try:
            fast = _offset_commit_value_fast(value)
        except (UnicodeDecodeError, TypeError):
            fast = None  # the general path raises the typed error
        if fast is not None:
            return DecodedRecord(k, fast)
        kind = RecordType.OFFSET_COMMIT
    elif isinstance(k, OffsetCommitKey):
        kind = RecordType.OFFSET_COMMIT
    elif isinstance(k, GroupMetadataKey):
        kind = RecordType.GROUP_METADATA
    else:
        kind = k.record_type
    return DecodedRecord(k, decode_value(kind, value))


def decode_consumer_assignment(data: bytes) -> tuple[tuple[str, int], ...]:
    """Decode a classic member's assignment (ConsumerProtocolAssignment v0-v3) to (topic, partition).

    Layout: int16 version, ARRAY(topic STRING, partitions ARRAY(INT32)), user_data NULLABLE_BYTES.
    All versions share this prefix (v1+ only bumped for cooperative rebalancing semantics). Empty
    bytes (no assignment yet) decode to ``()``.
    """
    if not data:  # a member that has no assignment yet (mid-rebalance)
        return ()
    try:
        (version,) = _H.unpack_from(data, 0)
        if version < 0:
            raise RecordDecodeError(f"invalid consumer assignment version {version}")
        n, pos = _array_len(data, 2)
        out: list[tuple[str, int]] = []
        for _ in range(n):
            topic, pos = _string(data, pos)
            m, pos = _array_len(data, pos)
            if pos + 4 * m > len(data):
                raise _Truncated("assignment partitions run past the end")
            out.extend((topic, p) for p in struct.unpack_from(f">{m}i", data, pos))
            pos += 4 * m
        return tuple(out)
    except RecordDecodeError:
        raise
    except (struct.error, UnicodeDecodeError, IndexError, ValueError) as exc:
        raise RecordDecodeError(f"bad consumer assignment: {exc}") from exc
