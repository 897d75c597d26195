"""Retention of a lake on an object store (lagscope.retention on the real S3 server fixture): the
same partitions go as from the same files on local disk and a reader reads the same rows after it;
a partition written to since the horizon stays; the analytics' checkpoint object holds what they
have not read; a reader during a removal never reads a row twice or a file that is not there;
what an interrupted removal left is invisible and goes at the next run; the collector prunes its
bucket lake."""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from helpers.s3server import S3Server
from typer.testing import CliRunner

from lagscope import lake
from lagscope.cli import app
from lagscope.collector.loop import Collector
from lagscope.config import Settings
from lagscope.retention import analytics_keep_from, expired_through, prune
from lagscope.schema import OFFSETS, SAMPLE_TABLES, SWEEPS
from lagscope.storage import Store

ORDER = [("cluster", "ascending"), ("date", "ascending"), ("sweep_ts", "ascending"), ("group_id", "ascending")]


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/lake")


def _write_day(root: Path | Store, day: dt.date, cluster: str = "prod", files: int = 1) -> None:
    """``files`` offsets files and one sweeps file of ``day`` (written now)."""
    ts = dt.datetime.combine(day, dt.time(12), dt.UTC)
    for i in range(files):
        row = {"sweep_ts": ts + dt.timedelta(seconds=i), "group_id": f"g{i}", "topic": "t", "partition": 0,
               "committed_offset": 1, "log_end_offset": 5, "lag": 4}
        lake.write_table(root, OFFSETS, cluster, pa.Table.from_pylist([row], schema=OFFSETS.schema), date=day)
    lake.write_table(root, SWEEPS, cluster, pa.Table.from_pylist([{"sweep_ts": ts, "duration_ms": 1.0, "ok": True}],
                                                                  schema=SWEEPS.schema), date=day)


def _dates(store: Store, table: str = "offsets", cluster: str = "prod") -> list[str]:
    return [n.removeprefix("date=") for n in store.folders(f"{table}/cluster={cluster}")]


def _local_dates(root: Path, table: str = "offsets", cluster: str = "prod") -> list[str]:
    return sorted(p.name.removeprefix("date=") for p in (root / table / f"cluster={cluster}").glob("date=*"))


def _rows(root: Path | Store, table: str = "offsets") -> list[dict[str, Any]]:
    order = ORDER if table == "offsets" else ORDER[:3]
    return lake.read_table(root, table).sort_by(order).to_pylist()


def test_the_same_partitions_go_as_on_local_disk_and_a_reader_reads_the_same_rows(
        store: Store, tmp_path: Path) -> None:
    # written now; "now" of the prune is 20 days on, so that every object is older than the horizon
    # and the dates decide (7 days: everything before now − 8 days goes)
    now = dt.datetime.now(dt.UTC) + dt.timedelta(days=20)
    first, last = now.date() - dt.timedelta(days=14), now.date() + dt.timedelta(days=1)
    local = tmp_path / "lake"
    day = first
    while day <= last:
        for cluster in ("prod", "test"):
            for root in (store, local):
                _write_day(root, day, cluster, files=2)
        day += dt.timedelta(days=1)
    assert _rows(store) == _rows(local)

    on_s3 = prune(store, SAMPLE_TABLES, days=7, now=now)
    on_disk = prune(local, SAMPLE_TABLES, days=7, now=now)

    oldest = (now - dt.timedelta(days=8)).date()
    assert sorted((r.table, r.cluster, r.date) for r in on_s3.removed) == \
        sorted((r.table, r.cluster, r.date) for r in on_disk.removed)
    assert len(on_s3.removed) == (oldest - first).days * 2 * 2  # days × clusters × tables
    # each removed offsets partition held 2 files and their 2 markers; the bytes are the objects'
    assert {r.files for r in on_s3.removed if r.table == "offsets"} == {4}
    assert on_s3.bytes > 0
    for cluster in ("prod", "test"):
        for table in ("offsets", "sweeps"):
            assert _dates(store, table, cluster) == _local_dates(local, table, cluster)
            assert _dates(store, table, cluster)[0] == oldest.isoformat()
    # the kept partitions keep their files and markers, the removed ones leave no object at all
    for d in _dates(store):
        names = store.names(f"offsets/cluster=prod/date={d}")
        assert len(lake.committed_names(names)) == 2
        assert len(names) == 4
    gone = f"offsets/cluster=prod/date={first.isoformat()}"
    assert store.names(gone) == []
    assert store.folders(gone) == []
    # a reader reads the same rows from both after the same retention
    for table in ("offsets", "sweeps"):
        assert _rows(store, table) == _rows(local, table)
    assert sorted({r["date"] for r in _rows(store)}) == _dates(store)
    # the record of what went, in the bucket
    assert expired_through(store, "offsets") == expired_through(local, "offsets") == oldest - dt.timedelta(days=1)
    assert json.loads(store.get("_state/retention.json"))["removed_through"]["sweeps"]["test"] == \
        (oldest - dt.timedelta(days=1)).isoformat()
    # a second run removes nothing more
    assert prune(store, SAMPLE_TABLES, days=7, now=now).removed == ()


