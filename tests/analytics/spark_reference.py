"""The Spark definitions the per-key pass replaced: the anomaly rules, the Burrow and lagscope
status, the series state and the end-offset history as DataFrame transforms (window functions).

They no longer run in lagscope (the job computes all of this in one vectorised pass,
lagscope.analytics.onepass); they are kept here as the reference the numpy rules are tested
against, row for row, on random series (tests/analytics/test_np_*.py), and as the readable
statement of each rule.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812
from spark_series import KEY, SERIES_COLUMNS, series_window

from lagscope.analytics.findings import ANOMALY_COLUMNS
from lagscope.analytics.status import BURROW_RANK, OWN_RANK
from lagscope.lag import HISTORY_POINTS


def _ts(seconds: Column) -> Column:
    return F.timestamp_micros((seconds * F.lit(1e6)).cast("long"))


# ---- from analytics/findings.py ------------------------------------------------------------

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



#: the reason of an idle episode whose owner has not committed the partition since taking it over
NEVER_COMMITTED = "owner assigned, never committed it since taking it over"


def _with_last_commit(enriched: DataFrame, commits: DataFrame | None) -> DataFrame:
    """Add ``last_commit_t`` (time of the key's last commit record at or before the row) and
    ``commits_known`` (the commit stream has a record of the key at or before the row) to the series rows; a state
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
          .withColumn("commits_known", F.col("last_commit_t").isNotNull() | (F.max(
              F.when((F.col("_src") == 0) & F.col("t").isNull(), 1).otherwise(0)).over(Window.partitionBy(*KEY)) == 1)))
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
    # the last record is the current owner's (from its tenure's second sweep on; any, when the
    # tenure's start is unknown): an owner that has not committed since taking it over is no stop
    own = (F.col("tenure_t") == F.lit(float("-inf"))) | F.coalesce(
        F.col("last_commit_t") >= F.col("tenure_t"), F.lit(False))
    fresh = owned & F.col("commits_known") & ~own
    idle = F.col("idle_pending_s")
    idle_kind = (F.when(lagging & owned & (~silent | fresh) & (idle >= stall_after_s), F.lit("stall"))
                 .when(lagging & (~owned | (silent & ~fresh)) & (idle >= stop_after_s), F.lit("stop")))
    why = (F.when(~owned, F.lit("no owner"))
           .when(silent & fresh, F.lit(NEVER_COMMITTED))
           .when(silent, F.lit("owner assigned, no commits"))
           .otherwise(F.lit("owner still assigned")))
    # two independent conditions (a stopped consumer whose messages the retention then deletes
    # is both): one row per condition, each with its own episode identity
    loss = df.where(F.col("lost")).select(*df.columns, F.lit("retention_loss").alias("_kind"),
                                          F.lit("loss").alias("_cls"), F.col("ret_t").alias("_s"))
    if "m_idle" in df.columns:
        # a state row carries the kind and reason of the idle episode its step left open
        # (np_episodes.idle_code: kind · 4 + reason): the episode keeps them
        carried = F.col("is_state") & F.col("m_idle").isNotNull()
        code = F.col("m_idle").cast("long")
        idle_kind = F.when(idle_kind.isNotNull() & carried,
                           F.when(F.floor(code / 4) == 0, F.lit("stall")).otherwise(F.lit("stop"))).otherwise(idle_kind)
        why = F.when(carried, F.element_at(F.array(F.lit("no owner"), F.lit("owner assigned, no commits"),
                                                   F.lit("owner still assigned"), F.lit(NEVER_COMMITTED)),
                                           (code % 4 + 1).cast("int"))
                     ).otherwise(why)
    stuck = df.where(idle_kind.isNotNull()).select(*df.columns, idle_kind.alias("_kind"),
                                                   F.lit("idle").alias("_cls"), (F.col("t") - idle).alias("_s"))
    # a loss is proven at a sweep where nobody reads the partition (no owner, or a silent one) and
    # its committed offset has not moved for stop_after_s, or by the proof a state row carries from
    # its step (m_lost = 1)
    unheld = (~owned | silent) & F.coalesce(idle >= stop_after_s, F.lit(False))
    if "m_lost" in df.columns:
        unheld = unheld | (F.col("is_state") & F.coalesce(F.col("m_lost") == 1, F.lit(False)))
    loss = loss.withColumn("_unheld", unheld)
    stuck = stuck.withColumn("_unheld", F.lit(False))
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
                F.max(F.when(F.col("lost"), F.col("log_start") - F.col("committed"))).alias("_lost"),
                F.max(F.col("_unheld")).alias("_proven"))
           .withColumn("_kind", F.col("_first.k")))
    dur = F.coalesce(F.col("_end"), F.col("_last_t")) - F.col("_start")
    magnitude = F.when(F.col("_kind") == "retention_loss", F.col("_lost").cast("double")).otherwise(dur)
    severity = (F.when(F.col("_kind") == "retention_loss",
                       F.when(F.col("_proven"), F.lit("critical")).otherwise(F.lit("warning")))
                .when(F.col("_kind") == "stop", F.lit("critical"))
                .when(F.col("_first.why") == NEVER_COMMITTED, F.lit("critical"))
                .when(dur >= 5 * stall_after_s, F.lit("critical")).otherwise(F.lit("warning")))
    unit = F.when(F.col("_kind") == "retention_loss", F.lit("messages")).otherwise(F.lit("s"))
    detail = F.when(
        F.col("_kind") == "retention_loss",
        F.format_string("committed offset fell %d messages below the log start: %s", F.col("_lost"),
                        F.when(F.col("_proven"), F.lit("never processed (no consumer held them)"))
                        .otherwise(F.lit("lost unless its consumer had already fetched them"))),
    ).otherwise(F.format_string("no commit progress for %.1f s with lag pending (%s)", dur, F.col("_first.why")))
    out = eps.select(
        *KEY, F.col("_kind").alias("kind"), _ts(F.col("_start")).alias("start_ts"),
        _ts(F.col("_end")).alias("end_ts"), severity.alias("severity"), magnitude.alias("magnitude"),
        unit.alias("unit"), detail.alias("detail"))
    return finish(out)



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



