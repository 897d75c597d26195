"""deploy/prometheus: promtool checks the config and the rules, and runs their unit tests.

Runs the real Debian ``promtool`` (installed by ``scripts/setup.sh --system``); a missing
binary is a failure. Besides promtool's own checks, every alert must carry a `for:` duration,
a severity, a summary, a description, a runbook link to a section that exists in
docs/alerting.md and a link into the lagscope app, and must be fired by at least one unit test.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from lagscope.alerts.payloads import RUNBOOK_ANCHORS

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
PROM = ROOT / "deploy" / "prometheus"
RULES = sorted((PROM / "rules").glob("*.yml"))
TESTS = sorted((PROM / "tests").glob("*.yml"))


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    assert binary, "promtool is not on PATH: run scripts/setup.sh --system"
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, cwd=ROOT)


def _alerts() -> list[dict[str, Any]]:
    return [r for f in RULES for g in yaml.safe_load(f.read_text())["groups"] for r in g["rules"] if "alert" in r]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces → dashes."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return out


def test_rule_files_exist() -> None:
    assert RULES, "no rule files under deploy/prometheus/rules"
    assert TESTS, "no promtool unit tests under deploy/prometheus/tests"


def test_promtool_check_rules() -> None:
    result = _promtool("check", "rules", *map(str, RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_check_config() -> None:
    result = _promtool("check", "config", str(PROM / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_test_rules() -> None:
    result = _promtool("test", "rules", *map(str, TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAILED" not in result.stdout


def test_promtool_test_rules_fails_on_a_wrong_expectation(tmp_path: Path) -> None:
    # the unit tests can fail: the same file with one expectation changed is refused
    text = (PROM / "tests" / "lagscope_test.yml").read_text().replace("g1 is 6m 40s behind", "g1 is 6m 41s behind")
    text = text.replace("../rules/lagscope.yml", str(PROM / "rules" / "lagscope.yml"))
    bad = tmp_path / "wrong_test.yml"
    bad.write_text(text)
    result = _promtool("test", "rules", str(bad))
    assert result.returncode != 0
    assert "LagscopeLagSecondsHigh" in result.stdout + result.stderr


@pytest.mark.parametrize("rule", _alerts(), ids=lambda r: r["alert"])
def test_alert_is_complete(rule: dict[str, Any]) -> None:
    docs = _anchors((ROOT / "docs" / "alerting.md").read_text())
    assert re.fullmatch(r"\d+[smh]", rule.get("for", "")), "every alert waits a `for:` duration"
    assert rule["labels"]["severity"] in {"info", "warning", "critical"}
    ann = rule["annotations"]
    assert ann["summary"]
    assert ann["description"]
    anchor = ann["runbook_url"].split("#", 1)[1]
    assert anchor in docs, f"docs/alerting.md has no section #{anchor}"
    assert ann["dashboard"].startswith("http://localhost:8501/?")
    assert "page=" in ann["dashboard"]


def test_every_alert_is_fired_by_a_unit_test() -> None:
    fired = set()
    for f in TESTS:
        for case in yaml.safe_load(f.read_text())["tests"]:
            for t in case.get("alert_rule_test", []):
                if t.get("exp_alerts"):
                    fired.add(t["alertname"])
    assert {r["alert"] for r in _alerts()} <= fired


def test_webhook_runbook_anchors_exist() -> None:
    docs = _anchors((ROOT / "docs" / "alerting.md").read_text())
    assert set(RUNBOOK_ANCHORS.values()) <= docs


def _known_metric_names() -> set[str]:
    from prometheus_client import CollectorRegistry

    from lagscope.analytics.results_metrics import ResultsCollector
    from lagscope.collector.metrics import METRICS

    names = {m.name for m in METRICS} | {"up"}
    registry = CollectorRegistry()
    registry.register(ResultsCollector(ROOT / "no-such-results-root"))
    for family in registry.collect():
        names.add(family.name + ("_total" if family.type == "counter" else ""))
        if family.type == "histogram":
            names |= {f"{family.name}_bucket", f"{family.name}_sum", f"{family.name}_count"}
    return names


def test_rules_use_only_metrics_lagscope_serves() -> None:
    # a renamed metric must not leave an alert that silently never fires
    known = _known_metric_names()
    for rule in _alerts():
        used = set(re.findall(r"\b((?:kafka|lagscope)_[a-z_]+|up)\b", rule["expr"]))
        assert used, rule["alert"]
        assert used <= known, f"{rule['alert']}: unknown {sorted(used - known)}"


@pytest.mark.parametrize("config", [PROM / "prometheus.yml",
                                    ROOT / "deploy" / "compose" / "prometheus" / "prometheus.yml"],
                         ids=["deploy-prometheus", "compose"])
def test_rules_match_job_names_the_scrape_configs_define(config: Path) -> None:
    # an alert on up{job="…"} with a job no scrape config defines fires forever (absent) or never (down);
    # the Helm chart's job name is checked in tests/deploy/test_helm.py
    jobs = {job["job_name"] for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    matched = {j for rule in _alerts() for j in re.findall(r'\bjob\s*=~?\s*"([^"]+)"', rule["expr"])}
    assert matched == {"lagscope-collector"}
    assert matched <= jobs
    assert jobs == {"lagscope-collector", "lagscope-results"}
