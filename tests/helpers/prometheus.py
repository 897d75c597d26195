"""A real Prometheus (Debian's ``prometheus`` binary) for integration tests, on loopback.

    with PrometheusServer(tmp_path, targets=["127.0.0.1:9839"]) as prom:
        prom.wait_for_target_up()
        series = prom.wait_for('kafka_consumergroup_lag{consumergroup="g"}', lambda r: len(r) == 2)
        value = prom.query_value('sum(kafka_consumergroup_lag)')

It writes a prometheus.yml (scrape interval 1 s by default, optional rule files, optionally a
job ``prometheus`` scraping Prometheus itself), starts
``prometheus --config.file … --storage.tsdb.path … --web.listen-address 127.0.0.1:<free port>``
and stops it by PID (SIGTERM, then SIGKILL) at teardown. A missing binary is a failure, not a
skip (install it with ``scripts/setup.sh --system``).

Reused by the dashboards tests to run every Grafana panel query against a real Prometheus:
:meth:`PrometheusServer.query` returns the raw result, :meth:`query_range` a range query,
:meth:`rules` the loaded alert/recording rules.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from lagscope.devtools.broker import free_port

__all__ = ["PrometheusError", "PrometheusServer", "free_port", "prometheus_binary"]


class PrometheusError(RuntimeError):
    """Prometheus could not be started, or a query failed."""



def prometheus_binary() -> str:
    found = shutil.which("prometheus")
    if found is None:
        raise PrometheusError("the prometheus binary is not on PATH: run scripts/setup.sh --system")
    return found


class PrometheusServer:
    """One Prometheus process scraping ``targets`` (host:port list) at ``scrape_interval``."""

    def __init__(self, workdir: Path, targets: Sequence[str] = (), *, scrape_interval: str = "1s",
                 metrics_path: str = "/metrics", job: str = "lagscope", rule_files: Sequence[Path] = (),
                 evaluation_interval: str | None = None, extra_scrape_configs: Sequence[dict[str, Any]] = (),
                 scrape_self: bool = False) -> None:
        self.workdir = Path(workdir) / "prometheus"
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.metrics_path = metrics_path
        self.job = job
        self.rule_files = [Path(p) for p in rule_files]
        self.evaluation_interval = evaluation_interval or scrape_interval
        self.extra_scrape_configs = list(extra_scrape_configs)
        self.scrape_self = scrape_self
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def log_file(self) -> Path:
        return self.workdir / "prometheus.log"

    # -- lifecycle ---------------------------------------------------------------------------
    def write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config: dict[str, Any] = {
            "global": {"scrape_interval": self.scrape_interval, "scrape_timeout": self.scrape_interval,
                       "evaluation_interval": self.evaluation_interval},
            "scrape_configs": [
                {"job_name": self.job, "metrics_path": self.metrics_path,
                 "static_configs": [{"targets": self.targets}]},
                *self.extra_scrape_configs,
            ],
        }
        if self.scrape_self:  # job "prometheus": its own metrics, e.g. duplicate-sample counters
            config["scrape_configs"].append({"job_name": "prometheus",
                                             "static_configs": [{"targets": [f"127.0.0.1:{self.port}"]}]})
        if self.rule_files:
            config["rule_files"] = [str(p.resolve()) for p in self.rule_files]
        path = self.workdir / "prometheus.yml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        binary = prometheus_binary()
        self.port = free_port()
        config = self.write_config()
        log = self.log_file.open("wb")
        cmd = [binary, f"--config.file={config}", f"--storage.tsdb.path={self.workdir / 'data'}",
               f"--web.listen-address=127.0.0.1:{self.port}", "--web.enable-lifecycle",
               "--log.level=warn"]
        self._proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise PrometheusError(f"prometheus exited with {self._proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        self.stop()
        raise PrometheusError(f"prometheus not ready within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self, grace: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def __enter__(self) -> PrometheusServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    # -- HTTP API ----------------------------------------------------------------------------
    def api(self, path: str, **params: str) -> Any:
        """GET ``/api/v1/<path>`` and return ``data`` (raises PrometheusError on an error answer)."""
        url = f"{self.url}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            body = json.loads(exc.read() or b"{}")
            raise PrometheusError(f"{path} {params}: HTTP {exc.code}: {body.get('error')}") from exc
        if body.get("status") != "success":
            raise PrometheusError(f"{path} {params}: {body.get('errorType')}: {body.get('error')}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """Instant query; the vector result as a list of ``{"metric": {...}, "value": [ts, "v"]}``."""
        data = self.api("query", query=expr)
        result: list[dict[str, Any]] = data["result"] if data["resultType"] in ("vector", "matrix") \
            else [{"metric": {}, "value": data["result"]}]
        return result

    def query_value(self, expr: str) -> float | None:
        """The single value of an instant query (None when the result is empty)."""
        result = self.query(expr)
        if not result:
            return None
        if len(result) > 1:
            raise PrometheusError(f"{expr}: {len(result)} series, expected one")
        return float(result[0]["value"][1])

    def query_range(self, expr: str, start: float, end: float, step: str = "1s") -> list[dict[str, Any]]:
        data = self.api("query_range", query=expr, start=str(start), end=str(end), step=step)
        result: list[dict[str, Any]] = data["result"]
        return result

    def targets_health(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self.api("targets")["activeTargets"]
        return active

    def rules(self) -> list[dict[str, Any]]:
        groups: list[dict[str, Any]] = self.api("rules")["groups"]
        return groups

    def wait_for(self, expr: str, predicate: Callable[[list[dict[str, Any]]], bool] = bool,
                 timeout: float = 30.0) -> list[dict[str, Any]]:
        """Poll ``expr`` until ``predicate(result)`` holds; PrometheusError with the last result if not."""
        deadline = time.monotonic() + timeout
        last: list[dict[str, Any]] = []
        while True:
            last = self.query(expr)
            if predicate(last):
                return last
            if time.monotonic() > deadline:
                raise PrometheusError(f"{expr}: condition not met within {timeout:.0f} s; last result {last}; "
                                      f"targets {self.targets_health()}")
            time.sleep(0.3)

    def wait_for_target_up(self, timeout: float = 30.0) -> None:
        """Wait until every target has been scraped successfully at least once."""
        deadline = time.monotonic() + timeout
        while True:
            health = self.targets_health()
            if health and all(t["health"] == "up" for t in health):
                return
            if time.monotonic() > deadline:
                raise PrometheusError(f"targets not up within {timeout:.0f} s: "
                                      f"{[(t['scrapeUrl'], t['health'], t.get('lastError')) for t in health]}")
            time.sleep(0.3)
