"""Live Prometheus metrics: the latest sweep of every cluster, served on ``/metrics``.

:class:`LagCollector` is a prometheus-client *custom collector*: it keeps the latest
:class:`~lagscope.collector.model.Snapshot` of each cluster (replaced whole under a lock) and
builds every series from it at scrape time. Nothing is a module-level Gauge, so a group that
was deleted, a partition that was removed or a member that left is simply absent from the
next scrape, and Prometheus marks its series stale at once. :class:`MetricsServer` serves
``/metrics`` and ``/healthz`` on a loopback address by default.

Names: the series that kafka_exporter and kafka-lag-exporter dashboards already query, with
their own label names (``consumergroup`` resp. ``cluster_name``/``group``), each with an
extra ``cluster`` label, plus ``lagscope_…`` series for what they lack. Every metric is
listed in :data:`METRICS` and documented in ``docs/metrics.md``.

    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> lag = LagCollector(registry=registry)
    >>> lag.update(snapshot)                                       # doctest: +SKIP
    >>> registry.get_sample_value("kafka_consumergroup_lag",
    ...     {"cluster": "prod", "consumergroup": "g", "topic": "t", "partition": "0"})  # doctest: +SKIP
    4.0

    >>> server = MetricsServer("127.0.0.1", 0).start()            # doctest: +SKIP
    >>> server.update(snapshot); server.url                         # doctest: +SKIP
    'http://127.0.0.1:40123/metrics'
    >>> server.stop()                                               # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from lagscope import httpserve
from lagscope.collector.model import Snapshot
from lagscope.errors import ConfigError
from lagscope.lag import BASIS_LSO, HISTORY_POINTS, EndOffsetHistory, brackets, lag_seconds
from lagscope.lake import QUARANTINE_HELP, QUARANTINE_METRIC

__all__ = [
    "COMPAT_FAMILIES",
    "DEFAULT_BIND",
    "DEFAULT_PORT",
    "GROUP_STATES",
    "LAKE_TABLES",
    "METRICS",
    "SKIP_REASONS",
    "CommitLogCollector",
    "LagCollector",
    "LakeWriteCollector",
    "MetricSpec",
    "MetricsServer",
    "RetentionCollector",
    "render",
]

log = logging.getLogger(__name__)

DEFAULT_BIND = "127.0.0.1"
#: not kafka_exporter's 9308, so both can run side by side during a migration (config: metrics.port)
DEFAULT_PORT = 9839

#: every state lagscope_group_state has a series for (classic protocol, then KIP-848 ones)
GROUP_STATES = (
    "Stable", "PreparingRebalance", "CompletingRebalance", "Empty", "Dead",
    "Assigning", "Reconciling", "Unknown",
)


@dataclass(frozen=True)
class MetricSpec:
    """One exposed metric family: name (as scraped), type, label names, meaning and unit."""

    name: str
    type: str  # 'gauge' | 'counter'
    labels: tuple[str, ...]
    help: str
    unit: str = ""
    origin: str = "lagscope"  # 'kafka_exporter' | 'kafka-lag-exporter' | 'lagscope'
    # 'sweep' (LagCollector) | 'commitlog' (CommitLogCollector) | 'lake' (LakeWriteCollector)
    # | 'retention' (RetentionCollector) | 'quarantine' (lagscope.lake.QUARANTINED)
    source: str = "sweep"


_KE = ("cluster", "consumergroup", "topic", "partition")  # kafka_exporter, per partition
_KE_T = ("cluster", "consumergroup", "topic")
_KLE = ("cluster", "cluster_name", "group", "topic", "partition", "member_host", "consumer_id", "client_id")
_KLE_G = ("cluster", "cluster_name", "group", "is_simple_consumer")
_LS_P = ("cluster", "group", "topic", "partition")
_LS_G = ("cluster", "group")

METRICS: tuple[MetricSpec, ...] = (
    # kafka_exporter (danielqsj) names and labels
    MetricSpec("kafka_consumergroup_lag", "gauge", _KE,
               "Offset lag of the group on the partition: end - committed (end = last stable offset for "
               "read_committed groups); -1 when the group has no committed offset there.",
               "messages", "kafka_exporter"),
    MetricSpec("kafka_consumergroup_lag_sum", "gauge", _KE_T,
               "Sum of kafka_consumergroup_lag over the topic's partitions that have a commit.",
               "messages", "kafka_exporter"),
    MetricSpec("kafka_consumergroup_current_offset", "gauge", _KE,
               "The group's committed offset on the partition (next offset to consume); -1 when none.",
               "offset", "kafka_exporter"),
    MetricSpec("kafka_consumergroup_current_offset_sum", "gauge", _KE_T,
               "Sum of the committed offsets over the topic's partitions that have a commit.",
               "offset", "kafka_exporter"),
    MetricSpec("kafka_consumergroup_members", "gauge", ("cluster", "consumergroup"),
               "Members of the group.", "members", "kafka_exporter"),
    MetricSpec("kafka_topic_partition_current_offset", "gauge", ("cluster", "topic", "partition"),
               "End offset (high watermark) of the partition.", "offset", "kafka_exporter"),
    MetricSpec("kafka_topic_partition_oldest_offset", "gauge", ("cluster", "topic", "partition"),
               "Log start offset (earliest offset still in the log) of the partition.", "offset",
               "kafka_exporter"),
    # kafka-lag-exporter (seglo / lightbend) names and labels
    MetricSpec("kafka_consumergroup_group_offset", "gauge", _KLE,
               "The group's committed offset on the partition (only partitions with a commit).",
               "offset", "kafka-lag-exporter"),
    MetricSpec("kafka_consumergroup_group_lag", "gauge", _KLE,
               "Offset lag of the group on the partition (only partitions with a commit).",
               "messages", "kafka-lag-exporter"),
    MetricSpec("kafka_consumergroup_group_lag_seconds", "gauge", _KLE,
               "Estimated time lag of the group on the partition (see lagscope_partition_lag_seconds).",
               "seconds", "kafka-lag-exporter"),
    MetricSpec("kafka_consumergroup_group_max_lag", "gauge", _KLE_G,
               "Largest partition offset lag of the group.", "messages", "kafka-lag-exporter"),
    MetricSpec("kafka_consumergroup_group_max_lag_seconds", "gauge", _KLE_G,
               "Largest partition time lag of the group.", "seconds", "kafka-lag-exporter"),
    MetricSpec("kafka_consumergroup_group_sum_lag", "gauge", ("cluster", "cluster_name", "group"),
               "Sum of the group's partition offset lags.", "messages", "kafka-lag-exporter"),
    MetricSpec("kafka_consumergroup_group_topic_sum_lag", "gauge", ("cluster", "cluster_name", "group", "topic"),
               "Sum of the group's partition offset lags on one topic.", "messages", "kafka-lag-exporter"),
    MetricSpec("kafka_partition_latest_offset", "gauge", ("cluster", "cluster_name", "topic", "partition"),
               "End offset (high watermark) of the partition.", "offset", "kafka-lag-exporter"),
    MetricSpec("kafka_partition_earliest_offset", "gauge", ("cluster", "cluster_name", "topic", "partition"),
               "Log start offset of the partition.", "offset", "kafka-lag-exporter"),
    # lagscope's own
    MetricSpec("lagscope_partition_lag_seconds", "gauge", _LS_P,
               "Time lag at the latest sweep (lagscope.lag.lag_seconds): sweep time - produce time of the "
               "record at the committed offset when the sweep read it (exact), else of the message at the "
               "committed offset interpolated over the in-memory end-offset history; 0 when caught up.",
               "seconds"),
    MetricSpec("lagscope_partition_lag_seconds_is_lower_bound", "gauge", _LS_P,
               "1 when lagscope_partition_lag_seconds is only a lower bound (the committed offset is older "
               "than the remembered history), else 0.", "boolean"),
    MetricSpec("lagscope_partition_last_stable_offset", "gauge", ("cluster", "topic", "partition"),
               "Last stable offset of the partition (the end for read_committed consumers).", "offset"),
    MetricSpec("lagscope_group_lag_seconds", "gauge", _LS_G,
               "Largest lagscope_partition_lag_seconds of the group.", "seconds"),
    MetricSpec("lagscope_group_state", "gauge", ("cluster", "group", "state"),
               "1 for the group's current state, 0 for every other known state (one series per state).",
               "boolean"),
    MetricSpec("lagscope_group_members", "gauge", _LS_G, "Members of the group.", "members"),
    MetricSpec("lagscope_group_assigned_partitions", "gauge", _LS_G,
               "Distinct partitions assigned to the group's members.", "partitions"),
    MetricSpec("lagscope_group_generation", "gauge", _LS_G,
               "Generation id (classic protocol) or group epoch (KIP-848 consumer protocol).", "generation"),
    MetricSpec("lagscope_group_info", "gauge",
               ("cluster", "group", "protocol_type", "protocol", "group_protocol"),
               "Always 1; labels carry the group's protocol type, assignor and group protocol "
               "(classic or consumer).", ""),
    MetricSpec("lagscope_member_assigned_partitions", "gauge",
               ("cluster", "group", "member_id", "client_id", "host", "group_instance_id"),
               "Partitions assigned to one member of the group.", "partitions"),
    MetricSpec("lagscope_up", "gauge", ("cluster",),
               "1 when the cluster's latest sweep succeeded, 0 when it failed.", "boolean"),
    MetricSpec("lagscope_sweep_duration_seconds", "gauge", ("cluster",),
               "Wall time of the latest sweep (succeeded or failed).", "seconds"),
    MetricSpec("lagscope_sweeps_total", "counter", ("cluster", "result"),
               "Sweeps since the collector started, by result: ok or failed.", "sweeps"),
    MetricSpec("lagscope_sweep_errors_total", "counter", ("cluster",),
               "Groups that could not be described or fetched, summed over sweeps since the collector "
               "started.", "groups"),
    MetricSpec("lagscope_last_sweep_timestamp_seconds", "gauge", ("cluster",),
               "Start of the latest successful sweep, seconds since the Unix epoch.", "seconds"),
    # the __consumer_offsets tail (clusters with consumer_offsets_tail.enabled)
    MetricSpec("lagscope_commitlog_up", "gauge", ("cluster",),
               "1 while the __consumer_offsets tail is connected and reading; 0 while it reconnects or "
               "waits for the topic, and for good when it stopped (no READ access, unreadable positions).",
               "boolean", source="commitlog"),
    MetricSpec("lagscope_commitlog_records_read_total", "counter", ("cluster",),
               "Records read from __consumer_offsets since the collector started.", "records",
               source="commitlog"),
    MetricSpec("lagscope_commitlog_records_decoded_total", "counter", ("cluster",),
               "Records decoded: offset commits, group records and tombstones (those of excluded groups "
               "and duplicates included: they are skipped after decoding).", "records", source="commitlog"),
    MetricSpec("lagscope_commitlog_records_skipped_total", "counter", ("cluster", "reason"),
               "Records read but not written, by reason: unknown_type (a record type lagscope does not "
               "decode, e.g. share groups), unknown_version (a newer record version), undecodable "
               "(corrupt), excluded_group (outside the cluster's groups filter), duplicate (already in "
               "the lake after a crash).", "records", source="commitlog"),
    MetricSpec("lagscope_commitlog_lag_records", "gauge", ("cluster",),
               "Records of __consumer_offsets not read yet: the sum over its partitions of end offset - "
               "the tail's position, measured every few seconds.", "records", source="commitlog"),
    MetricSpec("lagscope_commitlog_last_record_timestamp_seconds", "gauge", ("cluster",),
               "Timestamp of the newest record read (the group coordinator's clock), seconds since the "
               "Unix epoch; absent until the first record.", "seconds", source="commitlog"),
    MetricSpec("lagscope_commitlog_errors_total", "counter", ("cluster",),
               "Errors that interrupted the tail (connection, fetch, lake write: each retried; no READ "
               "access or unreadable positions: the tail stops).", "errors", source="commitlog"),
    MetricSpec("lagscope_batch_probes_total", "counter", ("cluster", "verdict"),
               "Batch probes of candidate commits since the collector started, by verdict: inside (the commit "
               "was never the log end), boundary (proves nothing), none (no evidence: out of range, no leader, "
               "no READ access, ...). Present while the tail's batch probes are on.", "probes", source="batch_probes"),
    MetricSpec("lagscope_batch_probe_candidates_dropped_total", "counter", ("cluster",),
               "Candidate commits dropped unprobed (more waiting than the bound, the smallest first): "
               "their batches' evidence is not collected.", "commits",
               source="batch_probes"),
    # the lake writes (sweeps and the __consumer_offsets tail)
    MetricSpec("lagscope_lake_write_errors_total", "counter", ("cluster", "table"),
               "Lake writes that failed since the collector started, by table: offsets, members, sweeps "
               "(a sweep's rows, lost), commits, group_events (a tail flush, read again after a retry), "
               "_state (the tail's saved positions) and batch_probes (held for the next sweep); e.g. the lake "
               "path is a file, permission denied, disk full.", "writes", source="lake"),
    # retention (lagscope.retention): the lake's partitions the collector removed, the results' the analytics
    # loop removed when it runs in the same process
    MetricSpec("lagscope_retention_removed_partitions_total", "counter", ("cluster", "table"),
               "Date partitions (one table's day of one cluster) removed by retention since the process started: "
               "lake tables (collector.retention) and result tables (analytics.retention).", "partitions",
               source="retention"),
    MetricSpec("lagscope_retention_removed_bytes_total", "counter", ("cluster", "table"),
               "Bytes freed by retention since the process started, by cluster and table (as "
               "lagscope_retention_removed_partitions_total).", "bytes", source="retention"),
    # unreadable files moved aside by any reader of the process (lagscope.lake.QUARANTINED, a
    # collector of its own)
    MetricSpec(QUARANTINE_METRIC, "counter", ("cluster", "table"), QUARANTINE_HELP, "files", source="quarantine"),
)

_SPECS: dict[str, MetricSpec] = {s.name: s for s in METRICS}

#: the exporter-compatible families (lagscope's own are always served)
COMPAT_FAMILIES = ("kafka_exporter", "kafka-lag-exporter")

Labels = tuple[str, ...]
#: metric name -> label values -> value; a dict keyed by label values cannot hold a duplicate series
Samples = dict[str, dict[Labels, float]]


def _s(value: Any) -> str:
    return "" if value is None else str(value)


def _i(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass
class _ClusterState:
    """What the collector remembers of one cluster; ``samples`` is replaced whole per update."""

    #: per (group, topic, partition): the end-offset history of the end its lag is measured against
    histories: dict[tuple[str, str, int], EndOffsetHistory] = field(default_factory=dict)
    sweeps_ok: int = 0
    sweeps_failed: int = 0
    group_errors: int = 0
    last_ok_ts: float | None = None
    samples: Samples = field(default_factory=dict)


class LagCollector(Collector):
    """A prometheus-client custom collector over the latest Snapshot of each cluster.

    Thread-safe: :meth:`update` (the collect loop) and :meth:`collect` (scrapes) may run
    concurrently. ``history_points`` bounds the end-offset history per group-partition
    (``time_lag.history_points``, see :mod:`lagscope.lag`). ``compat`` chooses the
    exporter-compatible families served besides lagscope's own: ``kafka_exporter`` and/or
    ``kafka-lag-exporter`` (both by default; fewer series for very large clusters).
    """

    def __init__(self, *, history_points: int = HISTORY_POINTS, registry: CollectorRegistry | None = None,
                 compat: Iterable[str] = COMPAT_FAMILIES) -> None:
        if history_points < 1:
            raise ConfigError(f"time_lag history_points must be >= 1, got {history_points}")
        wanted = set(compat)
        unknown = wanted - set(COMPAT_FAMILIES)
        if unknown:
            raise ConfigError(f"metrics compat: unknown famil{'ies' if len(unknown) > 1 else 'y'} "
                              f"{sorted(unknown)}; choose from {list(COMPAT_FAMILIES)}")
        #: the families this collector serves
        self.specs: tuple[MetricSpec, ...] = tuple(
            m for m in METRICS if m.source == "sweep" and (m.origin == "lagscope" or m.origin in wanted))
        self._history_points = history_points
        self._lock = threading.Lock()  # guards _clusters' published state; held briefly
        self._update_lock = threading.Lock()  # serialises updates (histories)
        self._clusters: dict[str, _ClusterState] = {}
        self._version = 0  # bumped by every change; keys the rendered exposition
        self._render_lock = threading.Lock()
        self._rendered: dict[tuple[int, bool], bytes] = {}
        if registry is not None:
            registry.register(self)

    # -- feeding ---------------------------------------------------------------------------

    def update(self, snapshot: Snapshot) -> None:
        """Replace the cluster's series by those of ``snapshot`` (and count the sweep).

        The samples are built outside the lock that scrapes take (only the swap is under it),
        so a scrape never waits for a large snapshot to be processed.
        """
        ts = snapshot.sweep_ts.timestamp()
        with self._update_lock:  # one update at a time: the histories are only touched here
            with self._lock:
                state = self._clusters.get(snapshot.cluster)
            if state is None:
                state = _ClusterState()
            counts = _ClusterState(
                sweeps_ok=state.sweeps_ok + (1 if snapshot.ok else 0),
                sweeps_failed=state.sweeps_failed + (0 if snapshot.ok else 1),
                group_errors=state.group_errors + int(snapshot.sweep.get("group_errors") or 0),
                last_ok_ts=ts if snapshot.ok else state.last_ok_ts,
            )
            samples: Samples = {}
            if snapshot.ok:
                self._feed_histories(state, snapshot, ts)
                _data_samples(snapshot, state.histories, ts, samples)
            _sweep_samples(snapshot, counts, samples)
            with self._lock:
                state.sweeps_ok, state.sweeps_failed = counts.sweeps_ok, counts.sweeps_failed
                state.group_errors, state.last_ok_ts = counts.group_errors, counts.last_ok_ts
                state.samples = samples
                self._clusters[snapshot.cluster] = state
                self._version += 1

    def forget(self, cluster: str) -> None:
        """Drop everything about ``cluster`` (it is no longer watched)."""
        with self._update_lock, self._lock:
            self._clusters.pop(cluster, None)
            self._version += 1

    def clusters(self) -> dict[str, dict[str, Any]]:
        """Per cluster: ``up`` (latest sweep ok) and ``last_success`` (epoch seconds or None)."""
        with self._lock:
            return {
                name: {"up": bool(st.samples.get("lagscope_up", {}).get((name,), 0.0)),
                       "last_success": st.last_ok_ts}
                for name, st in self._clusters.items()
            }

    def _feed_histories(self, state: _ClusterState, snapshot: Snapshot, ts: float) -> None:
        """Each group-partition's end (the one its lag is measured against: ``lag_basis``) into its
        history, then forget the points at or below its committed offset (:mod:`lagscope.lag`)."""
        seen: set[tuple[str, str, int]] = set()
        for row in snapshot.offsets:
            key = (str(row["group_id"]), str(row["topic"]), int(row["partition"]))
            seen.add(key)
            hist = state.histories.get(key)
            if hist is None:
                hist = state.histories[key] = EndOffsetHistory(self._history_points)
            basis_end = row.get("last_stable_offset") if row.get("lag_basis") == BASIS_LSO else row.get(
                "log_end_offset")
            hist.observe(ts, _i(basis_end))
            hist.forget_through(_i(row.get("committed_offset")))
        # group-partitions gone from a sweep that recorded every group (deleted groups and topics,
        # partitions no longer committed to) are forgotten; one with group errors forgets nothing
        if not snapshot.sweep.get("group_errors"):
            for key in set(state.histories) - seen:
                del state.histories[key]

    # -- prometheus-client Collector protocol ------------------------------------------------

    def describe(self) -> Iterable[Metric]:
        return [_family(spec) for spec in self.specs]

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            per_cluster = [st.samples for st in self._clusters.values()]
        return _families(per_cluster, self.specs)

    def exposition(self, openmetrics: bool = False) -> bytes:
        """This collector's series in the text format (or OpenMetrics), rendered once per change.

        Scrapes between two sweeps get the same bytes: a scrape of a large cluster costs a
        copy, not a render of every series (the render happens on the first scrape after
        :meth:`update`).
        """
        with self._lock:
            version = self._version
            body = self._rendered.get((version, openmetrics))
            per_cluster = [st.samples for st in self._clusters.values()]
        if body is not None:
            return body
        with self._render_lock:
            with self._lock:
                body = self._rendered.get((version, openmetrics))
            if body is None:
                body = render(per_cluster, openmetrics=openmetrics, specs=self.specs)
                with self._lock:
                    if self._version == version:
                        self._rendered = {k: v for k, v in self._rendered.items() if k[0] == version}
                        self._rendered[(version, openmetrics)] = body
        return body


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str, openmetrics: bool) -> str:
    text = text.replace("\\", "\\\\").replace("\n", "\\n")
    return text.replace('"', '\\"') if openmetrics else text


def _number(value: float) -> str:
    if math.isfinite(value):
        return repr(value)
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def render(per_cluster: list[Samples], *, openmetrics: bool = False,
           specs: Sequence[MetricSpec] = METRICS) -> bytes:
    """The exposition of ``per_cluster`` samples: Prometheus text 0.0.4, or OpenMetrics 1.0.

    A dedicated renderer (a few times faster than the generic one of prometheus-client, which
    matters for tens of thousands of partitions): one family per name with its HELP and TYPE,
    labels in name order, each series once (samples are keyed by their label values).
    """
    out: list[str] = []
    add = out.append
    for spec in specs:
        family = spec.name.removesuffix("_total") if openmetrics and spec.type == "counter" else spec.name
        add(f"# HELP {family} {_escape_help(spec.help, openmetrics)}\n# TYPE {family} {spec.type}\n")
        order = sorted(range(len(spec.labels)), key=lambda i: spec.labels[i])
        names = [spec.labels[i] for i in order]
        for samples in per_cluster:
            for labels, value in samples.get(spec.name, {}).items():
                pairs = ",".join(f'{n}="{_escape_label(labels[i])}"' for n, i in zip(names, order, strict=True))
                add(f"{spec.name}{{{pairs}}} {_number(value)}\n")
    if openmetrics:
        add("# EOF\n")
    return "".join(out).encode()


def _families(per_cluster: list[Samples], specs: Sequence[MetricSpec]) -> Iterator[Metric]:
    """One family per metric name, samples of every cluster merged (a name twice fails a scrape)."""
    for spec in specs:
        family = _family(spec)
        for samples in per_cluster:
            for labels, value in samples.get(spec.name, {}).items():
                family.add_metric(list(labels), value)
        yield family


def _family(spec: MetricSpec) -> GaugeMetricFamily | CounterMetricFamily:
    if spec.type == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=list(spec.labels))
    return GaugeMetricFamily(spec.name, spec.help, labels=list(spec.labels))


def _put(samples: Samples, name: str, labels: Labels, value: float) -> None:
    assert len(labels) == len(_SPECS[name].labels), name
    samples.setdefault(name, {})[labels] = float(value)


def _sweep_samples(snapshot: Snapshot, state: _ClusterState, samples: Samples) -> None:
    c = snapshot.cluster
    _put(samples, "lagscope_up", (c,), 1.0 if snapshot.ok else 0.0)
    duration_ms = snapshot.sweep.get("duration_ms")
    if duration_ms is not None:
        _put(samples, "lagscope_sweep_duration_seconds", (c,), float(duration_ms) / 1000.0)
    _put(samples, "lagscope_sweeps_total", (c, "ok"), state.sweeps_ok)
    _put(samples, "lagscope_sweeps_total", (c, "failed"), state.sweeps_failed)
    _put(samples, "lagscope_sweep_errors_total", (c,), state.group_errors)
    if state.last_ok_ts is not None:
        _put(samples, "lagscope_last_sweep_timestamp_seconds", (c,), state.last_ok_ts)


@dataclass
class _Group:
    state: str | None = None
    protocol_type: str | None = None
    protocol: str | None = None
    group_protocol: str | None = None
    generation: int | None = None
    described: bool = False  # has at least one MEMBERS row
    members: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    assigned: set[tuple[str, int]] = field(default_factory=set)


def _groups(snapshot: Snapshot) -> dict[str, _Group]:
    groups: dict[str, _Group] = {}
    for row in snapshot.members:
        g = groups.setdefault(str(row["group_id"]), _Group())
        g.described = True
        g.state = row.get("group_state") or g.state
        g.protocol_type = row.get("protocol_type", g.protocol_type)
        g.protocol = row.get("protocol") or g.protocol
        g.group_protocol = row.get("group_protocol") or g.group_protocol
        if row.get("generation") is not None:
            g.generation = int(row["generation"])
        member_id = row.get("member_id")
        if member_id is not None:
            g.members[str(member_id)] = row
            for tp in row.get("assignment") or ():
                g.assigned.add((str(tp["topic"]), int(tp["partition"])))
    for row in snapshot.offsets:
        g = groups.setdefault(str(row["group_id"]), _Group())
        if g.state is None:
            g.state = row.get("group_state")
    return groups


def _lag_seconds_samples(cluster: str, now: float, timed: list[tuple[str, str, str, Labels]], lag: list[int],
                         committed: list[int], record_t: list[float],
                         history: list[EndOffsetHistory | None], samples: Samples) -> dict[str, float]:
    """The lag-seconds series of the rows with an offset lag (:func:`lagscope.lag.lag_seconds`,
    once over all of them); returns each group's largest."""
    n = len(timed)
    group_lag_seconds: dict[str, float] = {}
    if not n:
        return group_lag_seconds
    found, e, tc, tp, ep = brackets(history, committed)
    seconds, lower, method = lag_seconds(np.full(n, now), np.asarray(lag, np.int64), np.ones(n, bool),
                                         np.asarray(committed, np.int64), np.asarray(record_t), found, e, tc, tp,
                                         ep)
    for (group, topic, p, kle), value, is_lower, known in zip(timed, seconds.tolist(), lower.tolist(),
                                                                 (method > 0).tolist(), strict=True):
        if not known:
            continue  # no point brackets the committed offset (nothing observed yet)
        _put(samples, "lagscope_partition_lag_seconds", (cluster, group, topic, p), value)
        _put(samples, "lagscope_partition_lag_seconds_is_lower_bound", (cluster, group, topic, p),
             1.0 if is_lower else 0.0)
        _put(samples, "kafka_consumergroup_group_lag_seconds", kle, value)
        group_lag_seconds[group] = max(group_lag_seconds.get(group, 0.0), value)
    return group_lag_seconds


