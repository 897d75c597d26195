"""The result tables, read in one place: which files are live, their rows, their current rows.

The analytics write ``<results>/<table>/cluster=<c>/date=<YYYY-MM-DD>/<name>.parquet`` and
publish a step with one rename per file (per table, per partition), so a reader that listed the
folders itself could see half a step, or a batch's new files beside those it replaces. Every
reader of the results (the app, the results exporter, the alerts, the Grafana annotations, the
Burrow API, the demo) lists them here, which honours the analytics' publish markers:

``inc-<from_ms>-<to_ms>-NNNNN.parquet``
    an incremental step over ``[from, to)``. Visible once the checkpoint's watermark
    (``_state/checkpoint.json``, moved after every file of the step is in place) has reached
    ``to``: before that the step is being published, or crashed and will be redone.
``pre-<from_ms>-<to_ms>-NNNNN.parquet``
    a provisional step over ``[from, to)``: the rows of the sweeps since the checkpoint's
    watermark, published between full steps so that a finding shows within seconds rather than
    after its minute ends (it writes no state and does not move the checkpoint). Visible while
    ``from`` is the checkpoint's watermark and ``_state/provisional.json`` (``{"from_ms",
    "to_ms"}``, replaced atomically after every file of the step is in place) names it: a newer
    provisional step replaces it at once, in every folder together, and the full step that moves
    the watermark past ``from`` replaces it just as the step's own files appear (no moment shows
    both). Older ``pre-`` files are deleted after each publish; visibility never depends on that.
``batch-<since>-<until>-<run>-NNNNN.parquet``
    a batch over whole days. ``_state/publishing.json`` (``{"seq", "tag", "phase"}``, replaced
    atomically) says where its publishing is: ``moving`` (its files are hidden), ``replacing``
    (all are in; in each partition holding one, the files it replaces are hidden while they are
    deleted), ``done``. ``seq`` grows with every change, so a listing that a change overlapped is
    taken again.
any other name
    (a file written by :func:`lagscope.lake.write_rows`, or by another tool): visible.

    >>> list_files(results, "lag_trends", cluster="prod", since=day, until=day)  # doctest: +SKIP
    >>> read(results, "status", group="orders", since=start, until=end)         # doctest: +SKIP
    >>> current_events(results, "anomalies")                                     # doctest: +SKIP
    >>> current_advice(results, group="orders")                                  # doctest: +SKIP

Rebalance windows and anomalies are append-only: an open one is written again by every step
until it closes (and a closed window again by the step that raises its processing gap), so of
the rows of one identity (:data:`EVENT_IDENTITY`) only the current one counts
(:func:`current_rows`); a provisional step's rows are stamped with its ``to``, so they win
over the full steps' before it, and the next full step's (a later ``as_of_ts``) win over them. An
anomaly whose current row is ``withdrawn`` (a later step found it is no finding) is absent.
:class:`TableTail` tells a long-lived reader (the results exporter) which files are new since it
last looked, so that it reads each file once; it reports a folder's current provisional files
apart (:attr:`FolderChange.provisional`), to be read again at every poll, never as read.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from lagscope.errors import LakeError
from lagscope.lake import date_folders, object_date_folders, object_store, read_live, read_objects, visible_names
from lagscope.retention import checkpoint_file
from lagscope.schema import RESULT_TABLES
from lagscope.storage import Store

if TYPE_CHECKING:
    import pyarrow.dataset as ds

_K = TypeVar("_K")
_V = TypeVar("_V")

__all__ = [
    "EVENT_IDENTITY",
    "TIME_COLUMN",
    "FolderChange",
    "PublishState",
    "TableChanges",
    "TableTail",
    "batch_tag",
    "current_advice",
    "current_events",
    "current_rows",
    "default_gone_after_s",
    "event_rank",
    "inc_tag",
    "is_provisional",
    "latest_rows",
    "list_files",
    "live_series",
    "newest_step_files",
    "object_files",
    "pre_tag",
    "read",
    "read_publish_state",
    "state_dir",
    "visible",
    "write_provisional_marker",
    "write_publish_state",
]

#: the column each result table's date partition comes from, and its rows' time
TIME_COLUMN = {"lag_trends": "window_start", "status": "eval_ts", "rebalances": "start_ts",
               "anomalies": "start_ts", "advice": "as_of_ts"}

#: the columns that name one rebalance window or anomaly across the steps that write it
EVENT_IDENTITY: dict[str, tuple[str, ...]] = {"rebalances": ("cluster", "group_id", "start_ts"),
                                              "anomalies": ("cluster", "key")}

_INC = re.compile(r"^inc-(\d+)-(\d+)-")
_PRE = re.compile(r"^pre-(\d+)-(\d+)-")
#: an incremental or a provisional step's files (both name their range)
_STEP = re.compile(r"^(?:inc|pre)-(\d+)-(\d+)-")
_LIST_ATTEMPTS = 5
_PROVISIONAL = "_state/provisional.json"


# --------------------------------------------------------------------------------------------
# the publish markers
# --------------------------------------------------------------------------------------------

def state_dir(results: Path | str) -> Path:
    """``<results>/_state``: the analytics' checkpoint, carried state and publish marker."""
    return Path(results) / "_state"


