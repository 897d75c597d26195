"""The results exporter: result tables in, Prometheus samples out (fresh registry per test)."""

from __future__ import annotations

import datetime as dt
import logging
import math
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.bad_files import KINDS, in_quarantine, quarantine_lines, spoil
from helpers.history import make_history
from helpers.results_steps import publish_batch_rows, publish_provisional_step, publish_step
from helpers.results_synthetic import (
    Synthetic,
    advice,
    anomaly,
    delivery_anomaly,
    rebalance,
    status,
    trend,
    write_synthetic,
)
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession

from lagscope.analytics.job import run_incremental
from lagscope.analytics.results_metrics import ResultsCollector, serve
from lagscope.config import AnalyticsConfig
from lagscope.lake import QuarantineCounts, write_rows
from lagscope.results import list_files as results_files
from lagscope.schema import ADVICE, ANOMALIES, STATUS, Table


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


def _advice_labels(cluster: str, group: str, row: dict[str, object]) -> dict[str, str]:
    return {"cluster": cluster, "group": group, "rule": str(row["rule"]), "setting": str(row["setting"]),
            "current": str(row["current_value"] or ""), "suggested": str(row["suggested"]),
            "confidence": str(row["confidence"])}


def test_advice_info_follows_the_latest_step(synthetic: Synthetic) -> None:
    reg, _ = _registry(synthetic.root, refresh_s=0)
    first = advice(synthetic.group, synthetic.now)
    assert reg.get_sample_value("lagscope_advice_info", _advice_labels("prod", "orders-svc", first)) == 1
    # the next step advises otherwise: only its rows are current (the earlier advice's series goes)
    later = synthetic.now + dt.timedelta(minutes=1)
    nxt = {**advice(synthetic.group, later, rule="max_poll_interval"), "setting": "max.poll.interval.ms",
           "current_value": None, "suggested": "max.poll.interval.ms=540000, or max.poll.records halved"}
    write_rows(synthetic.root, ADVICE, "prod", [nxt], date=later.date())
    assert reg.get_sample_value("lagscope_advice_info", _advice_labels("prod", "orders-svc", nxt)) == 1
    assert reg.get_sample_value("lagscope_advice_info", _advice_labels("prod", "orders-svc", first)) is None
    # a step after it found no advice (the checkpoint moved past it): no advice is current
    from lagscope.analytics.io import Checkpoint, write_checkpoint

    write_checkpoint(synthetic.root, Checkpoint(watermark=(later + dt.timedelta(minutes=1)).isoformat(), version="v"))
    write_rows(synthetic.root, STATUS, "prod", [status(synthetic.group, later, "OK", "OK")])
    samples = [s for f in reg.collect() if f.name == "lagscope_advice_info" for s in f.samples]
    assert samples == []


