"""The sweep over SASL_SSL (SCRAM-SHA-512 over TLS, CA generated at start-up) on a real broker."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata

from lagscope.collector.kafka_client import ClusterClient
from lagscope.collector.sweep import sweep
from lagscope.config import ClusterConfig
from lagscope.devtools.broker import SCRAM_USER, LocalBroker

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> LocalBroker:
    broker = LocalBroker(tmp_path_factory.mktemp("sasl"), sasl_ssl=True, offsets_partitions=1)
    broker.start()
    yield broker  # type: ignore[misc]
    broker.stop()


def _cluster(broker: LocalBroker, password_file: Path, *, ca: Path | None) -> ClusterConfig:
    security = {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": SCRAM_USER,
                "password_file": str(password_file), "ca_file": str(ca) if ca else None}
    return ClusterConfig(name="secure", bootstrap_servers=broker.sasl_bootstrap,  # type: ignore[arg-type]
                         security=security)  # type: ignore[arg-type]


def test_sweep_over_sasl_ssl_records_lag(sasl_broker: LocalBroker, tmp_path: Path,
                                         caplog: pytest.LogCaptureFixture) -> None:
    cfg = sasl_broker.sasl_client_config()
    admin = KafkaAdminClient(**cfg)
    try:
        admin.create_topics([NewTopic("secure-t", num_partitions=1, replication_factor=1)])
    finally:
        admin.close()
    producer = KafkaProducer(**cfg)
    for i in range(7):
        producer.send("secure-t", f"m{i}".encode(), partition=0)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(group_id="secure-g", enable_auto_commit=False, **cfg)
    consumer.commit({TopicPartition("secure-t", 0): OffsetAndMetadata(3, "", -1)})
    consumer.close()

    password_file = tmp_path / "pw"
    password_file.write_text(f"{sasl_broker.scram_password}\n")
    cluster = _cluster(sasl_broker, password_file, ca=sasl_broker.ca_file)
    with caplog.at_level(logging.DEBUG), ClusterClient(cluster, request_timeout_ms=10000) as client:
        client.connect()
        snap = sweep(client, cluster)
    assert snap.ok, snap.sweep["error"]
    rows = [r for r in snap.offsets if r["group_id"] == "secure-g"]
    assert [(r["topic"], r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"]) for r in rows] == [
        ("secure-t", 0, 3, 7, 4)]
    assert sasl_broker.scram_password not in caplog.text


def test_sweep_over_sasl_ssl_with_an_untrusted_ca_fails_as_a_recorded_sweep(
        sasl_broker: LocalBroker, tmp_path: Path) -> None:
    # without the CA the TLS handshake must fail: the sweep is recorded as failed, not as zeros
    password_file = tmp_path / "pw"
    password_file.write_text(sasl_broker.scram_password or "")
    cluster = _cluster(sasl_broker, password_file, ca=None)
    client = ClusterClient(cluster, request_timeout_ms=2000)
    try:
        snap = sweep(client, cluster, timeout_s=5)
    finally:
        client.close()
    assert snap.ok is False
    assert snap.sweep["error"]
    assert snap.offsets == [] or len(snap.offsets) == 0
