"""One sweep of one cluster: every consumer group's committed offsets, its partitions' log
start / end / last-stable offsets, and its membership, as one :class:`Snapshot`.

    >>> with ClusterClient(cluster) as client:                # doctest: +SKIP
    ...     snapshot = sweep(client.connect(), cluster)
    >>> snapshot.sweep["groups"], len(snapshot.offsets)       # doctest: +SKIP

Phases (each one round trip: every request of a phase is sent to every broker it concerns
before any answer is awaited, several pipelined per connection):

1. **ListGroups** on every broker (v5: state and group type). A broker lists exactly the
   groups it coordinates, so the answer also gives each group's coordinator; only groups
   named explicitly (``group_ids=``) or answered with NOT_COORDINATOR need
   **FindCoordinator** (batched, v4+, KIP-699).
2. **DescribeGroups** (batched per coordinator) and **OffsetFetch** (v8+, many groups per
   request, KIP-709) at the same time. Classic ``consumer`` members carry their
   subscription and assignment as consumer-protocol bytes, decoded by
   :mod:`lagscope.collector.consumer_protocol` to find each partition's owner. Groups of the
   KIP-848 ``consumer`` type are described with ConsumerGroupDescribe
   (:mod:`lagscope.collector.kip848`) when that module is available.
3. **Metadata** for the topics the groups commit to or are assigned.
4. **ListOffsets** per partition leader, three at once: latest (high watermark), earliest
   (log start) and latest with ``isolation_level=1`` (last stable offset).

Every row of a sweep carries the same ``sweep_ts`` (the start). Lag is :mod:`lagscope.lag`'s
offset lag, ``max(0, end - committed)``, where end is the last stable offset for groups matched
by the cluster's ``read_committed_groups`` and the high watermark for the others; ``lag_basis``
records which. The classic protocol does not reveal a consumer's isolation level, so the rule
is configured; both ends are recorded so analytics can choose otherwise.

Failure rules (see docs/collector.md):

- the cluster unreachable, ListGroups failing on a broker, or Metadata failing → the
  sweep is **failed** (``ok=False`` with the error; rows already gathered are kept);
- a group whose DescribeGroups or OffsetFetch failed is **not recorded** and counted in
  ``group_errors`` (the error text names it), so a missing answer never reads as "no commits";
- a partition without a leader or of a deleted topic keeps its committed offset with null
  log offsets and null lag.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import os
import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import kafka.errors as kerr
import numpy as np
import numpy.typing as npt
import pyarrow as pa
from kafka.protocol.admin import DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest, MetadataRequest

from lagscope.collector.consumer_protocol import decode_assignment, decode_subscription
from lagscope.collector.kafka_client import ClusterClient, gather
from lagscope.collector.model import Snapshot
from lagscope.collector.rows import ColumnRows
from lagscope.config import ClusterConfig
from lagscope.errors import KafkaUnavailable, LagscopeError, ProtocolError
from lagscope.lag import BASIS_HW, BASIS_LSO, lag_end, offset_lag

__all__ = ["SweepFailed", "failed_snapshot", "lag_columns", "sweep"]

log = logging.getLogger(__name__)

#: group states (DescribeGroups / ConsumerGroupDescribe) that mean "no such group any more"
_GONE_STATES = frozenset({"Dead"})
#: ListGroups protocol types that are consumer groups (""= offsets committed without a group
#: protocol, e.g. by an admin tool or a manually assigned consumer)
_CONSUMER_PROTOCOL_TYPES = frozenset({"consumer", ""})
_LATEST, _EARLIEST = -1, -2
#: the OFFSETS columns a sweep fills, in build order
_OFFSET_KEYS = ("sweep_ts", "group_id", "topic", "partition", "committed_offset", "commit_leader_epoch",
                "commit_metadata", "log_start_offset", "log_end_offset", "last_stable_offset", "member_id",
                "client_id", "host", "group_state")


class SweepFailed(LagscopeError):
    """The sweep as a whole failed (the cluster did not answer); the loop records it."""


def collector_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _longs(values: list[int | None]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    arr = pa.array(values, pa.int64())
    return np.asarray(arr.fill_null(0), dtype=np.int64), np.asarray(arr.is_valid(), dtype=bool)


def lag_columns(committed: list[int | None], log_end: list[int | None], last_stable: list[int | None],
                read_committed: list[bool]) -> tuple[list[int | None], list[str | None]]:
    """The ``lag`` and ``lag_basis`` columns of a sweep's rows (:func:`lagscope.lag.lag_end`,
    :func:`lagscope.lag.offset_lag`), computed once over the whole columns."""
    c, c_ok = _longs(committed)
    hw, hw_ok = _longs(log_end)
    lso, lso_ok = _longs(last_stable)
    end, end_ok, on_lso = lag_end(hw, hw_ok, lso, lso_ok, np.asarray(read_committed, dtype=bool))
    lag, lag_ok = offset_lag(c, c_ok, end, end_ok)
    lags = [v if ok else None for v, ok in zip(lag.tolist(), lag_ok.tolist(), strict=True)]
    basis = [(BASIS_LSO if rc else BASIS_HW) if ok else None
             for rc, ok in zip(on_lso.tolist(), end_ok.tolist(), strict=True)]
    return lags, basis


def _err_name(code: int) -> str:
    return str(kerr.for_code(code).__name__)


def _now_ms() -> dt.datetime:
    now = dt.datetime.now(dt.UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _chunks(items: Sequence[Any], max_requests: int, min_size: int) -> list[Sequence[Any]]:
    """Split ``items`` into at most ``max_requests`` chunks of at least ``min_size``."""
    if not items:
        return []
    size = max(min_size, math.ceil(len(items) / max_requests))
    return [items[i:i + size] for i in range(0, len(items), size)]


@dataclass
class _Group:
    group_id: str
    coordinator: int | None
    protocol_type: str = "consumer"
    group_type: str | None = None  # ListGroups v5: 'classic' | 'consumer' | 'share' | …
    state: str | None = None
    protocol: str | None = None
    generation: int | None = None
    group_protocol: str = "classic"
    members: list[dict[str, Any]] = field(default_factory=list)
    owners: dict[tuple[str, int], tuple[str, str | None, str | None]] = field(default_factory=dict)
    offsets: dict[tuple[str, int], tuple[int, int | None, str | None]] | None = None
    described: bool = False
    error: str | None = None


@dataclass
class _Raw:
    """What the I/O coroutine gathered; turned into rows on the caller's thread."""

    groups: dict[str, _Group] = field(default_factory=dict)
    ends: dict[tuple[str, int], list[int | None]] = field(default_factory=dict)  # hw, lso, log start
    fatal: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # phase → wall seconds (debug log)


