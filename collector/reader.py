"""Read the sample lake exactly, while the collector writes and compacts it.

    >>> offsets = read("lake", "offsets", cluster="prod",
    ...                start=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))        # doctest: +SKIP
    >>> files = list_files("lake", "offsets", cluster="prod")              # for Spark  # doctest: +SKIP

:func:`read` lists each partition folder with :func:`lagscope.collector.compaction.live_files`
(sources already merged into a compacted file are skipped) and, if a file vanishes between
listing and reading (compaction deleted it after publishing its merge), lists again. So it
never returns a row twice and never misses one (see :mod:`lagscope.collector.compaction`).
The partition columns ``cluster`` and ``date`` are included, as with :func:`lagscope.lake.read_table`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from lagscope.collector.compaction import live_files
from lagscope.errors import LakeError
from lagscope.lake import table_dir
from lagscope.schema import TABLES

__all__ = ["list_files", "read"]

_RETRIES = 5

#: the column each table's date partition is taken from, where it is not the first timestamp
#: column (the commit-log tables: their commit_ts / state_ts are null for tombstones and more)
_TIME_COLUMN = {"commits": "record_ts", "group_events": "record_ts"}


def _utc(when: dt.datetime) -> dt.datetime:
    """``when`` in UTC; a naive time is UTC (as pyarrow reads it in the row filter), not local."""
    return when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)


def _dates(start: dt.datetime | None, end: dt.datetime | None, folder: Path) -> bool:
    day = dt.date.fromisoformat(folder.name.removeprefix("date="))
    if start is not None and day < _utc(start).date():
        return False
    return not (end is not None and day > _utc(end).date())


def list_files(root: Path | str, table: str, *, cluster: str | Iterable[str] | None = None,
               start: dt.datetime | None = None, end: dt.datetime | None = None) -> list[Path]:
    """The live files of ``table`` (optionally of some clusters and dates), for any engine."""
    if table not in TABLES:
        raise LakeError(f"unknown lake table {table!r}; known: {', '.join(sorted(TABLES))}")
    base = table_dir(root, table)
    names = None if cluster is None else ({cluster} if isinstance(cluster, str) else set(cluster))
    files: list[Path] = []
    for cdir in sorted(base.glob("cluster=*")):
        if names is not None and cdir.name.removeprefix("cluster=") not in names:
            continue
        for ddir in sorted(cdir.glob("date=*")):
            try:
                keep = _dates(start, end, ddir)
            except ValueError:
                continue
            if keep:
                files.extend(live_files(ddir))
    return files


def _schema(table: str) -> pa.Schema:
    spec = TABLES[table]
    return spec.schema.append(pa.field("cluster", pa.string())).append(pa.field("date", pa.string()))


def read(root: Path | str, table: str, *, cluster: str | Iterable[str] | None = None,
         start: dt.datetime | None = None, end: dt.datetime | None = None,
         columns: list[str] | None = None) -> pa.Table:
    """Rows of ``table`` (``start <= ts <= end`` when given, on the column its date partition comes
    from: ``record_ts`` for commits and group_events, else the table's first timestamp column)."""
    schema = _schema(table) if table in TABLES else None
    if schema is None:
        raise LakeError(f"unknown lake table {table!r}; known: {', '.join(sorted(TABLES))}")
    ts_col = _TIME_COLUMN.get(table) or next(f.name for f in TABLES[table].schema if pa.types.is_timestamp(f.type))
    expr: ds.Expression | None = None
    if start is not None:
        expr = ds.field(ts_col) >= pa.scalar(start, type=schema.field(ts_col).type)
    if end is not None:
        e = ds.field(ts_col) <= pa.scalar(end, type=schema.field(ts_col).type)
        expr = e if expr is None else expr & e
    partitioning = ds.partitioning(pa.schema([("cluster", pa.string()), ("date", pa.string())]), flavor="hive")
    last: Exception | None = None
    for _ in range(_RETRIES):
        files = list_files(root, table, cluster=cluster, start=start, end=end)
        if not files:
            empty = schema.empty_table()
            return empty.select(columns) if columns else empty
        try:
            dataset = ds.dataset([str(f) for f in files], format="parquet", schema=schema,
                                 partitioning=partitioning, partition_base_dir=str(table_dir(root, table)))
            return dataset.to_table(columns=columns, filter=expr)
        except (FileNotFoundError, pa.ArrowInvalid, OSError) as exc:
            if not _is_missing(exc):
                raise LakeError(f"cannot read lake table {table}: {exc}") from exc
            last = exc  # compaction removed a source after we listed it: list again
    raise LakeError(f"cannot read lake table {table}: files kept vanishing ({last})")


def _is_missing(exc: Exception) -> bool:
    return isinstance(exc, FileNotFoundError) or "No such file" in str(exc) or "does not exist" in str(exc)
