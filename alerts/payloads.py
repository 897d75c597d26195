"""Payload formats: generic JSON (documented schema), Slack-compatible, Alertmanager-webhook-compatible.

:func:`render` turns one :class:`~lagscope.alerts.findings.Finding` into the body
of one request. Bodies are rendered once, when the notification enters the outbox, so every
retry sends the same bytes.

- ``generic``: ``generic.schema.json`` beside this module (JSON Schema 2020-12), documented in
  docs/alerting.md.
- ``slack``: an incoming-webhook message (``text`` for notifications, ``blocks`` for the
  message), colour-free so it renders in any Slack-compatible receiver (Mattermost too).
- ``alertmanager``: the body Alertmanager's webhook receiver posts (``version: "4"``, one
  alert per request), so receivers written for Alertmanager accept it as it is.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from lagscope.alerts.findings import Finding

__all__ = ["GENERIC_SCHEMA_PATH", "RUNBOOK_ANCHORS", "SCHEMA_ID", "app_link", "render"]

SCHEMA_ID = "lagscope.alert/v1"
GENERIC_SCHEMA_PATH = Path(__file__).with_name("generic.schema.json")

#: Alertmanager's "zero" end time for an alert that is still firing
_AM_ZERO = "0001-01-01T00:00:00Z"
#: how much time around a finding the app link shows
_MARGIN = dt.timedelta(minutes=15)


def _ms(ts: dt.datetime) -> int:
    return int(ts.timestamp() * 1000)


def app_link(app_url: str, finding: Finding, now: dt.datetime) -> str:
    """A link into the Streamlit app that carries the finding's selection and time range."""
    params: dict[str, str] = {"cluster": finding.cluster, "group": finding.group}
    page = "group"
    if finding.kind == "rebalance":
        page = "rebalance"
        params["rebalance"] = str(_ms(finding.starts_at))  # the window itself (docs/ui.md)
    if finding.topic is not None:
        params["topic"] = finding.topic
        if finding.partition is not None:
            params["partition"] = str(finding.partition)
            page = "partition"
    if finding.messages_lost is not None:  # a skip, retention loss or rewind: the finding and its commits
        page = "delivery"
        params.pop("partition", None)
        params["finding"] = finding.key
    params["from"] = str(_ms(finding.starts_at - _MARGIN))
    params["to"] = str(_ms((finding.ends_at or now) + _MARGIN))
    params["page"] = page
    return f"{app_url.rstrip('/')}/?{urlencode(params)}"


#: finding kind → the runbook section of docs/alerting.md (the same anchors the alert rules use)
RUNBOOK_ANCHORS = {
    "stall": "group-stalled",
    "stop": "group-stopped",
    "starved": "partition-starved",
    "status": "group-status",
    "commit_gap": "commit-gap",
    "rewind": "rewind",
    "skip": "skip",
    "lag_growth": "lag-growth",
    "retention_loss": "retention-loss",
    "rebalance_storm": "rebalance-storm",
    "rebalance": "rebalance-over-bound",
}


def _runbook(runbook_url: str, finding: Finding) -> str:
    return f"{runbook_url}#{RUNBOOK_ANCHORS.get(finding.kind, finding.kind.replace('_', '-'))}"


def _iso(ts: dt.datetime | None) -> str | None:
    return ts.astimezone(dt.UTC).isoformat().replace("+00:00", "Z") if ts else None


def _generic(finding: Finding, idempotency_key: str, app: str, runbook: str) -> dict[str, Any]:
    return {
        "schema": SCHEMA_ID,
        "idempotency_key": idempotency_key,
        "key": finding.key,
        "status": finding.state,
        "source": finding.source,
        "kind": finding.kind,
        "severity": finding.severity,
        "cluster": finding.cluster,
        "group": finding.group,
        "topic": finding.topic,
        "partition": finding.partition,
        "summary": finding.summary,
        "detail": finding.detail,
        "starts_at": _iso(finding.starts_at),
        "ends_at": _iso(finding.ends_at),
        "labels": dict(finding.labels),
        "links": {"app": app, "runbook": runbook},
        "messages_lost": finding.messages_lost,
        "messages_reprocessed": finding.messages_reprocessed,
        "cause": finding.cause,
        "exact": finding.exact,
        "bound": finding.bound,
        "advice": finding.advice,
    }


def _slack(finding: Finding, app: str, runbook: str) -> dict[str, Any]:
    icons = {"critical": ":red_circle:", "warning": ":large_orange_circle:"}
    icon = ":white_check_mark:" if finding.state == "resolved" else icons.get(finding.severity, ":information_source:")
    head = f"{icon} [{finding.state.upper()}] {finding.summary}"
    body = f"*{finding.severity}* · {finding.detail}" if finding.detail else f"*{finding.severity}*"
    if finding.advice:
        body += f"\n*Advice:* {finding.advice}"
    return {
        "text": f"{head}: {finding.detail}" if finding.detail else head,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": f"*{head}*\n{body}"}},
            {"type": "context", "elements": [
                {"type": "mrkdwn", "text": f"<{app}|Open in lagscope> · <{runbook}|Runbook> · key `{finding.key}`"},
            ]},
        ],
    }


def _alertmanager(finding: Finding, route: str, app: str, runbook: str, app_url: str) -> dict[str, Any]:
    labels = {"alertname": f"lagscope_{finding.kind}", "severity": finding.severity,
              "cluster": finding.cluster, "group": finding.group, "source": finding.source,
              **{k: v for k, v in finding.labels.items()}}
    if finding.topic is not None:
        labels["topic"] = finding.topic
    if finding.partition is not None:
        labels["partition"] = str(finding.partition)
    annotations = {"summary": finding.summary, "description": finding.detail, "runbook_url": runbook,
                   "lagscope_key": finding.key}
    if finding.messages_lost is not None:  # a skip, retention loss or rewind (annotations are strings)
        annotations |= {"messages_lost": str(finding.messages_lost),
                        "messages_reprocessed": str(finding.messages_reprocessed),
                        "exact": "true" if finding.exact else "false", "bound": finding.bound or ""}
    if finding.advice:
        annotations["advice"] = finding.advice
    fingerprint = hashlib.sha256(finding.key.encode()).hexdigest()[:16]
    alert = {"status": finding.state, "labels": labels, "annotations": annotations,
             "startsAt": _iso(finding.starts_at), "endsAt": _iso(finding.ends_at) or _AM_ZERO,
             "generatorURL": app, "fingerprint": fingerprint}
    return {"version": "4", "groupKey": f"{{}}:{{key=\"{finding.key}\"}}", "truncatedAlerts": 0,
            "status": finding.state, "receiver": route, "groupLabels": {"key": finding.key},
            "commonLabels": labels, "commonAnnotations": annotations, "externalURL": app_url,
            "alerts": [alert]}


def render(fmt: str, finding: Finding, *, route: str, idempotency_key: str, app_url: str,
           runbook_url: str, now: dt.datetime) -> bytes:
    """The request body (UTF-8 JSON) for ``finding`` in format ``fmt``."""
    app = app_link(app_url, finding, now)
    runbook = _runbook(runbook_url, finding)
    if fmt == "generic":
        payload = _generic(finding, idempotency_key, app, runbook)
    elif fmt == "slack":
        payload = _slack(finding, app, runbook)
    elif fmt == "alertmanager":
        payload = _alertmanager(finding, route, app, runbook, app_url)
    else:
        raise ValueError(f"unknown payload format {fmt!r}")
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
