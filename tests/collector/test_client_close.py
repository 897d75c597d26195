"""Closing a cluster's client while its I/O thread is busy prints nothing: kafka-python's own
close() shuts the sockets from the caller's thread, and an I/O thread caught between a readiness
wait and its read used to read a None socket ("Unhandled exception in task", an AttributeError
traceback on the terminal of every ``lagscope run`` or demo that stopped at the wrong moment)."""

from __future__ import annotations

import logging
import threading

import pytest

from lagscope.collector.kafka_client import ClusterClient
from lagscope.collector.sweep import sweep
from lagscope.config import ClusterConfig

pytestmark = pytest.mark.kafka


def test_closing_while_sweeping_logs_no_error(bootstrap: str, caplog: pytest.LogCaptureFixture) -> None:
    cluster = ClusterConfig(name="close", bootstrap_servers=[bootstrap])
    caplog.set_level(logging.ERROR, logger="kafka")
    for _ in range(300):
        client = ClusterClient(cluster, request_timeout_ms=5000).connect()
        stop = threading.Event()

        def sweeps(c: ClusterClient = client, done: threading.Event = stop) -> None:
            while not done.is_set():
                try:
                    sweep(c, cluster)
                except Exception:  # the client closed under it
                    return

        t = threading.Thread(target=sweeps, daemon=True)
        t.start()
        sweep(client, cluster)  # a whole sweep with both threads on the connections
        stop.set()
        client.close()  # the other thread's sweep is most likely in flight
        t.join(10)
        assert not t.is_alive()
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert not tracebacks, [f"{r.name}: {r.getMessage()} {r.exc_info}" for r in tracebacks[:3]]
