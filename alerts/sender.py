"""Delivery from the outbox: at least once, exponential backoff with jitter, idempotency key, HMAC.

Every request of one notification carries the same ``Idempotency-Key`` header (and the same
body), so a receiver can drop the duplicates that at-least-once delivery allows. With a route
secret, each request is signed::

    X-Lagscope-Timestamp: <Unix seconds of this attempt>
    X-Lagscope-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>

(:func:`verify_signature` is the receiver's side.) Outcomes:

- 2xx → delivered;
- connection refused, timeout, 408, 425, 429, 5xx → retried after
  ``min(cap, base·factor^(attempt-1))`` scaled by a random factor in ``[1-jitter, 1]``
  (``Retry-After`` is honoured when longer);
- any other 4xx → *dead* (retrying cannot fix a rejected request; it stays in the outbox with
  its error for ``lagscope alerts outbox``).

A route that was down is noticed when it answers again, not only when each of its waiting
entries' own backoff ends (which reaches minutes after a long outage): a route whose pending
entries all wait for a retry is *probed* every ``probe_s`` seconds with its entry due soonest,
and a delivery that succeeds makes the route's other waiting entries due at once.

Rate limits defer an entry to when its route's window frees a slot; a deferral is not an
attempt. Logs name the route and the host only: a webhook URL's path is often a secret
(Slack), and secrets are never logged.
"""

from __future__ import annotations

import email.utils
import hashlib
import hmac
import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from lagscope import __version__
from lagscope.alerts.outbox import Entry, Outbox
from lagscope.config import AlertRoute, AlertsConfig
from lagscope.errors import ConfigError

__all__ = ["Backoff", "DeliveryReport", "Sender", "sign", "verify_signature"]

log = logging.getLogger(__name__)

_RETRYABLE_STATUS = frozenset({408, 425, 429})


class _RedactUrlPaths(logging.Filter):
    """httpx logs every request's full URL at INFO; a webhook URL's path is often its secret."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(a, httpx.URL) for a in record.args):
            record.args = tuple(f"{a.scheme}://{a.netloc.decode()}/…" if isinstance(a, httpx.URL) else a
                                for a in record.args)
        return True


_httpx_log = logging.getLogger("httpx")
if not any(isinstance(f, _RedactUrlPaths) for f in _httpx_log.filters):
    _httpx_log.addFilter(_RedactUrlPaths())


def sign(secret: bytes, body: bytes, timestamp: int) -> str:
    """The ``X-Lagscope-Signature`` value for ``body`` sent at ``timestamp``."""
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={mac}"


def verify_signature(secret: bytes, body: bytes, timestamp: str, signature: str, *,
                     now: float | None = None, tolerance_s: float = 300.0) -> bool:
    """True when ``signature`` signs ``body`` at ``timestamp`` and the timestamp is recent."""
    try:
        ts = int(timestamp)
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - ts) > tolerance_s:
        return False
    return hmac.compare_digest(sign(secret, body, ts), signature)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter (seconds)."""

    base_s: float = 1.0
    factor: float = 2.0
    cap_s: float = 300.0
    jitter: float = 0.5

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        """Delay after the ``attempt``-th failed attempt (1-based)."""
        raw = min(self.cap_s, self.base_s * self.factor ** max(0, attempt - 1))
        return raw * (1.0 - self.jitter * (rng or random).random())


@dataclass
class DeliveryReport:
    delivered: int = 0
    failed: int = 0
    dead: int = 0
    deferred: int = 0
    errors: list[str] = field(default_factory=list)


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _retry_after(response: httpx.Response, now: float) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    if value.isdigit():
        return float(value)
    when = email.utils.parsedate_to_datetime(value) if value else None
    return max(0.0, when.timestamp() - now) if when else None


