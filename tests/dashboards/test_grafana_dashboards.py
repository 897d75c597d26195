"""The generated dashboards: in sync with the code, valid for the SDK's types, complete."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml
from grafana_foundation_sdk.cog.plugins import register_default_plugins
from grafana_foundation_sdk.models import dashboard as mdash
from typer.testing import CliRunner

from lagscope.cli import app
from lagscope.dashboards import grafana_gen

FILES = sorted(grafana_gen.DEFAULT_OUT_DIR.glob("*.json"))
APP_PAGES = {"group", "rebalance", "partition", "overview", "delivery"}
APP_PARAMS = {"cluster", "group", "topic", "partition", "from", "to", "page"}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _panels(data: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in data["panels"]:
        out.append(p)
        out.extend(p.get("panels") or [])
    return out


def test_committed_files_match_the_generator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAGSCOPE_UI__URL", raising=False)
    # `lagscope dashboards generate` was run after the last change of grafana_gen.py
    expected = grafana_gen.render_files()
    assert sorted(p.name for p in FILES) == sorted(k for k in expected if k.endswith(".json"))
    for rel, text in expected.items():
        assert (grafana_gen.DEFAULT_OUT_DIR / rel).read_text() == text, f"{rel} is stale: regenerate it"
    result = CliRunner().invoke(app, ["dashboards", "generate", "--check"])
    assert result.exit_code == 0, result.output


def test_generate_check_detects_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAGSCOPE_UI__URL", "https://app.example.org")
    runner = CliRunner()
    assert runner.invoke(app, ["dashboards", "generate", "--out", str(tmp_path)]).exit_code == 0
    # LAGSCOPE_UI__URL (lagscope's ui.url) reached the data links
    assert "https://app.example.org/?" in (tmp_path / "lagscope-group.json").read_text()
    (tmp_path / "lagscope-group.json").write_text("{}")
    result = runner.invoke(app, ["dashboards", "generate", "--out", str(tmp_path), "--check"])
    assert result.exit_code == 1
    assert "lagscope-group.json" in result.output


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_round_trip_through_the_sdk_model(path: Path) -> None:
    register_default_plugins()
    data = _load(path)
    model = mdash.Dashboard.from_json(data)
    # the SDK decodes every panel to its typed options (not an unknown bag) and encodes it back unchanged
    assert grafana_gen.dashboard_json(model) == data
    for panel in model.panels or []:
        if isinstance(panel, mdash.Panel):
            assert panel.options is not None, panel.title
            assert not isinstance(panel.options, dict), f"{panel.title}: options not decoded by the SDK"
            for target in panel.targets or []:
                assert type(target).__name__ == "Dataquery", f"{panel.title}: target not a Prometheus query"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_dashboard_is_complete(path: Path) -> None:
    data = _load(path)
    variables = {v["name"]: v for v in data["templating"]["list"]}
    assert {"datasource", "cluster", "group", "topic"} <= set(variables)
    for name in ("cluster", "group", "topic"):
        assert variables[name]["type"] == "query"
        assert variables[name]["includeAll"] is True
    panels = [p for p in _panels(data) if p["type"] != "row"]
    ids = [p["id"] for p in _panels(data)]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    assert panels
    for p in panels:
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert p.get("targets"), p["title"]
        assert p.get("description"), p["title"]
        for t in p["targets"]:
            assert t["expr"].count("(") == t["expr"].count(")"), t["expr"]
            # every query is scoped by the cluster variable (or deliberately cluster-wide)
            assert "$cluster" in t["expr"], f"{p['title']}: {t['expr']}"
    tag_queries = sorted(tuple(a["target"]["tags"]) for a in data["annotations"]["list"]
                         if a.get("target", {}).get("type") == "tags")
    assert tag_queries == [("lagscope", "anomaly"), ("lagscope", "rebalance")]


def _links(data: dict[str, Any]) -> list[str]:
    urls = [link["url"] for link in data.get("links", []) if link.get("url")]
    for p in _panels(data):
        urls += [link["url"] for link in (p.get("fieldConfig", {}).get("defaults", {}).get("links") or [])]
    return [u for u in urls if u.startswith("http")]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_data_links_follow_the_app_contract(path: Path) -> None:
    urls = _links(_load(path))
    assert len(urls) >= 2, "a dashboard link and at least one data link"
    for url in urls:
        parts = urlsplit(url)
        assert f"{parts.scheme}://{parts.netloc}" == grafana_gen.DEFAULT_APP_URL
        query = parse_qs(parts.query)
        assert set(query) <= APP_PARAMS, url
        assert query["page"][0] in APP_PAGES
        # the selection and the time range travel with the link
        assert query["from"] == ["${__from}"]
        assert query["to"] == ["${__to}"]
        assert "cluster" in query
        if query["page"][0] != "overview":
            assert "group" in query


def test_app_url_is_configurable() -> None:
    boards = grafana_gen.build_all(app_url="https://lagscope.example.org")
    for model in boards.values():
        urls = _links(grafana_gen.dashboard_json(model))
        assert urls
        assert all(u.startswith("https://lagscope.example.org/?") for u in urls)


def test_expected_panels_exist() -> None:
    titles = {uid: {p["title"] for p in _panels(_load(grafana_gen.DEFAULT_OUT_DIR / f"{uid}.json"))}
              for uid in ("lagscope-overview", "lagscope-group", "lagscope-rebalances", "lagscope-anomalies")}
    assert {"Groups by status", "Worst lag in seconds", "Rebalances in the time range",
            "Open anomalies"} <= titles["lagscope-overview"]
    assert {"Lag per partition (messages)", "Lag in seconds per partition", "Produce vs consume rate",
            "Members", "State timeline"} <= titles["lagscope-group"]
    assert {"Rebalances per hour", "Causes", "Duration / bound", "Last duration"} <= titles["lagscope-rebalances"]
    assert {"Open anomalies by kind"} <= titles["lagscope-anomalies"]
    assert {"Messages lost in the time range", "Messages reprocessed in the time range"} <= titles["lagscope-overview"]
    assert {"Messages lost by cause", "Messages reprocessed by cause",
            "Lost and reprocessed in the time range"} <= titles["lagscope-group"]


def test_delivery_panels_count_a_new_series_from_zero() -> None:
    # the first loss of a group, topic and cause is a new series: increase() would miss it, so the
    # range's growth is the value less the value at the range's start, a series absent then as 0
    data = _load(grafana_gen.DEFAULT_OUT_DIR / "lagscope-group.json")
    (panel,) = [p for p in _panels(data) if p["title"] == "Lost and reprocessed in the time range"]
    exprs = [t["expr"] for t in panel["targets"]]
    assert [e.count("offset $__range or") for e in exprs] == [1, 1]
    assert not any("increase(" in e for e in exprs)
    assert {m for e in exprs for m in ("lagscope_messages_lost_total", "lagscope_messages_reprocessed_total")
            if m in e} == {"lagscope_messages_lost_total", "lagscope_messages_reprocessed_total"}
    for e in exprs:
        assert e.startswith("sum by (cluster, group, topic, cause) (")


def test_provisioning_files() -> None:
    dashboards = yaml.safe_load((grafana_gen.DEFAULT_OUT_DIR / "provisioning/dashboards/lagscope.yaml").read_text())
    provider = dashboards["providers"][0]
    assert provider["type"] == "file"
    assert provider["options"]["path"]
    sources = yaml.safe_load((grafana_gen.DEFAULT_OUT_DIR / "provisioning/datasources/lagscope.yaml").read_text())
    (ds,) = sources["datasources"]
    # the uid the dashboards' datasource variable selects by default
    assert ds["uid"] == grafana_gen.PROMETHEUS_DS_UID
    assert ds["type"] == "prometheus"
    for path in FILES:
        current = {v["name"]: v for v in _load(path)["templating"]["list"]}["datasource"]["current"]
        assert current["value"] == ds["uid"]


def test_panel_targets_lists_every_expression() -> None:
    data = _load(grafana_gen.DEFAULT_OUT_DIR / "lagscope-group.json")
    exprs = [e for _, e in grafana_gen.panel_targets(data)]
    assert len(exprs) == sum(len(p.get("targets") or []) for p in _panels(data))
    assert any(re.search(r"kafka_consumergroup_lag\{", e) for e in exprs)
