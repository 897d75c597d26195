"""Lag growth in a provisional step: the minute in progress has its rows, but it is no minute of
a lag growth (its lag so far is a moment's sample, not the lag at its end; the demo's caught-up
groups fired and resolved lag_growth warnings at every provisional step). A full step over the
same sweeps, the minute whole, judges it as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from analytics_builders import at, members_rows, offsets_rows
from pyspark.sql import SparkSession

from lagscope.analytics import step
from lagscope.analytics.job import run_batch
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.lake import write_rows
from lagscope.results import read
from lagscope.schema import MEMBERS, OFFSETS, TABLES

S = AnalyticsConfig(rules=AnalyticsRulesConfig(growth_min_minutes=1))


def _table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema).select(step.READ_COLUMNS[name])


def _sweeps(lags: dict[int, int], until: float) -> list[tuple[int, int, int]]:
    """Sweeps every 10 s up to ``until`` (the producers write 10 messages/s; ``lags``: the lag from
    that second on)."""
    rows, lag = [], 0
    for t in range(0, int(until), 10):
        lag = lags.get(t, lag)
        rows.append((t, 10 * t - lag, 10 * t))
    return rows


def _growth(lags: dict[int, int], until: float, *, partial: bool) -> list[dict[str, Any]]:
    """The lag_growth rows of one step over :func:`_sweeps`."""
    rows = _sweeps(lags, until)
    offsets = _table("offsets", offsets_rows(rows))
    members = _table("members", members_rows([(t, "Stable", 1, [("m1", None, [0])]) for t, *_ in rows]))
    done = step.run_step(step.StepInputs(offsets=offsets, members=members, commits=None, group_events=None,
                                         state={}), settings=S, as_of=at(until),
                         with_state=False, partial_from=at(until) if partial else None)
    return [r for r in done.tables["anomalies"].to_pylist() if r["kind"] == "lag_growth"]


def test_the_minute_in_progress_never_starts_a_lag_growth() -> None:
    # caught up (lag 5) for two minutes; 35 s into the third, a poll's worth waits (lag 40)
    lags = {0: 5, 130: 40}
    assert _growth(lags, 135.0, partial=True) == []
    # the same minute whole, its lag at its end still 40: it grew
    (grown,) = _growth(lags, 180.0, partial=False)
    assert (grown["start_ts"], grown["end_ts"]) == (at(120), None)


def test_the_minute_in_progress_never_ends_a_lag_growth() -> None:
    # the lag grew over the second minute (5 → 300); 25 s into the third it is down to 100 for the
    # moment: the growth is open as the full step saw it, not ended by a moment's sample
    lags = {0: 5, 110: 300, 140: 100}
    (grown,) = _growth(lags, 145.0, partial=True)
    assert (grown["start_ts"], grown["end_ts"]) == (at(60), None)
    (ended,) = _growth(lags, 180.0, partial=False)
    assert (ended["start_ts"], ended["end_ts"]) == (at(60), at(120))


@pytest.mark.spark
def test_a_batch_over_today_judges_the_minute_in_progress_as_partial(spark: SparkSession, tmp_path: Path) -> None:
    # `lagscope analyze` over a day not over yet: the lake's last minute is the one in progress
    # (swept to 130 s, the clock at 135 s), a poll's worth waiting for the moment. The batch judges
    # it as a provisional step does: no lag growth. The same lake analysed once that minute is
    # over (the clock a day later) judges its last sweep as the minute's end: it grew
    drop = {"cluster", "date"}
    sweeps = _sweeps({0: 5, 130: 40}, 135.0)
    for table, rows in ((OFFSETS, offsets_rows(sweeps)),
                        (MEMBERS, members_rows([(t, "Stable", 1, [("m1", None, [0])]) for t, *_ in sweeps]))):
        write_rows(tmp_path / "lake", table, "c", [{k: v for k, v in r.items() if k not in drop} for r in rows])
    day = at(0).date()

    def growth(now: Any, results: Path) -> list[Any]:
        run_batch(spark, tmp_path / "lake", results, since=day, until=day, settings=S, progress=False, now=now)
        return [(r["start_ts"], r["end_ts"]) for r in read(results, "anomalies").to_pylist()
                if r["kind"] == "lag_growth"]

    assert growth(at(135), tmp_path / "today") == []
    assert growth(at(86_400), tmp_path / "later") == [(at(120), None)]