def _data_samples(snapshot: Snapshot, histories: Mapping[tuple[str, str, int], EndOffsetHistory],
                  now: float, samples: Samples) -> None:
    c = snapshot.cluster
    groups = _groups(snapshot)

    # one row per (group, topic, partition): a duplicate row in the snapshot replaces the earlier one
    rows: dict[tuple[str, str, int], Mapping[str, Any]] = {}
    for row in snapshot.offsets:
        rows[(str(row["group_id"]), str(row["topic"]), int(row["partition"]))] = row

    lag_sum: dict[tuple[str, str], int] = {}
    offset_sum: dict[tuple[str, str], int] = {}
    group_lags: dict[str, list[int]] = {}
    # the rows with an offset lag, for lag in seconds (computed for all of them at once)
    timed: list[tuple[str, str, str, Labels]] = []
    timed_lag: list[int] = []
    timed_committed: list[int] = []
    timed_record_t: list[float] = []
    timed_history: list[EndOffsetHistory | None] = []
    for (group, topic, partition), row in rows.items():
        p = str(partition)
        committed = _i(row.get("committed_offset"))
        end_hw = _i(row.get("log_end_offset"))
        start = _i(row.get("log_start_offset"))
        lso = _i(row.get("last_stable_offset"))
        lag = _i(row.get("lag"))

        if end_hw is not None:
            _put(samples, "kafka_topic_partition_current_offset", (c, topic, p), end_hw)
            _put(samples, "kafka_partition_latest_offset", (c, c, topic, p), end_hw)
        if start is not None:
            _put(samples, "kafka_topic_partition_oldest_offset", (c, topic, p), start)
            _put(samples, "kafka_partition_earliest_offset", (c, c, topic, p), start)
        if lso is not None:
            _put(samples, "lagscope_partition_last_stable_offset", (c, topic, p), lso)

        ke = (c, group, topic, p)
        _put(samples, "kafka_consumergroup_current_offset", ke, -1 if committed is None else committed)
        _put(samples, "kafka_consumergroup_lag", ke, -1 if committed is None or lag is None else lag)
        if committed is None:
            continue
        offset_sum[(group, topic)] = offset_sum.get((group, topic), 0) + committed
        kle = (c, c, group, topic, p, _s(row.get("host")), _s(row.get("member_id")), _s(row.get("client_id")))
        _put(samples, "kafka_consumergroup_group_offset", kle, committed)
        if lag is None:
            continue
        lag_sum[(group, topic)] = lag_sum.get((group, topic), 0) + lag
        group_lags.setdefault(group, []).append(lag)
        _put(samples, "kafka_consumergroup_group_lag", kle, lag)

        record_ts = row.get("committed_record_ts")
        timed.append((group, topic, p, kle))
        timed_lag.append(lag)
        timed_committed.append(committed)
        timed_record_t.append(record_ts.timestamp() if isinstance(record_ts, dt.datetime) else math.nan)
        timed_history.append(histories.get((group, topic, partition)))

    group_lag_seconds = _lag_seconds_samples(c, now, timed, timed_lag, timed_committed, timed_record_t,
                                             timed_history, samples)

    for (group, topic), total in offset_sum.items():
        _put(samples, "kafka_consumergroup_current_offset_sum", (c, group, topic), total)
    for (group, topic), total in lag_sum.items():
        _put(samples, "kafka_consumergroup_lag_sum", (c, group, topic), total)
        _put(samples, "kafka_consumergroup_group_topic_sum_lag", (c, c, group, topic), total)
    for group, lags in group_lags.items():
        simple = "true" if groups.get(group, _Group()).protocol_type == "" else "false"
        _put(samples, "kafka_consumergroup_group_max_lag", (c, c, group, simple), max(lags))
        _put(samples, "kafka_consumergroup_group_sum_lag", (c, c, group), sum(lags))
        if group in group_lag_seconds:
            _put(samples, "kafka_consumergroup_group_max_lag_seconds", (c, c, group, simple),
                 group_lag_seconds[group])
            _put(samples, "lagscope_group_lag_seconds", (c, group), group_lag_seconds[group])

    for group, g in groups.items():
        current = g.state or "Unknown"
        for state in (*GROUP_STATES, *(() if current in GROUP_STATES else (current,))):
            _put(samples, "lagscope_group_state", (c, group, state), 1.0 if state == current else 0.0)
        if not g.described:
            continue  # membership unknown this sweep (describe failed): no member series rather than a false 0
        _put(samples, "kafka_consumergroup_members", (c, group), len(g.members))
        _put(samples, "lagscope_group_members", (c, group), len(g.members))
        _put(samples, "lagscope_group_assigned_partitions", (c, group), len(g.assigned))
        if g.generation is not None:
            _put(samples, "lagscope_group_generation", (c, group), g.generation)
        _put(samples, "lagscope_group_info",
             (c, group, _s(g.protocol_type), _s(g.protocol), _s(g.group_protocol)), 1.0)
        for member_id, row in g.members.items():
            assigned = {(str(tp["topic"]), int(tp["partition"])) for tp in row.get("assignment") or ()}
            _put(samples, "lagscope_member_assigned_partitions",
                 (c, group, member_id, _s(row.get("client_id")), _s(row.get("host")),
                  _s(row.get("group_instance_id"))), len(assigned))


