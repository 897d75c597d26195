"""The thresholds of the analytics rules (pure: the numpy pass and the Spark job both take them)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RuleParams"]


@dataclass(frozen=True)
class RuleParams:
    """Thresholds of the anomaly and status rules (seconds unless named otherwise)."""

    stall_after_s: float = 60.0
    stop_after_s: float = 60.0
    skip_factor: float = 5.0
    skip_min_messages: int = 100
    gap_k: float = 6.0
    gap_mad_floor_s: float = 1.0
    gap_min_s: float = 10.0
    gap_min_samples: int = 5
    growth_min_minutes: int = 5
    storm_count: int = 3
    storm_window_s: float = 600.0
    warn_lag_s: float = 30.0
    burrow_window: int = 10


#: spark.driver.memory when nothing sets it (``analytics.driver_memory``): the JVM moves a task's
#: blobs, not the step's tables (benchmarks/results/analytics_speed.md: the peak driver heap)
DEFAULT_DRIVER_MEMORY = "1g"
