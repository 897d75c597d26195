"""Steps through the passes as the job runs them (for the rule tests: their expectations are
checked on the production path, lagscope.analytics.step over Arrow, as each Spark task runs it)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame
from stepping import run_step

from lagscope.analytics.io import spark_schema
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig


@dataclass
class Step:
    """One step's result tables and the state it hands to the next step."""

    tables: dict[str, DataFrame]
    state: dict[str, pa.Table] = field(default_factory=dict)

    @property
    def anomalies(self) -> DataFrame:
        """The anomalies (:data:`lagscope.analytics.findings.ANOMALY_COLUMNS`)."""
        return self.tables["anomalies"].drop("as_of_ts", "date")

    @property
    def status(self) -> DataFrame:
        """The ``status`` table: the partition rows and their group rows (no ``date``)."""
        return self.tables["status"].drop("date")


def step(offsets: DataFrame, p: AnalyticsRulesConfig, *, state: dict[str, pa.Table] | None = None,
         commits: DataFrame | None = None) -> Step:
    """One step over lake ``offsets`` rows (``commits``: lake ``commits`` rows) seeded by a
    previous step's ``state`` (no member sweeps: the per-partition rules alone)."""
    members = offsets.sparkSession.createDataFrame([], spark_schema("members"))
    done = run_step(offsets, members, settings=AnalyticsConfig(rules=p), state=state, commits=commits)
    return Step(tables=done.tables, state=done.state)
