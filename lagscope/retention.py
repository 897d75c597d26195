"""Retention: removing the expired date partitions of the lake and of the result tables.

    >>> prune(Path("lake"), SAMPLE_TABLES, days=14, keep_from=analytics_keep_from(Path("results")))  # doctest: +SKIP
    PruneResult(removed=(Removal(table='offsets', cluster='prod', date=datetime.date(2026, 11, 9), …),), …)

Both roots share one layout, ``<root>/<table>/cluster=<c>/date=<YYYY-MM-DD>/``, and one rule.
A date partition is **expired** when all of these hold, ``horizon`` being ``now − days − 1 day``
(the extra day: clocks that disagree, a UTC day that has just begun):

- its date is before the horizon's date, so every row in it is older than the horizon;
- nothing was written into it since the horizon (the newest modification time of the folder
  and its files): a partition still being written is never removed, whatever its date (an open
  anomaly or rebalance is written again at every analytics step into the partition of the day
  it started; a late ``__consumer_offsets`` record lands in the partition of its own day);
- it is before ``keep_from``, the first day the analytics' next incremental step reads
  (:func:`analytics_keep_from`, for the lake only).

Removal of one partition, each step atomic on a POSIX file system::

    1. record the dates about to go in <root>/_state/retention.json   (readers: expired_through)
    2. rename the folder to <root>/_state/trash/<…>     ← from here no reader sees it
    3. delete the trash folder, log one line with the bytes freed

A crash during 3 leaves the rest in the trash, which the next run deletes first. One pruner per
root at a time (an advisory lock on ``<root>/_state/retention.lock``); a second one skips its run.
A dry run lists what would go and touches nothing.

On an object store (a :class:`~lagscope.storage.Store` or an ``s3://`` root) the same rule
decides, the newest modification time being the newest ``LastModified`` of the partition's
objects, and the analytics' checkpoint is the ``_state/checkpoint.json`` object of the results.
There is no rename, so a partition goes file by file, each file invisible before it is gone::

    1. record the dates about to go in the <root>/_state/retention.json object (put whole)
    2. delete the commit markers (``_committed.<name>``): the sweep files' first, the compacted
       files' last (a compacted file hides the sources it names while its marker is there: no
       row is ever read twice)                                   ← from here no reader lists it
    3. delete the objects, oldest first (by LastModified), then the folder; log one line with
       the bytes freed

The result tables have no commit markers (their publish markers decide what is visible) and an
open anomaly or rebalance is written again by every step into the partition of its first day, so
of one identity an older row may lie in an older file of the same partition: deleted oldest
first, a reader during a removal always finds each identity's newest row while any of its rows is
left, never an older state of it (an alert would fire again for an anomaly long closed).

A reader that listed a file just before its marker went finds it gone and lists again, as after a
compaction; a crash during 2 or 3 leaves objects no reader lists, in a partition that is still
expired: the next run deletes them. There is no lock on a bucket: two pruners of one lake (e.g.
sharded collectors) delete the same objects, which is harmless.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from lagscope.errors import LakeError
from lagscope.lake import object_store
from lagscope.storage import Store

__all__ = [
    "RUN_EVERY_S",
    "PruneResult",
    "Removal",
    "Removals",
    "analytics_keep_from",
    "checkpoint_file",
    "expired_through",
    "horizon",
    "prune",
]

log = logging.getLogger(__name__)

#: seconds between two applications of a retention by a long-running process (the collector, the
#: analytics loop): a partition expires once a day, so hourly is prompt enough and costs nothing
RUN_EVERY_S = 3600.0

#: where a root's retention keeps its record and its trash (readers of the tables never look there)
_STATE = "_state"
_RECORD = "retention.json"
_TRASH = "trash"
_LOCK = "retention.lock"


def checkpoint_file(results: Path | str) -> Path:
    """The analytics' incremental checkpoint, ``<results>/_state/checkpoint.json`` (written by
    :func:`lagscope.analytics.io.write_checkpoint`; read here so that the collector, which never
    imports the analytics, knows what they still need)."""
    return Path(results) / _STATE / "checkpoint.json"


def analytics_keep_from(results: Path | str | Store) -> dt.date | None:
    """The first lake date the analytics' next incremental step may read: the day before its
    checkpoint's watermark (a step reads the lake's partitions from the watermark's date, the
    commits from 15 minutes before the watermark: the day before covers both). ``None`` without
    a checkpoint. An unreadable checkpoint raises :class:`LakeError` (prune nothing then: the
    analytics would fail on it too, and must not find their input gone once it is repaired).
    ``results`` on an object store: its ``_state/checkpoint.json`` object."""
    store = object_store(results)
    path: Path | str
    try:
        if store is not None:
            path = store.url_of(f"{_STATE}/checkpoint.json")
            text = store.get(f"{_STATE}/checkpoint.json").decode()
        else:
            path = checkpoint_file(results.base if isinstance(results, Store) else results)
            text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise LakeError(f"cannot read the analytics checkpoint {path}: {exc}") from exc
    try:
        watermark = dt.datetime.fromisoformat(json.loads(text)["watermark"])
    except (ValueError, KeyError, TypeError) as exc:
        raise LakeError(f"unreadable analytics checkpoint {path}: {exc}") from exc
    return (watermark.astimezone(dt.UTC) - dt.timedelta(days=1)).date()


def horizon(now: dt.datetime, days: int) -> dt.datetime:
    """What is older than this may go: ``now − days − 1 day`` (see the module docstring)."""
    return now.astimezone(dt.UTC) - dt.timedelta(days=days + 1)


@dataclass(frozen=True)
class Removal:
    """One date partition removed (or, in a dry run, that would be)."""

    table: str
    cluster: str
    date: dt.date
    #: the partition's folder (on an object store: its URL)
    path: Path | str
    files: int
    bytes: int


@dataclass(frozen=True)
class PruneResult:
    removed: tuple[Removal, ...] = ()
    #: expired by date and by writes, kept because the analytics have not read them yet
    kept_for_analytics: int = 0
    #: trash folders of an interrupted run deleted first
    leftovers: int = 0
    dry_run: bool = False

    @property
    def bytes(self) -> int:
        return sum(r.bytes for r in self.removed)


class Removals:
    """Date partitions and bytes removed since the process started, per ``(cluster, table)``,
    for ``lagscope_retention_removed_*_total``: added to by the pruners' threads, read whole by
    the metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._partitions: Counter[tuple[str, str]] = Counter()
        self._bytes: Counter[tuple[str, str]] = Counter()

    def watch(self, clusters: Iterable[str], tables: Iterable[str]) -> None:
        """Give these series a 0 from the start, so that ``increase()`` sees the first removal."""
        with self._lock:
            for key in ((c, t) for c in clusters for t in tables):
                self._partitions[key] += 0
                self._bytes[key] += 0

    def add(self, removal: Removal) -> None:
        key = (removal.cluster, removal.table)
        with self._lock:
            self._partitions[key] += 1
            self._bytes[key] += removal.bytes

    def snapshot(self) -> dict[tuple[str, str], tuple[int, int]]:
        """``(cluster, table) → (partitions, bytes)`` removed so far."""
        with self._lock:
            return {key: (self._partitions[key], self._bytes[key]) for key in sorted(self._partitions)}