# ------------------------------------------------------------------------------------------------
# the I/O coroutine (runs on kafka-python's network thread)


async def _collect(client: ClusterClient, cluster: ClusterConfig, group_ids: Sequence[str] | None,
                   describe_consumer: Any) -> _Raw:
    raw = _Raw()
    mark = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        raw.timings[phase] = raw.timings.get(phase, 0.0) + now - mark
        mark = now

    if group_ids is None:
        await _list_groups(client, cluster, raw)
    else:
        for gid in group_ids:
            raw.groups[gid] = _Group(gid, None)
        await _find_coordinators(client, raw, list(raw.groups))
        await _group_types(client, raw)
    lap("groups")
    todo = [g for g in raw.groups.values() if g.coordinator is not None]
    await _describe_and_fetch(client, todo, raw, describe_consumer)
    lap("describe+fetch")
    # NOT_COORDINATOR (a coordinator moved between phases): ask where they live now, once
    moved = [g.group_id for g in todo if g.error and "NotCoordinator" in g.error]
    if moved:
        for gid in moved:
            raw.groups[gid] = _Group(gid, None, group_type=raw.groups[gid].group_type)
        await _find_coordinators(client, raw, moved)
        await _describe_and_fetch(client, [raw.groups[g] for g in moved if raw.groups[g].coordinator is not None],
                                  raw, describe_consumer)
    # COORDINATOR_LOAD_IN_PROGRESS (a coordinator reading its offsets partition, e.g. just after a
    # broker restart): one more try after a short pause, then the group waits for the next sweep
    loading = [g for g in raw.groups.values() if g.error and "CoordinatorLoadInProgress" in g.error]
    if loading:
        await client.sleep(0.5)
        retry = [_Group(g.group_id, g.coordinator, protocol_type=g.protocol_type, group_type=g.group_type,
                        state=g.state) for g in loading]
        for g in retry:
            raw.groups[g.group_id] = g
        await _describe_and_fetch(client, retry, raw, describe_consumer)
    lap("retries")
    topics: set[str] = set()
    for g in raw.groups.values():
        if g.error is None:
            topics.update(t for t, _ in (g.offsets or {}))
            topics.update(t for t, _ in g.owners)
    if topics:
        leaders = await _metadata(client, sorted(topics), raw)
        lap("metadata")
        await _list_offsets(client, leaders, raw)
        lap("list_offsets")
    return raw


