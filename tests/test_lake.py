"""The lake writer: schema enforcement, Hive layout, atomic files, round trip."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lagscope import lake
from lagscope.errors import LakeError
from lagscope.schema import OFFSETS, SCHEMA_VERSION, TABLES

T0 = dt.datetime(2026, 11, 22, 23, 59, 59, tzinfo=dt.UTC)


def _row(partition: int, committed: int | None) -> dict:
    return {"sweep_ts": T0, "group_id": "g", "topic": "t", "partition": partition,
            "committed_offset": committed, "log_start_offset": 0, "log_end_offset": 10,
            "last_stable_offset": 10, "group_state": "Stable",
            "lag": None if committed is None else 10 - committed}


def test_round_trip_with_partitions_and_version(tmp_path: Path) -> None:
    path = lake.write_rows(tmp_path, OFFSETS, "prod", [_row(0, 4), _row(1, None)])
    assert path is not None
    assert path.parent == tmp_path / "offsets" / "cluster=prod" / "date=2026-11-22"
    meta = pq.read_schema(path).metadata
    assert meta[b"lagscope.schema_version"] == str(SCHEMA_VERSION).encode()
    lake.write_rows(tmp_path, OFFSETS, "dev", [_row(0, 9)])
    got = lake.read_table(tmp_path, "offsets", cluster="prod").sort_by("partition").to_pylist()
    assert [(r["partition"], r["committed_offset"], r["lag"], r["cluster"]) for r in got] == [
        (0, 4, 6, "prod"), (1, None, None, "prod")]
    assert lake.read_table(tmp_path, "offsets").num_rows == 3


def test_rows_that_do_not_fit_the_schema_are_refused(tmp_path: Path) -> None:
    bad = _row(0, 1)
    bad["partition"] = "zero"
    with pytest.raises(Exception):  # noqa: B017 - pyarrow's own conversion error
        lake.write_rows(tmp_path, OFFSETS, "prod", [bad])
    assert not list(tmp_path.rglob("*.parquet"))


def test_no_temporary_file_survives_a_failed_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(lake.pq, "write_table", boom)
    with pytest.raises(OSError, match="disk full"):
        lake.write_rows(tmp_path, OFFSETS, "prod", [_row(0, 1)])
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_hidden_temporary_files_are_not_read(tmp_path: Path) -> None:
    lake.write_rows(tmp_path, OFFSETS, "prod", [_row(0, 1)])
    folder = lake.partition_dir(tmp_path, "offsets", "prod", T0.date())
    (folder / ".tmp-half.parquet").write_bytes(b"PAR1 half a file")
    assert lake.read_table(tmp_path, "offsets").num_rows == 1


def test_missing_table_reads_empty_and_unknown_table_is_an_error(tmp_path: Path) -> None:
    assert lake.read_table(tmp_path, "members").num_rows == 0
    with pytest.raises(LakeError, match="unknown lake table"):
        lake.read_table(tmp_path, "nope")
    with pytest.raises(LakeError, match="invalid cluster"):
        lake.partition_dir(tmp_path, "offsets", "../x", T0.date())


@pytest.mark.parametrize("name", sorted(TABLES))
def test_every_field_is_documented(name: str) -> None:
    docs = {f.name: (f.metadata or {}).get(b"doc", b"").decode() for f in TABLES[name].schema}
    assert all(docs.values()), [k for k, v in docs.items() if not v]
