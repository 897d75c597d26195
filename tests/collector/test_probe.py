"""The batch probe (lagscope.collector.probe) against a real broker: which batch holds a
committed offset's previous record, and whether the offset lies inside it (never the log end)."""

from __future__ import annotations

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from lagscope.collector import probe
from lagscope.collector.kafka_client import ClusterClient
from lagscope.config import ClusterConfig
from lagscope.errors import KafkaUnavailable

pytestmark = pytest.mark.kafka


def _batches(bootstrap: str, topic: str) -> None:
    """Offsets 0–9 in one batch, 10 alone, 11–15 in one gzip batch (the producer lingers a
    second, so each group of sends before a flush is one batch)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1)])
    finally:
        admin.close()
    for n, compression in ((10, None), (1, None), (5, "gzip")):
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1000, batch_size=1 << 20,
                                 compression_type=compression)
        try:
            for i in range(n):
                producer.send(topic, value=b"x" * 100 + bytes([i]), partition=0)
            producer.flush()
        finally:
            producer.close()


def test_a_committed_offset_inside_a_batch_is_told_from_one_on_a_boundary(bootstrap: str, unique: str) -> None:
    topic = f"{unique}-probe"
    _batches(bootstrap, topic)
    cases = {5: (probe.INSIDE, 0, 9), 10: (probe.BOUNDARY, 0, 9), 11: (probe.BOUNDARY, 10, 10),
             13: (probe.INSIDE, 11, 15), 16: (probe.BOUNDARY, 11, 15)}
    with ClusterClient(ClusterConfig(name="itest", bootstrap_servers=[bootstrap])) as client:
        client.connect()
        got = probe.probe(client, [probe.Probe(topic, 0, c) for c in cases]
                          + [probe.Probe(topic, 0, 0), probe.Probe(topic, 0, 100),
                             probe.Probe(f"{unique}-no-such-topic", 0, 5)])
    assert {b.probe.committed: (b.verdict, b.base_offset, b.last_offset) for b in got[:5]} == cases
    # the batches are of this broker's first leader epoch
    assert {b.batch_epoch for b in got[:5]} == {0}
    zero, beyond, missing = got[5:]
    assert (zero.verdict, zero.reason) == (probe.NONE, "nothing before offset 0")
    assert beyond.verdict == probe.NONE
    assert "OffsetOutOfRange" in beyond.reason
    assert missing.verdict == probe.NONE
    assert "no leader" in missing.reason


@pytest.mark.parametrize(("committed", "epoch", "verdict"), [
    (5, 3, probe.INSIDE),      # the batch [0, 9] of epoch 3, the commit's too
    (10, 3, probe.BOUNDARY),   # c − 1 is the batch's last offset
    (5, 2, probe.NONE),        # the batch was written by a later leader than the commit's
    (5, None, probe.INSIDE),   # no epoch recorded with the commit: no guard
])
def test_the_verdict_from_a_batch(committed: int, epoch: int | None, verdict: str) -> None:
    assert probe.judge(probe.Probe("t", 0, committed, epoch), 0, 9, 3).verdict == verdict


def test_a_batch_that_starts_after_the_offset_is_no_evidence() -> None:
    # compaction removed the records around c − 1: the first batch after it proves nothing
    got = probe.judge(probe.Probe("t", 0, 5), 7, 9, None)
    assert (got.verdict, got.reason) == (probe.NONE, "no batch holds offset 4 (compacted or deleted)")


def test_no_answer_in_time_is_no_evidence_for_each_probe() -> None:
    class Silent:
        def run(self, *args: object, **kwargs: object) -> object:
            raise KafkaUnavailable("itest: no answer within 10 ms")

    probes = [probe.Probe("t", 0, 5), probe.Probe("t", 1, 9)]
    got = probe.probe(Silent(), probes, timeout_ms=10)  # type: ignore[arg-type]
    assert [(b.probe, b.verdict, b.reason) for b in got] == [
        (p, probe.NONE, "itest: no answer within 10 ms") for p in probes]
