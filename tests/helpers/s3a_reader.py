"""A user's Spark program over lagscope's bucket, run as its own process by tests/analytics/test_s3a.py
(a new JVM: ``spark.jars`` is taken when the JVM starts, and the tests' shared session has none):

    python tests/helpers/s3a_reader.py CONFIG RESULTS_URL SCRATCH_URL OUT_DIR [MASTER]

The session is lagscope's (``build_session``) with the ``s3a://`` settings lagscope derives from
CONFIG's ``storage`` section (``lagscope.s3a.spark_conf``). It writes a small table to
SCRATCH_URL through ``s3a://`` and reads it back, then reads every result table under
RESULTS_URL through ``s3a://`` twice: the table's folder as a user names it, and the files
lagscope's readers take (``lagscope.results.object_files``). Each read is written to OUT_DIR as a
local Parquet file (``<name>.parquet``) for the test to compare with pyarrow's read of the same
objects; OUT_DIR/conf.json holds the session's s3a settings. MASTER (default ``local[2]``): a
standalone cluster's ``spark://…`` runs the reads and writes on its executors (the connector's
jars shipped to them by ``spark.jars``, the keys from their own environment).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow.parquet as pq

from lagscope import results, s3a
from lagscope.analytics.session import build_session
from lagscope.config import load_config
from lagscope.storage import open_store


def main(config: str, results_url: str, scratch_url: str, out_dir: str, master: str = "local[2]") -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = load_config(Path(config))
    conf = s3a.spark_conf(settings.storage)
    spark = build_session(master, app_name="lagscope-s3a-test", shuffle_partitions=2, extra_conf=conf)
    try:
        # partition values as the folders spell them (a cluster named "01" stays a string)
        spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        mine = spark.createDataFrame([(1, "one"), (2, "two"), (3, "three")], "n long, word string")
        mine.write.mode("overwrite").parquet(s3a.to_s3a(scratch_url))
        pq.write_table(spark.read.parquet(s3a.to_s3a(scratch_url)).toArrow(), out / "scratch.parquet")
        store = open_store(results_url, settings.storage)
        for table in results.RESULT_TABLES:
            folder = s3a.to_s3a(f"{results_url.rstrip('/')}/{table}")
            files = [s3a.to_s3a(u) for u in results.object_files(store, table)]
            if not files:
                continue
            pq.write_table(spark.read.parquet(folder).toArrow(), out / f"{table}.folder.parquet")
            listed = spark.read.option("basePath", folder).parquet(*files)
            pq.write_table(listed.toArrow(), out / f"{table}.files.parquet")
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        seen = {k.removeprefix("spark.hadoop."): hadoop.get(k.removeprefix("spark.hadoop."))
                for k in conf if k.startswith("spark.hadoop.")}
        (out / "conf.json").write_text(json.dumps({"spark": conf, "hadoop": seen}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
