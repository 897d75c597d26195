"""Decode the consumer protocol's member metadata and assignment (classic groups). Pure: bytes in,
a frozen dataclass (or :class:`~lagscope.errors.ProtocolError`) out.

DescribeGroups returns, per member of a group whose protocol type is ``consumer``, two opaque
byte strings that the *client* wrote (``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` in Apache Kafka's ``clients/src/main/resources/common/message``).
Both are non-flexible (classic) encodings, big-endian:

Subscription (``MemberMetadata``)::

    version           int16    0..3 (newer versions only append fields: read the known prefix)
    topics            [string] int32 count, each int16 length + UTF-8
    user_data         bytes    int32 length (-1 = null) + bytes          (assignor private)
    owned_partitions  v1+      int32 count of (topic string, [int32] partitions)
    generation_id     v2+      int32 (-1 = unknown)
    rack_id           v3+      nullable string (int16 length, -1 = null)

Assignment (``MemberAssignment``)::

    version             int16
    assigned_partitions int32 count of (topic string, [int32] partitions)
    user_data           bytes  int32 length (-1 = null)

An empty byte string is legal (a member that has not received an assignment yet, or a group
in PreparingRebalance) and decodes to an empty value. Anything truncated or negative where
it cannot be raises :class:`ProtocolError`, never ``struct.error`` or ``IndexError``.

    >>> decode_assignment(bytes.fromhex("0000" "00000001" "0001" "74" "00000001" "00000002" "ffffffff"))
    Assignment(version=0, partitions=(('t', 2),), user_data=None)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from lagscope.errors import ProtocolError

__all__ = ["Assignment", "Subscription", "decode_assignment", "decode_subscription"]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_MAX_COUNT = 10_000_000  # more array entries than this cannot fit in a real message


@dataclass(frozen=True)
class Subscription:
    """What a member asked for: topics, the partitions it owns (cooperative), its rack."""

    version: int
    topics: tuple[str, ...]
    user_data: bytes | None
    owned_partitions: tuple[tuple[str, int], ...] = ()
    generation: int | None = None
    rack_id: str | None = None


@dataclass(frozen=True)
class Assignment:
    """What the group leader's assignor gave a member: (topic, partition) pairs."""

    version: int
    partitions: tuple[tuple[str, int], ...]
    user_data: bytes | None


class _Reader:
    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str) -> None:
        self.buf = memoryview(buf)
        self.pos = 0
        self.what = what

    def _take(self, n: int) -> memoryview:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise ProtocolError(f"{self.what}: truncated at byte {self.pos} (need {n}, have "
                                f"{len(self.buf) - self.pos})")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def i16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def i32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def count(self) -> int:
        n = self.i32()
        if n < -1 or n > _MAX_COUNT:
            raise ProtocolError(f"{self.what}: impossible array length {n} at byte {self.pos - 4}")
        return max(n, 0)  # -1 = null array, read as empty

    def string(self, *, nullable: bool = False) -> str | None:
        n = self.i16()
        if n == -1 and nullable:
            return None
        if n < 0:
            raise ProtocolError(f"{self.what}: negative string length {n} at byte {self.pos - 2}")
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self.what}: string is not UTF-8 at byte {self.pos - n}") from exc

    def text(self) -> str:
        s = self.string()
        assert s is not None
        return s

    def bytes_(self) -> bytes | None:
        n = self.i32()
        if n == -1:
            return None
        return bytes(self._take(n))

    def topic_partitions(self) -> tuple[tuple[str, int], ...]:
        out: list[tuple[str, int]] = []
        for _ in range(self.count()):
            topic = self.text()
            out.extend((topic, self.i32()) for _ in range(self.count()))
        return tuple(out)


def decode_subscription(data: bytes) -> Subscription:
    """Decode a classic consumer member's ``MemberMetadata`` (see the module docstring)."""
    if not data:
        return Subscription(version=0, topics=(), user_data=None)
    r = _Reader(data, "consumer subscription")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"consumer subscription: negative version {version}")
    topics = tuple(r.text() for _ in range(r.count()))
    user_data = r.bytes_()
    owned: tuple[tuple[str, int], ...] = ()
    generation: int | None = None
    rack: str | None = None
    # newer clients may send a version we do not know: its known prefix still decodes, and the
    # optional tail is read only if present (old brokers/clients stop after user_data)
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        gen = r.i32()
        generation = None if gen < 0 else gen
    if version >= 3 and not r.at_end():
        rack = r.string(nullable=True)
    return Subscription(version, topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> Assignment:
    """Decode a classic consumer member's ``MemberAssignment`` (see the module docstring)."""
    if not data:
        return Assignment(version=0, partitions=(), user_data=None)
    r = _Reader(data, "consumer assignment")
    version = r.i16()
    if version < 0:
        raise ProtocolError(f"consumer assignment: negative version {version}")
    partitions = r.topic_partitions()
    user_data = r.bytes_() if not r.at_end() else None
    return Assignment(version, partitions, user_data)
