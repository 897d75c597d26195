"""ConsumerGroupDescribe (API 69): the decoder on hand-built bytes, and a real KIP-848 consumer."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import kafka.errors as kerr
import pyarrow as pa
import pytest
from commitlog_records import carray as carr
from commitlog_records import cnstring as cstr
from commitlog_records import i16, i32, uvarint
from kafka.protocol.metadata import FindCoordinatorResponse

from lagscope.collector.kip848 import (
    ConsumerGroupDescribeDecodeError,
    ConsumerGroupDescribeResponse,
    ConsumerGroupDescribeUnsupported,
    ConsumerGroupDescription,
    ConsumerGroupMember,
    TopicAssignment,
    decode_response,
    describe_consumer_groups,
    describe_for_sweep,
    describe_request,
    members_rows,
    resolve_topic_names,
)
from lagscope.collector.model import MEMBER_COLUMNS, Snapshot
from lagscope.errors import KafkaUnavailable, ProtocolError
from lagscope.schema import MEMBERS

# -- a tiny writer of the flexible-version wire format, written from the protocol spec ------------
# (independent of the JSON schema the module gives kafka-python, so the two check each other);
# the primitives are the ones the __consumer_offsets tests encode with


NO_TAGS = uvarint(0)


def _target(member: ConsumerGroupMember) -> list[tuple[str, int]]:
    return sorted((ta.topic, p) for ta in member.target_assignment for p in ta.partitions)


def tags(*fields: tuple[int, bytes]) -> bytes:
    """A tagged-field section: count, then (tag, size, data) per field."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in fields)


def assignment(*topics: tuple[uuid.UUID, str, Sequence[int]]) -> bytes:
    return carr([tid.bytes + cstr(name) + carr([i32(p) for p in parts]) + NO_TAGS
                 for tid, name, parts in topics]) + NO_TAGS


def member(member_id: str, *, instance: str | None = None, rack: str | None = None, epoch: int = 5,
           client: str = "c", host: str = "/10.1.1.1", topics: Sequence[str] = (), regex: str | None = None,
           current: bytes = b"", target: bytes = b"", member_tags: bytes = NO_TAGS) -> bytes:
    return (cstr(member_id) + cstr(instance) + cstr(rack) + i32(epoch) + cstr(client) + cstr(host)
            + carr([cstr(t) for t in topics]) + cstr(regex) + (current or assignment()) + (target or assignment())
            + member_tags)


def group(group_id: str, *, error: int = 0, message: str | None = None, state: str = "Stable", epoch: int = 9,
          assignment_epoch: int = 9, assignor: str = "uniform", members: Sequence[bytes] = (),
          ops: int = -(2**31)) -> bytes:
    return (i16(error) + cstr(message) + cstr(group_id) + cstr(state) + i32(epoch) + i32(assignment_epoch)
            + cstr(assignor) + carr(list(members)) + i32(ops) + NO_TAGS)


def response(*groups: bytes, throttle_ms: int = 0) -> bytes:
    return i32(throttle_ms) + carr(list(groups)) + NO_TAGS


T_ORDERS = uuid.UUID("11111111-2222-3333-4444-555555555555")
T_AUDIT = uuid.UUID("99999999-8888-7777-6666-555555555555")

FULL = response(
    group("orders-svc", members=[
        member("m-1", client="orders-1", host="/10.0.0.1", topics=["orders"],
               current=assignment((T_ORDERS, "orders", [0, 2])), target=assignment((T_ORDERS, "orders", [0, 2]))),
        # a static member reconciling: owns p1 now, is to own p1 and p3; the coordinator left one name empty
        member("m-2", instance="pod-2", rack="rack-b", epoch=8, client="orders-2", host="/10.0.0.2",
               topics=["orders", "audit"], regex=None,
               current=assignment((T_ORDERS, "orders", [1])),
               target=assignment((T_ORDERS, "orders", [1, 3]), (T_AUDIT, "", [0]))),
    ]),
    group("gone", error=69, message="Group gone not found.", state="", epoch=0, assignment_epoch=0, assignor=""),
)


def test_decode_full_response() -> None:
    orders, gone = decode_response(FULL)
    assert orders == ConsumerGroupDescription(
        group_id="orders-svc", state="Stable", group_epoch=9, assignment_epoch=9, assignor="uniform",
        members=(
            ConsumerGroupMember("m-1", None, None, 5, "orders-1", "/10.0.0.1", ("orders",), None,
                                (TopicAssignment(T_ORDERS, "orders", (0, 2)),),
                                (TopicAssignment(T_ORDERS, "orders", (0, 2)),)),
            ConsumerGroupMember("m-2", "pod-2", "rack-b", 8, "orders-2", "/10.0.0.2", ("orders", "audit"), None,
                                (TopicAssignment(T_ORDERS, "orders", (1,)),),
                                (TopicAssignment(T_ORDERS, "orders", (1, 3)), TopicAssignment(T_AUDIT, "", (0,)))),
        ),
        unresolved_topic_ids=frozenset({T_AUDIT}),
    )
    assert orders.ok
    assert orders.members[1].partitions() == [("orders", 1)]
    assert _target(orders.members[1]) == [("", 0), ("orders", 1), ("orders", 3)]
    # an error for one group is a value, not an exception
    assert not gone.ok
    assert gone.error_code == 69
    assert gone.error == "GroupIdNotFoundError: Group gone not found."


