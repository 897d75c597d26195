"""The analytics job: one *step* turns lake rows (plus the previous step's state) into the four
result tables and the next state. A batch run is one step from an empty state over whole
days; an incremental run is one step over the sweeps newer than its checkpoint.

What a step carries to the next (all bounded by the number of partitions and groups, not by
the length of the history):

- ``series``: the last sweep row per (cluster, group, topic, partition) with its running
  markers (last commit change, pending-work start, largest and last consume rate, open
  retention-loss episode, last end-offset change, last commit record, last progress of an
  owner);
- ``history``: the end-offset points still above the group's committed offset (for lag in
  seconds), older ones merged per minute;
- ``gaps``: the last 64 commit gaps per partition (its learned normal), one row each;
- ``entries``: the last N Burrow entries per partition;
- ``minutes``: the last minute row per partition with its open lag-growth run;
- ``msweeps``: each group's member sweeps since its last settled sweep (open rebalances);
- ``recent_rebalances``: rebalances of the storm window (of an open storm: from the window
  before its first rebalance).
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics import findings, local, onepass, perkey, rebalances, status, trends
from lagscope.analytics.io import (
    Checkpoint,
    commit_arrow,
    commit_results,
    new_staging,
    partition_files,
    publish_staged,
    read_checkpoint,
    read_lake,
    read_state,
    spark_arrow_schema,
    state_root,
    write_checkpoint,
    write_state,
)
from lagscope.analytics.params import RuleParams
from lagscope.analytics.series import KEY, enrich_series, prepare_series
from lagscope.errors import ConfigError, LakeError

__all__ = ["Settings", "StepResult", "run_batch", "run_incremental", "run_step"]

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


@dataclass
class StepResult:
    tables: dict[str, DataFrame]
    state: dict[str, DataFrame]
    #: the frames the step computed and stored for its several consumers: release them
    #: (:meth:`release`) once the tables and the state are written
    held: list[DataFrame] = field(default_factory=list)

    def release(self) -> None:
        """Free the stored rows of :attr:`held` now (a long-running ``lagscope run`` steps
        every minute; waiting for the JVM's garbage collector would let them pile up)."""
        for df in self.held:
            try:  # a local checkpoint's plan is the stored RDD
                df._jdf.logicalPlan().rdd().unpersist(False)
            except Exception as exc:  # freeing early is an optimisation only
                log.debug("could not release a stored frame: %s", exc)
        self.held.clear()


def _secs(c: Column) -> Column:
    return F.unix_micros(c).cast("double") / F.lit(1e6)


def _timeouts(group_events: DataFrame | None) -> DataFrame | None:
    """The group-metadata records the rebalance windows use (timeouts, generations)."""
    return None if group_events is None else rebalances.generation_records(group_events)


def _group_lag(series: DataFrame) -> DataFrame:
    """``cluster, group_id, t, group_lag``: Σ lag per sweep, each partition once (a sweep written
    twice is in the lake twice)."""
    return (series.select(*KEY, "t", "lag").dropDuplicates([*KEY, "t"])
            .groupBy("cluster", "group_id", "t").agg(F.sum("lag").alias("group_lag")))


def _progress_inputs(series: DataFrame, st: dict[str, DataFrame],
                     groups: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The rebalance windows' per-sweep inputs (:data:`lagscope.analytics.rebalances.ProgressInputs`)
    for ``groups``: the series and its carried state rows of those groups only, enriched."""
    g = ["cluster", "group_id"]
    ser = series.join(groups, g, "left_semi")
    carried = st["series"].join(groups, g, "left_semi") if st.get("series") is not None else None
    fresh = enrich_series(ser, carried).where(~F.col("is_state"))
    alive = fresh.where(F.col("owner").isNotNull() & (F.col("changed") | (F.coalesce(F.col("lag"), F.lit(0)) == 0)))
    alive = alive.select("cluster", "group_id", "owner", F.col("t").alias("alive_t"))
    changes = fresh.where(F.col("changed")).select(*KEY, "t")
    if carried is not None:
        # the owners' last progress before the step (a state written before m_alive_t: the last change)
        before = F.coalesce(F.col("m_alive_t"), F.col("m_change_t"))
        alive = alive.unionByName(carried.where(F.col("owner").isNotNull() & before.isNotNull())
                                  .select("cluster", "group_id", "owner", before.alias("alive_t")))
        changes = changes.unionByName(carried.where(F.col("m_change_t").isNotNull()).select(
            *KEY, F.col("m_change_t").alias("t")))
    alive = alive.groupBy("cluster", "group_id", "owner").agg(F.max("alive_t").alias("alive_t"))
    group_lag = _group_lag(ser)
    if st.get("msweeps") is not None:
        group_lag = group_lag.unionByName(st["msweeps"].where(F.col("group_lag").isNotNull()).join(
            groups, g, "left_semi").select("cluster", "group_id", "t", "group_lag"))
    return alive, group_lag, changes


def _materialise(df: DataFrame, held: list[DataFrame]) -> DataFrame:
    """Compute ``df`` now and keep it (on the executors' local disks) for the several consumers
    of the step. A local checkpoint, not ``persist``: the frames built on it start from the
    stored rows, so their plans stay small (with ``persist`` every later operation re-analyses
    the whole lineage and matches it against the cache, which cost seconds per step), and
    nothing is recomputed. Stored on the executors, like a cache: losing one fails the run,
    which re-running repeats (its output is replaced, not appended).

    On disk, not in memory with disk as overflow: Spark reads a block that overflowed to disk
    back into one heap buffer of the block's size, and a large batch's blocks (a shuffle
    partition of the series: about 1 GB at 50 M rows with 8 partitions) ran a 4 GB driver out of
    heap. The disk blocks are read back as a stream (from the page cache when memory allows)."""
    stored = df.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)
    held.append(stored)
    return stored


def run_step(offsets: DataFrame, members: DataFrame, *, settings: Settings,
             state: dict[str, DataFrame] | None = None, commits: DataFrame | None = None,
             group_events: DataFrame | None = None, as_of: dt.datetime | None = None) -> StepResult:
    """One analytics step (pure: DataFrames in, DataFrames out)."""
    st = state or {}
    p = settings.rules
    held: list[DataFrame] = []
    series = prepare_series(offsets, settings.read_committed_groups)
    commit_recs = findings.commit_records(commits) if commits is not None else None
    # the per-partition pass (one shuffle, one sort, one vectorised pass per chunk of keys): the
    # minute rows (one per key and minute, its last sweep) with lag seconds and the partition's
    # status, the per-partition anomalies, and the per-partition parts of the next state
    passed = _materialise(perkey.transform_pass(series, st, commits=commit_recs,
                                                params=onepass.PassParams(
        rules=p, history_recent_s=settings.history_recent_s, commit_stream=commit_recs is not None)), held)
    lag_rows = perkey.minute_rows(passed)
    lag_trends = trends.transform_lag_trends(lag_rows)

    # rebalances
    msweeps = rebalances.member_sweeps(members).withColumn("is_state", F.lit(False))
    if st.get("msweeps") is not None:
        msweeps = msweeps.unionByName(st["msweeps"].drop("group_lag"), allowMissingColumns=True)
    commit_times = None
    if commits is not None:
        commit_times = commits.where(F.col("committed_offset").isNotNull()).select(
            *KEY, _secs(F.coalesce(F.col("commit_ts"), F.col("record_ts"))).alias("t"))
    rb = rebalances.transform_rebalances(
        msweeps, functools.partial(_progress_inputs, series, st), generations=_timeouts(group_events),
        commits=commit_times,
        session_timeout_s=settings.session_timeout_s, heartbeat_s=settings.heartbeat_s,
        network_s=settings.network_s, rebalance_timeout_s=settings.rebalance_timeout_s)
    rb = _materialise(rb, held)
    recent_in = rb.select("cluster", "group_id", "start_ts", "end_ts", F.lit(False).alias("is_state"))
    if st.get("recent_rebalances") is not None:
        recent_in = recent_in.unionByName(st["recent_rebalances"].select(
            "cluster", "group_id", "start_ts", "end_ts", F.lit(True).alias("is_state")))
    storms = findings.transform_storms(recent_in, count=p.storm_count, window_s=p.storm_window_s)

    # a stall, stop or commit gap inside a rebalance outage is the rebalance (the other kinds pass)
    quiet = findings.drop_rebalance_outages(perkey.anomaly_rows(passed), rb)
    anomalies = quiet.unionByName(storms).withColumn("date", F.date_format("start_ts", "yyyy-MM-dd"))

    # status: the partition rows from the pass, the group rows from them
    stat = status.with_group_rows(perkey.status_rows(passed))

    stamp = F.lit(as_of or dt.datetime.now(dt.UTC)).cast("timestamp")
    tables = {
        "lag_trends": lag_trends,
        "rebalances": rb.drop("quiet_from_ts").withColumn("as_of_ts", stamp),
        "anomalies": anomalies.withColumn("as_of_ts", stamp),
        "status": stat,
    }

    # the next step's state
    owners = series.select("cluster", "group_id", "owner")
    if st.get("series") is not None:
        owners = owners.unionByName(st["series"].select("cluster", "group_id", "owner"))
    settled_w = Window.partitionBy("cluster", "group_id")
    ms = msweeps.withColumn("_last_settled", F.max(F.when(F.col("settled"), F.col("t"))).over(settled_w))
    ms = ms.where(F.col("_last_settled").isNull() | (F.col("t") >= F.col("_last_settled"))).drop("_last_settled")
    # the group lag at the sweeps carried (a window's A may be one of them)
    ms_at = ms.select("cluster", "group_id", "t")
    lag_at = _group_lag(series.join(F.broadcast(ms_at), ["cluster", "group_id", "t"], "left_semi"))
    if st.get("msweeps") is not None:
        lag_at = lag_at.unionByName(st["msweeps"].where(F.col("group_lag").isNotNull()).select(
            "cluster", "group_id", "t", "group_lag"))
    ms = ms.withColumn("is_state", F.lit(True)).join(lag_at, ["cluster", "group_id", "t"], "left")
    recent = findings.storm_state(recent_in, count=p.storm_count, window_s=p.storm_window_s)
    new_state = {
        "series": perkey.series_state(passed, owners),
        "history": perkey.history_state(passed),
        "gaps": perkey.gaps_state(passed),
        "entries": perkey.entries_state(passed),
        "minutes": perkey.minutes_state(passed),
        "msweeps": ms,
        "recent_rebalances": recent,
    }
    return StepResult(tables=tables, state=new_state, held=held)


# --------------------------------------------------------------------------------------------
# runs
# --------------------------------------------------------------------------------------------

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


#: how far before an incremental step's start its commits reach (the commit before a step's
#: first commit, revocation commits before a rebalance)
_COMMIT_LOOKBACK = dt.timedelta(minutes=15)


def _read_inputs(spark: SparkSession, lake: Path, since: dt.date, until: dt.date,
                 clusters: Sequence[str] | None, commits_since: dt.date | None = None) -> dict[str, DataFrame | None]:
    """The lake tables of the date partitions ``since … until`` (``commits`` from ``commits_since``
    when given: a look-back may reach into the day before)."""
    got: dict[str, DataFrame | None] = {}
    for name in ("offsets", "members", "commits", "group_events"):
        first = commits_since if name == "commits" and commits_since is not None else since
        got[name] = read_lake(spark, lake, name, since=first, until=until, clusters=clusters)
    for name in ("commits", "group_events"):
        df = got[name]
        if df is not None and not (lake / name).exists():
            got[name] = None
    return got


def _write_all(results: Path, tables: dict[str, DataFrame], *, mode: str, tag: str,
               keep: Column | None = None) -> dict[str, int]:
    written = {}
    for name, df in tables.items():
        out = df.where(keep) if keep is not None else df
        written[name] = commit_results(results, name, out, mode=mode, tag=tag)
    return written


def run_batch(spark: SparkSession | None, lake: Path | str, results: Path | str, *, since: dt.date, until: dt.date,
              settings: Settings, clusters: Sequence[str] | None = None, progress: bool = True,
              engine: str = "auto", spark_factory: Callable[[], SparkSession] | None = None,
              local_max_rows: int = 100_000_000) -> dict[str, int]:
    """Analyse whole UTC days ``since … until`` and overwrite those days' result partitions.

    ``engine="auto"``: in this process and its forks when it can
    (:func:`lagscope.analytics.local.run_local_batch`: no rebalance window in the range, at most
    ``local_max_rows`` offset rows: they are held in memory), else on Spark (``spark``, or the
    session ``spark_factory`` makes)."""
    if until < since:
        raise ConfigError(f"--until {until} is before --since {since}")
    if engine not in ENGINES:
        raise ConfigError(f"unknown analytics engine {engine!r} (one of: {', '.join(ENGINES)})")
    lake, results = Path(lake), Path(results)
    days = [(since + dt.timedelta(days=i)).isoformat() for i in range((until - since).days + 1)]
    as_of = dt.datetime.combine(until + dt.timedelta(days=1), dt.time(), dt.UTC)
    tag = f"batch-{since}-{until}"
    if engine == "auto":
        try:
            written = _local_batch(lake, results, since, until, clusters, settings=settings, days=days, as_of=as_of,
                                   tag=tag, progress=progress, max_rows=local_max_rows)
        except (LakeError, ConfigError):
            raise
        except Exception:  # a defect of the in-process batch must not stop the analytics: Spark does it
            log.warning("the in-process batch %s … %s failed; running it on Spark", since, until, exc_info=True)
            written = None
        if written is not None:
            return written
        log.info("batch %s … %s on Spark (a rebalance window, more than %d offset rows, or a very large group)",
                 since, until, local_max_rows)
    if spark is None:
        if spark_factory is None:
            raise ConfigError("this batch needs Spark and no session was given")
        spark = spark_factory()
    inp = _read_inputs(spark, lake, since, until, clusters)
    offsets, members = inp["offsets"], inp["members"]
    if offsets is None or members is None:  # read_lake always returns a frame; keeps mypy exact
        raise ConfigError("the lake has no offsets/members tables")
    with _progress(spark, progress):
        step = run_step(offsets, members, settings=settings, commits=inp["commits"],
                        group_events=inp["group_events"], as_of=as_of)
        try:
            return _write_all(results, step.tables, mode="batch", tag=tag, keep=F.col("date").isin(days))
        finally:
            step.release()


#: the string columns an in-process batch reads as dictionaries (the offsets' rows are most)
_BATCH_DICTIONARIES = {"offsets": ("group_id", "topic", "member_id")}


def _local_batch(lake: Path, results: Path, since: dt.date, until: dt.date, clusters: Sequence[str] | None, *,
                 settings: Settings, days: Sequence[str], as_of: dt.datetime, tag: str,
                 progress: bool, max_rows: int) -> dict[str, int] | None:
    """:func:`run_batch` in this process (``None``: the batch is one for Spark)."""
    paths = {name: partition_files(lake, name, clusters, since, until) for name in _LAKE_TABLES}
    if paths["offsets"] and ds.dataset(paths["offsets"], format="parquet").count_rows() > max_rows:  # footers
        return None
    inputs = _arrow_inputs({name: _read_arrow(lake, name, paths[name], dictionaries=_BATCH_DICTIONARIES.get(name, ()))
                            for name in _LAKE_TABLES}, {})
    names = ("lag_trends", "anomalies", "status")
    staging = {name: new_staging(results, name) for name in names}

    def report(done: int, total: int, rows: int) -> None:
        if progress:
            log.info("progress: batch %d/%d buckets of groups, %d of %d offset rows", done, total, rows,
                     inputs.offsets.num_rows)

    try:
        staged = local.run_local_batch(inputs, settings=settings, as_of=as_of, staging=staging, days=days,
                                       progress=report)
        if staged is None:
            return None
        log.info("batch %s … %s in this process: %d offset rows → %s", since, until, inputs.offsets.num_rows,
                 ", ".join(f"{name} {k} rows" for name, k in sorted(staged.items())))
        written = {name: publish_staged(results, name, staging[name], mode="batch", tag=tag) for name in names}
    finally:
        for folder in staging.values():
            shutil.rmtree(folder, ignore_errors=True)
    written["rebalances"] = 0
    return written


def _local_inputs(lake: Path, results: Path, cp: Checkpoint | None, start: dt.datetime, until: dt.datetime,
                  clusters: Sequence[str] | None) -> local.LocalInputs:
    """The step's lake rows and carried state as pyarrow tables (the in-process engine's input;
    the same rows :func:`_read_inputs` and the filters of :func:`run_incremental` give Spark)."""
    got: dict[str, pa.Table | None] = {}
    for name in _LAKE_TABLES:
        first = (start - _COMMIT_LOOKBACK).date() if name == "commits" else start.date()
        col, lo = ("record_ts", start - _COMMIT_LOOKBACK) if name == "commits" else ("sweep_ts", start)
        where = None if name == "group_events" else (pc.field(col) >= pa.scalar(lo, _US)) & (
            pc.field(col) < pa.scalar(until, _US))
        got[name] = _read_arrow(lake, name, partition_files(lake, name, clusters, first, until.date()), where=where)
    state: dict[str, pa.Table] = {}
    if cp is not None:
        for name in _STATE_PARTS:
            part = local.read_state_part(state_root(results) / cp["version"] / name)
            if part is not None:
                state[name] = part
    return _arrow_inputs(got, state)


#: the lake tables an analytics run reads; the last two are optional (the commit stream's)
_LAKE_TABLES = ("offsets", "members", "commits", "group_events")


def _read_arrow(lake: Path, name: str, paths: Sequence[str], *, where: ds.Expression | None = None,
                dictionaries: Sequence[str] = ()) -> pa.Table | None:
    """A lake table's rows in ``paths`` as pyarrow (:func:`lagscope.analytics.local.read_files`);
    ``None`` for an optional table the lake does not have."""
    if name in _LAKE_TABLES[2:] and not (lake / name).exists():
        return None
    return local.read_files(paths, spark_arrow_schema(name), lake / name, where=where,
                            columns=local.READ_COLUMNS[name], dictionaries=dictionaries)


def _arrow_inputs(got: dict[str, pa.Table | None], state: dict[str, pa.Table]) -> local.LocalInputs:
    offsets, members = got["offsets"], got["members"]
    if offsets is None or members is None:  # both are always read; keeps mypy exact
        raise ConfigError("the lake has no offsets/members tables")
    return local.LocalInputs(offsets=offsets, members=members, commits=got["commits"],
                             group_events=got["group_events"], state=state)


_US = pa.timestamp("us", tz="UTC")

#: the parts of a step's carried state (see the module doc)
_STATE_PARTS = ("series", "history", "gaps", "entries", "minutes", "msweeps", "recent_rebalances")

#: the engines of an incremental step: ``auto`` runs it in this process
#: (:mod:`lagscope.analytics.local`) unless it is one for Spark; ``spark`` always on Spark
ENGINES = ("auto", "spark")


def run_incremental(spark: SparkSession | None, lake: Path | str, results: Path | str, *, settings: Settings,
                    until: dt.datetime, since: dt.datetime | None = None,
                    clusters: Sequence[str] | None = None, progress: bool = False,
                    engine: str = "auto", spark_factory: Callable[[], SparkSession] | None = None) -> dict[str, int]:
    """Analyse the sweeps in ``[checkpoint, until)`` (``until`` rounded down to the minute),
    carrying the state; append the results and move the checkpoint. Returns files written
    (empty when there was nothing new).

    ``engine="auto"``: in this process when it can (:mod:`lagscope.analytics.local`), else on
    Spark: ``spark``, or the session ``spark_factory`` makes (so a step that needs no Spark does
    not start it)."""
    if engine not in ENGINES:
        raise ConfigError(f"unknown analytics engine {engine!r} (one of: {', '.join(ENGINES)})")
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
    if engine == "auto":
        try:
            done = local.run_local_step(_local_inputs(lake, results, cp, start, until, clusters), settings=settings,
                                        as_of=until)
        except (LakeError, ConfigError):
            raise
        except Exception:  # a defect of the in-process step must not stop the analytics: Spark does it
            log.warning("the in-process step %s … %s failed; running it on Spark", start.isoformat(),
                        until.isoformat(), exc_info=True)
            done = None
        if done is not None:
            # the tables and the state parts are independent files: written side by side (pyarrow
            # releases the GIL while it encodes), all before the checkpoint moves
            with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1),
                                    thread_name_prefix="lagscope-write") as pool:
                files = {name: pool.submit(commit_arrow, results, name, tbl, mode="incremental", tag=tag)
                         for name, tbl in done.tables.items()}
                parts = [pool.submit(local.write_state_part, state_root(results) / version / name, part)
                         for name, part in done.state.items()]
                written = {name: f.result() for name, f in files.items()}
                for f in parts:
                    f.result()
            written.setdefault("rebalances", 0)
            write_checkpoint(results, Checkpoint(watermark=until.isoformat(), version=version))
            return written
        log.info("incremental step %s … %s on Spark (a rebalance window, an older state, or many rows)",
                 start.isoformat(), until.isoformat())
    if spark is None:
        if spark_factory is None:
            raise ConfigError("this incremental step needs Spark and no session was given")
        spark = spark_factory()
    inp = _read_inputs(spark, lake, start.date(), until.date(), clusters,
                       commits_since=(start - _COMMIT_LOOKBACK).date())
    in_range = (F.col("sweep_ts") >= F.lit(start)) & (F.col("sweep_ts") < F.lit(until))
    offsets = inp["offsets"].where(in_range)  # type: ignore[union-attr]
    members = inp["members"].where(in_range)  # type: ignore[union-attr]
    commits = inp["commits"]
    if commits is not None:
        commits = commits.where((F.col("record_ts") >= F.lit(start - _COMMIT_LOOKBACK))
                                & (F.col("record_ts") < F.lit(until)))
    events = inp["group_events"]
    state: dict[str, DataFrame] = {}
    if cp is not None:
        for name in _STATE_PARTS:
            df = read_state(spark, results, cp["version"], name)
            if df is not None:
                state[name] = df
    with _progress(spark, progress):
        step = run_step(offsets, members, settings=settings, state=state, commits=commits, group_events=events,
                        as_of=until)
        try:
            written = _write_all(results, step.tables, mode="incremental", tag=tag)
            write_state(results, version, step.state)
        finally:
            step.release()
    write_checkpoint(results, Checkpoint(watermark=until.isoformat(), version=version))
    return written
