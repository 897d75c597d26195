"""The README's first command as written: ``lagscope demo`` with its built-in ``demo`` scenario and
every default (its own local broker, the default driver memory, the default workdir under the
current folder), run where a new user runs it; and a demo whose analytics cannot run exits
non-zero with one line naming the cause and the setting, instead of printing an empty summary."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

#: the scenario is one minute, timed to end just before a minute boundary (up to a minute's
#: wait), then one analytics step; a broker and a Spark session start first
TIMEOUT_S = 600

LAGSCOPE = Path(sys.executable).with_name("lagscope")


def _demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LAGSCOPE), "demo", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT_S, env={**os.environ, "PYTHONUNBUFFERED": "1"}, check=False)


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_the_readme_demo_as_written_finds_the_rebalance_the_stall_and_the_rewind(tmp_path: Path) -> None:
    done = _demo(tmp_path)
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "=== what lagscope found" in out, out[-3000:]
    summary = out[out.index("=== what lagscope found"):]
    found = summary[:summary.index("injected by the scenario")]
    # the crash: a rebalance window after the member's session timeout, against the bound its
    # settings imply (the record's 6 s session + the configured heartbeat, which no record carries,
    # + network): the rebalance proper is short (the
    # survivor rejoins at once), the crashed member's outage (its last progress → the group
    # settled again) is about the bound, and the line says the ratio is the outage's
    window = re.search(r"^\s+shipping\s+cause session_timeout\s+at [\d:]+: took ([\d.]+)s"
                       r"(?:; outage ([\d.]+)s, | \()([\d.]+)x its bound ([\d.]+)s", found, re.M)
    assert window, found
    took, ratio, bound = (float(window.group(i)) for i in (1, 3, 4))
    outage = float(window.group(2)) if window.group(2) else took
    assert 0 <= took < 10, found
    assert outage == pytest.approx(ratio * bound, abs=0.1), found
    assert 6.0 < bound <= 11.0, found
    assert 0.5 < ratio < 2.0, found
    assert re.search(r"^\s+stall\s+ledger on payments/\d", found, re.M), found
    rewound = [int(n) for n in re.findall(r"^\s+rewind\s+audit on payments/\d: (\d+) messages reprocessed",
                                          found, re.M)]
    # the scenario rewinds each of audit's partitions by 200 messages: each counted once
    assert rewound, found
    assert all(0 < n <= 220 for n in rewound), rewound
    # the terminal gets no Java stack trace: Spark's logs went to the demo's log file
    assert "\tat org.apache" not in done.stderr + out
    # nor a Python one: stopping closes every client without a traceback from its I/O thread
    assert "Traceback" not in done.stderr + out, done.stderr[-3000:]
    assert (tmp_path / ".lagscope" / "demo" / "logs" / "spark.log").exists()


@pytest.mark.timeout(TIMEOUT_S + 60)
def test_a_demo_whose_analytics_cannot_run_exits_non_zero_with_the_cause(tmp_path: Path) -> None:
    # a driver far too small for Spark to start: the config file's driver memory reaches the JVM
    # (Spark refuses it by name), the loop retries with new sessions, then gives up
    config = tmp_path / "lagscope.yaml"
    config.write_text("analytics:\n  driver_memory: 64m\n")
    done = _demo(tmp_path, "--config", str(config))
    assert done.returncode != 0, done.stdout[-3000:]
    text = done.stdout + done.stderr
    fatal = [ln for ln in text.splitlines() if "analytics failed 3 times in a row" in ln]
    assert fatal, text[-3000:]
    assert "analytics.driver_memory" in fatal[0]
    assert "\tat org.apache" not in text