def inc_tag(start: dt.datetime, until: dt.datetime) -> str:
    """The name prefix of an incremental step's files over ``[start, until)``."""
    return f"inc-{int(start.timestamp() * 1000)}-{int(until.timestamp() * 1000)}"


def pre_tag(start: dt.datetime, until: dt.datetime) -> str:
    """The name prefix of a provisional step's files over ``[start, until)``."""
    return f"pre-{int(start.timestamp() * 1000)}-{int(until.timestamp() * 1000)}"


def batch_tag(since: dt.date, until: dt.date) -> str:
    """The name prefix of one batch run's files (a fresh one per run)."""
    return f"batch-{since.isoformat()}-{until.isoformat()}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class PublishState:
    """What the markers under ``_state`` say (see the module docstring)."""

    #: the checkpoint's watermark (epoch ms); None before the first incremental step
    watermark_ms: int | None = None
    #: the batch publishing marker: its sequence number, tag and phase (moving|replacing|done)
    seq: int = 0
    tag: str | None = None
    phase: str = "done"
    #: the provisional marker: the range ``(from_ms, to_ms)`` of the provisional step to show
    provisional: tuple[int, int] | None = None

    @property
    def newest_ms(self) -> int | None:
        """The end of the newest step visible: the provisional one's (when it starts at the
        watermark), else the watermark."""
        if self.provisional is not None and self.provisional[0] == self.watermark_ms:
            return self.provisional[1]
        return self.watermark_ms


def _read_marker(read: Callable[[], str | bytes], where: str) -> dict[str, Any] | None:
    """A JSON marker (``read()`` its text, ``where`` its path or URL); None when it does not exist."""
    try:
        data = json.loads(read())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LakeError(f"unreadable results marker {where}: {exc}") from exc
    if not isinstance(data, dict):
        raise LakeError(f"unreadable results marker {where}: not a JSON object")
    return data


def read_publish_state(results: Path | str | Store) -> PublishState:
    """The checkpoint's watermark and the batch marker (raises LakeError when unreadable); on an
    object store, ``_state/checkpoint.json`` and ``_state/publishing.json`` there."""
    store = object_store(results)
    if store is not None:
        cp = _read_marker(lambda: store.get("_state/checkpoint.json"), store.url_of("_state/checkpoint.json"))
        marker = _read_marker(lambda: store.get("_state/publishing.json"),
                              store.url_of("_state/publishing.json")) or {}
        pre = _read_marker(lambda: store.get(_PROVISIONAL), store.url_of(_PROVISIONAL))
        return _publish_state(cp, marker, pre, store.url_of("_state/checkpoint.json"))
    results = _local(results)
    root = state_dir(results)
    cp_file, marker_file, pre_file = checkpoint_file(results), root / "publishing.json", root / "provisional.json"
    cp = _read_marker(cp_file.read_text, str(cp_file))
    marker = _read_marker(marker_file.read_text, str(marker_file)) or {}
    pre = _read_marker(pre_file.read_text, str(pre_file))
    return _publish_state(cp, marker, pre, str(cp_file))


