"""The ``anomalies`` table: rules over a partition's series, one small named predicate each.

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

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics.series import KEY, series_window

__all__ = [
    "ANOMALY_COLUMNS",
    "GAP_SAMPLES",
    "RuleParams",
    "commit_gaps",
    "commit_records",
    "drop_rebalance_outages",
    "gap_baselines",
    "lag_growth_state",
    "last_commit_marker",
    "storm_state",
    "transform_episodes",
    "transform_gap_anomalies",
    "transform_lag_growth",
    "transform_point_events",
    "transform_storms",
]

ANOMALY_COLUMNS = ["cluster", "group_id", "topic", "partition", "kind", "start_ts", "end_ts",
                   "severity", "magnitude", "unit", "detail", "key"]


@dataclass(frozen=True)
class RuleParams:
    """Thresholds of the anomaly and status rules (seconds unless named otherwise)."""

    stall_after_s: float = 60.0
    stop_after_s: float = 60.0
    skip_factor: float = 5.0
    skip_min_messages: int = 100
    gap_k: float = 6.0
    gap_mad_floor_s: float = 1.0
    gap_min_s: float = 10.0
    gap_min_samples: int = 5
    growth_min_minutes: int = 5
    storm_count: int = 3
    storm_window_s: float = 600.0
    warn_lag_s: float = 30.0
    burrow_window: int = 10


def _ts(seconds: Column) -> Column:
    return F.timestamp_micros((seconds * F.lit(1e6)).cast("long"))


def _key(kind: Column, start: Column) -> Column:
    return F.concat_ws("|", kind, F.col("cluster"), F.col("group_id"), F.coalesce(F.col("topic"), F.lit("")),
                       F.coalesce(F.col("partition").cast("string"), F.lit("")),
                       F.unix_millis(start).cast("string"))


def _finish(df: DataFrame) -> DataFrame:
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


def last_commit_marker(last_rows: DataFrame, commits: DataFrame) -> DataFrame:
    """The series' state rows (:func:`lagscope.analytics.series.state_rows`) with ``m_commit_t``
    the time of the key's last commit record at or before the row: the next step reads commits
    only from shortly before its start, and a group silent for longer is still known to have
    committed then (a stop stays a stop)."""
    lr = last_rows.select(*KEY, F.col("t").alias("_lt"))
    latest = (commits.select(*KEY, "t").join(lr, KEY).where(F.col("t") <= F.col("_lt"))
              .groupBy(*KEY).agg(F.max("t").alias("_ct")))
    return last_rows.join(latest, KEY, "left").withColumn(
        "m_commit_t", F.greatest(F.col("m_commit_t"), F.col("_ct"))).drop("_ct")


def _with_last_commit(enriched: DataFrame, commits: DataFrame | None) -> DataFrame:
    """Add ``last_commit_t`` (time of the key's last commit record at or before the row) and
    ``commits_known`` (the commit stream has records of the key) to the series rows; a state
    row's ``m_commit_t`` counts as a commit record (one older than the step's commits)."""
    if commits is None:
        return enriched.withColumn("last_commit_t", F.lit(None).cast("double")).withColumn(
            "commits_known", F.lit(False))
    marks = commits.select(*KEY, "t", F.lit(0).alias("_src"))
    if "m_commit_t" in enriched.columns:
        marks = marks.unionByName(enriched.where(F.col("is_state") & F.col("m_commit_t").isNotNull()).select(
            *KEY, F.col("m_commit_t").alias("t"), F.lit(0).alias("_src")))
    df = enriched.withColumn("_src", F.lit(1)).unionByName(marks, allowMissingColumns=True)
    upto = Window.partitionBy(*KEY).orderBy("t", "_src").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    df = (df.withColumn("last_commit_t", F.last(F.when(F.col("_src") == 0, F.col("t")), ignorenulls=True).over(upto))
          .withColumn("commits_known", F.min("_src").over(Window.partitionBy(*KEY)) == 0))
    return df.where(F.col("_src") == 1).drop("_src")


def transform_episodes(enriched: DataFrame, *, stall_after_s: float, stop_after_s: float,
                       commits: DataFrame | None = None) -> DataFrame:
    """stall, stop and retention_loss episodes over an enriched series (state rows included,
    so an episode open at the end of the previous step keeps its start).

    ``commits`` (:func:`commit_records`, optional): with the commit stream, an owned partition
    whose group has not committed at all for ``stop_after_s`` is a stop (Burrow's STOP: no
    commits), one that keeps committing the same offset a stall; from sweeps alone every owned
    partition without progress is a stall. One no-progress run is one episode, of the kind it
    had when it crossed its threshold (a stalled member that then loses its partitions is still
    the one stall)."""
    df = _with_last_commit(enriched, commits)
    if "lso" not in df.columns:
        df = df.withColumn("lso", F.lit(None).cast("long"))
    # held at an open transaction: committed = LSO < end (a read_committed group has nothing
    # to consume; a read_uncommitted one would have read past the LSO)
    at_lso = F.coalesce(F.col("lso").isNotNull() & (F.col("committed") == F.col("lso"))
                        & (F.col("lso") < F.col("end")), F.lit(False))
    lagging = (F.coalesce(F.col("lag"), F.lit(0)) > 0) & ~at_lso
    owned = F.col("owner").isNotNull()
    silent = F.col("commits_known") & (
        (F.col("t") - F.coalesce(F.col("last_commit_t"), F.lit(float("-inf")))) >= stop_after_s)
    idle = F.col("idle_pending_s")
    idle_kind = (F.when(lagging & owned & ~silent & (idle >= stall_after_s), F.lit("stall"))
                 .when(lagging & (~owned | silent) & (idle >= stop_after_s), F.lit("stop")))
    why = (F.when(~owned, F.lit("no owner"))
           .when(silent, F.lit("owner assigned, no commits"))
           .otherwise(F.lit("owner still assigned")))
    # two independent conditions (a stopped consumer whose messages the retention then deletes
    # is both): one row per condition, each with its own episode identity
    loss = df.where(F.col("lost")).select(*df.columns, F.lit("retention_loss").alias("_kind"),
                                          F.lit("loss").alias("_cls"), F.col("ret_t").alias("_s"))
    stuck = df.where(idle_kind.isNotNull()).select(*df.columns, idle_kind.alias("_kind"),
                                                   F.lit("idle").alias("_cls"), (F.col("t") - idle).alias("_s"))
    marks = loss.unionByName(stuck).withColumn("_why", why).withColumn("_start", F.round(F.col("_s"), 3)).withColumn(
        "_id", F.concat_ws("@", F.col("_cls"), F.col("_start").cast("string")))
    # the next sweep of the key, and whether it carries the same episode
    same = marks.select(*KEY, F.col("t").alias("next_t"), "_id", F.lit(True).alias("_goes_on"))
    marks = marks.join(same, [*KEY, "next_t", "_id"], "left")
    ended = F.col("next_t").isNotNull() & F.col("_goes_on").isNull()
    eps = (marks
           .groupBy(*KEY, "_cls", "_start")
           .agg(F.min_by(F.struct(F.col("_kind").alias("k"), F.col("_why").alias("why")), "t").alias("_first"),
                F.max("t").alias("_last_t"), F.max(F.when(ended, F.col("next_t"))).alias("_end"),
                F.max(F.when(F.col("lost"), F.col("log_start") - F.col("committed"))).alias("_lost"))
           .withColumn("_kind", F.col("_first.k")))
    dur = F.coalesce(F.col("_end"), F.col("_last_t")) - F.col("_start")
    magnitude = F.when(F.col("_kind") == "retention_loss", F.col("_lost").cast("double")).otherwise(dur)
    severity = (F.when(F.col("_kind").isin("stop", "retention_loss"), F.lit("critical"))
                .when(dur >= 5 * stall_after_s, F.lit("critical")).otherwise(F.lit("warning")))
    unit = F.when(F.col("_kind") == "retention_loss", F.lit("messages")).otherwise(F.lit("s"))
    detail = F.when(
        F.col("_kind") == "retention_loss",
        F.format_string("committed offset fell %d messages below the log start: never processed",
                        F.col("_lost")),
    ).otherwise(F.format_string("no commit progress for %.1f s with lag pending (%s)", dur, F.col("_first.why")))
    out = eps.select(
        *KEY, F.col("_kind").alias("kind"), _ts(F.col("_start")).alias("start_ts"),
        _ts(F.col("_end")).alias("end_ts"), severity.alias("severity"), magnitude.alias("magnitude"),
        unit.alias("unit"), detail.alias("detail"))
    return _finish(out)


def _commit_jumps(commits: DataFrame, enriched: DataFrame) -> DataFrame:
    """Each commit with ``prev_offset`` (the previous commit's), ``max_before`` (the highest
    offset committed before it), ``log_start`` as of the last sweep before it, and ``lo``/``hi``:
    the key's step range (after the previous step's last sweep, up to this step's last sweep)."""
    sw = enriched.select(*KEY, "t", "log_start", "end_drop_t", "is_state", F.lit(1).alias("_src"), F.lit(None).cast(
        "long").alias("seq"), F.lit(None).cast("long").alias("offset"))
    u = commits.select(*KEY, "t", "seq", "offset", F.lit(0).alias("_src")).unionByName(sw, allowMissingColumns=True)
    asof = Window.partitionBy(*KEY).orderBy("t", "_src").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    whole = Window.partitionBy(*KEY)
    after = Window.partitionBy(*KEY).orderBy("t", "_src").rowsBetween(Window.currentRow, Window.unboundedFollowing)
    u = (u.withColumn("_ls", F.last("log_start", ignorenulls=True).over(asof))
         # the last drop of the end seen by the first sweep at or after the commit (a drop is
         # seen only by the sweep that follows it)
         .withColumn("_drop_t", F.first(F.when(F.col("_src") == 1, F.coalesce(
             F.col("end_drop_t"), F.lit(float("-inf")))), ignorenulls=True).over(after))
         .withColumn("lo", F.max(F.when(F.col("is_state"), F.col("t"))).over(whole))
         .withColumn("hi", F.max(F.when((F.col("_src") == 1) & ~F.col("is_state"), F.col("t"))).over(whole)))
    c = u.where(F.col("_src") == 0)
    wc = Window.partitionBy(*KEY).orderBy("t", "seq")
    return (c.withColumns({
                "prev_offset": F.lag("offset").over(wc),
                "_prev_t": F.lag("t").over(wc),
                "max_before": F.max("offset").over(wc.rowsBetween(Window.unboundedPreceding, -1))})
            .select(*KEY, "t", "offset", "prev_offset", "max_before", F.col("_ls").alias("log_start"), "lo", "hi",
                    # the end went down between the previous commit and this one
                    F.coalesce(F.col("_drop_t") > F.col("_prev_t"), F.lit(False)).alias("rebased")))


