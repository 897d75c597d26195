"""End-to-end accuracy: simulator → collector (sweeps + __consumer_offsets tail) → analytics,
compared with the simulator's ground truth, per scenario.

    LAGSCOPE_TEST_BOOTSTRAP=127.0.0.1:37779 .venv/bin/python benchmarks/analytics_accuracy.py \\
        --scenarios steady,idle-topic,crash,join,stall,rewind --interval-s 0.5

For each scenario: the collector sweeps every ``--interval-s`` into a fresh lake (only the
run's groups) while the scenario runs; then one analytics step runs over the lake, and

- lag in seconds per sweep row is compared with ``TruthIndex.time_lag_at`` (median and p99
  absolute error), beside kafka-lag-exporter's interpolation re-implemented here (a table of
  (end offset, time) points per partition, linear interpolation between the bracketing points,
  extrapolation from the first two points below the table, and its last point's time for an
  offset at the end);
- rebalance windows against ``TruthIndex.rebalances`` (found, duration error, cause);
- anomalies against the injected faults (precision/recall per kind);
- alarms (anomalies, non-OK/IDLE status rows) counted for the quiet scenarios.

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
from rebalance_accuracy import collect, first_settled, read_lakes, run_step

from lagscope.analytics import kernel
from lagscope.analytics import step as steps
from lagscope.analytics.arrays import key_code
from lagscope.analytics.job import Settings
from lagscope.analytics.params import RuleParams

CAUSES = {"crash": "session_timeout", "leave": "leave", "join": "join", "bounce": "static_member_bounce",
          "stop_polling": "max_poll_interval"}
QUIET = {"steady", "idle-topic", "burst-catchup"}
#: injected fault kind → anomaly kind (the other anomaly kinds are derived from the truth:
#: retention_loss, rebalance_storm, lag_growth; see truth_episodes)
ANOMALY_OF = {"stall": "stall", "stop": "stop", "rewind": "rewind", "skip": "skip", "commit_gap": "commit_gap"}


@dataclass(frozen=True)
class TruthEpisode:
    """Something the analytics should report: ``kind`` (an anomaly kind), group, interval."""

    kind: str
    group: str
    start: float
    end: float


def ti_t0(ti: Any) -> float:
    """The run's first record time (for relative times in notes)."""
    from lagscope.sim.truth import record_ts

    return min((record_ts(r) for r in ti.records), default=0.0)


