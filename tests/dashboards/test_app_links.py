"""The Streamlit app's base URL: configured once (lagscope's ``ui.url``), used by every link
(Grafana data links, annotations, alert payloads); see lagscope.dashboards.links."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.results_synthetic import Synthetic
from typer.testing import CliRunner

from lagscope.alerts import Outbox
from lagscope.alerts.prometheus_rules import RULES_FILE
from lagscope.cli import app
from lagscope.dashboards.links import DEFAULT_APP_URL, app_url
from lagscope.errors import ConfigError


def _settings(tmp_path: Path, url: str | None, **sections: object) -> Path:
    path = tmp_path / "lagscope.yaml"
    path.write_text(yaml.safe_dump({**({"ui": {"url": url}} if url else {}), **sections}))
    return path


@pytest.mark.parametrize(("explicit", "file_url", "env_url", "expected"), [
    # nothing configured: lagscope ui's default address
    (None, None, None, DEFAULT_APP_URL),
    # the settings file's ui.url
    (None, "https://app.example.org", None, "https://app.example.org"),
    # the environment overrides the file (as for every setting)
    (None, "https://app.example.org", "https://env.example.org", "https://env.example.org"),
    # the environment alone
    (None, None, "http://10.0.0.5:8501/lagscope/", "http://10.0.0.5:8501/lagscope"),
    # an explicit URL (--app-url) wins over everything
    ("https://cli.example.org/", "https://app.example.org", "https://env.example.org", "https://cli.example.org"),
])
def test_resolution_order(tmp_path: Path, explicit: str | None, file_url: str | None, env_url: str | None,
                          expected: str) -> None:
    environ = {"LAGSCOPE_UI__URL": env_url} if env_url else {}
    assert app_url(explicit, config=_settings(tmp_path, file_url), environ=environ) == expected


@pytest.mark.parametrize("bad", ["localhost:8501", "ftp://app.example.org", "https://"])
def test_a_url_that_is_not_http_is_one_line_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^--app-url must be an http:// or https:// URL$"):
        app_url(bad)
    with pytest.raises(ConfigError, match=r"^ui\.url: must be an http:// or https:// URL$"):
        app_url(config=_settings(tmp_path, bad), environ={})


def test_generate_takes_the_settings_ui_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAGSCOPE_UI__URL", raising=False)
    settings = _settings(tmp_path, "https://lagscope.example.org/app")
    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(app, ["dashboards", "generate", "--out", str(out), "--config", str(settings)])
    assert result.exit_code == 0, result.output
    text = (out / "lagscope-group.json").read_text()
    assert "https://lagscope.example.org/app/?" in text
    assert "localhost:8501" not in text
    # --app-url beats the settings
    result = runner.invoke(app, ["dashboards", "generate", "--out", str(out), "--config", str(settings),
                                 "--app-url", "https://other.example.org"])
    assert result.exit_code == 0, result.output
    assert "https://other.example.org/?" in (out / "lagscope-group.json").read_text()


def test_without_a_settings_file_only_the_ui_environment_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    # Helm and compose pass cluster settings as LAGSCOPE_CLUSTERS__… variables that only make
    # sense on top of lagscope.yaml; a command given no --config still finds the app's URL
    monkeypatch.setenv("LAGSCOPE_CLUSTERS__prod__SECURITY__PASSWORD", "s3cret")
    monkeypatch.setenv("LAGSCOPE_CLUSTERS__0__BOOTSTRAP_SERVERS", "kafka:9092")
    monkeypatch.delenv("LAGSCOPE_UI__URL", raising=False)
    assert app_url() == DEFAULT_APP_URL
    monkeypatch.setenv("LAGSCOPE_UI__URL", "https://env.example.org")
    assert app_url() == "https://env.example.org"


def test_alerts_evaluate_links_point_at_the_settings_ui_url(synthetic: Synthetic, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAGSCOPE_UI__URL", raising=False)
    settings = _settings(tmp_path, "https://ui.example.org", alerts={"routes": [
        {"name": "g", "url": "http://127.0.0.1:9/hook", "format": "generic", "min_severity": "info"}]})
    outbox = tmp_path / "outbox.sqlite"
    runner = CliRunner()
    result = runner.invoke(app, ["alerts", "evaluate", "--results", str(synthetic.root), "--config", str(settings),
                                 "--outbox", str(outbox)])
    assert result.exit_code == 0, result.output
    with Outbox(outbox) as box:
        bodies = [json.loads(e.body) for e in box.due(now=float("inf"))]
    assert len(bodies) >= 6
    for body in bodies:  # every queued notification links into the app at ui.url
        assert body["links"]["app"].startswith("https://ui.example.org/?"), body["links"]


@pytest.mark.prometheus
def test_rules_link_to_the_settings_ui_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAGSCOPE_UI__URL", raising=False)
    out = tmp_path / "rules" / "lagscope.yml"
    result = CliRunner().invoke(app, ["dashboards", "rules", "--out", str(out), "--config",
                                      str(_settings(tmp_path, "https://lagscope.example.org/app"))])
    assert result.exit_code == 0, result.output
    original = yaml.safe_load(RULES_FILE.read_text())
    rebased = yaml.safe_load(out.read_text())
    links = [r["annotations"]["dashboard"] for g in rebased["groups"] for r in g["rules"]]
    assert len(links) == sum(len(g["rules"]) for g in original["groups"])
    # every alert's link starts with the configured URL; nothing else differs from the defaults' file
    assert all(u.startswith("https://lagscope.example.org/app/?") for u in links), links
    assert out.read_text().replace("https://lagscope.example.org/app/", f"{DEFAULT_APP_URL}/") == \
        RULES_FILE.read_text()
    # and Prometheus accepts the file
    check = subprocess.run(["promtool", "check", "rules", str(out)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
