"""A step over Spark DataFrames built by the tests' builders: the frames go to Arrow, through
:func:`lagscope.analytics.step.run_step` (the passes Spark runs per bucket), and the result
tables come back as DataFrames for the tests' Spark assertions. The state stays Arrow (the next
step takes it as it is)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from lagscope.analytics import step
from lagscope.analytics.io import spark_schema
from lagscope.config import AnalyticsConfig


@dataclass
class StepResult:
    tables: dict[str, DataFrame]
    state: dict[str, pa.Table]
    arrow: dict[str, pa.Table]

    def release(self) -> None:
        """Nothing is held (kept so that the tests read as before)."""


def _arrow(df: DataFrame | None, table: str) -> pa.Table | None:
    if df is None:
        return None
    got = df.toArrow()
    return got.select([c for c in step.READ_COLUMNS[table] if c in got.column_names])


def run_step(offsets: DataFrame, members: DataFrame, *, settings: AnalyticsConfig,
             state: dict[str, pa.Table] | None = None,
             commits: DataFrame | None = None, group_events: DataFrame | None = None,
             as_of: dt.datetime | None = None) -> StepResult:
    spark = offsets.sparkSession
    off, mem = _arrow(offsets, "offsets"), _arrow(members, "members")
    assert off is not None
    assert mem is not None
    done = step.run_step(step.StepInputs(offsets=off, members=mem, commits=_arrow(commits, "commits"),
                                         group_events=_arrow(group_events, "group_events"), state=state or {}),
                         settings=settings, as_of=as_of or _step_end(off, state or {}))
    return StepResult(tables={name: _frame(spark, name, t) for name, t in done.tables.items()}, state=done.state,
                      arrow=done.tables)


def _step_end(offsets: pa.Table, state: dict[str, pa.Table]) -> dt.datetime:
    """Where an incremental step over ``offsets`` would end (its ``until``): the minute after its
    newest sweep, else after the carried state's newest row (now, without either). Not the clock:
    a step forgets a partition silent for longer than the horizon before its end, and these
    tests' sweeps are from 2026-01-01."""
    carried = state.get("series")
    for tbl, col in ((offsets, "sweep_ts"), (carried, "ts")):
        if tbl is not None and tbl.num_rows and col in tbl.column_names:
            newest = pc.max(tbl.column(col)).as_py()
            if newest is not None:
                return newest.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)
    return dt.datetime.now(dt.UTC)


def _frame(spark: SparkSession, name: str, table: pa.Table) -> DataFrame:
    """A result table as a DataFrame in the table's schema (plus ``cluster`` and ``date``)."""
    schema = spark_schema(name)
    cols = [f.name for f in schema.fields]
    if not table.num_rows:
        return spark.createDataFrame([], schema)
    return spark.createDataFrame(table.select(cols), schema)
