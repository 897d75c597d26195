"""A webhook sink: receives lagscope's alert webhooks and keeps them, for the compose stack and demos.

    $ lagscope webhook-sink --bind 127.0.0.1 --port 8080 --out received.jsonl

Every ``POST`` (any path) whose body is JSON is appended as one line to ``--out`` (written
and flushed under a lock, so lines never interleave) with the path, the ``Idempotency-Key``,
whether it repeats an earlier key (a retry: at-least-once delivery), and whether its HMAC
signature verified. ``GET /received`` returns every kept line as a JSON array. With
``--secret-env NAME`` a request must carry a valid ``X-Lagscope-Signature`` (HMAC-SHA256 over
``<timestamp>.<body>``, see :mod:`lagscope.alerts.sender`) or it is refused with 401
and not kept. The secret itself is never logged.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import typer

from lagscope.alerts.sender import verify_signature as verify  # the sender's own check
from lagscope.errors import ConfigError

__all__ = ["WebhookSink", "register", "verify"]

log = logging.getLogger(__name__)

_MAX_BODY = 1 << 20


class WebhookSink:
    """An HTTP server that keeps the JSON webhooks it receives (see the module docstring)."""

    def __init__(self, out: Path, *, bind: str = "127.0.0.1", port: int = 0,
                 secret: bytes | None = None) -> None:
        self.out = Path(out)
        self.secret = secret
        self._lock = threading.Lock()
        self._keys: set[str] = set()
        self._records: list[dict[str, Any]] = []
        self.out.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._server = ThreadingHTTPServer((bind, port), self._handler())
        except OSError as exc:
            raise ConfigError(f"webhook-sink: cannot listen on {bind}:{port}: {exc}") from exc
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = self._server.server_address[0]
        return f"http://{host if isinstance(host, str) else host.decode()}:{self.port}"

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records)

    def keep(self, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, str]:
        """Check and keep one request; returns the HTTP status and a short reason."""
        signed: bool | None = None
        if self.secret is not None:
            signed = verify(self.secret, body, headers.get("x-lagscope-timestamp", ""),
                            headers.get("x-lagscope-signature", ""))
            if not signed:
                return 401, "bad or missing signature"
        try:
            payload = json.loads(body)
        except ValueError:
            return 400, "body is not JSON"
        key = headers.get("idempotency-key")
        with self._lock:
            record = {"received_ts": time.time(), "path": path, "idempotency_key": key,
                      "duplicate": key is not None and key in self._keys, "signature_ok": signed,
                      "attempt": headers.get("x-lagscope-attempt"), "payload": payload}
            if key is not None:
                self._keys.add(key)
            with self.out.open("a") as fh:
                fh.write(json.dumps(record, sort_keys=True) + "\n")
                fh.flush()
            self._records.append(record)
        log.info("webhook %s key=%s%s", path, key, " (duplicate)" if record["duplicate"] else "")
        return 200, "kept"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length > _MAX_BODY:
                    self._reply(413, {"error": "body too large"})
                    return
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, reason = sink.keep(self.path, body, headers)
                self._reply(status, {"status": reason})

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/received":
                    self._reply(200, sink.records())
                elif self.path.rstrip("/") in ("", "/healthz"):
                    self._reply(200, {"status": "ok"})
                else:
                    self._reply(404, {"error": "not found"})

            def _reply(self, status: int, data: Any) -> None:
                raw = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("%s " + format, self.address_string(), *args)

        return Handler

    def start(self) -> WebhookSink:
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-sink", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def register(app: typer.Typer) -> None:
    @app.command("webhook-sink")
    def webhook_sink(
        out: Annotated[Path, typer.Option(help="JSON-lines file the webhooks are appended to.")] = Path(
            ".lagscope/webhooks.jsonl"),
        bind: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="TCP port.")] = 8080,
        secret_env: Annotated[str | None, typer.Option(
            help="Require HMAC signatures made with the secret in this environment variable.")] = None,
    ) -> None:
        """Receive alert webhooks and keep them (a sink for the compose stack and demos)."""
        secret = None
        if secret_env is not None:
            value = os.environ.get(secret_env)
            if not value:
                raise ConfigError(f"--secret-env: the environment variable {secret_env} is unset or empty")
            secret = value.encode()
        sink = WebhookSink(out, bind=bind, port=port, secret=secret)
        signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=sink.stop).start())
        typer.echo(f"webhook sink on {sink.url}, keeping to {out}")
        try:
            sink.serve_forever()
        except KeyboardInterrupt:
            sink.stop()
