"""The ``anomalies`` table: its rules, the thresholds they take (:class:`RuleParams`) and the
group-level ones (rebalance storms, outages a rebalance explains).

The per-partition rules below run in the step's one vectorised pass
(:mod:`lagscope.analytics.onepass`): stall, stop and retention loss in
:mod:`~lagscope.analytics.np_episodes`, rewind and skip in :mod:`~lagscope.analytics.np_points`,
commit gaps in :mod:`~lagscope.analytics.np_gaps`, lag growth in :mod:`~lagscope.analytics.np_growth`.
Their Spark statements, which they are tested against, are in ``tests/analytics/spark_reference.py``.

Episodes (a condition that holds over consecutive sweeps, reported with start and end):

- **stall**: the partition has an owner, lag > 0, and its committed offset has not moved for
  ``stall_after_s`` while work was pending; with the commit stream, the group still commits
  (the same offset: Burrow's STALL). Starts when the work became pending or the last commit
  happened (the later of the two); magnitude = seconds.
- **stop**: as stall, but nobody owns the partition (the consumer is gone) or, with the commit
  stream, nothing at all was committed for ``stop_after_s`` (Burrow's STOP: no commits, owner
  or not); ``stop_after_s``. From sweeps alone an owned partition without progress is a stall:
  an OffsetFetch cannot tell a commit of the same offset from no commit.
- One no-progress run is one episode: it keeps the kind it had when it crossed its threshold
  (a stalled member that later loses its partitions, or leaves an empty group, is one stall,
  not a stall and a stop).
- **retention_loss**: committed < log start; magnitude = messages never processed (the
  largest log start − committed of the episode).

Point events (one sweep interval, or one commit):

- **rewind**: the committed offset went backwards; magnitude = messages processed twice
  (previous committed − max(new committed, log start)): the duplicates at-least-once allows.
  Not after the end offset went down since the previous commit (the topic was deleted and
  re-created, or the log truncated): the lower offset is in another log, nothing is re-read.
  With the commit stream (lake ``commits``) every commit is compared with the one before it
  (``__consumer_offsets`` order), so a rewind that a later commit covered before the next
  sweep is found, timed exactly (start = end = the commit); a sweep rewind a commit rewind
  explains is not reported twice. Without it, from the sweeps.
- **skip**: the committed offset jumped past everything that was pending at the previous sweep
  (to at least its end) and further than the group has ever consumed in the interval
  (``> skip_factor × its largest rate × Δt``, at least ``skip_min_messages``), not to the log
  start (that is a retention reset). Only the part past the highest offset ever committed
  counts as the jump: after a rewind the group re-consumes, fast, what it had processed
  already, and that is no skip. Magnitude = the jump minus what the previous interval's rate
  could have processed: messages never processed. With the commit stream its time is the
  commit that jumped.
- **commit_gap**: a gap between commits, with work pending, far beyond the partition's own
  normal: ``gap > median + k·max(1.4826·MAD, floor)`` over its learned gaps (robust,
  per partition), and ``≥ min_gap_s``. Gaps long enough to be stalls or stops are reported
  as those instead. Magnitude = seconds.

Minute-level: **lag_growth** (lag rose and produce > consume for ``growth_min_minutes``
consecutive minutes; magnitude = messages/s of growth). Group-level: **rebalance_storm**
(``storm_count`` rebalances within ``storm_window_s``; magnitude = rebalances).

Thresholds (:class:`RuleParams`): the defaults are unchanged by the accuracy work; what
changed is what the rules measure (the commit stream's exact commits, one episode per
no-progress run, the highest committed offset for skips). The accuracy benchmark's
second-scale scenarios commit every 0.5 s, so it scales the time thresholds by the commit
interval: stall/stop after 10 intervals (5 s; the 60 s defaults are 12 intervals of the Java
client's 5 s auto-commit), commit gaps from 2 intervals (1 s; default 10 s). Its earlier 2 s
made a 4 s commit gap a stop by definition (gaps ≥ ``stall_after_s`` are stalls or stops),
and a slow consumer alternating between its partitions a stall.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics.params import RuleParams

__all__ = ["ANOMALY_COLUMNS", "RuleParams", "commit_records", "drop_rebalance_outages", "finish", "storm_state",
           "transform_storms"]

ANOMALY_COLUMNS = ["cluster", "group_id", "topic", "partition", "kind", "start_ts", "end_ts",
                   "severity", "magnitude", "unit", "detail", "key"]


def _key(kind: Column, start: Column) -> Column:
    return F.concat_ws("|", kind, F.col("cluster"), F.col("group_id"), F.coalesce(F.col("topic"), F.lit("")),
                       F.coalesce(F.col("partition").cast("string"), F.lit("")),
                       F.unix_millis(start).cast("string"))


def finish(df: DataFrame) -> DataFrame:
    """Add ``key`` and order the columns as the table has them."""
    return df.withColumn("key", _key(F.col("kind"), F.col("start_ts"))).select(*ANOMALY_COLUMNS)


def commit_records(commits: DataFrame) -> DataFrame:
    """Lake ``commits`` rows → ``KEY, t, offset, seq``: every commit of an offset (tombstones
    dropped), ``t`` its exact time (the coordinator's commit timestamp, else the record's),
    ``seq`` its position in ``__consumer_offsets`` (the coordinator's order)."""
    return commits.where(F.col("committed_offset").isNotNull()).select(
        F.col("cluster"), F.col("group_id"), F.col("topic"), F.col("partition").cast("int").alias("partition"),
        (F.unix_micros(F.coalesce(F.col("commit_ts"), F.col("record_ts"))).cast("double") / F.lit(1e6)).alias("t"),
        F.col("committed_offset").alias("offset"),
        (F.col("source_partition").cast("long") * F.lit(1 << 40) + F.col("source_offset")).alias("seq"))


def _storm_pass(rebalances: DataFrame, *, count: int, window_s: float) -> DataFrame:
    """Rebalances (``cluster, group_id, start_ts, end_ts``, optionally ``is_state``) with ``_t``
    (start, ms), ``_n`` and ``_first`` (how many started within ``window_s`` before it, and the
    first of them), ``_stormy`` (``_n ≥ count``) and ``_sid`` (consecutive stormy rebalances
    share it)."""
    ctx = F.coalesce(F.col("is_state"), F.lit(False)) if "is_state" in rebalances.columns else F.lit(False)
    r = rebalances.select("cluster", "group_id", "start_ts", "end_ts", ctx.alias("is_state")).withColumn(
        "_t", F.unix_millis("start_ts"))
    wg = Window.partitionBy("cluster", "group_id").orderBy("_t")
    trailing = wg.rangeBetween(-int(window_s * 1000), 0)
    r = (r.withColumn("_n", F.count("*").over(trailing)).withColumn("_first", F.min("start_ts").over(trailing)))
    r = r.withColumn("_stormy", F.col("_n") >= count)
    r = r.withColumn("_new", F.col("_stormy") & ~F.coalesce(F.lag("_stormy").over(wg), F.lit(False)))
    return r.withColumn("_sid", F.sum(F.col("_new").cast("int")).over(wg.rowsBetween(Window.unboundedPreceding, 0)))


def transform_storms(rebalances: DataFrame, *, count: int, window_s: float) -> DataFrame:
    """rebalance_storm: ``count`` or more rebalance windows starting within ``window_s``.
    Consecutive stormy rebalances form one storm, keyed by its first rebalance's start.

    Rows with ``is_state`` true are the previous step's (:func:`storm_state`): context only, a
    storm made of them alone was reported by that step (and their prefix may be cut)."""
    r = _storm_pass(rebalances, count=count, window_s=window_s)
    storms = r.where("_stormy").groupBy("cluster", "group_id", "_sid").agg(
        F.min("_first").alias("start_ts"), F.max("end_ts").alias("end_ts"), F.max("_n").alias("_n"),
        F.min("is_state").alias("_old")).where(~F.col("_old"))
    out = storms.select(
        "cluster", "group_id", F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("partition"),
        F.lit("rebalance_storm").alias("kind"), "start_ts", "end_ts", F.lit("warning").alias("severity"),
        F.col("_n").cast("double").alias("magnitude"), F.lit("rebalances").alias("unit"),
        F.format_string("%d rebalances within %.0f s", F.col("_n"), F.lit(window_s)).alias("detail"))
    return finish(out)


def storm_state(rebalances: DataFrame, *, count: int, window_s: float) -> DataFrame:
    """The rebalances the next step's storms need (``cluster, group_id, start_ts, end_ts``):
    those starting within ``window_s`` before the group's last one, and, when the last one is
    part of a storm, the storm's and those within ``window_s`` before its first (so the storm
    keeps its start, end and size however long it lasts)."""
    r = _storm_pass(rebalances, count=count, window_s=window_s)
    g = Window.partitionBy("cluster", "group_id")
    # the open storm: the one of the group's last rebalance, when that one is stormy
    r = r.withColumn("_open", F.max_by(F.when(F.col("_stormy"), F.col("_sid")), F.col("_t")).over(g))
    r = r.withColumn("_since", F.coalesce(F.min(F.when(F.col("_stormy") & (F.col("_sid") == F.col("_open")),
                                                       F.col("_t"))).over(g), F.max("_t").over(g)))
    return r.where(F.col("_t") >= F.col("_since") - int(window_s * 1000)).select(
        "cluster", "group_id", "start_ts", "end_ts")


def drop_rebalance_outages(episodes: DataFrame, rebalances: DataFrame) -> DataFrame:
    """Stall, stop and commit-gap anomalies that lie inside one of the group's rebalance outages (from the
    departed member's last progress, ``quiet_from_ts``, to the end of the window) are the
    rebalance, already reported as such: drop them. An open episode (``end_ts`` null) lasts at
    least to its last sweep (start + its duration, the magnitude in s): one still going after
    the group settled is not the rebalance."""
    rb = rebalances.select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                           F.col("quiet_from_ts").alias("_q0"),
                           F.coalesce(F.col("end_ts"), F.col("start_ts")).alias("_q1"))
    seen_to = F.timestamp_micros(F.unix_micros("start_ts") + (F.coalesce(F.col("magnitude"), F.lit(0.0))
                                                               * F.lit(1e6)).cast("long"))
    # by ``key`` (an anomaly's identity): a generated row id is not stable across the two
    # evaluations of ``episodes`` (the join side and the kept side may be partitioned apart)
    inside = (episodes.where(F.col("kind").isin("stall", "stop", "commit_gap"))
              .join(rb, (F.col("cluster") == F.col("_c")) & (F.col("group_id") == F.col("_g"))
                    & (F.col("start_ts") >= F.col("_q0") - F.expr("INTERVAL 1 SECOND"))
                    & (F.coalesce(F.col("end_ts"), seen_to) <= F.col("_q1") + F.expr("INTERVAL 1 SECOND")))
              .select("key").distinct())
    return episodes.join(inside, "key", "left_anti")
