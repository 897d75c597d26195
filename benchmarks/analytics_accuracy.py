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

Prints a Markdown report (redirect it to benchmarks/results/analytics_accuracy.md).
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import os
import platform
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812

from lagscope.analytics.findings import RuleParams
from lagscope.analytics.io import read_lake
from lagscope.analytics.job import Settings, run_step
from lagscope.analytics.rebalances import member_sweeps
from lagscope.analytics.series import enrich_series, prepare_series
from lagscope.analytics.session import build_session
from lagscope.analytics.trends import transform_lag_seconds

CAUSES = {"crash": "session_timeout", "leave": "leave", "join": "join", "bounce": "static_member_bounce",
          "stop_polling": "max_poll_interval"}
QUIET = {"steady", "idle-topic", "burst-catchup"}
#: injected fault kind → anomaly kind
ANOMALY_OF = {"stall": "stall", "stop": "stop", "rewind": "rewind", "skip": "skip", "commit_gap": "commit_gap"}


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
    anomalies: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # kind → (tp, fp, fn)
    alarms: int = 0
    notes: list[str] = field(default_factory=list)


def collect_during(scenario: str, bootstrap: str, lake: Path, out: Path, interval_s: float) -> Any:
    """Run ``scenario`` while a collector sweeps its groups into ``lake``; returns the RunResult."""
    from lagscope.collector.loop import Collector
    from lagscope.config import Settings as LagscopeSettings
    from lagscope.sim.runner import start_scenario

    run_id = uuid.uuid4().hex[:6]
    settings = LagscopeSettings(**{
        "clusters": [{"name": "sim", "bootstrap_servers": [bootstrap],
                      "groups": {"include": [f"sim-{scenario}-{run_id}.*"]},
                      "consumer_offsets_tail": {"enabled": True, "start": "latest"}}],
        "collector": {"interval_s": interval_s, "lake": str(lake), "compaction": {"enabled": False}},
        "metrics": {"enabled": False},
    })
    collector = Collector(settings, metrics=False)
    stop = threading.Event()
    th = threading.Thread(target=collector.run, args=(stop,), daemon=True)
    th.start()
    try:
        run = start_scenario(scenario, bootstrap, out, run_id=run_id)
        result = run.wait()
        time.sleep(2 * interval_s)
    finally:
        stop.set()
        th.join(timeout=60)
    return result


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


def analyse(spark: SparkSession, lake: Path, rules: RuleParams, timeouts: dict[str, float]) -> dict[str, Any]:
    day = dt.datetime.now(dt.UTC).date()
    since, until = day - dt.timedelta(days=1), day + dt.timedelta(days=1)
    tables = {n: read_lake(spark, lake, n, since=since, until=until)
              for n in ("offsets", "members", "commits", "group_events")}
    has_tail = (lake / "commits").exists() and (lake / "group_events").exists()
    settings = Settings(rules=rules, **timeouts)
    step = run_step(tables["offsets"], tables["members"], settings=settings,
                    commits=tables["commits"] if has_tail else None,
                    group_events=tables["group_events"] if has_tail else None)
    rows = transform_lag_seconds(enrich_series(prepare_series(tables["offsets"])))
    lag_rows = rows.select("group_id", "topic", "partition", "t", "committed", "end", "lag_s", "lag_s_lower").toArrow()
    settled = member_sweeps(tables["members"]).where("settled").groupBy("group_id").agg(F.min("t").alias("t"))
    return {
        "first_settled": {r["group_id"]: r["t"] for r in settled.collect()},
        "lag": lag_rows.to_pylist(),
        "rebalances": step.tables["rebalances"].toArrow().to_pylist(),
        "anomalies": step.tables["anomalies"].toArrow().to_pylist(),
        "status": step.tables["status"].where(F.col("partition").isNotNull()).toArrow().to_pylist(),
        "has_tail": has_tail,
    }


