"""The analytics' findings as Prometheus metrics: a custom collector over the result tables.

The analytics write ``rebalances``, ``anomalies``, ``status`` and ``lag_trends`` under
``<results>/<table>/cluster=…/date=…`` (see :mod:`lagscope.schema`). :class:`ResultsCollector`
follows them through :mod:`lagscope.results` and exposes, per scrape:

===========================================================  =========  ==========================================
metric                                                       type       labels
===========================================================  =========  ==========================================
``lagscope_rebalances_total``                                counter    cluster, group, cause
``lagscope_rebalance_duration_seconds``                      histogram  cluster, group (closed windows)
``lagscope_rebalance_last_duration_seconds``                 gauge      cluster, group
``lagscope_rebalance_over_bound_ratio``                      gauge      cluster, group (last closed window)
``lagscope_rebalance_last_end_timestamp_seconds``            gauge      cluster, group (last closed window)
``lagscope_rebalance_in_progress``                           gauge      cluster, group (1 while a window is open)
``lagscope_anomalies_open``                                  gauge      cluster, group, kind, severity
``lagscope_anomalies_total``                                 counter    cluster, group, kind, severity
``lagscope_messages_lost_total``                             counter    cluster, group, topic, cause
``lagscope_messages_reprocessed_total``                      counter    cluster, group, topic, cause
``lagscope_group_status``                                    gauge      cluster, group, status (1 = current)
``lagscope_group_burrow_status``                             gauge      cluster, group, status (1 = current)
``lagscope_retention_headroom_seconds``                      gauge      cluster, group, topic, partition
``lagscope_catchup_eta_seconds``                             gauge      cluster, group, topic, partition
``lagscope_advice_info``                                     gauge      cluster, group, rule, setting, current,
                                                                        suggested, confidence (1 per current advice)
``lagscope_results_last_update_timestamp_seconds``           gauge      table
``lagscope_results_read_errors_total``                       counter    (none)
``lagscope_results_files_read_total``                        counter    (none)
===========================================================  =========  ==========================================

It holds what it exports, not the tables' rows, so its memory does not grow with the results'
history: per partition its latest lag-trend values, per group its latest status (until the partition
or group is gone: its rows stopped for the analytics' forget horizon while its cluster's go on, its
group or topic deleted; it is then no longer exported), per cluster its
current advice (the rows of the latest step that wrote any, :func:`lagscope.results.current_advice`:
at most six per group, so the info series are bounded by the groups); the open
rebalance windows and anomalies, and those closed within :data:`HOLD_CLOSED_S` of the newest
step, as one small record each (an open one is written again by every step until it closes,
a storm grows while rebalances keep coming); older ones folded into per-group totals plus an
8-byte hash of their identity, so that one written again is noticed and its day read again
instead of counted twice. The tables are brought up to date at most every ``refresh_s``
seconds: a :class:`lagscope.results.TableTail` per table says which live files are new since
the last refresh (an incremental step adds files: a refresh reads that step's files, only the
columns it needs), and those are folded in. When files already read change (a batch replaced
a day), that day (events) or the table (series) is read again; days gone at the oldest end
(retention) are dropped, except what they added to the two delivery counters, which only go
up while the process runs: the counts of a day removed by retention stay as totals, and a
finding written again counts once, its largest count (:mod:`lagscope.delivery`). A refresh is
all or nothing per table: a table that cannot be read keeps its previous state and counts a
read error, so a scrape never fails and a transient error never turns into zeros.

    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> registry.register(ResultsCollector("/var/lib/lagscope/results"))  # doctest: +SKIP
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
import math
import threading
import time
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from lagscope.delivery import DELIVERY_KINDS, account_rows
from lagscope.errors import ConfigError, FileQuarantined, LakeError
from lagscope.lake import check_in, is_missing_file, quarantine_unreadable_in
from lagscope.results import (
    FolderChange,
    TableChanges,
    TableTail,
    default_gone_after_s,
    event_rank,
    list_files,
    live_series,
    newest_step_files,
    object_files,
    read_publish_state,
)
from lagscope.schema import RESULT_TABLES
from lagscope.storage import Store

__all__ = [
    "ADVICE_LABELS",
    "BURROW_STATUSES",
    "DURATION_BUCKETS",
    "GROUP_STATUSES",
    "ResultsCollector",
    "ResultsSnapshot",
    "serve",
]

log = logging.getLogger(__name__)

#: how often one refresh reads a table again after quarantining one of its files
_QUARANTINE_RETRIES = 8

#: buckets of ``lagscope_rebalance_duration_seconds`` (s): from a cooperative blip to a
#: max.poll.interval-bound rebalance (the default max.poll.interval.ms is 300 000)
DURATION_BUCKETS: tuple[float, ...] = (0.5, 1, 2, 5, 10, 15, 30, 45, 60, 120, 300, 600)

#: every value ``status.status`` can take; one series per value, 1 on the current one
GROUP_STATUSES: tuple[str, ...] = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND", "IDLE")
#: every value ``status.burrow_status`` can take
BURROW_STATUSES: tuple[str, ...] = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND")


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


# --------------------------------------------------------------------------------------------
# reading one result file: only the columns, and for the series tables only the latest rows
# --------------------------------------------------------------------------------------------

def _batches(path: Path, table: str, columns: list[str], where: Any,
             store: Store | None = None) -> Iterator[pa.RecordBatch]:
    """The file's rows in record batches (one batch in memory at a time), in the table's types
    (``store``: the object store whose filesystem ``path`` is in; None: a local file).

    A file that cannot be read (its footer, a newer major schema version, a page) is moved into
    quarantine (:func:`lagscope.lake.quarantine`) and raises :class:`FileQuarantined`: the
    table's reading is then taken again without it (batches of it may have been folded)."""
    import pyarrow.dataset as ds

    root: Path | Store = store if store is not None else path
    good, bad = check_in(root, [path])
    if bad:
        raise FileQuarantined(f"{path}: quarantined")
    if not good:
        return  # unreadable and could not be moved: left out (it was said once)
    dataset = ds.dataset(str(path), format="parquet", schema=RESULT_TABLES[table].schema,
                         filesystem=store.filesystem if store is not None else None)
    try:
        yield from dataset.to_batches(columns=columns, filter=where)
    except (pa.ArrowInvalid, OSError) as exc:
        if is_missing_file(exc) or not quarantine_unreadable_in(root, [path], exc):
            raise
        raise FileQuarantined(f"{path}: quarantined") from exc


