"""The advice applied: does changing the setting it names have the effect it predicted?

    LAGSCOPE_TEST_BOOTSTRAP=127.0.0.1:37779 .venv/bin/python benchmarks/advice_effect.py \\
        [--scenarios crash-long-session,poll-timeout-repeat] [--seed 1] [--interval-s 0.5]

Per scenario (a built-in one whose ``expect_advice`` names a setting this script can apply,
:data:`APPLY`):

1. run it (seed ``--seed``) while a collector sweeps it into a lake (``__consumer_offsets`` tail
   on), one analytics step (the engine's own, as ``analytics_accuracy.py`` runs it) → its
   ``advice`` rows;
2. read the expected rule's row of the scenario's group, and apply its ``suggested`` value to
   every member of the group (the value parsed from the sentence, as whoever applies it reads it;
   a row this script cannot read is an error);
3. run the same scenario again with the same seed (the same schedule of faults and traffic) and
   the changed setting, analyse it the same way;
4. compare the effect the advice predicted (its ``measure``: ``current_amount`` →
   ``expected_amount``) with the effect measured on the simulator's ground truth of both runs
   (:mod:`lagscope.devtools.sim.truth`, independent of the analytics), and list the advice the
   second run still gets.

What is measured, per rule (each from the truth of each run):

- ``session_timeout_crash`` (``outage_s``): per crash, from the kill to the end of the rebalance
  it caused (the survivors hold the dead member's partitions again); the median over the crashes.
  The advice's own figure runs from the member's last progress (≤ the kill), so it is a little
  longer.
- ``restart_storm`` (``storm_rebalance_s``; applied by the setting the row names: a storm of
  restarts as a ``group.instance.id`` per member, its name; churn as the assignor it suggests,
  ``partition_assignment_strategy``): the summed length of the rebalances a membership change
  (a join, a leave, a restart) caused in the run (its storm). Under cooperative-sticky a member
  whose partitions do not change in a rebalance gets no assignment callback, so the truth's
  rebalances (one per generation its members were assigned in) see only the members that gained
  partitions: the measure is the rebalances as those members saw them. Beside it
  ``partition_pause_s``: per partition the time it was held by no member after a revocation,
  summed, the mean over the partitions: what the cooperative advice predicts ("only the moved
  partitions pause": its expected amount is per partition on average), and what a static
  member's own partitions still wait while it restarts.
- a scenario whose rule declined every remedy (it expects no advice: :data:`DECLINED`): each
  remedy applied anyway, with the rule's measures before and after, to check that declining was
  right (the storms: static membership and cooperative-sticky where rebalances take a fraction
  of a second).
- ``max_poll_interval`` (``rebalance_s``): per removal (a ``stop_polling`` fault: the member does
  not poll for longer than the interval), the summed length of the rebalances from its start to
  5 s after it polls again (the removal and the rejoin); the median. Beside it ``silence_s``: per
  removal, the longest time one of the member's partitions made no progress (first commit past
  the offset it had when the member stopped polling), which no interval changes: the member's own
  batch takes what it takes.

Prints a Markdown report (benchmarks/results/advice_effect.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import platform
import re
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rebalance_accuracy import collect, read_lakes, run_step

from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.devtools.sim.model import MemberSpec, Scenario
from lagscope.devtools.sim.runner import load_scenario
from lagscope.devtools.sim.truth import Assign, Revoke, TruthIndex, load

#: second-scale rules for second-scale scenarios (as analytics_accuracy.py's); the timeouts are the
#: group-metadata records' (the tail), these only stand in without them
RULES = AnalyticsRulesConfig(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0, gap_mad_floor_s=0.2, gap_k=4,
                             growth_min_minutes=5, warn_lag_s=5.0)
TIMEOUTS = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}
#: a removal's rebalances: from its start to this long after the member polls again (s)
REJOIN_S = 5.0


class AdviceUnreadable(ValueError):
    """The advice row's ``suggested`` does not give the value this script applies."""


def _session(member: MemberSpec, suggested: str) -> MemberSpec:
    m = re.search(r"session\.timeout\.ms=(\d+) with heartbeat\.interval\.ms ≤ (\d+)", suggested)
    if m is None:
        raise AdviceUnreadable(f"no session.timeout.ms and heartbeat.interval.ms in {suggested!r}")
    session, hb = int(m.group(1)), int(m.group(2))
    return member.model_copy(update={"session_timeout_ms": session,
                                     "heartbeat_interval_ms": min(member.heartbeat_interval_ms, hb)})