async def _list_groups(client: ClusterClient, cluster: ClusterConfig, raw: _Raw) -> None:
    brokers = client.broker_ids()
    if not brokers:
        raw.fatal.append("no brokers in the cluster metadata")
        return
    responses = await gather([client.send(ListGroupsRequest(), node_id=b) for b in brokers])
    for broker, resp in zip(brokers, responses, strict=True):
        if isinstance(resp, Exception):
            raw.fatal.append(f"ListGroups on broker {broker}: {type(resp).__name__}: {resp}")
            continue
        if resp.error_code:
            raw.fatal.append(f"ListGroups on broker {broker}: {_err_name(resp.error_code)}")
            continue
        for g in resp.groups:
            if g.protocol_type not in _CONSUMER_PROTOCOL_TYPES:
                continue  # connect, share, streams groups: not consumer groups
            group_type = getattr(g, "group_type", None) or None
            if group_type in ("share", "streams"):
                continue
            if not cluster.groups.matches(g.group_id):
                continue
            raw.groups[g.group_id] = _Group(g.group_id, broker, protocol_type=g.protocol_type,
                                            group_type=group_type,
                                            state=getattr(g, "group_state", None) or None)


async def _group_types(client: ClusterClient, raw: _Raw) -> None:
    """The type of groups named explicitly, from their coordinators' ListGroups (v5): DescribeGroups
    answers a KIP-848 group as Dead without members, so those must go to ConsumerGroupDescribe.
    Best effort: a group whose type stays unknown is described as a classic group."""
    coordinators = sorted({g.coordinator for g in raw.groups.values() if g.coordinator is not None})
    responses = await gather([client.send(ListGroupsRequest(), node_id=c) for c in coordinators])
    for resp in responses:
        if isinstance(resp, Exception) or resp.error_code:
            continue
        for listed in resp.groups:
            g = raw.groups.get(listed.group_id)
            if g is not None:
                g.protocol_type = listed.protocol_type
                g.group_type = getattr(listed, "group_type", None) or None
                g.state = getattr(listed, "group_state", None) or None


async def _find_coordinators(client: ClusterClient, raw: _Raw, group_ids: list[str]) -> None:
    if not group_ids:
        return
    if client.api_version(FindCoordinatorRequest) >= 4:
        chunks = _chunks(group_ids, 50, 1000)
        reqs = [FindCoordinatorRequest(key_type=0, coordinator_keys=list(c), min_version=4) for c in chunks]
        responses = await gather([client.send(r) for r in reqs])
        for chunk, resp in zip(chunks, responses, strict=True):
            if isinstance(resp, Exception):
                for gid in chunk:
                    raw.groups[gid].error = f"FindCoordinator: {type(resp).__name__}: {resp}"
                continue
            for c in resp.coordinators:
                if c.error_code:
                    raw.groups[c.key].error = f"FindCoordinator: {_err_name(c.error_code)}"
                else:
                    raw.groups[c.key].coordinator = c.node_id
                    client.add_broker(c.node_id, c.host, c.port)
        return
    # brokers before 3.0: one request per group, all in flight at once
    responses = await gather([client.send(FindCoordinatorRequest(key=g, key_type=0, max_version=3))
                              for g in group_ids])
    for gid, resp in zip(group_ids, responses, strict=True):
        if isinstance(resp, Exception):
            raw.groups[gid].error = f"FindCoordinator: {type(resp).__name__}: {resp}"
        elif resp.error_code:
            raw.groups[gid].error = f"FindCoordinator: {_err_name(resp.error_code)}"
        else:
            raw.groups[gid].coordinator = resp.node_id
            client.add_broker(resp.node_id, resp.host, resp.port)


