"""Read the sample lake by time, exactly, while the collector writes and compacts it.

    >>> offsets = read("lake", "offsets", cluster="prod",
    ...                start=dt.datetime(2026, 1, 1, tzinfo=dt.UTC))        # doctest: +SKIP
    >>> files = list_files("lake", "offsets", cluster="prod")              # for Spark  # doctest: +SKIP

The files are the partition folders' live files (:func:`lagscope.lake.live_files`: sources
already merged into a compacted file are skipped) and a file that vanishes between listing and
reading makes the read list again (:func:`lagscope.lake.read_table`), so a read never returns a
row twice and never misses one. The partition columns ``cluster`` and ``date`` are included.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds

from lagscope import lake
from lagscope.errors import LakeError
from lagscope.schema import SAMPLE_TABLES
from lagscope.storage import Store

__all__ = ["list_files", "read"]

#: the column each table's date partition is taken from, where it is not the first timestamp
#: column (the commit-log tables: their commit_ts / state_ts are null for tombstones and more)
_TIME_COLUMN = {"commits": "record_ts", "group_events": "record_ts", "batch_probes": "commit_ts"}


def _utc_date(when: dt.datetime | None) -> dt.date | None:
    """The UTC date of ``when``; a naive time is UTC (as pyarrow reads it in the row filter)."""
    if when is None:
        return None
    return (when.replace(tzinfo=dt.UTC) if when.tzinfo is None else when.astimezone(dt.UTC)).date()


def list_files(root: Path | str, table: str, *, cluster: str | Iterable[str] | None = None,
               start: dt.datetime | None = None, end: dt.datetime | None = None) -> list[Path]:
    """The live files of ``table`` whose date partitions ``start … end`` touch, for any engine."""
    return lake.list_files(root, table, cluster=cluster, since=_utc_date(start), until=_utc_date(end))


def read(root: Path | str | Store, table: str, *, cluster: str | Iterable[str] | None = None,
         start: dt.datetime | None = None, end: dt.datetime | None = None,
         columns: list[str] | None = None) -> pa.Table:
    """Rows of ``table`` (``start <= ts <= end`` when given, on the column its date partition comes
    from: ``record_ts`` for commits and group_events, else the table's first timestamp column)."""
    spec = SAMPLE_TABLES.get(table)
    if spec is None:
        raise LakeError(f"unknown lake table {table!r}; known: {', '.join(sorted(SAMPLE_TABLES))}")
    ts_col = _TIME_COLUMN.get(table) or next(f.name for f in spec.schema if pa.types.is_timestamp(f.type))
    ts_type = spec.schema.field(ts_col).type
    expr: ds.Expression | None = None
    if start is not None:
        expr = ds.field(ts_col) >= pa.scalar(start, type=ts_type)
    if end is not None:
        e = ds.field(ts_col) <= pa.scalar(end, type=ts_type)
        expr = e if expr is None else expr & e
    return lake.read_table(root, table, cluster=cluster, since=_utc_date(start), until=_utc_date(end),
                           columns=columns, filter=expr)
