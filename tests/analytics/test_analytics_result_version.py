"""Result files carry the schema version in their Parquet metadata, like the lake's; readers
reject a file of a newer major version with one clear error instead of misreading it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lagscope import lake
from lagscope.analytics.io import commit_arrow, spark_arrow_schema
from lagscope.analytics.results_metrics import read_results
from lagscope.errors import LakeError
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
    assert commit_arrow(root, "status", data, mode="batch", tag="batch-x") >= 2
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
                 for r in lake.read_table(tmp_path, "status").to_pylist())
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
def test_readers_reject_a_newer_major_version(tmp_path: Path, version: str | None,
                                              accepted: bool) -> None:
    files = _write(tmp_path)
    _set_version(files[-1], version)
    if accepted:
        assert lake.read_table(tmp_path, "status").num_rows == len(_status_rows())
        reading, errors = read_results(tmp_path, ["status"])
        assert errors == 0
        assert len(reading.rows["status"]) == len(_status_rows())
        return
    with pytest.raises(LakeError) as err:
        lake.read_table(tmp_path, "status")
    message = str(err.value)
    assert "\n" not in message
    assert str(files[-1]) in message
    assert f"schema version {version} (table status), newer than the {SCHEMA_VERSION}" in message
    assert "upgrade lagscope" in message
    # the other cluster's partition (not that file) still reads
    other = "a" if "cluster=b" in str(files[-1]) else "b"
    assert lake.read_table(tmp_path, "status", cluster=other).num_rows == len(_status_rows()) // 2
    # the results exporter counts a read error and keeps its previous reading instead of misreading
    previous, _ = read_results(tmp_path, ["lag_trends"])
    reading, errors = read_results(tmp_path, ["status"], previous=previous)
    assert errors == 1
    assert reading.rows["status"] == []


def test_an_unreadable_version_is_an_error(tmp_path: Path) -> None:
    files = _write(tmp_path)
    _set_version(files[0], "v-two")
    with pytest.raises(LakeError, match=r"unreadable lagscope\.schema_version 'v-two'"):
        lake.read_table(tmp_path, "status")
