"""Lag in seconds agrees everywhere: the same sweeps fed to the collector's live metrics
(``lagscope_partition_lag_seconds``, what Grafana shows) and to the analytics' step (the
``lag_trends`` table, what the app and the alerts read), in one batch and sweep by sweep with the
carried state, give the same values, the same lower-bound flags and the same offset lags.

The sweeps' rows come from the sweep's own row builder (``build_snapshot``: lag and lag_basis as
the collector computes them); the analytics are not told which groups read committed (no
``read_committed_groups``): they read it from ``lag_basis``. One sweep per minute, so that every
sweep is a minute row of the analytics.
"""

from __future__ import annotations

import datetime as dt
import itertools
import random
from dataclasses import dataclass, field

import pyarrow as pa
import pytest
from prometheus_client import CollectorRegistry

from lagscope.analytics import step
from lagscope.collector.metrics import LagCollector
from lagscope.collector.model import Snapshot
from lagscope.collector.sweep import _Group, _Raw, build_snapshot
from lagscope.config import AnalyticsConfig, ClusterConfig
from lagscope.schema import MEMBERS, OFFSETS

T0 = dt.datetime(2026, 6, 1, 12, 0, 30, tzinfo=dt.UTC)
CLUSTER = ClusterConfig(name="c1", bootstrap_servers=["h:1"], read_committed_groups=["payments"])  # type: ignore[arg-type]
TOPIC = "t"


@dataclass
class Sweep:
    """One sweep: per partition its (high watermark, last stable offset, log start) (None: the
    ListOffsets answer is missing), per (group, partition) the committed offset."""

    ends: dict[int, tuple[int | None, int | None, int | None]]
    commits: dict[tuple[str, int], int]
    group_errors: list[str] = field(default_factory=list)


def _snapshot(i: int, sweep: Sweep) -> Snapshot:
    raw = _Raw()
    groups: dict[str, _Group] = {}
    for (gid, p), committed in sweep.commits.items():
        g = groups.setdefault(gid, _Group(gid, 1, state="Stable", described=True, offsets={}))
        assert g.offsets is not None
        g.offsets[(TOPIC, p)] = (committed, None, "")
    for gid in sweep.group_errors:
        groups[gid] = _Group(gid, 1, error="OffsetFetch: CoordinatorLoadInProgressError")
    raw.groups = groups
    raw.ends = {(TOPIC, p): list(e) for p, e in sweep.ends.items()}
    return build_snapshot(CLUSTER, raw, T0 + dt.timedelta(minutes=i), 5.0, "test:1")


Values = dict[tuple[int, str, int], tuple[int | None, float | None, bool | None]]


def _collector_values(snapshots: list[Snapshot], history_points: int) -> Values:
    """(sweep, group, partition) → (offset lag, lag seconds, is lower bound) as /metrics serves them."""
    registry = CollectorRegistry()
    collector = LagCollector(registry=registry, history_points=history_points)
    out: Values = {}
    for i, snap in enumerate(snapshots):
        collector.update(snap)
        for row in snap.offsets:
            g, p = row["group_id"], row["partition"]
            labels = {"cluster": "c1", "group": g, "topic": TOPIC, "partition": str(p)}
            lag = registry.get_sample_value("kafka_consumergroup_lag", {
                "cluster": "c1", "consumergroup": g, "topic": TOPIC, "partition": str(p)})
            seconds = registry.get_sample_value("lagscope_partition_lag_seconds", labels)
            lower = registry.get_sample_value("lagscope_partition_lag_seconds_is_lower_bound", labels)
            out[(i, g, p)] = (None if lag is None or lag < 0 else int(lag), seconds,
                              None if lower is None else lower == 1.0)
    return out


def _lake_rows(snap: Snapshot) -> pa.Table:
    rows = snap.offsets.to_arrow(OFFSETS.schema)  # type: ignore[attr-defined]
    rows = rows.append_column("cluster", pa.array(["c1"] * rows.num_rows))
    return rows.select(step.READ_COLUMNS["offsets"])


def _no_members() -> pa.Table:
    return MEMBERS.schema.append(pa.field("cluster", pa.string())).empty_table().select(step.READ_COLUMNS["members"])


