"""``lagscope demo`` end to end, as a user runs it: a subprocess on loopback (on the test's
broker, to save a JVM start; with the half-minute ``demo_fast.yaml`` scenario), whose printed
URLs must answer and whose summary must name the injected faults; SIGINT then stops it and
every process it started."""

from __future__ import annotations

import datetime as dt
import json
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

from lagscope.devtools.demo import (
    WebhookVerdict,
    judged_end,
    scenario_start_delay,
    unexplained_webhooks,
    verdict_lines,
    webhook_lines,
    webhook_target_s,
    webhook_verdicts,
)
from lagscope.devtools.sim.score import Expected, Finding, Match, RunScore
from lagscope.devtools.sim.truth import Fault

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


def test_the_summary_judges_up_to_the_boundary_after_the_schedule() -> None:
    # the members linger past the schedule (consuming) until the analytics have covered this
    # boundary: the run's own end, every consumer leaving, is after it
    noon = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
    t0 = noon.timestamp() - 73.0
    assert judged_end(t0, 60.0) == noon
    assert judged_end(t0, 73.0) == noon
    assert judged_end(t0, 74.0) == noon + dt.timedelta(minutes=1)


def test_the_summary_judges_itself() -> None:
    # hand-made: a crash found by its rebalance 1.5 s late, a stall missed, a bounce that calls
    # for nothing, a lag growth of the traffic's own, and a false skip
    p = "sim-demo-x"
    crash = Fault("crash", f"{p}-shipping", "ship-2", 120.0, 120.0, {}, ((f"{p}-orders", 1),))
    stall = Fault("stall", f"{p}-ledger", "ledger-1", 125.0, 160.0, {}, ((f"{p}-payments", 0),))
    bounce = Fault("bounce", f"{p}-audit", "audit-1", 126.0, 128.0, {}, ((f"{p}-payments", 1),))
    window = Finding("rebalance", f"{p}-shipping", None, None, 121.5, 126.0, "info")
    growth = Finding("lag_growth", f"{p}-analytics", f"{p}-orders", 0, 130.0, None, "warning")
    skip = Finding("skip", f"{p}-shipping", f"{p}-orders", 0, 140.2, 140.2, "critical")
    scored = RunScore("demo", 1, False, 60.0, matches=[
        Match(Expected("rebalance", f"{p}-shipping", (), 120.0, 126.0, crash), window),
        Match(Expected("stall", f"{p}-ledger", ((f"{p}-payments", 0),), 125.0, 160.0, stall), None),
        Match(Expected("lag_growth", f"{p}-analytics", ((f"{p}-orders", 0),), 100.0, 160.0), growth)],
        matched=[window, growth], unmatched=[skip])
    lines = verdict_lines(scored, [crash, stall, bounce], prefix=p, t0=100.0)
    assert lines == [
        "  crash        shipping/ship-2    at  20.0s: found: rebalance shipping, 1.5s late",
        "  stall        ledger/ledger-1    at  25.0s: MISSED (no stall)",
        "  bounce       audit/audit-1      at  26.0s: calls for no finding",
        "  lag_growth   analytics on orders/0 at   0.0s: found, 30.0s late (the traffic's own, no injected fault)",
        "findings that match no injected fault: 1",
        "  skip         shipping on orders/0 at 40.2s (critical)",
    ]


P = "sim-demo-x"
#: a fault on ledger's payments/0 at 125 s (t0 100 s), and what it calls for
STALL = Fault("stall", f"{P}-ledger", "ledger-1", 125.0, 160.0, {}, ((f"{P}-payments", 0),))
STALL_EXPECTED = Expected("stall", f"{P}-ledger", ((f"{P}-payments", 0),), 125.0, 160.0, STALL)
STALL_FOUND = Finding("stall", f"{P}-ledger", f"{P}-payments", 0, 124.0, None, "warning")
CRASH = Fault("crash", f"{P}-shipping", "ship-2", 120.0, 120.0, {}, ((f"{P}-orders", 1),))
CRASH_EXPECTED = Expected("rebalance", f"{P}-shipping", (), 120.0, 126.0, CRASH)
WINDOW = Finding("rebalance", f"{P}-shipping", None, None, 121.5, 126.0, "info")


def _payload(kind: str, group: str, start: float, *, topic: str | None = None, partition: int | None = None,
             severity: str = "warning", received: float) -> dict[str, object]:
    """A receiver's record of a generic payload (lagscope.alert/v1) that arrived at ``received``."""
    iso = dt.datetime.fromtimestamp(start, dt.UTC).isoformat().replace("+00:00", "Z")
    return {"received_ts": received, "payload": {
        "schema": "lagscope.alert/v1", "kind": kind, "group": group, "topic": topic, "partition": partition,
        "severity": severity, "status": "firing", "starts_at": iso, "ends_at": None}}


