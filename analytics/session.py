"""The Spark session lagscope's analytics run in: UTC, Arrow on, UI off, millisecond Parquet.

    >>> spark = build_session("local[2]", shuffle_partitions=4)      # doctest: +SKIP
    >>> spark.stop()                                                 # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from lagscope.config import AnalyticsConfig

__all__ = ["build_session", "discard_session"]

#: spark.driver.memory when the caller gives none: ``analytics.driver_memory``'s default
_DRIVER_MEMORY: str = AnalyticsConfig.model_fields["driver_memory"].default



_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
appender.file.type = File
appender.file.name = file
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %p %c: %m%n%ex
"""


def _log_to(log_file: Path) -> str:
    """A log4j2 configuration that sends Spark's and the JVM's logs to ``log_file``; its path."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    conf = log_file.with_name("spark-log4j2.properties")
    conf.write_text(_LOG4J.format(path=log_file.resolve()))
    # py4j's and PySpark's own Python loggers: into the same file, not onto the terminal
    handler = logging.FileHandler(log_file.with_name("pyspark.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("py4j", "pyspark", "lagscope.analytics.trace"):
        lg = logging.getLogger(name)
        lg.handlers = [handler]
        lg.propagate = False
    return str(conf.resolve())


def build_session(master: str = "local[*]", *, app_name: str = "lagscope-analytics",
                  shuffle_partitions: int = 8, driver_memory: str = _DRIVER_MEMORY,
                  log_file: Path | None = None, extra_conf: Mapping[str, str] | None = None) -> SparkSession:
    """A session configured for the lake: every timestamp is UTC, Parquet timestamps are written
    as int64 milliseconds (``timestamp[ms, tz=UTC]`` for pyarrow and DuckDB readers), result
    partitions are overwritten dynamically, and the web UI stays off. ``log_file``: Spark's and
    the JVM's logs go there instead of the terminal. ``extra_conf``: more settings, e.g. the
    ``s3a://`` connector's of :func:`lagscope.s3a.spark_conf` (given when the JVM starts)."""
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
        .config("spark.driver.extraJavaOptions", "-Duser.timezone=UTC" + (
            f" -Dlog4j2.configurationFile=file:{_log_to(log_file)}" if log_file is not None else ""))
        .config("spark.executor.extraJavaOptions", "-Duser.timezone=UTC")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def discard_session(spark: SparkSession | None) -> None:
    """Stop ``spark`` and forget its JVM when that JVM is gone (out of memory, crashed), so that
    the next :func:`build_session` starts a new one instead of calling the dead gateway."""
    from pyspark import SparkContext

    if spark is not None:
        try:
            spark.stop()
        except Exception:  # a dead JVM cannot be asked to stop
            logging.getLogger(__name__).debug("stopping the Spark session failed", exc_info=True)
    gateway = SparkContext._gateway
    alive = False
    if gateway is not None:
        try:
            gateway.jvm.java.lang.System.currentTimeMillis()
            alive = True
        except Exception:
            alive = False
    if not alive:
        if gateway is not None:
            try:
                gateway.shutdown()
            except Exception:
                logging.getLogger(__name__).debug("closing the dead gateway failed", exc_info=True)
        SparkContext._gateway = None
        SparkContext._jvm = None
        SparkContext._active_spark_context = None
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