def _trend_values(tables: dict[str, pa.Table], out: Values) -> None:
    trends = tables["lag_trends"]
    for r in trends.filter(pa.compute.is_valid(trends.column("partition"))).to_pylist():
        i = round((r["window_start"] - T0.replace(second=0)).total_seconds() / 60)
        out[(i, r["group_id"], r["partition"])] = (r["lag_last"], r["lag_seconds"], r["lag_seconds_is_lower_bound"])


def _analytics_values(snapshots: list[Snapshot], history_points: int, *, incremental: bool) -> Values:
    """The same as the analytics' ``lag_trends`` partition rows: one batch step, or one step per
    sweep carrying the state (as ``lagscope run`` does minute by minute)."""
    settings = AnalyticsConfig()
    out: Values = {}
    if not incremental:
        done = step.run_step(step.StepInputs(offsets=pa.concat_tables([_lake_rows(s) for s in snapshots]),
                                             members=_no_members(), commits=None, group_events=None, state={}),
                             settings=settings, history_points=history_points, as_of=T0, with_state=False)
        _trend_values(done.tables, out)
        return out
    state: dict[str, pa.Table] = {}
    for snap in snapshots:
        done = step.run_step(step.StepInputs(offsets=_lake_rows(snap), members=_no_members(), commits=None,
                                             group_events=None, state=state), settings=settings,
                             history_points=history_points, as_of=T0)
        state = done.state
        _trend_values(done.tables, out)
    return out


def _agree(sweeps: list[Sweep], history_points: int, *, batch: bool = True) -> Values:
    snapshots = [_snapshot(i, s) for i, s in enumerate(sweeps)]
    live = _collector_values(snapshots, history_points)
    compared = [_analytics_values(snapshots, history_points, incremental=True)]
    if batch:
        compared.append(_analytics_values(snapshots, history_points, incremental=False))
    for analysed in compared:
        assert set(analysed) == set(live)
        for key, (lag, seconds, lower) in live.items():
            got_lag, got_seconds, got_lower = analysed[key]
            assert got_lag == lag, key
            assert (got_seconds is None) == (seconds is None), (key, got_seconds, seconds)
            if seconds is not None:
                # the collector's seconds are epoch floats of the sweep's datetime, the analytics' µs / 1e6
                assert got_seconds == pytest.approx(seconds, abs=1e-6), key
                assert got_lower == lower, key
    return live


def _steady(n: int, *, rate: int, committed: int, group: str = "g") -> list[Sweep]:
    return [Sweep({0: (1000 + rate * i, 1000 + rate * i, 0)}, {(group, 0): committed}) for i in range(n)]


def test_caught_up() -> None:
    # every sweep's commit at the end: 0 s, never a lower bound
    sweeps = [Sweep({0: (100 * i, 100 * i, 0)}, {("g", 0): 100 * i}) for i in range(5)]
    live = _agree(sweeps, 3)
    assert {v for k, v in live.items()} == {(0, 0.0, False)}


def test_lag_older_than_the_history() -> None:
    # the end rises every sweep, the commit stays at 1000: once the rise past 1000 is older than
    # the newest 3 points, the value is "at least" (a lower bound), and it never decreases
    live = _agree(_steady(8, rate=100, committed=1000), 3)
    values = [live[(i, "g", 0)] for i in range(1, 8)]
    assert [v[2] for v in values] == [False, False, False, True, True, True, True]
    assert all(b[1] >= a[1] for a, b in itertools.pairwise(values))  # type: ignore[operator]


def test_end_offset_not_moving() -> None:
    # 30 messages written between the first two sweeps, then an idle topic: the lag in seconds
    # keeps growing with the idle time, from the same interpolated produce time
    sweeps = [Sweep({0: (end, end, 0)}, {("g", 0): 100}) for end in (100, 130, 130, 130, 130)]
    live = _agree(sweeps, 3)
    assert [live[(i, "g", 0)][1] for i in range(1, 5)] == pytest.approx([59.0, 119.0, 179.0, 239.0])


def test_retention_jump_and_log_start() -> None:
    # the log start jumps past the committed offset (retention deleted unconsumed messages): the
    # lag in seconds still dates the message at the committed offset, in both
    sweeps = [Sweep({0: (1000 + 100 * i, 1000 + 100 * i, 0 if i < 3 else 1200)}, {("g", 0): 1050})
              for i in range(6)]
    _agree(sweeps, 4)


