"""``lagscope broker …``: fetch the Kafka jars, start and stop the local KRaft broker."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lagscope.deploy import broker as _broker

__all__ = ["register"]

broker_app = typer.Typer(help="The local Apache Kafka broker (KRaft, 127.0.0.1) for tests and the demo.",
                         no_args_is_help=True)

_WORKDIR = Path(".lagscope") / "broker"
WorkdirOpt = Annotated[Path, typer.Option("--workdir", help="Broker state, data and log folder.")]


@broker_app.command("fetch")
def fetch(
    version: Annotated[str, typer.Option(help="Kafka version to fetch.")] = _broker.DEFAULT_VERSION,
    tools: Annotated[bool, typer.Option(help="Also fetch kafka-tools (consumer-groups CLI).")] = True,
) -> None:
    """Fetch the Kafka jars from Maven Central into deploy/kafka/.cache (once)."""
    typer.echo(f"broker jars: {_broker.ensure_jars(version)}")
    if tools:
        typer.echo(f"tools jars:  {_broker.ensure_jars(_broker.TOOLS_VERSION, tools=True)}")


@broker_app.command("start")
def start(
    workdir: WorkdirOpt = _WORKDIR,
    version: Annotated[str, typer.Option(help="Kafka version.")] = _broker.DEFAULT_VERSION,
    port: Annotated[int, typer.Option(help="PLAINTEXT port (0: a free one).")] = 0,
    sasl_ssl: Annotated[bool, typer.Option("--sasl-ssl", help="Add a SASL_SSL SCRAM-SHA-512 listener.")] = False,
) -> None:
    """Start a single-node KRaft broker in the background and print its bootstrap address."""
    state_file = workdir / "broker.json"
    if state_file.exists():
        state = _broker.BrokerState.load(state_file)
        typer.echo(f"already running: {state.bootstrap} (pid {state.pid}); "
                   f"`lagscope broker stop --workdir {workdir}` first")
        raise typer.Exit(1)
    b = _broker.LocalBroker(workdir, version=version, sasl_ssl=sasl_ssl, port=port or None)
    b.start()
    typer.echo(f"Kafka {version} on {b.bootstrap} (pid {b.pid}); log: {b.log_file}")
    if b.sasl_bootstrap:
        typer.echo(f"SASL_SSL on {b.sasl_bootstrap}: user {_broker.SCRAM_USER}, password in "
                   f"{workdir / 'scram-password'}, CA {b.ca_file}")


@broker_app.command("stop")
def stop(workdir: WorkdirOpt = _WORKDIR) -> None:
    """Stop the broker started by `lagscope broker start` (SIGTERM, then SIGKILL after 30 s)."""
    state = _broker.stop_recorded(workdir)
    typer.echo(f"stopped Kafka on {state.bootstrap} (pid {state.pid})")


def register(app: typer.Typer) -> None:
    app.add_typer(broker_app, name="broker")
