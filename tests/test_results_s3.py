"""The result tables read from an object store (lagscope/results.py on s3://): the same rows as
from a local folder, and the analytics' publish protocol (checkpoint watermark, batch marker)
honoured there, on the real S3 server fixture (tests/helpers/s3server.py)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from helpers.results_synthetic import write_synthetic
from helpers.s3server import S3Server

from lagscope import results
from lagscope.errors import LakeError
from lagscope.schema import RESULT_TABLES
from lagscope.storage import Store

NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/results")


def _rows(table: object) -> list[str]:
    return sorted(repr(sorted(r.items())) for r in table.to_pylist())  # type: ignore[attr-defined]


@pytest.mark.parametrize("table", sorted(RESULT_TABLES))
def test_the_same_rows_as_from_a_local_folder(store: Store, tmp_path: Path, table: str) -> None:
    write_synthetic(tmp_path / "results", "prod", "orders-svc", "orders", NOW)
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    local = results.read(tmp_path / "results", table)
    remote = results.read(store, table)
    assert local.num_rows > 0
    assert remote.schema == local.schema
    assert _rows(remote) == _rows(local)
    since = NOW - dt.timedelta(minutes=3)
    assert _rows(results.read(store, table, group="orders-svc", since=since)) == _rows(
        results.read(tmp_path / "results", table, group="orders-svc", since=since))


def test_current_events_from_the_object_store(store: Store) -> None:
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    events = results.current_events(store, "rebalances")
    assert sorted(e["cause"] for e in events) == ["join", "leave", "session_timeout"]


def _copy_as(store: Store, table: str, name: str) -> str:
    """Put a copy of the table's one synthetic file beside it as ``name`` (whole, as the analytics
    put a step's file); returns its folder."""
    [url] = results.object_files(store, table)
    folder = url.removeprefix(store.url + "/").rsplit("/", 1)[0]
    src = url.rsplit("/", 1)[1]
    store.put(f"{folder}/{name}", store.get(f"{folder}/{src}"))
    return folder


def test_an_incremental_step_counts_once_the_checkpoint_passed_it(store: Store) -> None:
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    before = results.read(store, "lag_trends").num_rows
    to = NOW - dt.timedelta(minutes=1)
    tag = results.inc_tag(NOW - dt.timedelta(minutes=2), to)
    _copy_as(store, "lag_trends", f"{tag}-00000.parquet")
    # no checkpoint yet: the step is being published (or crashed and will be redone)
    assert results.read(store, "lag_trends").num_rows == before
    store.put("_state/checkpoint.json", json.dumps({"watermark": (to - dt.timedelta(seconds=1)).isoformat()}).encode())
    assert results.read(store, "lag_trends").num_rows == before  # the watermark is short of the step's end
    store.put("_state/checkpoint.json", json.dumps({"watermark": to.isoformat()}).encode())
    assert results.read(store, "lag_trends").num_rows == 2 * before
    assert len(results.object_files(store, "lag_trends")) == 2


def test_a_batch_is_hidden_while_moving_and_replaces_when_in(store: Store) -> None:
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    before = results.read(store, "status").num_rows
    tag = results.batch_tag(NOW.date(), NOW.date())
    results.write_publish_state(store, tag, "moving")
    folder = _copy_as(store, "status", f"{tag}-00000.parquet")
    assert results.read(store, "status").num_rows == before  # moving: its files hidden
    results.write_publish_state(store, tag, "replacing")
    # replacing: in the partition it wrote, only its files count (what it replaces is being deleted)
    assert [u.rsplit("/", 1)[1] for u in results.object_files(store, "status")] == [f"{tag}-00000.parquet"]
    assert results.read(store, "status").num_rows == before
    results.write_publish_state(store, tag, "done")
    assert results.read(store, "status").num_rows == 2 * before  # the old file was not deleted here
    state = results.read_publish_state(store)
    assert (state.seq, state.tag, state.phase) == (3, tag, "done")
    assert folder.startswith("status/cluster=prod/date=")


def test_a_provisional_step_is_read_unless_left_out(store: Store) -> None:
    # a provisional step's files, visible while the marker names them from the watermark on, are
    # read by default and left out with provisional=False (the group-status alerts' read)
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    before = results.read(store, "status").num_rows
    start, until = NOW - dt.timedelta(minutes=1), NOW
    store.put("_state/checkpoint.json", json.dumps({"watermark": start.isoformat()}).encode())
    _copy_as(store, "status", f"{results.pre_tag(start, until)}-00000.parquet")
    results.write_provisional_marker(store, start, until)
    assert results.read(store, "status").num_rows == 2 * before
    assert results.read(store, "status", provisional=False).num_rows == before


def test_an_unreadable_marker_is_an_error_naming_it(store: Store) -> None:
    store.put("_state/checkpoint.json", b"{not json")
    with pytest.raises(LakeError, match=r"s3://.*/_state/checkpoint\.json"):
        results.read(store, "status")


def test_an_absent_table_reads_empty_with_its_schema(store: Store) -> None:
    got = results.read(store, "anomalies")
    assert got.num_rows == 0
    assert got.schema.names[-2:] == ["cluster", "date"]
