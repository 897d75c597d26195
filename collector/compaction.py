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

The guarantee — a reader that lists a folder with :func:`lagscope.lake.live_files` (as every
reader of the lake does: :func:`lagscope.lake.list_files`, :func:`lagscope.lake.read_table`)
never sees a row twice and never misses one:

- if its listing contains the compacted file, the sources it names are excluded (no duplicate);
- if its listing was taken before step 2, it holds the sources; if one was deleted before
  the reader opened it, the read fails with FileNotFoundError and the reader lists again,
  now finding the compacted file (no loss).

Engines that list folders themselves (Spark, DuckDB) would see both between steps 2 and 3
(until the next run, after a crash there); give them ``lagscope.lake.list_files(...)`` as their
file list, as the analytics and the app do.

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
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lagscope.errors import LakeError
from lagscope.lake import (
    COMMIT_MARKER_PREFIX,
    COMPACT_PREFIX,
    COMPACTED_FROM_KEY,
    check_files,
    committed_names,
    compacted_sources,
    is_missing_file,
    object_date_folders,
    object_store,
    quarantine_unreadable,
    table_dir,
    visible_names,
)
from lagscope.schema import SAMPLE_TABLES, SCHEMA_VERSION
from lagscope.storage import Store

__all__ = ["CompactionResult", "compact_folder", "compact_lake", "compact_object_folder"]

log = logging.getLogger(__name__)

_SOURCE = re.compile(r"^part-(\d{8}T\d{2})\d{4}\d*-[0-9a-f]+\.parquet$")
#: how long after its bucket closed an object without a commit marker is taken for a killed writer's (s)
_ORPHAN_AGE_S = 3600.0
#: a compacted file's name: its hour bucket
_COMPACTED = re.compile(r"^compact-(\d{8}T\d{2})-[0-9a-f]+\.parquet$")


@dataclass(frozen=True)
class CompactionResult:
    buckets: int = 0
    files_in: int = 0
    files_out: int = 0
    orphans_removed: int = 0

    def __add__(self, other: CompactionResult) -> CompactionResult:
        return CompactionResult(self.buckets + other.buckets, self.files_in + other.files_in,
                                self.files_out + other.files_out, self.orphans_removed + other.orphans_removed)


def compact_folder(folder: Path, *, now: dt.datetime, grace_s: float = 120.0, min_files: int = 2) -> CompactionResult:
    """Compact every closed hour bucket of one partition folder; remove orphaned sources."""
    names = visible_names(folder)
    orphans = 0
    # finish step 3 of an interrupted run: sources named by a visible compacted file
    for n in names:
        if n.startswith(COMPACT_PREFIX):
            for src in compacted_sources(folder / n):
                if src in names:
                    (folder / src).unlink(missing_ok=True)
                    orphans += 1
    names = visible_names(folder)
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
        # an unreadable source goes into quarantine (lagscope.lake.quarantine), not into the merge
        sources = [c.path.name for c in check_files(folder / n for n in sources)[0]]
        if len(sources) < min_files:
            continue
        try:
            _merge(folder, hour, sorted(sources))
        except (OSError, pa.ArrowException) as exc:
            if is_missing_file(exc) or not quarantine_unreadable([folder / n for n in sources], exc):
                raise
            continue  # a source failed past its footer and is in quarantine: the next run merges the rest
        result = result + CompactionResult(buckets=1, files_in=len(sources), files_out=1)
    return result


def _merge(folder: Path, hour: str, sources: list[str]) -> Path:
    name = f"{COMPACT_PREFIX}{hour}-{uuid.uuid4().hex[:12]}.parquet"
    final = folder / name
    tmp = folder / f".tmp-{name}"
    try:
        with tmp.open("wb") as fh:
            _write_merged(fh, [str(folder / s) for s in sources], hour, None)
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


def _write_merged(sink: Any, paths: list[str], hour: str, filesystem: Any) -> None:
    """Write the sources' rows, one source in memory at a time, as one Parquet file into ``sink``,
    its metadata naming the sources (their base names)."""
    first = pq.read_schema(paths[0], filesystem=filesystem)
    meta = dict(first.metadata or {})
    meta[COMPACTED_FROM_KEY] = json.dumps([p.rsplit("/", 1)[-1] for p in paths]).encode()
    # the union of the sources' columns: an hour may hold files from before a column was added
    schema = pa.unify_schemas([first, *(pq.read_schema(p, filesystem=filesystem) for p in paths[1:])]
                              ).with_metadata(meta)
    with pq.ParquetWriter(sink, schema, compression="zstd") as writer:
        for src in paths:
            table = pq.read_table(src, filesystem=filesystem)
            src_version = (table.schema.metadata or {}).get(b"lagscope.schema_version")
            if src_version != str(SCHEMA_VERSION).encode():
                raise LakeError(f"{src}: schema version {src_version!r}, "
                                f"expected {SCHEMA_VERSION}; not compacting {hour}")
            missing = [f for f in schema if f.name not in table.column_names]
            for f in missing:  # a column added after this file was written: null
                table = table.append_column(f, pa.nulls(table.num_rows, f.type))
            writer.write_table(table.select(schema.names).cast(schema))