def transform_point_events(enriched: DataFrame, *, skip_factor: float, skip_min_messages: int,
                           commits: DataFrame | None = None, margin_s: float = 1.0) -> DataFrame:
    """rewind and skip events on fresh rows.

    With the commit stream (``commits``, :func:`commit_records`) a rewind is found at its
    commit, even between two sweeps, and timed exactly (start = end = the commit); a sweep
    rewind with a commit rewind within ``margin_s`` of its interval is that one. A skip is
    still found from the sweeps (its jump stays committed), timed by the commit with the
    largest jump in its interval."""
    fresh = enriched.where(~F.col("is_state") & F.col("prev_committed").isNotNull() & F.col("committed").isNotNull())
    ls = F.coalesce(F.col("log_start"), F.lit(0))
    rewound = F.col("prev_committed") - F.greatest(F.col("committed"), ls)
    # after the end went down (topic re-created, log truncated) a lower offset is a new log's
    is_rewind = (F.col("dc") < 0) & (rewound > 0) & ~F.col("rebased")
    # only what lies past everything committed before is new: after a rewind the group
    # consumes again what it had processed already (fast), which is no skip
    jump = F.col("committed") - F.greatest(F.col("prev_committed"), F.coalesce(
        F.col("max_committed_before"), F.col("prev_committed")), ls)
    # a reset to the latest offset lands at (or past) the end seen before it, in one interval
    # far faster than the group has ever consumed
    is_skip = ((jump > skip_min_messages) & (F.col("max_rate_before") > 0)
               & (F.col("committed") >= F.col("prev_end"))
               & (jump > F.lit(skip_factor) * F.col("max_rate_before") * F.col("dt")))
    processed = F.least(jump, F.floor(F.coalesce(F.col("prev_rate"), F.lit(0.0)) * F.col("dt")).cast("long"))
    ev = fresh.select(
        *KEY, (F.col("t") - F.col("dt")).alias("t0"), F.col("t").alias("t1"),
        F.when(is_rewind, F.lit("rewind")).when(is_skip, F.lit("skip")).alias("kind"),
        F.when(is_rewind, rewound).when(is_skip, jump - processed).cast("double").alias("magnitude"),
    ).where(F.col("kind").isNotNull())
    if commits is not None:
        cj = _commit_jumps(commits, enriched)
        in_step = (F.col("t") > F.coalesce(F.col("lo"), F.lit(float("-inf")))) & (F.col("t") <= F.col("hi"))
        c_rewound = F.col("prev_offset") - F.greatest(F.col("offset"), F.coalesce(F.col("log_start"), F.lit(0)))
        went_back = (F.col("offset") < F.col("prev_offset")) & (c_rewound > 0) & ~F.col("rebased")
        c_rw = cj.where(in_step & went_back).select(
            *KEY, F.col("t").alias("t0"), F.col("t").alias("t1"), F.lit("rewind").alias("kind"),
            c_rewound.cast("double").alias("magnitude"))
        # a sweep rewind that a commit rewind explains is that one
        seen = c_rw.select(*[F.col(k).alias(f"_{k}") for k in KEY], F.col("t1").alias("_ct"))
        on = [F.col(k) == F.col(f"_{k}") for k in KEY]
        cond = on[0] & on[1] & on[2] & on[3] & (F.col("_ct") >= F.col("t0") - margin_s) & (
            F.col("_ct") <= F.col("t1") + margin_s)
        sweep_rw = ev.where(F.col("kind") == "rewind").join(seen, cond, "left_anti")
        # a skip's time: the commit with the largest jump past everything committed before
        jumps = cj.select(*[F.col(k).alias(f"_{k}") for k in KEY], F.col("t").alias("_ct"),
                          (F.col("offset") - F.greatest(F.col("max_before"), F.col("prev_offset"))).alias("_j"))
        skips = (ev.where(F.col("kind") == "skip").join(jumps.where(F.col("_j") > 0), cond, "left")
                 .groupBy(*KEY, "t0", "t1", "kind", "magnitude").agg(F.max_by("_ct", "_j").alias("_ct"))
                 .select(*KEY, F.coalesce(F.col("_ct"), F.col("t0")).alias("t0"),
                         F.coalesce(F.col("_ct"), F.col("t1")).alias("t1"), "kind", "magnitude"))
        ev = sweep_rw.unionByName(c_rw).unionByName(skips)
    detail = F.when(F.col("kind") == "rewind", F.format_string(
        "committed offset went back: %.0f messages will be processed again", F.col("magnitude"))).otherwise(
        F.format_string("committed offset jumped past %.0f messages that were never processed", F.col("magnitude")))
    out = ev.select(
        *KEY, "kind", _ts(F.col("t0")).alias("start_ts"), _ts(F.col("t1")).alias("end_ts"),
        F.when(F.col("kind") == "skip", F.lit("critical")).otherwise(F.lit("warning")).alias("severity"),
        "magnitude", F.lit("messages").alias("unit"), detail.alias("detail"))
    return _finish(out)


