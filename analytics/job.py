"""Spark runs the analytics: a *step* (one batch, or one incremental run) is one Spark job of two
stages over Arrow, whatever the step holds.

1. **Route** (``mapInArrow`` over the step's file list): each task reads its lake files and
   state-part files with pyarrow (only the step's rows and the columns the passes read) and
   cuts each batch of rows by *bucket*, a hash of (cluster, group id): out come rows
   ``(place, table, blob)``, a blob being one table's rows of one bucket as Arrow IPC.
2. **One shuffle** (``repartition`` by ``place``): every blob of a bucket lands in the same task,
   one bucket per task (``place`` is chosen so that Spark's hash partitioner sends bucket *b* to
   partition *b*, :func:`_placements`). All rows of a group are in one bucket, so the bucket
   holds whole keys for the per-partition pass and whole groups for the per-group pass.
3. **The passes** (``mapInArrow``): each task runs :func:`lagscope.analytics.step.run_step` on its
   bucket and writes the result tables into the staging folder and the next state's parts into
   the new state version, then returns what it wrote (a few rows); the driver collects them,
   publishes the staged files into the result partitions and moves the checkpoint.

The JVM moves blobs, not rows: it never converts a lake row, and its heap holds a task's
blobs, not the step's tables, so a small driver suffices (``analytics.driver_memory``). The
plan is the same four operators every step: nothing is re-analysed as the history grows.

Carried state (bounded by the number of partitions and groups, not by the history): the last
sweep row per partition with its running markers (``series``), the end-offset points still
needed for lag in seconds (``history``), the learned commit gaps and the Burrow entries
(``gaps``, ``entries``, packed one value per partition), the last minute per partition
(``minutes``), each group's member sweeps since its last settled one (``msweeps``), the
rebalances of the storm window (``recent_rebalances``).
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import os
import shutil
import threading
import uuid
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics import step as steps
from lagscope.analytics.io import (
    Checkpoint,
    new_staging,
    partition_files,
    publish_staged,
    read_checkpoint,
    spark_arrow_schema,
    stage_arrow,
    state_root,
    write_checkpoint,
)
from lagscope.analytics.params import RuleParams
from lagscope.errors import ConfigError

__all__ = ["RESULT_TABLES", "STATE_PARTS", "Settings", "run_batch", "run_incremental"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Settings:
    """Everything a run needs besides its input."""

    rules: RuleParams = field(default_factory=RuleParams)
    read_committed_groups: tuple[str, ...] = ()
    session_timeout_s: float = 45.0
    heartbeat_s: float = 3.0
    network_s: float = 1.0
    rebalance_timeout_s: float = 300.0
    history_recent_s: float = 600.0


#: the lake tables a step reads; the last two are the commit stream's (optional)
LAKE_TABLES = ("offsets", "members", "commits", "group_events")
#: the parts of a step's carried state (see the module doc)
STATE_PARTS = ("series", "history", "gaps", "entries", "minutes", "msweeps", "recent_rebalances")
RESULT_TABLES = ("lag_trends", "rebalances", "anomalies", "status")

#: how far before an incremental step's start its commits reach (the commit before a step's
#: first commit, revocation commits before a rebalance)
COMMIT_LOOKBACK = dt.timedelta(minutes=15)

#: a bucket's share of the step's rows: what one task holds in its Python worker while it runs
#: the passes (smaller buckets keep the passes' sorts and arrays in cache and the cores busy to
#: the end; each costs a task's fixed time)
BUCKET_ROWS = 1_000_000
#: the most rows of one table in one blob (a blob is one row of the shuffle)
BLOB_ROWS = 262_144

_US = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class _Plan:
    """What every task of a step needs (sent to the executors with the functions)."""

    lake: str
    settings: Settings
    as_of: dt.datetime
    buckets: int
    places: tuple[int, ...]
    staging: dict[str, str]
    #: the state version folder to write (``None``: a batch, which carries no state)
    state_out: str | None
    #: incremental: the step's range ``[start, until)``; a batch reads whole days
    start: dt.datetime | None = None
    until: dt.datetime | None = None
    #: a batch: the days whose result rows it keeps
    days: tuple[str, ...] = ()
    #: the commit stream's tables the lake has (a bucket without their rows reads them empty:
    #: the commit stream was on, nothing was committed)
    optional: tuple[str, ...] = ()


# --------------------------------------------------------------------------------------------
# stage 1: read and route
# --------------------------------------------------------------------------------------------

def bucket_of(cluster: pa.ChunkedArray | pa.Array, group_id: pa.ChunkedArray | pa.Array,
              buckets: int) -> npt.NDArray[np.int32]:
    """Each row's bucket: CRC-32 of ``cluster \\0 group_id`` modulo ``buckets`` (the same in every
    process, unlike Python's ``hash``), hashed once per distinct (cluster, group)."""
    codes, names = [], []
    for col in (cluster, group_id):
        c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        enc = c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c)
        codes.append(np.asarray(enc.indices.fill_null(len(enc.dictionary)), dtype=np.int64))
        names.append([*enc.dictionary.to_pylist(), ""])
    pair = codes[0] * len(names[1]) + codes[1]
    distinct, inverse = np.unique(pair, return_inverse=True)
    hashed = np.array([zlib.crc32(f"{names[0][p // len(names[1])]}\0{names[1][p % len(names[1])]}".encode())
                       % buckets for p in distinct.tolist()], dtype=np.int32)
    return hashed[inverse.reshape(-1)] if len(distinct) else np.zeros(0, np.int32)


