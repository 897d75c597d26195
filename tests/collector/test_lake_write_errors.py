"""A lake that cannot be written shows on /metrics: lagscope_lake_write_errors_total{cluster, table}.

Real failing writes (a lake path that is a file, a table folder that is a file) through the
collector loop and the ``__consumer_offsets`` tail, read back from a real scrape of /metrics.
"""

from __future__ import annotations

import datetime as dt
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_commitlog import _factory, _mixed_log

from lagscope.collector.commitlog import CommitLogTailer
from lagscope.collector.loop import Collector, LakeSink
from lagscope.collector.model import Snapshot
from lagscope.config import ClusterConfig, Settings
from lagscope.errors import KafkaUnavailable, LakeError
from lagscope.lake import read_table

FAMILY = "lagscope_lake_write_errors"
T0 = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)


class _DeadClient:
    """A client whose cluster never answers: every sweep fails, and a failed sweep still writes
    its ``sweeps`` row."""

    request_timeout_ms = 100
    connected = False

    def __init__(self, *_: Any) -> None:
        pass

    def connect(self) -> None:
        raise KafkaUnavailable("c1: cannot bootstrap from h:1: refused")

    def close(self) -> None:
        pass


def _settings(lake: Path, *, tail: bool = False) -> Settings:
    cluster: dict[str, Any] = {"name": "c1", "bootstrap_servers": "h:1"}
    if tail:
        cluster["consumer_offsets_tail"] = {"enabled": True, "start": "earliest"}
    return Settings(clusters=[cluster],  # type: ignore[list-item]
                    collector={"interval_s": 0.05, "lake": str(lake)},  # type: ignore[arg-type]
                    metrics={"enabled": True, "bind": "127.0.0.1", "port": 0})  # type: ignore[arg-type]


def _scrape(collector: Collector) -> dict[tuple[str, str], float]:
    """lagscope_lake_write_errors_total per (cluster, table), from a real GET of /metrics."""
    with urllib.request.urlopen(collector.metrics_server.url, timeout=5) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == FAMILY:
            assert family.type == "counter"
            for s in family.samples:
                if s.name == f"{FAMILY}_total":
                    out[(s.labels["cluster"], s.labels["table"])] = s.value
    return out


def _snapshot() -> Snapshot:
    offsets = [{"sweep_ts": T0, "group_id": "g", "topic": "t", "partition": 0, "committed_offset": 4,
                "log_end_offset": 10, "lag": 6}]
    members = [{"sweep_ts": T0, "group_id": "g", "group_state": "Empty", "member_id": None}]
    sweep = {"sweep_ts": T0, "duration_ms": 1.0, "ok": True, "groups": 1, "partitions": 1, "members": 1,
             "group_errors": 0, "collector": "test"}
    return Snapshot("c1", sweep, offsets=offsets, members=members)


