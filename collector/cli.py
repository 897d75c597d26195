"""``lagscope collect`` (the collection loop), ``lagscope lag`` (a one-shot lag table) and
``lagscope lake prune`` (retention, once).

    lagscope collect --config lagscope.yaml            # until Ctrl-C / SIGTERM
    lagscope collect --config lagscope.yaml --once     # one sweep per cluster, then exit
    lagscope lag --bootstrap 127.0.0.1:9092 --group orders
    lagscope lake prune --config lagscope.yaml --dry-run

Invalid configuration prints one line ``config error: <field>: <problem>`` and exits with 2,
before anything connects.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Annotated, Any, Literal, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lagscope.config import ClusterConfig, Settings, format_validation_error, load_config, resolve_results_root
from lagscope.errors import ConfigError, LagscopeError
from lagscope.signals import stop_on_signals

__all__ = ["register"]

log = logging.getLogger(__name__)
err = Console(stderr=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="YAML configuration file.",
                                                dir_okay=False)]


def _load(path: Path | None, env: dict[str, str] | None = None) -> Settings:
    """Load and validate; on error print the one line and exit 2 (nothing connected yet)."""
    try:
        return load_config(path, environ={**os.environ, **(env or {})})
    except ConfigError as exc:
        _config_exit(str(exc))


def _config_exit(line: str) -> NoReturn:
    err.print(f"config error: {line}", highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(2)


def collect(
    config: ConfigOpt = None,
    once: Annotated[bool, typer.Option("--once", help="One sweep of every cluster, then exit.")] = False,
    lake: Annotated[str | None, typer.Option("--lake", help="Override collector.lake.")] = None,
    no_metrics: Annotated[bool, typer.Option("--no-metrics", help="Do not serve /metrics.")] = False,
) -> None:
    """Sweep the configured clusters every interval: lake + /metrics, until SIGINT/SIGTERM."""
    settings = _load(config, {"LAGSCOPE_COLLECTOR__LAKE": lake} if lake else None)
    if not settings.clusters:
        _config_exit("clusters: at least one cluster is required to collect")
    from lagscope.collector.loop import Collector

    collector = Collector(settings, metrics=False if (no_metrics or once) else None)
    if once:
        try:
            snaps = collector.run_once()
        finally:
            collector.stop()
        if not all(s.ok for s in snaps):
            raise typer.Exit(1)
        return
    stop = threading.Event()
    with stop_on_signals(stop, lambda name: log.info("received %s; stopping after the current sweep", name)):
        collector.run(stop)


def lag(
    config: ConfigOpt = None,
    bootstrap: Annotated[str | None, typer.Option("--bootstrap", "-b",
                                                  help="host:port[,…] (instead of --config).")] = None,
    cluster: Annotated[str | None, typer.Option("--cluster",
                                                help="Cluster name from the config (default: first).")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", "-g", help="Only this group (repeatable).")] = None,
    timeout_ms: Annotated[int, typer.Option("--timeout-ms", help="Request timeout.")] = 10000,
) -> None:
    """Print every group's lag per partition, like kafka-consumer-groups.sh --describe."""
    from lagscope.collector.kafka_client import ClusterClient
    from lagscope.collector.sweep import sweep

    if (config is None) == (bootstrap is None):
        _config_exit("give exactly one of --config or --bootstrap")
    if bootstrap is not None:
        try:
            target = ClusterConfig(name="cli", bootstrap_servers=bootstrap)  # type: ignore[arg-type]
        except Exception as exc:
            if isinstance(exc, ValidationError):
                _config_exit("--bootstrap: " + format_validation_error(exc).split(": ", 1)[-1])
            raise
    else:
        settings = _load(config)
        if not settings.clusters:
            _config_exit("clusters: no cluster configured")
        try:
            target = settings.cluster(cluster) if cluster else settings.clusters[0]
        except ConfigError as exc:
            _config_exit(str(exc))
    with ClusterClient(target, request_timeout_ms=timeout_ms) as client:
        snap = sweep(client, target, group_ids=group or None)
    if not snap.ok:
        raise LagscopeError(f"{target.name}: {snap.sweep.get('error')}")
    if not snap.offsets and not snap.members:
        err.print(f"no consumer groups found{' named ' + ', '.join(group) if group else ''}", highlight=False,
                  markup=False)
        return
    Console().print(lag_table(snap.offsets, snap.members))
    if snap.sweep.get("group_errors"):
        err.print(f"[yellow]warning:[/] {escape(str(snap.sweep.get('error')))}", highlight=False)


