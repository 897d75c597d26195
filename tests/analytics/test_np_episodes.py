"""The numpy stall / stop / retention_loss episodes (lagscope.analytics.np_episodes) against Spark's
sref.transform_episodes, _with_last_commit and last_commit_marker on the same enriched series:
random two-step series (the second step seeded by the first's state rows, whose m_commit_t comes
from the commit stream) with and without random commit streams, and hand-written edge cases."""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from typing import Any

import numpy as np
import pytest
import spark_reference as sref
from analytics_builders import T0, at, cases_df, offsets_rows
from enriched_arrays import random_cases, series_arrays, two_steps
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from spark_reference import state_rows
from spark_series import KEY, enrich_series, prepare_series

from lagscope.analytics.kseries import Commits, Found, Series, java_fixed
from lagscope.analytics.np_episodes import commit_marker, episodes, last_commit_t, spark_round

pytestmark = pytest.mark.spark

COMMIT_SCHEMA = "cluster string, group_id string, topic string, partition int, t double, offset long, seq long"
SPLIT_S = 300.0


def _t(rel: float | None) -> float | None:
    """Epoch seconds of T0 + rel as Spark's series ``t`` has them (microseconds / 1e6)."""
    if rel is None:
        return None
    return ((at(rel) - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)) / 1e6


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------

