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

A lake file that cannot be read never stops a step: the driver checks every listed file's
footer before Spark sees it (:func:`lagscope.lake.check_files`), and a route task whose file
fails past its footer (a corrupt page) sends the file's name on instead of its rows (a file is
read whole before any of its rows leave the task, so none of them is used); the driver moves
those files into quarantine (:func:`lagscope.lake.quarantine`) and publishes the step, which is
then the step of the lake without them. :class:`StepFiles` says which.

The JVM moves blobs, not rows: it never converts a lake row, and its heap holds a task's
blobs, not the step's tables, so a small driver suffices (``analytics.driver_memory``). The
plan is the same four operators every step: nothing is re-analysed as the history grows.

Carried state (bounded by the number of partitions and groups, not by the history): the last
sweep row per partition with its running markers (``series``), the end-offset points still
needed for lag in seconds (``history``), the learned commit gaps and the Burrow entries
(``gaps``, ``entries``, packed one value per partition), the last minute per partition
(``minutes``), each group's member sweeps since its last settled one (``msweeps``), the
rebalances of the storm window (``recent_rebalances``), the rebalance outages of the last minutes
(``outages``), each group's generation records from the one in force at its last settled sweep
on (``generations``: a step reads the group records of its own days only), the advice's evidence within the results'
retention window and each group's settings as last seen (``advice_evidence``, ``advice_groups``), and
the stalls, stops, starved partitions and commit gaps the step published open (``open_keys``: a later step withdraws
one that a rebalance then explains, :func:`lagscope.analytics.step.withdrawals`), and the
rebalance windows still waiting for a partition's first commit after their start (``pending_gaps``:
the step that reads it publishes the window again with its ``max_processing_gap_s`` raised,
:func:`lagscope.analytics.groups.complete_pending`) and, from sweeps alone, each partition's
committed-offset changes back to the earliest start a later step's window can have
(``gap_times``, :func:`lagscope.analytics.groups.gap_bounds`), and the last progress of each member a
later step's rebalance window can name as departed (``member_progress``: the series state keeps each partition's
latest owner only).
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import threading
import uuid
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
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
    drop_provisional,
    publish_batch,
    publish_incremental,
    publish_provisional,
    read_checkpoint,
    spark_arrow_schema,
    stage_objects,
    write_checkpoint,
)
from lagscope.config import AnalyticsConfig, StorageConfig
from lagscope.errors import ConfigError, DataExpired
from lagscope.lag import HISTORY_POINTS
from lagscope.lake import CheckedFile, Quarantined, checked_files, is_missing_file, quarantine_in
from lagscope.results import batch_tag, inc_tag
from lagscope.retention import expired_through
from lagscope.storage import Store, open_store

__all__ = ["RESULT_TABLES", "STATE_PARTS", "StepFiles", "root_store", "run_batch", "run_incremental", "run_provisional"]

log = logging.getLogger(__name__)


#: the lake tables a step reads; the last two are the commit stream's (optional)
LAKE_TABLES = ("offsets", "members", "commits", "group_events")
#: the parts of a step's carried state (see the module doc)
STATE_PARTS = ("series", "history", "gaps", "entries", "minutes", "msweeps", "recent_rebalances", "outages",
               "generations", "advice_evidence", "advice_groups", "open_keys", "pending_gaps", "gap_times",
               "member_progress")
RESULT_TABLES = ("lag_trends", "rebalances", "anomalies", "status", "advice")

#: how far before an incremental step's start its commits reach (the commit before a step's
#: first commit, revocation commits before a rebalance); less than the day before the watermark
#: that lake retention keeps for the next step (:func:`lagscope.retention.analytics_keep_from`)
COMMIT_LOOKBACK = dt.timedelta(minutes=15)