def test_advice_of_published_steps_reads_the_newest_step_only(tmp_path: Path) -> None:
    # two incremental steps with advice, then a third before its checkpoint moved: a fresh
    # exporter reads the second step's file only (one file read) and serves its rows
    t = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    minute = dt.timedelta(minutes=1)
    first = advice("g", t + minute)
    second = {**advice("g", t + 2 * minute, rule="max_poll_interval"), "setting": "max.poll.interval.ms"}
    publish_step(tmp_path, "prod", t, t + minute, {"advice": [first]})
    publish_step(tmp_path, "prod", t + minute, t + 2 * minute, {"advice": [second]})
    publish_step(tmp_path, "prod", t + 2 * minute, t + 3 * minute,
                 {"advice": [advice("g", t + 3 * minute, rule="restart_storm")]}, checkpoint=False)
    reg, _ = _registry(tmp_path)
    assert reg.get_sample_value("lagscope_advice_info", _advice_labels("prod", "g", second)) == 1
    assert reg.get_sample_value("lagscope_advice_info", _advice_labels("prod", "g", first)) is None
    assert reg.get_sample_value("lagscope_results_files_read_total") == 1


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
    # the analytics' publish marker cannot be read: no result table can be listed
    state = synthetic.root / "_state"
    state.mkdir(exist_ok=True)
    (state / "publishing.json").write_text("{not json")
    now[0] = 2.0
    assert reg.get_sample_value("lagscope_group_status", labels) == 1
    assert reg.get_sample_value("lagscope_results_read_errors_total") == 5  # every table (the advice too), once


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_result_file_is_quarantined_and_skipped(synthetic: Synthetic, caplog: pytest.LogCaptureFixture,
                                                      quarantined: QuarantineCounts, kind: str) -> None:
    now = [0.0]
    reg, _ = _registry(synthetic.root, refresh_s=1.0, clock=lambda: now[0])
    reg.register(quarantined)
    labels = {"cluster": "prod", "group": "orders-svc", "status": "STALL"}
    assert reg.get_sample_value("lagscope_group_status", labels) == 1
    # a later status file of the group, spoilt: the exporter moves it aside and keeps the group's
    # latest readable status (as if the file had never been written)
    later = write_rows(synthetic.root, STATUS, "prod",
                       [status("orders-svc", synthetic.now + dt.timedelta(minutes=5), "OK", "OK")])
    assert later is not None
    spoil(later, kind)
    now[0] = 2.0
    assert reg.get_sample_value("lagscope_group_status", labels) == 1
    assert reg.get_sample_value("lagscope_group_status", {**labels, "status": "OK"}) == 0
    assert reg.get_sample_value("lagscope_results_read_errors_total") == 0
    assert reg.get_sample_value("lagscope_lake_files_quarantined_total", {"cluster": "prod", "table": "status"}) == 1
    assert in_quarantine(later).exists()
    assert not later.exists()
    lines = quarantine_lines(caplog)
    assert len(lines) == 1
    assert str(later) in lines[0]
    assert [r for r in caplog.records if r.name == "lagscope.analytics.results_metrics"] == []