def test_a_partition_written_to_since_the_horizon_stays_and_a_dry_run_removes_nothing(store: Store) -> None:
    old_a, old_b = dt.date(2025, 1, 1), dt.date(2025, 1, 2)
    _write_day(store, old_a)
    time.sleep(1.5)  # the store's LastModified may have whole seconds
    cut = dt.datetime.now(dt.UTC)
    time.sleep(1.5)
    _write_day(store, old_b)  # an old day written to after the cut: a late record, an open anomaly
    now = cut + dt.timedelta(days=2)  # 1 day's retention: the horizon is the cut
    dry = prune(store, SAMPLE_TABLES, days=1, now=now, dry_run=True)
    assert {(r.table, r.date) for r in dry.removed} == {("offsets", old_a), ("sweeps", old_a)}
    assert _dates(store) == [old_a.isoformat(), old_b.isoformat()]
    assert not store.names("_state")  # a dry run writes no record

    done = prune(store, SAMPLE_TABLES, days=1, now=now)
    assert {(r.table, r.date) for r in done.removed} == {("offsets", old_a), ("sweeps", old_a)}
    assert _dates(store) == [old_b.isoformat()]
    assert _dates(store, "sweeps") == [old_b.isoformat()]
    assert len(lake.read_table(store, "offsets")) == 1


def test_the_analytics_checkpoint_object_holds_what_they_have_not_read(s3_server: S3Server, s3_prefix: str,
                                                                       store: Store) -> None:
    results = s3_server.store(f"{s3_prefix}/results")
    assert analytics_keep_from(results) is None
    now = dt.datetime.now(dt.UTC) + dt.timedelta(days=30)
    days = [now.date() - dt.timedelta(days=n) for n in (20, 15, 12)]
    for d in days:
        _write_day(store, d)
    watermark = dt.datetime.combine(days[1], dt.time(6), dt.UTC)  # the next step reads from the day before
    results.put("_state/checkpoint.json", json.dumps({"watermark": watermark.isoformat()}).encode())
    keep_from = analytics_keep_from(results)
    assert keep_from == days[1] - dt.timedelta(days=1)
    done = prune(store, SAMPLE_TABLES, days=7, now=now, keep_from=keep_from)
    assert {r.date for r in done.removed} == {days[0]}
    assert done.kept_for_analytics == 4  # 2 days × 2 tables
    assert _dates(store) == [d.isoformat() for d in days[1:]]
    results.put("_state/checkpoint.json", b"{not json")
    with pytest.raises(Exception, match="unreadable analytics checkpoint"):
        analytics_keep_from(results)


def _compacted(store: Store, folder: str, sources: list[str]) -> str:
    """A compacted file of ``sources`` (their rows), committed beside them: what a compaction
    that crashed before deleting its sources leaves."""
    tables = [pq.read_table(store.path(f"{folder}/{s}"), filesystem=store.filesystem) for s in sources]
    merged = pa.concat_tables(tables)
    meta = {**(merged.schema.metadata or {}), lake.COMPACTED_FROM_KEY: json.dumps(sources).encode()}
    sink = pa.BufferOutputStream()
    pq.write_table(merged.replace_schema_metadata(meta), sink)
    name = f"{lake.COMPACT_PREFIX}20250101T13-0000.parquet"
    store.put(f"{folder}/{name}", sink.getvalue().to_pybytes())
    store.put(f"{folder}/{lake.COMMIT_MARKER_PREFIX}{name}", b"{}")
    return name


