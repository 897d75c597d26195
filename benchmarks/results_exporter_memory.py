"""Memory of the results exporter over a day of results: flat in the number of minutes.

Writes a day of result tables as ``lagscope run`` leaves them (one incremental analytics step
per minute, published by the analytics' own publisher): per minute a lag trend row per
partition and per group and a status row per partition and per group; per group a rebalance
window every hour (open in one step, closed in the next) and a commit-gap anomaly every three
hours (written again, open, for ten minutes, then closed). Then follows the day as the exporter
sees it in production: the checkpoint moves one minute at a time and a long-lived
:class:`ResultsCollector` refreshes after every step. At each mark (1 h, 6 h, 24 h by default)
it prints:

- the exporter's memory: what it holds (the bytes of its object graph), what tracemalloc sees
  retained after the refresh (that, plus the interpreter's free lists) and its peak during the
  refreshes since the previous mark (the refresh's transient reading and listing); its records
  (series, open and recently closed events), the events folded into totals (8 bytes each) and
  the Arrow memory still allocated;
- two references: what the previous exporter held, every visible row as a Python dict
  (measured on the first mark's rows, then bytes per row × rows), and the exposition of the
  exported series alone (the text a scrape returns);
- a check that the metrics equal those of a fresh exporter reading everything at once.

It exits 1 when what the exporter holds at the last mark is more than 1.5× the first mark's.

    .venv/bin/python benchmarks/results_exporter_memory.py                       # 1,000 partitions
    .venv/bin/python benchmarks/results_exporter_memory.py --partitions 20 --minutes 120 --marks 30,60,120
    .venv/bin/python benchmarks/results_exporter_memory.py --record              # the lead, quiet machine

``--record`` writes the table to benchmarks/results/results_exporter.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import math
import os
import platform
import shutil
import sys
import tempfile
import time
import tracemalloc
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from prometheus_client import CollectorRegistry, generate_latest

from lagscope import results
from lagscope.analytics.io import (
    Checkpoint,
    new_staging,
    publish_incremental,
    spark_arrow_schema,
    stage_arrow,
    write_checkpoint,
)
from lagscope.analytics.results_metrics import ResultsCollector
from lagscope.schema import RESULT_TABLES

D0 = dt.datetime(2026, 11, 20, tzinfo=dt.UTC)
MINUTE = dt.timedelta(minutes=1)
RECORD = Path(__file__).resolve().parent / "results" / "results_exporter.md"


# --------------------------------------------------------------------------------------------
# the day of results
# --------------------------------------------------------------------------------------------

def _table(name: str, n: int, columns: dict[str, Any]) -> pa.Table:
    """An Arrow table of ``name``'s schema (plus cluster and date): the given columns, null elsewhere."""
    schema = spark_arrow_schema(name)
    return pa.table({f.name: pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
                     for f in schema}, schema=schema)


def step_tables(m: int, partitions: int, per_group: int, rng: np.random.Generator) -> dict[str, pa.Table]:
    """The result rows of the step over minute ``m``."""
    at = D0 + m * MINUTE
    end = at + MINUTE
    groups = partitions // per_group
    group = [f"service-{p // per_group}-consumer" for p in range(partitions)]
    group_ids = [f"service-{g}-consumer" for g in range(groups)]
    part = [p % per_group for p in range(partitions)]
    topic = [f"topic-{p // per_group % 10}" for p in range(partitions)]
    lag = rng.integers(0, 500, partitions)
    both = partitions + groups
    trends = _table("lag_trends", both, {
        "window_start": [at] * both, "group_id": group + group_ids, "topic": topic + [None] * groups,
        "partition": part + [None] * groups, "lag_last": np.concatenate([lag, np.zeros(groups, int)]),
        "lag_max": np.concatenate([lag, np.zeros(groups, int)]), "produce_rate": rng.random(both) * 100,
        "consume_rate": rng.random(both) * 100, "lag_seconds": rng.random(both) * 30,
        "lag_seconds_method": ["interpolated"] * both, "catchup_eta_s": rng.random(both) * 60,
        "retention_headroom_s": rng.random(both) * 86400, "cluster": ["prod"] * both,
        "date": [at.date().isoformat()] * both})
    status = _table("status", both, {
        "eval_ts": [end] * both, "group_id": group + group_ids, "topic": topic + [None] * groups,
        "partition": part + [None] * groups, "status": ["OK"] * both, "burrow_status": ["OK"] * both,
        "reason": ["caught up"] * both, "lag": np.concatenate([lag, np.zeros(groups, int)]),
        "lag_seconds": rng.random(both) * 30, "cluster": ["prod"] * both, "date": [end.date().isoformat()] * both})
    out = {"lag_trends": trends, "status": status}
    # a rebalance per group per hour, starting at the group's minute of the hour: open for a step
    rebalance_rows = []
    for g in range(groups):
        start_minute = m - (m - g % 60) % 60  # the group's latest start at or before m
        if start_minute < 0 or m - start_minute > 1:
            continue
        start = D0 + start_minute * MINUTE + dt.timedelta(seconds=20)
        closed = m == start_minute + 1
        rebalance_rows.append((group_ids[g], start, closed))
    if rebalance_rows:
        n = len(rebalance_rows)
        out["rebalances"] = _table("rebalances", n, {
            "group_id": [r[0] for r in rebalance_rows], "start_ts": [r[1] for r in rebalance_rows],
            "end_ts": [r[1] + dt.timedelta(seconds=30) if r[2] else None for r in rebalance_rows],
            "duration_s": [30.0 if r[2] else None for r in rebalance_rows],
            "cause": ["join"] * n, "source": ["sweeps"] * n, "bound_s": [48.0] * n,
            "observed_over_bound": [30.0 / 48.0 if r[2] else None for r in rebalance_rows],
            "as_of_ts": [end] * n, "cluster": ["prod"] * n,
            "date": [r[1].date().isoformat() for r in rebalance_rows]})
    # a commit-gap anomaly per group every three hours: open ten minutes, then closed
    anomaly_rows = []
    for g in range(groups):
        start_minute = m - (m - g % 180) % 180
        if start_minute < 0 or m - start_minute > 10:
            continue
        start = D0 + start_minute * MINUTE
        key = f"commit_gap|prod|{group_ids[g]}|topic-0|0|{start.isoformat()}"
        anomaly_rows.append((group_ids[g], start, m == start_minute + 10, key))
    if anomaly_rows:
        n = len(anomaly_rows)
        out["anomalies"] = _table("anomalies", n, {
            "group_id": [r[0] for r in anomaly_rows], "topic": ["topic-0"] * n, "partition": [0] * n,
            "kind": ["commit_gap"] * n, "start_ts": [r[1] for r in anomaly_rows],
            "end_ts": [r[1] + 10 * MINUTE if r[2] else None for r in anomaly_rows], "severity": ["warning"] * n,
            "magnitude": [600.0] * n, "unit": ["s"] * n, "detail": ["no commit for 600 s"] * n,
            "key": [r[3] for r in anomaly_rows], "as_of_ts": [end] * n, "cluster": ["prod"] * n,
            "date": [r[1].date().isoformat() for r in anomaly_rows]})
    return out