def _read(plan: _Plan, table: str, path: str) -> pa.Table:
    """One file's rows that the step reads (a lake table: its range and columns; a state part:
    all of it)."""
    if table in STATE_PARTS:
        return pq.read_table(path)
    where = None
    if plan.start is not None and plan.until is not None and table != "group_events":
        col, lo = ("record_ts", plan.start - COMMIT_LOOKBACK) if table == "commits" else ("sweep_ts", plan.start)
        where = (pc.field(col) >= pa.scalar(lo, _US)) & (pc.field(col) < pa.scalar(plan.until, _US))
    return steps.read_files([path], spark_arrow_schema(table), Path(plan.lake) / table, where=where,
                            columns=steps.READ_COLUMNS[table], dictionaries=_DICTIONARIES.get(table, ()))


#: the string columns read as dictionaries (the offsets' rows are most of a step: their keys
#: and owners travel and sort as indices, and the passes code them from those)
_DICTIONARIES = {"offsets": ("group_id", "topic", "member_id")}


#: blobs are LZ4-compressed Arrow IPC: a third of the bytes for the shuffle to write and read
_IPC = pa.ipc.IpcWriteOptions(compression="lz4")


def _blob(rows: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, rows.schema, options=_IPC) as writer:
        writer.write_table(rows)
    return sink.getvalue()


