"""The numpy commit gaps, gap baselines and commit_gap anomalies (lagscope.analytics.np_gaps)
against their Spark references (sref.commit_gaps, gap_baselines, transform_gap_anomalies) on
the same input: Spark's enriched series of a random second step (seeded by the first step's
state rows), random commit records and random carried samples; and on small hand-written edges."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import spark_reference as sref
from analytics_builders import T0, offsets_rows
from enriched_arrays import random_cases, series_arrays, two_steps
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from spark_series import KEY

from lagscope.analytics.kseries import Commits, Found, Series
from lagscope.analytics.np_gaps import Baselines, Gaps, commit_gaps, gap_anomalies, gap_baselines

pytestmark = pytest.mark.spark

_KEY_SCHEMA = "cluster string, group_id string, topic string, partition int"
_COMMITS = f"{_KEY_SCHEMA}, t double, offset long, seq long"
_SAMPLES = f"{_KEY_SCHEMA}, samples array<struct<t:double,gap_s:double>>"
_GAPS = f"{_KEY_SCHEMA}, t double, gap_s double"
_E0 = T0.timestamp()  # the epoch seconds of the builders' t = 0

Key = tuple[Any, ...]
#: small thresholds, so that anomalies occur: (k, mad_floor_s, min_gap_s, min_samples, max_gap_s)
_PARAMS = [(1.5, 0.5, 1.0, 2, 1e9), (1.0, 0.5, 2.0, 3, 45.0)]


@dataclass
class Numbering:
    """Key tuples ↔ key numbers: the series' keys first (as series_arrays numbers them), then
    keys the series lacks (commits or samples only), numbered after them."""

    keys: list[Key]

    def __post_init__(self) -> None:
        self.number = {k: i for i, k in enumerate(self.keys)}

    def add(self, key: Key) -> int:
        if key not in self.number:
            self.number[key] = len(self.keys)
            self.keys.append(key)
        return self.number[key]


def _commits(spark: SparkSession, recs: list[tuple[Key, float, int, int]],
             num: Numbering) -> tuple[DataFrame, Commits]:
    """Commit records ``(key, t, offset, seq)`` (t epoch s) as commit_records' frame and as
    :class:`Commits` (ordered by key number, t, seq)."""
    df = spark.createDataFrame([(*k, t, o, q) for k, t, o, q in recs], _COMMITS)
    rows = sorted((num.add(k), t, o, q) for k, t, o, q in recs)
    a = np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.float64)
    return df, Commits(a[0], a[1], np.array([r[2] for r in rows], np.int64), np.array([r[3] for r in rows], np.int64))


def _samples(spark: SparkSession, per_key: dict[Key, list[tuple[float, float]]],
             num: Numbering) -> tuple[DataFrame, Gaps]:
    """A carried samples state (one row per key, ``array<struct<t, gap_s>>``) and as :class:`Gaps`."""
    df = spark.createDataFrame([(*k, [{"t": t, "gap_s": g} for t, g in xs]) for k, xs in per_key.items()], _SAMPLES)
    flat = [(num.add(k), t, g) for k, xs in per_key.items() for t, g in xs]
    return df, Gaps(np.array([r[0] for r in flat], np.int64), np.array([r[1] for r in flat], np.float64),
                    np.array([r[2] for r in flat], np.float64))


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None or (isinstance(a, float) and math.isnan(a)):
        return (a is None or math.isnan(a)) and (b is None or math.isnan(b))
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _same_rows(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], what: str) -> None:
    """Equal row sets: strings and ints exactly, floats within rel 1e-9."""
    assert len(got) == len(want), f"{what}: {len(got)} rows, Spark {len(want)}"
    got, want = sorted(got, key=_sort_key), sorted(want, key=_sort_key)
    for g, w in zip(got, want, strict=True):
        assert len(g) == len(w)
        for x, y in zip(g, w, strict=True):
            if isinstance(y, float) or isinstance(x, float):
                assert _close(x, y), f"{what}: {g} != {w}"
            elif isinstance(y, list):
                assert len(x) == len(y), f"{what}: {g} != {w}"
                assert all(_close(p, q) for pq, qq in zip(x, y, strict=True)
                           for p, q in zip(pq, qq, strict=True)), f"{what}: {g} != {w}"
            else:
                assert x == y, f"{what}: {g} != {w}"


def _sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(round(x, 6) if isinstance(x, float) else repr(x) if isinstance(x, list) else x for x in row)


def _gap_rows(g: Gaps, num: Numbering) -> list[tuple[Any, ...]]:
    return [(*num.keys[k], float(t), float(x)) for k, t, x in zip(g.key, g.t, g.gap_s, strict=True)]


def _spark_gap_rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.select(*KEY, "t", "gap_s").collect()]


def _base_rows(b: Baselines, num: Numbering) -> list[tuple[Any, ...]]:
    s = b.samples
    out = []
    for i, k in enumerate(b.key):  # building the expected rows only
        sel = s.key == k
        out.append((*num.keys[k], float(b.gap_median_s[i]), float(b.gap_mad_s[i]), int(b.gap_n[i]),
                    [(float(t), float(x)) for t, x in zip(s.t[sel], s.gap_s[sel], strict=True)]))
    return out


def _spark_base_rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return [(*(r[c] for c in KEY), r["gap_median_s"], r["gap_mad_s"], r["gap_n"],
             [(x["t"], x["gap_s"]) for x in r["samples"]]) for r in df.collect()]


def _found_rows(f: Found, num: Numbering) -> list[tuple[Any, ...]]:
    start = (f.start_t * 1e6).astype(np.int64)  # _ts: cast(seconds · 1e6 as long)
    end = (f.end_t * 1e6).astype(np.int64)
    out = []
    for i in range(f.n):
        c, g, tp, p = num.keys[f.key[i]]
        anomaly_key = "|".join([str(f.kind[i]), c, g, tp or "", "" if p is None else str(p), str(start[i] // 1000)])
        out.append((c, g, tp, p, f.kind[i], int(start[i]), int(end[i]), f.severity[i], float(f.magnitude[i]),
                    f.unit[i], f.detail[i], anomaly_key))
    return out


def _spark_found_rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in df.select(
        *KEY, "kind", F.unix_micros("start_ts"), F.unix_micros("end_ts"), "severity", "magnitude", "unit", "detail",
        "key").collect()]


def _compare(enriched: DataFrame, s: Series, num: Numbering, commits: tuple[DataFrame, Commits] | None,
             samples: tuple[DataFrame, Gaps] | None, keep: int) -> tuple[int, int]:
    """Gaps, baselines and anomalies (each of _PARAMS) of both implementations; returns (gaps,
    anomalies) counts."""
    sp_gaps = sref.commit_gaps(enriched, None if commits is None else commits[0]).localCheckpoint()
    gaps = commit_gaps(s, None if commits is None else commits[1])
    _same_rows(_gap_rows(gaps, num), _spark_gap_rows(sp_gaps), "gaps")
    sp_base = sref.gap_baselines(sp_gaps, None if samples is None else samples[0], keep=keep).localCheckpoint()
    base = gap_baselines(gaps, None if samples is None else samples[1], len(num.keys), keep)
    _same_rows(_base_rows(base, num), _spark_base_rows(sp_base), "baselines")
    # the next state's samples come sorted by key, t, gap_s
    order = np.lexsort((base.samples.gap_s, base.samples.t, base.samples.key))
    assert (order == np.arange(base.samples.n)).all()
    n_anom = 0
    for k, floor, min_gap, min_n, max_gap in _PARAMS:
        kw = {"k": k, "mad_floor_s": floor, "min_gap_s": min_gap, "min_samples": min_n, "max_gap_s": max_gap}
        found = gap_anomalies(gaps, base, **kw)
        _same_rows(_found_rows(found, num), _spark_found_rows(sref.transform_gap_anomalies(sp_gaps, sp_base, **kw)),
                   f"anomalies {kw}")
        n_anom += found.n
    return gaps.n, n_anom


def _random_commits(rng: np.random.Generator, s: Series, keys: list[Key], split_t: float) -> list[
        tuple[Key, float, int, int]]:
    """Per key several commits at random times over the second step (a few before it, some at
    exactly a sweep's time, some at the same time as another), seq increasing with t; and a key
    with commits only."""
    recs: list[tuple[float, Key]] = []
    hi = float(s.t.max()) + 30.0
    for i, k in enumerate([*keys, ("c", "g-none", "t", 999)]):
        ts = list(split_t - rng.uniform(0, 80, size=int(rng.integers(0, 3))))
        ts += list(rng.uniform(split_t, hi, size=int(rng.integers(3, 14))))
        sweep_t = s.t[s.key == i] if i < len(keys) else np.array([])
        if len(sweep_t):
            ts += list(rng.choice(sweep_t, size=min(len(sweep_t), int(rng.integers(0, 4))), replace=False))
        if ts and rng.random() < 0.5:
            ts.append(ts[int(rng.integers(0, len(ts)))])  # two commits at one time
        recs += [(round(float(t), 3) if rng.random() < 0.7 else float(t), k) for t in ts]
    recs.sort(key=lambda r: r[0])
    offsets: dict[Key, int] = {}
    out = []
    for seq, (t, k) in enumerate(recs):
        offsets[k] = offsets.get(k, 0) + int(rng.integers(0, 30))
        out.append((k, t, offsets[k], 1000 + 7 * seq))
    return out


def _random_samples(rng: np.random.Generator, keys: list[Key], split_t: float) -> dict[Key, list[tuple[float, float]]]:
    """Carried samples of most keys (and of a key without series rows): earlier gaps, some at
    the same time (struct order then by gap_s), some of equal length."""
    out: dict[Key, list[tuple[float, float]]] = {}
    for k in [*keys, ("c", "g-old", "t", 998)]:
        if rng.random() < 0.3:
            continue
        n = int(rng.integers(1, 10))
        ts = split_t - np.round(rng.uniform(1, 400, size=n), 1)
        if n > 2:
            ts[1] = ts[0]
        gs = np.round(rng.uniform(0.5, 30.0, size=n) * 2) / 2
        out[k] = [(float(t), float(g)) for t, g in zip(ts, gs, strict=True)]
    return out


@pytest.mark.parametrize(("seed", "n_keys"), [(1, 10), (2, 17), (3, 24), (4, 30)])
def test_gaps_match_spark_on_random_steps(spark: SparkSession, seed: int, n_keys: int) -> None:
    # sweeps only and with the commit stream, without and with carried samples, every count of
    # samples kept; gaps, baselines and anomalies (both threshold sets) row for row
    rng = np.random.default_rng(seed)
    split_s = 200.0
    steps = two_steps(spark, random_cases(rng, n_keys=n_keys, n_sweeps=30), split_s=split_s)
    enriched = steps.enriched.localCheckpoint()
    s, keys = series_arrays(enriched)
    split_t = _E0 + split_s
    commit_recs = _random_commits(rng, s, keys, split_t)
    sample_sets = _random_samples(rng, keys, split_t)
    counts = {}
    for with_commits in (False, True):
        for with_samples in (False, True):
            num = Numbering(list(keys))
            commits = _commits(spark, commit_recs, num) if with_commits else None
            samples = _samples(spark, sample_sets, num) if with_samples else None
            keep = 4 if with_commits != with_samples else 64
            counts[with_commits, with_samples] = _compare(enriched, s, num, commits, samples, keep)
    # every kind of row occurs in every mode
    print(f"seed {seed}: (gaps, anomalies) by (commits, samples): {counts}")
    for mode, (n_gaps, n_anom) in counts.items():
        assert n_gaps > 0, (mode, counts)
        assert n_anom > 0, (mode, counts)


def _edge_rows() -> list[dict[str, Any]]:
    """Lake rows for the commit-stream edges (step 2 from t = 100).

    p0: state row at 50 (lag 10); sweeps 100 (lag 5), 110 (no commit: lag null), 120 (lag 0),
    130 (lag 10), 140 (lag 0). p1: step 1 only (a state row, no fresh sweep). p3: no state row,
    first sweep at 100 (lag 5)."""
    return (offsets_rows([(40, 0, 10), (50, 0, 10), (100, 5, 10), (110, None, 10), (120, 10, 10), (130, 10, 20),
                          (140, 20, 20)], partition=0)
            + offsets_rows([(40, 0, 10), (50, 0, 10)], partition=1)
            + offsets_rows([(100, 5, 10), (110, 5, 20)], partition=3))


def test_stream_gap_edges(spark: SparkSession) -> None:
    # the lag as of the last sweep *before* the commit (one at the commit's t comes after it; a
    # null lag skipped); the range (state t, last fresh t]; two commits at one time; keys with
    # commits but only a state row, or no series row at all
    steps = two_steps(spark, _edge_rows(), split_s=100.0)
    enriched = steps.enriched.localCheckpoint()
    s, keys = series_arrays(enriched)
    p = {i: ("c", "g", "t", i) for i in range(4)}
    ct = [(0, 40), (0, 50), (0, 60), (0, 100), (0, 115), (0, 120), (0, 125), (0, 131), (0, 131), (0, 140),
          (0, 150), (1, 60), (1, 120), (2, 110), (2, 120), (3, 95), (3, 105)]
    recs = [(p[k], _E0 + t, 10 * i, i) for i, (k, t) in enumerate(ct)]
    num = Numbering(list(keys))
    commits = _commits(spark, recs, num)
    gaps = commit_gaps(s, commits[1])
    got = sorted((num.keys[k][3], round(t - _E0, 6), g) for k, t, g in zip(gaps.key, gaps.t, gaps.gap_s, strict=True))
    assert got == [(0, 60.0, 10.0), (0, 100.0, 40.0), (0, 115.0, 15.0), (0, 120.0, 5.0), (0, 131.0, 0.0),
                   (0, 131.0, 6.0), (0, 140.0, 9.0), (3, 105.0, 10.0)]
    _compare(enriched, s, num, commits, None, 64)


def test_sweep_gap_edges(spark: SparkSession) -> None:
    # from the sweeps: the gap starts at the later of the previous change (a state row's
    # carried one) and the previous row's pending start; a change after a row without a
    # commit (null lag) closes no gap
    rows = offsets_rows([(0, 10, 10), (10, 10, 20), (20, 15, 20), (30, 15, 30), (40, 30, 30), (50, 30, 40),
                         (60, 35, 40), (70, None, 40), (80, 40, 40)])
    steps = two_steps(spark, rows, split_s=15.0)
    enriched = steps.enriched.localCheckpoint()
    s, keys = series_arrays(enriched)
    gaps = commit_gaps(s, None)
    assert [(round(t - _E0, 6), g) for t, g in zip(gaps.t, gaps.gap_s, strict=True)] == [
        (20.0, 10.0), (40.0, 20.0), (60.0, 10.0)]
    _compare(enriched, s, Numbering(list(keys)), None, None, 64)


def test_baseline_and_anomaly_edges(spark: SparkSession) -> None:
    # the threshold is strict (gap = median + k·floor is no anomaly), min_gap_s inclusive,
    # max_gap_s exclusive, too few samples, %.1f rounding half up (12.25 → 12.3), samples tied
    # in t kept by gap_s, even and odd counts; gaps of a key without a baseline are dropped
    k = {n: ("c", "g", "t", i) for i, n in enumerate("ABCDEF")}
    samples = {k["A"]: [(1.0, 10.0), (2.0, 10.0), (3.0, 10.0)],
               k["B"]: [(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (4.0, 1.0)],
               k["C"]: [(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (4.0, 1.0), (5.0, 1.0)],
               k["E"]: [(5.0, 3.0), (5.0, 1.0), (5.0, 2.0), (4.0, 9.0)]}
    gap_list = [("A", 100.0, 12.0), ("A", 101.0, 12.25), ("A", 102.0, 10.0), ("B", 100.0, 4.5), ("B", 101.0, 5.0),
                ("C", 100.0, 1.0), ("C", 101.0, 1.5), ("C", 102.0, 50.0), ("C", 103.0, 49.95), ("D", 100.0, 100.0),
                ("E", 10.0, 30.0), ("F", 100.0, 80.0)]
    num = Numbering([])
    sp_samples, np_samples = _samples(spark, samples, num)
    rows = [(*k[n], t, g) for n, t, g in gap_list]
    sp_gaps = spark.createDataFrame(rows, _GAPS)
    gaps = Gaps(np.array([num.add(k[n]) for n, _, _ in gap_list], np.int64),
                np.array([t for _, t, _ in gap_list]), np.array([g for _, _, g in gap_list]))
    kw = {"k": 2.0, "mad_floor_s": 1.0, "min_gap_s": 5.0, "min_samples": 3, "max_gap_s": 50.0}
    # baselines without F's gaps: its gap has no baseline
    learn = gaps.key != num.number[k["F"]]
    sp_base = sref.gap_baselines(sp_gaps.where(F.col("partition") != 5), sp_samples, keep=2)
    base = gap_baselines(Gaps(gaps.key[learn], gaps.t[learn], gaps.gap_s[learn]), np_samples, len(num.keys), 2)
    _same_rows(_base_rows(base, num), _spark_base_rows(sp_base), "baselines")
    e = num.number[k["E"]]
    assert list(zip(base.samples.t[base.samples.key == e], base.samples.gap_s[base.samples.key == e],
                    strict=True)) == [(5.0, 3.0), (10.0, 30.0)]
    found = gap_anomalies(gaps, base, **kw)
    want = _spark_found_rows(sref.transform_gap_anomalies(sp_gaps, sp_base, **kw))
    _same_rows(_found_rows(found, num), want, "anomalies")
    details = sorted(str(d) for d in found.detail)
    assert "12.3 s between commits with lag pending; this partition's normal is 10.0 s (MAD 0.0 s)" in details
    assert sorted((num.keys[i][3], g) for i, g in zip(found.key, found.magnitude, strict=True)) == [
        (0, 12.25), (1, 5.0), (2, 49.95), (4, 30.0)]
    # nothing at all
    empty = gap_baselines(Gaps.empty(), None, 3)
    assert empty.key.size == 0
    assert empty.samples.n == 0
    assert gap_anomalies(Gaps.empty(), empty, **kw).n == 0


@pytest.mark.parametrize("skewed", [False, True], ids=["padded-rows", "one-long-key"])
def test_gap_baselines_equal_a_plain_median_per_key(skewed: bool) -> None:
    """Both ways :func:`gap_baselines` sorts (a padded matrix of short rows; one sort by key and
    value when one key has far more values than the rest) against ``statistics.median`` per key,
    with ties and carried samples that interleave the new gaps in time."""
    import statistics

    rng = np.random.default_rng(5)
    n_keys = 300
    counts = rng.integers(0, 40, n_keys)
    if skewed:
        counts[7] = 5000
    sk = np.repeat(np.arange(n_keys), counts)
    st = np.concatenate([np.sort(rng.integers(0, 100, c)).astype(float) for c in counts])
    sg = rng.choice([1.0, 2.0, 2.5, 7.0], len(sk)) * rng.integers(1, 3, len(sk))
    gk = np.sort(rng.integers(0, n_keys, 400))
    gt = rng.integers(50, 150, len(gk)).astype(float)
    order = np.lexsort((gt, gk))
    gk, gt = gk[order], gt[order]
    gg = np.round(rng.random(len(gk)) * 8, 1)
    got = gap_baselines(Gaps(gk, gt, gg), Gaps(sk, st, sg), n_keys, keep=64)
    for i, k in enumerate(got.key):
        values = [*sg[sk == k], *gg[gk == k]]
        med = statistics.median(values)
        assert got.gap_median_s[i] == med
        assert got.gap_mad_s[i] == statistics.median([abs(v - med) for v in values])
        assert got.gap_n[i] == len(values)
        # the latest 64 by (t, gap): in key, time, gap order
        both = sorted(zip([*st[sk == k], *gt[gk == k]], values, strict=True))[-64:]
        kept = got.samples.key == k
        assert list(zip(got.samples.t[kept], got.samples.gap_s[kept], strict=True)) == both
    assert set(got.key) == set(sk) | set(gk)
