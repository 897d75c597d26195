"""The __consumer_offsets tail honours the cluster's groups filter and reports itself on /metrics:
counters from a fake log (exact values), then a real tail on the real broker (scraped over HTTP)."""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from test_commitlog import T0, _factory, _mixed_log

from lagscope import lake
from lagscope.collector.commitlog import CommitLogService, CommitLogTailer
from lagscope.collector.metrics import METRICS, SKIP_REASONS, CommitLogCollector
from lagscope.config import ClusterConfig, Settings

Series = dict[str, dict[tuple[tuple[str, str], ...], float]]


def _parse(text: str) -> Series:
    out: Series = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def _one(series: Series, name: str, **labels: str) -> float:
    return series[name][tuple(sorted({"cluster": "c1", **labels}.items()))]


def _cluster(name: str, bootstrap: str, **groups: list[str]) -> ClusterConfig:
    return ClusterConfig.model_validate({"name": name, "bootstrap_servers": bootstrap, "groups": groups,
                                         "consumer_offsets_tail": {"enabled": True, "start": "earliest"}})


def test_excluded_groups_are_counted_and_never_written(tmp_path: Path) -> None:
    log = _mixed_log()  # commits and generations of g0 (partition 0) and g1 (partition 1), plus junk
    cluster = _cluster("c1", "unused:9092", exclude=["g1"])
    service = CommitLogService([cluster], tmp_path, tailer_factory=lambda c, root: CommitLogTailer.from_config(
        c, root, consumer_factory=_factory(log), flush_interval_s=3600))
    t = service.tailers["c1"]
    assert t.group_filter is not None
    t.open()
    while t.measure_lag() != 0:
        t.run_once(0)
    t.flush()
    assert {r["group_id"] for r in lake.read_table(tmp_path, "commits").to_pylist()} == {"g0"}
    assert {r["group_id"] for r in lake.read_table(tmp_path, "group_events").to_pylist()} == {"g0"}
    # g1: 15 commits and 3 generations; its future-version record is skipped before the filter
    assert t.stats.excluded == 18

    registry = CollectorRegistry()
    registry.register(CommitLogCollector(service.stats))
    series = _parse(generate_latest(registry).decode())
    read = sum(len(p) for p in log.values())
    assert _one(series, "lagscope_commitlog_records_read_total") == read
    # read - (unknown type + unknown version + corrupt)
    assert _one(series, "lagscope_commitlog_records_decoded_total") == read - 3
    expected = {"unknown_type": 1, "unknown_version": 1, "undecodable": 1, "excluded_group": 18, "duplicate": 0}
    assert {r: _one(series, "lagscope_commitlog_records_skipped_total", reason=r) for r in SKIP_REASONS} == expected
    assert _one(series, "lagscope_commitlog_lag_records") == 0  # measured at the first poll: nothing left after
    assert _one(series, "lagscope_commitlog_last_record_timestamp_seconds") == (T0 + 99_000) / 1000
    assert _one(series, "lagscope_commitlog_up") == 1
    assert _one(series, "lagscope_commitlog_errors_total") == 0
    # every declared tail family is served
    assert {m.name.removesuffix("_total") for m in METRICS if m.source == "commitlog"} == {
        f.name for f in text_string_to_metric_families(generate_latest(registry).decode()) if f.samples}
    t.close()
    assert _one(_parse(generate_latest(registry).decode()), "lagscope_commitlog_up") == 0


def test_no_filter_means_every_group(tmp_path: Path) -> None:
    # a cluster without include/exclude gets no predicate at all (nothing to call per record)
    t = CommitLogTailer.from_config(_cluster("c1", "unused:9092"), tmp_path, consumer_factory=_factory(_mixed_log()))
    assert t.group_filter is None
    t.open()
    while t.measure_lag() != 0:
        t.run_once(0)
    t.flush()
    assert {r["group_id"] for r in lake.read_table(tmp_path, "commits").to_pylist()} == {"g0", "g1"}
    assert t.stats.excluded == 0


# -- the real broker ---------------------------------------------------------------------------------

def _join_and_commit(bootstrap: str, topic: str, group: str, offset: int) -> None:
    """A real member: joins (a group_metadata record), commits ``offset`` on partition 0, leaves."""
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                      session_timeout_ms=6000, heartbeat_interval_ms=1000)
    try:
        # learn the new topic's partitions before joining: a leader that joins without them
        # assigns nothing (kafka-python 3) and the group never gets going
        deadline = time.monotonic() + 30
        while not c.partitions_for_topic(topic):
            assert time.monotonic() < deadline, f"{topic} has no partitions"
            time.sleep(0.1)
        c.subscribe([topic])
        while not c.assignment():
            assert time.monotonic() < deadline, f"{group} got no assignment"
            c.poll(200)
        c.commit({TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})
    finally:
        c.close()


