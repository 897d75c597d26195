"""The /metrics and /healthz HTTP server (real sockets on loopback)."""

from __future__ import annotations

import datetime as dt
import json
import socket
import urllib.error
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from lagscope.collector.metrics import MetricsServer
from lagscope.collector.model import Snapshot
from lagscope.errors import ConfigError

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def _snapshot(lag_end: int = 10) -> Snapshot:
    row = {"sweep_ts": T0, "group_id": "g", "topic": "t", "partition": 0, "committed_offset": 4,
           "log_end_offset": lag_end, "log_start_offset": 0, "last_stable_offset": lag_end, "lag": lag_end - 4}
    return Snapshot("prod", {"sweep_ts": T0, "ok": True, "duration_ms": 12.0}, offsets=[row])


def _get(url: str, accept: str | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def test_serves_metrics_and_health() -> None:
    with MetricsServer("127.0.0.1", 0) as server:
        assert server.port != 0
        server.update(_snapshot())
        status, ctype, body = _get(server.url)
        assert status == 200
        assert ctype.startswith("text/plain")
        samples = {(s.name, s.labels.get("partition")): s.value
                   for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}
        assert samples[("kafka_consumergroup_lag", "0")] == 6
        # the scrape reflects the latest snapshot
        server.update(_snapshot(lag_end=20))
        body = _get(server.url)[2].decode()
        assert 'kafka_consumergroup_lag{cluster="prod",consumergroup="g",partition="0",topic="t"} 16.0' in body

        status, ctype, body = _get(server.url.replace("/metrics", "/healthz"))
        assert status == 200
        assert ctype == "application/json"
        health = json.loads(body)
        assert health["status"] == "ok"
        assert health["clusters"]["prod"] == {"up": True, "last_success": T0.timestamp()}

        assert _get(server.url.replace("/metrics", "/nope"))[0] == 404


def test_openmetrics_negotiation() -> None:
    with MetricsServer("127.0.0.1", 0) as server:
        server.update(_snapshot())
        status, ctype, body = _get(server.url, accept="application/openmetrics-text; version=1.0.0")
        assert status == 200
        assert ctype.startswith("application/openmetrics-text")
        assert body.rstrip().endswith(b"# EOF")
        assert body.count(b"# EOF") == 1
        assert b'kafka_consumergroup_lag{cluster="prod",consumergroup="g",partition="0",topic="t"} 6.0' in body


def test_existing_registry_is_served_too() -> None:
    registry = CollectorRegistry()
    Counter("other_things", "something else in the same process", registry=registry).inc(3)
    with MetricsServer("127.0.0.1", 0, registry=registry) as server:
        server.update(_snapshot())
        body = _get(server.url)[2].decode()
        assert "other_things_total 3.0" in body
        assert "kafka_consumergroup_lag{" in body


def test_stop_releases_the_port() -> None:
    server = MetricsServer("127.0.0.1", 0).start()
    port = server.port
    server.stop()
    with socket.socket() as s:  # nothing listens any more
        assert s.connect_ex(("127.0.0.1", port)) != 0
    server.stop()  # idempotent


def test_busy_port_is_a_config_error() -> None:
    with MetricsServer("127.0.0.1", 0) as first:
        second = MetricsServer("127.0.0.1", first.port)
        with pytest.raises(ConfigError, match=r"cannot listen on 127\.0\.0\.1"):
            second.start()


@pytest.mark.parametrize("port", [-1, 70000])
def test_invalid_port(port: int) -> None:
    with pytest.raises(ConfigError, match="metrics port"):
        MetricsServer("127.0.0.1", port)


def test_rendered_once_per_update() -> None:
    server = MetricsServer("127.0.0.1", 0)
    server.update(_snapshot())
    first = server.collector.exposition()
    assert server.collector.exposition() is first  # the second scrape reuses the bytes
    assert server.collector.exposition(openmetrics=True) is not first
    server.update(_snapshot(lag_end=30))
    second = server.collector.exposition()
    assert second is not first
    assert b"} 26.0" in second
