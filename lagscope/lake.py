"""Read and write the lake: Parquet files, Hive-partitioned by cluster and date, written atomically.

    >>> path = write_rows(root, OFFSETS, "prod", rows)          # doctest: +SKIP
    >>> table = read_table(root, "offsets", cluster="prod")     # doctest: +SKIP
    >>> files = list_files(root, "offsets", cluster="prod")     # for Spark, DuckDB  # doctest: +SKIP

Atomicity: a file is written under a hidden name (``.tmp-…``, which Spark, DuckDB and
pyarrow all skip) in its final folder, flushed to disk and renamed into place. A crash leaves
at most a hidden temporary file, never half a visible one. See :mod:`lagscope.schema` for the
tables and the layout.

Live files: compaction (:mod:`lagscope.collector.compaction`) merges a folder's sweep files
into one ``compact-…`` file whose footer names its sources, publishes it, then deletes the
sources. Between those two steps (until its next run, after a crash there) a folder holds both,
so every reader lists folders with :func:`live_files`, which leaves out the sources a visible
compacted file names, and never lets an engine list a folder itself. The result tables have
their own publish protocol: read them through :mod:`lagscope.results`.

Object stores (``s3://bucket/prefix`` as the root, :mod:`lagscope.storage`): there is no rename,
so :func:`write_table` writes the file whole under its final key in one request, after its data is
complete, then a commit marker ``_committed.<name>`` beside it (a small JSON object: the file's
rows and bytes). Only a file
with its marker is listed (:func:`object_files`): a writer killed before its marker leaves an
object no reader lists, and a file is removed marker first. Files there are named by their URL.

Quarantine: a file that cannot be read (truncated, not Parquet, a page that fails to decode,
written with a newer *major* schema version) is moved aside by :func:`quarantine` into
``<root>/<table>/_quarantine/<its path under the table>`` (``_``: no listing, engine or reader
sees it again), named in one warning line and counted (:data:`QUARANTINED`,
``lagscope_lake_files_quarantined_total``); the reader goes on without it. Readers check a file's
footer when it is listed for reading (:func:`check_files`, once per file: a file is never
rewritten in place, so a checked one is remembered by its path, size and modification time),
and a read that fails past the footer finds the file and quarantines it
(:func:`quarantine_unreadable`). Lake and result tables alike.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lagscope.errors import LakeError
from lagscope.schema import SAMPLE_TABLES, SCHEMA_VERSION, TABLES, Table
from lagscope.storage import Store, is_object_url, open_store, write_atomically

if TYPE_CHECKING:  # pyarrow.dataset imports pandas (seconds): only readers pay for it
    import pyarrow.dataset as ds

__all__ = [
    "COMMIT_MARKER_PREFIX",
    "COMPACTED_FROM_KEY",
    "COMPACT_PREFIX",
    "QUARANTINED",
    "QUARANTINE_DIR",
    "QUARANTINE_HELP",
    "QUARANTINE_METRIC",
    "SCHEMA_VERSION_KEY",
    "CheckedFile",
    "QuarantineCounts",
    "Quarantined",
    "check_files",
    "check_in",
    "check_objects",
    "checked_files",
    "committed_names",
    "compacted_sources",
    "date_folders",
    "file_metadata",
    "is_missing_file",
    "list_files",
    "live_files",
    "object_date_folders",
    "object_files",
    "object_store",
    "partition_dir",
    "quarantine",
    "quarantine_in",
    "quarantine_object",
    "quarantine_unreadable",
    "quarantine_unreadable_in",
    "read_live",
    "read_objects",
    "read_table",
    "table_dir",
    "visible_names",
    "write_rows",
    "write_table",
]

#: how often a read lists again when a listed file vanished before it was read
_READ_ATTEMPTS = 5

#: the Parquet key-value metadata key of the schema version a file was written with
SCHEMA_VERSION_KEY = b"lagscope.schema_version"
#: the key-value metadata key of a compacted file: the JSON list of the source names it merged
COMPACTED_FROM_KEY = b"lagscope.compacted_from"
#: how a compacted file's name starts
COMPACT_PREFIX = "compact-"
#: how an object store's commit marker of ``<name>`` is named: ``_committed.<name>`` beside it
COMMIT_MARKER_PREFIX = "_committed."
#: the folder of a table (``<root>/<table>/``) its unreadable files are moved into
QUARANTINE_DIR = "_quarantine"
#: the counter of the files moved into quarantine (:class:`QuarantineCounts`)
QUARANTINE_METRIC = "lagscope_lake_files_quarantined_total"
QUARANTINE_HELP = ("Files moved into their table's _quarantine folder since the process started because "
                   "they could not be read (truncated, not Parquet, a corrupt page, a newer major schema "
                   "version), by cluster and table (lake and result tables); the readers go on without them.")

log = logging.getLogger(__name__)


def table_dir(root: Path | str, table: str) -> Path:
    return Path(root) / table


def partition_dir(root: Path | str, table: str, cluster: str, date: dt.date) -> Path:
    """``<root>/<table>/cluster=<cluster>/date=<YYYY-MM-DD>``."""
    if not cluster or "/" in cluster or cluster.startswith("."):
        raise LakeError(f"invalid cluster name for a lake partition: {cluster!r}")
    return table_dir(root, table) / f"cluster={cluster}" / f"date={date.isoformat()}"


def visible_names(folder: Path) -> list[str]:
    """The Parquet file names of one folder that readers may see, sorted: hidden files
    (``.tmp-…`` being written, ``_…`` engine markers) are left out; a missing folder is empty."""
    try:
        return sorted(n for n in os.listdir(folder) if n.endswith(".parquet") and not n.startswith((".", "_")))
    except FileNotFoundError:
        return []


def compacted_sources(path: Path) -> list[str]:
    """The source file names a compacted file merged (from its footer; empty for other files)."""
    raw = (pq.read_schema(path).metadata or {}).get(COMPACTED_FROM_KEY)
    return list(json.loads(raw)) if raw else []


def live_files(folder: Path) -> list[Path]:
    """The files of one lake partition folder a reader should read: the visible ones, less the
    sources a visible compacted file already merged (module docstring)."""
    names = visible_names(folder)
    merged: set[str] = set()
    for n in names:
        if n.startswith(COMPACT_PREFIX):
            try:
                merged.update(compacted_sources(folder / n))
            except FileNotFoundError:
                continue  # replaced since the listing: its sources are then still live or gone too
    return [folder / n for n in names if n not in merged]


def date_folders(root: Path | str, table: str, *, cluster: str | Iterable[str] | None = None,
                 since: dt.date | None = None, until: dt.date | None = None) -> list[Path]:
    """The existing ``cluster=…/date=…`` folders of ``table`` under ``root``, sorted, of the given
    clusters (all when None) and dates (``since <= date <= until``, each bound optional).

    With clusters and both bounds given, the folders are named, not listed: a reader of one
    cluster's day never lists the rest of the table."""
    base = table_dir(root, table)
    if cluster is None:
        cluster_dirs = sorted(p for p in base.glob("cluster=*") if p.is_dir())
    else:
        names = [cluster] if isinstance(cluster, str) else sorted(set(cluster))
        cluster_dirs = [base / f"cluster={c}" for c in names]
    out: list[Path] = []
    for cdir in cluster_dirs:
        if since is not None and until is not None:
            days = [since + dt.timedelta(days=i) for i in range((until - since).days + 1)]
            out.extend(d for d in (cdir / f"date={day.isoformat()}" for day in days) if d.is_dir())
            continue
        for ddir in sorted(cdir.glob("date=*")):
            try:
                day = dt.date.fromisoformat(ddir.name.removeprefix("date="))
            except ValueError:
                continue  # not a partition folder
            if (since is None or day >= since) and (until is None or day <= until):
                out.append(ddir)
    return out


