"""End-to-end accuracy: simulator → collector (sweeps + __consumer_offsets tail) → analytics,
compared with the simulator's ground truth, per scenario.

    LAGSCOPE_TEST_BOOTSTRAP=127.0.0.1:37779 .venv/bin/python benchmarks/analytics_accuracy.py \\
        [--scenarios steady,crash,...] [--seeds 3] --interval-s 0.5

Every built-in scenario (default), old and new, is run with each of ``--seeds`` seeds (1, 2, …:
the simulator draws its timings, rates and send jitter from the seed, recorded in the truth).
For each run: the collector sweeps every ``--interval-s`` into a fresh lake (only the run's
groups) while the scenario runs; then one analytics step per seed runs over that seed's lakes, and

- lag in seconds per sweep row is compared with ``TruthIndex.time_lag_at`` (median and p99
  absolute error), beside kafka-lag-exporter's interpolation re-implemented here (a table of
  (end offset, time) points per partition, linear interpolation between the bracketing points,
  extrapolation from the first two points below the table, and its last point's time for an
  offset at the end);
- rebalance windows against ``TruthIndex.rebalances`` (found, duration error, cause);
- findings (anomalies and rebalance windows) against what the truth calls for, scored by
  :mod:`lagscope.devtools.sim.score` (the demo's summary scores itself with the same module): per
  kind precision, recall, false warnings and false criticals per hour of no-fault traffic (the
  scenarios marked ``no_fault``), detection delay p50/p95, against the targets (0 false
  criticals; precision and recall ≥ 0.95; delay ≤ 2 sweep intervals + the rule's threshold;
  lag seconds median error ≤ 1 s and p99 ≤ 5 s in every scenario);
- alarms (anomalies, non-OK/IDLE status rows) counted for the no-fault scenarios;
- the ``advice`` table against each scenario's ``expect_advice`` (rule and setting per group; a
  scenario listing none, every no-fault one, expects no advice), by
  :func:`lagscope.devtools.sim.score.score_advice`: per run the advice expected, found, missing
  and unexpected (false advice, by rule), and per rule over every run.

The step is the engine's own (:func:`lagscope.analytics.step.run_step`, what each Spark task of a
step runs over its bucket of groups), over every scenario's groups at once, in this process: the
lakes are read with pyarrow as a Spark step reads them (``rebalance_accuracy.read_lakes``), each
cut at its scenario's end, and no Spark session is started. Until the one-engine change (issue
20) this harness ran the Spark-SQL step on DataFrames; what changed besides:

- lag in seconds *per sweep row* came from ``trends.transform_lag_seconds(prepare_series(offsets),
  every_sweep=True)``, Spark around the lag-seconds pass. The engine reports lag in seconds per
  minute row only (the ``lag_trends`` and ``status`` tables: each key's last sweep of a minute), so
  the per-sweep figures here run that same pass directly: :func:`sweep_lag_seconds` feeds
  :func:`lagscope.analytics.kernel.lag_seconds_table` (which the per-partition pass,
  ``onepass.pass_table``, calls for the minute rows) the rows of ``step.prepare`` with
  ``every_sweep=True``. Same definitions, same rows: the figures compare with the earlier
  reports. As a check that they are the engine's, the lag seconds at each key's last sweep of a
  minute are compared with the step's ``status`` rows (a note when any differs);
- a group's first settled sweep (for the rebalance and storm scoring) comes from
  :func:`lagscope.analytics.groups.member_sweeps` instead of Spark's ``rebalances.member_sweeps``.

Prints a Markdown report (redirect it to benchmarks/results/analytics_accuracy.md).
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import math
import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

# the same collection and the same step as the rebalance harness beside this script (simulator
# run + collector into <dir>/lake; the lakes read with pyarrow, the engine's step in this process)
from rebalance_accuracy import collect, first_settled, read_lakes, run_step, window_causes

from lagscope.analytics import kernel
from lagscope.analytics import step as steps
from lagscope.analytics.arrays import key_code
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig

#: the targets (issue 25): lag seconds error per scenario, precision and recall per kind
TARGET_LAG_MEDIAN_S = 1.0
TARGET_LAG_P99_S = 5.0
TARGET_PRECISION = TARGET_RECALL = 0.95


def ti_t0(ti: Any) -> float:
    """The run's first record time (for relative times in notes)."""
    from lagscope.devtools.sim.truth import record_ts

    return ti.run.ts if ti.run is not None else min((record_ts(r) for r in ti.records), default=0.0)


@dataclass
class ScenarioReport:
    name: str
    seed: int = 0
    no_fault: bool = False
    #: the run's first record time (epoch s)
    t0: float = 0.0
    sweeps: int = 0
    lag_rows: int = 0
    lag_mae: float = float("nan")
    lag_p99: float = float("nan")
    kle_mae: float = float("nan")
    kle_p99: float = float("nan")
    lower_bounds: int = 0
    rebalances_truth: int = 0
    rebalances_found: int = 0
    duration_err_max: float = float("nan")
    causes_right: int = 0
    source: str = ""
    #: the findings scored against the truth (lagscope.devtools.sim.score)
    scored: Any = None
    #: the advice scored against the scenario's expect_advice (score.AdviceScore)
    advice: Any = None
    alarms: int = 0
    notes: list[str] = field(default_factory=list)
    #: the commit-gap faults against the rule's floor: (score.GapFault, the scenario's nominal
    #: pause s, the member's commit cadence s; NaN when not known)
    gaps: list[tuple[Any, float, float]] = field(default_factory=list)


def kle_lag_seconds(points: list[tuple[int, float]], committed: int, now: float) -> float:
    """kafka-lag-exporter's estimate: interpolate the committed offset's time over the table of
    (end offset, sample time) points seen so far; extrapolate below the table."""
    if not points:
        return 0.0
    offs = [p[0] for p in points]
    if committed >= offs[-1]:
        return 0.0
    i = bisect.bisect_right(offs, committed)
    if i == 0:
        if len(points) < 2 or offs[1] == offs[0]:
            return now - points[0][1]
        (o1, t1), (o2, t2) = points[0], points[1]
    else:
        (o1, t1), (o2, t2) = points[i - 1], points[i]
    if o2 == o1:
        return now - t1
    est = t1 + (committed - o1) * (t2 - t1) / (o2 - o1)
    return now - est