STALL_PAYLOAD = {"topic": f"{P}-payments", "partition": 0}


@pytest.mark.parametrize(("fault", "match", "received", "alert_findings", "delay", "due", "passed", "reason"), [
    # the stall's payload (same group, kind and partition) arrives 8 s after the fault: within 10 s
    (STALL, Match(STALL_EXPECTED, STALL_FOUND),
     [_payload("stall", f"{P}-ledger", 124.0, **STALL_PAYLOAD, received=133.0)], [STALL_FOUND],
     8.0, True, True, ""),
    # the first payload that reports it counts; the decoys before it do not: another group's
    # stall, a stall on a partition the fault does not name, a lag growth of the same group, a
    # stall that ended before the fault (outside the 3 s tolerance)
    (STALL, Match(STALL_EXPECTED, STALL_FOUND),
     [_payload("stall", f"{P}-audit", 124.0, **STALL_PAYLOAD, received=126.0),
      _payload("stall", f"{P}-ledger", 124.0, topic=f"{P}-payments", partition=1, received=127.0),
      _payload("lag_growth", f"{P}-ledger", 124.0, received=128.0),
      {"received_ts": 129.0, "payload": {**_payload("stall", f"{P}-ledger", 100.0, **STALL_PAYLOAD,
                                                     received=0.0)["payload"],
                                         "ends_at": "1970-01-01T00:01:50Z"}},
      {"received_ts": 130.0, "payload": {"text": "a Slack message: not the generic format"}},
      _payload("stall", f"{P}-ledger", 124.0, **STALL_PAYLOAD, received=185.0)], [STALL_FOUND],
     60.0, True, False, ""),
    # a crash calls for a rebalance window, info within its bound: the route (min_severity
    # warning) does not take it, by design
    (CRASH, Match(CRASH_EXPECTED, WINDOW), [], [WINDOW], None, False, None, "below the route's min_severity"),
    # the same window over its bound is a warning: it was due and did not arrive
    (CRASH, Match(CRASH_EXPECTED, WINDOW), [],
     [Finding("rebalance", f"{P}-shipping", None, None, 121.5, 140.0, "warning")],
     None, True, False, "NOT DELIVERED: a rebalance warning finding reports it"),
    # a fault the analytics missed has no finding to alert
    (STALL, Match(STALL_EXPECTED, None), [], [], None, False, None, "the fault was not found"),
    # a static member's bounce within its session calls for nothing
    (Fault("bounce", f"{P}-audit", "audit-1", 126.0, 128.0, {}, ()), None, [], [], None, False, None,
     "calls for no finding"),
])
def test_webhook_verdicts_time_each_fault_to_its_first_payload(
        fault: Fault, match: Match | None, received: list[dict[str, object]], alert_findings: list[Finding],
        delay: float | None, due: bool, passed: bool | None, reason: str) -> None:
    scored = RunScore("demo", 1, False, 60.0, matches=[match] if match else [])
    [v] = webhook_verdicts(scored, [fault], received, alert_findings, min_severity="warning",
                           target_s=webhook_target_s(1.0, 3.0), tolerance_s=3.0)
    assert v.target_s == 10.0  # 2 × 1 s sweeps + a 3 s analytics step + 5 s
    assert v.delay_s == (None if delay is None else pytest.approx(delay))
    assert (v.due, v.passed) == (due, passed)
    assert reason in v.reason


def test_a_webhooks_target_counts_the_rules_own_threshold() -> None:
    # a stall exists only after stall_after_s without progress: its webhook 14 s after the fault
    # is on time against 10 s + an 8 s threshold, late without it; a rewind's threshold is 0
    scored = RunScore("demo", 1, False, 60.0, matches=[Match(STALL_EXPECTED, STALL_FOUND)])
    received = [_payload("stall", f"{P}-ledger", 124.0, **STALL_PAYLOAD, received=139.0)]
    own = {"stall": 8.0, "rewind": 0.0}
    [v] = webhook_verdicts(scored, [STALL], received, [STALL_FOUND], min_severity="warning",
                           target_s=10.0, tolerance_s=3.0, own_s=own)
    assert (v.delay_s, v.target_s, v.passed) == (pytest.approx(14.0), 18.0, True)
    [late] = webhook_verdicts(scored, [STALL], received, [STALL_FOUND], min_severity="warning",
                              target_s=10.0, tolerance_s=3.0)
    assert (late.target_s, late.passed) == (10.0, False)


