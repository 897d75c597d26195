"""The collector applies ``collector.retention`` to the lake in its maintenance thread: at the first
iteration, then hourly, never beside a compaction, never what the analytics' checkpoint has not
read; the removals are counted for /metrics."""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from lagscope.collector.loop import Collector
from lagscope.config import Settings
from lagscope.retention import checkpoint_file

TODAY = dt.datetime.now(dt.UTC).date()


def _partition(root: Path, table: str, day: dt.date) -> Path:
    """A partition folder of ``day`` holding 100 bytes, last written at the end of that day."""
    folder = root / table / "cluster=c1" / f"date={day.isoformat()}"
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"x" * 100)
    when = dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC).timestamp()
    for p in (folder / "part-0.parquet", folder):
        os.utime(p, (when, when))
    return folder


def _collector(tmp_path: Path, retention: int | None = 3, clock: list[float] | None = None) -> Collector:
    settings = Settings.model_validate({
        "clusters": [{"name": "c1", "bootstrap_servers": "127.0.0.1:1"}],
        "collector": {"lake": str(tmp_path / "lake"), "retention": retention}})
    ticks = clock if clock is not None else [0.0]
    return Collector(settings, metrics=False, clock=lambda: ticks[0])


def test_first_iteration_prunes_then_hourly(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    old = _partition(lake, "offsets", TODAY - dt.timedelta(days=10))
    today = _partition(lake, "offsets", TODAY)
    clock = [0.0]
    collector = _collector(tmp_path, clock=clock)
    collector.maybe_prune(wait=True)
    assert not old.exists()
    assert today.exists()
    assert collector.removals.snapshot()[("c1", "offsets")] == (1, 100)
    assert collector.removals.snapshot()[("c1", "members")] == (0, 0)  # every table's series from the start
    # within the hour: not again
    older = _partition(lake, "members", TODAY - dt.timedelta(days=9))
    clock[0] = 3599.0
    collector.maybe_prune(wait=True)
    assert older.exists()
    clock[0] = 3600.0
    collector.maybe_prune(wait=True)
    assert not older.exists()
    assert collector.removals.snapshot()[("c1", "members")] == (1, 100)


def test_no_retention_no_removal(tmp_path: Path) -> None:
    old = _partition(tmp_path / "lake", "offsets", TODAY - dt.timedelta(days=1000))
    _collector(tmp_path, retention=0).maybe_prune(force=True, wait=True)
    assert old.exists()


def test_the_analytics_checkpoint_beside_the_lake_is_respected(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    days = [_partition(lake, "offsets", TODAY - dt.timedelta(days=n)) for n in (20, 15, 10)]
    # the analytics (results beside the lake, as `lagscope analyze` resolves them) stopped 15 days ago
    cp = checkpoint_file(tmp_path / "results")
    cp.parent.mkdir(parents=True)
    watermark = dt.datetime.combine(TODAY - dt.timedelta(days=15), dt.time(6), dt.UTC)
    cp.write_text(json.dumps({"watermark": watermark.isoformat(), "version": "v-1"}))
    _collector(tmp_path).maybe_prune(force=True, wait=True)
    assert [d.exists() for d in days] == [False, True, True]


def test_never_beside_a_compaction(tmp_path: Path) -> None:
    old = _partition(tmp_path / "lake", "offsets", TODAY - dt.timedelta(days=10))
    collector = _collector(tmp_path)
    release = threading.Event()
    busy = threading.Thread(target=release.wait)
    busy.start()
    collector._maintenance = busy  # a compaction in progress
    try:
        collector.maybe_prune()
        assert old.exists()
        assert collector._last_prune is None  # so the next iteration tries again
    finally:
        release.set()
        busy.join()
    collector.maybe_prune(wait=True)
    assert not old.exists()


def test_removals_are_served_on_metrics(tmp_path: Path) -> None:
    old = _partition(tmp_path / "lake", "sweeps", TODAY - dt.timedelta(days=10))
    settings = Settings.model_validate({
        "clusters": [{"name": "c1", "bootstrap_servers": "127.0.0.1:1"}],
        "collector": {"lake": str(tmp_path / "lake"), "retention": 3},
        "metrics": {"enabled": True, "bind": "127.0.0.1", "port": 0}})
    collector = Collector(settings).start()
    try:
        collector.maybe_prune(wait=True)
        assert not old.exists()
        with urllib.request.urlopen(collector.metrics_server.url, timeout=5) as resp:
            text = resp.read().decode()
    finally:
        collector.stop()
    got = {(f.name, s.labels["table"]): s.value for f in text_string_to_metric_families(text)
           if f.name.startswith("lagscope_retention_removed_") for s in f.samples if s.name.endswith("_total")}
    assert got == {("lagscope_retention_removed_partitions", "sweeps"): 1.0,
                   ("lagscope_retention_removed_bytes", "sweeps"): 100.0,
                   ("lagscope_retention_removed_partitions", "offsets"): 0.0,
                   ("lagscope_retention_removed_bytes", "offsets"): 0.0,
                   ("lagscope_retention_removed_partitions", "members"): 0.0,
                   ("lagscope_retention_removed_bytes", "members"): 0.0}
