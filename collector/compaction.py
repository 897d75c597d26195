"""Compaction of the sample lake: one file per closed hour per partition folder, safe for readers.

A 15 s sweep writes three small files (offsets, members, sweeps) per cluster; a day would be
17,280 files. Compaction merges the sweep files of each *closed* hour bucket of a partition
folder (``<table>/cluster=<c>/date=<d>/``) into one ``compact-<YYYYmmddTHH>-<id>.parquet``.

Protocol (each step atomic on a POSIX file system)::

    1. stream the bucket's source files, one at a time, into a hidden ``.tmp-compact-…`` file
       whose Parquet metadata lists the sources (``lagscope.compacted_from``); fsync
    2. rename it into place                  ← from here readers use it and skip the sources
    3. delete the sources                    ← a crash here leaves orphans; the next run
                                               deletes them, readers skip them meanwhile

The guarantee — a reader that lists a folder with :func:`live_files` (or reads with
:mod:`lagscope.collector.reader`) never sees a row twice and never misses one:

- if its listing contains the compacted file, the sources it names are excluded (no duplicate);
- if its listing was taken before step 2, it holds the sources; if one was deleted before
  the reader opened it, the read fails with FileNotFoundError and the reader lists again,
  now finding the compacted file (no loss).

Engines that list folders themselves (Spark, DuckDB) would see both between steps 2 and 3
(until the next run, after a crash there); give them ``live_files(...)`` as their file list, as
the analytics (``partition_files``) and the app do.

Bucket = the hour of the write stamp in the source file's name (``part-YYYYmmddTHHMMSS…``,
see :func:`lagscope.lake.write_table`). A bucket is closed ``grace_s`` after its hour ends;
a late file in an already compacted hour is compacted with its peers on a later run (or
stays a single file).

    >>> compact_lake(root, now=dt.datetime.now(dt.UTC))   # doctest: +SKIP
    CompactionResult(buckets=3, files_in=720, files_out=3, orphans_removed=0)
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import uuid
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from lagscope.errors import LakeError
from lagscope.lake import table_dir
from lagscope.schema import SAMPLE_TABLES, SCHEMA_VERSION

__all__ = ["COMPACTED_FROM_KEY", "CompactionResult", "compact_folder", "compact_lake", "live_files"]

log = logging.getLogger(__name__)

COMPACTED_FROM_KEY = b"lagscope.compacted_from"
_SOURCE = re.compile(r"^part-(\d{8}T\d{2})\d{4}\d*-[0-9a-f]+\.parquet$")
_COMPACT_PREFIX = "compact-"


@dataclass(frozen=True)
class CompactionResult:
    buckets: int = 0
    files_in: int = 0
    files_out: int = 0
    orphans_removed: int = 0

    def __add__(self, other: CompactionResult) -> CompactionResult:
        return CompactionResult(self.buckets + other.buckets, self.files_in + other.files_in,
                                self.files_out + other.files_out, self.orphans_removed + other.orphans_removed)


def _visible_parquet(folder: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if n.endswith(".parquet") and not n.startswith((".", "_")))
    except FileNotFoundError:
        return []


def _sources_of(path: Path) -> list[str]:
    meta = pq.read_schema(path).metadata or {}
    raw = meta.get(COMPACTED_FROM_KEY)
    return list(json.loads(raw)) if raw else []


def live_files(folder: Path) -> list[Path]:
    """The files of one partition folder a reader should read: sources already merged into a
    visible compacted file are excluded (see the module docstring for the guarantee)."""
    names = _visible_parquet(folder)
    merged: set[str] = set()
    for n in names:
        if n.startswith(_COMPACT_PREFIX):
            try:
                merged.update(_sources_of(folder / n))
            except FileNotFoundError:
                continue
    return [folder / n for n in names if n not in merged]


def compact_folder(folder: Path, *, now: dt.datetime, grace_s: float = 120.0, min_files: int = 2) -> CompactionResult:
    """Compact every closed hour bucket of one partition folder; remove orphaned sources."""
    names = _visible_parquet(folder)
    orphans = 0
    # finish step 3 of an interrupted run: sources named by a visible compacted file
    for n in names:
        if n.startswith(_COMPACT_PREFIX):
            for src in _sources_of(folder / n):
                if src in names:
                    (folder / src).unlink(missing_ok=True)
                    orphans += 1
    names = _visible_parquet(folder)
    buckets: dict[str, list[str]] = defaultdict(list)
    for n in names:
        m = _SOURCE.match(n)
        if m:
            buckets[m.group(1)].append(n)
    result = CompactionResult(orphans_removed=orphans)
    for hour, sources in sorted(buckets.items()):
        start = dt.datetime.strptime(hour, "%Y%m%dT%H").replace(tzinfo=dt.UTC)
        if now < start + dt.timedelta(hours=1, seconds=grace_s) or len(sources) < min_files:
            continue
        _merge(folder, hour, sorted(sources))
        result = result + CompactionResult(buckets=1, files_in=len(sources), files_out=1)
    return result


def _merge(folder: Path, hour: str, sources: list[str]) -> Path:
    name = f"{_COMPACT_PREFIX}{hour}-{uuid.uuid4().hex[:12]}.parquet"
    final = folder / name
    tmp = folder / f".tmp-{name}"
    first = pq.read_schema(folder / sources[0])
    meta = dict(first.metadata or {})
    meta[COMPACTED_FROM_KEY] = json.dumps(sources).encode()
    # the union of the sources' columns: an hour may hold files from before a column was added
    schema = pa.unify_schemas([first, *(pq.read_schema(folder / s) for s in sources[1:])]).with_metadata(meta)
    try:
        with tmp.open("wb") as fh:
            with pq.ParquetWriter(fh, schema, compression="zstd") as writer:
                for src in sources:  # one source in memory at a time
                    table = pq.read_table(folder / src)
                    src_version = (table.schema.metadata or {}).get(b"lagscope.schema_version")
                    if src_version != str(SCHEMA_VERSION).encode():
                        raise LakeError(f"{folder / src}: schema version {src_version!r}, "
                                        f"expected {SCHEMA_VERSION}; not compacting {hour}")
                    missing = [f for f in schema if f.name not in table.column_names]
                    for f in missing:  # a column added after this file was written: null
                        table = table.append_column(f, pa.nulls(table.num_rows, f.type))
                    writer.write_table(table.select(schema.names).cast(schema))
            fh.flush()
            os.fsync(fh.fileno())
        tmp.rename(final)  # step 2: readers now skip the sources
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    for src in sources:  # step 3
        (folder / src).unlink(missing_ok=True)
    log.info("compacted %d files of %s into %s", len(sources), hour, final)
    return final


def compact_lake(root: Path | str, *, now: dt.datetime | None = None, grace_s: float = 120.0,
                 min_files: int = 2, tables: list[str] | None = None) -> CompactionResult:
    """Compact every sample table's partition folders under ``root``."""
    now = now or dt.datetime.now(dt.UTC)
    total = CompactionResult()
    for table in tables or sorted(SAMPLE_TABLES):
        base = table_dir(root, table)
        if not base.is_dir():
            continue
        for cluster_dir in sorted(base.glob("cluster=*")):
            for date_dir in sorted(cluster_dir.glob("date=*")):
                try:
                    total = total + compact_folder(date_dir, now=now, grace_s=grace_s, min_files=min_files)
                except (OSError, LakeError, pa.ArrowException) as exc:
                    log.error("compaction of %s failed (sources kept): %s", date_dir, exc)
    return total
