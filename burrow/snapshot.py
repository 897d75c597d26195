"""The in-memory index behind the Burrow API: one immutable :class:`Snapshot`, rebuilt in the
background when the lake or the results change, replaced whole, read by every request.

Where each value comes from:

- **offsets, lags, owners, topics** (the lake's ``offsets`` table, read with
  :func:`lagscope.collector.reader.read`): a group's partitions are those of its latest sweep
  that have a committed offset (Burrow only knows partitions it saw a commit for);
  ``current_lag`` is the sweep's lag (max(0, end − committed), the last stable offset for
  read_committed groups); ``owner``/``client_id`` are the owner's host and client.id as the
  group coordinator reports them. A topic's offsets are the log end offsets of its partitions at
  the latest sweep that saw them.
- **offset entries** (``start``/``end`` of a partition status, the ``offsets`` of the consumer
  detail): Burrow keeps the last ``intervals`` commits of each partition. From sweeps, an entry
  is a sweep at which the committed offset changed or an owner was assigned (the definition of
  the analytics' Burrow-compatible status, :mod:`lagscope.analytics.np_status`), with the
  sweep's time and lag; the last ``intervals`` of them are kept per partition.
- **statuses** (the results' ``status`` table, read with :func:`lagscope.results.read`): the
  latest group row's and each partition's latest row's ``burrow_status`` (or, with
  ``status_source="lagscope"``, lagscope's own ``status`` in Burrow's words: IDLE is OK, a group
  is never worse than ERR). A group or partition the analytics have not evaluated yet is OK.

Costs: a refresh reads only the sweeps newer than those it has (and the status rows from the
latest evaluation on) and rebuilds only the groups they touch; memory is bounded by the
partitions of the groups seen within ``expire_group_s`` (a group not swept for that long is
dropped, as Burrow's ``expire-group``). At start the last ``history_s`` of the lake is read, in
time windows of about ``read_rows`` rows reduced in Arrow and numpy as they come (per partition
its last ``intervals`` entries and its latest row), so that the start holds one window, not the
hour (15 M rows for 10,000 groups at the default 15 s sweep), and makes Python objects once per
partition. benchmarks/burrow_api.py measures the start, the rebuilds and the requests.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lagscope.errors import LakeError
from lagscope.memory import release_unused
from lagscope.schema import RESULT_TABLES
from lagscope.storage import Store

__all__ = [
    "ClusterInfo",
    "ClusterView",
    "Entry",
    "GroupView",
    "PartitionView",
    "Snapshot",
    "SnapshotBuilder",
    "SnapshotRefresher",
    "burrow_group_status",
    "is_entry",
]

log = logging.getLogger(__name__)

StatusSource = Literal["burrow", "lagscope"]

#: Burrow's group rule: a group is its worst partition, anything worse than ERR counted as ERR
_WORSE_THAN_ERR = {"STOP", "STALL", "REWIND"}

#: a partition's key in both tables (a status table's group row has topic and partition null)
_KEY = ("cluster", "group_id", "topic", "partition")
_OFFSET_COLUMNS = ["sweep_ts", "group_id", "topic", "partition", "committed_offset", "log_end_offset",
                   "member_id", "client_id", "host", "lag", "cluster"]
_STATUS_COLUMNS = ["eval_ts", "group_id", "topic", "partition", "burrow_status", "status", "cluster"]


@dataclass(frozen=True, slots=True)
class Entry:
    """One offset entry (Burrow's ``ConsumerOffset``): the committed offset, when it was seen
    (epoch ms: the sweep's time), and the lag then (messages)."""

    offset: int
    timestamp: int
    lag: int


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition of a group, as the API shows it."""

    topic: str
    partition: int
    owner: str          # the owner's host ("" when unassigned), as the coordinator reports it
    client_id: str      # the owner's client.id ("" when unassigned)
    status: str         # Burrow's vocabulary: OK, WARN, STOP, STALL, REWIND (ERR with lagscope's own)
    current_lag: int    # messages, at the latest sweep
    committed: int      # the committed offset at the latest sweep
    log_end: int | None  # the topic partition's end offset at that sweep (the topic detail's)
    entries: tuple[Entry, ...]  # the last `intervals` entries, oldest first


@dataclass(frozen=True)
class GroupView:
    """One consumer group: its status and its partitions, sorted by (topic, partition)."""

    cluster: str
    group: str
    status: str
    partitions: tuple[PartitionView, ...]
    intervals: int
    sweep_ms: int       # the latest sweep's time (epoch ms)

    @cached_property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({p.topic for p in self.partitions}))


@dataclass(frozen=True)
class ClusterInfo:
    """What the configuration says of a cluster (Burrow's cluster module detail); all optional."""

    servers: tuple[str, ...] = ()
    client_id: str = "lagscope"
    tls: Mapping[str, Any] | None = None
    sasl: Mapping[str, Any] | None = None
    refresh_s: int = 0


@dataclass(frozen=True)
class ClusterView:
    name: str
    groups: Mapping[str, GroupView]
    #: per topic, the end offset of each partition (index = partition; 0 where never seen)
    topics: Mapping[str, tuple[int, ...]]
    #: per topic, the groups that consume it (sorted)
    topic_groups: Mapping[str, tuple[str, ...]]
    info: ClusterInfo = field(default_factory=ClusterInfo)


@dataclass(frozen=True)
class Snapshot:
    """Everything a request needs, immutable; :class:`SnapshotRefresher` replaces it whole."""

    clusters: Mapping[str, ClusterView] = field(default_factory=dict)
    intervals: int = 10
    #: when it was built (epoch s) and the newest sweep and evaluation in it (epoch ms; 0: none)
    built_at: float = 0.0
    newest_sweep_ms: int = 0
    newest_eval_ms: int = 0


def is_entry(prev_committed: int | None, committed: int | None, owned: bool) -> bool:
    """Does this sweep add an offset entry to the partition? When it has a committed offset and
    that offset changed since the previous sweep (or there was none), or an owner is assigned
    (an assigned consumer commits periodically, and Burrow stores every commit). The
    vectorised form is in :meth:`SnapshotBuilder._reduce_offsets`."""
    return committed is not None and (prev_committed is None or committed != prev_committed or owned)


def burrow_group_status(status: str | None) -> str:
    """A group status in Burrow's vocabulary: IDLE (lagscope's) is OK, anything worse than ERR
    is ERR, none yet is OK."""
    if status is None or status == "IDLE":
        return "OK"
    return "ERR" if status in _WORSE_THAN_ERR else status


def _partition_status(status: str | None) -> str:
    return "OK" if status is None or status == "IDLE" else status


@dataclass
class _Part:
    """Mutable per-partition state of the builder (never shared with a request)."""

    ring: deque[Entry]
    sweep_ms: int = 0
    committed: int | None = None  # at the latest sweep (the next sweep's is_entry compares with it)
    lag: int = 0
    log_end: int | None = None
    owner: str = ""
    client_id: str = ""


def _ms(col: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    return np.asarray(pc.cast(col, pa.timestamp("ms", tz="UTC")).cast(pa.int64()).fill_null(0), dtype=np.int64)


def _dt(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, Any]:
    out: np.ndarray[Any, Any] = col.to_numpy() if isinstance(col, pa.ChunkedArray) else col.to_numpy(
        zero_copy_only=False)
    return out


def _codes(col: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """Integer codes of a column's values (equal values, equal codes; in order of appearance)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(arr.dictionary_encode().indices.fill_null(-1), dtype=np.int64)


def _same_as_previous(rows: pa.Table, columns: Iterable[str]) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per row: are its ``columns`` equal to the previous row's (null equal to null)? On a table
    sorted by those columns, False marks the first row of each key."""
    n = rows.num_rows
    same = np.zeros(n, bool)
    if n < 2:
        return same
    eq = np.ones(n - 1, bool)
    for name in columns:
        col = rows.column(name)
        cur, prev = col.slice(1), col.slice(0, n - 1)
        both_null = pc.and_(pc.is_null(cur), pc.is_null(prev))
        eq &= _np(pc.or_(pc.fill_null(pc.equal(cur, prev), False), both_null))
    same[1:] = eq
    return same


def _root(root: Path | str | Store) -> Path | Store:
    """A local folder as a Path; an object store's root as its :class:`~lagscope.storage.Store`."""
    if isinstance(root, Store):
        return root if root.is_object_store else Path(root.base)
    return Path(root)


class SnapshotBuilder:
    """Builds :class:`Snapshot` values from a lake and a results folder, incrementally.

    Not thread-safe: one thread calls :meth:`refresh` (the refresher's); requests only ever see
    the snapshots it returns. ``clock`` (epoch seconds) is injectable for tests.
    """

    def __init__(self, lake: Path | str | Store, results: Path | str | Store, *, intervals: int = 10,
                 history_s: float = 3600.0, expire_group_s: float = 7 * 86400.0,
                 status_source: StatusSource = "burrow",
                 clusters: Mapping[str, ClusterInfo] | None = None,
                 clock: Callable[[], float] = time.time, read_rows: int = 500_000) -> None:
        if intervals < 1:
            raise ValueError(f"intervals must be at least 1, not {intervals}")
        if read_rows < 1:
            raise ValueError(f"read_rows must be at least 1, not {read_rows}")
        self.read_rows = read_rows
        #: a local folder, or a :class:`~lagscope.storage.Store` (an object store's lake or results)
        self.lake, self.results = _root(lake), _root(results)
        self.intervals = intervals
        self.history_s = history_s
        self.expire_group_s = expire_group_s
        self.status_source: StatusSource = status_source
        self.infos = dict(clusters or {})
        self.clock = clock
        self._parts: dict[tuple[str, str, str, int], _Part] = {}
        self._group_parts: dict[tuple[str, str], set[tuple[str, int]]] = {}
        self._group_sweep: dict[tuple[str, str], int] = {}
        self._group_status: dict[tuple[str, str], tuple[int, str | None]] = {}
        self._part_status: dict[tuple[str, str, str, int], tuple[int, str | None]] = {}
        self._cluster_sweep: dict[str, int] = {}
        self._cluster_eval: dict[str, int] = {}
        self._views: dict[tuple[str, str], GroupView] = {}
        self._lake_stamp: tuple[Any, ...] | None = None
        self._status_stamp: tuple[Any, ...] | None = None
        self.snapshot = Snapshot(intervals=intervals)

    # -- change detection -----------------------------------------------------------------------

    def _stamp(self, root: Path | Store, table: str, since: dt.date) -> tuple[Any, ...]:
        """(path, mtime, size) of the table's live files in date folders from ``since`` on (the
        lake's, or the results' published ones): a refresh reads only when this changed. On an
        object store the files' URLs (a file there is never rewritten under its name)."""
        from lagscope import lake, results

        if isinstance(root, Store):
            lister = results.object_files if table in RESULT_TABLES else lake.object_files
            return tuple(sorted(lister(root, table, since=since)))
        listing = results.list_files if table in RESULT_TABLES else lake.list_files
        out: list[tuple[str, int, int]] = []
        for path in listing(root, table, since=since):
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            out.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(sorted(out))

    # -- reading -----------------------------------------------------------------------------------

    def _since_ms(self, newest: Mapping[str, int], now: float, slack_ms: int) -> int:
        """Where a read starts: ``history_s`` back at first, then the least advanced cluster's
        newest row less ``slack_ms`` (rows already seen are skipped)."""
        start = int((now - self.history_s) * 1000)
        if not newest:
            return start
        return max(start, min(newest.values()) - slack_ms)

    def _windows(self, read: Callable[[int, int | None], pa.Table], since_ms: int,
                 now_ms: int) -> Iterator[pa.Table]:
        """The rows from ``since_ms`` on, read one time window after another so that memory holds
        one window, not the whole history (an hour of sweeps of 10,000 groups is 15 M rows). A
        window spans a minute at first, half as long after one of more than ``read_rows`` rows,
        twice as long after one of less than a quarter of that; the last one is open-ended (rows
        stamped after ``now`` by a clock ahead are read too). Times are epoch ms, ends inclusive."""
        start, span = since_ms, 60_000
        while start + span <= now_ms:
            rows = read(start, start + span - 1)
            yield rows
            start += span
            if rows.num_rows > self.read_rows:
                span = max(span // 2, 1000)
            elif rows.num_rows < self.read_rows // 4:
                span *= 2
        yield read(start, None)

    def _read_offsets(self, since_ms: int, until_ms: int | None) -> pa.Table:
        from lagscope.collector.reader import read

        return read(self.lake, "offsets", start=_dt(since_ms), end=None if until_ms is None else _dt(until_ms),
                    columns=_OFFSET_COLUMNS)

    def _read_status(self, since_ms: int, until_ms: int | None) -> pa.Table:
        from lagscope.results import read

        # the results' range is [since, until): this window's end is inclusive
        return read(self.results, "status", since=_dt(since_ms),
                    until=None if until_ms is None else _dt(until_ms + 1), columns=_STATUS_COLUMNS)

    # -- ingesting ---------------------------------------------------------------------------------
    #
    # Both tables are reduced window by window, in Arrow and numpy: the rows that can still matter
    # (per partition its last `intervals` entries and its latest row; per status key its latest
    # row) are carried into the next window, and only what is left at the end becomes Python
    # objects, once per partition or status key, whatever the number of rows read.

    def _unseen(self, rows: pa.Table, seen: pa.Table | None) -> pa.Table:
        """``rows`` without the sweeps that a group already had before this refresh (a read starts
        a little before the newest sweep; ``seen``: cluster, group_id, its latest sweep ms)."""
        if seen is None or rows.num_rows == 0:
            return rows
        joined = rows.join(seen, ["cluster", "group_id"], join_type="left outer")
        newer = pc.or_(pc.is_null(joined.column("_seen")),
                       pc.greater(joined.column("sweep_ts").cast(pa.int64()), joined.column("_seen")))
        return joined.filter(newer).drop_columns(["_seen"])

    def _reduce_offsets(self, rows: pa.Table) -> pa.Table:
        """Offset rows (the carried ones with ``_entry`` set, new ones with it null) → grouped by
        partition key in time order, ``_entry`` (:func:`is_entry`) set on every row, and only each
        key's last ``intervals`` entries and its latest row kept. A new row's predecessor is the
        row before it in its key, or for a key's first row the offset of the key's latest sweep
        ingested by an earlier refresh. The order is computed in numpy on integer codes of the
        names (keys grouped, in no particular order), and only the rows kept are copied."""
        n = rows.num_rows
        ts = _ms(rows.column("sweep_ts"))
        part = _np(rows.column("partition").fill_null(-1)).astype(np.int64)
        cluster, group, topic = (_codes(rows.column(k)) for k in ("cluster", "group_id", "topic"))
        order = np.lexsort((ts, part, topic, group, cluster))
        first = np.zeros(n, bool)
        first[:1] = True
        for code in (cluster, group, topic, part):
            c = code[order]
            first[1:] |= c[1:] != c[:-1]
        last = np.ones(n, bool)
        last[:-1] = first[1:]
        committed = rows.column("committed_offset")
        c_ok = _np(committed.is_valid())[order]
        c_val = _np(committed.fill_null(0))[order]
        owned = _np(rows.column("member_id").is_valid())[order]
        known = _np(rows.column("_entry").is_valid())[order]
        entry = _np(rows.column("_entry").fill_null(False))[order]
        prev_ok = np.zeros(n, bool)
        prev_val = np.zeros(n, np.int64)
        prev_ok[1:], prev_val[1:] = c_ok[:-1], c_val[:-1]
        prev_ok[first] = False
        lookup = np.flatnonzero(first & ~known)
        if len(lookup) and self._parts:
            keys = rows.select(list(_KEY)).take(pa.array(order[lookup]))
            for i, key in zip(lookup, zip(*(keys.column(k).to_pylist() for k in _KEY), strict=True), strict=True):
                state = self._parts.get(key)
                if state is not None and state.committed is not None:
                    prev_ok[i], prev_val[i] = True, state.committed
        # is_entry, vectorised, on the rows not yet evaluated
        entry = np.where(known, entry, c_ok & (~prev_ok | (c_val != prev_val) | owned))
        keep = last.copy()
        e_idx = np.flatnonzero(entry)
        if len(e_idx):
            key_of = (np.cumsum(first) - 1)[e_idx]
            # entries of the same key after each entry: its key's end in the sorted list, less its place
            after = np.searchsorted(key_of, key_of, side="right") - 1 - np.arange(len(e_idx))
            keep[e_idx[after < self.intervals]] = True
        kept = np.flatnonzero(keep)
        out = rows.take(pa.array(order[kept]))
        return out.set_column(out.schema.get_field_index("_entry"), "_entry", pa.array(entry[kept]))

    def _ingest_offsets(self, windows: Iterable[pa.Table], dirty: set[tuple[str, str]]) -> None:
        seen = None
        if self._group_sweep:
            cgs = list(self._group_sweep)
            seen = pa.table({"cluster": [c for c, _ in cgs], "group_id": [g for _, g in cgs],
                             "_seen": pa.array(list(self._group_sweep.values()), pa.int64())})
        carry: pa.Table | None = None
        for window in windows:
            rows = self._unseen(window.select(_OFFSET_COLUMNS), seen)
            if rows.num_rows == 0:
                continue
            rows = rows.append_column("_entry", pa.nulls(rows.num_rows, pa.bool_()))
            carry = self._reduce_offsets(rows if carry is None else pa.concat_tables([carry, rows]))
        if carry is not None:
            self._apply_offsets(carry, dirty)

    def _apply_offsets(self, rows: pa.Table, dirty: set[tuple[str, str]]) -> None:
        """The reduced rows (:meth:`_reduce_offsets`) into the per-partition state: each key's
        entries into its ring, its latest row's values."""
        first = ~_same_as_previous(rows, _KEY)
        starts = np.flatnonzero(first).tolist()
        ends = [*starts[1:], rows.num_rows]
        cluster, group, topic, partition = (rows.column(k).to_pylist() for k in _KEY)
        t = _ms(rows.column("sweep_ts")).tolist()
        committed = rows.column("committed_offset").to_pylist()
        lag = rows.column("lag").fill_null(0).to_pylist()
        end = rows.column("log_end_offset").to_pylist()
        owned = _np(rows.column("member_id").is_valid()).tolist()
        host = rows.column("host").to_pylist()
        client = rows.column("client_id").to_pylist()
        entry = _np(rows.column("_entry")).tolist()
        for lo, hi in zip(starts, ends, strict=True):
            key = (cluster[lo], group[lo], topic[lo], partition[lo])
            state = self._parts.get(key)
            if state is None:
                state = self._parts[key] = _Part(ring=deque(maxlen=self.intervals))
            state.ring.extend(Entry(committed[i], t[i], lag[i]) for i in range(lo, hi) if entry[i])
            j = hi - 1
            state.sweep_ms = t[j]
            state.committed = committed[j]
            state.lag = lag[j]
            state.log_end = end[j]
            state.owner = (host[j] or "") if owned[j] else ""
            state.client_id = (client[j] or "") if owned[j] else ""
            cg = (key[0], key[1])
            self._group_parts.setdefault(cg, set()).add((key[2], key[3]))
            if state.sweep_ms > self._group_sweep.get(cg, -1):
                self._group_sweep[cg] = state.sweep_ms
            if state.sweep_ms > self._cluster_sweep.get(key[0], -1):
                self._cluster_sweep[key[0]] = state.sweep_ms
            dirty.add(cg)

    def _ingest_status(self, windows: Iterable[pa.Table], dirty: set[tuple[str, str]]) -> None:
        """Per status key (a group's row: topic and partition null) its latest row, window by
        window; an evaluation older than the one held (a re-run written later) changes nothing."""
        column = "burrow_status" if self.status_source == "burrow" else "status"
        carry: pa.Table | None = None
        for window in windows:
            if window.num_rows == 0:
                continue
            rows = window.select([*_KEY, "eval_ts", column])
            rows = rows if carry is None else pa.concat_tables([carry, rows])
            # a stable sort: of rows at the same time the one read last wins, as it always did
            rows = rows.take(pc.sort_indices(rows, [(k, "ascending") for k in (*_KEY, "eval_ts")]))
            last = np.ones(rows.num_rows, bool)
            last[:-1] = ~_same_as_previous(rows, _KEY)[1:]
            carry = rows.take(pa.array(np.flatnonzero(last)))
        if carry is None:
            return
        t = _ms(carry.column("eval_ts")).tolist()
        cluster, group, topic, partition = (carry.column(k).to_pylist() for k in _KEY)
        status = carry.column(column).to_pylist()
        for i, ts in enumerate(t):
            c, g = cluster[i], group[i]
            if topic[i] is None or partition[i] is None:
                cur = self._group_status.get((c, g))
                if cur is None or ts >= cur[0]:
                    self._group_status[(c, g)] = (ts, status[i])
                    dirty.add((c, g))
            else:
                key = (c, g, topic[i], partition[i])
                cur_p = self._part_status.get(key)
                if cur_p is None or ts >= cur_p[0]:
                    self._part_status[key] = (ts, status[i])
                    dirty.add((c, g))
            if ts > self._cluster_eval.get(c, -1):
                self._cluster_eval[c] = ts

    # -- building ----------------------------------------------------------------------------------

    def _group_view(self, cg: tuple[str, str]) -> GroupView | None:
        sweep = self._group_sweep.get(cg)
        if sweep is None:
            return None
        parts: list[PartitionView] = []
        for topic, partition in sorted(self._group_parts.get(cg, ())):
            key = (cg[0], cg[1], topic, partition)
            state = self._parts[key]
            if state.sweep_ms != sweep or state.committed is None:
                continue  # not in the group's latest sweep, or never committed
            st = self._part_status.get(key)
            parts.append(PartitionView(
                topic=topic, partition=partition, owner=state.owner, client_id=state.client_id,
                status=_partition_status(st[1] if st else None), current_lag=state.lag,
                committed=state.committed, log_end=state.log_end, entries=tuple(state.ring)))
        gst = self._group_status.get(cg)
        return GroupView(cluster=cg[0], group=cg[1], status=burrow_group_status(gst[1] if gst else None),
                         partitions=tuple(parts), intervals=self.intervals, sweep_ms=sweep)

    def _expire(self, now: float) -> None:
        horizon = int((now - self.expire_group_s) * 1000)
        for cg in [cg for cg, ms in self._group_sweep.items() if ms < horizon]:
            del self._group_sweep[cg]
            self._views.pop(cg, None)
            self._group_status.pop(cg, None)
            for topic, partition in self._group_parts.pop(cg, ()):
                key = (cg[0], cg[1], topic, partition)
                self._parts.pop(key, None)
                self._part_status.pop(key, None)

    def _cluster_view(self, name: str, groups: dict[str, GroupView],
                      ends: Mapping[str, Mapping[int, tuple[int, int]]]) -> ClusterView:
        consumers: dict[str, set[str]] = {topic: set() for topic in ends}
        for g in groups.values():
            for p in g.partitions:
                consumers.setdefault(p.topic, set()).add(g.group)
        topics: dict[str, tuple[int, ...]] = {}
        for topic in sorted(consumers):
            by_part = ends.get(topic, {})
            size = max(by_part, default=-1) + 1
            topics[topic] = tuple(by_part[i][1] if i in by_part else 0 for i in range(size))
        return ClusterView(name=name, groups=dict(sorted(groups.items())), topics=topics,
                           topic_groups={t: tuple(sorted(gs)) for t, gs in sorted(consumers.items())},
                           info=self.infos.get(name, ClusterInfo()))

    def _topic_ends(self) -> dict[str, dict[str, dict[int, tuple[int, int]]]]:
        """Per cluster, topic and partition: (sweep ms, end offset) of the latest sweep that saw it
        (any group's, committed or not)."""
        out: dict[str, dict[str, dict[int, tuple[int, int]]]] = {}
        for (cluster, _group, topic, partition), state in self._parts.items():
            if state.log_end is None:
                continue
            by_part = out.setdefault(cluster, {}).setdefault(topic, {})
            cur = by_part.get(partition)
            if cur is None or state.sweep_ms > cur[0]:
                by_part[partition] = (state.sweep_ms, state.log_end)
        return out

    def refresh(self) -> Snapshot:
        """Read what changed and return the new snapshot (the previous one when nothing did)."""
        now = self.clock()
        dirty: set[tuple[str, str]] = set()
        since_sweep = self._since_ms(self._cluster_sweep, now, 60_000)
        stamp = self._stamp(self.lake, "offsets", dt.datetime.fromtimestamp(since_sweep / 1000, dt.UTC).date())
        if stamp != self._lake_stamp:
            self._ingest_offsets(self._windows(self._read_offsets, since_sweep, int(now * 1000)), dirty)
            self._lake_stamp = stamp
        # status rows from the least advanced cluster's latest evaluation on
        since_eval = self._since_ms(self._cluster_eval, now, 0)
        stamp = self._stamp(self.results, "status", dt.datetime.fromtimestamp(since_eval / 1000, dt.UTC).date())
        if stamp != self._status_stamp:
            self._ingest_status(self._windows(self._read_status, since_eval, int(now * 1000)), dirty)
            self._status_stamp = stamp
        before = len(self._group_sweep)
        self._expire(now)
        if not dirty and len(self._group_sweep) == before and self.snapshot.built_at:
            return self.snapshot
        for cg in dirty:
            view = self._group_view(cg)
            if view is not None:
                self._views[cg] = view
        by_cluster: dict[str, dict[str, GroupView]] = {name: {} for name in self.infos}
        for (c, g), view in self._views.items():
            by_cluster.setdefault(c, {})[g] = view
        ends = self._topic_ends()
        clusters = {name: self._cluster_view(name, groups, ends.get(name, {}))
                    for name, groups in sorted(by_cluster.items())}
        self.snapshot = Snapshot(clusters=clusters, intervals=self.intervals, built_at=now,
                                 newest_sweep_ms=max(self._cluster_sweep.values(), default=0),
                                 newest_eval_ms=max(self._cluster_eval.values(), default=0))
        release_unused()  # the windows' buffers back to the system
        return self.snapshot


class SnapshotRefresher:
    """Runs :meth:`SnapshotBuilder.refresh` every ``refresh_s`` seconds in a thread and holds
    the current snapshot (replaced whole; reading it is one attribute load). A failing refresh
    is logged and the previous snapshot kept: a request never sees a half-built one."""

    def __init__(self, builder: SnapshotBuilder, refresh_s: float = 5.0) -> None:
        if not refresh_s > 0 or math.isinf(refresh_s):
            raise ValueError(f"refresh_s must be positive, not {refresh_s}")
        self.builder = builder
        self.refresh_s = refresh_s
        self.snapshot = builder.snapshot
        self.failures = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh_now(self) -> Snapshot:
        try:
            self.snapshot = self.builder.refresh()
        except (LakeError, OSError, pa.ArrowException) as exc:
            self.failures += 1
            log.warning("burrow api: cannot refresh from %s and %s: %s (serving the previous snapshot)",
                        self.builder.lake, self.builder.results, exc)
        return self.snapshot

    def _loop(self) -> None:
        while not self._stopping.wait(self.refresh_s):
            try:
                self.refresh_now()
            except Exception:  # a failing periodic job never kills the loop
                self.failures += 1
                log.exception("burrow api: refresh failed")

    def start(self) -> None:
        self.refresh_now()
        self._thread = threading.Thread(target=self._loop, name="lagscope-burrow-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def cluster_infos(clusters: Iterable[Any], interval_s: float) -> dict[str, ClusterInfo]:
    """:class:`ClusterInfo` of each configured cluster (:class:`lagscope.config.ClusterConfig`)."""
    out: dict[str, ClusterInfo] = {}
    for c in clusters:
        sec = c.security
        tls = None
        if sec.protocol.endswith("SSL"):
            tls = {"name": c.name, "noverify": not sec.check_hostname,
                   "certfile": str(sec.cert_file or ""), "keyfile": str(sec.key_file or ""),
                   "cafile": str(sec.ca_file or "")}
        sasl = None
        if sec.protocol.startswith("SASL_"):
            sasl = {"name": c.name, "handshake-first": True, "username": sec.username or ""}
        out[c.name] = ClusterInfo(servers=tuple(c.bootstrap_servers), tls=tls, sasl=sasl,
                                  refresh_s=round(interval_s))
    return out
