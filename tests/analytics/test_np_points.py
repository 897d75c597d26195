"""The numpy rewind point events (lagscope.analytics.np_points.point_events) against Spark's
sref.transform_point_events on the same enriched series (two incremental steps, the second
seeded by the first's state rows), with and without a random commit stream, and on small
hand-written edge cases.

Skips are no longer compared with a Spark statement: the reference encoded the old size rule
(a jump > ``skip_min_messages`` and > ``skip_factor`` × the largest rate ever seen), which the
evidence-based rules replaced (docs/analytics.md, "Definitions"); they are tested against
hand-computed behavioural cases through a whole step (test_skips.py) and, for the advances the
per-partition pass hands them, below."""

from __future__ import annotations

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
from lagscope.analytics.np_points import Advances, advances, point_events

pytestmark = pytest.mark.spark

COMMITS_SCHEMA = "cluster string, group_id string, topic string, partition int, t double, offset long, seq long"
PARAMS: list[dict[str, Any]] = [{}, {"margin_s": 3.0}]

Row = tuple[Any, ...]


def _spark_rows(df: DataFrame, keys: list[Row]) -> list[Row]:
    number = {k: i for i, k in enumerate(keys)}
    rows = df.select(*KEY, "kind", F.unix_micros("start_ts").alias("s"), F.unix_micros("end_ts").alias("e"),
                     "severity", "magnitude", "unit", "detail").collect()
    return sorted(((number[(r.cluster, r.group_id, r.topic, r.partition)], r.kind, r.s, r.e, r.severity,
                    r.magnitude, r.unit, r.detail) for r in rows), key=_order)


def _np_rows(f: Found) -> list[Row]:
    # the table's timestamps: cast(seconds · 1e6 as long) truncates (as int() does)
    return sorted(((int(f.key[i]), f.kind[i], int(f.start_t[i] * 1e6), int(f.end_t[i] * 1e6), f.severity[i],
                    float(f.magnitude[i]), f.unit[i], f.detail[i]) for i in range(f.n)), key=_order)


def _order(r: Row) -> Row:
    return (r[0], r[1], r[2], r[3], r[7])


def _assert_same(got: list[Row], want: list[Row]) -> None:
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want, strict=True):
        assert g[:5] == w[:5], (g, w)
        assert g[6:] == w[6:], (g, w)
        assert g[5] == pytest.approx(w[5], rel=1e-9, abs=0.0), (g, w)


def _commits_df(spark: SparkSession, rows: list[Row]) -> DataFrame:
    return spark.createDataFrame(rows, COMMITS_SCHEMA)


def _commits_arrays(rows: list[Row], keys: list[Row]) -> Commits:
    """Commit rows ``(cluster, group, topic, partition, t, offset, seq)`` → :class:`Commits`
    numbered as ``keys`` (commits of other keys dropped), in (key, t, seq) order."""
    number = {k: i for i, k in enumerate(keys)}
    mine = sorted((number[r[:4]], r[4], r[5], r[6]) for r in rows if r[:4] in number)
    cols = list(zip(*mine, strict=True)) if mine else [[], [], [], []]
    return Commits(key=np.array(cols[0], np.int64), t=np.array(cols[1], np.float64),
                   offset=np.array(cols[2], np.int64), seq=np.array(cols[3], np.int64))


def _random_commits(rng: np.random.Generator, s: Series, keys: list[Row]) -> list[Row]:
    """Per key: commits between its sweeps (near the committed offsets, some going back, some
    jumping past the end), some at a sweep's exact time, a few before the step and after it,
    a few at the same time as another commit; seq increasing with t. Positive jumps past
    everything committed before are made distinct per key (``max_by`` ties are undefined in
    Spark)."""
    out: list[Row] = []
    seq0 = 0
    for k, kt in enumerate(keys):
        idx = np.flatnonzero(s.key == k)
        t = s.t[idx]
        cs: list[tuple[float, int]] = []
        for i in range(len(idx)):
            if i > 0:
                for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
                    cs.append((float(rng.uniform(t[i - 1], t[i])), _offset_near(rng, s, int(idx[i]))))
            if rng.random() < 0.3:
                cs.append((float(t[i]), int(s.committed[idx[i]]) if s.committed_ok[idx[i]]
                           else _offset_near(rng, s, int(idx[i]))))
        if len(idx):
            for _ in range(int(rng.integers(0, 3))):  # before the step, after it
                cs.append((float(t[0] - rng.uniform(0, 40)), _offset_near(rng, s, int(idx[0]))))
            for _ in range(int(rng.integers(0, 2))):
                cs.append((float(t[-1] + rng.uniform(0, 5)), _offset_near(rng, s, int(idx[-1]))))
        cs = [(round(ct * 1e6) / 1e6, o) for ct, o in cs]  # microseconds, as commit_records has them
        if cs and rng.random() < 0.5:
            dup = cs[int(rng.integers(0, len(cs)))]
            cs.append((dup[0], max(0, dup[1] + int(rng.integers(-50, 50)))))
        cs.sort(key=lambda c: c[0])
        # distinct positive jumps per key
        top: int | None = None
        used: set[int] = set()
        for n, (ct, o) in enumerate(cs):
            if top is not None and o > top:
                while o - top in used:
                    o += 1
                used.add(o - top)
            top = o if top is None else max(top, o)
            out.append((*kt, ct, o, seq0 + n))
        seq0 += len(cs) + 7
    return out


