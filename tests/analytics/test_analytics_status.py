"""Burrow-compatible status beside lagscope's own, table-driven (one group per case).

Burrow window in these tests: 5 entries. Sweeps every 10 s in minute 0, so each case is
evaluated once, at its last sweep (t=50)."""

from __future__ import annotations

from typing import Any

import pytest
from analytics_builders import at, cases_df, offsets_rows
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.testing import assertDataFrameEqual

from lagscope.analytics import status
from lagscope.analytics.series import enrich_series, prepare_series
from lagscope.analytics.trends import transform_lag_seconds

pytestmark = pytest.mark.spark

T = range(0, 51, 10)

# (case, rows (t, committed, end, log_start, owner), expected (burrow_status, status))
CASES: list[tuple[str, list[tuple[Any, ...]], tuple[str, str]]] = [
    # caught up on an active topic: both OK
    ("caught-up", [(t, 10 * t, 10 * t, 0, "m1") for t in T], ("OK", "OK")),
    # 300 → 250 inside the window (Burrow rule 2): both REWIND
    ("rewind", [(t, c, 1000, 0, "m1") for t, c in zip(T, (100, 200, 300, 250, 350, 450), strict=True)],
     ("REWIND", "REWIND")),
    # commits until t=20, then the consumer is gone (no owner, no entries): Burrow's rule 3
    # (50 − 20 > 20 − 0) and lagscope's (no owner, 30 s without progress with lag): STOP
    ("stopped", [(t, min(t, 20), 1000, 0, "m1" if t <= 20 else None) for t in T], ("STOP", "STOP")),
    # owner assigned, offset frozen with lag for 50 s: STALL for both
    ("stalled", [(t, 100, 1000, 0, "m1") for t in T], ("STALL", "STALL")),
    # far behind and falling further (lag 900 → 1650, never decreasing; lag ≥ 50 s): WARN
    ("falling-behind", [(t, 100 + 5 * t, 1000 + 20 * t, 0, "m1") for t in T], ("WARN", "WARN")),
    # Burrow's false alarm: a steady lag of 3 never decreases → WARN; it is 0.25 s of lag:
    # lagscope says OK
    ("steady-small-lag", [(t, 10 * t + 97, 10 * t + 100, 0, "m1") for t in T], ("WARN", "OK")),
    # idle topic, caught up, consumer gone: Burrow OK (lag 0); lagscope IDLE, not an alarm
    ("idle", [(t, 500, 500, 0, None) for t in T], ("OK", "IDLE")),
    # committed below the log start: lagscope ERR (messages lost); Burrow only sees a stall
    ("retention", [(t, 100, 1000, 200, "m1") for t in T], ("STALL", "ERR")),
]


def test_status_rules(spark: SparkSession) -> None:
    df = cases_df(spark, [offsets_rows(rows, group=name) for name, rows, _ in CASES])
    enriched = enrich_series(prepare_series(df))
    rows = transform_lag_seconds(enriched)
    out = status.transform_status(rows, status.burrow_entries(enriched), n=5, stall_after_s=30, stop_after_s=30,
                                  warn_lag_s=30)
    got = out.where(F.col("partition").isNotNull()).select("group_id", "eval_ts", "burrow_status", "status")
    expected = spark.createDataFrame([(name, at(50), *exp) for name, _, exp in CASES],
                                     "group_id string, eval_ts timestamp, burrow_status string, status string")
    assertDataFrameEqual(got, expected)


def test_group_status_is_the_worst_partition(spark: SparkSession) -> None:
    # partition 0 stalled, partition 1 caught up: the group is STALL for lagscope and ERR for
    # Burrow (which counts anything worse than ERR as ERR); lag sums 900 + 0
    stalled = offsets_rows([(t, 100, 1000, 0, "m1") for t in T], partition=0)
    fine = offsets_rows([(t, 10 * t, 10 * t, 0, "m1") for t in T], partition=1)
    enriched = enrich_series(prepare_series(cases_df(spark, [stalled, fine])))
    out = status.transform_status(transform_lag_seconds(enriched), status.burrow_entries(enriched), n=5,
                                  stall_after_s=30, stop_after_s=30, warn_lag_s=30)
    got = out.where(F.col("partition").isNull()).select("burrow_status", "status", "lag")
    assertDataFrameEqual(got, spark.createDataFrame([("ERR", "STALL", 900)],
                                                    "burrow_status string, status string, lag long"))
