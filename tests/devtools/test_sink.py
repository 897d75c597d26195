"""The webhook sink of the compose stack keeps signed JSON webhooks and refuses the rest."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from lagscope.alerts.sender import sign
from lagscope.devtools.sink import WebhookSink, verify
from lagscope.errors import ConfigError

SECRET = b"s3cret"


@pytest.fixture
def sink(tmp_path: Path) -> Iterator[WebhookSink]:
    s = WebhookSink(tmp_path / "received.jsonl", secret=SECRET).start()
    try:
        yield s
    finally:
        s.stop()


def _post(sink: WebhookSink, body: bytes, *, key: str | None = "k1", secret: bytes = SECRET,
          ts: int | None = None) -> httpx.Response:
    ts = int(time.time()) if ts is None else ts
    headers = {"Content-Type": "application/json", "X-Lagscope-Timestamp": str(ts),
               "X-Lagscope-Signature": sign(secret, body, ts)}
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(f"{sink.url}/lagscope", content=body, headers=headers, timeout=5)


def test_signed_webhooks_are_kept_and_retries_marked(sink: WebhookSink, tmp_path: Path) -> None:
    body = json.dumps({"status": "firing", "kind": "stall"}).encode()
    assert _post(sink, body).status_code == 200
    assert _post(sink, body).status_code == 200  # the sender's retry: same key
    lines = [json.loads(x) for x in (tmp_path / "received.jsonl").read_text().splitlines()]
    assert [r["duplicate"] for r in lines] == [False, True]
    assert all(r["signature_ok"] and r["payload"]["kind"] == "stall" and r["path"] == "/lagscope" for r in lines)
    got = httpx.get(f"{sink.url}/received", timeout=5).json()
    assert got == lines


@pytest.mark.parametrize(
    ("secret", "ts_offset", "body", "status"),
    [
        # signed with another secret: refused
        (b"wrong", 0, b'{"a": 1}', 401),
        # signed correctly but ten minutes old: a replay, refused
        (SECRET, -600, b'{"a": 1}', 401),
        # signed correctly, not JSON: refused as a bad request
        (SECRET, 0, b"not json", 400),
    ],
)
def test_bad_requests_are_refused_and_not_kept(sink: WebhookSink, tmp_path: Path, secret: bytes,
                                              ts_offset: int, body: bytes, status: int) -> None:
    resp = _post(sink, body, secret=secret, ts=int(time.time()) + ts_offset)
    assert resp.status_code == status
    assert not (tmp_path / "received.jsonl").exists() or (tmp_path / "received.jsonl").read_text() == ""
    assert sink.records() == []


def test_verify_matches_the_senders_signature() -> None:
    body, ts = b'{"x": 1}', 1_700_000_000
    assert verify(SECRET, body, str(ts), sign(SECRET, body, ts), now=ts + 10)
    assert not verify(SECRET, body + b" ", str(ts), sign(SECRET, body, ts), now=ts + 10)
    assert not verify(SECRET, body, "not-a-number", sign(SECRET, body, ts), now=ts)


def test_taken_port_is_one_config_error(tmp_path: Path, taken_port: int) -> None:
    # `lagscope webhook-sink --port P` with P in use: one line naming the address, no traceback
    with pytest.raises(ConfigError, match=rf"webhook-sink: cannot listen on 127\.0\.0\.1:{taken_port}: "
                                          r".*Address already in use"):
        WebhookSink(tmp_path / "received.jsonl", port=taken_port)