def _check_lake_table(table: str) -> None:
    if table not in SAMPLE_TABLES:
        raise LakeError(f"unknown lake table {table!r}; known: {', '.join(sorted(SAMPLE_TABLES))}"
                        + ("; result tables are read with lagscope.results" if table in TABLES else ""))


def list_files(root: Path | str, table: str, *, cluster: str | Iterable[str] | None = None,
               since: dt.date | None = None, until: dt.date | None = None) -> list[Path]:
    """The live files (:func:`live_files`) of a lake table, of the given clusters and dates
    (see :func:`date_folders`): the file list to give any engine."""
    _check_lake_table(table)
    return [f for d in date_folders(root, table, cluster=cluster, since=since, until=until) for f in live_files(d)]


def file_metadata(table: Table) -> dict[bytes, bytes]:
    """The key-value metadata every lagscope Parquet file carries (lake and result tables)."""
    return {SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode(), b"lagscope.table": table.name.encode()}


_metadata = file_metadata


def _major(version: str | int) -> int:
    return int(str(version).strip().split(".")[0])


def _version_problem(metadata: Mapping[bytes, bytes] | None) -> str | None:
    """Why this lagscope cannot read a file of this footer metadata, or None: a newer *major*
    schema version than :data:`~lagscope.schema.SCHEMA_VERSION` (its columns may mean something
    else), or a version that does not parse. Files without the key (written before it existed,
    or by another tool) are read."""
    raw = (metadata or {}).get(SCHEMA_VERSION_KEY)
    if raw is None:
        return None
    text = raw.decode(errors="replace")
    try:
        major = _major(text)
    except ValueError:
        return f"unreadable lagscope.schema_version {text!r}"
    if major > _major(SCHEMA_VERSION):
        table = (metadata or {}).get(b"lagscope.table", b"?").decode(errors="replace")
        return (f"written with lake schema version {text} (table {table}), newer than the "
                f"{SCHEMA_VERSION} this lagscope reads; upgrade lagscope to read it")
    return None