def _epoch_s(column: pa.Array) -> list[float | None]:
    """A timestamp column as Unix seconds."""
    return [None if v is None else v / 1000.0 for v in column.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())
            .to_pylist()]


def _latest_per_key(path: Path, table: str, keys: list[str], ts: str, values: list[str],
                    where: Any, store: Store | None = None) -> Iterator[tuple[Any, ...]]:
    """Per key, the file's row with the greatest ``ts`` (ties: the later row), as
    ``(*key, ts in Unix s, *values)``: per batch, sorted by time (a stable sort) and the last row
    of each key kept, so a step's file of a minute or a batch's file of a day costs one pass."""
    last = pc.ScalarAggregateOptions(skip_nulls=False)
    for batch in _batches(path, table, [*keys, ts, *values], where, store):
        rows = pa.Table.from_batches([batch]).filter(pc.is_valid(batch.column(ts)))
        if not rows.num_rows:
            continue
        rows = rows.take(pc.sort_indices(rows, [(ts, "ascending")]))
        latest = rows.group_by(keys, use_threads=False).aggregate(
            [(c, "last", last) for c in (ts, *values)])
        times = _epoch_s(latest.column(f"{ts}_last"))
        cols = [latest.column(k).to_pylist() for k in keys]
        vals = [latest.column(f"{v}_last").to_pylist() for v in values]
        for i, t in enumerate(times):
            yield (*(c[i] for c in cols), t, *(v[i] for v in vals))


# --------------------------------------------------------------------------------------------
# what the exporter holds per table (immutable: a refresh builds the next one)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Latest:
    """A series' latest row: its time (Unix s), its date folder and the values exported."""

    ts: float
    date: str
    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class _Event:
    """The current row of one rebalance window or anomaly: how current it is
    (:func:`lagscope.results.event_rank`), whether it is open, and what is exported of it;
    ``withdrawn``: an anomaly a later step found is no finding (kept as a record, never counted)."""

    rank: tuple[float, int]
    group: str
    is_open: bool
    values: tuple[Any, ...]
    withdrawn: bool = False


#: a closed window or anomaly stays a record for this long after the newest step seen (by
#: ``as_of_ts``) before it is folded into its folder's totals: a rebalance storm is written
#: again, closed, for as long as rebalances keep coming within its window (600 s by default), a
#: rebalance window by the step that raises its processing gap (up to 900 s after its end).
#: A folded one written again makes its folder be read again whole (exact, only slower).
HOLD_CLOSED_S = 3600.0


class _RebalanceTotals:
    """Closed rebalance windows of one group, folded into what the metrics need."""

    __slots__ = ("buckets", "causes", "duration_sum", "durations", "last")

    def __init__(self) -> None:
        self.causes: dict[str, int] = {}
        self.buckets = [0] * len(DURATION_BUCKETS)
        self.durations = 0
        self.duration_sum = 0.0
        #: the window with the latest end: (end, duration, observed / bound)
        self.last: tuple[float, Any, Any] | None = None

    def add(self, event: _Event) -> None:
        cause, end_ts, duration, over_bound = event.values
        self.count(cause)
        if (d := _finite(duration)) is not None:
            self.durations += 1
            self.duration_sum += d
            for i, bound in enumerate(DURATION_BUCKETS):
                self.buckets[i] += d <= bound
        if end_ts is not None and (self.last is None or end_ts >= self.last[0]):
            self.last = (end_ts, duration, over_bound)

    def count(self, cause: str | None) -> None:
        key = cause or "unknown"
        self.causes[key] = self.causes.get(key, 0) + 1

    def merge(self, other: _RebalanceTotals) -> None:
        for cause, n in other.causes.items():
            self.causes[cause] = self.causes.get(cause, 0) + n
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]
        self.durations += other.durations
        self.duration_sum += other.duration_sum
        if other.last is not None and (self.last is None or other.last[0] >= self.last[0]):
            self.last = other.last


def _fold_rebalance(totals: dict[Any, Any], event: _Event) -> None:
    if event.group not in totals:
        totals[event.group] = _RebalanceTotals()
    totals[event.group].add(event)


def _fold_anomaly(totals: dict[Any, Any], event: _Event) -> None:
    """Per folder: ``("n", group, kind, severity)`` → anomalies, and the delivery counts
    ``("lost" | "reprocessed", group, topic, cause)`` → messages (a withdrawn one: nothing)."""
    if event.withdrawn:
        return
    _, kind, severity, delivery = event.values
    key = ("n", event.group, kind, severity)
    totals[key] = totals.get(key, 0) + 1
    if delivery is not None:
        measure = _delivery_key(event.group, delivery)
        totals[measure] = totals.get(measure, 0) + delivery[3]