def transform_point_events(enriched: DataFrame, *, commits: DataFrame | None = None,
                           margin_s: float = 1.0) -> DataFrame:
    """rewind events on fresh rows.

    With the commit stream (``commits``, :func:`commit_records`) a rewind is found at its
    commit, even between two sweeps, and timed exactly (start = end = the commit); a sweep
    rewind with a commit rewind within ``margin_s`` of its interval is that one.

    The old size rule for skips (a jump > ``skip_min_messages`` and > ``skip_factor`` × the
    largest rate ever seen) is gone from here with the rule: skips are judged per group from
    evidence of not processing (lagscope.analytics.skips) and tested on hand-computed behavioural
    cases (tests/analytics/test_skips.py)."""
    fresh = enriched.where(~F.col("is_state") & F.col("prev_committed").isNotNull() & F.col("committed").isNotNull())
    ls = F.coalesce(F.col("log_start"), F.lit(0))
    rewound = F.col("prev_committed") - F.greatest(F.col("committed"), ls)
    # after the end went down (topic re-created, log truncated) a lower offset is a new log's
    is_rewind = (F.col("dc") < 0) & (rewound > 0) & ~F.col("rebased")
    ev = fresh.where(is_rewind).select(
        *KEY, (F.col("t") - F.col("dt")).alias("t0"), F.col("t").alias("t1"), F.lit("rewind").alias("kind"),
        rewound.cast("double").alias("magnitude"))
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
        ev = ev.join(seen, cond, "left_anti").unionByName(c_rw)
    detail = F.format_string("committed offset went back: %.0f messages will be processed again", F.col("magnitude"))
    out = ev.select(
        *KEY, "kind", _ts(F.col("t0")).alias("start_ts"), _ts(F.col("t1")).alias("end_ts"),
        F.lit("warning").alias("severity"), "magnitude", F.lit("messages").alias("unit"), detail.alias("detail"))
    return finish(out)



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
    return finish(out)



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
    return finish(out)



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



