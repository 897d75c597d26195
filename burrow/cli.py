"""``lagscope burrow-api``: serve Burrow's HTTP API v3 from the lake and the results."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated

import typer

from lagscope.command import settings_or_exit
from lagscope.signals import stop_on_signals

__all__ = ["register"]


def burrow_api_cmd(
    config: Annotated[Path | None, typer.Option(
        "--config", "-c", help="lagscope.yaml (docs/configuration.md): burrow_api, clusters, collector.lake.",
        dir_okay=False)] = None,
    results: Annotated[str | None, typer.Option(
        help="Result tables root (a folder or s3://bucket/prefix). Default: analytics.results, else 'results' "
             "beside the lake.")] = None,
    lake: Annotated[str | None, typer.Option(
        help="The sample lake (a folder or s3://bucket/prefix, with the storage section). "
             "Default: collector.lake.")] = None,
    bind: Annotated[str | None, typer.Option(help="Address to listen on. (config: burrow_api.bind)")] = None,
    port: Annotated[int | None, typer.Option(help="Port, 0 for any free one. (config: burrow_api.port)")] = None,
) -> None:
    """Serve Burrow's HTTP API v3 (read endpoints) until SIGTERM or Ctrl-C (docs/burrow.md)."""
    from lagscope.burrow.setup import build_api

    settings = settings_or_exit(config)
    api = build_api(settings, results=results, lake=lake, bind=bind, port=port)
    stop = threading.Event()
    with stop_on_signals(stop, lambda name: None):
        api.start()
        builder = api.refresher.builder
        typer.echo(f"Burrow API on {api.url} (lake {getattr(builder.lake, 'url', builder.lake)}, results "
                   f"{getattr(builder.results, 'url', builder.results)}); SIGTERM stops it", err=True)
        try:
            while not stop.wait(1.0):
                if not api.is_healthy():
                    typer.echo("burrow api: the server stopped unexpectedly", err=True)
                    raise typer.Exit(1)
        finally:
            api.stop()


def register(app: typer.Typer) -> None:
    app.command("burrow-api")(burrow_api_cmd)