def test_a_reader_during_a_removal_never_reads_a_row_twice_nor_a_missing_file(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    old, kept = dt.date(2025, 1, 1), dt.date.today() + dt.timedelta(days=40)
    _write_day(store, old, files=3)
    _write_day(store, kept)
    folder = f"offsets/cluster=prod/date={old.isoformat()}"
    sources = lake.committed_names(store.names(folder))
    _compacted(store, folder, sources)
    assert len(lake.read_table(store, "offsets")) == 4  # the compacted file hides its sources
    seen: list[list[tuple[str, str]]] = []
    real_delete = Store.delete

    def delete_and_read(self: Store, rel: str) -> None:
        real_delete(self, rel)
        if rel.startswith("offsets/"):
            t = lake.read_table(store, "offsets")
            seen.append(sorted(zip(t.column("date").to_pylist(), t.column("group_id").to_pylist(), strict=True)))

    monkeypatch.setattr(Store, "delete", delete_and_read)
    now = dt.datetime.now(dt.UTC) + dt.timedelta(days=10)
    done = prune(store, ("offsets",), days=1, now=now)
    monkeypatch.undo()
    assert [r.date for r in done.removed] == [old]
    assert len(seen) == 8  # 4 markers, 4 files
    whole = [(old.isoformat(), f"g{i}") for i in range(3)] + [(kept.isoformat(), "g0")]
    for rows in seen:
        # never a row twice, never part of the old day: the old day whole, or not at all
        assert rows in (whole, [(kept.isoformat(), "g0")]), rows
    # once the first marker went (a source's), the compacted file still hides the sources: the old
    # day is read whole until the compacted file's marker goes, then not at all
    counts = [len(r) for r in seen]
    assert counts == sorted(counts, reverse=True)
    assert counts[-1] == 1
    assert counts[0] == 4
    assert store.names(folder) == []


def test_what_an_interrupted_removal_left_is_invisible_and_goes_at_the_next_run(store: Store) -> None:
    old = dt.date(2025, 1, 1)
    _write_day(store, old, files=2)
    folder = f"offsets/cluster=prod/date={old.isoformat()}"
    for n in store.names(folder):  # a removal killed after deleting the markers
        if n.startswith(lake.COMMIT_MARKER_PREFIX):
            store.delete(f"{folder}/{n}")
    assert len(store.names(folder)) == 2
    assert len(lake.read_table(store, "offsets")) == 0  # no reader lists the files left
    done = prune(store, SAMPLE_TABLES, days=1, now=dt.datetime.now(dt.UTC) + dt.timedelta(days=10))
    assert {(r.table, r.files) for r in done.removed} == {("offsets", 2), ("sweeps", 2)}
    assert store.names(folder) == []
    assert _dates(store) == []


def test_the_collector_prunes_its_bucket_lake(s3_server: S3Server, s3_prefix: str, store: Store,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    old, new = dt.date(2025, 1, 1), dt.date.today() + dt.timedelta(days=10)
    _write_day(store, old)
    _write_day(store, new)
    settings = Settings(clusters=[{"name": "prod", "bootstrap_servers": "h:1"}],  # type: ignore[list-item]
                        collector={"lake": store.url, "retention": 3},  # type: ignore[arg-type]
                        storage={"endpoint": s3_server.endpoint, "credentials": "env"},  # type: ignore[arg-type]
                        metrics={"enabled": False})  # type: ignore[arg-type]
    collector = Collector(settings)
    # the store's LastModified is now: the collector's prune looks from 10 days on
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=10)
    monkeypatch.setattr("lagscope.collector.loop.prune", functools.partial(prune, now=later))
    # the results beside the lake's prefix, as lagscope analyze resolves them, opened on the bucket
    assert isinstance(collector.results, Store)
    assert collector.results.url == s3_server.url(f"{s3_prefix}/results")
    collector.maybe_prune(force=True, wait=True)
    assert _dates(store) == [new.isoformat()]
    assert _dates(store, "sweeps") == [new.isoformat()]
    assert collector.removals.snapshot()[("prod", "offsets")][0] == 1
    # a checkpoint before the old day would have held it: the collector reads it from the bucket
    _write_day(store, old)
    collector.results.put("_state/checkpoint.json", json.dumps(
        {"watermark": dt.datetime(2025, 1, 1, 6, tzinfo=dt.UTC).isoformat()}).encode())
    collector.maybe_prune(force=True, wait=True)
    assert _dates(store) == [old.isoformat(), new.isoformat()]


def test_lake_prune_on_a_bucket_lake(s3_server: S3Server, s3_prefix: str, store: Store, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    old, new = dt.date(2025, 1, 1), dt.date.today() + dt.timedelta(days=10)
    _write_day(store, old)
    _write_day(store, new)
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({
        "collector": {"lake": store.url, "retention": 3}, "analytics": {"retention": 30},
        "storage": {"endpoint": s3_server.endpoint, "credentials": "env"}}))
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=10)  # the objects' LastModified is now
    monkeypatch.setattr("lagscope.retention.prune", functools.partial(prune, now=later))
    runner = CliRunner()
    got = runner.invoke(app, ["lake", "prune", "--config", str(config), "--dry-run"])
    assert got.exit_code == 0, got.output
    assert f"would remove lake offsets cluster=prod date={old}: 2 files" in got.output  # the file, its marker
    assert f"lake {store.url}: would remove 2 partition(s)" in got.output
    assert _dates(store) == [old.isoformat(), new.isoformat()]
    got = runner.invoke(app, ["lake", "prune", "--config", str(config)])
    assert got.exit_code == 0, got.output
    assert f"lake {store.url}: removed 2 partition(s)" in got.output
    assert f"results {store.url.removesuffix('/lake')}/results: removed 0 partition(s)" in got.output
    assert _dates(store) == [new.isoformat()]
