"""The analytics loop of ``lagscope run`` survives its engine dying: a JVM killed mid-run is
replaced by a new session and the step is redone (the checkpoint never moved past unpublished
output); a loop whose every step fails gives up after a few, with one line naming the cause and
the setting to change, and reports itself unhealthy (``lagscope run`` then exits 1)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from lagscope.deploy import run as run_mod


class _Boom(Exception):
    pass


def test_consecutive_failures_give_up_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "lake").mkdir()
    sessions: list[object] = []
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: sessions.append(object()) or sessions[-1])
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_drop_session", lambda self: None)
    calls: list[int] = []

    def failing(*_: Any, **__: Any) -> dict[str, int]:
        calls.append(1)
        raise _Boom("An error occurred while calling o12.collect.\n: java.lang.OutOfMemoryError: Java heap space\n"
                    "\tat org.apache.spark.Foo.bar(Foo.java:1)\n")

    import lagscope.analytics.job as job
    monkeypatch.setattr(job, "run_incremental", failing)
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "res", interval_s=0.01, master="local[1]",
                                 driver_memory="512m", max_failures=3, log_file=tmp_path / "logs" / "spark.log")
    with caplog.at_level(logging.INFO, logger="lagscope.deploy.run"):
        loop.start()
        loop._thread.join(10)  # type: ignore[union-attr]
    assert len(calls) == 3
    assert not loop.is_healthy()
    assert loop.fatal is not None
    assert "java.lang.OutOfMemoryError: Java heap space" in loop.fatal
    assert "raise analytics.driver_memory (now 512m)" in loop.fatal
    messages = [r.getMessage() for r in caplog.records if r.name == "lagscope.deploy.run"]
    assert sum("retrying with a new Spark session" in m for m in messages) == 2
    # one line per failure on the terminal, never the Java stack
    assert all("\n" not in m and "\tat org.apache" not in m for m in messages)


def test_a_success_resets_the_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lake").mkdir()
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: object())
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_drop_session", lambda self: None)
    import lagscope.analytics.job as job

    outcomes = iter([_Boom("x"), _Boom("y"), job.StepFiles(), _Boom("z"), _Boom("w"), job.StepFiles()])

    def step(*_: Any, **__: Any) -> job.StepFiles:
        got = next(outcomes)
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(job, "run_incremental", step)
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "res", interval_s=1, master="local[1]",
                                 max_failures=3, log_file=tmp_path / "spark.log")
    for _ in range(6):
        loop.step()
    assert loop.fatal is None
    assert loop.failures == 4
    assert loop.consecutive_failures == 0


def test_a_first_failure_is_redone_at_once_a_second_waits_for_the_interval(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # an engine killed mid-step: the step is redone on a new session at once, not an interval
    # later (the soak's recovery bound, benchmarks/soak.py); a second failure in a row waits
    (tmp_path / "lake").mkdir()
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: object())
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_drop_session", lambda self: None)
    import lagscope.analytics.job as job

    outcomes = iter([_Boom("killed"), job.StepFiles(), _Boom("killed"), _Boom("again")])
    calls: list[float] = []

    def step(*_: Any, **__: Any) -> job.StepFiles:
        calls.append(time.monotonic())
        got = next(outcomes, job.StepFiles())
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(job, "run_incremental", step)
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "res", interval_s=2.0, master="local[1]",
                                 max_failures=3, log_file=tmp_path / "spark.log", provisional=False)
    loop.start()
    try:
        deadline = time.monotonic() + 20
        while len(calls) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        loop.stop()
    assert len(calls) >= 5
    gaps = [b - a for a, b in itertools.pairwise(calls)]
    assert gaps[0] < 1.0          # failed → redone at once
    assert gaps[1] >= 1.9         # succeeded → the next interval
    assert gaps[2] < 1.0          # failed (first in a row) → at once
    assert gaps[3] >= 1.9         # failed again (second in a row) → the next interval
    assert loop.fatal is None


_KILLED_JVM = textwrap.dedent("""
    import datetime as dt, json, os, signal, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[3])
    from analytics_builders import T0, at, members_rows, offsets_rows
    from lagscope.deploy.run import AnalyticsLoop
    from lagscope.lake import write_rows
    from lagscope.schema import MEMBERS, OFFSETS
    lake, results = Path(sys.argv[1]), Path(sys.argv[2])
    drop = {"cluster", "date"}
    for t in range(0, 180, 10):
        write_rows(lake, OFFSETS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in offsets_rows([(t, 10 * t, 10 * t + 5)])])
        write_rows(lake, MEMBERS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in members_rows([(t, "Stable", 1, [("m1", None, [0])])])])
    clock = [at(60)]
    loop = AnalyticsLoop(lake, results, interval_s=3600, master="local[1]", shuffle_partitions=1, backfill_s=120,
                         clock=lambda: clock[0], log_file=results / "_logs" / "spark.log")
    loop.step()                          # step 1: [T0, 60 s)
    first_pid = loop.spark.sparkContext._gateway.proc.pid
    os.kill(first_pid, signal.SIGKILL)   # the JVM dies (as after an OutOfMemoryError)
    os.waitpid(first_pid, 0)
    clock[0] = at(120)
    loop.step()                          # fails: the session is dead
    failed_once = loop.consecutive_failures
    loop.step()                          # a new session redoes step 2
    second_pid = loop.spark.sparkContext._gateway.proc.pid
    from lagscope.analytics.io import read_checkpoint
    print(json.dumps({"failed_once": failed_once, "after": loop.consecutive_failures, "fatal": loop.fatal,
                      "new_jvm": second_pid != first_pid, "watermark": read_checkpoint(results)["watermark"]}))
    loop.teardown()