def _random_commits(rng: np.random.Generator, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Commit records (KEY, t, offset, seq) for the keys of ``rows``: per key one of no commits,
    a commit per sweep (half of them at the sweep's own time, else shortly before it), the same
    until the group goes silent at a random time, or commits every 5 s of the last offset
    until a random time; plus a few records of a key without sweeps."""
    by_key: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in rows:
        by_key.setdefault(("c", r["group_id"], r["topic"], r["partition"]), []).append(r)
    out: list[dict[str, Any]] = []
    for k, rs in by_key.items():
        mode = int(rng.integers(0, 4))
        if mode == 0:
            continue
        rels = [(r["sweep_ts"] - T0).total_seconds() for r in rs]
        cutoff = float(rng.uniform(rels[0], rels[-1] + 50)) if mode >= 2 else math.inf
        recs: list[tuple[float, int]] = []
        last: int | None = None
        for rel, r in zip(rels, rs, strict=True):
            if r["committed_offset"] is None:
                continue
            if mode == 3 and last is not None:
                recs += [(rel - x, last) for x in (15.0, 10.0, 5.0) if rel - x < cutoff]
            last = r["committed_offset"]
            when = rel if rng.random() < 0.5 else rel - round(float(rng.uniform(0, 9)), 3)
            if when < cutoff:
                recs.append((when, last))
        for i, (rel, off) in enumerate(sorted(recs)):
            out.append({"cluster": k[0], "group_id": k[1], "topic": k[2], "partition": k[3], "t": _t(rel),
                        "offset": off, "seq": i})
    out += [{"cluster": "c", "group_id": "g0", "topic": "t", "partition": 999, "t": _t(float(x)), "offset": 1,
             "seq": i} for i, x in enumerate(rng.uniform(0, 900, 3))]
    return out


def _commit_arrays(recs: DataFrame, keys: list[tuple[Any, ...]]) -> Commits:
    number = {k: i for i, k in enumerate(keys)}
    got = [(number[(r.cluster, r.group_id, r.topic, r.partition)], math.nan if r.t is None else r.t, r.offset, r.seq)
           for r in recs.collect() if (r.cluster, r.group_id, r.topic, r.partition) in number]
    got.sort(key=lambda x: (x[0], x[1], x[3]))
    return Commits(key=np.array([g[0] for g in got], np.int64), t=np.array([g[1] for g in got], np.float64),
                   offset=np.array([g[2] for g in got], np.int64), seq=np.array([g[3] for g in got], np.int64))


# --------------------------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------------------------

def _micros(v: float) -> int | None:
    """Spark's _ts: timestamp_micros(cast(v · 1e6 as long)) (truncation), as unix micros."""
    return None if v != v else int(np.float64(v) * np.float64(1e6))


def _check(spark: SparkSession, enriched: DataFrame, recs: DataFrame | None, *, stall: float,
           stop: float) -> list[tuple[Any, ...]]:
    """Compare every output of np_episodes with the Spark reference on ``enriched``; return the
    reference's episode rows (KEY…, kind, start µs, end µs, severity, magnitude, unit, detail)."""
    series, keys = series_arrays(enriched)
    commits = _commit_arrays(recs, keys) if recs is not None else None

    # last_commit_t / commits_known, per series row (the same row order as series_arrays)
    ref = sref._with_last_commit(enriched, recs).select(
        *KEY, "t", "is_state", "last_commit_t", "commits_known").toPandas()
    ref["_state_first"] = ~ref["is_state"].astype(bool)
    ref = ref.sort_values([*KEY, "t", "_state_first"], kind="stable").reset_index(drop=True)
    lct, known = last_commit_t(series, commits)
    np.testing.assert_array_equal(ref["t"].to_numpy(np.float64), series.t)
    np.testing.assert_array_equal(lct, ref["last_commit_t"].astype("float64").to_numpy())
    np.testing.assert_array_equal(known, ref["commits_known"].astype(bool).to_numpy())

    # the episodes
    want = [(*r[:4], r.kind, r.s, r.e, r.severity, r.magnitude, r.unit, r.detail) for r in
            sref.transform_episodes(enriched, stall_after_s=stall, stop_after_s=stop, commits=recs).select(
                *KEY, "kind", F.unix_micros("start_ts").alias("s"), F.unix_micros("end_ts").alias("e"),
                "severity", "magnitude", "unit", "detail").collect()]
    carried: dict[str, np.ndarray] = {}
    for m in ("m_idle", "m_lost"):  # the state rows' carried markers, in the series' order
        if m in enriched.columns:
            x = enriched.select(*KEY, "t", "is_state", m).toPandas()
            x["_state_first"] = ~x["is_state"].astype(bool)
            x = x.sort_values([*KEY, "t", "_state_first"], kind="stable").reset_index(drop=True)
            carried[m] = x[m].astype("float64").to_numpy()
    f = episodes(series, commits, stall_after_s=stall, stop_after_s=stop, carried_idle=carried.get("m_idle"),
                 carried_lost=carried.get("m_lost"))
    got = [(*keys[int(f.key[i])], f.kind[i], _micros(f.start_t[i]), _micros(f.end_t[i]), f.severity[i],
            None if math.isnan(f.magnitude[i]) else float(f.magnitude[i]), f.unit[i], f.detail[i])
           for i in range(f.n)]
    _same_rows(got, want)

    # the next step's m_commit_t per key
    last = state_rows(enriched)
    if recs is not None:
        last = sref.last_commit_marker(last, recs)
    marks = {tuple(r[:4]): r.m_commit_t for r in last.select(*KEY, "m_commit_t").collect()}
    cm = commit_marker(series, commits)
    assert len(cm) == len(keys) == len(marks)
    for i, k in enumerate(keys):
        want_m = marks[k]
        assert (math.isnan(cm[i]) if want_m is None else cm[i] == want_m), (k, cm[i], want_m)
    return want


def _sort_key(r: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is None, x if x is not None else 0) for x in r)


def _same_rows(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> None:
    got, want = sorted(got, key=_sort_key), sorted(want, key=_sort_key)
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want, strict=True):
        assert g[:8] == w[:8], (g, w)
        assert (g[8] is None) == (w[8] is None), (g, w)
        if w[8] is not None:
            assert g[8] == pytest.approx(w[8], rel=1e-9, abs=1e-9), (g, w)
        assert g[9:] == w[9:], (g, w)


# --------------------------------------------------------------------------------------------
# random two-step series
# --------------------------------------------------------------------------------------------

SEEDS = [1, 2, 3, 4, 5, 6]
THRESHOLDS = [(30.0, 40.0), (60.0, 60.0), (50.0, 20.0), (40.0, 90.0), (25.0, 25.0), (60.0, 30.0)]


def _random_steps(spark: SparkSession, seed: int, with_commits: bool) -> tuple[DataFrame, DataFrame | None]:
    rng = np.random.default_rng(seed)
    n_keys = 10 + (seed * 7) % 21
    split = at(SPLIT_S)
    # partitions ≡ 0 (mod 7) have no sweep in the second step (their state row only), ≡ 1 none in the first
    rows = [r for r in random_cases(rng, n_keys=n_keys, n_sweeps=40)
            if not (r["partition"] % 7 == 0 and r["sweep_ts"] >= split)
            and not (r["partition"] % 7 == 1 and r["sweep_ts"] < split)]
    steps = two_steps(spark, rows, SPLIT_S)
    # a third of the state rows carry an open idle episode's kind and reason (m_idle: kind · 4 +
    # reason), which an episode whose first mark is that row keeps
    h = F.abs(F.hash(*KEY))
    m_idle = F.when(F.col("is_state") & (h % 3 == 0), F.element_at(
        F.array(*(F.lit(c) for c in (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0))), (h % 7 + 1).cast("int")))
    # and some carry whether the retention loss open at them is proven (m_lost: 1 or 0)
    m_lost = F.when(F.col("is_state") & (h % 5 < 2), (h % 5).cast("double"))
    if not with_commits:
        return steps.enriched.withColumn("m_idle", m_idle).withColumn("m_lost", m_lost).localCheckpoint(), None
    recs = spark.createDataFrame(_random_commits(rng, rows), COMMIT_SCHEMA)
    # the first step's state rows carry its last commit (m_commit_t); the second step reads the
    # commit stream from 60 s before its start
    state = sref.last_commit_marker(steps.state, recs.where(F.col("t") < _t(SPLIT_S)))
    enriched = enrich_series(steps.series, state).withColumn("m_idle", m_idle).withColumn(
        "m_lost", m_lost).localCheckpoint()
    return enriched, recs.where(F.col("t") >= _t(SPLIT_S - 60.0)).localCheckpoint()


#: the checked reference rows of each random case, (seed, with_commits) → rows: each case is
#: computed once, by its comparison test or by the coverage test, whichever runs first
_CASES: dict[tuple[int, bool], list[Any]] = {}


def _case(spark: SparkSession, seed: int, with_commits: bool) -> list[Any]:
    """The random case's reference rows, after checking the numpy episodes against them."""
    if (seed, with_commits) not in _CASES:
        stall, stop = THRESHOLDS[seed % len(THRESHOLDS)]
        enriched, recs = _random_steps(spark, seed, with_commits)
        _CASES[(seed, with_commits)] = _check(spark, enriched, recs, stall=stall, stop=stop)
    return _CASES[(seed, with_commits)]


@pytest.mark.parametrize("with_commits", [True, False])
@pytest.mark.parametrize("seed", SEEDS)
def test_episodes_match_spark(spark: SparkSession, seed: int, with_commits: bool) -> None:
    _case(spark, seed, with_commits)


# --------------------------------------------------------------------------------------------
# hand-written edge cases (one frame, a group each)
# --------------------------------------------------------------------------------------------

def _rows(group: str, sweeps: list[tuple[Any, ...]], owner: str | None = "m1") -> list[dict[str, Any]]:
    return offsets_rows(sweeps, group=group, owner=owner)


EDGE_ROWS = [
    # committed moves at t=10.0005, then stays with lag: the stall starts at round(…, 3) = 10.001
    # (HALF_UP on the decimal 1767225610.0005, not on the double 1767225610.000499…)
    *_rows("round-half-up", [(0, 0, 100), (10.0005, 10, 100), *((t, 10, 100) for t in range(20, 200, 20))]),
    # committing the same offset at each sweep until t=100 (a tie with the sweep), then silent:
    # a stall that stays a stall (its kind when it crossed the threshold)
    *_rows("stall-then-silent", [(t, 5, 100) for t in range(0, 260, 20)]),
    # one commit record without a time: the stream knows the group, never saw a commit: a stop
    *_rows("commit-without-time", [(t, 5, 100) for t in range(0, 200, 20)]),
    # a sweep written twice (the same row at t=60): one stall
    *_rows("duplicate-sweep", [(t, 5, 100) for t in (0, 20, 40, 60, 60, 80, 100, 120, 140)]),
    # read_committed held at an open transaction (committed = LSO < end): nothing pending
    *_rows("open-transaction", [(t, 500, 510, 0, "m1", 500) for t in range(0, 300, 20)]),
    # no owner, and the retention overtakes the committed offset: a stop and a retention loss
    *_rows("loss-and-stop", [(t, 5, 100, 0 if t < 60 else 10 + t) for t in range(0, 200, 20)], owner=None),
    # a stall whose member then leaves: still the one stall (owner still assigned)
    *_rows("stall-then-unowned", [(t, 5, 100, 0, "m1" if t < 120 else None) for t in range(0, 260, 20)]),
    # owned while the retention overtakes the committed offset, then unowned: the loss is proven
    # by its unowned sweep (nobody held the records), critical from then on
    *_rows("loss-then-unowned", [(t, 5, 100, 0 if t < 60 else 10 + t, "m1" if t < 100 else None)
                                 for t in range(0, 200, 20)]),
    # its owner still assigned but, in the commit stream, committing nothing after t=0: nobody
    # reads it (the stop rule's consumer gone), the loss is proven; from sweeps alone an owner
    # that may hold the records: a warning
    *_rows("loss-silent-owner", [(t, 5, 100, 0 if t < 60 else 10 + t) for t in range(0, 200, 20)]),
    # a committer without members (assign() + commit) reading at the retention's edge: it keeps
    # progressing, so it may hold the deleted records: a warning
    *_rows("standalone-at-edge", [(t, 10 + t, 30 + t, 12 + t) for t in range(0, 200, 20)], owner=None),
    # lost, recovered, lost again (three times): retention losses, the last open; all while a member
    # owned the partition (it may have fetched the records before they were deleted): warnings
    *_rows("loss-twice", [(0, 5, 100, 0), (20, 5, 100, 10), (40, 20, 100, 10), (60, 30, 100, 40),
                          (80, 30, 100, 45), (100, 60, 100, 45), (120, 60, 110, 80)]),
    # the committed offset moves at t=10.25 and next at t=130.5: a stall of 120.25 s, which
    # Java's %.1f writes 120.3 (HALF_UP; Python's % rounds half even: 120.2)
    *_rows("quarter-duration", [(0, 0, 100), (10.25, 10, 100), *((t, 10, 100) for t in range(20, 121, 20)),
                                (130.5, 100, 100)]),
    # progress resumes: a closed stall (end = the first sweep without the episode)
    *_rows("closed-stall", [*((t, 5, 100) for t in range(0, 120, 20)), (120, 50, 100), (140, 100, 100)]),
]
EDGE_COMMITS: list[tuple[str, float | None, int]] = [
    *(("stall-then-silent", float(t), 5) for t in range(0, 101, 20)),
    ("commit-without-time", None, 5),
    ("loss-silent-owner", 0.0, 5),
]


def _edge_frames(spark: SparkSession) -> tuple[DataFrame, DataFrame]:
    enriched = enrich_series(prepare_series(cases_df(spark, [EDGE_ROWS]))).localCheckpoint()
    recs = spark.createDataFrame(
        [{"cluster": "c", "group_id": g, "topic": "t", "partition": 0, "t": _t(t), "offset": o, "seq": i}
         for i, (g, t, o) in enumerate(EDGE_COMMITS)], COMMIT_SCHEMA)
    return enriched, recs


@pytest.mark.parametrize("with_commits", [True, False])
def test_edge_cases(spark: SparkSession, with_commits: bool) -> None:
    enriched, recs = _edge_frames(spark)
    want = _check(spark, enriched, recs if with_commits else None, stall=30.0, stop=45.0)
    by_group: dict[str, list[tuple[Any, ...]]] = {}
    for r in want:
        by_group.setdefault(r[1], []).append(r)
    t0_us = _micros(_t(0.0) or 0.0) or 0
    assert [r[5] - t0_us for r in by_group["round-half-up"]] == [10_001_000]
    assert "open-transaction" not in by_group
    assert sorted(r[4] for r in by_group["loss-and-stop"]) == ["retention_loss", "stop"]
    assert [(r[7], r[10][-39:]) for r in by_group["loss-and-stop"] if r[4] == "retention_loss"] == [
        ("critical", "never processed (no consumer held them)")]
    assert [(r[4], r[7]) for r in by_group["standalone-at-edge"]] == [("retention_loss", "warning")]
    losses = [r for r in by_group["loss-twice"] if r[4] == "retention_loss"]
    assert [r[7] for r in losses] == ["warning", "warning", "warning"]
    assert losses[0][10].endswith("lost unless its consumer had already fetched them")
    assert [(r[4], r[7]) for r in by_group["loss-then-unowned"] if r[4] == "retention_loss"] == [
        ("retention_loss", "critical")]
    assert [r[4] for r in by_group["stall-then-unowned"]] == ["stall"]
    assert [r[4] for r in by_group["duplicate-sweep"]] == ["stall"]
    assert sorted(r[6] is None for r in by_group["loss-twice"]) == [False, False, True]
    assert [r[6] - t0_us for r in by_group["closed-stall"]] == [120_000_000]
    assert [r[10] for r in by_group["quarter-duration"]] == [
        "no commit progress for 120.3 s with lag pending (owner still assigned)"]
    silent_loss = [r[7] for r in by_group["loss-silent-owner"] if r[4] == "retention_loss"]
    assert silent_loss == (["critical"] if with_commits else ["warning"])
    if with_commits:
        assert [r[4] for r in by_group["stall-then-silent"]] == ["stall"]
        assert [(r[4], r[10][-28:]) for r in by_group["commit-without-time"]] == [
            ("stop", "(owner assigned, no commits)")]
    else:
        assert [r[4] for r in by_group["commit-without-time"]] == ["stall"]


def test_silent_from_exactly_stop_after_s(spark: SparkSession) -> None:
    # the last commit at t=20 (a tie with the sweep): at t=65 exactly 45 s ago (silent, ≥), at
    # t=64.9 not yet; the stall crossed 30 s first, so the run stays a stall; with stall after
    # 70 s it crosses a threshold first at t=65, as a stop
    rows = _rows("g", [(0, 5, 100), (20, 5, 100), (40, 5, 100), (64.9, 5, 100), (65, 5, 100)])
    enriched = enrich_series(prepare_series(cases_df(spark, [rows]))).localCheckpoint()
    recs = spark.createDataFrame([{"cluster": "c", "group_id": "g", "topic": "t", "partition": 0, "t": _t(20.0),
                                   "offset": 5, "seq": 0}], COMMIT_SCHEMA)
    series, keys = series_arrays(enriched)
    lct, known = last_commit_t(series, _commit_arrays(recs, keys))
    # known from the key's first record on (t=20): the sweep before it is judged as a step ending
    # before that record would judge it
    assert known.tolist() == [False, True, True, True, True]
    np.testing.assert_array_equal(lct, [math.nan, _t(20.0), _t(20.0), _t(20.0), _t(20.0)])
    assert [r[4] for r in _check(spark, enriched, recs, stall=30.0, stop=45.0)] == ["stall"]
    assert [r[4] for r in _check(spark, enriched, recs, stall=70.0, stop=45.0)] == ["stop"]


def test_empty_chunk(spark: SparkSession) -> None:
    enriched, recs = _edge_frames(spark)
    series, keys = series_arrays(enriched)
    empty: Series = series.take(np.zeros(series.n, bool))
    commits = _commit_arrays(recs, keys)
    assert episodes(empty, commits, stall_after_s=1.0, stop_after_s=1.0).n == 0
    assert episodes(empty, None, stall_after_s=1.0, stop_after_s=1.0).n == 0
    assert commit_marker(empty, commits).shape == (0,)
    lct, known = last_commit_t(empty, commits)
    assert lct.shape == known.shape == (0,)
    assert isinstance(episodes(series, None, stall_after_s=1e9, stop_after_s=1e9), Found)


# --------------------------------------------------------------------------------------------
# Spark's number formats
# --------------------------------------------------------------------------------------------

def _format_values(rng: np.random.Generator) -> list[float]:
    ties = [k / 2000 for k in range(-400, 400)]                                  # x.xxx5 decimals
    epoch = [_t(float(k) / 10_000 + 1000.0) or 0.0 for k in rng.integers(0, 10**6, 400)]
    return [*ties, *epoch, *(float(v) for v in rng.normal(0, 1e4, 400)), *(float(v) for v in rng.random(200)),
            0.15, 0.35, 123456.45, 1.0005, -0.0, 0.0, 5e-324, 1e-7, 1e300, -1e300, 2.0**52 + 0.5]


def test_spark_round(spark: SparkSession) -> None:
    vals = [*_format_values(np.random.default_rng(5)), 1e23, math.inf, -math.inf, math.nan]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(vals)], "i int, x double")
    want = [r.r for r in df.select("i", F.round("x", 3).alias("r")).orderBy("i").collect()]
    got = spark_round(np.array(vals), 3)
    for v, g, w in zip(vals, got, want, strict=True):
        assert (math.isnan(g) and math.isnan(w)) or (g == w and math.copysign(1, g) == math.copysign(1, w)), (v, g, w)


