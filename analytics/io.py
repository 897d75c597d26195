"""I/O at the edges: the lake's files a step reads, the result tables it writes, the checkpoint.

Results are written like the lake (``<results>/<table>/cluster=…/date=…/*.parquet``): each task
of a step stages its files in a hidden folder (``<results>/.staging/<table>-…``), then the
driver publishes them, in the protocol that :mod:`lagscope.results` (every reader) honours:

- an incremental step (:func:`publish_incremental`) renames its files into their partitions as
  ``inc-<from>-<to>-NNNNN`` and deletes the files of an earlier attempt at the step from the same
  watermark (a crash between publishing and checkpointing; the redo may end later); the step's
  files become visible when :func:`write_checkpoint` moves the watermark to ``to``;
- a provisional step (:func:`publish_provisional`) over ``[watermark, to)`` renames its files in
  as ``pre-<from>-<to>-NNNNN``, names itself in ``_state/provisional.json`` (the files become
  visible, those of the provisional step before it hidden) and deletes the other ``pre-`` files;
  it writes no state and leaves the checkpoint alone. The next full step hides them by moving the
  watermark, then deletes them (:func:`drop_provisional`);
- a batch (:func:`publish_batch`) marks itself ``moving`` (its files hidden), renames them in as
  ``batch-<since>-<until>-<run>-NNNNN``, marks itself ``replacing`` (visible; the files it
  replaces hidden), deletes every other file of the partitions it wrote and marks itself
  ``done``. A publish interrupted in between is rolled back (moving) or finished (replacing) by
  the next one (:func:`recover_publish`); meanwhile readers see the state before it or after it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lagscope.errors import LakeError
from lagscope.lake import date_folders, file_metadata, object_date_folders, object_store, visible_names
from lagscope.results import (
    is_provisional,
    pre_tag,
    read_publish_state,
    state_dir,
    write_provisional_marker,
    write_publish_state,
)
from lagscope.retention import checkpoint_file
from lagscope.schema import RESULT_TABLES, TABLES
from lagscope.storage import Store

__all__ = [
    "Checkpoint",
    "drop_provisional",
    "new_staging",
    "publish_batch",
    "publish_incremental",
    "publish_provisional",
    "read_checkpoint",
    "recover_publish",
    "spark_arrow_schema",
    "spark_schema",
    "stage_arrow",
    "stage_objects",
    "write_checkpoint",
]


def spark_arrow_schema(table: str) -> pa.Schema:
    """The Arrow schema a reader gets for a lake or result table: its columns (all nullable, as
    Spark reads them) plus the ``cluster`` and ``date`` partition strings."""
    return pa.schema([pa.field(f.name, f.type) for f in TABLES[table].schema]
                     + [pa.field("cluster", pa.string()), pa.field("date", pa.string())])


def spark_schema(table: str, *, with_partitions: bool = True) -> Any:
    """The Spark schema (``StructType``) of a lake or result table (plus ``cluster`` and ``date``
    strings), for DataFrames of the lake's rows."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schema: pa.Schema = TABLES[table].schema
    if with_partitions:
        schema = schema.append(pa.field("cluster", pa.string())).append(pa.field("date", pa.string()))
    return from_arrow_schema(schema)


def _move_in(staging: Path, results: Path, table: str, tag: str) -> dict[Path, set[str]]:
    """Rename the files of ``staging/cluster=…/date=…`` into ``table``'s partitions as
    ``<tag>-NNNNN.parquet``; returns the names moved per partition folder."""
    moved: dict[Path, set[str]] = {}
    if not staging.exists():
        return moved
    for cdir in sorted(staging.glob("cluster=*")):
        for ddir in sorted(cdir.glob("date=*")):
            final = results / table / cdir.name / ddir.name
            final.mkdir(parents=True, exist_ok=True)
            names = moved.setdefault(final, set())
            for i, f in enumerate(sorted(ddir.glob("*.parquet"))):
                name = f"{tag}-{i:05d}.parquet"
                os.replace(f, final / name)
                names.add(name)
    return moved


def _delete(folder: Path, names: list[str]) -> None:
    for n in names:
        (folder / n).unlink(missing_ok=True)