# --------------------------------------------------------------------------------------------
# quarantine (module docstring)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Quarantined:
    """A file moved aside: where it was, its table, why, and where it is now (None: it could
    not be moved, e.g. a read-only mount; it is left out of this process's reads instead)."""

    path: Path
    table: str
    reason: str
    moved_to: Path | None


class QuarantineCounts:
    """The files quarantined since the process started, per (cluster, table): a Prometheus
    custom collector of ``lagscope_lake_files_quarantined_total``, registered by the processes
    that serve metrics (the collector's ``/metrics``, the results exporter's)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def add(self, cluster: str, table: str) -> None:
        with self._lock:
            self._counts[(cluster, table)] = self._counts.get((cluster, table), 0) + 1

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def describe(self) -> list[Any]:
        return []  # no collect() at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(QUARANTINE_METRIC.removesuffix("_total"), QUARANTINE_HELP,
                                     labels=["cluster", "table"])
        for (cluster, table), n in sorted(self.snapshot().items()):
            family.add_metric([cluster, table], n)
        yield family


#: this process's quarantine counts (every reader adds to it through :func:`quarantine`)
QUARANTINED = QuarantineCounts()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300] or type(exc).__name__


def _placed(path: Path) -> tuple[Path, str]:
    """The table folder a file lies in (the parent of its ``cluster=…`` folder) and its cluster."""
    for parent in path.parents:
        if parent.name.startswith("cluster="):
            return parent.parent, parent.name.removeprefix("cluster=")
    return path.parent, ""


class _Checked:
    """What is known of files by (path, size, mtime): the row count of a good one (by the key's
    hash: ~100 bytes a file, at most :attr:`LIMIT` files, then forgotten and read again), the
    :class:`Quarantined` of a bad one that could not be moved. A file is never rewritten in
    place, so a key never goes stale."""

    LIMIT = 200_000

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.good: dict[int, int] = {}
        self.stuck: dict[tuple[str, int, int], Quarantined] = {}

    def put_good(self, key: tuple[str, int, int], rows: int) -> None:
        with self._lock:
            if len(self.good) >= self.LIMIT:
                self.good.clear()
            self.good[hash(key)] = rows

    def put_stuck(self, key: tuple[str, int, int], q: Quarantined) -> None:
        with self._lock:
            self.stuck[key] = q


_CHECKED = _Checked()


def _key(path: Path) -> tuple[str, int, int]:
    st = path.stat()  # FileNotFoundError: vanished since the listing (the caller lists again)
    return str(path), st.st_size, st.st_mtime_ns


def quarantine(path: Path | str, reason: str) -> Quarantined | None:
    """Move an unreadable file of a lake or result table into its table's quarantine folder
    (``<table>/_quarantine/cluster=…/date=…/<name>``, never read again, kept for inspection),
    log one warning line and count it (:data:`QUARANTINED`). Returns None when the file is
    already gone (another reader moved it first).

    The one place that moves a file aside: a local or mounted filesystem renames it (atomic);
    an object store would copy it, then delete the original, here."""
    src = Path(path)
    base, cluster = _placed(src)
    table = base.name
    reason = " ".join(reason.split())
    dest = base / QUARANTINE_DIR / src.relative_to(base)
    for n in range(1, 1000):
        if not dest.exists():
            break
        dest = dest.with_name(f"{src.stem}.{n}{src.suffix}")  # a second bad file of the same name
    try:
        key = _key(src)
    except FileNotFoundError:
        return None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dest)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if key in _CHECKED.stuck:
            return _CHECKED.stuck[key]
        got = Quarantined(src, table, reason, None)
        _CHECKED.put_stuck(key, got)
        QUARANTINED.add(cluster, table)
        log.warning("unreadable file %s (table %s): %s; it could not be moved into quarantine (%s): "
                    "left out of this process's reads", src, table, reason, _one_line(exc))
        return got
    QUARANTINED.add(cluster, table)
    log.warning("quarantined %s (table %s): %s; moved to %s", src, table, reason, dest)
    return Quarantined(src, table, reason, dest)


def _inspect(path: Path) -> tuple[int, str | None]:
    """A file's row count from its footer, or why it cannot be read."""
    try:
        meta = pq.read_metadata(path)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        if is_missing_file(exc):
            raise FileNotFoundError(str(path)) from exc
        return 0, f"unreadable Parquet footer: {_one_line(exc)}"
    problem = _version_problem(meta.metadata)
    return int(meta.num_rows), problem


