"""The ``lagscope`` command line.

Each component registers its own commands from its own module (``register(app)``), so this
file stays a table of contents: add a line to ``_COMMAND_MODULES`` to add a component.
"""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from lagscope import __version__
from lagscope.errors import LagscopeError

__all__ = ["app", "main"]

app = typer.Typer(
    name="lagscope",
    help="Consumer-lag and rebalance observability for Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err = Console(stderr=True)

# modules that define ``register(app: typer.Typer) -> None``
_COMMAND_MODULES: list[str] = [
    # order of `lagscope --help`: the everyday commands first
    "lagscope.deploy.demo",         # demo
    "lagscope.deploy.run",          # run
    "lagscope.collector.cli",       # collect, lag
    "lagscope.analytics.cli",       # analyze
    "lagscope.dashboards.app.cli",  # ui
    "lagscope.dashboards.cli",      # dashboards, alerts, results-exporter
    "lagscope.burrow.cli",          # burrow-api
    "lagscope.deploy.sink",         # webhook-sink
    "lagscope.deploy.cli",          # broker
    "lagscope.sim.cli",             # sim
    "lagscope.deploy.spark.cli",    # spark
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lagscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # kafka-python is chatty at INFO (every connect and close); keep its warnings
    if not verbose:
        logging.getLogger("kafka").setLevel(logging.WARNING)


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(app)


_register_all()


def main() -> None:
    """Entry point: turn lagscope's own errors into one clear line and exit code 1."""
    try:
        app()
    except LagscopeError as exc:
        # the message is text (paths, group ids may hold "[…]"), and one line however long
        err.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