def _pctl(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def scenario_window(name: str, truth_path: Path) -> tuple[float, float]:
    """The scenario's own time: from its first produced record (the producers start at the
    run's t0) to t0 + its duration, when the members start closing (teardown, not scenario)."""
    from lagscope.devtools.sim.runner import load_scenario
    from lagscope.devtools.sim.truth import Produce, load

    recs = load(truth_path)
    t0 = min((r.ts for r in recs if isinstance(r, Produce)), default=0.0)
    return t0, t0 + load_scenario(name).duration


def sweep_lag_seconds(offsets: pa.Table, read_committed_groups: tuple[str, ...] = ()) -> pa.Table:
    """Lag in seconds at every sweep row of ``offsets`` (lake rows): ``group_id, topic, partition, t,
    committed, end, lag_s, lag_s_lower``. The engine's lag-seconds pass
    (:func:`lagscope.analytics.kernel.lag_seconds_table`, as ``onepass.pass_table`` runs it for the
    minute rows) over the series rows of ``step.prepare``, each key's rows in time order, with
    ``every_sweep``: every sweep reported, not only each minute's last."""
    series = steps.prepare(offsets, read_committed_groups)
    if not series.num_rows:
        return pa.table({c: [] for c in ("group_id", "topic", "partition", "t", "committed", "end", "lag_s",
                                          "lag_s_lower")})
    code = key_code(*(series.column(k) for k in steps.KEY))
    t = np.asarray(series.column("t"), dtype=np.float64)
    order = pa.array(np.lexsort((t, code)))
    rows = pa.table({
        "_h": pa.array(code, pa.int64()), "_k": pa.array((code << 2) | kernel.SWEEP, pa.int64()),
        "t": series.column("t"), "committed": series.column("committed"), "end": series.column("end"),
        "log_start": series.column("log_start"), "rec_t": series.column("rec_t"),
    }, schema=kernel.LAG_SECONDS_IN).take(order)
    got = kernel.lag_seconds_table(rows, every_sweep=True)
    # the key's strings back by its code (one row of the series per code)
    codes, first = np.unique(code, return_index=True)
    at = np.searchsorted(codes, np.asarray(got.column("_h"), dtype=np.int64))
    keys = series.select(["group_id", "topic", "partition"]).take(pa.array(first[at]))
    return pa.table({"group_id": keys.column("group_id").cast(pa.string()),
                     "topic": keys.column("topic").cast(pa.string()), "partition": keys.column("partition"),
                     **{c: got.column(c) for c in ("t", "committed", "end", "lag_s", "lag_s_lower")}})


def analyse(lakes: dict[str, tuple[Path, float]], rules: AnalyticsRulesConfig,
            timeouts: dict[str, float], *, commit_stream: bool = True, lag: bool = True) -> dict[str, Any]:
    """One analytics step over every scenario's lake at once (their groups are distinct), each
    cut at its scenario's end (``lakes``: name → (lake, end epoch s)); without the commit stream's
    tables when ``commit_stream`` is False (sweeps only), without the per-sweep lag seconds when
    ``lag`` is False."""
    tables = read_lakes(list(lakes.values()))
    has_tail = commit_stream and tables["commits"] is not None and tables["group_events"] is not None
    settings = AnalyticsConfig(rules=rules, **timeouts)
    step = run_step(tables, commit_stream=has_tail, settings=settings)
    offsets, members = tables["offsets"], tables["members"]
    assert offsets is not None
    assert members is not None
    lag_rows = sweep_lag_seconds(offsets).to_pylist() if lag else []
    status = step.tables["status"]
    status_rows = status.filter(status.column("partition").is_valid()).to_pylist()
    return {
        "first_settled": first_settled(members),
        "lag": lag_rows,
        "rebalances": step.tables["rebalances"].to_pylist(),
        "anomalies": step.tables["anomalies"].to_pylist(),
        "advice": step.tables["advice"].to_pylist(),
        "status": status_rows,
        "has_tail": has_tail,
        "minute_check": minute_check(lag_rows, status_rows),
    }


def minute_check(lag_rows: list[dict[str, Any]], status_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The per-sweep lag seconds at each key's last sweep of a minute that differ from the step's
    ``status`` row of that sweep, as notes (``group_id``, ``note``; none: the figures are the
    engine's)."""
    last: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for r in lag_rows:
        k = (r["group_id"], r["topic"], r["partition"], int(r["t"] // 60))
        if k not in last or r["t"] >= last[k]["t"]:
            last[k] = r
    by_sweep = {(r["group_id"], r["topic"], r["partition"], round(r["t"], 3)): r for r in last.values()}
    notes = []
    for s in status_rows:
        r = by_sweep.get((s["group_id"], s["topic"], s["partition"], round(s["eval_ts"].timestamp(), 3)))
        if r is None:
            continue
        a, b = r["lag_s"], s.get("lag_seconds")
        if (a is None) != (b is None) or (a is not None and b is not None and abs(a - b) > 1e-6):
            notes.append({"group_id": s["group_id"], "note": f"lag seconds {a} per sweep but {b} in the step's "
                          f"status, {s['topic']}:{s['partition']} at {s['eval_ts'].isoformat()}"})
    return notes


def of_scenario(got: dict[str, Any], name: str, truth_path: Path) -> dict[str, Any]:
    """The rows of one scenario's groups (``sim-<scenario>-<run id>-<group>``, the run id its
    truth's: a scenario's name alone is the prefix of another's, as crash of crash-long-session)."""
    from lagscope.devtools.sim.truth import RunInfo, load

    runs = [r.run_id for r in load(truth_path) if isinstance(r, RunInfo)]
    mine = f"sim-{name}-{runs[0]}-" if runs else f"sim-{name}-"
    return {k: ({g: t for g, t in v.items() if g.startswith(mine)} if isinstance(v, dict)
                else [r for r in v if r["group_id"].startswith(mine)] if isinstance(v, list) else v)
            for k, v in got.items()}


def nominal_pause(sc: Any, fault: Any) -> tuple[float, float]:
    """A commit-gap fault's nominal pause in its scenario (the member's ``commit_gap`` action whose
    duration is nearest the fault's, by ratio) and the member's commit cadence (its auto-commit
    interval); NaN when the scenario does not say."""
    for g in sc.groups:
        if not fault.group.endswith(f"-{g.name}"):
            continue
        for m in g.members:
            durations = [a.duration for a in m.actions if a.kind == "commit_gap" and a.duration]
            if m.name == fault.member and durations:
                actual = max(fault.end - fault.start, 1e-3)
                cadence = m.auto_commit_interval_ms / 1000.0 if m.enable_auto_commit else math.nan
                return min(durations, key=lambda d: abs(math.log(actual / d))), cadence
    return math.nan, math.nan


def score(name: str, truth_path: Path, got: dict[str, Any], interval_s: float,
          rules: AnalyticsRulesConfig, ti: Any = None, until: float | None = None) -> ScenarioReport:
    """One run scored; ``until``: the scenario's end, where its lake was cut (the commit gaps'
    normal is learned from the truth's gaps up to it, as the step learns from the lake's)."""
    from lagscope.devtools.sim.runner import load_scenario
    from lagscope.devtools.sim.truth import TruthIndex, load

    ti = ti if ti is not None else TruthIndex(load(truth_path))
    rep = ScenarioReport(name)
    # lag in seconds
    errs, kle_errs = [], []
    tables: dict[tuple[str, str, int], list[tuple[int, float]]] = {}
    for r in sorted(got["lag"], key=lambda r: r["t"]):
        key = (r["group_id"], r["topic"], r["partition"])
        pts = tables.setdefault(key, [])
        if r["end"] is not None and (not pts or r["end"] > pts[-1][0]):
            pts.append((r["end"], r["t"]))
        if r["committed"] is None or r["lag_s"] is None:
            continue
        truth = ti.time_lag_at(r["group_id"], r["topic"], r["partition"], r["t"])
        if truth is None:
            continue
        if r["lag_s_lower"]:
            rep.lower_bounds += 1
            continue
        errs.append(abs(r["lag_s"] - truth))
        kle_errs.append(abs(kle_lag_seconds(pts, r["committed"], r["t"]) - truth))
    rep.lag_rows = len(errs)
    rep.lag_mae, rep.lag_p99 = _pctl(errs, 0.5), _pctl(errs, 0.99)
    rep.kle_mae, rep.kle_p99 = _pctl(kle_errs, 0.5), _pctl(kle_errs, 0.99)
    # rebalances (the group's first assignment is its start, not a rebalance window)
    groups = {r["group_id"] for r in got["lag"]}
    ours = sorted(got["rebalances"], key=lambda r: r["start_ts"])
    derr: list[float] = []
    for g in groups:
        # windows need a settled sweep before them: the group's formation is not a rebalance
        first = got["first_settled"].get(g, float("inf"))
        truth_rb = [r for r in ti.rebalances(g) if r.start > first]
        rep.rebalances_truth += len(truth_rb)
        mine = [r for r in ours if r["group_id"] == g]
        for tr in truth_rb:
            best = min(mine, key=lambda r: abs(r["start_ts"].timestamp() - tr.start), default=None)
            if best is None or abs(best["start_ts"].timestamp() - tr.start) > max(5.0, 4 * interval_s):
                rep.notes.append(f"missed rebalance {tr.start:.1f}–{tr.end:.1f}")
                continue
            rep.rebalances_found += 1
            mine.remove(best)
            derr.append(abs((best["duration_s"] or 0.0) - (tr.end - tr.start)))
            want = window_causes(tr.cause) if tr.cause else ()
            if not want or best["cause"] in want:
                rep.causes_right += 1
            else:
                rep.notes.append(f"cause {best['cause']} for a {tr.cause.kind if tr.cause else 'no'} fault")
        rep.source = ",".join(sorted({r["source"] for r in ours})) or "-"
    rep.duration_err_max = max(derr) if derr else float("nan")
    # findings (anomalies, rebalance windows) against what the truth calls for, by the scoring
    # module: same kind and group, a partition the fault touched, overlapping in time within
    # 2 sweep intervals + 1 s
    from lagscope.devtools.sim import score as scoring

    sc = load_scenario(name)
    rep.seed = ti.run.seed if ti.run is not None else sc.seed
    rep.no_fault = sc.no_fault
    expected = scoring.expected_findings(ti, rules, first_settled=got["first_settled"], gap_until=until)
    findings = ([scoring.Finding.from_anomaly(a) for a in got["anomalies"]]
                + [scoring.Finding.from_rebalance(r) for r in got["rebalances"]])
    run_t0 = rep.t0 = ti_t0(ti)
    rep.scored = scoring.score_run(expected, findings, tolerance_s=2 * interval_s + 1, scenario=name,
                                   real=scoring.real_events(ti, first_settled=got["first_settled"], rules=rules,
                                                            gap_until=until),
                                   seed=rep.seed, no_fault=sc.no_fault, duration_s=sc.duration)
    rep.gaps = [(g, *nominal_pause(sc, g.fault)) for g in
                scoring.gap_faults(ti, rules, rep.scored, tolerance_s=2 * interval_s + 1, gap_until=until)]
    prefix = f"sim-{name}-{ti.run.run_id}" if ti.run is not None else f"sim-{name}"
    rep.advice = scoring.score_advice(sc.expect_advice, got["advice"], prefix=prefix, scenario=name, seed=rep.seed)
    for a in got["advice"]:
        key = (a["group_id"][len(prefix) + 1:], a["rule"], a["setting"])
        if key in rep.advice.unexpected:
            rep.notes.append(f"unexpected advice {a['rule']} ({a['setting']}) on {key[0]}: {a['suggested']}; "
                             f"evidence: {a['evidence']}")
    for f in rep.scored.unmatched:
        rep.notes.append(f"false {f.kind} ({f.severity}) {f.where()} at +{f.start - run_t0:.1f} s ({f.detail})")
    for m in rep.scored.matches:
        if m.finding is None:
            cause = f" ({m.expected.fault.kind})" if m.expected.fault is not None else ""
            rep.notes.append(f"missed {m.expected.kind}{cause} at +{m.expected.start - run_t0:.1f} s")
    alarming = [s for s in got["status"] if s["status"] not in ("OK", "IDLE")]
    rep.alarms = len(got["anomalies"]) + len(alarming)
    if sc.no_fault:
        for st in alarming:
            rep.notes.append(f"alarm: status {st['status']} {st['topic']}:{st['partition']} "
                             f"at +{st['eval_ts'].timestamp() - run_t0:.1f} s ({st['reason']})")
    rep.sweeps = len({r["t"] for r in got["lag"]})
    rep.notes += [n["note"] for n in got["minute_check"]]
    return rep


def _f(x: float, fmt: str = ".2f") -> str:
    return "–" if math.isnan(x) else format(x, fmt)


def report_lines(reports: list[ScenarioReport], rules: AnalyticsRulesConfig, interval_s: float) -> list[str]:
    """The Markdown report's tables (after its header): per run, per kind against the targets,
    lag seconds per scenario against the targets, the no-fault scenarios' alarms, the notes."""
    from lagscope.devtools.sim import score as scoring

    lines = ["| scenario | seed | sweeps | lag rows | lag s MedAE | lag s p99 | KLE MedAE | KLE p99 | lower bounds | "
             "rebalances found/truth | max duration err s | causes right | source | "
             "findings (kind: true/false/missed) | alarms |", "|---|" + "---:|" * 14]
    for r in reports:
        per: dict[str, list[int]] = {}
        if r.scored is not None:
            for f in r.scored.matched:
                per.setdefault(f.kind, [0, 0, 0])[0] += 1
            for f in r.scored.unmatched:
                per.setdefault(f.kind, [0, 0, 0])[1] += 1
            for m in r.scored.matches:
                if m.finding is None:
                    per.setdefault(m.expected.kind, [0, 0, 0])[2] += 1
        an = "; ".join(f"{k}: {t}/{fa}/{mi}" for k, (t, fa, mi) in sorted(per.items())) or "-"
        lines.append(f"| {r.name} | {r.seed} | {r.sweeps} | {r.lag_rows} | {r.lag_mae:.2f} | {r.lag_p99:.2f} | "
                     f"{r.kle_mae:.2f} | {r.kle_p99:.2f} | {r.lower_bounds} | "
                     f"{r.rebalances_found}/{r.rebalances_truth} | "
                     f"{'–' if math.isnan(r.duration_err_max) else f'{r.duration_err_max:.2f}'} | "
                     f"{r.causes_right} | {r.source} | {an} | {r.alarms if r.no_fault else '-'} |")
    seeds = sorted({r.seed for r in reports})
    quiet_h = sum(r.scored.duration_s for r in reports if r.scored is not None and r.no_fault) / 3600
    figs = scoring.figures([r.scored for r in reports if r.scored is not None],
                           scoring.delay_budgets(rules, interval_s))
    lines += ["", f"Per kind over every run ({len(reports)} runs: {len({r.name for r in reports})} scenarios × "
              f"seeds {', '.join(map(str, seeds))}; {quiet_h * 60:.1f} min of no-fault traffic). Findings are "
              "anomalies and rebalance windows; true: matching what the truth calls for (same kind and group, a "
              "partition the fault touched, overlapping within 2 sweep intervals + 1 s), false: matching "
              "nothing; found: credited by a finding that matches it and no fault nearer in time; delay: from "
              "the fault to the earliest such finding's start. Targets: precision and recall ≥ 0.95, 0 false "
              "criticals, delay p95 ≤ the budget (2 sweep intervals + the rule's threshold).", "",
              "| kind | expected | found | findings | true | precision | recall | false warnings/h (no-fault) | "
              "false criticals/h (no-fault) | false criticals (all) | delay p50 s | delay p95 s | budget s | "
              "targets |", "|---|" + "---:|" * 12 + "---|"]
    missed_targets: list[str] = []
    for k in figs:
        bad = []
        if not math.isnan(k.precision) and k.precision < TARGET_PRECISION:
            bad.append("precision")
        if not math.isnan(k.recall) and k.recall < TARGET_RECALL:
            bad.append("recall")
        if k.false_criticals:
            bad.append("false criticals")
        if not math.isnan(k.delay_p95) and not math.isnan(k.delay_budget) and k.delay_p95 > k.delay_budget:
            bad.append("delay")
        missed_targets += [f"{k.kind} {b}" for b in bad]
        lines.append(f"| {k.kind} | {k.expected} | {k.found} | {k.findings} | {k.true_findings} | {_f(k.precision)} | "
                     f"{_f(k.recall)} | {_f(k.false_warnings_per_h, '.1f')} | {_f(k.false_criticals_per_h, '.1f')} | "
                     f"{k.false_criticals} | {_f(k.delay_p50, '.1f')} | {_f(k.delay_p95, '.1f')} | "
                     f"{_f(k.delay_budget, '.1f')} | {'met' if not bad else 'missed: ' + ', '.join(bad)} |")
    lines += ["", f"Lag in seconds per scenario, the worst seed (targets: median error ≤ {TARGET_LAG_MEDIAN_S:g} s, "
              f"p99 ≤ {TARGET_LAG_P99_S:g} s):", "",
              "| scenario | lag s MedAE | lag s p99 | targets |", "|---|---:|---:|---|"]
    for name in dict.fromkeys(r.name for r in reports):
        rs = [r for r in reports if r.name == name and r.lag_rows]
        if not rs:
            lines.append(f"| {name} | – | – | no rows |")
            continue
        med = max(r.lag_mae for r in rs)
        p99 = max(r.lag_p99 for r in rs)
        ok = med <= TARGET_LAG_MEDIAN_S and p99 <= TARGET_LAG_P99_S
        if not ok:
            missed_targets.append(f"lag seconds in {name}")
        lines.append(f"| {name} | {med:.2f} | {p99:.2f} | {'met' if ok else 'missed'} |")
    gap_l, gap_missed = gap_lines(reports, rules)
    lines += gap_l
    missed_targets += gap_missed
    lines += advice_lines(reports)
    missed_targets += [f"advice {f.rule}" for f in scoring.advice_figures(r.advice for r in reports
                                                                         if r.advice is not None)
                       if f.unexpected or f.found < f.expected]
    quiet = [r for r in reports if r.no_fault]
    lines += ["", "Alarms (anomalies + status rows other than OK/IDLE) in the no-fault scenarios: "
              + (", ".join(f"{r.name}#{r.seed} {r.alarms}" for r in quiet) or "none run") + ".", "",
              "Targets: " + ("all met." if not missed_targets else "missed: " + "; ".join(missed_targets) + "."), ""]
    for r in reports:
        for n in r.notes:
            lines.append(f"- {r.name}#{r.seed}: {n}")
    return lines


def gap_lines(reports: list[ScenarioReport], rules: AnalyticsRulesConfig) -> tuple[list[str], list[str]]:
    """The commit-gap faults against the rule's floor: per fault, the truth's gap against the
    floor the rule states for its partition (``score.gap_verdicts``), found or not; then per
    scenario and pause size (× the floor the rule states for the member's commit cadence) the
    recall above the floor (target ≥ 0.95), those below it counted apart. Returns the lines and
    the targets missed."""
    from lagscope.devtools.sim import score as scoring

    rows = [(r, g, pause, cadence) for r in reports for g, pause, cadence in r.gaps]
    if not rows:
        return [], []
    lines = ["", "Commit-gap faults against the rule's floor (`score.gap_verdicts`). Gap: the truth's, from the "
             "partition's last commit at or before the pause to its first after it (the largest over the fault's "
             "partitions). Floor: what the rule states for that partition, max(median + gap_k × max(1.4826 × MAD, "
             f"gap_mad_floor_s), gap_min_s) = max(median + {rules.gap_k:g} × max(1.4826 × MAD, "
             f"{rules.gap_mad_floor_s:g} s), {rules.gap_min_s:g} s), its normal learned from the truth's gaps with "
             "work pending up to the scenario's end (as the benchmark's one step learns them). A gap at or below "
             "it is normal by the rule's definition: the fault is counted apart (*below the rule's floor*), "
             "neither expected nor false; one of "
             f"{min(rules.stall_after_s, rules.stop_after_s):g} s or more is a stall by the rule. Size: the "
             "scenario's pause ÷ the floor the rule states for the member's commit cadence (median = the cadence, "
             "MAD 0). Rule's gap: the magnitude of the finding that found it (the gap the rule measured from the "
             "commit stream).", "",
             "| scenario | seed | at s | pause s | size × | gap s | normal median s (MAD) | floor s | margin s | "
             "verdict | found | delay s | rule's gap s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|---:|"]

    def size_of(pause: float, cadence: float) -> float:
        return pause / scoring.stated_gap_floor(rules, cadence) if not math.isnan(pause + cadence) else math.nan

    for r, g, pause, cadence in rows:
        known = [v for v in g.verdicts if v.gap_s is not None]
        v = max(known, key=lambda v: v.gap_s or 0.0) if known else (g.verdicts[0] if g.verdicts else None)
        normal = f"{v.median_s:.2f} ({v.mad_s:.2f})" if v is not None and not math.isnan(v.median_s) else "–"
        lines.append(f"| {r.name} | {r.seed} | {g.fault.start - r.t0:.1f} | {_f(pause, '.3g')} | "
                     f"{_f(size_of(pause, cadence), '.2f')} | {_f(g.gap_s)} | {normal} | {_f(g.floor_s)} | "
                     f"{_f(g.gap_s - g.floor_s, '+.2f')} | {g.verdict} | {'yes' if g.found else 'no'} | "
                     f"{'–' if g.delay is None else f'{g.delay:.1f}'} | "
                     f"{'–' if g.measured_s is None else f'{g.measured_s:.2f}'} |")
    lines += ["", "Per scenario and pause size (target: recall ≥ "
              f"{TARGET_RECALL:g} of the faults above the rule's floor, every size):", "",
              "| scenario | pause s | size × | faults | above the floor | found | recall | delay p50 s | p95 s | "
              "target | below the floor (found) | a stall by the rule | no normal yet |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    missed: list[str] = []
    by: dict[tuple[str, float, float], list[Any]] = {}
    for r, g, pause, cadence in rows:
        by.setdefault((r.name, pause, cadence), []).append(g)
    for (name, pause, cadence), gs in sorted(by.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        above = [g for g in gs if g.verdict == scoring.GAP_ABOVE]
        below = [g for g in gs if g.verdict == scoring.GAP_BELOW]
        found = [g for g in above if g.found]
        delays = [g.delay for g in found if g.delay is not None]
        recall = len(found) / len(above) if above else math.nan
        ok = not above or recall >= TARGET_RECALL
        if not ok:
            missed.append(f"commit_gap recall above the floor in {name} at {pause:g} s")
        lines.append(f"| {name} | {_f(pause, '.3g')} | {_f(size_of(pause, cadence), '.2f')} | {len(gs)} | "
                     f"{len(above)} | {len(found)} | {_f(recall)} | {_f(_pctl(delays, 0.5), '.1f')} | "
                     f"{_f(_pctl(delays, 0.95), '.1f')} | {'–' if not above else 'met' if ok else 'missed'} | "
                     f"{len(below)} ({sum(g.found for g in below)}) | "
                     f"{sum(g.verdict == scoring.GAP_STALL for g in gs)} | "
                     f"{sum(g.verdict == scoring.GAP_UNLEARNED for g in gs)} |")
    return lines, missed


def _advice_keys(keys: tuple[tuple[str, str, str], ...]) -> str:
    return "; ".join(f"{g}: {rule} ({setting})" for g, rule, setting in keys) or "–"


def advice_lines(reports: list[ScenarioReport]) -> list[str]:
    """The advice table: per run the advice its scenario expects (``expect_advice``), found,
    missing and unexpected; then per rule over every run (target: every expected advice found,
    none unexpected)."""
    from lagscope.devtools.sim import score as scoring

    runs = [r for r in reports if r.advice is not None]
    lines = ["", "Advice against each scenario's `expect_advice` (group: rule (setting); a scenario naming none, "
             "every no-fault one, expects no advice). Found: a row of the group with that rule naming that "
             "setting; unexpected: any other row of the run's groups (false advice).", "",
             "| scenario | seed | expected | found | missing | unexpected |", "|---|---:|---|---|---|---|"]
    for r in runs:
        a = r.advice
        lines.append(f"| {r.name} | {r.seed} | {_advice_keys(a.expected)} | {_advice_keys(a.found)} | "
                     f"{_advice_keys(a.missing)} | {_advice_keys(a.unexpected)} |")
    lines += ["", "| rule | expected | found | recall | unexpected | target |", "|---|---:|---:|---:|---:|---|"]
    for f in scoring.advice_figures(r.advice for r in runs):
        ok = not f.unexpected and f.found == f.expected
        lines.append(f"| {f.rule} | {f.expected} | {f.found} | {_f(f.recall)} | {f.unexpected} | "
                     f"{'met' if ok else 'missed'} |")
    return lines


#: the skip matrix (issue 28): its scenarios, and the no-fault ones that are its negatives
MATRIX_SCENARIOS = ("skip-matrix-seek", "skip-matrix-admin", "skip-matrix-oor")
MATRIX_NEGATIVES = ("quiet-bursts", "burst-catchup")
#: the commit-gap size sweep (issue 25): run only when named (--scenarios), scored per pause size
#: against the rule's floor by gap_lines
GAP_SWEEP_SCENARIOS = ("commit-gaps-sweep",)
#: the targets of the skip matrix: recall at every size the commit stream proves, the count error
TARGET_SKIP_RECALL = 0.95
TARGET_SKIP_COUNT_ERROR = 0.05


@dataclass
class MatrixRun:
    """One scenario run of the skip matrix: its truth's faults, the ``skip`` findings of each
    analysis (``stream``: with the commit stream; ``sweeps``: sweeps only), and per skip what
    offsets can prove of it (:func:`lagscope.devtools.sim.score.skip_bounds`)."""

    name: str
    seed: int
    prefix: str
    faults: list[Any]
    findings: dict[str, list[Any]] = field(default_factory=dict)
    reports: dict[str, ScenarioReport] = field(default_factory=dict)
    bounds: dict[Any, Any] = field(default_factory=dict)
    #: skips of the truth that ended after the analysed window, left out
    outside: int = 0


#: a skip offsets cannot prove (docs/analytics.md, "Skip"): the consumer never showed its pace (a
#: caught-up consumer, or one a commit behind, taking a burst in one commit looks the same), or the
#: skip is within ``skip_factor`` × that pace × the jump's commit interval (consumption can explain it)
NOT_PROVABLE = "not provable from offsets"


def matrix_lines(runs: list[MatrixRun], mode: str, interval_s: float) -> list[str]:
    """The skip matrix of one analysis ``mode`` (``stream`` or ``sweeps``): per cell, by size, the
    negatives, and the smallest size found."""
    from lagscope.devtools.sim import score as scoring

    tol = 2 * interval_s + 1
    # per fault object (the same group and time may recur across runs)
    bounds = {id(f): r.bounds.get((f.group, f.member, f.start)) for r in runs for f in r.faults}

    def provable(f: Any) -> bool:
        b = bounds.get(id(f))
        return b is None or b.provable

    cells, negatives = scoring.skip_cells(((r.faults, r.findings[mode]) for r in runs if mode in r.findings),
                                          tolerance_s=tol, provable=provable)
    reasons: dict[Any, dict[str, int]] = {}
    for r in runs:
        for f in scoring.skip_faults(r.faults):
            b = bounds.get(id(f))
            if b is not None:
                per = reasons.setdefault(scoring.skip_cell(f), {})
                per[b.reason] = per.get(b.reason, 0) + 1

    def lost(c: Any) -> str:
        return f"{min(c.lost)}–{max(c.lost)}" if c.lost else "–"

    def size(n: int) -> str:
        return f"{n:,}" if n else "–"

    def apart(c: Any) -> str:
        return f"{c.apart_partitions} ({c.apart_found})" if c.apart_skips else "–"

    lines = ["| mechanism | size | spread | state | skips | lost (truth, per skip) | partitions | found | recall | "
             "reported / lost | count error mean | max | false skips | delay p50 s | max s | cause right | "
             f"offsets' evidence (skips) | {NOT_PROVABLE}: partitions (found) |",
             "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for c in cells:
        ratio = sum(c.reported) / sum(c.lost) if c.lost and sum(c.lost) else math.nan
        why = ", ".join(f"{k} {n}" for k, n in sorted(reasons.get(c.cell, {}).items())) or "–"
        lines.append(f"| {c.cell.mechanism} | {size(c.cell.size)} | {c.cell.spread} | {c.cell.state} | {c.skips} | "
                     f"{lost(c)} | {c.partitions} | {c.found} | {_f(c.recall)} | {_f(ratio)} | "
                     f"{_f(c.count_error_mean)} | {_f(c.count_error_max)} | {c.false_skips} | "
                     f"{_f(c.delay(0.5), '.1f')} | {_f(max(c.delays, default=math.nan), '.1f')} | "
                     f"{c.cause_right}/{c.findings} | {why} | {apart(c)} |")
    # by size (and mechanism): the targets
    lines += ["", "By size and mechanism (every spread and state; the skips offsets can prove, those they cannot "
              f"counted apart as {NOT_PROVABLE}; target: recall ≥ "
              f"{TARGET_SKIP_RECALL:g}, count error ≤ {TARGET_SKIP_COUNT_ERROR:.0%}, 0 false skips):", "",
              "| size | mechanism | skips | partitions | found | recall | count error max | false skips | "
              f"delay p50 s | p95 s | targets | {NOT_PROVABLE}: partitions (found) |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    groups: dict[tuple[int, str], list[Any]] = {}
    for c in cells:
        groups.setdefault((c.cell.size, c.cell.mechanism), []).append(c)
    smallest: dict[str, list[int]] = {}
    for (n, mech), every in sorted(groups.items()):
        cs = [c for c in every if c.skips]
        apart_s = (f"{sum(c.apart_partitions for c in every)} ({sum(c.apart_found for c in every)})"
                   if any(c.apart_skips for c in every) else "–")
        if not cs:
            lines.append(f"| {size(n)} | {mech} | – | – | – | – | – | "
                         f"{sum(c.false_skips for c in every)} | – | – | {NOT_PROVABLE} | {apart_s} |")
            continue
        parts = sum(c.partitions for c in cs)
        found = sum(c.found for c in cs)
        errs = [e for c in cs for e in c.count_errors]
        delays = [d for c in cs for d in c.delays]
        false = sum(c.false_skips for c in cs)
        recall = found / parts if parts else math.nan
        bad = ([] if recall >= TARGET_SKIP_RECALL else ["recall"]) + (
            [] if not errs or max(errs) <= TARGET_SKIP_COUNT_ERROR else ["count"]) + (["false skips"] if false else [])
        smallest.setdefault(mech, [])
        if recall >= TARGET_SKIP_RECALL:
            smallest[mech].append(n)
        lines.append(f"| {size(n)} | {mech} | {sum(c.skips for c in cs)} | {parts} | {found} | {_f(recall)} | "
                     f"{_f(max(errs, default=math.nan))} | {false} | {_f(_pctl(delays, 0.5), '.1f')} | "
                     f"{_f(_pctl(delays, 0.95), '.1f')} | {'met' if not bad else 'missed: ' + ', '.join(bad)} | "
                     f"{apart_s} |")
    neg = {g: n for g, n in negatives.items()}
    named = []
    for r in runs:
        for g in sorted({f.group for f in r.findings.get(mode, [])} | {g for g in neg if g.startswith(r.prefix)}):
            if g in neg and g.startswith(r.prefix + "-"):
                named.append(f"{r.name}#{r.seed} {g[len(r.prefix) + 1:]}: {neg[g]}")
    lines += ["", "Negatives (groups with no skip: a caught-up consumer taking bursts, fast catch-up after a burst; "
              "their groups in the matrix scenarios and the no-fault " + ", ".join(MATRIX_NEGATIVES) + "): false skips "
              + (", ".join(named) if named else "none") + ".", "",
              f"Sizes with recall ≥ {TARGET_SKIP_RECALL:g} over the provable cells, per mechanism (the smallest "
              "first): "
              + ("; ".join(f"{m} {', '.join(size(n) for n in sorted(ns)) if ns else 'none'}"
                           for m, ns in sorted(smallest.items())) or "none") + "."]
    return lines


def seed_truths(args: argparse.Namespace, names: list[str], base: Path, seed: int) -> dict[str, Path]:
    """Each scenario's truth for one seed: collected on the broker into ``base``, or with
    ``--reuse`` the kept one (a missing one ends the run with one line)."""
    truths: dict[str, Path] = {}
    for name in names:
        truths[name] = base / name / "out" / "truth.jsonl"
        if not args.reuse:
            truths[name] = collect(name, args.bootstrap, base / name, args.interval_s, seed).truth_path
            print(f"{name} seed {seed}: collected", file=sys.stderr, flush=True)
        elif not truths[name].exists():
            sys.exit(f"--reuse {args.reuse}: no kept run of {name} seed {seed} ({truths[name]} missing)")
    return truths


def run_matrix(args: argparse.Namespace, rules: AnalyticsRulesConfig, timeouts: dict[str, float]) -> None:
    """``--matrix``: the skip matrix scenarios and their negatives, with each seed; one analysis
    with the commit stream and one from sweeps alone (``--sweeps-only``: that one only)."""
    from lagscope.devtools.sim import score as scoring
    from lagscope.devtools.sim.truth import RunInfo, TruthIndex, load

    names = [n for n in args.scenarios.split(",") if n] if args.scenarios_given else [*MATRIX_SCENARIOS,
                                                                                       *MATRIX_NEGATIVES]
    modes = ["sweeps"] if args.sweeps_only else ["stream", "sweeps"]
    load_start = os.getloadavg()
    runs: list[MatrixRun] = []
    with tempfile.TemporaryDirectory(prefix="lagscope-acc-") as tmp:
        root = args.reuse or args.keep or Path(tmp)
        for seed in range(1, args.seeds + 1):
            base = root / f"seed-{seed}"
            truths = seed_truths(args, names, base, seed)
            windows = {name: scenario_window(name, truths[name]) for name in names}
            tis = {name: TruthIndex(load(truths[name])) for name in names}
            seed_runs = []
            for name in names:
                ri = [r for r in tis[name].records if isinstance(r, RunInfo)]
                prefix = f"sim-{name}-{ri[0].run_id}" if ri else f"sim-{name}"
                # a skip that ended after the analysed window (the lake is cut there) cannot be found
                end = windows[name][1]
                every = tis[name].faults()
                seed_runs.append(MatrixRun(name, seed, prefix,
                                           [f for f in every if not (f.kind == "skip" and f.end > end)],
                                           bounds=scoring.skip_bounds(tis[name], rules.skip_factor),
                                           outside=sum(f.end > end for f in scoring.skip_faults(every))))
            for mode in modes:
                got = analyse({n: (base / n / "lake", windows[n][1]) for n in names}, rules, timeouts,
                              commit_stream=mode == "stream", lag=False)
                for r in seed_runs:
                    mine = of_scenario(got, r.name, truths[r.name])
                    r.findings[mode] = [scoring.Finding.from_anomaly(a) for a in mine["anomalies"]]
                    r.reports[mode] = score(r.name, truths[r.name], mine, args.interval_s, rules, ti=tis[r.name],
                                            until=windows[r.name][1])
                print(f"seed {seed}: analysed ({mode})", file=sys.stderr, flush=True)
            runs += seed_runs
    load_end = os.getloadavg()
    titles = {"stream": "With the commit stream (sweeps + the `__consumer_offsets` tail)",
              "sweeps": "From sweeps alone (no commit stream)"}
    lines = [f"# skip matrix ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`"
             + ("" if args.reuse else " (broker: a local Kafka 4.4.0)"), "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {load_start[0]:.2f} at the start, "
             f"{load_end[0]:.2f} at the end; sweeps every {args.interval_s:g} s; seeds "
             f"{', '.join(str(s) for s in range(1, args.seeds + 1))}; scenarios {', '.join(names)}.", "",
             "A cell is a skip's mechanism, nominal size (the backlog its action waited for), spread (one partition "
             "or all four) and the consumer's state before it. Lost (truth): the messages the skip left unprocessed, "
             "exact, summed over its partitions (a backlog grows while the action waits: lagging and admin cells "
             "lose more than their nominal size). Partitions: those that lost messages, each a finding the truth calls "
             "for; found: with a `skip` finding on it whose time is within 2 sweep intervals + 1 s of the skip. "
             "Count error: |Σ magnitudes of the skip's findings − lost| / lost, per skip found. False skips: `skip` "
             "findings matching no skip (in the cell of the group's nearest skip). Delay: the first finding's start "
             "− the skip's start (≥ 0). Cause right: findings whose cause is the mechanism's (`seek`, `admin_reset`, "
             "`out_of_range_reset`). Offsets' evidence, per skip, from the truth's exact commits and log ends (the "
             "most any reader of offsets sees): `membership` (an admin reset, written while the group was empty: "
             "provable at any size); otherwise the consumer's pace, the largest rate over its saturated commit "
             "intervals before the skip (more than a commit's worth of progress still waiting at the end; not starved: "
             "no other partition of the same commit request advanced more than skip_factor × faster; for a seek the "
             "member's, the most it processed at once over one commit request on its partitions that stayed behind "
             "throughout, where one of them showed a pace, or one partition's pace if more; for an out-of-range "
             "reset the group's, summed over its partitions): `no pace` when none showed one (a "
             "caught-up consumer taking a burst in one commit looks the same), `within the bound` when the messages "
             f"lost are at most skip_factor ({rules.skip_factor:g}) × the pace × the jump's commit interval "
             "(consumption can explain them), `beyond the bound` (provable). Only the provable skips count towards "
             "recall."]
    for mode in modes:
        lines += ["", f"## {titles[mode]}", "", *matrix_lines(runs, mode, args.interval_s)]
    for mode in modes:
        reports = [r.reports[mode] for r in runs if mode in r.reports]
        figs = scoring.figures([r.scored for r in reports if r.scored is not None],
                               scoring.delay_budgets(rules, args.interval_s))
        lines += ["", f"Other findings of these runs ({titles[mode].lower()}), per kind: "
                  + "; ".join(f"{k.kind} expected {k.expected}, found {k.found}, findings {k.findings} "
                              f"({k.findings - k.true_findings} false)" for k in figs) + "."]
    outside = [f"{r.name}#{r.seed}: {r.outside}" for r in runs if r.outside]
    lines += ["", "Skips that ended after the analysed window (the lake is cut at the scenario's end), left out: "
              + (", ".join(outside) if outside else "none") + "."]
    lines += ["", "Notes (with the commit stream):" if "stream" in modes else "Notes:", ""]
    for r in runs:
        rep = r.reports.get(modes[0])
        for n in (rep.notes if rep is not None else []):
            lines.append(f"- {r.name}#{r.seed}: {n}")
    print("\n".join(lines))


def bench_rules() -> AnalyticsRulesConfig:
    """The rules the benchmark judges with. Second-scale scenarios: second-scale thresholds. The
    scenarios' members commit every 0.5 s; stall/stop after 10 commit intervals (5 s; the
    defaults, 60 s, are 12 intervals of the Java client's 5 s auto-commit), commit gaps from 2
    intervals (1 s; default 10 s)."""
    return AnalyticsRulesConfig(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0, gap_mad_floor_s=0.2, gap_k=4,
                                growth_min_minutes=5, warn_lag_s=5.0)


def main() -> None:
    from lagscope.devtools.sim.runner import builtin_scenarios

    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default=None,
                    help="comma-separated scenario names (default: every built-in one but the skip matrix's and "
                         "the commit-gap sweep's, " + ", ".join(GAP_SWEEP_SCENARIOS) + "; with --matrix: the "
                         "matrix's and its negatives)")
    ap.add_argument("--seeds", type=int, default=3, help="run each scenario with seeds 1 … N (default 3)")
    ap.add_argument("--interval-s", type=float, default=0.5)
    ap.add_argument("--bootstrap", default=os.environ.get("LAGSCOPE_TEST_BOOTSTRAP"))
    ap.add_argument("--keep", type=Path, help="keep each run's lake and truth under this folder")
    ap.add_argument("--reuse", type=Path, help="analyse the lakes and truth kept by an earlier --keep run "
                                               "instead of running the scenarios again")
    ap.add_argument("--matrix", action="store_true",
                    help="the skip matrix only (issue 28): " + ", ".join((*MATRIX_SCENARIOS, *MATRIX_NEGATIVES))
                         + "; per cell recall, count error, false skips, delay, with the commit stream and from "
                           "sweeps alone")
    ap.add_argument("--sweeps-only", action="store_true",
                    help="analyse without the commit stream (the __consumer_offsets tail's tables)")
    args = ap.parse_args()
    args.scenarios_given = args.scenarios is not None
    if args.scenarios is None:
        args.scenarios = ",".join(n for n in builtin_scenarios() if n not in (*MATRIX_SCENARIOS, *GAP_SWEEP_SCENARIOS))
    if not args.bootstrap and not args.reuse:
        sys.exit("give --bootstrap or LAGSCOPE_TEST_BOOTSTRAP (a running broker)")
    if args.seeds < 1:
        sys.exit("--seeds must be at least 1")
    names = [n for n in args.scenarios.split(",") if n]
    unknown = sorted(set(names) - set(builtin_scenarios()))
    if unknown:
        sys.exit(f"unknown scenario(s): {', '.join(unknown)}")
    rules = bench_rules()
    timeouts = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}
    if args.matrix:
        run_matrix(args, rules, timeouts)
        return
    reports = []
    with tempfile.TemporaryDirectory(prefix="lagscope-acc-") as tmp:
        root = args.reuse or args.keep or Path(tmp)
        for seed in range(1, args.seeds + 1):
            base = root / f"seed-{seed}"
            truths = seed_truths(args, names, base, seed)
            # one step per seed over that seed's lakes (a scenario's groups are found by its prefix)
            windows = {name: scenario_window(name, truths[name]) for name in names}
            got = analyse({n: (base / n / "lake", windows[n][1]) for n in names}, rules, timeouts,
                          commit_stream=not args.sweeps_only)
            for name in names:
                reports.append(score(name, truths[name], of_scenario(got, name, truths[name]), args.interval_s,
                                     rules, until=windows[name][1]))
                print(f"{name} seed {seed}: {len(reports[-1].notes)} notes", file=sys.stderr, flush=True)
    lines = [f"# analytics accuracy, end to end ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`"
             + ("" if args.reuse else " (broker: the shared local Kafka 4.4.0)"), "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
             f"sweeps every {args.interval_s:g} s, __consumer_offsets tail on.", ""]
    print("\n".join(lines + report_lines(reports, rules, args.interval_s)))


if __name__ == "__main__":
    main()