def truth_episodes(ti: Any, groups: set[str], first_settled: dict[str, float], rules: RuleParams) -> list[TruthEpisode]:
    """Every anomaly the run's truth calls for.

    - stall, stop, rewind, skip, commit_gap: the injected faults of those kinds;
    - retention_loss: a group whose committed offset is below the log start at the end of
      the run (messages deleted unread; the truth has no time for it: the whole run);
    - rebalance_storm: ``storm_count`` or more rebalances (after the group first settled, as
      for the rebalance scoring) starting within ``storm_window_s``, from the first to the last;
    - lag_growth: ``growth_min_minutes`` or more consecutive whole minutes whose end lag
      (``TruthIndex.lag_at``) is above the previous minute's.
    """
    out = [TruthEpisode(ANOMALY_OF[f.kind], f.group, f.start, f.end) for f in ti.faults() if f.kind in ANOMALY_OF]
    t0 = ti_t0(ti)
    es = ti.end_state
    t_end = es.ts if es is not None else t0
    if es is not None:
        for g in sorted({c.group for c in es.committed}):
            lost = [(tp, o) for tp, o in es.committed_of(g).items() if o < es.end_of(*tp).log_start]
            if lost:
                out.append(TruthEpisode("retention_loss", g, t0, t_end))
    for g in sorted(groups):
        rbs = [r for r in ti.rebalances(g) if r.start > first_settled.get(g, float("inf"))]
        stormy = [r for i, r in enumerate(rbs)
                  if sum(1 for q in rbs[: i + 1] if q.start >= r.start - rules.storm_window_s) >= rules.storm_count]
        if stormy:
            first = min(q.start for q in rbs if q.start >= stormy[0].start - rules.storm_window_s)
            out.append(TruthEpisode("rebalance_storm", g, first, max(r.end for r in stormy)))
    parts = {(c.group, c.topic, c.partition) for c in (es.committed if es is not None else ())}
    for g, topic, p in sorted(parts):
        run: list[float] = []
        m = (int(t0) // 60 + 1) * 60
        prev = ti.lag_at(g, topic, p, m)
        while m + 60 <= t_end:
            cur = ti.lag_at(g, topic, p, m + 60)
            if prev is not None and cur is not None and cur > prev:
                run.append(m)
            else:
                if len(run) >= rules.growth_min_minutes:
                    out.append(TruthEpisode("lag_growth", g, run[0], run[-1] + 60))
                run = []
            prev, m = cur, m + 60
        if len(run) >= rules.growth_min_minutes:
            out.append(TruthEpisode("lag_growth", g, run[0], run[-1] + 60))
    return out


@dataclass
class ScenarioReport:
    name: str
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
    #: kind → (tp, fp, fn): anomalies that match an injected fault, anomalies that match none,
    #: faults no anomaly matches
    anomalies: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    #: kind → (faults found, faults injected)
    faults: dict[str, tuple[int, int]] = field(default_factory=dict)
    alarms: int = 0
    notes: list[str] = field(default_factory=list)


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
    from lagscope.sim.runner import load_scenario
    from lagscope.sim.truth import Produce, load

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


def analyse(lakes: dict[str, tuple[Path, float]], rules: RuleParams, timeouts: dict[str, float]) -> dict[str, Any]:
    """One analytics step over every scenario's lake at once (their groups are distinct), each
    cut at its scenario's end (``lakes``: name → (lake, end epoch s))."""
    tables = read_lakes(list(lakes.values()))
    has_tail = tables["commits"] is not None and tables["group_events"] is not None
    settings = Settings(rules=rules, **timeouts)
    step = run_step(tables, commit_stream=has_tail, settings=settings)
    offsets, members = tables["offsets"], tables["members"]
    assert offsets is not None
    assert members is not None
    lag_rows = sweep_lag_seconds(offsets).to_pylist()
    status = step.tables["status"]
    status_rows = status.filter(status.column("partition").is_valid()).to_pylist()
    return {
        "first_settled": first_settled(members),
        "lag": lag_rows,
        "rebalances": step.tables["rebalances"].to_pylist(),
        "anomalies": step.tables["anomalies"].to_pylist(),
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


def of_scenario(got: dict[str, Any], name: str) -> dict[str, Any]:
    """The rows of one scenario's groups (``sim-<scenario>-<run id>-<group>``)."""
    mine = f"sim-{name}-"
    return {k: ({g: t for g, t in v.items() if g.startswith(mine)} if isinstance(v, dict)
                else [r for r in v if r["group_id"].startswith(mine)] if isinstance(v, list) else v)
            for k, v in got.items()}


def score(name: str, truth_path: Path, got: dict[str, Any], interval_s: float, rules: RuleParams) -> ScenarioReport:
    from lagscope.sim.truth import TruthIndex, load

    ti = TruthIndex(load(truth_path))
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
            want = CAUSES.get(tr.cause.kind) if tr.cause else None
            if want is None or want == best["cause"]:
                rep.causes_right += 1
            else:
                rep.notes.append(f"cause {best['cause']} for a {tr.cause.kind if tr.cause else 'no'} fault")
        rep.source = ",".join(sorted({r["source"] for r in ours})) or "-"
    rep.duration_err_max = max(derr) if derr else float("nan")
    # anomalies: a truth episode matches an anomaly of its kind in the same group overlapping
    # in time (± 2 sweep intervals + 1 s)
    truths = truth_episodes(ti, groups, got["first_settled"], rules)
    run_t0 = ti_t0(ti)
    slack = 2 * interval_s + 1
    kinds = {t.kind for t in truths} | {a["kind"] for a in got["anomalies"]}
    for kind in sorted(kinds):
        fs = [t for t in truths if t.kind == kind]
        an = [a for a in got["anomalies"] if a["kind"] == kind]

        def hit(f: TruthEpisode, a: dict[str, Any], slack: float = slack) -> bool:
            a0 = a["start_ts"].timestamp()
            a1 = a["end_ts"].timestamp() if a["end_ts"] else float("inf")
            return bool(a["group_id"] == f.group and a0 <= max(f.end, f.start) + slack and a1 >= f.start - slack)

        tp = [a for a in an if any(hit(f, a) for f in fs)]
        found = sum(1 for f in fs if any(hit(f, a) for a in an))
        rep.anomalies[kind] = (len(tp), len(an) - len(tp), len(fs) - found)
        rep.faults[kind] = (found, len(fs))
        for a in an:
            if not any(a is b for b in tp):
                where = f"{a['topic']}:{a['partition']}" if a["partition"] is not None else "group"
                rep.notes.append(f"false {kind} {where} at +{a['start_ts'].timestamp() - run_t0:.1f} s "
                                 f"({a['detail']})")
        for f in fs:
            if not any(hit(f, a) for a in an):
                rep.notes.append(f"missed {kind} at +{f.start - run_t0:.1f} s")
    alarming = [s for s in got["status"] if s["status"] not in ("OK", "IDLE")]
    rep.alarms = len(got["anomalies"]) + len(alarming)
    if name in QUIET:
        for st in alarming:
            rep.notes.append(f"alarm: status {st['status']} {st['topic']}:{st['partition']} "
                             f"at +{st['eval_ts'].timestamp() - run_t0:.1f} s ({st['reason']})")
    rep.sweeps = len({r["t"] for r in got["lag"]})
    rep.notes += [n["note"] for n in got["minute_check"]]
    return rep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="steady,idle-topic,burst-catchup,crash,join,graceful-leave,stall,rewind")
    ap.add_argument("--interval-s", type=float, default=0.5)
    ap.add_argument("--bootstrap", default=os.environ.get("LAGSCOPE_TEST_BOOTSTRAP"))
    ap.add_argument("--keep", type=Path, help="keep each scenario's lake and truth under this folder")
    ap.add_argument("--reuse", type=Path, help="analyse the lakes and truth kept by an earlier --keep run "
                                               "instead of running the scenarios again")
    args = ap.parse_args()
    if not args.bootstrap and not args.reuse:
        sys.exit("give --bootstrap or LAGSCOPE_TEST_BOOTSTRAP (a running broker)")
    # second-scale scenarios: second-scale thresholds. The scenarios' members commit every
    # 0.5 s; stall/stop after 10 commit intervals (5 s; the defaults, 60 s, are 12 intervals of
    # the Java client's 5 s auto-commit), commit gaps from 2 intervals (1 s; default 10 s).
    rules = RuleParams(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0, gap_mad_floor_s=0.2, gap_k=4,
                       growth_min_minutes=5, warn_lag_s=5.0)
    timeouts = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}
    reports = []
    with tempfile.TemporaryDirectory(prefix="lagscope-acc-") as tmp:
        base = args.reuse or args.keep or Path(tmp)
        names = args.scenarios.split(",")
        truths: dict[str, Path] = {}
        for name in names:
            truths[name] = base / name / "out" / "truth.jsonl"
            if not args.reuse:
                truths[name] = collect(name, args.bootstrap, base / name, args.interval_s).truth_path
                print(f"{name}: collected", file=sys.stderr, flush=True)
            elif not truths[name].exists():
                sys.exit(f"--reuse {args.reuse}: no kept run of {name} ({truths[name]} missing)")
        windows = {name: scenario_window(name, truths[name]) for name in names}
        got = analyse({n: (base / n / "lake", windows[n][1]) for n in names}, rules, timeouts)
        for name in names:
            reports.append(score(name, truths[name], of_scenario(got, name), args.interval_s, rules))
            print(f"{name}: {reports[-1]}", file=sys.stderr, flush=True)
    lines = [f"# analytics accuracy, end to end ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`"
             + ("" if args.reuse else " (broker: the shared local Kafka 4.4.0)"), "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
             f"sweeps every {args.interval_s:g} s, __consumer_offsets tail on.", "",
             "| scenario | sweeps | lag rows | lag s MedAE | lag s p99 | KLE MedAE | KLE p99 | lower bounds | "
             "rebalances found/truth | max duration err s | causes right | source | anomalies (kind: tp/fp/fn) | "
             "alarms |", "|---|" + "---:|" * 13]
    for r in reports:
        an = "; ".join(f"{k}: {tp}/{fp}/{fn}" for k, (tp, fp, fn) in r.anomalies.items()) or "-"
        lines.append(f"| {r.name} | {r.sweeps} | {r.lag_rows} | {r.lag_mae:.2f} | {r.lag_p99:.2f} | {r.kle_mae:.2f} | "
                     f"{r.kle_p99:.2f} | {r.lower_bounds} | {r.rebalances_found}/{r.rebalances_truth} | "
                     f"{'–' if math.isnan(r.duration_err_max) else f'{r.duration_err_max:.2f}'} | "
                     f"{r.causes_right} | {r.source} | {an} | "
                     f"{r.alarms if r.name in QUIET else '-'} |")
    lines += ["", "Anomalies per kind over all scenarios (tp: anomalies matching an injected fault; fp: "
              "anomalies matching none; recall: faults found / faults injected):", "",
              "| kind | faults injected | faults found | anomalies | tp | fp | precision | recall |",
              "|---|" + "---:|" * 7]
    kinds = sorted({k for r in reports for k in r.anomalies})
    for k in kinds:
        tp = sum(r.anomalies[k][0] for r in reports if k in r.anomalies)
        fp = sum(r.anomalies[k][1] for r in reports if k in r.anomalies)
        found = sum(r.faults[k][0] for r in reports if k in r.faults)
        total = sum(r.faults[k][1] for r in reports if k in r.faults)
        prec = f"{tp / (tp + fp):.2f}" if tp + fp else "–"
        rec = f"{found / total:.2f}" if total else "–"
        lines.append(f"| {k} | {total} | {found} | {tp + fp} | {tp} | {fp} | {prec} | {rec} |")
    quiet = [r for r in reports if r.name in QUIET]
    lines += ["", "Alarms (anomalies + status rows other than OK/IDLE) in the quiet scenarios: "
              + (", ".join(f"{r.name} {r.alarms}" for r in quiet) or "none run") + ".", ""]
    for r in reports:
        for n in r.notes:
            lines.append(f"- {r.name}: {n}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
