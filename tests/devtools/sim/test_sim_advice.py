"""The advice table proven on the simulator: a scenario runs against the real broker while the real
collector sweeps it (``__consumer_offsets`` tail on) into a lake; one analytics step (the engine's
own, as each Spark task runs it) turns the lake into the result tables; the ``advice`` rows of the
run's groups are scored against the scenario's ``expect_advice`` (:func:`score.score_advice`).

- ``crash-long-session``: two members crash under a 15 s session timeout: the session-timeout
  rule, naming session.timeout.ms, and nothing else;
- ``quiet-rolling-restart``: three static members restarted in turn, no rebalance: no advice;
- ``rebalance-storm``: distinct members joining and leaving (churn), rebalancing in a fraction of
  a heartbeat: no advice (static membership does not help churn, and a cooperative join's second
  round, about a heartbeat, would hold the moved partitions longer than the eager stop);
- ``rolling-restart-storm``: dynamic members restarted in turn, each back with its client id, 5 s
  away against sub-second rebalances: no advice (static membership would lengthen the pause, as
  would cooperative-sticky's second round).

All run at once (each with its own collector), so the module takes about the longest one (54 s:
crash-long-session's 48 s and its members' 6 s after, ``LINGER_S``).
"""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from helpers.benchmarks import load_benchmark

from lagscope.analytics import step as steps
from lagscope.analytics.io import spark_arrow_schema
from lagscope.analytics.job import LAKE_TABLES
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.devtools.sim import truth
from lagscope.devtools.sim.runner import load_scenario
from lagscope.devtools.sim.score import AdviceScore, score_advice
from lagscope.lake import list_files

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

SCENARIOS = ("crash-long-session", "quiet-rolling-restart", "rebalance-storm", "rolling-restart-storm")
INTERVAL_S = 0.5
#: the members go on consuming after the schedule: crash-long-session's second crash (t=27) is
#: settled only after its 15 s session, a heartbeat (3 s) and a join, about t=45.5 of its 48 s. One
#: CI run (2026-12-01, a loaded machine) gave no advice at all; the likely cause (its lake was not
#: kept): no sweep saw the group settle before c1 left at 44 s, the second window stayed open, and
#: the rule needs two
LINGER_S = {"crash-long-session": 6.0}


@dataclass(frozen=True)
class Advised:
    score: AdviceScore
    rows: list[dict[str, Any]]  # the advice rows of the run's groups


def _collect_and_advise(name: str, bootstrap: str, root: Path) -> Advised:
    # the accuracy harness's collection: the scenario run while a collector (tail on) sweeps its
    # groups, and only its groups, into root/lake
    sc = load_benchmark("rebalance_accuracy").collect(name, bootstrap, root, INTERVAL_S,
                                                      linger_s=LINGER_S.get(name, 0.0))
    (run,) = [r for r in truth.load(sc.truth_path) if isinstance(r, truth.RunInfo)]
    prefix, lake = f"sim-{name}-{run.run_id}", sc.lake
    tables: dict[str, pa.Table | None] = {}
    for table in LAKE_TABLES:
        files = [str(f) for f in list_files(lake, table)]
        tables[table] = (steps.read_files(files, spark_arrow_schema(table), lake / table,
                                          columns=steps.READ_COLUMNS[table]) if files else None)
    assert tables["offsets"] is not None
    assert tables["members"] is not None
    assert any(g.startswith(f"{prefix}-") for g in tables["members"].column("group_id").to_pylist()), prefix
    # second-scale scenarios, second-scale rules (as the accuracy benchmark's); the advice rules'
    # own thresholds are their defaults. The timeouts are the group-metadata records' (the tail).
    analytics = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0,
                                                           growth_min_minutes=5, warn_lag_s=5.0))
    out = steps.run_step(steps.StepInputs(offsets=tables["offsets"], members=tables["members"],
                                          commits=tables["commits"], group_events=tables["group_events"], state={}),
                         settings=analytics, as_of=dt.datetime.now(dt.UTC), with_state=False)
    rows = [r for r in out.tables["advice"].to_pylist() if r["group_id"].startswith(f"{prefix}-")]
    sc = load_scenario(name)
    return Advised(score_advice(sc.expect_advice, rows, prefix=prefix, scenario=name), rows)


@pytest.fixture(scope="module")
def advised(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Advised]:
    base = tmp_path_factory.mktemp("advice")
    load_benchmark("rebalance_accuracy")  # once, before the threads use it
    with ThreadPoolExecutor(max_workers=len(SCENARIOS), thread_name_prefix="advice") as pool:
        futures = {n: pool.submit(_collect_and_advise, n, bootstrap, base / n) for n in SCENARIOS}
        return {n: f.result(timeout=400) for n, f in futures.items()}


def test_crashes_under_a_long_session_advise_a_shorter_one(advised: dict[str, Advised]) -> None:
    got = advised["crash-long-session"]
    # the scenario expects exactly this advice, and the table gives it and nothing else
    assert got.score.expected == (("readers", "session_timeout_crash", "session.timeout.ms"),)
    assert got.score.missing == (), got.rows
    assert got.score.unexpected == (), got.rows
    (row,) = got.rows
    # the current value is the group-metadata record's (15 s), not an assumed default
    assert row["current_value"] == "session.timeout.ms=15000"
    assert row["suggested"].startswith("session.timeout.ms=10000")
    assert row["evidence_count"] == 2
    # each outage (last progress → settled) is at least the session; the prediction takes the
    # 5 s the shorter session saves off it, and never goes below the new session
    assert row["current_amount"] >= 15.0
    assert row["expected_amount"] == pytest.approx(max(10.0, row["current_amount"] - 5.0))


def test_a_quiet_rolling_restart_gets_no_advice(advised: dict[str, Advised]) -> None:
    got = advised["quiet-rolling-restart"]
    assert got.score.expected == ()
    assert got.rows == []
    assert got.score.unexpected == ()


def test_a_churn_storm_of_quick_rebalances_gets_no_advice(advised: dict[str, Advised]) -> None:
    # churn: static membership would not help; its windows are a fraction of a heartbeat, so a
    # cooperative join's second round would hold the moved partitions longer than the eager stop
    got = advised["rebalance-storm"]
    assert got.score.expected == ()
    assert got.rows == []


def test_a_rolling_restart_of_quick_rebalances_gets_no_advice(advised: dict[str, Advised]) -> None:
    # restarts of 5 s against sub-second rebalances: static membership would make each
    # restarting member's partitions wait longer than the stops it avoids, cooperative-sticky's
    # second round (a heartbeat) longer than the eager stop: neither predicts a gain. (At 1.5 s
    # away a loaded CI run's windows, 2.22 s per storm against 1.67 s per restart, crossed the
    # rule's min_gain and gave static membership.)
    got = advised["rolling-restart-storm"]
    assert got.score.expected == ()
    assert got.rows == []