def _scrape(url: str) -> Series:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return _parse(resp.read().decode())


def _wait(what: str, cond: Any, timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


@pytest.mark.kafka
def test_real_tail_filters_groups_and_its_metrics_move(bootstrap: str, unique: str, tmp_path: Path) -> None:
    from lagscope.collector.loop import Collector

    topic, kept, dropped = unique, f"{unique}-kept", f"{unique}-x"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lagscope-test")
    admin.create_topics([NewTopic(topic, 1, 1)])
    # the test waits for the tail to connect before committing: on a fresh broker (this test run
    # alone) __consumer_offsets exists only once some group has committed, so one does first
    # (outside the collector's include)
    _join_and_commit(bootstrap, topic, f"warmup-{unique}", 0)
    root = tmp_path / "lake"
    settings = Settings.model_validate({
        "clusters": [{"name": "c1", "bootstrap_servers": bootstrap,
                      # both groups are in the include; the exclude removes one of them
                      "groups": {"include": [f"{unique}-.*"], "exclude": [".*-x"]},
                      "consumer_offsets_tail": {"enabled": True, "start": "latest"}}],
        "collector": {"interval_s": 0.5, "lake": str(root), "compaction": {"enabled": False}},
        "metrics": {"port": 0}})
    collector = Collector(settings)
    stop = threading.Event()
    th = threading.Thread(target=collector.run, args=(stop,), daemon=True)
    th.start()
    try:
        _wait("the metrics server and the tail", lambda: collector.commitlog is not None
              and collector.metrics_server is not None and collector.commitlog.tailers["c1"].stats.connected)
        url = collector.metrics_server.url
        tailer = collector.commitlog.tailers["c1"]
        before = _scrape(url)
        assert _one(before, "lagscope_commitlog_up") == 1
        read0 = _one(before, "lagscope_commitlog_records_read_total")

        _join_and_commit(bootstrap, topic, dropped, 3)
        _join_and_commit(bootstrap, topic, kept, 5)

        def kept_in_lake() -> bool:
            commits = lake.read_table(root, "commits", cluster="c1").to_pylist()
            events = lake.read_table(root, "group_events", cluster="c1").to_pylist()
            return any(r["group_id"] == kept for r in commits) and any(r["group_id"] == kept for r in events)

        _wait("the kept group's commit and generation in the lake", kept_in_lake)
        _wait("the tail's lag measured after the commits", lambda: tailer.stats.lag_records is not None
              and tailer.stats.records > read0)
        after = _scrape(url)
        for table in ("commits", "group_events", "offsets"):
            groups = {r["group_id"] for r in lake.read_table(root, table, cluster="c1").to_pylist()}
            assert dropped not in groups, f"{table} holds the excluded group"
        assert kept in {r["group_id"] for r in lake.read_table(root, "offsets", cluster="c1").to_pylist()}
        # the excluded group's commit and generation records were read, decoded and counted
        assert _one(after, "lagscope_commitlog_records_skipped_total", reason="excluded_group") >= 2
        assert _one(after, "lagscope_commitlog_records_read_total") >= read0 + 4
        assert _one(after, "lagscope_commitlog_records_decoded_total") >= read0 + 4
        last = _one(after, "lagscope_commitlog_last_record_timestamp_seconds")
        assert abs(last - time.time()) < 120
        assert _one(after, "lagscope_commitlog_lag_records") >= 0
        assert _one(after, "lagscope_commitlog_errors_total") == 0

        # one more commit: the counters and the newest record time move on the next scrape
        admin.alter_group_offsets(kept, {TopicPartition(topic, 0): OffsetAndMetadata(9, "", -1)})
        read1 = _one(after, "lagscope_commitlog_records_read_total")
        _wait("the next commit read", lambda: _one(_scrape(url), "lagscope_commitlog_records_read_total") > read1)
        later = _scrape(url)
        assert _one(later, "lagscope_commitlog_last_record_timestamp_seconds") >= last
        # caught up: the tail measures no backlog a few seconds later
        _wait("lag 0", lambda: _one(_scrape(url), "lagscope_commitlog_lag_records") == 0, timeout=30)
    finally:
        stop.set()
        th.join(30)
        admin.close()
    assert not th.is_alive()
