"""``lagscope run``'s parts wired on a bucket (the real S3 server fixture, no broker, no Spark): the
analytics loop reads the collector's bucket lake and writes the results' store, the collector's
retention and its ``__consumer_offsets`` tail use the same stores (no refusal), the alerts read the
results there, and a prefix with nothing under it reads as "not there yet"."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.s3server import S3Server

from lagscope import s3a
from lagscope.config import load_config
from lagscope.deploy import run as run_mod
from lagscope.storage import Store


def test_every_part_on_the_bucket(s3_server: S3Server, s3_prefix: str, tmp_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    lake, results = s3_server.store(f"{s3_prefix}/lake"), s3_server.store(f"{s3_prefix}/results")
    path = tmp_path / "lagscope.yaml"
    path.write_text(f"clusters: [{{name: c, bootstrap_servers: 'h:1', consumer_offsets_tail: {{enabled: true}}}}]\n"
                    f"collector: {{lake: '{lake.url}', retention: 5}}\nanalytics: {{retention: 45}}\n"
                    f"storage: {{endpoint: '{s3_server.endpoint}', path_style: true, credentials: env}}\n"
                    "alerts: {routes: [{name: r, url: 'http://127.0.0.1:9/hook', format: generic}]}\n")
    settings = load_config(path)
    jars = tmp_path / "s3a-jars"  # the pinned jars' folder (a stand-in: no Spark starts here)
    jars.mkdir()
    (jars / f"hadoop-aws-{s3a.HADOOP_VERSION}.jar").touch()
    monkeypatch.setenv("LAGSCOPE_S3A_JARS", str(jars))
    parts = {run_mod.Part.collector, run_mod.Part.analytics, run_mod.Part.alerts}
    alerts, loop, collector = run_mod.build_components(settings, parts, results=results,
                                                       outbox=tmp_path / "o.sqlite", results_metrics=False)
    assert isinstance(loop.lake, Store)
    assert loop.lake.url == lake.url
    assert loop.results is results
    assert collector.collector.results is results  # its retention reads the checkpoint there
    assert isinstance(collector.collector.lake_root, Store)
    assert alerts.results is results
    assert not str(loop.log_file).startswith(("s3:", results.base))  # Spark's log is local
    # the loop's session gets Spark's own s3a:// for the bucket (the storage section, the jars)
    assert loop.spark_conf["spark.hadoop.fs.s3a.endpoint"] == s3_server.endpoint
    assert loop.spark_conf["spark.jars"] == str(jars / f"hadoop-aws-{s3a.HADOOP_VERSION}.jar")
    # nothing under the prefixes yet: "not there yet", then there once anything is
    assert not run_mod._exists(loop.lake)
    assert not run_mod._exists(results)
    lake.put("sweeps/cluster=c/date=2026-11-27/x.parquet", b"x")
    assert run_mod._exists(loop.lake)
    assert run_mod._exists(tmp_path)
    assert not run_mod._exists(tmp_path / "missing")
