"""Provisional steps (``pre-<from>-<to>-…``): visible while they start at the checkpoint's
watermark and the provisional marker names them; replaced at once by the next provisional step
or by the full step that moves the watermark; followed apart by :class:`TableTail`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.results_steps import publish_provisional_step, publish_step

from lagscope import results
from lagscope.errors import LakeError
from lagscope.results import PublishState

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
MIN = dt.timedelta(minutes=1)
S = dt.timedelta(seconds=1)


def _ms(t: dt.datetime) -> int:
    return int(t.timestamp() * 1000)


def _status(group: str, ts: dt.datetime, status: str) -> dict[str, Any]:
    return {"eval_ts": ts, "group_id": group, "topic": None, "partition": None, "status": status,
            "burrow_status": status, "reason": "", "lag": 0, "lag_seconds": 0.0}


def _anomaly(key: str, start: dt.datetime, end: dt.datetime | None, as_of: dt.datetime,
             severity: str = "critical") -> dict[str, Any]:
    return {"group_id": "g", "topic": "t", "partition": 0, "kind": "stall", "start_ts": start, "end_ts": end,
            "severity": severity, "magnitude": 1.0, "unit": "s", "detail": "", "key": key, "as_of_ts": as_of}


def _advice(group: str, as_of: dt.datetime, rule: str) -> dict[str, Any]:
    return {"group_id": group, "rule": rule, "setting": "session.timeout.ms", "current_value": "6000",
            "suggested": "45000", "confidence": "high", "evidence": "", "expected_effect": "",
            "as_of_ts": as_of}


# --------------------------------------------------------------------------------------------
# visibility of one folder's names
# --------------------------------------------------------------------------------------------

INC = "inc-1000-2000-00000.parquet"       # the full step over [1 s, 2 s): the watermark is 2 s
PRE_OLD = "pre-2000-2500-00000.parquet"   # a provisional step from the watermark
PRE_NEW = "pre-2000-2800-00000.parquet"   # the one after it
PRE_STALE = "pre-1000-1900-00000.parquet"  # one from the watermark before


@pytest.mark.parametrize(("state", "expected"), [
    # no checkpoint, or no marker: no provisional file is visible
    (PublishState(), []),
    (PublishState(watermark_ms=2000), [INC]),
    # the marker names the newer one: the older is hidden, even before it is deleted
    (PublishState(watermark_ms=2000, provisional=(2000, 2800)), [INC, PRE_NEW]),
    # the newer one's files are being moved in, its marker not written yet: the older one shows
    (PublishState(watermark_ms=2000, provisional=(2000, 2500)), [INC, PRE_OLD]),
    # a full step moved the watermark past them: none, whatever the marker says
    (PublishState(watermark_ms=3000, provisional=(2000, 2800)), [INC]),
    # a marker that names a step from another watermark (a stale one left before the full step)
    (PublishState(watermark_ms=2000, provisional=(1000, 1900)), [INC]),
])
def test_provisional_visibility(state: PublishState, expected: list[str]) -> None:
    names = sorted([INC, PRE_OLD, PRE_NEW, PRE_STALE])
    assert sorted(results.visible(names, state)) == sorted(expected)


def test_a_provisional_name_is_its_own_kind() -> None:
    assert results.pre_tag(T0, T0 + 30 * S) == f"pre-{_ms(T0)}-{_ms(T0 + 30 * S)}"
    assert results.is_provisional(PRE_OLD)
    assert not results.is_provisional(INC)
    # of a table every step rewrites whole, the visible provisional step is the newest
    files = [Path(INC), Path(PRE_NEW), Path("batch-2026-03-01-2026-03-01-aaaa0000-00000.parquet")]
    assert [f.name for f in results.newest_step_files(files)] == [PRE_NEW, files[2].name]


def test_an_unreadable_provisional_marker_is_one_error(tmp_path: Path) -> None:
    publish_step(tmp_path, "prod", T0, T0 + MIN, {"status": [_status("g", T0, "OK")]})
    (tmp_path / "_state" / "provisional.json").write_text(json.dumps({"from_ms": "x"}))
    with pytest.raises(LakeError, match="provisional marker"):
        results.read_publish_state(tmp_path)


# --------------------------------------------------------------------------------------------
# publishing: provisional steps replace each other, the full step replaces them
# --------------------------------------------------------------------------------------------

def _pre_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("pre-*.parquet"))


def test_provisional_steps_replace_each_other_and_the_full_step_replaces_them(tmp_path: Path) -> None:
    w = T0 + MIN
    publish_step(tmp_path, "prod", T0, w, {"status": [_status("g", T0, "OK")],
                                           "anomalies": [_anomaly("a1", T0, T0 + 10 * S, w)]})
    cp = (tmp_path / "_state" / "checkpoint.json").read_text()
    # a provisional step over the minute in progress: its rows show at once
    publish_provisional_step(tmp_path, "prod", w, w + 20 * S, {
        "status": [_status("g", w, "WARN")], "anomalies": [_anomaly("a2", w + 5 * S, None, w + 20 * S)]})
    assert sorted(r["status"] for r in results.read(tmp_path, "status").to_pylist()) == ["OK", "WARN"]
    assert {r["key"] for r in results.current_events(tmp_path, "anomalies")} == {"a1", "a2"}
    # the checkpoint did not move
    assert (tmp_path / "_state" / "checkpoint.json").read_text() == cp
    # the next provisional step replaces it (its stall is critical now, the status STALL)
    publish_provisional_step(tmp_path, "prod", w, w + 40 * S, {
        "status": [_status("g", w, "STALL")], "anomalies": [_anomaly("a2", w + 5 * S, None, w + 40 * S)]})
    assert sorted(r["status"] for r in results.read(tmp_path, "status").to_pylist()) == ["OK", "STALL"]
    assert [r["as_of_ts"] for r in results.current_events(tmp_path, "anomalies") if r["key"] == "a2"] == [
        w + 40 * S]
    # the older one's files are deleted (cleanup), the newer one's kept
    assert all(n.startswith(f"pre-{_ms(w)}-{_ms(w + 40 * S)}-") for n in _pre_files(tmp_path))
    # the full step over the minute: its rows replace the provisional ones at once, which go
    publish_step(tmp_path, "prod", w, w + MIN, {
        "status": [_status("g", w, "WARN")], "anomalies": [_anomaly("a2", w + 5 * S, None, w + MIN, "warning")]})
    assert sorted(r["status"] for r in results.read(tmp_path, "status").to_pylist()) == ["OK", "WARN"]
    (a2,) = [r for r in results.current_events(tmp_path, "anomalies") if r["key"] == "a2"]
    assert (a2["severity"], a2["as_of_ts"]) == ("warning", w + MIN)
    assert _pre_files(tmp_path) == []


def test_a_provisional_step_left_after_the_full_step_is_hidden(tmp_path: Path) -> None:
    w = T0 + MIN
    publish_step(tmp_path, "prod", T0, w, {"status": [_status("g", T0, "OK")]})
    publish_provisional_step(tmp_path, "prod", w, w + 30 * S, {"status": [_status("g", w, "STALL")]})
    # the full step's checkpoint moved, the cleanup did not run (a crash): nothing provisional shows
    publish_step(tmp_path, "prod", w, w + MIN, {"status": [_status("g", w, "OK")]}, checkpoint=False)
    from lagscope.analytics.io import Checkpoint, write_checkpoint

    write_checkpoint(tmp_path, Checkpoint(watermark=(w + MIN).isoformat(), version="v-test"))
    assert _pre_files(tmp_path) != []
    assert sorted(r["status"] for r in results.read(tmp_path, "status").to_pylist()) == ["OK", "OK"]


def test_a_provisional_step_in_a_folder_it_did_not_write_before(tmp_path: Path) -> None:
    # the older provisional step wrote an anomaly the newer one does not find: it is gone at once
    w = T0 + MIN
    publish_step(tmp_path, "prod", T0, w, {"status": [_status("g", T0, "OK")]})
    publish_provisional_step(tmp_path, "prod", w, w + 20 * S, {"anomalies": [_anomaly("a3", w, None, w + 20 * S)]})
    assert [r["key"] for r in results.current_events(tmp_path, "anomalies")] == ["a3"]
    publish_provisional_step(tmp_path, "prod", w, w + 40 * S, {"status": [_status("g", w, "OK")]})
    assert results.current_events(tmp_path, "anomalies") == []


def test_current_advice_takes_the_provisional_step(tmp_path: Path) -> None:
    w = T0 + MIN
    publish_step(tmp_path, "prod", T0, w, {"advice": [_advice("g", w, "session_timeout_crash")]})
    assert [r["rule"] for r in results.current_advice(tmp_path)] == ["session_timeout_crash"]
    publish_provisional_step(tmp_path, "prod", w, w + 30 * S, {"advice": [_advice("g", w + 30 * S, "restart_storm")]})
    assert [r["rule"] for r in results.current_advice(tmp_path)] == ["restart_storm"]
    # a provisional step without advice: the cluster has none now
    publish_provisional_step(tmp_path, "prod", w, w + 40 * S, {"status": [_status("g", w, "OK")]})
    assert results.current_advice(tmp_path) == []


# --------------------------------------------------------------------------------------------
# following a table
# --------------------------------------------------------------------------------------------

def test_tail_follows_full_steps_and_reports_provisional_files_apart(tmp_path: Path) -> None:
    w = T0 + MIN
    tail = results.TableTail(tmp_path, "status")
    publish_step(tmp_path, "prod", T0, w, {"status": [_status("g", T0, "OK")]})
    first = tail.poll()
    (change,) = first.changed
    assert (len(change.files), change.provisional) == (1, ())
    tail.commit(first)
    publish_provisional_step(tmp_path, "prod", w, w + 20 * S, {"status": [_status("g", w, "WARN")]})
    # a provisional step: no new file read for good, its files apart
    second = tail.poll()
    (change,) = second.changed
    assert (change.files, change.reset) == ((), False)
    assert [p.name for p in change.provisional] == _pre_files(tmp_path)
    tail.commit(second)
    # the next one replaces it: no reset (the folder's read files did not change), the new files apart
    publish_provisional_step(tmp_path, "prod", w, w + 40 * S, {"status": [_status("g", w, "STALL")]})
    third = tail.poll()
    (change,) = third.changed
    assert (change.files, change.reset) == ((), False)
    assert [p.name for p in change.provisional] == _pre_files(tmp_path)
    assert all(f"-{_ms(w + 40 * S)}-" in p.name for p in change.provisional)
    tail.commit(third)
    # the full step: its file is new, nothing provisional is left, no reset
    publish_step(tmp_path, "prod", w, w + MIN, {"status": [_status("g", w, "WARN")]})
    fourth = tail.poll()
    (change,) = fourth.changed
    assert (len(change.files), change.reset, change.provisional) == (1, False, ())
    assert change.files[0].name.startswith("inc-")
    tail.commit(fourth)
    assert tail.poll().changed == ()


def test_tail_reports_a_folder_with_only_provisional_files(tmp_path: Path) -> None:
    w = T0 + MIN
    tail = results.TableTail(tmp_path, "anomalies")
    publish_step(tmp_path, "prod", T0, w, {"status": [_status("g", T0, "OK")]})
    publish_provisional_step(tmp_path, "prod", w, w + 20 * S, {"anomalies": [_anomaly("a", w, None, w + 20 * S)]})
    changes = tail.poll()
    (change,) = changes.changed
    assert (change.files, len(change.provisional)) == ((), 1)
    tail.commit(changes)
    assert tail.folders() == []
    publish_step(tmp_path, "prod", w, w + MIN, {"status": [_status("g", w, "OK")]})
    assert tail.poll().changed == ()
