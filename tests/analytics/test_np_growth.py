"""The numpy lag_growth rule and its carried state (lagscope.analytics.np_growth) against Spark's
transform_lag_growth / lag_growth_state: random partition-minute rows over two steps (the second
seeded by the first's state, runs spanning the step boundary), and hand-made state rows."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import spark_reference as sref
from analytics_builders import T0, at
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics.kseries import Found, java_fixed
from lagscope.analytics.np_growth import NO_RUN, Minutes, lag_growth, lag_growth_state

pytestmark = pytest.mark.spark

M0 = int(T0.timestamp()) // 60  # minute number of T0
SEEDS = [1, 2, 3, 4, 5, 6]
SPLIT = 12  # step 2 starts at this minute (relative to T0)

_SCHEMA = ("cluster string, group_id string, topic string, partition int, window_start timestamp, "
           "lag_last long, produce_rate double, consume_rate double, is_state boolean, m_g_start timestamp, "
           "m_g_lag0 long, m_g_n int")

# a row: (key, minute relative to T0, lag_last, produce_rate, consume_rate, is_state, m_g_start
# (relative minute), m_g_lag0, m_g_n), None for null
Row = tuple[int, int, int | None, float | None, float | None, bool, int | None, int | None, int | None]


def random_rows(rng: np.random.Generator, n_keys: int = 16) -> list[Row]:
    """Fresh partition-minute rows of ``n_keys`` keys over minutes 0…~27: runs where the lag grows
    while producers outpace the consumer, flat or falling stretches, minutes where the lag rises
    but consumers keep up (or the lag stays), gaps of missing minutes, null lags and rates.
    Some keys end before :data:`SPLIT` (the state alone carries them), some start after it."""
    rows: list[Row] = []
    for k in range(n_keys):
        lo, hi = 0, 28
        if k % 7 == 5:
            hi = int(rng.integers(SPLIT - 5, SPLIT))  # step 1 only
        elif k % 7 == 6:
            lo = int(rng.integers(SPLIT, SPLIT + 4))  # step 2 only
        m, lag = lo + int(rng.integers(0, 3)), int(rng.integers(0, 200))
        growing = bool(rng.random() < 0.5)
        while m < hi:
            # a step-1-only key ends in an open run of 4 minutes: the state alone carries it
            tail = k % 7 == 5 and m >= hi - 4
            if tail:
                growing = True
            elif rng.random() < 0.25:
                growing = not growing
            if growing:
                lag += 10 if tail else int(rng.choice([0, 5, 20, 40, 40]))
                pr = float(rng.integers(10, 50))
                cr = pr - (5.0 if tail else float(rng.choice([-3.0, 0.0, 2.0, 5.0, 5.0, 5.0])))
            else:
                lag = max(0, lag + int(rng.integers(-40, 25)))
                pr, cr = float(rng.integers(0, 40)), float(rng.integers(0, 40))
            u = 1.0 if tail else rng.random()
            lag_v: int | None = None if u < 0.05 else lag
            pr_v: float | None = None if 0.05 <= u < 0.09 else pr
            cr_v: float | None = None if 0.09 <= u < 0.14 else cr
            rows.append((k, m, lag_v, pr_v, cr_v, False, None, None, None))
            m += 1 if tail or rng.random() < 0.88 else int(rng.integers(2, 5))  # a gap of missing minutes
    return rows


def spark_minutes(spark: SparkSession, rows: list[Row]) -> DataFrame:
    """The rows as Spark partition-minute rows (key k: group g{k%3}, topic t, partition k);
    fresh rows' is_state is null, as a union with the state makes it."""
    return spark.createDataFrame(
        [("c", f"g{k % 3}", "t", k, at(60 * m), lag, pr, cr, True if st else None,
          None if gs is None else at(60 * gs), l0, gn) for k, m, lag, pr, cr, st, gs, l0, gn in rows], _SCHEMA)