def publish_incremental(results: Path | str | Store, staged: dict[str, Path], *, tag: str,
                        clusters: Sequence[str] | None = None) -> dict[str, int]:
    """Publish an incremental step's staged files (``staged``: table → staging folder) as
    ``<tag>-NNNNN`` (``tag`` = ``inc-<from>-<to>``, :func:`lagscope.results.inc_tag`), then delete
    the files of an earlier attempt from the same watermark in the step's ``clusters`` (None:
    all). Returns the files moved per table. They are visible once the checkpoint reaches ``to``
    (the caller writes it next)."""
    store = object_store(results)
    if store is not None:
        return _publish_incremental_objects(store, {t: str(v) for t, v in staged.items()}, tag=tag,
                                            clusters=clusters)
    results = Path(results.base) if isinstance(results, Store) else Path(results)
    recover_publish(results)
    attempt = tag.rsplit("-", 1)[0] + "-"  # inc-<from>-: any attempt at the step from this watermark
    written: dict[str, int] = {}
    for table in sorted(staged):
        moved = _move_in(staged[table], results, table, tag)
        written[table] = sum(len(v) for v in moved.values())
        for folder in date_folders(results, table, cluster=clusters or None):
            keep = moved.get(folder, set())
            _delete(folder, [n for n in visible_names(folder) if n.startswith(attempt) and n not in keep])
    return written


def publish_provisional(results: Path | str | Store, staged: dict[str, Path], *, start: dt.datetime,
                        until: dt.datetime) -> dict[str, int]:
    """Publish a provisional step's staged files as ``pre-<from>-<to>-NNNNN`` (``start`` is the
    checkpoint's watermark, ``until`` the end of its range), name it in the provisional marker
    (from then on readers see it instead of the one before), then delete every other ``pre-``
    file (:func:`drop_provisional`). Returns the files moved per table."""
    tag = pre_tag(start, until)
    store = object_store(results)
    if store is not None:
        recover_publish(store)
        moved_objects = {table: _move_in_objects(store, str(staged[table]), table, tag) for table in sorted(staged)}
        write_provisional_marker(store, start, until)
        drop_provisional(store, keep=tag)
        return {table: sum(len(v) for v in folders.values()) for table, folders in moved_objects.items()}
    results = Path(results.base) if isinstance(results, Store) else Path(results)
    recover_publish(results)
    moved = {table: _move_in(staged[table], results, table, tag) for table in sorted(staged)}
    write_provisional_marker(results, start, until)
    drop_provisional(results, keep=tag)
    return {table: sum(len(v) for v in folders.values()) for table, folders in moved.items()}


def drop_provisional(results: Path | str | Store, *, keep: str | None = None) -> int:
    """Delete the provisional steps' files (``pre-…``) of every result table but those of the
    step ``keep`` (its tag): cleanup after a provisional step (the one before it) or a full step
    (every one: none is visible once the watermark has moved). Returns the files deleted."""
    prefix = None if keep is None else f"{keep}-"
    n = 0
    store = object_store(results)
    if store is not None:
        for table in RESULT_TABLES:
            for prefixed in object_date_folders(store, table, None, None, None):
                for name in _result_names(store, prefixed):
                    if is_provisional(name) and (prefix is None or not name.startswith(prefix)):
                        store.delete(f"{prefixed}/{name}")
                        n += 1
        return n
    root = Path(results.base) if isinstance(results, Store) else Path(results)
    for table in RESULT_TABLES:
        for folder in date_folders(root, table):
            drop = [name for name in visible_names(folder)
                    if is_provisional(name) and (prefix is None or not name.startswith(prefix))]
            _delete(folder, drop)
            n += len(drop)
    return n


def publish_batch(results: Path | str | Store, staged: dict[str, Path], *, tag: str) -> dict[str, int]:
    """Publish a batch's staged files (``staged``: table → staging folder) as ``<tag>-NNNNN``
    (``tag``: :func:`lagscope.results.batch_tag`, one per run) and delete every other file of the
    partitions they went to, under the batch marker (module docstring). Returns the files moved
    per table."""
    store = object_store(results)
    if store is not None:
        return _publish_batch_objects(store, {t: str(v) for t, v in staged.items()}, tag=tag)
    results = Path(results.base) if isinstance(results, Store) else Path(results)
    recover_publish(results)
    write_publish_state(results, tag, "moving")
    try:
        moved = {table: _move_in(staged[table], results, table, tag) for table in sorted(staged)}
    except BaseException:
        recover_publish(results)  # rolls the files already moved back out
        raise
    write_publish_state(results, tag, "replacing")
    for folders in moved.values():
        for folder, names in folders.items():
            _delete(folder, [n for n in visible_names(folder) if n not in names])
    write_publish_state(results, tag, "done")
    return {table: sum(len(v) for v in folders.values()) for table, folders in moved.items()}


