"""The Prometheus alert rules are generated from the rule thresholds (analytics.rules): the
committed file is the defaults' rendering, and a tuned threshold moves the alert that watches
the same thing. The promtool unit tests of the rules' behaviour are in tests/deploy."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lagscope.alerts.prometheus_rules import RULES_FILE, render_rules
from lagscope.cli import app
from lagscope.config import AnalyticsRulesConfig
from lagscope.dashboards.links import DEFAULT_APP_URL
from lagscope.errors import ConfigError

#: the thresholds an operator might tune, none of them a default
TUNED = AnalyticsRulesConfig(warn_lag_s=120, stall_after_s=90, stop_after_s=300, storm_count=5, storm_window_s=1800)


def _alerts(text: str) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in yaml.safe_load(text)["groups"] for r in g["rules"]}


def test_the_committed_rules_are_the_defaults_rendering() -> None:
    # edit the template (alerts/prometheus_rules.py) or the defaults, then `lagscope dashboards rules`
    assert RULES_FILE.read_text() == render_rules(AnalyticsRulesConfig(), DEFAULT_APP_URL)


@pytest.mark.parametrize(("alert", "expected"), [
    # the analytics' WARN: lag in seconds at least warn_lag_s
    ("LagscopeLagSecondsHigh", r"lagscope_group_lag_seconds >= {warn_lag_s:g}$"),
    # a stall: the committed offsets still for stall_after_s (a range of that length, watched that long)
    ("LagscopeCommitsStalled", r"changes\(kafka_consumergroup_current_offset_sum\[{stall}\]\)\) == 0\).*"
                               r"kafka_consumergroup_current_offset_sum offset {stall}\)\)$"),
    # no member and further behind than a stop's threshold
    ("LagscopeGroupNoConsumers", r"\(lagscope_group_lag_seconds > {stop_after_s:g}\)$"),
    # a storm: storm_count rebalance windows within storm_window_s
    ("LagscopeRebalanceStorm", r"increase\(lagscope_rebalances_total\[{storm}\]\)\) >= {storm_count}\)"),
])
@pytest.mark.parametrize("rules", [AnalyticsRulesConfig(), TUNED], ids=["defaults", "tuned"])
def test_each_threshold_is_the_rules(alert: str, expected: str, rules: AnalyticsRulesConfig) -> None:
    durations = {AnalyticsRulesConfig(): {"stall": "1m", "storm": "10m"}, TUNED: {"stall": "90s", "storm": "30m"}}
    pattern = expected.format(**rules.model_dump(), **durations[rules])
    expr = " ".join(_alerts(render_rules(rules, DEFAULT_APP_URL))[alert]["expr"].split())
    assert re.search(pattern, expr), expr


def test_descriptions_say_the_thresholds_in_words() -> None:
    alerts = _alerts(render_rules(TUNED, DEFAULT_APP_URL))
    assert "(at least 2 minutes, for 5 minutes)" in alerts["LagscopeLagSecondsHigh"]["annotations"]["description"]
    assert "at least 5 windows in 30 minutes" in alerts["LagscopeRebalanceStorm"]["annotations"]["description"]
    assert "more than 5 minutes behind" in alerts["LagscopeGroupNoConsumers"]["annotations"]["description"]
    # the range (90 s) and the rule's 5 minutes' hold
    assert "not moved for 390 seconds" in alerts["LagscopeCommitsStalled"]["annotations"]["description"]


def test_only_the_watched_thresholds_change() -> None:
    # alerts with no analytics counterpart keep their own thresholds; every alert is still there
    default, tuned = _alerts(render_rules(AnalyticsRulesConfig(), DEFAULT_APP_URL)), _alerts(
        render_rules(TUNED, DEFAULT_APP_URL))
    assert default.keys() == tuned.keys()
    changed = {name for name in default if default[name] != tuned[name]}
    assert changed == {"LagscopeLagSecondsHigh", "LagscopeCommitsStalled", "LagscopeGroupNoConsumers",
                       "LagscopeRebalanceStorm", "LagscopeRetentionLoss", "LagscopeRetentionDeficit"}


def test_a_stall_range_too_short_for_prometheus_is_refused() -> None:
    # one scrape in the range: nothing is ever seen to change, every lagging group would fire
    with pytest.raises(ConfigError, match=r"^analytics\.rules\.stall_after_s: 30 s is too short"):
        render_rules(AnalyticsRulesConfig(stall_after_s=30), DEFAULT_APP_URL)


def _settings(tmp_path: Path, rules: dict[str, Any]) -> Path:
    path = tmp_path / "lagscope.yaml"
    path.write_text(yaml.safe_dump({"analytics": {"rules": rules}, "ui": {"url": "https://ui.example.org"}}))
    return path


def test_cli_writes_the_configured_rules_and_checks_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAGSCOPE_UI__URL", raising=False)
    runner = CliRunner()
    # the repository's file is up to date
    assert runner.invoke(app, ["dashboards", "rules", "--check"]).exit_code == 0
    out = tmp_path / "prom" / "lagscope.yml"
    config = _settings(tmp_path, TUNED.model_dump())
    result = runner.invoke(app, ["dashboards", "rules", "--config", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == render_rules(TUNED, "https://ui.example.org")
    assert [p.name for p in out.parent.iterdir()] == ["lagscope.yml"]  # no temporary file left
    assert runner.invoke(app, ["dashboards", "rules", "--config", str(config), "--out", str(out),
                               "--check"]).exit_code == 0
    # the defaults' rules are not the tuned ones: --check says so
    stale = runner.invoke(app, ["dashboards", "rules", "--out", str(out), "--check"])
    assert stale.exit_code == 1
    assert "out of date" in stale.output


def test_cli_bad_thresholds_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "lagscope.yml"
    bad = runner.invoke(app, ["dashboards", "rules", "--config", str(_settings(tmp_path, {"storm_count": 1})),
                              "--out", str(out)])
    assert bad.exit_code == 2
    assert [ln for ln in bad.output.splitlines() if ln.strip()] == [
        "config error: analytics.rules.storm_count: Input should be greater than or equal to 2"]
    short = runner.invoke(app, ["dashboards", "rules", "--config", str(_settings(tmp_path, {"stall_after_s": 20})),
                                "--out", str(out)])
    assert isinstance(short.exception, ConfigError)
    assert "analytics.rules.stall_after_s: 20 s is too short" in str(short.exception)
    assert not out.exists()


@pytest.mark.prometheus
def test_tuned_rules_pass_promtool(tmp_path: Path) -> None:
    binary = shutil.which("promtool")
    assert binary, "promtool is not on PATH: run scripts/setup.sh --system"
    out = tmp_path / "lagscope.yml"
    out.write_text(render_rules(TUNED, "https://ui.example.org/lagscope"))
    check = subprocess.run([binary, "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(_alerts(out.read_text()))} rules found" in check.stdout + check.stderr
