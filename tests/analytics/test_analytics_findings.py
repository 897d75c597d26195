"""Anomaly rules, table-driven with hand-computed expectations (one group per case, one Spark
job for the whole table), run as the job runs them: through the per-key pass
(lagscope.analytics.step, as each Spark task runs it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from analytics_builders import at, cases_df, offsets_rows
from passes import Step, step
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.testing import assertDataFrameEqual

from lagscope.analytics import groups, np_gaps, np_growth
from lagscope.analytics.io import spark_schema
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig

pytestmark = pytest.mark.spark

P = AnalyticsRulesConfig(stall_after_s=30, stop_after_s=30, skip_factor=5, gap_k=6,
                         gap_mad_floor_s=1, gap_min_s=10, gap_min_samples=5, growth_min_minutes=3)


def _stall_rows(owner_after: str | None) -> list[tuple[Any, ...]]:
    # end = t (10 per sweep); committed follows until t=30, freezes at 30 for t=40…80 while
    # the end grows, catches up at t=90
    rows: list[tuple[Any, ...]] = []
    for t in range(0, 101, 10):
        c = t if t <= 30 or t >= 90 else 30
        owner = "m1" if t <= 30 or t >= 90 else owner_after
        rows.append((t, c, t, 0, owner))
    return rows


def _gap_rows(every: int) -> list[tuple[Any, ...]]:
    # sweeps every 5 s, end = 2t + 100 (always ahead); the committed offset moves every
    # `every` seconds (c = 2·t_change), except one 25 s gap between t=100 and t=125
    changes = [*range(0, 101, every), *range(125, 201, every)]
    rows: list[tuple[Any, ...]] = []
    for t in range(0, 201, 5):
        tc = max(x for x in changes if x <= t)
        rows.append((t, 2 * tc, 2 * t + 100, 0))
    return rows


# (case, partition → rows (t, committed, end, log_start[, owner]),
#  expected anomalies: (kind, start s, end s or None, magnitude))
CASES: list[tuple[str, dict[int, list[tuple[Any, ...]]], list[tuple[str, int, float, float | None, float]]]] = [
    # committed frozen at 30 from t=40 (first sweep with lag) to t=80, owner still assigned:
    # stalled from 40 (work pending since then) until the commit seen at 90 → 50 s
    ("stall", {0: _stall_rows("m1")}, [("stall", 0, 40, 90, 50.0)]),
    # the same, but nobody owns the partition meanwhile: a stop, not a stall
    ("stop", {0: _stall_rows(None)}, [("stop", 0, 40, 90, 50.0)]),
    # 600 → 400 between t=10 and t=20: 200 messages will be processed twice
    ("rewind", {0: [(0, 500, 1000, 0), (10, 600, 1000, 0), (20, 400, 1000, 0), (30, 500, 1000, 0)]},
     [("rewind", 0, 10, 20, 200.0)]),
    # consuming 100 per 10 s (10/s) with a growing backlog (its capacity: lag at both ends of
    # 10 → 20 and 20 → 30), then 1300 → 5000, to the end, in one interval (> 5 × 10/s × 10 s):
    # a seek; 3700 jumped minus the 100 its capacity could have processed
    ("skip", {0: [(0, 1000, 1000, 0), (10, 1100, 2000, 0), (20, 1200, 3000, 0), (30, 1300, 4000, 0),
                  (40, 5000, 5000, 0)]}, [("skip", 0, 30, 40, 3600.0)]),
    # log start 0 → 600 at t=20 while committed sits at 500: 100 messages deleted unread
    # (until the consumer resets to the log start at t=40 — no skip counted for that jump).
    # The consumer made no progress with lag 500 from t=0 to 40 either: a stall (30 s reached
    # at t=30), reported beside the loss, not hidden by it
    ("retention", {0: [(0, 500, 1000, 0), (10, 500, 1000, 0), (20, 500, 1000, 600), (30, 500, 1000, 600),
                       (40, 600, 1000, 600), (50, 700, 1000, 600)]},
     [("retention_loss", 0, 20, 40, 100.0), ("stall", 0, 0, 40, 40.0)]),
    # partition 0 commits every 10 s; its one 25 s gap is > 10 + 6·max(1.4826·MAD 0, 1) = 16 s.
    # Partition 1 commits every 20 s: the same 25 s gap is within its own normal (< 26 s)
    ("commit-gap", {0: _gap_rows(10), 1: _gap_rows(20)}, [("commit_gap", 0, 100, 125, 25.0)]),
    # lag (at each minute's last sweep) 150, 450, 750, 1050, 1350 with produce 10/s > consume
    # 5/s: growing from minute 1 for 4 minutes (≥ 3), still open, (1350 − 150)/240 s = 5/s
    ("lag-growth", {0: [(t, 100 + 5 * t, 100 + 10 * t, 0) for t in range(0, 271, 30)]},
     [("lag_growth", 0, 60, None, 5.0)]),
    # a steady consumer, 3 behind: nothing to report
    ("steady", {0: [(t, 100 * t // 10 - 3, 100 * t // 10, 0) for t in range(10, 201, 10)]}, []),
    # consuming 100 per 10 s, rewinds 1200 → 800 at t=30, then re-consumes fast: 800 → 1450
    # in one interval (past the end 1400 seen at t=30; 650 > 5 × 10/s × 10 s). Only
    # 1450 − 1200 = 250 of those were never processed before, and 250 ≤ 500: the rewind, no skip
    ("rewind-then-catch-up", {0: [(0, 1000, 1000, 0), (10, 1100, 1200, 0), (20, 1200, 1300, 0),
                                  (30, 800, 1400, 0), (40, 1450, 1450, 0), (50, 1550, 1550, 0)]},
     [("rewind", 0, 20, 30, 400.0)]),
    # stalled from t=40 with an owner (a stall from 70 on, 30 s later); the owner leaves at
    # t=80, the partition still unprocessed (no owner: stop-like) until the commit at 100:
    # one fault, one stall anomaly 40 → 100 (not a stall and a stop)
    ("stall-then-orphaned", {0: [(t, t if t <= 30 or t >= 100 else 30, t, 0,
                                  None if 80 <= t < 100 else "m1") for t in range(0, 111, 10)]},
     [("stall", 0, 40, 100, 60.0)]),
    # read_committed group held at an open transaction: committed = LSO = 500 while the high
    # watermark is 510 (the open transaction's records). It reads to the LSO: caught up, no stall
    ("open-transaction", {0: [(t, 500, 510, 0, "m1", 500) for t in range(0, 101, 10)]}, []),
    # the topic deleted and re-created: on partition 0 the end fell 1100 → 50 at t=20 and the
    # group committed 40 in the new log at t=30; on partition 1 both in one interval. Neither
    # is a rewind (nothing is read twice). In the new log, 60 → 20 between t=40 and t=50 is one:
    # the end went down before the last commit, not since
    ("topic-recreated", {0: [(0, 900, 1000, 0), (10, 1000, 1100, 0), (20, 1000, 50, 0), (30, 40, 60, 0),
                             (40, 60, 80, 0), (50, 20, 90, 0)],
                         1: [(0, 900, 1000, 0), (10, 1000, 1100, 0), (20, 30, 50, 0), (30, 40, 60, 0)]},
     [("rewind", 0, 40, 50, 40.0)]),
]


def _anomalies(offsets: DataFrame) -> DataFrame:
    return step(offsets, P).anomalies


def test_anomaly_rules(spark: SparkSession) -> None:
    df = cases_df(spark, [offsets_rows(rows, group=name, partition=p)
                          for name, parts, _ in CASES for p, rows in parts.items()])
    got = _anomalies(df).select(
        "group_id", "partition", "kind", "start_ts", "end_ts", F.round("magnitude", 3).alias("magnitude"))
    expected = spark.createDataFrame(
        [(name, p, kind, at(s), None if e is None else at(e), m) for name, _, exp in CASES for kind, p, s, e, m in exp],
        "group_id string, partition int, kind string, start_ts timestamp, end_ts timestamp, magnitude double")
    assertDataFrameEqual(got, expected)


def _commits_df(spark: SparkSession, cases: list[tuple[str, list[tuple[float, int]]]]) -> DataFrame:
    """Lake ``commits`` rows from ``(group, [(t_seconds, offset), …])`` (topic t, partition 0),
    in ``__consumer_offsets`` order."""
    rows = [{"cluster": "c", "date": at(t).date().isoformat(), "group_id": g, "topic": "t", "partition": 0,
             "committed_offset": o, "commit_ts": at(t), "record_ts": at(t), "source_partition": 7,
             "source_offset": n}
            for g, cs in cases for n, (t, o) in enumerate(cs)]
    return spark.createDataFrame(rows, spark_schema("commits"))


def _every(step: float, t0: float, t1: float, offset: int) -> list[tuple[float, int]]:
    """Commits of the same ``offset`` every ``step`` s in [t0, t1]."""
    return [(t0 + i * step, offset) for i in range(int((t1 - t0) / step) + 1)]


# (case, sweep rows (t, committed, end, log_start[, owner]), commits (t, offset),
#  expected anomalies: (kind, start s, end s or None, magnitude))
COMMIT_CASES: list[tuple[str, list[tuple[Any, ...]], list[tuple[float, int]],
                         list[tuple[str, float, float | None, float]]]] = [
    # sweeps see 600 at t=10 and 700 at t=20; between them the group committed 450 at
    # t=12.5 (a rewind of 150) and 700 at t=17: invisible to the sweeps, found in the
    # commit stream at its exact time (commits every ≤ 5 s: no commit gap)
    ("rewind-between-sweeps", [(0, 500, 800, 0), (10, 600, 900, 0), (20, 700, 1000, 0), (30, 800, 1100, 0)],
     [(0, 500), (5, 550), (10, 600), (12.5, 450), (17, 700), (20, 700), (25, 750), (30, 800)],
     [("rewind", 12.5, 12.5, 150.0)]),
    # the sweeps see the rewind too (600 → 400 between t=10 and t=20): one rewind, at the
    # commit's time (t=14), not two
    ("rewind-seen-by-both", [(0, 500, 1000, 0), (10, 600, 1000, 0), (20, 400, 1000, 0), (30, 500, 1000, 0)],
     [(0, 500), (10, 600), (14, 400), (30, 500)], [("rewind", 14, 14, 200.0)]),
    # a reset to the end between t=30 and t=40 (as in the sweep-only skip case), committed at
    # t=36 after a regular commit at t=31: the skip is that commit, judged over its own interval
    # (5 s since the commit before): 3690 past 1310 minus the 50 that 10/s could have processed
    ("skip-timed-by-commit", [(0, 1000, 1000, 0), (10, 1100, 2000, 0), (20, 1200, 3000, 0), (30, 1300, 4000, 0),
                              (40, 5000, 5000, 0)],
     [(0, 1000), (10, 1100), (20, 1200), (30, 1300), (31, 1310), (36, 5000)], [("skip", 36, 36, 3640.0)]),
    # offset frozen at 30 from t=40, owner assigned, and the group keeps committing 30 every
    # 5 s (polls but makes no progress): Burrow's STALL
    ("stall-still-committing", _stall_rows("m1"), [(0, 0), (10, 10), (20, 20), *_every(5, 30, 85, 30), (90, 90)],
     [("stall", 40, 90, 50.0)]),
    # the same sweeps, but no commit at all after t=30 although the owner stays assigned:
    # the consumer stopped (Burrow's STOP), which only the commit stream can tell
    ("stop-with-owner", _stall_rows("m1"), [(0, 0), (10, 10), (20, 20), (30, 30), (90, 90)],
     [("stop", 40, 90, 50.0)]),
    # commits every 10 s (at each change of the offset) but none between t=100 and t=125:
    # gaps 10 s (median, MAD 0) and one of 25 s > 10 + 6·max(0, 1) = 16 s, timed by the commits
    ("gap-between-commits", _gap_rows(10), [(tc, 2 * tc) for tc in [*range(0, 101, 10), *range(125, 196, 10)]],
     [("commit_gap", 100, 125, 25.0)]),
    # the same offsets, but the group commits every 5 s all along (the same offset from t=100
    # to 120): no gap between commits (the sweeps alone would call 100 → 125 one)
    ("committing-the-same-offset", _gap_rows(10),
     [(t, 2 * max(x for x in [*range(0, 101, 10), *range(125, 196, 10)] if x <= t)) for t in range(0, 201, 5)], []),
    # the topic deleted and re-created between t=10 and 20 (the end falls 1100 → 50): the
    # group's first commit in the new log (10, at t=15) comes before the sweep that sees the
    # drop; no rewind. 60 → 20 at t=45, in the new log, is one (once, at the commit)
    ("topic-recreated-commits", [(0, 900, 1000, 0), (10, 1000, 1100, 0), (20, 30, 50, 0), (30, 40, 60, 0),
                                 (40, 60, 80, 0), (50, 20, 90, 0)],
     [(0, 900), (10, 1000), (15, 10), (20, 30), (30, 40), (40, 60), (45, 20), (50, 20)],
     [("rewind", 45, 45, 40.0)]),
]


def test_anomaly_rules_with_the_commit_stream(spark: SparkSession) -> None:
    df = cases_df(spark, [offsets_rows(rows, group=name) for name, rows, _, _ in COMMIT_CASES])
    commits = _commits_df(spark, [(name, cs) for name, _, cs, _ in COMMIT_CASES])
    got = step(df, P, commits=commits).anomalies.select(
        "group_id", "kind", "start_ts", "end_ts", F.round("magnitude", 3).alias("magnitude"))
    expected = spark.createDataFrame(
        [(name, kind, at(s), None if e is None else at(e), m) for name, _, _, exp in COMMIT_CASES
         for kind, s, e, m in exp],
        "group_id string, kind string, start_ts timestamp, end_ts timestamp, magnitude double")
    assertDataFrameEqual(got, expected)


def test_rewinds_from_commits_count_once_across_steps(spark: SparkSession) -> None:
    # step 1 sweeps t=0…20, step 2 t=30…40 seeded by step 1's state; the commit stream of
    # step 2 reaches back (as an incremental run's lookback does) over the rewind at t=12.5,
    # which step 1 reported: step 2 reports only its own, at t=33
    name, rows, cs, _ = COMMIT_CASES[0]
    rows = [*rows[:3], (30, 800, 1100, 0), (40, 900, 1200, 0)]
    cs = [*cs[:5], (30, 800), (33, 700), (38, 900)]
    commits = _commits_df(spark, [(name, cs)])
    one = step(cases_df(spark, [offsets_rows(rows[:3], group=name)]), P, commits=commits)
    two = step(cases_df(spark, [offsets_rows(rows[3:], group=name)]), P, state=one.state, commits=commits)
    got = [_points(x).select("kind", "start_ts", "magnitude") for x in (one, two)]
    assertDataFrameEqual(got[0], spark.createDataFrame([("rewind", at(12.5), 150.0)],
                                                       "kind string, start_ts timestamp, magnitude double"))
    assertDataFrameEqual(got[1], spark.createDataFrame([("rewind", at(33), 100.0)],
                                                       "kind string, start_ts timestamp, magnitude double"))


def test_anomaly_keys_are_stable_and_units_named(spark: SparkSession) -> None:
    name, parts, _ = CASES[2]  # the rewind
    df = cases_df(spark, [offsets_rows(parts[0], group=name)])
    got = _anomalies(df).select("key", "unit", "severity")
    start_ms = int(at(10).timestamp() * 1000)
    assertDataFrameEqual(got, spark.createDataFrame([(f"rewind|c|rewind|t|0|{start_ms}", "messages", "warning")],
                                                    "key string, unit string, severity string"))


def test_rebalance_storm() -> None:
    # three rebalances within 600 s (t=0, 100, 200) are one storm, from the first start to the
    # last end; a fourth, 1800 s later, is on its own
    ms = pa.timestamp("ms", tz="UTC")
    starts = (0, 100, 200, 2000)
    rb = pa.table({"cluster": ["c"] * 4, "group_id": ["g"] * 4, "start_ts": pa.array([at(s) for s in starts], ms),
                   "end_ts": pa.array([at(s + 10) for s in starts], ms)})
    schema = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("kind", pa.string()),
                        ("start_ts", ms), ("end_ts", ms), ("magnitude", pa.float64())])
    got = groups.storms(rb, np.zeros(4, bool), count=3, window_s=600, schema=schema)
    assert got.select(["kind", "start_ts", "end_ts", "magnitude"]).to_pylist() == [
        {"kind": "rebalance_storm", "start_ts": at(0), "end_ts": at(210), "magnitude": 3.0}]


def test_gap_baselines_are_median_and_mad_of_the_learned_and_new_gaps() -> None:
    """Median and MAD over the carried samples and this step's gaps (even and odd counts); the
    next state keeps the latest ``keep`` by time."""
    import random
    import statistics

    rng = random.Random(7)
    old = {p: [(float(i), round(rng.uniform(1, 20), 1)) for i in range(rng.randint(0, 9))] for p in range(5)}
    new = {p: [(100.0 + i, round(rng.uniform(1, 60), 1)) for i in range(rng.randint(1, 6))] for p in range(5)}

    def gaps(xs: dict[int, list[tuple[float, float]]]) -> np_gaps.Gaps:
        flat = [(p, t, g) for p, ys in xs.items() for t, g in ys]
        return np_gaps.Gaps(key=np.array([r[0] for r in flat], np.int64), t=np.array([r[1] for r in flat]),
                            gap_s=np.array([r[2] for r in flat]))

    base = np_gaps.gap_baselines(gaps(new), gaps(old), 5, keep=4)
    assert list(base.key) == list(range(5))
    first = np_gaps.gap_baselines(np_gaps.Gaps.empty(), gaps(old), 5, keep=4)
    carried = np_gaps.gap_baselines(gaps(new), first.samples, 5, keep=4)
    for p in range(5):
        xs = [g for _, g in old[p] + new[p]]
        med = statistics.median(xs)
        assert base.gap_median_s[p] == pytest.approx(med)
        assert base.gap_mad_s[p] == pytest.approx(statistics.median(abs(x - med) for x in xs))
        assert base.gap_n[p] == len(xs)
        mine = base.samples.key == p
        latest = sorted(old[p] + new[p])[-4:]
        assert list(zip(base.samples.t[mine], base.samples.gap_s[mine], strict=True)) == latest
        # a carried state holds only the latest 4 old gaps: the baseline learns from those
        kept = [g for _, g in sorted(old[p])[-4:] + new[p]]
        assert carried.gap_median_s[p] == pytest.approx(statistics.median(kept))


def _growth_minutes(lags: list[tuple[int, int]]) -> np_growth.Minutes:
    """Partition-minute rows of one partition from ``(minute, lag_last)``; the produce rate
    exceeds the consume rate in every minute."""
    n = len(lags)
    return np_growth.Minutes(
        key=np.zeros(n, np.int64), minute=np.array([m + int(at(0).timestamp()) // 60 for m, _ in lags], np.int64),
        lag_last=np.array([lag for _, lag in lags], np.int64), lag_last_ok=np.ones(n, bool),
        produce_rate=np.full(n, 10.0), consume_rate=np.full(n, 5.0), is_state=np.zeros(n, bool),
        g_start=np.full(n, np_growth.NO_RUN, np.int64), g_lag0=np.zeros(n, np.int64), g_lag0_ok=np.zeros(n, bool),
        g_n=np.zeros(n, np.int64))


def _runs(m: np_growth.Minutes) -> list[tuple[float, float | None, float]]:
    got = np_growth.lag_growth(m, min_minutes=3)
    return [(float(s) - at(0).timestamp(), None if e != e else float(e) - at(0).timestamp(), float(x))
            for s, e, x in zip(got.start_t, got.end_t, got.magnitude, strict=True)]


@pytest.mark.parametrize("split", [2, 3, 4, 6])
def test_lag_growth_carried_across_steps_equals_one_pass(split: int) -> None:
    # the lag grows in minutes 2…6 (5 minutes, from 20 at minute 1 to 70), falls at minute 7,
    # grows again in minutes 8 and 9 (too short for a run of 3); a step boundary before minute
    # ``split`` (inside the run, at its start, or after it) carries the open run in the state
    lags = [(0, 20), (1, 20), (2, 30), (3, 40), (4, 50), (5, 60), (6, 70), (7, 10), (8, 15), (9, 20)]
    whole = _runs(_growth_minutes(lags))
    assert whole == [(120.0, 420.0, pytest.approx(50 / 300))]
    state = np_growth.lag_growth_state(_growth_minutes([x for x in lags if x[0] < split]))
    second = _growth_minutes([x for x in lags if x[0] >= split])
    both = np_growth.Minutes(*(np.concatenate([getattr(state, f), getattr(second, f)])
                               for f in np_growth.Minutes.__dataclass_fields__))
    # the step that saw the run's end reports it whole, as the single pass does
    assert _runs(both) == whole


def test_lag_growth_counts_only_adjacent_minutes() -> None:
    # minutes 1…3 grow (20 → 50), then no minutes until 20 (the collector was down): the run
    # ends with minute 3 (at 240 s), not at the next minute seen. Minute 40 follows minute 20
    # after another gap: its higher lag is no growth over one minute, so 41 and 42 are a run of
    # 2 (< 3), not 3
    lags = [(0, 20), (1, 30), (2, 40), (3, 50), (20, 10), (40, 100), (41, 110), (42, 120)]
    assert _runs(_growth_minutes(lags)) == [(60.0, 240.0, pytest.approx(30 / 180))]


def _points(x: Step) -> DataFrame:
    return x.anomalies.where(F.col("kind").isin("rewind", "skip"))


def _point_events_of_step_two(spark: SparkSession, case: str, *, split: int) -> DataFrame:
    """Rewinds and skips of the second of two steps over partition 0 of ``case`` (its first
    ``split`` rows are step 1, whose state seeds step 2)."""
    parts = next(p for name, p, _ in CASES if name == case)
    rows = parts[0]
    one = step(cases_df(spark, [offsets_rows(rows[:split], group=case)]), P)
    return _points(step(cases_df(spark, [offsets_rows(rows[split:], group=case)]), P, state=one.state))


def test_skip_in_a_steps_first_interval_equals_the_batch(spark: SparkSession) -> None:
    # the "skip" case split before its jump (step 1: t=0…30, step 2: t=40 seeded by step 1's
    # state): the jump 1300 → 5000 lies in step 2's first interval. Its magnitude is the same as
    # in one pass: 3700 jumped minus the 100 the previous interval's rate (10/s × 10 s) could
    # have processed = 3600 (not 3700: the state row's own rate is that previous rate)
    got = _point_events_of_step_two(spark, "skip", split=4)
    assertDataFrameEqual(got.select("kind", "start_ts", "end_ts", "magnitude"), spark.createDataFrame(
        [("skip", at(30), at(40), 3600.0)], "kind string, start_ts timestamp, end_ts timestamp, magnitude double"))


def test_commit_into_a_recreated_topic_in_the_next_step_is_no_rewind(spark: SparkSession) -> None:
    # the "topic-recreated" case, partition 0, split after the drop of the end (step 1: t=0…20,
    # the end falls 1100 → 50 at t=20; step 2: t=30…50). The first commit in the new log (40,
    # at t=30) is in step 2: the state carries when the end went down, so it is no rewind; the
    # real one at t=50 (60 → 20, in the new log) still is
    got = _point_events_of_step_two(spark, "topic-recreated", split=3)
    assertDataFrameEqual(got.select("kind", "start_ts", "end_ts", "magnitude"), spark.createDataFrame(
        [("rewind", at(40), at(50), 40.0)], "kind string, start_ts timestamp, end_ts timestamp, magnitude double"))


def test_stop_with_owner_keeps_its_kind_after_the_commits_leave_the_lookback(spark: SparkSession) -> None:
    # the owner stays assigned but the group commits nothing after t=30 (a hung consumer whose
    # heartbeats go on: Burrow's STOP, which only the commit stream tells). Work is pending from
    # t=60: a stop from 60. Step 2 starts at t=1000: an incremental run reads commits from 15 min
    # before its start, so none of this group's; it still knows the last commit (30, carried
    # in the state) and reports the same stop, 960 s long at t=1020, not a stall with a new key
    from analytics_builders import members_df, members_rows, offsets_df
    from stepping import run_step


    rows = [(t, min(t, 30), t, 0, "m1") for t in [0, 10, 20, 30, *range(60, 991, 30), 1000, 1010, 1020,
                                                   1030, 1040, 1050]]
    commits = _commits_df(spark, [("g", [(0, 0), (10, 10), (20, 20), (30, 30)])])
    settings = AnalyticsConfig(rules=P)

    def step(part: list[tuple[Any, ...]], cs: DataFrame, state: dict[str, DataFrame] | None = None) -> Any:
        members = members_df(spark, [members_rows([(r[0], "Stable", 1, [("m1", None, [0])]) for r in part])])
        return run_step(offsets_df(spark, part), members, settings=settings, state=state, commits=cs,
                        as_of=at(1110))

    def stops(s: Any) -> list[tuple[Any, ...]]:
        got = s.tables["anomalies"].where(F.col("kind").isin("stall", "stop"))
        return sorted((r["kind"], r["end_ts"], r["magnitude"], r["key"]) for r in got.collect())

    first = step(rows[:-6], commits)
    second = step(rows[-6:-3], commits.where(F.lit(False)), first.state)
    # a third silent step: the last commit is still known (it was carried, not only read)
    third = step(rows[-3:], commits.where(F.lit(False)), second.state)
    try:
        key = f"stop|c|g|t|0|{int(at(60).timestamp() * 1000)}"  # the key holds the start
        assert stops(first) == [("stop", None, 930.0, key)]
        assert stops(second) == [("stop", None, 960.0, key)]
        assert stops(third) == [("stop", None, 990.0, key)]
    finally:
        for s in (first, second, third):
            s.release()


def test_a_long_storm_keeps_its_start_across_steps(spark: SparkSession) -> None:
    # settled sweeps every 250 s, each in a new generation: one rebalance window per interval,
    # at 125, 375, …, 1375 (the midpoints). Three within 600 s from 625 on: one storm from the
    # first start in 625's window, 125, to 1375, 3 rebalances. Step 1 sweeps 0…1250, step 2
    # 1500 (seeded by step 1's state): step 2 reports the same storm (same key), not a storm
    # "from 625" (the rebalances older than 600 s before step 1's last were not carried). The group
    # was consuming before the data (first seen at generation 5): the same member's rebalances of
    # a group formed in view would be its formation (docs/analytics.md "Rebalance storm")
    from analytics_builders import members_df, members_rows, offsets_df
    from stepping import run_step


    times = list(range(0, 1501, 250))
    settings = AnalyticsConfig(rules=P)

    def step(ts: list[int], state: dict[str, DataFrame] | None = None) -> Any:
        members = members_df(spark, [members_rows([(t, "Stable", t // 250 + 5, [("m1", None, [0])]) for t in ts])])
        return run_step(offsets_df(spark, [(t, t, t) for t in ts]), members, settings=settings, state=state,
                        as_of=at(1560))

    def storms(s: Any) -> list[tuple[Any, ...]]:
        got = s.tables["anomalies"].where(F.col("kind") == "rebalance_storm")
        return sorted((r["key"], r["magnitude"]) for r in got.collect())

    batch = step(times)
    first = step(times[:-1])
    second = step(times[-1:], first.state)
    try:
        expected = [(f"rebalance_storm|c|g|||{int(at(125).timestamp() * 1000)}", 3.0)]
        assert storms(batch) == expected
        assert storms(second) == expected
        end = batch.tables["anomalies"].where(F.col("kind") == "rebalance_storm").select("end_ts")
        assertDataFrameEqual(end, second.tables["anomalies"].where(F.col("kind") == "rebalance_storm").select(
            "end_ts"))
    finally:
        for s in (batch, first, second):
            s.release()


def test_a_step_without_sweeps_keeps_the_largest_rate(spark: SparkSession) -> None:
    # consuming 1000 in 10 s (100/s) and then 10 in 10 s, with a backlog at every sweep (its
    # capacity: 100/s, trusted once 10 → 20 showed it saturated: 1010 plus a commit's worth of
    # progress, the 1000 of the interval before, is still below the 2500 at its start);
    # the group then catches up 1590 messages in one interval past the previous
    # end (1010 → 2600): fast, but not 5 × 100/s × 10 s, so no skip. The same with a step in
    # between that had no sweep of the partition (the collector was down): that step's state
    # still holds the capacity (100/s), not the last rate (1/s), under which the catch-up would
    # look like a skip of 1580 messages. And the same split before the saturated interval: the
    # busy maximum (100/s) is carried without it, and trusted when it comes in the next step
    rows = [(0, 0, 500), (10, 1000, 2500), (20, 1010, 2600), (30, 2600, 2600)]

    batch = step(cases_df(spark, [offsets_rows(rows)]), P)
    one = step(cases_df(spark, [offsets_rows(rows[:3])]), P)
    two = step(cases_df(spark, [[]]), P, state=one.state)
    three = step(cases_df(spark, [offsets_rows(rows[3:])]), P, state=two.state)
    early = step(cases_df(spark, [offsets_rows(rows[:2])]), P)
    late = step(cases_df(spark, [offsets_rows(rows[2:])]), P, state=early.state)
    assert _points(batch).count() == 0
    assert _points(three).count() == 0
    assert _points(late).count() == 0
    assert two.state["series"].select(["m_max_rate", "m_sat_rate", "m_max_committed"]).to_pylist() == [
        {"m_max_rate": 100.0, "m_sat_rate": 1.0, "m_max_committed": 1010}]
    assert early.state["series"].select(["m_max_rate", "m_sat_rate"]).to_pylist() == [
        {"m_max_rate": 100.0, "m_sat_rate": 0.0}]


def _arrow(rows: list[dict[str, Any]], table: Any) -> Any:
    """Builder rows as the Arrow table a step reads (the columns of ``step.READ_COLUMNS``)."""
    from lagscope.analytics import step as steps

    schema = pa.schema([pa.field("cluster", pa.string()), *table.schema])
    got = pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)
    return got.select([c for c in steps.READ_COLUMNS[table.name] if c in got.column_names])


def test_a_stall_whose_owner_leaves_is_the_same_finding_in_steps_as_in_one_pass() -> None:
    # committed stays at 30 while the end grows: a stall from t=10 (owner m1 assigned); m1 leaves
    # at t=100 (the group Empty, no owner). One pass: the episode is the stall of its first mark,
    # open. Two steps split at t=110 (step 1's last sweep, the next one's state row, has no owner)
    # must report that same finding, not a new stop under another key
    from analytics_builders import members_rows

    from lagscope.analytics import step as steps
    from lagscope.schema import MEMBERS, OFFSETS

    settings = AnalyticsConfig(rules=P)
    rows = [(t, 30, 30 + 2 * t, 0, "m1" if t < 100 else None) for t in range(0, 200, 10)]

    def run(part: list[tuple[Any, ...]], state: dict[str, Any] | None = None) -> Any:
        members = members_rows([(r[0], "Stable" if r[4] else "Empty", 1 if r[4] else 2,
                                 [("m1", None, [0])] if r[4] else []) for r in part])
        return steps.run_step(steps.StepInputs(offsets=_arrow(offsets_rows(part), OFFSETS),
                                               members=_arrow(members, MEMBERS), commits=None, group_events=None,
                                               state=state or {}), settings=settings, as_of=at(300))

    def idle(out: Any) -> list[tuple[Any, ...]]:
        return sorted((r["key"], r["kind"], r["end_ts"], r["detail"]) for r in out.tables["anomalies"].to_pylist()
                      if r["kind"] in ("stall", "stop"))

    whole = run(rows)
    assert [k[1] for k in idle(whole)] == ["stall"]
    second = run(rows[11:], run(rows[:11]).state)
    assert idle(second) == idle(whole)
