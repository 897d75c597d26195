"""Steps through the per-key pass, as the job runs them (for the rule tests: their expectations
are checked on the production path, lagscope.analytics.perkey over lagscope.analytics.onepass)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame

from lagscope.analytics import perkey
from lagscope.analytics.findings import RuleParams
from lagscope.analytics.onepass import PassParams
from lagscope.analytics.series import prepare_series


def params(p: RuleParams, *, commit_stream: bool = False) -> PassParams:
    """The pass's parameters from rule thresholds (as the job builds them)."""
    return PassParams(burrow_window=p.burrow_window, stall_after_s=p.stall_after_s, stop_after_s=p.stop_after_s,
                      warn_lag_s=p.warn_lag_s, skip_factor=p.skip_factor, skip_min_messages=p.skip_min_messages,
                      gap_k=p.gap_k, gap_mad_floor_s=p.gap_mad_floor_s, gap_min_s=p.gap_min_s,
                      gap_min_samples=p.gap_min_samples, growth_min_minutes=p.growth_min_minutes,
                      commit_stream=commit_stream)


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
    passed = perkey.transform_pass(series, st, commits=commits, params=params(
        p, commit_stream=commits is not None)).localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)
    owners = series.select("cluster", "group_id", "owner")
    if st.get("series") is not None:
        owners = owners.unionByName(st["series"].select("cluster", "group_id", "owner"))
    nxt = {"series": perkey.series_state(passed, owners), "history": perkey.history_state(passed),
           "gaps": perkey.gaps_state(passed), "entries": perkey.entries_state(passed),
           "minutes": perkey.minutes_state(passed)}
    return Step(passed=passed, state={k: v.localCheckpoint(eager=True) for k, v in nxt.items()})
