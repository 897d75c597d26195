"""Shared fixtures: one real Kafka broker and one real S3-compatible server per test session,
unique names per test.

Every test that talks to Kafka uses ``kafka_broker`` (a real Apache Kafka 4.x KRaft broker on
127.0.0.1, started once per session and stopped at the end) and creates its own topics and
groups through ``unique`` so that tests never interfere.

Set ``LAGSCOPE_TEST_BOOTSTRAP=host:port`` to run against a broker you started yourself
(``lagscope broker start``); the fixture then neither starts nor stops anything.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.results_synthetic import Synthetic, write_synthetic
from helpers.s3server import S3Server

from lagscope import lake
from lagscope.devtools.broker import LocalBroker


class ExternalBroker:
    """A broker this test session did not start (LAGSCOPE_TEST_BOOTSTRAP)."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBroker]:
    external = os.environ.get("LAGSCOPE_TEST_BOOTSTRAP")
    if external:
        yield ExternalBroker(external)  # type: ignore[misc]
        return
    broker = LocalBroker(tmp_path_factory.mktemp("kafka"), sasl_ssl=True)
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real S3-compatible server process (gofakes3, tests/helpers/s3server.py) on 127.0.0.1, on
    a free port, its objects in a temp folder, with the bucket ``lagscope`` created: started once
    per session, stopped by its PID at the end. ``.endpoint``, ``.credentials``, ``.bucket``."""
    server = S3Server(tmp_path_factory.mktemp("s3"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_prefix(unique: str) -> str:
    """A key prefix in the S3 server's bucket that no other test uses."""
    return f"t/{unique}"


@pytest.fixture(scope="session")
def bootstrap(kafka_broker: LocalBroker) -> str:
    return kafka_broker.bootstrap


_counter = itertools.count()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """A name no other test uses: test name + counter + random suffix (valid as topic/group)."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40].strip("-")
    return f"{base}-{next(_counter)}-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def synthetic(tmp_path: Path) -> Synthetic:
    """Result tables of one group (tests/helpers/results_synthetic.py), for the results' readers:
    the exporter, the alerts, the Grafana annotations, the app links."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return write_synthetic(tmp_path / "results", "prod", "orders-svc", "orders", now)


@pytest.fixture
def quarantined(monkeypatch: pytest.MonkeyPatch) -> lake.QuarantineCounts:
    """This test's count of quarantined files (the process's counter starts afresh)."""
    counts = lake.QuarantineCounts()
    monkeypatch.setattr(lake, "QUARANTINED", counts)
    return counts


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port something is listening on (for "address in use" errors)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]
