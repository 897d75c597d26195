"""The analytics' writes on an object store (analytics/io.py, s3://), on the real S3 server
fixture: the checkpoint (read back as written, the state versions it no longer points to
dropped, an unreadable one an error naming its URL, the same on a local folder); staged result
files published by an incremental step (counted from its checkpoint, a redo replacing the first
attempt) and by a batch (replacing its partitions, rolled back when it dies while moving)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.results_synthetic import status
from helpers.s3server import S3Server

from lagscope import results
from lagscope.analytics import io
from lagscope.analytics.io import (
    Checkpoint,
    publish_batch,
    publish_incremental,
    read_checkpoint,
    stage_objects,
    write_checkpoint,
)
from lagscope.errors import LakeError
from lagscope.schema import RESULT_TABLES
from lagscope.storage import Store, open_store


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/results")


def test_the_checkpoint_round_trips_and_drops_old_state_versions(store: Store) -> None:
    assert read_checkpoint(store) is None  # before the first step
    store.put("_state/v-1/series/part-0.parquet", b"old")
    store.put("_state/v-2/series/part-0.parquet", b"new")
    cp = Checkpoint(watermark="2026-11-24T12:00:00+00:00", version="v-2", clusters=["prod"])
    write_checkpoint(store, cp)
    assert read_checkpoint(store) == cp
    assert store.folders("_state") == ["v-2"]
    assert store.get("_state/v-2/series/part-0.parquet") == b"new"
    # the results' readers take the watermark from the same object
    assert results.read_publish_state(store).watermark_ms == 1_795_521_600_000


def test_an_unreadable_checkpoint_names_its_url(store: Store) -> None:
    store.put("_state/checkpoint.json", b"{half")
    with pytest.raises(LakeError, match=r"s3://.*/_state/checkpoint\.json"):
        read_checkpoint(store)


def test_a_local_store_is_the_local_checkpoint(tmp_path: Path) -> None:
    cp = Checkpoint(watermark="2026-11-24T12:00:00+00:00", version="v-9", clusters=[])
    write_checkpoint(open_store(str(tmp_path)), cp)
    assert read_checkpoint(tmp_path) == cp
    assert (tmp_path / "_state" / "checkpoint.json").exists()


T0 = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)


def _status_rows(n: int, label: str) -> pa.Table:
    rows = [{**status("g", T0 + dt.timedelta(minutes=i), "OK", "OK"), "reason": label,
             "cluster": "prod", "date": T0.date().isoformat()} for i in range(n)]
    schema = RESULT_TABLES["status"].schema.append(pa.field("cluster", pa.string())).append(
        pa.field("date", pa.string()))
    return pa.Table.from_pylist(rows, schema=schema)


def _reasons(store: Store) -> list[str]:
    return sorted(results.read(store, "status").column("reason").to_pylist())


def test_an_incremental_step_is_published_and_counts_from_its_checkpoint(store: Store) -> None:
    start, to = T0, T0 + dt.timedelta(minutes=5)
    tag = results.inc_tag(start, to)
    stage_objects(store, ".staging/status-a", "status", _status_rows(2, "first"), part="00000")
    stage_objects(store, ".staging/status-a", "status", _status_rows(1, "first"), part="00001")
    assert publish_incremental(store, {"status": Path(".staging/status-a")}, tag=tag) == {"status": 2}
    assert store.folders(".staging") == []  # the staging is gone
    assert _reasons(store) == []  # published, not yet counted: the checkpoint has not moved
    # the step redone (a crash before its checkpoint): the redo's files replace the first attempt's
    stage_objects(store, ".staging/status-b", "status", _status_rows(3, "redo"))
    redo = results.inc_tag(start, to + dt.timedelta(minutes=1))
    publish_incremental(store, {"status": Path(".staging/status-b")}, tag=redo)
    write_checkpoint(store, Checkpoint(watermark=(to + dt.timedelta(minutes=1)).isoformat(), version="v-1",
                                       clusters=["prod"]))
    assert _reasons(store) == ["redo"] * 3


def test_a_batch_replaces_its_partitions_and_a_crash_while_moving_rolls_back(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    stage_objects(store, ".staging/s1", "status", _status_rows(2, "old"))
    publish_batch(store, {"status": Path(".staging/s1")}, tag=results.batch_tag(T0.date(), T0.date()))
    assert _reasons(store) == ["old", "old"]
    stage_objects(store, ".staging/s2", "status", _status_rows(1, "new"))
    publish_batch(store, {"status": Path(".staging/s2")}, tag=results.batch_tag(T0.date(), T0.date()))
    assert _reasons(store) == ["new"]  # the batch replaced the partition's files
    # a batch that dies once its files are in, before it marks itself replacing: hidden meanwhile,
    # rolled back (its files deleted) by the next publish
    stage_objects(store, ".staging/s3", "status", _status_rows(4, "dies"))
    real = io._move_in_objects

    def dies(*args: object, **kwargs: object) -> object:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt("killed while moving")

    monkeypatch.setattr(io, "_move_in_objects", dies)
    with pytest.raises(KeyboardInterrupt):
        publish_batch(store, {"status": Path(".staging/s3")}, tag=results.batch_tag(T0.date(), T0.date()))
    monkeypatch.undo()
    assert _reasons(store) == ["new"]
    assert results.read_publish_state(store).phase == "done"  # its own rollback ran
    assert len(results.object_files(store, "status")) == 1


def test_provisional_steps_on_the_object_store(store: Store) -> None:
    # a full step, then two provisional steps from its watermark: each shows at once, the second
    # replaces the first (whose objects go), the checkpoint never moves; the full step over the
    # range hides the last one and deletes it
    w = T0 + dt.timedelta(minutes=5)
    stage_objects(store, ".staging/full-1", "status", _status_rows(1, "full"))
    publish_incremental(store, {"status": Path(".staging/full-1")}, tag=results.inc_tag(T0, w))
    write_checkpoint(store, Checkpoint(watermark=w.isoformat(), version="v-1", clusters=["prod"]))
    for label, until in (("pre-a", w + dt.timedelta(seconds=20)), ("pre-b", w + dt.timedelta(seconds=40))):
        stage_objects(store, f".staging/{label}", "status", _status_rows(2, label))
        assert io.publish_provisional(store, {"status": Path(f".staging/{label}")}, start=w, until=until) == {
            "status": 1}
        assert _reasons(store) == ["full", label, label]
        assert read_checkpoint(store)["watermark"] == w.isoformat()  # type: ignore[index]
    names = [n for n in store.names(f"status/cluster=prod/date={T0.date().isoformat()}") if n.startswith("pre-")]
    assert names == [f"{results.pre_tag(w, w + dt.timedelta(seconds=40))}-00000.parquet"]
    stage_objects(store, ".staging/full-2", "status", _status_rows(3, "full-2"))
    publish_incremental(store, {"status": Path(".staging/full-2")}, tag=results.inc_tag(w, w + dt.timedelta(minutes=1)))
    write_checkpoint(store, Checkpoint(watermark=(w + dt.timedelta(minutes=1)).isoformat(), version="v-2",
                                       clusters=["prod"]))
    assert _reasons(store) == ["full", "full-2", "full-2", "full-2"]  # hidden before it is deleted
    assert io.drop_provisional(store) == 1
    assert _reasons(store) == ["full", "full-2", "full-2", "full-2"]
