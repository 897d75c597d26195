"""The results exporter: result tables in, Prometheus samples out (fresh registry per test)."""

from __future__ import annotations

import datetime as dt
import urllib.request
from pathlib import Path

import pytest
from helpers.history import make_history
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession
from results_synthetic import Synthetic, anomaly, status, write_synthetic

from lagscope.analytics.job import Settings as AnalyticsSettings
from lagscope.analytics.job import run_incremental
from lagscope.analytics.results_metrics import ResultsCollector, serve
from lagscope.lake import write_rows
from lagscope.schema import ANOMALIES, STATUS


def _registry(root: object, **kw: object) -> tuple[CollectorRegistry, ResultsCollector]:
    registry = CollectorRegistry()
    collector = ResultsCollector(root, **kw)  # type: ignore[arg-type]
    registry.register(collector)
    return registry, collector


def test_rebalance_metrics(synthetic: Synthetic) -> None:
    reg, _ = _registry(synthetic.root)
    cg = {"cluster": "prod", "group": "orders-svc"}
    # three windows, one per cause; the open one counts too
    for cause in ("join", "session_timeout", "leave"):
        assert reg.get_sample_value("lagscope_rebalances_total", {**cg, "cause": cause}) == 1
    # the histogram holds the two closed windows (4 s and 25 s)
    assert reg.get_sample_value("lagscope_rebalance_duration_seconds_count", cg) == 2
    assert reg.get_sample_value("lagscope_rebalance_duration_seconds_sum", cg) == 29
    assert reg.get_sample_value("lagscope_rebalance_duration_seconds_bucket", {**cg, "le": "5.0"}) == 1
    assert reg.get_sample_value("lagscope_rebalance_duration_seconds_bucket", {**cg, "le": "30.0"}) == 2
    # last closed window: the 25 s session timeout, 2.5x its 10 s bound
    assert reg.get_sample_value("lagscope_rebalance_last_duration_seconds", cg) == 25
    assert reg.get_sample_value("lagscope_rebalance_over_bound_ratio", cg) == 2.5
    # ... which ended 25 minutes 25 s after the first window began (the alert rule ages it out)
    ended = synthetic.now - dt.timedelta(minutes=25) + dt.timedelta(seconds=25)
    assert reg.get_sample_value("lagscope_rebalance_last_end_timestamp_seconds", cg) == ended.timestamp()
    assert reg.get_sample_value("lagscope_rebalance_in_progress", cg) == 1


def test_anomaly_status_and_trend_metrics(synthetic: Synthetic) -> None:
    reg, _ = _registry(synthetic.root)
    cg = {"cluster": "prod", "group": "orders-svc"}
    assert reg.get_sample_value("lagscope_anomalies_open", {**cg, "kind": "stall", "severity": "critical"}) == 1
    # the commit gap ended: still a series (so alerts resolve), value 0
    assert reg.get_sample_value("lagscope_anomalies_open", {**cg, "kind": "commit_gap", "severity": "warning"}) == 0
    assert reg.get_sample_value("lagscope_anomalies_total", {**cg, "kind": "commit_gap", "severity": "warning"}) == 1
    # the latest group-level status is STALL (the earlier WARN is history)
    assert reg.get_sample_value("lagscope_group_status", {**cg, "status": "STALL"}) == 1
    assert reg.get_sample_value("lagscope_group_status", {**cg, "status": "WARN"}) == 0
    assert reg.get_sample_value("lagscope_group_burrow_status", {**cg, "status": "STALL"}) == 1
    part = {**cg, "topic": "orders", "partition": "0"}
    # the later lag_trends window wins
    assert reg.get_sample_value("lagscope_retention_headroom_seconds", part) == 1800
    assert reg.get_sample_value("lagscope_catchup_eta_seconds", part) == 60
    assert reg.get_sample_value("lagscope_results_last_update_timestamp_seconds", {"table": "status"}) > 0


