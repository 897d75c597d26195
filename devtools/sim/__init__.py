"""Scenario simulator: drives real producers and consumer groups, records ground truth.

    >>> from lagscope.devtools.sim import run_scenario, truth        # doctest: +SKIP
    >>> result = run_scenario("crash", "127.0.0.1:9092", "out/crash")
    >>> records = truth.load(result.truth_path)

See docs/simulator.md for the scenario file and the truth format.
"""

from lagscope.devtools.sim import truth
from lagscope.devtools.sim.model import Action, Burst, GroupSpec, MemberSpec, ProducerSpec, Scenario, TopicSpec
from lagscope.devtools.sim.runner import (
    RunNames,
    RunResult,
    ScenarioRun,
    builtin_scenarios,
    load_scenario,
    plan_names,
    run_scenario,
    start_scenario,
)

__all__ = [
    "Action",
    "Burst",
    "GroupSpec",
    "MemberSpec",
    "ProducerSpec",
    "RunNames",
    "RunResult",
    "Scenario",
    "ScenarioRun",
    "TopicSpec",
    "builtin_scenarios",
    "load_scenario",
    "plan_names",
    "run_scenario",
    "start_scenario",
    "truth",
]
