"""``lagscope analyze``: run the analytics over the lake, as a batch or incrementally;
``lagscope results-exporter``: serve their findings as Prometheus metrics.

    lagscope analyze --lake ./lake --results ./results --since 2026-01-01 --until 2026-01-07
    lagscope analyze --lake ./lake --results ./results --incremental            # from the checkpoint
    lagscope analyze ... --master spark://host:7077                              # any Spark master
    lagscope analyze --config lagscope.yaml --incremental       # lake, results, rules from the file

Settings come from the configuration file's ``analytics`` section (docs/configuration.md; the
lake from ``collector.lake``); each option given on the command line overrides its setting.
"""

from __future__ import annotations

import datetime as dt
import logging
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer

from lagscope.analytics.configured import with_overrides
from lagscope.command import settings_or_exit
from lagscope.config import resolve_results_root
from lagscope.errors import ConfigError
from lagscope.storage import Store, is_object_url

__all__ = ["register"]

log = logging.getLogger(__name__)


def _parse_time(value: str, name: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise ConfigError(f"{name}: not an ISO date or time: {value!r}") from exc
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def analyze(
    lake: Annotated[str | None, typer.Option(
        help="The sample lake: the folder (or s3://bucket/prefix, with the storage section of --config) the "
             "collector writes. Default: collector.lake of --config.")] = None,
    results: Annotated[str | None, typer.Option(
        help="Where the result tables (and the checkpoint) go: a folder or s3://bucket/prefix. Default: "
             "analytics.results of --config, else 'results' beside the lake.")] = None,
    since: Annotated[str | None, typer.Option(
        help="Batch: first UTC day (YYYY-MM-DD). Incremental: where the first run starts.")] = None,
    until: Annotated[str | None, typer.Option(
        help="Batch: last UTC day (inclusive). Incremental: end of the step (default: now).")] = None,
    incremental: Annotated[bool, typer.Option(
        "--incremental", help="Process only sweeps newer than the checkpoint, carrying the state.")] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", dir_okay=False,
        help="lagscope.yaml: its analytics section (docs/configuration.md); the options below override it.")] = None,
    master: Annotated[str | None, typer.Option(
        help="Spark master: local[*], spark://…, k8s://…, yarn. (config: analytics.master)")] = None,
    cluster: Annotated[list[str] | None, typer.Option(help="Only these clusters (repeatable).")] = None,
    shuffle_partitions: Annotated[int | None, typer.Option(
        help="spark.sql.shuffle.partitions. (config: analytics.shuffle_partitions; default 8)")] = None,
    driver_memory: Annotated[str | None, typer.Option(
        help="spark.driver.memory. (config: analytics.driver_memory)")] = None,
    read_committed: Annotated[list[str] | None, typer.Option(
        help="Regex (whole group id) of groups that read with isolation.level=read_committed (repeatable). "
             "(config: analytics.read_committed_groups)")] = None,
    session_timeout_s: Annotated[float | None, typer.Option(
        help="Default session.timeout.ms, in s. (config: analytics.session_timeout_s)")] = None,
    heartbeat_s: Annotated[float | None, typer.Option(
        help="Default heartbeat.interval.ms, in s. (config: analytics.heartbeat_s)")] = None,
    rebalance_timeout_s: Annotated[float | None, typer.Option(
        help="Default max.poll.interval.ms, in s. (config: analytics.rebalance_timeout_s)")] = None,
    stall_after_s: Annotated[float | None, typer.Option(
        help="Stall/stop after this long without progress. "
             "(config: analytics.rules.stall_after_s, stop_after_s)")] = None,
    progress: Annotated[bool, typer.Option(help="Log Spark progress while writing.")] = True,
) -> None:
    """Analyse the lake: lag trends, lag in seconds, rebalance windows, anomalies, status."""
    from lagscope.analytics.job import root_store, run_batch, run_incremental
    from lagscope.analytics.session import build_session
    from lagscope.s3a import session_conf

    cfg = settings_or_exit(config)
    acfg = cfg.analytics
    lake_option = "--lake" if lake is not None else "collector.lake"
    lake_url = lake if lake is not None else cfg.collector.lake
    # a local folder or an object store (the storage section): the job reads and writes both alike
    lake_root = root_store(lake_url if is_object_url(lake_url) else lake_url.removeprefix("file://"), cfg.storage)
    results_root = root_store(str(resolve_results_root(results, lake_root.url, acfg)), cfg.storage)
    master = master if master is not None else acfg.master
    shuffle_partitions = shuffle_partitions if shuffle_partitions is not None else (acfg.shuffle_partitions or 8)
    driver_memory = driver_memory if driver_memory is not None else acfg.driver_memory
    if not lake_root.is_object_store and not Path(lake_root.base).is_dir():
        raise ConfigError(f"{lake_option} {lake_url}: no such folder")
    if shuffle_partitions < 1:
        raise ConfigError("--shuffle-partitions must be at least 1")
    for name, value in (("--session-timeout-s", session_timeout_s), ("--heartbeat-s", heartbeat_s),
                        ("--rebalance-timeout-s", rebalance_timeout_s), ("--stall-after-s", stall_after_s)):
        if value is not None and value <= 0:
            raise ConfigError(f"{name} must be positive, not {value}")
    settings = with_overrides(
        acfg, rules={"stall_after_s": stall_after_s, "stop_after_s": stall_after_s},
        read_committed_groups=read_committed, session_timeout_s=session_timeout_s, heartbeat_s=heartbeat_s,
        rebalance_timeout_s=rebalance_timeout_s)
    history_points = cfg.time_lag.history_points
    if incremental:
        end = _parse_time(until, "--until") if until else dt.datetime.now(dt.UTC)
        start = _parse_time(since, "--since") if since else None
    else:
        if not since:
            raise ConfigError("a batch run needs --since (and optionally --until); or use --incremental")
        first = _parse_time(since, "--since").date()
        last = _parse_time(until, "--until").date() if until else dt.datetime.now(dt.UTC).date()
    from pyspark.sql import SparkSession

    # inside a program that already has a session (a notebook, the tests), use it and leave it running
    spark = SparkSession.getActiveSession()
    owned = spark is None
    if spark is None:
        spark = build_session(master, shuffle_partitions=shuffle_partitions, driver_memory=driver_memory,
                              log_file=_log_file(results_root),
                              extra_conf=session_conf(cfg.storage, lake_root, results_root))
    try:
        if incremental:
            written = run_incremental(spark, lake_root, results_root, settings=settings, history_points=history_points,
                                      until=end, since=start, clusters=cluster, progress=progress)
        else:
            written = run_batch(spark, lake_root, results_root, since=first, until=last, settings=settings,
                                history_points=history_points, clusters=cluster, progress=progress)
    finally:
        if owned:
            spark.stop()
    if not written:
        typer.echo("nothing new to analyse")
    for table, files in written.items():
        typer.echo(f"{table}: {files} file(s) written under {results_root.url_of(table)}")
    for q in written.quarantined:
        typer.echo(f"analysed without {q.path} ({q.table}, unreadable: {q.reason}); "
                   f"quarantined: {q.moved_to or 'could not be moved'}")