# ------------------------------------------------------------------------------------------
# the __consumer_offsets tail
# ------------------------------------------------------------------------------------------

#: lagscope_commitlog_records_skipped_total's reasons, each always present (0 until it happens)
SKIP_REASONS = ("unknown_type", "unknown_version", "undecodable", "excluded_group", "duplicate")


class CommitLogCollector(Collector):
    """The ``lagscope_commitlog_*`` families, read at scrape time from ``stats()``
    (:meth:`lagscope.collector.commitlog.CommitLogService.stats`: per cluster, the tail's
    ``TailStats.snapshot()`` plus ``disabled_reason``). Register it into
    :attr:`MetricsServer.registry`."""

    def __init__(self, stats: Callable[[], Mapping[str, Mapping[str, Any]]]) -> None:
        self._stats = stats
        self.specs = tuple(m for m in METRICS if m.source in ("commitlog", "batch_probes"))

    def describe(self) -> list[Metric]:
        return []  # no collect() at registration: the tails may not have started yet

    def collect(self) -> Iterator[Metric]:
        samples: Samples = {}
        for cluster, st in sorted(self._stats().items()):
            _commitlog_samples(cluster, st, samples)
        yield from _families([samples], self.specs)


def _commitlog_samples(c: str, st: Mapping[str, Any], samples: Samples) -> None:
    unknown_types = sum(dict(st.get("undecoded_types") or {}).values())
    unknown_versions = sum(dict(st.get("unknown_versions") or {}).values())
    undecodable = int(st.get("decode_errors") or 0)
    records = int(st.get("records") or 0)
    up = bool(st.get("connected")) and not st.get("disabled_reason")
    _put(samples, "lagscope_commitlog_up", (c,), 1.0 if up else 0.0)
    _put(samples, "lagscope_commitlog_records_read_total", (c,), records)
    _put(samples, "lagscope_commitlog_records_decoded_total", (c,),
         max(0, records - unknown_types - unknown_versions - undecodable))
    skipped = {"unknown_type": unknown_types, "unknown_version": unknown_versions, "undecodable": undecodable,
               "excluded_group": int(st.get("excluded") or 0),
               "duplicate": int(st.get("duplicates_skipped") or 0)}
    for reason in SKIP_REASONS:
        _put(samples, "lagscope_commitlog_records_skipped_total", (c, reason), skipped[reason])
    if st.get("lag_records") is not None:
        _put(samples, "lagscope_commitlog_lag_records", (c,), int(st["lag_records"]))
    if st.get("last_record_ts_ms") is not None:
        _put(samples, "lagscope_commitlog_last_record_timestamp_seconds", (c,), int(st["last_record_ts_ms"]) / 1000.0)
    _put(samples, "lagscope_commitlog_errors_total", (c,), int(st.get("errors") or 0))
    if "batch_probes" in st:  # the tail's batch prober (Collector.tail_stats)
        verdicts = dict(st.get("batch_probes") or {})
        for verdict in ("inside", "boundary", "none"):
            _put(samples, "lagscope_batch_probes_total", (c, verdict), int(verdicts.get(verdict, 0)))
        _put(samples, "lagscope_batch_probe_candidates_dropped_total", (c,),
             int(st.get("batch_probe_candidates_dropped") or 0))


