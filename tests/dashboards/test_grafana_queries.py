"""Every panel query of every generated dashboard returns data from a real Prometheus, fed by a
simulator scenario through the real pipeline:

    panels-scenario.yaml (lagscope.devtools.sim: real producers and consumer group processes)
      → the real broker
      → the collector (:class:`lagscope.collector.loop.Collector`: sweeps every 0.5 s and the
        ``__consumer_offsets`` tail into a lake; its /metrics)
      → the analytics (:func:`lagscope.analytics.job.run_batch` on that lake, second-scale rule
        thresholds as in benchmarks/analytics_accuracy.py)
      → the results exporter (:mod:`lagscope.analytics.results_metrics`)
      → Prometheus (Debian's binary, tests/helpers/prometheus.py) scraping the collector and
        the exporter every second.

The scenario (see its description) gives one group a closed rebalance window (a crash), a
stall, a rewind (messages reprocessed), a partition that retention deleted past (an open retention
loss: messages lost, no headroom left: a retention advice) and a partition caught up (a catch-up
ETA of 0). Then every target of every
dashboard JSON under dashboards/grafana/ is run through the HTTP query API with the template
variables replaced by the run's cluster, group and topic, and must return at least one series;
the template variables' own queries must offer those values; spot checks compare values with
the simulator's ground truth.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.prometheus import PrometheusServer
from kafka import KafkaAdminClient
from pyspark.sql import SparkSession

from lagscope.analytics.job import run_batch
from lagscope.analytics.results_metrics import serve
from lagscope.collector.loop import Collector
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig, Settings
from lagscope.dashboards import grafana_gen
from lagscope.devtools.sim.runner import RunResult, load_scenario, plan_names, start_scenario
from lagscope.devtools.sim.truth import TruthIndex, load

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.prometheus, pytest.mark.slow]

CLUSTER = "dash-sim"
ROOT = Path(__file__).resolve().parents[2]
SCENARIO = Path(__file__).with_name("panels-scenario.yaml")
INTERVAL_S = 0.5
#: Grafana's built-in variables, as Grafana would expand them for a short time range
BUILTINS = {"$__rate_interval": "15s", "$__interval": "5s", "$__range": "1h"}
#: second-scale scenario, second-scale thresholds (as benchmarks/analytics_accuracy.py)
RULES = AnalyticsRulesConfig(stall_after_s=2.0, stop_after_s=2.0, gap_min_s=0.9, gap_mad_floor_s=0.2, gap_k=4,
                             growth_min_minutes=5, warn_lag_s=5.0)
TIMEOUTS = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}


@dataclass
class Pipeline:
    collector: str  # host:port of the collector's /metrics
    results: str  # host:port of the results exporter
    lake: Path
    results_root: Path


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    """The results exporter (over a results folder still empty) on a free port; the lake folder."""
    results = tmp_path / "results"
    server, thread = serve(results, port=0, refresh_s=1.0)
    try:
        yield Pipeline("", f"127.0.0.1:{server.server_port}", tmp_path / "lake", results)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def collector(bootstrap: str, pipeline: Pipeline) -> Iterator[tuple[Collector, str]]:
    """A collector of the scenario run's groups (sweeps + __consumer_offsets tail → the lake, and
    /metrics on a free port), running for the whole test; yields it and the run id."""
    run_id = uuid.uuid4().hex[:8]
    prefix = plan_names(load_scenario(SCENARIO), run_id).prefix
    settings = Settings(**{
        "clusters": [{"name": CLUSTER, "bootstrap_servers": [bootstrap],
                      "groups": {"include": [re.escape(prefix) + "-.*"]},
                      "consumer_offsets_tail": {"enabled": True, "start": "latest"}}],
        "collector": {"interval_s": INTERVAL_S, "lake": str(pipeline.lake), "compaction": {"enabled": False}},
        "metrics": {"enabled": True, "bind": "127.0.0.1", "port": 0},
    })
    coll = Collector(settings).start()
    pipeline.collector = f"127.0.0.1:{coll.metrics_server.port}"
    stop = threading.Event()
    thread = threading.Thread(target=coll.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield coll, run_id
    finally:
        stop.set()
        thread.join(60)
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:  # the run's topic and group are no use to anyone once the test is over
            admin.delete_topics([f"{prefix}-events"])
            admin.delete_consumer_groups([f"{prefix}-readers"])
        except Exception:  # best effort on a shared broker; nothing to assert
            pass
        finally:
            admin.close()


def prom_regex_escape(value: str) -> str:
    """Escape regex metacharacters as Grafana's Prometheus data source does for a variable value
    (each becomes ``\\\\x`` inside the PromQL string literal, i.e. ``\\x`` in the regex)."""
    return "".join("\\\\" + c if c in "\\^$.|?*+()[]{}" else c for c in value)


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace Grafana's variables as Grafana does for a single selected value (regex-escaped)."""
    for name, value in BUILTINS.items():
        expr = expr.replace(name, value)
    for name, value in values.items():
        expr = re.sub(rf"\$(\{{{name}\}}|{name}\b)", lambda _m, v=value: prom_regex_escape(v), expr)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def test_substitute_escapes_regex_metacharacters() -> None:
    expr = 'x{group=~"$group", topic=~"${topic}"}[$__rate_interval]'
    # '.' is a regex metacharacter (escaped twice: once for the regex, once for the string); '-' is not
    assert substitute(expr, {"group": "a.b", "topic": "t-1"}) == 'x{group=~"a\\\\.b", topic=~"t-1"}[15s]'