# ------------------------------------------------------------------------------------------------
# the record of what went: a batch asked for an expired range says so


def _record_path(root: Path) -> Path:
    return root / _STATE / _RECORD


def _read_record(root: Path) -> dict[str, dict[str, str]]:
    """``{table: {cluster: newest date removed}}`` (empty when nothing was ever removed)."""
    path = _record_path(root)
    return _parsed_record(path.read_text, str(path))


def _parsed_record(read: Callable[[], str | bytes], where: str) -> dict[str, dict[str, str]]:
    """The record ``read`` returns, parsed (empty when it does not exist; ``where``: its name in
    the error)."""
    try:
        removed = json.loads(read())["removed_through"]
        return {str(t): {str(c): str(d) for c, d in by_cluster.items()} for t, by_cluster in removed.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LakeError(f"unreadable retention record {where}: {exc}") from exc


def _write_record(root: Path, record: dict[str, dict[str, str]]) -> None:
    path = _record_path(root)
    tmp = path.with_name(f".tmp-{_RECORD}-{uuid.uuid4().hex[:8]}")
    with tmp.open("w") as fh:
        json.dump({"removed_through": record}, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _read_store_record(store: Store) -> dict[str, dict[str, str]]:
    """:func:`_read_record` of an object store's ``_state/retention.json`` object."""
    rel = f"{_STATE}/{_RECORD}"
    return _parsed_record(lambda: store.get(rel), store.url_of(rel))


def expired_through(root: Path | str | Store, table: str, clusters: Iterable[str] | None = None) -> dt.date | None:
    """The newest date of ``table`` that retention removed under ``root`` (of any of ``clusters``,
    or of any cluster), or None: a day up to it that is missing was removed (or never written)."""
    store = object_store(root)
    record = (_read_store_record(store) if store is not None
              else _read_record(Path(root.base if isinstance(root, Store) else root)))
    by_cluster = record.get(table, {})
    wanted = set(clusters) if clusters else None
    dates = [dt.date.fromisoformat(d) for c, d in by_cluster.items() if wanted is None or c in wanted]
    return max(dates) if dates else None


# ------------------------------------------------------------------------------------------------
# pruning


def _partitions(root: Path, tables: Iterable[str]) -> Iterator[tuple[str, str, dt.date, Path]]:
    """``(table, cluster, date, folder)`` of every date partition, oldest first per cluster."""
    for table in sorted(tables):
        base = root / table
        if not base.is_dir():
            continue
        for cdir in sorted(base.glob("cluster=*")):
            for ddir in sorted(cdir.glob("date=*")):
                try:
                    day = dt.date.fromisoformat(ddir.name.removeprefix("date="))
                except ValueError:
                    continue  # not a partition lagscope wrote: not its to remove
                if ddir.is_dir():
                    yield table, cdir.name.removeprefix("cluster="), day, ddir


def _usage(folder: Path) -> tuple[float, int, int]:
    """``(newest modification time, files, bytes)`` of a partition folder and what it holds."""
    newest = folder.stat().st_mtime
    files = size = 0
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            try:
                st = os.stat(os.path.join(dirpath, name))
            except FileNotFoundError:
                continue
            newest = max(newest, st.st_mtime)
            files += 1
            size += st.st_size
    return newest, files, size


def _delete(folder: Path) -> None:
    """Delete a folder and what it holds, bottom up; what is already gone is no error (two runs
    may finish the same leftover)."""
    if not folder.is_dir():
        folder.unlink(missing_ok=True)
        return
    for dirpath, dirs, names in os.walk(folder, topdown=False):
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(dirpath, name))
        for name in dirs:
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(os.path.join(dirpath, name))
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(folder)


@contextlib.contextmanager
def _exclusive(root: Path) -> Iterator[bool]:
    """Hold ``<root>/_state/retention.lock`` (True), or False when another pruner holds it."""
    state = root / _STATE
    state.mkdir(parents=True, exist_ok=True)
    with (state / _LOCK).open("a") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def prune(root: Path | str | Store, tables: Iterable[str], *, days: int | None, now: dt.datetime | None = None,
          keep_from: dt.date | None = None, dry_run: bool = False, removals: Removals | None = None,
          label: str = "lake") -> PruneResult:
    """Remove the expired date partitions of ``tables`` under ``root`` (see the module docstring).

    ``days``: 0 or None keeps everything. ``keep_from``: no partition of this date or later goes
    (the analytics' next step reads from it). ``label`` names the root in the log lines (lake,
    results). Each removal is logged with the bytes freed and counted in ``removals``. ``root`` on
    an object store (a :class:`~lagscope.storage.Store`, an ``s3://`` URL): see the module docstring.
    """
    if days is not None and days < 0:
        raise ValueError(f"retention days must be 0 (keep everything) or more, not {days}")
    store = object_store(root)
    if store is not None:
        if not days:
            return PruneResult(dry_run=dry_run)
        limit = horizon(now or dt.datetime.now(dt.UTC), days)
        return _prune_store(store, tables, limit, keep_from, dry_run=dry_run, removals=removals, label=label)
    root = Path(root.base if isinstance(root, Store) else root)
    if not days or not root.is_dir():
        return PruneResult(dry_run=dry_run)
    limit = horizon(now or dt.datetime.now(dt.UTC), days)
    if dry_run:
        return _prune(root, tables, limit, keep_from, dry_run=True, removals=None, label=label)
    with _exclusive(root) as mine:
        if not mine:
            log.info("retention: another prune of %s is running; skipping this one", root)
            return PruneResult()
        return _prune(root, tables, limit, keep_from, dry_run=False, removals=removals, label=label)


def _prune(root: Path, tables: Iterable[str], limit: dt.datetime, keep_from: dt.date | None, *, dry_run: bool,
           removals: Removals | None, label: str) -> PruneResult:
    trash = root / _STATE / _TRASH
    leftovers = 0
    if not dry_run and trash.is_dir():  # an earlier run stopped between its rename and its delete
        for left in sorted(trash.iterdir()):
            freed = _usage(left)[2] if left.is_dir() else left.stat().st_size
            _delete(left)
            leftovers += 1
            log.info("retention: deleted the leftover %s of an interrupted removal (%d bytes freed)", left, freed)
    expired: list[Removal] = []
    held = 0
    limit_ts = limit.timestamp()
    for table, cluster, day, folder in _partitions(root, tables):
        if day >= limit.date():
            continue
        try:
            newest, files, size = _usage(folder)
        except FileNotFoundError:
            continue  # gone meanwhile
        if newest >= limit_ts:
            continue  # still written to: never removed (see the module docstring)
        if keep_from is not None and day >= keep_from:
            held += 1
            continue
        expired.append(Removal(table, cluster, day, folder, files, size))
    if held:
        log.warning("retention: keeping %d expired %s partition(s) from %s on: the analytics' next step reads "
                    "them (they go once its checkpoint has passed them)", held, label, keep_from)
    if dry_run or not expired:
        return PruneResult(tuple(expired), held, leftovers, dry_run)
    record = _read_record(root)
    for r in expired:  # the intent first: a reader that finds a day missing knows it expired
        by_cluster = record.setdefault(r.table, {})
        if r.date.isoformat() > by_cluster.get(r.cluster, ""):
            by_cluster[r.cluster] = r.date.isoformat()
    _write_record(root, record)
    trash.mkdir(parents=True, exist_ok=True)
    done: list[Removal] = []
    for r in sorted(expired, key=lambda r: (r.date, r.table, r.cluster)):
        target = trash / f"{r.table}.{r.cluster}.{r.date.isoformat()}.{uuid.uuid4().hex[:8]}"
        try:
            os.rename(r.path, target)
        except FileNotFoundError:
            continue  # gone meanwhile (removed by hand)
        except OSError as exc:
            log.error("retention: cannot remove %s (kept): %s", r.path, exc)
            continue
        _delete(target)
        done.append(r)
        if removals is not None:
            removals.add(r)
        log.info("retention: removed %s %s cluster=%s date=%s (%d files, %d bytes freed)", label, r.table,
                 r.cluster, r.date.isoformat(), r.files, r.bytes)
    return PruneResult(tuple(done), held, leftovers, False)


# ------------------------------------------------------------------------------------------------
# pruning on an object store (module docstring)


def _store_partitions(store: Store, tables: Iterable[str]) -> Iterator[tuple[str, str, dt.date, str]]:
    """``(table, cluster, date, folder relative to the root)`` of every date partition there."""
    for table in sorted(tables):
        for cname in store.folders(table):
            if not cname.startswith("cluster="):
                continue
            for dname in store.folders(f"{table}/{cname}"):
                try:
                    day = dt.date.fromisoformat(dname.removeprefix("date="))
                except ValueError:
                    continue  # not a partition lagscope wrote: not its to remove
                yield table, cname.removeprefix("cluster="), day, f"{table}/{cname}/{dname}"


def _store_usage(store: Store, folder: str) -> tuple[float, list[tuple[str, int]]]:
    """``(newest LastModified, [(path relative to the folder, bytes)])`` of a partition's objects,
    oldest first (then by name; no object: newest is minus infinity)."""
    import pyarrow.fs as pafs

    base = store.path(folder)
    try:
        infos = store.filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    except FileNotFoundError:
        infos = []
    newest = float("-inf")
    objects: list[tuple[float, str, int]] = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        when = info.mtime.timestamp() if info.mtime is not None else float("-inf")
        objects.append((when, info.path.removeprefix(base + "/"), int(info.size or 0)))
        newest = max(newest, when)
    return newest, [(rel, size) for _, rel, size in sorted(objects)]


def _store_delete(store: Store, folder: str, objects: list[tuple[str, int]]) -> None:
    """Delete a partition's objects: the commit markers first (the sweep files', then the
    compacted files'), then the rest in the order given (:func:`_store_usage`'s, oldest first),
    then the folder."""
    from lagscope.lake import COMMIT_MARKER_PREFIX, COMPACT_PREFIX

    rels = [rel for rel, _ in objects]
    markers = [r for r in rels if r.rpartition("/")[2].startswith(COMMIT_MARKER_PREFIX)]
    markers.sort(key=lambda r: r.rpartition("/")[2].removeprefix(COMMIT_MARKER_PREFIX).startswith(COMPACT_PREFIX))
    for rel in markers:
        store.delete(f"{folder}/{rel}")
    for rel in rels:
        if rel not in markers:
            store.delete(f"{folder}/{rel}")
    store.delete_folder(folder)


def _prune_store(store: Store, tables: Iterable[str], limit: dt.datetime, keep_from: dt.date | None, *,
                 dry_run: bool, removals: Removals | None, label: str) -> PruneResult:
    """:func:`_prune` of a root on an object store."""
    import pyarrow as pa

    expired: list[tuple[Removal, str, list[tuple[str, int]]]] = []
    held = 0
    limit_ts = limit.timestamp()
    for table, cluster, day, folder in _store_partitions(store, tables):
        if day >= limit.date():
            continue
        newest, objects = _store_usage(store, folder)
        if newest >= limit_ts:
            continue  # still written to: never removed
        if keep_from is not None and day >= keep_from:
            held += 1
            continue
        expired.append((Removal(table, cluster, day, store.url_of(folder), len(objects),
                                sum(n for _, n in objects)), folder, objects))
    if held:
        log.warning("retention: keeping %d expired %s partition(s) from %s on: the analytics' next step reads "
                    "them (they go once its checkpoint has passed them)", held, label, keep_from)
    if dry_run or not expired:
        return PruneResult(tuple(r for r, _, _ in expired), held, 0, dry_run)
    record = _read_store_record(store)
    for r, _, _ in expired:  # the intent first: a reader that finds a day missing knows it expired
        by_cluster = record.setdefault(r.table, {})
        if r.date.isoformat() > by_cluster.get(r.cluster, ""):
            by_cluster[r.cluster] = r.date.isoformat()
    store.put(f"{_STATE}/{_RECORD}", json.dumps({"removed_through": record}, indent=1, sort_keys=True).encode())
    done: list[Removal] = []
    for r, folder, objects in sorted(expired, key=lambda e: (e[0].date, e[0].table, e[0].cluster)):
        try:
            _store_delete(store, folder, objects)
        except (OSError, pa.ArrowException) as exc:
            log.error("retention: cannot remove %s (what is left goes at the next run): %s", r.path, exc)
            continue
        done.append(r)
        if removals is not None:
            removals.add(r)
        log.info("retention: removed %s %s cluster=%s date=%s (%d files, %d bytes freed)", label, r.table,
                 r.cluster, r.date.isoformat(), r.files, r.bytes)
    return PruneResult(tuple(done), held, 0, False)