def _publish_state(cp: dict[str, Any] | None, marker: dict[str, Any], pre: dict[str, Any] | None,
                   where: str) -> PublishState:
    watermark = None
    if cp is not None:
        try:
            watermark = int(dt.datetime.fromisoformat(cp["watermark"]).timestamp() * 1000)
        except (KeyError, TypeError, ValueError) as exc:
            raise LakeError(f"unreadable watermark in {where}: {exc!r}") from exc
    provisional = None
    if pre is not None:
        try:
            provisional = (int(pre["from_ms"]), int(pre["to_ms"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise LakeError(f"unreadable provisional marker beside {where}: {exc!r}") from exc
    return PublishState(watermark, int(marker.get("seq", 0)), marker.get("tag"), str(marker.get("phase", "done")),
                        provisional)


def _local(results: Path | str | Store) -> Path | str:
    return Path(results.base) if isinstance(results, Store) else results


def write_publish_state(results: Path | str | Store, tag: str, phase: str) -> None:
    """Replace the batch marker atomically (the analytics' publisher, :mod:`lagscope.analytics.io`;
    on an object store one whole object put over the old one)."""
    if phase not in ("moving", "replacing", "done"):
        raise ValueError(f"unknown publish phase {phase!r}")
    store = object_store(results)
    if store is not None:
        seq = read_publish_state(store).seq + 1
        store.put("_state/publishing.json", json.dumps({"seq": seq, "tag": tag, "phase": phase}).encode())
        return
    results = _local(results)
    root = state_dir(results)
    root.mkdir(parents=True, exist_ok=True)
    seq = read_publish_state(results).seq + 1
    tmp = root / f".publishing-{uuid.uuid4().hex[:8]}.json"
    with tmp.open("w") as fh:
        json.dump({"seq": seq, "tag": tag, "phase": phase}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, root / "publishing.json")


def write_provisional_marker(results: Path | str | Store, start: dt.datetime, until: dt.datetime) -> None:
    """Name the provisional step over ``[start, until)`` as the one to show (the analytics'
    publisher, once every file of the step is in place; replaced atomically: on an object store
    one whole object put over the old one)."""
    data = json.dumps({"from_ms": int(start.timestamp() * 1000), "to_ms": int(until.timestamp() * 1000)})
    store = object_store(results)
    if store is not None:
        store.put(_PROVISIONAL, data.encode())
        return
    root = state_dir(_local(results))
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".provisional-{uuid.uuid4().hex[:8]}.json"
    with tmp.open("w") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, root / "provisional.json")


def is_provisional(name: str) -> bool:
    """Whether a result file is a provisional step's (``pre-…``)."""
    return name.startswith("pre-")


def visible(names: Iterable[str], state: PublishState) -> list[str]:
    """Of one partition folder's file names, those a reader may read (module docstring)."""
    names = list(names)
    if state.tag is not None and state.phase != "done":
        prefix = f"{state.tag}-"
        mine = [n for n in names if n.startswith(prefix)]
        if state.phase == "moving":
            names = [n for n in names if not n.startswith(prefix)]
        elif mine:  # replacing: the files the batch replaces are being deleted
            names = mine
    out = []
    for n in names:
        if (m := _PRE.match(n)) is not None:
            rng = (int(m.group(1)), int(m.group(2)))
            if state.watermark_ms is not None and rng[0] == state.watermark_ms and rng == state.provisional:
                out.append(n)
            continue
        m = _INC.match(n)
        if m is None or (state.watermark_ms is not None and int(m.group(2)) <= state.watermark_ms):
            out.append(n)
    return out


# --------------------------------------------------------------------------------------------
# listing and reading
# --------------------------------------------------------------------------------------------

def _check_table(table: str) -> None:
    if table not in RESULT_TABLES:
        raise LakeError(f"unknown result table {table!r}; known: {', '.join(sorted(RESULT_TABLES))}")


def _listing(results: Path | str, table: str, cluster: str | Iterable[str] | None, since: dt.date | None,
             until: dt.date | None) -> tuple[PublishState, dict[Path, list[str]]]:
    """The visible names per folder, under one publish state: a listing that a change of the
    markers (a batch, a step's checkpoint, a provisional step) overlapped is taken again."""
    for _ in range(_LIST_ATTEMPTS):
        state = read_publish_state(results)
        folders = {d: visible(visible_names(d), state)
                   for d in date_folders(results, table, cluster=cluster, since=since, until=until)}
        if read_publish_state(results) == state:
            return state, folders
    raise LakeError(f"cannot list result table {table}: the analytics kept publishing meanwhile")


def _object_listing(store: Store, table: str, cluster: str | Iterable[str] | None, since: dt.date | None,
                    until: dt.date | None) -> list[str]:
    """:func:`_listing` on an object store: the visible files' paths relative to the store's root
    (each object there is put whole: the publish protocol alone decides what is visible)."""
    for _ in range(_LIST_ATTEMPTS):
        state = read_publish_state(store)
        files = [f"{d}/{n}" for d in object_date_folders(store, table, cluster, since, until)
                 for n in visible([n for n in store.names(d) if n.endswith(".parquet")
                                   and not n.startswith((".", "_"))], state)]
        if read_publish_state(store) == state:
            return files
    raise LakeError(f"cannot list result table {table}: the analytics kept publishing meanwhile")


def object_files(results: str | Store, table: str, *, cluster: str | Iterable[str] | None = None,
                 since: dt.date | None = None, until: dt.date | None = None) -> list[str]:
    """:func:`list_files` of results on an object store: the URLs of the live files."""
    _check_table(table)
    store = object_store(results)
    if store is None:
        raise LakeError(f"not an object store: {results!r}")
    return [store.url_of(f) for f in _object_listing(store, table, cluster, since, until)]


def list_files(results: Path | str, table: str, *, cluster: str | Iterable[str] | None = None,
               since: dt.date | None = None, until: dt.date | None = None) -> list[Path]:
    """The live files of result ``table`` (module docstring), of the given clusters and date
    partitions (``since <= date <= until``, each optional): the file list to give any engine."""
    _check_table(table)
    _, folders = _listing(results, table, cluster, since, until)
    return [d / n for d, names in folders.items() for n in names]


def _utc(when: dt.datetime) -> dt.datetime:
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def read(results: Path | str | Store, table: str, *, cluster: str | Iterable[str] | None = None,
         group: str | None = None, since: dt.datetime | None = None, until: dt.datetime | None = None,
         columns: list[str] | None = None, filter: ds.Expression | None = None,
         provisional: bool = True) -> pa.Table:
    """Rows of result ``table`` from its live files, with ``cluster`` and ``date``: of the given
    clusters and group, with their time (:data:`TIME_COLUMN`) in ``[since, until)`` (naive times
    are UTC), and ``filter`` (a pyarrow dataset expression) when given. ``provisional=False``:
    the full steps' rows only (a visible provisional step's files left out: the group-status
    alerts, :func:`lagscope.alerts.findings.findings_from_results`).

    An absent table reads as an empty table with the right schema; a file that cannot be read (a
    newer major schema version, a broken footer or page) is moved into quarantine and the rest is
    read (:func:`lagscope.lake.read_live`)."""
    import pyarrow.dataset as ds

    _check_table(table)
    ts_col = TIME_COLUMN[table]
    ts_type = RESULT_TABLES[table].schema.field(ts_col).type
    expr = filter
    for cond in ((ds.field("group_id") == group) if group is not None else None,
                 (ds.field(ts_col) >= pa.scalar(_utc(since), ts_type)) if since is not None else None,
                 (ds.field(ts_col) < pa.scalar(_utc(until), ts_type)) if until is not None else None):
        if cond is not None:
            expr = cond if expr is None else expr & cond
    first = _utc(since).date() if since is not None else None
    last = _utc(until).date() if until is not None else None
    store = object_store(results)
    if store is not None:
        return read_objects(lambda: [f for f in _object_listing(store, table, cluster, first, last)
                                     if provisional or not is_provisional(f.rsplit("/", 1)[-1])],
                            store, table, columns=columns, filter=expr)
    local = _local(results)
    return read_live(lambda: [f for f in list_files(local, table, cluster=cluster, since=first, until=last)
                              if provisional or not is_provisional(f.name)],
                     local, table, columns=columns, filter=expr)


def event_rank(row: Mapping[str, Any]) -> tuple[float, int]:
    """How current one row of a rebalance window or anomaly is: its ``as_of_ts`` (none: oldest),
    then closed over open (a window or an anomaly never reopens)."""
    as_of = row.get("as_of_ts")
    return (as_of.timestamp() if as_of is not None else -math.inf, 0 if row.get("end_ts") is None else 1)


def current_rows(rows: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Hashable], *,
                 withdrawn: bool = False) -> list[Mapping[str, Any]]:
    """One row per identity, the current one; none for an identity whose current row is withdrawn
    (``withdrawn=True``: that row, for a reader that must retract what it showed of the key).

    The analytics write an open rebalance window or anomaly again at every incremental step
    until it closes (schema: ``as_of_ts``): of the rows with one identity, the one with the
    latest ``as_of_ts`` is current; on a tie (or without ``as_of_ts``) a closed row wins over
    an open one, since a window or an anomaly never reopens (:func:`event_rank`). An anomaly
    whose current row has ``withdrawn`` true (a later step found it is no finding) is left out;
    a row without the column (written before it existed), or null there, is not withdrawn.
    """
    best: dict[Hashable, Mapping[str, Any]] = {}
    for row in rows:
        k = key(row)
        cur = best.get(k)
        if cur is None or event_rank(row) >= event_rank(cur):
            best[k] = row
    return [r for r in best.values() if withdrawn or not r.get("withdrawn")]


def latest_rows(rows: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], Hashable],
                ts: str) -> dict[Hashable, Mapping[str, Any]]:
    """Per ``key``, the row with the greatest ``ts`` (rows without one are skipped; on a tie the
    later row wins): a group's current status, a partition's latest lag trend."""
    latest: dict[Hashable, Mapping[str, Any]] = {}
    for row in rows:
        if row.get(ts) is None:
            continue
        k = key(row)
        cur = latest.get(k)
        if cur is None or row[ts] >= cur[ts]:
            latest[k] = row
    return latest


