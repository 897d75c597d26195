"""Webhook delivery against a real HTTP receiver on 127.0.0.1 that refuses, fails, times out, recovers.

What must hold (the issue's acceptance): after the receiver recovers every notification is
delivered, none is lost, each notification's retries carry the same idempotency key and the
same body, signatures verify, and a restart of the sender mid-outage (a new Sender and Outbox
on the same file) loses nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from helpers.results_synthetic import Synthetic

from lagscope.alerts import (
    GENERIC_SCHEMA_PATH,
    Backoff,
    DeliveryReport,
    Outbox,
    Sender,
    enqueue_findings,
    findings_from_results,
    verify_signature,
)
from lagscope.config import AlertsConfig
from lagscope.devtools.broker import free_port

SECRET = "s3cr3t-webhook-key-for-tests"


@dataclass
class Recorded:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int  # the status the receiver answered, 0 when it timed the client out


@dataclass
class Receiver:
    """A webhook receiver whose behaviour the test switches: ok | fail (503) | slow (sleeps)."""

    mode: str = "ok"
    slow_s: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                mode = receiver.mode
                if mode == "slow":
                    with receiver.lock:
                        receiver.requests.append(Recorded(self.path, dict(self.headers), body, 0))
                    time.sleep(receiver.slow_s)
                    return  # the client gave up long ago; answer nothing
                status = 200 if mode == "ok" else 503
                with receiver.lock:
                    receiver.requests.append(Recorded(self.path, dict(self.headers), body, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler



@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def serve() -> Iterator[Any]:
    servers: list[ThreadingHTTPServer] = []

    def start(receiver: Receiver, port: int) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", port), receiver.handler())
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


#: where the payloads' links into the app point (lagscope's ui.url)
APP_URL = "http://app.test:8501"


def _config(port: int) -> AlertsConfig:
    base = f"http://127.0.0.1:{port}"
    return AlertsConfig.model_validate({
        "lookback_s": 3600,
        "routes": [
            {"name": "generic", "url": f"{base}/generic", "format": "generic", "min_severity": "info",
             "secret_env": "LAGSCOPE_TEST_WEBHOOK_SECRET", "timeout_s": 0.3},
            {"name": "slack", "url": f"{base}/slack/T000/B000/XXXX", "format": "slack", "min_severity": "warning",
             "timeout_s": 0.3},
            {"name": "am", "url": f"{base}/am", "format": "alertmanager", "min_severity": "critical",
             "timeout_s": 0.3},
        ],
    })


def _drive(sender: Sender, done: Any, max_s: float = 30.0) -> DeliveryReport:
    """Run the sender in short slices until ``done()`` holds (bounded), summing the reports."""
    total = DeliveryReport()
    deadline = time.monotonic() + max_s
    while not done():
        assert time.monotonic() < deadline, "condition not reached"
        r = sender.run(max_seconds=0.2, poll_s=0.05)
        total.delivered += r.delivered
        total.failed += r.failed
        total.errors.extend(r.errors)
    return total


@pytest.mark.slow
def test_outage_refuse_fail_timeout_then_recover_with_restart(
        synthetic: Synthetic, tmp_path: Path, port: int, serve: Any, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("LAGSCOPE_TEST_WEBHOOK_SECRET", SECRET)
    config = _config(port)
    backoff = Backoff(base_s=0.05, factor=2.0, cap_s=0.2, jitter=0.5)
    db = tmp_path / "outbox.sqlite"

    outbox = Outbox(db)
    report = enqueue_findings(outbox, config, findings_from_results(synthetic.root, synthetic.now), synthetic.now,
                              app_url=APP_URL)
    all_keys = {e["idempotency_key"] for e in outbox.entries()}
    assert report.queued == len(all_keys) >= 6

    # 1. nothing listens: connection refused, every attempt fails, nothing is lost
    sender = Sender(outbox, config, backoff=backoff)
    refused = _drive(sender, lambda: min(int(e["attempts"]) for e in outbox.entries()) >= 2)
    assert refused.delivered == 0
    assert refused.failed >= 2 * len(all_keys)
    assert outbox.counts().pending == len(all_keys)
    # the sender "crashes": a new Sender on a new Outbox object on the same file takes over
    sender.close()
    outbox.close()
    outbox = Outbox(db)
    assert outbox.counts().pending == len(all_keys)
    sender = Sender(outbox, config, backoff=backoff)

    # 2. the receiver is up but answers 503
    receiver = Receiver(mode="fail")
    serve(receiver, port)
    failing = _drive(sender, lambda: {r.headers["Idempotency-Key"] for r in receiver.requests} == all_keys)
    assert failing.delivered == 0
    assert failing.failed >= len(all_keys)
    # 3. it accepts connections but does not answer in time
    receiver.mode, receiver.slow_s = "slow", 1.0
    slow = _drive(sender, lambda: {r.headers["Idempotency-Key"] for r in receiver.requests if r.answered == 0}
                  == all_keys)
    assert slow.delivered == 0
    assert sum("timeout" in e for e in slow.errors) >= len(all_keys)
    # 4. it recovers
    receiver.mode = "ok"
    done = sender.run(max_seconds=20, poll_s=0.05)
    assert outbox.counts().pending == 0
    assert outbox.counts().dead == 0
    assert done.delivered == len(all_keys)

    by_key: dict[str, list[Recorded]] = defaultdict(list)
    for r in receiver.requests:
        by_key[r.headers["Idempotency-Key"]].append(r)
    # none lost: every queued notification reached the receiver with a 200
    assert {k for k, rs in by_key.items() if any(r.answered == 200 for r in rs)} == all_keys
    for key, rs in by_key.items():
        # each notification was retried (503s and timeouts) with the same key and the same bytes
        assert len(rs) >= 2, key
        assert len({r.body for r in rs}) == 1
        if rs[0].path == "/generic":
            for r in rs:
                assert verify_signature(SECRET.encode(), r.body, r.headers["X-Lagscope-Timestamp"],
                                        r.headers["X-Lagscope-Signature"])
            assert not verify_signature(b"wrong", rs[0].body, rs[0].headers["X-Lagscope-Timestamp"],
                                        rs[0].headers["X-Lagscope-Signature"])
            payload = json.loads(rs[0].body)
            jsonschema.validate(payload, json.loads(GENERIC_SCHEMA_PATH.read_text()))
            assert payload["idempotency_key"] == key
        else:
            assert "X-Lagscope-Signature" not in rs[0].headers
    # attempts were counted and the retries backed off (no request storm)
    assert max(e["attempts"] for e in outbox.entries()) >= 3  # type: ignore[type-var]
    assert len(receiver.requests) < 40 * len(all_keys)
    # neither the secret nor the slack URL's secret path reached a log line
    assert SECRET not in caplog.text
    assert "B000/XXXX" not in caplog.text
    sender.close()
    outbox.close()


def test_re_evaluation_after_delivery_sends_nothing_new(synthetic: Synthetic, tmp_path: Path, port: int,
                                                        serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAGSCOPE_TEST_WEBHOOK_SECRET", SECRET)
    config = _config(port)
    receiver = Receiver()
    serve(receiver, port)
    with Outbox(tmp_path / "o.sqlite") as outbox, Sender(outbox, config) as sender:
        enqueue_findings(outbox, config, findings_from_results(synthetic.root, synthetic.now), synthetic.now,
                         app_url=APP_URL)
        sender.run(max_seconds=10, poll_s=0.05)
        first = len(receiver.requests)
        later = synthetic.now + dt.timedelta(minutes=1)
        again = enqueue_findings(outbox, config, findings_from_results(synthetic.root, later), later, app_url=APP_URL)
        sender.run(max_seconds=10, poll_s=0.05)
    assert first > 0
    assert again.queued == 0
    assert len(receiver.requests) == first


def test_cli_evaluate_deliver_outbox(synthetic: Synthetic, tmp_path: Path, port: int, serve: Any,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from lagscope.cli import app

    monkeypatch.setenv("LAGSCOPE_TEST_WEBHOOK_SECRET", SECRET)
    config = tmp_path / "lagscope.yaml"
    config.write_text(
        "ui: {url: 'http://app.test:8501'}\n"
        "alerts:\n"
        "  routes:\n"
        f"    - {{name: generic, url: 'http://127.0.0.1:{port}/hook', format: generic, min_severity: info,\n"
        "        secret_env: LAGSCOPE_TEST_WEBHOOK_SECRET, timeout_s: 1}\n")
    outbox = tmp_path / "outbox.sqlite"
    runner = CliRunner()
    evaluated = runner.invoke(app, ["alerts", "evaluate", "--results", str(synthetic.root), "--config", str(config),
                                    "--outbox", str(outbox)])
    assert evaluated.exit_code == 0, evaluated.output
    queued = int(evaluated.output.split(" notifications queued")[0].rsplit(" ", 1)[1])
    assert queued >= 6
    # nobody listens yet: deliver gives up after its time budget and exits 1 with everything still pending
    down = runner.invoke(app, ["alerts", "deliver", "--config", str(config), "--outbox", str(outbox),
                               "--max-seconds", "0.5"])
    assert down.exit_code == 1
    assert f"pending {queued}" in down.output
    receiver = Receiver()
    serve(receiver, port)
    up = runner.invoke(app, ["alerts", "deliver", "--config", str(config), "--outbox", str(outbox),
                             "--max-seconds", "10"])
    assert up.exit_code == 0, up.output
    assert "pending 0" in up.output
    assert len({r.headers["Idempotency-Key"] for r in receiver.requests}) == queued
    listing = runner.invoke(app, ["alerts", "outbox", "--outbox", str(outbox)])
    assert f"pending 0, delivered {queued}, dead 0" in listing.output
    # a bad config is one clear line and exit 2, nothing half-done
    bad = tmp_path / "bad.yaml"
    bad.write_text("alerts: {routes: [{name: x, url: nowhere}]}\n")
    failed = runner.invoke(app, ["alerts", "evaluate", "--results", str(synthetic.root), "--config", str(bad),
                                 "--outbox", str(tmp_path / "other.sqlite")])
    assert failed.exit_code == 2
    assert [ln for ln in failed.output.splitlines() if ln.strip()] == [
        "config error: alerts.routes[0].url: must be an http:// or https:// URL"]
    assert not (tmp_path / "other.sqlite").exists()


def test_a_route_that_comes_back_gets_its_backlog_within_one_probe(tmp_path: Path) -> None:
    # five notifications fail for ten minutes (the receiver is down): their own backoff has grown
    # to minutes; the receiver returns, and they go within one probe interval, not minutes later
    clock = [1_000_000.0]
    up = [False]
    sent: list[str] = []

    def receiver(request: httpx.Request) -> httpx.Response:
        if not up[0]:
            raise httpx.ConnectError("connection refused", request=request)
        sent.append(request.headers["Idempotency-Key"])
        return httpx.Response(200)

    config = AlertsConfig.model_validate({"routes": [{"name": "r", "url": "http://receiver.test/hook"}]})
    with Outbox(tmp_path / "outbox.sqlite") as outbox:
        with outbox.transaction() as db:
            for i in range(5):
                Outbox.enqueue_in(db, idempotency_key=f"k{i}", route="r", finding_key=f"f{i}", state="firing",
                                  body=b"{}", now=clock[0])
        sender = Sender(outbox, config, client=httpx.Client(transport=httpx.MockTransport(receiver)),
                        backoff=Backoff(jitter=0.0), clock=lambda: clock[0], probe_s=5.0)
        down_until = clock[0] + 600.0
        tries = 0
        while clock[0] < down_until:
            tries += sender.deliver_due().failed
            clock[0] += 1.0
        waits = [float(e["next_attempt_at"]) - clock[0] for e in outbox.entries()]  # type: ignore[arg-type]
        assert min(waits) > 60.0  # without a probe, the first retry would come minutes after the return
        # the route was probed every 5 s meanwhile: one request per probe, no storm
        assert tries <= 5 * 9 + 600 / 5 + 1
        up[0] = True
        back = clock[0]
        while outbox.counts().pending and clock[0] < back + 60:
            sender.deliver_due()
            clock[0] += 1.0
        assert sorted(sent) == [f"k{i}" for i in range(5)]
        assert clock[0] - back <= 5.0 + 2.0
        sender.close()


def test_an_evaluation_loads_the_firing_states_and_those_of_its_findings_only(tmp_path: Path) -> None:
    # resolved states are kept for days; an evaluation needs them only for the keys it reports
    with Outbox(tmp_path / "outbox.sqlite") as box, box.transaction() as db:
        for i in range(1200):
            Outbox.set_state_in(db, f"k{i}", "firing" if i % 3 == 0 else "resolved", 1, "{}", 0.0)
        asked = [f"k{i}" for i in range(0, 1200, 2)] + ["never-seen"]  # more than one query's worth
        got = Outbox.states_in(db, asked)
        assert set(got) == {f"k{i}" for i in range(1200) if i % 3 == 0 or i % 2 == 0}
        assert got["k2"].state == "resolved"
        assert got["k3"].state == "firing"
        assert set(Outbox.states_in(db)) == {f"k{i}" for i in range(1200)}
