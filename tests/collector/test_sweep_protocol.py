"""Pure parts of the sweep: consumer-protocol decoding, the lag rule, rows from gathered answers."""

from __future__ import annotations

import contextlib
import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

from lagscope.collector.consumer_protocol import decode_assignment, decode_subscription
from lagscope.collector.rows import ColumnRows
from lagscope.collector.sweep import _Group, _Raw, build_snapshot, lag_columns
from lagscope.config import ClusterConfig
from lagscope.errors import ProtocolError
from lagscope.schema import OFFSETS

TS = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)


def _sub(version: int, **kw: object) -> bytes:
    tp = ConsumerProtocolSubscription.TopicPartition
    fields: dict[str, object] = {"version": version, "topics": ["orders", "refunds"], "user_data": b"\x01\x02"}
    if version >= 1:
        fields["owned_partitions"] = [tp(topic="orders", partitions=[0, 3])]
    if version >= 2:
        fields["generation_id"] = 12
    if version >= 3:
        fields["rack_id"] = "eu-1a"
    fields.update(kw)
    return bytes(ConsumerProtocolSubscription(**fields).encode())


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_every_version_decodes_like_kafka_python_encodes(version: int) -> None:
    sub = decode_subscription(_sub(version))
    assert sub.version == version
    assert sub.topics == ("orders", "refunds")
    assert sub.user_data == b"\x01\x02"
    assert sub.owned_partitions == ((("orders", 0), ("orders", 3)) if version >= 1 else ())
    assert sub.generation == (12 if version >= 2 else None)
    assert sub.rack_id == ("eu-1a" if version >= 3 else None)


def test_assignment_decodes_partitions_in_wire_order() -> None:
    tp = ConsumerProtocolAssignment.TopicPartition
    data = ConsumerProtocolAssignment(version=1, assigned_partitions=[tp(topic="a", partitions=[2, 0]),
                                                                      tp(topic="b", partitions=[1])],
                                      user_data=None).encode()
    a = decode_assignment(bytes(data))
    assert a.partitions == (("a", 2), ("a", 0), ("b", 1))
    assert a.user_data is None


def test_empty_bytes_mean_no_subscription_or_assignment_yet() -> None:
    # a member in PreparingRebalance has an empty assignment: not an error
    assert decode_assignment(b"").partitions == ()
    assert decode_subscription(b"").topics == ()


@pytest.mark.parametrize("cut", [1, 3, 7, 12])
def test_truncated_assignment_is_a_protocol_error(cut: int) -> None:
    tp = ConsumerProtocolAssignment.TopicPartition
    data = bytes(ConsumerProtocolAssignment(version=0, assigned_partitions=[tp(topic="orders", partitions=[0, 1])],
                                            user_data=b"u").encode())
    with pytest.raises(ProtocolError, match="truncated"):
        decode_assignment(data[:cut])


