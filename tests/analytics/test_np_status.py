"""The numpy partition status (lagscope.analytics.np_status) against Spark's sref.burrow_entries,
entries_state and partition_status: random two-step series (carried series state, and carried
entries from the first step, random ones, or ones written before ``rebased`` existed), and small
hand-written edge cases. The numpy input is Spark's own enriched series (series_arrays), the minute
rows' lag seconds are Spark's (transform_lag_seconds), so each comparison checks the rules only."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import spark_reference as sref
from analytics_builders import at, cases_df, offsets_rows
from enriched_arrays import random_cases, series_arrays, two_steps
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from spark_reference import minutes_last
from spark_series import KEY, enrich_series, prepare_series
from spark_trends import transform_lag_seconds
from status_cases import CASES

from lagscope.analytics.io import spark_schema
from lagscope.analytics.kseries import Series, java_fixed
from lagscope.analytics.np_status import (
    Entries,
    _fixed0,
    burrow_entries,
    entries_state,
    minute_rows,
    partition_status,
)

pytestmark = pytest.mark.spark

#: the enriched series columns the job's status evaluation reads (analytics/job.py's list when
#: this was written; the job is being reworked, so a copy)
_ROW_COLUMNS = [*KEY, "ts", "t", "window_start", "next_t", "is_state", "committed", "end", "lso", "log_start", "lag",
                "owner", "owned_t", "lost", "idle_pending_s", "end_change_t"]


def with_lag_seconds(enriched: DataFrame, lag_rows: DataFrame) -> DataFrame:
    """The rows the job's status evaluation reads (trends.with_lag_seconds when this was written,
    being replaced by the one-pass rework): the enriched minute rows (each key's last fresh sweep
    of each minute) and the lag seconds of that sweep."""
    last = enriched.where(~F.col("is_state") & minutes_last(F.col("t"), F.col("next_t")))
    return last.join(lag_rows.select(*KEY, "window_start", "lag_s", "lag_s_lower", "lag_s_method"),
                     [*KEY, "window_start"], "left")


_ENTRY_SCHEMA = ("cluster string, group_id string, topic string, partition int, t double, c long, lag long, "
                 "rebased boolean")


@dataclass(frozen=True)
class Th:
    n: int
    stall_after_s: float = 30.0
    stop_after_s: float = 60.0
    warn_lag_s: float = 20.0

    def kw(self) -> dict[str, Any]:
        return {"n": self.n, "stall_after_s": self.stall_after_s, "stop_after_s": self.stop_after_s,
                "warn_lag_s": self.warn_lag_s}


@dataclass
class Outcome:
    got: list[tuple[Any, ...]]       # numpy status rows, sorted
    want: list[tuple[Any, ...]]      # Spark's
    got_entries: list[tuple[Any, ...]]
    want_entries: list[tuple[Any, ...]]
    got_state: list[tuple[Any, ...]]
    want_state: list[tuple[Any, ...]]


def _entry_tuples(e: Entries, keys: list[tuple[Any, ...]], *, with_state: bool = True) -> list[tuple[Any, ...]]:
    out = []
    for i in range(e.n):
        row = (*keys[int(e.key[i])], float(e.t[i]), int(e.c[i]), int(e.lag[i]) if e.lag_ok[i] else None,
               bool(e.rebased[i]))
        out.append((*row, bool(e.is_state[i])) if with_state else row)
    return sorted(out, key=lambda r: r[:5])


def _spark_entry_tuples(df: DataFrame, *, with_state: bool = True) -> list[tuple[Any, ...]]:
    cols = [*KEY, "t", "c", "lag", F.coalesce(F.col("rebased"), F.lit(False)).alias("rebased")]
    out = [tuple(r) for r in df.select(*cols, *(["is_state"] if with_state else [])).collect()]
    return sorted(out, key=lambda r: r[:5])


def _entries_np(rows: list[Any], number: dict[tuple[Any, ...], int], keys: list[tuple[Any, ...]]) -> Entries:
    """Collected entry rows → :class:`Entries` (keys not in the chunk get new numbers, appended
    to ``keys``)."""
    num = []
    for r in rows:
        k = tuple(r[:4])
        if k not in number:
            number[k] = len(keys)
            keys.append(k)
        num.append(number[k])
    lag_ok = np.array([r["lag"] is not None for r in rows], bool)
    return Entries(
        key=np.array(num, np.int64), t=np.array([r["t"] for r in rows], np.float64),
        c=np.array([r["c"] for r in rows], np.int64),
        lag=np.array([r["lag"] if r["lag"] is not None else 0 for r in rows], np.int64), lag_ok=lag_ok,
        rebased=np.array([bool(r["rebased"]) for r in rows], bool), is_state=np.ones(len(rows), bool))


@dataclass
class Prepared:
    """A step's Spark frames, stored, and the numpy input built from them."""

    enriched: DataFrame
    lag_rows: DataFrame
    s: Series
    keys: list[tuple[Any, ...]]
    lag_s_at: dict[tuple[int, float], float | None]