def lag_table(offsets: Any, members: Any) -> Table:
    """A rich table in the column order of kafka-consumer-groups.sh --describe (+ STATE)."""
    table = Table(box=None, header_style="bold", pad_edge=False)
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("GROUP", "left"), ("STATE", "left"), ("TOPIC", "left"), ("PARTITION", "right"),
                          ("CURRENT-OFFSET", "right"), ("LOG-END-OFFSET", "right"), ("LAG", "right"),
                          ("CONSUMER-ID", "left"), ("HOST", "left"), ("CLIENT-ID", "left"))
    for name, justify in columns:
        # numbers are never cut; long names wrap (fold) instead
        numeric = justify == "right"
        table.add_column(name, justify=justify, no_wrap=numeric, min_width=len(name) if numeric else None,
                         overflow="fold")

    def s(v: Any) -> str:  # cells are markup: group, member and client ids are free text
        return "-" if v is None else escape(str(v))

    seen: set[str] = set()
    for r in sorted(offsets, key=lambda r: (r["group_id"], r["topic"], r["partition"])):
        seen.add(r["group_id"])
        lag_v = r.get("lag")
        lag_text = s(lag_v) if not lag_v else f"[bold yellow]{lag_v}[/]"
        table.add_row(s(r["group_id"]), s(r.get("group_state")), s(r["topic"]), str(r["partition"]),
                      s(r.get("committed_offset")), s(r.get("log_end_offset")), lag_text,
                      s(r.get("member_id")), s(r.get("host")), s(r.get("client_id")))
    for m in sorted(members, key=lambda m: m["group_id"]):
        if m["group_id"] not in seen:  # groups with neither commits nor assignments
            seen.add(m["group_id"])
            table.add_row(s(m["group_id"]), s(m.get("group_state")), "-", "-", "-", "-", "-",
                          s(m.get("member_id")), s(m.get("host")), s(m.get("client_id")))
    return table


lake_app = typer.Typer(help="The sample lake and the result tables: retention.", no_args_is_help=True)


@lake_app.command("prune")
def prune_cmd(
    config: ConfigOpt = None,
    lake: Annotated[str | None, typer.Option(
        "--lake", help="The lake (a folder or s3://bucket/prefix). Default: collector.lake.")] = None,
    results: Annotated[str | None, typer.Option(
        "--results", help="The result tables. Default: analytics.results, else 'results' beside the lake.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
) -> None:
    """Apply retention once: remove the lake's date partitions older than collector.retention days
    (not those the analytics' checkpoint has yet to read) and the result tables' older than
    analytics.retention days, as the collector and the analytics loop do hourly."""
    from lagscope.retention import analytics_keep_from, prune
    from lagscope.schema import RESULT_TABLES, SAMPLE_TABLES
    from lagscope.storage import Store, open_root

    settings = _load(config)
    lake_root = open_root(lake if lake is not None else settings.collector.lake, settings.storage)
    results_root = open_root(str(resolve_results_root(results, lake if lake is not None else settings.collector.lake,
                                                      settings.analytics)), settings.storage)
    if isinstance(lake_root, Path) and not lake_root.is_dir():
        raise ConfigError(f"--lake {lake_root}: no such folder")
    targets = ((lake_root, SAMPLE_TABLES, settings.collector.retention, "lake", "collector.retention"),
               (results_root, RESULT_TABLES, settings.analytics.retention, "results", "analytics.retention"))
    for root, tables, days, label, setting in targets:
        where = root.url if isinstance(root, Store) else root
        if not days:
            typer.echo(f"{label} {where}: kept forever ({setting} is {days})")
            continue
        keep_from = analytics_keep_from(results_root) if label == "lake" else None
        done = prune(root, tables, days=days, keep_from=keep_from, dry_run=dry_run, label=label)
        for r in done.removed if dry_run else ():
            typer.echo(f"would remove {label} {r.table} cluster={r.cluster} date={r.date}: {r.files} files, "
                       f"{r.bytes} bytes")
        verb = "would remove" if dry_run else "removed"
        held = (f"; {done.kept_for_analytics} expired partition(s) kept until the analytics read them"
                if done.kept_for_analytics else "")
        typer.echo(f"{label} {where}: {verb} {len(done.removed)} partition(s) older than {days} days "
                   f"(+1 day of margin), {done.bytes} bytes{held}")


def register(app: typer.Typer) -> None:
    app.command("collect")(collect)
    app.command("lag")(lag)
    app.add_typer(lake_app, name="lake")