# ---- from analytics/status.py ------------------------------------------------------------

def burrow_entries(enriched: DataFrame, state_entries: DataFrame | None = None) -> DataFrame:
    """Entries ``KEY, t, c, lag, rebased, is_state``: fresh sweeps where the committed offset
    changed or an owner was assigned, plus the previous step's last entries (``is_state``).
    ``rebased``: the end went down since the previous commit (see
    :func:`lagscope.analytics.series.enrich_series`), so a lower offset is in another log."""
    fresh = enriched.where(~F.col("is_state") & F.col("committed").isNotNull()
                           & (F.col("changed") | F.col("owner").isNotNull()))
    e = fresh.select(*KEY, "t", F.col("committed").alias("c"), "lag", "rebased", F.lit(False).alias("is_state"))
    if state_entries is not None:
        # (a state written before ``rebased`` existed has none)
        rebased = F.col("rebased") if "rebased" in state_entries.columns else F.lit(False)
        e = e.unionByName(state_entries.select(*KEY, "t", "c", "lag", rebased.alias("rebased"),
                                               F.lit(True).alias("is_state")))
    return e



def entries_state(entries: DataFrame, n: int) -> DataFrame:
    """The last ``n`` entries per key (what the next step's window needs)."""
    w = Window.partitionBy(*KEY).orderBy(F.col("t").desc())
    return entries.withColumn("_rn", F.row_number().over(w)).where(F.col("_rn") <= n).select(
        *KEY, "t", "c", "lag", "rebased")



def _window_stats(entries: DataFrame, n: int) -> DataFrame:
    """Per entry that is its minute's last: the Burrow window of the last ``n`` entries ending
    at it.

    Entry ``i`` of a key (1-based, in time order) has the window ``lo … i`` with
    ``lo = max(1, i − n + 1)``; the flags of its consecutive pairs sit on the pair's second
    entry, so the window's pairs are ``lo + 1 … i``. Every statistic is an index test on a
    running value (the last entry with lag 0, the last change, decrease or lag decrease) or
    the value ``n − 1`` entries back: linear in the entries, where sliding frames re-aggregate
    the whole frame at every entry. Of the previous step's entries (``is_state``) only the last
    one's window is returned.
    """
    w = Window.partitionBy(*KEY).orderBy("t")
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    e = entries.withColumns({
        "_i": F.row_number().over(w),
        "_next_is_state": F.lead("is_state").over(w),
        "_next_t": F.lead("t").over(w),
        "_chg": F.col("c") != F.lag("c").over(w),
        "_dec": F.col("c") < F.lag("c").over(w),
        "_rebased": F.coalesce(F.col("rebased"), F.lit(False)),
        "_lagdec": F.col("lag") < F.lag("lag").over(w),
        "_t_back": F.lag("t", n - 1).over(w),
        "_lag_back": F.lag("lag", n - 1).over(w),
    })
    i = F.col("_i")

    def last_at(flag: Column) -> Column:
        return F.last(F.when(flag, i), ignorenulls=True).over(upto)

    e = e.withColumns({
        "_first_t": F.first("t").over(upto),
        "_first_lag": F.first("lag").over(upto),
        "_zero_at": last_at(F.col("lag") == 0),
        "_chg_at": last_at(F.col("_chg")),
        "_dec_at": last_at(F.col("_dec")),
        "_own_dec_at": last_at(F.col("_dec") & ~F.col("_rebased")),
        "_lagdec_at": last_at(F.col("_lagdec")),
    })
    full = i >= n
    lo = F.greatest(F.lit(1), i - (n - 1))
    pairs_lo = i - max(n - 2, 0)  # the window's first pair (its second entry)
    # an evaluation (a minute's last sweep) takes the latest entry at or before it: the last
    # entry of its minute or of an earlier one, so only those windows are returned; the
    # previous step's entries are context: of their windows only the last one can be the
    # window of a row of this step (all of which are later)
    context_before_last = F.col("is_state") & F.coalesce(F.col("_next_is_state"), F.lit(False))
    e = e.where(minutes_last(F.col("t"), F.col("_next_t")) & ~context_before_last)
    return e.select(
        *KEY, "t",
        F.struct(
            F.col("t").alias("last_t"),
            F.when(full, F.col("_t_back")).otherwise(F.col("_first_t")).alias("first_t"),
            F.coalesce(F.col("_zero_at") >= lo, F.lit(False)).alias("zero_lag"),
            F.when(full, F.col("_lag_back")).otherwise(F.col("_first_lag")).alias("first_lag"),
            (F.col("_chg_at").isNull() | (F.col("_chg_at") <= lo)).alias("stalled"),
            F.coalesce(F.col("_dec_at") >= pairs_lo, F.lit(False)).alias("rewound"),
            # lagscope's own: not a drop into a new log (Burrow cannot tell)
            F.coalesce(F.col("_own_dec_at") >= pairs_lo, F.lit(False)).alias("rewound_own"),
            F.coalesce(F.col("_lagdec_at") >= pairs_lo, F.lit(False)).alias("lag_decreased"),
        ).alias("_win"),
    )



