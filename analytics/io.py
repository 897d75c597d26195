"""I/O at the edges: the lake's files a step reads, the result tables it writes, the checkpoint.

Results are written like the lake (``<results>/<table>/cluster=…/date=…/*.parquet``): each task
of a step stages its files in a hidden folder (``<results>/.staging/<table>-…``), then the
driver renames each into its partition. A *batch* run then deletes the files its new ones
replace (every other file of the partitions it wrote); an *incremental* step names its files
after the range it covered (``inc-<from>-<to>-…``) and replaces only files of that same range,
so re-running a step (after a crash between writing and checkpointing) replaces its output
instead of adding to it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lagscope.collector.compaction import live_files
from lagscope.errors import LakeError
from lagscope.lake import file_metadata
from lagscope.schema import TABLES, Table

__all__ = [
    "Checkpoint",
    "commit_arrow",
    "new_staging",
    "partition_files",
    "publish_staged",
    "read_checkpoint",
    "spark_arrow_schema",
    "spark_schema",
    "stage_arrow",
    "state_root",
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


def _dates(since: dt.date, until: dt.date) -> list[str]:
    days = (until - since).days
    return [(since + dt.timedelta(days=i)).isoformat() for i in range(days + 1)]


def partition_files(root: Path, table: str, clusters: Iterable[str] | None, since: dt.date,
                     until: dt.date) -> list[str]:
    """The files to read: each wanted partition folder's :func:`live_files` (sources already
    merged into a compacted file are left out: a compaction interrupted between publishing its
    file and deleting the sources leaves both until its next run, and Spark listing the folder
    itself would read those rows twice)."""
    folder = root / table
    if not folder.is_dir():
        return []
    wanted = set(_dates(since, until))
    names = set(clusters) if clusters else None
    paths: list[str] = []
    for cdir in sorted(folder.glob("cluster=*")):
        if names is not None and cdir.name.removeprefix("cluster=") not in names:
            continue
        for ddir in sorted(cdir.glob("date=*")):
            if ddir.name.removeprefix("date=") in wanted:
                paths.extend(str(f) for f in live_files(ddir))
    return paths


def _publish(staging: Path, root: Path, table: Table, *, mode: str, tag: str) -> int:
    """Move the files of ``staging/cluster=…/date=…`` into the result table's partitions and
    delete the files they replace. ``mode="batch"``: the partitions written are replaced whole;
    ``mode="incremental"``: files tagged ``tag`` (the step's range) are replaced, others kept.
    Returns the files moved."""
    written = 0
    for cdir in sorted(staging.glob("cluster=*")):
        for ddir in sorted(cdir.glob("date=*")):
            final = root / table.name / cdir.name / ddir.name
            final.mkdir(parents=True, exist_ok=True)
            prefix = f"{tag}-"
            new: list[Path] = []
            for i, f in enumerate(sorted(ddir.glob("*.parquet"))):
                target = final / f"{prefix}{i:05d}.parquet"
                os.replace(f, target)
                new.append(target)
                written += 1
            keep = {p.name for p in new}
            for old in final.glob("*.parquet"):
                if old.name in keep:
                    continue
                if mode == "batch" or old.name.startswith(prefix):
                    old.unlink(missing_ok=True)
    return written


def commit_arrow(results: Path | str, table: str, data: pa.Table, *, mode: str, tag: str) -> int:
    """Write ``data`` (with ``cluster`` and ``date`` columns) as result ``table``: one file per
    partition, in the table's types, written in a staging folder (fsynced), then moved into place
    (:func:`publish_staged`)."""
    staging = new_staging(results, table)
    try:
        stage_arrow(staging, table, data)
        return publish_staged(results, table, staging, mode=mode, tag=tag)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def new_staging(results: Path | str, table: str) -> Path:
    """A fresh staging folder for ``table``'s files (under ``results/.staging``)."""
    return Path(results) / ".staging" / f"{table}-{uuid.uuid4().hex[:12]}"


def stage_arrow(staging: Path, table: str, data: pa.Table, *, part: str = "00000") -> None:
    """Write ``data`` into ``staging`` as one file ``part-{part}.parquet`` per (cluster, date),
    in the table's types, fsynced (several writers may stage one table, each its own ``part``)."""
    if not data.num_rows:
        return
    spec = TABLES[table]
    schema = pa.schema([pa.field(f.name, f.type) for f in spec.schema]).with_metadata(file_metadata(spec))
    for key in data.group_by(["cluster", "date"]).aggregate([]).to_pylist():
        rows = data.filter(pc.and_(pc.equal(data.column("cluster"), key["cluster"]),
                                   pc.equal(data.column("date"), key["date"])))
        folder = staging / f"cluster={key['cluster']}" / f"date={key['date']}"
        folder.mkdir(parents=True, exist_ok=True)
        out = pa.table([rows.column(f.name).cast(f.type) for f in schema], schema=schema)
        with (folder / f"part-{part}.parquet").open("wb") as fh:
            pq.write_table(out, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())


def publish_staged(results: Path | str, table: str, staging: Path, *, mode: str, tag: str) -> int:
    """Move the files staged by :func:`stage_arrow` into ``table``'s partitions (``mode``,
    ``tag``: see :func:`_publish`). Returns the files moved."""
    if mode not in ("batch", "incremental"):
        raise ValueError(f"unknown write mode {mode!r}")
    if not staging.exists():
        return 0
    return _publish(staging, Path(results), TABLES[table], mode=mode, tag=tag)


# --------------------------------------------------------------------------------------------
# checkpoint and state
# --------------------------------------------------------------------------------------------

class Checkpoint(dict[str, Any]):
    """``{"watermark": ISO time, "version": str, "clusters": [...]}`` of the incremental mode."""


def state_root(results: Path | str) -> Path:
    return Path(results) / "_state"


def read_checkpoint(results: Path | str) -> Checkpoint | None:
    path = state_root(results) / "checkpoint.json"
    if not path.exists():
        return None
    try:
        return Checkpoint(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise LakeError(f"unreadable analytics checkpoint {path}: {exc}") from exc


def write_checkpoint(results: Path | str, cp: Checkpoint) -> None:
    """Atomically replace the checkpoint, then drop state versions it no longer points to."""
    root = state_root(results)
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".checkpoint-{uuid.uuid4().hex[:8]}.json"
    tmp.write_text(json.dumps(cp, indent=1, sort_keys=True))
    os.replace(tmp, root / "checkpoint.json")
    for d in root.glob("v-*"):
        if d.name != cp["version"]:
            shutil.rmtree(d, ignore_errors=True)
