"""benchmarks/advice_effect.py's appliers (no broker): an advice row's suggestion applied to every
member of the scenario's group, chosen by the setting the row names — restart_storm names
group.instance.id for a storm of restarts and partition.assignment.strategy for churn."""

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
    (exp,) = sc.expect_advice
    suggested = "cooperative-sticky (or group.protocol=consumer, KIP-848, on brokers ≥ 4.0)"
    changed = effect.applied(sc, "readers", suggested, exp.setting)
    assert [m.partition_assignment_strategy for m in _readers(changed)] == ["cooperative-sticky"] * 5
    # churn is not given static membership, and nothing else changes
    assert [m.group_instance_id for m in _readers(changed)] == [None] * 5
    assert [m.actions for m in _readers(changed)] == [m.actions for m in _readers(sc)]


def test_restart_advice_sets_static_membership(effect: ModuleType) -> None:
    sc = load_scenario("rolling-restart-storm")
    (exp,) = sc.expect_advice
    changed = effect.applied(sc, "readers", "static membership: a group.instance.id per consumer, session.timeout.ms "
                                            "above a restart's time", exp.setting)
    assert [m.group_instance_id for m in _readers(changed)] == ["c1", "c2", "c3", "c4"]
    assert [m.partition_assignment_strategy for m in _readers(changed)] == [None] * 4


def test_unreadable_or_unknown_advice_is_an_error(effect: ModuleType) -> None:
    sc = load_scenario("rebalance-storm")
    with pytest.raises(effect.AdviceUnreadable, match="no assignor"):
        effect.applied(sc, "readers", "something else", "partition.assignment.strategy")
    with pytest.raises(effect.AdviceUnreadable, match=r"cannot apply group\.protocol"):
        effect.applied(sc, "readers", "group.protocol=consumer (KIP-848)", "group.protocol")
