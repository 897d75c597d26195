"""The analytics loop of `lagscope run` says in its step's line which lake files a step went
on without (quarantined), and says once that the lake does not exist yet."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pytest

from lagscope.analytics import job
from lagscope.deploy.run import AnalyticsLoop
from lagscope.lake import Quarantined

NOW = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)


def _loop(lake: Path, tmp_path: Path) -> AnalyticsLoop:
    loop = AnalyticsLoop(lake, tmp_path / "results", interval_s=60.0, master="local[1]", clock=lambda: NOW)
    loop.spark = object()  # no engine is asked for: the step below is replaced
    return loop


def test_the_step_line_names_the_files_it_went_without(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    bad = lake / "offsets" / "cluster=c" / "date=2026-01-01" / "part-x.parquet"
    moved = Quarantined(bad, "offsets", "unreadable Parquet footer: …",
                        lake / "offsets" / "_quarantine" / "cluster=c" / "date=2026-01-01" / "part-x.parquet")

    def step(*_: Any, **__: Any) -> job.StepFiles:
        return job.StepFiles({"lag_trends": 1, "status": 1}, [moved])

    monkeypatch.setattr(job, "run_incremental", step)
    caplog.set_level(logging.INFO, logger="lagscope.deploy.run")
    _loop(lake, tmp_path).step()
    lines = [r.getMessage() for r in caplog.records if r.name == "lagscope.deploy.run"]
    assert lines == [f"analytics: lag_trends 1 file(s), status 1 file(s); analysed without 1 unreadable lake "
                     f"file(s), quarantined: {bad}"]


def test_a_missing_lake_is_said_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    loop = _loop(tmp_path / "lake", tmp_path)
    for _ in range(3):
        loop.step()
        loop.runs += 1  # as the loop counts its runs
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [f"analytics: the lake {tmp_path / 'lake'} does not exist (yet): nothing to analyse until "
                     "the collector writes it"]