@dataclass(frozen=True)
class CheckedFile:
    """A file whose footer reads and whose schema version this lagscope reads."""

    path: Path
    #: its row count (from the footer)
    rows: int


def check_files(paths: Iterable[Path | str]) -> tuple[list[CheckedFile], list[Quarantined]]:
    """Of the listed files of a lake or result table, those whose footer reads and whose schema
    version is not a newer major one (each file's footer read once per process); the others are
    quarantined (:func:`quarantine`) and returned second. A file gone since the listing raises
    FileNotFoundError: list again (a merged or replaced file's rows are then in another)."""
    good: list[CheckedFile] = []
    bad: list[Quarantined] = []
    for p in paths:
        path = Path(p)
        key = _key(path)
        rows = _CHECKED.good.get(hash(key))
        if rows is None:
            if key in _CHECKED.stuck:
                continue
            rows, problem = _inspect(path)
            if problem is not None:
                got = quarantine(path, problem)
                if got is not None:
                    bad.append(got)
                continue
            _CHECKED.put_good(key, rows)
        good.append(CheckedFile(path, rows))
    return good, bad


def quarantine_unreadable(paths: Iterable[Path | str], error: BaseException | None = None) -> list[Quarantined]:
    """After a read of ``paths`` failed past the footers (``error``), find the files that fail
    to read whole (those the error names first) and quarantine them. Empty: none does (the
    failure was something else)."""
    paths = [Path(p) for p in paths]
    named = [p for p in paths if error is not None and str(p) in str(error)]
    bad: list[Quarantined] = []
    for group in (named, [p for p in paths if p not in named]):
        for path in group:
            try:
                pq.ParquetFile(path).read()
            except FileNotFoundError:
                continue
            except (OSError, pa.ArrowException) as exc:
                if is_missing_file(exc):
                    continue
                got = quarantine(path, f"unreadable Parquet data: {_one_line(exc)}")
                if got is not None:
                    bad.append(got)
        if bad:
            return bad
    return bad


def write_table(root: Path | str | Store, table: Table, cluster: str, data: pa.Table,
                *, date: dt.date | None = None, prefix: str = "part") -> Path | str:
    """Write ``data`` (conforming to ``table.schema``) as one new file of one partition.

    The date partition is ``date`` or, if omitted, the UTC date of the first timestamp column.
    Returns the final path (on an object store its URL, visible once its commit marker is
    written, which this does last). Raises :class:`LakeError` when the data does not fit the
    schema or cannot be written.
    """
    try:
        data = data.select(table.schema.names).cast(table.schema)
    except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
        raise LakeError(f"rows do not fit the {table.name} schema: {exc}") from exc
    if date is None:
        date = _first_date(table, data)
    store = object_store(root)
    if store is not None:
        return _write_object(store, table, cluster, date, data, prefix)
    root = _local(root)
    folder = partition_dir(root, table.name, cluster, date)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    name = f"{prefix}-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
    final = folder / name
    data = data.replace_schema_metadata({**(data.schema.metadata or {}), **_metadata(table)})
    write_atomically(final, lambda fh: pq.write_table(data, fh, compression="zstd"))
    return final


def write_rows(root: Path | str | Store, table: Table, cluster: str,
               rows: Sequence[Mapping[str, Any]], *, date: dt.date | None = None) -> Path | str | None:
    """Write dict rows (keys = column names) as one file; returns None when there are no rows."""
    if not rows:
        return None
    data = pa.Table.from_pylist(list(rows), schema=table.schema)
    return write_table(root, table, cluster, data, date=date)


