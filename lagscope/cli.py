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
import typer.main
from rich.console import Console
from rich.markup import escape

from lagscope import __version__
from lagscope.errors import LagscopeError
from lagscope.memory import TUNED

__all__ = ["app", "main"]

app = typer.Typer(
    name="lagscope",
    help="Consumer-lag and rebalance observability for Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
err = Console(stderr=True)

# the rooms' doors, one per room (docs/architecture.md): modules that define
# ``register(app: typer.Typer) -> None``. This table is the only place the core names a room.
_COMMAND_MODULES: list[str] = [
    "lagscope.collector.cli",   # collect, lag, lake prune
    "lagscope.analytics.cli",   # analyze, results-exporter
    "lagscope.app.cli",         # ui
    "lagscope.burrow.cli",      # burrow-api
    "lagscope.dashboards.cli",  # dashboards
    "lagscope.alerts.cli",      # alerts
    "lagscope.deploy.cli",      # run, spark check
    "lagscope.devtools.cli",    # demo, webhook-sink, broker, sim, spark start/stop
]

# the order of `lagscope --help`, the everyday commands first (typer lists the commands, then the
# groups); a command missing here is listed after these
_HELP_ORDER: list[str] = [
    "demo", "run", "collect", "lag", "analyze", "results-exporter", "ui", "burrow-api", "webhook-sink",
    "lake", "dashboards", "alerts", "broker", "sim", "spark",
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
    if TUNED:
        logging.getLogger("lagscope.memory").debug("allocators: %s", "; ".join(TUNED))


def _register_all() -> None:
    for name in _COMMAND_MODULES:
        module = importlib.import_module(name)
        module.register(app)
    rank = {name: i for i, name in enumerate(_HELP_ORDER)}
    app.registered_commands.sort(
        key=lambda c: rank.get(c.name or typer.main.get_command_name(getattr(c.callback, "__name__", "")), len(rank)))
    app.registered_groups.sort(key=lambda g: rank.get(g.name or "", len(rank)))


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
