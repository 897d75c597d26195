"""``lagscope analyze``: run the analytics over the lake, as a batch or incrementally.

    lagscope analyze --lake ./lake --results ./results --since 2026-01-01 --until 2026-01-07
    lagscope analyze --lake ./lake --results ./results --incremental            # from the checkpoint
    lagscope analyze ... --master spark://host:7077                              # any Spark master
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Annotated

import typer

from lagscope.analytics.findings import RuleParams
from lagscope.analytics.job import Settings
from lagscope.errors import ConfigError

__all__ = ["register"]

log = logging.getLogger(__name__)


def _parse_time(value: str, name: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise ConfigError(f"{name}: not an ISO date or time: {value!r}") from exc
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def analyze(
    lake: Annotated[Path, typer.Option(help="The sample lake (folder written by the collector).")],
    results: Annotated[Path, typer.Option(help="Where the result tables (and the checkpoint) go.")],
    since: Annotated[str | None, typer.Option(
        help="Batch: first UTC day (YYYY-MM-DD). Incremental: where the first run starts.")] = None,
    until: Annotated[str | None, typer.Option(
        help="Batch: last UTC day (inclusive). Incremental: end of the step (default: now).")] = None,
    incremental: Annotated[bool, typer.Option(
        "--incremental", help="Process only sweeps newer than the checkpoint, carrying the state.")] = False,
    master: Annotated[str, typer.Option(help="Spark master: local[*], spark://…, k8s://…, yarn.")] = "local[*]",
    cluster: Annotated[list[str] | None, typer.Option(help="Only these clusters (repeatable).")] = None,
    shuffle_partitions: Annotated[int, typer.Option(help="spark.sql.shuffle.partitions.")] = 8,
    driver_memory: Annotated[str, typer.Option(help="spark.driver.memory.")] = "2g",
    read_committed: Annotated[list[str] | None, typer.Option(
        help="Groups that read with isolation.level=read_committed (repeatable).")] = None,
    session_timeout_s: Annotated[float, typer.Option(help="Default session.timeout.ms, in s.")] = 45.0,
    heartbeat_s: Annotated[float, typer.Option(help="Default heartbeat.interval.ms, in s.")] = 3.0,
    rebalance_timeout_s: Annotated[float, typer.Option(help="Default max.poll.interval.ms, in s.")] = 300.0,
    stall_after_s: Annotated[float, typer.Option(help="Stall/stop after this long without progress.")] = 60.0,
    progress: Annotated[bool, typer.Option(help="Log Spark progress while writing.")] = True,
) -> None:
    """Analyse the lake: lag trends, lag in seconds, rebalance windows, anomalies, status."""
    from lagscope.analytics.job import run_batch, run_incremental
    from lagscope.analytics.session import build_session

    if not lake.is_dir():
        raise ConfigError(f"--lake {lake}: no such folder")
    if shuffle_partitions < 1:
        raise ConfigError("--shuffle-partitions must be at least 1")
    rules = RuleParams(stall_after_s=stall_after_s, stop_after_s=stall_after_s)
    settings = Settings(rules=rules, read_committed_groups=tuple(read_committed or ()),
                        session_timeout_s=session_timeout_s, heartbeat_s=heartbeat_s,
                        rebalance_timeout_s=rebalance_timeout_s)
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
    owned = SparkSession.getActiveSession() is None
    spark = build_session(master, shuffle_partitions=shuffle_partitions, driver_memory=driver_memory)
    try:
        if incremental:
            written = run_incremental(spark, lake, results, settings=settings, until=end, since=start,
                                      clusters=cluster, progress=progress)
        else:
            written = run_batch(spark, lake, results, since=first, until=last, settings=settings,
                                clusters=cluster, progress=progress)
    finally:
        if owned:
            spark.stop()
    if not written:
        typer.echo("nothing new to analyse")
    for table, files in written.items():
        typer.echo(f"{table}: {files} file(s) written under {results / table}")


def register(app: typer.Typer) -> None:
    app.command("analyze")(analyze)
