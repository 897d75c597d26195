"""ConsumerGroupDescribe (API key 69, KIP-848): describe groups that use the consumer protocol.

Groups whose members run ``group.protocol=consumer`` (Kafka 4) are not described by
DescribeGroups (it answers with an empty, protocol-less group); ConsumerGroupDescribe is their
describe call. kafka-python 3 has no class for it, so this module defines one with
kafka-python's own JSON-schema message machinery (``ApiMessage`` subclasses whose wire
format is read from ``ConsumerGroupDescribeRequest.json`` / ``…Response.json`` next to this
file, written from the protocol's published schema), and converts the decoded response into
frozen dataclasses.

Wire format, version 0 (flexible: compact strings and arrays, a tagged-field section after
every struct)::

    Request  => GroupIds: [string]  IncludeAuthorizedOperations: bool
    Response => ThrottleTimeMs: int32
                Groups: [ ErrorCode: int16  ErrorMessage: string?  GroupId: string
                          GroupState: string  GroupEpoch: int32  AssignmentEpoch: int32
                          AssignorName: string
                          Members: [ MemberId: string  InstanceId: string?  RackId: string?
                                     MemberEpoch: int32  ClientId: string  ClientHost: string
                                     SubscribedTopicNames: [string]  SubscribedTopicRegex: string?
                                     Assignment: Assignment  TargetAssignment: Assignment ]
                          AuthorizedOperations: int32 ]
    Assignment => TopicPartitions: [ TopicId: uuid  TopicName: string  Partitions: [int32] ]

Only version 0 is spoken (version 1 only adds a member type, classic or consumer, that
lagscope does not need); brokers from Kafka 4.0 on accept it.

Which groups use the consumer protocol: ListGroups v5 filters by type, which kafka-python 3
already speaks (``KafkaAdminClient.list_groups(types_filter=["consumer"])``), and a
DescribeGroups answer for such a group has an empty protocol type.

    >>> with ClusterClient(cluster) as client:                                 # doctest: +SKIP
    ...     client.connect()
    ...     [desc] = describe_consumer_groups(client, None, ["orders"])
    ...     desc.state, [m.partitions() for m in desc.members]
    ('Stable', [[('orders', 0), ('orders', 1)]])
    >>> rows = members_rows(desc, sweep_ts)                                    # doctest: +SKIP

Errors (all under :class:`lagscope.errors.LagscopeError`)::

    ProtocolError
    ├── ConsumerGroupDescribeDecodeError    the response bytes could not be decoded
    └── ConsumerGroupDescribeUnsupported    the broker does not speak API 69 (Kafka < 4.0)
    KafkaUnavailable                        no answer, or no coordinator for a group

A group the coordinator cannot describe (for instance a classic group: GROUP_ID_NOT_FOUND)
is returned with :attr:`ConsumerGroupDescription.error` set, not raised.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import kafka.errors as kerr
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from lagscope.errors import KafkaUnavailable, ProtocolError

__all__ = [
    "API_KEY",
    "ConsumerGroupDescribeDecodeError",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "ConsumerGroupDescribeUnsupported",
    "ConsumerGroupDescription",
    "ConsumerGroupMember",
    "TopicAssignment",
    "decode_response",
    "describe_consumer_groups",
    "describe_for_sweep",
    "describe_request",
    "members_rows",
    "parse_response",
    "resolve_topic_names",
    "topic_names_by_id",
]

API_KEY = 69
#: the AuthorizedOperations value meaning "not requested"
_OPS_NOT_REQUESTED = -(2**31)


class ConsumerGroupDescribeDecodeError(ProtocolError):
    """The bytes of a ConsumerGroupDescribe response could not be decoded."""


class ConsumerGroupDescribeUnsupported(ProtocolError):
    """The broker does not support ConsumerGroupDescribe (API key 69; Kafka < 4.0)."""


# -- the protocol messages (kafka-python reads the wire format from the JSON files beside this module)

_SCHEMAS = sys.modules[__name__]  # kafka-python loads "<ClassName>.json" from this module's package


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """ConsumerGroupDescribe request (API 69): ``group_ids``, ``include_authorized_operations``."""


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_SCHEMAS):  # type: ignore[misc,call-arg]
    """ConsumerGroupDescribe response (API 69); see the module docstring for its fields."""


# -- the decoded values ---------------------------------------------------------------------


@dataclass(frozen=True)
class TopicAssignment:
    """Partitions of one topic assigned to a member. ``topic`` is "" until resolved from the id."""

    topic_id: uuid.UUID
    topic: str
    partitions: tuple[int, ...]


@dataclass(frozen=True)
class ConsumerGroupMember:
    """One member of a consumer-protocol group, as the coordinator describes it."""

    member_id: str
    instance_id: str | None  # group.instance.id (static membership); None when dynamic
    rack_id: str | None  # client.rack; None when unset
    member_epoch: int
    client_id: str
    client_host: str  # as the coordinator sees it, e.g. "/127.0.0.1"
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicAssignment, ...]  # what the member owns now
    target_assignment: tuple[TopicAssignment, ...]  # what it is to own when reconciled

    def partitions(self) -> list[tuple[str, int]]:
        """The current assignment as sorted ``(topic, partition)`` pairs."""
        return sorted((ta.topic, p) for ta in self.assignment for p in ta.partitions)


@dataclass(frozen=True)
class ConsumerGroupDescription:
    """A consumer-protocol group: state, epochs, server assignor and members.

    ``error`` is None when the group was described, else the Kafka error name and message
    (the other fields are then whatever the coordinator sent, usually empty).
    """

    group_id: str
    state: str  # Empty | Assigning | Reconciling | Stable | Dead (KIP-848 states)
    group_epoch: int
    assignment_epoch: int
    assignor: str  # the server-side assignor, e.g. "uniform" or "range"
    members: tuple[ConsumerGroupMember, ...] = ()
    error_code: int = 0
    error: str | None = None
    authorized_operations: int | None = None  # bit field; None when not requested
    unresolved_topic_ids: frozenset[uuid.UUID] = field(default_factory=frozenset)

    @property
    def ok(self) -> bool:
        return self.error_code == 0


# -- pure encoding / decoding --------------------------------------------------------------


def describe_request(group_ids: Iterable[str], *, include_authorized_operations: bool = False) -> Any:
    """A ConsumerGroupDescribe request (version 0) for ``group_ids``."""
    ids = list(group_ids)
    if not ids or any(not isinstance(g, str) or not g for g in ids):
        raise ValueError("group_ids must be non-empty strings")
    return ConsumerGroupDescribeRequest(group_ids=ids, include_authorized_operations=include_authorized_operations,
                                        max_version=0)


def decode_response(data: bytes | bytearray | memoryview) -> list[ConsumerGroupDescription]:
    """Decode the body of a version-0 ConsumerGroupDescribe response (no frame, no header).

    Raises :class:`ConsumerGroupDescribeDecodeError` on truncated, malformed or over-long input.
    """
    raw = bytes(data)
    cls: Any = ConsumerGroupDescribeResponse
    try:
        decode = cls._struct.compiled_decode_from(0, compact=True, tagged=True, data_class=cls)
        response, end = decode(memoryview(raw), 0)
    except Exception as exc:  # struct.error, IndexError, UnicodeDecodeError, ValueError …: all mean bad bytes
        raise ConsumerGroupDescribeDecodeError(
            f"ConsumerGroupDescribe response: cannot decode {len(raw)} bytes: {type(exc).__name__}: {exc}"
        ) from exc
    if end != len(raw):
        raise ConsumerGroupDescribeDecodeError(
            f"ConsumerGroupDescribe response: {len(raw) - end} unexpected trailing bytes after offset {end}")
    return parse_response(response)


def _assignment(value: Any) -> tuple[TopicAssignment, ...]:
    if value is None:
        return ()
    return tuple(
        TopicAssignment(topic_id=tp.topic_id, topic=_required(tp.topic_name, "TopicName"),
                        partitions=tuple(int(p) for p in tp.partitions))
        for tp in (value.topic_partitions or ())
    )


def _error_text(code: int, message: str | None) -> str | None:
    if code == 0:
        return None
    name = kerr.for_code(code).__name__
    return f"{name}: {message}" if message else name


def _required(value: Any, name: str) -> str:
    """A non-nullable string of the schema; null there means the bytes are not a valid response."""
    if not isinstance(value, str):
        raise ConsumerGroupDescribeDecodeError(f"ConsumerGroupDescribe response: {name} is null")
    return value


def parse_response(response: Any) -> list[ConsumerGroupDescription]:
    """Convert a decoded :class:`ConsumerGroupDescribeResponse` into descriptions.

    Raises :class:`ConsumerGroupDescribeDecodeError` when a non-nullable string is null.
    """
    out: list[ConsumerGroupDescription] = []
    for g in response.groups:
        members = tuple(
            ConsumerGroupMember(
                member_id=_required(m.member_id, "MemberId"),
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=int(m.member_epoch),
                client_id=_required(m.client_id, "ClientId"),
                client_host=_required(m.client_host, "ClientHost"),
                subscribed_topic_names=tuple(_required(t, "SubscribedTopicNames")
                                             for t in (m.subscribed_topic_names or ())),
                subscribed_topic_regex=m.subscribed_topic_regex or None,
                assignment=_assignment(m.assignment),
                target_assignment=_assignment(m.target_assignment),
            )
            for m in (g.members or ())
        )
        ops = int(g.authorized_operations) if g.authorized_operations is not None else _OPS_NOT_REQUESTED
        desc = ConsumerGroupDescription(
            group_id=_required(g.group_id, "GroupId"),
            state=_required(g.group_state, "GroupState"),
            group_epoch=int(g.group_epoch),
            assignment_epoch=int(g.assignment_epoch),
            assignor=_required(g.assignor_name, "AssignorName"),
            members=members,
            error_code=int(g.error_code),
            error=_error_text(int(g.error_code), g.error_message),
            authorized_operations=None if ops == _OPS_NOT_REQUESTED else ops,
        )
        out.append(_mark_unresolved(desc))
    return out


def _mark_unresolved(desc: ConsumerGroupDescription) -> ConsumerGroupDescription:
    missing = frozenset(ta.topic_id for m in desc.members for ta in (*m.assignment, *m.target_assignment)
                        if not ta.topic)
    return replace(desc, unresolved_topic_ids=missing)


def resolve_topic_names(desc: ConsumerGroupDescription, names: Mapping[uuid.UUID, str]) -> ConsumerGroupDescription:
    """Fill the topic names the coordinator left empty from ``names`` (topic id → name)."""
    if not desc.unresolved_topic_ids:
        return desc

    def fix(assignment: tuple[TopicAssignment, ...]) -> tuple[TopicAssignment, ...]:
        return tuple(replace(ta, topic=ta.topic or names.get(ta.topic_id, "")) for ta in assignment)

    members = tuple(replace(m, assignment=fix(m.assignment), target_assignment=fix(m.target_assignment))
                    for m in desc.members)
    return _mark_unresolved(replace(desc, members=members))


# -- lake rows -------------------------------------------------------------------------------


def members_rows(desc: ConsumerGroupDescription, sweep_ts: dt.datetime) -> list[dict[str, Any]]:
    """MEMBERS rows (:data:`lagscope.schema.MEMBERS`) for one described group.

    One row per member; a group with no members gets one row with a null ``member_id``.
    ``generation`` is the group epoch; ``protocol`` the server-side assignor; ``host`` the
    client address without the leading "/" the coordinator puts there (as for classic groups).
    """
    base: dict[str, Any] = {
        "sweep_ts": sweep_ts,
        "group_id": desc.group_id,
        "group_state": desc.state or None,
        "protocol_type": "consumer",
        "protocol": desc.assignor or None,
        "group_protocol": "consumer",
        "generation": desc.group_epoch,
    }
    if not desc.members:
        return [{**base, "member_id": None, "group_instance_id": None, "client_id": None, "host": None,
                 "subscribed_topics": None, "assignment": None}]
    return [
        {**base,
         "member_id": m.member_id,
         "group_instance_id": m.instance_id,
         "client_id": m.client_id,
         "host": m.client_host.lstrip("/") or None,
         "subscribed_topics": list(m.subscribed_topic_names),
         "assignment": [{"topic": t, "partition": p} for t, p in m.partitions()]}
        for m in desc.members
    ]


# -- talking to the cluster ------------------------------------------------------------------


@dataclass(frozen=True)
class _Transport:
    send: Callable[[Any, int | None], Any]  # (request, node_id) -> awaitable kafka Future
    run: Callable[..., Any]  # run(coro_fn, *args) -> result, on kafka-python's I/O thread
    version_of: Callable[[Any], int]  # request class -> version both sides speak


def _transport(client: Any) -> _Transport:
    """Adapt lagscope's ClusterClient, or kafka-python's KafkaAdminClient / KafkaNetClient."""
    manager = getattr(client, "_manager", None)
    if manager is not None:  # kafka-python client
        return _Transport(send=lambda req, node: manager.send(req, node_id=node), run=manager.run,
                          version_of=lambda cls: int(manager.broker_version_data.api_version(cls)))
    if all(hasattr(client, a) for a in ("send", "run", "api_version")):  # lagscope.collector.kafka_client.ClusterClient
        return _Transport(send=lambda req, node: client.send(req, node), run=client.run,
                          version_of=lambda cls: int(client.api_version(cls)))
    raise TypeError(f"describe_consumer_groups: unsupported client {type(client).__name__}")


#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE: transient (e.g. __consumer_offsets being created)
_COORDINATOR_PENDING = frozenset({14, 15})


class _CoordinatorPending(KafkaUnavailable):
    """The coordinator is loading or not elected yet: worth asking again shortly."""


async def _find_coordinators(t: _Transport, group_ids: Sequence[str]) -> dict[str, int]:
    request = FindCoordinatorRequest(key_type=0, coordinator_keys=list(group_ids), min_version=4)
    response = await t.send(request, None)
    out: dict[str, int] = {}
    for c in response.coordinators:
        if c.error_code in _COORDINATOR_PENDING:
            raise _CoordinatorPending(f"no coordinator for group {c.key!r} yet: "
                                      f"{_error_text(c.error_code, c.error_message)}")
        if c.error_code != 0 or c.node_id < 0:
            raise KafkaUnavailable(f"no coordinator for group {c.key!r}: {_error_text(c.error_code, c.error_message)}")
        out[c.key] = int(c.node_id)
    return out


async def _topic_names(t: _Transport) -> dict[uuid.UUID, str]:
    response = await t.send(MetadataRequest(topics=None, allow_auto_topic_creation=False, min_version=10), None)
    return {tp.topic_id: tp.name for tp in response.topics if tp.name and tp.topic_id is not None}


async def _describe_by_node(t: _Transport, by_node: Mapping[int, Sequence[str]],
                            resolve_topics: bool) -> list[ConsumerGroupDescription]:
    """Send one request per coordinator (all in flight at once), then resolve missing topic names."""
    futures = [t.send(describe_request(groups), node) for node, groups in by_node.items() if groups]
    described: list[ConsumerGroupDescription] = []
    for future in futures:
        described.extend(parse_response(await future))
    if resolve_topics and any(d.unresolved_topic_ids for d in described):
        names = await _topic_names(t)
        described = [resolve_topic_names(d, names) for d in described]
    return described


async def _describe(t: _Transport, coordinator: int | None, group_ids: Sequence[str],
                    resolve_topics: bool) -> list[ConsumerGroupDescription]:
    by_node: dict[int, list[str]] = {}
    if coordinator is None:
        for group, node in (await _find_coordinators(t, group_ids)).items():
            by_node.setdefault(node, []).append(group)
    else:
        by_node[coordinator] = list(group_ids)
    described = await _describe_by_node(t, by_node, resolve_topics)
    order = {g: i for i, g in enumerate(group_ids)}
    return sorted(described, key=lambda d: order.get(d.group_id, len(order)))


def topic_names_by_id(client: Any) -> dict[uuid.UUID, str]:
    """Every topic's id → name, from one Metadata request (v10+, the first with topic ids)."""
    t = _transport(client)
    try:
        names: dict[uuid.UUID, str] = t.run(_topic_names, t)
    except kerr.KafkaError as exc:
        raise KafkaUnavailable(f"Metadata failed: {type(exc).__name__}: {exc}") from exc
    return names


