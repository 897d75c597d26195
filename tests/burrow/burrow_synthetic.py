"""Synthetic lake and result tables for the Burrow API's tests: sweeps of groups
written to the lake's ``offsets`` table and ``status`` rows to the results, with the lake's own
writer (:func:`lagscope.lake.write_rows`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from lagscope.lake import write_rows
from lagscope.schema import OFFSETS, STATUS

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