def test_read_committed_measures_against_the_last_stable_offset() -> None:
    # an open transaction holds the LSO below the HW: "payments" (read_committed) is measured
    # against the LSO's history, "g" against the HW's, on the same partition
    sweeps = []
    for i in range(6):
        hw, lso = 1000 + 100 * i, 1000 + 100 * min(i, 3)  # the LSO stops at 1300 (open transaction)
        sweeps.append(Sweep({0: (hw, lso, 0)}, {("g", 0): 1250, ("payments", 0): 1250}))
    live = _agree(sweeps, 10)
    assert live[(5, "payments", 0)][0] == 50  # 1300 - 1250, not 1500 - 1250
    assert live[(5, "g", 0)][0] == 250


def test_an_unknown_or_falling_end_restarts_the_history() -> None:
    # sweep 2 could not read the end (no leader); sweep 4 sees it lower (the topic re-created)
    ends = [(1000, 1000, 0), (1100, 1100, 0), (None, None, None), (1300, 1300, 0), (50, 50, 0), (80, 80, 0)]
    commits = [900, 900, 900, 900, 10, 10]
    sweeps = [Sweep({0: e}, {("g", 0): c}) for e, c in zip(ends, commits, strict=True)]
    live = _agree(sweeps, 10)
    assert live[(2, "g", 0)] == (None, None, None)  # no end: no offset lag, no lag in seconds
    assert live[(3, "g", 0)][2] is True  # the history before the gap is gone: "at least"


def _random_sweeps(rng: random.Random, n: int, *, rewinds: bool) -> list[Sweep]:
    hw = {p: rng.randrange(0, 1000) for p in range(3)}
    open_txn = {p: 0 for p in range(3)}
    log_start = dict.fromkeys(range(3), 0)
    committed = {(g, p): max(0, hw[p] - rng.randrange(0, 300)) for g in ("g", "payments") for p in range(3)}
    sweeps = []
    for _ in range(n):
        ends: dict[int, tuple[int | None, int | None, int | None]] = {}
        for p in range(3):
            r = rng.random()
            if r < 0.03:
                hw[p] = rng.randrange(0, 100)  # the topic re-created
            elif r < 0.6:
                hw[p] += rng.randrange(0, 300)
            open_txn[p] = rng.randrange(0, 50) if rng.random() < 0.3 else 0
            if rng.random() < 0.1:
                log_start[p] = min(hw[p], log_start[p] + rng.randrange(0, 400))  # retention
            lso = hw[p] - open_txn[p]
            ends[p] = (None, None, None) if rng.random() < 0.04 else (hw[p], None if rng.random() < 0.05 else lso,
                                                                      log_start[p])
        for key in committed:
            end = hw[key[1]] - (open_txn[key[1]] if key[0] == "payments" else 0)
            if rewinds and rng.random() < 0.08:
                committed[key] = max(0, committed[key] - rng.randrange(1, 400))
            elif rng.random() < 0.5:
                committed[key] = min(end, committed[key] + rng.randrange(0, 400))
            committed[key] = min(committed[key], max(0, end))
        errors = ["other"] if rng.random() < 0.05 else []
        sweeps.append(Sweep(ends, dict(committed), errors))
    return sweeps


@pytest.mark.parametrize("history_points", [2, 5, 120])
@pytest.mark.parametrize("seed", range(6))
def test_random_sweeps_agree(seed: int, history_points: int) -> None:
    # without rewinds: the collector, the batch and the step-by-step analytics all agree
    _agree(_random_sweeps(random.Random(seed), 25, rewinds=False), history_points)


@pytest.mark.parametrize("seed", range(4))
def test_random_sweeps_with_rewinds_agree_sweep_by_sweep(seed: int) -> None:
    # with rewinds the collector and a step per sweep still agree exactly (both forget the points at
    # or below the committed offset at each sweep); a batch over many sweeps keeps them and may
    # interpolate where those give "at least" (lagscope.lag's module doc)
    _agree(_random_sweeps(random.Random(100 + seed), 25, rewinds=True), 4, batch=False)