def test_serve_warns_once_of_a_missing_results_folder(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # `lagscope results-exporter --results /no/such/folder`: one line at start, then an empty endpoint
    missing = tmp_path / "no" / "such" / "folder"
    server, thread = serve(missing, port=0, refresh_s=0.0)
    try:
        for _ in range(3):
            urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/metrics", timeout=5).read()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [f"results metrics: the results folder {missing} does not exist (yet): no findings are "
                     "exported until the analytics write it"]


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
    # a skip and a rewind, so that the delivery counters have their labels
    write_rows(synthetic.root, ANOMALIES, "prod", [
        delivery_anomaly("orders-svc", "orders", 1, "skip", synthetic.now, synthetic.now, 10.0),
        delivery_anomaly("orders-svc", "orders", 1, "rewind", synthetic.now, synthetic.now, 10.0)])
    reg, _ = _registry(synthetic.root)
    served = {}
    for family in reg.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        labels = {k for s in family.samples for k in s.labels} - {"le"}
        served[name] = (family.type, tuple(sorted(labels)))
    assert documented == served


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

    run_incremental(spark, lake, results, settings=AnalyticsConfig(), since=start,
                    until=start + dt.timedelta(minutes=3), progress=False)
    first_files = result_files()
    assert first_files
    registry, collector = _registry(results, refresh_s=0.0)  # every scrape refreshes
    first = collector.reading()
    assert {p for ps in first.files_read.values() for p in ps} == first_files
    # nothing changed: a refresh reads nothing
    assert not any(collector.reading().files_read.values())

    run_incremental(spark, lake, results, settings=AnalyticsConfig(), until=start + dt.timedelta(minutes=6),
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


# --------------------------------------------------------------------------------------------
# what the exporter holds: the exported series, not the history
# --------------------------------------------------------------------------------------------

D0 = dt.datetime(2026, 2, 1, 22, 0, tzinfo=dt.UTC)
STEP = dt.timedelta(minutes=30)


def _step_rows(i: int, partitions: int = 3) -> dict[str, list[dict[str, object]]]:
    """One half-hour step: a lag trend per partition, the group's status, a stall anomaly open
    since the first step (written again every step, closed at step 5), a rebalance window per
    step (a join; the last one open)."""
    at = D0 + i * STEP
    stall_start = D0
    return {
        "lag_trends": [trend("g", "t", p, at, 1000.0 + i * 10 + p, 60.0) for p in range(partitions)],
        "status": [status("g", at + STEP, "WARN" if i % 2 else "OK", "OK")],
        "anomalies": [anomaly("prod", "g", "t", "stall", stall_start, (at + STEP) if i == 5 else None, "critical",
                              as_of=at + STEP)] if i <= 5 else [],
        "rebalances": [rebalance("g", at + dt.timedelta(minutes=1), None if i == 7 else 4.0 + i, "join",
                                 as_of=at + STEP)],
    }


def _publish_steps(root: Path, first: int, last: int) -> None:
    for i in range(first, last):
        publish_step(root, "prod", D0 + i * STEP, D0 + (i + 1) * STEP, _step_rows(i))


def test_memory_holds_the_series_not_the_steps(tmp_path: Path) -> None:
    # eight half-hour steps across midnight: 24 lag trend rows, 8 status rows, 6 stall rows, 8 windows
    _publish_steps(tmp_path, 0, 4)
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    # per partition one trend, per group one status; the open stall and the windows of the last
    # hour as records (steps up to 2:00 after D0: the window written at 0:30 is folded)
    snapshot = collector.reading()
    assert snapshot.held() == {"lag_trends": 3, "status": 1, "anomalies": 1, "rebalances": 3}
    assert snapshot.folded() == {"anomalies": 0, "rebalances": 1}
    _publish_steps(tmp_path, 4, 8)
    snapshot = collector.reading()
    # steps up to 4:00: the closed windows written before 3:00 are folded, the stall (closed
    # at 3:00), the window written at 3:00, the one at 3:30 and the open one are records
    assert snapshot.held() == {"lag_trends": 3, "status": 1, "anomalies": 1, "rebalances": 3}
    assert snapshot.folded() == {"anomalies": 0, "rebalances": 5}
    # the second refresh read the four new steps' files only
    assert {p.name.split("-")[1] for ps in snapshot.files_read.values() for p in ps} == {
        str(int((D0 + i * STEP).timestamp() * 1000)) for i in range(4, 8)}
    # and it exports what a whole reading of the tables does
    fresh, _ = _registry(tmp_path)
    assert _samples(registry) == _samples(fresh)
    part = {"cluster": "prod", "group": "g", "topic": "t", "partition": "2"}
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", part) == 1000.0 + 7 * 10 + 2
    stall = {"cluster": "prod", "group": "g", "kind": "stall", "severity": "critical"}
    assert registry.get_sample_value("lagscope_anomalies_total", stall) == 1
    assert registry.get_sample_value("lagscope_anomalies_open", stall) == 0
    cg = {"cluster": "prod", "group": "g"}
    assert registry.get_sample_value("lagscope_rebalances_total", {**cg, "cause": "join"}) == 8
    assert registry.get_sample_value("lagscope_rebalance_duration_seconds_count", cg) == 7
    assert registry.get_sample_value("lagscope_rebalance_last_duration_seconds", cg) == 4.0 + 6
    assert registry.get_sample_value("lagscope_rebalance_in_progress", cg) == 1
    assert registry.get_sample_value("lagscope_group_status", {**cg, "status": "WARN"}) == 1


def test_a_partition_and_a_group_no_longer_written_are_no_longer_exported(tmp_path: Path) -> None:
    # `gone` is deleted after the first step: its rows stop while g's go on; once its latest rows are
    # more than the horizon older than its cluster's newest, its series are gone from the exposition
    def rows(i: int, groups: tuple[str, ...]) -> dict[str, list[dict[str, object]]]:
        at = D0 + i * STEP
        return {"lag_trends": [trend(g, "t", 0, at, 100.0 + i, 60.0) for g in groups],
                "status": [status(g, at + STEP, "STOP", "STOP") for g in groups]}

    publish_step(tmp_path, "prod", D0, D0 + STEP, rows(0, ("g", "gone")))
    registry, collector = _registry(tmp_path, refresh_s=0.0, gone_after_s=3600.0)

    def exported(group: str) -> tuple[float | None, float | None]:
        return (registry.get_sample_value("lagscope_retention_headroom_seconds",
                                          {"cluster": "prod", "group": group, "topic": "t", "partition": "0"}),
                registry.get_sample_value("lagscope_group_status", {"cluster": "prod", "group": group,
                                                                    "status": "STOP"}))

    assert exported("gone") == (100.0, 1.0)
    for i in (1, 2):  # the newest rows an hour after gone's: not more than the horizon
        publish_step(tmp_path, "prod", D0 + i * STEP, D0 + (i + 1) * STEP, rows(i, ("g",)))
        assert exported("gone") == (100.0, 1.0)
    publish_step(tmp_path, "prod", D0 + 3 * STEP, D0 + 4 * STEP, rows(3, ("g",)))
    assert exported("gone") == (None, None)
    assert exported("g") == (103.0, 1.0)
    assert collector.reading().held()["lag_trends"] == 1
    fresh, _ = _registry(tmp_path, gone_after_s=3600.0)
    assert _samples(registry) == _samples(fresh)
    # a cluster whose steps all stopped keeps its series (the newest is old too), however late it is read
    late, _ = _registry(tmp_path, gone_after_s=60.0)
    assert _samples(late) == _samples(fresh)


def test_a_step_not_checkpointed_is_not_exported(tmp_path: Path) -> None:
    _publish_steps(tmp_path, 0, 2)
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    part = {"cluster": "prod", "group": "g", "topic": "t", "partition": "0"}
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", part) == 1010.0
    # the next step's files are in place, its checkpoint is not (being published, or crashed)
    publish_step(tmp_path, "prod", D0 + 2 * STEP, D0 + 3 * STEP, _step_rows(2), checkpoint=False)
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", part) == 1010.0
    assert not any(collector.reading().files_read.values())


def test_a_batch_over_read_days_is_read_again_whole(tmp_path: Path) -> None:
    _publish_steps(tmp_path, 0, 8)
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    collector.reading()
    # a batch rewrites the first day: one partition, a commit gap instead of the stall, one window
    first_day = [i for i in range(8) if (D0 + i * STEP).date() == D0.date()]
    rows: dict[str, list[dict[str, object]]] = {"lag_trends": [], "status": [], "rebalances": []}
    for i in first_day:
        step = _step_rows(i, partitions=1)
        for table in rows:
            rows[table] += step[table][:1]
    rows["anomalies"] = [anomaly("prod", "g", "t", "commit_gap", D0, D0 + STEP, "warning", as_of=D0 + STEP)]
    rows["rebalances"] = rows["rebalances"][:1]  # one window that day instead of four
    publish_batch_rows(tmp_path, "prod", D0.date(), D0.date(), rows)
    snapshot = collector.reading()
    fresh, _ = _registry(tmp_path)
    assert _samples(registry) == _samples(fresh)
    labels = {"cluster": "prod", "group": "g", "severity": "critical"}
    assert registry.get_sample_value("lagscope_anomalies_total", {**labels, "kind": "stall"}) is None
    assert registry.get_sample_value("lagscope_anomalies_total", {**labels, "kind": "commit_gap",
                                                                  "severity": "warning"}) == 1
    # the day's windows are gone from the holdings too: its one, the next day's four
    assert snapshot.held()["rebalances"] + snapshot.folded()["rebalances"] == 1 + 4
    assert registry.get_sample_value("lagscope_rebalances_total", {"cluster": "prod", "group": "g",
                                                                   "cause": "join"}) == 1 + 4


def test_days_removed_by_retention_are_dropped_without_reading_again(tmp_path: Path) -> None:
    _publish_steps(tmp_path, 0, 8)
    # partition 9 of the first day only: its series ends with that day (the gone horizon off here: the
    # day's removal alone drops it)
    publish_step(tmp_path, "prod", D0 + 8 * STEP, D0 + 9 * STEP, {"lag_trends": [
        trend("g", "t", 9, D0, 5.0, None)]})
    registry, collector = _registry(tmp_path, refresh_s=0.0, gone_after_s=math.inf)
    gone = {"cluster": "prod", "group": "g", "topic": "t", "partition": "9"}
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", gone) == 5.0
    import shutil

    for table in ("lag_trends", "status", "anomalies", "rebalances"):
        shutil.rmtree(tmp_path / table / "cluster=prod" / f"date={D0.date()}")
    snapshot = collector.reading()
    assert not any(snapshot.files_read.values())  # nothing read again: what came from the day is dropped
    fresh, _ = _registry(tmp_path, gone_after_s=math.inf)
    assert _samples(registry) == _samples(fresh)
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", gone) is None
    assert registry.get_sample_value("lagscope_rebalances_total", {"cluster": "prod", "group": "g",
                                                                   "cause": "join"}) == 4


def test_a_day_removed_before_newer_ones_makes_a_series_table_read_again(tmp_path: Path) -> None:
    import shutil

    # three days of lag trends; the middle one is removed (by hand: retention removes the oldest)
    for day in range(3):
        at = D0 + dt.timedelta(days=day)
        publish_step(tmp_path, "prod", at, at + STEP, {"lag_trends": [
            trend("g", "t", day, at, 100.0 + day, None)]})
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    collector.reading()
    shutil.rmtree(tmp_path / "lag_trends" / "cluster=prod" / f"date={(D0 + dt.timedelta(days=1)).date()}")
    snapshot = collector.reading()
    assert len(snapshot.files_read["lag_trends"]) == 2  # read again whole
    fresh, _ = _registry(tmp_path)
    assert _samples(registry) == _samples(fresh)


def test_a_folded_event_written_again_is_counted_once(tmp_path: Path) -> None:
    # a rebalance storm closes, is folded an hour later, then grows (written again, same key,
    # a later end): the exporter reads its folder again instead of counting it twice
    def storm(end: dt.datetime, as_of: dt.datetime) -> dict[str, object]:
        return anomaly("prod", "g", None, "rebalance_storm", D0, end, "warning", partition=None, as_of=as_of)

    publish_step(tmp_path, "prod", D0, D0 + STEP, {"anomalies": [storm(D0 + STEP, D0 + STEP)]})
    for i in range(1, 4):  # the stall of the other tables' steps keeps the steps going
        publish_step(tmp_path, "prod", D0 + i * STEP, D0 + (i + 1) * STEP, {"lag_trends": [
            trend("g", "t", 0, D0 + i * STEP, 1.0, None)], "anomalies": [
            anomaly("prod", "g", "t", "stall", D0 + i * STEP, None, "critical", as_of=D0 + (i + 1) * STEP)]})
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    assert collector.reading().folded()["anomalies"] == 1
    labels = {"cluster": "prod", "group": "g", "kind": "rebalance_storm", "severity": "warning"}
    assert registry.get_sample_value("lagscope_anomalies_total", labels) == 1
    publish_step(tmp_path, "prod", D0 + 4 * STEP, D0 + 5 * STEP, {"anomalies": [storm(D0 + 5 * STEP, D0 + 5 * STEP)]})
    snapshot = collector.reading()
    assert registry.get_sample_value("lagscope_anomalies_total", labels) == 1
    # the new file, then its folder whole
    assert snapshot.files_read["anomalies"][1:] == results_files(tmp_path, "anomalies")
    fresh, _ = _registry(tmp_path)
    assert _samples(registry) == _samples(fresh)


def test_a_withdrawn_anomaly_drops_out_of_the_counts(tmp_path: Path) -> None:
    # two stalls published open by a step written before the withdrawn column; the next step
    # withdraws the one on partition 1 (end_ts set, withdrawn); steps over an hour later fold
    # the withdrawn row; a later step reports it again
    def stall(partition: int, end: dt.datetime | None, as_of: dt.datetime, **kw: object) -> dict[str, object]:
        return {**anomaly("prod", "g", "t", "stall", D0, end, "critical", partition=partition, as_of=as_of), **kw}

    old = Table("anomalies", pa.schema([f for f in ANOMALIES.schema if f.name != "withdrawn"]), ANOMALIES.doc)
    write_rows(tmp_path, old, "prod", [stall(0, None, D0 + STEP), stall(1, None, D0 + STEP)])
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    labels = {"cluster": "prod", "group": "g", "kind": "stall", "severity": "critical"}

    def counts() -> tuple[float | None, float | None]:
        assert _samples(registry) == _samples(_registry(tmp_path)[0])  # as a whole reading of the tables
        return (registry.get_sample_value("lagscope_anomalies_open", labels),
                registry.get_sample_value("lagscope_anomalies_total", labels))

    assert counts() == (2, 2)
    gone = stall(1, D0 + dt.timedelta(seconds=120), D0 + 2 * STEP, detail="withdrawn: test", withdrawn=True)
    publish_step(tmp_path, "prod", D0 + STEP, D0 + 2 * STEP, {"anomalies": [
        stall(0, None, D0 + 2 * STEP, withdrawn=False), gone]})
    assert counts() == (1, 1)
    for i in range(2, 5):
        publish_step(tmp_path, "prod", D0 + i * STEP, D0 + (i + 1) * STEP, {"anomalies": [
            stall(0, None, D0 + (i + 1) * STEP)]})
    assert collector.reading().folded()["anomalies"] == 1  # the withdrawn row, folded as nothing
    assert counts() == (1, 1)
    # reported again: its folder is read again whole, and it counts
    publish_step(tmp_path, "prod", D0 + 5 * STEP, D0 + 6 * STEP, {"anomalies": [
        stall(0, None, D0 + 6 * STEP), stall(1, None, D0 + 6 * STEP)]})
    assert collector.reading().folded()["anomalies"] == 0
    assert counts() == (2, 2)


# --------------------------------------------------------------------------------------------
# delivery: messages lost and reprocessed
# --------------------------------------------------------------------------------------------

#: the anomalies table as written before its ``cause`` column
BEFORE_CAUSE = Table("anomalies", pa.schema([f for f in ANOMALIES.schema if f.name != "cause"]), ANOMALIES.doc)


def _delivery(registry: CollectorRegistry, measure: str, topic: str, cause: str, group: str = "g") -> float | None:
    return registry.get_sample_value(f"lagscope_messages_{measure}_total",
                                     {"cluster": "prod", "group": group, "topic": topic, "cause": cause})


def test_delivery_counters_sum_by_group_topic_and_cause(tmp_path: Path) -> None:
    # results written before the cause column: the kind's own cause
    write_rows(tmp_path, BEFORE_CAUSE, "prod", [
        delivery_anomaly("g", "t", 0, "skip", D0, D0, 70.0, as_of=D0 + STEP),
        delivery_anomaly("g", "t", 1, "skip", D0, D0, 130.0, as_of=D0 + STEP),
        delivery_anomaly("g", "t", 2, "retention_loss", D0, D0 + STEP, 40.0, as_of=D0 + STEP),
        delivery_anomaly("g", "t", 3, "rewind", D0, D0, 500.0, as_of=D0 + STEP),
        # a stall counts no message
        anomaly("prod", "g", "t", "stall", D0, None, "critical", as_of=D0 + STEP)])
    # and after it: an admin tool's resets, both ways, on another topic
    write_rows(tmp_path, ANOMALIES, "prod", [
        delivery_anomaly("g", "u", 0, "skip", D0 + STEP, D0 + STEP, 300.0, "admin_reset", as_of=D0 + 2 * STEP),
        delivery_anomaly("g", "u", 1, "rewind", D0 + STEP, D0 + STEP, 25.0, "admin_reset", as_of=D0 + 2 * STEP),
        delivery_anomaly("g", "u", 2, "skip", D0 + STEP, D0 + STEP, 9.0, "out_of_range_reset", as_of=D0 + 2 * STEP),
        # a retention loss not proven (a warning: its owner may hold the records) counts nothing
        {**delivery_anomaly("g", "v", 0, "retention_loss", D0 + STEP, D0 + 2 * STEP, 7.0, "retention",
                            as_of=D0 + 2 * STEP), "severity": "warning"}])
    registry, _ = _registry(tmp_path)
    assert _delivery(registry, "lost", "t", "seek") == 200  # 70 + 130 over two partitions
    assert _delivery(registry, "lost", "t", "retention") == 40
    assert _delivery(registry, "reprocessed", "t", "rewind") == 500
    assert _delivery(registry, "lost", "u", "admin_reset") == 300
    assert _delivery(registry, "reprocessed", "u", "admin_reset") == 25
    assert _delivery(registry, "lost", "u", "out_of_range_reset") == 9
    assert _delivery(registry, "lost", "v", "retention") is None
    assert registry.get_sample_value("lagscope_anomalies_total", {"cluster": "prod", "group": "g",
                                                                 "kind": "retention_loss", "severity": "warning"}) == 1
    # a rewind loses nothing, a skip reprocesses nothing: no such series
    assert _delivery(registry, "lost", "t", "rewind") is None
    assert _delivery(registry, "reprocessed", "t", "seek") is None


def test_delivery_counters_count_a_finding_once_and_only_go_up(tmp_path: Path) -> None:
    """A retention loss open over three steps (written again by each, growing, then a later row
    that says less), a folded skip written again, then the first day removed by retention."""
    def loss(messages: float, end: dt.datetime | None, as_of: dt.datetime) -> dict[str, object]:
        return delivery_anomaly("g", "t", 0, "retention_loss", D0, end, messages, as_of=as_of)

    publish_step(tmp_path, "prod", D0, D0 + STEP, {"anomalies": [loss(10.0, None, D0 + STEP)]})
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    seen = [_delivery(registry, "lost", "t", "retention")]
    publish_step(tmp_path, "prod", D0 + STEP, D0 + 2 * STEP, {"anomalies": [loss(25.0, None, D0 + 2 * STEP)]})
    seen.append(_delivery(registry, "lost", "t", "retention"))
    # closed by the next step with a smaller deficit at its last sweep: the finding's count stays 25
    publish_step(tmp_path, "prod", D0 + 2 * STEP, D0 + 3 * STEP, {"anomalies": [
        loss(20.0, D0 + 3 * STEP, D0 + 3 * STEP),
        delivery_anomaly("g", "t", 1, "skip", D0 + 2 * STEP, D0 + 2 * STEP, 5.0, as_of=D0 + 3 * STEP)]})
    seen.append(_delivery(registry, "lost", "t", "retention"))
    assert seen == [10, 25, 25]
    # steps of the next day fold both (closed over an hour ago); the skip is written again (a
    # redone step): its day is read again, and it still counts once
    day2 = D0 + dt.timedelta(days=1)
    publish_step(tmp_path, "prod", day2, day2 + STEP, {"anomalies": [
        anomaly("prod", "g", "t", "stall", day2, None, "critical", as_of=day2 + STEP)]})
    assert collector.reading().folded()["anomalies"] == 2
    publish_step(tmp_path, "prod", day2 + STEP, day2 + 2 * STEP, {"anomalies": [
        delivery_anomaly("g", "t", 1, "skip", D0 + 2 * STEP, D0 + 2 * STEP, 5.0, as_of=day2 + 2 * STEP)]})
    assert _delivery(registry, "lost", "t", "seek") == 5
    assert _delivery(registry, "lost", "t", "retention") == 25
    # retention removes the first day: the counters keep what it counted
    import shutil

    shutil.rmtree(tmp_path / "anomalies" / "cluster=prod" / f"date={D0.date()}")
    assert _delivery(registry, "lost", "t", "retention") == 25
    assert _delivery(registry, "lost", "t", "seek") == 5
    # a new loss on top
    publish_step(tmp_path, "prod", day2 + 2 * STEP, day2 + 3 * STEP, {"anomalies": [
        delivery_anomaly("g", "t", 2, "skip", day2 + 2 * STEP, day2 + 2 * STEP, 7.0, as_of=day2 + 3 * STEP)]})
    assert _delivery(registry, "lost", "t", "seek") == 12


def test_a_provisional_step_is_laid_over_the_full_steps_and_replaced(tmp_path: Path) -> None:
    # two full steps, then provisional steps over the step in progress: each is exported at
    # once (as a whole reading of the tables shows it), the next one replaces it, and the full
    # step replaces the last; the exporter's folded state never holds a provisional row
    _publish_steps(tmp_path, 0, 2)
    registry, collector = _registry(tmp_path, refresh_s=0.0)
    w = D0 + 2 * STEP
    cg = {"cluster": "prod", "group": "g"}
    part = {**cg, "topic": "t", "partition": "0"}
    lag = {**cg, "kind": "lag_growth", "severity": "warning"}
    assert registry.get_sample_value("lagscope_group_status", {**cg, "status": "WARN"}) == 1
    pre = {"lag_trends": [trend("g", "t", 0, w, 5.0, 60.0)], "status": [status("g", w + dt.timedelta(seconds=20),
                                                                              "STALL", "STALL")],
           "anomalies": [anomaly("prod", "g", "t", "lag_growth", w, None, "warning", as_of=w + STEP / 2)]}
    publish_provisional_step(tmp_path, "prod", w, w + STEP / 2, pre)
    assert registry.get_sample_value("lagscope_group_status", {**cg, "status": "STALL"}) == 1
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", part) == 5.0
    assert registry.get_sample_value("lagscope_anomalies_open", lag) == 1
    assert _samples(registry) == _samples(_registry(tmp_path)[0])
    assert any(p.name.startswith("pre-") for ps in collector.reading().files_read.values() for p in ps)
    # the next provisional step no longer finds the lag growth, and the group is OK
    publish_provisional_step(tmp_path, "prod", w, w + STEP * 3 / 4, {
        "status": [status("g", w + dt.timedelta(seconds=40), "OK", "OK")]})
    assert registry.get_sample_value("lagscope_group_status", {**cg, "status": "OK"}) == 1
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", part) == 1010.0
    assert registry.get_sample_value("lagscope_anomalies_open", lag) is None
    assert _samples(registry) == _samples(_registry(tmp_path)[0])
    # the full step over the range: its rows, nothing provisional left, no folder read again
    publish_step(tmp_path, "prod", w, w + STEP, _step_rows(2))
    reading = collector.reading()
    assert _samples(registry) == _samples(_registry(tmp_path)[0])
    assert registry.get_sample_value("lagscope_retention_headroom_seconds", part) == 1020.0
    assert all(p.name.startswith("inc-") for ps in reading.files_read.values() for p in ps)
    assert reading.committed == reading.tables