def _first_date(table: Table, data: pa.Table) -> dt.date:
    for f in table.schema:
        if pa.types.is_timestamp(f.type) and data.num_rows:
            value = data.column(f.name)[0].as_py()
            if value is not None:
                when: dt.datetime = value
                return when.astimezone(dt.UTC).date() if when.tzinfo else when.date()
    return dt.datetime.now(dt.UTC).date()


def read_table(root: Path | str | Store, table: str, *, cluster: str | Iterable[str] | None = None,
               since: dt.date | None = None, until: dt.date | None = None,
               columns: list[str] | None = None, filter: ds.Expression | None = None) -> pa.Table:
    """Read a lake table's live files (of the given clusters and dates, all by default) as one
    Arrow table, the partition columns ``cluster`` and ``date`` included (:func:`read_live`)."""
    _check_lake_table(table)
    store = object_store(root)
    if store is not None:
        return _read_objects(store, table, cluster=cluster, since=since, until=until,
                             columns=columns, filter=filter)
    local = _local(root)
    return read_live(lambda: list_files(local, table, cluster=cluster, since=since, until=until),
                     local, table, columns=columns, filter=filter)


def read_live(listing: Callable[[], list[Path]], root: Path | str, table: str, *,
              columns: list[str] | None = None, filter: ds.Expression | None = None) -> pa.Table:
    """Read the files ``listing()`` returns (of ``table`` under ``root``, Hive-partitioned) as one
    Arrow table in the table's schema plus ``cluster`` and ``date``.

    No file: an empty table with the right schema. A file that cannot be read (its footer, a
    newer major schema version, a page) is quarantined and the read goes on without it (module
    docstring). A file that vanishes between listing and reading (compaction deleted a source
    after publishing its merge; a batch replaced a result file) makes it list again: no row
    twice, none missed.
    """
    import pyarrow.dataset as ds

    base = str(table_dir(root, table))
    return _read_listed(
        table, listing, lambda paths: [c.path for c in check_files(paths)[0]],
        lambda files, schema: ds.dataset([str(f) for f in files], format="parquet", schema=schema,
                                         partitioning=_hive(), partition_base_dir=base),
        quarantine_unreadable, base, columns=columns, filter=filter)


def _hive() -> ds.Partitioning:
    import pyarrow.dataset as ds

    return ds.partitioning(pa.schema([("cluster", pa.string()), ("date", pa.string())]), flavor="hive")


def _read_listed(table: str, listing: Callable[[], list[Any]], check: Callable[[list[Any]], list[Any]],
                 open_dataset: Callable[[list[Any], pa.Schema], ds.Dataset],
                 quarantine_bad: Callable[[list[Any], BaseException], list[Quarantined]], where: str, *,
                 columns: list[str] | None, filter: ds.Expression | None) -> pa.Table:
    """The read of :func:`read_live` and :func:`read_objects`: list, check the footers
    (``check``), read the checked files as one dataset (``open_dataset``); list again when a
    file vanished, go on without the files ``quarantine_bad`` moved aside."""
    schema = TABLES[table].schema.append(pa.field("cluster", pa.string())).append(pa.field("date", pa.string()))
    last: Exception | None = None
    vanished = 0
    while vanished < _READ_ATTEMPTS:
        try:
            files = check(listing())
        except FileNotFoundError as exc:
            vanished, last = vanished + 1, exc
            continue
        if not files:
            empty = schema.empty_table()
            return empty.select(columns) if columns else empty
        try:
            return open_dataset(files, schema).to_table(columns=columns, filter=filter)
        except (pa.ArrowInvalid, OSError) as exc:
            if is_missing_file(exc):
                vanished, last = vanished + 1, exc
                continue
            if quarantine_bad(files, exc):
                continue  # one file fewer each time: this ends
            raise LakeError(f"cannot read {table} under {where}: {exc}") from exc
    raise LakeError(f"cannot read {table} under {where}: files kept vanishing ({last})")


def is_missing_file(exc: BaseException) -> bool:
    """Whether a read failed because a listed file no longer exists (pyarrow reports that as an
    OSError or an ArrowInvalid whose message says so)."""
    return isinstance(exc, FileNotFoundError) or "No such file" in str(exc) or "does not exist" in str(exc)


# --------------------------------------------------------------------------------------------
# object stores (module docstring)
# --------------------------------------------------------------------------------------------

def _object_folder(table: str, cluster: str, date: dt.date) -> str:
    """A partition folder relative to an object store's root (the names :func:`partition_dir` checks)."""
    partition_dir("/", table, cluster, date)  # the cluster name's check
    return f"{table}/cluster={cluster}/date={date.isoformat()}"