def prepare(series: DataFrame, enriched: DataFrame, state: DataFrame | None) -> Prepared:
    """Spark's enriched series and minute rows' lag seconds (as the job computes them), stored so
    that each evaluation reads them instead of recomputing them, and the Series of the former."""
    enriched = enriched.localCheckpoint()
    lag_rows = transform_lag_seconds(series, state).localCheckpoint()
    s, keys = series_arrays(enriched)
    number = {k: i for i, k in enumerate(keys)}
    lag_s_at = {(number[tuple(r[:4])], r["t"]): r["lag_s"] for r in lag_rows.select(*KEY, "t", "lag_s").collect()}
    return Prepared(enriched, lag_rows, s, keys, lag_s_at)


def compare(p: Prepared, carried: DataFrame | None, th: Th, *, null_lag_s: bool = False) -> Outcome:
    """Spark's reference, computed as the job does, and the numpy port on Spark's enriched series."""
    rows = with_lag_seconds(p.enriched.select(*_ROW_COLUMNS), p.lag_rows)
    if null_lag_s:
        rows = rows.withColumn("lag_s", F.lit(None).cast("double"))
    entries = sref.burrow_entries(p.enriched, carried)
    out = sref.partition_status(rows, entries, **th.kw())
    want = sorted((tuple(r) for r in out.select(
        *KEY, (F.unix_micros("eval_ts") / F.lit(1e6)).alias("t"), "burrow_status", "status", "reason", "lag",
        "lag_seconds").collect()), key=lambda r: r[:5])
    want_entries = _spark_entry_tuples(entries)
    want_state = _spark_entry_tuples(sref.entries_state(entries, th.n), with_state=False)

    s, keys = p.s, list(p.keys)
    number = {k: i for i, k in enumerate(keys)}
    carried_np = None
    if carried is not None:
        carried_np = _entries_np(carried.select(
            *KEY, "t", "c", "lag", (F.col("rebased") if "rebased" in carried.columns else F.lit(False))
            .alias("rebased")).collect(), number, keys)
    mr = minute_rows(s)
    lag_s = np.array([np.nan if null_lag_s else p.lag_s_at.get((int(s.key[i]), float(s.t[i]))) for i in mr],
                     np.float64)
    e = burrow_entries(s, carried_np)
    st = partition_status(s, mr, lag_s, e, **th.kw())
    got = sorted(((*keys[int(st.key[i])], float(st.t[i]), st.burrow_status[i], st.status[i], st.reason[i],
                   int(st.lag[i]) if st.lag_ok[i] else None,
                   None if math.isnan(st.lag_seconds[i]) else float(st.lag_seconds[i])) for i in range(len(mr))),
                 key=lambda r: r[:5])
    return Outcome(got, want, _entry_tuples(e, keys), want_entries,
                   _entry_tuples(entries_state(e, th.n), keys, with_state=False), want_state)


def one_step(spark: SparkSession, df: DataFrame) -> Prepared:
    series = prepare_series(df)
    return prepare(series, enrich_series(series), None)


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    return bool(a == b)


def assert_same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} rows, Spark {len(want)}"
    for g, w in zip(got, want, strict=True):
        assert len(g) == len(w)
        assert all(_close(a, b) for a, b in zip(g, w, strict=True)), f"{what}: {g} != Spark {w}"


def assert_outcome(o: Outcome) -> None:
    assert_same(o.got_entries, o.want_entries, "entries")
    assert_same(o.got_state, o.want_state, "entries_state")
    assert_same(o.got, o.want, "status")


