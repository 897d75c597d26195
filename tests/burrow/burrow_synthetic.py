"""Synthetic lake and result tables for the Burrow API's tests and benchmark: sweeps of groups
written to the lake's ``offsets`` table and ``status`` rows to the results, with the lake's own
writer (:func:`lagscope.lake.write_table`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lagscope.lake import write_rows, write_table
from lagscope.schema import OFFSETS, STATUS, Table

NOW = dt.datetime(2026, 3, 2, 12, 0, 0, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Part:
    """One partition row of one sweep."""

    topic: str
    partition: int
    committed: int | None
    end: int
    owner: str | None = None  # member id; host and client derive from it


def sweep(lake: Path, cluster: str, group: str, at: dt.datetime, parts: Sequence[Part]) -> None:
    rows = [{
        "sweep_ts": at, "group_id": group, "topic": p.topic, "partition": p.partition,
        "committed_offset": p.committed, "log_start_offset": 0, "log_end_offset": p.end,
        "last_stable_offset": p.end, "member_id": p.owner,
        "client_id": f"client-{p.owner}" if p.owner else None, "host": f"/10.0.0.{len(p.owner)}" if p.owner else None,
        "group_state": "Stable" if p.owner else "Empty",
        "lag": None if p.committed is None else max(0, p.end - p.committed),
    } for p in parts]
    write_rows(lake, OFFSETS, cluster, rows, date=at.date())


def status(results: Path, cluster: str, group: str, at: dt.datetime, group_status: tuple[str, str],
           parts: dict[tuple[str, int], tuple[str, str]]) -> None:
    """One evaluation: the group row (burrow_status, own status) and partition rows."""
    rows = [{"eval_ts": at, "group_id": group, "topic": None, "partition": None,
             "burrow_status": group_status[0], "status": group_status[1], "reason": "r", "lag": 0,
             "lag_seconds": 0.0}]
    rows += [{"eval_ts": at, "group_id": group, "topic": t, "partition": p, "burrow_status": b, "status": s,
              "reason": "r", "lag": 0, "lag_seconds": 0.0} for (t, p), (b, s) in parts.items()]
    write_rows(results, STATUS, cluster, rows, date=at.date())


def _full(spec: Table, columns: dict[str, Any], n: int) -> pa.Table:
    """``columns`` as a table of ``spec``'s schema, the other columns null."""
    return pa.table({f.name: pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
                     for f in spec.schema})


def many_groups(lake: Path, results: Path, cluster: str, groups: int, partitions: int, sweeps: int,
                at: dt.datetime, interval_s: float = 15.0) -> None:
    """``groups`` groups of ``partitions`` partitions each, ``sweeps`` sweeps (one file each,
    as the collector writes them) and one evaluation: the benchmark's cluster."""
    n = groups * partitions
    gids = [f"group-{g:05d}" for g in range(groups) for _ in range(partitions)]
    parts = [p for _ in range(groups) for p in range(partitions)]
    topics = [f"topic-{g % 100:03d}" for g in range(groups) for _ in range(partitions)]
    for s in range(sweeps):
        ts = at - dt.timedelta(seconds=interval_s * (sweeps - 1 - s))
        committed = [1000 * s + i % 7 for i in range(n)]
        end = [1000 * s + 50 for _ in range(n)]
        write_table(lake, OFFSETS, cluster, _full(OFFSETS, {
            "sweep_ts": [ts] * n, "group_id": gids, "topic": topics, "partition": parts,
            "committed_offset": committed, "log_end_offset": end,
            "member_id": [f"m-{g}" for g in gids], "client_id": [f"c-{g}" for g in gids],
            "host": ["/10.1.2.3"] * n, "lag": [e - c for e, c in zip(end, committed, strict=True)],
        }, n), date=ts.date())
    statuses = ["OK", "WARN", "STOP", "STALL"]
    rows_g = [f"group-{g:05d}" for g in range(groups)]
    write_table(results, STATUS, cluster, _full(STATUS, {
        "eval_ts": [at] * (groups + n), "group_id": rows_g + gids,
        "topic": [None] * groups + topics, "partition": [None] * groups + parts,
        "burrow_status": ["ERR" if g % 4 >= 2 else statuses[g % 4] for g in range(groups)]
        + [statuses[(i // partitions) % 4] if i % partitions == 0 else "OK" for i in range(n)],
    }, groups + n), date=at.date())