def commit_gaps(enriched: DataFrame, commits: DataFrame | None = None) -> DataFrame:
    """Closed commit gaps with work pending: ``KEY, t, gap_s, owner``.

    From the sweeps: fresh rows that changed the committed offset while the previous sweep
    had lag (a gap between *changes*: a group that commits the same offset meanwhile is not
    told apart). With the commit stream (``commits``, :func:`commit_records`): the time between
    two consecutive commits of the key (any offset), the later one in this step's range, when
    the last sweep before it had lag: exact, and a group that keeps committing has no gap."""
    if commits is not None:
        sw = enriched.select(*KEY, "t", "lag", "owner", "is_state", F.lit(1).alias("_src"))
        u = commits.select(*KEY, "t", "seq", F.lit(0).alias("_src")).unionByName(sw, allowMissingColumns=True)
        asof = Window.partitionBy(*KEY).orderBy("t", "_src").rowsBetween(Window.unboundedPreceding, -1)
        whole = Window.partitionBy(*KEY)
        u = (u.withColumn("_lag", F.last("lag", ignorenulls=True).over(asof))
             .withColumn("_owner", F.last("owner", ignorenulls=True).over(asof))
             .withColumn("lo", F.max(F.when(F.col("is_state"), F.col("t"))).over(whole))
             .withColumn("hi", F.max(F.when((F.col("_src") == 1) & ~F.col("is_state"), F.col("t"))).over(whole)))
        c = u.where(F.col("_src") == 0).withColumn(
            "_prev_t", F.lag("t").over(Window.partitionBy(*KEY).orderBy("t", "seq")))
        return c.where(
            F.col("_prev_t").isNotNull() & (F.coalesce(F.col("_lag"), F.lit(0)) > 0)
            & (F.col("t") > F.coalesce(F.col("lo"), F.lit(float("-inf")))) & (F.col("t") <= F.col("hi"))
        ).select(*KEY, "t", (F.col("t") - F.col("_prev_t")).alias("gap_s"), F.col("_owner").alias("owner"))
    w = series_window()
    df = enriched.withColumn("_prev_pending", F.lag("pending_t").over(w))
    since = F.greatest(F.col("prev_change_t"), F.coalesce(F.col("_prev_pending"), F.col("prev_change_t")))
    return df.where(
        ~F.col("is_state") & F.col("changed") & (F.coalesce(F.col("prev_lag"), F.lit(0)) > 0)
        & F.col("prev_change_t").isNotNull()
    ).select(*KEY, "t", (F.col("t") - since).alias("gap_s"), "owner")