def test_java_fixed_is_sparks_format(spark: SparkSession) -> None:
    # (1e23: Java 17's Double.toString is "9.999999999999999E22", not the shortest "1e23", so
    # its %.1f is 99999999999999990000000.0; durations never get there)
    vals = [*_format_values(np.random.default_rng(6)), math.inf, -math.inf, math.nan]
    df = spark.createDataFrame([(i, v) for i, v in enumerate(vals)], "i int, x double")
    want = [r.f for r in df.select("i", F.format_string("%.1f", "x").alias("f")).orderBy("i").collect()]
    got = [java_fixed(v, 1) for v in vals]
    assert got == want


def test_every_kind_was_produced(spark: SparkSession) -> None:
    # the random cases exercise every kind of episode: open, closed, carried from the state,
    # critical, and each reason
    seen: Counter[str] = Counter()
    split_us = _micros(_t(SPLIT_S) or 0.0) or 0
    for seed in SEEDS:
        for with_commits in (True, False):
            for r in _case(spark, seed, with_commits):
                kind, start, end, severity, detail = r[4], r[5], r[6], r[7], r[10]
                seen[f"{kind} open" if end is None else f"{kind} closed"] += 1
                seen[f"{kind} {severity}"] += 1
                if start is not None and start < split_us:
                    seen[f"{kind} from the state"] += 1
                for why in ("no owner", "owner assigned, no commits", "owner still assigned", sref.NEVER_COMMITTED):
                    if kind != "retention_loss" and detail.endswith(f"({why})"):
                        seen[f"{kind} {why}"] += 1
    for kind in ("stall", "stop", "retention_loss"):
        for what in ("open", "closed", "from the state", "critical"):
            assert seen[f"{kind} {what}"] > 0, (kind, what, seen)
    for label in ("stall warning", "stall owner still assigned", "stop no owner", "stop owner assigned, no commits",
                  f"stall {sref.NEVER_COMMITTED}", "retention_loss warning"):
        assert seen[label] > 0, (label, seen)
