"""Per-partition time series: the sweep rows of one (cluster, group, topic, partition), in time
order, with the running values every rule needs (previous sample, last commit, pending work).

Pure transforms: DataFrame in, DataFrame out, plain values as parameters.

The *series* of a key ``(cluster, group_id, topic, partition)`` is one row per sweep:

- ``ts`` (timestamp) and ``t`` (epoch seconds, double) of the sweep;
- ``committed`` (null when the group has no commit), ``end`` (the end the group reads to:
  the last stable offset for read_committed groups, else the high watermark), ``log_start``;
- ``lag`` = max(0, end − committed) (null without a commit); ``owner`` (member id or null);
- ``rec_ts``: produce time of the record at the committed offset when the collector fetched it;
- ``lso``: the partition's last stable offset (null when unknown).

Incremental runs prepend one *state row* per key (``is_state`` true): the last row of the
previous step, carrying its running markers (``m_change_t``, ``m_pending_t``, ``m_max_rate``,
``m_max_committed``, ``m_rate``, …).
Every running value below is a ``last(…, ignorenulls)`` or ``max`` over the rows so far, so
a state row seeds it exactly as if the whole history had been read.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql import types as T  # noqa: N812

__all__ = ["KEY", "SERIES_COLUMNS", "STATE_MARKERS", "enrich_series", "prepare_series", "series_window"]

#: the identity of a series
KEY = ["cluster", "group_id", "topic", "partition"]

#: the columns of a prepared series row (before enrichment)
SERIES_COLUMNS = [*KEY, "ts", "t", "committed", "end", "log_start", "lag", "owner", "group_state",
                  "rec_ts", "lso"]

#: running markers a state row carries (null on fresh rows)
STATE_MARKERS: dict[str, T.DataType] = {
    "m_change_t": T.DoubleType(),   # time of the last observed change of the committed offset
    "m_pending_t": T.DoubleType(),  # time since which work has been pending (lag > 0), or null
    "m_max_rate": T.DoubleType(),   # largest busy consume rate (messages/s) so far
    "m_sat_rate": T.DoubleType(),   # largest saturated consume rate so far (> 0: the busy rate is capacity)
    "m_rate": T.DoubleType(),       # the row's own consume rate (the next row's prev_rate)
    "m_ret_t": T.DoubleType(),      # start of the open retention-loss episode, or null
    "m_end_t": T.DoubleType(),      # time of the last observed change of the end offset
    "m_max_committed": T.LongType(),  # highest committed offset observed so far
    "m_commit_t": T.DoubleType(),   # time of the last commit record (commit stream) up to the row
    "m_alive_t": T.DoubleType(),    # time of the last progress of an owner (commit change or caught up)
    "m_drop_t": T.DoubleType(),     # time of the last sweep that saw the end offset go down
    "m_owned_t": T.DoubleType(),    # time of the last sweep at which the partition had an owner (null: unknown)
    "m_tenure_t": T.DoubleType(),   # the row's tenure_t (null: unknown, a state written before it)
    "m_change_takeover": T.DoubleType(),  # the row's change_takeover (null: 0)
    "m_tenure_owner": T.StringType(),  # the owner of the key's latest owned row up to the state row
}


def series_window() -> WindowSpec:
    """A key's rows in time order. Ordered by the minute first (the same order: the minute is
    monotone in time), so per-minute windows over the enriched series (``orderBy
    window_start``, a range of the current minute) need no sort of their own."""
    return Window.partitionBy(*KEY).orderBy("window_start", "t")




def _epoch_s(col: Column) -> Column:
    return F.unix_micros(col).cast("double") / F.lit(1e6)


def prepare_series(offsets: DataFrame, read_committed_groups: Sequence[str] = ()) -> DataFrame:
    """Lake ``offsets`` rows → series rows (see the module doc).

    The end a group reads to (lagscope.lag.lag_end) is the last stable offset when the collector
    measured the row's lag against it (``lag_basis = 'lso'``) or the group matches one of the
    regexes ``read_committed_groups`` (whole id), and is known; else the high watermark.
    """
    cols = set(offsets.columns)
    committed = F.col("committed_offset")
    hw = F.col("log_end_offset")
    lso = F.col("last_stable_offset")
    on_lso = F.coalesce(F.col("lag_basis") == F.lit("lso"), F.lit(False)) if "lag_basis" in cols else F.lit(False)
    listed = (F.col("group_id").rlike("^(?:" + "|".join(f"(?:{p})" for p in read_committed_groups) + ")$")
              if read_committed_groups else F.lit(False))
    end = F.when(listed | on_lso, F.coalesce(lso, hw)).otherwise(hw)
    rec_ts = F.col("committed_record_ts") if "committed_record_ts" in cols else F.lit(None).cast("timestamp")
    return offsets.select(
        F.col("cluster"), F.col("group_id"), F.col("topic"), F.col("partition").cast("int").alias("partition"),
        F.col("sweep_ts").alias("ts"), _epoch_s(F.col("sweep_ts")).alias("t"),
        committed.alias("committed"), end.alias("end"), F.col("log_start_offset").alias("log_start"),
        F.when(committed.isNull(), F.lit(None).cast("long"))
         .otherwise(F.greatest(F.lit(0).cast("long"), end - committed)).alias("lag"),
        F.col("member_id").alias("owner"), F.col("group_state"), rec_ts.alias("rec_ts"), lso.alias("lso"),
    )


def _with_markers(df: DataFrame) -> DataFrame:
    for name, dtype in STATE_MARKERS.items():
        if name not in df.columns:
            df = df.withColumn(name, F.lit(None).cast(dtype))
    if "is_state" not in df.columns:
        df = df.withColumn("is_state", F.lit(False))
    return df


def _commit_rates(df: DataFrame, commits: DataFrame | None) -> DataFrame:
    """``commit_rate``: the fastest commit (its offset − the highest the key committed before it,
    ÷ the time since the key's previous commit) at a time in a fresh row's interval (``prev_t``,
    ``t``], whose offset is at or past
    ``prev_end`` and whose advance is more than half the row's ``dc`` (null: 0); 0 elsewhere."""
    if commits is None:
        return df.withColumn("commit_rate", F.lit(0.0))
    cw = Window.partitionBy(*KEY).orderBy("_ct", "seq")
    c = (commits.select(*KEY, F.col("t").alias("_ct"), "seq", F.col("offset").alias("_co"))
         .withColumns({"_pt": F.lag("_ct").over(cw), "_adv": F.col("_co") - F.max("_co").over(
             cw.rowsBetween(Window.unboundedPreceding, -1))})
         .where(F.col("_pt").isNotNull() & (F.col("_ct") > F.col("_pt")) & (F.col("_adv") > 0))
         .withColumn("_crate", F.col("_adv") / (F.col("_ct") - F.col("_pt"))))
    rows = df.where(~F.col("is_state") & F.col("prev_t").isNotNull() & F.col("prev_end").isNotNull()).select(
        *KEY, "t", F.col("prev_t").alias("_rpt"), F.col("prev_end").alias("_rpe"),
        F.coalesce(F.col("dc"), F.lit(0)).alias("_rdc"))
    rates = (rows.join(c, [*KEY]).where((F.col("_ct") > F.col("_rpt")) & (F.col("_ct") <= F.col("t"))
                                        & (F.col("_co") >= F.col("_rpe")) & (2 * F.col("_adv") > F.col("_rdc")))
             .groupBy(*KEY, "t").agg(F.max("_crate").alias("_cr")))
    return df.join(rates, [*KEY, "t"], "left").withColumn("commit_rate", F.when(
        ~F.col("is_state"), F.coalesce(F.col("_cr"), F.lit(0.0))).otherwise(F.lit(0.0))).drop("_cr")


def _without_jumps(df: DataFrame, to_end: Column, before: WindowSpec, factor: float, floor: Column) -> DataFrame:
    """``busy_rate`` with the jumps set to 0: a busy interval that ended at or past the log end at
    its start (``to_end``) faster than ``factor`` × the largest busy rate kept before it (seeded by
    a state row's ``m_max_rate``; none kept: it counts) and than ``factor`` × ``floor`` (the
    producers' rate over the interval), where "faster" is the larger of its rate and its
    ``commit_rate`` (the fastest commit that made its advance). Each kept maximum depends on the earlier
    verdicts, so this is a fixed point, one round per pass: from every rate kept, a round drops a
    superset of the last; the first that drops nothing new is the sequential answer."""
    df = df.withColumns({"_raw": F.col("busy_rate"), "_to_end": to_end & (F.col("busy_rate") > 0),
                         "_floor": floor, "_jump": F.lit(False)})
    while True:
        kept = F.coalesce(F.max(F.when(F.col("is_state"), F.col("m_max_rate")).otherwise(
            F.col("busy_rate"))).over(before), F.lit(0.0))
        df = df.withColumn("_was", F.col("_jump")).withColumn(
            "_jump", F.col("_to_end") & (kept > 0) & (
                F.greatest(F.col("_raw"), F.col("commit_rate")) > F.lit(factor) * F.greatest(
                    kept, F.col("_floor")))).withColumn(
            "busy_rate", F.when(F.col("_jump"), F.lit(0.0)).otherwise(F.col("_raw"))).localCheckpoint()
        if df.where(F.col("_jump") != F.col("_was")).isEmpty():
            return df.drop("_raw", "_to_end", "_floor", "_jump", "_was")


def enrich_series(series: DataFrame, state: DataFrame | None = None, jump_factor: float = 5.0,
                  commits: DataFrame | None = None) -> DataFrame:
    """Add the running values to a series (optionally seeded by state rows; ``commits``: the commit
    stream's records, ``KEY``, ``t``, ``seq``, ``offset``, which judge a jump by its commit's pace).

    Added columns (all per key, in time order):

    - ``window_start``: the sweep's minute;
    - ``prev_t``, ``prev_committed``, ``prev_end``, ``prev_lag``, ``prev_log_start``: the previous row;
    - ``next_t``: the next row's time (null at the last row);
    - ``dt`` (s), ``dc`` (Δ committed), ``de`` (Δ end);
    - ``changed``: the committed offset differs from the previous row's;
    - ``change_t``: time of the last change of the committed offset up to this row;
    - ``prev_change_t``: the same, before this row;
    - ``pending_t``: since when work has been pending (first row with lag > 0 after a row
      with lag 0); null when lag is 0;
    - ``idle_pending_s``: seconds with work pending and no commit progress
      (t − max(change_t, pending_t)); 0 when lag is 0;
    - ``rate``: consume rate over the last interval (messages/s, ≥ 0);
    - ``starved``: a fresh row with an owner that, over the same interval (the same sweep time),
      advanced another of its partitions more than ``jump_factor`` × this one's ``rate``: the
      owner served that one, so this one's advance is what it left over, no capacity;
    - ``busy_rate``: ``rate`` when the partition had lag > 0 at both ends of the interval (a
      fresh row), was not starved and retention had not passed its start (passed:
      ``prev_committed`` < ``log_start``), else 0: what the consumer showed it can do (it never
      waited for messages);
      0 for a jump to the end (an interval that ended at or past the log end at its start,
      faster than ``jump_factor`` × the largest busy rate kept before it and, until a saturated
      interval was seen, than ``jump_factor`` × the producers' rate over it: a seek's own
      advance is no evidence of capacity; :func:`_without_jumps`), where an interval is as fast
      as the larger of its ``rate`` and its ``commit_rate`` (:func:`_commit_rates`);
    - ``commit_rate``: with ``commits``, the fastest commit inside the interval that reached the
      log end at its start and carried more than half its advance, else 0;
    - ``sat_rate``: ``rate`` when the interval was busy, its committed offset at the end plus
      a commit's worth of progress (the larger of its advance ``dc`` and the previous row's
      ``rate`` × ``dt``) is below the log end at its start (saturated: the messages were there
      all along, even allowing progress not yet committed) and an
      earlier row was busy with progress (a state row: ``m_max_rate`` > 0), else 0;
    - ``busy_max_before`` / ``sat_max_before``: the largest ``busy_rate`` / ``sat_rate`` of
      earlier rows (seeded by ``m_max_rate`` / ``m_sat_rate``);
    - ``max_rate_before``: the demonstrated capacity, ``busy_max_before`` once a saturated
      interval was seen (``sat_max_before > 0``), else 0;
    - ``prev_rate``: the previous row's ``rate``;
    - ``max_committed_before``: the highest committed offset of earlier rows (seeded by
      ``m_max_committed``): everything below it was processed at least once;
    - ``lost``: committed < log start (retention loss); ``ret_t``: start of that episode;
    - ``end_change_t``: time of the last change of the end offset (idle topics);
    - ``alive_t``: time of the last row at which an owner showed progress (the committed offset
      changed, or nothing was pending): the owner was alive then (rebalance causes);
    - ``end_epoch``: how often the end went down up to this row (the topic was deleted and
      re-created, or the log truncated), counted from this frame's first row (a state row is 0):
      the end-offset history of one epoch says nothing about the offsets of another;
    - ``end_drop_t``: time of the last row that saw the end go down (seeded by ``m_drop_t``);
    - ``owned_t``: time of the last row at which the partition had an owner (seeded by
      ``m_owned_t``); a key's first row when it has none (never seen owned: unowned since its
      first row). A state row without ``m_owned_t`` (written before it existed) had an owner at
      its own time when it has one; else the time is unknown: null until the key is owned again;
    - ``tenure_owner``: the owner of the latest owned row up to the row (a state row's
      ``m_tenure_owner``, else its own); ``tenure_t``: commit records from this time on are the
      current owner's. A *takeover* (a fresh owned row whose owner differs from the
      ``tenure_owner`` before it) starts a tenure: +inf there (no record is the new owner's yet),
      the next row's own time (its second sweep); a state row carries ``m_tenure_t`` (null:
      -inf), and a key's first fresh row without one is -inf (every record counts);
    - ``change_takeover``: 1 when the last change (``change_t``) was seen at a takeover or at a
      row without an owner (nobody's progress), else 0 (seeded by ``m_change_takeover``, null: 0);
    - ``rebased``: the end went down after the committed offset last changed before this row
      (``end_drop_t > prev_change_t``): the previous committed offset belongs to a log that was
      replaced (the topic deleted and re-created) or truncated, so a lower offset now is no
      re-read of the same messages.
    """
    df = _with_markers(series)
    if state is not None:
        df = df.unionByName(_with_markers(state), allowMissingColumns=True)
    df = df.withColumn("window_start", F.date_trunc("minute", F.col("ts")))
    w = series_window()
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    # Few window passes: every window column of a pass is one ``withColumns`` (Spark
    # computes a pass's columns in one Window operator over one sort; a chain of
    # ``withColumn`` calls makes one operator per column). Between them, plain columns.
    lost = F.col("committed").isNotNull() & F.col("log_start").isNotNull() & (
        F.col("committed") < F.col("log_start"))
    # tenures: the owner each row names (a state row its carried tenure owner, else its own)
    who = F.when(F.col("is_state"), F.coalesce(F.col("m_tenure_owner"), F.col("owner"))).otherwise(F.col("owner"))
    df = df.withColumns({
        "prev_t": F.lag("t").over(w),
        "next_t": F.lead("t").over(w),
        "prev_committed": F.lag("committed").over(w),
        "prev_end": F.lag("end").over(w),
        "prev_lag": F.lag("lag").over(w),
        "prev_log_start": F.lag("log_start").over(w),
        "_prev_lost": F.coalesce(F.lag(lost).over(w), F.lit(False)),
        "tenure_owner": F.last(who, ignorenulls=True).over(upto),
        "_prev_who": F.last(who, ignorenulls=True).over(before),
    })
    # a takeover (an owner other than the one named before), then the row after it
    df = df.withColumn("_takeover", ~F.col("is_state") & F.col("owner").isNotNull() & F.col("_prev_who").isNotNull()
                       & (F.col("owner") != F.col("_prev_who")))
    df = df.withColumn("_after", F.coalesce(F.lag(F.col("_takeover") | (
        F.col("is_state") & F.coalesce(F.col("m_tenure_t") == F.lit(float("inf")), F.lit(False)))).over(w),
        F.lit(False)))
    df = df.withColumns({
        "dt": F.col("t") - F.col("prev_t"),
        "dc": F.col("committed") - F.col("prev_committed"),
        "de": F.col("end") - F.col("prev_end"),
        "lost": lost,
    })
    df = df.withColumn("changed", F.col("committed").isNotNull() & ~F.col("is_state")
                       & (F.col("prev_committed").isNull() | (F.col("dc") != 0)))
    # pending work starts at the first row with lag > 0 after a row without lag
    starts_pending = (F.col("lag") > 0) & (F.col("prev_lag").isNull() | (F.col("prev_lag") == 0))
    rate = F.when((F.col("dt") > 0) & (F.col("dc") > 0), F.col("dc") / F.col("dt")).otherwise(F.lit(0.0))
    df = df.withColumns({
        "_change_mark": F.when(F.col("is_state"), F.col("m_change_t")).when(F.col("changed"), F.col("t")),
        "_tenure_mark": (F.when(F.col("is_state"), F.coalesce(F.col("m_tenure_t"), F.lit(float("-inf"))))
                         .when(F.col("_takeover"), F.lit(float("inf"))).when(F.col("_after"), F.col("t"))
                         .when(F.col("prev_t").isNull(), F.lit(float("-inf")))),
        "_change_tk_mark": (F.when(F.col("is_state"), F.coalesce(F.col("m_change_takeover"), F.lit(0.0)))
                            .when(F.col("changed"), F.when(F.col("_takeover") | F.col("owner").isNull(), F.lit(1.0))
                                  .otherwise(F.lit(0.0)))),
        "_pending_mark": (F.when(F.col("is_state"), F.coalesce(F.col("m_pending_t"), F.lit(-1.0)))
                          .when(F.coalesce(F.col("lag"), F.lit(0)) == 0, F.lit(-1.0))
                          .when(starts_pending, F.col("t"))),
        "_ret_mark": (F.when(F.col("is_state"), F.coalesce(F.col("m_ret_t"), F.lit(-1.0)))
                      .when(~F.col("lost"), F.lit(-1.0))
                      .when(~F.col("_prev_lost"), F.col("t"))),
        "_end_mark": (F.when(F.col("is_state"), F.col("m_end_t"))
                      .when(F.col("prev_end").isNull() | (F.col("de") != 0), F.col("t"))),
        "_drop_mark": F.when(F.col("is_state"), F.col("m_drop_t")).when(F.col("de") < 0, F.col("t")),
        "_alive_mark": (F.when(F.col("is_state"), F.col("m_alive_t"))
                        .when(F.col("owner").isNotNull() & (
                            F.col("changed") | (F.coalesce(F.col("lag"), F.lit(0)) == 0)), F.col("t"))),
        "_owned_mark": (F.when(F.col("is_state"), F.coalesce(
                            F.col("m_owned_t"), F.when(F.col("owner").isNotNull(), F.col("t")), F.lit(-1.0)))
                        .when(F.col("owner").isNotNull() | F.col("prev_t").isNull(), F.col("t"))),
        "rate": F.when(F.col("is_state"), F.coalesce(F.col("m_rate"), F.lit(0.0))).otherwise(rate),
        "_committed_seed": F.when(F.col("is_state"), F.greatest(
            F.col("m_max_committed"), F.col("committed"))).otherwise(F.col("committed")),
    })
    # starved: the owner advanced another of its partitions more than jump_factor × faster over the
    # same interval (the same sweep time), the fastest sibling of the group's fresh owned rows
    fresh_owned = ~F.col("is_state") & F.col("owner").isNotNull()
    sweep = Window.partitionBy("cluster", "group_id", "owner", "t")
    fastest = F.max(F.when(fresh_owned, F.col("rate"))).over(sweep)
    df = df.withColumn("starved", fresh_owned & F.coalesce(
        (fastest > jump_factor * F.col("rate")) & (fastest > F.col("rate")), F.lit(False)))
    passed = F.coalesce(F.col("prev_committed") < F.col("log_start"), F.lit(False))
    busy = ~F.col("is_state") & (F.col("prev_lag") > 0) & (F.col("lag") > 0) & ~F.col("starved") & ~passed
    pos_busy = F.when(F.col("is_state"), F.coalesce(F.col("m_max_rate"), F.lit(0.0)) > 0).otherwise(
        F.coalesce(busy & (F.col("rate") > 0), F.lit(False)))
    df = df.withColumn("_busy_before", F.coalesce(F.max(pos_busy.cast("int")).over(before), F.lit(0)) > 0)
    unseen = F.greatest(F.col("dc"), F.lit(0), F.lag("rate").over(w) * F.col("dt"))  # a commit's worth of progress
    sat = busy & (F.col("committed") + unseen < F.col("prev_end")) & F.col("_busy_before")
    df = df.withColumn("sat_rate", F.when(sat, F.col("rate")).otherwise(F.lit(0.0)))
    df = df.withColumn("_trusted", F.coalesce(F.max(F.when(F.col("is_state"), F.col("m_sat_rate")).otherwise(
        F.col("sat_rate"))).over(before), F.lit(0.0)) > 0)
    produced = F.when(~F.col("_trusted") & (F.col("dt") > 0) & (F.col("de") > 0), F.col("de") / F.col("dt")).otherwise(
        F.lit(0.0))
    df = _commit_rates(df, commits)
    df = _without_jumps(df.withColumn("busy_rate", F.when(busy, F.col("rate")).otherwise(F.lit(0.0))),
                        busy & F.coalesce(F.col("committed") >= F.col("prev_end"), F.lit(False)), before,
                        jump_factor, produced)
    df = df.withColumns({
        "_rate_seed": F.when(F.col("is_state"), F.col("m_max_rate")).otherwise(F.col("busy_rate")),
        "_sat_seed": F.when(F.col("is_state"), F.col("m_sat_rate")).otherwise(F.col("sat_rate"))})
    df = df.withColumns({
        "change_t": F.last("_change_mark", ignorenulls=True).over(upto),
        "change_takeover": F.last("_change_tk_mark", ignorenulls=True).over(upto),
        "tenure_t": F.last("_tenure_mark", ignorenulls=True).over(upto),
        "prev_change_t": F.last("_change_mark", ignorenulls=True).over(before),
        "_pending": F.last("_pending_mark", ignorenulls=True).over(upto),
        "_ret": F.last("_ret_mark", ignorenulls=True).over(upto),
        "end_change_t": F.last("_end_mark", ignorenulls=True).over(upto),
        "alive_t": F.last("_alive_mark", ignorenulls=True).over(upto),
        "end_drop_t": F.last("_drop_mark", ignorenulls=True).over(upto),
        "_owned": F.last("_owned_mark", ignorenulls=True).over(upto),
        "busy_max_before": F.coalesce(F.max("_rate_seed").over(before), F.lit(0.0)),
        "sat_max_before": F.coalesce(F.max("_sat_seed").over(before), F.lit(0.0)),
        "prev_rate": F.lag("rate").over(w),
        "max_committed_before": F.max("_committed_seed").over(before),
        "end_epoch": F.sum(F.when(F.col("de") < 0, 1).otherwise(0)).over(upto),
    })
    df = df.withColumns({
        "pending_t": F.when(F.col("_pending") >= 0, F.col("_pending")),
        "ret_t": F.when(F.col("_ret") >= 0, F.col("_ret")),
        "owned_t": F.when(F.col("_owned") >= 0, F.col("_owned")),
        "rebased": F.coalesce(F.col("end_drop_t") > F.col("prev_change_t"), F.lit(False)),
        "max_rate_before": F.when(F.col("sat_max_before") > 0, F.col("busy_max_before")).otherwise(F.lit(0.0)),
    }).drop("_busy_before", "_trusted", "_pending", "_rate_seed", "_sat_seed", "_ret", "_prev_lost", "_committed_seed",
            "_change_mark", "_change_tk_mark", "_takeover", "_prev_who", "_after", "_tenure_mark", "_pending_mark",
            "_ret_mark", "_end_mark", "_alive_mark", "_drop_mark", "_owned_mark", "_owned")
    return df.withColumn(
        "idle_pending_s",
        F.when(F.coalesce(F.col("lag"), F.lit(0)) == 0, F.lit(0.0)).otherwise(
            F.greatest(F.lit(0.0), F.col("t") - F.greatest(
                F.coalesce(F.col("change_t"), F.col("t")), F.coalesce(F.col("pending_t"), F.col("t"))))),
    )


