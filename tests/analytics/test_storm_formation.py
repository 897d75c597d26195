"""A group's formation is no rebalance storm (lagscope.analytics.groups, ``formation``): the
rebalances of a group growing from Empty, members only arriving, are reported as rebalance
windows (issue 28) but do not count toward a storm; the first rebalance that loses a member ends
the formation. One whole step (run_step) over member sweeps every 2 s, no Spark; and the per-group
pass against its Spark SQL statement (tests/analytics/spark_reference_groups.py) on the same
groups."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from analytics_builders import at, members_rows
from rebalance_cases import offsets

from lagscope.analytics.step import StepInputs, run_step
from lagscope.config import AnalyticsConfig
from lagscope.schema import TABLES

S = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30)


def _lake(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


def _sweeps(gens: list[tuple[int, int, list[str]]], until: int) -> list[tuple[Any, ...]]:
    """Sweeps every 2 s of the group's generations (``gens``: (from t, generation, members); no
    members: Empty); each member owns partitions 0 and 1 in turn."""
    sweeps: list[tuple[Any, ...]] = []
    for t in range(0, until + 1, 2):
        _, gen, ms = [g for g in gens if g[0] <= t][-1]
        if not ms:
            sweeps.append((t, "Empty", gen, []))
            continue
        sweeps.append((t, "Stable", gen, [(m, None, [p for p in (0, 1) if p % len(ms) == i])
                                          for i, m in enumerate(ms)]))
    return sweeps


def _step(gens: list[tuple[int, int, list[str]]], until: int = 120) -> tuple[list[dict[str, Any]],
                                                                              list[dict[str, Any]]]:
    """One step over the group's sweeps (:func:`_sweeps`): its rebalance windows and storms."""
    sweeps = _sweeps(gens, until)
    owners: dict[int, list[tuple[int, str | None]]] = {0: [(0, "m1")], 1: [(0, "m1")]}
    out = run_step(StepInputs(offsets=_lake("offsets", offsets("g", until, owners)),
                              members=_lake("members", members_rows(sweeps)), commits=None, group_events=None,
                              state={}), settings=S, as_of=at(1000), with_state=False)
    storms = [r for r in out.tables["anomalies"].to_pylist() if r["kind"] == "rebalance_storm"]
    return out.tables["rebalances"].to_pylist(), storms


FORMATION = [(0, 0, []), (4, 1, ["m1"]), (10, 2, ["m1", "m2"]), (16, 3, ["m1", "m2", "m3"]),
             (22, 4, ["m1", "m2", "m3", "m4"])]


def test_a_formation_alone_is_no_storm() -> None:
    # m1 arrives into the Empty group (no sweep window: an Empty sweep is not settled), then m2,
    # m3, m4 one after another: three rebalances within 20 s, members only arriving; each is a
    # rebalance window, none counts toward a storm (3 within 600 s would be one)
    rebalances, storms = _step(FORMATION)
    assert [(r["generation_before"], r["cause"]) for r in rebalances] == [(1, "join"), (2, "join"), (3, "join")]
    assert storms == []
    # the same joins into a group that was consuming before the data began (no Empty seen, its
    # generation before was not its first) are churn: a storm
    rebalances, storms = _step([(0, 11, ["m1"]), *[(t, g + 10, ms) for t, g, ms in FORMATION[2:]]])
    assert len(rebalances) == 3
    assert [s["magnitude"] for s in storms] == [3.0]


def test_a_formation_then_churn_is_a_storm_counted_from_the_churn() -> None:
    # after the formation, m2 leaves, comes back, and m3 leaves: three rebalances of churn
    churn = [(40, 5, ["m1", "m3", "m4"]), (50, 6, ["m1", "m2", "m3", "m4"]), (60, 7, ["m1", "m2", "m4"])]
    rebalances, storms = _step(FORMATION + churn)
    assert len(rebalances) == 6
    (storm,) = storms
    assert storm["magnitude"] == 3.0  # the formation's three not among them
    first_churn = min(r["start_ts"] for r in rebalances if r["start_ts"] > at(30))
    assert storm["start_ts"] == first_churn
    # two rebalances of churn are no storm, whatever formation came before
    rebalances, storms = _step(FORMATION + churn[:2])
    assert len(rebalances) == 5
    assert storms == []


