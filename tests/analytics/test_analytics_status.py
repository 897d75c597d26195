"""Burrow-compatible status beside lagscope's own, table-driven (one group per case).

Burrow window in these tests: 5 entries. Sweeps every 10 s in minute 0, so each case is
evaluated once, at its last sweep (t=50). The evaluations run as the job runs them: through
the per-key pass (lagscope.analytics.step, as each Spark task runs it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from analytics_builders import at, cases_df, offsets_rows
from passes import step
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.testing import assertDataFrameEqual
from status_cases import CASES

from lagscope.analytics import np_status
from lagscope.config import AnalyticsRulesConfig

pytestmark = pytest.mark.spark

T = range(0, 51, 10)


def _status(offsets: DataFrame) -> DataFrame:
    """The status table (partition and group rows) of one step over ``offsets``."""
    return step(offsets, AnalyticsRulesConfig(burrow_window=5, stall_after_s=30, stop_after_s=30, warn_lag_s=30)).status


def test_status_rules(spark: SparkSession) -> None:
    df = cases_df(spark, [offsets_rows(rows, group=name) for name, rows, _ in CASES])
    out = _status(df)
    got = out.where(F.col("partition").isNotNull()).select("group_id", "eval_ts", "burrow_status", "status")
    expected = spark.createDataFrame([(name, at(50), *exp) for name, _, exp in CASES],
                                     "group_id string, eval_ts timestamp, burrow_status string, status string")
    assertDataFrameEqual(got, expected)


def test_group_status_is_the_worst_partition(spark: SparkSession) -> None:
    # partition 0 stalled (its owner m1 makes no progress anywhere), partition 1 caught up (m2):
    # the group is STALL for lagscope and ERR for Burrow (which counts anything worse than ERR as
    # ERR); lag sums 900 + 0
    stalled = offsets_rows([(t, 100, 1000, 0, "m1") for t in T], partition=0)
    fine = offsets_rows([(t, 10 * t, 10 * t, 0, "m2") for t in T], partition=1)
    out = _status(cases_df(spark, [stalled, fine]))
    got = out.where(F.col("partition").isNull()).select("burrow_status", "status", "lag")
    assertDataFrameEqual(got, spark.createDataFrame([("ERR", "STALL", 900)],
                                                    "burrow_status string, status string, lag long"))


def test_group_status_is_lagscopes_worst_partition(spark: SparkSession) -> None:
    # lagscope's own statuses, worst first as the dashboards and alerts rank them: ERR, STOP,
    # STALL (critical), REWIND, WARN (warning), OK, IDLE. One group per pair of partitions: lost
    # messages (ERR) outrank a stall; a partition nobody owns (STOP) outranks one whose owner is
    # stuck (STALL); a stall outranks a rewind. Burrow's group row is ERR for all three. The
    # stalled partition's owner (m2) owns nothing else: a stall, not a starved partition (whose
    # owner progresses on its other partitions, test_starved.py)
    def pair(group: str, p0: list[tuple[Any, ...]], p1: list[tuple[Any, ...]]) -> list[list[dict[str, Any]]]:
        return [offsets_rows(p0, group=group, partition=0), offsets_rows(p1, group=group, partition=1)]

    stalled = [(t, 100, 1000, 0, "m2") for t in T]
    lost = [(t, 100, 1000, 200, None) for t in T]  # below the log start, nobody reading it
    stopped = [(t, min(t, 20), 1000, 0, "m1" if t <= 20 else None) for t in T]
    rewound = [(t, c, 1000, 0, "m1") for t, c in zip(T, (100, 200, 300, 250, 350, 450), strict=True)]
    out = _status(cases_df(spark, [
        *pair("err-and-stall", lost, stalled), *pair("stop-and-stall", stopped, stalled),
        *pair("rewind-and-stall", rewound, stalled)]))
    got = out.where(F.col("partition").isNull()).select("group_id", "burrow_status", "status")
    assertDataFrameEqual(got, spark.createDataFrame(
        [("err-and-stall", "ERR", "ERR"), ("stop-and-stall", "ERR", "STOP"), ("rewind-and-stall", "ERR", "STALL")],
        "group_id string, burrow_status string, status string"))


def _burrow_window(entries: list[tuple[float, int, int | None]], j: int, n: int) -> dict[str, Any]:
    """Burrow's window ending at entry ``j`` (0-based), straight from its definition."""
    win = entries[max(0, j - n + 1): j + 1]
    # a pair's flag sits on its second entry; the window's pairs end at its entries after the
    # first (n = 1: the entry's own pair with the one before)
    second = range(max(1, j - max(n - 2, 0)), j + 1)
    pairs = [(entries[k - 1], entries[k]) for k in second]
    return {
        "last_t": entries[j][0], "first_t": win[0][0], "zero_lag": any(e[2] == 0 for e in win),
        "first_lag": win[0][2], "stalled": min(e[1] for e in win) == max(e[1] for e in win),
        "rewound": any(b[1] < a[1] for a, b in pairs),
        "lag_decreased": any(a[2] is not None and b[2] is not None and b[2] < a[2] for a, b in pairs),
    }


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_window_statistics_follow_burrows_definition(n: int) -> None:
    """The linear-time window statistics equal Burrow's sliding-window definition on random
    entries (repeats, rewinds, zero and missing lags, keys shorter and longer than a window)."""
    import random

    rng = random.Random(n)
    series: dict[int, list[tuple[float, int, int | None]]] = {}
    for part in range(6):
        c, entries = 100, []
        for i in range(rng.randint(1, 14)):
            c += rng.choice([0, 0, 5, -3, 10])
            entries.append((float(i * 10), c, rng.choice([0, 1, 4, 4, 9, None])))
        series[part] = entries
    flat = [(part, t, c, lag) for part, es in series.items() for t, c, lag in es]
    e = np_status.Entries(
        key=np.array([r[0] for r in flat], np.int64), t=np.array([r[1] for r in flat]),
        c=np.array([r[2] for r in flat], np.int64), lag=np.array([r[3] or 0 for r in flat], np.int64),
        lag_ok=np.array([r[3] is not None for r in flat]), rebased=np.zeros(len(flat), bool),
        is_state=np.zeros(len(flat), bool))
    w = np_status._window_stats(e, n)
    got = {(int(w.key[i]), float(w.last_t[i])): {
        "last_t": float(w.last_t[i]), "first_t": float(w.first_t[i]), "zero_lag": bool(w.zero_lag[i]),
        "first_lag": int(w.first_lag[i]) if w.first_lag_ok[i] else None, "stalled": bool(w.stalled[i]),
        "rewound": bool(w.rewound[i]), "lag_decreased": bool(w.lag_decreased[i]),
        "rewound_own": bool(w.rewound_own[i])} for i in range(len(w.key))}

    def last_in_minute(es: list[tuple[float, int, int | None]], j: int) -> bool:
        return j == len(es) - 1 or es[j + 1][0] // 60 != es[j][0] // 60

    # the windows of the entries an evaluation can take (each minute's last), and only those
    # (without a drop of the end, lagscope's own rewind flag is Burrow's)
    expected = {(part, es[j][0]): {**(bw := _burrow_window(es, j, n)), "rewound_own": bw["rewound"]}
                for part, es in series.items() for j in range(len(es)) if last_in_minute(es, j)}
    assert got == expected
