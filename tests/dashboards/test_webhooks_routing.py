"""Findings → notifications: transitions, dedup, route filters, rate limits, payload formats."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from results_synthetic import Synthetic, anomaly, status

from lagscope.dashboards.alerts import (
    GENERIC_SCHEMA_PATH,
    Backoff,
    Finding,
    Outbox,
    Sender,
    enqueue_findings,
    findings_from_results,
    load_config,
    render,
)
from lagscope.dashboards.alerts.findings import findings_from_status
from lagscope.errors import ConfigError
from lagscope.lake import write_rows
from lagscope.schema import ANOMALIES, STATUS

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def _finding(**kw: Any) -> Finding:
    base: dict[str, Any] = {"key": "k", "source": "anomalies", "state": "firing", "kind": "stall",
                            "severity": "critical", "cluster": "prod", "group": "orders-svc",
                            "summary": "s", "starts_at": NOW}
    return Finding(**{**base, **kw})


def _config(**route: Any) -> Any:
    return load_config({"routes": [{"name": "r", "url": "http://127.0.0.1:9/hook", **route}]})


@pytest.mark.parametrize(("route", "finding", "expected"), [
    # severity below the route's minimum is filtered out
    ({"min_severity": "critical"}, {"severity": "warning"}, False),
    # equal severity passes
    ({"min_severity": "warning"}, {"severity": "warning"}, True),
    # a higher severity passes
    ({"min_severity": "info"}, {"severity": "critical"}, True),
    # cluster filter: another cluster is filtered out
    ({"clusters": ["staging"]}, {}, False),
    ({"clusters": ["staging", "prod"]}, {}, True),
    # group pattern is an fnmatch glob on the whole group id
    ({"groups": "orders-*"}, {}, True),
    ({"groups": "billing-*"}, {}, False),
    ({"groups": "orders"}, {}, False),
    # kinds filter
    ({"kinds": ["stop"]}, {}, False),
    ({"kinds": ["stop", "stall"]}, {}, True),
])
def test_route_filters(route: dict[str, Any], finding: dict[str, Any], expected: bool) -> None:
    assert _config(**route).routes[0].matches(_finding(**finding)) is expected


@pytest.mark.parametrize(("data", "message"), [
    # a route needs a URL with a scheme
    ({"routes": [{"name": "a", "url": "hooks.example.org"}]}, "routes.0.url"),
    # unknown keys are typos, not silently ignored
    ({"routes": [{"name": "a", "url": "http://x", "severity": "critical"}]}, "routes.0.severity"),
    # two routes with one name would share rate limits and idempotency keys
    ({"routes": [{"name": "a", "url": "http://x"}, {"name": "a", "url": "http://y"}]}, "duplicate route names"),
    # unknown payload format
    ({"routes": [{"name": "a", "url": "http://x", "format": "teams"}]}, "routes.0.format"),
])
def test_bad_config_is_one_clear_line(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_config(data)
    assert "\n" not in str(info.value)


def test_missing_secret_is_a_config_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("NO_SUCH_SECRET", raising=False)
    with pytest.raises(ConfigError, match="NO_SUCH_SECRET"):
        _config(secret_env="NO_SUCH_SECRET").routes[0].secret()
    (tmp_path / "secret").write_text("abc\n")
    assert _config(secret_file=str(tmp_path / "secret")).routes[0].secret() == b"abc"


def _keys(outbox: Outbox) -> list[tuple[str, str]]:
    return [(str(e["finding_key"]), str(e["state"])) for e in outbox.entries()]


def test_transitions_firing_resolved_and_dedup(synthetic: Synthetic, tmp_path: Path) -> None:
    config = _config(min_severity="info")
    root, now = synthetic.root, synthetic.now
    with Outbox(tmp_path / "o.sqlite") as outbox:
        enqueue_findings(outbox, config, findings_from_results(root, now), now)
        first = _keys(outbox)
        stall_key = next(k for k, _ in first if k.startswith("stall|"))
        gap_key = next(k for k, _ in first if k.startswith("commit_gap|"))
        # the open stall fires once; the commit gap ended 28 minutes ago (within lookback): firing + resolved
        assert first.count((stall_key, "firing")) == 1
        assert (stall_key, "resolved") not in first
        assert (gap_key, "firing") in first
        assert (gap_key, "resolved") in first
        assert ("status|prod|orders-svc|STALL", "firing") in first
        # evaluating the same tables again queues nothing
        assert enqueue_findings(outbox, config, findings_from_results(root, now), now).queued == 0
        # the stall ends and the group is OK again: both resolve, nothing else
        later = now + dt.timedelta(minutes=5)
        start = now - dt.timedelta(minutes=20)
        write_rows(root, ANOMALIES, "prod", [anomaly("prod", "orders-svc", "orders", "stall", start, later,
                                                     "critical", as_of=later)])
        write_rows(root, STATUS, "prod", [status("orders-svc", later, "OK", "OK")])
        report = enqueue_findings(outbox, config, findings_from_results(root, later), later)
        new = _keys(outbox)[len(first):]
        assert sorted(new) == sorted([(stall_key, "resolved"), ("status|prod|orders-svc|STALL", "resolved")])
        assert report.queued == 2
        # the group stalls again: a new episode fires with a new idempotency key
        again = later + dt.timedelta(minutes=5)
        write_rows(root, STATUS, "prod", [status("orders-svc", again, "STALL", "STALL")])
        enqueue_findings(outbox, config, findings_from_results(root, again), again)
        firings = [e for e in outbox.entries() if e["finding_key"] == "status|prod|orders-svc|STALL"
                   and e["state"] == "firing"]
        assert len(firings) == 2
        assert firings[0]["idempotency_key"] != firings[1]["idempotency_key"]


def test_a_missing_results_root_resolves_nothing(synthetic: Synthetic, tmp_path: Path) -> None:
    # a --results that does not exist (a typo, a volume not mounted yet) is an error, not "every
    # finding is gone": it must not send RESOLVED for the alerts that are still firing
    from typer.testing import CliRunner

    from lagscope.cli import app

    routes = tmp_path / "alerts.yaml"
    routes.write_text("app_url: http://app.test:8501\n"
                      "routes: [{name: r, url: 'http://127.0.0.1:9/hook', min_severity: info}]\n")
    outbox = tmp_path / "o.sqlite"
    runner = CliRunner()
    args = ["alerts", "evaluate", "--config", str(routes), "--outbox", str(outbox), "--results"]
    assert runner.invoke(app, [*args, str(synthetic.root)]).exit_code == 0
    with Outbox(outbox) as box:
        before = _keys(box)
    result = runner.invoke(app, [*args, str(tmp_path / "no-such-results")])
    assert result.exit_code == 1
    assert "no-such-results" in str(result.exception)
    with Outbox(outbox) as box:
        assert _keys(box) == before


def test_old_closed_findings_are_not_sent(tmp_path: Path) -> None:
    config = load_config({"lookback_s": 600, "routes": [{"name": "r", "url": "http://x", "min_severity": "info"}]})
    old = _finding(state="resolved", ends_at=NOW - dt.timedelta(hours=2), key="old")
    recent = _finding(state="resolved", ends_at=NOW - dt.timedelta(minutes=2), key="recent")
    with Outbox(tmp_path / "o.sqlite") as outbox:
        enqueue_findings(outbox, config, [old, recent], NOW)
        # the recent one is sent as firing then resolved, the old one never
        assert _keys(outbox) == [("recent", "firing"), ("recent", "resolved")]


def test_status_change_resolves_old_status_and_fires_new() -> None:
    rows = [{"cluster": "prod", "group_id": "g", "topic": None, "partition": None, "eval_ts": NOW,
             "status": "WARN", "reason": "lag grows"},
            {"cluster": "prod", "group_id": "g", "topic": None, "partition": None,
             "eval_ts": NOW + dt.timedelta(minutes=1), "status": "ERR", "reason": "lag grows fast"},
            # partition rows never make group findings
            {"cluster": "prod", "group_id": "g", "topic": "t", "partition": 0,
             "eval_ts": NOW + dt.timedelta(minutes=2), "status": "STOP", "reason": "x"}]
    (f,) = findings_from_status(rows)
    assert (f.key, f.severity) == ("status|prod|g|ERR", "critical")


class _Hook:
    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.status)


def _queue(outbox: Outbox, config: Any, n: int) -> None:
    findings = [_finding(key=f"k{i}") for i in range(n)]
    enqueue_findings(outbox, config, findings, NOW)


def test_rate_limit_defers_without_losing(tmp_path: Path) -> None:
    config = _config(rate_limit={"max": 2, "per_s": 60})
    clock = [NOW.timestamp()]
    hook = _Hook()
    with Outbox(tmp_path / "o.sqlite") as outbox:
        _queue(outbox, config, 5)
        sender = Sender(outbox, config, client=httpx.Client(transport=httpx.MockTransport(hook)),
                        clock=lambda: clock[0])
        first = sender.deliver_due()
        assert (first.delivered, first.deferred) == (2, 3)
        clock[0] += 30  # still inside the window: nothing more goes out
        assert sender.deliver_due().delivered == 0
        clock[0] += 31
        assert sender.deliver_due().delivered == 2
        clock[0] += 61
        assert sender.deliver_due().delivered == 1
        assert outbox.counts().pending == 0
        assert len(hook.requests) == 5


@pytest.mark.parametrize(("status", "pending", "dead"), [
    # 400: the receiver rejects the request itself; retrying cannot fix it
    (400, 0, 1),
    # 404: wrong URL: dead, kept with its error
    (404, 0, 1),
    # 429: rate limited by the receiver: retried later
    (429, 1, 0),
    # 500 and 503: the receiver is in trouble: retried later
    (500, 1, 0),
    (503, 1, 0),
])
def test_http_status_outcomes(tmp_path: Path, status: int, pending: int, dead: int) -> None:
    config = _config()
    with Outbox(tmp_path / "o.sqlite") as outbox:
        _queue(outbox, config, 1)
        sender = Sender(outbox, config, client=httpx.Client(transport=httpx.MockTransport(_Hook(status))))
        sender.deliver_due()
        counts = outbox.counts()
        assert (counts.pending, counts.dead, counts.delivered) == (pending, dead, 0)


def test_retry_after_is_honoured(tmp_path: Path) -> None:
    config = _config()
    with Outbox(tmp_path / "o.sqlite") as outbox:
        _queue(outbox, config, 1)
        transport = httpx.MockTransport(lambda r: httpx.Response(429, headers={"Retry-After": "120"}))
        Sender(outbox, config, client=httpx.Client(transport=transport), clock=NOW.timestamp,
               backoff=Backoff(base_s=1, cap_s=300)).deliver_due()
        assert outbox.next_due_at() == pytest.approx(NOW.timestamp() + 120)


@pytest.mark.parametrize("attempt", [1, 2, 3, 8, 20])
def test_backoff_grows_and_is_capped(attempt: int) -> None:
    b = Backoff(base_s=1.0, factor=2.0, cap_s=60.0, jitter=0.5)
    raw = min(60.0, 2.0 ** (attempt - 1))
    delays = [b.delay(attempt) for _ in range(50)]
    assert all(raw * 0.5 <= d <= raw for d in delays)


def test_payload_formats() -> None:
    f = _finding(topic="orders", partition=3, detail="no commit for 300 s while lag 40",
                 ends_at=None, labels={"status": "STALL"})
    kw: dict[str, Any] = {"route": "r", "idempotency_key": "0" * 32, "app_url": "http://app:8501/",
                          "runbook_url": "http://docs/alerting.md", "now": NOW}
    generic = json.loads(render("generic", f, **kw))
    jsonschema.validate(generic, json.loads(GENERIC_SCHEMA_PATH.read_text()))
    assert generic["links"]["app"].startswith("http://app:8501/?cluster=prod&group=orders-svc&topic=orders"
                                              "&partition=3&from=")
    assert "page=partition" in generic["links"]["app"]
    assert generic["links"]["runbook"] == "http://docs/alerting.md#group-stalled"
    slack = json.loads(render("slack", f, **kw))
    assert "[FIRING]" in slack["text"]
    assert slack["blocks"][0]["type"] == "section"
    am = json.loads(render("alertmanager", f, **kw))
    assert am["version"] == "4"
    assert am["status"] == "firing"
    assert len(am["alerts"]) == 1
    alert = am["alerts"][0]
    assert alert["labels"]["alertname"] == "lagscope_stall"
    assert alert["labels"]["partition"] == "3"
    assert alert["endsAt"] == "0001-01-01T00:00:00Z"  # Alertmanager's "still firing"
    resolved = json.loads(render("alertmanager", f.resolved(NOW + dt.timedelta(minutes=5)), **kw))
    assert resolved["status"] == "resolved"
    assert resolved["alerts"][0]["endsAt"] == "2026-03-01T12:05:00Z"


def test_outbox_that_is_not_a_database_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "outbox.sqlite"
    bad.write_bytes(b"this is not a SQLite file" * 100)
    with pytest.raises(ConfigError, match="cannot open the outbox"):
        Outbox(bad)
    # the file is left as it was: nothing recorded is ever overwritten
    assert bad.read_bytes().startswith(b"this is not a SQLite file")


def test_outbox_survives_reopen_with_state(tmp_path: Path) -> None:
    config = _config(min_severity="info")
    with Outbox(tmp_path / "o.sqlite") as outbox:
        _queue(outbox, config, 3)
    with Outbox(tmp_path / "o.sqlite") as outbox:
        assert outbox.counts().pending == 3
        # the alert state survived too: re-evaluating the same findings queues nothing
        assert enqueue_findings(outbox, config, [_finding(key=f"k{i}") for i in range(3)], NOW).queued == 0


def test_rebalance_payload_link_opens_that_window() -> None:
    # the app's URL contract (docs/ui.md): page=rebalance and rebalance=<window start in epoch ms>
    from urllib.parse import parse_qs, urlsplit

    from lagscope.dashboards.alerts.payloads import app_link
    from lagscope.dashboards.app.params import parse_selection

    start = NOW - dt.timedelta(seconds=40)
    f = _finding(source="rebalances", kind="rebalance", severity="warning", starts_at=start,
                 ends_at=NOW - dt.timedelta(seconds=10))
    link = app_link("https://app.example.org/", f, NOW)
    assert link.startswith("https://app.example.org/?")
    sel = parse_selection({k: v[-1] for k, v in parse_qs(urlsplit(link).query).items()})
    assert (sel.page, sel.cluster, sel.group) == ("rebalance", "prod", "orders-svc")
    assert sel.rebalance_ms == int(start.timestamp() * 1000)
    assert sel.start_ms is not None
    assert sel.end_ms is not None
    assert sel.start_ms < sel.rebalance_ms < sel.end_ms
