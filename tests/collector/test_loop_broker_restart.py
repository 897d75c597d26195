"""The fault test: the broker stops and comes back while `collect` runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from lagscope.collector.loop import Collector
from lagscope.collector.model import Snapshot
from lagscope.collector.reader import read
from lagscope.config import Settings
from lagscope.devtools.broker import LocalBroker, free_port

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

INTERVAL = 1.0


class _Recorder:
    """Receives every Snapshot, with the wall time it arrived."""

    def __init__(self) -> None:
        self.snaps: list[Snapshot] = []

    def update(self, snapshot: Snapshot) -> None:
        self.snaps.append(snapshot)

    def wait(self, predicate: Callable[[Snapshot], bool], timeout: float, after: float = 0.0) -> Snapshot:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for s in list(self.snaps):
                if s.sweep_ts.timestamp() >= after and predicate(s):
                    return s
            time.sleep(0.05)
        raise AssertionError(f"no matching sweep within {timeout}s; last: {[s.sweep for s in self.snaps[-3:]]}")


def test_broker_stop_and_restart_is_recorded_as_failed_sweeps_and_collection_resumes(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path / "kafka", offsets_partitions=1, port=free_port(), heap="384m")
    broker.start()
    lake = tmp_path / "lake"
    stop = threading.Event()
    thread: threading.Thread | None = None
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic("orders", 2, 1)])
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
        for i in range(10):
            producer.send("orders", b"x", partition=i % 2)
        producer.close()
        commits = {TopicPartition("orders", 0): OffsetAndMetadata(2, "", -1),
                   TopicPartition("orders", 1): OffsetAndMetadata(4, "", -1)}
        deadline = time.monotonic() + 120  # a fresh broker creates __consumer_offsets on first use
        while True:
            try:
                admin.alter_group_offsets("billing", commits)
                break
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        admin.close()

        settings = Settings(
            clusters=[{"name": "fault", "bootstrap_servers": broker.bootstrap}],  # type: ignore[list-item]
            collector={"interval_s": INTERVAL, "lake": str(lake), "request_timeout_ms": 1500},  # type: ignore[arg-type]
            metrics={"enabled": False})  # type: ignore[arg-type]
        collector = Collector(settings)
        recorder = _Recorder()
        collector.receivers.append(recorder)
        thread = threading.Thread(target=collector.run, args=(stop,), daemon=True)
        thread.start()

        recorder.wait(lambda s: s.ok and s.sweep["partitions"] == 2, timeout=60)
        broker.stop()
        down_at = time.time()
        failed = recorder.wait(lambda s: not s.ok, timeout=30, after=down_at)
        # keep it down for a few sweeps: the loop must survive all of them (and reconnect)
        recorder.wait(lambda s: not s.ok, timeout=30, after=failed.sweep_ts.timestamp() + 2 * INTERVAL)
        assert thread.is_alive()
        broker.start()
        up_at = time.time()
        back = recorder.wait(lambda s: s.ok, timeout=30, after=up_at - INTERVAL)
        back_with_data = recorder.wait(lambda s: s.ok and s.sweep["partitions"] == 2, timeout=30,
                                       after=up_at - INTERVAL)
        stop.set()
        thread.join(30)
        assert not thread.is_alive()
    finally:
        stop.set()
        if thread is not None:
            thread.join(30)
        broker.stop()

    # collection resumed within one interval of the broker's return (a sweep that was running
    # while it came back may still fail; the next one starts at most one interval later)
    assert back.sweep_ts.timestamp() <= up_at + INTERVAL + 0.5, (back.sweep_ts, up_at)
    # the group's coordinator reloads its offsets partition first; data follows one sweep later at most
    assert back_with_data.sweep_ts.timestamp() <= up_at + 2 * INTERVAL + 1.0, (back_with_data.sweep_ts, up_at)

    sweeps = read(lake, "sweeps").sort_by("sweep_ts").to_pylist()
    outage = [s for s in sweeps if not s["ok"]]
    assert len(outage) >= 3
    for s in outage:  # a gap is a gap: recorded as failed with the reason, never as zeros
        assert s["error"]
        assert s["groups"] == 0
        assert s["partitions"] == 0
    assert sweeps[0]["ok"]
    assert sweeps[-1]["ok"]
    failed_ts = {s["sweep_ts"] for s in outage}
    offsets = read(lake, "offsets").to_pylist()
    assert not [r for r in offsets if r["sweep_ts"] in failed_ts]
    after = [r for r in offsets if r["sweep_ts"] == back_with_data.sweep_ts]
    assert {(r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"]) for r in after} == \
        {(0, 2, 5, 3), (1, 4, 5, 1)}
    # no partial or corrupt file: every visible file reads whole, no temporary left behind
    files = [p for p in lake.rglob("*") if p.is_file()]
    assert not [p for p in files if p.name.startswith(".tmp-")]
    data = [p for p in files if p.suffix == ".parquet"]
    assert data
    for p in data:  # the lake's own state (_state/: locks, markers) is not data
        assert pq.read_table(p).num_rows >= 1
