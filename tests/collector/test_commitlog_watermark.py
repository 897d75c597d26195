"""The tail's completeness watermark (``CommitLogTailer.watermark``), over an in-memory
``__consumer_offsets`` and a clock the test moves: every record appended before it is in the lake."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from commitlog_records import offset_key, offset_value
from test_commitlog import T0, Rec, _append, _factory, _mixed_log, _rows

from lagscope.collector import commitlog
from lagscope.collector.commitlog import CommitLogService, CommitLogTailer


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def _commit(log: dict[int, list[Rec]], i: int) -> None:
    ts = T0 + 100_000 + i * 1000
    _append(log, i % 2, offset_key("g", "orders", 0), offset_value(3, 1000 + i, "", ts), ts)


def _tailer(root: Path, log: dict[int, list[Rec]], clock: Clock, **kw: Any) -> CommitLogTailer:
    return CommitLogTailer("x:1", root, "c1", start="earliest", consumer_factory=_factory(log), clock=clock,
                           flush_interval_s=5.0, lag_every_s=5.0, poll_timeout_ms=0, **kw)


def test_the_watermark_is_the_time_of_a_check_read_through_and_flushed(tmp_path: Path) -> None:
    log = _mixed_log(10)
    clock = Clock()
    t = _tailer(tmp_path, log, clock)
    assert t.watermark is None
    t.open()
    t.run_once(0)  # reads everything; its first lag check (at 1000) is read through but not flushed
    assert not (tmp_path / "commits").exists()
    assert t.watermark is None  # read is not written: a step must not count on it yet
    clock.t = 1003.0
    t.flush()  # what was read through the check at 1000 is in the lake now
    assert len(_rows(tmp_path, "commits")) == 11
    assert t.watermark == 1000.0
    assert t.stats.snapshot()["watermark_s"] == 1000.0
    # the next check finds nothing new and nothing buffered: the lake is complete before it
    clock.t = 1010.0
    t.run_once(0)
    assert t.watermark == 1010.0


def test_under_a_steady_stream_a_check_waits_for_its_records_not_the_newest(tmp_path: Path) -> None:
    log = _mixed_log(4)
    clock = Clock()
    t = _tailer(tmp_path, log, clock)
    t.open()
    t.run_once(0)  # the check at 1000, read through
    clock.t = 1005.0
    t.run_once(0)  # flushed; the check at 1005 finds everything in the lake
    assert t.watermark == 1005.0
    _commit(log, 0)  # appended before the next check ...
    consumer = t._consumer
    assert consumer is not None
    real_poll = consumer.poll
    consumer.poll = lambda **_: {}  # ... whose fetch has not returned it yet
    clock.t = 1010.0
    t.run_once(0)
    assert t.watermark == 1005.0  # the check at 1010 is not read through
    consumer.poll = real_poll
    _commit(log, 1)  # appended after that check, read with the record before it
    clock.t = 1012.0
    t.run_once(0)  # reads both; the flush is due: what was read through the check at 1010 is written
    assert t.watermark == 1010.0  # complete before the check, not up to the time of the newest read
    assert {r["committed_offset"] for r in _rows(tmp_path, "commits")} >= {1000, 1001}


def test_a_failed_flush_does_not_move_the_watermark_and_the_records_are_read_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _mixed_log(6)
    clock = Clock()
    t = _tailer(tmp_path, log, clock)
    real_write = commitlog.lake.write_table
    failed: list[str] = []

    def write(*args: Any, **kw: Any) -> Any:
        if not failed:
            failed.append("commits")
            raise OSError(28, "No space left on device")
        return real_write(*args, **kw)

    monkeypatch.setattr(commitlog.lake, "write_table", write)
    waits: list[float] = []

    class Stop(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(float(timeout or 0))
            clock.t += float(timeout or 0)
            return self.is_set()

    stop = Stop()
    calls = {"n": 0}
    real_run_once = t.run_once

    def run_once(timeout_ms: int | None = None) -> int:
        calls["n"] += 1
        clock.t += 2.5
        if calls["n"] == 3:  # the flush failed at call 2; the retry after it read everything again
            assert t.watermark is None
        if t.watermark is not None:
            stop.set()
        return real_run_once(0)

    monkeypatch.setattr(t, "run_once", run_once)
    t.run(stop, error_backoff_s=5.0)
    assert failed == ["commits"]
    assert waits == [5.0]  # one retry after the failed write
    # the watermark came only from a check after the reconnection, read through and flushed
    assert t.watermark is not None
    assert t.watermark > 1005.0
    assert len(_rows(tmp_path, "commits")) == 7  # nothing lost, nothing twice


def test_a_missing_topic_is_complete_at_each_check(tmp_path: Path) -> None:
    hidden = threading.Event()
    hidden.set()
    clock = Clock(2000.0)
    t = CommitLogTailer("x:1", tmp_path, "c1", consumer_factory=_factory({0: []}, hide_topic=hidden), clock=clock)

    class Stop(threading.Event):
        n = 0

        def wait(self, timeout: float | None = None) -> bool:
            self.n += 1
            clock.t += 1.0
            if self.n >= 3:
                self.set()
            return self.is_set()

    t.run(Stop(), missing_topic_retry_s=1.0)
    assert t.watermark == 2002.0  # the third check found nothing to read


def test_the_service_gives_the_watermarks_of_running_tails_only(tmp_path: Path) -> None:
    from lagscope.config import ClusterConfig, ConsumerOffsetsTailConfig

    on = ConsumerOffsetsTailConfig(enabled=True, start="earliest")
    clusters = [ClusterConfig(name=n, bootstrap_servers=["x:1"], consumer_offsets_tail=on) for n in ("c1", "c2")]
    log = _mixed_log(4)

    def make(cluster: ClusterConfig, root: Path | str) -> CommitLogTailer:
        return CommitLogTailer.from_config(cluster, root, consumer_factory=_factory(log), flush_interval_s=0.05,
                                           lag_every_s=0.05, poll_timeout_ms=10)

    service = CommitLogService(clusters, tmp_path, tailer_factory=make)
    assert service.watermarks() == {}  # not started: no thread runs
    service.tailers["c2"].disabled_reason = "no READ access"  # stopped for good: nothing waits for it
    service.start()
    try:
        import time

        deadline = time.monotonic() + 10
        while service.watermarks().get("c1") is None and time.monotonic() < deadline:
            time.sleep(0.05)
        marks = service.watermarks()
    finally:
        service.stop()
    assert list(marks) == ["c1"]
    assert marks["c1"] is not None
    assert service.watermarks() == {}  # stopped