def partition_status(rows: DataFrame, entries: DataFrame, *, n: int, stall_after_s: float,
                     stop_after_s: float, warn_lag_s: float) -> DataFrame:
    """Partition ``status`` rows (no ``date``) from the minute rows with lag seconds (``rows``, from
    :func:`lagscope.analytics.trends.transform_lag_seconds`: each minute is evaluated at its
    last sweep) and Burrow entries.

    One ordered pass over those rows and the entries' windows (an entry sorts before the row
    of its sweep) gives each row the window of the latest entry at or before it.
    """
    ev = rows.select(
        *KEY, "ts", "t", "committed", "end", "lso", "log_start", "lag", "lag_s", "owner", "owned_t", "lost",
        "idle_pending_s", "end_change_t").withColumn("_kind", F.lit(1)).withColumn("_win", F.lit(None).cast(
            "struct<last_t:double,first_t:double,zero_lag:boolean,first_lag:bigint,stalled:boolean,"
            "rewound:boolean,rewound_own:boolean,lag_decreased:boolean>"))
    stats = _window_stats(entries, n).withColumn("_kind", F.lit(0))
    both = ev.unionByName(stats, allowMissingColumns=True)
    asof = Window.partitionBy(*KEY).orderBy("t", "_kind").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    ev = both.withColumn("_w", F.last("_win", ignorenulls=True).over(asof)).where(F.col("_kind") == 1)
    w = F.col("_w")
    lag = F.coalesce(F.col("lag"), F.lit(0))
    burrow = (F.when(w.isNull() | (lag == 0) | w["zero_lag"], F.lit("OK"))
              .when(w["rewound"], F.lit("REWIND"))
              .when((F.col("t") - w["last_t"]) > (w["last_t"] - w["first_t"]), F.lit("STOP"))
              .when(w["stalled"], F.lit("STALL"))
              .when(~w["lag_decreased"], F.lit("WARN"))
              .otherwise(F.lit("OK")))
    pending = F.col("idle_pending_s")
    owned = F.col("owner").isNotNull()
    # how long nobody has owned the partition (null: unknown, a state written before m_owned_t);
    # ``gone``: for stop_after_s, an unknown time included (the rule before the state carried it)
    unowned_s = F.col("t") - F.col("owned_t")
    gone = ~owned & F.coalesce(unowned_s >= stop_after_s, F.lit(True))
    growing = (F.coalesce(F.col("lag_s"), F.lit(0.0)) >= warn_lag_s) & w.isNotNull() & ~w["lag_decreased"] & (
        lag > w["first_lag"])
    idle = (lag == 0) & ((F.col("t") - F.coalesce(F.col("end_change_t"), F.col("t"))) >= stall_after_s)
    # held at an open transaction: committed = LSO < end (a read_committed group has nothing to
    # consume until the transaction ends; the anomalies' stall/stop rule says the same)
    held = F.coalesce(F.col("lso").isNotNull() & (F.col("committed") == F.col("lso"))
                      & (F.col("lso") < F.col("end")), F.lit(False))
    # below the log start: lost when nobody reads the partition, else a consumer at the edge
    proven = F.col("lost") & ~owned & F.coalesce(pending >= stop_after_s, F.lit(False))
    own = (F.when(proven, F.lit("ERR"))
           .when(w.isNotNull() & w["rewound_own"], F.lit("REWIND"))
           .when(lag == 0, F.when(idle, F.lit("IDLE")).otherwise(F.lit("OK")))
           .when(held, F.lit("OK"))
           .when(gone & (pending >= stop_after_s), F.lit("STOP"))
           .when(~gone & (pending >= stall_after_s), F.lit("STALL"))
           .when(F.col("lost"), F.lit("WARN"))
           .when(growing, F.lit("WARN"))
           .otherwise(F.lit("OK")))
    reason = (F.when(proven, F.format_string("committed offset %d is below the log start %d",
                                             F.col("committed"), F.col("log_start")))
              .when(w.isNotNull() & w["rewound_own"], F.lit("committed offset went backwards in the window"))
              .when(F.col("committed").isNull(), F.lit("no committed offset"))
              .when(lag == 0, F.when(idle, F.lit("caught up; no new messages")).otherwise(F.lit("caught up")))
              .when(held, F.format_string("at the last stable offset %d: waiting for an open transaction",
                                          F.col("lso")))
              .when(gone & (pending >= stop_after_s),
                    F.format_string("no owner and no commit for %.0f s with lag %d", pending, lag))
              .when(owned & (pending >= stall_after_s),
                    F.format_string("owner assigned but no commit for %.0f s with lag %d", pending, lag))
              .when(~gone & (pending >= stall_after_s),
                    F.format_string("no owner for %.0f s and no commit for %.0f s with lag %d", unowned_s, pending,
                                    lag))
              .when(F.col("lost"), F.format_string(
                  "committed offset %d is below the log start %d: lost unless its consumer had already fetched them",
                  F.col("committed"), F.col("log_start")))
              .when(growing, F.format_string("lag %.0f s and growing", F.col("lag_s")))
              .otherwise(F.format_string("consuming; lag %d", lag)))
    return ev.select(
        "cluster", F.col("ts").alias("eval_ts"), "group_id", "topic", "partition",
        burrow.alias("burrow_status"), own.alias("status"), reason.alias("reason"),
        F.col("lag"), F.col("lag_s").alias("lag_seconds"))