def default_gone_after_s() -> float:
    """How long a series may go unwritten while its cluster's others are written before it counts as
    gone: the analytics' forget horizon at its default settings (``analytics.rules.forget_after_s``,
    :meth:`lagscope.config.AnalyticsRulesConfig.forget_horizon_s`). A reader given settings passes
    their horizon instead."""
    from lagscope.config import AnalyticsRulesConfig

    return AnalyticsRulesConfig().forget_horizon_s()


def live_series(series: Mapping[_K, _V], cluster: Callable[[_K], str], ts: Callable[[_V], float],
                gone_after_s: float) -> dict[_K, _V]:
    """``series`` (one latest row per partition or group) without those that are gone: whose latest
    time is more than ``gone_after_s`` before the newest of their cluster (``ts``: Unix seconds).

    The analytics write a row for every partition and group the collector sweeps, at every step;
    one whose rows stopped while its cluster's go on is no longer swept (its group or topic
    deleted, its offsets expired, a filter changed) — the analytics themselves forget it after their
    forget horizon, so that is the horizon a reader of their results passes. A cluster whose steps
    all stopped (the analytics down) keeps every series: what is newest there is old too."""
    newest: dict[str, float] = {}
    for k, v in series.items():
        c, t = cluster(k), ts(v)
        if t > newest.get(c, -math.inf):
            newest[c] = t
    return {k: v for k, v in series.items() if ts(v) >= newest[cluster(k)] - gone_after_s}