def _write_object(store: Store, table: Table, cluster: str, date: dt.date, data: pa.Table, prefix: str) -> str:
    """One lake file on an object store: its bytes complete in memory, put whole under the
    final key, then its commit marker (module docstring)."""
    folder = _object_folder(table.name, cluster, date)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    name = f"{prefix}-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
    data = data.replace_schema_metadata({**(data.schema.metadata or {}), **_metadata(table)})
    sink = pa.BufferOutputStream()
    pq.write_table(data, sink, compression="zstd")
    body = sink.getvalue().to_pybytes()
    store.put(f"{folder}/{name}", body)
    store.put(f"{folder}/{COMMIT_MARKER_PREFIX}{name}",
              json.dumps({"rows": data.num_rows, "bytes": len(body)}).encode())
    return store.url_of(f"{folder}/{name}")


def committed_names(names: Iterable[str]) -> list[str]:
    """Of one object-store folder's names, the Parquet files whose commit marker is there, sorted."""
    names = set(names)
    return sorted(n for n in names if n.endswith(".parquet") and not n.startswith((".", "_"))
                  and f"{COMMIT_MARKER_PREFIX}{n}" in names)


def object_date_folders(store: Store, table: str, cluster: str | Iterable[str] | None,
                         since: dt.date | None, until: dt.date | None) -> list[str]:
    """The ``<table>/cluster=…/date=…`` folders (relative to the root) of the given clusters and dates."""
    if cluster is None:
        clusters = [n.removeprefix("cluster=") for n in store.folders(table) if n.startswith("cluster=")]
    else:
        clusters = [cluster] if isinstance(cluster, str) else sorted(set(cluster))
    out: list[str] = []
    for c in clusters:
        for name in store.folders(f"{table}/cluster={c}"):
            try:
                day = dt.date.fromisoformat(name.removeprefix("date="))
            except ValueError:
                continue  # not a partition folder
            if (since is None or day >= since) and (until is None or day <= until):
                out.append(f"{table}/cluster={c}/{name}")
    return out


def _object_live(store: Store, folder: str) -> list[str]:
    """The live files of one object-store folder (relative paths): the committed ones, less the
    sources a committed compacted file names."""
    names = committed_names(store.names(folder))
    merged: set[str] = set()
    for n in names:
        if n.startswith(COMPACT_PREFIX):
            try:
                schema = pq.read_schema(store.path(f"{folder}/{n}"), filesystem=store.filesystem)
            except FileNotFoundError:
                continue
            raw = (schema.metadata or {}).get(COMPACTED_FROM_KEY)
            merged.update(json.loads(raw) if raw else [])
    return [f"{folder}/{n}" for n in names if n not in merged]


def object_store(root: Path | str | Store) -> Store | None:
    """The object store a lake root names (a :class:`~lagscope.storage.Store` opened with the
    settings' ``storage`` section, or an ``s3://`` URL opened with the defaults), or None for a
    local folder."""
    if isinstance(root, Store):
        return root if root.is_object_store else None
    return open_store(root) if is_object_url(root) else None


def _local(root: Path | str | Store) -> Path | str:
    return Path(root.base) if isinstance(root, Store) else root


def object_files(root: str | Store, table: str, *, cluster: str | Iterable[str] | None = None,
                 since: dt.date | None = None, until: dt.date | None = None) -> list[str]:
    """:func:`list_files` of a lake on an object store: the URLs of the live, committed files."""
    _check_lake_table(table)
    store = object_store(root)
    if store is None:
        raise LakeError(f"not an object store: {root!r}")
    return [store.url_of(f) for d in object_date_folders(store, table, cluster, since, until)
            for f in _object_live(store, d)]


def _read_objects(store: Store, table: str, *, cluster: str | Iterable[str] | None, since: dt.date | None,
                  until: dt.date | None, columns: list[str] | None, filter: ds.Expression | None) -> pa.Table:
    """:func:`read_live` of a lake on an object store: the committed live files as one table."""
    return read_objects(lambda: [f for d in object_date_folders(store, table, cluster, since, until)
                                 for f in _object_live(store, d)],
                        store, table, columns=columns, filter=filter)


