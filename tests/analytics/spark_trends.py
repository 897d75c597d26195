"""Lag in seconds and the per-minute ``lag_trends`` table as Spark SQL: the reference of the
vectorised pass (:mod:`lagscope.analytics.kernel`) and of :mod:`lagscope.analytics.trends`.

The rule, as production states it:

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
rows*, one per key and minute, each carrying its minute's totals. They come from one
vectorised pass per chunk of keys (:mod:`lagscope.analytics.kernel`) after one shuffle and
sort of the series by key and time: the differences, the minute totals and the bracketing
point (a binary search over the key's points) are array operations, not Spark window
operators with a sort each.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema
from spark_series import KEY

from lagscope.analytics import kernel, onepass
from lagscope.lag import METHODS

__all__ = ["TREND_COLUMNS", "kernel_rows", "key_hashes", "keyed", "method_name", "transform_lag_seconds",
           "transform_lag_trends", "x_struct"]


def kernel_rows(series: DataFrame, kind: int, pass_columns: bool = False) -> DataFrame:
    """Series rows (fresh or state) as the rows of a vectorised pass: the key, the kind, the
    lag-seconds columns and, with ``pass_columns``, the per-key pass's (``lso``, ``owner_h``, and
    ``x``: a state row's markers, :data:`lagscope.analytics.onepass.STATE_X`; ``b``: null)."""
    cols: list[Column | str] = [*KEY, F.lit(kind).alias("_kind"), "t", "committed", "end", "log_start",
                                (F.unix_micros("rec_ts").cast("double") / F.lit(1e6)).alias("rec_t")]
    if pass_columns:
        # (xxhash64 of a null is its seed, not null)
        # (a 52-bit hash: the tenure's owner goes in ``x`` as a double, and compares equal to owner_h)
        def h52(c: str) -> Column:
            return F.when(F.col(c).isNotNull(), F.xxhash64(c).bitwiseAND(F.lit((1 << 52) - 1)))
        cols += ["lso", h52("owner").alias("owner_h")]
        if "m_change_t" in series.columns:
            cols.append(x_struct([
                h52(m) if m == "m_tenure_owner" and m in series.columns else F.col(m) if m in series.columns
                else F.lit(None) for m in onepass.STATE_X]))
        else:
            cols.append(x_struct([]))
        cols.append(F.lit(None).cast("binary").alias("b"))
    return series.select(*cols)


def x_struct(values: Sequence[Column]) -> Column:
    """The per-key pass's ``x`` (:data:`lagscope.analytics.onepass.X_TYPE`) of ``values`` (the
    rest null); null without values."""
    if not values:
        return F.lit(None).cast(_X_SPARK).alias("x")
    padded = [*values, *(F.lit(None) for _ in range(onepass.X_WIDTH - len(values)))]
    return F.struct(*(v.cast("double").alias(f"x{i}") for i, v in enumerate(padded))).alias("x")


_X_SPARK = "struct<" + ",".join(f"x{i}:double" for i in range(onepass.X_WIDTH)) + ">"


def keyed(rows: DataFrame, names: Sequence[str], kind_bits: int) -> DataFrame:
    """``rows`` (``KEY, _kind, …``) hashed, shuffled by the key's hash and sorted by key, kind and
    time: the input of a vectorised pass (``_h``, ``_k``, then ``names``)."""
    h, h2 = F.xxhash64(*KEY), F.hash(*KEY)
    return (rows.select(h.alias("_h"), ((h2.cast("long") + F.lit(2**31)) * (1 << kind_bits) + F.col("_kind")).alias(
        "_k"), *names).repartition("_h").sortWithinPartitions("_h", "_k", "t"))


def key_hashes(rows: DataFrame) -> DataFrame:
    """The distinct keys of ``rows`` with their two hashes (``_h``, ``_h2``: to join the key's
    strings back to a pass's output when only numbers crossed to Python)."""
    return rows.select(*KEY).distinct().select(*KEY, F.xxhash64(*KEY).alias("_h"), F.hash(*KEY).alias("_h2"))


def history_rows(history: DataFrame, kind: int) -> DataFrame:
    """Carried points as kernel rows: t = tc, end = e, committed = ep, rec_t = tp."""
    return history.select(*KEY, F.lit(kind).alias("_kind"), F.col("tc").alias("t"), F.col("ep").alias("committed"),
                          F.col("e").alias("end"), F.lit(None).cast("long").alias("log_start"),
                          F.col("tp").alias("rec_t"))


def method_name() -> Column:
    """``lag_s_code`` as its name in :data:`lagscope.lag.METHODS`."""
    return F.element_at(F.array(*(F.lit(m) for m in METHODS)), F.col("lag_s_code"))