def write_day(root: Path, minutes: int, partitions: int, per_group: int) -> None:
    """One published incremental step per minute; the checkpoint ends at ``minutes``."""
    rng = np.random.default_rng(1)
    for m in range(minutes):
        staged = {}
        for name, data in step_tables(m, partitions, per_group, rng).items():
            staged[name] = new_staging(root, name)
            stage_arrow(staged[name], name, data)
        publish_incremental(root, staged, tag=results.inc_tag(D0 + m * MINUTE, D0 + (m + 1) * MINUTE))
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)
    shutil.rmtree(root / ".staging", ignore_errors=True)


def move_checkpoint(root: Path, minute: int) -> None:
    """Make the steps up to ``minute`` visible, as the analytics' checkpoint does."""
    write_checkpoint(root, Checkpoint(watermark=(D0 + minute * MINUTE).isoformat(), version="v-bench"))


# --------------------------------------------------------------------------------------------
# measuring
# --------------------------------------------------------------------------------------------

_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.CodeType)


def deep_size(root: object) -> int:
    """Bytes of the objects reachable from ``root`` (its own state: classes, modules and
    functions are shared code, not state): what the exporter holds, without the allocator's
    free lists that tracemalloc also counts."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, _SHARED):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        stack.extend(gc.get_referents(obj))
    return total


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in registry.collect()
            for s in family.samples if not s.name.startswith("lagscope_results_")}


def same_samples(a: dict[Any, float], b: dict[Any, float]) -> bool:
    return a.keys() == b.keys() and all(math.isclose(a[k], b[k], rel_tol=1e-9) for k in a)


def visible_rows(root: Path) -> tuple[int, int]:
    """(rows, files) of the visible result files (footers only)."""
    import pyarrow.parquet as pq

    files = [f for name in RESULT_TABLES for f in results.list_files(root, name)]
    return sum(pq.read_metadata(f).num_rows for f in files), len(files)


def dict_bytes_per_row(root: Path) -> float:
    """What the previous exporter held per row: every visible row as a dict (with cluster, date)."""
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    held = {name: results.read(root, name).to_pylist() for name in RESULT_TABLES}
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - before
    rows = sum(len(v) for v in held.values())
    del held
    return size / max(rows, 1)


def warm_up(root: Path) -> None:
    """Run every code path once before measuring (first imports and caches are not the exporter's)."""
    move_checkpoint(root, 1)
    visible_rows(root)
    registry = CollectorRegistry()
    registry.register(ResultsCollector(root))
    generate_latest(registry)
    samples(registry)
    for name in RESULT_TABLES:
        results.read(root, name).to_pylist()
    move_checkpoint(root, 0)


def follow(root: Path, minutes: int, marks: list[int]) -> Iterator[dict[str, Any]]:
    """Refresh one exporter after every step; one line of measurements per mark."""
    warm_up(root)
    tracemalloc.start()
    per_row: float | None = None
    registry = CollectorRegistry()
    collector = ResultsCollector(root, refresh_s=0.0)
    registry.register(collector)
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    peak = 0
    started = time.perf_counter()
    for m in range(1, minutes + 1):
        move_checkpoint(root, m)
        tracemalloc.reset_peak()
        collector.reading()
        peak = max(peak, tracemalloc.get_traced_memory()[1] - base)
        if m not in marks:
            continue
        elapsed = time.perf_counter() - started
        gc.collect()
        snapshot = collector.reading()
        retained = tracemalloc.get_traced_memory()[0] - base
        holds = deep_size(collector)
        arrow = pa.total_allocated_bytes()
        exposition = len(generate_latest(registry))
        ours = samples(registry)
        # the check and the references: allocated and freed again, so the count stays the exporter's
        rows, files = visible_rows(root)
        fresh = CollectorRegistry()
        fresh.register(ResultsCollector(root))
        equal = same_samples(ours, samples(fresh))
        del fresh
        if per_row is None:
            per_row = dict_bytes_per_row(root)
        line = {"minutes": m, "rows": rows, "files": files, "holds": holds, "retained": retained, "peak": peak,
                "held": sum(snapshot.held().values()), "folded": sum(snapshot.folded().values()),
                "arrow": arrow, "old": per_row * rows, "exposition": exposition,
                "samples": len(ours), "equal": equal, "refresh_s": elapsed / m}
        del snapshot, ours  # only the exporter keeps its state alive
        yield line
        peak = 0
    tracemalloc.stop()


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f}"


