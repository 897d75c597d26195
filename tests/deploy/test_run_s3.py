"""``lagscope run`` with the lake and the results in a bucket (the real S3 server fixture) against
the real broker: the collector's sweeps and its ``__consumer_offsets`` tail write the bucket, the
analytics loop reads it and writes its results there, the alerts read them and deliver a signed
webhook (their outbox a local file), and the app's data layer reads the lot back from the bucket;
SIGTERM stops it cleanly; no credential is ever in its output."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml
from helpers.history import make_history
from helpers.s3server import S3Server, put_tree
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition
from test_run import LAGSCOPE, _metrics, free_port

from lagscope import lake as sample_lake
from lagscope import results as result_tables
from lagscope.app import data
from lagscope.app.params import TimeRange
from lagscope.devtools.sink import WebhookSink


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_run_on_a_bucket_collects_tails_analyses_alerts_and_the_app_reads_it(
        bootstrap: str, unique: str, tmp_path: Path, s3_server: S3Server, s3_prefix: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(unique, num_partitions=1, replication_factor=1)])
        for i in range(12):
            producer.send(unique, f"m{i}".encode(), partition=0)
        producer.flush()
        admin.alter_group_offsets(unique, {TopicPartition(unique, 0): OffsetAndMetadata(5, "", -1)})
    finally:
        producer.close()
        admin.close()
    lake, results = s3_server.store(f"{s3_prefix}/lake"), s3_server.store(f"{s3_prefix}/results")
    # history two hours ago in the bucket: the first analytics step (backfill 24 h) finds its stall
    local = tmp_path / "history"
    make_history(local, "history", (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).replace(second=0, microsecond=0))
    assert put_tree(local, lake) > 0
    port = free_port()
    sink = WebhookSink(tmp_path / "hooks.jsonl", secret=b"run-test-secret").start()
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": [{"name": "live", "bootstrap_servers": [bootstrap], "groups": {"include": [unique]},
                      "consumer_offsets_tail": {"enabled": True, "start": "1h"}}],
        "collector": {"interval_s": 1, "lake": lake.url},
        "storage": {"endpoint": s3_server.endpoint, "path_style": True, "credentials": "env"},
        "metrics": {"bind": "127.0.0.1", "port": port},
        "alerts": {"lookback_s": 3 * 86400, "routes": [
            {"name": "sink", "url": f"{sink.url}/hook", "format": "generic", "min_severity": "warning",
             "groups": ["stu.*"], "secret_env": "RUN_TEST_SECRET", "timeout_s": 5}]},
    }))
    workdir = tmp_path / "work"
    workdir.mkdir()
    creds = {k: v for k, v in s3_server.credentials.items() if v}
    proc = subprocess.Popen(
        [*LAGSCOPE, "run", "--config", str(config), "--master", "local[1]",
         "--analytics-interval", "5", "--alerts-interval", "2"],
        env={**os.environ, **creds, "RUN_TEST_SECRET": "run-test-secret", "SPARK_LOCAL_IP": "127.0.0.1"},
        cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        commits: list[dict[str, object]] = []
        while time.monotonic() < deadline and proc.poll() is None:
            commits = [c for c in sample_lake.read_table(lake, "commits", cluster="live").to_pylist()
                       if c["group_id"] == unique]
            if commits and any(r["payload"] for r in sink.records()):
                break
            time.sleep(1)
        assert proc.poll() is None, "".join(output)[-4000:]
        # the tail recorded the group's commit into the bucket, once
        assert [(c["topic"], c["partition"], c["committed_offset"]) for c in commits] == [(unique, 0, 5)]
        # the analytics read the bucket's lake and wrote the results there
        kinds = {(r["group_id"], r["kind"]) for r in result_tables.read(results, "anomalies").to_pylist()}
        assert ("stuck", "stall") in kinds
        # the alerts read them there: a signed webhook about the stuck group; the outbox is local
        hooks = sink.records()
        assert hooks, "".join(output)[-4000:]
        assert all(h["signature_ok"] for h in hooks)
        assert {h["payload"]["group"] for h in hooks if h["payload"]} == {"stuck"}
        assert (workdir / "alerts-outbox.sqlite").is_file()
        assert not [n for n in lake.names("") + results.names("") if "outbox" in n]
        # the app's data layer reads the bucket: the stall and the commits, from the commits table
        con = data.connect()
        try:
            both = data.Lake(lake, results)
            now = dt.datetime.now(dt.UTC)
            window = TimeRange(now - dt.timedelta(hours=3), now + dt.timedelta(minutes=1))
            frame = data.anomalies(con, both, ["history"], window, "stuck")
            assert "stall" in set(frame["kind"])
            history, source = data.commit_history(con, both, "live", unique, window)
            assert source == "commits"
            assert list(history["committed_offset"]) == [5]
        finally:
            con.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
            sink.stop()
    reader.join(timeout=5)
    log = "".join(output)
    assert code == 0, log[-4000:]
    assert "lagscope stopped" in log
    assert f"lake {lake.url}, results {results.url}" in log
    assert s3_server.credentials["AWS_SECRET_ACCESS_KEY"] not in log
    assert _metrics(port) == ""
    sweeps = sample_lake.read_table(lake, "sweeps", cluster="live").to_pylist()
    assert sweeps
    assert all(s["ok"] for s in sweeps)
    # the tail's positions are an object in the bucket, with nothing pending after a clean stop
    state = json.loads(lake.get("_state/commitlog/live.json"))
    assert state["positions"]
    assert not state["pending"]