def _poll_interval(member: MemberSpec, suggested: str) -> MemberSpec:
    m = re.search(r"max\.poll\.interval\.ms=(\d+)", suggested)
    if m is None:
        raise AdviceUnreadable(f"no max.poll.interval.ms in {suggested!r}")
    return member.model_copy(update={"max_poll_interval_ms": int(m.group(1))})


def _static(member: MemberSpec, suggested: str) -> MemberSpec:
    if "group.instance.id" not in suggested:
        raise AdviceUnreadable(f"no group.instance.id in {suggested!r}")
    # one id per consumer: its name (the runner prefixes it like every name); the session as it is
    return member.model_copy(update={"group_instance_id": member.group_instance_id or member.name})


def _assignor(member: MemberSpec, suggested: str) -> MemberSpec:
    # the assignor the sentence starts with ("cooperative-sticky (or group.protocol=consumer …)")
    m = re.match(r"(cooperative-sticky|roundrobin|range|sticky)\b", suggested)
    if m is None:
        raise AdviceUnreadable(f"no assignor in {suggested!r}")
    return member.model_copy(update={"partition_assignment_strategy": m.group(1)})


#: the setting an advice row names → how its suggestion changes a member (what this script can
#: apply; a rule whose rows name several settings, as restart_storm, is applied by the row's)
APPLY: dict[str, Callable[[MemberSpec, str], MemberSpec]] = {
    "session.timeout.ms": _session, "max.poll.interval.ms": _poll_interval, "group.instance.id": _static,
    "partition.assignment.strategy": _assignor}


def applied(sc: Scenario, group: str, suggested: str, setting: str) -> Scenario:
    """``sc`` with the suggestion of a row naming ``setting`` applied to every member of ``group``
    (validated again)."""
    if setting not in APPLY:
        raise AdviceUnreadable(f"this script cannot apply {setting}")
    groups = [g.model_copy(update={"members": [APPLY[setting](m, suggested) for m in g.members]})
              if g.name == group else g for g in sc.groups]
    return Scenario.model_validate(sc.model_copy(update={"groups": groups}).model_dump())


# --------------------------------------------------------------------------------------------
# the effect measured on the truth
# --------------------------------------------------------------------------------------------

def crash_outages(ti: TruthIndex, group: str) -> list[float]:
    """Per crash of ``group``: kill → the end of the rebalance it caused (s)."""
    rbs = ti.rebalances(group)
    out = []
    for f in ti.faults("crash"):
        if f.group == group:
            after = [r for r in rbs if r.cause == f]
            if after:
                out.append(after[0].end - f.start)
    return out


def removal_rebalances(ti: TruthIndex, group: str) -> list[float]:
    """Per stop_polling fault of ``group``: the summed length of the rebalances starting from
    its start to ``REJOIN_S`` after its end (s; 0 when none)."""
    rbs = ti.rebalances(group)
    return [sum(r.end - r.start for r in rbs if f.start <= r.start <= f.end + REJOIN_S)
            for f in ti.faults("stop_polling") if f.group == group]


def silences(ti: TruthIndex, group: str) -> list[float]:
    """Per stop_polling fault of ``group``: the longest time one of the partitions the member held
    made no progress (its committed offset at the fault's start → the first commit past it)."""
    out = []
    for f in ti.faults("stop_polling"):
        if f.group != group:
            continue
        worst = 0.0
        for topic, p in f.partitions:
            base = ti.committed_at(group, topic, p, f.start)
            later = [c for c in ti.commits(group, topic, p) if c.ts > f.start and base is not None
                     and c.offset > base]
            if later:
                worst = max(worst, min(c.ts for c in later) - f.start)
        out.append(worst)
    return out


def membership_rebalances(ti: TruthIndex, group: str) -> list[float]:
    """The summed length of ``group``'s rebalances that a membership fault (a join, a leave)
    caused: one value, the run's storm (s)."""
    return [sum(r.end - r.start for r in ti.rebalances(group) if r.cause is not None)]


