"""The Spark session lagscope's analytics run in: UTC, Arrow on, UI off, millisecond Parquet.

    >>> spark = build_session("local[2]", shuffle_partitions=4)      # doctest: +SKIP
    >>> spark.stop()                                                 # doctest: +SKIP
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

__all__ = ["build_session"]


def build_session(master: str = "local[*]", *, app_name: str = "lagscope-analytics",
                  shuffle_partitions: int = 8, driver_memory: str = "2g") -> SparkSession:
    """A session configured for the lake: every timestamp is UTC, Parquet timestamps are written
    as int64 milliseconds (``timestamp[ms, tz=UTC]`` for pyarrow and DuckDB readers), result
    partitions are overwritten dynamically, and the web UI stays off."""
    # the Python workers (the vectorised passes) run this interpreter, with lagscope and its
    # numpy and pyarrow, unless PYSPARK_PYTHON names another (a cluster's executors); PySpark
    # takes it from the environment only (not from spark.pyspark.python) when it starts
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master).appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.default.parallelism", str(shuffle_partitions))
        .config("spark.sql.adaptive.enabled", "true")
        # an incremental step's plans generate about 250 classes; with Spark's default cache of
        # 100 every step of a long-running `lagscope run` compiled them all again (2.5–5 s a step)
        .config("spark.sql.codegen.cache.maxEntries", "2000")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MILLIS")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.ui.enabled", "false")
        .config("spark.python.sql.dataFrameDebugging.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC")
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