#: a bucket's share of the step's rows: what one task holds in its Python worker while it runs
#: the passes (smaller buckets keep the passes' sorts and arrays in cache and the cores busy to
#: the end; each costs a task's fixed time)
BUCKET_ROWS = 1_000_000
#: the most rows of one table in one blob (a blob is one row of the shuffle)
BLOB_ROWS = 262_144

_US = pa.timestamp("us", tz="UTC")
#: the ``tbl`` of a route row that names an unreadable lake file instead of carrying rows
_UNREADABLE = "!unreadable"


class StepFiles(dict[str, int]):
    """What a step returns: the files written per result table; :attr:`quarantined`: the lake
    files it moved into quarantine and analysed without (unreadable)."""

    def __init__(self, written: dict[str, int] | None = None, quarantined: Sequence[Quarantined] = ()) -> None:
        super().__init__(written or {})
        self.quarantined: tuple[Quarantined, ...] = tuple(quarantined)


@dataclass(frozen=True)
class _Plan:
    """What every task of a step needs (sent to the executors with the functions)."""

    #: the lake and the results root (a local folder or an object store: the tasks read and
    #: write through their filesystems, so the executors need no shared disk)
    lake: Store
    results: Store
    settings: AnalyticsConfig
    #: lag in seconds: the newest end-offset points used per partition (``time_lag.history_points``)
    history_points: int
    as_of: dt.datetime
    buckets: int
    places: tuple[int, ...]
    #: each result table's staging folder, relative to the results root
    staging: dict[str, str]
    #: the state version folder to write, relative to the results root (``None``: a batch or a
    #: provisional step, which carry no state on)
    state_out: str | None
    #: incremental: the step's range ``[start, until)``; a batch reads whole days
    start: dt.datetime | None = None
    until: dt.datetime | None = None
    #: a batch: the days whose result rows it keeps
    days: tuple[str, ...] = ()
    #: the commit stream's tables the lake has (a bucket without their rows reads them empty:
    #: the commit stream was on, nothing was committed)
    optional: tuple[str, ...] = ()
    #: a provisional step's ``until``, or a batch's clock when its range is not over yet: inside
    #: the minute in progress (that minute is partial)
    partial_from: dt.datetime | None = None


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

    def hashed(distinct: npt.NDArray[np.int64]) -> npt.NDArray[np.int32]:
        return np.array([zlib.crc32(f"{names[0][p // len(names[1])]}\0{names[1][p % len(names[1])]}".encode())
                         % buckets for p in distinct.tolist()], dtype=np.int32)

    span = len(names[0]) * len(names[1])
    if span <= 4 * len(pair) + 4096:  # a table over every possible pair: no sort of the rows
        seen = np.zeros(span, bool)
        seen[pair] = True
        distinct = np.flatnonzero(seen)
        table = np.zeros(span, np.int32)
        table[distinct] = hashed(distinct)
        out: npt.NDArray[np.int32] = table[pair]
        return out
    distinct, inverse = np.unique(pair, return_inverse=True)
    return hashed(distinct)[inverse.reshape(-1)] if len(distinct) else np.zeros(0, np.int32)


def _read(plan: _Plan, table: str, path: str) -> pa.Table:
    """One file's rows that the step reads (a lake table: its range and columns; a state part:
    all of it)."""
    if table in STATE_PARTS:
        return pq.read_table(path, filesystem=plan.results.filesystem)
    where = None
    if plan.start is not None and plan.until is not None and table != "group_events":
        col, lo = ("record_ts", plan.start - COMMIT_LOOKBACK) if table == "commits" else ("sweep_ts", plan.start)
        where = (pc.field(col) >= pa.scalar(lo, _US)) & (pc.field(col) < pa.scalar(plan.until, _US))
    return steps.read_files([path], spark_arrow_schema(table), plan.lake.path(table), where=where,
                            columns=steps.READ_COLUMNS[table], dictionaries=_DICTIONARIES.get(table, ()),
                            filesystem=plan.lake.filesystem)


