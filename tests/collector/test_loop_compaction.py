"""Lake sink, compaction and the exact reader; the loop's fault handling with injected faults."""

from __future__ import annotations

import datetime as dt
import itertools
import threading
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest

from lagscope import lake as lake_mod
from lagscope.collector.compaction import compact_folder, compact_lake
from lagscope.collector.loop import Collector, LakeSink
from lagscope.collector.model import Snapshot
from lagscope.collector.reader import list_files, read
from lagscope.config import Settings
from lagscope.errors import KafkaUnavailable
from lagscope.lake import live_files, partition_dir

LATER = dt.datetime.now(dt.UTC) + dt.timedelta(hours=3)  # every bucket written now is closed then


def _snapshot(i: int, cluster: str = "c1", groups: int = 3) -> Snapshot:
    ts = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=15 * i)
    offsets = [{"sweep_ts": ts, "group_id": f"g{g}", "topic": "t", "partition": p, "committed_offset": i,
                "log_end_offset": i + p, "lag": p} for g in range(groups) for p in range(2)]
    members = [{"sweep_ts": ts, "group_id": f"g{g}", "group_state": "Empty", "member_id": None}
               for g in range(groups)]
    sweep = {"sweep_ts": ts, "duration_ms": 1.0, "ok": True, "groups": groups, "partitions": len(offsets),
             "members": len(members), "group_errors": 0, "collector": "test"}
    return Snapshot(cluster, sweep, offsets=offsets, members=members)


def _fill(root: Path, sweeps: int, start: int = 0) -> None:
    sink = LakeSink(root)
    for i in range(start, start + sweeps):
        sink.update(_snapshot(i))


def _folder(root: Path, table: str = "offsets") -> Path:
    return partition_dir(root, table, "c1", dt.date(2026, 5, 1))


def test_sink_writes_three_tables_partitioned_by_cluster_and_date(tmp_path: Path) -> None:
    _fill(tmp_path, 2)
    for table, rows in (("offsets", 12), ("members", 6), ("sweeps", 2)):
        t = read(tmp_path, table)
        assert t.num_rows == rows
        assert set(t.column("cluster").to_pylist()) == {"c1"}
        assert set(t.column("date").to_pylist()) == {"2026-05-01"}


def test_compaction_merges_closed_hours_without_losing_or_duplicating_rows(tmp_path: Path) -> None:
    _fill(tmp_path, 20)
    before = read(tmp_path, "offsets").sort_by([("sweep_ts", "ascending"), ("group_id", "ascending"),
                                                ("partition", "ascending")])
    # the current hour is still open: nothing happens
    assert compact_lake(tmp_path).files_in == 0
    result = compact_lake(tmp_path, now=LATER)
    assert result.files_in == 60
    assert result.files_out == 3
    assert len(list(_folder(tmp_path).glob("*.parquet"))) == 1
    after = read(tmp_path, "offsets").sort_by([("sweep_ts", "ascending"), ("group_id", "ascending"),
                                               ("partition", "ascending")])
    assert after.equals(before)
    # compacted files are not compacted again; a late single file stays alone
    _fill(tmp_path, 1, start=20)
    assert compact_lake(tmp_path, now=LATER).files_in == 0
    assert read(tmp_path, "offsets").num_rows == 21 * 6


def test_crash_between_publish_and_delete_leaves_no_duplicates_and_is_cleaned_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(tmp_path, 5)
    folder = _folder(tmp_path)
    sources = sorted(p.name for p in folder.glob("part-*.parquet"))
    # simulate a crash after step 2: the unlink of sources never happens
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)
    compact_folder(folder, now=LATER)
    monkeypatch.undo()
    assert sorted(p.name for p in folder.glob("part-*.parquet")) == sources  # orphans still there
    assert next(p.name for p in live_files(folder)).startswith("compact-")
    assert len(live_files(folder)) == 1
    assert read(tmp_path, "offsets").num_rows == 5 * 6  # not 10 * 6
    result = compact_folder(folder, now=LATER)
    assert result.orphans_removed == 5
    assert not list(folder.glob("part-*.parquet"))
    assert read(tmp_path, "offsets").num_rows == 5 * 6


