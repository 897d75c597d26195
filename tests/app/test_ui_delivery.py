"""The Delivery page and what it reads: messages lost and processed twice (lagscope.delivery)
over the synthetic lake (no commit stream, no cause column) and over a small lake with the
commit stream and the cause column."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
import ui_fixture_lake as fx
from streamlit.testing.v1 import AppTest
from test_ui_pages import Open, _opener, metrics, table

from lagscope.app import data, processing
from lagscope.app.params import TimeRange
from lagscope.lake import write_rows
from lagscope.schema import ANOMALIES, COMMITS, OFFSETS, Table

T0 = dt.datetime(2026, 4, 2, 9, 0, tzinfo=dt.UTC)
SKIP_AT = T0 + dt.timedelta(minutes=20)
REWIND_AT = T0 + dt.timedelta(minutes=40)
#: the anomalies table as written before its ``cause`` column
BEFORE_CAUSE = Table("anomalies", pa.schema([f for f in ANOMALIES.schema if f.name != "cause"]), ANOMALIES.doc)


def _anomaly(kind: str, partition: int, start: dt.datetime, end: dt.datetime | None, magnitude: float,
             **extra: Any) -> dict[str, Any]:
    return {"group_id": "orders-svc", "topic": "orders", "partition": partition, "kind": kind, "start_ts": start,
            "end_ts": end, "severity": "critical", "magnitude": magnitude, "unit": "messages", "detail": kind,
            "key": f"{kind}|prod|orders-svc|orders|{partition}|{start.isoformat()}",
            "as_of_ts": T0 + dt.timedelta(hours=1), **extra}


@pytest.fixture(scope="module")
def stream_lake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An hour of sweeps of orders-svc on orders[0..1]; the commit stream of partition 0 (a
    commit every 10 s, 100 messages each, and at SKIP_AT one that jumps 7,000 ahead: an admin
    reset); the anomalies: that skip (commit-timed, exact, cause admin_reset) and a rewind of 300
    on partition 1 seen between two sweeps (a file without the cause column)."""
    root = tmp_path_factory.mktemp("delivery-lake")
    offsets, commits = [], []
    committed = {0: 1_000, 1: 1_000}
    for i in range(0, 3600, 30):
        ts = T0 + dt.timedelta(seconds=i)
        for p in (0, 1):
            committed[p] += 300 + (7_000 if p == 0 and ts == SKIP_AT else 0)
            offsets.append({"sweep_ts": ts, "group_id": "orders-svc", "topic": "orders", "partition": p,
                            "committed_offset": committed[p], "log_start_offset": 0,
                            "log_end_offset": committed[p] + 50, "last_stable_offset": committed[p] + 50,
                            "member_id": "m-a", "group_state": "Stable", "lag": 50})
    offset = 1_000
    for i in range(0, 3600, 10):
        ts = T0 + dt.timedelta(seconds=i)
        offset += 100 + (7_000 if ts == SKIP_AT else 0)
        commits.append({"group_id": "orders-svc", "topic": "orders", "partition": 0, "committed_offset": offset,
                        "commit_ts": ts, "record_ts": ts, "source_partition": 3, "source_offset": i // 10,
                        "metadata": ""})
    write_rows(root, OFFSETS, "prod", offsets)
    write_rows(root, COMMITS, "prod", commits)
    write_rows(root, BEFORE_CAUSE, "prod", [
        _anomaly("rewind", 1, REWIND_AT - dt.timedelta(seconds=30), REWIND_AT, 300.0),
        _anomaly("stall", 1, T0, None, 120.0, unit="s")])
    write_rows(root, ANOMALIES, "prod", [_anomaly("skip", 0, SKIP_AT, SKIP_AT, 7_000.0, cause="admin_reset")])
    return root


@pytest.fixture
def open_app(monkeypatch: pytest.MonkeyPatch, ui_lake: fx.FixtureLake) -> Open:
    return _opener(monkeypatch, ui_lake.root, ui_lake.root)


@pytest.fixture
def open_stream(monkeypatch: pytest.MonkeyPatch, stream_lake: Path) -> Open:
    return _opener(monkeypatch, stream_lake, stream_lake)


WINDOW = TimeRange(T0, T0 + dt.timedelta(hours=1))


def test_delivery_rows_of_both_layouts(stream_lake: Path) -> None:
    con = data.connect()
    rows = data.delivery(con, data.Lake(stream_lake, stream_lake), ["prod"], WINDOW)
    # newest first; the stall counts no message
    assert rows[["kind", "cause", "partition", "lost", "reprocessed", "exact", "bound"]].values.tolist() == [
        ["rewind", "rewind", 1, 0, 300, False, "at_least"],
        ["skip", "admin_reset", 0, 7_000, 0, True, "exact"]]
    assert data.delivery(con, data.Lake(stream_lake, stream_lake), ["prod"], WINDOW, topic="other").empty