#: how many of its latest commit gaps a partition's learned normal keeps across steps
GAP_SAMPLES = 64

_SAMPLE = "struct<t:double,gap_s:double>"


def _median(sorted_xs: Column) -> Column:
    """The median of a sorted, non-empty array of doubles (the mean of the two middle values
    for an even size, as ``percentile(…, 0.5)``)."""
    n = F.size(sorted_xs)
    lo = F.floor((n - 1) / 2).cast("int") + 1
    hi = F.ceil((n - 1) / 2).cast("int") + 1
    return (F.element_at(sorted_xs, lo) + F.element_at(sorted_xs, hi)) / 2


def gap_baselines(gaps: DataFrame, samples: DataFrame | None = None, *, keep: int = GAP_SAMPLES) -> DataFrame:
    """Per key: ``gap_median_s``, ``gap_mad_s`` and ``gap_n`` over the learned gaps and this
    step's, and ``samples`` (the latest ``keep`` of them, ``array<struct<t, gap_s>>``: what the
    next step learns from).

    ``samples``: earlier steps' ``KEY, samples``. One aggregation per key (the gaps of a key
    are few; sorting a small array beats a percentile aggregate and a join).
    """
    new = gaps.select(*KEY, F.array(F.struct(F.col("t").cast("double").alias("t"),
                                             F.col("gap_s").cast("double").alias("gap_s"))).alias("_xs"))
    if samples is not None:
        if "gap_s" in samples.columns:  # a state written before samples were kept as one array per key
            samples = samples.groupBy(*KEY).agg(F.collect_list(F.struct("t", "gap_s")).alias("samples"))
        new = new.unionByName(samples.select(*KEY, F.col("samples").cast(f"array<{_SAMPLE}>").alias("_xs")))
    per = new.groupBy(*KEY).agg(F.flatten(F.collect_list("_xs")).alias("_all"))
    xs = F.array_sort(F.transform(F.col("_all"), lambda x: x["gap_s"]))
    per = per.withColumn("_xs", xs).withColumn("gap_median_s", _median(F.col("_xs")))
    dev = F.array_sort(F.transform(F.col("_xs"), lambda x: F.abs(x - F.col("gap_median_s"))))
    by_t = F.array_sort(F.col("_all"))  # structs sort by their first field, t
    return per.select(
        *KEY, "gap_median_s", _median(dev).alias("gap_mad_s"), F.size("_all").cast("long").alias("gap_n"),
        F.slice(by_t, F.greatest(F.lit(1), F.size(by_t) - keep + 1), keep).alias("samples"))


