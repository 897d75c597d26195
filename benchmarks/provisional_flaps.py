"""Provisional-alert flapping (issue 25): how often an alert fires on a provisional finding that
the full step does not confirm, replayed over the lakes kept by ``analytics_accuracy.py --keep``.

    .venv/bin/python benchmarks/provisional_flaps.py --reuse /tmp/acc3/runs --seeds 3 --every-s 1.5

``lagscope run`` runs, every analytics interval, the incremental step over the minutes that have
ended (state carried from one to the next) and then a provisional step over the minute in
progress, from the checkpoint to one collector interval before now, with the checkpoint's state
and no state written (deploy/run.py ``AnalyticsLoop.step``); its rows are shown until the full
step of that minute replaces them. This replays each kept lake (one scenario and seed, cut at the
scenario's end) as that loop would: a loop iteration every
``--every-s`` (default 1.5 s: the demo's 3 s analytics interval over its 1 s sweeps, scaled to
these 0.5-s sweeps), full steps per UTC minute, provisional steps over ``[checkpoint, now −
settle)`` (``--settle-s``, one sweep interval). One :func:`lagscope.analytics.step.run_step` per
step, no Spark.

The alerts are the findings :mod:`alerts.findings` makes of the visible rows: an anomaly's key
(kind, group, topic, partition, start), a rebalance window's (group, start), the group status's
(group, status: WARN/REWIND warning, STALL/STOP/ERR critical) of the full steps only (the alerts
read no provisional status; ``--status-from-provisional``: as they did before, from every step).
A **flap** is a key that a provisional step made fire (the alerting would send it) and that no
full step reports: once the full step replaces the provisional rows the key is gone and the alert resolves. Split into
*retracted* (no full step has a finding of that kind on that group, topic and partition, or that
status of the group) and *re-keyed* (the full step has it, under another start: the alert
resolves and fires again under the new key). Rates per hour of replayed traffic (the scenarios'
durations).
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import math
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from analytics_accuracy import scenario_window
from rebalance_accuracy import TIME_COLUMN, read_lakes

from lagscope.alerts.findings import Finding, findings_from_anomalies, findings_from_rebalances, findings_from_status
from lagscope.analytics import step as steps
from lagscope.analytics.job import COMMIT_LOOKBACK
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.devtools.sim.runner import builtin_scenarios

RULES = AnalyticsRulesConfig(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0, gap_mad_floor_s=0.2, gap_k=4,
                             growth_min_minutes=5, warn_lag_s=5.0)
TIMEOUTS = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}


def _ts(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


def cut(tables: dict[str, pa.Table | None], start: float, until: float) -> steps.StepInputs:
    """The rows a step over ``[start, until)`` reads (job.py: the commits from ``COMMIT_LOOKBACK``
    before, the generation records all those written by then)."""
    out: dict[str, pa.Table | None] = {}
    for name, tbl in tables.items():
        if tbl is None:
            out[name] = None
            continue
        col = tbl.column(TIME_COLUMN[name])
        hi = pc.less(col, pa.scalar(_ts(until), col.type))
        if name == "group_events":
            keep = hi
        else:
            lo_t = start - COMMIT_LOOKBACK.total_seconds() if name == "commits" else start
            keep = pc.and_(pc.greater_equal(col, pa.scalar(_ts(lo_t), col.type)), hi)
        out[name] = tbl.filter(keep)
    offsets, members = out["offsets"], out["members"]
    assert offsets is not None
    assert members is not None
    return steps.StepInputs(offsets=offsets, members=members, commits=out["commits"],
                            group_events=out["group_events"], state={})


def alerts_of(tables: dict[str, pa.Table], now: dt.datetime, *, status: bool = True) -> list[Finding]:
    """The findings :func:`alerts.findings.findings_from_results` makes of one step's tables
    (``status=False``: a provisional step's, whose group status the alerts do not read)."""
    rows = tables["status"].to_pylist() if status else []
    return [*findings_from_anomalies(tables["anomalies"].to_pylist()),
            *findings_from_rebalances(tables["rebalances"].to_pylist(), now),
            *findings_from_status([r for r in rows if r.get("topic") is None and r.get("partition") is None])]


def _where(f: Finding) -> tuple[Any, ...]:
    """What a finding is about, without its start: kind (status: the status), group, topic, partition."""
    what = f.labels.get("status") if f.source == "status" else f.kind
    return (f.source, what, f.cluster, f.group, f.topic, f.partition)


@dataclass
class Flap:
    seed: int
    scenario: str
    finding: Finding
    at: float  # when the provisional step first showed it (epoch s)
    how: str  # retracted | re-keyed


@dataclass
class Replay:
    provisional_steps: int = 0
    full_steps: int = 0
    flaps: list[Flap] = field(default_factory=list)
    fired: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    #: per anomaly kind confirmed by a full step: when a step (provisional or full) first showed
    #: it, after its start (s): how long the finding took to be published
    shown_after: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))


