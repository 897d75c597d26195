"""Steps through the per-key pass, as the job runs them (for the rule tests: their expectations
are checked on the production path, lagscope.analytics.perkey over lagscope.analytics.onepass)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from lagscope.analytics import perkey
from lagscope.analytics.onepass import PassParams
from lagscope.analytics.params import RuleParams
from lagscope.analytics.series import prepare_series


@dataclass
class Step:
    """One step's pass output (stored) and the state it hands to the next step."""

    passed: DataFrame
    state: dict[str, DataFrame] = field(default_factory=dict)

    @property
    def anomalies(self) -> DataFrame:
        return perkey.anomaly_rows(self.passed)

    @property
    def status(self) -> DataFrame:
        return perkey.status_rows(self.passed)

    @property
    def minutes(self) -> DataFrame:
        return perkey.minute_rows(self.passed)


def step(offsets: DataFrame, p: RuleParams, *, state: dict[str, DataFrame] | None = None,
         commits: DataFrame | None = None) -> Step:
    """One step over lake ``offsets`` rows (``commits``: commit records, ``findings.commit_records``)
    seeded by a previous step's ``state``."""
    series = prepare_series(offsets)
    st = state or {}
    passed = perkey.transform_pass(series, st, commits=commits, params=PassParams(
        rules=p, commit_stream=commits is not None)).localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)
    owners = series.select("cluster", "group_id", "owner")
    if st.get("series") is not None:
        owners = owners.unionByName(st["series"].select("cluster", "group_id", "owner"))
    nxt = {"series": perkey.series_state(passed, owners), "history": perkey.history_state(passed),
           "gaps": perkey.gaps_state(passed), "entries": perkey.entries_state(passed),
           "minutes": perkey.minutes_state(passed)}
    return Step(passed=passed, state={k: v.localCheckpoint(eager=True) for k, v in nxt.items()})