def test_refresh_reads_new_files_only_after_refresh_interval(synthetic: Synthetic) -> None:
    now = [0.0]
    reg, _ = _registry(synthetic.root, refresh_s=10.0, clock=lambda: now[0])
    labels = {"cluster": "prod", "group": "orders-svc", "status": "OK"}
    assert reg.get_sample_value("lagscope_group_status", labels) == 0
    later = synthetic.now + dt.timedelta(minutes=1)
    write_rows(synthetic.root, STATUS, "prod", [status("orders-svc", later, "OK", "OK")])
    write_rows(synthetic.root, ANOMALIES, "prod", [
        anomaly("prod", "orders-svc", "orders", "stall", synthetic.now - dt.timedelta(minutes=20), later,
                "critical", as_of=later)])
    stall = {"cluster": "prod", "group": "orders-svc", "kind": "stall", "severity": "critical"}
    now[0] = 5.0  # within refresh_s: the cached reading is served
    assert reg.get_sample_value("lagscope_group_status", labels) == 0
    assert reg.get_sample_value("lagscope_anomalies_open", stall) == 1
    now[0] = 11.0
    assert reg.get_sample_value("lagscope_group_status", labels) == 1
    # the stall was written again, closed, under the same key: it is one anomaly, no longer open
    assert reg.get_sample_value("lagscope_anomalies_open", stall) == 0
    assert reg.get_sample_value("lagscope_anomalies_total", stall) == 1


def test_unreadable_table_keeps_previous_reading_and_counts_error(synthetic: Synthetic) -> None:
    now = [0.0]
    reg, _ = _registry(synthetic.root, refresh_s=1.0, clock=lambda: now[0])
    labels = {"cluster": "prod", "group": "orders-svc", "status": "STALL"}
    assert reg.get_sample_value("lagscope_group_status", labels) == 1
    # a corrupt (non-Parquet) visible file makes the status table unreadable
    bad = synthetic.root / "status" / "cluster=prod" / "date=2026-01-01"
    bad.mkdir(parents=True)
    (bad / "broken.parquet").write_bytes(b"not parquet")
    now[0] = 2.0
    assert reg.get_sample_value("lagscope_group_status", labels) == 1
    assert reg.get_sample_value("lagscope_results_read_errors_total") == 1


def test_empty_results_root_exposes_no_findings(tmp_path: object) -> None:
    reg, _ = _registry(tmp_path)
    assert reg.get_sample_value("lagscope_results_read_errors_total") == 0
    assert reg.get_sample_value("lagscope_group_status", {"cluster": "prod", "group": "g", "status": "OK"}) is None


def test_serve_exposes_metrics_over_http(synthetic: Synthetic) -> None:
    write_synthetic(synthetic.root, "staging", "billing", "invoices", synthetic.now)
    server, thread = serve(synthetic.root, port=0)
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read().decode()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert 'lagscope_group_status{cluster="staging",group="billing",status="STALL"} 1.0' in body
    assert 'lagscope_rebalances_total{cause="join",cluster="prod",group="orders-svc"} 1.0' in body


def test_serve_on_a_taken_port_is_one_config_error(tmp_path: Path, taken_port: int) -> None:
    # `lagscope results-exporter` (and `lagscope run` without the collector) on a port in use:
    # one line naming the address, not an OSError traceback
    from lagscope.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"results metrics: cannot listen on 127\.0\.0\.1:{taken_port}: "
                                          r".*Address already in use"):
        serve(tmp_path, port=taken_port)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_values_are_not_exported(tmp_path: object, bad: float) -> None:
    from results_synthetic import trend

    from lagscope.schema import LAG_TRENDS
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    write_rows(tmp_path, LAG_TRENDS, "prod", [trend("g", "t", 0, ts, bad, bad)])  # type: ignore[arg-type]
    reg, _ = _registry(tmp_path)
    assert reg.get_sample_value("lagscope_retention_headroom_seconds",
                                {"cluster": "prod", "group": "g", "topic": "t", "partition": "0"}) is None


