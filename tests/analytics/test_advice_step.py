"""The advice table as a step publishes it: from lake rows through the passes to the ``advice``
result table, carried across steps in the state, published and read back through
``lagscope.results.current_advice`` — in process (``step.run_step`` and the analytics' own
publishing) and through Spark (``job.run_incremental``, two steps)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from analytics_builders import T0, at, members_rows, offsets_rows

from lagscope import results
from lagscope.analytics import step
from lagscope.analytics.io import Checkpoint, new_staging, publish_incremental, stage_arrow, write_checkpoint
from lagscope.config import AnalyticsConfig
from lagscope.lake import write_rows
from lagscope.results import inc_tag
from lagscope.schema import MEMBERS, OFFSETS, TABLES

#: sweeps every 2 s; session timeout 10 s, heartbeat 1 s, network 1 s (bound 12 s), rebalance timeout 30 s
S = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30)

SPLIT = [("m1", None, [0]), ("m2", None, [1])]
BOTH = [("m1", None, [0, 1])]


def _sweeps() -> list[tuple[Any, ...]]:
    """m2 crashes after its commit at 4 (removed at 16: session_timeout, 15 … 17), comes back as m3
    (join, 31 … 33), crashes again after 40 (removed at 52: 51 … 53) and comes back as m4
    (join, 63 … 65): two restarts of a dynamic member (m2, m3 and m4 are one consumer: the same
    client.id and host, :func:`_members`)."""
    out: list[tuple[Any, ...]] = []
    out += [(t, "Stable", 1, SPLIT) for t in range(0, 15, 2)]
    out += [(16, "PreparingRebalance", 1, [("m1", None, [0])])]
    out += [(t, "Stable", 2, BOTH) for t in range(18, 31, 2)]
    out += [(32, "PreparingRebalance", 2, BOTH)]
    out += [(t, "Stable", 3, [("m1", None, [0]), ("m3", None, [1])]) for t in range(34, 51, 2)]
    out += [(52, "PreparingRebalance", 3, [("m1", None, [0])])]
    out += [(t, "Stable", 4, BOTH) for t in range(54, 63, 2)]
    out += [(64, "PreparingRebalance", 4, BOTH)]
    out += [(t, "Stable", 5, [("m1", None, [0]), ("m4", None, [1])]) for t in range(66, 71, 2)]
    return out


#: member id → (client.id, host): m2, m3 and m4 are one consumer restarted
CLIENTS = {"m1": ("app-1", "/10.0.0.1"), "m2": ("app-2", "/10.0.0.2"), "m3": ("app-2", "/10.0.0.2"),
           "m4": ("app-2", "/10.0.0.2")}


def _members() -> list[dict[str, Any]]:
    rows = [r for s in _sweeps() for r in members_rows([s])]
    for r in rows:
        r["client_id"], r["host"] = CLIENTS.get(r["member_id"], (None, None))
    return rows


def _owner(p: int, t: int) -> str:
    if p == 0:
        return "m1"
    return "m2" if t < 18 else "m1" if t < 34 else "m3" if t < 54 else "m1" if t < 66 else "m4"


def _committed(p: int, t: int) -> int:
    """end = 5·t; partition 1 frozen while its member is gone (4 … 18, 40 … 54)."""
    if p == 1 and 4 <= t < 18:
        return 20
    if p == 1 and 40 <= t < 54:
        return 200
    return 5 * t


def _offsets(until: int = 70) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for p in (0, 1):
        rows += offsets_rows([(t, _committed(p, t), 5 * t, 0, _owner(p, t)) for t in range(0, until + 1, 2)],
                             partition=p)
    return rows


def _lake_table(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema).select(step.READ_COLUMNS[name])


def _expect(row: dict[str, Any]) -> None:
    # the two crashes were restarts: static membership; each restart cost the group two
    # rebalances of 2 s each (4 s); away 27 s (last progress 4 → back at 31) and 23 s (40 → 63):
    # median 25 s, session.timeout.ms ≥ 1.5 × 25 s
    assert row["group_id"] == "g"
    assert row["rule"] == "session_timeout_crash"
    assert row["setting"] == "group.instance.id"
    assert row["suggested"] == "static membership: a group.instance.id per consumer, session.timeout.ms ≥ 38000"
    assert row["measure"] == "group_stop_s"
    assert row["current_amount"] == pytest.approx(4.0)
    assert row["expected_amount"] == 0.0
    assert row["evidence_count"] == 2
    assert row["evidence_start_ts"] == at(15)
    assert row["evidence_end_ts"] == at(53)
    assert row["confidence"] == "low"  # the minimum, the session timeout assumed (no commit stream)


def test_a_step_publishes_advice_read_back(tmp_path: Path) -> None:
    members = _lake_table("members", _members())
    offsets = _lake_table("offsets", _offsets())
    first = step.run_step(step.StepInputs(
        offsets=offsets.filter(pa.compute.less(offsets.column("sweep_ts"), at(40))),
        members=members.filter(pa.compute.less(members.column("sweep_ts"), at(40))),
        commits=None, group_events=None, state={}), settings=S, as_of=at(40))
    # one crash so far: no advice, its evidence carried
    assert first.tables["advice"].num_rows == 0
    assert first.state["advice_evidence"].num_rows >= 1
    second = step.run_step(step.StepInputs(
        offsets=offsets.filter(pa.compute.greater_equal(offsets.column("sweep_ts"), at(40))),
        members=members.filter(pa.compute.greater_equal(members.column("sweep_ts"), at(40))),
        commits=None, group_events=None, state=first.state), settings=S, as_of=at(72))
    got = second.tables["advice"].to_pylist()
    assert len(got) == 1
    _expect(got[0])
    assert got[0]["as_of_ts"] == at(72)

    # published as the analytics publish an incremental step, read back as the app reads it
    staged = new_staging(tmp_path, "advice")
    stage_arrow(staged, "advice", second.tables["advice"])
    publish_incremental(tmp_path, {"advice": staged}, tag=inc_tag(at(40), at(72)))
    assert results.current_advice(tmp_path) == []  # not visible before the checkpoint moves
    write_checkpoint(tmp_path, Checkpoint(watermark=at(72).isoformat(), version="v-x"))
    read = results.current_advice(tmp_path, group="g")
    assert [r["rule"] for r in read] == ["session_timeout_crash"]
    assert read[0]["cluster"] == "c"
    # a later step that found no advice in the cluster: none is current
    write_checkpoint(tmp_path, Checkpoint(watermark=at(132).isoformat(), version="v-y"))
    assert results.current_advice(tmp_path) == []


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_spark_steps_publish_advice(spark: Any, tmp_path: Path) -> None:
    lake, out = tmp_path / "lake", tmp_path / "results"
    drop = {"cluster", "date"}
    write_rows(lake, OFFSETS, "c", [{k: v for k, v in r.items() if k not in drop} for r in _offsets()])
    write_rows(lake, MEMBERS, "c", [{k: v for k, v in r.items() if k not in drop} for r in _members()])
    from lagscope.analytics.job import run_incremental

    run_incremental(spark, lake, out, settings=S, since=T0, until=at(60))
    assert results.current_advice(out) == []  # one crash by then (the second window closes at 53, no restart yet)
    run_incremental(spark, lake, out, settings=S, until=at(120))
    got = results.current_advice(out)
    assert len(got) == 1
    _expect(got[0])
    assert got[0]["as_of_ts"] == at(120)