def np_minutes(rows: list[Row]) -> Minutes:
    """The rows as :class:`Minutes`: grouped by key, a key's state row first, in minute order."""
    rows = sorted(rows, key=lambda r: (r[0], not r[5], r[1]))

    def col(i: int, fill: Any, dtype: Any) -> np.ndarray:  # type: ignore[type-arg]
        return np.array([fill if r[i] is None else r[i] for r in rows], dtype=dtype)

    def ok(i: int) -> np.ndarray:  # type: ignore[type-arg]
        return np.array([r[i] is not None for r in rows], dtype=bool)

    return Minutes(key=col(0, 0, np.int64), minute=col(1, 0, np.int64) + M0, lag_last=col(2, 0, np.int64),
                   lag_last_ok=ok(2), produce_rate=col(3, np.nan, np.float64),
                   consume_rate=col(4, np.nan, np.float64), is_state=col(5, False, bool),
                   g_start=np.where(ok(6), col(6, 0, np.int64) + M0, NO_RUN), g_lag0=col(7, 0, np.int64),
                   g_lag0_ok=ok(7), g_n=col(8, 0, np.int64))


def union(state: Minutes, fresh: Minutes) -> Minutes:
    """The next step's input: fresh rows ∪ the state, a key's state row first."""
    both = Minutes(**{f: np.concatenate([getattr(state, f), getattr(fresh, f)]) for f in Minutes.__dataclass_fields__})
    return both.take(np.lexsort((both.minute, ~both.is_state, both.key)))


def _micros_s(c: str) -> Any:
    return (F.unix_micros(F.col(c)).cast("double") / 1e6).alias(c)


def spark_found(df: DataFrame, step: int) -> list[tuple[Any, ...]]:
    """Spark's anomaly rows as ``(step, key, kind, start_t, end_t, severity, magnitude, unit,
    detail)`` (times in epoch seconds, None: null)."""
    rows = df.select("partition", "kind", _micros_s("start_ts"), _micros_s("end_ts"), "severity", "magnitude",
                     "unit", "detail").collect()
    return sorted((step, *r) for r in rows)


def np_found(f: Found, step: int) -> list[tuple[Any, ...]]:
    def null(x: float) -> float | None:
        return None if math.isnan(x) else float(x)

    return sorted((step, int(f.key[i]), f.kind[i], float(f.start_t[i]), null(f.end_t[i]), f.severity[i],
                   null(f.magnitude[i]), f.unit[i], f.detail[i]) for i in range(f.n))


def spark_state(df: DataFrame, step: int) -> list[tuple[Any, ...]]:
    """Spark's state rows as ``(step, key, minute, lag_last, produce_rate, consume_rate, is_state,
    m_g_start (minute), m_g_lag0, m_g_n)``."""
    minute = (F.unix_micros(F.col("window_start")) / F.lit(60_000_000)).cast("long")
    g_start = (F.unix_micros(F.col("m_g_start")) / F.lit(60_000_000)).cast("long")
    rows = df.select("partition", minute, "lag_last", "produce_rate", "consume_rate", "is_state", g_start,
                     "m_g_lag0", "m_g_n").collect()
    return sorted((step, *r) for r in rows)


def np_state(s: Minutes, step: int) -> list[tuple[Any, ...]]:
    def rate(x: float) -> float | None:
        return None if math.isnan(x) else float(x)

    out = []
    for i in range(s.n):
        run = s.g_start[i] != NO_RUN
        out.append((step, int(s.key[i]), int(s.minute[i]), int(s.lag_last[i]) if s.lag_last_ok[i] else None,
                    rate(s.produce_rate[i]), rate(s.consume_rate[i]), bool(s.is_state[i]),
                    int(s.g_start[i]) if run else None, int(s.g_lag0[i]) if s.g_lag0_ok[i] else None,
                    int(s.g_n[i]) if run else None))
    return sorted(out)


def assert_rows_equal(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want, strict=True):
        assert len(g) == len(w)
        for a, b in zip(g, w, strict=True):
            if isinstance(b, float) and isinstance(a, float):
                assert a == pytest.approx(b, rel=1e-9, abs=0.0), (g, w)
            else:
                assert a == b, (g, w)
                assert type(a) is type(b), (g, w)


def _split(rows: list[Row]) -> tuple[list[Row], list[Row]]:
    return [r for r in rows if r[1] < SPLIT], [r for r in rows if r[1] >= SPLIT]


