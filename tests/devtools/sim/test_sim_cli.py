"""``lagscope sim list|run`` and ``lagscope demo`` (run_demo), end to end."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from rich.console import Console

from lagscope.cli import main
from lagscope.devtools.sim import truth
from lagscope.devtools.sim.commands import run_demo
from lagscope.devtools.sim.runner import ScenarioRun, builtin_scenarios

TINY = """
name: tiny
description: A member crashes; the other one takes over.
duration: 5
topics: [{name: t, partitions: 2}]
producers: [{name: p, topic: t, rate: 20}]
groups:
  - name: g
    topics: [t]
    members:
      - {name: a, session_timeout_ms: 2000, heartbeat_interval_ms: 400}
      - {name: b, session_timeout_ms: 2000, heartbeat_interval_ms: 400, actions: [{kind: crash, at: 1.5}]}
"""


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "400"}  # one error line stays one line
    return subprocess.run([sys.executable, "-m", "lagscope.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False, env=env)


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def _main(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str) -> tuple[int, str, str]:
    """``lagscope ARGS`` in this process (the entry point, with its error handling)."""
    monkeypatch.setattr(sys, "argv", ["lagscope", *args])
    monkeypatch.setenv("COLUMNS", "400")
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sim_list_names_every_scenario() -> None:
    proc = _cli("sim", "list")
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    assert listed == list(builtin_scenarios())


def test_sim_run_bad_scenario_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nduration: 5\ntopics: [{name: t}]\nproducers: [{name: p, topic: u}]\n")
    code, _out, err = _main(capsys, monkeypatch, "sim", "run", str(bad), "--bootstrap", "127.0.0.1:1",
                            "--out", str(tmp_path / "o"))
    assert code == 1
    (line,) = _errors(err)
    assert "unknown topic 'u'" in line
    assert not (tmp_path / "o").exists(), "nothing is started for an invalid scenario"


@pytest.mark.kafka
def test_sim_run_writes_truth(bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "tiny.yaml"
    f.write_text(TINY)
    out = tmp_path / "out"
    code, stdout, err = _main(capsys, monkeypatch, "sim", "run", str(f), "--bootstrap", bootstrap,
                              "--out", str(out), "--cleanup")
    assert code == 0, err[-2000:]
    assert "fault crash" in stdout
    records = truth.load(out / "truth.jsonl")
    assert isinstance(records[-1], truth.EndState)
    assert any(isinstance(r, truth.Fault) and r.kind == "crash" and r.member == "b" for r in records)
    # a second run into the same folder is refused rather than mixing two runs' truth
    code, _out, err = _main(capsys, monkeypatch, "sim", "run", str(f), "--bootstrap", bootstrap, "--out", str(out))
    assert code == 1
    (line,) = _errors(err)
    assert "already holds" in line


@pytest.mark.kafka
@pytest.mark.slow
def test_demo_starts_its_broker_and_stops_cleanly(tmp_path: Path) -> None:
    f = tmp_path / "tiny.yaml"
    f.write_text(TINY.replace("duration: 5", "duration: 60"))
    seen: dict[str, object] = {}

    def on_started(run: ScenarioRun, bootstrap: str) -> None:
        # what a collector would do: learn the names and the bootstrap, then (here) interrupt
        seen["bootstrap"] = bootstrap
        seen["groups"] = dict(run.names.groups)
        def stop_once_running() -> None:
            # 3 s after the scenario's t0 (start-up may take a while on a loaded machine)
            deadline = time.time() + 60
            while not (run.out_dir / "parts" / "t0.json").exists() and time.time() < deadline:
                time.sleep(0.1)
            time.sleep(3)
            run.stop()

        threading.Thread(target=stop_once_running, daemon=True).start()

    buf = io.StringIO()
    result = run_demo(tmp_path / "demo", scenario=str(f), on_started=on_started,
                      console=Console(file=buf, width=200))
    assert result is not None
    assert result.stopped_early
    assert result.ended - result.t0 < 30, "stopped well before the scenario's 60 s"
    assert seen["groups"] == result.names.groups
    records = truth.load(result.truth_path)
    assert isinstance(records[-1], truth.EndState)
    assert any(isinstance(r, truth.Produce) for r in records)
    text = buf.getvalue()
    assert "ground truth at the end" in text
    # the broker the demo started is stopped again
    assert not (tmp_path / "demo" / "broker" / "broker.json").exists()


def test_sim_run_unreachable_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from lagscope.devtools.broker import free_port

    out = tmp_path / "o"
    code, _out, err = _main(capsys, monkeypatch, "sim", "run", "steady", "-b", f"127.0.0.1:{free_port()}",
                            "-o", str(out))
    assert code == 1
    (line,) = _errors(err)
    assert "cannot reach Kafka" in line
    assert not out.exists(), "nothing written for a run that never started"


@pytest.mark.parametrize(("content", "message"), [
    ("- a list\n", "expected a mapping"),     # settings are key: value
    ("security_protocol: [unclosed\n", "cannot read client config"),  # not YAML
])
def test_sim_run_bad_client_config(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch, content: str, message: str) -> None:
    cfg = tmp_path / "client.yaml"
    cfg.write_text(content)
    code, _out, err = _main(capsys, monkeypatch, "sim", "run", "steady", "-b", "127.0.0.1:1",
                            "-o", str(tmp_path / "o"), "--client-config", str(cfg))
    assert code == 1
    (line,) = _errors(err)
    assert message in line
    assert not (tmp_path / "o").exists()
