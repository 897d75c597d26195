"""Lag in seconds and per-minute lag trends, with hand-computed expectations.

Each table's cases run as one Spark job (one group per case) and are compared at once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from analytics_builders import at, cases_df, members_df, members_rows, offsets_df, offsets_rows
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.testing import assertDataFrameEqual
from spark_series import prepare_series
from spark_trends import transform_lag_seconds, transform_lag_trends
from stepping import StepResult, run_step

from lagscope.config import AnalyticsConfig

pytestmark = pytest.mark.spark

# (case, rows (t, committed, end[, log_start]), extra columns, expected at the last sweep:
#  (lag seconds, is lower bound, method))
LAG_SECONDS_CASES: list[tuple[str, list[tuple[Any, ...]], dict[str, Any], tuple[Any, ...]]] = [
    # end 200→300 between t=10 and t=20; offset 250 is the 51st of those 100 messages:
    # written at 10 + 50.5/100·10 = 15.05 s → 20 − 15.05 = 4.95 s behind
    ("interpolated", [(0, 100, 100), (10, 150, 200), (20, 250, 300)], {}, (4.95, False, "interpolated")),
    # caught up on an idle topic: 0 s, not the time since the last message
    ("idle-caught-up", [(0, 100, 100), (30, 100, 100), (60, 100, 100)], {}, (0.0, False, "zero")),
    # a burst after a long idle spell: message 100 arrived between t=50 and t=60, so it is
    # ≈ 9.5 s old (50 + 0.5/10·10 = 50.5) — the idle minute before it adds nothing (no jitter)
    ("burst-after-idle", [(0, 100, 100), (25, 100, 100), (50, 100, 100), (60, 100, 110)], {},
     (9.5, False, "interpolated")),
    # offset 100 was written before the first sweep (end already 1000 at t=0): never an
    # extrapolation, only "at least 10 s" (t − the earliest known time)
    ("before-history", [(0, 100, 1000), (10, 100, 1010)], {}, (10.0, True, "interpolated")),
    # the collector fetched the produce time of the record at the committed offset (t=3): exact
    ("exact", [(0, 100, 100), (10, 150, 200), (20, 250, 300)], {"committed_record_ts": at(3)},
     (17.0, False, "exact")),
    # the topic was deleted and re-created between t=20 and t=30 (end 300 → 0; the group
    # restarts at 0); offset 20 is the 20.5th of the 150 messages written in (30, 40] →
    # 30 + 20.5/150·10 = 31.367 → 8.633 s; the old topic's rises (offsets 100…300, t=0…20) say
    # nothing about the new topic's messages
    ("end-went-down", [(0, 100, 100), (10, 200, 200), (20, 300, 300), (30, 0, 0), (40, 20, 150)], {},
     (8.633, False, "interpolated")),
]


def test_lag_seconds(spark: SparkSession) -> None:
    df = cases_df(spark, [offsets_rows(rows, group=name, **extra) for name, rows, extra, _ in LAG_SECONDS_CASES])
    out = transform_lag_seconds(prepare_series(df))
    last = {name: at(max(r[0] for r in rows)) for name, rows, _, _ in LAG_SECONDS_CASES}
    got = out.join(spark.createDataFrame(list(last.items()), "group_id string, ts timestamp"), ["group_id", "ts"])
    got = got.select("group_id", F.round("lag_s", 3).alias("lag_s"), "lag_s_lower", "lag_s_method")
    expected = spark.createDataFrame([(name, *exp) for name, _, _, exp in LAG_SECONDS_CASES],
                                     "group_id string, lag_s double, lag_s_lower boolean, lag_s_method string")
    assertDataFrameEqual(got, expected)


def test_read_committed_group_reads_to_the_last_stable_offset(spark: SparkSession) -> None:
    # hw 300 ends in a commit marker; lso 290 = committed: caught up for a read_committed group
    # (listed, or measured so by the collector: lag_basis 'lso'), 10 behind otherwise
    df = offsets_df(spark, [(0, 290, 300, 0, "m1", 290)])
    plain = prepare_series(df).select("lag")
    listed = prepare_series(df, read_committed_groups=["g"]).select("lag")
    seen = prepare_series(offsets_df(spark, [(0, 290, 300, 0, "m1", 290)], lag_basis="lso")).select("lag")
    # the groups are regexes matching the whole id, as in the clusters' read_committed_groups:
    # "x|g" matches "g"; "g.+" does not (it needs more than "g"), nor does a bare prefix
    by_regex = prepare_series(df, read_committed_groups=["other", "x|g"]).select("lag")
    no_match = prepare_series(df, read_committed_groups=["g.+", "^"]).select("lag")
    assertDataFrameEqual(plain.unionAll(listed).unionAll(seen).unionAll(by_regex).unionAll(no_match),
                         spark.createDataFrame([(10,), (0,), (0,), (0,), (10,)], "lag long"))


_TREND_SCHEMA = ("group_id string, window_start timestamp, lag_last long, lag_max long, produce_rate double, "
                 "consume_rate double, catchup_eta_s double, retention_headroom_s double")

# (case, rows (t, committed, end, log_start), expected per minute:
#  (window_start, lag_last, lag_max, produce_rate, consume_rate, catchup_eta_s, retention_headroom_s))
TREND_CASES: list[tuple[str, list[tuple[Any, ...]], list[tuple[Any, ...]]]] = [
    # falling behind: +300 produced and +100 consumed per 30 s → 10/s vs 3.333/s; the lag at
    # the minute's last sweep 200, then 600; no ETA (not catching up); no retention pressure
    # (log start 0: nothing ever deleted)
    ("falling-behind", [(0, 100, 100, 0), (30, 200, 400, 0), (60, 300, 700, 0), (90, 400, 1000, 0)], [
        (at(0), 200, 200, 10.0, 3.333, None, None),
        (at(60), 600, 600, 10.0, 3.333, None, None)]),
    # catching up on an idle topic: 300 consumed in 30 s, nothing produced → ETA 600/10 = 60 s
    ("catching-up", [(0, 100, 1000, 50), (30, 400, 1000, 50)], [
        (at(0), 600, 900, 0.0, 10.0, 60.0, None)]),
    # retention closing in: log start 0 → 150 in 30 s (5/s), consumer frozen at 200:
    # (200 − 150)/5 = 10 s until the committed offset falls off the log
    ("retention-headroom", [(0, 200, 1000, 0), (30, 200, 1000, 150)], [
        (at(0), 800, 800, 0.0, 0.0, None, 10.0)]),
    # already below the log start: no headroom left (0 s)
    ("retention-lost", [(0, 100, 1000, 0), (30, 100, 1000, 150)], [
        (at(0), 900, 900, 0.0, 0.0, None, 0.0)]),
]


def test_lag_trends_partition_rows(spark: SparkSession) -> None:
    df = cases_df(spark, [offsets_rows(rows, group=name) for name, rows, _ in TREND_CASES])
    out = transform_lag_trends(transform_lag_seconds(prepare_series(df)))
    got = out.where(F.col("partition").isNotNull()).select(
        "group_id", "window_start", "lag_last", "lag_max", F.round("produce_rate", 3).alias("produce_rate"),
        F.round("consume_rate", 3).alias("consume_rate"), F.round("catchup_eta_s", 3).alias("catchup_eta_s"),
        F.round("retention_headroom_s", 3).alias("retention_headroom_s"))
    expected = spark.createDataFrame([(name, *e) for name, _, exp in TREND_CASES for e in exp], _TREND_SCHEMA)
    assertDataFrameEqual(got, expected)


def test_lag_trends_lag_seconds_and_rollups(spark: SparkSession) -> None:
    # partition 0 falls behind (lag seconds at t=30: offset 200 is the 100.5th of 300 messages
    # written in (0, 30] → 10.05 → 19.95 s; at t=90 offset 400 is the 0.5th of those written in
    # (30, 60] → 30.05 → 59.95 s); partition 1 lags 30 at the same minutes' ends.
    # The topic and group rows sum lags (200+30, 600+30) and rates, and keep the larger lag seconds
    p0 = offsets_rows([(0, 100, 100), (30, 200, 400), (60, 300, 700), (90, 400, 1000)], partition=0)
    p1 = offsets_rows([(0, 70, 100), (30, 80, 110), (60, 90, 120), (90, 100, 130)], partition=1)
    out = transform_lag_trends(transform_lag_seconds(prepare_series(cases_df(spark, [p0, p1]))))
    got = out.select("topic", "partition", "window_start", "lag_last", F.round("lag_seconds", 2).alias("lag_s"),
                     F.round("produce_rate", 3).alias("produce_rate"))
    expected = spark.createDataFrame([
        ("t", 0, at(0), 200, 19.95, 10.0), ("t", 0, at(60), 600, 59.95, 10.0),
        # partition 1 at t=30: offset 80 lies below the end seen at the first sweep (100) →
        # "at least 30 s"; at t=90: offset 100 is the 0.5th of the 10 messages written in
        # (0, 30] (end 100→110) → 1.5 → 88.5 s
        ("t", 1, at(0), 30, 30.0, 0.333), ("t", 1, at(60), 30, 88.5, 0.333),
        ("t", None, at(0), 230, 30.0, 10.333), ("t", None, at(60), 630, 88.5, 10.333),
        (None, None, at(0), 230, 30.0, 10.333), (None, None, at(60), 630, 88.5, 10.333),
    ], "topic string, partition int, window_start timestamp, lag_last long, lag_s double, produce_rate double")
    assertDataFrameEqual(got, expected)


def test_minute_rows_are_each_minutes_last_sweep_with_the_minutes_totals(spark: SparkSession) -> None:
    # sweeps at 0, 20, 40 (minute 0), 70, 100 (minute 1), 130 (minute 2, the series' last):
    # each minute is represented by its last sweep; its totals cover the intervals ending in
    # it (minute 1: 40→70 and 70→100, so Δt 60 s, Δend 60 + 90, Δcommitted 10 + 60)
    rows = [(0, 100, 100), (20, 110, 130), (40, 150, 150), (70, 160, 210), (100, 220, 300), (130, 300, 300)]
    out = transform_lag_seconds(prepare_series(offsets_df(spark, rows)))
    got = out.select("t", "window_start", "lag", "lag_max", "minute_end_rise", "minute_committed_rise",
                     "minute_span_s")
    expected = spark.createDataFrame([
        (at(40).timestamp(), at(0), 0, 20, 50, 50, 40.0),
        (at(100).timestamp(), at(60), 80, 80, 150, 70, 60.0),
        (at(130).timestamp(), at(120), 0, 0, 0, 80, 30.0),
    ], "t double, window_start timestamp, lag long, lag_max long, minute_end_rise long, minute_committed_rise long, "
       "minute_span_s double")
    assertDataFrameEqual(got, expected)


def test_lag_seconds_every_sweep_agrees_with_the_minute_rows(spark: SparkSession) -> None:
    # the same lookup either way: every sweep gets its lag seconds with ``every_sweep``, and the
    # minute rows' values are the same rows' values
    rows = [(0, 100, 100), (20, 110, 130), (40, 150, 200), (70, 160, 260), (100, 220, 300), (130, 250, 330)]
    series = prepare_series(offsets_df(spark, rows))
    every = transform_lag_seconds(series, every_sweep=True).select("t", "lag_s", "lag_s_method")
    minutes = transform_lag_seconds(series).select("t", "lag_s", "lag_s_method")
    assert every.count() == len(rows)
    assert every.where(F.col("lag_s").isNull()).count() == 0
    assertDataFrameEqual(minutes, every.join(minutes.select("t"), "t"))
    assert minutes.count() == 3  # the sweeps at 40, 100 and 130 s


def test_lag_seconds_after_the_end_went_down_across_steps(spark: SparkSession) -> None:
    # the topic is re-created between t=20 and t=30 (end 300 → 0, the group restarts at 0);
    # minute 1's sweep (t=70) has offset 20 of the 150 messages written in (30, 70]:
    # 30 + 20.5/150·40 = 35.467 → 34.533 s, in one batch step and in two incremental steps (the
    # second seeded by the first's state: its carried end-offset history must not hold the old
    # topic's rises either)
    rows = [(0, 100, 100), (10, 200, 200), (20, 300, 300), (30, 0, 0), (70, 20, 150)]
    settings = AnalyticsConfig()

    def step(part: list[tuple[int, int, int]], state: dict[str, DataFrame] | None = None) -> StepResult:
        members = members_df(spark, [members_rows([(t, "Stable", 1, [("m1", None, [0])]) for t, *_ in part])])
        return run_step(offsets_df(spark, part), members, settings=settings, state=state, as_of=at(120))

    def minute_1(tables: dict[str, DataFrame]) -> list[tuple[float, bool]]:
        got = tables["lag_trends"].where(F.col("partition").isNotNull() & (F.col("window_start") == at(60)))
        return [(round(r["lag_seconds"], 3), r["lag_seconds_is_lower_bound"]) for r in got.collect()]

    batch = step(rows)
    first = step(rows[:4])
    second = step(rows[4:], first.state)
    try:
        assert minute_1(batch.tables) == [(34.533, False)]
        assert minute_1(second.tables) == [(34.533, False)]
    finally:
        for s in (batch, first, second):
            s.release()


def test_catch_up_eta_needs_a_net_rate_beyond_the_noise_of_summed_rates(spark: SparkSession) -> None:
    from lagscope.analytics import trends

    # (lag, produce rate, consume rate) → ETA: equal rates summed in another order differ in
    # their last bits (0.1 + 0.2 ≠ 0.3), which is no catch-up, not an ETA of 10¹⁵ s
    rows = [(1000, 0.3, 0.1 + 0.2, None), (1000, 100.0, 100.0 + 2.5e-14, None),
            (1000, 100.0, 102.0, 500.0), (0, 100.0, 100.0, 0.0), (500, 3.0, 1.0, None), (500, None, 1.0, None),
            (1000, 0.0, 1e-6, 1e9)]
    assert 0.1 + 0.2 > 0.3  # the noise is there
    nan = float("nan")
    got = trends._eta(np.array([r[0] for r in rows], float),
                     np.array([nan if r[1] is None else r[1] for r in rows]), np.array([r[2] for r in rows]))
    want = np.array([nan if r[3] is None else r[3] for r in rows])
    np.testing.assert_allclose(got, want, rtol=1e-12)