def read_objects(listing: Callable[[], list[str]], store: Store, table: str, *,
                 columns: list[str] | None = None, filter: ds.Expression | None = None) -> pa.Table:
    """:func:`read_live` on an object store: the files ``listing()`` returns (paths relative to
    the store's root, of ``table``, Hive-partitioned) as one Arrow table in the table's schema
    plus ``cluster`` and ``date``. A file that cannot be read (its footer, a newer major schema
    version, a page) is quarantined (:func:`quarantine_object`) and the read goes on without it;
    a file deleted between listing and reading makes it list again."""
    import pyarrow.dataset as ds

    return _read_listed(
        table, listing, lambda rels: check_objects(store, rels)[0],
        lambda rels, schema: ds.dataset([store.path(f) for f in rels], format="parquet", schema=schema,
                                        filesystem=store.filesystem, partitioning=_hive(),
                                        partition_base_dir=store.path(table)),
        lambda rels, exc: _quarantine_unreadable_objects(store, rels, exc), store.url_of(table),
        columns=columns, filter=filter)


def check_objects(store: Store, rels: Iterable[str]) -> tuple[list[str], list[Quarantined]]:
    """:func:`check_files` on an object store: of the listed files (relative paths), those whose
    footer reads and whose schema version is not a newer major one (each footer read once per
    process: a file there is never rewritten under its name); the others are quarantined and
    returned second. A file gone since the listing raises FileNotFoundError: list again; a read
    the store itself fails (the network, a throttled store) raises :class:`LakeError` and
    quarantines nothing: the caller's step is retried later."""
    good, bad = _check_objects(store, rels)
    return [rel for rel, _ in good], bad


def checked_files(root: Path | str | Store, table: str, *, cluster: str | Iterable[str] | None = None,
                  since: dt.date | None = None, until: dt.date | None = None
                  ) -> tuple[list[CheckedFile], list[Quarantined]]:
    """The live files of a lake table (:func:`list_files`; on an object store the committed ones,
    :func:`object_files`) whose footers read, with their row counts, and those quarantined instead
    (:func:`check_files`, :func:`check_objects`). A file's ``path`` is its path in the root's
    filesystem: local, an absolute path; on an object store ``bucket/prefix/…`` (read it with the
    :class:`~lagscope.storage.Store`'s ``filesystem``). A file gone since the listing raises
    FileNotFoundError: list again."""
    _check_lake_table(table)
    store = object_store(root)
    if store is None:
        return check_files(list_files(_local(root), table, cluster=cluster, since=since, until=until))
    rels = [f for d in object_date_folders(store, table, cluster, since, until) for f in _object_live(store, d)]
    good, bad = _check_objects(store, rels)
    return [CheckedFile(Path(store.path(rel)), rows) for rel, rows in good], bad


def _check_objects(store: Store, rels: Iterable[str]) -> tuple[list[tuple[str, int]], list[Quarantined]]:
    """:func:`check_objects` with each good file's row count."""
    good: list[tuple[str, int]] = []
    bad: list[Quarantined] = []
    for rel in rels:
        key = (store.url_of(rel), -1, -1)
        known = _CHECKED.good.get(hash(key))
        if known is not None:
            good.append((rel, known))
            continue
        if key in _CHECKED.stuck:
            continue
        try:
            meta = pq.read_metadata(store.path(rel), filesystem=store.filesystem)
            rows, problem = int(meta.num_rows), _version_problem(meta.metadata)
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as exc:
            if is_missing_file(exc):
                raise FileNotFoundError(store.url_of(rel)) from exc
            rows, problem = _footer_from_bytes(store, rel)
        if problem is not None:
            got = quarantine_object(store, rel, problem)
            if got is not None:
                bad.append(got)
            continue
        _CHECKED.put_good(key, rows)
        good.append((rel, rows))
    return good, bad


def _footer_from_bytes(store: Store, rel: str) -> tuple[int, str | None]:
    """After a footer read failed: the object fetched whole and its footer parsed in memory, to
    tell the store's failure from the object's. The fetch failing (the network, a throttled or
    unavailable store) raises :class:`LakeError`: the object is kept and the step is retried
    later; the parse failing (a truncated object, not Parquet, a bad footer) is the object's
    problem (quarantine). Returns the rows and the problem (None: the object is good; the first
    failure was a passing one)."""
    try:
        data = store.get(rel)
    except FileNotFoundError:
        raise
    except (OSError, pa.ArrowException) as exc:
        if is_missing_file(exc):
            raise FileNotFoundError(store.url_of(rel)) from exc
        raise LakeError(f"cannot read {store.url_of(rel)} from the store (kept, not quarantined; "
                        f"the step is retried): {_one_line(exc)}") from exc
    try:
        meta = pq.read_metadata(pa.BufferReader(data))
    except (OSError, pa.ArrowException) as exc:
        return 0, f"unreadable Parquet footer: {_one_line(exc)}"
    return int(meta.num_rows), _version_problem(meta.metadata)


