"""The Spark side of the per-key pass (:mod:`lagscope.analytics.onepass`): every row a step has
per partition (its fresh sweeps, carried state row, end-offset points, Burrow entries, gap
samples and last minute, and its commits) in one frame, one shuffle by a hash of the key, one
sort, one vectorised pass per chunk of keys; then one selector per output.

Each column crosses to Python and back with a conversion per row, so the input is narrow: the
key's own columns (cheaper through the pass than a second scan of the lake to join them back)
and a sweep's numbers; the other row kinds put their values in those (see
:mod:`lagscope.analytics.onepass`); an owner's member id is found by its hash.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812
from pyspark.sql.pandas.types import from_arrow_schema

from lagscope.analytics import onepass
from lagscope.analytics.findings import ANOMALY_COLUMNS, finish
from lagscope.analytics.series import KEY, SERIES_COLUMNS, STATE_MARKERS
from lagscope.analytics.trends import history_rows, kernel_rows, keyed, method_name, x_struct

__all__ = [
    "anomaly_rows",
    "entries_state",
    "gaps_state",
    "history_state",
    "minute_rows",
    "minutes_state",
    "pass_input",
    "series_state",
    "status_rows",
    "transform_pass",
]

def _secs(c: Column) -> Column:
    return F.unix_micros(c).cast("double") / F.lit(1e6)


def _ts(seconds: Column) -> Column:
    return F.timestamp_micros((seconds * F.lit(1e6)).cast("long"))


def pass_input(series: DataFrame, state: dict[str, DataFrame], *, commits: DataFrame | None = None) -> DataFrame:
    """The pass's input (:data:`lagscope.analytics.onepass.PASS_IN`, shuffled by key and sorted;
    see :func:`transform_pass`): each row kind's values in the sweep's columns, as
    :mod:`lagscope.analytics.onepass` lays them out."""
    rows = kernel_rows(series, onepass.SWEEP, pass_columns=True)
    if state.get("series") is not None:
        rows = rows.unionByName(kernel_rows(state["series"], onepass.STATE, pass_columns=True))
    parts: list[DataFrame] = []
    if state.get("history") is not None:
        parts.append(history_rows(state["history"], onepass.HISTORY))
    if state.get("entries") is not None:
        e = state["entries"]
        if "b" in e.columns:  # packed, one row per key
            parts.append(e.select(*KEY, F.lit(onepass.ENTRIES).alias("_kind"), F.lit(0.0).alias("t"), "b"))
        else:  # a state written before: one row per entry (before ``rebased``: none rebased)
            rebased = F.col("rebased") if "rebased" in e.columns else F.lit(False)
            parts.append(e.select(*KEY, F.lit(onepass.ENTRY).alias("_kind"), "t", F.col("c").alias("committed"),
                                  F.col("lag").alias("end"), rebased.cast("long").alias("log_start")))
    if commits is not None:
        parts.append(commits.select(*KEY, F.lit(onepass.COMMIT).alias("_kind"), "t",
                                    F.col("offset").alias("committed"), F.col("seq").alias("end")))
    if state.get("gaps") is not None:
        g = state["gaps"]
        if "b" in g.columns:  # packed, one row per key
            parts.append(g.select(*KEY, F.lit(onepass.GAPS).alias("_kind"), F.lit(0.0).alias("t"), "b"))
        elif "gap_s" in g.columns:  # a state written with one row per sample
            parts.append(g.select(*KEY, F.lit(onepass.GAP).alias("_kind"), "t", F.col("gap_s").alias("rec_t")))
        else:  # a state written while the samples were one array per key
            parts.append(g.select(*KEY, F.explode("samples").alias("_x")).select(
                *KEY, F.lit(onepass.GAP).alias("_kind"), F.col("_x.t").alias("t"), F.col("_x.gap_s").alias("rec_t")))
    if state.get("minutes") is not None:
        m = state["minutes"]
        x = {"produce_rate": F.col("produce_rate"), "consume_rate": F.col("consume_rate"),
             "m_g_start": _secs(F.col("m_g_start")), "m_g_lag0": F.col("m_g_lag0"), "m_g_n": F.col("m_g_n")}
        parts.append(m.select(*KEY, F.lit(onepass.MINUTE).alias("_kind"), _secs(F.col("window_start")).alias("t"),
                              F.col("lag_last").alias("end"), x_struct([x[c] for c in onepass.MINUTE_X])))
    for part in parts:
        rows = rows.unionByName(part, allowMissingColumns=True)
    return keyed(rows, onepass.PASS_IN.names[2:], onepass.KIND_BITS)


def transform_pass(series: DataFrame, state: dict[str, DataFrame], *, params: onepass.PassParams,
                   commits: DataFrame | None = None) -> DataFrame:
    """The pass over a prepared series (:func:`lagscope.analytics.series.prepare_series`), the
    carried ``state`` parts (``series``, ``history``, ``entries``, ``gaps``, ``minutes``: whichever
    exist) and the commit records (:func:`lagscope.analytics.findings.commit_records`, with
    ``params.commit_stream``): one shuffle by a hash of the key, one sort, one vectorised pass
    per chunk of whole keys. Returns ``_o``, ``KEY`` and the output columns
    (:data:`lagscope.analytics.onepass.PASS_OUT`, ``lag_s_method`` by name); store it once, then
    select each part with this module's selectors."""
    out = pass_input(series, state, commits=commits).mapInArrow(
        functools.partial(onepass.pass_batches, params=params), from_arrow_schema(onepass.PASS_OUT))
    return out.select("_o", *KEY, *(c for c in onepass.PASS_OUT.names if c not in (
        "_o", *KEY, "_h", "_h2", "lag_s_code")), method_name().alias("lag_s_method"))