# ---------------------------------------------------------------- random two-step series

_SPLIT_S = 250.0


def _random_carried(spark: SparkSession, rng: np.random.Generator, keys: list[tuple[Any, ...]], n: int, *,
                    old: bool) -> DataFrame:
    """Random carried entries (before the split) for about half the keys and one key without
    series rows: lags with zeros and nulls, some rebased; ``old``: a state without ``rebased``."""
    rows = []
    for k in [*keys, ("s0", "g9", "t", 999)]:
        if rng.random() < 0.5:
            continue
        m = int(rng.integers(1, 2 * n + 1))
        ts = np.sort(rng.choice(np.arange(1, 400), size=m, replace=False))[::-1]
        c = int(rng.integers(0, 1000))
        for t in ts:
            c = max(0, c + int(rng.choice([-40, 0, 0, 10, 30])))
            lag = None if rng.random() < 0.1 else int(rng.choice([0, 0, 5, 50, 200]))
            rows.append((*k, _SPLIT_S - float(t) * 0.5, c, lag, bool(rng.random() < 0.2)))
    df = spark.createDataFrame(rows, _ENTRY_SCHEMA)
    return df.drop("rebased") if old else df


_SEEDS = [1, 2, 3, 4, 5, 6, 7, 8]
_NS = [10, 3]
_RUNS: dict[int, Outcome] = {}


def _random_run(spark: SparkSession, n: int) -> Outcome:
    """Every seed's random two-step case at once (each seed its own cluster ``s<seed>``: one Spark
    computation for all, cached for the per-seed comparisons and the coverage test). Carried
    entries: the first step's entries_state for even seeds, random ones for odd seeds (about
    half their keys, and a key without series rows)."""
    if n not in _RUNS:
        if "prep" not in _PREP:
            cases = []
            for seed in _SEEDS:
                rng = np.random.default_rng(seed)
                rows = random_cases(rng, n_keys=int(rng.integers(10, 31)), n_sweeps=30)
                cases += [_held(rng, {**r, "cluster": f"s{seed}"}) for r in rows]
            steps = two_steps(spark, cases, split_s=_SPLIT_S)
            _PREP["prep"] = prepare(steps.series, steps.enriched, steps.state)
            _PREP["cases"] = cases
        prep, cases = _PREP["prep"], _PREP["cases"]
        df = spark.createDataFrame([r for r in cases if int(r["cluster"][1:]) % 2 == 0], spark_schema("offsets"))
        first = enrich_series(prepare_series(df.where(F.col("sweep_ts") < F.lit(at(_SPLIT_S)))))
        carried = sref.entries_state(sref.burrow_entries(first), n)
        rng = np.random.default_rng(n)
        odd = sorted({(r["cluster"], r["group_id"], r["topic"], r["partition"]) for r in cases
                      if int(r["cluster"][1:]) % 2 == 1})
        carried = carried.unionByName(_random_carried(spark, rng, odd, n, old=False)).localCheckpoint()
        _RUNS[n] = compare(prep, carried, Th(n))
    return _RUNS[n]


_PREP: dict[str, Any] = {}


def _held(rng: np.random.Generator, row: dict[str, Any]) -> dict[str, Any]:
    """Now and then a group held at an open transaction: committed at the LSO below the end."""
    lso, end = row["last_stable_offset"], row["log_end_offset"]
    if row["committed_offset"] is not None and lso < end and rng.random() < 0.3:
        row["committed_offset"], row["lag"] = lso, end - lso
    return row


def _of_seed(rows: list[tuple[Any, ...]], seed: int) -> list[tuple[Any, ...]]:
    return [r for r in rows if r[0] == f"s{seed}"]


@pytest.mark.parametrize("n", _NS)
@pytest.mark.parametrize("seed", _SEEDS)
def test_matches_spark_random(spark: SparkSession, seed: int, n: int) -> None:
    o = _random_run(spark, n)
    assert _of_seed(o.want, seed), "no status rows"
    for got, want, what in [(o.got_entries, o.want_entries, "entries"), (o.got_state, o.want_state, "entries_state"),
                            (o.got, o.want, "status")]:
        assert_same(_of_seed(got, seed), _of_seed(want, seed), what)


