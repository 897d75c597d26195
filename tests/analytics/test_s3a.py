"""Spark's own ``s3a://`` on the real S3 server fixture (gofakes3 on loopback): ``lagscope analyze``
writes its result tables into the bucket (its session started with the s3a settings), then a
user's Spark program in a session lagscope builds with the settings of ``lagscope.s3a`` (the
pinned hadoop-aws jars, endpoint, path-style, region, credential providers: no key in the
configuration) writes a table through ``s3a://``, reads it back, and reads every result table
through ``s3a://``: the same rows as pyarrow's read of the same objects.

Each Spark program runs as its own process: ``spark.jars`` is taken when a JVM starts, and the
tests' shared session (tests/analytics/conftest.py) has no s3a. The jars come from
``scripts/setup.sh`` (``lagscope spark jars``); without them the test is skipped on a developer's
machine and fails in CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from analytics_builders import T0, at, write_stall_lake
from helpers.s3server import S3Server, s3a_jars_or_skip
from test_job_s3 import upload

from lagscope import results, s3a

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
READER = ROOT / "tests" / "helpers" / "s3a_reader.py"
LAGSCOPE = Path(sys.executable).with_name("lagscope")


@pytest.fixture(scope="module")
def s3a_jars() -> list[Path]:
    return s3a_jars_or_skip()


def _rows(table: pa.Table, columns: list[str]) -> list[tuple[str, ...]]:
    """The rows over ``columns``, each value as text (partition values and timestamps alike), sorted."""
    return sorted(tuple(str(r[c]) for c in columns) for r in table.select(columns).to_pylist())


def _env(s3_server: S3Server) -> dict[str, str]:
    """The child's environment: this one (the SDK's checksum and metadata settings of the S3 fixture)
    with the server's keys in the standard variables, where the credential providers find them."""
    env = {k: v for k, v in os.environ.items() if k not in s3_server.credentials}
    env.update({k: v for k, v in s3_server.credentials.items() if v})
    env["PYSPARK_PYTHON"] = sys.executable
    return env


def test_spark_reads_and_writes_the_bucket_through_s3a(s3a_jars: list[Path], s3_server: S3Server, s3_prefix: str,
                                                       tmp_path: Path) -> None:
    local = tmp_path / "lake"
    write_stall_lake(local)
    lake = s3_server.store(f"{s3_prefix}/lake")
    upload(local, lake)
    results_url = s3_server.url(f"{s3_prefix}/results")
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"storage:\n  endpoint: {s3_server.endpoint}\n  path_style: true\n  credentials: env\n"
                      "analytics:\n  rules:\n    stall_after_s: 30\n    stop_after_s: 30\n")
    env = _env(s3_server)

    # lagscope analyze writes the result tables into the bucket (a session of its own, with s3a)
    done = subprocess.run(
        [str(LAGSCOPE), "analyze", "--config", str(config), "--lake", lake.url, "--results", results_url,
         "--incremental", "--since", T0.isoformat(), "--until", at(240).isoformat(), "--master", "local[2]",
         "--no-progress"], env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "s3a:// is not configured" not in done.stdout + done.stderr
    out = s3_server.store(f"{s3_prefix}/results")
    written = {t for t in results.RESULT_TABLES if results.object_files(out, t)}
    assert {"lag_trends", "anomalies", "status"} <= written

    # a user's program: lagscope's session with the s3a settings, over the same bucket
    scratch = s3_server.url(f"{s3_prefix}/mine/numbers")
    got = tmp_path / "got"
    ran = subprocess.run([sys.executable, str(READER), str(config), results_url, scratch, str(got)],
                         env=env, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr[-4000:]

    # what it wrote through s3a:// is in the bucket (pyarrow sees it) and read back the same
    scratch_store = s3_server.store(f"{s3_prefix}/mine/numbers")
    parts = [n for n in scratch_store.names("") if n.endswith(".parquet")]
    assert parts, "Spark wrote no Parquet object through s3a://"
    by_pyarrow = pa.concat_tables([pq.read_table(scratch_store.path(n), filesystem=scratch_store.filesystem)
                                   for n in parts])
    assert _rows(by_pyarrow, ["n", "word"]) == [("1", "one"), ("2", "two"), ("3", "three")]
    assert _rows(pq.read_table(got / "scratch.parquet"), ["n", "word"]) == _rows(by_pyarrow, ["n", "word"])

    # every result table through s3a:// (its folder, and the files lagscope's readers take) is
    # pyarrow's read of the same objects
    for table in sorted(written):
        want = results.read(out, table)
        assert want.num_rows > 0
        columns = want.schema.names
        for how in ("folder", "files"):
            spark_read = pq.read_table(got / f"{table}.{how}.parquet")
            assert sorted(spark_read.schema.names) == sorted(columns), (table, how)
            assert _rows(spark_read, columns) == _rows(want, columns), (table, how)

    # the session's s3a settings are the storage section's, and no key is among them
    conf: dict[str, Any] = json.loads((got / "conf.json").read_text())
    assert conf["hadoop"]["fs.s3a.endpoint"] == s3_server.endpoint
    assert conf["hadoop"]["fs.s3a.path.style.access"] == "true"
    assert conf["hadoop"]["fs.s3a.aws.credentials.provider"] == ",".join(s3a.PROVIDERS["env"])
    assert conf["spark"]["spark.jars"].split(",") == [str(p) for p in s3a_jars]
    secret = s3_server.credentials["AWS_SECRET_ACCESS_KEY"]
    assert secret not in json.dumps(conf)
    assert not any("secret.key" in k or "access.key" in k for k in conf["spark"])