#: the string columns read as dictionaries (the offsets' rows are most of a step: their keys
#: and owners travel and sort as indices, and the passes code them from those)
_DICTIONARIES = {"offsets": ("group_id", "topic", "member_id", "lag_basis")}


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
            pairs = ((t, p) for tbls, paths in zip(batch.column("tbl").to_pylist(), batch.column("path").to_pylist(),
                                                   strict=True) for t, p in zip(tbls, paths, strict=True))
            for table, path in pairs:
                try:
                    rows = _read(plan, table, path)
                except (OSError, pa.ArrowException) as exc:
                    if table in STATE_PARTS or is_missing_file(exc):
                        raise  # the step's own state, or a file gone: the step fails and is redone
                    reason = "unreadable Parquet data: " + " ".join(str(exc).split())[:300]
                    yield pa.RecordBatch.from_pydict({
                        "place": pa.array([plan.places[0]], pa.int32()), "tbl": pa.array([_UNREADABLE]),
                        "blob": pa.array([f"{path}\n{reason}".encode()], pa.binary())})
                    continue
                for chunk in rows.to_batches(max_chunksize=BLOB_ROWS):
                    if not chunk.num_rows:
                        continue
                    b = bucket_of(chunk.column("cluster"), chunk.column("group_id"), plan.buckets)
                    # one take puts each bucket's rows together; then a slice per bucket
                    # (a stable sort of small integers is a radix sort: as int16, not int32)
                    order = np.argsort(b.astype(np.int16) if plan.buckets <= 1 << 15 else b, kind="stable")
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

def _tables(batches: Iterator[pa.RecordBatch]) -> tuple[dict[str, pa.Table], list[str]]:
    """The bucket's blobs, decoded and put together per table; the unreadable files the route
    stage named (``path\nreason``)."""
    parts: dict[str, list[pa.Table]] = {}
    unreadable: list[str] = []
    for batch in batches:
        for table, blob in zip(batch.column("tbl").to_pylist(), batch.column("blob").to_pylist(), strict=True):
            if table == _UNREADABLE:
                unreadable.append(blob.decode())
                continue
            parts.setdefault(table, []).append(pa.ipc.open_stream(blob).read_all())
    out = {}
    for name, got in parts.items():
        tbl = pa.concat_tables(got, promote_options="permissive")
        out[name] = tbl.unify_dictionaries() if name in _DICTIONARIES else tbl
    return out, unreadable


def _run(plan: _Plan):  # type: ignore[no-untyped-def]
    """The pass stage's function (``mapInArrow``): a bucket's blobs in, what it wrote out."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got, unreadable = _tables(batches)
        if unreadable:
            yield pa.RecordBatch.from_pydict({"tbl": pa.array([_UNREADABLE] * len(unreadable), pa.string()),
                                              "rows": pa.array([0] * len(unreadable), pa.int64()),
                                              "note": pa.array(unreadable, pa.string())})
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
        done = steps.run_step(inputs, settings=plan.settings, history_points=plan.history_points, as_of=plan.as_of,
                              with_state=plan.state_out is not None, partial_from=plan.partial_from)
        part = uuid.uuid4().hex[:12]
        names, counts = [], []
        keep = pa.array(list(plan.days), pa.string()) if plan.days else None
        for name, tbl in done.tables.items():
            if keep is not None:
                tbl = tbl.filter(pc.is_in(tbl.column("date"), value_set=keep))
            stage_objects(plan.results, plan.staging[name], name, tbl, part=part)
            names.append(name)
            counts.append(tbl.num_rows)
        if plan.state_out is not None:
            for name, tbl in done.state.items():
                plan.results.put(f"{plan.state_out}/{name}/part-{part}.parquet", _parquet(tbl))
        yield pa.RecordBatch.from_pydict({"tbl": pa.array(names, pa.string()), "rows": pa.array(counts, pa.int64()),
                                          "note": pa.nulls(len(names), pa.string())})
    return run


def _parquet(table: pa.Table) -> bytes:
    """A state part's file, whole (:meth:`Store.put` writes it so that no reader sees half of it)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return bytes(sink.getvalue().to_pybytes())


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


