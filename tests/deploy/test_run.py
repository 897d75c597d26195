"""``lagscope run``, the production entry point: collector + analytics loop + metrics + webhooks.

The end-to-end test runs the real command as a subprocess against the real broker, with a
lake that already holds some history (a stalled group on another cluster), and checks each
part's output: live lag on /metrics, result tables and their metrics, a signed webhook at a
real HTTP sink; then SIGTERM stops it cleanly (exit 0, port closed, every sweep recorded).
The lifecycle rules (start order, reverse stop, cleanup on a failed start, a dead component)
are unit-tested on stand-in components.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.history import make_history
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata, TopicPartition

from lagscope.deploy.run import Runner
from lagscope.devtools.broker import free_port
from lagscope.devtools.sink import WebhookSink
from lagscope.lake import read_table
from lagscope.results import read as read_results

LAGSCOPE = [sys.executable, "-m", "lagscope.cli"]



def _metrics(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            return str(resp.read().decode())
    except (urllib.error.URLError, OSError):
        return ""


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_run_collects_analyses_alerts_and_stops_cleanly(bootstrap: str, unique: str, tmp_path: Path) -> None:
    # a live group with lag 7 on partition 0: 12 messages, committed offset 5
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(unique, num_partitions=1, replication_factor=1)])
        for i in range(12):
            producer.send(unique, f"m{i}".encode(), partition=0)
        producer.flush()
        admin.alter_group_offsets(unique, {TopicPartition(unique, 0): OffsetAndMetadata(5, "", -1)})
    finally:
        producer.close()
        admin.close()

    lake = tmp_path / "data" / "lake"
    # history two hours ago: the first analytics run (backfill 24 h) finds its stall
    make_history(lake, "history", (dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)).replace(second=0, microsecond=0))
    port = free_port()
    sink = WebhookSink(tmp_path / "hooks.jsonl", secret=b"run-test-secret").start()
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({
        "clusters": [{"name": "live", "bootstrap_servers": [bootstrap], "groups": {"include": [unique]}}],
        "collector": {"interval_s": 1, "lake": str(lake)},
        "metrics": {"bind": "127.0.0.1", "port": port},
        # routes in the settings: lagscope run runs the alerts part too
        "alerts": {"lookback_s": 3 * 86400, "routes": [
            {"name": "sink", "url": f"{sink.url}/hook", "format": "generic", "min_severity": "warning",
             "groups": ["stu.*"], "secret_env": "RUN_TEST_SECRET", "timeout_s": 5}]},
    }))
    proc = subprocess.Popen(
        [*LAGSCOPE, "run", "--config", str(config), "--master", "local[1]",
         "--analytics-interval", "5", "--alerts-interval", "2"],
        env={**os.environ, "RUN_TEST_SECRET": "run-test-secret", "SPARK_LOCAL_IP": "127.0.0.1"},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout or []), daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        lag_line = results_line = ""
        while time.monotonic() < deadline and proc.poll() is None:
            text = _metrics(port)
            lag_line = next((ln for ln in text.splitlines() if ln.startswith("kafka_consumergroup_lag{")
                             and f'consumergroup="{unique}"' in ln), "")
            results_line = next((ln for ln in text.splitlines()
                                 if ln.startswith("lagscope_anomalies_open{") and 'group="stuck"' in ln), "")
            if lag_line and results_line and any(r["payload"] for r in sink.records()):
                break
            time.sleep(1)
        assert proc.poll() is None, "".join(output)[-4000:]
        # the collector: live lag on /metrics
        assert lag_line.endswith(" 7.0"), lag_line
        # the analytics: the history's stall is a result table row and a metric on the same endpoint
        assert results_line, "".join(output)[-4000:]
        anomalies = read_results(tmp_path / "data" / "results", "anomalies").to_pylist()
        kinds = {(r["group_id"], r["kind"]) for r in anomalies}
        assert ("stuck", "stall") in kinds
        # the alerts: a signed webhook about the stuck group reached the sink
        hooks = sink.records()
        assert hooks, "".join(output)[-4000:]
        assert all(h["signature_ok"] for h in hooks)
        assert any("stuck" in str(h["payload"]) for h in hooks)
        # the route's group regex (stu.*) let through the stuck group's findings only
        assert {h["payload"]["group"] for h in hooks if h["payload"]} == {"stuck"}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
            sink.stop()
    reader.join(timeout=5)
    log = "".join(output)
    assert code == 0, log[-4000:]
    assert "lagscope stopped" in log
    assert _metrics(port) == ""  # the endpoint is closed
    sweeps = read_table(lake, "sweeps", cluster="live").to_pylist()
    assert sweeps
    assert all(s["ok"] for s in sweeps)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        # the alerts part needs its routes
        (["--component", "alerts"], 1, "alerts.routes: the alerts part needs at least one route"),
        # the separate routes file is gone: its routes are the alerts section of the settings
        (["--alerts", "alerts.yaml"], 2, "--alerts"),
        # a backfill that is not a duration
        (["--analytics-backfill", "yesterday"], 1, "--analytics-backfill"),
        # a component name the command does not know
        (["--component", "dashboards"], 2, "dashboards"),
    ],
)
def test_bad_arguments_fail_before_anything_starts(tmp_path: Path, args: list[str], code: int,
                                                   message: str) -> None:
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({"clusters": [{"name": "c", "bootstrap_servers": ["127.0.0.1:9"]}],
                                      "collector": {"lake": str(tmp_path / "lake")}}))
    proc = subprocess.run([*LAGSCOPE, "run", "--config", str(config), *args], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "lake").exists()


def test_unset_webhook_secret_fails_before_anything_starts(tmp_path: Path) -> None:
    # a route signs with secret_env: a missing variable (a Secret key not mounted) is one error
    # line at start (docs/troubleshooting.md), not a process that runs and never delivers
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({
        "collector": {"lake": str(tmp_path / "lake")}, "metrics": {"port": 0},
        "alerts": {"routes": [{"name": "oncall", "url": "http://127.0.0.1:9/hook",
                               "secret_env": "LAGSCOPE_TEST_UNSET_SECRET"}]}}))
    env = {k: v for k, v in os.environ.items() if k != "LAGSCOPE_TEST_UNSET_SECRET"}
    proc = subprocess.run([*LAGSCOPE, "run", "--config", str(config), "--component", "alerts",
                           "--results", str(tmp_path / "results")],
                          capture_output=True, text=True, timeout=30, check=False, env=env)
    assert proc.returncode == 1, proc.stderr
    assert "error: alerts route oncall: environment variable LAGSCOPE_TEST_UNSET_SECRET is not set" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "alerts-outbox.sqlite").exists()


def test_invalid_settings_are_one_line_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({"clusters": [{"name": "c", "bootstrap_servers": ["no-port"]}]}))
    proc = subprocess.run([*LAGSCOPE, "run", "--config", str(config)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and "streamlit" not in ln]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("config error: clusters[0].bootstrap_servers")


class Fake:
    def __init__(self, name: str, events: list[str], *, fail_start: bool = False) -> None:
        self.name, self.events, self.fail_start, self.alive = name, events, fail_start, False

    def start(self) -> None:
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.alive = True
        self.events.append(f"start {self.name}")

    def stop(self) -> None:
        self.alive = False
        self.events.append(f"stop {self.name}")

    def is_healthy(self) -> bool:
        return self.alive


def test_runner_starts_in_order_and_stops_in_reverse() -> None:
    events: list[str] = []
    runner = Runner([Fake("alerts", events), Fake("analytics", events), Fake("collector", events)])
    runner.start()
    stop = threading.Event()
    stop.set()
    assert runner.wait(stop) == 0
    runner.stop()
    assert events == ["start alerts", "start analytics", "start collector",
                      "stop collector", "stop analytics", "stop alerts"]


def test_a_failed_start_stops_what_already_started() -> None:
    events: list[str] = []
    runner = Runner([Fake("alerts", events), Fake("analytics", events), Fake("collector", events, fail_start=True)])
    with pytest.raises(RuntimeError, match="collector cannot start"):
        runner.start()
    assert events == ["start alerts", "start analytics", "stop analytics", "stop alerts"]


def test_a_dead_component_ends_the_wait_with_1() -> None:
    events: list[str] = []
    parts: list[Any] = [Fake("alerts", events), Fake("collector", events)]
    runner = Runner(parts)
    runner.start()
    parts[0].alive = False  # its thread died
    assert runner.wait(threading.Event(), poll_s=0.01) == 1
    runner.stop()
    assert events[-2:] == ["stop collector", "stop alerts"]
