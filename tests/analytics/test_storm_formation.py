"""A group's formation is no rebalance storm (lagscope.analytics.groups, ``formation``): the
rebalances of a group growing from Empty, members only arriving, are reported as rebalance
windows (issue 28) but do not count toward a storm; the first rebalance that loses a member ends
the formation. One whole step (run_step) over member sweeps every 2 s, no Spark; and the per-group
pass against its Spark SQL statement (tests/analytics/spark_reference_groups.py) on the same
groups."""

from __future__ import annotations

import itertools
from typing import Any

import pyarrow as pa
import pytest
from analytics_builders import at, members_rows
from rebalance_cases import member, offsets, record

from lagscope.analytics.step import StepInputs, run_step
from lagscope.config import AnalyticsConfig
from lagscope.schema import TABLES

S = AnalyticsConfig(session_timeout_s=10, heartbeat_s=1, network_s=1, rebalance_timeout_s=30)


def _lake(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema)


def _sweeps(gens: list[tuple[int, int | None, list[str]]], until: int) -> list[tuple[Any, ...]]:
    """Sweeps every 2 s of the group's generations (``gens``: (from t, generation, members); no
    members: Empty); each member owns partitions 0 and 1 in turn."""
    sweeps: list[tuple[Any, ...]] = []
    for t in range(0, until + 1, 2):
        seen = [g for g in gens if g[0] <= t]
        if not seen:  # the group is not there yet (no sweep lists it)
            continue
        _, gen, ms = seen[-1]
        if not ms:
            sweeps.append((t, "Empty", gen, []))
            continue
        sweeps.append((t, "Stable", gen, [(m, None, [p for p in (0, 1) if p % len(ms) == i])
                                          for i, m in enumerate(ms)]))
    return sweeps