def current_events(results: Path | str | Store, table: str, *, cluster: str | Iterable[str] | None = None,
                   group: str | None = None, withdrawn: bool = False) -> list[dict[str, Any]]:
    """The current row (:func:`current_rows`, ``withdrawn`` as there) of every rebalance window or
    anomaly in the results."""
    if table not in EVENT_IDENTITY:
        raise LakeError(f"{table!r} is not an event table; event tables: {', '.join(sorted(EVENT_IDENTITY))}")
    cols = EVENT_IDENTITY[table]
    rows = read(results, table, cluster=cluster, group=group).to_pylist()
    return [dict(r) for r in current_rows(rows, lambda r: tuple(r[c] for c in cols), withdrawn=withdrawn)]


def newest_step_files(files: Iterable[Path]) -> list[Path]:
    """Of result ``files``, those of the newest incremental or provisional step (the greatest
    ``<to>`` of ``inc-<from>-<to>-…`` or ``pre-<from>-<to>-…``; a visible provisional step is
    always the newest) and every other (a batch's, whose name does not say its end): where a
    table every step rewrites whole (``advice``) has its latest rows."""
    files = list(files)
    tos = {f: int(m.group(2)) for f in files if (m := _STEP.match(f.name))}
    top = max(tos.values(), default=None)
    return [f for f in files if f not in tos or tos[f] == top]


