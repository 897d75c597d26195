"""The collector's lake on an object store (s3://), on the real S3 server fixture: the sink and
the collector write committed files there, compaction merges closed hours into one committed
file with no row lost or twice at any step and removes what a killed writer or compactor left."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.s3server import S3Server

from lagscope import lake
from lagscope.collector.compaction import compact_lake, compact_object_folder
from lagscope.collector.loop import Collector, LakeSink
from lagscope.collector.model import Snapshot
from lagscope.config import Settings
from lagscope.errors import ConfigError, KafkaUnavailable
from lagscope.schema import OFFSETS, Table
from lagscope.storage import Store

DAY = dt.date(2026, 5, 1)
LATER = dt.datetime(2026, 5, 1, 15, 0, tzinfo=dt.UTC)  # the 12:00 bucket is closed then, and over an hour ago
FOLDER = f"offsets/cluster=c1/date={DAY.isoformat()}"
ORDER = [("sweep_ts", "ascending"), ("group_id", "ascending"), ("partition", "ascending")]


def _snapshot(i: int, groups: int = 3) -> Snapshot:
    ts = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=15 * i)
    offsets = [{"sweep_ts": ts, "group_id": f"g{g}", "topic": "t", "partition": p, "committed_offset": i,
                "log_end_offset": i + p, "lag": p} for g in range(groups) for p in range(2)]
    members = [{"sweep_ts": ts, "group_id": f"g{g}", "group_state": "Empty", "member_id": None}
               for g in range(groups)]
    sweep = {"sweep_ts": ts, "duration_ms": 1.0, "ok": True, "groups": groups, "partitions": len(offsets),
             "members": len(members), "group_errors": 0, "collector": "test"}
    return Snapshot("c1", sweep, offsets=offsets, members=members)


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/lake")


def _fill(store: Store, sweeps: int, start: int = 0) -> None:
    sink = LakeSink(store)  # type: ignore[arg-type]
    for i in range(start, start + sweeps):
        sink.update(_snapshot(i))


def _offsets(store: Store) -> pa.Table:
    return lake.read_table(store, "offsets").sort_by(ORDER)


def _stamped(name: str) -> str:
    """A source name stamped in the 12:00 bucket (the sink stamps its files with the wall clock)."""
    return f"part-20260501T12{name}"


def test_the_sink_writes_committed_files_to_the_store(store: Store) -> None:
    _fill(store, 2)
    for table, rows in (("offsets", 12), ("members", 6), ("sweeps", 2)):
        t = lake.read_table(store, table)
        assert t.num_rows == rows
        assert set(t.column("date").to_pylist()) == {DAY.isoformat()}
        assert len(lake.object_files(store, table)) == 2


def test_compaction_merges_closed_hours_without_losing_or_duplicating_rows(store: Store) -> None:
    for i in range(20):
        _put_committed(store, _stamped(f"{i:02d}00-{i:08x}.parquet"), [_row(i)])
    before = _offsets(store)
    assert before.num_rows == 20
    assert compact_lake(store, now=dt.datetime(2026, 5, 1, 13, 1, tzinfo=dt.UTC)).files_in == 0  # still open
    result = compact_lake(store, now=LATER)
    assert (result.buckets, result.files_in, result.files_out) == (1, 20, 1)
    names = store.names(FOLDER)
    [compacted] = [n for n in names if n.startswith(lake.COMPACT_PREFIX)]
    # the sources and their markers are gone
    assert names == sorted([compacted, f"{lake.COMMIT_MARKER_PREFIX}{compacted}"])
    assert _offsets(store).to_pylist() == before.to_pylist()
    assert compact_lake(store, now=LATER).files_in == 0  # a compacted file is not compacted again


def _put_committed(store: Store, name: str, rows: list[dict]) -> None:
    table = pa.Table.from_pylist(rows, schema=_schema())
    sink = pa.BufferOutputStream()
    pq.write_table(table.replace_schema_metadata(lake.file_metadata(_table())), sink)
    store.put(f"{FOLDER}/{name}", sink.getvalue().to_pybytes())
    store.put(f"{FOLDER}/{lake.COMMIT_MARKER_PREFIX}{name}", b"{}")


def _table() -> Table:
    return OFFSETS


def _schema() -> pa.Schema:
    return OFFSETS.schema


def _row(i: int) -> dict:
    return {"sweep_ts": dt.datetime(2026, 5, 1, 12, 0, i, tzinfo=dt.UTC), "group_id": "g", "topic": "t",
            "partition": 0, "committed_offset": i, "log_end_offset": 10, "lag": 10 - i}


def test_a_crash_between_commit_and_delete_leaves_no_duplicates_and_is_cleaned_up(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        _put_committed(store, _stamped(f"0{i}00-0000000{i}.parquet"), [_row(i)])
    # the compactor dies in step 3, before deleting any source
    monkeypatch.setattr(store.__class__, "delete", lambda self, rel: (_ for _ in ()).throw(OSError("killed")))
    with pytest.raises(OSError, match="killed"):
        compact_object_folder(store, FOLDER, now=LATER)
    monkeypatch.undo()
    assert sorted(_offsets(store).column("committed_offset").to_pylist()) == [0, 1, 2]  # no duplicate
    again = compact_object_folder(store, FOLDER, now=LATER)
    assert again.orphans_removed == 3
    assert again.files_in == 0
    assert [n for n in store.names(FOLDER) if not n.startswith("_")] == [next(
        n for n in store.names(FOLDER) if n.startswith(lake.COMPACT_PREFIX))]  # the merged file alone
    assert sorted(_offsets(store).column("committed_offset").to_pylist()) == [0, 1, 2]


def test_what_a_killed_writer_left_is_removed_an_hour_after_its_bucket_closed(store: Store) -> None:
    _put_committed(store, _stamped("0000-00000001.parquet"), [_row(1)])
    store.put(f"{FOLDER}/{_stamped('0100-00000002.parquet')}", b"PAR1 half")  # killed before its marker
    store.put(f"{FOLDER}/{lake.COMMIT_MARKER_PREFIX}{_stamped('0200-00000003.parquet')}", b"{}")  # object gone
    soon = compact_object_folder(store, FOLDER, now=dt.datetime(2026, 5, 1, 13, 30, tzinfo=dt.UTC))
    assert soon.orphans_removed == 1  # the marker without its object; the uncommitted object is kept yet
    assert _stamped("0100-00000002.parquet") in store.names(FOLDER)
    later = compact_object_folder(store, FOLDER, now=LATER)
    assert later.orphans_removed == 1
    assert store.names(FOLDER) == sorted([_stamped("0000-00000001.parquet"),
                                          f"{lake.COMMIT_MARKER_PREFIX}{_stamped('0000-00000001.parquet')}"])
    assert _offsets(store).column("committed_offset").to_pylist() == [1]


class _DeadClient:
    """A client whose cluster never answers (its sweeps are failed sweeps: rows all the same)."""

    request_timeout_ms = 100
    connected = False

    def __init__(self, *_: Any) -> None:
        self.closed = False

    def connect(self) -> None:
        raise KafkaUnavailable("c1: cannot bootstrap from h:1: refused")

    def close(self) -> None:
        self.closed = True


def _s3_settings(s3_server: S3Server, lake_url: str, **cluster: Any) -> Settings:
    return Settings(clusters=[{"name": "c1", "bootstrap_servers": "h:1", **cluster}],  # type: ignore[list-item]
                    collector={"interval_s": 0.05, "lake": lake_url},  # type: ignore[arg-type]
                    storage={"endpoint": s3_server.endpoint, "credentials": "env"},  # type: ignore[arg-type]
                    metrics={"enabled": False})  # type: ignore[arg-type]


def test_the_collector_writes_its_sweeps_to_the_lake_url_of_its_settings(
        s3_server: S3Server, s3_prefix: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    url = s3_server.url(f"{s3_prefix}/lake")
    collector = Collector(_s3_settings(s3_server, url), client_factory=_DeadClient)
    assert isinstance(collector.lake_root, Store)
    with caplog.at_level(logging.WARNING):
        collector.run(threading.Event(), max_sweeps=3)
    sweeps = lake.read_table(collector.lake_root, "sweeps").to_pylist()
    assert len(sweeps) == 3
    assert all(s["ok"] is False and "cannot bootstrap" in s["error"] for s in sweeps)
    assert len(lake.object_files(collector.lake_root, "sweeps")) == 3
    # retention ran on the bucket (lagscope.retention): nothing expired, so nothing removed, no
    # record written and nothing beside the lake
    assert not [r for r in caplog.records if "retention" in r.message]
    assert s3_server.store(s3_prefix).folders("") == ["lake"]


def test_the_commit_log_tail_writes_the_collectors_bucket(s3_server: S3Server, s3_prefix: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from lagscope.collector import commitlog

    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    settings = _s3_settings(s3_server, s3_server.url(f"{s3_prefix}/lake"), consumer_offsets_tail={"enabled": True})
    roots: list[Any] = []
    monkeypatch.setattr(commitlog.CommitLogTailer, "run", lambda self, stop, **_: roots.append(self.lake_root))
    collector = Collector(settings, client_factory=_DeadClient).start()  # no refusal: the tail starts
    try:
        (tailer,) = collector.commitlog.tailers.values()
        assert tailer.lake_root is collector.lake_root  # the same store: the same bucket and credentials
        assert tailer.state_file == s3_server.url(f"{s3_prefix}/lake/_state/commitlog/c1.json")
    finally:
        collector.stop()
    assert roots == [collector.lake_root]
    with pytest.raises(ConfigError, match="on an object store"):
        _ = settings.collector.lake_path  # what reads a local lake says it does not read this one