def compact_object_folder(store: Store, folder: str, *, now: dt.datetime, grace_s: float = 120.0,
                          min_files: int = 2) -> CompactionResult:
    """:func:`compact_folder` on an object store (``folder`` relative to its root), where a file
    is visible by its commit marker (:mod:`lagscope.lake`)::

        1. merge the bucket's committed sources into one object, built whole in memory, put
           under its final key                 ← no marker: no reader lists it
        2. put its commit marker                ← from here readers use it and skip the sources
        3. per source: delete its marker, then its object
                                                ← a crash here leaves orphans; the next run
                                                  deletes them, readers skip them meanwhile

    Each run also deletes what a killed writer left: the objects without a marker of a closed
    hour bucket (a writer puts its marker right after its object), and markers whose object is
    gone (a removal stopped between its two deletes). An object without a marker is deleted only
    an hour after its bucket closed, so that no writer still between its two puts loses it."""
    names = store.names(folder)
    committed = committed_names(names)
    orphans = 0

    def remove(name: str) -> None:
        store.delete(f"{folder}/{COMMIT_MARKER_PREFIX}{name}")
        store.delete(f"{folder}/{name}")

    for n in committed:
        if n.startswith(COMPACT_PREFIX):
            schema = pq.read_schema(store.path(f"{folder}/{n}"), filesystem=store.filesystem)
            raw = (schema.metadata or {}).get(COMPACTED_FROM_KEY)
            for src in json.loads(raw) if raw else []:
                if src in names:
                    remove(src)
                    orphans += 1
    names = store.names(folder)
    for n in names:
        if n.startswith(COMMIT_MARKER_PREFIX) and n.removeprefix(COMMIT_MARKER_PREFIX) not in names:
            store.delete(f"{folder}/{n}")  # its object is gone
            orphans += 1
        m = _SOURCE.match(n) or _COMPACTED.match(n)
        if m and f"{COMMIT_MARKER_PREFIX}{n}" not in names and _closed(m.group(1), now, grace_s + _ORPHAN_AGE_S):
            store.delete(f"{folder}/{n}")  # never committed: its writer was killed
            orphans += 1
    buckets: dict[str, list[str]] = defaultdict(list)
    for n in committed_names(store.names(folder)):
        m = _SOURCE.match(n)
        if m:
            buckets[m.group(1)].append(n)
    result = CompactionResult(orphans_removed=orphans)
    for hour, sources in sorted(buckets.items()):
        if not _closed(hour, now, grace_s) or len(sources) < min_files:
            continue
        name = f"{COMPACT_PREFIX}{hour}-{uuid.uuid4().hex[:12]}.parquet"
        sink = pa.BufferOutputStream()
        _write_merged(sink, [store.path(f"{folder}/{s}") for s in sorted(sources)], hour, store.filesystem)
        body = sink.getvalue().to_pybytes()
        store.put(f"{folder}/{name}", body)                                          # 1
        store.put(f"{folder}/{COMMIT_MARKER_PREFIX}{name}",                          # 2
                  json.dumps({"bytes": len(body), "sources": len(sources)}).encode())
        for src in sources:                                                          # 3
            remove(src)
        log.info("compacted %d files of %s into %s", len(sources), hour, store.url_of(f"{folder}/{name}"))
        result = result + CompactionResult(buckets=1, files_in=len(sources), files_out=1)
    return result


def _closed(hour: str, now: dt.datetime, grace_s: float) -> bool:
    """Whether the hour bucket ``YYYYmmddTHH`` is closed at ``now`` (``grace_s`` after its end)."""
    start = dt.datetime.strptime(hour, "%Y%m%dT%H").replace(tzinfo=dt.UTC)
    return now >= start + dt.timedelta(hours=1, seconds=grace_s)


def compact_lake(root: Path | str | Store, *, now: dt.datetime | None = None, grace_s: float = 120.0,
                 min_files: int = 2, tables: list[str] | None = None) -> CompactionResult:
    """Compact every sample table's partition folders under ``root`` (a local folder, or an
    object store: :func:`compact_object_folder`)."""
    now = now or dt.datetime.now(dt.UTC)
    total = CompactionResult()
    store = object_store(root)
    if store is not None:
        for table in tables or sorted(SAMPLE_TABLES):
            for folder in object_date_folders(store, table, None, None, None):
                try:
                    total = total + compact_object_folder(store, folder, now=now, grace_s=grace_s,
                                                          min_files=min_files)
                except (OSError, LakeError, pa.ArrowException) as exc:
                    log.error("compaction of %s failed (sources kept): %s", store.url_of(folder), exc)
        return total
    root = Path(root.base) if isinstance(root, Store) else root
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