def _bucket_count(spark: SparkSession, rows: dict[str, int]) -> int:
    """As many buckets as the machine's task slots, more when the step is large (about
    :data:`BUCKET_ROWS` rows each, counted from the files' footers: ``rows`` per file)."""
    return max(int(spark.sparkContext.defaultParallelism), -(-sum(rows.values()) // BUCKET_ROWS), 1)


def _state_files(results: Store, version: str) -> dict[str, list[str]]:
    """The parts of a state version (their paths in the results' filesystem)."""
    return {name: [results.path(f"_state/{version}/{name}/{n}") for n in results.names(f"_state/{version}/{name}")
                   if n.endswith(".parquet") and not n.startswith(".")] for name in STATE_PARTS}


def _row_counts(lake_files: dict[str, list[CheckedFile]], state: dict[str, list[str]],
                results: Store) -> dict[str, int]:
    """Each file of a step and its rows (lake files: as checked; state parts: from their footers)."""
    rows = {str(c.path): c.rows for checked in lake_files.values() for c in checked}
    for paths in state.values():
        for p in paths:
            rows[p] = int(pq.read_metadata(p, filesystem=results.filesystem).num_rows)
    return rows


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


def _deal(tasks: Sequence[tuple[str, str]], sizes: dict[str, int], slots: int) -> list[list[tuple[str, str]]]:
    """``tasks`` (table, path) dealt into at most ``slots`` lists of about equal rows (``sizes``:
    each file's rows): each file, the largest first, to the list with the fewest rows so far."""
    dealt: list[list[tuple[str, str]]] = [[] for _ in range(max(1, min(slots, len(tasks))))]
    load = [0] * len(dealt)
    for task in sorted(tasks, key=lambda t: -sizes.get(t[1], 0)):
        i = load.index(min(load))
        dealt[i].append(task)
        load[i] += max(1, sizes.get(task[1], 0))
    return dealt


def _execute(spark: SparkSession, files: dict[str, list[str]], sizes: dict[str, int], plan: _Plan,
             progress: bool) -> tuple[dict[str, int], list[Quarantined]]:
    """Run the step's Spark job (``sizes``: each file's rows); returns the rows staged per table
    and the lake files the tasks could not read, moved into quarantine."""
    tasks = [(name, path) for name, paths in files.items() for path in paths]
    rows: dict[str, int] = dict.fromkeys(RESULT_TABLES, 0)
    moved: list[Quarantined] = []
    if not tasks:
        return rows, moved
    # one listing row per route task: the files dealt out by rows, so that every task slot reads
    # its share (a local list is cut into slot-many runs of equal *count*: files listed by size
    # put every big file in the first run, and one core read them all)
    slices = _deal(tasks, sizes, int(spark.sparkContext.defaultParallelism))
    listing = spark.createDataFrame([([t for t, _ in s], [p for _, p in s]) for s in slices],
                                    "tbl array<string>, path array<string>")
    routed = listing.mapInArrow(_route(plan), "place int, tbl string, blob binary")
    passed = routed.repartition(plan.buckets, "place").mapInArrow(_run(plan), "tbl string, rows long, note string")
    with _progress(spark, progress):
        for r in passed.collect():
            if r["tbl"] == _UNREADABLE:
                path, reason = r["note"].split("\n", 1)
                got = quarantine_in(plan.lake, path, reason)
                if got is not None:
                    moved.append(got)
                continue
            rows[r["tbl"]] += int(r["rows"])
    return rows, moved


def _lake_files(lake: Store, table: str, clusters: Sequence[str] | None, since: dt.date,
                until: dt.date, moved: list[Quarantined]) -> list[CheckedFile]:
    """The live files of a lake table's wanted partitions whose footers read
    (:func:`lagscope.lake.checked_files`: on an object store the committed ones; the others go
    into quarantine and onto ``moved``). A file gone since its listing makes it list again."""
    for _ in range(5):
        try:
            good, bad = checked_files(lake, table, cluster=clusters or None, since=since, until=until)
        except FileNotFoundError:
            continue  # compaction replaced its sources meanwhile: their rows are in its file
        moved.extend(bad)
        return good
    good, bad = checked_files(lake, table, cluster=clusters or None, since=since, until=until)
    moved.extend(bad)
    return good


def _paths(checked: dict[str, list[CheckedFile]]) -> dict[str, list[str]]:
    return {name: [str(c.path) for c in files] for name, files in checked.items()}


def root_store(root: Path | str | Store, storage: StorageConfig | None) -> Store:
    """The :class:`~lagscope.storage.Store` of a lake or results root: a local folder, or an
    ``s3://bucket/prefix`` opened with ``storage`` (the settings' ``storage`` section)."""
    return root if isinstance(root, Store) else open_store(root, storage)


def _staging(results: Store) -> dict[str, str]:
    """A fresh staging folder per result table, relative to the results root."""
    return {name: f".staging/{name}-{uuid.uuid4().hex[:12]}" for name in RESULT_TABLES}


def _staged(results: Store, staging: dict[str, str]) -> dict[str, Path]:
    """The staging folders as the publish functions take them (local: the folders; an object
    store: relative to its root)."""
    return {name: Path(rel) if results.is_object_store else Path(results.path(rel)) for name, rel in staging.items()}


def _drop_staging(results: Store, staging: dict[str, str]) -> None:
    for rel in staging.values():
        try:
            results.delete_folder(rel)
        except OSError:
            log.debug("could not delete the staging folder %s", results.url_of(rel), exc_info=True)


def _expired_through(lake: Store, clusters: Sequence[str] | None) -> dt.date | None:
    """:func:`lagscope.retention.expired_through` of the lake's offsets (local or on an object store)."""
    return expired_through(lake, "offsets", clusters)


def run_batch(spark: SparkSession, lake: Path | str | Store, results: Path | str | Store, *, since: dt.date,
              until: dt.date, settings: AnalyticsConfig, history_points: int = HISTORY_POINTS,
              clusters: Sequence[str] | None = None, progress: bool = True,
              storage: StorageConfig | None = None, now: dt.datetime | None = None) -> StepFiles:
    """Analyse whole UTC days ``since … until`` and overwrite those days' result partitions (a
    batch is a first step over its range: no state in, none out). ``settings``: the ``analytics``
    section; ``history_points``: ``time_lag.history_points`` (shared with the collector). The lake
    and the results are local folders or ``s3://`` URLs (opened with ``storage``), or
    stores (:class:`~lagscope.storage.Store`). Returns files written. ``now`` (default: the
    clock): a range that ends after it (today) holds the minute in progress, judged as a
    provisional step judges it (partial: no minute of a lag growth).
    Raises :class:`DataExpired` when retention removed the whole range (a part: a warning)."""
    if until < since:
        raise ConfigError(f"--until {until} is before --since {since}")
    lake_root, results_root = root_store(lake, storage), root_store(results, storage)
    days = tuple((since + dt.timedelta(days=i)).isoformat() for i in range((until - since).days + 1))
    moved: list[Quarantined] = []
    checked = {name: _lake_files(lake_root, name, clusters, since, until, moved) for name in LAKE_TABLES}
    files = _paths(checked)
    gone = _expired_through(lake_root, clusters)
    if not files["offsets"] and not files["members"]:
        if gone is not None and since <= gone:
            raise DataExpired(f"the lake's sweeps of {since} … {until} have expired: retention removed its days up "
                              f"to {gone} (collector.retention); analyse days after {gone}")
        raise ConfigError(f"the lake {lake_root.url} has no sweeps between {since} and {until}")
    if gone is not None and since <= gone:
        log.warning("the lake's sweeps of %s … %s have expired (retention removed its days up to %s, "
                    "collector.retention): this batch analyses what is left", since, min(gone, until), gone)
    staging = _staging(results_root)
    sizes = _row_counts(checked, {}, results_root)
    buckets = _bucket_count(spark, sizes)
    end = dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), dt.UTC)
    now = now or dt.datetime.now(dt.UTC)
    plan = _Plan(lake=lake_root, results=results_root, settings=settings, history_points=history_points,
                 buckets=buckets, places=_placements(spark, buckets), as_of=end,
                 staging=staging, state_out=None, days=days, optional=_optional(lake_root),
                 partial_from=now if now < end else None)
    try:
        rows, unreadable = _execute(spark, files, sizes, plan, progress)
        moved.extend(unreadable)
        log.info("batch %s … %s: %d buckets → %s%s", since, until, buckets,
                 ", ".join(f"{name} {n} rows" for name, n in sorted(rows.items())), _without(moved))
        return StepFiles(publish_batch(results_root, _staged(results_root, staging), tag=batch_tag(since, until)),
                         moved)
    finally:
        _drop_staging(results_root, staging)