def transform_gap_anomalies(gaps: DataFrame, baselines: DataFrame, *, k: float, mad_floor_s: float,
                            min_gap_s: float, min_samples: int, max_gap_s: float) -> DataFrame:
    """commit_gap anomalies: gaps beyond the key's own robust threshold (and below
    ``max_gap_s``, from which on stall/stop episodes report them)."""
    threshold = F.col("gap_median_s") + F.lit(k) * F.greatest(F.col("gap_mad_s") * 1.4826, F.lit(mad_floor_s))
    df = gaps.join(baselines.select(*KEY, "gap_median_s", "gap_mad_s", "gap_n"), KEY).where(
        (F.col("gap_n") >= min_samples) & (F.col("gap_s") > threshold) & (F.col("gap_s") >= min_gap_s)
        & (F.col("gap_s") < max_gap_s))
    out = df.select(
        *KEY, F.lit("commit_gap").alias("kind"), _ts(F.col("t") - F.col("gap_s")).alias("start_ts"),
        _ts(F.col("t")).alias("end_ts"), F.lit("warning").alias("severity"), F.col("gap_s").alias("magnitude"),
        F.lit("s").alias("unit"),
        F.format_string("%.1f s between commits with lag pending; this partition's normal is %.1f s "
                        "(MAD %.1f s)", F.col("gap_s"), F.col("gap_median_s"), F.col("gap_mad_s")).alias("detail"))
    return _finish(out)