def table(lines: list[dict[str, Any]]) -> str:
    out = ["| results | rows | files | exporter holds (KiB) | traced, retained (KiB) | traced, peak (KiB) "
           "| records | folded events | Arrow (KiB) | previous exporter, rows as dicts (KiB, est.) "
           "| exposition (KiB) | samples | = fresh | s per refresh |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in lines:
        out.append(f"| {r['minutes'] // 60} h {r['minutes'] % 60:02d} min | {r['rows']:,} | {r['files']:,} "
                   f"| {_kib(r['holds'])} | {_kib(r['retained'])} | {_kib(r['peak'])} | {r['held']:,} "
                   f"| {r['folded']:,} "
                   f"| {_kib(r['arrow'])} | {_kib(r['old'])} | {_kib(r['exposition'])} | {r['samples']:,} "
                   f"| {'yes' if r['equal'] else 'NO'} | {r['refresh_s']:.3f} |")
    return "\n".join(out)


def record(text: str, command: str) -> None:
    machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
               f"pyarrow {pa.__version__}")
    body = (f"# Results exporter memory over a day of results\n\n"
            f"Command: `{command}`\nMachine: {machine}.\nRecorded {dt.date.today().isoformat()}.\n\n{text}\n\n"
            "The exporter retains per partition its latest lag-trend values, per group its latest status, "
            "the open and recently closed rebalance windows and anomalies as records and the others folded "
            "into totals (8 bytes each); the previous exporter kept every row of every result table as a "
            "Python dict (estimated: bytes per row measured on the first mark × rows).\n")
    tmp = RECORD.with_name(f".{RECORD.name}.tmp")
    tmp.write_text(body)
    tmp.replace(RECORD)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000, help="partitions (default 1000)")
    ap.add_argument("--per-group", type=int, default=10, help="partitions per group (default 10)")
    ap.add_argument("--minutes", type=int, default=1440, help="minutes of results (default a day)")
    ap.add_argument("--marks", default="60,360,1440", help="minutes at which to measure (default 60,360,1440)")
    ap.add_argument("--workdir", type=Path, default=None, help="where to write the results (default a temp dir)")
    ap.add_argument("--record", action="store_true", help="write benchmarks/results/results_exporter.md")
    args = ap.parse_args()
    marks = sorted(int(m) for m in args.marks.split(","))
    if args.partitions < args.per_group or not marks or marks[-1] > args.minutes or marks[0] < 1:
        ap.error("need --partitions >= --per-group and marks within 1 … --minutes")
    work = Path(tempfile.mkdtemp(prefix="lagscope-exporter-")) if args.workdir is None else args.workdir
    root = work / "results"
    try:
        t = time.perf_counter()
        write_day(root, args.minutes, args.partitions, args.per_group)
        print(f"wrote {args.minutes} steps of {args.partitions} partitions in {time.perf_counter() - t:.0f} s",
              file=sys.stderr)
        lines = []
        for line in follow(root, args.minutes, marks):
            lines.append(line)
            print(f"{line['minutes']:5d} min: holds {_kib(line['holds'])} KiB (traced: retained "
                  f"{_kib(line['retained'])} KiB, peak {_kib(line['peak'])} KiB), "
                  f"{line['held']:,} records, {line['folded']:,} folded, previous ≈ {_kib(line['old'])} KiB, "
                  f"equal to a fresh exporter: {line['equal']}", file=sys.stderr)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    text = table(lines)
    print(text)
    if args.record:
        record(text, "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]))
    if not all(line["equal"] for line in lines):
        print("the exporter's metrics differ from a fresh exporter's", file=sys.stderr)
        return 1
    if lines[-1]["holds"] > 1.5 * lines[0]["holds"]:
        print("the exporter's memory grew with the minutes", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
