"""``lagscope dashboards …``, ``lagscope alerts …`` and ``lagscope results-exporter``.

- ``dashboards generate``: write the Grafana dashboards (JSON) and provisioning files;
  ``--check`` fails when the files on disk differ from what the code generates.
- ``dashboards rules``: write the Prometheus alert rules with their app links re-based on the
  configured app URL (lagscope's ``ui.url``).
- ``dashboards push``: upsert the dashboards into Grafana and write rebalance windows and
  anomalies as annotations (``GRAFANA_URL`` + ``GRAFANA_TOKEN`` or ``GRAFANA_TOKEN_FILE``).
- ``alerts evaluate``: turn the result tables' findings into queued notifications.
- ``alerts deliver``: deliver the outbox (retrying with backoff) for at most ``--max-seconds``.
- ``alerts run``: evaluate + deliver every ``--interval`` seconds until interrupted.
- ``alerts outbox``: what is pending, delivered and dead.
- ``results-exporter``: serve the findings as Prometheus metrics.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from pathlib import Path
from typing import Annotated

import typer

from lagscope.errors import ConfigError, LakeError

__all__ = ["register"]

log = logging.getLogger(__name__)

dashboards_app = typer.Typer(help="Grafana dashboards: generate the JSON, push to Grafana.", no_args_is_help=True)
alerts_app = typer.Typer(help="Alert webhooks from the analytics' findings.", no_args_is_help=True)

_Results = Annotated[Path, typer.Option("--results", help="Root of the analytics' result tables.")]
_Config = Annotated[Path, typer.Option("--config", help="Alerts config (YAML): routes, app_url, lookback_s.")]
_Outbox = Annotated[Path, typer.Option("--outbox", help="The outbox file (SQLite); created when missing.")]
_AppUrl = Annotated[str | None, typer.Option(
    help="The Streamlit app's base URL for links (default: ui.url of --config, LAGSCOPE_UI__URL, "
         "http://localhost:8501).")]
_Settings = Annotated[Path | None, typer.Option(
    "--config", help="lagscope's settings (YAML, docs/configuration.md): its ui.url is the app's base URL.",
    dir_okay=False)]
#: the alerts commands' --config is the alert routes: lagscope's settings are --settings there
_AlertSettings = Annotated[Path | None, typer.Option(
    "--settings", help="lagscope's settings (YAML): its ui.url is the app's base URL when the routes file "
                       "sets no app_url.", dir_okay=False)]


@dashboards_app.command("generate")
def generate_cmd(
    out: Annotated[Path | None, typer.Option(help="Output folder (default: dashboards/grafana).")] = None,
    app_url: _AppUrl = None,
    settings: _Settings = None,
    prometheus_url: Annotated[str, typer.Option(help="URL of the provisioned Prometheus data source.")]
    = "http://localhost:9090",
    check: Annotated[bool, typer.Option("--check", help="Only compare; exit 1 when the files differ.")] = False,
) -> None:
    """Write the dashboards and the Grafana provisioning files."""
    from lagscope.dashboards import grafana_gen, links

    folder = out or grafana_gen.DEFAULT_OUT_DIR
    url = links.app_url(app_url, config=settings)
    if check:
        stale = [rel for rel, text in grafana_gen.render_files(url, prometheus_url).items()
                 if not (folder / rel).exists() or (folder / rel).read_text() != text]
        if stale:
            typer.echo(f"out of date: {', '.join(stale)} (run `lagscope dashboards generate`)", err=True)
            raise typer.Exit(1)
        typer.echo("dashboards are up to date")
        return
    for path in grafana_gen.generate(folder, app_url=url, prometheus_url=prometheus_url):
        typer.echo(str(path))


@dashboards_app.command("rules")
def rules_cmd(
    out: Annotated[Path, typer.Option("--out", help="Where to write the rules file.", dir_okay=False)],
    source: Annotated[Path | None, typer.Option(help="The rules to re-base (default: deploy/prometheus/rules/"
                                                     "lagscope.yml of the source tree).", dir_okay=False)] = None,
    app_url: _AppUrl = None,
    settings: _Settings = None,
) -> None:
    """Write the Prometheus alert rules with their app links at the configured app URL."""
    from lagscope.dashboards import links

    src = source or links.DEFAULT_RULES
    try:
        text = src.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the rules {src}: {exc.strerror} (give --source)") from exc
    rebased = links.rules_with_app_url(text, links.app_url(app_url, config=settings))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(rebased)
    tmp.replace(out)
    typer.echo(str(out))


@dashboards_app.command("push")
def push_cmd(
    results: Annotated[Path | None, typer.Option("--results", help="Result tables for the annotations "
                                                                    "(omit to push dashboards only).")] = None,
    folder: Annotated[Path | None, typer.Option(help="Dashboards JSON folder (default: dashboards/grafana).")] = None,
    url: Annotated[str | None, typer.Option(help="Grafana URL (default: GRAFANA_URL).")] = None,
    token_file: Annotated[Path | None, typer.Option(help="File holding the token (default: GRAFANA_TOKEN, "
                                                          "then GRAFANA_TOKEN_FILE).")] = None,
    folder_uid: Annotated[str | None, typer.Option(help="Grafana folder uid for the dashboards.")] = None,
    since_hours: Annotated[float, typer.Option(help="Only annotations of findings that ended within this "
                                                    "many hours (or are open).")] = 24 * 7,
    app_url: _AppUrl = None,
    settings: _Settings = None,
) -> None:
    """Upsert the dashboards and write rebalance windows and anomalies as annotations."""
    from lagscope.dashboards import grafana_gen, links
    from lagscope.dashboards.annotations import GrafanaPusher, annotations_from_results, grafana_from_env

    src = folder or grafana_gen.DEFAULT_OUT_DIR
    files = sorted(src.glob("*.json"))
    if not files:
        raise ConfigError(f"no dashboard JSON under {src}: run `lagscope dashboards generate` first")
    try:
        boards = [json.loads(p.read_text()) for p in files]
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the dashboards under {src}: {exc}") from exc
    now = dt.datetime.now(dt.UTC)
    link_base = links.app_url(app_url, config=settings)
    anns = annotations_from_results(results, now, link_base,
                                    since=now - dt.timedelta(hours=since_hours)) if results else []
    api = grafana_from_env(url, token_file=token_file)
    report = GrafanaPusher(api).push(boards, anns, folder_uid=folder_uid)
    for uid, what in sorted(report.dashboards.items()):
        typer.echo(f"dashboard {uid}: {what}")
    typer.echo(f"annotations: {report.annotations_created} created, {report.annotations_updated} updated, "
               f"{report.annotations_unchanged} unchanged")


@alerts_app.command("evaluate")
def evaluate_cmd(results: _Results, config: _Config, outbox: _Outbox, settings: _AlertSettings = None) -> None:
    """Queue the notifications the current findings imply (firing and resolved, deduplicated)."""
    from lagscope.dashboards import links
    from lagscope.dashboards.alerts import Outbox, enqueue_findings, findings_from_results, load_config

    cfg = load_config(config, app_url=links.app_url(config=settings) if settings else None)
    now = dt.datetime.now(dt.UTC)
    findings = findings_from_results(results, now)
    with Outbox(outbox) as box:
        report = enqueue_findings(box, cfg, findings, now)
    typer.echo(f"{len(findings)} findings, {report.transitions} transitions, {report.queued} notifications queued")


@alerts_app.command("deliver")
def deliver_cmd(
    config: _Config, outbox: _Outbox,
    max_seconds: Annotated[float, typer.Option(help="Stop after this long even if some are still pending.")]
    = 60.0,
) -> None:
    """Deliver the pending notifications (retrying with backoff); exit 1 when some are still pending."""
    from lagscope.dashboards.alerts import Outbox, Sender, load_config

    cfg = load_config(config)
    cfg.check_secrets()
    with Outbox(outbox) as box, Sender(box, cfg) as sender:
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
    settings: _AlertSettings = None,
) -> None:
    """Evaluate and deliver every ``--interval`` seconds until interrupted (Ctrl-C)."""
    from lagscope.dashboards import links
    from lagscope.dashboards.alerts import Outbox, Sender, enqueue_findings, findings_from_results, load_config

    cfg = load_config(config, app_url=links.app_url(config=settings) if settings else None)
    cfg.check_secrets()
    with Outbox(outbox) as box, Sender(box, cfg) as sender:
        try:
            while True:
                now = dt.datetime.now(dt.UTC)
                try:
                    enqueue_findings(box, cfg, findings_from_results(results, now), now)
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
    from lagscope.dashboards.alerts import Outbox

    if not outbox.exists():
        raise ConfigError(f"no outbox at {outbox}")
    with Outbox(outbox) as box:
        if as_json:
            for entry in box.entries():
                typer.echo(json.dumps(entry, default=str))
        counts = box.counts()
    typer.echo(f"pending {counts.pending}, delivered {counts.delivered}, dead {counts.dead}")


def results_exporter_cmd(
    results: _Results,
    bind: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free port).")] = 9309,
    refresh: Annotated[float, typer.Option(help="Re-read the result tables at most this often (s).")] = 15.0,
) -> None:
    """Serve the analytics' findings as Prometheus metrics until interrupted."""
    from lagscope.analytics.results_metrics import serve

    server, _ = serve(results, host=bind, port=port, refresh_s=refresh)
    typer.echo(f"serving http://{bind}:{server.server_port}/metrics (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()


def register(app: typer.Typer) -> None:
    app.add_typer(dashboards_app, name="dashboards")
    app.add_typer(alerts_app, name="alerts")
    app.command("results-exporter")(results_exporter_cmd)