def _delivery_key(group: str, delivery: tuple[Any, ...]) -> tuple[str, str, str, str]:
    topic, cause, measure, _ = delivery
    return (measure, group, topic or "", cause)


def _delivery_of(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...] | None]:
    """Anomaly rows' delivery accounting as the exporter holds it, ``(topic, cause, measure,
    messages)`` with measure ``lost`` or ``reprocessed``; None for kinds that count no message
    and for a retention loss not proven (bound ``at_most``: its owner may have fetched the deleted
    records, so the counter, and the critical alert on it, count only what is known lost)
    (:func:`lagscope.delivery.account_rows`, the one definition, once per batch)."""
    out: list[tuple[Any, ...] | None] = []
    for counted in account_rows(rows):
        if counted is None or counted["bound"] == "at_most":
            out.append(None)
        else:
            measure = DELIVERY_KINDS[counted["kind"]]
            out.append((counted["topic"], counted["cause"], measure, counted[measure]))
    return out


def _merge_anomaly(older: _Event, newer: _Event) -> _Event:
    """Two rows of one anomaly: the newer one, with the larger of the two counts of messages (an
    open loss only grows; a counter never goes down because a later row said less, or counted
    nothing: a retention loss published proven by a state that did not carry its proof)."""
    a, b = older.values[3], newer.values[3]
    if a is None or (b is not None and a[3] <= b[3]):
        return newer
    kept = a if b is None else (*b[:3], a[3])
    return _Event(newer.rank, newer.group, newer.is_open, (*newer.values[:3], kept), newer.withdrawn)


def _anomaly_row_columns() -> tuple[str, ...]:
    """The anomaly columns read besides the exported ones: the delivery accounting's (``cause``
    where the schema has it) and ``withdrawn`` (where the schema has it)."""
    names = RESULT_TABLES["anomalies"].schema.names
    return ("topic", "partition", "start_ts", "magnitude", *(c for c in ("cause", "withdrawn") if c in names))


