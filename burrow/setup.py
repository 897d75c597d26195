"""Build the Burrow API component from lagscope's settings (shared by ``lagscope burrow-api``
and ``lagscope run``)."""

from __future__ import annotations

from pathlib import Path

from lagscope.burrow.server import BurrowApi
from lagscope.burrow.snapshot import SnapshotBuilder, SnapshotRefresher, cluster_infos
from lagscope.config import Settings, parse_duration, resolve_results_root
from lagscope.storage import open_root

__all__ = ["build_api"]


def build_api(settings: Settings, *, results: Path | str | None = None, lake: Path | str | None = None,
              bind: str | None = None, port: int | None = None) -> BurrowApi:
    """The API over ``lake`` (default: the collector's) and ``results`` (default: as every
    command resolves them), with the ``burrow_api`` section's settings; ``bind``/``port``
    override the section's. Its window is the analytics' Burrow window (``rules.burrow_window``),
    so that the entries shown are as many as the status was evaluated on. Either root may be an
    ``s3://`` URL (opened with the ``storage`` section)."""
    cfg = settings.burrow_api
    lake_root = open_root(str(lake if lake is not None else settings.collector.lake), settings.storage)
    results_root = open_root(str(resolve_results_root(results, settings.collector.lake, settings.analytics)),
                             settings.storage)
    builder = SnapshotBuilder(
        lake_root, results_root, intervals=settings.analytics.rules.burrow_window,
        history_s=parse_duration(cfg.history), expire_group_s=parse_duration(cfg.expire_group),
        status_source=cfg.status, clusters=cluster_infos(settings.clusters, settings.collector.interval_s))
    return BurrowApi(SnapshotRefresher(builder, cfg.refresh_s), bind=cfg.bind if bind is None else bind,
                     port=cfg.port if port is None else port)
