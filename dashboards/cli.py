"""``lagscope dashboards …``: the Grafana dashboards, and the Prometheus alert rules they sit beside.

- ``dashboards generate``: write the Grafana dashboards (JSON) and provisioning files;
  ``--check`` fails when the files on disk differ from what the code generates.
- ``dashboards rules``: write the Prometheus alert rules generated from lagscope's settings (the
  thresholds of ``analytics.rules``, the app links at ``ui.url``); ``--check`` fails when the
  file differs.
- ``dashboards push``: upsert the dashboards into Grafana and write rebalance windows and
  anomalies as annotations (``GRAFANA_URL`` + ``GRAFANA_TOKEN`` or ``GRAFANA_TOKEN_FILE``).

``lagscope alerts …`` (the webhooks) is the alerts room's: :mod:`lagscope.alerts.cli`.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Annotated

import typer

from lagscope.command import settings_or_exit
from lagscope.errors import ConfigError

__all__ = ["register"]

dashboards_app = typer.Typer(help="Grafana dashboards: generate the JSON, push to Grafana.", no_args_is_help=True)

_AppUrl = Annotated[str | None, typer.Option(
    help="The Streamlit app's base URL for links (default: ui.url of --config, LAGSCOPE_UI__URL, "
         "http://localhost:8501).")]
_Settings = Annotated[Path | None, typer.Option(
    "--config", help="lagscope's settings (YAML, docs/configuration.md): its ui.url is the app's base URL.",
    dir_okay=False)]


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
    out: Annotated[Path | None, typer.Option(
        "--out", help="Where to write the rules file (default: deploy/prometheus/rules/lagscope.yml of the "
                      "source tree).", dir_okay=False)] = None,
    app_url: _AppUrl = None,
    settings: _Settings = None,
    check: Annotated[bool, typer.Option("--check", help="Only compare; exit 1 when the file differs.")] = False,
) -> None:
    """Write the Prometheus alert rules: the thresholds of analytics.rules, the app links at ui.url."""
    from lagscope.alerts import prometheus_rules
    from lagscope.config import AnalyticsRulesConfig
    from lagscope.dashboards import links

    rules = settings_or_exit(settings).analytics.rules if settings is not None else AnalyticsRulesConfig()
    text = prometheus_rules.render_rules(rules, links.app_url(app_url, config=settings))
    target = out or prometheus_rules.RULES_FILE
    if check:
        try:
            same = target.read_text() == text
        except OSError:
            same = False
        if not same:
            typer.echo(f"out of date: {target} (run `lagscope dashboards rules`)", err=True)
            raise typer.Exit(1)
        typer.echo("the alert rules are up to date")
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text)
    tmp.replace(target)
    typer.echo(str(target))


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


def register(app: typer.Typer) -> None:
    app.add_typer(dashboards_app, name="dashboards")