def _log_file(results: Store) -> Path:
    """Where Spark's log goes: ``<results>/_logs/spark.log``, or for results on an object store
    (no appending there) ``lagscope-logs/spark.log`` in the system's temporary folder."""
    if results.is_object_store:
        return Path(tempfile.gettempdir()) / "lagscope-logs" / "spark.log"
    return Path(results.base) / "_logs" / "spark.log"


def results_exporter_cmd(
    results: Annotated[str, typer.Option(
        "--results", help="Root of the analytics' result tables: a folder, or s3://bucket/prefix (with the "
                          "storage section of --config).")],
    bind: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free port).")] = 9309,
    refresh: Annotated[float, typer.Option(help="Re-read the result tables at most this often (s).")] = 15.0,
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", dir_okay=False, help="lagscope.yaml: its storage section, for s3:// results, and "
                                               "analytics.rules.forget_after_s (a series unwritten that long is gone).")
    ] = None,
) -> None:
    """Serve the analytics' findings as Prometheus metrics until interrupted."""
    from lagscope.analytics.results_metrics import serve
    from lagscope.storage import open_root

    settings = settings_or_exit(config)
    root = open_root(results, settings.storage) if is_object_url(results) else Path(results.removeprefix("file://"))
    server, _ = serve(root, host=bind, port=port, refresh_s=refresh,
                      gone_after_s=settings.analytics.rules.forget_horizon_s())
    typer.echo(f"serving http://{bind}:{server.server_port}/metrics (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.shutdown()


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)
    app.command("results-exporter")(results_exporter_cmd)
