"""metrics.compat and time_lag.history_points: validated in the file, honoured by the collector's
/metrics (scraped over HTTP, as Prometheus does)."""

from __future__ import annotations

import datetime as dt
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_metrics_collector import off, snap

from lagscope.collector.loop import Collector
from lagscope.collector.metrics import METRICS
from lagscope.config import Settings, load_config
from lagscope.errors import ConfigError

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def _collector(tmp_path: Path, time_lag: dict[str, Any] | None = None, **metrics: Any) -> Collector:
    settings = Settings.model_validate({"collector": {"lake": str(tmp_path / "lake")},
                                        "metrics": {"port": 0, **metrics}, "time_lag": time_lag or {}})
    return Collector(settings, receivers=[]).start()


def _scrape(collector: Collector) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with urllib.request.urlopen(collector.metrics_server.url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        series = out.setdefault(family.name, {})
        for s in family.samples:
            series[tuple(sorted(s.labels.items()))] = s.value
    return out


def _feed(collector: Collector) -> None:
    """Four sweeps, the end offset moving 100 → 400 while the group's commit stays at 150."""
    for i, end in enumerate((100, 200, 300, 400)):
        ts = T0 + dt.timedelta(seconds=10 * i)
        collector.metrics_server.update(snap([off("g", "t", 0, 150 if i else 100, end, ts=ts)], ts=ts))


def _names(origin: str) -> set[str]:
    # the sweep's families (the tail's are served only with a tail: test_commitlog_filter_metrics.py)
    return {m.name.removesuffix("_total") for m in METRICS if m.origin == origin and m.source == "sweep"}


# (compat setting, name sets expected on /metrics besides lagscope's own)
COMPAT = [
    # the default: both exporters' names
    (None, {"kafka_exporter", "kafka-lag-exporter"}),
    # kafka_exporter's only (migrating from danielqsj/kafka_exporter)
    (["kafka_exporter"], {"kafka_exporter"}),
    # kafka-lag-exporter's only
    (["kafka-lag-exporter"], {"kafka-lag-exporter"}),
    # lagscope's own only: the fewest series
    ([], set()),
]


@pytest.mark.parametrize(("compat", "expected"), COMPAT)
def test_compat_chooses_the_name_sets_served(tmp_path: Path, compat: list[str] | None, expected: set[str]) -> None:
    collector = _collector(tmp_path, **({} if compat is None else {"compat": compat}))
    try:
        _feed(collector)
        served = set(_scrape(collector))
    finally:
        collector.stop()
    for origin in ("kafka_exporter", "kafka-lag-exporter"):
        names = _names(origin)
        assert (names <= served) == (origin in expected), origin
        assert (names & served == set()) == (origin not in expected), origin
    assert _names("lagscope") <= served  # always


def test_history_points_bound_how_far_back_the_time_lag_reaches(tmp_path: Path) -> None:
    key = (("cluster", "prod"), ("group", "g"), ("partition", "0"), ("topic", "t"))
    seen = {}
    for size in (2, 120):
        collector = _collector(tmp_path, time_lag={"history_points": size})
        try:
            _feed(collector)
            metrics = _scrape(collector)
        finally:
            collector.stop()
        seen[size] = (metrics["lagscope_partition_lag_seconds"][key],
                      metrics["lagscope_partition_lag_seconds_is_lower_bound"][key])
    # 120 remembered points bracket offset 150 (the rise 100 → 200): interpolated; the newest 2
    # (200 → 300, 300 → 400) do not reach back to it: only a lower bound
    assert seen[120][1] == 0.0
    assert seen[2][1] == 1.0
    assert seen[2][0] <= seen[120][0]


# (the file's sections, expected one-line error)
INVALID = [
    # a name set that does not exist
    ({"metrics": {"compat": ["burrow"]}},
     "metrics.compat[0]: Input should be 'kafka_exporter' or 'kafka-lag-exporter'"),
    # the same set twice is a mistake
    ({"metrics": {"compat": ["kafka_exporter", "kafka_exporter"]}}, "metrics.compat: a name set is listed twice"),
    # no history at all: nothing could be interpolated
    ({"time_lag": {"history_points": 0}}, "time_lag.history_points: Input should be greater than or equal to 1"),
    # an absurd history (memory per group-partition)
    ({"time_lag": {"history_points": 10_000_000}},
     "time_lag.history_points: Input should be less than or equal to 100000"),
    # the bound is one setting for the collector and the analytics: the old per-component ones are gone
    ({"metrics": {"history_size": 120}}, "metrics.history_size: unknown setting"),
    ({"analytics": {"history_recent_s": 600}}, "analytics.history_recent_s: unknown setting"),
]


@pytest.mark.parametrize(("sections", "expected"), INVALID)
def test_invalid_metrics_settings(tmp_path: Path, sections: dict[str, Any], expected: str) -> None:
    import yaml

    path = tmp_path / "lagscope.yaml"
    path.write_text(yaml.safe_dump(sections))
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert str(err.value).startswith(expected), str(err.value)


def test_environment_sets_compat(tmp_path: Path) -> None:
    cfg = load_config(None, environ={"LAGSCOPE_METRICS__COMPAT": '["kafka-lag-exporter"]',
                                     "LAGSCOPE_TIME_LAG__HISTORY_POINTS": "30"})
    assert cfg.metrics.compat == ["kafka-lag-exporter"]
    assert cfg.time_lag.history_points == 30
