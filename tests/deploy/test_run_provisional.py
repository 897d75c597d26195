"""The analytics loop runs a provisional step after each full one (analytics.provisional), up to
the settle before its clock; off, none."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from lagscope.config import AnalyticsConfig
from lagscope.deploy import run as run_mod

NOW = dt.datetime(2026, 3, 1, 12, 0, 42, 500000, tzinfo=dt.UTC)


@pytest.mark.parametrize("enabled", [True, False])
def test_the_loop_follows_each_full_step_with_a_provisional_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                enabled: bool) -> None:
    (tmp_path / "lake").mkdir()
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: object())
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_drop_session", lambda self: None)
    import lagscope.analytics.job as job

    calls: list[tuple[str, dt.datetime]] = []

    def full(*_: Any, until: dt.datetime, **__: Any) -> job.StepFiles:
        calls.append(("full", until))
        return job.StepFiles()

    def provisional(*_: Any, until: dt.datetime, **__: Any) -> job.StepFiles:
        calls.append(("provisional", until))
        return job.StepFiles()

    monkeypatch.setattr(job, "run_incremental", full)
    monkeypatch.setattr(job, "run_provisional", provisional)
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "res", interval_s=1, master="local[1]",
                                 settings=AnalyticsConfig(provisional=enabled), clock=lambda: NOW,
                                 provisional_settle_s=2.0, log_file=tmp_path / "spark.log")
    loop.step()
    loop.step()
    expected = [("full", NOW), ("provisional", NOW - dt.timedelta(seconds=2))] if enabled else [("full", NOW)]
    assert calls == expected * 2
    assert loop.fatal is None
    assert loop.failures == 0


def test_the_loop_gives_memory_back_after_every_step_done_or_failed(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # lagscope.memory.release_unused once per step that ran, the failed one too; none without a lake
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: object())
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_drop_session", lambda self: None)
    import lagscope.analytics.job as job

    outcomes = iter([job.StepFiles(), RuntimeError("engine killed"), job.StepFiles()])

    def full(*_: Any, **__: Any) -> job.StepFiles:
        got = next(outcomes)
        if isinstance(got, Exception):
            raise got
        return got

    released: list[int] = []
    monkeypatch.setattr(job, "run_incremental", full)
    monkeypatch.setattr(run_mod, "release_unused", lambda: released.append(len(released)))
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "res", interval_s=1, master="local[1]",
                                 settings=AnalyticsConfig(provisional=False), clock=lambda: NOW,
                                 log_file=tmp_path / "spark.log")
    loop.step()  # no lake yet: nothing ran
    assert released == []
    (tmp_path / "lake").mkdir()
    for _ in range(3):
        loop.step()
    assert released == [0, 1, 2]
    assert loop.consecutive_failures == 0
