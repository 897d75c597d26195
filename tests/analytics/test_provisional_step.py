"""Provisional steps on Spark (:func:`lagscope.analytics.job.run_provisional`): a full step, then
provisional steps over the minutes in progress publish their findings at once without moving the
checkpoint or writing state, and the next full step replaces them, leaving the results a run of
full steps alone would have written."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from analytics_builders import at, write_stall_lake
from pyspark.sql import SparkSession

from lagscope import results as result_tables
from lagscope.alerts.findings import findings_from_results
from lagscope.analytics.job import run_incremental, run_provisional
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SETTINGS = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=30, stop_after_s=30))


def _tables(results: Path) -> dict[str, list[dict[str, Any]]]:
    """Every result table as a reader sees it (events: their current rows), sorted."""
    out: dict[str, list[dict[str, Any]]] = {}
    for table in ("lag_trends", "status", "advice"):
        out[table] = sorted(result_tables.read(results, table).to_pylist(), key=repr)
    for table in ("anomalies", "rebalances"):
        out[table] = sorted(result_tables.current_events(results, table), key=repr)
    return out


def _state(results: Path) -> tuple[str, list[str]]:
    return ((results / "_state" / "checkpoint.json").read_text(),
            sorted(p.name for p in (results / "_state").glob("v-*")))


def _stalls(results: Path) -> list[dict[str, Any]]:
    return [r for r in result_tables.current_events(results, "anomalies") if r["kind"] == "stall"]


@pytest.mark.timeout(1800)
def test_provisional_steps_publish_at_once_and_the_full_step_replaces_them(spark: SparkSession,
                                                                             tmp_path: Path) -> None:
    lake, res, ref = tmp_path / "lake", tmp_path / "results", tmp_path / "reference"
    write_stall_lake(lake)
    run_incremental(spark, lake, res, settings=SETTINGS, since=at(0), until=at(60))
    before = _state(res)
    assert _stalls(res) == []
    # the minute in progress, 75 s into it: the stall (from t = 90, 30 s to count) shows now
    written = run_provisional(spark, lake, res, settings=SETTINGS, until=at(135))
    assert written.get("anomalies", 0) >= 1
    assert _state(res) == before  # no state, no checkpoint
    assert json.loads((res / "_state" / "provisional.json").read_text()) == {
        "from_ms": int(at(60).timestamp() * 1000), "to_ms": int(at(135).timestamp() * 1000)}
    (stall,) = _stalls(res)
    assert (stall["partition"], stall["end_ts"], stall["as_of_ts"]) == (1, None, at(135))
    status = [r for r in result_tables.read(res, "status").to_pylist() if r["partition"] == 1]
    assert max(r["eval_ts"] for r in status) > at(60)  # rows of the minutes after the watermark ...
    trends = result_tables.read(res, "lag_trends").to_pylist()
    assert max(r["window_start"] for r in trends) == at(120)  # ... the one in progress included
    # the alerts see it
    found = [f for f in findings_from_results(res, at(135)) if f.source == "anomalies" and f.kind == "stall"]
    assert [(f.state, f.partition) for f in found] == [("firing", 1)]
    # a later provisional step replaces it: the stall has ended (caught up from t = 160)
    run_provisional(spark, lake, res, settings=SETTINGS, until=at(175))
    (stall,) = _stalls(res)
    assert stall["as_of_ts"] == at(175)
    assert stall["end_ts"] is not None
    pre = sorted(p.name for p in res.rglob("pre-*.parquet"))
    assert pre
    assert all(n.startswith(result_tables.pre_tag(at(60), at(175)) + "-") for n in pre)
    assert _state(res) == before
    # the full step over the minutes: the provisional rows go, the results are those of full
    # steps alone (the same steps on a results folder that never had a provisional one)
    run_incremental(spark, lake, res, settings=SETTINGS, until=at(180))
    assert list(res.rglob("pre-*.parquet")) == []
    run_incremental(spark, lake, ref, settings=SETTINGS, since=at(0), until=at(60))
    run_incremental(spark, lake, ref, settings=SETTINGS, until=at(180))
    assert _tables(res) == _tables(ref)
    assert _state(res)[0] == _state(ref)[0].replace(_state(ref)[1][0], _state(res)[1][0])


def test_no_provisional_step_without_a_checkpoint_or_past_it(spark: SparkSession, tmp_path: Path) -> None:
    lake, res = tmp_path / "lake", tmp_path / "results"
    write_stall_lake(lake)
    assert run_provisional(spark, lake, res, settings=SETTINGS, until=at(30)) == {}
    run_incremental(spark, lake, res, settings=SETTINGS, since=at(0), until=at(60))
    assert run_provisional(spark, lake, res, settings=SETTINGS, until=at(60)) == {}
    assert not (res / "_state" / "provisional.json").exists()
    assert run_incremental(spark, lake, res, settings=SETTINGS, until=at(60) + dt.timedelta(seconds=30)) == {}
