"""End to end on the real broker: simulator → collector (sweeps + __consumer_offsets tail) →
analytics, compared with the simulator's ground truth (the harness of
benchmarks/analytics_accuracy.py, one scenario)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pyspark.sql import SparkSession

from lagscope.analytics.findings import RuleParams

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def _harness() -> ModuleType:
    path = Path(__file__).parents[2] / "benchmarks" / "analytics_accuracy.py"
    spec = importlib.util.spec_from_file_location("analytics_accuracy", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_crash_scenario_against_truth(spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    # c2 is killed at 5 s; the group rebalances when its 3 s session expires
    acc = _harness()
    interval = 0.5
    result = acc.collect_during("crash", bootstrap, tmp_path / "lake", tmp_path / "out", interval)
    got = acc.analyse(spark, tmp_path / "lake", RuleParams(stall_after_s=2.0, stop_after_s=2.0),
                      {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0})
    rep = acc.score("crash", result, got, interval)
    assert rep.lag_rows > 0
    assert rep.lag_mae <= 1.0, rep
    assert rep.lag_p99 <= 5.0, rep
    assert rep.rebalances_truth >= 1
    assert rep.rebalances_found == rep.rebalances_truth, rep.notes
    assert rep.causes_right == rep.rebalances_truth, rep.notes
    assert rep.duration_err_max <= (1.0 if got["has_tail"] else interval), rep