def transform_status(rows: DataFrame, entries: DataFrame, *, n: int, stall_after_s: float,
                     stop_after_s: float, warn_lag_s: float) -> DataFrame:
    """The ``status`` table: :func:`partition_status` and :func:`with_group_rows`."""
    return with_group_rows(partition_status(rows, entries, n=n, stall_after_s=stall_after_s,
                                            stop_after_s=stop_after_s, warn_lag_s=warn_lag_s))



def minutes_last(t: Column, next_t: Column) -> Column:
    """The sweep at ``t`` is its minute's last: the next one (``next_t``) lies in a later minute,
    or there is none. Minutes as floor(t / 60): exact at a minute's first instant (t is exact
    there), and UTC minutes have 60 s; the same minutes as ``date_trunc`` over the timestamp."""
    return next_t.isNull() | (F.floor(next_t / 60) != F.floor(t / 60))


# ---- from analytics/series.py ------------------------------------------------------------

def state_rows(enriched: DataFrame) -> DataFrame:
    """The last row per key with its markers: the series part of the next step's state (the
    row without a next sweep: no sort of its own). A key without a sweep in the step keeps its
    state row, whose maxima are its own markers (no row precedes it)."""
    # the key's carried m_commit_t (its state row's: a fresh last row has none), kept however
    # long the group stays silent
    last = enriched.withColumn("m_commit_t", F.max("m_commit_t").over(Window.partitionBy(*KEY))).where(
        F.col("next_t").isNull())
    return last.select(
        *SERIES_COLUMNS,
        F.col("change_t").alias("m_change_t"),
        F.coalesce(F.col("pending_t"), F.lit(None).cast("double")).alias("m_pending_t"),
        F.greatest(F.col("busy_max_before"), F.col("busy_rate"), F.col("m_max_rate")).alias("m_max_rate"),
        F.greatest(F.col("sat_max_before"), F.col("sat_rate"), F.col("m_sat_rate")).alias("m_sat_rate"),
        F.col("rate").alias("m_rate"),
        F.col("ret_t").alias("m_ret_t"),
        F.col("end_change_t").alias("m_end_t"),
        F.greatest(F.col("max_committed_before"), F.col("committed"), F.col("m_max_committed"))
        .alias("m_max_committed"),
        F.col("m_commit_t"),  # the key's carried one (last_commit_marker adds the step's commits)
        F.col("alive_t").alias("m_alive_t"),
        F.col("end_drop_t").alias("m_drop_t"),
        F.col("owned_t").alias("m_owned_t"),
        F.col("tenure_t").alias("m_tenure_t"),
        F.col("change_takeover").alias("m_change_takeover"),
        F.col("tenure_owner").alias("m_tenure_owner"),
        F.lit(True).alias("is_state"),
    )



