"""A thin, typed wrapper of kafka-python 3's low-level network client, for the sweep.

kafka-python 3 runs all network I/O on one background thread (``NetworkSelector``) and
exposes it through ``KafkaConnectionManager.send(request, node_id)``, which returns a
``kafka.future.Future`` that coroutines running on that thread can ``await``. The sweep is a
coroutine that sends every request of a phase first (to all brokers, several per
connection: Kafka answers in order per connection and serves connections in parallel) and
then awaits them, so a phase costs one round trip, not one per group.

    >>> with ClusterClient(cluster, request_timeout_ms=5000) as client:   # doctest: +SKIP
    ...     client.connect()
    ...     response = client.run(some_coroutine, client)

Connection failures surface as :class:`~lagscope.errors.KafkaUnavailable`. The clear-text
SASL password is passed to kafka-python and nowhere else (never logged).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

import kafka.errors as kerr
from kafka.future import Future
from kafka.net.compat import KafkaNetClient

from lagscope import __version__
from lagscope.config import ClusterConfig
from lagscope.errors import KafkaUnavailable

__all__ = ["ClusterClient", "stop_io_thread"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: requests pipelined per connection before kafka-python pauses it; the sweep keeps well below
MAX_IN_FLIGHT = 1000


def stop_io_thread(client: Any) -> None:
    """Stop the background I/O thread of a kafka-python 3 client (a ``KafkaNetClient`` or a
    ``KafkaConsumer``) before its ``close()``: close() shuts the sockets from the calling thread,
    and an I/O thread between a readiness wait and its read then reads a None socket (an
    AttributeError traceback on the terminal at every shutdown that hits it). kafka-python offers
    this only through its private ``_net``: both kinds of client reach for it here alone."""
    client._net.stop()


class ClusterClient:
    """One cluster's connections (configure → ``connect()`` → ``run(...)``* → ``close()``)."""

    def __init__(self, cluster: ClusterConfig, *, request_timeout_ms: int = 10000,
                 reconnect_backoff_max_ms: int = 1000, client_id: str | None = None) -> None:
        self.cluster = cluster
        self.request_timeout_ms = request_timeout_ms
        self._options: dict[str, Any] = {
            **cluster.client_options(),
            "client_id": client_id or f"lagscope-{__version__}",
            "request_timeout_ms": request_timeout_ms,
            # a broker that comes back must be found again within one sweep interval
            "reconnect_backoff_ms": 50,
            "reconnect_backoff_max_ms": reconnect_backoff_max_ms,
            "socket_connection_setup_timeout_ms": min(10000, request_timeout_ms),
            "socket_connection_setup_timeout_max_ms": request_timeout_ms,
            "max_in_flight_requests_per_connection": MAX_IN_FLIGHT,
            "receive_message_max_bytes": 200_000_000,
            "metadata_max_age_ms": 60000,
            # the sweep coroutine yields between responses; on a busy host one step can still take
            # a few hundred ms, which is harmless here (this I/O thread serves the sweep only)
            "slow_task_threshold_secs": 2.0,
        }
        self._client: KafkaNetClient | None = None
        self._started = False

    def __repr__(self) -> str:  # no options: they hold the password
        return f"ClusterClient(cluster={self.cluster.name!r}, bootstrap={self.cluster.bootstrap_servers})"

    # -- lifecycle -------------------------------------------------------------------------
    def connect(self, timeout_ms: int | None = None) -> ClusterClient:
        """Start the I/O thread and bootstrap (fetch cluster metadata); KafkaUnavailable if not."""
        if self._client is None:
            self._client = KafkaNetClient(**self._options)
        if not self._started:
            self._client._net.start()
            self._started = True
        try:
            self._client._manager.bootstrap(timeout_ms or self.request_timeout_ms)
        except kerr.KafkaError as exc:
            raise KafkaUnavailable(f"{self.cluster.name}: cannot bootstrap from "
                                   f"{','.join(self.cluster.bootstrap_servers)}: {exc}") from exc
        return self

    @property
    def connected(self) -> bool:
        return self._client is not None and bool(self._client._manager.bootstrapped)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if self._started:
                stop_io_thread(client)  # the I/O thread first (see stop_io_thread)
        finally:
            self._started = False
            client.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- I/O -------------------------------------------------------------------------------
    def run(self, coro: Callable[..., Awaitable[T]], *args: Any, timeout_ms: int | None = None) -> T:
        """Run ``coro(*args)`` on the I/O thread and return its result (re-raising its error).

        With ``timeout_ms``, give up waiting after that long (KafkaUnavailable).
        """
        client = self._require()
        manager = client._manager
        if timeout_ms is None:
            result: T = client._net.run(coro, *args)
            return result

        async def bounded() -> T:
            inner = manager.call_soon(coro, *args)
            value: T = await manager.wait_for(inner, timeout_ms)
            return value

        try:
            result = client._net.run(bounded)
        except kerr.KafkaTimeoutError as exc:
            raise KafkaUnavailable(f"{self.cluster.name}: no answer within {timeout_ms} ms") from exc
        return result

    def send(self, request: Any, node_id: int | None = None) -> Any:
        """Send ``request`` (on the I/O thread); returns an awaitable kafka Future of the response."""
        manager = self._require()._manager
        try:
            return manager.send(request, node_id=node_id)
        except Exception as exc:  # unknown broker id, cached auth failure: fail this request only
            return Future().failure(exc)

    def call_soon(self, coro: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Start ``coro(*args)`` as its own task on the I/O thread; returns an awaitable Future."""
        return self._require()._manager.call_soon(coro, *args)

    def sleep(self, seconds: float) -> Any:
        """An awaitable pause for coroutines running on the I/O thread."""
        return self._require()._net.sleep(seconds)

    def add_broker(self, node_id: int, host: str, port: int) -> None:
        """Note a broker seen in a response; refresh metadata when it is not known yet."""
        cluster = self._require()._manager.cluster
        if cluster.broker_metadata(node_id) is None:
            log.debug("%s: broker %s (%s:%s) not in metadata yet; refreshing", self.cluster.name,
                      node_id, host, port)
            cluster.request_update()

    def broker_ids(self) -> list[int]:
        return sorted(b.node_id for b in self._require()._manager.cluster.brokers())

    def api_version(self, request_cls: Any, max_version: int | None = None) -> int:
        """The version kafka-python will use for ``request_cls`` with this cluster."""
        data = self._require()._manager.broker_version_data
        if data is None:
            raise KafkaUnavailable(f"{self.cluster.name}: not bootstrapped")
        if max_version is None:
            version: int = data.api_version(request_cls)
        else:
            version = data.api_version(request_cls, max_version=max_version)
        return version

    def _require(self) -> KafkaNetClient:
        if self._client is None:
            raise KafkaUnavailable(f"{self.cluster.name}: not connected")
        return self._client


async def gather(futures: Sequence[Any]) -> list[Any]:
    """Await kafka Futures already in flight; each result is the response or the exception."""
    out: list[Any] = []
    for f in futures:
        try:
            out.append(await f)
        except Exception as exc:
            out.append(exc)
    return out
