"""Rebalance windows end to end: simulator → collector (sweeps + ``__consumer_offsets`` tail) →
one analytics step → compared with the simulator's ground truth (``TruthIndex.rebalances``).

    LAGSCOPE_TEST_BOOTSTRAP=127.0.0.1:37779 .venv/bin/python benchmarks/rebalance_accuracy.py \\
        --scenarios crash,join,graceful-leave,static-bounce,poll-timeout,rebalance-storm

Each scenario runs while a collector sweeps its groups every ``--interval-s`` into its own lake;
then one analytics step runs over all the lakes twice: with the commit stream (``commits`` and
``group_events``) and without it (sweeps only). Per scenario and mode:

- the truth's rebalances that start after the group first settled (its formation is not a
  window) and before the scenario's end (members closing are teardown);
- found: a window of the same group starting within max(5 s, 4 sweeps) of the truth's start
  (each window matches one rebalance);
- duration error |window − truth| (targets: ≤ 1 s with the commit stream, ≤ one sweep
  interval without), cause right (a truth rebalance without a membership fault accepts any
  cause), the windows' ``source``.

The step is the engine's own (:func:`lagscope.analytics.step.run_step`, what each Spark task of a
step runs over its bucket of groups), here over all the scenarios' groups at once, in this
process: the lakes are read with pyarrow (:func:`read_lakes`, the columns and files a Spark step
reads) and no Spark session is started. Until the one-engine change (issue 20) this harness
called the Spark-SQL step (``job.run_step`` on DataFrames, ``rebalances.member_sweeps``); the
windows come from the same rules (now :mod:`lagscope.analytics.groups`), so the figures of one
collection (``--reuse``) compare with the earlier reports. A group's first settled sweep comes
from :func:`lagscope.analytics.groups.member_sweeps`.

Prints a Markdown report (benchmarks/results/rebalance_accuracy.md).
"""

from __future__ import annotations

import argparse
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

import pyarrow as pa
import pyarrow.compute as pc

from lagscope.analytics import groups
from lagscope.analytics import step as steps
from lagscope.analytics.io import spark_arrow_schema
from lagscope.analytics.job import LAKE_TABLES
from lagscope.config import AnalyticsConfig
from lagscope.devtools.sim.model import Scenario as SimScenario
from lagscope.lake import list_files

#: injected fault kind → the cause the window must give
CAUSES = {"crash": "session_timeout", "leave": "leave", "join": "join", "bounce": "static_member_bounce",
          "stop_polling": "max_poll_interval"}


def window_causes(fault: Any) -> tuple[str, ...]:
    """The causes a window after an injected ``fault`` (a truth ``Fault``) may give (none: any):
    :data:`CAUSES`, but a dynamic member's bounce (a restart: its close sends a LeaveGroup, it
    rejoins as a new member) is a leave and then a join, or both in one window (``join``)."""
    if fault.kind == "bounce" and not fault.detail.get("static", True):
        return ("leave", "join")
    return (CAUSES[fault.kind],) if fault.kind in CAUSES else ()
#: the fallback timeouts (the scenarios' own are in the group-metadata records)
DEFAULTS = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}


@dataclass
class Scenario:
    name: str
    lake: Path
    truth_path: Path
    end: float  # epoch s: the scenario's end (t0 + duration)


@dataclass
class Report:
    name: str
    mode: str
    truth: int = 0
    found: int = 0
    causes_right: int = 0
    duration_errors: list[float] = field(default_factory=list)
    sources: set[str] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)

    @property
    def max_error(self) -> float:
        return max(self.duration_errors, default=float("nan"))


def collect(scenario: str | SimScenario, bootstrap: str, root: Path, interval_s: float,
            seed: int | None = None, linger_s: float = 0.0) -> Scenario:
    """Run ``scenario`` (a built-in one's name, or a scenario model: e.g. one with changed
    settings; drawn with ``seed``, default: the scenario's own) while a collector (tail on, from
    the latest offset) sweeps its groups into ``root/lake``. ``linger_s``: the members go on
    consuming this long after the schedule ends (the sweeps see the group settle after a
    rebalance that ends near the schedule's end)."""
    from lagscope.collector.loop import Collector
    from lagscope.config import Settings as LagscopeSettings
    from lagscope.devtools.sim.runner import start_scenario

    name = scenario if isinstance(scenario, str) else scenario.name

    run_id = uuid.uuid4().hex[:6]
    lake = root / "lake"
    settings = LagscopeSettings(**{
        "clusters": [{"name": "sim", "bootstrap_servers": [bootstrap],
                      "groups": {"include": [f"sim-{name}-{run_id}.*"]},
                      "consumer_offsets_tail": {"enabled": True, "start": "latest"}}],
        "collector": {"interval_s": interval_s, "lake": str(lake), "compaction": {"enabled": False}},
        "metrics": {"enabled": False},
    })
    collector = Collector(settings, metrics=False)
    stop = threading.Event()
    th = threading.Thread(target=collector.run, args=(stop,), daemon=True)
    th.start()
    try:
        result = start_scenario(scenario, bootstrap, root / "out", run_id=run_id, seed=seed,
                                linger_s=linger_s).wait()
        time.sleep(2 * interval_s)
    finally:
        stop.set()
        th.join(timeout=60)
    return Scenario(name, lake, result.truth_path, result.t0 + result.scenario.duration)