def _growth_pass(minutes: DataFrame) -> DataFrame:
    """One ordered pass over partition-minute rows (``KEY, window_start, lag_last, produce_rate,
    consume_rate``; state rows ``is_state`` carry their open run in ``m_g_start``/``m_g_lag0``/
    ``m_g_n``): per row ``_grows`` (the lag rose over the previous minute while producers
    outpaced the consumer; an open state run counts as growing, so it carries on across steps),
    ``_run`` (the current run's start, the lag before it and ``c0``, the running count of
    growing minutes before it), ``_cnt`` (that running count up to the row), and the next
    row's ``_next_ws``/``_next_in``."""
    # rows of a union with the state have is_state null: fresh
    minutes = minutes.withColumn("is_state", F.coalesce(
        F.col("is_state") if "is_state" in minutes.columns else F.lit(None), F.lit(False)))
    for c, dtype in (("m_g_start", "timestamp"), ("m_g_lag0", "long"), ("m_g_n", "int")):
        if c not in minutes.columns:
            minutes = minutes.withColumn(c, F.lit(None).cast(dtype))
    w = Window.partitionBy(*KEY).orderBy("window_start")
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prev_lag = F.lag("lag_last").over(w)
    # only over one minute: after minutes without sweeps (the collector was down) nothing says
    # how the lag moved in between, so a run neither spans the gap nor starts across it
    adjacent = F.lag("window_start").over(w) == F.col("window_start") - F.expr("INTERVAL 1 MINUTE")
    grows = (~F.col("is_state") & adjacent & (F.col("lag_last") > prev_lag)
             & (F.coalesce(F.col("produce_rate"), F.lit(0.0)) > F.coalesce(F.col("consume_rate"), F.lit(0.0))))
    df = minutes.withColumn("_grows", F.coalesce(grows, F.lit(False)) | (
        F.col("is_state") & F.col("m_g_start").isNotNull()))
    own = F.when(F.col("is_state"), F.coalesce(F.col("m_g_n"), F.lit(0))).when(F.col("_grows"), 1).otherwise(0)
    df = df.withColumns({
        "_prev_grows": F.coalesce(F.lag("_grows").over(w), F.lit(False)),
        "_prev_lag": prev_lag,
        "_own": own,
        "_cnt": F.sum(own).over(upto),
        "_next_in": F.lead("_grows").over(w),
        "_next_ws": F.lead("window_start").over(w),
    })
    # the run: a state row continues it (m_g_*); a growing minute after a non-growing one starts it
    start_mark = (F.when(F.col("is_state"), F.struct(F.col("m_g_start").alias("s"), F.col("m_g_lag0").alias("l0"),
                                                     F.lit(0).cast("long").alias("c0")))
                  .when(F.col("_grows") & ~F.col("_prev_grows"),
                        F.struct(F.col("window_start").alias("s"), F.col("_prev_lag").alias("l0"),
                                 (F.col("_cnt") - F.col("_own")).cast("long").alias("c0"))))
    return df.withColumn("_run", F.last(start_mark, ignorenulls=True).over(upto))