def partition_pauses(ti: TruthIndex, group: str) -> list[float]:
    """The time a partition of ``group`` was held by no member after a revocation (its revoke →
    its next assignment to any member), summed per partition, then the mean over the partitions:
    one value (s). Eager assignors revoke every partition in every rebalance, so there it is the
    group-wide stop; cooperative-sticky revokes only the partitions that move. Gaps that never
    close (the run's end) and the group's formation (no revocation) do not count."""
    events = sorted((r for r in ti.records if isinstance(r, Assign | Revoke) and r.group == group),
                    key=lambda r: r.ts)
    since: dict[tuple[str, int], float] = {}
    paused: dict[tuple[str, int], float] = {}
    for r in events:
        for tp in r.partitions:
            paused.setdefault(tp, 0.0)
            if isinstance(r, Revoke):
                since.setdefault(tp, r.ts)
            elif tp in since:
                paused[tp] += r.ts - since.pop(tp)
    return [sum(paused.values()) / len(paused)] if paused else []


MEASURES: dict[str, dict[str, Callable[[TruthIndex, str], list[float]]]] = {
    "session_timeout_crash": {"outage_s": crash_outages},
    "max_poll_interval": {"rebalance_s": removal_rebalances, "silence_s": silences},
    "restart_storm": {"storm_rebalance_s": membership_rebalances, "partition_pause_s": partition_pauses},
}


# --------------------------------------------------------------------------------------------
# the runs
# --------------------------------------------------------------------------------------------

@dataclass
class Run:
    scenario: Scenario
    group: str  # the real name
    truth: TruthIndex
    advice: list[dict[str, Any]]  # the group's rows


@dataclass
class Effect:
    name: str
    rule: str
    before: Run
    after: Run | None = None
    row: dict[str, Any] | None = None
    measured: dict[str, tuple[list[float], list[float]]] = field(default_factory=dict)
    note: str = ""


def run_once(sc: Scenario, group: str, bootstrap: str, root: Path, interval_s: float, seed: int) -> Run:
    got = collect(sc, bootstrap, root, interval_s, seed)
    tables = read_lakes([(got.lake, got.end)])
    step = run_step(tables, commit_stream=tables["commits"] is not None and tables["group_events"] is not None,
                    settings=AnalyticsConfig(rules=RULES, **TIMEOUTS))
    ti = TruthIndex(load(got.truth_path))
    assert ti.run is not None
    real = f"sim-{sc.name}-{ti.run.run_id}-{group}"
    rows = [r for r in step.tables["advice"].to_pylist() if r["group_id"] == real]
    return Run(sc, real, ti, rows)


#: the remedies a rule declined to advise in a scenario (it predicted no gain), applied anyway to
#: check that judgement: scenario → (rule, setting, suggestion)
DECLINED: dict[str, list[tuple[str, str, str]]] = {
    "rebalance-storm": [("restart_storm", "partition.assignment.strategy", "cooperative-sticky")],
    "rolling-restart-storm": [("restart_storm", "group.instance.id", "static membership (group.instance.id)"),
                              ("restart_storm", "partition.assignment.strategy", "cooperative-sticky")],
}


def check_declined(name: str, bootstrap: str, root: Path, interval_s: float, seed: int) -> list[Effect]:
    """A scenario whose rule gave no advice: each remedy it declined (:data:`DECLINED`), applied
    anyway; the measures before and after show whether declining was right."""
    sc = load_scenario(name)
    out = []
    before: Run | None = None
    for i, (rule, setting, suggested) in enumerate(DECLINED[name]):
        before = before or run_once(sc, "readers", bootstrap, root / "before", interval_s, seed)
        eff = Effect(name, rule, before)
        given = [r for r in before.advice if r["rule"] == rule]
        eff.note = (f"no {rule} advice (expected none: it predicts no gain); applied anyway: {setting} = "
                    f"{suggested}" if not given else
                    f"UNEXPECTED: {rule} advised {given[0]['setting']} ({given[0]['suggested']}); applied: {setting}")
        eff.after = run_once(applied(sc, "readers", suggested, setting), "readers", bootstrap, root / f"after-{i}",
                             interval_s, seed)
        print(f"{name}: {setting} applied, run done", file=sys.stderr, flush=True)
        for measure, fn in MEASURES[rule].items():
            eff.measured[measure] = (fn(before.truth, before.group), fn(eff.after.truth, eff.after.group))
        out.append(eff)
    return out