def _route(plan: _Plan):  # type: ignore[no-untyped-def]
    """The route stage's function (``mapInArrow``): file rows in, blob rows out."""
    def route(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for table, path in zip(batch.column("tbl").to_pylist(), batch.column("path").to_pylist(), strict=True):
                rows = _read(plan, table, path)
                for chunk in rows.to_batches(max_chunksize=BLOB_ROWS):
                    if not chunk.num_rows:
                        continue
                    b = bucket_of(chunk.column("cluster"), chunk.column("group_id"), plan.buckets)
                    # one take puts each bucket's rows together; then a slice per bucket
                    order = np.argsort(b, kind="stable")
                    cut = np.flatnonzero(np.diff(b[order])) + 1
                    starts = np.concatenate([[0], cut])
                    ends = np.concatenate([cut, [len(b)]])
                    grouped = chunk.take(pa.array(order)) if len(starts) > 1 else chunk
                    places, blobs = [], []
                    for lo, hi in zip(starts.tolist(), ends.tolist(), strict=True):
                        places.append(plan.places[int(b[order[lo]])])
                        blobs.append(_blob(pa.Table.from_batches([grouped.slice(lo, hi - lo)])))
                    yield pa.RecordBatch.from_pydict({
                        "place": pa.array(places, pa.int32()), "tbl": pa.array([table] * len(blobs), pa.string()),
                        "blob": pa.array(blobs, pa.binary())})
    return route


# --------------------------------------------------------------------------------------------
# stage 2: the passes, one bucket per task
# --------------------------------------------------------------------------------------------

def _tables(batches: Iterator[pa.RecordBatch]) -> dict[str, pa.Table]:
    """The bucket's blobs, decoded and put together per table."""
    parts: dict[str, list[pa.Table]] = {}
    for batch in batches:
        for table, blob in zip(batch.column("tbl").to_pylist(), batch.column("blob").to_pylist(), strict=True):
            parts.setdefault(table, []).append(pa.ipc.open_stream(blob).read_all())
    out = {}
    for name, got in parts.items():
        tbl = pa.concat_tables(got, promote_options="permissive")
        out[name] = tbl.unify_dictionaries() if name in _DICTIONARIES else tbl
    return out


def _run(plan: _Plan):  # type: ignore[no-untyped-def]
    """The pass stage's function (``mapInArrow``): a bucket's blobs in, what it wrote out."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = _tables(batches)
        if not got:
            return
        offsets = got.get("offsets")
        members = got.get("members")
        inputs = steps.StepInputs(
            offsets=offsets if offsets is not None else _empty("offsets"),
            members=members if members is not None else _empty("members"),
            commits=got.get("commits", _empty("commits") if "commits" in plan.optional else None),
            group_events=got.get("group_events", _empty("group_events") if "group_events" in plan.optional else None),
            state={name: got[name] for name in STATE_PARTS if name in got})
        done = steps.run_step(inputs, settings=plan.settings, as_of=plan.as_of, with_state=plan.state_out is not None)
        part = uuid.uuid4().hex[:12]
        names, counts = [], []
        keep = pa.array(list(plan.days), pa.string()) if plan.days else None
        for name, tbl in done.tables.items():
            if keep is not None:
                tbl = tbl.filter(pc.is_in(tbl.column("date"), value_set=keep))
            stage_arrow(Path(plan.staging[name]), name, tbl, part=part)
            names.append(name)
            counts.append(tbl.num_rows)
        if plan.state_out is not None:
            for name, tbl in done.state.items():
                folder = Path(plan.state_out) / name
                folder.mkdir(parents=True, exist_ok=True)
                _write_atomic(tbl, folder / f"part-{part}.parquet")
        yield pa.RecordBatch.from_pydict({"tbl": pa.array(names, pa.string()), "rows": pa.array(counts, pa.int64())})
    return run


def _write_atomic(table: pa.Table, path: Path) -> None:
    """A state file written under a temporary name, then renamed (no reader sees half a file)."""
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="snappy")
    os.replace(tmp, path)


def _empty(table: str) -> pa.Table:
    schema = spark_arrow_schema(table)
    return schema.empty_table().select(steps.READ_COLUMNS[table])


# --------------------------------------------------------------------------------------------
# the driver's side
# --------------------------------------------------------------------------------------------

_PLACEMENTS: dict[int, tuple[int, ...]] = {}


def _placements(spark: SparkSession, buckets: int) -> tuple[int, ...]:
    """For each bucket *b*, an int whose Spark hash sends it to shuffle partition *b* of
    ``buckets`` (``repartition(n, col)`` partitions by ``pmod(hash(col), n)``): asked of Spark
    itself, once per bucket count."""
    got = _PLACEMENTS.get(buckets)
    if got is None:
        span = max(64, buckets * 32)
        while True:
            rows = (spark.range(span).select(F.col("id").cast("int").alias("v"))
                    .select("v", F.pmod(F.hash("v"), F.lit(buckets)).alias("p"))
                    .groupBy("p").agg(F.min("v").alias("v")).collect())
            first = {int(r["p"]): int(r["v"]) for r in rows}
            if len(first) == buckets:
                break
            span *= 4
        got = _PLACEMENTS[buckets] = tuple(first[b] for b in range(buckets))
    return got


def _bucket_count(spark: SparkSession, files: dict[str, list[str]]) -> int:
    """As many buckets as the machine's task slots, more when the step is large (about
    :data:`BUCKET_ROWS` rows each, counted from the files' footers)."""
    rows = sum(int(pq.read_metadata(p).num_rows) for paths in files.values() for p in paths)
    return max(int(spark.sparkContext.defaultParallelism), -(-rows // BUCKET_ROWS), 1)


def _state_files(results: Path, version: str) -> dict[str, list[str]]:
    base = state_root(results) / version
    return {name: sorted(str(p) for p in (base / name).glob("*.parquet")) for name in STATE_PARTS}


@contextmanager
def _progress(spark: SparkSession, enabled: bool, interval_s: float = 2.0) -> Iterator[None]:
    """Log Spark stage progress every ``interval_s`` while the block runs."""
    if not enabled:
        yield
        return
    stop = threading.Event()
    tracker = spark.sparkContext.statusTracker()

    def loop() -> None:
        last = ""
        while not stop.wait(interval_s):
            parts = []
            for sid in tracker.getActiveStageIds():
                info = tracker.getStageInfo(sid)
                if info is not None:
                    parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
            line = "; ".join(parts)
            if line and line != last:
                log.info("progress: %s", line)
                last = line

    th = threading.Thread(target=loop, name="lagscope-progress", daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join(timeout=interval_s * 2)


def _execute(spark: SparkSession, files: dict[str, list[str]], plan: _Plan, progress: bool) -> dict[str, int]:
    """Run the step's Spark job; returns the rows staged per table."""
    tasks = [(name, path) for name, paths in files.items() for path in paths]
    # the largest files first, so that no task starts a big file last
    tasks.sort(key=lambda t: -os.path.getsize(t[1]))
    rows: dict[str, int] = dict.fromkeys(RESULT_TABLES, 0)
    if not tasks:
        return rows
    listing = spark.createDataFrame(tasks, "tbl string, path string")
    routed = listing.mapInArrow(_route(plan), "place int, tbl string, blob binary")
    passed = routed.repartition(plan.buckets, "place").mapInArrow(_run(plan), "tbl string, rows long")
    with _progress(spark, progress):
        for r in passed.collect():
            rows[r["tbl"]] += int(r["rows"])
    return rows


def _staging(results: Path) -> dict[str, Path]:
    return {name: new_staging(results, name) for name in RESULT_TABLES}


def run_batch(spark: SparkSession, lake: Path | str, results: Path | str, *, since: dt.date, until: dt.date,
              settings: Settings, clusters: Sequence[str] | None = None, progress: bool = True) -> dict[str, int]:
    """Analyse whole UTC days ``since … until`` and overwrite those days' result partitions (a
    batch is a first step over its range: no state in, none out). Returns files written."""
    if until < since:
        raise ConfigError(f"--until {until} is before --since {since}")
    lake, results = Path(lake), Path(results)
    days = tuple((since + dt.timedelta(days=i)).isoformat() for i in range((until - since).days + 1))
    files = {name: partition_files(lake, name, clusters, since, until) for name in LAKE_TABLES}
    if not files["offsets"] and not files["members"]:
        raise ConfigError(f"the lake {lake} has no sweeps between {since} and {until}")
    staging = _staging(results)
    buckets = _bucket_count(spark, files)
    plan = _Plan(lake=str(lake), settings=settings, buckets=buckets, places=_placements(spark, buckets),
                 as_of=dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), dt.UTC),
                 staging={k: str(v) for k, v in staging.items()}, state_out=None, days=days,
                 optional=_optional(lake))
    tag = f"batch-{since}-{until}"
    try:
        rows = _execute(spark, files, plan, progress)
        log.info("batch %s … %s: %d buckets → %s", since, until, buckets,
                 ", ".join(f"{name} {n} rows" for name, n in sorted(rows.items())))
        return {name: publish_staged(results, name, staging[name], mode="batch", tag=tag) for name in RESULT_TABLES}
    finally:
        for folder in staging.values():
            shutil.rmtree(folder, ignore_errors=True)


def run_incremental(spark: SparkSession, lake: Path | str, results: Path | str, *, settings: Settings,
                    until: dt.datetime, since: dt.datetime | None = None,
                    clusters: Sequence[str] | None = None, progress: bool = False) -> dict[str, int]:
    """Analyse the sweeps in ``[checkpoint, until)`` (``until`` rounded down to the minute),
    carrying the state; append the results and move the checkpoint. Returns files written
    (empty when there was nothing new). Re-running a step that crashed before its checkpoint
    moved replaces its files (they are named after its range) instead of adding to them."""
    lake, results = Path(lake), Path(results)
    until = until.astimezone(dt.UTC).replace(second=0, microsecond=0)
    cp = read_checkpoint(results)
    if cp is not None:
        start = dt.datetime.fromisoformat(cp["watermark"])
    elif since is not None:
        start = since.astimezone(dt.UTC)
    else:
        raise ConfigError("no checkpoint yet: give --since for the first incremental run")
    if until <= start:
        return {}
    tag = f"inc-{int(start.timestamp() * 1000)}-{int(until.timestamp() * 1000)}"
    version = f"v-{int(until.timestamp())}-{uuid.uuid4().hex[:6]}"
    files: dict[str, list[str]] = {}
    for name in LAKE_TABLES:
        first = (start - COMMIT_LOOKBACK).date() if name == "commits" else start.date()
        files[name] = partition_files(lake, name, clusters, first, until.date())
    if cp is not None:
        files.update(_state_files(results, cp["version"]))
    staging = _staging(results)
    state_out = state_root(results) / version
    buckets = _bucket_count(spark, files)
    plan = _Plan(lake=str(lake), settings=settings, buckets=buckets, places=_placements(spark, buckets), as_of=until,
                 staging={k: str(v) for k, v in staging.items()}, state_out=str(state_out), start=start, until=until,
                 optional=_optional(lake))
    try:
        state_out.mkdir(parents=True, exist_ok=True)
        _execute(spark, files, plan, progress)
        written = {name: publish_staged(results, name, staging[name], mode="incremental", tag=tag)
                   for name in RESULT_TABLES}
    except BaseException:
        shutil.rmtree(state_out, ignore_errors=True)
        raise
    finally:
        for folder in staging.values():
            shutil.rmtree(folder, ignore_errors=True)
    write_checkpoint(results, Checkpoint(watermark=until.isoformat(), version=version))
    return written


def _optional(lake: Path) -> tuple[str, ...]:
    return tuple(name for name in LAKE_TABLES[2:] if (lake / name).is_dir())
