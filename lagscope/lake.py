"""Read and write the lake: Parquet files, Hive-partitioned by cluster and date, written atomically.

    >>> path = write_rows(root, OFFSETS, "prod", rows)          # doctest: +SKIP
    >>> table = read_table(root, "offsets", cluster="prod")     # doctest: +SKIP

Atomicity: a file is written under a hidden name (``.tmp-…``, which Spark, DuckDB and
pyarrow all skip) in its final folder, flushed to disk and renamed into place. A crash leaves
at most a hidden temporary file, never half a visible one. See :mod:`lagscope.schema` for the
tables and the layout.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from lagscope.errors import LakeError
from lagscope.schema import SCHEMA_VERSION, TABLES, Table

if TYPE_CHECKING:  # pyarrow.dataset imports pandas (seconds): only readers pay for it
    import pyarrow.dataset as ds

__all__ = [
    "SCHEMA_VERSION_KEY",
    "check_schema_version",
    "file_metadata",
    "partition_dir",
    "read_table",
    "table_dir",
    "write_rows",
    "write_table",
]

_TMP_PREFIX = ".tmp-"

#: the Parquet key-value metadata key of the schema version a file was written with
SCHEMA_VERSION_KEY = b"lagscope.schema_version"


def table_dir(root: Path | str, table: str) -> Path:
    return Path(root) / table


def partition_dir(root: Path | str, table: str, cluster: str, date: dt.date) -> Path:
    """``<root>/<table>/cluster=<cluster>/date=<YYYY-MM-DD>``."""
    if not cluster or "/" in cluster or cluster.startswith("."):
        raise LakeError(f"invalid cluster name for a lake partition: {cluster!r}")
    return table_dir(root, table) / f"cluster={cluster}" / f"date={date.isoformat()}"


def file_metadata(table: Table) -> dict[bytes, bytes]:
    """The key-value metadata every lagscope Parquet file carries (lake and result tables)."""
    return {SCHEMA_VERSION_KEY: str(SCHEMA_VERSION).encode(), b"lagscope.table": table.name.encode()}


_metadata = file_metadata


def _major(version: str | int) -> int:
    return int(str(version).strip().split(".")[0])


def check_schema_version(metadata: Mapping[bytes, bytes] | None, path: str | Path) -> None:
    """Raise :class:`LakeError` when a file was written with a newer *major* schema version
    than this lagscope's :data:`~lagscope.schema.SCHEMA_VERSION` (its columns may mean something
    else). Files without the key (written before it existed, or by another tool) are accepted."""
    raw = (metadata or {}).get(SCHEMA_VERSION_KEY)
    if raw is None:
        return
    text = raw.decode(errors="replace")
    try:
        major = _major(text)
    except ValueError:
        raise LakeError(f"{path}: unreadable lagscope.schema_version {text!r}") from None
    if major > _major(SCHEMA_VERSION):
        table = (metadata or {}).get(b"lagscope.table", b"?").decode(errors="replace")
        raise LakeError(f"{path}: written with lake schema version {text} (table {table}), newer than the "
                        f"{SCHEMA_VERSION} this lagscope reads; upgrade lagscope to read it")


def write_table(root: Path | str, table: Table, cluster: str, data: pa.Table,
                *, date: dt.date | None = None, prefix: str = "part") -> Path:
    """Write ``data`` (conforming to ``table.schema``) as one new file of one partition.

    The date partition is ``date`` or, if omitted, the UTC date of the first timestamp column.
    Returns the final path. Raises :class:`LakeError` when the data does not fit the schema.
    """
    try:
        data = data.select(table.schema.names).cast(table.schema)
    except (KeyError, pa.ArrowInvalid, pa.ArrowTypeError, ValueError) as exc:
        raise LakeError(f"rows do not fit the {table.name} schema: {exc}") from exc
    if date is None:
        date = _first_date(table, data)
    folder = partition_dir(root, table.name, cluster, date)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    name = f"{prefix}-{stamp}-{uuid.uuid4().hex[:8]}.parquet"
    final = folder / name
    tmp = folder / f"{_TMP_PREFIX}{name}"
    data = data.replace_schema_metadata({**(data.schema.metadata or {}), **_metadata(table)})
    try:
        with tmp.open("wb") as fh:
            pq.write_table(data, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        tmp.rename(final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return final


def write_rows(root: Path | str, table: Table, cluster: str,
               rows: Sequence[Mapping[str, Any]], *, date: dt.date | None = None) -> Path | None:
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


def read_table(root: Path | str, table: str, *, cluster: str | Iterable[str] | None = None,
               columns: list[str] | None = None,
               filter: ds.Expression | None = None) -> pa.Table:
    """Read a lake table (all clusters and dates unless filtered) as one Arrow table.

    Partition columns ``cluster`` and ``date`` are included. An absent table reads as an empty
    table with the right schema. A file written with a newer major schema version raises
    :class:`LakeError` (see :func:`check_schema_version`) rather than being misread.
    """
    import pyarrow.dataset as ds

    spec = TABLES.get(table)
    if spec is None:
        raise LakeError(f"unknown lake table {table!r}; known: {', '.join(sorted(TABLES))}")
    partitioning = ds.partitioning(pa.schema([("cluster", pa.string()), ("date", pa.string())]),
                                   flavor="hive")
    full_schema = spec.schema.append(pa.field("cluster", pa.string())).append(
        pa.field("date", pa.string()))
    folder = table_dir(root, table)
    if not folder.exists():
        empty = full_schema.empty_table()
        return empty.select(columns) if columns else empty
    dataset = ds.dataset(folder, format="parquet", partitioning=partitioning, schema=full_schema,
                         exclude_invalid_files=False)
    expr = filter
    if cluster is not None:
        names = [cluster] if isinstance(cluster, str) else list(cluster)
        c = ds.field("cluster").isin(names)
        expr = c if expr is None else expr & c
    try:
        for fragment in dataset.get_fragments(filter=expr):  # footers only: the version check
            check_schema_version(fragment.physical_schema.metadata, fragment.path)
        return dataset.to_table(columns=columns, filter=expr)
    except (pa.ArrowInvalid, OSError) as exc:
        raise LakeError(f"cannot read lake table {table} under {folder}: {exc}") from exc