def _step(gens: list[tuple[int, int | None, list[str]]], until: int = 120,
          records: list[tuple[float, int, list[str]]] | None = None) -> tuple[list[dict[str, Any]],
                                                                            list[dict[str, Any]]]:
    """One step over the group's sweeps (:func:`_sweeps`): its rebalance windows and storms;
    ``records``: the commit stream's generation records (time, generation, members)."""
    sweeps = _sweeps(gens, until)
    owners: dict[int, list[tuple[int, str | None]]] = {0: [(0, "m1")], 1: [(0, "m1")]}
    events = None if records is None else _lake("group_events", [
        record("g", t, gen, [member(m) for m in ms]) for t, gen, ms in records])
    out = run_step(StepInputs(offsets=_lake("offsets", offsets("g", until, owners)),
                              members=_lake("members", members_rows(sweeps)), commits=None, group_events=events,
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


# the built-in demo's false storm (CI, 2026-11-28): the group forms in view, but its first settled
# sweep already shows generation 2; its members rejoin twice (the same two, nothing moved: the
# consumers' metadata of a new topic), and one crashes 16 s later. The rejoins are the formation:
# only the crash counts
SEEN_PAST_FIRST = [(6, 2, ["m1", "m2"]), (12, 3, ["m1", "m2"]), (14, 4, ["m1", "m2"]), (30, 5, ["m1"])]


def test_a_formation_the_sweeps_first_see_past_its_first_generation_is_no_storm() -> None:
    # seen forming by the sweeps: Empty until 4, then generation 2 with both members
    rebalances, storms = _step([(0, 0, []), *SEEN_PAST_FIRST])
    assert [(r["generation_before"], r["generation_after"]) for r in rebalances] == [(2, 3), (3, 4), (4, 5)]
    assert storms == []
    # seen by a classic group's sweeps (DescribeGroups reports no generation: the same members'
    # new generations are seen in the commit stream's records only) and the records: the first
    # sweep at 6 (both members), generation 1 (m1 alone) and 2 before it. Every generation is a
    # rebalance window; the formation's are 1 → 2 and the two rejoins
    classic = [(t, None, ms) for t, _, ms in SEEN_PAST_FIRST]
    records = [(1.0, 1, ["m1"]), (3.0, 2, ["m1", "m2"]), (11.0, 3, ["m1", "m2"]), (13.5, 4, ["m1", "m2"]),
               (29.0, 5, ["m1"])]
    rebalances, storms = _step(classic, records=records)
    assert [(r["generation_before"], r["generation_after"]) for r in rebalances] == [(1, 2), (2, 3), (3, 4), (4, 5)]
    assert storms == []
    # a member lost between generation 1 and 2: that rebalance and all after it count
    lost = [(1.0, 1, ["m1", "m3"]), *records[1:]]
    _, storms = _step(classic, records=lost)
    assert [s["magnitude"] for s in storms] == [4.0]
    # nothing shows the group forming (no Empty sweep, no generation-1 record): the rejoins of a
    # group that was consuming are churn, and with the crash a storm
    _, storms = _step(SEEN_PAST_FIRST)
    assert [s["magnitude"] for s in storms] == [3.0]
    _, storms = _step(classic, records=records[1:])
    assert [s["magnitude"] for s in storms] == [3.0]
    # a broker stores no record of a generation that a later join replaced before its sync: the
    # records go from the group's creation (generation 0, no member) straight to generation 2
    # (CI, 2026-11-29: a rolling restart's group formed so, its late fourth member's join counted
    # toward the restarts' storm). The Empty record is the sight of the group forming, as an
    # Empty sweep is
    _, storms = _step(CREATED[0], records=CREATED[1])
    assert storms == []
    # and a member lost after it still ends the formation
    _, storms = _step(CREATED[0], records=[CREATED[1][0], (3.0, 2, ["m1", "m3"]), *CREATED[1][2:]])
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
    # classic groups (no generation in the sweeps) with the commit stream's records
    cases |= {"rec-empty": CLASSIC_EMPTY[0], "rec-loss": RECORD_LOSS[0], "rec-created": CREATED[0],
              "rec-created-loss": CREATED[0], "rec-through-empty": THROUGH_EMPTY[0]}
    created_loss = [CREATED[1][0], (3.0, 2, ["m1", "m3"]), *CREATED[1][2:]]
    events = [record(name, t, gen, [member(m) for m in ms]) for name, recs in (
        ("rec-empty", CLASSIC_EMPTY[1]), ("rec-loss", RECORD_LOSS[1]), ("rec-created", CREATED[1]),
        ("rec-created-loss", created_loss), ("rec-through-empty", THROUGH_EMPTY[1])) for t, gen, ms in recs]
    owners: dict[int, list[tuple[int, str | None]]] = {0: [(0, "m1")], 1: [(0, "m1")]}
    step = Step(members=[r for name, gens in cases.items() for r in members_rows(_sweeps(gens, 80), group=name)],
                offsets=[r for name in cases for r in offsets(name, 80, owners)], events=events)
    inp = inputs(step)
    out = groups.group_pass(inp, S)
    compare(out, reference(spark, inp, S))
    stormy = sorted(r["group_id"] for r in out.anomalies.to_pylist() if r["kind"] == "rebalance_storm")
    assert stormy == ["before", "churn", "empty", "loss", "rec-created-loss", "rec-loss"]


# a classic group the sweeps saw Empty, then always {m1}; its records (no generation 1 among them)
# show three same-member rejoins: the group is seen forming by the sweeps, at a record's A as at a
# sweep's: no storm
CLASSIC_EMPTY = ([(0, None, []), (2, None, ["m1"])],
                 [(1.0, 3, ["m1"]), (10.5, 4, ["m1"]), (12.5, 5, ["m1"]), (14.5, 6, ["m1"])])
# seen forming by the sweeps (Empty, then {m1, m2}, then m3 arrives), but the records show m2 lost
# and back between two sweeps: the loss, the rejoin after it and m3's join all count
RECORD_LOSS = ([(0, None, []), (2, None, ["m1", "m2"]), (20, None, ["m1", "m2", "m3"])],
               [(1.0, 2, ["m1", "m2"]), (11.0, 3, ["m1"]), (11.8, 4, ["m1", "m2"]), (19.0, 5, ["m1", "m2", "m3"])])


# a classic group the sweeps first see with both members; its records start at its creation
# (generation 0, no member), then generation 2 (a join replaced generation 1 before its sync)
CREATED = ([(t, None, ms) for t, _, ms in SEEN_PAST_FIRST],
           [(0.5, 0, []), (3.0, 2, ["m1", "m2"]), (11.0, 3, ["m1", "m2"]), (13.5, 4, ["m1", "m2"]),
            (29.0, 5, ["m1"])])
# a classic group consuming before the data began (no formation in view); every member leaves
# between two sweeps (the records: generation 6 without a member), then m1 and m2 come back and
# rejoin twice: the window across the Empty record went through Empty, and what follows it only
# adds members: the formation again, no storm
THROUGH_EMPTY = ([(0, None, ["m1", "m2"]), (12, None, ["m1", "m2"])],
                 [(1.0, 5, ["m1", "m2"]), (9.0, 6, []), (10.0, 7, ["m1", "m2"]), (14.5, 8, ["m1", "m2"]),
                  (16.5, 9, ["m1", "m2"])])


def test_an_empty_generation_record_is_a_sight_of_the_group_forming() -> None:
    rebalances, storms = _step(THROUGH_EMPTY[0], records=THROUGH_EMPTY[1])
    assert [(r["generation_before"], r["generation_after"]) for r in rebalances] == [(5, 7), (7, 8), (8, 9)]
    assert storms == []
    # the same rejoins with the members never gone (no Empty record): churn, a storm
    rebalances, storms = _step(THROUGH_EMPTY[0], records=[r for r in THROUGH_EMPTY[1] if r[2]])
    assert [s["magnitude"] for s in storms] == [float(len(rebalances))]


def test_a_loss_only_the_records_saw_ends_a_formation_the_sweeps_saw() -> None:
    rebalances, storms = _step(RECORD_LOSS[0], records=RECORD_LOSS[1])
    assert [(r["generation_before"], r["generation_after"]) for r in rebalances] == [(2, 3), (3, 4), (4, 5)]
    assert [s["magnitude"] for s in storms] == [3.0]
    _, storms = _step(CLASSIC_EMPTY[0], records=CLASSIC_EMPTY[1])
    assert storms == []


def test_the_carried_empty_sweep_says_nothing_of_the_time_before_the_settled_one() -> None:
    # the state carries the Empty sweep a group forms from, the sweeps between it and the last
    # settled one dropped: a later step must not read the group as rebalancing in between (the
    # held stalls' release, the skips' membership), as one pass does not
    import numpy as np
    from test_groups import Step, inputs, lake

    from lagscope.analytics import groups

    sweeps = _sweeps([(0, 0, []), (2, 1, ["m1"])], 58)
    first = groups.group_pass(inputs(Step(members=members_rows(sweeps), offsets=[])), S)
    carried = first.msweeps.to_pylist()
    assert [(r["t"] - at(0).timestamp(), r["group_state"]) for r in carried] == [(0.0, "Empty"), (58.0, "Stable")]
    later = members_rows(_sweeps([(0, 1, ["m1"])], 62))[-2:]  # the next step's sweeps, 60 and 62
    sw = groups._sorted_sweeps(groups.member_sweeps(lake("members", later)), first.msweeps)
    seen = groups._seen_sweeps(sw, groups._changes(sw, S.rules.forget_horizon_s()))
    assert [r["group_state"] for r in seen.ms.to_pylist()] == ["Stable"] * 3  # 58, 60, 62
    t30 = np.array([at(30).timestamp()])
    key = groups._gkey(sw.ms).unique()
    assert groups._rebalancing_until(seen, key, t30, t30 + 100)[0] == t30[0]  # settled then, as in one pass
    assert groups._rebalancing_until(sw, key, t30, t30 + 100)[0] != t30[0]  # what the Empty sweep alone says


def _storms_in_steps(gens: list[tuple[int, int | None, list[str]]], cuts: list[int], until: int = 120,
                     records: list[tuple[float, int, list[str]]] | None = None) -> list[tuple[Any, ...]]:
    """The storms a reader sees of steps over ``[0, cut₁), [cut₁, cut₂), …, [cutₙ, until]`` with
    the state carried (the group events read whole, as a step reads its days')."""
    owners: dict[int, list[tuple[int, str | None]]] = {0: [(0, "m1")], 1: [(0, "m1")]}
    off, mem = offsets("g", until, owners), members_rows(_sweeps(gens, until))
    events = None if records is None else _lake("group_events", [
        record("g", t, gen, [member(m) for m in ms]) for t, gen, ms in records])
    seen: dict[Any, tuple[Any, ...]] = {}
    state: dict[str, pa.Table] = {}
    bounds = [0, *cuts, until + 1]
    for lo, hi in itertools.pairwise(bounds):
        def part(rows: list[dict[str, Any]], lo: int = lo, hi: int = hi) -> list[dict[str, Any]]:
            return [r for r in rows if at(lo) <= r["sweep_ts"] < at(hi)]
        out = run_step(StepInputs(offsets=_lake("offsets", part(off)), members=_lake("members", part(mem)),
                                  commits=None, group_events=events, state=state), settings=S, as_of=at(hi))
        state = out.state
        for r in out.tables["anomalies"].to_pylist():
            if r["kind"] == "rebalance_storm":
                seen[r["key"]] = (r["start_ts"], r["magnitude"])
    return sorted(seen.values())


@pytest.mark.parametrize("cut", [7, 12, 17, 25])
def test_a_formation_split_across_steps_is_the_formation_of_one_pass(cut: int) -> None:
    # the state carries the Empty sweep the formation started from while the group still forms
    # (the sweeps alone), and a step reads its days' records whole: wherever a step boundary
    # falls, the joins are the formation and the churn after it is counted as in one pass
    crash = [(30, 5, ["m1", "m2", "m4"])]
    assert _storms_in_steps(FORMATION + crash, [cut]) == _storms_in_steps(FORMATION + crash, []) == []
    churn = [*FORMATION, (40, 5, ["m1", "m3", "m4"]), (50, 6, ["m1", "m2", "m3", "m4"]), (60, 7, ["m1", "m2", "m4"])]
    whole = _storms_in_steps(churn, [])
    assert [m for _, m in whole] == [3.0]
    assert _storms_in_steps(churn, [cut]) == whole
    classic = [(t, None, ms) for t, _, ms in SEEN_PAST_FIRST]
    records = [(1.0, 1, ["m1"]), (3.0, 2, ["m1", "m2"]), (11.0, 3, ["m1", "m2"]), (13.5, 4, ["m1", "m2"]),
               (29.0, 5, ["m1"])]
    assert _storms_in_steps(classic, [cut], records=records) == _storms_in_steps(classic, [], records=records) == []