def transform_lag_seconds(series: DataFrame, state: DataFrame | None = None, history: DataFrame | None = None, *,
                          every_sweep: bool = False) -> DataFrame:
    """The minute rows of a prepared series (:func:`lagscope.analytics.series.prepare_series`):
    each key's last fresh sweep of each minute, with the minute's totals and ``lag_s``,
    ``lag_s_lower``, ``lag_s_method``; with ``every_sweep``, every fresh sweep (each with its
    minute's totals), for a sweep-by-sweep view such as the accuracy benchmark's.

    Columns: ``KEY, ts, t, window_start, committed, end, log_start, lag``; ``lag_max``;
    ``minute_end_rise``, ``minute_committed_rise``, ``minute_log_start_rise`` (the rises of the end,
    the committed offset and the log start, each ≥ 0) and ``minute_span_s`` over the intervals
    that end in the minute (those with ``dt > 0``; the first reaches back to the previous minute's
    last sweep, or to ``state``'s row); the lag seconds.

    ``state`` holds the previous step's last row per key (its differences seed the first fresh
    row), ``history`` the points of earlier steps (``KEY, e, tc, tp, ep``, all of the epoch the
    step starts in: :func:`lagscope.analytics.np_state.compact_history`).

    One shuffle by a hash of the key, a sort by key and time, then one vectorised pass per
    chunk of keys (:func:`lagscope.analytics.kernel.lag_seconds_table`, which states the
    definitions); the key's strings stay in Spark (only numbers go to Python) and are joined
    back by the two hashes.
    """
    rows = kernel_rows(series, kernel.SWEEP)
    if state is not None:
        rows = rows.unionByName(kernel_rows(state, kernel.STATE))
    if history is not None:
        rows = rows.unionByName(history_rows(history, kernel.HISTORY))
    inp, keys = keyed(rows, kernel.LAG_SECONDS_IN.names[2:], 2), key_hashes(rows)
    out = inp.mapInArrow(functools.partial(kernel.lag_seconds_batches, every_sweep=every_sweep),
                         from_arrow_schema(kernel.LAG_SECONDS_OUT))
    return out.join(keys, ["_h", "_h2"]).select(
        *KEY, "ts", "t", "window_start", "committed", "end", "log_start", "lag", "lag_max", "minute_end_rise",
        "minute_committed_rise", "minute_log_start_rise", "minute_span_s", "lag_s", "lag_s_lower",
        method_name().alias("lag_s_method"))


def _date_cols(df: DataFrame, ts_col: str) -> DataFrame:
    return df.withColumn("date", F.date_format(F.col(ts_col), "yyyy-MM-dd"))


def transform_lag_trends(rows: DataFrame) -> DataFrame:
    """Minute rows with lag seconds (:func:`transform_lag_seconds`) → ``lag_trends`` (see
    :data:`lagscope.schema.LAG_TRENDS`).

    Per partition and minute: lag at the last sample and its maximum; produce rate
    Σ(Δ end)/Σ(Δt) and consume rate Σ(max(0, Δ committed))/Σ(Δt) over the intervals that end
    in the minute (the first interval reaches back to the previous minute's last sample, so
    minutes chain without gaps); lag seconds at the last sample; catch-up ETA
    lag/(consume − produce) when positive beyond :data:`ETA_NOISE` (0 when caught up); retention headroom
    (committed − log start)/(r − consume) where r, the speed of the log start, is the larger of
    the observed Δ log start/Δt and — once retention has deleted anything (log start > 0) —
    the produce rate, which is what time-based retention deletes at in steady state.
    Topic-level (partition null) and group-level (topic null) rows sum lags and rates and take
    the largest lag seconds and the smallest headroom.
    """
    per = rows.select(
        *KEY, "window_start", F.col("lag").alias("lag_last"), "lag_max",
        F.col("minute_end_rise").alias("_de"), F.col("minute_committed_rise").alias("_dc"),
        F.col("minute_log_start_rise").alias("_dls"), F.col("minute_span_s").alias("_dt"),
        F.col("lag_s").alias("lag_seconds"),
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
    per = _with_eta(per)
    # the topic and group rollups in one aggregation over the partition rows (grouping sets:
    # ``per`` is read once for both levels)
    levels = [[*KEY[:3], "window_start"], [*KEY[:2], "window_start"]]
    rolled = _with_eta(per.groupingSets(levels, *KEY, "window_start").agg(
        F.sum("lag_last").alias("lag_last"),
        F.sum("lag_max").alias("lag_max"),
        F.sum("produce_rate").alias("produce_rate"),
        F.sum("consume_rate").alias("consume_rate"),
        F.max("lag_seconds").alias("lag_seconds"),
        F.max_by("lag_seconds_is_lower_bound", "lag_seconds").alias("lag_seconds_is_lower_bound"),
        F.max_by("_method", "lag_seconds").alias("_method"),
        F.min("retention_headroom_s").alias("retention_headroom_s"),
    ))
    cols = [*(c for c in TREND_COLUMNS if c != "lag_seconds_method"), "_method"]
    allrows = per.select(*cols).unionByName(rolled.select(*cols))
    method = F.element_at(F.array(*(F.lit(m) for m in METHODS)), F.col("_method"))
    return _date_cols(allrows.withColumn("lag_seconds_method", method).select(*TREND_COLUMNS), "window_start")


def _method_code() -> Column:
    """``lag_s_method`` as its 1-based code in :data:`lagscope.lag.METHODS` while
    aggregating: ``max_by`` over a string keeps its aggregation buffer off the fast hash
    aggregate (a sort per aggregation), an int does not (the rollups take the method of the row
    with the largest lag seconds)."""
    return F.array_position(F.array(*(F.lit(m) for m in METHODS)), F.col("lag_s_method")).cast("int")

TREND_COLUMNS = ["cluster", "window_start", "group_id", "topic", "partition", "lag_last", "lag_max",
                 "produce_rate", "consume_rate", "lag_seconds", "lag_seconds_is_lower_bound",
                 "lag_seconds_method", "catchup_eta_s", "retention_headroom_s"]


#: a net rate (consume − produce) within this fraction of the rates is no catch-up: equal rates
#: summed over partitions in another order differ in their last bits, and a steady lag would get
#: an ETA of 10¹⁵ s from that noise
ETA_NOISE = 1e-9


def _with_eta(df: DataFrame) -> DataFrame:
    net = F.col("consume_rate") - F.col("produce_rate")
    scale = F.greatest(F.abs(F.col("consume_rate")), F.abs(F.col("produce_rate")))
    return df.withColumn(
        "catchup_eta_s",
        F.when(F.col("lag_last") == 0, F.lit(0.0))
        .when((F.col("lag_last") > 0) & (net > scale * ETA_NOISE), F.col("lag_last") / net),
    )