def test_failed_sweep_writes_are_counted_per_table(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.write_text("a file where the lake folder should be\n")
    collector = Collector(_settings(lake), client_factory=_DeadClient).start()
    try:
        # every table's series is there (at 0) before the first failure: increase() sees the first one
        assert _scrape(collector) == {("c1", "offsets"): 0.0, ("c1", "members"): 0.0, ("c1", "sweeps"): 0.0}
        for _ in range(3):
            collector.run_once()  # failed sweeps: only their sweeps row, which cannot be written
        assert _scrape(collector) == {("c1", "offsets"): 0.0, ("c1", "members"): 0.0, ("c1", "sweeps"): 3.0}
        # a successful sweep: held behind the three, whose oldest is tried first and fails again
        collector.deliver(_snapshot())
        assert _scrape(collector) == {("c1", "offsets"): 0.0, ("c1", "members"): 0.0, ("c1", "sweeps"): 4.0}
        assert collector.sink.held == 4
        # the lake is writable again: the held sweeps go to the lake first, then the new ones, and
        # the counters stay where they were
        lake.unlink()
        collector.run_once()
        collector.deliver(_snapshot())
        assert _scrape(collector) == {("c1", "offsets"): 0.0, ("c1", "members"): 0.0, ("c1", "sweeps"): 4.0}
        assert collector.sink.held == 0
        assert read_table(lake, "sweeps").num_rows == 6
        assert read_table(lake, "offsets").num_rows == 2
    finally:
        collector.stop()


def _at(minute: int) -> Snapshot:
    snap = _snapshot()
    ts = T0 + dt.timedelta(minutes=minute)
    return Snapshot("c1", {**snap.sweep, "sweep_ts": ts}, offsets=[{**r, "sweep_ts": ts} for r in snap.offsets],
                    members=[{**r, "sweep_ts": ts} for r in snap.members])


def test_a_sweep_held_after_a_failed_write_is_written_once(tmp_path: Path) -> None:
    # the members table cannot be written: the sweep's offsets file is written, its members and
    # sweeps row are not. The next sweep, once members can be written, first writes the held
    # one's members and sweeps row (not its offsets again), then its own
    lake = tmp_path / "lake"
    (lake / "members").mkdir(parents=True)
    (lake / "members" / "cluster=c1").write_text("a file where the cluster folder should be\n")
    sink = LakeSink(lake)
    assert sink.holding_since() is None
    with pytest.raises(LakeError, match="1 sweep\\(s\\) held in memory"):
        sink.update(_at(0))
    assert sink.held == 1
    assert sink.holding_since() == T0  # the lake is complete before the held sweep (the analytics stop there)
    assert sink.write_errors() == {("c1", "members"): 1}
    assert read_table(lake, "offsets").num_rows == 1
    (lake / "members" / "cluster=c1").unlink()
    sink.update(_at(1))
    assert sink.held == 0
    assert sink.holding_since() is None
    for table in ("offsets", "members", "sweeps"):
        got = sorted(read_table(lake, table).column("sweep_ts").to_pylist())
        assert got == [T0, T0 + dt.timedelta(minutes=1)], table


def test_held_sweeps_are_bounded_oldest_dropped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lake = tmp_path / "lake"
    lake.write_text("a file where the lake folder should be\n")
    sink = LakeSink(lake, max_held_rows=4)  # two sweeps of one offsets and one members row each
    for minute in range(4):
        with pytest.raises(LakeError):
            sink.update(_at(minute))
    assert sink.held == 2
    dropped = [r.getMessage() for r in caplog.records if "dropped the sweep" in r.getMessage()]
    assert len(dropped) == 2
    assert T0.isoformat() in dropped[0]
    lake.unlink()
    sink.update(_at(4))
    assert sorted(read_table(lake, "sweeps").column("sweep_ts").to_pylist()) == [
        T0 + dt.timedelta(minutes=m) for m in (2, 3, 4)]


def test_stopping_writes_the_held_sweeps(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.write_text("a file where the lake folder should be\n")
    collector = Collector(_settings(lake), client_factory=_DeadClient).start()
    collector.run_once()
    collector.deliver(_at(1))
    assert collector.sink.held == 2
    lake.unlink()
    collector.stop()
    assert collector.sink.held == 0
    assert read_table(lake, "sweeps").num_rows == 2


def test_failed_commit_log_flushes_are_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _mixed_log(10)
    real = CommitLogTailer.from_config

    def from_config(cluster: ClusterConfig, lake_root: Path | str, **kwargs: Any) -> CommitLogTailer:
        # the collector's own tail, over an in-memory __consumer_offsets instead of a broker
        return real(cluster, lake_root, consumer_factory=_factory(log), flush_interval_s=0.05,
                    poll_timeout_ms=10, **kwargs)

    monkeypatch.setattr(CommitLogTailer, "from_config", from_config)
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "commits").write_text("a file where the commits table should be\n")
    collector = Collector(_settings(lake, tail=True), client_factory=_DeadClient).start()
    try:
        deadline = time.monotonic() + 20
        while _scrape(collector).get(("c1", "commits"), 0.0) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        seen = _scrape(collector)
    finally:
        collector.stop()
    assert seen[("c1", "commits")] >= 1
    # the tail's other writes have their series too (its batch probes' as well); the positions were
    # saved before the commits failed
    assert {t for c, t in seen if c == "c1"} == {"offsets", "members", "sweeps", "commits", "group_events",
                                                 "_state", "batch_probes"}
    assert seen[("c1", "_state")] == 0.0
    assert seen[("c1", "batch_probes")] == 0.0


def test_unwritable_commit_log_positions_are_counted(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    lake.write_text("a file where the lake folder should be\n")
    tailer = CommitLogTailer("x:1", lake, "c1", start="earliest", consumer_factory=_factory(_mixed_log(10)))
    tailer.open()
    tailer.poll_batch(0)
    with pytest.raises(OSError):
        tailer.flush()  # the flush's intent is saved first, into <lake>/_state: it cannot be
    assert tailer.stats.snapshot()["lake_write_errors"] == {"_state": 1}
    tailer.close()