# ---- from analytics/trends.py ------------------------------------------------------------

def _history_epoch() -> Column:
    """The row's history epoch (lagscope.lag): how many rows up to it, in its key, had an end that
    went down or was unknown (the history restarts at each)."""
    restarts = F.when(F.col("end").isNull() | (F.col("de") < 0), 1).otherwise(0)
    return F.sum(restarts).over(series_window().rowsBetween(Window.unboundedPreceding, Window.currentRow))


def _is_point() -> Column:
    """A fresh row with a known end that differs from the previous row's (or the first after an
    unknown one)."""
    return ~F.col("is_state") & F.col("end").isNotNull() & (F.col("prev_end").isNull() | (F.col("de") != 0))


def _point() -> Column:
    first = F.col("prev_end").isNull() | (F.col("de") < 0)
    return F.struct(
        F.col("end").alias("e"),
        F.col("t").alias("tc"),
        F.when(first, F.col("t")).otherwise(F.col("prev_t")).alias("tp"),
        F.when(first, F.col("end")).otherwise(F.col("prev_end")).alias("ep"),
    )


def history_points(enriched: DataFrame) -> DataFrame:
    """The end-offset rises of a series: ``KEY, e, tc, tp, ep, end_epoch`` (``end_epoch``: the
    history epoch, see the module doc of lagscope.lag).

    A key's first row, and the first after the end went down or was unknown, yields
    ``(end, t, t, end)``: every message below ``end`` was written at or before ``t``, which
    makes older offsets a lower bound.
    """
    return (enriched.withColumn("_epoch", _history_epoch()).where(_is_point())
            .select(*KEY, _point().alias("_pt"), F.col("_epoch").alias("end_epoch"))
            .select(*KEY, "_pt.*", "end_epoch"))


