"""``lagscope alerts …``: alert webhooks from the analytics' findings.

- ``alerts evaluate``: turn the result tables' findings into queued notifications (the routes are
  the ``alerts`` section of ``--config``, the links point at its ``ui.url``).
- ``alerts deliver``: deliver the outbox (retrying with backoff) for at most ``--max-seconds``.
- ``alerts run``: evaluate + deliver every ``--interval`` seconds until interrupted.
- ``alerts outbox``: what is pending, delivered and dead.

``--results`` is a folder or ``s3://bucket/prefix`` (opened with the ``storage`` section of
``--config``). The outbox is always a local SQLite file: it is the alerting process's own state
(what it queued, delivered and still owes), written at every transition inside a transaction;
an object store has neither transactions nor locks, and no other process reads the outbox.

The Prometheus alert rules (:mod:`lagscope.alerts.prometheus_rules`) are written by
``lagscope dashboards rules``, beside the Grafana dashboards that show the same metrics.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Annotated

import typer

from lagscope.command import settings_or_exit
from lagscope.errors import ConfigError, LakeError
from lagscope.storage import open_root

__all__ = ["register"]

log = logging.getLogger(__name__)

alerts_app = typer.Typer(help="Alert webhooks from the analytics' findings.", no_args_is_help=True)

_Results = Annotated[str, typer.Option(
    "--results", help="Root of the analytics' result tables: a folder, or s3://bucket/prefix (with the storage "
                      "section of --config).")]
_Config = Annotated[Path, typer.Option(
    "--config", help="lagscope's settings (YAML, docs/configuration.md): its alerts section (the routes) and "
                     "ui.url (the app's base URL for links).", dir_okay=False)]
_Outbox = Annotated[Path, typer.Option(
    "--outbox", help="The outbox file (SQLite, a local path: the alerting process's own state); created when "
                     "missing.")]



@alerts_app.command("evaluate")
def evaluate_cmd(results: _Results, config: _Config, outbox: _Outbox) -> None:
    """Queue the notifications the current findings imply (firing and resolved, deduplicated)."""
    from lagscope.alerts import Outbox, enqueue_findings, findings_from_results

    settings = settings_or_exit(config)
    now = dt.datetime.now(dt.UTC)
    findings = findings_from_results(open_root(results, settings.storage), now,
                                     gone_after_s=settings.analytics.rules.forget_horizon_s())
    with Outbox(outbox) as box:
        report = enqueue_findings(box, settings.alerts, findings, now, app_url=settings.ui.url)
    typer.echo(f"{len(findings)} findings, {report.transitions} transitions, {report.queued} notifications queued")


@alerts_app.command("deliver")
def deliver_cmd(
    config: _Config, outbox: _Outbox,
    max_seconds: Annotated[float, typer.Option(help="Stop after this long even if some are still pending.")]
    = 60.0,
) -> None:
    """Deliver the pending notifications (retrying with backoff); exit 1 when some are still pending."""
    from lagscope.alerts import Outbox, Sender

    alerts = settings_or_exit(config).alerts
    alerts.check_secrets()
    with Outbox(outbox) as box, Sender(box, alerts) as sender:
        report = sender.run(max_seconds=max_seconds)
        counts = box.counts()
    typer.echo(f"delivered {report.delivered}, failed attempts {report.failed}, dead {report.dead}; "
               f"pending {counts.pending}")
    if counts.pending:
        raise typer.Exit(1)


@alerts_app.command("run")
def run_cmd(
    results: _Results, config: _Config, outbox: _Outbox,
    interval: Annotated[float, typer.Option(help="Seconds between evaluations.")] = 60.0,
) -> None:
    """Evaluate and deliver every ``--interval`` seconds until interrupted (Ctrl-C)."""
    from lagscope.alerts import FindingsReader, Outbox, Sender, enqueue_findings, results_exist

    settings = settings_or_exit(config)
    alerts = settings.alerts
    alerts.check_secrets()
    root = open_root(results, settings.storage)
    # each evaluation reads only the result files new since the last; an ended finding is kept while it
    # could still be sent; a group whose status stopped for the forget horizon is gone
    reader = FindingsReader(root, hold_ended_s=alerts.lookback_s,
                            gone_after_s=settings.analytics.rules.forget_horizon_s())
    if not results_exist(root):
        log.warning("alerts: the results folder %s does not exist (yet): nothing is evaluated until the analytics "
                    "write it (what the outbox holds is still delivered)", results)
    with Outbox(outbox) as box, Sender(box, alerts) as sender:
        try:
            while True:
                now = dt.datetime.now(dt.UTC)
                try:
                    if results_exist(root):  # said once above; an evaluation would resolve every firing alert
                        enqueue_findings(box, alerts, reader.findings(now), now, app_url=settings.ui.url)
                        reader.forget_sent()
                except LakeError as exc:  # a failing evaluation is logged and retried next round
                    log.error("alerts: cannot read the results: %s", exc)
                sender.run(max_seconds=interval, until_empty=False)
        except KeyboardInterrupt:
            typer.echo("stopped")


@alerts_app.command("outbox")
def outbox_cmd(
    outbox: _Outbox,
    as_json: Annotated[bool, typer.Option("--json", help="Every entry as JSON lines.")] = False,
) -> None:
    """Show the outbox: pending, delivered and dead notifications."""
    from lagscope.alerts import Outbox

    if not outbox.exists():
        raise ConfigError(f"no outbox at {outbox}")
    with Outbox(outbox) as box:
        if as_json:
            for entry in box.entries():
                typer.echo(json.dumps(entry, default=str))
        counts = box.counts()
    typer.echo(f"pending {counts.pending}, delivered {counts.delivered}, dead {counts.dead}")


def register(app: typer.Typer) -> None:
    app.add_typer(alerts_app, name="alerts")