def _copy_totals(totals: Mapping[Any, Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in totals.items():
        if isinstance(v, _RebalanceTotals):
            copied = _RebalanceTotals()
            copied.merge(v)
            out[k] = copied
        else:
            out[k] = v
    return out


@dataclass(frozen=True)
class _EventFolder:
    """One (cluster, date) folder of an event table: the open and recently closed events as
    records by identity, the others folded into ``totals``, whose identities' hashes ``folded``
    holds (sorted; 8 bytes each) so that one written again is noticed."""

    held: Mapping[tuple[Any, ...], _Event] = field(default_factory=dict)
    folded: array[int] = field(default_factory=lambda: array("q"))
    totals: Mapping[Any, Any] = field(default_factory=dict)


def _is_folded(folder: _EventFolder, ident: tuple[Any, ...]) -> bool:
    h = hash(ident)
    i = bisect.bisect_left(folder.folded, h)
    return i < len(folder.folded) and folder.folded[i] == h


@dataclass(frozen=True)
class _TableSpec:
    name: str
    #: series tables: the key columns, the time column and the exported value columns
    keys: tuple[str, ...] = ()
    ts: str = ""
    values: tuple[str, ...] = ()
    where: Callable[[], Any] | None = None
    #: event tables: the identity columns within a (cluster, date) folder, how a closed one folds
    identity: tuple[str, ...] = ()
    fold: Callable[[dict[Any, Any], _Event], None] | None = None
    #: event tables: one more value derived from each row (given a batch's rows, one value per
    #: row), the columns it reads, and how two rows of one identity combine (default: the more
    #: current one wins)
    derive: Callable[[Sequence[Mapping[str, Any]]], Sequence[Any]] | None = None
    derive_columns: Callable[[], tuple[str, ...]] | None = None
    merge: Callable[[_Event, _Event], _Event] | None = None

    @property
    def is_series(self) -> bool:
        return bool(self.keys)


def _partition_rows() -> Any:
    import pyarrow.dataset as ds

    return ds.field("topic").is_valid() & ds.field("partition").is_valid()


def _group_rows() -> Any:
    import pyarrow.dataset as ds

    return ~ds.field("topic").is_valid() & ~ds.field("partition").is_valid()


_SPECS = {
    "rebalances": _TableSpec("rebalances", identity=("group_id", "start_ts"),
                             values=("cause", "end_ts", "duration_s", "observed_over_bound"), fold=_fold_rebalance),
    "anomalies": _TableSpec("anomalies", identity=("key",), values=("group_id", "kind", "severity"),
                            fold=_fold_anomaly, derive=_delivery_of, derive_columns=_anomaly_row_columns,
                            merge=_merge_anomaly),
    "status": _TableSpec("status", keys=("group_id",), ts="eval_ts", values=("status", "burrow_status"),
                         where=_group_rows),
    "lag_trends": _TableSpec("lag_trends", keys=("group_id", "topic", "partition"), ts="window_start",
                             values=("retention_headroom_s", "catchup_eta_s"), where=_partition_rows),
}


@dataclass(frozen=True)
class _TableState:
    """One table's folded rows: series tables by ``(cluster, *key)``, event tables by folder
    ``(cluster, date)``. ``newest_as_of``: the latest step seen (Unix s); ``updated``: the newest
    modification time of the table's files."""

    series: Mapping[tuple[Any, ...], _Latest] = field(default_factory=dict)
    events: Mapping[tuple[str, str], _EventFolder] = field(default_factory=dict)
    newest_as_of: float = -math.inf
    updated: float | None = None
    #: anomalies: the delivery counts of folders gone (retention), ``(cluster, measure, group,
    #: topic, cause)`` → messages, so that the counters never go down
    retired: Mapping[tuple[str, ...], int] = field(default_factory=dict)


def _folder_delivery(cluster: str, folder: _EventFolder) -> dict[tuple[str, ...], int]:
    """One anomalies folder's delivery counts: ``(cluster, measure, group, topic, cause)`` → messages."""
    out: dict[tuple[str, ...], int] = defaultdict(int)
    for key, n in folder.totals.items():
        if key[0] != "n":
            out[(cluster, *key)] += n
    for event in folder.held.values():
        if (delivery := event.values[3]) is not None and not event.withdrawn:
            out[(cluster, *_delivery_key(event.group, delivery))] += delivery[3]
    return out


def _fold_series(spec: _TableSpec, series: dict[tuple[Any, ...], _Latest], change: FolderChange) -> None:
    where = spec.where() if spec.where else None
    for path in change.files:
        for row in _latest_per_key(path, spec.name, list(spec.keys), spec.ts, list(spec.values), where,
                                   change.store):
            key = (change.cluster, *row[:len(spec.keys)])
            ts = row[len(spec.keys)]
            cur = series.get(key)
            if cur is None or ts >= cur.ts:
                series[key] = _Latest(ts, change.date, tuple(row[len(spec.keys) + 1:]))


def _unix(value: Any) -> Any:
    """A timestamp as Unix seconds (a float holds less than a datetime); other values as they are."""
    return value.timestamp() if isinstance(value, dt.datetime) else value


def _event_rows(spec: _TableSpec, files: Iterable[Path],
                store: Store | None = None) -> Iterator[tuple[tuple[Any, ...], _Event]]:
    extra = spec.derive_columns() if spec.derive_columns else ()
    columns = list(dict.fromkeys([*spec.identity, "group_id", "as_of_ts", "end_ts", *spec.values, *extra]))
    for path in files:
        for batch in _batches(path, spec.name, columns, None, store):
            rows = batch.to_pylist()
            derived = spec.derive(rows) if spec.derive else None
            for i, row in enumerate(rows):
                values = tuple(_unix(row[c]) for c in spec.values)
                yield (tuple(row[c] for c in spec.identity),
                       _Event(event_rank(row), row["group_id"], row["end_ts"] is None,
                              values if derived is None else (*values, derived[i]), bool(row.get("withdrawn"))))


def _fold_event_files(spec: _TableSpec, folder: _EventFolder, files: Iterable[Path],
                      store: Store | None = None) -> _EventFolder | None:
    """``folder`` with the rows of ``files`` in (the current row per identity); None when a row
    is of an identity already folded into the totals (the folder must then be read again whole)."""
    held = dict(folder.held)
    for ident, event in _event_rows(spec, files, store):
        cur = held.get(ident)
        if cur is None and folder.folded and _is_folded(folder, ident):
            return None
        if cur is None:
            held[ident] = event
        elif event.rank >= cur.rank:
            held[ident] = spec.merge(cur, event) if spec.merge else event
        elif spec.merge:
            held[ident] = spec.merge(event, cur)
    return _EventFolder(held, folder.folded, folder.totals)


def _fold_closed(spec: _TableSpec, folder: _EventFolder, before: float) -> _EventFolder:
    """Fold the closed events last written before ``before`` (Unix s) into the totals."""
    done = {k: e for k, e in folder.held.items() if not e.is_open and e.rank[0] < before}
    if not done:
        return folder
    assert spec.fold is not None
    totals = _copy_totals(folder.totals)
    for event in done.values():
        spec.fold(totals, event)
    folded = array("q", sorted([*folder.folded, *(hash(k) for k in done)]))
    return _EventFolder({k: e for k, e in folder.held.items() if k not in done}, folded, totals)


def _apply(spec: _TableSpec, state: _TableState, changes: TableChanges,
           folder_files: Callable[[str, str], list[Path]], gone_after_s: float) -> tuple[_TableState, list[Path]]:
    """The next state, ``state`` with ``changes`` folded in (``state`` is not modified), and the
    files read. ``folder_files(cluster, date)``: a folder's live files, to read one again whole.
    ``gone_after_s``: a series whose rows stopped this long before its cluster's newest is dropped
    (:func:`lagscope.results.live_series`)."""
    read = [f for c in changes.changed for f in c.files]
    if spec.is_series:
        series = dict(state.series)
        if changes.gone:
            gone_days = set(changes.gone)
            series = {k: v for k, v in series.items() if (k[0], v.date) not in gone_days}
        for change in changes.changed:
            _fold_series(spec, series, change)
        if changes.changed:
            series = live_series(series, lambda k: k[0], lambda v: v.ts, gone_after_s)
        return _TableState(series=series, updated=changes.newest_mtime), read
    gone = set(changes.gone)
    events = {k: v for k, v in state.events.items() if k not in gone}
    retired = dict(state.retired)
    if spec.derive is not None:
        for key in gone & set(state.events):
            for counted, n in _folder_delivery(key[0], state.events[key]).items():
                retired[counted] = retired.get(counted, 0) + n
    for change in changes.changed:
        key = (change.cluster, change.date)
        folder = None if change.reset else _fold_event_files(spec, events.get(key, _EventFolder()), change.files,
                                                             change.store)
        if folder is None:  # replaced, or a folded event written again: read it again whole
            files = change.files if change.reset else folder_files(*key)
            read += [] if change.reset else files
            folder = _fold_event_files(spec, _EventFolder(), files, change.store)
            assert folder is not None  # nothing folded in an empty folder
        events[key] = folder
    newest = max([state.newest_as_of, *(e.rank[0] for f in events.values() for e in f.held.values())])
    events = {k: _fold_closed(spec, f, newest - HOLD_CLOSED_S) for k, f in events.items() if f.held or f.totals}
    return _TableState(events=events, newest_as_of=newest, updated=changes.newest_mtime, retired=retired), read


def _provisional(changes: TableChanges) -> list[FolderChange]:
    """The folders' provisional files of a poll, as changes whose ``files`` they are."""
    return [FolderChange(c.cluster, c.date, c.provisional) for c in changes.changed if c.provisional]


def _overlay(spec: _TableSpec, state: _TableState, changes: TableChanges) -> tuple[_TableState, list[Path]]:
    """``state`` (what the full steps wrote) with the rows of the provisional step laid over it
    (:attr:`lagscope.results.FolderChange.provisional`): what is exported until the next refresh,
    never kept (the next refresh lays the provisional step of its time over the full steps').
    An event folder whose provisional rows name an event already folded into its totals keeps
    the full steps' view. Returns it and the files read."""
    pre = _provisional(changes)
    if not pre:
        return state, []
    read = [f for c in pre for f in c.files]
    if spec.is_series:
        series = dict(state.series)
        for change in pre:
            _fold_series(spec, series, change)
        return replace(state, series=series), read
    events = dict(state.events)
    for change in pre:
        key = (change.cluster, change.date)
        folder = _fold_event_files(spec, events.get(key, _EventFolder()), change.files, change.store)
        if folder is not None:
            events[key] = folder
    return replace(state, events=events), read


def _needs_full_read(spec: _TableSpec, changes: TableChanges) -> bool:
    """Whether a series table must be read again whole: files already read were replaced, or
    days went that are not the oldest of their cluster (a series' latest row may then be in an
    older day still there). Retention removes the oldest days: their series are just dropped."""
    if not spec.is_series:
        return False
    if any(c.reset for c in changes.changed):
        return True
    remaining: dict[str, str] = {}
    for cluster, date in changes.folders:
        remaining[cluster] = min(date, remaining.get(cluster, date))
    return any(cluster in remaining and date > remaining[cluster] for cluster, date in changes.gone)


#: the advice labels, in order (``current`` is the setting's current value, ``""`` when unknown)
ADVICE_LABELS = ("cluster", "group", "rule", "setting", "current", "suggested", "confidence")
_ADVICE_COLUMNS = ["group_id", "rule", "setting", "current_value", "suggested", "confidence", "as_of_ts"]


@dataclass(frozen=True)
class _Advice:
    """One cluster's current advice: the latest step's ``as_of_ts`` (Unix s), its date folder and
    its rows as label values (without the cluster)."""

    as_of: float
    date: str
    rows: tuple[tuple[str, ...], ...]


def _apply_advice(held: Mapping[str, _Advice], changes: TableChanges,
                  watermark_ms: int | None) -> tuple[dict[str, _Advice], int]:
    """The advice held with ``changes`` in: of the new files' rows, per cluster those of the
    latest ``as_of_ts`` replace the held ones when newer (a folder replaced whole: its files are
    all read); a cluster whose folder went, or whose advice is older than the checkpoint's
    watermark (a later step found none), holds none. Returns them and the files read."""
    out = dict(held)
    read = 0
    gone = set(changes.gone)
    for cluster, was in held.items():
        if (cluster, was.date) in gone:
            del out[cluster]
    # per cluster only its newest date folder can hold its latest step, and of an incremental
    # step's files (inc-<from>-<to>-…) only the newest step's: a start reads one step, not a day
    newest: dict[str, FolderChange] = {}
    for change in changes.changed:
        if not change.files and not change.reset:
            continue  # provisional files only: laid over by the caller, not kept
        if change.cluster not in newest or change.date > newest[change.cluster].date:
            newest[change.cluster] = change
    for change in newest.values():
        held_now = out.get(change.cluster)
        if held_now is not None and held_now.date > change.date:
            continue
        best: dict[float, list[tuple[str, ...]]] = {}
        for path in newest_step_files(change.files):
            read += 1
            for batch in _batches(path, "advice", _ADVICE_COLUMNS, None, change.store):
                for r in batch.to_pylist():
                    best.setdefault(r["as_of_ts"].timestamp(), []).append(
                        (r["group_id"], r["rule"], r["setting"], r["current_value"] or "", r["suggested"],
                         r["confidence"]))
        if not best:
            continue
        top = max(best)
        cur = out.get(change.cluster)
        if cur is None or top > cur.as_of or (top == cur.as_of and change.reset):
            out[change.cluster] = _Advice(top, change.date, tuple(sorted(set(best[top]))))
        elif top == cur.as_of:
            out[change.cluster] = _Advice(top, cur.date, tuple(sorted(set(cur.rows) | set(best[top]))))
    if watermark_ms is not None:
        out = {c: a for c, a in out.items() if a.as_of * 1000 >= watermark_ms}
    return out, read


@dataclass(frozen=True)
class ResultsSnapshot:
    """One complete state of the exporter, replaced whole by a refresh."""

    tables: Mapping[str, _TableState] = field(default_factory=dict)
    #: per cluster, its current advice
    advice: Mapping[str, _Advice] = field(default_factory=dict)
    #: per table: the files the refresh that made this snapshot read
    files_read: Mapping[str, list[Path]] = field(default_factory=dict)
    #: ``tables`` and ``advice`` without the provisional step's rows: what the next refresh
    #: folds new files into (None: the same as ``tables``, ``advice``)
    committed: Mapping[str, _TableState] | None = None
    committed_advice: Mapping[str, _Advice] | None = None

    def held(self) -> dict[str, int]:
        """Per table, the records it holds: series (lag trends, status) or open and recently
        closed events (rebalances, anomalies)."""
        return {name: len(t.series) + sum(len(f.held) for f in t.events.values()) for name, t in self.tables.items()}

    def folded(self) -> dict[str, int]:
        """Per event table, the events folded into totals (8 bytes each)."""
        return {name: sum(len(f.folded) for f in t.events.values()) for name, t in self.tables.items()
                if _SPECS[name].fold is not None}


class ResultsCollector(Collector):
    """A prometheus_client custom collector over the result tables under ``root``.

    ``refresh_s``: the tables are brought up to date when the last refresh is older than this.
    ``gone_after_s``: see the attribute. ``clock``: injectable monotonic clock (tests).
    """

    def __init__(self, root: Path | str | Store, *, refresh_s: float = 15.0, gone_after_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        #: a local folder, or the results on an object store (:mod:`lagscope.storage`)
        self.root: Path | Store = root if isinstance(root, Store) else Path(root)
        self.refresh_s = refresh_s
        #: a partition's lag trend or a group's status unwritten this long while its cluster's others are
        #: written is gone (deleted, no longer swept) and no longer exported; None: the analytics' default
        #: forget horizon (:func:`lagscope.results.live_series`)
        self.gone_after_s = default_gone_after_s() if gone_after_s is None else gone_after_s
        self._clock = clock
        self._lock = threading.Lock()
        self._tails = {name: TableTail(self.root, name) for name in _SPECS}
        self._advice_tail = TableTail(self.root, "advice")
        self._snapshot: ResultsSnapshot | None = None
        self._read_at = -math.inf
        self._read_errors = 0
        self._files_read = 0

    def reading(self) -> ResultsSnapshot:
        """The current snapshot, brought up to date first (new files only) when it is older than
        ``refresh_s``."""
        with self._lock:
            now = self._clock()
            if self._snapshot is None or now - self._read_at >= self.refresh_s:
                self._snapshot, self._read_at = self._refresh(self._snapshot or ResultsSnapshot()), now
            return self._snapshot

    def _refresh(self, previous: ResultsSnapshot) -> ResultsSnapshot:
        tables: dict[str, _TableState] = {}
        views: dict[str, _TableState] = {}
        files_read: dict[str, list[Path]] = {}
        before = previous.committed if previous.committed is not None else previous.tables
        for name, spec in _SPECS.items():
            for _ in range(_QUARANTINE_RETRIES):
                state = before.get(name, _TableState())
                tail = self._tails[name]
                try:
                    changes = tail.poll()
                    if _needs_full_read(spec, changes):
                        tail, state = TableTail(self.root, name), _TableState()
                        changes = tail.poll()
                    state, read = _apply(spec, state, changes, self._folder_files(name), self.gone_after_s)
                    break
                except FileQuarantined:
                    continue  # the file is in quarantine (one warning said so): read the table again
                except (LakeError, OSError, pa.ArrowInvalid) as exc:
                    if isinstance(exc, OSError | pa.ArrowInvalid) and is_missing_file(exc):
                        log.debug("result table %s changed while read; read again at the next refresh", name)
                    else:
                        self._read_errors += 1
                        log.warning("cannot read result table %s under %s: %s", name, self.root, exc)
                    tables[name] = before.get(name, _TableState())
                    views[name] = previous.tables.get(name, tables[name])
                    files_read[name] = []
                    break
            else:  # a file quarantined at every attempt: read again at the next refresh
                tables[name] = before.get(name, _TableState())
                views[name] = previous.tables.get(name, tables[name])
                files_read[name] = []
            if name in tables:
                continue
            tail.commit(changes)
            self._tails[name] = tail
            tables[name] = views[name] = state
            try:  # the provisional step's rows over the full steps': this refresh's view only
                views[name], pre_read = _overlay(spec, state, changes)
                read = read + pre_read
            except (FileQuarantined, LakeError, OSError, pa.ArrowInvalid) as exc:
                log.debug("result table %s: the provisional step's files not read (%s); the next refresh "
                          "reads the step of its time", name, exc)
            files_read[name] = read
            self._files_read += len(files_read[name])
        before_advice = previous.committed_advice if previous.committed_advice is not None else previous.advice
        advice = view_advice = before_advice
        try:
            advice_changes = self._advice_tail.poll()
            published = read_publish_state(self.root)
            advice, read_n = _apply_advice(before_advice, advice_changes, published.watermark_ms)
            self._advice_tail.commit(advice_changes)
            self._files_read += read_n
            view_advice = advice
            pre = _provisional(advice_changes)
            if pre or published.newest_ms != published.watermark_ms:
                view_advice, read_n = _apply_advice(advice, TableChanges(tuple(pre)), published.newest_ms)
                self._files_read += read_n
        except (LakeError, OSError, pa.ArrowInvalid) as exc:
            if isinstance(exc, OSError | pa.ArrowInvalid) and is_missing_file(exc):
                log.debug("result table advice changed while read; read again at the next refresh")
            else:
                self._read_errors += 1
                log.warning("cannot read result table advice under %s: %s", self.root, exc)
        return ResultsSnapshot(tables=views, files_read=files_read, advice=view_advice, committed=tables,
                               committed_advice=advice)

    def _folder_files(self, table: str) -> Callable[[str, str], list[Path]]:
        def files(cluster: str, date: str) -> list[Path]:
            day = dt.date.fromisoformat(date)
            root = self.root
            if isinstance(root, Store):
                return [Path(root.path(u.removeprefix(root.url + "/")))
                        for u in object_files(root, table, cluster=cluster, since=day, until=day)]
            return list_files(root, table, cluster=cluster, since=day, until=day)
        return files

    def collect(self) -> Iterator[Any]:
        snapshot = self.reading()
        tables = snapshot.tables
        yield from _rebalance_metrics(tables["rebalances"].events)
        yield from _anomaly_metrics(tables["anomalies"].events)
        yield from _delivery_metrics(tables["anomalies"])
        yield from _status_metrics(tables["status"].series)
        yield from _trend_metrics(tables["lag_trends"].series)
        yield from _advice_metrics(snapshot.advice)
        updated = GaugeMetricFamily(
            "lagscope_results_last_update_timestamp_seconds",
            "Newest modification time of a result table's files (Unix time, s).", labels=["table"])
        for name, state in sorted(tables.items()):
            if state.updated is not None:
                updated.add_metric([name], state.updated)
        yield updated
        yield CounterMetricFamily("lagscope_results_read_errors",
                                  "Result-table reads that failed (the previous reading was kept).",
                                  value=self._read_errors)
        yield CounterMetricFamily("lagscope_results_files_read",
                                  "Result files read (each new file once; a folder read again counts again).",
                                  value=self._files_read)


def _rebalance_metrics(folders: Mapping[tuple[str, str], _EventFolder]) -> Iterator[Any]:
    per_group: dict[tuple[str, str], _RebalanceTotals] = defaultdict(_RebalanceTotals)
    in_progress: dict[tuple[str, str], int] = defaultdict(int)
    for (cluster, _), folder in sorted(folders.items()):
        for group, totals in folder.totals.items():
            per_group[(cluster, group)].merge(totals)
            in_progress[(cluster, group)] += 0
        for event in folder.held.values():
            cg = (cluster, event.group)
            in_progress[cg] += event.is_open
            if event.is_open:
                per_group[cg].count(event.values[0])
            else:
                per_group[cg].add(event)
    total = CounterMetricFamily("lagscope_rebalances",
                                "Rebalance windows found by the analytics, by cause.",
                                labels=["cluster", "group", "cause"])
    for cg, totals in sorted(per_group.items()):
        for cause, n in sorted(totals.causes.items()):
            total.add_metric([*cg, cause], n)
    yield total

    hist = HistogramMetricFamily("lagscope_rebalance_duration_seconds",
                                 "Durations of closed rebalance windows (s).", labels=["cluster", "group"])
    for cg, totals in sorted(per_group.items()):
        if totals.durations:
            buckets = [(_le(b), float(n)) for b, n in zip(DURATION_BUCKETS, totals.buckets, strict=True)]
            buckets.append(("+Inf", float(totals.durations)))
            hist.add_metric(list(cg), buckets, sum_value=totals.duration_sum)
    yield hist

    last = GaugeMetricFamily("lagscope_rebalance_last_duration_seconds",
                             "Duration of the group's last closed rebalance window (s).",
                             labels=["cluster", "group"])
    ratio = GaugeMetricFamily("lagscope_rebalance_over_bound_ratio",
                              "Last closed window's duration / the bound its settings imply "
                              "(> 1: slower than the settings allow).", labels=["cluster", "group"])
    ended = GaugeMetricFamily("lagscope_rebalance_last_end_timestamp_seconds",
                              "End of the group's last closed rebalance window (Unix time, s): how old "
                              "the window the two gauges above describe is.", labels=["cluster", "group"])
    for cg, totals in sorted(per_group.items()):
        if totals.last is None:
            continue
        end_ts, duration, over_bound = totals.last
        if (d := _finite(duration)) is not None:
            last.add_metric(list(cg), d)
        if (r := _finite(over_bound)) is not None:
            ratio.add_metric(list(cg), r)
        ended.add_metric(list(cg), end_ts)
    yield last
    yield ratio
    yield ended

    open_ = GaugeMetricFamily("lagscope_rebalance_in_progress",
                              "1 while the group has an open rebalance window, else 0.",
                              labels=["cluster", "group"])
    for cg, n in sorted(in_progress.items()):
        open_.add_metric(list(cg), 1.0 if n else 0.0)
    yield open_


def _le(bound: float) -> str:
    return repr(float(bound))


def _anomaly_metrics(folders: Mapping[tuple[str, str], _EventFolder]) -> Iterator[Any]:
    labels = ["cluster", "group", "kind", "severity"]
    open_ = GaugeMetricFamily("lagscope_anomalies_open",
                              "Anomalies still open (no end yet); 0 once every one of the series ended.",
                              labels=labels)
    total = CounterMetricFamily("lagscope_anomalies", "Anomalies found by the analytics.", labels=labels)
    n_open: dict[tuple[str, str, str, str], int] = defaultdict(int)
    n_all: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for (cluster, _), folder in folders.items():
        for (what, group, kind, severity), n in folder.totals.items():
            if what == "n":
                n_all[(cluster, group, kind, severity)] += n
        for event in folder.held.values():
            if event.withdrawn:
                continue
            _, kind, severity, _ = event.values
            key = (cluster, event.group, kind, severity)
            n_all[key] += 1
            n_open[key] += event.is_open
    for key in sorted(n_all):
        open_.add_metric(list(key), n_open[key])
        total.add_metric(list(key), n_all[key])
    yield open_
    yield total


def _delivery_metrics(state: _TableState) -> Iterator[Any]:
    """``lagscope_messages_lost_total`` and ``lagscope_messages_reprocessed_total``: the delivery
    accounting (:mod:`lagscope.delivery`) of every anomaly read, summed per group, topic and cause
    (no partition label: a group's partitions can number thousands; the app and the accounting
    itself have them per partition)."""
    counts: dict[tuple[str, ...], int] = defaultdict(int, state.retired)
    for (cluster, _), folder in state.events.items():
        for counted, n in _folder_delivery(cluster, folder).items():
            counts[counted] += n
    labels = ["cluster", "group", "topic", "cause"]
    lost = CounterMetricFamily("lagscope_messages_lost",
                               "Messages never processed (skips, offset resets, proven retention loss), by "
                               "cause: exact where one commit shows it all (an admin reset), else a bound "
                               "(docs/metrics.md).", labels=labels)
    again = CounterMetricFamily("lagscope_messages_reprocessed",
                                "Messages processed twice (rewinds, offset resets back), by cause: exact from "
                                "the commit stream, else at least this many (docs/metrics.md).", labels=labels)
    for (cluster, measure, group, topic, cause), n in sorted(counts.items()):
        (lost if measure == "lost" else again).add_metric([cluster, group, topic, cause], n)
    yield lost
    yield again


def _status_metrics(series: Mapping[tuple[Any, ...], _Latest]) -> Iterator[Any]:
    own = GaugeMetricFamily("lagscope_group_status",
                            "lagscope's group status: 1 on the current status, 0 on the others.",
                            labels=["cluster", "group", "status"])
    burrow = GaugeMetricFamily("lagscope_group_burrow_status",
                               "Burrow-compatible group status: 1 on the current status, 0 on the others.",
                               labels=["cluster", "group", "status"])
    for (cluster, group), latest in sorted(series.items()):
        current, burrow_current = latest.values
        for status in GROUP_STATUSES:
            own.add_metric([cluster, group, status], 1.0 if current == status else 0.0)
        for status in BURROW_STATUSES:
            burrow.add_metric([cluster, group, status], 1.0 if burrow_current == status else 0.0)
    yield own
    yield burrow


def _trend_metrics(series: Mapping[tuple[Any, ...], _Latest]) -> Iterator[Any]:
    labels = ["cluster", "group", "topic", "partition"]
    headroom = GaugeMetricFamily("lagscope_retention_headroom_seconds",
                                 "Seconds until the committed offset would fall below the log start "
                                 "at current rates (absent when it never will).", labels=labels)
    eta = GaugeMetricFamily("lagscope_catchup_eta_seconds",
                            "Seconds until the partition catches up at current rates "
                            "(absent when it is not catching up).", labels=labels)
    for (cluster, group, topic, partition), latest in sorted(series.items()):
        lv = [cluster, group, topic, str(partition)]
        retention_headroom, catchup_eta = latest.values
        if (h := _finite(retention_headroom)) is not None:
            headroom.add_metric(lv, h)
        if (e := _finite(catchup_eta)) is not None:
            eta.add_metric(lv, e)
    yield headroom
    yield eta


def _advice_metrics(advice: Mapping[str, _Advice]) -> Iterator[Any]:
    info = GaugeMetricFamily("lagscope_advice_info",
                             "The analytics' current advice: 1 per group and rule (docs/analytics.md, Advice).",
                             labels=list(ADVICE_LABELS))
    for cluster, held in sorted(advice.items()):
        for row in held.rows:
            info.add_metric([cluster, *row], 1.0)
    yield info


def serve(root: Path | str | Store, *, host: str = "127.0.0.1", port: int = 9309,
          refresh_s: float = 15.0, gone_after_s: float | None = None,
          extra_collectors: Sequence[Any] = ()) -> tuple[Any, Any]:
    """Serve the results metrics on ``http://host:port/metrics`` (a daemon thread), with
    ``extra_collectors`` (e.g. the retention counters of ``lagscope run --component analytics``);
    ``gone_after_s``: :attr:`ResultsCollector.gone_after_s`.

    Returns ``(server, thread)``; ``server.shutdown()`` stops it.
    """
    from lagscope.lake import QUARANTINED  # this process's (tests replace it)

    if not isinstance(root, Store) and not Path(root).is_dir():
        log.warning("results metrics: the results folder %s does not exist (yet): no findings are exported "
                    "until the analytics write it", root)
    registry = CollectorRegistry()
    registry.register(ResultsCollector(root, refresh_s=refresh_s, gone_after_s=gone_after_s))
    registry.register(QUARANTINED)
    for extra in extra_collectors:
        registry.register(extra)
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"results metrics: cannot listen on {host}:{port}: {exc}") from exc
    log.info("results metrics on http://%s:%d/metrics (results %s)", host, server.server_port, root)
    return server, thread