def test_delivery_over_time_buckets() -> None:
    rows = pd.DataFrame({"group_id": ["g"] * 3, "topic": ["t"] * 3, "cause": ["admin_reset", "admin_reset", "rewind"],
                         "bucket_ts": pd.to_datetime([T0, T0 + dt.timedelta(seconds=50), T0 + dt.timedelta(minutes=3)],
                                                     utc=True),
                         "lost": [5, 7, 0], "reprocessed": [0, 0, 9], "exact": [True, False, True]})
    out = processing.delivery_over_time(rows, dt.timedelta(minutes=1))
    assert out[["cause", "lost", "reprocessed", "findings", "exact"]].values.tolist() == [
        ["admin_reset", 12, 0, 2, False], ["rewind", 0, 9, 1, True]]
    assert processing.delivery_bucket(dt.timedelta(hours=6)) == dt.timedelta(minutes=8)
    assert processing.delivery_bucket(dt.timedelta(minutes=10)) == dt.timedelta(minutes=1)
    assert processing.summarize_delivery(rows) == processing.DeliverySummary(12, 9, 3, 2)
    assert processing.summarize_delivery(rows.iloc[:0]) == processing.DeliverySummary(0, 0, 0, 0)
    # an upper bound only (a retention loss not proven) is listed, not summed
    bounded = rows.assign(bound=["exact", "at_most", "exact"])
    assert processing.summarize_delivery(bounded) == processing.DeliverySummary(5, 9, 3, 2)


def test_page_over_the_synthetic_lake(open_app: Open, ui_lake: fx.FixtureLake) -> None:
    """No cause column, no commit stream: the kinds' own causes, the sweeps' offsets around."""
    at = open_app(page="delivery", cluster="prod")
    assert at.title[0].value == "Delivery"
    assert at.selectbox(key="w_group").value == "(all groups)"
    m = metrics(at)
    # the rewind exact, the seek (judged by the consumer's pace) an estimate wherever it was timed
    assert (m["Messages lost"], m["Messages processed twice"], m["Findings"], m["Exact"]) == (
        f"{ui_lake.skipped:,}", f"{fx.REWIND_BY:,}", "2", "1 of 2")
    totals = table(at, "group_id", "cause", "lost", "reprocessed", "findings")
    assert sorted(map(tuple, totals[["cause", "lost", "reprocessed"]].values.tolist())) == [
        ("rewind", 0, fx.REWIND_BY), ("seek", ui_lake.skipped, 0)]
    # the newest finding (the skip on orders[2]) is picked; its offsets from the sweeps
    assert at.selectbox(key="w_finding").value.startswith("skip|prod|orders-svc|orders|2|")
    assert any("commit stream is not in the lake" in c.value for c in at.caption)
    steps = table(at, "ts", "committed_offset", "delta")
    # the sweep that saw the jump: the messages skipped plus the 30 s the consumer did process (30/s)
    (jump,) = steps.loc[steps["ts"] == pd.Timestamp(fx.SKIP_AT), "delta"].tolist()
    assert jump == ui_lake.skipped + 30 * fx.SWEEP_S


def test_page_with_the_commit_stream(open_stream: Open) -> None:
    at = open_stream(page="delivery", cluster="prod", group="orders-svc", topic="orders",
                     **{"from": int(T0.timestamp() * 1000), "to": int((T0 + dt.timedelta(hours=1)).timestamp() * 1000)})
    m = metrics(at)
    assert (m["Messages lost"], m["Messages processed twice"], m["Exact"]) == ("7,000", "300", "1 of 2")
    findings = table(at, "kind", "cause", "bound", "start_ts")
    assert findings[["kind", "cause", "bound"]].values.tolist() == [["rewind", "rewind", "at_least"],
                                                                    ["skip", "admin_reset", "exact"]]
    # the rewind's partition has no commit stream: the sweeps' offsets
    assert any("commit stream is not in the lake" in c.value for c in at.caption)
    # pick the skip: every commit of the 4 minutes around it, the jump among them
    skip_key = f"skip|prod|orders-svc|orders|0|{SKIP_AT.isoformat()}"
    at.selectbox(key="w_finding").set_value(skip_key).run()
    assert at.query_params["finding"] in (skip_key, [skip_key])  # the URL names the finding
    assert any("Every commit from the commit stream" in c.value for c in at.caption)
    commits = table(at, "ts", "committed_offset", "delta", "gap_s")
    # a commit every 10 s in [skip − 2 min, skip + 2 min): 24, the first the baseline of the changes
    assert len(commits) == 4 * 60 // 10 - 1
    assert commits["delta"].max() == 7_100
    assert commits.loc[commits["delta"].idxmax(), "ts"] == pd.Timestamp(SKIP_AT)


def test_deep_link_to_a_finding(open_stream: Open) -> None:
    skip_key = f"skip|prod|orders-svc|orders|0|{SKIP_AT.isoformat()}"
    at = open_stream(page="delivery", cluster="prod", finding=skip_key,
                     **{"from": int(T0.timestamp() * 1000), "to": int((T0 + dt.timedelta(hours=1)).timestamp() * 1000)})
    assert at.selectbox(key="w_finding").value == skip_key
    assert any("Every commit from the commit stream" in c.value for c in at.caption)


def test_a_group_without_losses_says_so(open_app: Open) -> None:
    at: AppTest = open_app(page="delivery", cluster="prod", group="billing")
    assert any("no message lost or processed twice for billing" in i.value for i in at.info)