def compact_history(points: DataFrame, enriched: DataFrame, *, history_points: int = HISTORY_POINTS) -> DataFrame:
    """The points the next step still needs: those of the history epoch of the key's last row
    (``enriched``: the step's enriched series; ``points`` carry ``end_epoch``), above its last
    committed offset (older ones can never bracket a later offset unless the group rewinds), the
    newest ``history_points`` of them. Returns ``KEY, e, tc, tp, ep``."""
    lr = (enriched.withColumn("_epoch", _history_epoch()).where(F.col("next_t").isNull())
          .select(*KEY, F.col("committed").alias("_c"), "_epoch"))
    keep = points.join(lr, KEY, "inner").where((F.col("end_epoch") == F.col("_epoch")) & (
        F.col("_c").isNull() | (F.col("e") > F.col("_c"))))
    newest_first = Window.partitionBy(*KEY).orderBy(F.col("tc").desc())
    return (keep.withColumn("_n", F.row_number().over(newest_first)).where(F.col("_n") <= history_points)
            .select(*KEY, "e", "tc", "tp", "ep"))


# the status table's group rows, as Spark SQL (the reference of lagscope.analytics.status.status)

def with_group_rows(parts: DataFrame) -> DataFrame:
    """Partition status rows plus their group rows, with ``date`` (``parts`` is read twice:
    pass stored rows, not a plan that would be computed twice)."""
    return parts.unionByName(_group_rows(parts)).withColumn("date", F.date_format("eval_ts", "yyyy-MM-dd"))


def _rank(col: str, ranks: dict[str, int]) -> Column:
    expr = F.lit(0)
    for name, r in ranks.items():
        expr = F.when(F.col(col) == name, F.lit(r)).otherwise(expr)
    return expr


def _group_rows(parts: DataFrame) -> DataFrame:
    """Group rows per minute: the worst partition (Burrow: anything worse than ERR is ERR;
    lagscope keeps the worst partition's status name in its own order, ERR worst, IDLE only when
    every partition is IDLE; among partitions of that status, the reason of the one with the most
    lag)."""
    p = parts.withColumn("_m", F.date_trunc("minute", "eval_ts")).withColumn(
        "_br", _rank("burrow_status", BURROW_RANK)).withColumn("_lr", _rank("status", OWN_RANK))
    g = p.groupBy("cluster", "group_id", "_m").agg(
        F.max("eval_ts").alias("eval_ts"), F.max("_br").alias("_br"),
        # at equal status, the partition with the most lag (then the reason): a tie broken
        # by row order differed between a batch and the incremental steps over the same rows
        F.max_by(F.struct("status", "reason"), F.struct("_lr", F.coalesce(F.col("lag"), F.lit(-1)).alias("_l"),
                                                        "reason")).alias("_worst"),
        F.sum("lag").alias("lag"), F.max("lag_seconds").alias("lag_seconds"))
    burrow = (F.when(F.col("_br") >= 3, F.lit("ERR")).when(F.col("_br") == 2, F.lit("WARN"))
              .otherwise(F.lit("OK")))
    return g.select(
        "cluster", "eval_ts", "group_id", F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"), burrow.alias("burrow_status"),
        F.col("_worst.status").alias("status"), F.col("_worst.reason").alias("reason"), "lag", "lag_seconds")


# the Spark statements of analytics/findings.py (finish, commit records, storms, outages)

def _key(kind: Column, start: Column) -> Column:
    return F.concat_ws("|", kind, F.col("cluster"), F.col("group_id"), F.coalesce(F.col("topic"), F.lit("")),
                       F.coalesce(F.col("partition").cast("string"), F.lit("")),
                       F.unix_millis(start).cast("string"))


def finish(df: DataFrame) -> DataFrame:
    """Add ``key`` and ``cause`` (retention_loss: retention, rewind: rewind; the per-group pass
    names an empty group's rewind admin_reset) and order the columns as the table has them."""
    cause = (F.when(F.col("kind") == "retention_loss", F.lit("retention"))
             .when(F.col("kind") == "rewind", F.lit("rewind")).otherwise(F.lit(None).cast("string")))
    return df.withColumn("key", _key(F.col("kind"), F.col("start_ts"))).withColumn("cause", cause).select(
        *ANOMALY_COLUMNS)


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
