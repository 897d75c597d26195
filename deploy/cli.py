"""The production room's door: ``lagscope run`` and ``lagscope spark check``.

- ``run``: collector, analytics loop, metrics and webhooks in one process (:mod:`.run`);
- ``spark check``: a small job over the lake on a Spark master, to check that a cluster can run
  lagscope's jobs (:mod:`.spark.check`).

The ``spark`` group is this room's; the development tools add the local standalone cluster's
``start`` and ``stop`` to it (:mod:`lagscope.devtools.cli`), this room never imports them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lagscope.deploy import run as _run
from lagscope.deploy.spark import check as _check

__all__ = ["register", "spark_app"]

spark_app = typer.Typer(help="Spark on a cluster: a local standalone master/worker, a check job.",
                        no_args_is_help=True)


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
    _run.register(app)
    app.add_typer(spark_app, name="spark")
