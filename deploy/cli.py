"""The production room's door: ``lagscope run``, ``lagscope spark check|jars|s3a-conf``.

- ``run``: collector, analytics loop, metrics and webhooks in one process (:mod:`.run`);
- ``spark check``: a small job over the lake on a Spark master, to check that a cluster can run
  lagscope's jobs (:mod:`.spark.check`);
- ``spark jars``: fetch the pinned ``s3a://`` connector jars (hadoop-aws, AWS SDK) once
  (:mod:`lagscope.s3a`, ``deploy/spark/pom.xml``);
- ``spark s3a-conf``: the ``spark-submit --conf`` set that gives a cluster job ``s3a://`` with the
  settings' ``storage`` section.

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


@spark_app.command("jars")
def jars_cmd() -> None:
    """Fetch the s3a connector's pinned jars (hadoop-aws, AWS SDK v2) from Maven Central (once)
    and print their folder."""
    from lagscope import s3a

    found = s3a.ensure_jars()
    typer.echo(f"s3a jars ({len(found)}, hadoop-aws {s3a.HADOOP_VERSION}): {s3a.jars_dir()}")


@spark_app.command("s3a-conf")
def s3a_conf_cmd(
    config: Annotated[Path | None, typer.Option(help="lagscope's configuration file (its storage section).")] = None,
    jars: Annotated[str | None, typer.Option(
        help="The jars' folder on the cluster's nodes (default: this machine's, `lagscope spark jars`; "
             "the image's is /opt/lagscope/s3a-jars).")] = None,
) -> None:
    """Print the spark-submit arguments (one per line) that give a job s3a:// with the storage
    section: the jars on the class path, endpoint, region, path-style access, credential
    providers (class names: no key is ever printed)."""
    from lagscope import s3a
    from lagscope.command import settings_or_exit

    for arg in s3a.submit_args(settings_or_exit(config).storage, jars):
        typer.echo(arg)


def register(app: typer.Typer) -> None:
    _run.register(app)
    app.add_typer(spark_app, name="spark")