def test_webhook_lines_say_pass_fail_and_why_none() -> None:
    on_time = WebhookVerdict(STALL, 10.0, delay_s=8.0, alert="stall warning", due=True)
    late = WebhookVerdict(STALL, 10.0, delay_s=62.5, alert="stall warning", due=True)
    lost = WebhookVerdict(STALL, 10.0, due=True, reason="NOT DELIVERED: a stall warning finding reports it")
    quiet = WebhookVerdict(CRASH, 10.0, reason="calls for no finding")
    assert webhook_lines([on_time, late, lost, quiet], prefix=P, t0=100.0) == [
        # 125 s is 5 s into its minute, which ends 55 s later: the analytics analyse whole minutes
        "  stall        ledger/ledger-1    at  25.0s: delivered after 8.0s (stall warning; 47.0s before the "
        "fault's minute ended), target 10.0s: PASS",
        "  stall        ledger/ledger-1    at  25.0s: delivered after 62.5s (stall warning; 7.5s after the "
        "fault's minute ended), target 10.0s: FAIL",
        "  stall        ledger/ledger-1    at  25.0s: NOT DELIVERED: a stall warning finding reports it, "
        "target 10.0s: FAIL",
        "  crash        shipping/ship-2    at  20.0s: no webhook: calls for no finding",
    ]


def test_the_webhooks_that_report_nothing_the_scenario_called_for_are_listed() -> None:
    growth = Expected("lag_growth", f"{P}-analytics", ((f"{P}-orders", 0),), 100.0, 160.0)
    formation = Finding("rebalance", f"{P}-audit", None, None, 101.0, 102.0, "warning")
    scored = RunScore("demo", 1, False, 60.0, matches=[Match(STALL_EXPECTED, STALL_FOUND), Match(growth, None)],
                      informational=[formation])

    def status(group: str, value: str, at: float, received: float) -> dict[str, object]:
        r = _payload("status", f"{P}-{group}", at, severity="critical", received=received)
        r["payload"].update(key=f"status|c|{P}-{group}|{value}", labels={"status": value})  # type: ignore[union-attr]
        return r

    stray_growth = _payload("lag_growth", f"{P}-shipping", 130.0, topic=f"{P}-orders", partition=0, received=131.0)
    stray_growth["payload"].update(key="g-ship", detail="lag grew")  # type: ignore[union-attr]
    resolved = _payload("lag_growth", f"{P}-audit", 130.0, topic=f"{P}-payments", partition=0, received=132.0)
    resolved["payload"].update(key="g-audit", status="resolved")  # type: ignore[union-attr]
    other = _payload("stall", "someone-elses-group", 130.0, received=133.0)
    other["payload"].update(key="other")  # type: ignore[union-attr]
    records = [
        status("ledger", "STALL", 150.0, 151.0),       # the stall's, group level
        status("analytics", "STOP", 159.0, 160.0),     # nothing stopped analytics
        status("analytics", "STOP", 159.0, 161.0),     # the same key again: listed once
        _payload("lag_growth", f"{P}-analytics", 120.0, topic=f"{P}-orders", partition=0, received=121.0),
        _payload("rebalance", f"{P}-audit", 101.0, received=103.0),  # the formation's: informational
        _payload("rewind", f"{P}-audit", 140.0, topic=f"{P}-payments", partition=1, received=141.0),
        stray_growth, resolved, other,
    ]
    got = unexplained_webhooks(scored, records, prefix=P, tolerance_s=3.0)
    assert [(f.kind, f.group.removeprefix(P + "-"), f.start, d) for f, d in got] == [
        ("lag_growth", "shipping", 130.0, "lag grew"), ("rewind", "audit", 140.0, ""),
        ("status", "analytics", 159.0, "")]
    # findings from after the judged range are not judged
    got = unexplained_webhooks(scored, records, prefix=P, tolerance_s=3.0, until=140.0)
    assert [(f.kind, f.group.removeprefix(P + "-"), f.start) for f, _ in got] == [("lag_growth", "shipping", 130.0)]


