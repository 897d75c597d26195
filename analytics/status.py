"""The ``status`` table: a Burrow-compatible evaluation beside lagscope's own, per partition and
group, once per minute (at the minute's last sweep).

**Burrow** (``core/internal/evaluator/caching.go``), evaluated over the last ``N`` offset
*entries* of a partition (Burrow stores one per commit; from sweeps, an entry is a sweep at
which the committed offset changed or an owner was assigned — an assigned consumer commits
periodically — so a consumer that is gone stops adding entries, as it would in Burrow):

1. if the current lag is 0, or any entry in the window has lag 0 → OK;
2. the offset decreased between two consecutive entries → REWIND;
3. now − last entry time > last − first entry time → STOP;
4. every entry has the same offset → STALL;
5. the lag never decreases from one entry to the next → WARN;
otherwise OK. A group is the worst of its partitions, anything worse than ERR counted as ERR.

Burrow's known false alarms follow from these rules: a consumer of a low-traffic topic that
only commits when it consumes is STOP (rule 3) as soon as one message waits; a steady lag of
a few messages that is never exactly 0 at the entries is WARN (rule 5); an idle topic whose
consumer stopped committing is STOP.

**lagscope** (worst first): ``ERR`` when committed < log start (messages lost);
``REWIND`` when the window rewound; ``STOP`` when work is pending, nobody owns the partition
and nothing was committed for ``stop_after_s``; ``STALL`` the same with an owner
(``stall_after_s``); ``WARN`` when the lag in seconds is at least ``warn_lag_s`` *and* grew
over the window without ever decreasing; ``IDLE`` when caught up on a topic that has not
been written to for ``stall_after_s``; else ``OK``. So: no STOP at zero lag, no WARN on a
steady small lag (its lag seconds stay small), no alarm on an idle topic.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics.series import KEY, minutes_last

__all__ = ["STATUS_COLUMNS", "burrow_entries", "entries_state", "partition_status", "transform_status",
           "with_group_rows"]

STATUS_COLUMNS = ["cluster", "eval_ts", "group_id", "topic", "partition", "burrow_status", "status",
                  "reason", "lag", "lag_seconds"]

#: Burrow's order (its StatusConstant values)
_RANK = {"OK": 1, "IDLE": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}
#: lagscope's own order, worst last: the dashboards' (worst first ERR, STOP, STALL, REWIND,
#: WARN, OK, IDLE), which is also the alerts' (ERR, STOP, STALL critical; REWIND, WARN warning)
_OWN_RANK = {"IDLE": 0, "OK": 1, "WARN": 2, "REWIND": 3, "STALL": 4, "STOP": 5, "ERR": 6}


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
        *KEY, "ts", "t", "committed", "end", "lso", "log_start", "lag", "lag_s", "owner", "lost", "idle_pending_s",
        "end_change_t").withColumn("_kind", F.lit(1)).withColumn("_win", F.lit(None).cast(
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
    growing = (F.coalesce(F.col("lag_s"), F.lit(0.0)) >= warn_lag_s) & w.isNotNull() & ~w["lag_decreased"] & (
        lag > w["first_lag"])
    idle = (lag == 0) & ((F.col("t") - F.coalesce(F.col("end_change_t"), F.col("t"))) >= stall_after_s)
    # held at an open transaction: committed = LSO < end (a read_committed group has nothing to
    # consume until the transaction ends; the anomalies' stall/stop rule says the same)
    held = F.coalesce(F.col("lso").isNotNull() & (F.col("committed") == F.col("lso"))
                      & (F.col("lso") < F.col("end")), F.lit(False))
    own = (F.when(F.col("lost"), F.lit("ERR"))
           .when(lag == 0, F.when(idle, F.lit("IDLE")).otherwise(F.lit("OK")))
           .when(w.isNotNull() & w["rewound_own"], F.lit("REWIND"))
           .when(held, F.lit("OK"))
           .when(~owned & (pending >= stop_after_s), F.lit("STOP"))
           .when(owned & (pending >= stall_after_s), F.lit("STALL"))
           .when(growing, F.lit("WARN"))
           .otherwise(F.lit("OK")))
    reason = (F.when(F.col("lost"), F.format_string("committed offset %d is below the log start %d",
                                                     F.col("committed"), F.col("log_start")))
              .when(F.col("committed").isNull(), F.lit("no committed offset"))
              .when(lag == 0, F.when(idle, F.lit("caught up; no new messages")).otherwise(F.lit("caught up")))
              .when(w.isNotNull() & w["rewound_own"], F.lit("committed offset went backwards in the window"))
              .when(held, F.format_string("at the last stable offset %d: waiting for an open transaction",
                                          F.col("lso")))
              .when(~owned & (pending >= stop_after_s),
                    F.format_string("no owner and no commit for %.0f s with lag %d", pending, lag))
              .when(owned & (pending >= stall_after_s),
                    F.format_string("owner assigned but no commit for %.0f s with lag %d", pending, lag))
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
        "_br", _rank("burrow_status", _RANK)).withColumn("_lr", _rank("status", _OWN_RANK))
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