def reuse(name: str, root: Path) -> Scenario:
    """A scenario collected before into ``root`` (``lake/``, ``out/truth.jsonl``)."""
    from lagscope.devtools.sim.runner import load_scenario
    from lagscope.devtools.sim.truth import Produce, load

    truth = root / "out" / "truth.jsonl"
    t0 = min((r.ts for r in load(truth) if isinstance(r, Produce)), default=0.0)
    return Scenario(name, root / "lake", truth, t0 + load_scenario(name).duration)


#: each lake table's time column (a scenario's rows are cut at its end by it)
TIME_COLUMN = {"offsets": "sweep_ts", "members": "sweep_ts", "commits": "record_ts", "group_events": "record_ts"}


def _days(lake: Path) -> tuple[dt.date, dt.date] | None:
    """The first and last date partition of ``lake``'s tables (a kept collection may be days old)."""
    days = sorted({d.name.removeprefix("date=") for d in lake.glob("*/cluster=*/date=*")})
    if not days:
        return None
    return dt.date.fromisoformat(days[0]), dt.date.fromisoformat(days[-1])


def read_lakes(lakes: list[tuple[Path, float | None]]) -> dict[str, pa.Table | None]:
    """Every lake table of ``lakes`` (their groups distinct) read with pyarrow as a Spark step
    reads them (:func:`lagscope.analytics.step.read_files`: the live files, the step's columns),
    each lake's rows cut at its end (epoch s; ``None``: all), put together; a commit-stream table
    no lake has is ``None``."""
    out: dict[str, pa.Table | None] = {}
    for name in LAKE_TABLES:
        parts = []
        for lake, end in lakes:
            days = _days(lake)
            if days is None or not (name in ("offsets", "members") or (lake / name).is_dir()):
                continue
            cut = None
            if end is not None:
                cut = pc.field(TIME_COLUMN[name]) <= pa.scalar(dt.datetime.fromtimestamp(end, dt.UTC),
                                                               pa.timestamp("us", tz="UTC"))
            files = [str(f) for f in list_files(lake, name, since=days[0], until=days[1])]
            parts.append(steps.read_files(files, spark_arrow_schema(name), lake / name, where=cut,
                                          columns=steps.READ_COLUMNS[name]))
        out[name] = pa.concat_tables(parts, promote_options="permissive") if parts else None
    if out["offsets"] is None or out["members"] is None:
        raise SystemExit("no lake to analyse")
    return out


def first_settled(members: pa.Table) -> dict[str, float]:
    """Each group's first settled member sweep (epoch s; settled as the rebalance rules define it)."""
    ms = groups.member_sweeps(members)
    ms = ms.filter(pc.fill_null(ms.column("settled"), False))
    got = ms.group_by("group_id").aggregate([("t", "min")])
    return dict(zip(got.column("group_id").to_pylist(), got.column("t_min").to_pylist(), strict=True))


def run_step(tables: dict[str, pa.Table | None], *, commit_stream: bool, settings: AnalyticsConfig) -> steps.StepOutput:
    """One analytics step (no carried state: a batch's) over ``tables`` (:func:`read_lakes`), with
    or without the commit stream's tables."""
    offsets, members = tables["offsets"], tables["members"]
    assert offsets is not None
    assert members is not None
    inputs = steps.StepInputs(offsets=offsets, members=members,
                              commits=tables["commits"] if commit_stream else None,
                              group_events=tables["group_events"] if commit_stream else None, state={})
    return steps.run_step(inputs, settings=settings, as_of=dt.datetime.now(dt.UTC), with_state=False)


def windows(tables: dict[str, pa.Table | None], *, commit_stream: bool,
            settings: AnalyticsConfig) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """One analytics step over ``tables`` (:func:`read_lakes`): the ``rebalances`` rows, and each
    group's first settled sweep (epoch s)."""
    step = run_step(tables, commit_stream=commit_stream, settings=settings)
    members = tables["members"]
    assert members is not None
    return step.tables["rebalances"].to_pylist(), first_settled(members)


