"""An independent encoder of ``__consumer_offsets`` records, for the decoder's tests and fakes.

Written from Kafka's message JSON schemas (see collector/offsets_codec.py for the table), not
from the decoder, so that a round trip checks both against the specification.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def string(s: str) -> bytes:
    b = s.encode()
    return i16(len(b)) + b


def nstring(s: str | None) -> bytes:
    return i16(-1) if s is None else string(s)


def bytes32(b: bytes) -> bytes:
    return i32(len(b)) + b


def uvarint(v: int) -> bytes:
    out = bytearray()
    while True:
        byte = v & 0x7F
        v >>= 7
        if v:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def cstring(s: str) -> bytes:
    b = s.encode()
    return uvarint(len(b) + 1) + b


def cnstring(s: str | None) -> bytes:
    return b"\x00" if s is None else cstring(s)


def cbytes(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def carray(items: Sequence[bytes]) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def tags(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    out = uvarint(len(fields))
    for tag in sorted(fields):
        out += uvarint(tag) + uvarint(len(fields[tag])) + fields[tag]
    return out


# -- keys -------------------------------------------------------------------------------------

def offset_key(group: str, topic: str, partition: int, key_type: int = 1) -> bytes:
    return i16(key_type) + string(group) + string(topic) + i32(partition)


def group_key(group: str) -> bytes:
    return i16(2) + string(group)


def cg_key(record_type: int, group: str, member: str | None = None) -> bytes:
    return i16(record_type) + string(group) + (b"" if member is None else string(member))


# -- values -----------------------------------------------------------------------------------

def offset_value(version: int, offset: int, metadata: str, commit_ts: int, *, leader_epoch: int = -1,
                 expire_ts: int = -1, topic_id: uuid.UUID | None = None) -> bytes:
    out = i16(version) + i64(offset)
    if version >= 3:
        out += i32(leader_epoch)
    if version >= 4:
        out += cstring(metadata) + i64(commit_ts)
        return out + tags({0: topic_id.bytes} if topic_id else None)
    out += string(metadata) + i64(commit_ts)
    if version == 1:
        out += i64(expire_ts)
    return out


@dataclass
class Member:
    member_id: str
    client_id: str = "client"
    host: str = "/127.0.0.1"
    session_timeout: int = 10_000
    rebalance_timeout: int = 30_000
    instance_id: str | None = None
    subscription: bytes = b""
    assignment: bytes = b""


@dataclass
class Group:
    protocol_type: str = "consumer"
    generation: int = 1
    protocol: str | None = "range"
    leader: str | None = None
    state_ts: int = -1
    members: list[Member] = field(default_factory=list)


def group_value(version: int, g: Group) -> bytes:
    flexible = version >= 4
    s, ns, by = (cstring, cnstring, cbytes) if flexible else (string, nstring, bytes32)
    out = i16(version) + s(g.protocol_type) + i32(g.generation) + ns(g.protocol) + ns(g.leader)
    if version >= 2:
        out += i64(g.state_ts)
    members = []
    for m in g.members:
        b = s(m.member_id)
        if version >= 3:
            b += ns(m.instance_id)
        b += s(m.client_id) + s(m.host)
        if version >= 1:
            b += i32(m.rebalance_timeout)
        b += i32(m.session_timeout) + by(m.subscription) + by(m.assignment)
        if flexible:
            b += tags()
        members.append(b)
    if flexible:
        return out + carray(members) + tags()
    return out + i32(len(members)) + b"".join(members)


def consumer_assignment(parts: Sequence[tuple[str, Sequence[int]]], version: int = 0) -> bytes:
    out = i16(version) + i32(len(parts))
    for topic, ps in parts:
        out += string(topic) + i32(len(ps)) + b"".join(i32(p) for p in ps)
    return out + i32(-1)


def cg_metadata_value(epoch: int, metadata_hash: int | None = None) -> bytes:
    return i16(0) + i32(epoch) + tags({0: i64(metadata_hash)} if metadata_hash is not None else None)


def topic_partitions(items: Sequence[tuple[uuid.UUID, Sequence[int]]], tag0: bool = False) -> bytes:
    out = []
    for tid, ps in items:
        tp_tags = {0: carray([i32(1) for _ in ps])} if tag0 else None
        out.append(tid.bytes + carray([i32(p) for p in ps]) + tags(tp_tags))
    return carray(out)


def cg_member_value(*, client_id: str, host: str, topics: Sequence[str], rebalance_timeout: int,
                    instance_id: str | None = None, rack: str | None = None,
                    regex: str | None = None, assignor: str | None = "uniform",
                    classic_tag: bool = False) -> bytes:
    out = (i16(0) + cnstring(instance_id) + cnstring(rack) + cstring(client_id) + cstring(host)
           + carray([cstring(t) for t in topics]) + cnstring(regex) + i32(rebalance_timeout)
           + cnstring(assignor))
    # tag 0 = ClassicMemberMetadata {SupportedProtocols: [ {Name, Metadata} ]}
    classic = carray([cstring("range") + cbytes(b"\x00\x01") + tags()]) + tags()
    return out + tags({0: classic} if classic_tag else None)


def cg_target_metadata_value(epoch: int, ts: int | None = None) -> bytes:
    return i16(0) + i32(epoch) + tags({0: i64(ts)} if ts is not None else None)


def cg_target_member_value(items: Sequence[tuple[uuid.UUID, Sequence[int]]]) -> bytes:
    return i16(0) + topic_partitions(items) + tags()


def cg_current_value(epoch: int, prev: int, state: int,
                     assigned: Sequence[tuple[uuid.UUID, Sequence[int]]],
                     pending: Sequence[tuple[uuid.UUID, Sequence[int]]] = (),
                     tag0: bool = False) -> bytes:
    return (i16(0) + i32(epoch) + i32(prev) + i8(state) + topic_partitions(assigned, tag0)
            + topic_partitions(pending, tag0) + tags())


def cg_partition_metadata_value(topics: Sequence[tuple[uuid.UUID, str, int]]) -> bytes:
    items = []
    for tid, name, n in topics:
        parts = [i32(p) + carray([cstring("rack-a")]) + tags() for p in range(n)]
        items.append(tid.bytes + cstring(name) + i32(n) + carray(parts) + tags())
    return i16(0) + carray(items) + tags()