def test_unknown_tagged_fields_are_skipped() -> None:
    # a newer broker may add tagged fields to a member: they must not break decoding
    data = response(group("g", members=[member("m", topics=["t"], member_tags=tags((7, b"\x01\x02\x03")))]))
    [g] = decode_response(data)
    assert g.members[0].member_id == "m"
    assert g.members[0].subscribed_topic_names == ("t",)


def test_authorized_operations_when_requested() -> None:
    [g] = decode_response(response(group("g", ops=0b1010)))
    assert g.authorized_operations == 0b1010


def test_truncated_bytes_raise_a_typed_error() -> None:
    # every proper prefix of a valid response is invalid, and says so with the typed error
    for cut in range(len(FULL)):
        with pytest.raises(ConsumerGroupDescribeDecodeError):
            decode_response(FULL[:cut])


@pytest.mark.parametrize(("data", "why"), [
    # one byte after the end of the response
    (FULL + b"\x00", "trailing"),
    # a group id that is not UTF-8
    (response(i16(0) + cstr(None) + uvarint(3) + b"\xff\xfe" + cstr("Stable") + i32(1) + i32(1) + cstr("u")
              + carr([]) + i32(0) + NO_TAGS), "cannot decode"),
    # an array length far beyond the data
    (i32(0) + uvarint(1_000_000) + NO_TAGS, "cannot decode"),
    # nothing at all
    (b"", "cannot decode"),
    # a null where the schema has a non-nullable string (GroupId)
    (response(i16(0) + cstr(None) + cstr(None) + cstr("Stable") + i32(1) + i32(1) + cstr("u")
              + carr([]) + i32(0) + NO_TAGS), "GroupId is null"),
])
def test_malformed_bytes_raise_a_typed_error(data: bytes, why: str) -> None:
    with pytest.raises(ConsumerGroupDescribeDecodeError, match=why) as info:
        decode_response(data)
    assert isinstance(info.value, ProtocolError)


def test_request_encoding() -> None:
    request = describe_request(["a", "bc"])
    # compact array of 2 compact strings, bool false, empty tag section
    assert bytes(request.encode(version=0)) == carr([cstr("a"), cstr("bc")]) + b"\x00" + NO_TAGS
    assert request.API_KEY == 69


@pytest.mark.parametrize("ids", [[], [""]])
def test_request_needs_group_ids(ids: list[str]) -> None:
    with pytest.raises(ValueError, match="group_ids"):
        describe_request(ids)


def test_resolve_topic_names() -> None:
    orders, _ = decode_response(FULL)
    resolved = resolve_topic_names(orders, {T_AUDIT: "audit"})
    assert resolved.unresolved_topic_ids == frozenset()
    assert _target(resolved.members[1]) == [("audit", 0), ("orders", 1), ("orders", 3)]
    # ids the metadata does not know stay unresolved (topic deleted meanwhile)
    assert resolve_topic_names(orders, {}).unresolved_topic_ids == {T_AUDIT}


SWEEP_TS = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def test_members_rows_fit_the_lake_and_the_snapshot() -> None:
    orders, _ = decode_response(FULL)
    rows = members_rows(orders, SWEEP_TS)
    assert [r["member_id"] for r in rows] == ["m-1", "m-2"]
    assert rows[1] == {
        "sweep_ts": SWEEP_TS, "group_id": "orders-svc", "group_state": "Stable", "protocol_type": "consumer",
        "protocol": "uniform", "group_protocol": "consumer", "generation": 9, "member_id": "m-2",
        "group_instance_id": "pod-2", "client_id": "orders-2", "host": "10.0.0.2",
        "subscribed_topics": ["orders", "audit"], "assignment": [{"topic": "orders", "partition": 1}],
    }
    assert set(rows[0]) <= MEMBER_COLUMNS
    pa.Table.from_pylist(rows, schema=MEMBERS.schema)  # converts: types and nullability fit
    Snapshot("c", {"sweep_ts": SWEEP_TS, "ok": True}, members=rows)


def test_members_rows_of_an_empty_group() -> None:
    [g] = decode_response(response(group("idle", state="Empty", epoch=4)))
    [row] = members_rows(g, SWEEP_TS)
    assert row["member_id"] is None
    assert row["group_state"] == "Empty"
    assert row["generation"] == 4
    pa.Table.from_pylist([row], schema=MEMBERS.schema)