_REASONS: dict[str, Callable[[str], bool]] = {  # reason kind: a test of the string
    "lost": lambda r: " is below the log start " in r,
    "no commit": lambda r: r == "no committed offset",
    "idle": lambda r: r == "caught up; no new messages",
    "caught up": lambda r: r == "caught up",
    "rewind": lambda r: r == "committed offset went backwards in the window",
    "held": lambda r: r.startswith("at the last stable offset "),
    "stop": lambda r: r.startswith("no owner and no commit for "),
    "stall": lambda r: r.startswith("owner assigned but no commit for "),
    "stall, owner gone": lambda r: r.startswith("no owner for "),  # for less than stop_after_s
    "growing": lambda r: r.endswith(" s and growing"),
    "consuming": lambda r: r.startswith("consuming; lag "),
}


def test_every_status_occurs(spark: SparkSession) -> None:
    # the random cases exercise every status and every reason, and carried entries of both kinds
    burrow: Counter[str] = Counter()
    own: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    for n in _NS:
        o = _random_run(spark, n)
        burrow.update(r[5] for r in o.want)
        own.update(r[6] for r in o.want)
        reasons.update(kind for r in o.want for kind, test in _REASONS.items() if test(r[7]))
        carried = {r[0] for r in o.want_entries if r[-1]}
        assert {f"s{seed}" for seed in _SEEDS} <= carried, carried
    assert set(burrow) == {"OK", "WARN", "STOP", "STALL", "REWIND"}, burrow
    assert set(own) == {"OK", "IDLE", "WARN", "STOP", "STALL", "REWIND", "ERR"}, own
    assert set(reasons) == set(_REASONS), reasons


# ---------------------------------------------------------------- hand-written edge cases

T = range(0, 51, 10)

# the status rule table of test_analytics_status (one step, no state), with the statuses it states
_TABLE = CASES

# edge cases over several minutes (sweeps every 10 s unless stated)
_EDGES: list[tuple[str, list[tuple[Any, ...]]]] = [
    # no commit for the first sweeps (rows before any entry: no window), then a frozen offset
    ("late-commit", [(t, None if t < 70 else 300, 1000, 0, None) for t in range(0, 200, 10)]),
    # no owner and a frozen offset: one entry (the first commit), windows from earlier minutes
    ("one-entry", [(t, 100, 100 + t, 0, None) for t in range(0, 300, 10)]),
    # pending time with half seconds (Java's %.0f rounds half up: 112.5 s → 113, Python's % 112)
    ("half-seconds", [(12.5 * i, 100, 1000, 0, "m1") for i in range(12)]),
    ("half-seconds-stop", [(12.5 * i, 100 if i >= 2 else 50, 1000, 0, None) for i in range(12)]),
    # sweeps at minute boundaries and several sweeps in one minute
    ("boundaries", [(t, 10 * i, 10 * i + (i % 3) * 7, 0, "m1")
                    for i, t in enumerate([0, 59.999, 60, 61, 119, 120, 180, 239.5, 240])]),
    # rewinds into a re-created topic and within one log, retention and an open transaction
    ("mixed", [(0, 900, 1000, 0, "m1"), (30, 1000, 1100, 0, "m1"), (60, 20, 30, 0, "m1"),
               (90, 10, 40, 0, "m1"), (120, 40, 40, 0, "m1"), (150, 40, 40, 50, "m1"),
               (180, 60, 90, 50, None, 60), (210, 60, 90, 50, None, 60), (240, 80, 95, 0, "m2")]),
    # lag growing, then decreasing, on an owned partition
    ("growing", [(t, 10 * t, 30 * t if t < 150 else 30 * 150, 0, "m1") for t in range(0, 300, 10)]),
    # never a commit and no owner: no entries at all
    ("nothing", [(t, None, 50, 0, None) for t in range(0, 130, 10)]),
]


def _table_df(spark: SparkSession, cases: list[tuple[str, list[tuple[Any, ...]]]]) -> DataFrame:
    return cases_df(spark, [offsets_rows(rows, group=name) for name, rows in cases])