def score(sc: Scenario, mode: str, rows: list[dict[str, Any]], first_settled: dict[str, float],
          interval_s: float) -> Report:
    """The scenario's truth rebalances against the windows (see the module docstring)."""
    from lagscope.devtools.sim.truth import TruthIndex, load

    ti = TruthIndex(load(sc.truth_path))
    rep = Report(sc.name, mode)
    groups = {g for g in first_settled if g.startswith(f"sim-{sc.name}-")}
    for g in sorted(groups):
        truth = [r for r in ti.rebalances(g) if first_settled[g] < r.start <= sc.end]
        mine = sorted((r for r in rows if r["group_id"] == g), key=lambda r: r["start_ts"])
        rep.sources |= {r["source"] for r in mine}
        rep.truth += len(truth)
        for tr in truth:
            best = min(mine, key=lambda r: abs(r["start_ts"].timestamp() - tr.start), default=None)
            if best is None or abs(best["start_ts"].timestamp() - tr.start) > max(5.0, 4 * interval_s):
                rep.notes.append(f"missed the rebalance {tr.start:.3f}–{tr.end:.3f}")
                continue
            mine.remove(best)
            rep.found += 1
            err = abs((best["duration_s"] or 0.0) - (tr.end - tr.start))
            rep.duration_errors.append(err)
            want = window_causes(tr.cause) if tr.cause else ()
            if not want or best["cause"] in want:
                rep.causes_right += 1
            else:
                rep.notes.append(f"cause {best['cause']} for a {tr.cause.kind if tr.cause else '-'} "
                                 f"at {tr.start:.3f}")
            if err > (1.0 if mode == "commit stream" else interval_s):
                rep.notes.append(f"duration {best['duration_s']:.3f} s for {tr.end - tr.start:.3f} s "
                                 f"({tr.start:.3f}–{tr.end:.3f}; window {best['start_ts'].timestamp():.3f}–"
                                 f"{best['end_ts'].timestamp():.3f}, {best['source']})")
    return rep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenarios", default="crash,join,graceful-leave,static-bounce,poll-timeout,rebalance-storm")
    ap.add_argument("--interval-s", type=float, default=0.5)
    ap.add_argument("--bootstrap", default=os.environ.get("LAGSCOPE_TEST_BOOTSTRAP"))
    ap.add_argument("--reuse", type=Path, help="analyse the lakes of an earlier run kept in this folder "
                    "(<scenario>/lake, <scenario>/out) instead of running the scenarios")
    ap.add_argument("--keep", type=Path, help="collect into this folder (kept) instead of a temporary one")
    args = ap.parse_args()
    if not args.bootstrap and not args.reuse:
        sys.exit("give --bootstrap or LAGSCOPE_TEST_BOOTSTRAP (a running broker)")
    settings = AnalyticsConfig(**DEFAULTS)
    reports: list[Report] = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="lagscope-rb-") as tmp:
        scenarios = []
        for name in args.scenarios.split(","):
            if args.reuse:
                scenarios.append(reuse(name, args.reuse / name))
                continue
            scenarios.append(collect(name, args.bootstrap, (args.keep or Path(tmp)) / name, args.interval_s))
            print(f"collected {name}", file=sys.stderr, flush=True)
        tables = read_lakes([(s.lake, None) for s in scenarios])
        for mode, stream in (("commit stream", True), ("sweeps only", False)):
            rows, first = windows(tables, commit_stream=stream, settings=settings)
            for sc in scenarios:
                reports.append(score(sc, mode, rows, first, args.interval_s))
                print(f"{mode} {sc.name}: {reports[-1]}", file=sys.stderr, flush=True)
    lines = [f"# rebalance windows, end to end ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{'' if args.reuse else 'LAGSCOPE_TEST_BOOTSTRAP=' + args.bootstrap + ' '}.venv/bin/python "
             f"{' '.join(sys.argv)}`" + ("" if args.reuse else " (broker: the shared local Kafka 4.4.0)"), "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
             f"sweeps every {args.interval_s:g} s; fallback timeouts {DEFAULTS}; "
             f"{time.time() - started:.0f} s in all.", "",
             "| scenario | mode | found/truth | max duration error s | causes right | source |",
             "|---|---|---:|---:|---:|---|"]
    for r in reports:
        lines.append(f"| {r.name} | {r.mode} | {r.found}/{r.truth} | {r.max_error:.3f} | {r.causes_right}/{r.found} | "
                     f"{','.join(sorted(r.sources)) or '-'} |")
    lines.append("")
    for r in reports:
        for n in r.notes:
            lines.append(f"- {r.name}, {r.mode}: {n}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
