"""Retention of the result tables on an object store (the real S3 server fixture): the same
partitions go as from the same results on local disk and a reader reads the same current rows
after it; during a removal a reader never finds an older state of an anomaly than its newest (the
files go oldest first); `lagscope lake prune` prunes bucket results."""

from __future__ import annotations

import datetime as dt
import functools
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.results_synthetic import anomaly, write_synthetic
from helpers.s3server import S3Server
from typer.testing import CliRunner

from lagscope import results
from lagscope.cli import app
from lagscope.retention import expired_through, prune
from lagscope.schema import ANOMALIES, RESULT_TABLES
from lagscope.storage import Store

OLD = dt.datetime(2025, 1, 10, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/results")  # type: ignore[no-any-return]


def _current(root: Path | Store) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for table in sorted(RESULT_TABLES):
        rows = (results.current_events(root, table) if table in results.EVENT_IDENTITY
                else results.read(root, table).to_pylist())
        out[table] = sorted(repr(sorted(r.items())) for r in rows)
    return out


def test_the_same_result_partitions_go_as_on_local_disk(store: Store, tmp_path: Path) -> None:
    # objects and files are written now; the prune's "now" is 40 days on (30 days kept): the old
    # results' days go, those dated after the horizon stay
    now = dt.datetime.now(dt.UTC) + dt.timedelta(days=40)
    recent = now - dt.timedelta(days=5)
    local = tmp_path / "results"
    for root in (local, store):
        write_synthetic(root, "prod", "orders-svc", "orders", OLD)  # type: ignore[arg-type]
        write_synthetic(root, "prod", "orders-svc", "orders", recent)  # type: ignore[arg-type]
    before = _current(store)
    assert before == _current(local)
    assert any(OLD.date().isoformat() in r for r in before["anomalies"])

    on_s3 = prune(store, RESULT_TABLES, days=30, now=now, label="results")
    on_disk = prune(local, RESULT_TABLES, days=30, now=now, label="results")
    removed = sorted((r.table, r.cluster, r.date) for r in on_disk.removed)
    assert removed  # every table had an old day
    assert {t for t, _, _ in removed} == set(RESULT_TABLES)
    assert sorted((r.table, r.cluster, r.date) for r in on_s3.removed) == removed
    after = _current(store)
    assert after == _current(local)
    assert all(OLD.date().isoformat() not in r for rows in after.values() for r in rows)
    assert after["anomalies"]  # the recent results are all there
    for table in RESULT_TABLES:
        assert expired_through(store, table) == expired_through(local, table)
    assert not [f for f in store.folders("anomalies/cluster=prod") if f == f"date={OLD.date()}"]


def _put_rows(store: Store, rel: str, rows: list[dict[str, Any]]) -> None:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=ANOMALIES.schema), sink)
    store.put(rel, sink.getvalue().to_pybytes())


def test_a_reader_during_the_removal_never_sees_an_older_state(store: Store,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # one stall, open at the first step and closed at a later one, both in its first day's partition;
    # the later file's name sorts first (a name says nothing of when it was written)
    folder = f"anomalies/cluster=prod/date={OLD.date()}"
    opened = anomaly("prod", "g", "t", "stall", OLD, None, "critical", as_of=OLD + dt.timedelta(minutes=1))
    closed = {**opened, "end_ts": OLD + dt.timedelta(minutes=9), "as_of_ts": OLD + dt.timedelta(minutes=10)}
    _put_rows(store, f"{folder}/zz-first.parquet", [opened])
    time.sleep(1.1)  # LastModified has a resolution of a second
    _put_rows(store, f"{folder}/aa-later.parquet", [closed])
    assert [r["end_ts"] for r in results.current_events(store, "anomalies")] == [closed["end_ts"]]

    seen: list[list[Any]] = []
    real_delete = Store.delete

    def delete(self: Store, rel: str) -> None:
        real_delete(self, rel)
        seen.append([r["end_ts"] for r in results.current_events(store, "anomalies")])

    monkeypatch.setattr(Store, "delete", delete)
    done = prune(store, ["anomalies"], days=30, now=dt.datetime.now(dt.UTC) + dt.timedelta(days=40))
    assert [r.date for r in done.removed] == [OLD.date()]
    assert seen == [[closed["end_ts"]], []]  # the older file first: never the open state again


def test_lake_prune_prunes_bucket_results(s3_server: S3Server, s3_prefix: str, store: Store, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    write_synthetic(store, "prod", "orders-svc", "orders", OLD)  # type: ignore[arg-type]
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({
        "collector": {"lake": s3_server.url(f"{s3_prefix}/lake"), "retention": 3}, "analytics": {"retention": 30},
        "storage": {"endpoint": s3_server.endpoint, "credentials": "env"}}))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=40)  # the objects' LastModified is now
    monkeypatch.setattr("lagscope.retention.prune", functools.partial(prune, now=later))
    got = CliRunner().invoke(app, ["lake", "prune", "--config", str(config)])
    assert got.exit_code == 0, got.output
    assert f"results {store.url}: removed 5 partition(s) older than 30 days" in got.output
    assert s3_server.credentials["AWS_SECRET_ACCESS_KEY"] not in got.output
    assert all(results.read(store, t).num_rows == 0 for t in RESULT_TABLES)