def test_future_subscription_version_decodes_its_known_prefix() -> None:
    # a client newer than us (version 9) appends fields: we still read topics and owned partitions
    data = bytearray(_sub(3))
    data[0:2] = (9).to_bytes(2, "big")
    sub = decode_subscription(bytes(data) + b"\x00\x00\x00\x05")
    assert sub.version == 9
    assert sub.topics == ("orders", "refunds")
    assert sub.rack_id == "eu-1a"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decoders_raise_only_protocol_errors_on_garbage(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        with contextlib.suppress(ProtocolError):
            decode(data)


# (committed, hw, lso, read_committed) -> (lag, lag_basis); the OFFSETS contract
LAG_CASES = [
    ((100, 150, 150, False), (50, "hw")),  # plain: hw - committed
    ((150, 150, 150, False), (0, "hw")),  # caught up
    ((150, 160, 150, True), (0, "lso")),  # read_committed, open transaction: measured against the LSO
    ((150, 160, 150, False), (10, "hw")),  # same partition, read_uncommitted group: against the HW
    ((140, 160, None, True), (20, "hw")),  # LSO unknown: fall back to the HW rather than report nothing
    ((170, 160, 160, False), (0, "hw")),  # committed past the end (truncation/unclean election): never negative
    ((None, 160, 160, True), (None, "lso")),  # no commit: no lag, though the end it would be measured against is
    ((100, None, None, False), (None, None)),  # deleted topic / no leader: unknown, not zero
    ((100, None, 90, False), (None, None)),  # a read_uncommitted group never falls back to the LSO
    ((2**62, 2**62 + 7, None, False), (7, "hw")),  # offsets beyond 2^53 stay exact (int64, not float)
]


def test_lag_columns_follow_the_offsets_contract() -> None:
    # one call over all the cases, as the sweep makes it over its rows
    args = list(zip(*(a for a, _ in LAG_CASES), strict=True))
    lags, basis = lag_columns(*(list(col) for col in args))  # type: ignore[arg-type]
    assert list(zip(lags, basis, strict=True)) == [want for _, want in LAG_CASES]


def _cluster(**kw: object) -> ClusterConfig:
    return ClusterConfig(name="c1", bootstrap_servers=["h:1"], **kw)  # type: ignore[arg-type]


def test_build_snapshot_rows_owners_lag_and_group_errors() -> None:
    raw = _Raw()
    stable = _Group("g-stable", 1, state="Stable", protocol="range", described=True)
    stable.members = [{"member_id": "m1", "group_instance_id": None, "client_id": "c-1", "host": "10.0.0.1",
                       "subscribed_topics": ["t"], "assignment": [{"topic": "t", "partition": 0},
                                                                  {"topic": "t", "partition": 1}]}]
    stable.owners = {("t", 0): ("m1", "c-1", "10.0.0.1"), ("t", 1): ("m1", "c-1", "10.0.0.1")}
    stable.offsets = {("t", 0): (5, 0, "")}  # partition 1 assigned but never committed
    txn = _Group("payments", 1, state="Empty", described=True, offsets={("t", 0): (8, None, "meta")})
    broken = _Group("g-broken", 1, error="OffsetFetch: CoordinatorLoadInProgressError")
    raw.groups = {g.group_id: g for g in (stable, txn, broken)}
    raw.ends = {("t", 0): [10, 8, 2], ("t", 1): [4, 4, 0]}
    snap = build_snapshot(_cluster(read_committed_groups=["pay.*"]), raw, TS, 12.0, "host:1")

    rows = {(r["group_id"], r["partition"]): r for r in snap.offsets}
    assert set(rows) == {("g-stable", 0), ("g-stable", 1), ("payments", 0)}
    r0 = rows[("g-stable", 0)]
    assert (r0["committed_offset"], r0["log_end_offset"], r0["last_stable_offset"], r0["log_start_offset"]) == \
        (5, 10, 8, 2)
    assert (r0["lag"], r0["lag_basis"]) == (5, "hw")
    assert r0["member_id"] == "m1"
    assert r0["client_id"] == "c-1"
    assert r0["host"] == "10.0.0.1"
    assert rows[("g-stable", 1)]["committed_offset"] is None
    assert rows[("g-stable", 1)]["lag"] is None
    assert rows[("g-stable", 1)]["member_id"] == "m1"  # owned even without a commit
    # payments matches read_committed_groups: lag against the LSO (8 - 8), not the HW (10 - 8)
    assert (rows[("payments", 0)]["lag"], rows[("payments", 0)]["lag_basis"]) == (0, "lso")
    assert rows[("payments", 0)]["commit_metadata"] == "meta"
    assert all(r["sweep_ts"] == TS for r in [*snap.offsets, *snap.members])
    # the Empty group has one member row with a null member
    empty = [m for m in snap.members if m["group_id"] == "payments"]
    assert len(empty) == 1
    assert empty[0]["member_id"] is None
    assert empty[0]["group_state"] == "Empty"
    # the broken group is not recorded (a missing answer must not read as "no commits") but counted
    assert snap.ok is True
    assert snap.sweep["groups"] == 2
    assert snap.sweep["group_errors"] == 1
    assert "g-broken: OffsetFetch: CoordinatorLoadInProgressError" in snap.sweep["error"]
    assert snap.sweep["partitions"] == 3
    assert snap.sweep["members"] == 2


def test_build_snapshot_fatal_errors_fail_the_sweep_but_keep_rows() -> None:
    raw = _Raw(fatal=["ListGroups on broker 2: KafkaConnectionError: refused"])
    raw.groups = {"g": _Group("g", 1, state="Empty", described=True, offsets={("t", 0): (1, None, None)})}
    snap = build_snapshot(_cluster(), raw, TS, 3.0, "h:1")
    assert snap.ok is False
    assert "ListGroups on broker 2" in snap.sweep["error"]
    assert len(snap.offsets) == 1
    assert snap.offsets[0]["log_end_offset"] is None


def test_group_deleted_between_list_and_describe_is_dropped_silently() -> None:
    raw = _Raw()
    raw.groups = {"gone": _Group("gone", 1, state="Dead", described=True, offsets={})}
    snap = build_snapshot(_cluster(), raw, TS, 1.0, "h:1")
    assert snap.sweep["groups"] == 0
    assert snap.sweep["group_errors"] == 0
    assert not snap.members


def test_column_rows_read_like_dicts_and_convert_to_arrow() -> None:
    rows = ColumnRows({"sweep_ts": [TS, TS], "group_id": ["g", "h"], "topic": ["t", "t"], "partition": [0, 1],
                       "lag": [3, None]})
    assert len(rows) == 2
    assert dict(rows[-1]) == {"sweep_ts": TS, "group_id": "h", "topic": "t", "partition": 1, "lag": None}
    assert [r["partition"] for r in rows] == [0, 1]
    assert rows[0].get("committed_offset", "absent") == "absent"
    assert [r["group_id"] for r in rows[0:1]] == ["g"]
    with pytest.raises(IndexError):
        rows[2]
    table = rows.to_arrow(OFFSETS.schema)
    assert table.schema == OFFSETS.schema
    assert table.column("lag").to_pylist() == [3, None]
    assert table.column("committed_offset").null_count == 2  # columns the rows lack are null
    with pytest.raises(ValueError, match="different lengths"):
        ColumnRows({"a": [1], "b": [1, 2]})