def test_a_route_secret_that_cannot_be_read_fails_the_demo_before_it_starts(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # --config's alert routes take the demo's alerts: a secret they cannot read is a config error
    # at start-up (exit 2, one line, no broker, no workdir), not a failed delivery later
    from typer.testing import CliRunner

    from lagscope.cli import app

    monkeypatch.delenv("LAGSCOPE_DEMO_TEST_SECRET", raising=False)
    config = tmp_path / "lagscope.yaml"
    config.write_text("alerts:\n  routes:\n    - {name: oncall, url: 'http://127.0.0.1:9/hook', "
                      "secret_env: LAGSCOPE_DEMO_TEST_SECRET}\n")
    result = CliRunner().invoke(app, ["demo", "--config", str(config), "--workdir", str(tmp_path / "demo")])
    assert result.exit_code == 2, result.output
    assert [ln for ln in result.output.splitlines() if ln.startswith("config error:")] == [
        "config error: alerts route oncall: environment variable LAGSCOPE_DEMO_TEST_SECRET is not set"]
    assert not (tmp_path / "demo").exists()


def _run_demo_to_summary(argv: list[str], err: Path) -> tuple[subprocess.Popen[str], list[str], threading.Thread]:
    """Start ``lagscope demo`` (argv) and wait for its summary: (the process, its lines so far, the
    reader thread that goes on reading)."""
    lines: list[str] = []
    summary_done = threading.Event()
    with err.open("w") as errf:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errf, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("=== end of summary"):
                summary_done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    if not summary_done.wait(SUMMARY_TIMEOUT_S + 60):
        proc.kill()
        raise AssertionError("no summary in time:\n" + "\n".join(lines))
    return proc, lines, reader


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_builtin_demo_raises_nothing_the_scenario_did_not_inject(bootstrap: str, tmp_path: Path) -> None:
    # the built-in demo scenario, as a new user runs it: every finding of its summary matches a
    # fault it injected (issue 25: a caught-up group taking a burst is no skip; a slow consumer
    # working through its partitions one at a time is not stopped)
    argv = [sys.executable, "-m", "lagscope.cli", "demo", "--workdir", str(tmp_path / "demo"), "--bootstrap",
            bootstrap, "--duration", "0"]
    proc, lines, reader = _run_demo_to_summary(argv, tmp_path / "demo.stderr")
    try:
        code = proc.wait(120)
    finally:
        if proc.poll() is None:
            proc.kill()
        reader.join(10)
    out = "\n".join(lines)
    assert code == 0, out
    judged = out[out.index("judged against the injected faults"):out.index("webhooks, from the fault")]
    for kind in ("crash", "stall", "rewind"):
        assert re.search(rf"^\s+{kind}\s+\S+\s+at\s+[\d.]+s: found: ", judged, re.M), judged
    # no alarm the scenario did not inject; an unmatched info finding (a rebalance window when a
    # member re-joins as its group forms, which the truth does not model) is listed, not an alarm
    listed = judged.split("findings that match no injected fault")[1]
    unmatched = re.findall(r"^  \S+\s+.* at [\d.]+s \((\w+)\)$", listed, re.M)
    assert not [sev for sev in unmatched if sev in ("warning", "critical")], judged
    # end to end (issue 25): each alerted fault's webhook reached the demo's receiver; the stall
    # and the rewind alert (warnings), the crash's rebalance window is info unless it outlasts its
    # bound (and then it is due as well)
    webhooks = out[out.index("webhooks, from the fault"):out.index("webhooks that report nothing")]
    assert "target 2 sweep intervals + one analytics step interval + 5 s = 10s" in webhooks, webhooks
    verdicts = dict(re.findall(r"^\s+(\w+)\s+\S+\s+at\s+[\d.]+s: (.*)$", webhooks, re.M))
    assert set(verdicts) == {"crash", "stall", "rewind"}, webhooks
    for kind in ("stall", "rewind"):
        assert re.match(rf"delivered after [\d.]+s \({kind} (warning|critical);", verdicts[kind]), webhooks
    assert verdicts["crash"].startswith(("delivered after", "no webhook: its finding (rebalance info)")), webhooks
    # from the fault itself (provisional steps publish the minute in progress): the summary's
    # target is 2 sweep intervals of 1 s + one analytics step interval of 3 s + 5 s, plus the
    # rule's own threshold (a stall exists only after stall_after_s); the benchmark
    # (benchmarks/alert_delay.py) records PASS or FAIL. Here, with slack for a loaded CI machine,
    # the webhook must not wait for the fault's minute to end (which took 44-52 s before)
    timed = {k: (float(m.group(1)), float(m.group(2))) for k, v in verdicts.items()
             if (m := re.match(r"delivered after ([\d.]+)s .*target ([\d.]+)s: (?:PASS|FAIL)$", v))}
    assert set(timed) >= {"stall", "rewind"}, webhooks
    assert all(delay <= target + 10.0 for delay, target in timed.values()), webhooks
    # no critical webhook for a group the scenario injected nothing into (the slow `analytics`
    # group is starved, not stopped; the scenario's own teardown is after the judged minutes)
    injected = out[out.index("injected by the scenario"):out.index("judged against the injected faults")]
    faulty = set(re.findall(r"^\s+\w+\s+(\w+)/\S+ at ", injected, re.M))
    assert faulty == {"shipping", "ledger", "audit"}, injected
    received = [json.loads(line)["payload"] for line in (tmp_path / "demo" / "alerts" / "webhooks.jsonl")
                .read_text().splitlines()]
    critical = {p["group"].rsplit("-", 1)[1] for p in received if p["severity"] == "critical"}
    assert critical <= faulty, [p["key"] for p in received if p["severity"] == "critical"]
    # and every webhook that fired reports what the scenario injected or its traffic's own lag
    # growth: none fired and resolved unconfirmed (the minute in progress grew no lag), none
    # reports the scenario's own end
    stray = out[out.index("webhooks that report nothing"):out.index("=== end of summary")]
    assert stray.startswith("webhooks that report nothing the scenario called for: 0\n"), stray


@pytest.mark.kafka
@pytest.mark.spark
@pytest.mark.slow
def test_demo_serves_finds_the_faults_and_stops_cleanly(bootstrap: str, tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "lagscope.cli", "demo", "--workdir", str(tmp_path / "demo"), "--bootstrap",
            bootstrap, "--scenario", str(FAST), "--duration", "120"]
    proc, lines, reader = _run_demo_to_summary(argv, tmp_path / "demo.stderr")
    try:
        out = "\n".join(lines)
        children = _descendants(proc.pid)
        assert children, "the demo started no processes (the app, Spark's JVM)"

        # every URL it printed answers
        urls = re.findall(r"http://127\.0\.0\.1:\d+/\S*", out)
        metrics_url = next(u for u in urls if u.endswith("/metrics"))
        received_url = next(u for u in urls if u.endswith("/received"))
        app_url = next(u for u in urls if u not in (metrics_url, received_url))
        assert len(urls) == 3, urls
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
        # the receiver lists the alert payloads it was sent: the demo's groups' findings, in the
        # generic format, with links into the demo's app
        status, body = _get(received_url)
        assert status == 200
        payloads = [r["payload"] for r in json.loads(body)]
        mine = [p for p in payloads if str(p.get("group", "")).startswith(prefix.group(1) + "-")]
        assert mine, payloads
        assert all(p["schema"] == "lagscope.alert/v1" for p in mine), payloads
        assert {p["kind"] for p in mine} >= {"stall", "rewind"}, payloads
        assert all(p["links"]["app"].startswith(app_url) for p in mine), payloads

        # the summary names the injected faults
        summary = out[out.index("=== what lagscope found"):]
        found = summary[:summary.index("injected by the scenario")]
        assert re.search(r"^\s+shipping\s+cause session_timeout\s+at [\d:]+: took [\d.]+s(;| \().*its bound "
                         r"[\d.]+s", found, re.M), found
        assert re.search(r"^\s+stall\s+ledger on payments/\d", found, re.M), found
        rewinds = [int(n) for n in re.findall(r"^\s+rewind\s+audit on payments/\d: (\d+) messages reprocessed",
                                              found, re.M)]
        # the scenario rewinds each of audit's partitions by 50 messages
        assert rewinds, found
        assert all(0 < n <= 60 for n in rewinds), rewinds
        assert re.search(r"^\s+analytics\s+\d+ messages, (at least )?[\d.]+s behind", found, re.M), found
        # and judges itself: the crash, the stall and the rewind each found
        judged = summary[summary.index("judged against the injected faults"):]
        for kind, by in (("crash", "rebalance"), ("stall", "stall"), ("rewind", "rewind")):
            assert re.search(rf"^\s+{kind}\s+\S+\s+at\s+[\d.]+s: found: {by} ", judged, re.M), judged
        assert re.search(r"^findings that match no injected fault: \d+$", judged, re.M), judged
        # and times the webhooks of the stall and the rewind
        webhooks = summary[summary.index("webhooks, from the fault"):]
        for kind in ("stall", "rewind"):
            assert re.search(rf"^\s+{kind}\s+\S+\s+at\s+[\d.]+s: delivered after [\d.]+s \({kind} ", webhooks,
                             re.M), webhooks
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        finally:
            reader.join(10)
    assert code == 0, "\n".join(lines[-20:])
    assert lines[-1] == "demo stopped.", lines[-5:]
    # nothing it started outlives it (Spark's JVM exits once its parent's pipe closes)
    deadline = time.monotonic() + 20
    while (left := {p for p in children if _alive(p)}) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"processes the demo started are still running: {left}"