async def _describe_and_fetch(client: ClusterClient, groups: list[_Group], raw: _Raw,
                              describe_consumer: Any) -> None:
    by_coord: dict[int, list[_Group]] = defaultdict(list)
    for g in groups:
        if g.error is None and g.coordinator is not None:
            by_coord[g.coordinator].append(g)
    offset_fetch_v = client.api_version(OffsetFetchRequest, max_version=9)
    pending: list[tuple[str, Sequence[_Group], Any]] = []
    consumer_groups: list[_Group] = []
    for coord, members in by_coord.items():
        classic = [g for g in members if g.group_type != "consumer"]
        consumer_groups.extend(g for g in members if g.group_type == "consumer")
        for chunk in _chunks(classic, 200, 500):
            req = DescribeGroupsRequest(groups=[g.group_id for g in chunk])
            pending.append(("describe", chunk, client.send(req, node_id=coord)))
        if offset_fetch_v >= 8:
            for chunk in _chunks(members, 400, 500):
                groups_req = [OffsetFetchRequest.OffsetFetchRequestGroup(group_id=g.group_id, topics=None)
                              for g in chunk]
                req = OffsetFetchRequest(groups=groups_req, require_stable=False, min_version=8, max_version=9)
                pending.append(("fetch", chunk, client.send(req, node_id=coord)))
        else:
            for g in members:
                req = OffsetFetchRequest(group_id=g.group_id, topics=None, min_version=2, max_version=7)
                pending.append(("fetch", [g], client.send(req, node_id=coord)))
    consumer_future = None
    if consumer_groups:
        if describe_consumer is not None:
            consumer_future = client.call_soon(describe_consumer, client, consumer_groups)
        else:
            for g in consumer_groups:  # no ConsumerGroupDescribe yet: state from ListGroups only
                g.described, g.group_protocol = True, "consumer"
    pending.reverse()
    while pending:  # one response at a time, dropped once applied (a 100k-partition sweep stays small)
        kind, chunk, future = pending.pop()
        (resp,) = await gather([future])
        del future
        if isinstance(resp, Exception):
            for g in chunk:
                g.error = g.error or f"{'DescribeGroups' if kind == 'describe' else 'OffsetFetch'} " \
                                     f"(coordinator {g.coordinator}): {type(resp).__name__}: {resp}"
            continue
        if kind == "describe":
            _apply_describe(resp, {g.group_id: g for g in chunk})
        else:
            _apply_offsets(resp, {g.group_id: g for g in chunk})
        await client.sleep(0)  # let the I/O loop read the next responses meanwhile
    if consumer_future is not None:
        done = await gather([consumer_future])
        if isinstance(done[0], Exception):
            for g in consumer_groups:
                g.error = g.error or f"ConsumerGroupDescribe: {type(done[0]).__name__}: {done[0]}"


def _apply_describe(resp: Any, groups: dict[str, _Group]) -> None:
    for d in resp.groups:
        g = groups.get(d.group_id)
        if g is None:
            continue
        if d.error_code:
            g.error = g.error or f"DescribeGroups: {_err_name(d.error_code)}"
            continue
        g.described = True
        g.state = d.group_state or g.state
        g.protocol_type = d.protocol_type
        g.protocol = d.protocol_data or None
        for m in d.members:
            sub_topics: list[str] = []
            assigned: list[tuple[str, int]] = []
            if d.protocol_type == "consumer":
                try:
                    sub_topics = list(decode_subscription(bytes(m.member_metadata or b"")).topics)
                    assigned = list(decode_assignment(bytes(m.member_assignment or b"")).partitions)
                except ProtocolError as exc:
                    log.warning("group %s member %s: undecodable consumer metadata (%s); "
                                "its partitions are recorded without an owner", d.group_id, m.member_id, exc)
            host = m.client_host.lstrip("/") if m.client_host else None
            g.members.append({
                "member_id": m.member_id,
                "group_instance_id": getattr(m, "group_instance_id", None),
                "client_id": m.client_id,
                "host": host,
                "subscribed_topics": sub_topics,
                "assignment": [{"topic": t, "partition": p} for t, p in assigned],
            })
            for tp in assigned:
                g.owners[tp] = (m.member_id, m.client_id, host)


def _apply_offsets(resp: Any, groups: dict[str, _Group]) -> None:
    if resp.API_VERSION < 8:
        (g,) = groups.values()
        entries: Iterable[tuple[_Group, int, Any]] = [(g, getattr(resp, "error_code", 0), resp.topics)]
    else:
        entries = [(groups[r.group_id], r.error_code, r.topics) for r in resp.groups if r.group_id in groups]
    for g, code, topics in entries:
        if code:
            g.error = g.error or f"OffsetFetch: {_err_name(code)}"
            continue
        offsets: dict[tuple[str, int], tuple[int, int | None, str | None]] = {}
        for t in topics:
            for p in t.partitions:
                if p.error_code:
                    g.error = g.error or f"OffsetFetch {t.name}-{p.partition_index}: {_err_name(p.error_code)}"
                    continue
                if p.committed_offset < 0:
                    continue  # -1: no commit for this partition
                epoch = p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None
                offsets[(t.name, p.partition_index)] = (p.committed_offset, epoch, p.metadata)
        g.offsets = offsets


