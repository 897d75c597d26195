"""Builders for inline lake rows (analytics tests)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from lagscope.analytics.io import spark_schema

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    """T0 + seconds."""
    return T0 + dt.timedelta(seconds=seconds)


def offsets_rows(rows: Sequence[tuple[Any, ...]], *, group: str = "g", topic: str = "t",
                 partition: int = 0, owner: str | None = "m1", lag_basis: str = "hw",
                 **extra: Any) -> list[dict[str, Any]]:
    """Offsets rows from ``(t_seconds, committed, end[, log_start[, owner[, lso]]])`` tuples, their
    lag measured as the collector does against ``lag_basis`` ('hw' or 'lso')."""
    out = []
    for r in rows:
        t, committed, end = r[0], r[1], r[2]
        log_start = r[3] if len(r) > 3 else 0
        own = r[4] if len(r) > 4 else owner
        lso = r[5] if len(r) > 5 else end
        row = {
            "cluster": "c", "date": at(t).date().isoformat(), "sweep_ts": at(t), "group_id": group, "topic": topic,
            "partition": partition, "committed_offset": committed, "log_start_offset": log_start,
            "log_end_offset": end, "last_stable_offset": lso, "member_id": own, "group_state": "Stable",
            "lag": None if committed is None else max(0, (lso if lag_basis == "lso" else end) - committed),
            "lag_basis": lag_basis,
        }
        row.update(extra)
        out.append(row)
    return out


def offsets_df(spark: SparkSession, rows: Sequence[tuple[Any, ...]], *, group: str = "g", topic: str = "t",
               partition: int = 0, owner: str | None = "m1", **extra: Any) -> DataFrame:
    """One series as an offsets DataFrame (see :func:`offsets_rows`)."""
    return cases_df(spark, [offsets_rows(rows, group=group, topic=topic, partition=partition, owner=owner,
                                         **extra)])


def cases_df(spark: SparkSession, cases: Sequence[list[dict[str, Any]]]) -> DataFrame:
    """Several cases' offsets rows as one DataFrame (one Spark job checks a whole table)."""
    return spark.createDataFrame([r for case in cases for r in case], spark_schema("offsets"))


def members_rows(sweeps: Sequence[tuple[Any, ...]], *, group: str = "g") -> list[dict[str, Any]]:
    """Members rows from ``(t_seconds, state, generation, [(member_id, instance_id, [partitions])…])``
    (topic ``t``); a sweep with no members gets one row with null member."""
    out = []
    for t, state, gen, members in sweeps:
        base = {"cluster": "c", "date": at(t).date().isoformat(), "sweep_ts": at(t), "group_id": group,
                "group_state": state, "generation": gen, "protocol_type": "consumer"}
        if not members:
            out.append({**base, "member_id": None, "assignment": []})
        for mid, iid, parts in members:
            out.append({**base, "member_id": mid, "group_instance_id": iid,
                        "assignment": [{"topic": "t", "partition": p} for p in parts]})
    return out


def members_df(spark: SparkSession, cases: Sequence[list[dict[str, Any]]]) -> DataFrame:
    return spark.createDataFrame([r for case in cases for r in case], spark_schema("members"))


def write_stall_lake(root: Path) -> None:
    """A lake (``root``, written as the collector writes) of two partitions, sweeps every 10 s for
    4 minutes. Partition 0 keeps up (5 behind); partition 1 stalls from t=90 to t=150 (across the
    2-minute step boundary), then catches up. Each has its own member (m1 owns 0, m2 owns 1): m2
    makes no progress anywhere, a stall (had m1 owned both, its progress on partition 0 would make
    partition 1 starved)."""
    from lagscope.lake import write_rows
    from lagscope.schema import MEMBERS, OFFSETS

    drop = {"cluster", "date"}
    for t in range(0, 240, 10):
        rows: list[dict[str, Any]] = []
        rows += offsets_rows([(t, max(0, 10 * t - 5), 10 * t)], partition=0)
        # stalled at 795 for t = 90…150, then catching up at 20/s (200 per sweep)
        c1 = max(0, 10 * t - 5) if t <= 80 else 795 if t <= 150 else min(10 * t - 5, 795 + 20 * (t - 150))
        rows += offsets_rows([(t, c1, 10 * t)], partition=1, owner="m2")
        write_rows(root, OFFSETS, "c", [{k: v for k, v in r.items() if k not in drop} for r in rows])
        mem = members_rows([(t, "Stable", 1, [("m1", None, [0]), ("m2", None, [1])])])
        write_rows(root, MEMBERS, "c", [{k: v for k, v in r.items() if k not in drop} for r in mem])
