"""``lagscope spark …``: a local Spark standalone cluster and a cluster check job."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lagscope.deploy.spark import check as _check
from lagscope.deploy.spark import standalone as _standalone

__all__ = ["register"]

spark_app = typer.Typer(help="Spark on a cluster: a local standalone master/worker, a check job.",
                        no_args_is_help=True)

_WORKDIR = Path(".lagscope") / "spark"
WorkdirOpt = Annotated[Path, typer.Option("--workdir", help="Cluster state, logs and work folder.")]


@spark_app.command("start")
def start(
    workdir: WorkdirOpt = _WORKDIR,
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


@spark_app.command("stop")
def stop(workdir: WorkdirOpt = _WORKDIR) -> None:
    """Stop the cluster started by `lagscope spark start` (workers first, then the master)."""
    state = _standalone.stop_recorded(workdir)
    typer.echo(f"stopped Spark master {state.master_url} and {len(state.worker_pids)} worker(s)")


@spark_app.command("check")
def check(
    lake: Annotated[Path, typer.Option(help="The sample lake (a folder with offsets/).")],
    out: Annotated[Path, typer.Option(help="Where to write the summary (Parquet folder).")],
    master: Annotated[str, typer.Option(help="Spark master: local[*], spark://host:port, k8s://…")] = "local[*]",
    warn_at: Annotated[int, typer.Option(help="Lag (messages) from which the level is 'high'.")] = 1000,
) -> None:
    """Run a small job over the lake on MASTER: shuffle, window, Python UDF, Parquet out."""
    rows = _check.run(lake, out, master, warn_at=warn_at)
    typer.echo(f"{rows} group-topic rows written to {out} (master {master})")


def register(app: typer.Typer) -> None:
    app.add_typer(spark_app, name="spark")