def np_two_steps(rows: list[Row], min_minutes: int) -> tuple[Found, Minutes, Found, Minutes]:
    one, two = _split(rows)
    m1 = np_minutes(one)
    st1 = lag_growth_state(m1)
    m2 = union(st1, np_minutes(two))
    return lag_growth(m1, min_minutes=min_minutes), st1, lag_growth(m2, min_minutes=min_minutes), lag_growth_state(m2)


@pytest.mark.parametrize("seed", SEEDS)
def test_lag_growth_two_steps_match_spark(spark: SparkSession, seed: int) -> None:
    # step 1: fresh rows only → anomalies and state; step 2: fresh rows ∪ step 1's state (Spark's
    # state in Spark, numpy's in numpy): both steps' anomalies and states are the same rows
    min_minutes = 2 + seed % 2
    rows = random_rows(np.random.default_rng(seed))
    one, two = _split(rows)
    s1 = spark_minutes(spark, one)
    st1 = sref.lag_growth_state(s1)
    s2 = spark_minutes(spark, two).unionByName(st1, allowMissingColumns=True)
    want_found = (spark_found(sref.transform_lag_growth(s1, min_minutes=min_minutes), 1)
                  + spark_found(sref.transform_lag_growth(s2, min_minutes=min_minutes), 2))
    want_state = spark_state(st1, 1) + spark_state(sref.lag_growth_state(s2), 2)

    f1, n1, f2, n2 = np_two_steps(rows, min_minutes)
    assert_rows_equal(np_state(n1, 1) + np_state(n2, 2), want_state)
    assert_rows_equal(np_found(f1, 1) + np_found(f2, 2), want_found)


