"""benchmarks/advice_effect.py's appliers (no broker): an advice row's suggestion applied to every
member of the scenario's group, chosen by the setting the row names — restart_storm names
group.instance.id or partition.assignment.strategy."""

from __future__ import annotations

from types import ModuleType

import pytest
from helpers.benchmarks import load_benchmark

from lagscope.devtools.sim.runner import load_scenario


@pytest.fixture(scope="module")
def effect() -> ModuleType:
    load_benchmark("rebalance_accuracy")  # advice_effect imports it by name
    return load_benchmark("advice_effect")


def _readers(sc: object) -> list:  # type: ignore[type-arg]
    (g,) = [g for g in sc.groups if g.name == "readers"]  # type: ignore[attr-defined]
    return g.members


def test_churn_advice_sets_the_assignor(effect: ModuleType) -> None:
    sc = load_scenario("rebalance-storm")
    suggested = "cooperative-sticky (or group.protocol=consumer, KIP-848, on brokers ≥ 4.0)"
    changed = effect.applied(sc, "readers", suggested, "partition.assignment.strategy")
    assert [m.partition_assignment_strategy for m in _readers(changed)] == ["cooperative-sticky"] * 5
    # churn is not given static membership, and nothing else changes
    assert [m.group_instance_id for m in _readers(changed)] == [None] * 5
    assert [m.actions for m in _readers(changed)] == [m.actions for m in _readers(sc)]


def test_restart_advice_sets_static_membership(effect: ModuleType) -> None:
    sc = load_scenario("rolling-restart-storm")
    changed = effect.applied(sc, "readers", "static membership: a group.instance.id per consumer, session.timeout.ms "
                                            "above a restart's time", "group.instance.id")
    assert [m.group_instance_id for m in _readers(changed)] == ["c1", "c2", "c3", "c4"]
    assert [m.partition_assignment_strategy for m in _readers(changed)] == [None] * 4


def test_unreadable_or_unknown_advice_is_an_error(effect: ModuleType) -> None:
    sc = load_scenario("rebalance-storm")
    with pytest.raises(effect.AdviceUnreadable, match="no assignor"):
        effect.applied(sc, "readers", "something else", "partition.assignment.strategy")
    with pytest.raises(effect.AdviceUnreadable, match=r"cannot apply group\.protocol"):
        effect.applied(sc, "readers", "group.protocol=consumer (KIP-848)", "group.protocol")


def test_partition_pause_counts_revoked_partitions_until_reassigned(effect: ModuleType) -> None:
    from lagscope.devtools.sim.truth import Assign, Revoke, TruthIndex

    g, a, b = "g", ("t", 0), ("t", 1)
    records = [
        Assign(g, "m1", (a, b), 0.0),  # formation: no revocation, not a pause
        # eager: both revoked at 10, a back at 11 (m1), b at 12 (m2)
        Revoke(g, "m1", (a, b), 10.0, False, False), Assign(g, "m1", (a,), 11.0), Assign(g, "m2", (b,), 12.0),
        # cooperative: only b moves, 20 → 20.5
        Revoke(g, "m2", (b,), 20.0, False, False), Assign(g, "m1", (b,), 20.5),
        # the end of the run: never reassigned, not counted
        Revoke(g, "m1", (a, b), 30.0, False, True),
        Assign("other", "x", (a,), 31.0),
    ]
    (mean,) = effect.partition_pauses(TruthIndex(records), g)
    assert mean == (1.0 + 2.0 + 0.5) / 2
    assert effect.partition_pauses(TruthIndex([]), g) == []