def recover_publish(results: Path | str | Store) -> None:
    """Finish what an interrupted batch publish left (the marker says where it stopped): files
    still ``moving`` are deleted (the batch is rolled back: its staging is gone), a batch already
    ``replacing`` deletes the rest of the files it replaces."""
    state = read_publish_state(results)
    if state.tag is None or state.phase == "done":
        return
    store = object_store(results)
    if store is not None:
        _recover_objects(store, state.tag, state.phase)
        return
    results = Path(results.base) if isinstance(results, Store) else results
    prefix = f"{state.tag}-"
    for table in RESULT_TABLES:
        for folder in date_folders(results, table):
            names = visible_names(folder)
            mine = [n for n in names if n.startswith(prefix)]
            if state.phase == "moving":
                _delete(folder, mine)
            elif mine:
                _delete(folder, [n for n in names if not n.startswith(prefix)])
    write_publish_state(results, state.tag, "done")


# --------------------------------------------------------------------------------------------
# the same on an object store: a "move" is a server-side copy, then a delete; what is visible is
# decided by the markers above alone (each object is put whole), so the steps keep their order
# --------------------------------------------------------------------------------------------

def _result_names(store: Store, folder: str) -> list[str]:
    return [n for n in store.names(folder) if n.endswith(".parquet") and not n.startswith((".", "_"))]


def _move_in_objects(store: Store, staging: str, table: str, tag: str) -> dict[str, set[str]]:
    """:func:`_move_in` on an object store (``staging`` relative to the store's root)."""
    moved: dict[str, set[str]] = {}
    for cdir in store.folders(staging):
        if not cdir.startswith("cluster="):
            continue
        for ddir in store.folders(f"{staging}/{cdir}"):
            if not ddir.startswith("date="):
                continue
            final = f"{table}/{cdir}/{ddir}"
            names = moved.setdefault(final, set())
            for i, f in enumerate(n for n in store.names(f"{staging}/{cdir}/{ddir}") if n.endswith(".parquet")):
                name = f"{tag}-{i:05d}.parquet"
                store.filesystem.move(store.path(f"{staging}/{cdir}/{ddir}/{f}"), store.path(f"{final}/{name}"))
                names.add(name)
    store.delete_folder(staging)
    return moved


def _publish_incremental_objects(store: Store, staged: dict[str, str], *, tag: str,
                                 clusters: Sequence[str] | None) -> dict[str, int]:
    recover_publish(store)
    attempt = tag.rsplit("-", 1)[0] + "-"
    written: dict[str, int] = {}
    for table in sorted(staged):
        moved = _move_in_objects(store, staged[table], table, tag)
        written[table] = sum(len(v) for v in moved.values())
        for folder in object_date_folders(store, table, clusters or None, None, None):
            keep = moved.get(folder, set())
            for n in _result_names(store, folder):
                if n.startswith(attempt) and n not in keep:
                    store.delete(f"{folder}/{n}")
    return written


def _publish_batch_objects(store: Store, staged: dict[str, str], *, tag: str) -> dict[str, int]:
    recover_publish(store)
    write_publish_state(store, tag, "moving")
    try:
        moved = {table: _move_in_objects(store, staged[table], table, tag) for table in sorted(staged)}
    except BaseException:
        recover_publish(store)
        raise
    write_publish_state(store, tag, "replacing")
    for folders in moved.values():
        for folder, names in folders.items():
            for n in _result_names(store, folder):
                if n not in names:
                    store.delete(f"{folder}/{n}")
    write_publish_state(store, tag, "done")
    return {table: sum(len(v) for v in folders.values()) for table, folders in moved.items()}