def _part(passed: DataFrame, o: int) -> DataFrame:
    return passed.where(F.col("_o") == o)


def minute_rows(passed: DataFrame) -> DataFrame:
    """Each key's minute rows (its last fresh sweep of each minute): the columns
    :func:`lagscope.analytics.trends.transform_lag_seconds` returns, and the partition's status
    at that sweep (``burrow_status``, ``status``, ``reason``)."""
    return _part(passed, onepass.OUT_MINUTE).select(
        *KEY, "ts", "t", "window_start", "committed", "end", "log_start", "lag", "lag_max", "m_de", "m_dc", "m_dls",
        "m_dt", "lag_s", "lag_s_lower", "lag_s_method", "burrow_status", "status", "reason")


def status_rows(passed: DataFrame) -> DataFrame:
    """The partition rows of the ``status`` table (no ``date``): each minute row's evaluation."""
    return _part(passed, onepass.OUT_MINUTE).select(
        "cluster", F.col("ts").alias("eval_ts"), "group_id", "topic", "partition", "burrow_status", "status",
        "reason", "lag", F.col("lag_s").alias("lag_seconds"))


def anomaly_rows(passed: DataFrame) -> DataFrame:
    """The per-partition anomalies (:data:`lagscope.analytics.findings.ANOMALY_COLUMNS`)."""
    return finish(_part(passed, onepass.OUT_ANOMALY).select(
        *KEY, "kind", _ts(F.col("start_t")).alias("start_ts"), _ts(F.col("end_t")).alias("end_ts"), "severity",
        "magnitude", "unit", "detail")).select(*ANOMALY_COLUMNS)


def series_state(passed: DataFrame, owners: DataFrame) -> DataFrame:
    """Each key's last row with its markers (the next step's ``series`` state); ``owners``:
    ``cluster, group_id, owner`` of the step's rows (the member ids, found by their hashes)."""
    ids = owners.where(F.col("owner").isNotNull()).select("cluster", "group_id", "owner").distinct().withColumn(
        "owner_h", F.xxhash64("owner"))
    last = _part(passed, onepass.OUT_SERIES).join(F.broadcast(ids), ["cluster", "group_id", "owner_h"], "left")
    cols = {c: F.col(c) for c in SERIES_COLUMNS}
    cols["group_state"] = F.lit(None).cast("string")
    return last.select(*(v.alias(k) for k, v in cols.items()),
                       *(F.col(m).cast(t).alias(m) for m, t in STATE_MARKERS.items()), F.lit(True).alias("is_state"))


def history_state(passed: DataFrame) -> DataFrame:
    """The end-offset points the next step needs (``KEY, e, tc, tp, ep``)."""
    return _part(passed, onepass.OUT_HISTORY).select(*KEY, F.col("end").alias("e"), F.col("t").alias("tc"), "tp",
                                                      "ep")


def entries_state(passed: DataFrame) -> DataFrame:
    """The Burrow entries the next step carries: per key one row, its entries packed in ``b``
    (:data:`lagscope.analytics.onepass.ENTRY_B`)."""
    return _part(passed, onepass.OUT_ENTRY).select(*KEY, "b")


def gaps_state(passed: DataFrame) -> DataFrame:
    """Each key's learned commit-gap samples: per key one row, packed in ``b``
    (:data:`lagscope.analytics.onepass.GAP_B`)."""
    return _part(passed, onepass.OUT_GAP).select(*KEY, "b")


def minutes_state(passed: DataFrame) -> DataFrame:
    """Each key's last partition minute and its open lag-growth run (the next step's ``minutes``)."""
    return _part(passed, onepass.OUT_MINUTE_STATE).select(
        *KEY, "window_start", F.col("lag").alias("lag_last"), "produce_rate", "consume_rate",
        _ts(F.col("m_g_start")).alias("m_g_start"), "m_g_lag0", "m_g_n", F.lit(True).alias("is_state"))
