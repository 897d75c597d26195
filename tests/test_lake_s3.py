"""The lake on an object store (lagscope/lake.py, s3://): files written whole then committed by a
marker, only committed files read, compaction's merged sources left out, on the real S3 server
fixture (tests/helpers/s3server.py)."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.bad_files import KINDS, quarantine_lines, spoil
from helpers.s3server import S3Server

from lagscope import lake
from lagscope.errors import LakeError
from lagscope.schema import OFFSETS, SCHEMA_VERSION
from lagscope.storage import Store

T0 = dt.datetime(2026, 11, 22, 23, 59, 59, tzinfo=dt.UTC)


def _row(partition: int, committed: int, *, ts: dt.datetime = T0) -> dict:
    return {"sweep_ts": ts, "group_id": "g", "topic": "t", "partition": partition,
            "committed_offset": committed, "log_start_offset": 0, "log_end_offset": 10,
            "last_stable_offset": 10, "group_state": "Stable", "lag": 10 - committed}


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/lake")


DAY = T0.date()


def _folder(day: dt.date = DAY, cluster: str = "prod") -> str:
    return f"offsets/cluster={cluster}/date={day.isoformat()}"


def test_round_trip_through_the_server(store: Store) -> None:
    url = lake.write_rows(store, OFFSETS, "prod", [_row(0, 4), _row(1, 7)])
    assert isinstance(url, str)
    assert url.startswith(f"{store.url}/{_folder()}/part-")
    name = url.rsplit("/", 1)[1]
    # the data object and, beside it, its commit marker
    assert store.names(_folder()) == sorted([name, f"{lake.COMMIT_MARKER_PREFIX}{name}"])
    meta = pq.read_schema(store.path(f"{_folder()}/{name}"), filesystem=store.filesystem).metadata
    assert meta[b"lagscope.schema_version"] == str(SCHEMA_VERSION).encode()
    lake.write_rows(store, OFFSETS, "dev", [_row(0, 9)])
    got = lake.read_table(store, "offsets", cluster="prod").sort_by("partition").to_pylist()
    assert [(r["partition"], r["committed_offset"], r["lag"], r["cluster"], r["date"]) for r in got] == [
        (0, 4, 6, "prod", "2026-11-22"), (1, 7, 3, "prod", "2026-11-22")]
    assert lake.read_table(store, "offsets").num_rows == 3
    assert lake.object_files(store, "offsets", cluster="dev") == [
        u for u in lake.object_files(store, "offsets") if "/cluster=dev/" in u]


def test_an_object_without_its_commit_marker_is_never_read(store: Store) -> None:
    lake.write_rows(store, OFFSETS, "prod", [_row(0, 1)])
    # a writer killed after its data object, before its marker: a whole, valid file nobody lists
    orphan = pa.Table.from_pylist([_row(5, 5)], schema=OFFSETS.schema)
    sink = pa.BufferOutputStream()
    pq.write_table(orphan, sink)
    store.put(f"{_folder()}/part-orphan.parquet", sink.getvalue().to_pybytes())
    # and half an object under a final-looking name, also without a marker
    store.put(f"{_folder()}/part-half.parquet", b"PAR1 half a file")
    assert [r["partition"] for r in lake.read_table(store, "offsets").to_pylist()] == [0]
    assert len(lake.object_files(store, "offsets")) == 1


def test_a_marker_without_its_object_is_not_listed(store: Store) -> None:
    # a file removed marker first, then object: in between, and after a crash there, never listed
    store.put(f"{_folder()}/{lake.COMMIT_MARKER_PREFIX}part-gone.parquet", b"{}")
    assert lake.object_files(store, "offsets") == []
    assert lake.read_table(store, "offsets").num_rows == 0


def test_compacted_sources_are_left_out(store: Store) -> None:
    first = lake.write_rows(store, OFFSETS, "prod", [_row(0, 1)])
    second = lake.write_rows(store, OFFSETS, "prod", [_row(1, 2)])
    assert isinstance(first, str)
    assert isinstance(second, str)
    sources = [first.rsplit("/", 1)[1], second.rsplit("/", 1)[1]]
    merged = pa.Table.from_pylist([_row(0, 1), _row(1, 2)], schema=OFFSETS.schema)
    merged = merged.replace_schema_metadata({lake.COMPACTED_FROM_KEY: json.dumps(sources).encode()})
    sink = pa.BufferOutputStream()
    pq.write_table(merged, sink)
    name = f"{lake.COMPACT_PREFIX}1.parquet"  # as compaction names and commits its merged file
    store.put(f"{_folder()}/{name}", sink.getvalue().to_pybytes())
    assert lake.object_files(store, "offsets") == sorted([first, second])  # not committed yet: the sources count
    store.put(f"{_folder()}/{lake.COMMIT_MARKER_PREFIX}{name}", b"{}")
    assert lake.object_files(store, "offsets") == [store.url_of(f"{_folder()}/{name}")]
    assert sorted(r["partition"] for r in lake.read_table(store, "offsets").to_pylist()) == [0, 1]


def test_reads_are_pruned_to_the_dates_asked_for(store: Store) -> None:
    for day in range(3):
        lake.write_rows(store, OFFSETS, "prod", [_row(day, day, ts=T0 + dt.timedelta(days=day))])
    since = (T0 + dt.timedelta(days=1)).date()
    got = lake.read_table(store, "offsets", since=since, until=since)
    assert got.column("partition").to_pylist() == [1]
    assert [u.split("/date=")[1][:10] for u in lake.object_files(store, "offsets", since=since)] == [
        "2026-11-23", "2026-11-24"]


def test_a_missing_table_reads_empty_and_a_failed_write_says_where(s3_server: S3Server, store: Store) -> None:
    assert lake.read_table(store, "offsets").num_rows == 0
    nowhere = s3_server.store("x").__class__(  # a bucket the server does not have
        "s3://no-such-bucket/lake", store.filesystem, "no-such-bucket/lake", True)
    with pytest.raises(LakeError, match="s3://no-such-bucket/lake/offsets/cluster=prod"):
        lake.write_rows(nowhere, OFFSETS, "prod", [_row(0, 1)])


@pytest.mark.parametrize("kind", KINDS)
def test_an_unreadable_committed_file_is_quarantined_and_the_rest_reads(
        store: Store, tmp_path: Path, kind: str, quarantined: lake.QuarantineCounts,
        caplog: pytest.LogCaptureFixture) -> None:
    lake.write_rows(store, OFFSETS, "prod", [_row(0, 1)])
    local = lake.write_rows(tmp_path, OFFSETS, "prod", [_row(1, 2)])
    assert isinstance(local, Path)
    spoil(local, kind)
    name = local.name
    store.put(f"{_folder()}/{name}", local.read_bytes())  # committed as the collector commits a file
    store.put(f"{_folder()}/{lake.COMMIT_MARKER_PREFIX}{name}", b"{}")
    with caplog.at_level(logging.WARNING, logger="lagscope.lake"):
        got = lake.read_table(store, "offsets")
    assert got.column("partition").to_pylist() == [0]
    assert quarantined.snapshot() == {("prod", "offsets"): 1}
    [line] = quarantine_lines(caplog)
    assert f"quarantined {store.url_of(f'{_folder()}/{name}')} (table offsets)" in line
    # moved: kept under the table's _quarantine folder, gone (marker and object) from its own
    assert store.get(f"offsets/{lake.QUARANTINE_DIR}/cluster=prod/date={DAY.isoformat()}/{name}") == local.read_bytes()
    assert name not in store.names(_folder())
    assert f"{lake.COMMIT_MARKER_PREFIX}{name}" not in store.names(_folder())
    assert lake.read_table(store, "offsets").num_rows == 1
    assert quarantined.snapshot() == {("prod", "offsets"): 1}  # once