def _offset_near(rng: np.random.Generator, s: Series, i: int) -> int:
    """A commit's offset near row ``i``'s committed offset: mostly a little ahead, sometimes
    back (a rewind), sometimes past the end (a reset to latest)."""
    base = int(s.committed[i]) if s.committed_ok[i] else int(s.end[i]) // 2
    u = rng.random()
    if u < 0.15:
        return max(0, base - int(rng.integers(1, 300)))  # goes back
    if u < 0.25:
        return int(s.end[i]) + int(rng.integers(0, 500))  # jumps past the end
    return max(0, base + int(rng.integers(-5, 40)))


def _tally(rows: list[Row], counts: dict[str, int], prefix: str) -> None:
    for r in rows:
        timed = "exact" if r[2] == r[3] else "interval"
        counts[f"{prefix}{r[1]}:{timed}"] = counts.get(f"{prefix}{r[1]}:{timed}", 0) + 1


@pytest.mark.parametrize(("seed", "n_keys"), [(1, 10), (2, 18), (3, 24), (4, 30)])
def test_point_events_match_spark(spark: SparkSession, seed: int, n_keys: int) -> None:
    # random series with stalls, rewinds, resets to latest, re-created topics, retention
    # overruns, missing commits/owners over two steps; a random commit stream
    rng = np.random.default_rng(seed)
    steps = two_steps(spark, random_cases(rng, n_keys, 30), split_s=150.0)
    enriched = steps.enriched.localCheckpoint()
    s, keys = series_arrays(enriched)
    assert s.is_state.any()
    rows = _random_commits(rng, s, keys)
    # commits of a key without series rows: Spark finds nothing for it, the arrays drop it
    extra = [("c", "gx", "t", 999, 100.0 + i, 1000 - 10 * i, i) for i in range(4)]
    cdf = _commits_df(spark, rows + extra).localCheckpoint()
    c = _commits_arrays(rows, keys)
    counts: dict[str, int] = {}
    for params in PARAMS:
        for with_commits in (False, True):
            want = _spark_rows(sref.transform_point_events(
                enriched, commits=cdf if with_commits else None, **params), keys)
            got = _np_rows(point_events(s, c if with_commits else None, **params))
            _assert_same(got, want)
            _tally(got, counts, "c:" if with_commits else "s:")
    # every kind of row occurs: sweep rewinds (kept, and dropped for a commit rewind), commit
    # rewinds
    assert counts.get("s:rewind:interval", 0) > counts.get("c:rewind:interval", 0) > 0, counts
    assert counts.get("c:rewind:exact", 0) > 0, counts
    # commits going back that the end drop explains (rebased) occur
    cj = sref._commit_jumps(cdf, enriched)
    assert cj.where(F.col("rebased") & (F.col("offset") < F.col("prev_offset"))).count() > 0


P: dict[str, Any] = {}
_T0 = T0.timestamp()


def _case(spark: SparkSession, sweeps: list[Row], commits: list[tuple[float, int]], *, split_s: float = -1e9,
          **params: Any) -> tuple[list[Row], list[Row], Series, list[Row]]:
    """One key's sweeps ``(t, committed, end, log_start)`` and commits ``(t, offset)`` (seq in
    list order): (numpy rows, Spark rows, the series, its keys)."""
    steps = two_steps(spark, offsets_rows(sweeps, group="g"), split_s=split_s)
    s, keys = series_arrays(steps.enriched)
    rows = [("c", "g", "t", 0, _T0 + t, o, n) for n, (t, o) in enumerate(commits)]
    c = _commits_arrays(rows, keys)
    p = {**P, **params}
    want = _spark_rows(sref.transform_point_events(steps.enriched, commits=_commits_df(spark, rows), **p), keys)
    return _np_rows(point_events(s, c, **p)), want, s, keys


def _brief(rows: list[Row]) -> list[Row]:
    return [(r[1], r[2] / 1e6 - _T0, r[3] / 1e6 - _T0, r[5]) for r in rows]