""")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_killed_jvm_is_replaced_and_the_step_redone(tmp_path: Path) -> None:
    # in a process of its own: the tests' shared Spark session must not be the one killed
    script = tmp_path / "killed.py"
    script.write_text(_KILLED_JVM)
    builders = Path(__file__).parents[1] / "analytics"
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "lake"), str(tmp_path / "res"), str(builders)],
                          capture_output=True, text=True, timeout=280, check=False,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["failed_once"] == 1
    assert got["after"] == 0
    assert got["fatal"] is None
    assert got["new_jvm"]
    # step 2 ([60 s, 120 s)) was redone and published: the checkpoint is at its end
    assert dt.datetime.fromisoformat(got["watermark"]) == dt.datetime(2026, 1, 1, 0, 2, tzinfo=dt.UTC)
    assert "\tat org.apache" not in done.stderr


def test_a_step_stops_where_the_collector_holds_sweeps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the lake's disk is full: the collector holds its sweeps in memory from 12:00:40 and writes
    # them when it can. A full step at 12:01:05 must not analyse the minute 12:00 without them
    # (their rows would land behind its checkpoint, never analysed): it stops at 12:00:40, so
    # the minute 12:00 waits; the provisional step too. Once written, the steps go on to now
    (tmp_path / "lake").mkdir()
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: object())
    import lagscope.analytics.job as job

    seen: list[tuple[str, dt.datetime]] = []
    monkeypatch.setattr(job, "run_incremental", lambda *_, until, **__: seen.append(("full", until)) or job.StepFiles())
    monkeypatch.setattr(job, "run_provisional", lambda *_, until, **__: seen.append(("pre", until)) or job.StepFiles())
    now = dt.datetime(2026, 11, 27, 12, 1, 5, tzinfo=dt.UTC)
    held: list[dt.datetime | None] = [now.replace(minute=0, second=40)]
    loop = run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "res", interval_s=30, master="local[1]",
                                 clock=lambda: now, provisional=True, provisional_settle_s=5.0,
                                 complete_before=lambda: held[0])
    loop.step()
    assert seen == [("full", held[0]), ("pre", held[0])]
    seen.clear()
    held[0] = None
    loop.step()
    assert seen == [("full", now), ("pre", now - dt.timedelta(seconds=5))]
