"""A real Prometheus scrapes the collector's /metrics, fed by a real sweep of the real broker."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.prometheus import PrometheusServer
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import CoordinatorNotAvailableError, NoError, NotCoordinatorError
from kafka.structs import OffsetAndMetadata

from lagscope.collector.kafka_client import ClusterClient
from lagscope.collector.metrics import MetricsServer
from lagscope.collector.sweep import sweep
from lagscope.config import ClusterConfig

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus, pytest.mark.slow]

PARTITIONS = 3
PRODUCED = (12, 7, 0)  # messages produced to each partition
COMMITTED = (5, 7, 0)  # the group's committed offsets → lags 7, 0, 0


@pytest.fixture
def cluster_client(bootstrap: str) -> Iterator[ClusterClient]:
    client = ClusterClient(ClusterConfig(name="itest", bootstrap_servers=[bootstrap]), request_timeout_ms=10000)
    client.connect()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def lagging_group(bootstrap: str, unique: str) -> Iterator[tuple[str, str]]:
    """A topic with known end offsets and a group with known commits on it."""
    topic, group = f"{unique}-t", f"{unique}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
        for partition, n in enumerate(PRODUCED):
            for i in range(n):
                producer.send(topic, f"m{i}".encode(), partition=partition)
        producer.flush()
        offsets = {TopicPartition(topic, p): OffsetAndMetadata(c, "", -1) for p, c in enumerate(COMMITTED)}
        deadline = time.monotonic() + 60
        while True:  # a fresh broker creates __consumer_offsets on the first group request
            try:
                errors = admin.alter_group_offsets(group, offsets)  # per-partition errors, not raised
                if all(e is NoError for e in errors.values()):
                    break
            except (CoordinatorNotAvailableError, NotCoordinatorError):
                errors = {}
            assert time.monotonic() < deadline, f"cannot commit offsets for {group}: {errors}"
            time.sleep(0.5)
        yield topic, group
    finally:
        producer.close()
        admin.close()


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    with MetricsServer("127.0.0.1", 0) as server:
        yield server


def test_prometheus_scrapes_lag_from_a_real_sweep(tmp_path: Path, cluster_client: ClusterClient,
                                                   lagging_group: tuple[str, str],
                                                   metrics_server: MetricsServer) -> None:
    topic, group = lagging_group
    snapshot = sweep(cluster_client, cluster_client.cluster, group_ids=[group])
    assert snapshot.ok, snapshot.sweep
    assert [r["lag"] for r in sorted(snapshot.offsets, key=lambda r: r["partition"])] == [7, 0, 0], snapshot.sweep
    metrics_server.update(snapshot)

    with PrometheusServer(tmp_path, targets=[f"127.0.0.1:{metrics_server.port}"], scrape_interval="1s") as prom:
        prom.wait_for_target_up()
        sel = f'cluster="itest",consumergroup="{group}"'
        series = prom.wait_for(f"kafka_consumergroup_lag{{{sel}}}", lambda r: len(r) == PARTITIONS)
        lags = {int(s["metric"]["partition"]): float(s["value"][1]) for s in series}
        assert lags == {0: 7.0, 1: 0.0, 2: 0.0}
        assert all(s["metric"]["topic"] == topic for s in series)
        assert prom.query_value(f"sum(kafka_consumergroup_lag{{{sel}}} >= 0)") == 7.0
        assert prom.query_value(f'kafka_consumergroup_group_sum_lag{{cluster_name="itest",group="{group}"}}') == 7.0
        assert prom.query_value(f'kafka_topic_partition_current_offset{{cluster="itest",topic="{topic}",'
                                f'partition="0"}}') == 12.0
        assert prom.query_value('lagscope_up{cluster="itest"}') == 1.0

        # a snapshot whose rows are all duplicated must not produce a duplicate series. Prometheus
        # 2.x keeps the first of two samples of one series in a scrape without failing it, so the
        # check is: samples in the scrape == distinct series stored from it
        doubled = dataclasses.replace(snapshot, offsets=[*snapshot.offsets, *snapshot.offsets],
                                      members=[*snapshot.members, *snapshot.members])
        metrics_server.update(doubled)
        prom.wait_for('lagscope_sweeps_total{result="ok"}', lambda r: bool(r) and float(r[0]["value"][1]) == 2)
        time.sleep(1.5)  # one more scrape, entirely of the doubled snapshot
        scraped = prom.query_value('scrape_samples_scraped{job="lagscope"}')
        stored = prom.query_value('count({job="lagscope",__name__!~"up|scrape_.*"})')
        assert scraped is not None
        assert scraped == stored
        assert len(prom.query(f"kafka_consumergroup_lag{{{sel}}}")) == PARTITIONS

        # the group is gone from the next sweep (not among the swept groups): its series go stale at once
        other = sweep(cluster_client, cluster_client.cluster, group_ids=[f"{group}-absent"])
        metrics_server.update(other)
        prom.wait_for(f"kafka_consumergroup_lag{{{sel}}}", lambda r: r == [], timeout=15)
        assert prom.query_value('lagscope_sweeps_total{cluster="itest",result="ok"}') == 3.0
