"""The state a step hands to the next (lagscope.analytics.step.run_step over Arrow, no Spark)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from lagscope.analytics import step
from lagscope.config import AnalyticsConfig
from lagscope.schema import MEMBERS, OFFSETS

T0 = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


def _with_cluster(table: pa.Table, schema: pa.Schema, columns: list[str]) -> pa.Table:
    return table.append_column("cluster", pa.array(["c1"] * table.num_rows)).cast(
        schema.append(pa.field("cluster", pa.string()))).select(columns)


def test_a_step_without_any_owner_carries_null_owners() -> None:
    # every partition of the step unassigned (an Empty group): the carried rows have no owner,
    # and the next step reads them (the owner names were looked up in an empty list)
    rows = pa.Table.from_pylist([
        {"sweep_ts": T0 + dt.timedelta(seconds=10 * i), "group_id": "g", "topic": "t", "partition": 0,
         "committed_offset": 5, "log_end_offset": 9 + i, "last_stable_offset": 9 + i, "lag": 4 + i,
         "lag_basis": "hw"} for i in range(3)], schema=OFFSETS.schema)
    offsets = _with_cluster(rows, OFFSETS.schema, step.READ_COLUMNS["offsets"])
    members = _with_cluster(MEMBERS.schema.empty_table(), MEMBERS.schema, step.READ_COLUMNS["members"])
    first = step.run_step(step.StepInputs(offsets=offsets, members=members, commits=None, group_events=None,
                                          state={}), settings=AnalyticsConfig(), as_of=T0)
    assert first.state["series"].column("owner").to_pylist() == [None]
    later = offsets.set_column(offsets.column_names.index("sweep_ts"), "sweep_ts",
                               pa.array([T0 + dt.timedelta(minutes=1)] * 3, OFFSETS.schema.field("sweep_ts").type))
    second = step.run_step(step.StepInputs(offsets=later.slice(0, 1), members=members, commits=None,
                                           group_events=None, state=first.state), settings=AnalyticsConfig(), as_of=T0)
    assert second.state["series"].column("owner").to_pylist() == [None]
