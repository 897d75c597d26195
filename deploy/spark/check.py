"""A small Spark job over the sample lake, to check that a Spark master can run lagscope's jobs.

It exercises what the analytics need from a cluster: reading the Hive-partitioned lake,
a shuffle (group by), a window function, a Python UDF (so the executors must have a Python
with pyspark) and writing Parquet where the driver can read it back. The result, one row
per (cluster, group, topic), is the same on ``local[*]`` and on any cluster.

    $ lagscope spark check --lake ./lake --out ./check-out --master spark://127.0.0.1:7077

``transform_lag_summary`` is pure (DataFrame in, DataFrame out); ``run`` does the I/O.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from lagscope.errors import LakeError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["build_session", "lag_level", "run", "transform_lag_summary"]


def lag_level(lag: int | None, warn_at: int) -> str:
    """``none`` (no commit), ``zero``, ``low`` (below ``warn_at`` messages) or ``high``."""
    if lag is None:
        return "none"
    if lag == 0:
        return "zero"
    return "low" if lag < warn_at else "high"


def build_session(master: str, app_name: str = "lagscope-check",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A Spark session on ``master`` with lagscope's defaults (UTC, small shuffles)."""
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               # cluster=<name>, date=<YYYY-MM-DD> stay strings, whatever a name looks like
               .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
               .config("spark.executor.memory", "512m"))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def transform_lag_summary(offsets: DataFrame, warn_at: int) -> DataFrame:
    """Per (cluster, group, topic): sweeps, partitions, peak and last lag, its level.

    ``offsets`` has the columns of the ``offsets`` lake table plus ``cluster``. The last lag
    is the group-topic total at the latest sweep of that group-topic.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # noqa: N812
    from pyspark.sql.types import StringType

    per_sweep = (offsets.groupBy("cluster", "group_id", "topic", "sweep_ts")
                 .agg(F.sum("lag").alias("total_lag")))
    latest = Window.partitionBy("cluster", "group_id", "topic").orderBy(F.col("sweep_ts").desc())
    last = (per_sweep.withColumn("rank", F.row_number().over(latest))
            .where(F.col("rank") == 1)
            .select("cluster", "group_id", "topic", F.col("total_lag").alias("lag_last")))
    stats = (offsets.groupBy("cluster", "group_id", "topic")
             .agg(F.countDistinct("sweep_ts").alias("sweeps"),
                  F.countDistinct("partition").alias("partitions"),
                  F.max("lag").alias("partition_lag_max")))
    level = F.udf(lambda lag: lag_level(lag, warn_at), StringType())
    return (stats.join(last, ["cluster", "group_id", "topic"])
            .withColumn("level", level(F.col("lag_last")))
            .orderBy("cluster", "group_id", "topic"))


def run(lake: Path | str, out: Path | str, master: str, *, warn_at: int = 1000,
        conf: dict[str, str] | None = None) -> int:
    """Read ``<lake>/offsets``, write the summary as Parquet under ``out``; return its row count."""
    offsets_dir = Path(lake) / "offsets"
    if not offsets_dir.is_dir():
        raise LakeError(f"no offsets table under {lake} (expected {offsets_dir})")
    spark = build_session(master, conf=conf)
    try:
        offsets = spark.read.option("basePath", str(offsets_dir)).parquet(str(offsets_dir))
        summary = transform_lag_summary(offsets, warn_at)
        summary.write.mode("overwrite").parquet(str(out))
        return int(spark.read.parquet(str(out)).count())
    finally:
        spark.stop()