def _recover_objects(store: Store, tag: str, phase: str) -> None:
    prefix = f"{tag}-"
    for table in RESULT_TABLES:
        for folder in object_date_folders(store, table, None, None, None):
            names = _result_names(store, folder)
            mine = [n for n in names if n.startswith(prefix)]
            drop = mine if phase == "moving" else ([n for n in names if not n.startswith(prefix)] if mine else [])
            for n in drop:
                store.delete(f"{folder}/{n}")
    write_publish_state(store, tag, "done")


def stage_objects(store: Store, staging: str, table: str, data: pa.Table, *, part: str = "00000") -> None:
    """:func:`stage_arrow` on an object store: one object ``part-{part}.parquet`` per (cluster,
    date) under ``staging`` (relative to the store's root), each put whole."""
    for cluster, date, out in _partitions(table, data):
        sink = pa.BufferOutputStream()
        pq.write_table(out, sink, compression="zstd")
        store.put(f"{staging}/cluster={cluster}/date={date}/part-{part}.parquet", sink.getvalue().to_pybytes())


def _partitions(table: str, data: pa.Table) -> Iterator[tuple[str, str, pa.Table]]:
    """``data``'s rows per (cluster, date) partition, in ``table``'s types and file metadata
    (none when there are no rows)."""
    if not data.num_rows:
        return
    spec = TABLES[table]
    schema = pa.schema([pa.field(f.name, f.type) for f in spec.schema]).with_metadata(file_metadata(spec))
    for key in data.group_by(["cluster", "date"]).aggregate([]).to_pylist():
        rows = data.filter(pc.and_(pc.equal(data.column("cluster"), key["cluster"]),
                                   pc.equal(data.column("date"), key["date"])))
        yield key["cluster"], key["date"], pa.table([rows.column(f.name).cast(f.type) for f in schema],
                                                    schema=schema)


def new_staging(results: Path | str, table: str) -> Path:
    """A fresh staging folder for ``table``'s files (under ``results/.staging``)."""
    return Path(results) / ".staging" / f"{table}-{uuid.uuid4().hex[:12]}"


def stage_arrow(staging: Path, table: str, data: pa.Table, *, part: str = "00000") -> None:
    """Write ``data`` into ``staging`` as one file ``part-{part}.parquet`` per (cluster, date),
    in the table's types, fsynced (several writers may stage one table, each its own ``part``)."""
    for cluster, date, out in _partitions(table, data):
        folder = staging / f"cluster={cluster}" / f"date={date}"
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / f"part-{part}.parquet").open("wb") as fh:
            pq.write_table(out, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())


# --------------------------------------------------------------------------------------------
# checkpoint and state
# --------------------------------------------------------------------------------------------

class Checkpoint(dict[str, Any]):
    """``{"watermark": ISO time, "version": str, "clusters": [...]}`` of the incremental mode."""


_CHECKPOINT = "_state/checkpoint.json"


def read_checkpoint(results: Path | str | Store) -> Checkpoint | None:
    """The incremental checkpoint, or None before the first step (on an object store, the
    ``_state/checkpoint.json`` object there)."""
    store = object_store(results)
    if store is not None:
        try:
            return Checkpoint(json.loads(store.get(_CHECKPOINT)))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise LakeError(f"unreadable analytics checkpoint {store.url_of(_CHECKPOINT)}: {exc}") from exc
    results = Path(results.base) if isinstance(results, Store) else results
    path = checkpoint_file(results)
    if not path.exists():
        return None
    try:
        return Checkpoint(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise LakeError(f"unreadable analytics checkpoint {path}: {exc}") from exc


def write_checkpoint(results: Path | str | Store, cp: Checkpoint) -> None:
    """Atomically replace the checkpoint, then drop state versions it no longer points to (on an
    object store: one whole object put over the old one, then the other ``_state/v-*``
    prefixes deleted)."""
    store = object_store(results)
    if store is not None:
        store.put(_CHECKPOINT, json.dumps(cp, indent=1, sort_keys=True).encode())
        for name in store.folders("_state"):
            if name.startswith("v-") and name != cp["version"]:
                store.delete_folder(f"_state/{name}")
        return
    results = Path(results.base) if isinstance(results, Store) else results
    root = state_dir(results)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".checkpoint-{uuid.uuid4().hex[:8]}.json"
    with tmp.open("w") as fh:
        json.dump(cp, fh, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, checkpoint_file(results))
    for d in root.glob("v-*"):
        if d.name != cp["version"]:
            shutil.rmtree(d, ignore_errors=True)