def test_a_join_after_a_loss_counts() -> None:
    # a member that left and one that joins after it: the group lost a member, so the formation
    # is over and the join that follows counts (a crash loop's restarts are churn)
    gens = [(0, 0, []), (4, 1, ["m1"]), (10, 2, ["m1", "m2"]), (16, 3, ["m1"]), (22, 4, ["m1", "m3"]),
            (28, 5, ["m1", "m3", "m4"])]
    rebalances, storms = _step(gens)
    assert len(rebalances) == 4
    (storm,) = storms
    assert storm["magnitude"] == 3.0  # m2's leave, m3's join, m4's join


def test_a_restart_of_every_member_after_the_group_went_empty() -> None:
    # the members leave one after another until the group is Empty, then arrive again: the
    # leaves interrupted a group that was consuming and count (m1's, and m2's in the window
    # through Empty, gen 6 → 8); the arrivals into the Empty group are a formation again (a new
    # start, as at the first) and do not (m2's arrival, gen 8 → 9)
    gens = [(0, 5, ["m1", "m2"]), (10, 6, ["m2"]), (16, 7, []), (22, 8, ["m1"]), (28, 9, ["m1", "m2"])]
    rebalances, storms = _step(gens)
    assert [(r["generation_before"], r["generation_after"]) for r in rebalances] == [(5, 6), (6, 8), (8, 9)]
    assert storms == []
    # a later loss ends the new formation: m2 leaves again, and that is the third
    rebalances, storms = _step([*gens, (40, 10, ["m1"])])
    assert [s["magnitude"] for s in storms] == [3.0]
    # the same restart without the group going Empty (a rolling restart: m1 leaves and is back,
    # then m2): four rebalances of a consuming group, a storm
    rolling = [(0, 5, ["m1", "m2"]), (10, 6, ["m2"]), (16, 7, ["m1", "m2"]), (22, 8, ["m1"]),
               (28, 9, ["m1", "m2"])]
    rebalances, storms = _step(rolling)
    assert len(rebalances) == 4
    (storm,) = storms
    assert storm["magnitude"] == 4.0


@pytest.mark.spark
def test_formation_equals_the_spark_statement(spark: Any) -> None:
    from test_groups import Step, compare, inputs, reference

    from lagscope.analytics import groups

    churn = [(40, 5, ["m1", "m3", "m4"]), (50, 6, ["m1", "m2", "m3", "m4"]), (60, 7, ["m1", "m2", "m4"])]
    cases = {
        "alone": FORMATION, "churn": FORMATION + churn,
        "loss": [(0, 0, []), (4, 1, ["m1"]), (10, 2, ["m1", "m2"]), (16, 3, ["m1"]), (22, 4, ["m1", "m3"]),
                 (28, 5, ["m1", "m3", "m4"])],
        "empty": [(0, 5, ["m1", "m2"]), (10, 6, ["m2"]), (16, 7, []), (22, 8, ["m1"]), (28, 9, ["m1", "m2"]),
                  (40, 10, ["m1"])],
        "before": [(0, 11, ["m1"]), *[(t, g + 10, ms) for t, g, ms in FORMATION[2:]]],
    }
    owners: dict[int, list[tuple[int, str | None]]] = {0: [(0, "m1")], 1: [(0, "m1")]}
    step = Step(members=[r for name, gens in cases.items() for r in members_rows(_sweeps(gens, 80), group=name)],
                offsets=[r for name in cases for r in offsets(name, 80, owners)])
    inp = inputs(step)
    out = groups.group_pass(inp, S)
    compare(out, reference(spark, inp, S))
    stormy = sorted(r["group_id"] for r in out.anomalies.to_pylist() if r["kind"] == "rebalance_storm")
    assert stormy == ["before", "churn", "empty", "loss"]
