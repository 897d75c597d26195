"""The development tools' door: ``lagscope demo``, ``webhook-sink``, ``broker …``, ``sim …``
and ``spark start``/``stop``.

- ``demo`` (:mod:`.demo`), ``webhook-sink`` (:mod:`.sink`) and ``sim …`` (:mod:`.sim.commands`)
  are defined beside their tools;
- ``broker fetch|start|stop``: fetch the Kafka jars, start and stop the local KRaft broker
  (:mod:`.broker`);
- ``spark start|stop``: a Spark standalone master and workers on 127.0.0.1
  (:mod:`.spark_standalone`). They join the production room's ``spark`` group
  (:data:`lagscope.deploy.cli.spark_app`, whose ``check`` job runs on any master), listed first
  as before; the dependency goes this way only: deploy never imports the dev tools.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lagscope.deploy.cli import spark_app
from lagscope.devtools import broker as _broker
from lagscope.devtools import demo as _demo
from lagscope.devtools import sink as _sink
from lagscope.devtools import spark_standalone as _standalone
from lagscope.devtools.sim import commands as _sim

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


_SPARK_WORKDIR = Path(".lagscope") / "spark"
SparkWorkdirOpt = Annotated[Path, typer.Option("--workdir", help="Cluster state, logs and work folder.")]

#: the standalone cluster's commands, spliced into deploy's ``spark`` group by ``register``
_standalone_app = typer.Typer()


@_standalone_app.command("start")
def spark_start(
    workdir: SparkWorkdirOpt = _SPARK_WORKDIR,
    workers: Annotated[int, typer.Option(help="Number of workers.")] = 1,
    cores: Annotated[int, typer.Option(help="Cores each worker offers.")] = 2,
    memory: Annotated[str, typer.Option(help="Memory each worker offers (e.g. 1g).")] = "1g",
) -> None:
    """Start a Spark standalone master and workers on 127.0.0.1 (pyspark's spark-class)."""
    state_file = workdir / "cluster.json"
    if state_file.exists():
        state = _standalone.ClusterState.load(state_file)
        typer.echo(f"already running: {state.master_url} (master pid {state.master_pid}); "
                   f"`lagscope spark stop --workdir {workdir}` first")
        raise typer.Exit(1)
    cluster = _standalone.StandaloneCluster(workdir, workers=workers, worker_cores=cores,
                                            worker_memory=memory)
    cluster.start()
    typer.echo(f"Spark master {cluster.master_url} (ui {cluster.ui_url}, pid {cluster.master_pid}); "
               f"workers: pids {', '.join(map(str, cluster.worker_pids))}; logs in {workdir}")
    typer.echo(f"drivers on this machine: export PYSPARK_PYTHON={cluster.python} SPARK_LOCAL_IP=127.0.0.1")


@_standalone_app.command("stop")
def spark_stop(workdir: SparkWorkdirOpt = _SPARK_WORKDIR) -> None:
    """Stop the cluster started by `lagscope spark start` (workers first, then the master)."""
    state = _standalone.stop_recorded(workdir)
    typer.echo(f"stopped Spark master {state.master_url} and {len(state.worker_pids)} worker(s)")


def register(app: typer.Typer) -> None:
    _demo.register(app)
    _sink.register(app)
    app.add_typer(broker_app, name="broker")
    _sim.register(app)
    # `lagscope spark`: start and stop first, then deploy's check (once, however often this runs)
    new = [c for c in _standalone_app.registered_commands if c not in spark_app.registered_commands]
    spark_app.registered_commands[:0] = new