# ------------------------------------------------------------------------------------------
# lake writes
# ------------------------------------------------------------------------------------------

#: the tables the sweeps write (one file each per sweep), then those of the __consumer_offsets tail;
#: ``_state`` is the tail's saved positions (``<lake>/_state/commitlog/<cluster>.json``)
LAKE_TABLES = {"sweep": ("offsets", "members", "sweeps"), "commitlog": ("commits", "group_events", "_state")}


class LakeWriteCollector(Collector):
    """``lagscope_lake_write_errors_total``, read at scrape time from ``errors()``: failed lake
    writes per ``(cluster, table)`` (:meth:`lagscope.collector.loop.Collector.lake_write_errors`,
    which lists every table a cluster writes, at 0 until a write fails). Register it into
    :attr:`MetricsServer.registry`."""

    def __init__(self, errors: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        self._errors = errors
        self.specs = tuple(m for m in METRICS if m.source == "lake")

    def describe(self) -> list[Metric]:
        return []  # no collect() at registration

    def collect(self) -> Iterator[Metric]:
        samples: Samples = {}
        for (cluster, table), n in sorted(self._errors().items()):
            _put(samples, "lagscope_lake_write_errors_total", (cluster, table), n)
        yield from _families([samples], self.specs)


class RetentionCollector(Collector):
    """``lagscope_retention_removed_partitions_total`` and ``…_bytes_total``, read at scrape time
    from ``removed()`` (:meth:`lagscope.retention.Removals.snapshot`: ``(cluster, table) →
    (partitions, bytes)``). Register it into :attr:`MetricsServer.registry`."""

    def __init__(self, removed: Callable[[], Mapping[tuple[str, str], tuple[int, int]]]) -> None:
        self._removed = removed
        self.specs = tuple(m for m in METRICS if m.source == "retention")

    def describe(self) -> list[Metric]:
        return []  # no collect() at registration

    def collect(self) -> Iterator[Metric]:
        samples: Samples = {}
        for (cluster, table), (partitions, nbytes) in sorted(self._removed().items()):
            _put(samples, "lagscope_retention_removed_partitions_total", (cluster, table), partitions)
            _put(samples, "lagscope_retention_removed_bytes_total", (cluster, table), nbytes)
        yield from _families([samples], self.specs)


# ------------------------------------------------------------------------------------------
# HTTP server
# ------------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    registry: CollectorRegistry
    collector: LagCollector


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            openmetrics = content_type.startswith("application/openmetrics-text")
            try:
                lag = self.server.collector.exposition(openmetrics)
                rest = encoder(self.server.registry)
                if openmetrics:  # one "# EOF" terminator, at the very end
                    lag = lag.removesuffix(b"# EOF\n")
                body = lag + rest
            except Exception as exc:  # a failing collector must not kill the server thread
                log.exception("metrics scrape failed")
                self._send(500, "text/plain; charset=utf-8", f"scrape failed: {exc}\n".encode())
                return
            self._send(200, content_type, body)
        elif path == "/healthz":
            body = json.dumps({"status": "ok", "clusters": self.server.collector.clusters()}).encode()
            self._send(200, "application/json", body)
        elif path == "/":
            self._send(200, "text/html; charset=utf-8",
                       b'<html><body><a href="/metrics">/metrics</a> <a href="/healthz">/healthz</a></body></html>')
        else:
            self._send(404, "text/plain; charset=utf-8", b"not found\n")

    def _send(self, code: int, content_type: str, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class MetricsServer:
    """Serves ``/metrics`` and ``/healthz`` for a :class:`LagCollector` on ``bind:port``.

    ``port=0`` picks a free port (read it back from :attr:`port`). ``/metrics`` serves the
    collector's series (rendered once per update, see :meth:`LagCollector.exposition`)
    followed by whatever :attr:`registry` holds, rendered at each scrape: pass an existing
    registry, or register more collectors into ``server.registry`` (by default an empty one).
    The lag collector itself is not in that registry. Lifecycle: ``start()`` →
    ``update(snapshot)``… → ``stop()``; also a context manager.
    """

    def __init__(self, bind: str = DEFAULT_BIND, port: int = DEFAULT_PORT, *,
                 registry: CollectorRegistry | None = None, collector: LagCollector | None = None,
                 history_points: int = HISTORY_POINTS, compat: Iterable[str] = COMPAT_FAMILIES) -> None:
        if not 0 <= port <= 65535:
            raise ConfigError(f"metrics port must be 0..65535, got {port}")
        self.bind = bind
        self._requested_port = port
        self.registry = registry if registry is not None else CollectorRegistry()
        self.collector = collector if collector is not None else LagCollector(history_points=history_points,
                                                                              compat=compat)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            return self._requested_port
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return httpserve.url_of(self.bind, self.port, "/metrics")

    def update(self, snapshot: Snapshot) -> None:
        self.collector.update(snapshot)

    def start(self) -> MetricsServer:
        if self._server is not None:
            return self
        server = httpserve.listen(_Server, self.bind, self._requested_port, _Handler, "metrics")
        server.registry = self.registry
        server.collector = self.collector
        self._server = server
        self._thread = httpserve.serve_in_background(server, "lagscope-metrics")
        log.info("metrics: serving %s", self.url)
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        httpserve.stop(server, thread)

    def __enter__(self) -> MetricsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