def run_incremental(spark: SparkSession, lake: Path | str | Store, results: Path | str | Store, *,
                    settings: AnalyticsConfig, until: dt.datetime, since: dt.datetime | None = None,
                    history_points: int = HISTORY_POINTS, clusters: Sequence[str] | None = None,
                    progress: bool = False, storage: StorageConfig | None = None) -> StepFiles:
    """Analyse the sweeps in ``[checkpoint, until)`` (``until`` rounded down to the minute),
    carrying the state; append the results and move the checkpoint (``settings``,
    ``history_points``, the roots and ``storage`` as for :func:`run_batch`). Returns files written
    (empty when there was nothing new) and the lake files quarantined (:class:`StepFiles`).
    Re-running a step that crashed before its checkpoint moved replaces its files (they are named
    after its range) instead of adding to them."""
    lake_root, results_root = root_store(lake, storage), root_store(results, storage)
    until = until.astimezone(dt.UTC).replace(second=0, microsecond=0)
    cp = read_checkpoint(results_root)
    if cp is not None:
        start = dt.datetime.fromisoformat(cp["watermark"])
    elif since is not None:
        start = since.astimezone(dt.UTC)
    else:
        raise ConfigError("no checkpoint yet: give --since for the first incremental run")
    if until <= start:
        return StepFiles()
    gone = _expired_through(lake_root, clusters)
    if gone is not None and start.date() <= gone:
        log.warning("the lake's sweeps from %s to the end of %s have expired (retention removed them, "
                    "collector.retention) before the analytics read them: this step analyses what is left",
                    start.isoformat(), gone)
    version = f"v-{int(until.timestamp())}-{uuid.uuid4().hex[:6]}"
    state_out = f"_state/{version}"
    try:
        written, moved = _step(spark, lake_root, results_root, cp, settings=settings, history_points=history_points,
                               start=start, until=until, clusters=clusters, progress=progress, state_out=state_out,
                               publish=lambda staging: publish_incremental(results_root, staging,
                                                                           tag=inc_tag(start, until),
                                                                           clusters=clusters))
    except BaseException:
        _drop_staging(results_root, {"state": state_out})
        raise
    write_checkpoint(results_root, Checkpoint(watermark=until.isoformat(), version=version))
    drop_provisional(results_root)  # hidden since the watermark moved: cleanup
    if moved:
        log.info("step %s … %s: analysed%s", start.isoformat(), until.isoformat(), _without(moved))
    return StepFiles(written, moved)


