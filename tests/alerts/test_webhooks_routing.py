"""Findings → notifications: transitions, dedup, route filters, rate limits, payload formats."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from helpers.results_synthetic import Synthetic, anomaly, status

from lagscope.alerts import (
    GENERIC_SCHEMA_PATH,
    Backoff,
    Finding,
    Outbox,
    Sender,
    enqueue_findings,
    findings_from_results,
    render,
    route_wants,
)
from lagscope.alerts.findings import findings_from_status
from lagscope.config import AlertsConfig, load_config
from lagscope.errors import ConfigError
from lagscope.lake import write_rows
from lagscope.schema import ANOMALIES, STATUS

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
#: where the payloads' links into the app point (lagscope's ui.url)
APP_URL = "http://app.test:8501"


def _finding(**kw: Any) -> Finding:
    base: dict[str, Any] = {"key": "k", "source": "anomalies", "state": "firing", "kind": "stall",
                            "severity": "critical", "cluster": "prod", "group": "orders-svc",
                            "summary": "s", "starts_at": NOW}
    return Finding(**{**base, **kw})


def _config(**route: Any) -> AlertsConfig:
    return AlertsConfig.model_validate({"routes": [{"name": "r", "url": "http://127.0.0.1:9/hook", **route}]})


def _load_alerts(tmp_path: Path, alerts: dict[str, Any]) -> AlertsConfig:
    """The ``alerts`` section of a lagscope.yaml holding ``alerts``, loaded as lagscope loads it."""
    path = tmp_path / "lagscope.yaml"
    path.write_text(json.dumps({"alerts": alerts}))
    return load_config(path, environ={}).alerts


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
    # group patterns are regexes on the whole group id, as the collector's filters
    ({"groups": "orders-.*"}, {}, True),
    ({"groups": "billing-.*"}, {}, False),
    ({"groups": "orders"}, {}, False),  # a prefix is not a match: the whole id must match
    ({"groups": ["billing-.*", "orders-(svc|api)"]}, {}, True),  # any of a list
    ({"groups": ["orders-s"]}, {}, False),
    # kinds filter
    ({"kinds": ["stop"]}, {}, False),
    ({"kinds": ["stop", "stall"]}, {}, True),
])
def test_route_filters(route: dict[str, Any], finding: dict[str, Any], expected: bool) -> None:
    assert route_wants(_config(**route).routes[0], _finding(**finding)) is expected


@pytest.mark.parametrize(("data", "message"), [
    # a route needs a URL with a scheme
    ({"routes": [{"name": "a", "url": "hooks.example.org"}]}, "alerts.routes[0].url: must be an http"),
    # unknown keys are typos, not silently ignored
    ({"routes": [{"name": "a", "url": "http://x", "severity": "critical"}]},
     "alerts.routes[0].severity: unknown setting"),
    # two routes with one name would share rate limits and idempotency keys
    ({"routes": [{"name": "a", "url": "http://x"}, {"name": "a", "url": "http://y"}]},
     "alerts.routes: route names must be unique; repeated: a"),
    # unknown payload format
    ({"routes": [{"name": "a", "url": "http://x", "format": "teams"}]}, "alerts.routes[0].format: "),
    # a glob is refused with the regex it meant, never read as a (different) regex
    ({"routes": [{"name": "a", "url": "http://x", "groups": "orders-*"}]},
     "alerts.routes[0].groups: 'orders-*' looks like a glob pattern, but group patterns are regular expressions "
     "matched against the whole group id: write 'orders-.*'"),
    ({"routes": [{"name": "a", "url": "http://x", "groups": ["billing-.*", "*-test"]}]},
     "alerts.routes[0].groups: '*-test' looks like a glob pattern"),
    # an invalid regex names itself
    ({"routes": [{"name": "a", "url": "http://x", "groups": ["orders-("]}]},
     "alerts.routes[0].groups: invalid regular expression 'orders-('"),
    # the old separate routes file's app_url: the app's address is ui.url now
    ({"app_url": "http://x"}, "alerts.app_url: unknown setting"),
])
def test_bad_config_is_one_clear_line(tmp_path: Path, data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        _load_alerts(tmp_path, data)
    assert str(info.value).startswith(message), str(info.value)
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
        enqueue_findings(outbox, config, findings_from_results(root, now), now, app_url=APP_URL)
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
        assert enqueue_findings(outbox, config, findings_from_results(root, now), now, app_url=APP_URL).queued == 0
        # the stall ends and the group is OK again: both resolve, nothing else
        later = now + dt.timedelta(minutes=5)
        start = now - dt.timedelta(minutes=20)
        write_rows(root, ANOMALIES, "prod", [anomaly("prod", "orders-svc", "orders", "stall", start, later,
                                                     "critical", as_of=later)])
        write_rows(root, STATUS, "prod", [status("orders-svc", later, "OK", "OK")])
        report = enqueue_findings(outbox, config, findings_from_results(root, later), later, app_url=APP_URL)
        new = _keys(outbox)[len(first):]
        assert sorted(new) == sorted([(stall_key, "resolved"), ("status|prod|orders-svc|STALL", "resolved")])
        assert report.queued == 2
        # the group stalls again: a new episode fires with a new idempotency key
        again = later + dt.timedelta(minutes=5)
        write_rows(root, STATUS, "prod", [status("orders-svc", again, "STALL", "STALL")])
        enqueue_findings(outbox, config, findings_from_results(root, again), again, app_url=APP_URL)
        firings = [e for e in outbox.entries() if e["finding_key"] == "status|prod|orders-svc|STALL"
                   and e["state"] == "firing"]
        assert len(firings) == 2
        assert firings[0]["idempotency_key"] != firings[1]["idempotency_key"]


def test_a_finding_escalated_while_firing_reaches_the_routes_that_take_it_only_now(tmp_path: Path) -> None:
    # a retention loss fires as a warning (its owner may hold the records), then is proven
    # (critical) under the same key: the critical-only route gets its firing then, the warning
    # route has it already; lowered again, nobody is sent anything; resolved, both are
    config = AlertsConfig.model_validate({"routes": [
        {"name": "all", "url": "http://127.0.0.1:9/a", "min_severity": "warning"},
        {"name": "pager", "url": "http://127.0.0.1:9/p", "min_severity": "critical"}]})
    loss = _finding(key="retention_loss|k", kind="retention_loss", severity="warning")

    def sent(outbox: Outbox) -> list[tuple[str, str]]:
        return [(str(e["route"]), str(e["state"])) for e in outbox.entries()]

    with Outbox(tmp_path / "o.sqlite") as outbox:
        enqueue_findings(outbox, config, [loss], NOW, app_url=APP_URL)
        assert sent(outbox) == [("all", "firing")]
        report = enqueue_findings(outbox, config, [replace(loss, severity="critical")], NOW, app_url=APP_URL)
        assert (report.transitions, report.queued) == (1, 1)
        assert sent(outbox) == [("all", "firing"), ("pager", "firing")]
        assert enqueue_findings(outbox, config, [replace(loss, severity="critical")], NOW, app_url=APP_URL).queued == 0
        assert enqueue_findings(outbox, config, [loss], NOW, app_url=APP_URL).queued == 0
        end = NOW + dt.timedelta(minutes=1)
        enqueue_findings(outbox, config, [replace(loss, state="resolved", ends_at=end)], end, app_url=APP_URL)
        assert sorted(sent(outbox)[2:]) == [("all", "resolved"), ("pager", "resolved")]
        # escalated by the step that also ends it: the pager gets its firing, then its resolve
        later = replace(loss, key="retention_loss|k2")
        enqueue_findings(outbox, config, [later], end, app_url=APP_URL)
        enqueue_findings(outbox, config, [replace(later, severity="critical", state="resolved", ends_at=end)], end,
                         app_url=APP_URL)
        assert sent(outbox)[4:] == [("all", "firing"), ("pager", "firing"), ("all", "resolved"), ("pager", "resolved")]


def test_a_withdrawn_anomaly_resolves_if_it_fired_and_sends_nothing_if_it_never_did(tmp_path: Path) -> None:
    # orders-svc's stall fires; billing's is published open after that evaluation; a later step
    # withdraws both (a tombstone row: end_ts set, withdrawn): the first resolves as a key no
    # longer reported, the second is no finding at all (not one first seen resolved)
    config = _config(min_severity="info")
    start = NOW - dt.timedelta(minutes=10)
    later, last = NOW + dt.timedelta(minutes=1), NOW + dt.timedelta(minutes=2)
    fired = anomaly("prod", "orders-svc", "orders", "stall", start, None, "critical", as_of=NOW)
    never = anomaly("prod", "billing", "payments", "stall", start, None, "critical", as_of=later)

    def withdrawn(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "end_ts": start + dt.timedelta(seconds=row["magnitude"]), "as_of_ts": last,
                "detail": "withdrawn: a rebalance outage explains it", "withdrawn": True}

    with Outbox(tmp_path / "o.sqlite") as outbox:
        write_rows(tmp_path, ANOMALIES, "prod", [fired])
        enqueue_findings(outbox, config, findings_from_results(tmp_path, NOW), NOW, app_url=APP_URL)
        assert _keys(outbox) == [(fired["key"], "firing")]
        write_rows(tmp_path, ANOMALIES, "prod", [never, withdrawn(fired), withdrawn(never)])
        assert findings_from_results(tmp_path, last) == []
        report = enqueue_findings(outbox, config, findings_from_results(tmp_path, last), last, app_url=APP_URL)
        assert (report.transitions, report.queued) == (1, 1)
        assert _keys(outbox) == [(fired["key"], "firing"), (fired["key"], "resolved")]
        # evaluated again: nothing more
        assert enqueue_findings(outbox, config, findings_from_results(tmp_path, last), last,
                                app_url=APP_URL).queued == 0
        # a later step reports the first again: it fires as a new episode
        again = last + dt.timedelta(minutes=1)
        write_rows(tmp_path, ANOMALIES, "prod", [{**fired, "as_of_ts": again, "withdrawn": False}])
        enqueue_findings(outbox, config, findings_from_results(tmp_path, again), again, app_url=APP_URL)
        firings = [e for e in outbox.entries() if e["state"] == "firing"]
        assert [e["finding_key"] for e in firings] == [fired["key"], fired["key"]]
        assert firings[0]["idempotency_key"] != firings[1]["idempotency_key"]


def test_a_missing_results_root_resolves_nothing(synthetic: Synthetic, tmp_path: Path) -> None:
    # a --results that does not exist (a typo, a volume not mounted yet) is an error, not "every
    # finding is gone": it must not send RESOLVED for the alerts that are still firing
    from typer.testing import CliRunner

    from lagscope.cli import app

    settings = tmp_path / "lagscope.yaml"
    settings.write_text("ui: {url: 'http://app.test:8501'}\n"
                        "alerts: {routes: [{name: r, url: 'http://127.0.0.1:9/hook', min_severity: info}]}\n")
    outbox = tmp_path / "o.sqlite"
    runner = CliRunner()
    args = ["alerts", "evaluate", "--config", str(settings), "--outbox", str(outbox), "--results"]
    assert runner.invoke(app, [*args, str(synthetic.root)]).exit_code == 0
    with Outbox(outbox) as box:
        before = _keys(box)
    result = runner.invoke(app, [*args, str(tmp_path / "no-such-results")])
    assert result.exit_code == 1
    assert "no-such-results" in str(result.exception)
    with Outbox(outbox) as box:
        assert _keys(box) == before


def test_old_closed_findings_are_not_sent(tmp_path: Path) -> None:
    config = AlertsConfig.model_validate(
        {"lookback_s": 600, "routes": [{"name": "r", "url": "http://x", "min_severity": "info"}]})
    old = _finding(state="resolved", ends_at=NOW - dt.timedelta(hours=2), key="old")
    recent = _finding(state="resolved", ends_at=NOW - dt.timedelta(minutes=2), key="recent")
    with Outbox(tmp_path / "o.sqlite") as outbox:
        enqueue_findings(outbox, config, [old, recent], NOW, app_url=APP_URL)
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
    enqueue_findings(outbox, config, findings, NOW, app_url=APP_URL)


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
        again = enqueue_findings(outbox, config, [_finding(key=f"k{i}") for i in range(3)], NOW, app_url=APP_URL)
        assert again.queued == 0


def test_rebalance_payload_link_opens_that_window() -> None:
    # the app's URL contract (docs/ui.md): page=rebalance and rebalance=<window start in epoch ms>
    from urllib.parse import parse_qs, urlsplit

    from lagscope.alerts.payloads import app_link
    from lagscope.app.params import parse_selection

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


def test_findings_come_from_published_steps_only(tmp_path: Path) -> None:
    # an analytics step that found a stall is in place but its checkpoint has not moved (being
    # published, or crashed and to be redone): no alert fires on it until it has
    from helpers.results_steps import publish_step

    from lagscope.analytics.io import Checkpoint, write_checkpoint

    start, until = NOW - dt.timedelta(minutes=1), NOW
    stall = anomaly("prod", "orders-svc", "orders", "stall", start - dt.timedelta(minutes=9), None, "critical",
                    as_of=until)
    publish_step(tmp_path, "prod", start, until, {"anomalies": [stall], "status": [
        status("orders-svc", until, "STALL", "STALL")]}, checkpoint=False)
    assert findings_from_results(tmp_path, NOW) == []
    write_checkpoint(tmp_path, Checkpoint(watermark=until.isoformat(), version="v-test"))
    found = {(f.source, f.state) for f in findings_from_results(tmp_path, NOW)}
    assert found == {("anomalies", "firing"), ("status", "firing")}


def test_group_status_alerts_come_from_full_steps_only(tmp_path: Path) -> None:
    # a group status is a point in time: a provisional step's is its last sweep's. Its rows are
    # shown (read with the rest) but fire and resolve nothing; its anomalies alert as they come
    from helpers.results_steps import publish_provisional_step, publish_step

    from lagscope import results

    w0, w1 = NOW - dt.timedelta(minutes=2), NOW - dt.timedelta(minutes=1)
    publish_step(tmp_path, "prod", w0, w1, {"status": [status("orders-svc", w1 - dt.timedelta(seconds=1), "OK", "OK"),
                                                       status("billing", w1 - dt.timedelta(seconds=1), "STALL",
                                                              "STALL")]})
    # mid-minute: orders-svc rewound (over by the minute's end), billing's stall is over
    mid = w1 + dt.timedelta(seconds=20)
    rewind = anomaly("prod", "orders-svc", "orders", "rewind", mid, mid, "warning", as_of=mid)
    publish_provisional_step(tmp_path, "prod", w1, mid, {"anomalies": [rewind], "status": [
        status("orders-svc", mid, "REWIND", "REWIND"), status("billing", mid, "OK", "OK")]})
    assert {r["status"] for r in results.read(tmp_path, "status").to_pylist()} == {"OK", "STALL", "REWIND"}
    assert {r["status"] for r in results.read(tmp_path, "status", provisional=False).to_pylist()} == {"OK", "STALL"}
    found = {(f.source, f.kind, f.group, f.labels.get("status")): f.state for f in findings_from_results(tmp_path, mid)}
    assert found == {("anomalies", "rewind", "orders-svc", None): "resolved",
                     ("status", "status", "billing", "STALL"): "firing"}
    # the full step over the minute: its status is the minute's end's
    publish_step(tmp_path, "prod", w1, NOW, {"anomalies": [{**rewind, "as_of_ts": NOW}], "status": [
        status("orders-svc", NOW - dt.timedelta(seconds=1), "OK", "OK"),
        status("billing", NOW - dt.timedelta(seconds=1), "WARN", "WARN")]})
    found = {(f.source, f.kind, f.group, f.labels.get("status")): f.state for f in findings_from_results(tmp_path, NOW)}
    assert found == {("anomalies", "rewind", "orders-svc", None): "resolved",
                     ("status", "status", "billing", "WARN"): "firing"}


@pytest.mark.parametrize(("row", "expected"), [
    # written before the cause column: a skip is a seek; commit-timed (start == end), an estimate
    # (its count leaves out what the consumer's pace could have read since the commit before)
    ({"kind": "skip", "magnitude": 512.0, "end": 0}, (512, 0, "seek", False, "estimate")),
    # an admin tool's reset to the end of the emptied group, commit-timed: exact
    ({"kind": "skip", "magnitude": 64.0, "end": 0, "cause": "admin_reset"}, (64, 0, "admin_reset", True, "exact")),
    # a seek seen between two sweeps: an estimate
    ({"kind": "skip", "magnitude": 30.0, "end": 5}, (30, 0, "seek", False, "estimate")),
    # an admin tool's reset back while the group was empty, seen between two sweeps: at least
    ({"kind": "rewind", "magnitude": 500.0, "end": 5, "cause": "admin_reset"},
     (0, 500, "admin_reset", False, "at_least")),
    # retention, still open: a bound, firing
    ({"kind": "retention_loss", "magnitude": 40.0, "end": None}, (40, 0, "retention", False, "at_least")),
    # retention while a member owned the partition (not proven, a warning): at most that many
    ({"kind": "retention_loss", "magnitude": 7.0, "end": 5, "severity": "warning"},
     (7, 0, "retention", False, "at_most")),
])
def test_loss_and_rewind_payloads_carry_their_counts(row: dict[str, Any], expected: tuple[Any, ...]) -> None:
    from lagscope.alerts.findings import findings_from_anomalies

    end = None if row["end"] is None else NOW + dt.timedelta(seconds=row["end"])
    severity = row.get("severity", "critical")
    r = {**anomaly("prod", "orders-svc", "orders", row["kind"], NOW, end, severity, partition=3, as_of=NOW),
         "cluster": "prod", "magnitude": row["magnitude"], "unit": "messages", "cause": row.get("cause")}
    (f,) = findings_from_anomalies([r])
    bound = expected[4]
    assert (f.messages_lost, f.messages_reprocessed, f.cause, f.exact, f.bound) == expected
    assert f.state == ("firing" if end is None else "resolved")
    assert Finding.from_json(json.loads(json.dumps(f.to_json()))) == f  # the outbox keeps it whole
    kw: dict[str, Any] = {"route": "r", "idempotency_key": "0" * 32, "app_url": "http://app:8501/",
                          "runbook_url": "http://docs/alerting.md", "now": NOW}
    generic = json.loads(render("generic", f, **kw))
    jsonschema.validate(generic, json.loads(GENERIC_SCHEMA_PATH.read_text()))
    assert (generic["messages_lost"], generic["messages_reprocessed"], generic["cause"], generic["exact"],
            generic["bound"]) == expected
    assert generic["labels"] == {"cause": expected[2]}
    # the app link opens the Delivery page on this finding (its commits around it)
    link = httpx.URL(generic["links"]["app"])
    assert (link.params["page"], link.params["finding"], link.params["topic"]) == ("delivery", f.key, "orders")
    assert "partition" not in link.params
    alert = json.loads(render("alertmanager", f, **kw))["alerts"][0]
    assert alert["labels"]["cause"] == expected[2]
    assert (alert["annotations"]["messages_lost"], alert["annotations"]["messages_reprocessed"],
            alert["annotations"]["bound"]) == (str(expected[0]), str(expected[1]), bound)


def test_other_findings_carry_no_counts_and_old_outbox_rows_still_load() -> None:
    from lagscope.alerts.findings import findings_from_anomalies

    r = {**anomaly("prod", "orders-svc", "orders", "stall", NOW, None, "critical", as_of=NOW), "cluster": "prod"}
    (f,) = findings_from_anomalies([r])
    generic = json.loads(render("generic", f, route="r", idempotency_key="0" * 32, app_url="http://app:8501/",
                                runbook_url="http://docs/alerting.md", now=NOW))
    jsonschema.validate(generic, json.loads(GENERIC_SCHEMA_PATH.read_text()))
    assert [generic[k] for k in ("messages_lost", "messages_reprocessed", "cause", "exact", "bound")] == [None] * 5
    # a finding stored in the outbox before the counts existed
    stored = {k: v for k, v in f.to_json().items()
              if k not in ("messages_lost", "messages_reprocessed", "cause", "exact", "bound")}
    assert Finding.from_json(stored) == f
    # a payload with a count that is not a count is refused by the schema
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**generic, "messages_lost": -1}, json.loads(GENERIC_SCHEMA_PATH.read_text()))


def test_rebalance_findings_carry_the_groups_advice(synthetic: Synthetic) -> None:
    # the synthetic group has one advice row (a shorter session timeout): its rebalance findings
    # carry it as one line; its stall and status findings do not
    found = findings_from_results(synthetic.root, synthetic.now)
    line = ("session.timeout.ms → session.timeout.ms=10000 with heartbeat.interval.ms ≤ 3000: a crashed member's "
            "partitions would wait ~10 s instead of ~45 s for the coordinator: outages of ~49 s would shrink to "
            "~14 s (medium confidence)")
    rebalances = [f for f in found if f.kind == "rebalance"]
    assert len(rebalances) == 3
    assert {f.advice for f in rebalances} == {line}
    assert {f.advice for f in found if f.kind != "rebalance"} == {None}


@pytest.mark.parametrize(("kind", "first"), [
    # a storm names the restart advice first; a single rebalance the crash's
    ("rebalance_storm", "group.instance.id"),
    ("rebalance", "session.timeout.ms"),
])
def test_advice_line_orders_the_rules_by_the_finding(kind: str, first: str) -> None:
    from lagscope.alerts.findings import advice_line

    rows = [{"rule": "session_timeout_crash", "setting": "session.timeout.ms", "suggested": "10000",
             "expected_effect": "shorter", "confidence": "high"},
            {"rule": "restart_storm", "setting": "group.instance.id", "suggested": "static",
             "expected_effect": None, "confidence": "low"},
            {"rule": "retention_vs_catchup", "setting": "retention.ms", "suggested": "longer",
             "expected_effect": "no loss", "confidence": "low"}]
    line = advice_line(rows, kind)
    assert line is not None
    assert line.startswith(first)
    assert "retention.ms" not in line  # not about rebalancing
    assert line.count(";") == 1
    assert advice_line([], kind) is None


def test_payloads_carry_the_advice_line() -> None:
    f = _finding(kind="rebalance_storm", advice="group.instance.id → static membership (medium confidence)")
    kw: dict[str, Any] = {"route": "r", "idempotency_key": "0" * 32, "app_url": "http://app:8501/",
                          "runbook_url": "http://docs/alerting.md", "now": NOW}
    generic = json.loads(render("generic", f, **kw))
    jsonschema.validate(generic, json.loads(GENERIC_SCHEMA_PATH.read_text()))
    assert generic["advice"] == "group.instance.id → static membership (medium confidence)"
    slack = json.loads(render("slack", f, **kw))
    assert "*Advice:* group.instance.id → static membership" in slack["blocks"][0]["text"]["text"]
    am = json.loads(render("alertmanager", f, **kw))
    assert am["alerts"][0]["annotations"]["advice"] == f.advice
    # without advice: null in the generic payload (still valid), no annotation
    plain = _finding()
    generic = json.loads(render("generic", plain, **kw))
    jsonschema.validate(generic, json.loads(GENERIC_SCHEMA_PATH.read_text()))
    assert generic["advice"] is None
    assert "advice" not in json.loads(render("alertmanager", plain, **kw))["alerts"][0]["annotations"]