class Sender:
    """Delivers due outbox entries to their routes' webhooks.

    ``client``: an httpx.Client to use (default: a new one, closed by :meth:`close`).
    ``clock``: wall clock in Unix seconds. ``rng``: for the jitter. ``probe_s``: how often a
    route whose every pending entry waits for a retry is tried anyway (module docstring).
    """

    def __init__(self, outbox: Outbox, config: AlertsConfig, *, client: httpx.Client | None = None,
                 backoff: Backoff | None = None, clock: Callable[[], float] = time.time,
                 rng: random.Random | None = None, probe_s: float = 30.0) -> None:
        self.outbox = outbox
        self.config = config
        self.backoff = backoff or Backoff()
        self.probe_s = probe_s
        #: when each route was last tried (by this sender: a new one probes at once)
        self._last_try: dict[str, float] = {}
        self._clock = clock
        self._rng = rng or random.Random()
        self._own_client = client is None
        self._client = client or httpx.Client(headers={"User-Agent": f"lagscope/{__version__}"})

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> Sender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def deliver_due(self) -> DeliveryReport:
        """One pass: try every entry that is due now."""
        report = DeliveryReport()
        now = self._clock()
        entries = self.outbox.due(now)
        due_routes = {e.route for e in entries}
        for route, entry in self.outbox.soonest_per_route().items():
            # a probe: has the route come back before its entries' backoff ends?
            if route not in due_routes and now - self._last_try.get(route, -math.inf) >= self.probe_s:
                entries.append(entry)
        for entry in entries:
            self._deliver(entry, report)
        return report

    def run(self, *, max_seconds: float, poll_s: float = 1.0,
            sleep: Callable[[float], None] = time.sleep, until_empty: bool = True) -> DeliveryReport:
        """Deliver until nothing is pending (``until_empty``) or ``max_seconds`` have passed."""
        total = DeliveryReport()
        deadline = self._clock() + max_seconds
        while True:
            r = self.deliver_due()
            total.delivered += r.delivered
            total.failed += r.failed
            total.dead += r.dead
            total.deferred += r.deferred
            total.errors.extend(r.errors)
            now = self._clock()
            nxt = self.outbox.next_due_at()
            if (nxt is None and until_empty) or now >= deadline:
                return total
            wait = poll_s if nxt is None else max(0.0, min(poll_s, nxt - now))
            sleep(min(wait, max(0.0, deadline - now)))

    def _rate_limited_until(self, route: AlertRoute, now: float) -> float | None:
        if route.rate_limit is None:
            return None
        times = self.outbox.delivered_since(route.name, now - route.rate_limit.per_s)
        if len(times) < route.rate_limit.max:
            return None
        window: float = route.rate_limit.per_s
        oldest: float = times[len(times) - route.rate_limit.max]
        return oldest + window

    def _deliver(self, entry: Entry, report: DeliveryReport) -> None:
        now = self._clock()
        route = self.config.route(entry.route)
        if route is None:
            self._failed(entry, f"route {entry.route!r} is not configured", report, None)
            return
        until = self._rate_limited_until(route, now)
        if until is not None:
            self.outbox.defer(entry.id, until)
            report.deferred += 1
            return
        self._last_try[entry.route] = now
        headers = {"Content-Type": "application/json", "Idempotency-Key": entry.idempotency_key,
                   "X-Lagscope-Attempt": str(entry.attempts + 1), **route.headers}
        try:
            secret = route.secret()
        except ConfigError as exc:
            self._failed(entry, str(exc), report, None)
            return
        if secret is not None:
            ts = int(now)
            headers["X-Lagscope-Timestamp"] = str(ts)
            headers["X-Lagscope-Signature"] = sign(secret, entry.body, ts)
        try:
            response = self._client.post(route.url, content=entry.body, headers=headers, timeout=route.timeout_s)
        except httpx.TimeoutException:
            self._failed(entry, f"timeout after {route.timeout_s:g} s", report, route)
            return
        except httpx.TransportError as exc:
            self._failed(entry, f"{type(exc).__name__}: {exc}", report, route)
            return
        status = response.status_code
        if 200 <= status < 300:
            self.outbox.mark_delivered(entry.id, self._clock())
            report.delivered += 1
            log.info("delivered %s (%s) to route %s", entry.finding_key, entry.state, route.name)
            released = self.outbox.release(route.name, self._clock())
            if released:
                log.info("route %s answers again: %d notification(s) waiting for a retry are due now",
                         route.name, released)
        elif status >= 500 or status in _RETRYABLE_STATUS:
            self._failed(entry, f"HTTP {status}", report, route, _retry_after(response, now))
        else:
            error = f"HTTP {status} (not retried)"
            self.outbox.mark_dead(entry.id, error, self._clock())
            report.dead += 1
            log.error("route %s (%s) rejected %s: %s", route.name, _host(route.url), entry.idempotency_key, error)

    def _failed(self, entry: Entry, error: str, report: DeliveryReport, route: AlertRoute | None,
                retry_after: float | None = None) -> None:
        delay = self.backoff.delay(entry.attempts + 1, self._rng)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.backoff.cap_s))
        self.outbox.mark_failed(entry.id, error, self._clock() + delay)
        report.failed += 1
        report.errors.append(error)
        where = f"route {entry.route} ({_host(route.url)})" if route else f"route {entry.route}"
        log.warning("delivery to %s failed (attempt %d): %s; retry in %.2f s",
                    where, entry.attempts + 1, error, delay)
