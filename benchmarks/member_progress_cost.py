"""What carrying each member's last progress costs a step (issue 26: the state part
``member_progress``, docs/analytics.md "What a step carries, and why").

The group pass used to find each owner's last progress (``groups._progress``) for the groups
with a rebalance window only; it now does so for every group, every step, so that a member's
progress is kept in the step where it happens even when its group has no window then. This
measures that added work on a step of many stable groups and a few that rebalance (the case
where it costs most: before, only the few were read), in one process, side by side:

- the whole step (``step.run_step`` over Arrow, no Spark: what a Spark task runs per bucket), a
  second step, with the first one's state carried;
- ``_progress`` over every group (now) against ``_progress`` over the groups with a window (as
  before: the series filtered to them first, as the old code did);
- the state part's two functions (``with_member_progress``, ``member_progress_state``).

    .venv/bin/python benchmarks/member_progress_cost.py --keys 20000 --groups 2000 --sweeps 30

Results: benchmarks/results/member_progress_cost.md (the figures of a run, with the load average).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).parent))
from analytics_speed import T0, members_batch, offsets_batch

from lagscope.analytics import groups
from lagscope.analytics import step as steps
from lagscope.config import AnalyticsConfig


def _with_cluster(table: pa.Table) -> pa.Table:
    n = table.num_rows
    return table.append_column("cluster", pa.array(["bench"] * n)).append_column(
        "date", pa.array(["2026-01-01"] * n))


def _median(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=20_000, help="partitions (offset rows per sweep)")
    ap.add_argument("--groups", type=int, default=2_000)
    ap.add_argument("--sweeps", type=int, default=30, help="sweeps in the step")
    ap.add_argument("--interval-s", type=float, default=10.0)
    ap.add_argument("--rebalanced", type=int, default=5, help="groups with a new member halfway through the step")
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each measurement (the median is reported)")
    args = ap.parse_args()
    load0 = os.getloadavg()
    half = args.sweeps // 2
    offsets = _with_cluster(offsets_batch(args.keys, args.groups, T0, args.sweeps, args.interval_s, seed=1))
    members = _with_cluster(pa.concat_tables([
        members_batch(args.groups, T0, half, args.interval_s),
        members_batch(args.groups, T0 + dt.timedelta(seconds=half * args.interval_s), args.sweeps - half,
                      args.interval_s, rebalanced=range(args.rebalanced))]))
    settings = AnalyticsConfig()
    # the first half as a step of its own, whose state the timed step (the second half) carries
    cut = T0 + dt.timedelta(seconds=half * args.interval_s)
    as_of = T0 + dt.timedelta(seconds=args.sweeps * args.interval_s)

    def part(table: pa.Table, first: bool) -> pa.Table:
        t = np.asarray(table.column("sweep_ts").cast(pa.int64()), dtype=np.int64)
        cut_ms = int(cut.timestamp() * 1000)
        return table.filter(pa.array(t < cut_ms if first else t >= cut_ms))

    first = steps.run_step(steps.StepInputs(offsets=part(offsets, True), members=part(members, True), commits=None,
                                            group_events=None, state={}), settings=settings, as_of=cut)
    inputs = steps.StepInputs(offsets=part(offsets, False), members=part(members, False), commits=None,
                              group_events=None, state=first.state)

    seen: list[tuple[Any, ...]] = []
    real = groups._progress

    def spy(series: pa.Table, carried: pa.Table | None, gs: pa.Array, wanted: np.ndarray) -> Any:
        seen.append((series, carried, gs, wanted))
        return real(series, carried, gs, wanted)

    groups._progress = spy  # type: ignore[assignment]
    try:
        out = steps.run_step(inputs, settings=settings, as_of=as_of)
        step_s = _median(lambda: steps.run_step(inputs, settings=settings, as_of=as_of), args.runs)
    finally:
        groups._progress = real  # type: ignore[assignment]
    windows = out.tables["rebalances"].num_rows
    series, carried, gs, read_g = seen[-1]

    def windowed_only() -> Any:
        g, ok = groups._codes(groups._gkey(series), gs)
        mine = series.filter(pa.array(ok & np.isin(g, read_g)))
        return real(mine, carried, gs, read_g)

    every_s = _median(lambda: real(series, carried, gs, read_g), args.runs)
    windowed_s = _median(windowed_only, args.runs)
    progress, _ = real(series, carried, gs, read_g)
    carried_mp = out.state["member_progress"]
    kept = out.state["msweeps"]
    gens = groups.GENERATION_STATE_SCHEMA.empty_table()
    state_s = _median(lambda: groups.member_progress_state(
        groups.with_member_progress(progress, carried_mp, gs), gs, kept, gens), args.runs)
    added = every_s - windowed_s + state_s
    load1 = os.getloadavg()
    print(f"""# member_progress cost ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)

Command: `.venv/bin/python benchmarks/member_progress_cost.py --keys {args.keys} --groups {args.groups} \
--sweeps {args.sweeps} --interval-s {args.interval_s:g} --rebalanced {args.rebalanced} --runs {args.runs}`

Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; load average at \
start {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}, \
at end {load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f} (1 / 5 / 15 min).

{args.keys:,} partitions in {args.groups:,} groups, {args.sweeps} sweeps at {args.interval_s:g} s \
({offsets.num_rows:,} offset rows, {members.num_rows:,} member rows), in two steps: the timed one is the second \
(half the rows, the first step's state carried), in which {args.rebalanced} groups get a second member \
({windows} rebalance windows). Medians of {args.runs} runs.

| measurement | seconds |
|---|---:|
| the whole step (`run_step`, Arrow) | {step_s:.3f} |
| `_progress` over every group (now) | {every_s:.3f} |
| `_progress` over the groups with a window (before) | {windowed_s:.3f} |
| `with_member_progress` + `member_progress_state` | {state_s:.3f} |
| **added per step** | **{added:.3f}** ({added / step_s:.1%} of the step) |

The state part after the step: {carried_mp.num_rows:,} rows (one per member of the carried member sweeps).""")


if __name__ == "__main__":
    main()
