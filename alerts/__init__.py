"""Alert webhooks: findings → notifications → a durable outbox → webhooks, at least once.

    >>> settings = load_config("lagscope.yaml")                              # doctest: +SKIP
    >>> with Outbox("alerts.sqlite") as outbox:                               # doctest: +SKIP
    ...     enqueue_findings(outbox, settings.alerts, findings_from_results(results, now), now,
    ...                      app_url=settings.ui.url)
    ...     Sender(outbox, settings.alerts).run(max_seconds=60)

The routes are the ``alerts`` section of lagscope's settings (:class:`lagscope.config.AlertsConfig`).
See docs/alerting.md for the payload formats, signatures and delivery guarantees.
"""

from lagscope.alerts.findings import Finding, FindingsReader, findings_from_results, results_exist
from lagscope.alerts.notify import EnqueueReport, enqueue_findings, idempotency_key, route_wants
from lagscope.alerts.outbox import Outbox
from lagscope.alerts.payloads import GENERIC_SCHEMA_PATH, render
from lagscope.alerts.sender import Backoff, DeliveryReport, Sender, sign, verify_signature

__all__ = [
    "GENERIC_SCHEMA_PATH",
    "Backoff",
    "DeliveryReport",
    "EnqueueReport",
    "Finding",
    "FindingsReader",
    "Outbox",
    "Sender",
    "enqueue_findings",
    "findings_from_results",
    "idempotency_key",
    "render",
    "results_exist",
    "route_wants",
    "sign",
    "verify_signature",
]
