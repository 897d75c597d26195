"""Lag growth in a provisional step: the minute in progress has its rows, but it is no minute of
a lag growth (its lag so far is a moment's sample, not the lag at its end; the demo's caught-up
groups fired and resolved lag_growth warnings at every provisional step). A full step over the
same sweeps, the minute whole, judges it as before."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from analytics_builders import at, members_rows, offsets_rows

from lagscope.analytics import step
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.schema import TABLES

S = AnalyticsConfig(rules=AnalyticsRulesConfig(growth_min_minutes=1))


def _table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema).select(step.READ_COLUMNS[name])


def _growth(lags: dict[int, int], until: float, *, partial: bool) -> list[dict[str, Any]]:
    """The lag_growth rows of one step over sweeps every 10 s up to ``until`` (the producers write
    10 messages/s; ``lags``: the lag from that second on)."""
    rows, lag = [], 0
    for t in range(0, int(until), 10):
        lag = lags.get(t, lag)
        rows.append((t, 10 * t - lag, 10 * t))
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