# -- the calling code, on a fake transport (the real broker is in test_kip848_broker.py) ------------


class FakeClient:
    """Has the ClusterClient surface (send/run/api_version); answers with canned response bytes."""

    def __init__(self, *answers: bytes | Any, version_error: Exception | None = None) -> None:
        self.answers = list(answers)
        self.sent: list[tuple[Any, int | None]] = []
        self.version_error = version_error

    def api_version(self, request_cls: Any) -> int:
        if self.version_error is not None:
            raise self.version_error
        return 0

    def send(self, request: Any, node_id: int | None = None) -> Any:
        self.sent.append((request, node_id))
        data = self.answers.pop(0)

        async def answer() -> Any:
            if isinstance(data, bytes):
                return ConsumerGroupDescribeResponse.decode(data, version=0)
            return data  # an already-built response object (e.g. FindCoordinator)
        return answer()

    def run(self, coro: Any, *args: Any) -> Any:
        return asyncio.run(coro(*args))


def test_describe_with_a_known_coordinator_keeps_the_asked_order() -> None:
    client = FakeClient(response(group("b"), group("a", members=[member("m", topics=["t"])])))
    got = describe_consumer_groups(client, 3, ["a", "b", "a"])
    assert [d.group_id for d in got] == ["a", "b"]
    [(request, node)] = client.sent
    assert node == 3
    assert request.group_ids == ["a", "b"]  # asked once each


def test_broker_without_api_69_is_a_typed_error() -> None:
    client = FakeClient(version_error=kerr.IncompatibleBrokerVersion("no 69"))
    with pytest.raises(ConsumerGroupDescribeUnsupported, match="API 69"):
        describe_consumer_groups(client, 1, ["g"])
    assert client.sent == []


def test_unsupported_client_type() -> None:
    with pytest.raises(TypeError, match="unsupported client"):
        describe_consumer_groups(object(), 1, ["g"])


def test_describe_for_sweep_fills_the_sweep_records() -> None:
    data = response(
        group("ok", state="Reconciling", epoch=12, assignor="range", members=[
            member("m1", instance="pod-1", client="c1", host="/10.0.0.9", topics=["t"],
                   current=assignment((T_ORDERS, "t", [1, 0])))]),
        group("bad", error=16, message=None),  # NOT_COORDINATOR
    )
    records = {gid: SimpleNamespace(group_id=gid, coordinator=0, error=None, described=False, state=None,
                                    protocol=None, protocol_type=None, group_protocol="classic", generation=None,
                                    members=[], owners={})
               for gid in ("ok", "bad")}
    asyncio.run(describe_for_sweep(FakeClient(data), list(records.values())))
    ok, bad = records["ok"], records["bad"]
    assert (ok.described, ok.state, ok.protocol, ok.protocol_type, ok.group_protocol, ok.generation) == \
        (True, "Reconciling", "range", "consumer", "consumer", 12)
    assert ok.members == [{"member_id": "m1", "group_instance_id": "pod-1", "client_id": "c1", "host": "10.0.0.9",
                           "subscribed_topics": ["t"],
                           "assignment": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}]
    assert ok.owners == {("t", 0): ("m1", "c1", "10.0.0.9"), ("t", 1): ("m1", "c1", "10.0.0.9")}
    assert bad.described is False
    assert bad.error == "ConsumerGroupDescribe: NotCoordinatorError"


def _coordinators(*entries: tuple[str, int, int]) -> Any:
    """A FindCoordinator v4 response: (group, node id, error code) per group."""
    c = FindCoordinatorResponse.Coordinator
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=0, error_message=None, node_id=0, host="", port=0,
                                   coordinators=[c(key=k, node_id=n, host="h", port=1, error_code=e,
                                                   error_message=None) for k, n, e in entries])


def test_loading_coordinator_is_asked_again() -> None:
    # COORDINATOR_NOT_AVAILABLE (15) twice (a fresh broker creating __consumer_offsets), then found
    client = FakeClient(_coordinators(("g", -1, 15)), _coordinators(("g", -1, 15)), _coordinators(("g", 2, 0)),
                        response(group("g", state="Empty")))
    [desc] = describe_consumer_groups(client, None, ["g"], coordinator_wait_s=5)
    assert desc.state == "Empty"
    assert client.sent[-1][1] == 2  # the describe went to the coordinator found


def test_coordinator_that_never_comes_is_kafka_unavailable() -> None:
    client = FakeClient(*[_coordinators(("g", -1, 15))] * 50)
    with pytest.raises(KafkaUnavailable, match="no coordinator for group 'g'"):
        describe_consumer_groups(client, None, ["g"], coordinator_wait_s=0.5)
    # a non-transient error is not retried
    client = FakeClient(_coordinators(("g", -1, 30)))  # GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaUnavailable, match="GroupAuthorizationFailedError"):
        describe_consumer_groups(client, None, ["g"], coordinator_wait_s=5)
    assert len(client.sent) == 1
