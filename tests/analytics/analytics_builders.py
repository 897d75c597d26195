"""Builders for inline lake rows (analytics tests)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
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
