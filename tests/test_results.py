"""The results room (lagscope.results): which result files are live under the analytics'
publish markers, reading rows by time, group and cluster, current rows, following a table."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers.results_steps import publish_batch_rows, publish_step

from lagscope import results
from lagscope.analytics.io import recover_publish
from lagscope.errors import LakeError
from lagscope.lake import write_rows
from lagscope.results import PublishState
from lagscope.retention import checkpoint_file
from lagscope.schema import ANOMALIES, STATUS, Table

T0 = dt.datetime(2026, 3, 1, 23, 58, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)


def _trend(group: str, partition: int, ts: dt.datetime, lag: int = 5) -> dict[str, Any]:
    return {"window_start": ts, "group_id": group, "topic": "t", "partition": partition, "lag_last": lag,
            "lag_max": lag, "retention_headroom_s": 100.0, "catchup_eta_s": None}


def _status(group: str, ts: dt.datetime, status: str) -> dict[str, Any]:
    return {"eval_ts": ts, "group_id": group, "topic": None, "partition": None, "status": status,
            "burrow_status": status, "reason": "", "lag": 0, "lag_seconds": 0.0}


def _anomaly(key: str, start: dt.datetime, end: dt.datetime | None, as_of: dt.datetime) -> dict[str, Any]:
    return {"group_id": "g", "topic": "t", "partition": 0, "kind": "stall", "start_ts": start, "end_ts": end,
            "severity": "critical", "magnitude": 1.0, "unit": "s", "detail": "", "key": key, "as_of_ts": as_of}


def _names(paths: list[Path]) -> list[str]:
    return sorted(p.name for p in paths)


# --------------------------------------------------------------------------------------------
# visibility: one folder's names under the markers
# --------------------------------------------------------------------------------------------

INC_1 = "inc-1000-2000-00000.parquet"   # a step over [1 s, 2 s)
INC_2 = "inc-2000-3000-00000.parquet"   # the next one
BATCH_OLD = "batch-2026-03-01-2026-03-01-aaaa0000-00000.parquet"
BATCH_NEW = "batch-2026-03-01-2026-03-01-bbbb1111-00000.parquet"
OTHER = "part-20260301T000000000000-0a0b0c0d.parquet"
NEW_TAG = "batch-2026-03-01-2026-03-01-bbbb1111"


@pytest.mark.parametrize(("state", "expected"), [
    # no checkpoint yet: an incremental step is visible only once its checkpoint is written
    (PublishState(), [BATCH_OLD, BATCH_NEW, OTHER]),
    # the watermark reached the first step's end, not the second's (being published)
    (PublishState(watermark_ms=2000), [BATCH_OLD, BATCH_NEW, INC_1, OTHER]),
    (PublishState(watermark_ms=3000), [BATCH_OLD, BATCH_NEW, INC_1, INC_2, OTHER]),
    # a batch moving its files in: they are hidden, the files it will replace are still read
    (PublishState(watermark_ms=3000, seq=1, tag=NEW_TAG, phase="moving"), [BATCH_OLD, INC_1, INC_2, OTHER]),
    # all its files are in: in a folder that holds one, only they are read (the rest is being deleted)
    (PublishState(watermark_ms=3000, seq=2, tag=NEW_TAG, phase="replacing"), [BATCH_NEW]),
    # done: no marker rule applies any more
    (PublishState(watermark_ms=3000, seq=3, tag=NEW_TAG, phase="done"), [BATCH_OLD, BATCH_NEW, INC_1, INC_2, OTHER]),
])
def test_visible_names_under_the_markers(state: PublishState, expected: list[str]) -> None:
    names = sorted([INC_1, INC_2, BATCH_OLD, BATCH_NEW, OTHER])
    assert sorted(results.visible(names, state)) == sorted(expected)


def test_replacing_batch_leaves_the_folders_it_did_not_write_alone() -> None:
    # a folder with none of the batch's files: the batch replaces nothing there
    state = PublishState(watermark_ms=3000, seq=2, tag=NEW_TAG, phase="replacing")
    assert results.visible([INC_1, OTHER], state) == [INC_1, OTHER]


# --------------------------------------------------------------------------------------------
# listing as the analytics publish
# --------------------------------------------------------------------------------------------

def test_a_step_is_invisible_until_its_checkpoint_moves(tmp_path: Path) -> None:
    publish_step(tmp_path, "prod", T0, T0 + MIN, {"lag_trends": [_trend("g", 0, T0)]})
    first = results.list_files(tmp_path, "lag_trends")
    assert len(first) == 1
    # the next step's files are in place, its checkpoint not yet (crashed, or being published)
    publish_step(tmp_path, "prod", T0 + MIN, T0 + 2 * MIN, {"lag_trends": [_trend("g", 0, T0 + MIN)]},
                 checkpoint=False)
    assert len(list((tmp_path / "lag_trends").rglob("inc-*.parquet"))) == 2
    assert results.list_files(tmp_path, "lag_trends") == first
    assert results.read(tmp_path, "lag_trends").num_rows == 1


def test_a_redone_step_replaces_the_crashed_attempt_even_when_it_ends_later(tmp_path: Path) -> None:
    publish_step(tmp_path, "prod", T0, T0 + MIN, {"lag_trends": [_trend("g", 0, T0)]})
    # the step from T0 + 1 min crashed after publishing, before its checkpoint ...
    publish_step(tmp_path, "prod", T0 + MIN, T0 + 2 * MIN, {"lag_trends": [_trend("g", 0, T0 + MIN, lag=7)]},
                 checkpoint=False)
    # ... and is redone a minute later, over [T0 + 1 min, T0 + 3 min): its file names differ
    publish_step(tmp_path, "prod", T0 + MIN, T0 + 3 * MIN, {"lag_trends": [
        _trend("g", 0, T0 + MIN, lag=7), _trend("g", 0, T0 + 2 * MIN, lag=9)]})
    rows = results.read(tmp_path, "lag_trends").sort_by("window_start").to_pylist()
    # each minute once: the crashed attempt's file is gone, not shown beside the redo
    assert [(r["window_start"], r["lag_last"]) for r in rows] == [(T0, 5), (T0 + MIN, 7), (T0 + 2 * MIN, 9)]
    assert not any("inc-" + str(int((T0 + MIN).timestamp() * 1000)) + "-" + str(int((T0 + 2 * MIN).timestamp()
                   * 1000)) in p.name for p in (tmp_path / "lag_trends").rglob("*.parquet"))


def test_a_batch_replaces_its_days_and_an_interrupted_one_is_recovered(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    day = T0.date()
    publish_step(tmp_path, "prod", T0, T0 + MIN, {"status": [_status("g", T0, "WARN")]})
    publish_batch_rows(tmp_path, "prod", day, day, {"status": [_status("g", T0, "OK")]})
    assert [r["status"] for r in results.read(tmp_path, "status").to_pylist()] == ["OK"]

    # a batch that crashes while moving its files in (after the first file): readers keep the
    # previous output; the next publish rolls the half-moved batch back
    import lagscope.analytics.io as io

    real = io.os.replace
    calls: list[int] = []

    def crash_after_one(src: Any, dst: Any) -> None:
        if str(dst).endswith(".parquet"):  # a result file (the marker is renamed into place too)
            calls.append(1)
            if len(calls) > 1:
                raise OSError("disk gone")
        real(src, dst)

    monkeypatch.setattr(io.os, "replace", crash_after_one)
    monkeypatch.setattr(io, "recover_publish", lambda results_root: None)  # the crash kills the process
    rows = [_status("g", T0, "ERR"), _status("g2", T0, "ERR")]
    with pytest.raises(OSError, match="disk gone"):
        publish_batch_rows(tmp_path, "prod", day, day, {"status": rows[:1], "anomalies": [
            _anomaly("k", T0, None, T0 + MIN)]})
    monkeypatch.undo()
    assert results.read_publish_state(tmp_path).phase == "moving"
    assert [r["status"] for r in results.read(tmp_path, "status").to_pylist()] == ["OK"]
    # the anomaly file it moved in before crashing is on disk, hidden
    assert len(list((tmp_path / "anomalies").rglob("batch-*.parquet"))) == 1
    assert results.read(tmp_path, "anomalies").num_rows == 0
    recover_publish(tmp_path)
    assert results.read_publish_state(tmp_path).phase == "done"
    assert [r["status"] for r in results.read(tmp_path, "status").to_pylist()] == ["OK"]
    assert results.read(tmp_path, "anomalies").num_rows == 0
    assert len(list((tmp_path / "status").rglob("*.parquet"))) == 1


def test_an_interrupted_batch_that_was_replacing_is_finished(tmp_path: Path) -> None:
    day = T0.date()
    publish_step(tmp_path, "prod", T0, T0 + MIN, {"status": [_status("g", T0, "WARN")]})
    folder = tmp_path / "status" / "cluster=prod" / f"date={day}"
    old = sorted(p.name for p in folder.glob("*.parquet"))
    # the batch's file is in, the marker says replacing, the old file is not deleted yet
    tag = results.batch_tag(day, day)
    write_rows(tmp_path, STATUS, "prod", [_status("g", T0, "OK")], date=day)
    (new,) = set(p.name for p in folder.glob("*.parquet")) - set(old)
    (folder / new).rename(folder / f"{tag}-00000.parquet")
    results.write_publish_state(tmp_path, tag, "replacing")
    assert [r["status"] for r in results.read(tmp_path, "status").to_pylist()] == ["OK"]
    recover_publish(tmp_path)
    assert sorted(p.name for p in folder.glob("*.parquet")) == [f"{tag}-00000.parquet"]
    assert [r["status"] for r in results.read(tmp_path, "status").to_pylist()] == ["OK"]


def test_a_listing_overlapped_by_a_batch_publish_is_taken_again(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    day = T0.date()
    publish_batch_rows(tmp_path, "prod", day, day, {"status": [_status("g", T0, "WARN")]})
    real = results.visible_names
    published: list[int] = []

    def publish_meanwhile(folder: Path) -> list[str]:
        names = real(folder)  # the old batch's file ...
        if not published:
            # ... while a whole new batch is published (moving, replacing, done) in between
            published.append(1)
            publish_batch_rows(tmp_path, "prod", day, day, {"status": [_status("g", T0, "OK")]})
            names = sorted({*names, *real(folder)})
        return names

    monkeypatch.setattr(results, "visible_names", publish_meanwhile)
    files = results.list_files(tmp_path, "status")
    # without the second look, the listing would hold the old file (deleted now) and the new one
    assert len(files) == 1
    assert files[0].exists()


def test_an_unreadable_marker_is_one_error(tmp_path: Path) -> None:
    results.state_dir(tmp_path).mkdir(parents=True)
    checkpoint_file(tmp_path).write_text("{not json")
    with pytest.raises(LakeError, match=r"unreadable results marker .*checkpoint\.json"):
        results.list_files(tmp_path, "status")


def test_listing_names_folders_of_clusters_and_days(tmp_path: Path) -> None:
    for cluster in ("prod", "staging"):
        publish_step(tmp_path, cluster, T0, T0 + 3 * MIN,
                     {"lag_trends": [_trend("g", 0, T0 + i * MIN) for i in range(3)]})  # 23:58 … 00:00
    assert len(results.list_files(tmp_path, "lag_trends")) == 4  # two days, two clusters
    prod_day2 = results.list_files(tmp_path, "lag_trends", cluster="prod", since=(T0 + 3 * MIN).date(),
                                   until=(T0 + 3 * MIN).date())
    assert [p.parent.parent.name + "/" + p.parent.name for p in prod_day2] == ["cluster=prod/date=2026-03-02"]
    with pytest.raises(LakeError, match="unknown result table 'offsets'"):
        results.list_files(tmp_path, "offsets")


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------

def test_read_by_time_group_and_cluster(tmp_path: Path) -> None:
    for cluster in ("prod", "staging"):
        publish_step(tmp_path, cluster, T0, T0 + 4 * MIN, {"lag_trends": [
            _trend(g, 0, T0 + i * MIN) for i in range(4) for g in ("a", "b")]})
    got = results.read(tmp_path, "lag_trends", cluster="prod", group="a", since=T0 + MIN, until=T0 + 3 * MIN)
    # [since, until): the minutes 23:59 and 00:00, across the day boundary, of one group and cluster
    assert sorted((r["window_start"], r["group_id"], r["cluster"], r["date"]) for r in got.to_pylist()) == [
        (T0 + MIN, "a", "prod", "2026-03-01"), (T0 + 2 * MIN, "a", "prod", "2026-03-02")]
    # naive times are UTC
    naive = results.read(tmp_path, "lag_trends", since=(T0 + 3 * MIN).replace(tzinfo=None))
    assert naive.num_rows == 4
    assert results.read(tmp_path / "absent", "status").num_rows == 0


def test_current_events_keep_the_current_row_of_each(tmp_path: Path) -> None:
    # an anomaly written open by two steps and closed by the third, another still open
    for i in range(3):
        rows = [_anomaly("k1", T0, T0 + MIN if i == 2 else None, T0 + (i + 1) * MIN),
                _anomaly("k2", T0 + MIN, None, T0 + (i + 1) * MIN)]
        publish_step(tmp_path, "prod", T0 + i * MIN, T0 + (i + 1) * MIN, {"anomalies": rows})
    assert results.read(tmp_path, "anomalies").num_rows == 6
    got = {r["key"]: r["end_ts"] for r in results.current_events(tmp_path, "anomalies")}
    assert got == {"k1": T0 + MIN, "k2": None}
    with pytest.raises(LakeError, match="not an event table"):
        results.current_events(tmp_path, "status")


def test_current_events_leave_out_a_withdrawn_anomaly_and_read_files_without_the_column(tmp_path: Path) -> None:
    # k1 and k2 written open by a file from before the withdrawn column; a later step withdraws k1
    old = Table("anomalies", pa.schema([f for f in ANOMALIES.schema if f.name != "withdrawn"]), ANOMALIES.doc)
    write_rows(tmp_path, old, "prod", [_anomaly("k1", T0, None, T0 + MIN), _anomaly("k2", T0, None, T0 + MIN)])
    assert "withdrawn" not in pq.read_schema(results.list_files(tmp_path, "anomalies")[0]).names
    assert {r["key"] for r in results.current_events(tmp_path, "anomalies")} == {"k1", "k2"}
    publish_step(tmp_path, "prod", T0 + MIN, T0 + 2 * MIN, {"anomalies": [
        {**_anomaly("k1", T0, T0 + MIN, T0 + 2 * MIN), "detail": "withdrawn: test", "withdrawn": True},
        {**_anomaly("k2", T0, None, T0 + 2 * MIN), "withdrawn": False}]})
    got = results.current_events(tmp_path, "anomalies")
    assert [(r["key"], r["end_ts"], r["withdrawn"]) for r in got] == [("k2", None, False)]


_T = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(("rows", "expected"), [
    # written open, later closed: the later (closed) row is current
    ([("open", 1), ("closed", 2)], "closed"),
    # the contract is "latest as_of_ts wins", even over a closed row written earlier
    ([("closed", 1), ("open", 2)], "open"),
    # same as_of_ts (or none at all): closed wins, a window or an anomaly never reopens
    ([("closed", 1), ("open", 1)], "closed"),
    ([("open", None), ("closed", None)], "closed"),
    # a row with as_of_ts beats one without
    ([("open", 2), ("closed", None)], "open"),
])
def test_current_rows(rows: list[tuple[str, int | None]], expected: str) -> None:
    data = [{"key": "k", "state": state, "end_ts": _T if state == "closed" else None,
             "as_of_ts": _T + dt.timedelta(minutes=m) if m is not None else None} for state, m in rows]
    (row,) = results.current_rows(data, lambda r: r["key"])
    assert row["state"] == expected


@pytest.mark.parametrize(("rows", "expected"), [
    # open, then withdrawn by a later step: absent (not resolved)
    ([("open", 1, None), ("closed", 2, True)], None),
    # withdrawn, then reported again by a later step: current again
    ([("open", 1, None), ("closed", 2, True), ("open", 3, False)], "open"),
    # a later step's row wins over an older withdrawn one even when it has no such column
    ([("closed", 2, True), ("open", 3, "absent")], "open"),
    # null or false: not withdrawn
    ([("open", 1, None), ("closed", 2, False)], "closed"),
])
def test_current_rows_leave_out_a_withdrawn_anomaly(rows: list[tuple[str, int, object]],
                                                    expected: str | None) -> None:
    data = [{"key": "k", "state": state, "end_ts": _T if state == "closed" else None,
             "as_of_ts": _T + dt.timedelta(minutes=m), **({} if w == "absent" else {"withdrawn": w})}
            for state, m, w in rows]
    got = results.current_rows(data, lambda r: r["key"])
    assert [r["state"] for r in got] == ([] if expected is None else [expected])


def test_latest_rows_take_the_greatest_time_and_the_later_of_a_tie() -> None:
    rows = [{"g": "a", "ts": 2, "v": 1}, {"g": "a", "ts": 1, "v": 2}, {"g": "a", "ts": 2, "v": 3},
            {"g": "b", "ts": None, "v": 4}]
    assert {k: r["v"] for k, r in results.latest_rows(rows, lambda r: r["g"], "ts").items()} == {"a": 3}


# --------------------------------------------------------------------------------------------
# following a table
# --------------------------------------------------------------------------------------------

def test_tail_reports_new_files_once_after_commit(tmp_path: Path) -> None:
    tail = results.TableTail(tmp_path, "lag_trends")
    assert tail.poll().changed == ()
    publish_step(tmp_path, "prod", T0, T0 + MIN, {"lag_trends": [_trend("g", 0, T0)]})
    first = tail.poll()
    assert [(c.cluster, c.date, len(c.files), c.reset) for c in first.changed] == [("prod", "2026-03-01", 1, False)]
    assert first.newest_mtime is not None
    # not committed (say the read failed): the next poll reports it again
    assert tail.poll().changed == first.changed
    tail.commit(first)
    assert tail.poll().changed == ()
    publish_step(tmp_path, "prod", T0 + MIN, T0 + 2 * MIN, {"lag_trends": [_trend("g", 0, T0 + MIN)]})
    # a step published but not checkpointed is not new yet
    publish_step(tmp_path, "prod", T0 + 2 * MIN, T0 + 3 * MIN, {"lag_trends": [_trend("g", 0, T0 + 2 * MIN)]},
                 checkpoint=False)
    second = tail.poll()
    (change,) = second.changed
    assert not change.reset
    assert _names(list(change.files)) == _names(results.list_files(tmp_path, "lag_trends"))[1:2]
    tail.commit(second)


def test_tail_reports_a_replaced_folder_and_a_gone_one(tmp_path: Path) -> None:
    import shutil

    publish_step(tmp_path, "prod", T0, T0 + 3 * MIN, {"lag_trends": [_trend("g", 0, T0 + i * MIN) for i in range(3)]})
    tail = results.TableTail(tmp_path, "lag_trends")
    tail.commit(tail.poll())
    assert tail.folders() == [("prod", "2026-03-01"), ("prod", "2026-03-02")]
    # a batch rewrites the first day: the folder's earlier files changed, all its files are given
    publish_batch_rows(tmp_path, "prod", T0.date(), T0.date(), {"lag_trends": [_trend("g", 0, T0, lag=1)]})
    changes = tail.poll()
    (change,) = changes.changed
    assert (change.date, change.reset, _names(list(change.files))) == (
        "2026-03-01", True, _names(results.list_files(tmp_path, "lag_trends", since=T0.date(), until=T0.date())))
    tail.commit(changes)
    # retention deletes that day: it is gone
    shutil.rmtree(tmp_path / "lag_trends" / "cluster=prod" / "date=2026-03-01")
    changes = tail.poll()
    assert (changes.changed, changes.gone) == ((), (("prod", "2026-03-01"),))
    tail.commit(changes)
    assert tail.folders() == [("prod", "2026-03-02")]