def replay(seed: int, lakes: dict[str, tuple[Path, float]], every_s: float, settle_s: float,
           settings: AnalyticsConfig, rep: Replay, status_provisional: bool = False) -> None:
    tables = read_lakes(list(lakes.values()))
    sweeps = tables["offsets"]
    assert sweeps is not None
    t = pc.min_max(sweeps.column("sweep_ts"))
    t_lo, t_hi = t["min"].as_py().timestamp(), t["max"].as_py().timestamp()
    checkpoint = math.floor(t_lo / 60) * 60
    state: dict[str, pa.Table] = {}
    full_keys: set[str] = set()
    full_where: set[tuple[Any, ...]] = set()
    shown: dict[str, tuple[Finding, float]] = {}  # provisional keys → (finding, first shown)
    first: dict[str, tuple[Finding, float]] = {}  # every step's keys → (finding, first shown)
    now = t_lo + every_s
    while checkpoint < t_hi:
        while checkpoint + 60 <= now:  # the incremental step: every minute that has ended
            inp = cut(tables, checkpoint, checkpoint + 60)
            inp.state = state
            out = steps.run_step(inp, settings=settings, as_of=_ts(checkpoint + 60), with_state=True)
            state = out.state
            for f in alerts_of(out.tables, _ts(checkpoint + 60)):
                full_keys.add(f.key)
                first.setdefault(f.key, (f, now))
                full_where.add(_where(f))
            # the full step also reports every group-level status of the minute, not only the last
            st = out.tables["status"]
            for r in st.filter(pc.invert(st.column("topic").is_valid())).to_pylist():
                full_where.add(("status", r.get("status"), r["cluster"], r["group_id"], None, None))
            rep.full_steps += 1
            checkpoint += 60
        until = min(now - settle_s, t_hi + 1e-3)
        if until > checkpoint and now - settle_s <= t_hi + every_s:
            inp = cut(tables, checkpoint, until)
            inp.state = state
            out = steps.run_step(inp, settings=settings, as_of=_ts(until), with_state=False,
                                 partial_from=_ts(until))
            rep.provisional_steps += 1
            for f in alerts_of(out.tables, _ts(until), status=status_provisional):
                first.setdefault(f.key, (f, now))
                if f.key not in shown and f.key not in full_keys:
                    shown[f.key] = (f, now)
        now += every_s
    for key, (f, at) in first.items():
        if key in full_keys and f.source == "anomalies":
            rep.shown_after[f.kind].append(at - f.starts_at.timestamp())
    for key, (f, at) in shown.items():
        scenario = next((n for n in lakes if f.group.startswith(f"sim-{n}-")), "?")
        rep.fired[(f.source if f.source != "anomalies" else f.kind, f.severity)] += 1
        if key in full_keys:
            continue
        rep.flaps.append(Flap(seed, scenario, f, at, "re-keyed" if _where(f) in full_where else "retracted"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reuse", type=Path, required=True, help="the folder analytics_accuracy.py --keep wrote")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--scenarios", default="", help="comma-separated (default: every one kept)")
    ap.add_argument("--every-s", type=float, default=1.5, help="the analytics loop's interval (s)")
    ap.add_argument("--settle-s", type=float, default=0.5, help="a provisional step ends this long before now")
    ap.add_argument("--status-from-provisional", action="store_true",
                    help="alert on a provisional step's group status too (the alerts before they read full steps only)")
    args = ap.parse_args()
    settings = AnalyticsConfig(rules=RULES, **TIMEOUTS)
    rep = Replay()
    traffic_s = 0.0
    for seed in range(1, args.seeds + 1):
        base = args.reuse / f"seed-{seed}"
        names = [n for n in (args.scenarios.split(",") if args.scenarios else sorted(builtin_scenarios()))
                 if (base / n / "lake").is_dir()]
        for n in names:  # one scenario at a time (its groups are its own): steps over its span only
            start, end = scenario_window(n, base / n / "out" / "truth.jsonl")
            traffic_s += end - start
            replay(seed, {n: (base / n / "lake", end)}, args.every_s, args.settle_s, settings, rep,
                   args.status_from_provisional)
        print(f"seed {seed}: {rep.provisional_steps} provisional and {rep.full_steps} full steps so far, "
              f"{len(rep.flaps)} flaps", file=sys.stderr, flush=True)
    hours = traffic_s / 3600
    print(f"# provisional-alert flapping ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)\n")
    print(f"Command: `{' '.join(['.venv/bin/python', *sys.argv])}`\n")
    print(f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"{rep.provisional_steps} provisional and {rep.full_steps} full steps over {traffic_s / 60:.1f} min "
          f"of scenario traffic ({args.seeds} seeds); a loop iteration every {args.every_s:g} s.\n")
    print("| finding | severity | keys a provisional step showed first | flaps | retracted | re-keyed | flaps/h |")
    print("|---|---|---:|---:|---:|---:|---:|")
    kinds = sorted(set(rep.fired) | {(fl.finding.source if fl.finding.source != "anomalies" else fl.finding.kind,
                                      fl.finding.severity) for fl in rep.flaps})
    for kind, sev in kinds:
        mine = [fl for fl in rep.flaps if (fl.finding.source if fl.finding.source != "anomalies"
                                           else fl.finding.kind, fl.finding.severity) == (kind, sev)]
        print(f"| {kind} | {sev} | {rep.fired[(kind, sev)]} | {len(mine)} | "
              f"{sum(fl.how == 'retracted' for fl in mine)} | {sum(fl.how == 're-keyed' for fl in mine)} | "
              f"{len(mine) / hours:.1f} |")
    print()
    print("When each anomaly a full step confirmed was first shown (by a provisional or a full step), "
          "after its start:\n")
    print("| kind | findings | p50 s | p95 s | max s |")
    print("|---|---:|---:|---:|---:|")
    for kind, xs in sorted(rep.shown_after.items()):
        q = sorted(xs)
        print(f"| {kind} | {len(q)} | {q[len(q) // 2]:.1f} | {q[min(len(q) - 1, math.ceil(0.95 * len(q)) - 1)]:.1f} | "
              f"{q[-1]:.1f} |")
    print()
    for fl in rep.flaps:
        print(f"- {fl.scenario}#{fl.seed}: {fl.how} {fl.finding.severity} {fl.finding.key} "
              f"(shown at {_ts(fl.at):%H:%M:%S.%f}"[:-3] + f"): {fl.finding.detail}")


if __name__ == "__main__":
    main()
