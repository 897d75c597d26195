"""A rolling restart of static members is no rebalance storm (lagscope.analytics.groups): each
restart is a ``static_member_bounce`` window (the broker replaces the member in place, the
generation stays), which the storm count leaves out. One whole step (run_step), no Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from analytics_builders import at, members_rows
from rebalance_cases import offsets

from lagscope.analytics.step import StepInputs, run_step
from lagscope.config import AnalyticsConfig
from lagscope.schema import TABLES

S = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30)


def _lake(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


def _step(ids: list[tuple[int, str]]) -> tuple[list[str], list[str]]:
    """Member i2's member id from each time on (``ids``: (t, id)); m1 (i1) stays. The step's
    rebalance causes and anomaly kinds."""
    sweeps = []
    for t in range(0, 61, 2):
        m2 = [mid for since, mid in ids if since <= t][-1]
        sweeps.append((t, "Stable", 1, [("m1", "i1", [0]), (m2, "i2", [1])]))
    owners = {0: [(0, "m1")], 1: list(ids)}
    out = run_step(StepInputs(offsets=_lake("offsets", offsets("g", 60, owners)),
                              members=_lake("members", members_rows(sweeps)), commits=None, group_events=None,
                              state={}), settings=S, as_of=at(1000), with_state=False)
    return ([r["cause"] for r in out.tables["rebalances"].to_pylist()],
            [r["kind"] for r in out.tables["anomalies"].to_pylist()])


def test_three_static_bounces_in_a_minute_are_no_storm() -> None:
    causes, kinds = _step([(0, "m2"), (10, "m3"), (20, "m4"), (30, "m5")])
    assert causes == ["static_member_bounce"] * 3
    assert "rebalance_storm" not in kinds
