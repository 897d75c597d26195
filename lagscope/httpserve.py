"""A standard-library HTTP server on its own daemon thread: what the collector's ``/metrics``
and the Burrow API share (listening on IPv4 or IPv6, serving in the background, stopping).

    >>> server = listen(MyServer, "::1", 0, MyHandler, "my api")   # doctest: +SKIP
    >>> thread = serve_in_background(server, "lagscope-my-api")     # doctest: +SKIP
    >>> stop(server, thread)                                          # doctest: +SKIP
"""

from __future__ import annotations

import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TypeVar

from lagscope.errors import ConfigError

__all__ = ["listen", "serve_in_background", "stop", "url_of"]

S = TypeVar("S", bound=ThreadingHTTPServer)


def listen(server_cls: type[S], bind: str, port: int, handler: type[BaseHTTPRequestHandler], what: str) -> S:
    """``server_cls`` bound to ``bind:port`` (an IPv6 address: its ``AF_INET6`` subclass), not
    serving yet; :class:`ConfigError` naming ``what`` when it cannot listen there."""
    cls = type(f"{server_cls.__name__}6", (server_cls,), {"address_family": socket.AF_INET6}) if ":" in bind \
        else server_cls
    try:
        server: S = cls((bind, port), handler)
    except OSError as exc:
        raise ConfigError(f"{what}: cannot listen on {bind}:{port}: {exc}") from exc
    return server


def serve_in_background(server: ThreadingHTTPServer, name: str) -> threading.Thread:
    """Serve on a new daemon thread ``name`` (started); :func:`stop` ends it."""
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, name=name, daemon=True)
    thread.start()
    return thread


def stop(server: ThreadingHTTPServer | None, thread: threading.Thread | None) -> None:
    """Stop serving, close the socket, and wait (5 s at most) for the thread."""
    if server is not None:
        server.shutdown()
        server.server_close()
    if thread is not None:
        thread.join(timeout=5)


def url_of(bind: str, port: int, path: str) -> str:
    """``http://bind:port/path``, an IPv6 address in brackets."""
    host = f"[{bind}]" if ":" in bind else bind
    return f"http://{host}:{port}{path}"