def describe_consumer_groups(client: Any, coordinator: int | None, group_ids: Iterable[str], *,
                             resolve_topics: bool = True, coordinator_wait_s: float = 10.0
                             ) -> list[ConsumerGroupDescription]:
    """Describe consumer-protocol (KIP-848) groups with ConsumerGroupDescribe.

    ``client``: a connected :class:`lagscope.collector.kafka_client.ClusterClient`, or a
    kafka-python ``KafkaAdminClient``/``KafkaNetClient``. ``coordinator``: the node id of the
    groups' coordinator, or None to look each group's coordinator up (FindCoordinator v4,
    batched; a coordinator that is still loading is asked again for up to
    ``coordinator_wait_s``). Topic names the coordinator leaves empty are resolved from topic
    ids with a Metadata request. Returns one description per group, in the order asked.

    Raises :class:`ConsumerGroupDescribeUnsupported` when the broker does not speak API 69,
    :class:`ConsumerGroupDescribeDecodeError` when its answer is not a valid response, and
    :class:`~lagscope.errors.KafkaUnavailable` when a broker does not answer.
    """
    ids = list(dict.fromkeys(group_ids))
    if not ids:
        return []
    t = _transport(client)
    try:
        t.version_of(ConsumerGroupDescribeRequest)
    except kerr.IncompatibleBrokerVersion as exc:
        raise ConsumerGroupDescribeUnsupported(f"ConsumerGroupDescribe (API 69) is not supported: {exc}") from exc
    deadline = time.monotonic() + coordinator_wait_s
    while True:
        try:
            return _run_describe(t, coordinator, ids, resolve_topics)
        except _CoordinatorPending:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.3)


