"""Lag in seconds and the per-minute ``lag_trends`` table.

Lag in seconds of a row (sweep time ``t``, committed offset ``c``, end ``e``):

- ``zero``: ``c >= e`` (caught up; an idle caught-up topic is 0 s, never a growing number);
- ``exact``: the collector fetched the produce time of the record at ``c`` → ``t − rec_ts``;
- ``interpolated``: over the (end offset, time) history. Each *point* records one rise of the
  end between two sweeps: the end went from ``ep`` (seen at ``tp``) to ``e`` (first seen at
  ``tc``), so the messages ``ep … e−1`` were written in ``(tp, tc]``. For ``c`` the point with
  the smallest ``e > c`` brackets it; its produce time is interpolated linearly inside that
  interval (``tp + (c − ep + ½)/(e − ep)·(tc − tp)``). Only the sweep interval in which the
  message arrived is used, so a long idle period before a burst adds no jitter, and nothing
  is ever extrapolated: when ``c`` lies before the known history (``c < ep`` of the earliest
  point) the row says "at least ``t − tp``" (``lag_seconds_is_lower_bound``). An end that went
  down (the topic was deleted and re-created, or the log truncated) starts a new history, as a
  key's first row does: the points before it (``end_epoch``) never bracket an offset after it.

Lag in seconds is reported per minute, at the minute's last sweep (the ``lag_trends`` row and
the ``status`` evaluation of that minute), so it is computed for those rows only: the *minute
rows*, one per key and minute, each carrying its minute's totals. The
lookup is one window over the union of a key's minute rows and points, ordered by offset
(descending): ``last(point, ignorenulls)`` is the nearest point above each row's offset. No
join, and the series keeps its partitioning.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics.series import KEY, minutes_last

__all__ = ["compact_history", "history_points", "transform_lag_seconds", "transform_lag_trends"]

_POINT = "struct<e:bigint,tc:double,tp:double,ep:bigint>"


def _is_point() -> Column:
    """A fresh row that records a rise of the end (or is its key's first row, or the first
    after the end went down)."""
    return ~F.col("is_state") & F.col("end").isNotNull() & (F.col("prev_t").isNull() | (F.col("de") != 0))


def _point() -> Column:
    first = F.col("prev_t").isNull() | (F.col("de") < 0)
    return F.struct(
        F.col("end").alias("e"),
        F.col("t").alias("tc"),
        F.when(first, F.col("t")).otherwise(F.col("prev_t")).alias("tp"),
        F.when(first, F.col("end")).otherwise(F.col("prev_end")).alias("ep"),
    )


def history_points(enriched: DataFrame) -> DataFrame:
    """The end-offset rises of a series: ``KEY, e, tc, tp, ep, end_epoch`` (see the module doc).

    The first row of a key (no previous sweep), and the first after the end went down, yields
    ``(end, t, t, end)``: every message below ``end`` was written at or before ``t``, which
    makes older offsets a lower bound.
    """
    return enriched.where(_is_point()).select(*KEY, _point().alias("_pt"), "end_epoch").select(
        *KEY, "_pt.*", "end_epoch")


def _with_minute_totals(enriched: DataFrame) -> DataFrame:
    """The fresh rows with ``_last`` (the row is its minute's last sweep) and the minute's
    totals over its rows: ``lag_max``; ``m_de``, ``m_dc``, ``m_dls`` (the rises of the end, the
    committed offset and the log start, each ≥ 0) and ``m_dt`` over the intervals that end in
    the minute (those with ``dt > 0``; the first reaches back to the previous minute's last
    sweep)."""
    fresh = enriched.where(~F.col("is_state"))
    # the rows of the current minute: the series' own order (series_window), so no sort
    minute = Window.partitionBy(*KEY).orderBy("window_start").rangeBetween(Window.currentRow, Window.currentRow)
    counted = F.col("dt") > 0

    def rise(c: Column) -> Column:
        return F.sum(F.when(counted, F.greatest(c, F.lit(0)))).over(minute)

    return fresh.withColumns({
        "lag_max": F.max("lag").over(minute),
        "m_de": rise(F.col("de")),
        "m_dc": rise(F.col("dc")),
        "m_dls": rise(F.col("log_start") - F.col("prev_log_start")),
        "m_dt": F.sum(F.when(counted, F.col("dt"))).over(minute),
        "_last": minutes_last(F.col("t"), F.col("next_t")),
    })


def transform_lag_seconds(enriched: DataFrame, history: DataFrame | None = None, *,
                          every_sweep: bool = False) -> DataFrame:
    """The minute rows of ``enriched`` (each minute's last fresh sweep, with ``window_start``
    and the minute's totals: see :func:`_with_minute_totals`) with ``lag_s``, ``lag_s_lower``
    and ``lag_s_method``; with ``every_sweep``, every fresh row (each with its minute's
    totals), for a sweep-by-sweep view such as the accuracy benchmark's.

    ``history`` holds points of earlier steps (``KEY, e, tc, tp, ep``: :func:`compact_history`,
    all of the epoch the step starts in).

    One pass over the fresh rows: each yields its minute row (when it is one) and its point
    (when it is one) through a generator, so the series is read and shuffled once; they are
    ordered by offset within the key (without ``history`` the partitioning of the series is
    kept; with it, one shuffle of the step's rows and the carried points).
    """
    fresh = _with_minute_totals(enriched)
    reported = F.lit(True) if every_sweep else F.col("_last")
    marks = F.array(
        F.when(reported, F.struct(F.lit(0).alias("k"), F.col("committed").alias("o"),
                                  F.lit(None).cast(_POINT).alias("p"))),
        F.when(_is_point(), F.struct(F.lit(1).alias("k"), F.col("end").alias("o"), _point().alias("p"))),
    )
    cols = [c for c in fresh.columns if c != "_last"]
    both = fresh.select("*", F.explode(F.filter(marks, lambda m: m.isNotNull())).alias("_m")).select(
        *cols, F.col("_m.k").alias("_kind"), F.col("_m.o").alias("_o"), F.col("_m.p").alias("_pt"))
    if history is not None:
        both = both.unionByName(history.select(
            *KEY, F.lit(1).alias("_kind"), F.col("e").alias("_o"),
            F.struct("e", "tc", "tp", "ep").cast(_POINT).alias("_pt"), F.lit(0).cast("long").alias("end_epoch")),
            allowMissingColumns=True)
    # descending offset; at equal offsets rows come before points, so a point at e == c never
    # brackets c (it needs e > c); only the points of the row's own epoch of the end
    w = (Window.partitionBy(*KEY, "end_epoch").orderBy(F.col("_o").desc(), F.col("_kind").asc())
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    both = both.withColumn("_p", F.last("_pt", ignorenulls=True).over(w))
    out = both.where(F.col("_kind") == 0)
    c = F.col("committed")
    p = F.col("_p")
    inside = c >= p["ep"]
    est = p["tp"] + (c - p["ep"] + F.lit(0.5)) / (p["e"] - p["ep"]) * (p["tc"] - p["tp"])
    interp = F.when(inside, F.col("t") - est).otherwise(F.col("t") - p["tp"])
    exact = F.col("t") - F.unix_micros(F.col("rec_ts")).cast("double") / F.lit(1e6)
    lagging = F.coalesce(F.col("lag"), F.lit(0)) > 0
    out = out.withColumn(
        "lag_s_method",
        F.when(c.isNull(), F.lit(None).cast("string"))
        .when(~lagging, F.lit("zero"))
        .when(F.col("rec_ts").isNotNull(), F.lit("exact"))
        .when(p.isNotNull(), F.lit("interpolated")),
    )
    m = F.col("lag_s_method")
    out = out.withColumn(
        "lag_s",
        F.when(m == "zero", F.lit(0.0))
        .when(m == "exact", F.greatest(F.lit(0.0), exact))
        .when(m == "interpolated", F.greatest(F.lit(0.0), interp)),
    ).withColumn(
        "lag_s_lower", F.when(m == "interpolated", ~inside).when(m.isNotNull(), F.lit(False)))
    return out.drop("_kind", "_o", "_pt", "_p")


def compact_history(points: DataFrame, last_rows: DataFrame, *, recent_s: float = 600.0,
                    bucket_s: float = 60.0) -> DataFrame:
    """The points the next step still needs: those of the epoch of the key's last row
    (``last_rows``: the enriched rows without a next sweep; ``points`` carry ``end_epoch``),
    above its last committed offset (older ones can never bracket a future offset unless the
    group rewinds), the last ``recent_s`` seconds kept whole and older ones merged per
    ``bucket_s`` (a merged point spans its members' intervals, so it still brackets correctly,
    only more coarsely). Returns ``KEY, e, tc, tp, ep``."""
    lr = last_rows.select(*KEY, F.col("committed").alias("_c"), F.col("t").alias("_t"),
                          F.col("end_epoch").alias("_epoch"))
    keep = points.join(lr, KEY, "inner").where((F.col("end_epoch") == F.col("_epoch")) & (
        F.col("_c").isNull() | (F.col("e") > F.col("_c"))))
    recent = keep.where(F.col("tc") >= F.col("_t") - recent_s).select(*KEY, "e", "tc", "tp", "ep")
    old = (keep.where(F.col("tc") < F.col("_t") - recent_s)
           .groupBy(*KEY, F.floor(F.col("tc") / bucket_s).alias("_b"))
           .agg(F.max("e").alias("e"), F.max("tc").alias("tc"), F.min("tp").alias("tp"),
                F.min("ep").alias("ep"))
           .drop("_b"))
    return recent.unionByName(old)


def _date_cols(df: DataFrame, ts_col: str) -> DataFrame:
    return df.withColumn("date", F.date_format(F.col(ts_col), "yyyy-MM-dd"))


def transform_lag_trends(rows: DataFrame) -> DataFrame:
    """Minute rows with lag seconds (:func:`transform_lag_seconds`) → ``lag_trends`` (see
    :data:`lagscope.schema.LAG_TRENDS`).

    Per partition and minute: lag at the last sample and its maximum; produce rate
    Σ(Δ end)/Σ(Δt) and consume rate Σ(max(0, Δ committed))/Σ(Δt) over the intervals that end
    in the minute (the first interval reaches back to the previous minute's last sample, so
    minutes chain without gaps); lag seconds at the last sample; catch-up ETA
    lag/(consume − produce) when positive (0 when caught up); retention headroom
    (committed − log start)/(r − consume) where r, the speed of the log start, is the larger of
    the observed Δ log start/Δt and — once retention has deleted anything (log start > 0) —
    the produce rate, which is what time-based retention deletes at in steady state.
    Topic-level (partition null) and group-level (topic null) rows sum lags and rates and take
    the largest lag seconds and the smallest headroom.
    """
    per = rows.select(
        *KEY, "window_start", F.col("lag").alias("lag_last"), "lag_max",
        F.col("m_de").alias("_de"), F.col("m_dc").alias("_dc"), F.col("m_dls").alias("_dls"),
        F.col("m_dt").alias("_dt"), F.col("lag_s").alias("lag_seconds"),
        F.col("lag_s_lower").alias("lag_seconds_is_lower_bound"), _method_code().alias("_method"),
        F.col("committed").alias("_c"), F.col("log_start").alias("_ls"))
    per = (per.withColumn("produce_rate", F.when(F.col("_dt") > 0, F.col("_de") / F.col("_dt")))
           .withColumn("consume_rate", F.when(F.col("_dt") > 0, F.col("_dc") / F.col("_dt")))
           .withColumn("_ls_rate", F.when(F.col("_dt") > 0, F.col("_dls") / F.col("_dt"))))
    ls_speed = F.greatest(F.coalesce(F.col("_ls_rate"), F.lit(0.0)),
                          F.when(F.col("_ls") > 0, F.coalesce(F.col("produce_rate"), F.lit(0.0)))
                          .otherwise(F.lit(0.0)))
    closing = ls_speed - F.coalesce(F.col("consume_rate"), F.lit(0.0))
    per = per.withColumn(
        "retention_headroom_s",
        F.when(F.col("_c").isNull() | F.col("_ls").isNull(), F.lit(None).cast("double"))
        .when(F.col("_c") < F.col("_ls"), F.lit(0.0))
        .when(closing > 0, (F.col("_c") - F.col("_ls")) / closing),
    )
    # the partition rows and their topic and group rollups in one aggregation over ``per``
    # (grouping sets: ``per`` is computed once, not once per level); a partition-level group
    # holds one row, so its sums and maxima are that row's values
    levels = [[*KEY, "window_start"], [*KEY[:3], "window_start"], [*KEY[:2], "window_start"]]
    allrows = _with_eta(per.groupingSets(levels, *KEY, "window_start").agg(
        F.sum("lag_last").alias("lag_last"),
        F.sum("lag_max").alias("lag_max"),
        F.sum("produce_rate").alias("produce_rate"),
        F.sum("consume_rate").alias("consume_rate"),
        F.max("lag_seconds").alias("lag_seconds"),
        F.max_by("lag_seconds_is_lower_bound", "lag_seconds").alias("lag_seconds_is_lower_bound"),
        F.max_by("_method", "lag_seconds").alias("_method"),
        F.min("retention_headroom_s").alias("retention_headroom_s"),
    ))
    method = F.element_at(F.array(*(F.lit(m) for m in _METHODS)), F.col("_method"))
    return _date_cols(allrows.withColumn("lag_seconds_method", method).select(*_TREND_COLS), "window_start")


#: ``lag_s_method`` as a 1-based code while aggregating: ``max_by`` over a string keeps its
#: aggregation buffer off the fast hash aggregate (a sort per aggregation), an int does not
#: (the rollups take the method of the row with the largest lag seconds)
_METHODS = ("zero", "interpolated", "exact")


def _method_code() -> Column:
    return F.array_position(F.array(*(F.lit(m) for m in _METHODS)), F.col("lag_s_method")).cast("int")

_TREND_COLS = ["cluster", "window_start", "group_id", "topic", "partition", "lag_last", "lag_max",
               "produce_rate", "consume_rate", "lag_seconds", "lag_seconds_is_lower_bound",
               "lag_seconds_method", "catchup_eta_s", "retention_headroom_s"]


def _with_eta(df: DataFrame) -> DataFrame:
    net = F.col("consume_rate") - F.col("produce_rate")
    return df.withColumn(
        "catchup_eta_s",
        F.when(F.col("lag_last") == 0, F.lit(0.0))
        .when((F.col("lag_last") > 0) & (net > 0), F.col("lag_last") / net),
    )