def test_commit_at_a_sweeps_time(spark: SparkSession) -> None:
    # the commit at t=20 sorts before the sweep at t=20: its log start is the one seen before
    # (0, not 550): 600 − max(300, 0) = 300. The sweep rewind 600 → 580 in [10, 20] is that one
    sweeps = [(0, 500, 1000, 0), (10, 600, 1100, 0), (20, 580, 1200, 550), (30, 700, 1300, 550)]
    got, want, _, _ = _case(spark, sweeps, [(0, 500), (10, 600), (15, 600), (20, 300), (30, 700)])
    _assert_same(got, want)
    assert _brief(got) == [("rewind", 20.0, 20.0, 300.0)]


def test_rebased_commit_seen_by_the_sweep_at_its_time(spark: SparkSession) -> None:
    # the end falls 1100 → 50 (topic re-created), seen by the sweep at t=20: the commit of 10
    # at t=20 (before that sweep) is in the new log, no rewind; 10 → 5 at t=25 is one
    sweeps = [(0, 900, 1000, 0), (10, 1000, 1100, 0), (20, 30, 50, 0), (30, 40, 60, 0)]
    got, want, _, _ = _case(spark, sweeps, [(0, 900), (10, 1000), (20, 10), (25, 5), (30, 40)])
    _assert_same(got, want)
    assert _brief(got) == [("rewind", 25.0, 25.0, 5.0)]


def test_step_range_and_commits_before_it(spark: SparkSession) -> None:
    # step two (sweeps t=30, 40) after a state row at t=20: rewinds at t=12 and t=20 (= lo) are
    # the previous step's; 700 → 650 at t=30 is one (and explains the sweep rewind in [20, 30]);
    # two commits at t=40 = hi in seq order (800, then 790): a rewind of 10; t=45 is past hi
    sweeps = [(0, 500, 1000, 0), (10, 600, 1000, 0), (20, 700, 1000, 0), (30, 650, 1000, 0), (40, 800, 1000, 0)]
    commits = [(5, 550), (12, 400), (20, 350), (25, 700), (30, 650), (40, 800), (40, 790), (45, 100)]
    got, want, s, _ = _case(spark, sweeps, commits, split_s=25.0)
    assert s.is_state.any()
    _assert_same(got, want)
    assert _brief(got) == [("rewind", 30.0, 30.0, 50.0), ("rewind", 40.0, 40.0, 10.0)]
    # without commits: the sweep rewind
    assert _brief(_np_rows(point_events(s, None, **P))) == [("rewind", 20.0, 30.0, 50.0)]
    # commits of a key number the chunk has no rows of are ignored
    c = Commits(key=np.array([1, 1], np.int64), t=np.array([30.0, 35.0]) + _T0,
                offset=np.array([900, 100], np.int64), seq=np.array([0, 1], np.int64))
    assert point_events(s, c, **P).n == 1  # the sweep rewind, not explained by key 1's commit


def test_advances_per_commit_and_per_sweep(spark: SparkSession) -> None:
    # consuming 10/s with a growing backlog (busy 10 → 20 and 20 → 30: capacity 10/s), then a
    # jump to 5000 past the end 4000 seen at t=30. With the commit stream the advance is the
    # commit at t=36 (3690 past 1310, committed at t=31: its interval is 5 s); the commit of 10
    # at t=31 is what 10/s does in 1 s, and the earlier ones came before any capacity was shown:
    # not handed on. From the sweeps: 3700 in 30 → 40
    sweeps = [(0, 1000, 1000, 0), (10, 1100, 2000, 0), (20, 1200, 3000, 0), (30, 1300, 4000, 0),
              (40, 5000, 5000, 0)]
    commits = [(0, 1000), (10, 1100), (20, 1200), (30, 1300), (31, 1310), (36, 5000)]
    _, _, s, keys = _case(spark, sweeps, commits)
    c = _commits_arrays([("c", "g", "t", 0, _T0 + t, o, n) for n, (t, o) in enumerate(commits)], keys)

    def brief(a: Advances) -> list[Row]:
        return [(a.t0[i] - _T0, a.t1[i] - _T0, int(a.advance[i]), float(a.capacity[i]), bool(a.exact[i]),
                 bool(a.at_end[i]), bool(a.from_lost[i]), bool(a.unowned[i])) for i in range(a.n)]

    assert brief(advances(s, c)) == [(31.0, 36.0, 3690, 10.0, True, True, False, False)]
    assert brief(advances(s, None)) == [(30.0, 40.0, 3700, 10.0, False, True, False, False)]


def test_empty_chunk() -> None:
    s = _empty_series()
    assert point_events(s, None, **P).n == 0
    assert advances(s, None).n == 0
    c = Commits(key=np.array([0], np.int64), t=np.array([1.0]), offset=np.array([5], np.int64),
                seq=np.array([0], np.int64))
    assert point_events(s, c, **P).n == 0


def _empty_series() -> Series:
    fields: dict[str, Any] = {}
    for name, f in Series.__dataclass_fields__.items():
        kind = str(f.type)
        fields[name] = np.array([], np.float64 if kind == "F64" else np.int64 if kind == "I64" else bool)
    return Series(**fields)
