"""From findings to queued notifications: firing and resolved transitions, dedup, routing.

:func:`enqueue_findings` compares the current findings with the alert state kept in the
outbox file and queues one notification per transition per matching route:

- a key seen firing for the first time (or again after it resolved: a new *episode*) → firing;
- a key that was firing and is now reported resolved, or is no longer reported at all
  (status findings have no explicit end) → resolved;
- a key first seen already resolved → firing then resolved, but only when it ended within
  ``lookback_s`` (so the first run over months of history does not page anyone);
- anything else (still firing, still resolved) → nothing: re-running never re-sends.

The idempotency key is ``sha256(route|finding key|episode|state)[:32]``: the same for every
retry and every re-evaluation of one notification, different for firing and resolved and for
a new episode. Everything happens in one transaction with the enqueueing, so a crash between
the two cannot lose or duplicate a transition.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, replace

from lagscope.alerts.findings import Finding, severity_rank
from lagscope.alerts.outbox import Outbox
from lagscope.alerts.payloads import render
from lagscope.config import AlertRoute, AlertsConfig, matches_any

__all__ = ["EnqueueReport", "enqueue_findings", "idempotency_key", "route_wants"]

#: resolved alert states older than this are forgotten
_FORGET_AFTER_S = 7 * 86400.0


def idempotency_key(route: str, finding_key: str, episode: int, state: str) -> str:
    return hashlib.sha256(f"{route}|{finding_key}|{episode}|{state}".encode()).hexdigest()[:32]


@dataclass(frozen=True)
class EnqueueReport:
    transitions: int  # firing/resolved transitions found
    queued: int  # notifications queued (transitions × matching routes)


def route_wants(route: AlertRoute, finding: Finding) -> bool:
    """Whether ``route`` takes ``finding``: severity at least its ``min_severity``, and the
    cluster, the group (its regexes, matched whole as everywhere in lagscope) and the kind among
    its lists when it has them."""
    if severity_rank(finding.severity) < severity_rank(route.min_severity):
        return False
    if route.clusters is not None and finding.cluster not in route.clusters:
        return False
    if route.groups is not None and not matches_any(route.groups, finding.group):
        return False
    return route.kinds is None or finding.kind in route.kinds


@dataclass(frozen=True)
class _Links:
    """Where a payload's links point: the app (``ui.url``) and the runbooks."""

    app_url: str
    runbook_url: str


def _queue(db: sqlite3.Connection, config: AlertsConfig, links: _Links, finding: Finding, episode: int,
           also_matches: Finding | None, now: dt.datetime) -> int:
    queued = 0
    for route in config.routes:
        if not (route_wants(route, finding) or (also_matches is not None and route_wants(route, also_matches))):
            continue
        queued += _queue_one(db, route, links, finding, episode, now)
    return queued


def _queue_escalated(db: sqlite3.Connection, config: AlertsConfig, links: _Links, finding: Finding, before: Finding,
                     episode: int, now: dt.datetime) -> int:
    """The firing of ``finding`` (its state made firing) to the routes that take it at its severity
    but did not take ``before``, its earlier row (escalated: a stall grown long, a retention loss
    proven); the routes that had it already are not sent it again."""
    firing = replace(finding, state="firing", ends_at=None)
    return sum(_queue_one(db, route, links, firing, episode, now) for route in config.routes
               if route_wants(route, finding) and not route_wants(route, before))


def _queue_one(db: sqlite3.Connection, route: AlertRoute, links: _Links, finding: Finding, episode: int,
               now: dt.datetime) -> int:
    key = idempotency_key(route.name, finding.key, episode, finding.state)
    body = render(route.format, finding, route=route.name, idempotency_key=key, app_url=links.app_url,
                  runbook_url=links.runbook_url, now=now)
    added = Outbox.enqueue_in(db, idempotency_key=key, route=route.name, finding_key=finding.key,
                              state=finding.state, body=body, now=now.timestamp())
    return 1 if added else 0


def enqueue_findings(outbox: Outbox, config: AlertsConfig, findings: Iterable[Finding],
                     now: dt.datetime, *, app_url: str) -> EnqueueReport:
    """Queue the notifications that ``findings`` imply given the recorded alert state; their
    links into the app start with ``app_url`` (lagscope's ``ui.url``)."""
    links = _Links(app_url, config.runbook_url)
    current: dict[str, Finding] = {}
    for f in findings:
        # one finding per key. The result tables are append-only: an anomaly or a rebalance
        # window may appear once open and later again closed under the same key (its start is
        # part of the key, so it never reopens): the closed report wins.
        if f.key not in current or f.state == "resolved":
            current[f.key] = f
    ts = now.timestamp()
    transitions = queued = 0
    with outbox.transaction() as db:
        states = Outbox.states_in(db, current.keys())  # the firing ones and those of these findings
        for key, f in current.items():
            st = states.get(key)
            if f.state == "firing":
                if st is not None and st.state == "firing":
                    before = Finding.from_json(json.loads(st.finding))
                    if severity_rank(f.severity) > severity_rank(before.severity):
                        # escalated while firing (a stall grown long, a retention loss proven): the
                        # routes that take it only now get its firing (the same episode: the
                        # routes that had it already are not sent it again)
                        Outbox.set_state_in(db, key, "firing", st.episode, json.dumps(f.to_json()), ts)
                        transitions += 1
                        queued += _queue_escalated(db, config, links, f, before, st.episode, now)
                    continue
                episode = 1 if st is None else st.episode + 1
                Outbox.set_state_in(db, key, "firing", episode, json.dumps(f.to_json()), ts)
                transitions += 1
                queued += _queue(db, config, links, f, episode, None, now)
            elif st is None:
                recent = f.ends_at is not None and (now - f.ends_at).total_seconds() <= config.lookback_s
                Outbox.set_state_in(db, key, "resolved", 1 if recent else 0, json.dumps(f.to_json()), ts)
                if recent:
                    firing = replace(f, state="firing", ends_at=None)
                    transitions += 2
                    queued += _queue(db, config, links, firing, 1, None, now)
                    queued += _queue(db, config, links, f, 1, firing, now)
            elif st.state == "firing":
                before = Finding.from_json(json.loads(st.finding))
                Outbox.set_state_in(db, key, "resolved", st.episode, json.dumps(f.to_json()), ts)
                transitions += 1
                # escalated by the step that also ended it: the routes that take it only at its new
                # severity get its firing first, never a lone resolve
                queued += _queue_escalated(db, config, links, f, before, st.episode, now)
                queued += _queue(db, config, links, f, st.episode, before, now)
        for key, st in states.items():
            if key in current:
                continue
            if st.state == "firing":
                before = Finding.from_json(json.loads(st.finding))
                gone = before.resolved(now)
                Outbox.set_state_in(db, key, "resolved", st.episode, json.dumps(gone.to_json()), ts)
                transitions += 1
                queued += _queue(db, config, links, gone, st.episode, before, now)
        db.execute("DELETE FROM alert_state WHERE state = 'resolved' AND updated_at < ?", (ts - _FORGET_AFTER_S,))
    return EnqueueReport(transitions, queued)
