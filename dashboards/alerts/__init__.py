"""Alert webhooks: findings → notifications → a durable outbox → webhooks, at least once.

    >>> config = load_config("alerts.yaml")                                   # doctest: +SKIP
    >>> with Outbox("alerts.sqlite") as outbox:                               # doctest: +SKIP
    ...     enqueue_findings(outbox, config, findings_from_results(results, now), now)
    ...     Sender(outbox, config).run(max_seconds=60)

See docs/alerting.md for the payload formats, signatures and delivery guarantees.
"""

from lagscope.dashboards.alerts.config import AlertsConfig, RateLimit, Route, load_config
from lagscope.dashboards.alerts.findings import Finding, findings_from_results
from lagscope.dashboards.alerts.notify import EnqueueReport, enqueue_findings, idempotency_key
from lagscope.dashboards.alerts.outbox import Outbox
from lagscope.dashboards.alerts.payloads import GENERIC_SCHEMA_PATH, render
from lagscope.dashboards.alerts.sender import Backoff, DeliveryReport, Sender, sign, verify_signature

__all__ = [
    "GENERIC_SCHEMA_PATH",
    "AlertsConfig",
    "Backoff",
    "DeliveryReport",
    "EnqueueReport",
    "Finding",
    "Outbox",
    "RateLimit",
    "Route",
    "Sender",
    "enqueue_findings",
    "findings_from_results",
    "idempotency_key",
    "load_config",
    "render",
    "sign",
    "verify_signature",
]
