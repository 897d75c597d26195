"""The analytics loop of ``lagscope run`` applies ``analytics.retention`` to the result tables after
its first step, then hourly; ``lagscope run`` counts the lake's and the results' removals in one
place, served on the collector's /metrics."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lagscope.config import load_config
from lagscope.deploy import run as run_mod

NOW = dt.datetime(2026, 11, 25, 8, 0, tzinfo=dt.UTC)


def _partition(root: Path, table: str, day: str, written: dt.datetime) -> Path:
    folder = root / table / "cluster=c" / f"date={day}"
    folder.mkdir(parents=True)
    (folder / "inc-0-1-00000.parquet").write_bytes(b"x" * 50)
    for p in (folder / "inc-0-1-00000.parquet", folder):
        os.utime(p, (written.timestamp(), written.timestamp()))
    return folder


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[dt.datetime]:
    """No Spark: each step records its ``until`` and writes nothing."""
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: object())
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_drop_session", lambda self: None)
    calls: list[dt.datetime] = []

    import lagscope.analytics.job as job

    def step(*_: Any, until: dt.datetime, **__: Any) -> job.StepFiles:
        calls.append(until)
        return job.StepFiles()

    monkeypatch.setattr(job, "run_incremental", step)
    return calls


def test_the_analytics_loop_prunes_the_results(tmp_path: Path, steps: list[dt.datetime]) -> None:
    lake, results = tmp_path / "lake", tmp_path / "results"
    lake.mkdir()
    long_ago = NOW - dt.timedelta(days=60)
    expired = [_partition(results, table, "2026-09-20", long_ago) for table in ("lag_trends", "status")]
    kept = _partition(results, "lag_trends", "2026-11-20", NOW - dt.timedelta(days=4))
    # an anomaly open since September: written again by every step into the day it started
    open_anomaly = _partition(results, "anomalies", "2026-09-20", NOW - dt.timedelta(minutes=1))
    clock = [NOW]
    loop = run_mod.AnalyticsLoop(lake, results, interval_s=60, master="local[1]", clock=lambda: clock[0],
                                 retention_days=30, log_file=tmp_path / "spark.log")
    loop.step()
    assert steps == [NOW]
    assert [p.exists() for p in expired] == [False, False]
    assert kept.exists()
    assert open_anomaly.exists()
    assert loop.removals.snapshot() == {("c", "lag_trends"): (1, 50), ("c", "status"): (1, 50)}
    # the next steps within the hour do not look again; the first after it does
    later = _partition(results, "rebalances", "2026-09-21", long_ago)
    clock[0] = NOW + dt.timedelta(minutes=59)
    loop.step()
    assert later.exists()
    clock[0] = NOW + dt.timedelta(hours=1)
    loop.step()
    assert not later.exists()
    assert (results / "_state" / "retention.json").exists()


def test_without_retention_the_loop_keeps_everything(tmp_path: Path, steps: list[dt.datetime]) -> None:
    (tmp_path / "lake").mkdir()
    old = _partition(tmp_path / "results", "lag_trends", "2020-01-01", NOW - dt.timedelta(days=2000))
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "results", interval_s=60, master="local[1]",
                                 clock=lambda: NOW, log_file=tmp_path / "spark.log")
    loop.step()
    assert old.exists()


def test_a_failing_prune_does_not_fail_the_step(tmp_path: Path, steps: list[dt.datetime],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lake").mkdir()

    def broken(*_: Any, **__: Any) -> None:
        raise PermissionError("read-only file system")

    monkeypatch.setattr(run_mod, "prune", broken)
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "results", interval_s=60, master="local[1]",
                                 clock=lambda: NOW, retention_days=1, log_file=tmp_path / "spark.log")
    loop.step()
    assert loop.consecutive_failures == 0
    assert loop.fatal is None


def test_run_wires_both_retentions_into_one_counter(tmp_path: Path) -> None:
    path = tmp_path / "lagscope.yaml"
    path.write_text(f"clusters: [{{name: c, bootstrap_servers: 'h:1'}}]\n"
                    f"collector: {{lake: {tmp_path / 'lake'}, retention: 5}}\nanalytics: {{retention: 45}}\n")
    settings = load_config(path, environ={})
    parts = {run_mod.Part.collector, run_mod.Part.analytics}
    loop, collector = run_mod.build_components(settings, parts, results=tmp_path / "elsewhere",
                                               outbox=tmp_path / "o.sqlite", results_metrics=False)
    assert loop.retention_days == 45
    assert collector.collector.removals is loop.removals
    # the collector's retention respects the checkpoint of the results this process writes
    assert collector.collector.results == tmp_path / "elsewhere"
    counted = loop.removals.snapshot()
    assert counted[("c", "lag_trends")] == (0, 0)
    assert counted[("c", "offsets")] == (0, 0)


def test_without_a_collector_the_findings_endpoint_serves_the_counters(tmp_path: Path) -> None:
    from lagscope.collector.metrics import RetentionCollector

    settings = load_config(None, environ={})
    metrics, loop = run_mod.build_components(settings, {run_mod.Part.analytics}, results=tmp_path / "r",
                                             outbox=tmp_path / "o.sqlite")
    assert isinstance(metrics, run_mod.ResultsMetrics)
    (extra,) = metrics.extra_collectors
    assert isinstance(extra, RetentionCollector)
    assert extra._removed == loop.removals.snapshot


_REAL_STEP = textwrap.dedent("""
    import datetime as dt, json, os, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from analytics_builders import T0, at, members_rows, offsets_rows
    from lagscope.deploy.run import AnalyticsLoop
    from lagscope.lake import write_rows
    from lagscope.results import read
    from lagscope.schema import MEMBERS, OFFSETS
    lake, results = Path(sys.argv[1]), Path(sys.argv[2])
    drop = {"cluster", "date"}
    for t in range(0, 120, 10):
        write_rows(lake, OFFSETS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in offsets_rows([(t, 10 * t, 10 * t + 5)])])
        write_rows(lake, MEMBERS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in members_rows([(t, "Stable", 1, [("m1", None, [0])])])])
    # last year's results, untouched since
    old = results / "lag_trends" / "cluster=c" / "date=2025-01-01"
    old.mkdir(parents=True)
    (old / "batch-2025-01-01-2025-01-01-00000.parquet").write_bytes(b"x" * 10)
    for p in (old / "batch-2025-01-01-2025-01-01-00000.parquet", old):
        os.utime(p, (1735776000, 1735776000))
    loop = AnalyticsLoop(lake, results, interval_s=3600, master="local[1]", shuffle_partitions=1, backfill_s=120,
                         clock=lambda: at(120), log_file=results / "_logs" / "spark.log", retention_days=30)
    loop.step()
    loop.teardown()
    trends = read(results, "lag_trends")
    print(json.dumps({"old": old.exists(), "dates": sorted(set(trends.column("date").to_pylist())),
                      "rows": trends.num_rows, "failures": loop.failures,
                      "removed": {"/".join(k): v for k, v in loop.removals.snapshot().items()}}))
""")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_real_step_then_the_results_retention(tmp_path: Path) -> None:
    # in a process of its own: the loop stops its Spark session, which must not be the tests' shared one
    script = tmp_path / "step.py"
    script.write_text(_REAL_STEP)
    builders = Path(__file__).parents[1] / "analytics"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "lake"), str(tmp_path / "res"), str(builders)],
                          capture_output=True, text=True, timeout=280, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["failures"] == 0
    assert not got["old"]  # last year's partition went …
    assert got["removed"] == {"c/lag_trends": [1, 10]}
    assert got["dates"] == ["2026-01-01"]  # … the step's own results stayed
    assert got["rows"] > 0