async def _metadata(client: ClusterClient, topics: list[str], raw: _Raw) -> dict[int, list[tuple[str, int]]]:
    topic_cls = MetadataRequest.MetadataRequestTopic
    req = MetadataRequest(topics=[topic_cls(name=t) for t in topics], allow_auto_topic_creation=False)
    (resp,) = await gather([client.send(req)])
    if isinstance(resp, Exception):
        raw.fatal.append(f"Metadata: {type(resp).__name__}: {resp}")
        return {}
    for b in resp.brokers:
        client.add_broker(b.node_id, b.host, b.port)
    leaders: dict[int, list[tuple[str, int]]] = defaultdict(list)
    for t in resp.topics:
        if t.error_code:
            # deleted topic (UNKNOWN_TOPIC_OR_PARTITION): its committed offsets stay, ends are null
            raw.notes.append(f"topic {t.name}: {_err_name(t.error_code)}")
            continue
        for p in t.partitions:
            if p.leader_id is None or p.leader_id < 0:
                raw.notes.append(f"{t.name}-{p.partition_index}: no leader")
                continue
            leaders[p.leader_id].append((t.name, p.partition_index))
    return leaders


async def _list_offsets(client: ClusterClient, leaders: dict[int, list[tuple[str, int]]], raw: _Raw) -> None:
    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    part_cls = topic_cls.ListOffsetsPartition
    # (slot in raw.ends, timestamp, isolation level): hw, lso, log start
    kinds = ((0, _LATEST, 0), (1, _LATEST, 1), (2, _EARLIEST, 0))
    pending: list[tuple[int, int, Sequence[tuple[str, int]], Any]] = []
    for leader, tps in leaders.items():
        for chunk in _chunks(sorted(tps), 100, 5000):
            by_topic: dict[str, list[int]] = defaultdict(list)
            for t, p in chunk:
                by_topic[t].append(p)
            for slot, ts, iso in kinds:
                req = ListOffsetsRequest(
                    replica_id=-1, isolation_level=iso, min_version=2,
                    topics=[topic_cls(name=t, partitions=[part_cls(partition_index=p, current_leader_epoch=-1,
                                                                   timestamp=ts) for p in ps])
                            for t, ps in by_topic.items()])
                pending.append((slot, leader, chunk, client.send(req, node_id=leader)))
    results = await gather([f for *_, f in pending])
    failed_leaders: set[int] = set()
    for (slot, leader, _chunk, _), resp in zip(pending, results, strict=True):
        await client.sleep(0)
        if isinstance(resp, Exception):
            if leader not in failed_leaders:
                raw.fatal.append(f"ListOffsets on broker {leader}: {type(resp).__name__}: {resp}")
                failed_leaders.add(leader)
            continue
        for t in resp.topics:
            for p in t.partitions:
                ends = raw.ends.setdefault((t.name, p.partition_index), [None, None, None])
                if p.error_code:
                    raw.notes.append(f"ListOffsets {t.name}-{p.partition_index}: {_err_name(p.error_code)}")
                    continue
                ends[slot] = p.offset if p.offset >= 0 else None


# ------------------------------------------------------------------------------------------------
# rows (pure, on the caller's thread)


