"""A synthetic but self-consistent lake for the drill-down app's tests.

Written through :func:`lagscope.lake.write_rows`, so every row fits :mod:`lagscope.schema`.
The samples (offsets, members, sweeps) are simulated sweep by sweep; the result tables
(lag_trends, status, rebalances, anomalies) are derived from those samples, so what a page
shows can be checked against numbers computed here.

Cluster ``prod``, two hours of sweeps every 30 s ending at :data:`END`:

- ``orders-svc`` reads ``orders`` (4 partitions, 50 msg/s each) with members ``m-a`` and
  ``m-b`` until ``m-b`` times out at +60 min: a rebalance window of 60 s (cause
  session_timeout, bound 13 s), after which ``m-a`` alone consumes 30 msg/s per partition,
  so the lag grows. At +80 min partition 1 rewinds by :data:`REWIND_BY` messages; at +100
  min partition 2 skips to the log end (the lag it had then is never processed).
- ``billing`` reads ``payments`` (2 partitions) and keeps up (OK).

Cluster ``staging``: ``audit`` reads ``audit-log`` (1 partition), WARN.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lagscope.lake import write_rows
from lagscope.schema import ADVICE, ANOMALIES, LAG_TRENDS, MEMBERS, OFFSETS, REBALANCES, STATUS, SWEEPS

END = dt.datetime(2026, 3, 10, 12, 0, tzinfo=dt.UTC)
START = END - dt.timedelta(hours=2)
SWEEP_S = 30
REBALANCE_START = START + dt.timedelta(minutes=60)
REBALANCE_END = REBALANCE_START + dt.timedelta(seconds=60)
REWIND_AT = START + dt.timedelta(minutes=80)
REWIND_BY = 5_000
SKIP_AT = START + dt.timedelta(minutes=100)


@dataclass
class FixtureLake:
    root: Path
    skipped: int = 0  # messages never processed by the skip on orders/2
    final_lag: dict[tuple[str, str, int], int] = field(default_factory=dict)  # (group, topic, partition)


@dataclass
class _Partition:
    topic: str
    partition: int
    produce: float  # messages/s
    end: float = 100_000.0
    committed: float = 100_000.0


def _sweeps() -> list[dt.datetime]:
    n = int((END - START).total_seconds() // SWEEP_S)
    return [START + dt.timedelta(seconds=SWEEP_S * i) for i in range(n)]


def _members_rows(ts: dt.datetime, group: str, state: str, gen: int,
                  owners: dict[str, list[tuple[str, int]]], topic: str) -> list[dict[str, Any]]:
    rows = []
    for member, parts in sorted(owners.items()):
        rows.append({"sweep_ts": ts, "group_id": group, "group_state": state, "protocol_type": "consumer",
                     "protocol": "range", "group_protocol": "classic", "generation": gen, "member_id": member,
                     "group_instance_id": None, "client_id": member.replace("m-", "client-"),
                     "host": f"/10.0.0.{ord(member[-1]) - 96}", "subscribed_topics": [topic],
                     "assignment": [{"topic": t, "partition": p} for t, p in parts]})
    return rows


def build(root: Path) -> FixtureLake:
    out = FixtureLake(root)
    offsets: dict[str, list[dict[str, Any]]] = defaultdict(list)
    members: dict[str, list[dict[str, Any]]] = defaultdict(list)
    sweeps: dict[str, list[dict[str, Any]]] = defaultdict(list)
    # per (cluster, group, topic, partition): list of (ts, committed, end) for the result tables
    history: dict[tuple[str, str, str, int], list[tuple[dt.datetime, int, int]]] = defaultdict(list)

    orders = [_Partition("orders", p, 50.0) for p in range(4)]
    payments = [_Partition("payments", p, 20.0) for p in range(2)]
    audit = [_Partition("audit-log", 0, 5.0)]
    for i, ts in enumerate(_sweeps()):
        dt_s = 0 if i == 0 else SWEEP_S
        # ---- orders-svc ----
        in_rebalance = REBALANCE_START <= ts < REBALANCE_END
        before = ts < REBALANCE_START
        if before:
            owners = {"m-a": [("orders", 0), ("orders", 1)], "m-b": [("orders", 2), ("orders", 3)]}
            state, gen = "Stable", 7
        elif in_rebalance:
            owners, state, gen = {"m-a": []}, "PreparingRebalance" if ts < REBALANCE_START + dt.timedelta(
                seconds=30) else "CompletingRebalance", 7
        else:
            owners = {"m-a": [("orders", p) for p in range(4)]}
            state, gen = "Stable", 8
        owner_of = {p: m for m, parts in owners.items() for _, p in parts}
        for part in orders:
            part.end += part.produce * dt_s
            rate = 0.0 if in_rebalance else (60.0 if before else 30.0)
            if part.partition == 1 and REWIND_AT <= ts < REWIND_AT + dt.timedelta(seconds=SWEEP_S):
                part.committed -= REWIND_BY  # the offset is reset back: REWIND_BY messages come again
            else:
                part.committed = min(part.end, part.committed + rate * dt_s)
            if part.partition == 2 and SKIP_AT <= ts < SKIP_AT + dt.timedelta(seconds=SWEEP_S):
                out.skipped = int(part.end - part.committed)
                part.committed = part.end
            member = owner_of.get(part.partition)
            offsets["prod"].append(_offset_row(ts, "orders-svc", part, member, state))
            history[("prod", "orders-svc", part.topic, part.partition)].append(
                (ts, int(part.committed), int(part.end)))
        members["prod"].extend(_members_rows(ts, "orders-svc", state, gen, owners, "orders"))
        # ---- billing ----
        for part in payments:
            part.end += part.produce * dt_s
            part.committed = max(part.committed, part.end - 40)
            offsets["prod"].append(_offset_row(ts, "billing", part, "m-x", "Stable"))
            history[("prod", "billing", part.topic, part.partition)].append((ts, int(part.committed), int(part.end)))
        members["prod"].extend(_members_rows(ts, "billing", "Stable", 3, {"m-x": [("payments", 0), ("payments", 1)]},
                                             "payments"))
        # ---- staging: audit ----
        for part in audit:
            part.end += part.produce * dt_s
            part.committed = part.end - 900 - i
            offsets["staging"].append(_offset_row(ts, "audit", part, "m-z", "Stable"))
            history[("staging", "audit", part.topic, part.partition)].append(
                (ts, int(part.committed), int(part.end)))
        members["staging"].extend(_members_rows(ts, "audit", "Stable", 1, {"m-z": [("audit-log", 0)]}, "audit-log"))
        for cluster, rows in (("prod", 10), ("staging", 1)):
            sweeps[cluster].append({"sweep_ts": ts, "duration_ms": 12.5, "ok": True, "error": None, "groups": 2,
                                    "partitions": rows, "members": 3, "group_errors": 0, "collector": "test:1"})

    for cluster in ("prod", "staging"):
        write_rows(root, OFFSETS, cluster, offsets[cluster])
        write_rows(root, MEMBERS, cluster, members[cluster])
        write_rows(root, SWEEPS, cluster, sweeps[cluster])
    _results(root, history, out)
    return out


def _offset_row(ts: dt.datetime, group: str, part: _Partition, member: str | None, state: str) -> dict[str, Any]:
    end, committed = int(part.end), int(part.committed)
    return {"sweep_ts": ts, "group_id": group, "topic": part.topic, "partition": part.partition,
            "committed_offset": committed, "commit_leader_epoch": 0, "commit_metadata": "",
            "log_start_offset": 0, "log_end_offset": end, "last_stable_offset": end,
            "member_id": member, "client_id": member and member.replace("m-", "client-"),
            "host": member and f"/10.0.0.{ord(member[-1]) - 96}", "group_state": state,
            "lag": max(0, end - committed)}


def _minute(ts: dt.datetime) -> dt.datetime:
    return ts.replace(second=0, microsecond=0)


def _results(root: Path, history: dict[tuple[str, str, str, int], list[tuple[dt.datetime, int, int]]],
             out: FixtureLake) -> None:
    trends: dict[str, list[dict[str, Any]]] = defaultdict(list)
    status: dict[str, list[dict[str, Any]]] = defaultdict(list)
    # per (cluster, group, minute) and (cluster, group, topic, minute): summed lag/rates
    rollup: dict[tuple[str, str, str | None, dt.datetime], list[float]] = defaultdict(lambda: [0, 0, 0.0, 0.0, 0.0])
    for (cluster, group, topic, partition), points in history.items():
        by_minute: dict[dt.datetime, list[tuple[dt.datetime, int, int]]] = defaultdict(list)
        for p in points:
            by_minute[_minute(p[0])].append(p)
        prev_last: tuple[dt.datetime, int, int] | None = None
        for minute in sorted(by_minute):
            pts = by_minute[minute]
            first = prev_last or pts[0]
            last = pts[-1]
            span = max((last[0] - first[0]).total_seconds(), 1.0)
            produce = (last[2] - first[2]) / span
            consume = (last[1] - first[1]) / span
            lag_last = max(0, last[2] - last[1])
            lag_max = max(max(0, e - c) for _, c, e in pts)
            lag_s = lag_last / produce if produce > 0 else 0.0
            eta = lag_last / (consume - produce) if consume > produce and lag_last > 0 else None
            trends[cluster].append({
                "window_start": minute, "group_id": group, "topic": topic, "partition": partition,
                "lag_last": lag_last, "lag_max": lag_max, "produce_rate": produce, "consume_rate": consume,
                "lag_seconds": lag_s, "lag_seconds_is_lower_bound": False,
                "lag_seconds_method": "interpolated" if lag_last else "zero", "catchup_eta_s": eta,
                "retention_headroom_s": None})
            status[cluster].append({"eval_ts": minute + dt.timedelta(minutes=1), "group_id": group, "topic": topic,
                                    "partition": partition, "burrow_status": "OK", "status": "OK",
                                    "reason": "keeping up", "lag": lag_last, "lag_seconds": lag_s})
            for key in ((cluster, group, topic, minute), (cluster, group, None, minute)):
                acc = rollup[key]
                acc[0] += lag_last
                acc[1] += lag_max
                acc[2] += produce
                acc[3] += consume
                acc[4] = max(acc[4], lag_s)
            prev_last = last
            out.final_lag[(group, topic, partition)] = lag_last
    for (cluster, group, topic, minute), (lag_last, lag_max, produce, consume, lag_s) in sorted(
            rollup.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or "", kv[0][3])):
        eta = lag_last / (consume - produce) if consume > produce and lag_last > 0 else None
        trends[cluster].append({
            "window_start": minute, "group_id": group, "topic": topic, "partition": None,
            "lag_last": int(lag_last), "lag_max": int(lag_max), "produce_rate": produce, "consume_rate": consume,
            "lag_seconds": lag_s, "lag_seconds_is_lower_bound": False, "lag_seconds_method": "interpolated",
            "catchup_eta_s": eta, "retention_headroom_s": None})
        if topic is None:
            grows = group == "orders-svc" and minute >= REBALANCE_END
            st, reason = (("ERR", "lag grows: consume 120 msg/s < produce 200 msg/s") if grows
                          else ("WARN", "lag steady above threshold") if group == "audit" else ("OK", "keeping up"))
            status[cluster].append({"eval_ts": minute + dt.timedelta(minutes=1), "group_id": group, "topic": None,
                                    "partition": None, "burrow_status": st, "status": st, "reason": reason,
                                    "lag": int(lag_last), "lag_seconds": lag_s})
    for cluster in ("prod", "staging"):
        write_rows(root, LAG_TRENDS, cluster, trends[cluster])
        write_rows(root, STATUS, cluster, status[cluster])

    def group_lag_at(when: dt.datetime) -> int:
        return sum(e - c for (cl, g, _, _), points in history.items() if (cl, g) == ("prod", "orders-svc")
                   for ts, c, e in points if ts == when)

    accumulated = group_lag_at(REBALANCE_END) - group_lag_at(REBALANCE_START)
    open_version = {  # written by an incremental step while the window was still open: superseded
        "group_id": "orders-svc", "start_ts": REBALANCE_START, "end_ts": None, "duration_s": None,
        "cause": "unknown", "source": "sweeps", "generation_before": 7, "generation_after": None,
        "members_before": ["m-a", "m-b"], "members_after": None, "partitions_moved": None, "bound_s": 13.0,
        "observed_over_bound": None, "messages_accumulated": None, "max_processing_gap_s": None,
        "as_of_ts": REBALANCE_START + dt.timedelta(seconds=30)}
    write_rows(root, REBALANCES, "prod", [open_version])
    write_rows(root, REBALANCES, "prod", [{
        "group_id": "orders-svc", "start_ts": REBALANCE_START, "end_ts": REBALANCE_END, "duration_s": 60.0,
        "cause": "session_timeout", "source": "sweeps", "generation_before": 7, "generation_after": 8,
        "members_before": ["m-a", "m-b"], "members_after": ["m-a"], "partitions_moved": 2, "bound_s": 13.0,
        "observed_over_bound": 60.0 / 13.0, "messages_accumulated": accumulated,
        "max_processing_gap_s": 75.0, "as_of_ts": END}])
    key = "{kind}|prod|orders-svc|orders|{p}|{ts}"
    write_rows(root, ANOMALIES, "prod", [  # the skip as first written, open: superseded below
        {"group_id": "orders-svc", "topic": "orders", "partition": 2, "kind": "skip", "start_ts": SKIP_AT,
         "end_ts": None, "severity": "warning", "magnitude": 1.0, "unit": "messages", "detail": "open",
         "key": key.format(kind="skip", p=2, ts=SKIP_AT.isoformat()), "as_of_ts": SKIP_AT}])
    write_rows(root, ANOMALIES, "prod", [
        {"group_id": "orders-svc", "topic": "orders", "partition": 1, "kind": "rewind", "start_ts": REWIND_AT,
         "end_ts": REWIND_AT, "severity": "warning", "magnitude": float(REWIND_BY), "unit": "messages",
         "detail": f"committed offset went back {REWIND_BY} messages", "as_of_ts": END,
         "key": key.format(kind="rewind", p=1, ts=REWIND_AT.isoformat())},
        {"group_id": "orders-svc", "topic": "orders", "partition": 2, "kind": "skip", "start_ts": SKIP_AT,
         "end_ts": SKIP_AT, "severity": "critical", "magnitude": float(out.skipped), "unit": "messages",
         "detail": f"committed offset jumped to the log end: {out.skipped} messages never processed",
         "key": key.format(kind="skip", p=2, ts=SKIP_AT.isoformat()), "as_of_ts": END},
        {"group_id": "orders-svc", "topic": None, "partition": None, "kind": "lag_growth",
         "start_ts": REBALANCE_END, "end_ts": None, "severity": "warning", "magnitude": 80.0,
         "unit": "messages/s", "detail": "lag grows by 80 messages/s", "key": "lag_growth|prod|orders-svc",
         "as_of_ts": END},
    ])
    # the analytics' advice for orders-svc as of END (its crash and rewind as part of a pattern);
    # an older step's advice (superseded: not current) and one for the retention (not a rebalance's)
    advice = {"group_id": "orders-svc", "measure": "outage_s", "unit": "s", "evidence_start_ts": START,
              "evidence_end_ts": REBALANCE_END, "confidence": "medium"}
    write_rows(root, ADVICE, "prod", [
        {**advice, "rule": "session_timeout_crash", "setting": "session.timeout.ms", "current_value": None,
         "suggested": "stale", "evidence": "older", "evidence_count": 2, "as_of_ts": END - dt.timedelta(minutes=1)},
    ], date=END.date())
    write_rows(root, ADVICE, "prod", [
        {**advice, "rule": "session_timeout_crash", "setting": "session.timeout.ms",
         "current_value": "session.timeout.ms=45000", "suggested": "session.timeout.ms=10000 with "
         "heartbeat.interval.ms ≤ 3000", "expected_effect": "outages of ~73 s would shrink to ~38 s",
         "current_amount": 73.0, "expected_amount": 38.0, "evidence": "3 members timed out in 1 day",
         "evidence_count": 3, "as_of_ts": END},
        {**advice, "rule": "retention_vs_catchup", "setting": "retention.ms", "current_value": None,
         "suggested": "retention.ms ≥ 7200000", "expected_effect": None, "measure": "retention_headroom_s",
         "current_amount": 600.0, "expected_amount": 7200.0, "evidence": "2 minutes at risk",
         "evidence_count": 2, "confidence": "low", "as_of_ts": END},
    ], date=END.date())



def upload(root: Path, store: Any) -> int:
    """The fixture lake under ``root`` put into a bucket (:func:`helpers.s3server.put_tree`)."""
    from helpers.s3server import put_tree

    return put_tree(root, store)