def score(name: str, result: Any, got: dict[str, Any], interval_s: float) -> ScenarioReport:
    from lagscope.sim.truth import TruthIndex, load

    ti = TruthIndex(load(result.truth_path))
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
    # anomalies: a fault matches an anomaly of its kind in the same group overlapping in time (±2 intervals)
    faults = [f for f in ti.faults() if f.kind in ANOMALY_OF]
    kinds = {ANOMALY_OF[f.kind] for f in faults} | {a["kind"] for a in got["anomalies"]}
    for kind in sorted(kinds):
        fs = [f for f in faults if ANOMALY_OF[f.kind] == kind]
        an = [a for a in got["anomalies"] if a["kind"] == kind]
        slack = 2 * interval_s + 1

        def hit(f: Any, a: dict[str, Any], slack: float = slack) -> bool:
            a0 = a["start_ts"].timestamp()
            a1 = a["end_ts"].timestamp() if a["end_ts"] else float("inf")
            return bool(a["group_id"] == f.group and a0 <= max(f.end, f.start) + slack and a1 >= f.start - slack)

        tp = sum(1 for a in an if any(hit(f, a) for f in fs))
        fn = sum(1 for f in fs if not any(hit(f, a) for a in an))
        rep.anomalies[kind] = (tp, len(an) - tp, fn)
    rep.alarms = len(got["anomalies"]) + sum(1 for s in got["status"] if s["status"] not in ("OK", "IDLE"))
    rep.sweeps = len({r["t"] for r in got["lag"]})
    return rep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="steady,idle-topic,burst-catchup,crash,join,graceful-leave,stall,rewind")
    ap.add_argument("--interval-s", type=float, default=0.5)
    ap.add_argument("--bootstrap", default=os.environ.get("LAGSCOPE_TEST_BOOTSTRAP"))
    args = ap.parse_args()
    if not args.bootstrap:
        sys.exit("give --bootstrap or LAGSCOPE_TEST_BOOTSTRAP (a running broker)")
    # second-scale scenarios: second-scale thresholds
    rules = RuleParams(stall_after_s=2.0, stop_after_s=2.0, gap_min_s=0.9, gap_mad_floor_s=0.2, gap_k=4,
                       growth_min_minutes=5, warn_lag_s=5.0)
    timeouts = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}
    spark = build_session("local[2]", shuffle_partitions=2, driver_memory="1g")
    reports = []
    try:
        with tempfile.TemporaryDirectory(prefix="lagscope-acc-") as tmp:
            for name in args.scenarios.split(","):
                lake, out = Path(tmp) / name / "lake", Path(tmp) / name / "out"
                result = collect_during(name, args.bootstrap, lake, out, args.interval_s)
                got = analyse(spark, lake, rules, timeouts)
                reports.append(score(name, result, got, args.interval_s))
                print(f"{name}: {reports[-1]}", file=sys.stderr, flush=True)
    finally:
        spark.stop()
    lines = [f"# analytics accuracy, end to end ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}` (broker: the shared local Kafka 4.4.0)", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
             f"sweeps every {args.interval_s:g} s, __consumer_offsets tail on.", "",
             "| scenario | sweeps | lag rows | lag s MedAE | lag s p99 | KLE MedAE | KLE p99 | lower bounds | "
             "rebalances found/truth | max duration err s | causes right | source | anomalies (kind: tp/fp/fn) | "
             "alarms |", "|---|" + "---:|" * 13]
    for r in reports:
        an = "; ".join(f"{k}: {tp}/{fp}/{fn}" for k, (tp, fp, fn) in r.anomalies.items()) or "-"
        lines.append(f"| {r.name} | {r.sweeps} | {r.lag_rows} | {r.lag_mae:.2f} | {r.lag_p99:.2f} | {r.kle_mae:.2f} | "
                     f"{r.kle_p99:.2f} | {r.lower_bounds} | {r.rebalances_found}/{r.rebalances_truth} | "
                     f"{r.duration_err_max:.2f} | {r.causes_right} | {r.source} | {an} | "
                     f"{r.alarms if r.name in QUIET else '-'} |")
    for r in reports:
        for n in r.notes:
            lines.append(f"- {r.name}: {n}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