def test_rule_table(spark: SparkSession) -> None:
    # the Spark rule table: the same rows, and the statuses it states
    p = one_step(spark, _table_df(spark, [(name, rows) for name, rows, _ in _TABLE]))
    o = compare(p, None, Th(5, stall_after_s=30, stop_after_s=30, warn_lag_s=30))
    assert_outcome(o)
    got = {r[1]: (r[5], r[6]) for r in o.got if r[4] == at(50).timestamp()}
    assert got == {name: exp for name, _, exp in _TABLE}


def test_edge_cases(spark: SparkSession) -> None:
    # windows of 1, 2, 3 and 10 entries (1: Spark's pair bound i − max(n − 2, 0) takes the pair
    # ending at the entry although the window is the entry alone)
    p = one_step(spark, _table_df(spark, [*_EDGES, *((name, rows) for name, rows, _ in _TABLE)]))
    for n in (1, 2, 3, 10):
        o = compare(p, None, Th(n, stall_after_s=30, stop_after_s=30))
        assert_outcome(o)
        reasons = [r[7] for r in o.got]
        assert "no committed offset" in reasons
        assert any(r.startswith("owner assigned but no commit for 113 s") for r in reasons)
        assert any(r.startswith("no owner and no commit for 113 s") for r in reasons)


def test_null_lag_seconds_with_zero_warn_threshold(spark: SparkSession) -> None:
    # lag seconds null and a zero WARN threshold: coalesce(lag_s, 0) ≥ 0 holds and the reason
    # formats the null argument of %.0f as an empty string
    p = one_step(spark, _table_df(spark, _EDGES))
    o = compare(p, None, Th(3, stall_after_s=1e9, stop_after_s=1e9, warn_lag_s=0.0), null_lag_s=True)
    assert_outcome(o)
    assert any(r[7] == "lag  s and growing" for r in o.got)


def test_carried_entries_only(spark: SparkSession) -> None:
    # a second step whose keys only have carried entries before their minute rows (no owner, the
    # offset frozen: no fresh entry), the state written before `rebased` existed
    rows = offsets_rows([(t, 100, 100 + 2 * t, 0, None) for t in range(300, 420, 10)], group="frozen")
    p = one_step(spark, cases_df(spark, [rows]))
    carried = spark.createDataFrame([("c", "frozen", "t", 0, float(t), c, lag, False)
                                     for t, c, lag in [(200, 40, 30), (240, 70, 50), (280, 100, 60)]],
                                    _ENTRY_SCHEMA).drop("rebased")
    for n in (2, 3, 5):
        o = compare(p, carried, Th(n))
        assert_outcome(o)
        assert all(r[5] != "OK" for r in o.got)


def test_fixed0_is_java_fixed() -> None:
    xs = np.array([0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -2.5, 0.49999999999999994, 37.5, 112.5, 1e17, 2.0**62, 1e20,
                   1e300, -7.25, 123456.4999, 4503599627370495.5, 2.0**53 - 1, 2.0**53, float("inf"), float("-inf")])
    assert list(_fixed0(xs)) == [java_fixed(float(x), 0) for x in xs]
    rng = np.random.default_rng(0)
    ys = np.concatenate([rng.uniform(-1e4, 1e4, 2000), np.round(rng.uniform(0, 1e6, 2000) * 2) / 2])
    assert list(_fixed0(ys)) == [java_fixed(float(y), 0) for y in ys]
    assert list(_fixed0(np.array([np.nan]))) == [""]


def test_entries_state_keeps_the_last_n() -> None:
    e = Entries(key=np.array([0, 0, 0, 2, 2], np.int64), t=np.array([1.0, 2.0, 3.0, 5.0, 4.0]),
                c=np.arange(5, dtype=np.int64), lag=np.zeros(5, np.int64), lag_ok=np.ones(5, bool),
                rebased=np.zeros(5, bool), is_state=np.zeros(5, bool))
    def last(n: int) -> list[tuple[int, float]]:
        kept = entries_state(e, n)
        assert kept.is_state.all()
        return [(int(k), float(t)) for k, t in zip(kept.key, kept.t, strict=True)]

    assert last(2) == [(0, 2.0), (0, 3.0), (2, 4.0), (2, 5.0)]
    assert last(1) == [(0, 3.0), (2, 5.0)]
    assert last(0) == []