def test_docs_list_every_results_metric_with_its_labels(synthetic: Synthetic) -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    section = doc.split("## Results", 1)[1]
    documented = {}
    for line in section.splitlines():
        if line.startswith("| `lagscope_"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            labels = tuple(x.strip().strip("`") for x in cells[1].split(",") if x.strip().startswith("`"))
            documented[cells[0].strip("`")] = (cells[2], tuple(sorted(set(labels) - {"le"})))
    reg, _ = _registry(synthetic.root)
    served = {}
    for family in reg.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = {k for s in family.samples for k in s.labels} - {"le"}
        served[name] = (family.type, tuple(sorted(labels)))
    assert documented == served


_T = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(("rows", "expected"), [
    # written open, later closed: the later (closed) row is current
    ([("open", 1), ("closed", 2)], "closed"),
    # the contract is "latest as_of_ts wins", even over a closed row written earlier
    ([("closed", 1), ("open", 2)], "open"),
    # same as_of_ts (or none at all): closed wins, a window or an anomaly never reopens
    ([("closed", 1), ("open", 1)], "closed"),
    ([("open", None), ("closed", None)], "closed"),
    # a row with as_of_ts beats one without
    ([("open", 2), ("closed", None)], "open"),
])
def test_current_rows(rows: list[tuple[str, int | None]], expected: str) -> None:
    from lagscope.analytics.results_metrics import current_rows

    data = [{"key": "k", "state": state, "end_ts": _T if state == "closed" else None,
             "as_of_ts": _T + dt.timedelta(minutes=m) if m is not None else None} for state, m in rows]
    (row,) = current_rows(data, lambda r: r["key"])
    assert row["state"] == expected


@pytest.mark.slow
def test_results_exporter_command_serves_until_stopped(synthetic: Synthetic) -> None:
    import re
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "lagscope.cli", "results-exporter", "--results",
                             str(synthetic.root), "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/metrics", line)
        assert m, line
        body = urllib.request.urlopen(m.group(0), timeout=10).read().decode()
        assert 'lagscope_group_status{cluster="prod",group="orders-svc",status="STALL"} 1.0' in body
    finally:
        proc.terminate()
        proc.wait(10)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in registry.collect()
            for s in family.samples if not s.name.startswith("lagscope_results_")}


@pytest.mark.spark
@pytest.mark.slow
def test_refresh_after_an_incremental_step_reads_only_its_files(spark: SparkSession, tmp_path: Path) -> None:
    # the analytics' incremental mode over a 6-minute history (a stuck group, a healthy one), in
    # two steps; the exporter refreshes after each
    start = dt.datetime(2026, 1, 5, 10, 0, tzinfo=dt.UTC)
    lake, results = tmp_path / "lake", tmp_path / "results"
    make_history(lake, "prod", start, minutes=6)

    def result_files() -> set[Path]:
        return {p for p in results.glob("*/cluster=*/date=*/*.parquet") if not p.name.startswith((".", "_"))}

    run_incremental(spark, lake, results, settings=AnalyticsSettings(), since=start,
                    until=start + dt.timedelta(minutes=3), progress=False)
    first_files = result_files()
    assert first_files
    registry, collector = _registry(results, refresh_s=0.0)  # every scrape refreshes
    first = collector.reading()
    assert {p for ps in first.files_read.values() for p in ps} == first_files
    # nothing changed: a refresh reads nothing
    assert not any(collector.reading().files_read.values())

    run_incremental(spark, lake, results, settings=AnalyticsSettings(), until=start + dt.timedelta(minutes=6),
                    progress=False)
    new_files = result_files() - first_files
    assert new_files
    # the second step's files are named after its range [start + 3 min, start + 6 min)
    tag = f"inc-{int((start + dt.timedelta(minutes=3)).timestamp() * 1000)}-"
    assert all(p.name.startswith(tag) for p in new_files), sorted(p.name for p in new_files)
    # the refresh reads those and only those
    second = collector.reading()
    assert {p for ps in second.files_read.values() for p in ps} == new_files
    assert registry.get_sample_value("lagscope_results_files_read_total") == len(first_files) + len(new_files)

    # the values are those of a whole reading of the tables
    fresh, _ = _registry(results)
    assert _samples(registry) == _samples(fresh)
    # and what the history tells: the stuck group's stall is open, the healthy group has none
    assert registry.get_sample_value("lagscope_anomalies_open", {"cluster": "prod", "group": "stuck", "kind": "stall",
                                                                 "severity": "critical"}) == 1
    assert not any(k[0] == "lagscope_anomalies_open" and ("group", "healthy") in k[1] and v
                   for k, v in _samples(registry).items())