def test_compaction_merges_files_written_before_a_column_was_added(tmp_path: Path) -> None:
    # An upgrade within an hour: the hour holds files without a column added since (offsets gained
    # committed_record_ts within schema version 1) and files with it. Compaction must merge them
    # (the old rows get nulls) instead of failing on that hour at every run and never reaching the
    # folders after it.
    import pyarrow.parquet as pq

    from lagscope import lake
    from lagscope.schema import OFFSETS, Table

    old = Table("offsets", OFFSETS.schema.remove(OFFSETS.schema.get_field_index("committed_record_ts")), "")
    ts = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
    row = {"sweep_ts": ts, "group_id": "g", "topic": "t", "partition": 0, "committed_offset": 1}
    lake.write_rows(tmp_path, old, "c1", [row, row])       # before the upgrade
    lake.write_rows(tmp_path, OFFSETS, "c1", [{**row, "committed_record_ts": ts}])  # after it
    _fill(tmp_path, 2)                                      # members and sweeps folders, after it in order
    result = compact_lake(tmp_path, now=LATER)
    assert result.files_out == 3
    folder = _folder(tmp_path)
    (merged,) = folder.glob("*.parquet")
    table = pq.read_table(merged)
    assert table.num_rows == 3 + 12
    assert table.column("committed_record_ts").null_count == 2 + 12
    assert len(list(_folder(tmp_path, "sweeps").glob("*.parquet"))) == 1


def test_reader_time_range_of_the_commit_log_tables_is_on_record_ts(tmp_path: Path) -> None:
    # commits and group_events are partitioned by record_ts; their first timestamp columns
    # (commit_ts, state_ts) are null for tombstones and KIP-848 records: a time range on them
    # silently dropped those rows
    from lagscope import lake
    from lagscope.schema import COMMITS, GROUP_EVENTS

    ts = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.UTC)
    src = {"record_ts": ts, "source_partition": 0}
    lake.write_rows(tmp_path, COMMITS, "c1", [
        {**src, "source_offset": 0, "group_id": "g", "topic": "t", "partition": 0, "committed_offset": 5,
         "commit_ts": ts},
        {**src, "source_offset": 1, "group_id": "g", "topic": "t", "partition": 0}])  # offset tombstone
    lake.write_rows(tmp_path, GROUP_EVENTS, "c1", [
        {**src, "source_offset": 2, "group_id": "g", "record_type": "group_metadata", "state_ts": ts},
        {**src, "source_offset": 3, "group_id": "g", "record_type": "group_tombstone"},
        {**src, "source_offset": 4, "group_id": "g", "record_type": "consumer_group_metadata", "generation": 3}])
    window = {"start": ts - dt.timedelta(minutes=1), "end": ts + dt.timedelta(minutes=1)}
    assert read(tmp_path, "commits", **window).num_rows == 2
    assert read(tmp_path, "group_events", **window).num_rows == 3
    later = {"start": ts + dt.timedelta(minutes=1), "end": ts + dt.timedelta(minutes=2)}
    assert read(tmp_path, "group_events", **later).num_rows == 0


