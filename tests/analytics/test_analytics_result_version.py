"""Result files carry the schema version in their Parquet metadata, like the lake's; readers
move a file of a newer major version into quarantine with one clear warning instead of
misreading it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from prometheus_client import CollectorRegistry

from lagscope import lake, results
from lagscope.analytics.io import new_staging, publish_batch, spark_arrow_schema, stage_arrow
from lagscope.analytics.results_metrics import ResultsCollector
from lagscope.schema import SCHEMA_VERSION, STATUS

T = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)


def _status_rows() -> list[dict[str, Any]]:
    return [
        {"eval_ts": T + dt.timedelta(minutes=i), "group_id": "g", "topic": "t", "partition": p,
         "burrow_status": "OK", "status": "OK", "reason": "caught up", "lag": i, "lag_seconds": 0.5 * i,
         "cluster": c, "date": "2026-11-20"}
        for i in range(3) for p in (0, 1) for c in ("a", "b")
    ]


def _write(root: Path) -> list[Path]:
    data = pa.Table.from_pylist(_status_rows(), schema=spark_arrow_schema("status"))
    staging = new_staging(root, "status")
    stage_arrow(staging, "status", data)
    assert publish_batch(root, {"status": staging}, tag=results.batch_tag(T.date(), T.date()))["status"] >= 2
    files = sorted((root / "status").rglob("*.parquet"))
    assert {f.parent.parent.name for f in files} == {"cluster=a", "cluster=b"}
    assert not (root / ".staging").exists() or not any((root / ".staging").rglob("*.parquet"))
    return files


def _set_version(path: Path, version: str | None) -> None:
    data = pq.read_table(path, partitioning=None)
    meta = dict(data.schema.metadata or {})
    if version is None:
        meta.pop(lake.SCHEMA_VERSION_KEY, None)
    else:
        meta[lake.SCHEMA_VERSION_KEY] = version.encode()
    pq.write_table(data.replace_schema_metadata(meta), path)


def test_result_files_carry_the_version_and_read_back_unchanged(tmp_path: Path) -> None:
    files = _write(tmp_path)
    for f in files:
        meta = pq.read_metadata(f).metadata
        assert meta[b"lagscope.schema_version"] == str(SCHEMA_VERSION).encode()
        assert meta[b"lagscope.table"] == b"status"
        assert pq.read_schema(f).field("eval_ts").type == STATUS.schema.field("eval_ts").type
    # the same rows through pyarrow (the lake reader) and through DuckDB
    got = sorted((r["cluster"], r["partition"], r["eval_ts"], r["lag"])
                 for r in results.read(tmp_path, "status").to_pylist())
    want = sorted((r["cluster"], r["partition"], r["eval_ts"], r["lag"]) for r in _status_rows())
    assert got == want
    back = duckdb.sql(f"SELECT * FROM read_parquet('{tmp_path}/status/*/*/*.parquet', hive_partitioning=1)")
    assert len(back.fetchall()) == len(want)
    assert set(back.columns) >= {"eval_ts", "lag_seconds", "cluster", "date"}


# (version written into one file's metadata, whether the readers accept the table)
VERSIONS = [
    # this lagscope's own version
    (str(SCHEMA_VERSION), True),
    # a newer minor revision of the same major version: compatible
    (f"{SCHEMA_VERSION}.3", True),
    # no version key (a file from before the key, or another tool): read as before
    (None, True),
    # the next major version: columns may mean something else
    (str(SCHEMA_VERSION + 1), False),
    # a far newer major version with a minor
    (f"{SCHEMA_VERSION + 7}.1", False),
]


@pytest.mark.parametrize(("version", "accepted"), VERSIONS)
def test_readers_quarantine_a_newer_major_version(tmp_path: Path, version: str | None, accepted: bool,
                                                  caplog: pytest.LogCaptureFixture,
                                                  quarantined: lake.QuarantineCounts) -> None:
    files = _write(tmp_path)
    _set_version(files[-1], version)
    registry = CollectorRegistry()
    registry.register(ResultsCollector(tmp_path))
    registry.register(quarantined)
    if accepted:
        assert results.read(tmp_path, "status").num_rows == len(_status_rows())
        assert registry.get_sample_value("lagscope_results_read_errors_total") == 0
        assert registry.get_sample_value("lagscope_results_files_read_total") == len(files)
        assert quarantined.snapshot() == {}
        return
    # the file is moved aside rather than misread; the other cluster's file still reads
    other = "a" if "cluster=b" in str(files[-1]) else "b"
    assert {r["cluster"] for r in results.read(tmp_path, "status").to_pylist()} == {other}
    assert not files[-1].exists()
    moved = tmp_path / "status" / "_quarantine" / files[-1].relative_to(tmp_path / "status")
    assert moved.exists()
    lines = [r.getMessage() for r in caplog.records if r.name == "lagscope.lake"]
    assert len(lines) == 1
    assert str(files[-1]) in lines[0]
    assert str(moved) in lines[0]
    assert f"schema version {version} (table status), newer than the {SCHEMA_VERSION}" in lines[0]
    assert "upgrade lagscope" in lines[0]
    # the results exporter reads the rest: no read error, the file not among those read
    assert registry.get_sample_value("lagscope_results_read_errors_total") == 0
    assert registry.get_sample_value("lagscope_results_files_read_total") == len(files) - 1
    assert registry.get_sample_value(lake.QUARANTINE_METRIC, {"cluster": files[-1].parent.parent.name[8:],
                                                              "table": "status"}) == 1


def test_an_unreadable_version_is_quarantined(tmp_path: Path, quarantined: lake.QuarantineCounts) -> None:
    files = _write(tmp_path)
    _set_version(files[0], "v-two")
    assert results.read(tmp_path, "status").num_rows == len(_status_rows()) // 2
    assert not files[0].exists()
    assert quarantined.snapshot() == {(files[0].parent.parent.name[8:], "status"): 1}


def test_an_anomalies_file_without_cause_still_reads(tmp_path: Path) -> None:
    # a file the analytics wrote before the ``cause`` column, beside one written now: the reader
    # gives the old rows a null cause, the new ones theirs; the results exporter reads both
    row = {"group_id": "g", "topic": "t", "partition": 0, "kind": "skip", "start_ts": T, "end_ts": T,
           "severity": "critical", "magnitude": 5.0, "unit": "messages", "detail": "x", "as_of_ts": T,
           "cluster": "a", "date": "2026-11-20"}
    new = pa.Table.from_pylist([{**row, "key": "skip|a|g|t|0|1", "cause": "seek"}],
                               schema=spark_arrow_schema("anomalies"))
    old_schema = pa.schema([f for f in spark_arrow_schema("anomalies") if f.name != "cause"])
    old = pa.Table.from_pylist([{**row, "key": "skip|a|g|t|0|2", "start_ts": T + dt.timedelta(seconds=1)}],
                               schema=old_schema)
    staging = new_staging(tmp_path, "anomalies")
    stage_arrow(staging, "anomalies", new)
    publish_batch(tmp_path, {"anomalies": staging}, tag=results.batch_tag(T.date(), T.date()))
    folder = tmp_path / "anomalies" / "cluster=a" / "date=2026-11-20"
    # the old file: no cause column, the version key of its time
    meta = {b"lagscope.schema_version": str(SCHEMA_VERSION).encode(), b"lagscope.table": b"anomalies"}
    pq.write_table(old.drop_columns(["cluster", "date"]).replace_schema_metadata(meta), folder / "old.parquet")
    assert "cause" not in pq.read_schema(folder / "old.parquet").names
    got = sorted((r["key"], r["cause"]) for r in results.read(tmp_path, "anomalies").to_pylist())
    assert got == [("skip|a|g|t|0|1", "seek"), ("skip|a|g|t|0|2", None)]
    registry = CollectorRegistry()
    registry.register(ResultsCollector(tmp_path))
    assert registry.get_sample_value("lagscope_results_read_errors_total") == 0
    assert registry.get_sample_value("lagscope_anomalies_total", {"cluster": "a", "group": "g", "kind": "skip",
                                                                  "severity": "critical"}) == 2
