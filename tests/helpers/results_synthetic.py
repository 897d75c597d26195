"""Synthetic result tables for the results-out tests, written through lagscope.lake.

The rows follow :mod:`lagscope.schema` exactly (they are written by ``write_rows``, which
casts them to the table's schema), so the exporter, the webhooks and the annotations are
tested against the same files the analytics write.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lagscope.lake import write_rows
from lagscope.schema import ADVICE, ANOMALIES, LAG_TRENDS, REBALANCES, STATUS


@dataclass(frozen=True)
class Synthetic:
    root: Path
    cluster: str
    group: str
    topic: str
    now: dt.datetime


def anomaly(cluster: str, group: str, topic: str | None, kind: str, start: dt.datetime,
            end: dt.datetime | None, severity: str, partition: int | None = 0,
            as_of: dt.datetime | None = None) -> dict[str, Any]:
    key = f"{kind}|{cluster}|{group}|{topic or ''}|{'' if partition is None else partition}|{start.isoformat()}"
    return {"group_id": group, "topic": topic, "partition": partition if topic else None,
            "kind": kind, "start_ts": start, "end_ts": end, "severity": severity,
            "magnitude": 120.0, "unit": "s", "detail": f"{kind} on {group}", "key": key, "as_of_ts": as_of}


def delivery_anomaly(group: str, topic: str, partition: int, kind: str, start: dt.datetime,
                     end: dt.datetime | None, messages: float, cause: str | None = None,
                     as_of: dt.datetime | None = None) -> dict[str, Any]:
    """A skip, retention_loss or rewind (``messages`` never processed / processed twice); with
    ``cause``, a row of the anomalies table as extended by the ``cause`` column."""
    row = {**anomaly("", group, topic, kind, start, end, "critical", partition, as_of),
           "magnitude": messages, "unit": "messages"}
    row["key"] = f"{kind}||{group}|{topic}|{partition}|{start.isoformat()}"
    if cause is not None:
        row["cause"] = cause
    return row


def rebalance(group: str, start: dt.datetime, duration: float | None, cause: str,
              bound: float = 10.0, as_of: dt.datetime | None = None) -> dict[str, Any]:
    end = start + dt.timedelta(seconds=duration) if duration is not None else None
    return {"group_id": group, "start_ts": start, "end_ts": end, "duration_s": duration,
            "cause": cause, "source": "sweeps", "generation_before": 1, "generation_after": 2,
            "members_before": ["m1"], "members_after": ["m1", "m2"], "partitions_moved": 2,
            "bound_s": bound, "observed_over_bound": duration / bound if duration is not None else None,
            "messages_accumulated": 40, "max_processing_gap_s": 3.0, "as_of_ts": as_of}


def status(group: str, ts: dt.datetime, status: str, burrow: str, topic: str | None = None,
           partition: int | None = None) -> dict[str, Any]:
    return {"eval_ts": ts, "group_id": group, "topic": topic, "partition": partition,
            "burrow_status": burrow, "status": status, "reason": f"{status} because of the test",
            "lag": 10, "lag_seconds": 4.0}


def trend(group: str, topic: str, partition: int, ts: dt.datetime, headroom: float | None,
          eta: float | None) -> dict[str, Any]:
    return {"window_start": ts, "group_id": group, "topic": topic, "partition": partition,
            "lag_last": 10, "lag_max": 12, "produce_rate": 5.0, "consume_rate": 4.0,
            "lag_seconds": 2.0, "lag_seconds_is_lower_bound": False, "lag_seconds_method": "interpolated",
            "catchup_eta_s": eta, "retention_headroom_s": headroom}


def advice(group: str, as_of: dt.datetime, rule: str = "session_timeout_crash") -> dict[str, Any]:
    """An advice row as the analytics write it (the numbers of a 45 s session timeout's crashes)."""
    return {"group_id": group, "rule": rule, "setting": "session.timeout.ms",
            "current_value": "session.timeout.ms=45000",
            "suggested": "session.timeout.ms=10000 with heartbeat.interval.ms ≤ 3000",
            "expected_effect": "a crashed member's partitions would wait ~10 s instead of ~45 s for the coordinator: "
                               "outages of ~49 s would shrink to ~14 s",
            "measure": "outage_s", "unit": "s", "current_amount": 49.0, "expected_amount": 14.0,
            "evidence": "3 members timed out in 1 day (session timeout ~45 s); median outage ~49 s",
            "evidence_count": 3, "evidence_start_ts": as_of - dt.timedelta(hours=5),
            "evidence_end_ts": as_of - dt.timedelta(minutes=25), "confidence": "medium", "as_of_ts": as_of}


def write_synthetic(root: Path, cluster: str, group: str, topic: str, now: dt.datetime) -> Synthetic:
    """A small, complete set of result tables for one cluster, group and topic (as of ``now``).

    - rebalances: a 4 s join (closed, under its 10 s bound), a 25 s session timeout (closed,
      2.5x over its bound), and one still open (leave);
    - anomalies: an open critical stall on partition 0, a closed warning commit gap;
    - status: group-level WARN then STALL (STALL is the latest), plus a partition row;
    - lag_trends: two windows for partition 0 (the later has headroom 1800 s, ETA 60 s);
    - advice: a shorter session timeout for the group (current as of ``now``).
    """
    t0 = now - dt.timedelta(minutes=30)
    write_rows(root, REBALANCES, cluster, [
        rebalance(group, t0, 4.0, "join", as_of=now),
        rebalance(group, t0 + dt.timedelta(minutes=5), 25.0, "session_timeout", as_of=now),
        rebalance(group, now - dt.timedelta(seconds=20), None, "leave", as_of=now),
    ])
    write_rows(root, ANOMALIES, cluster, [
        anomaly(cluster, group, topic, "stall", t0 + dt.timedelta(minutes=10), None, "critical", as_of=now),
        anomaly(cluster, group, topic, "commit_gap", t0, t0 + dt.timedelta(minutes=2), "warning", as_of=now),
    ])
    write_rows(root, STATUS, cluster, [
        status(group, t0, "WARN", "WARN"),
        status(group, now - dt.timedelta(minutes=1), "STALL", "STALL"),
        status(group, now - dt.timedelta(minutes=1), "STALL", "STALL", topic, 0),
    ])
    write_rows(root, LAG_TRENDS, cluster, [
        trend(group, topic, 0, now - dt.timedelta(minutes=2), 5000.0, None),
        trend(group, topic, 0, now - dt.timedelta(minutes=1), 1800.0, 60.0),
    ])
    write_rows(root, ADVICE, cluster, [advice(group, now)], date=now.date())
    return Synthetic(root, cluster, group, topic, now)
