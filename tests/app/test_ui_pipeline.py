"""Every page on a lake the real pipeline produced: simulator scenario → collector (real Kafka)
→ analytics (Spark). See ui_pipeline_lake.py for the scenario."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import ui_pipeline_lake as pl
from streamlit.testing.v1 import AppTest

from lagscope.app import ENV_LAKE, ENV_RESULTS, MAIN_SCRIPT

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def open_app(monkeypatch: pytest.MonkeyPatch, ui_pipeline: pl.PipelineLake):  # type: ignore[no-untyped-def]
    monkeypatch.setenv(ENV_LAKE, str(ui_pipeline.lake))
    monkeypatch.setenv(ENV_RESULTS, str(ui_pipeline.results))

    def open_(**params: object) -> AppTest:
        at = AppTest.from_file(str(MAIN_SCRIPT), default_timeout=60)
        for name, value in params.items():
            at.query_params[name] = str(value)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert not at.error, [e.value for e in at.error]
        return at
    return open_


def _metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def _table(at: AppTest, *columns: str):  # type: ignore[no-untyped-def]
    return next(d.value for d in at.dataframe if set(columns) <= set(d.value.columns))


def test_overview(open_app, ui_pipeline: pl.PipelineLake) -> None:  # type: ignore[no-untyped-def]
    at = open_app()
    assert _metrics(at)["Groups"] == "2"
    assert set(_table(at, "group_id", "status")["group_id"]) == {ui_pipeline.readers, ui_pipeline.replay}
    rebalances = _table(at, "group_id", "cause", "start_ts")
    # the crash, and nothing else but, where the records show them, the joins as the groups formed
    # (members joining one after another, or a leader rejoining because its metadata changed while it
    # assigned: every generation change is a rebalance)
    assert ui_pipeline.readers in set(rebalances["group_id"])
    assert set(rebalances["group_id"]) <= {ui_pipeline.readers, ui_pipeline.replay}
    assert rebalances["cause"].astype(str).str.contains("session").sum() == 1
    replay = rebalances[rebalances["group_id"] == ui_pipeline.replay]
    rewind_at = pd.Timestamp(ui_pipeline.t0 + pl.REWIND_AT, unit="s", tz="UTC")
    # replay's windows are its formation only: its rewind is no rebalance
    assert (pd.to_datetime(replay["start_ts"], utc=True) < rewind_at).all(), replay


def test_group(open_app, ui_pipeline: pl.PipelineLake) -> None:  # type: ignore[no-untyped-def]
    at = open_app(page="group", group=ui_pipeline.readers)
    assert at.title[0].value == "Group"
    partitions = _table(at, "lag_last", "catchup_eta_s")
    assert sorted(partitions["partition"]) == [0, 1, 2, 3]
    assert set(partitions["topic"]) == {ui_pipeline.events}
    lag = next(c for c in at.get("plotly_chart") if "chart_lag" in c.proto.id)
    # the crash's rebalance window shaded (and a join as the group formed, where the records show it)
    assert 1 <= len(json.loads(lag.proto.spec)["layout"]["shapes"]) <= 2


def test_rebalance(open_app, ui_pipeline: pl.PipelineLake) -> None:  # type: ignore[no-untyped-def]
    at = open_app(page="rebalance", group=ui_pipeline.readers)
    # the crash's window (the group's formation may add a window from the records before it)
    box = at.selectbox(key="w_rebalance")
    box.select_index(next(i for i, o in enumerate(box.options) if "session" in o)).run()
    m = _metrics(at)
    assert m["Cause"] == "session timeout"  # c2 was SIGKILLed: no LeaveGroup, its 3 s session expired
    roster = _table(at, "member_id", "change")
    assert sorted(roster["change"]) == ["left", "stayed"]
    assert roster.loc[roster["change"] == "left", "member_id"].item().startswith(f"{ui_pipeline.readers}-c2")
    ownership = _table(at, "owner_before", "moved")
    assert int(ownership["moved"].sum()) == 2  # c2's two partitions went to c1
    assert ownership["owner_after"].nunique() == 1


def test_partition(open_app, ui_pipeline: pl.PipelineLake) -> None:  # type: ignore[no-untyped-def]
    at = open_app(page="partition", group=ui_pipeline.replay, topic=ui_pipeline.audit, partition=0)
    m = _metrics(at)
    assert m["Rewinds"] == "1"
    # the scenario's rewind: the consumer seeks 50 back from its position; the commit before it
    # may trail the position by a few messages, so the commit stream proves 50 less that trail
    assert 40 <= int(m["Messages reprocessed"]) <= 50
    assert any("commits table" in c.value for c in at.caption)  # exact, from the __consumer_offsets tail


def test_delivery(open_app, ui_pipeline: pl.PipelineLake) -> None:  # type: ignore[no-untyped-def]
    at = open_app(page="delivery", group=ui_pipeline.replay, topic=ui_pipeline.audit)
    # the scenario's rewind: 50 messages back from the position on each partition of audit, each
    # timed by its commit (the commit before it may trail the position by a few: 40–50 proven)
    findings = _table(at, "kind", "cause", "bound", "reprocessed")
    n = len(findings)
    assert n >= 1
    rows = findings[["kind", "cause", "bound", "reprocessed"]].values.tolist()
    assert [r[:3] for r in rows] == [["rewind", "rewind", "exact"]] * n
    assert all(40 <= r[3] <= 50 for r in rows)
    m = _metrics(at)
    total = sum(r[3] for r in rows)
    assert (m["Messages processed twice"], m["Messages lost"], m["Exact"]) == (f"{total:,}", "0", f"{n} of {n}")
    # the commits around the newest one, from the commit stream: the rewind among them
    assert any("Every commit from the commit stream" in c.value for c in at.caption)
    steps = _table(at, "ts", "committed_offset", "delta", "reprocessed")
    assert steps["reprocessed"].between(40, 50).sum() == 1


def test_compare(open_app, ui_pipeline: pl.PipelineLake) -> None:  # type: ignore[no-untyped-def]
    at = open_app(page="compare", group=ui_pipeline.readers)
    summary = _table(at, "window", "rebalances")
    # the run is in window A (the crash, and a join as the group formed where the records show it);
    # B, before it, is empty
    assert summary["rebalances"].tolist() in ([1, 0], [2, 0])