def prove(name: str, bootstrap: str, root: Path, interval_s: float, seed: int) -> Effect:
    sc = load_scenario(name)
    wanted = [e for e in sc.expect_advice if e.setting in APPLY and e.rule in MEASURES]
    if not wanted:
        raise SystemExit(f"{name}: it expects no advice this script can apply ({', '.join(APPLY)})")
    exp = wanted[0]
    before = run_once(sc, exp.group, bootstrap, root / "before", interval_s, seed)
    print(f"{name}: first run done, {len(before.advice)} advice row(s)", file=sys.stderr, flush=True)
    eff = Effect(name, exp.rule, before)
    rows = [r for r in before.advice if r["rule"] == exp.rule and r["setting"] == exp.setting]
    if not rows:
        eff.note = f"no {exp.rule} advice naming {exp.setting} after the first run: nothing to apply"
        return eff
    eff.row = rows[0]
    changed = applied(sc, exp.group, eff.row["suggested"], exp.setting)
    eff.after = run_once(changed, exp.group, bootstrap, root / "after", interval_s, seed)
    print(f"{name}: second run done, {len(eff.after.advice)} advice row(s)", file=sys.stderr, flush=True)
    for measure, fn in MEASURES[exp.rule].items():
        eff.measured[measure] = (fn(before.truth, before.group), fn(eff.after.truth, eff.after.group))
    return eff


def _med(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f}" if xs else "–"


def _each(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs) or "none"


def _amount(x: Any) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.2f}"


def report(effects: list[Effect], seed: int, interval_s: float, load: tuple[float, float]) -> list[str]:
    lines = [f"# The advice applied on the simulator ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores; load average (1 min) {load[0]:.2f} at the "
             f"start, {load[1]:.2f} at the end; seed {seed}, sweeps every {interval_s:g} s, __consumer_offsets "
             "tail on.", "",
             "Per scenario: the advice of the first run, the same scenario and seed run again with its "
             "suggestion applied to every member of the group, the effect the advice predicted (its `measure`: "
             "`current_amount` → `expected_amount`) against the effect measured on the ground truth of both runs "
             "(per fault, then the median).", ""]
    for e in effects:
        lines += [f"## {e.name}: {e.rule}", ""]
        if e.row is None and e.after is not None:  # a declined remedy, applied anyway
            lines += [f"- {e.note}", "", "| measured on the truth | before (each) | after (each) | before median | "
                      "after median |", "|---|---|---|---:|---:|"]
            lines += [f"| {m} | {_each(b)} | {_each(a)} | {_med(b)} | {_med(a)} |" for m, (b, a) in e.measured.items()]
            lines.append("")
            continue
        if e.row is None:
            lines += [e.note or "no advice", ""]
            continue
        r = e.row
        lines += [f"- advice: `{r['setting']}` {r['current_value'] or '(current unknown)'} → {r['suggested']} "
                  f"({r['confidence']}); evidence: {r['evidence']}",
                  f"- predicted: {r['expected_effect']}",
                  f"- predicted `{r['measure']}` ({r['unit']}): {_amount(r['current_amount'])} → "
                  f"{_amount(r['expected_amount'])}", "",
                  "| measured on the truth | before (each) | after (each) | before median | after median |",
                  "|---|---|---|---:|---:|"]
        for measure, (b, a) in e.measured.items():
            lines.append(f"| {measure} | {_each(b)} | {_each(a)} | {_med(b)} | {_med(a)} |")
        after = e.after.advice if e.after is not None else []
        lines += ["", "Advice after the change: " + ("; ".join(f"{x['rule']} ({x['setting']}): {x['suggested']}"
                                                             for x in after) or "none") + ".", ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios",
                    default="crash-long-session,poll-timeout-repeat,rebalance-storm,rolling-restart-storm")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--interval-s", type=float, default=0.5)
    ap.add_argument("--bootstrap", default=os.environ.get("LAGSCOPE_TEST_BOOTSTRAP"))
    ap.add_argument("--keep", type=Path, help="keep each run's lake and truth under this folder")
    args = ap.parse_args()
    if not args.bootstrap:
        sys.exit("give --bootstrap or LAGSCOPE_TEST_BOOTSTRAP (a running broker)")
    load0 = os.getloadavg()[0]
    effects = []
    with tempfile.TemporaryDirectory(prefix="lagscope-advice-") as tmp:
        root = args.keep or Path(tmp)
        for name in [n for n in args.scenarios.split(",") if n]:
            try:
                if name in DECLINED and not load_scenario(name).expect_advice:
                    effects += check_declined(name, args.bootstrap, root / name, args.interval_s, args.seed)
                    continue
                effects.append(prove(name, args.bootstrap, root / name, args.interval_s, args.seed))
            except AdviceUnreadable as exc:
                sys.exit(f"{name}: cannot apply the advice: {exc}")
    print("\n".join(report(effects, args.seed, args.interval_s, (load0, os.getloadavg()[0]))))


if __name__ == "__main__":
    main()