def _run_scenario(bootstrap: str, run_id: str, out: Path) -> RunResult:
    run = start_scenario(SCENARIO, bootstrap, out, run_id=run_id)
    result = run.wait(timeout=120)
    assert isinstance(result, RunResult), result
    assert not result.failures, f"scenario processes failed: {result.failures}"
    time.sleep(2 * INTERVAL_S)  # the collector sees the end state
    return result


def _wait_for_panels(prom: PrometheusServer, queries: list[tuple[str, str, str]], timeout: float) -> list[str]:
    """Run every query until each has returned data once (or ``timeout``); the ones that never did."""
    deadline = time.monotonic() + timeout
    pending = list(queries)
    while True:
        pending = [q for q in pending if not prom.query(q[2])]
        if not pending or time.monotonic() > deadline:
            return [f"{uid} / {title}: {expr}" for uid, title, expr in pending]
        time.sleep(1)


def test_every_panel_query_returns_data(tmp_path: Path, bootstrap: str, spark: SparkSession, pipeline: Pipeline,
                                        collector: tuple[Collector, str]) -> None:
    _, run_id = collector
    names = plan_names(load_scenario(SCENARIO), run_id)
    group, topic = names.group("readers"), names.topic("events")
    values = {"cluster": CLUSTER, "group": group, "topic": topic}
    boards = {p.stem: json.loads(p.read_text()) for p in sorted(grafana_gen.DEFAULT_OUT_DIR.glob("*.json"))}
    assert len(boards) == 4
    queries = [(uid, title, substitute(expr, values))
               for uid, data in boards.items() for title, expr in grafana_gen.panel_targets(data)]
    assert len(queries) >= 30

    rules = sorted((ROOT / "deploy" / "prometheus" / "rules").glob("*.yml"))
    with PrometheusServer(tmp_path, targets=[pipeline.collector, pipeline.results], scrape_interval="1s",
                          rule_files=rules) as prom:
        prom.wait_for_target_up()
        started = dt.datetime.now(dt.UTC)
        result = _run_scenario(bootstrap, run_id, tmp_path / "sim")

        # the analytics over the lake the collector wrote (whole UTC days: today, or the two
        # days a run across midnight touches)
        written = run_batch(spark, pipeline.lake, pipeline.results_root, since=started.date(),
                            until=dt.datetime.now(dt.UTC).date(), settings=AnalyticsConfig(rules=RULES, **TIMEOUTS),
                            progress=False)
        assert all(written.get(t, 0) > 0 for t in ("rebalances", "anomalies", "status", "lag_trends")), written

        # increases need two samples of the exporter's series (it re-reads every second)
        cg = f'cluster="{CLUSTER}", group="{group}"'
        prom.wait_for(f"count_over_time(lagscope_rebalances_total{{{cg}}}[1m]) >= 3", timeout=30)
        empty = _wait_for_panels(prom, queries, timeout=20)
        assert not empty, "panel queries without data:\n" + "\n".join(empty)
        # the group dashboard's advice table: the open retention loss (one is unambiguous) gives
        # the group a retention advice; its one crash is no pattern, so no crash advice
        assert prom.query(f'lagscope_advice_info{{{cg}, rule="retention_vs_catchup", setting="retention.ms"}}')
        assert not prom.query(f'lagscope_advice_info{{{cg}, rule="session_timeout_crash"}}')

        # the template variables offer the run's cluster, group and topic
        for data in boards.values():
            for var in data["templating"]["list"]:
                if var["type"] != "query":
                    continue
                m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["query"])
                assert m, var["query"]
                selector, label = substitute(m.group(1), values), m.group(2)
                offered = prom.api(f"label/{label}/values", **{"match[]": selector})
                assert values[var["name"]] in offered, (var["name"], selector, offered)

        # spot checks against the simulator's ground truth
        # - the committed offsets the collector reports are those the broker had at the end
        truth = result.end_state.committed_of(group)
        assert {p for (t, p) in truth if t == topic} == {0, 1}
        for (t, partition), offset in truth.items():
            got = prom.query_value(f'kafka_consumergroup_current_offset{{cluster="{CLUSTER}", '
                                   f'consumergroup="{group}", topic="{t}", partition="{partition}"}}')
            assert got == offset, (t, partition, got, offset)
        # - the crash is one rebalance, caused by the session timeout, as long as the truth's
        #   window (±1 s, as tests/analytics/test_analytics_e2e.py with the commit stream)
        ti = TruthIndex(load(result.truth_path))
        (crash,) = [r for r in ti.rebalances(group) if r.cause is not None and r.cause.kind == "crash"]
        causes = {s["metric"]["cause"]: float(s["value"][1])
                  for s in prom.query(f"lagscope_rebalances_total{{{cg}}}")}
        assert causes.get("session_timeout") == 1, causes
        last = prom.query_value(f"lagscope_rebalance_last_duration_seconds{{{cg}}}")
        assert last is not None
        assert abs(last - (crash.end - crash.start)) <= 1.0, (last, crash)
        # - the stall was found, and the stalled partition's lost messages are an open anomaly
        found = {s["metric"]["kind"] for s in prom.query(f"lagscope_anomalies_total{{{cg}}} > 0")}
        assert "stall" in found, found
        assert prom.query(f"sum(lagscope_anomalies_open{{{cg}}}) > 0"), found
        # - the delivery counters: the retention loss (messages lost) and the rewind (processed
        #   twice), under their causes
        lost = {s["metric"]["cause"]: float(s["value"][1])
                for s in prom.query(f"lagscope_messages_lost_total{{{cg}}}")}
        assert lost.get("retention", 0) > 0, lost
        again = {s["metric"]["cause"]: float(s["value"][1])
                 for s in prom.query(f"lagscope_messages_reprocessed_total{{{cg}}}")}
        assert again.get("rewind", 0) > 0, again
        # - retention deleted past the stalled partition's committed offset: no headroom left;
        #   the other partition is caught up: nothing to catch up
        headroom = {s["metric"]["partition"]: float(s["value"][1])
                    for s in prom.query(f'lagscope_retention_headroom_seconds{{{cg}, topic="{topic}"}}')}
        assert 0.0 in headroom.values(), headroom
        eta = {s["metric"]["partition"]: float(s["value"][1])
               for s in prom.query(f'lagscope_catchup_eta_seconds{{{cg}, topic="{topic}"}}')}
        assert 0.0 in eta.values(), eta

        # the alert rules load and evaluate without error on the real series; those whose
        # condition holds in this data (no retention headroom) are pending
        groups = prom.rules()
        assert {r["name"] for g in groups for r in g["rules"]} >= {"LagscopeGroupStalled", "LagscopeCollectorDown"}
        assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups
        active = {(r["name"], a["labels"].get("group")): a["state"] for g in groups for r in g["rules"]
                  for a in r.get("alerts", [])}
        assert active.get(("LagscopeRetentionLossRisk", group)) == "pending", active