def test_random_rows_have_every_kind() -> None:
    # the seeds above produce every kind of row (numpy side: it equals Spark's, tested above)
    counts = dict.fromkeys(["closed", "open", "spans_split", "state_only_rerun", "exactly_min", "gap_end",
                            "state_run", "state_no_run", "state_open_short"], 0)
    for seed in SEEDS:
        mm = 2 + seed % 2
        rows = random_rows(np.random.default_rng(seed))
        f1, n1, f2, n2 = np_two_steps(rows, mm)
        present = {(r[0], r[1]) for r in rows}
        for f, step in ((f1, 1), (f2, 2)):
            counts["closed"] += int((~np.isnan(f.end_t)).sum())
            counts["open"] += int(np.isnan(f.end_t).sum())
            n = np.array([int(d.split()[3]) for d in f.detail], dtype=np.int64)
            counts["exactly_min"] += int((n == mm).sum())
            for k, e in zip(f.key, f.end_t, strict=True):
                # closed by a missing next minute: the key has a later row, not the next minute
                if e == e and (int(k), int(e // 60) - M0) not in present:
                    counts["gap_end"] += 1
            if step == 2:
                counts["spans_split"] += int((f.start_t < (M0 + SPLIT) * 60).sum())
                only1 = {k for k, m, *_ in rows if m < SPLIT} - {k for k, m, *_ in rows if m >= SPLIT}
                counts["state_only_rerun"] += sum(int(k) in only1 for k in f.key)
        for st in (n1, n2):
            run = st.g_start != NO_RUN
            counts["state_run"] += int(run.sum())
            counts["state_no_run"] += int((~run).sum())
            counts["state_open_short"] += int((run & (st.g_n < mm)).sum())
    assert all(v > 0 for v in counts.values()), counts


# hand-made edge cases: (rows, what they exercise); minutes relative to T0
_EDGE: list[Row] = [
    # key 0: the state alone, an open run of 4 minutes (10…13): reported again, open
    (0, 13, 45, 9.0, 1.0, True, 10, 5, 4),
    # key 1: a run without its lag before it nor its count (null m_g_lag0 / m_g_n): l0 = 0
    (1, 13, 45, 9.0, 1.0, True, 11, None, None),
    (1, 14, 50, 9.0, 1.0, False, None, None, None),
    (1, 15, 60, 9.0, 1.0, False, None, None, None),
    (1, 16, 70, 9.0, 1.0, False, None, None, None),
    (1, 17, 80, None, None, False, None, None, None),  # 0 > 0: no growth, the run ends
    # key 2: a run whose last lag is null: the next minute cannot grow, magnitude null ("null")
    (2, 13, None, 9.0, 1.0, True, 10, 5, 3),
    (2, 14, 50, 9.0, 1.0, False, None, None, None),
    (2, 15, 60, 9.0, None, False, None, None, None),  # rate null counts as 0: grows (1 minute)
    # key 3: a gap right after the state: its run ends with the state's minute; no run across it
    (3, 13, 45, 9.0, 1.0, True, 11, 40, 2),
    (3, 16, 50, 9.0, 1.0, False, None, None, None),
    (3, 17, 55, 9.0, 1.0, False, None, None, None),
    (3, 18, 55, 9.0, 1.0, False, None, None, None),  # equal lag: no growth
    # key 4: a state without a run but with a count (m_g_n 3): a new run counts from 0
    (4, 13, 45, 9.0, 1.0, True, None, None, 3),
    (4, 14, 46, 9.0, 1.0, False, None, None, None),
    (4, 15, 47, 2.0, 1.0, False, None, None, None),
    (4, 16, 48, 2.0, 2.0, False, None, None, None),  # producers do not outpace: the run ends
    # key 5: fresh only, from a null lag: the first comparable pair starts the run
    (5, 13, None, 9.0, 1.0, False, None, None, None),
    (5, 14, 10, 9.0, 1.0, False, None, None, None),
    (5, 15, 11, 9.0, 1.0, False, None, None, None),
    (5, 16, 13, 9.0, 1.0, False, None, None, None),
    # key 6: a state whose run ended before it (its own minute did not grow): no run, rows grow anew
    (6, 13, 45, 9.0, 1.0, True, None, None, None),
    (6, 14, 46, 9.0, 1.0, False, None, None, None),
    (6, 15, 47, 9.0, 1.0, False, None, None, None),
]


@pytest.mark.parametrize("min_minutes", [2, 3])
def test_lag_growth_edge_cases_match_spark(spark: SparkSession, min_minutes: int) -> None:
    df = spark_minutes(spark, _EDGE)
    want_found = spark_found(sref.transform_lag_growth(df, min_minutes=min_minutes), 1)
    want_state = spark_state(sref.lag_growth_state(df), 1)
    m = np_minutes(_EDGE)
    got = lag_growth(m, min_minutes=min_minutes)
    assert_rows_equal(np_found(got, 1), want_found)
    assert_rows_equal(np_state(lag_growth_state(m), 1), want_state)
    # what the cases are for: a re-reported state-only run, a null magnitude, l0 = 0
    by_key = {r[1]: r for r in np_found(got, 1)}
    assert by_key[0][4:7:2] == (None, pytest.approx(40 / 240))
    assert (by_key[2][6], by_key[2][8]) == (None, "lag grew for 3 consecutive minutes at n messages/s")
    assert by_key[1][4:7:2] == ((M0 + 17) * 60, pytest.approx(70 / 360))


def test_empty_input() -> None:
    m = np_minutes([])
    assert lag_growth(m, min_minutes=2).n == 0
    assert lag_growth_state(m).n == 0


def test_detail_number_format_matches_spark(spark: SparkSession) -> None:
    # Java rounds the shortest decimal digits half up (0.35 → 0.4, not the exact value's 0.3),
    # keeps a negative zero's sign, writes every digit of a large value
    rng = np.random.default_rng(7)
    vals = [0.35, 0.15, 1.45, 0.95, 9.95, -0.05, -0.35, 0.0, -0.0, 0.375, 1 / 3, 1e-5, 5e-324, 1e300, 42 / 120,
            float("nan"), float("inf"), float("-inf")]
    vals += list(rng.integers(-10**6, 10**6, 300) / rng.choice([60.0, 120.0, 180.0, 240.0, 7.0], 300))
    vals += [float(f"{i}.{j}5") for i, j in zip(rng.integers(0, 10**6, 300), rng.integers(0, 10, 300), strict=True)]
    df = spark.createDataFrame([(i, float(v)) for i, v in enumerate(vals)], "i int, x double")
    want = [r.f for r in df.orderBy("i").select(F.format_string("%.1f", "x").alias("f")).collect()]
    assert [java_fixed(float(v), 1) for v in vals] == want