def run_provisional(spark: SparkSession, lake: Path | str | Store, results: Path | str | Store, *,
                    settings: AnalyticsConfig, until: dt.datetime, history_points: int = HISTORY_POINTS,
                    clusters: Sequence[str] | None = None, progress: bool = False,
                    storage: StorageConfig | None = None) -> StepFiles:
    """A *provisional step*: analyse the sweeps in ``[checkpoint, until)`` (``until`` not rounded:
    the minute in progress too) from the carried state, as :func:`run_incremental` would, and
    publish the result rows as ``pre-<from>-<to>-…`` (:func:`lagscope.analytics.io.publish_provisional`)
    in place of the provisional step before; write no state and leave the checkpoint alone, so
    the next full step analyses the same sweeps again and replaces these rows
    (:mod:`lagscope.results`). Returns the files written; nothing without a checkpoint (a first
    step is a full one) or when ``until`` is not past it."""
    lake_root, results_root = root_store(lake, storage), root_store(results, storage)
    cp = read_checkpoint(results_root)
    if cp is None:
        return StepFiles()
    start = dt.datetime.fromisoformat(cp["watermark"]).astimezone(dt.UTC)
    until = until.astimezone(dt.UTC)
    until = until.replace(microsecond=until.microsecond // 1000 * 1000)  # the names hold milliseconds
    if until <= start:
        return StepFiles()
    written, moved = _step(spark, lake_root, results_root, cp, settings=settings, history_points=history_points,
                           start=start, until=until, clusters=clusters, progress=progress, state_out=None,
                           publish=lambda staging: publish_provisional(results_root, staging, start=start,
                                                                       until=until), partial_from=until)
    return StepFiles(written, moved)


def _step(spark: SparkSession, lake: Store, results: Store, cp: Checkpoint | None, *, settings: AnalyticsConfig,
          history_points: int, start: dt.datetime, until: dt.datetime, clusters: Sequence[str] | None,
          progress: bool, state_out: str | None, publish: Callable[[dict[str, Path]], dict[str, int]],
          partial_from: dt.datetime | None = None) -> tuple[dict[str, int], list[Quarantined]]:
    """An incremental step's job over ``[start, until)`` from the state of ``cp``: the next state
    into ``state_out`` (relative to the results root; None: none, a provisional step), the result
    files staged and handed to ``publish``; ``partial_from``: a provisional step's ``until``,
    inside the minute in progress. Returns what ``publish`` returned and the lake files
    quarantined."""
    moved: list[Quarantined] = []
    checked: dict[str, list[CheckedFile]] = {}
    for name in LAKE_TABLES:
        first = (start - COMMIT_LOOKBACK).date() if name == "commits" else start.date()
        checked[name] = _lake_files(lake, name, clusters, first, until.date(), moved)
    files = _paths(checked)
    state = _state_files(results, cp["version"]) if cp is not None else {}
    files.update(state)
    staging = _staging(results)
    sizes = _row_counts(checked, state, results)
    buckets = _bucket_count(spark, sizes)
    plan = _Plan(lake=lake, results=results, settings=settings, history_points=history_points, buckets=buckets,
                 places=_placements(spark, buckets), as_of=until, staging=staging, state_out=state_out,
                 start=start, until=until, optional=_optional(lake), partial_from=partial_from)
    try:
        _, unreadable = _execute(spark, files, sizes, plan, progress)
        moved.extend(unreadable)
        return publish(_staged(results, staging)), moved
    finally:
        _drop_staging(results, staging)


def _without(moved: Sequence[Quarantined]) -> str:
    """`` without N unreadable file(s) (quarantined: …)`` for a step's log line, or nothing."""
    if not moved:
        return ""
    return f" without {len(moved)} unreadable file(s) (quarantined: {', '.join(str(q.path) for q in moved)})"


def _optional(lake: Store) -> tuple[str, ...]:
    """The commit stream's tables the lake has."""
    present = set(lake.folders(""))
    return tuple(name for name in LAKE_TABLES[2:] if name in present)