def current_advice(results: Path | str | Store, *, cluster: str | Iterable[str] | None = None,
                   group: str | None = None) -> list[dict[str, Any]]:
    """The current ``advice`` rows: per cluster, the rows of its latest ``as_of_ts`` (every step
    writes the advice of every group it analysed, so a group absent there has none), unless an
    incremental or provisional step published after them (the checkpoint's watermark, or the
    visible provisional step's end, is later): that step found no advice in the cluster. Reads
    the cluster's latest date folder only (a row's date is that of the last instant its step
    analysed, ``as_of_ts`` − 1 ms), of it the newest step's files (:func:`newest_step_files`).
    Results on an object store: the same, through the store (:func:`object_files`)."""
    state = read_publish_state(results)
    out: list[dict[str, Any]] = []
    latest: dict[str, dt.date] = {}
    store = object_store(results)
    folders = ([Path(f) for f in object_date_folders(store, "advice", cluster, None, None)] if store is not None
               else date_folders(_local(results), "advice", cluster=cluster))
    for folder in folders:
        c = folder.parent.name.removeprefix("cluster=")
        day = dt.date.fromisoformat(folder.name.removeprefix("date="))
        latest[c] = max(day, latest.get(c, day))

    def newest(cluster: str, day: dt.date) -> Callable[[], list[Path]]:
        return lambda: newest_step_files(list_files(_local(results), "advice", cluster=cluster, since=day,
                                                    until=day))

    def newest_objects(store: Store, cluster: str, day: dt.date) -> Callable[[], list[str]]:
        return lambda: [str(p) for p in newest_step_files(
            Path(f) for f in _object_listing(store, "advice", cluster, day, day))]

    for c, day in sorted(latest.items()):
        table = (read_objects(newest_objects(store, c, day), store, "advice") if store is not None
                 else read_live(newest(c, day), _local(results), "advice"))
        rows = table.to_pylist()
        if not rows:
            continue
        top = max(r["as_of_ts"] for r in rows)
        if state.newest_ms is not None and top.timestamp() * 1000 < state.newest_ms:
            continue
        out.extend(dict(r) for r in rows if r["as_of_ts"] == top and (group is None or r["group_id"] == group))
    return out


# --------------------------------------------------------------------------------------------
# following a table: what is new since the last look
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FolderChange:
    """New live files of one partition folder since the last :meth:`TableTail.commit`; with
    ``reset``, the files read before changed (a batch replaced them): ``files`` are then all of
    the folder's live files, and what was read from the folder before no longer holds.

    ``provisional``: the folder's live provisional files (``pre-…``, module docstring) at this
    poll, reported at every poll while there are any and never among ``files``: they replace
    the provisional files of the poll before (whose rows no longer hold), and the full step that
    follows replaces them. A reader folds ``files`` into what it keeps and lays the provisional
    rows over that, afresh each poll."""

    cluster: str
    date: str
    files: tuple[Path, ...]
    reset: bool = False
    provisional: tuple[Path, ...] = ()
    #: the object store the files are in (their paths are in its filesystem); None: local files
    store: Store | None = None


@dataclass(frozen=True)
class TableChanges:
    """One :meth:`TableTail.poll`: the folders with new (or replaced) files, the folders gone
    (no live file left: deleted by retention or a batch), and the table's newest file time."""

    changed: tuple[FolderChange, ...] = ()
    gone: tuple[tuple[str, str], ...] = ()
    newest_mtime: float | None = None
    _marks: Mapping[tuple[str, str], _Mark] = field(default_factory=dict, repr=False)

    @property
    def folders(self) -> list[tuple[str, str]]:
        """The (cluster, date) folders with live files after these changes."""
        return sorted(self._marks)


