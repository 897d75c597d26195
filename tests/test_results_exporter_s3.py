"""The results exporter over result tables on an object store (analytics/results_metrics.py with an
s3:// root), on the real S3 server fixture: the same samples as over the same tables in a local
folder, an incremental step published into the bucket read alone at the next refresh, an
unreadable object quarantined in the bucket, and ``lagscope results-exporter --results s3://…``
serving them."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.results_synthetic import status, write_synthetic
from helpers.s3server import S3Server
from prometheus_client import CollectorRegistry

from lagscope import results
from lagscope.analytics.io import Checkpoint, publish_incremental, stage_objects, write_checkpoint
from lagscope.analytics.results_metrics import ResultsCollector
from lagscope.lake import QUARANTINE_DIR, QuarantineCounts
from lagscope.schema import RESULT_TABLES
from lagscope.storage import Store

NOW = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/results")


def _registry(root: object) -> tuple[CollectorRegistry, ResultsCollector]:
    registry = CollectorRegistry()
    collector = ResultsCollector(root, refresh_s=0)  # type: ignore[arg-type]
    registry.register(collector)
    return registry, collector


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The findings' samples (not the exporter's own file times and counters)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in registry.collect()
            for s in family.samples if not s.name.startswith("lagscope_results_")}


def test_the_same_samples_as_from_a_local_folder(store: Store, tmp_path: Path) -> None:
    write_synthetic(tmp_path / "results", "prod", "orders-svc", "orders", NOW)
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    remote, _ = _registry(store)
    got = _samples(remote)
    assert got == _samples(_registry(tmp_path / "results")[0])
    cg = {"cluster": "prod", "group": "orders-svc"}
    assert remote.get_sample_value("lagscope_group_status", {**cg, "status": "STALL"}) == 1
    assert remote.get_sample_value("lagscope_anomalies_open", {**cg, "kind": "stall", "severity": "critical"}) == 1
    assert remote.get_sample_value("lagscope_rebalances_total", {**cg, "cause": "session_timeout"}) == 1
    # the tables' newest object time, from the store's listing
    updated = remote.get_sample_value("lagscope_results_last_update_timestamp_seconds", {"table": "status"})
    assert updated is not None
    assert abs(updated - dt.datetime.now(dt.UTC).timestamp()) < 600
    assert remote.get_sample_value("lagscope_results_read_errors_total") == 0


def _status_step(store: Store, start: dt.datetime, to: dt.datetime, value: str) -> None:
    """One incremental step's status file published into the bucket and its checkpoint moved."""
    schema = RESULT_TABLES["status"].schema.append(pa.field("cluster", pa.string())).append(
        pa.field("date", pa.string()))
    rows = pa.Table.from_pylist([{**status("orders-svc", to - dt.timedelta(seconds=1), value, value),
                                  "cluster": "prod", "date": start.date().isoformat()}], schema=schema)
    stage_objects(store, f".staging/status-{value}", "status", rows)
    publish_incremental(store, {"status": Path(f".staging/status-{value}")}, tag=results.inc_tag(start, to))
    write_checkpoint(store, Checkpoint(watermark=to.isoformat(), version="v-1", clusters=["prod"]))


def test_a_step_published_into_the_bucket_is_read_alone_at_the_next_refresh(store: Store) -> None:
    # yesterday's tables (a step's files sort after the files before them in a folder: the
    # synthetic part- files of today would make its folder read again whole, as locally)
    write_synthetic(store, "prod", "orders-svc", "orders", NOW - dt.timedelta(days=1))  # type: ignore[arg-type]
    reg, collector = _registry(store)
    cg = {"cluster": "prod", "group": "orders-svc"}
    assert reg.get_sample_value("lagscope_group_status", {**cg, "status": "STALL"}) == 1
    read_before = reg.get_sample_value("lagscope_results_files_read_total")
    assert read_before is not None
    _status_step(store, NOW - dt.timedelta(minutes=1), NOW, "OK")
    # the refresh after it reads the new objects only: the step's one file
    assert collector.reading().files_read["status"] == [Path(store.path(
        f"status/cluster=prod/date={NOW.date().isoformat()}/{results.inc_tag(NOW - dt.timedelta(minutes=1), NOW)}"
        "-00000.parquet"))]
    assert reg.get_sample_value("lagscope_group_status", {**cg, "status": "OK"}) == 1
    assert reg.get_sample_value("lagscope_group_status", {**cg, "status": "STALL"}) == 0
    assert collector.reading().files_read["status"] == []  # nothing new since


def test_an_unreadable_object_is_quarantined_in_the_bucket(store: Store, quarantined: QuarantineCounts) -> None:
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    [url] = results.object_files(store, "status")
    rel = url.removeprefix(store.url + "/")
    store.put(rel, b"this is not parquet\n" * 20)  # a file that went bad: under its published name
    reg, _ = _registry(store)
    # the table reads without it (no status row is left), the others are exported
    assert reg.get_sample_value("lagscope_group_status", {"cluster": "prod", "group": "orders-svc",
                                                          "status": "STALL"}) is None
    assert reg.get_sample_value("lagscope_rebalances_total", {"cluster": "prod", "group": "orders-svc",
                                                              "cause": "join"}) == 1
    assert quarantined.snapshot() == {("prod", "status"): 1}
    assert store.get(f"status/{QUARANTINE_DIR}/{rel.removeprefix('status/')}") == b"this is not parquet\n" * 20
    assert results.object_files(store, "status") == []


def test_results_exporter_command_serves_a_bucket(store: Store, s3_server: S3Server, tmp_path: Path) -> None:
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"storage:\n  endpoint: {s3_server.endpoint}\n  path_style: true\n  credentials: env\n")
    env = {**os.environ, **{k: v for k, v in s3_server.credentials.items() if v}}
    proc = subprocess.Popen([sys.executable, "-m", "lagscope.cli", "results-exporter", "--results", store.url,
                             "--config", str(config), "--port", "0"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert m, line + (proc.stderr.read() if proc.stderr and proc.poll() is not None else "")
        body = urllib.request.urlopen(m.group(0), timeout=10).read().decode()
        assert 'lagscope_group_status{cluster="prod",group="orders-svc",status="STALL"} 1.0' in body
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert s3_server.credentials["AWS_SECRET_ACCESS_KEY"] not in line + err