def transform_lag_growth(minutes: DataFrame, *, min_minutes: int) -> DataFrame:
    """lag_growth over partition-minute rows (see :func:`_growth_pass`): ``min_minutes`` or more
    consecutive minutes whose lag rose while producers outpaced the consumer."""
    df = _growth_pass(minutes)
    runs = (df.where(F.col("_grows")).groupBy(*KEY, F.col("_run.s").alias("_s"), F.col("_run.l0").alias("_l0"))
            .agg(F.sum("_own").alias("_n"),
                 F.max_by("lag_last", "window_start").alias("_lag_end"),
                 F.max("window_start").alias("_last"),
                 # the end of the run's last minute, when a later minute did not grow
                 F.max(F.when(F.col("_next_in") == False,  # noqa: E712
                              F.col("window_start") + F.expr("INTERVAL 1 MINUTE"))).alias("_end")))
    runs = runs.where(F.col("_n") >= min_minutes)
    end_t = F.coalesce(F.col("_end"), F.col("_last") + F.expr("INTERVAL 1 MINUTE"))
    secs = F.unix_micros(end_t).cast("double") / 1e6 - F.unix_micros(F.col("_s")).cast("double") / 1e6
    mag = (F.col("_lag_end") - F.coalesce(F.col("_l0"), F.lit(0))).cast("double") / secs
    out = runs.select(
        *KEY, F.lit("lag_growth").alias("kind"), F.col("_s").alias("start_ts"), F.col("_end").alias("end_ts"),
        F.lit("warning").alias("severity"), mag.alias("magnitude"), F.lit("messages/s").alias("unit"),
        F.format_string("lag grew for %d consecutive minutes at %.1f messages/s", F.col("_n"), mag).alias("detail"))
    return _finish(out)


def lag_growth_state(minutes: DataFrame) -> DataFrame:
    """The last partition-minute row per key with its open growth run (for the next step): the
    same pass as :func:`transform_lag_growth`, its rows without a next minute."""
    df = _growth_pass(minutes).where(F.col("_next_ws").isNull())
    return df.select(
        *KEY, "window_start", "lag_last", "produce_rate", "consume_rate",
        F.when(F.col("_grows"), F.col("_run.s")).alias("m_g_start"),
        F.when(F.col("_grows"), F.col("_run.l0")).alias("m_g_lag0"),
        F.when(F.col("_grows"), F.col("_cnt") - F.col("_run.c0")).cast("int").alias("m_g_n"),
        F.lit(True).alias("is_state"))


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
    return _finish(out)


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
