"""End to end on the real broker: simulator → collector (sweeps + __consumer_offsets tail) →
analytics, compared with the simulator's ground truth (the harness of
benchmarks/rebalance_accuracy.py, one scenario)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark
from pyspark.sql import SparkSession

from lagscope.analytics.job import run_batch
from lagscope.config import AnalyticsConfig
from lagscope.results import read

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


def test_crash_scenario_against_truth(spark: SparkSession, bootstrap: str, tmp_path: Path) -> None:
    # c2 is killed at 5 s; the group rebalances when its 3 s session expires. The window comes
    # from the commit stream (the new generation's record, the survivor's revocation commit),
    # within 1 s of the truth; the bound from the record's session timeout (3 s) + the 0.5 s
    # heartbeat + 0.5 s network: 4 s
    acc = load_benchmark("rebalance_accuracy")
    interval = 0.5
    sc = acc.collect("crash", bootstrap, tmp_path, interval)
    # the production path: a batch on Spark over the collected lake, its rebalances table read back
    days = acc._days(sc.lake)
    assert days is not None
    run_batch(spark, sc.lake, tmp_path / "results", since=days[0], until=days[1],
              settings=AnalyticsConfig(**acc.DEFAULTS), progress=False)
    rows = read(tmp_path / "results", "rebalances").to_pylist()
    members = acc.read_lakes([(sc.lake, None)])["members"]
    first = acc.first_settled(members)
    rep = acc.score(sc, "commit stream", rows, first, interval)
    # the truth holds the crash's window, and the group's formation windows when its members
    # joined one after another (each generation change is one; how many depends on the timing)
    assert rep.truth >= 1, rep
    assert rep.found == rep.truth, rep
    assert rep.causes_right == rep.truth, rep
    assert rep.sources == {"commit_stream"}, rep
    assert rep.max_error <= 1.0, rep
    (crash,) = [r for r in rows if r["cause"] == "session_timeout"]
    assert crash["bound_s"] == 4.0
    assert crash["generation_after"] == crash["generation_before"] + 1, crash