@dataclass(frozen=True)
class _Mark:
    """What was read of one folder: its files up to the name ``last`` (the analytics name a
    step's files so that later steps sort after earlier ones), their count and a hash of their
    names (a file before ``last`` that appeared or vanished means the folder was rewritten)."""

    last: str
    count: int
    digest: int
    newest_mtime: float


class TableTail:
    """Follows one result table's live files for a long-lived reader: :meth:`poll` says which
    files are new since the last :meth:`commit` (listing each folder, reading no file and
    stat-ing only new ones), so the reader reads each file once. Its memory is one mark per
    partition folder, whatever the number of files."""

    def __init__(self, results: Path | str | Store, table: str) -> None:
        _check_table(table)
        #: the results on an object store (file paths in its filesystem), or None: a local folder
        self.store = object_store(results)
        self.results = Path(results.base) if isinstance(results, Store) else Path(results)
        self.table = table
        self._marks: dict[tuple[str, str], _Mark] = {}

    def _folders(self) -> dict[Path, list[str]]:
        """The visible names per partition folder (on an object store, folders as paths in its
        filesystem)."""
        if self.store is None:
            return _listing(self.results, self.table, None, None, None)[1]
        folders: dict[Path, list[str]] = {}
        for rel in _object_listing(self.store, self.table, None, None, None):
            folder, _, name = rel.rpartition("/")
            folders.setdefault(Path(self.store.path(folder)), []).append(name)
        return folders

    def _mtime(self, path: Path) -> float:
        """A file's modification time (FileNotFoundError: gone)."""
        if self.store is None:
            return path.stat().st_mtime
        import pyarrow.fs as pafs

        info = self.store.filesystem.get_file_info(str(path))
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            raise FileNotFoundError(str(path))
        return float(info.mtime.timestamp())

    def poll(self) -> TableChanges:
        """The changes since the last commit (nothing is committed: call :meth:`commit` once
        they have been read, so that a failed read is retried by the next poll). The marks
        follow the incremental and batch files only: a provisional file replaced or gone is no
        change to what was read (:attr:`FolderChange.provisional`)."""
        folders = self._folders()
        changed: list[FolderChange] = []
        marks: dict[tuple[str, str], _Mark] = {}
        for folder, listed in folders.items():
            key = (folder.parent.name.removeprefix("cluster="), folder.name.removeprefix("date="))
            names = [n for n in listed if not is_provisional(n)]
            pre = tuple(folder / n for n in listed if is_provisional(n))
            if not names:
                if pre:
                    changed.append(FolderChange(key[0], key[1], (), False, pre, self.store))
                continue
            mark = self._marks.get(key)
            old = [n for n in names if mark is not None and n <= mark.last]
            reset = mark is not None and (len(old) != mark.count or hash(tuple(old)) != mark.digest)
            new = names if reset or mark is None else names[len(old):]
            newest = -math.inf if reset or mark is None else mark.newest_mtime
            files: list[Path] = []
            for n in new:
                try:
                    newest = max(newest, self._mtime(folder / n))
                except FileNotFoundError:
                    continue  # deleted since the listing (a batch, retention): the next poll sees it
                files.append(folder / n)
            read_names = set(old) | {f.name for f in files}
            kept = [n for n in names if n in read_names]
            if kept:
                marks[key] = _Mark(kept[-1], len(kept), hash(tuple(kept)), newest)
            if files or reset or pre:
                changed.append(FolderChange(key[0], key[1], tuple(files), reset, pre, self.store))
        gone = tuple(sorted(set(self._marks) - set(marks)))
        newest_all = max((m.newest_mtime for m in marks.values()), default=None)
        return TableChanges(tuple(changed), gone, newest_all, marks)

    def commit(self, changes: TableChanges) -> None:
        """Record ``changes`` as read."""
        self._marks = dict(changes._marks)

    def folders(self) -> list[tuple[str, str]]:
        """The (cluster, date) folders read so far."""
        return sorted(self._marks)