def _run_describe(t: _Transport, coordinator: int | None, ids: list[str],
                  resolve_topics: bool) -> list[ConsumerGroupDescription]:
    try:
        result: list[ConsumerGroupDescription] = t.run(_describe, t, coordinator, ids, resolve_topics)
    except kerr.IncompatibleBrokerVersion as exc:
        raise ConsumerGroupDescribeUnsupported(f"ConsumerGroupDescribe (API 69) is not supported: {exc}") from exc
    except kerr.KafkaError as exc:
        raise KafkaUnavailable(f"ConsumerGroupDescribe failed: {type(exc).__name__}: {exc}") from exc
    return result



async def describe_for_sweep(client: Any, groups: Sequence[Any]) -> None:
    """The sweep's hook (runs on kafka-python's I/O thread): describe consumer-protocol groups.

    ``groups`` are the sweep's group records (duck-typed: ``group_id``, ``coordinator``, and
    the fields set here). Each described group gets ``described``, ``state``, ``protocol``
    (server assignor), ``protocol_type`` ("consumer"), ``group_protocol`` ("consumer"),
    ``generation`` (group epoch), one ``members`` entry per member (the MEMBERS row minus the
    group columns) and ``owners[(topic, partition)] = (member_id, client_id, host)``; a group
    the coordinator could not describe gets ``error``. Raises what the transport raises (the
    sweep records it against every group of the batch).
    """
    t = _transport(client)
    by_node: dict[int, list[str]] = {}
    records: dict[str, Any] = {}
    for g in groups:
        if g.coordinator is not None:
            by_node.setdefault(int(g.coordinator), []).append(g.group_id)
            records[g.group_id] = g
    for desc in await _describe_by_node(t, by_node, resolve_topics=True):
        g = records.get(desc.group_id)
        if g is None:
            continue
        if not desc.ok:
            g.error = g.error or f"ConsumerGroupDescribe: {desc.error}"
            continue
        g.described = True
        g.state = desc.state or g.state
        g.protocol = desc.assignor or None
        g.protocol_type = "consumer"
        g.group_protocol = "consumer"
        g.generation = desc.group_epoch
        for row in members_rows(desc, _EPOCH):
            if row["member_id"] is None:
                continue
            g.members.append({k: row[k] for k in _MEMBER_KEYS})
            for tp in row["assignment"]:
                g.owners[(tp["topic"], tp["partition"])] = (row["member_id"], row["client_id"], row["host"])


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MEMBER_KEYS = ("member_id", "group_instance_id", "client_id", "host", "subscribed_topics", "assignment")