def test_reader_naive_times_are_utc_for_the_folders_as_for_the_rows(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the row filter reads a naive datetime as UTC (pyarrow); the date folders were chosen with
    # astimezone(), i.e. in the host's zone: off UTC, rows were pruned with their folder
    import time

    _fill(tmp_path, 1)  # one sweep at 2026-05-01 12:00 UTC, folder date=2026-05-01
    monkeypatch.setenv("TZ", "Etc/GMT+12")  # UTC-12: astimezone() takes naive 12:00 for 05-02 00:00 UTC
    time.tzset()
    try:
        assert read(tmp_path, "sweeps", start=dt.datetime(2026, 5, 1, 12)).num_rows == 1
        assert read(tmp_path, "sweeps", start=dt.datetime(2026, 5, 1, 12, 1)).num_rows == 0
        assert len(list_files(tmp_path, "sweeps", start=dt.datetime(2026, 5, 1, 12))) == 1
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_reader_lists_again_when_compaction_removed_what_it_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fill(tmp_path, 4)
    stale = list_files(tmp_path, "offsets")  # taken before compaction: the four sources
    compact_lake(tmp_path, now=LATER)
    calls: list[int] = []
    real = lake_mod.list_files

    def first_stale(*args: Any, **kw: Any) -> list[Path]:
        calls.append(1)
        return stale if len(calls) == 1 else real(*args, **kw)

    monkeypatch.setattr(lake_mod, "list_files", first_stale)
    assert read(tmp_path, "offsets").num_rows == 4 * 6
    assert len(calls) == 2


def test_concurrent_reader_never_sees_a_duplicate_or_a_gap(tmp_path: Path) -> None:
    _fill(tmp_path, 30)
    stop = threading.Event()
    seen: list[tuple[int, int]] = []  # (rows, distinct keys) per read

    def reader_loop() -> None:
        while not stop.is_set():
            t = read(tmp_path, "offsets", columns=["sweep_ts", "group_id", "partition"])
            keys = pc.binary_join_element_wise(pc.cast(t["sweep_ts"], "string"), t["group_id"],
                                               pc.cast(t["partition"], "string"), "|")
            seen.append((t.num_rows, len(pc.unique(keys))))

    th = threading.Thread(target=reader_loop)
    th.start()
    try:
        for round_ in range(5):  # write more sources, compact them into another file, repeatedly
            _fill(tmp_path, 6, start=30 + 6 * round_)
            compact_lake(tmp_path, now=LATER, tables=["offsets"])
    finally:
        stop.set()
        th.join()
    assert len(seen) > 3
    assert all(rows == distinct for rows, distinct in seen), "a reader saw a duplicate row"
    # rows only ever grow while sweeps are appended: a read that lost a file would shrink
    counts = [rows for rows, _ in seen]
    assert all(b >= a for a, b in itertools.pairwise(counts)), counts
    assert counts[0] >= 30 * 6
    assert read(tmp_path, "offsets").num_rows == 60 * 6


# -- the loop ----------------------------------------------------------------------------------


class _DeadClient:
    """A client whose cluster never answers."""

    request_timeout_ms = 100
    connected = False

    def __init__(self, *_: Any) -> None:
        self.closed = False

    def connect(self) -> None:
        raise KafkaUnavailable("c1: cannot bootstrap from h:1: refused")

    def close(self) -> None:
        self.closed = True


class _Boom:
    def update(self, snapshot: Snapshot) -> None:
        raise RuntimeError("receiver bug")


def _settings(tmp_path: Path, interval: float = 0.05) -> Settings:
    return Settings(clusters=[{"name": "c1", "bootstrap_servers": "h:1"}],  # type: ignore[list-item]
                    collector={"interval_s": interval, "lake": str(tmp_path / "lake")},  # type: ignore[arg-type]
                    metrics={"enabled": False})  # type: ignore[arg-type]


def test_failed_sweeps_are_recorded_and_the_loop_keeps_going(tmp_path: Path) -> None:
    made: list[_DeadClient] = []

    def factory(_: Any) -> Any:
        made.append(_DeadClient())
        return made[-1]

    settings = _settings(tmp_path)
    collector = Collector(settings, client_factory=factory)
    collector.receivers.append(_Boom())  # a failing receiver must not stop the loop either
    collector.run(threading.Event(), max_sweeps=7)
    sweeps = read(tmp_path / "lake", "sweeps").to_pylist()
    assert len(sweeps) == 7
    assert all(s["ok"] is False and "cannot bootstrap" in s["error"] for s in sweeps)
    assert all(s["groups"] == 0 for s in sweeps)
    assert read(tmp_path / "lake", "offsets").num_rows == 0  # a failed sweep is a gap, not zeros
    # after RECONNECT_AFTER failures the client is rebuilt: 7 sweeps → at least 3 clients
    assert len(made) >= 3
    assert all(c.closed for c in made[:-1])


def test_stop_event_ends_the_loop_between_sweeps(tmp_path: Path) -> None:
    collector = Collector(_settings(tmp_path, interval=30), client_factory=_DeadClient)
    stop = threading.Event()
    th = threading.Thread(target=collector.run, args=(stop,))
    th.start()
    while collector.sweeps == 0:
        th.join(0.05)
    stop.set()
    th.join(5)
    assert not th.is_alive()
    assert collector.sweeps == 1


def test_the_loop_compacts_closed_hours_in_the_background(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _fill(lake, 4)
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=3)).strftime("%Y%m%dT%H")
    for p in lake.rglob("part-*.parquet"):  # as if written three hours ago
        p.rename(p.with_name(f"part-{old}{p.name[16:]}"))
    collector = Collector(_settings(tmp_path), client_factory=_DeadClient)
    collector.maybe_compact(force=True, wait=True)
    assert [p.name[:8] for p in _folder(lake).iterdir()] == ["compact-"]
    assert read(lake, "offsets").num_rows == 4 * 6
