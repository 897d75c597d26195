"""The Burrow API's HTTP server: a component with a lifecycle (``start()``, ``stop()``).

Standard-library ``ThreadingHTTPServer`` on a daemon thread (:mod:`lagscope.httpserve`, as the
collector's ``/metrics``), HTTP/1.1 with keep-alive (Burrow's clients poll one group after
another). Every request reads the current :class:`~lagscope.burrow.snapshot.Snapshot` (one
attribute load) and answers from it through
:func:`lagscope.burrow.api.respond`; the snapshot is rebuilt in the background by a
:class:`~lagscope.burrow.snapshot.SnapshotRefresher` and replaced whole.

    >>> api = BurrowApi(SnapshotRefresher(SnapshotBuilder("lake", "results")), port=0)  # doctest: +SKIP
    >>> api.start().url                                                                 # doctest: +SKIP
    'http://127.0.0.1:40123/v3/kafka'
"""

from __future__ import annotations

import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lagscope import httpserve
from lagscope.burrow.api import Response, respond
from lagscope.burrow.snapshot import SnapshotRefresher
from lagscope.errors import ConfigError

__all__ = ["BurrowApi"]

log = logging.getLogger(__name__)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    refresher: SnapshotRefresher
    hostname: str


class _Handler(BaseHTTPRequestHandler):
    """One connection's requests. Keep-alive needs both settings below: the standard library
    writes the headers and the body in two sends, and with Nagle's algorithm the body waited for
    the client's delayed ACK of the headers (40 ms on Linux) on every request after the first."""

    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # TCP_NODELAY: a response's last segment leaves at once
    wbufsize = -1                   # buffered: headers and body leave in one send (flushed per request)

    def _answer(self) -> None:
        try:
            resp = respond(self.server.refresher.snapshot, self.command, self.path, host=self.server.hostname)
        except Exception as exc:  # a bug must not kill the server thread
            log.exception("burrow api: %s %s failed", self.command, self.path)
            resp = Response(500, f'{{"error":true,"message":"internal error: {type(exc).__name__}"}}'.encode())
        self.send_response(resp.status)
        self.send_header("Content-Type", resp.content_type)
        self.send_header("Content-Length", str(len(resp.body)))
        for name, value in resp.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(resp.body)

    def _drain(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def do_GET(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def do_OPTIONS(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._drain()
        self._answer()

    def do_PUT(self) -> None:
        self._drain()
        self._answer()

    def do_DELETE(self) -> None:
        self._drain()
        self._answer()

    def do_PATCH(self) -> None:
        self._drain()
        self._answer()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class BurrowApi:
    """Serves Burrow's API v3 on ``bind:port`` from ``refresher``'s snapshots (``port=0``: a free
    port, read back from :attr:`port`). ``start()`` takes a first snapshot, then listens."""

    name = "burrow-api"

    def __init__(self, refresher: SnapshotRefresher, *, bind: str = "127.0.0.1", port: int = 8000,
                 hostname: str | None = None) -> None:
        if not 0 <= port <= 65535:
            raise ConfigError(f"burrow_api.port must be 0..65535, got {port}")
        self.refresher = refresher
        self.bind = bind
        self._requested_port = port
        self.hostname = hostname or socket.gethostname()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._requested_port if self._server is None else int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return httpserve.url_of(self.bind, self.port, "/v3/kafka")

    def start(self) -> BurrowApi:
        if self._server is not None:
            return self
        server = httpserve.listen(_Server, self.bind, self._requested_port, _Handler, "burrow api")
        server.refresher = self.refresher
        server.hostname = self.hostname
        try:
            self.refresher.start()
        except BaseException:
            server.server_close()
            raise
        self._server = server
        self._thread = httpserve.serve_in_background(server, "lagscope-burrow-api")
        log.info("burrow api: serving %s (lake %s, results %s)", self.url, self.refresher.builder.lake,
                 self.refresher.builder.results)
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        httpserve.stop(server, thread)
        self.refresher.stop()

    def is_healthy(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self.refresher.is_alive()

    def __enter__(self) -> BurrowApi:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