def _quarantine_unreadable_objects(store: Store, rels: list[str], error: BaseException) -> list[Quarantined]:
    """:func:`quarantine_unreadable` on an object store."""
    named = [r for r in rels if store.path(r) in str(error)]
    bad: list[Quarantined] = []
    for group in (named, [r for r in rels if r not in named]):
        for rel in group:
            try:
                pq.ParquetFile(store.filesystem.open_input_file(store.path(rel))).read()
            except FileNotFoundError:
                continue
            except (OSError, pa.ArrowException) as exc:
                if is_missing_file(exc):
                    continue
                got = quarantine_object(store, rel, f"unreadable Parquet data: {_one_line(exc)}")
                if got is not None:
                    bad.append(got)
        if bad:
            return bad
    return bad


def quarantine_in(root: Path | str | Store, path: Path | str, reason: str) -> Quarantined | None:
    """:func:`quarantine` of a file named by its path in ``root``'s filesystem (as
    :func:`checked_files` names it): a local file is renamed, an object store's file copied aside
    (:func:`quarantine_object`)."""
    store = object_store(root)
    if store is None:
        return quarantine(path, reason)
    return quarantine_object(store, str(path).removeprefix(store.base + "/"), reason)


def check_in(root: Path | str | Store, paths: Iterable[Path | str]) -> tuple[list[Path], list[Quarantined]]:
    """:func:`check_files` of files named by their paths in ``root``'s filesystem (an object
    store's: :func:`check_objects`): the good ones, and those quarantined instead."""
    store = object_store(root)
    if store is None:
        good, bad = check_files(paths)
        return [c.path for c in good], bad
    prefix = store.base + "/"
    rels, bad = check_objects(store, [str(p).removeprefix(prefix) for p in paths])
    return [Path(store.path(r)) for r in rels], bad


def quarantine_unreadable_in(root: Path | str | Store, paths: Iterable[Path | str],
                             error: BaseException | None = None) -> list[Quarantined]:
    """:func:`quarantine_unreadable` of files named by their paths in ``root``'s filesystem."""
    store = object_store(root)
    if store is None:
        return quarantine_unreadable(paths, error)
    prefix = store.base + "/"
    return _quarantine_unreadable_objects(store, [str(p).removeprefix(prefix) for p in paths],
                                          error if error is not None else LakeError(""))


def quarantine_object(store: Store, rel: str, reason: str) -> Quarantined | None:
    """:func:`quarantine` on an object store: the file is copied to
    ``<table>/_quarantine/<its path under the table>``, then its commit marker and the file are
    deleted (no rename there: a crash in between leaves the copy beside a file the next reader
    quarantines again, under a new name). Logged in one warning line and counted."""
    table, _, under = rel.partition("/")
    cluster = next((p.removeprefix("cluster=") for p in under.split("/") if p.startswith("cluster=")), "")
    reason = " ".join(reason.split())
    folder, _, name = rel.rpartition("/")
    dest = f"{table}/{QUARANTINE_DIR}/{under}"
    taken = set(store.names(dest.rpartition("/")[0]))
    for n in range(1, 1000):
        if dest.rpartition("/")[2] not in taken:
            break
        stem = name.removesuffix(".parquet")
        dest = f"{dest.rpartition('/')[0]}/{stem}.{n}.parquet"  # a second bad file of the same name
    try:
        store.filesystem.copy_file(store.path(rel), store.path(dest))
        store.delete(f"{folder}/{COMMIT_MARKER_PREFIX}{name}")
        store.delete(rel)
    except FileNotFoundError:
        return None
    except OSError as exc:
        key = (store.url_of(rel), -1, -1)
        if key in _CHECKED.stuck:
            return _CHECKED.stuck[key]
        got = Quarantined(Path(store.path(rel)), table, reason, None)
        _CHECKED.put_stuck(key, got)
        QUARANTINED.add(cluster, table)
        log.warning("unreadable file %s (table %s): %s; it could not be moved into quarantine (%s): "
                    "left out of this process's reads", store.url_of(rel), table, reason, _one_line(exc))
        return got
    QUARANTINED.add(cluster, table)
    log.warning("quarantined %s (table %s): %s; moved to %s", store.url_of(rel), table, reason, store.url_of(dest))
    return Quarantined(Path(store.path(rel)), table, reason, Path(store.path(dest)))