def build_snapshot(cluster: ClusterConfig, raw: _Raw, sweep_ts: dt.datetime, duration_ms: float,
                   collector: str) -> Snapshot:
    cols: dict[str, list[Any]] = {k: [] for k in _OFFSET_KEYS}
    (c_ts, c_group, c_topic, c_part, c_committed, c_epoch, c_meta, c_start, c_end, c_lso, c_member, c_client,
     c_host, c_state) = (cols[k] for k in _OFFSET_KEYS)
    c_read_committed: list[bool] = []
    members: list[dict[str, Any]] = []
    group_errors: list[str] = []
    recorded = 0
    no_ends = (None, None, None)
    for gid in sorted(raw.groups):
        g = raw.groups[gid]
        if g.error is not None or not g.described or g.offsets is None:
            if g.error is None and g.coordinator is None:
                g.error = "no coordinator"
            if g.error is not None:
                group_errors.append(f"{gid}: {g.error}")
            continue
        if g.state in _GONE_STATES and not g.offsets:
            continue  # deleted between ListGroups and DescribeGroups
        recorded += 1
        read_committed = cluster.is_read_committed(gid)
        state = g.state
        offsets, owners, ends = g.offsets, g.owners, raw.ends
        keys = offsets.keys() | owners.keys() if owners else offsets.keys()
        for tp in sorted(keys):
            committed = offsets.get(tp)
            hw, lso, start = ends.get(tp, no_ends)
            owner = owners.get(tp) if owners else None
            c_ts.append(sweep_ts)
            c_group.append(gid)
            c_topic.append(tp[0])
            c_part.append(tp[1])
            if committed is None:
                c_committed.append(None)
                c_epoch.append(None)
                c_meta.append(None)
            else:
                c_committed.append(committed[0])
                c_epoch.append(committed[1])
                c_meta.append(committed[2] or None)
            c_start.append(start)
            c_end.append(hw)
            c_lso.append(lso)
            if owner is None:
                c_member.append(None)
                c_client.append(None)
                c_host.append(None)
            else:
                c_member.append(owner[0])
                c_client.append(owner[1])
                c_host.append(owner[2])
            c_state.append(state)
            c_read_committed.append(read_committed)
        common = {"sweep_ts": sweep_ts, "group_id": gid, "group_state": g.state,
                  "protocol_type": g.protocol_type, "protocol": g.protocol,
                  "group_protocol": g.group_protocol, "generation": g.generation}
        if g.members:
            members.extend({**common, **m} for m in g.members)
        else:
            members.append({**common, "member_id": None, "group_instance_id": None, "client_id": None,
                            "host": None, "subscribed_topics": None, "assignment": None})
    cols["lag"], cols["lag_basis"] = lag_columns(c_committed, c_end, c_lso, c_read_committed)
    ok = not raw.fatal
    errors = list(raw.fatal)
    if group_errors:
        errors.append(f"{len(group_errors)} group(s) not recorded: " + "; ".join(group_errors[:5])
                      + (" …" if len(group_errors) > 5 else ""))
    sweep_row = {
        "sweep_ts": sweep_ts, "duration_ms": duration_ms, "ok": ok,
        "error": "; ".join(errors) if errors else None,
        "groups": recorded, "partitions": len(c_ts), "members": len(members),
        "group_errors": len(group_errors), "collector": collector,
    }
    return Snapshot(cluster.name, sweep_row, offsets=ColumnRows(cols), members=members)


def failed_snapshot(cluster: str, sweep_ts: dt.datetime, duration_ms: float, error: str,
                    collector: str | None = None) -> Snapshot:
    """The record of a sweep that produced nothing (cluster unreachable, timeout)."""
    return Snapshot(cluster, {"sweep_ts": sweep_ts, "duration_ms": duration_ms, "ok": False, "error": error,
                              "groups": 0, "partitions": 0, "members": 0, "group_errors": 0,
                              "collector": collector or collector_id()})


def _kip848_describer() -> Any:
    """The metrics engineer's ConsumerGroupDescribe adapter, when it exists (see kip848)."""
    try:
        from lagscope.collector import kip848
    except ImportError:
        return None
    return getattr(kip848, "describe_for_sweep", None)


def sweep(client: ClusterClient, cluster: ClusterConfig, *, group_ids: Sequence[str] | None = None,
          timeout_s: float | None = None, collector: str | None = None,
          now: dt.datetime | None = None) -> Snapshot:
    """Sweep ``cluster`` through a connected ``client``; always returns a Snapshot.

    ``group_ids``: only these groups (found with FindCoordinator) instead of every group.
    A sweep that cannot complete returns a failed Snapshot (``ok=False``) instead of raising.
    """
    sweep_ts = now or _now_ms()
    started = time.perf_counter()
    who = collector or collector_id()
    timeout_ms = int((timeout_s or 3 * client.request_timeout_ms / 1000) * 1000)
    try:
        if not client.connected:
            client.connect()
        raw = client.run(_collect, client, cluster, group_ids, _kip848_describer(), timeout_ms=timeout_ms)
    except (KafkaUnavailable, kerr.KafkaError, OSError) as exc:
        duration = (time.perf_counter() - started) * 1000
        return failed_snapshot(cluster.name, sweep_ts, duration, f"{type(exc).__name__}: {exc}", who)
    io_done = time.perf_counter()
    snap = build_snapshot(cluster, raw, sweep_ts, (io_done - started) * 1000, who)
    if log.isEnabledFor(logging.DEBUG):
        phases = " ".join(f"{k}={v * 1000:.0f}ms" for k, v in raw.timings.items())
        log.debug("sweep %s: %s rows=%.0fms", cluster.name, phases, (time.perf_counter() - io_done) * 1000)
    return snap
