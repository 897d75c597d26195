"""``lagscope demo`` end to end, as a user runs it: a subprocess on loopback (on the test's
broker, to save a JVM start; with the half-minute ``demo_fast.yaml`` scenario), whose printed
URLs must answer and whose summary must name the injected faults; SIGINT then stops it and
every process it started."""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from lagscope.deploy.demo import scenario_start_delay

FAST = Path(__file__).with_name("demo_fast.yaml")
#: the summary comes ~2 min after the start on an idle 2-core machine (scenario 28 s, up to
#: 60 s to time its end before a minute boundary, one analytics step); a loaded one needs more
SUMMARY_TIMEOUT_S = 420.0


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc; children of children too)."""
    parent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid …; comm may hold spaces and parentheses
        fields = stat[stat.rindex(")") + 2:].split()
        parent[int(entry.name)] = int(fields[1])
    found: set[int] = set()
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p and c not in found]
        found.update(kids)
        frontier.extend(kids)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"  # a zombie has exited


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read().decode()


@pytest.mark.parametrize(("now_s", "duration_s", "delay_s"), [
    (0.0, 28.0, 19.0),    # would end at 28 s: wait until it ends 13 s before the minute boundary
    (19.0, 28.0, 0.0),    # already timed right
    (20.0, 28.0, 59.0),   # 1 s past the target: the next minute's
    (30.0, 60.0, 17.0),   # the one-minute demo started mid-minute ends at 47 s of the next one
    (59.5, 0.0, 47.5),    # a zero-length scenario still lands on the lead
])
def test_scenario_start_delay_ends_runs_just_before_a_minute_boundary(now_s: float, duration_s: float,
                                                                       delay_s: float) -> None:
    now = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC) + dt.timedelta(seconds=now_s)
    got = scenario_start_delay(now, duration_s)
    assert got == pytest.approx(delay_s)
    end = (now.timestamp() + got + duration_s) % 60
    assert end == pytest.approx(47.0)


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_demo_serves_finds_the_faults_and_stops_cleanly(bootstrap: str, tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    lines: list[str] = []
    summary_done = threading.Event()
    argv = [sys.executable, "-m", "lagscope.cli", "demo", "--workdir", str(workdir), "--bootstrap", bootstrap,
            "--scenario", str(FAST), "--duration", "120"]
    with (tmp_path / "demo.stderr").open("w") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if line.startswith("=== end of summary"):
                    summary_done.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            assert summary_done.wait(SUMMARY_TIMEOUT_S), "no summary in time:\n" + "\n".join(lines)
            out = "\n".join(lines)
            children = _descendants(proc.pid)
            assert children, "the demo started no processes (the app, Spark's JVM)"

            # every URL it printed answers
            urls = re.findall(r"http://127\.0\.0\.1:\d+/\S*", out)
            metrics_url = next(u for u in urls if u.endswith("/metrics"))
            app_url = next(u for u in urls if not u.endswith("/metrics"))
            assert len(urls) == 2, urls
            prefix = re.search(r"groups (sim-demo-fast-[0-9a-f]+)-\*", out)
            assert prefix is not None, out
            # the findings reach /metrics within the exporter's refresh (2 s) of being written
            deadline = time.monotonic() + 15
            while True:
                status, text = _get(metrics_url)
                assert status == 200
                if "lagscope_anomalies_total{" in text or time.monotonic() > deadline:
                    break
                time.sleep(1)
            lag = [m for m in text.splitlines() if m.startswith("kafka_consumergroup_lag{")
                   and f'group="{prefix.group(1)}-' in m]
            assert lag, "no kafka_consumergroup_lag series for the demo's groups"
            # the analytics' findings on the same endpoint
            assert re.search(r'^lagscope_anomalies_total\{.*group="' + re.escape(prefix.group(1)), text, re.M), \
                "no lagscope_anomalies series for the demo's groups"
            status, page = _get(app_url)
            assert status == 200
            assert "<html" in page.lower()
            assert _get(app_url + "_stcore/health") == (200, "ok")

            # the summary names the injected faults
            summary = out[out.index("=== what lagscope found"):]
            found = summary[:summary.index("injected by the scenario")]
            assert re.search(r"^\s+shipping\s+cause session_timeout\s+at [\d:]+: took [\d.]+s \(bound [\d.]+s",
                             found, re.M), found
            assert re.search(r"^\s+stall\s+ledger on payments/\d", found, re.M), found
            rewinds = [int(n) for n in re.findall(r"^\s+rewind\s+audit on payments/\d: (\d+) messages reprocessed",
                                                  found, re.M)]
            # the scenario rewinds each of audit's partitions by 50 messages
            assert rewinds, found
            assert all(0 < n <= 60 for n in rewinds), rewinds
            assert re.search(r"^\s+analytics\s+\d+ messages, (at least )?[\d.]+s behind", found, re.M), found
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(120)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise
            reader.join(10)
    assert code == 0, "\n".join(lines[-20:])
    assert lines[-1] == "demo stopped.", lines[-5:]
    # nothing it started outlives it (Spark's JVM exits once its parent's pipe closes)
    deadline = time.monotonic() + 20
    while (left := {p for p in children if _alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes the demo started are still running: {left}"
