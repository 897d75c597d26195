"""The seed: what it varies in a scenario (times, rates, sends, keys), that the same seed gives
the same schedule, and that it is recorded in the truth. Pure Python, no broker."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from lagscope.devtools.sim import truth
from lagscope.devtools.sim.model import DEFAULT_SEED, ProducerSpec, Scenario, randomise
from lagscope.devtools.sim.runner import builtin_scenarios, load_scenario
from lagscope.devtools.sim.worker import _key_weights, _send_times


def _scenario(**over: Any) -> Scenario:
    d: dict[str, Any] = {
        "name": "s", "duration": 20,
        "topics": [{"name": "a", "partitions": 2}],
        "producers": [{"name": "p", "topic": "a", "rate": 40, "start": 2, "stop": 15,
                       "bursts": [{"at": 5, "count": 100}]}],
        "groups": [{"name": "g", "topics": ["a"], "members": [
            {"name": "m1", "actions": [{"kind": "stall", "at": 6, "duration": 2},
                                       {"kind": "rewind", "at": 9, "messages": 5}]},
            {"name": "m2", "join_at": 3, "actions": [{"kind": "crash", "at": 3.2}]}]}],
    }
    d.update(over)
    return Scenario.model_validate(d)


def test_the_same_seed_gives_the_same_schedule() -> None:
    sc = _scenario()
    assert randomise(sc, 5) == randomise(sc, 5)
    # a scenario that names no seed plays the default one: existing runs stay reproducible
    assert randomise(sc) == randomise(sc, DEFAULT_SEED)
    assert randomise(sc).seed == DEFAULT_SEED


def test_seeds_vary_times_and_rates_within_the_jitter() -> None:
    sc = _scenario()
    runs = [randomise(sc, s) for s in range(40)]
    rates = {r.producers[0].rate for r in runs}
    assert len(rates) > 30  # the seeds differ
    for r in runs:
        p = r.producers[0]
        assert 40 * 0.9 <= p.rate <= 40 * 1.1
        # one shift per producer: start, stop and burst move together
        shift = p.start - 2
        assert abs(shift) <= 0.5
        assert p.stop == pytest.approx(15 + shift)
        assert p.bursts[0].at == pytest.approx(5 + shift)
        m1, m2 = r.groups[0].members
        # one shift per member: its actions keep their order and spacing
        assert abs(m1.actions[0].at - 6) <= 0.5
        assert m1.actions[1].at - m1.actions[0].at == pytest.approx(3)
        assert m1.actions[0].duration == 2  # durations are the fault itself: unchanged
        assert m2.actions[0].at - m2.join_at == pytest.approx(0.2)
        # applied once: the result has no time or rate jitter left, only the sends'
        assert randomise(r, r.seed) == r


def test_shifted_times_stay_inside_the_run() -> None:
    # an action 0.05 s before the end and one at join_at: a shift may not move them out
    sc = _scenario(jitter={"times_s": 5}, groups=[{"name": "g", "topics": ["a"], "members": [
        {"name": "m1", "join_at": 1, "actions": [{"kind": "leave", "at": 19.9}]},
        {"name": "m2", "actions": [{"kind": "skip", "at": 0}]}]}])
    for s in range(30):
        r = randomise(sc, s)
        m1, m2 = r.groups[0].members
        assert 0 <= m1.join_at <= m1.actions[0].at < r.duration
        assert 0 <= m2.actions[0].at < r.duration
        assert m2.join_at == 0  # members there from the start stay there


def test_no_jitter_changes_nothing() -> None:
    sc = _scenario(jitter={"times_s": 0, "rates": 0, "sends": 0})
    r = randomise(sc, 9)
    assert r.producers == sc.producers
    assert r.groups == sc.groups


def test_builtin_scenarios_randomise() -> None:
    for name in builtin_scenarios():
        sc = load_scenario(name)
        assert randomise(sc, 3) == randomise(sc, 3)


def test_send_jitter_is_seeded_and_bounded() -> None:
    spec = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 10})
    plain = _send_times(spec, 100.0, 110.0)
    a = _send_times(spec, 100.0, 110.0, random.Random(1), 0.5)
    b = _send_times(spec, 100.0, 110.0, random.Random(1), 0.5)
    c = _send_times(spec, 100.0, 110.0, random.Random(2), 0.5)
    assert a == b
    assert a != c
    assert len(a) == len(plain) == 100
    # each send is late by at most half its interval (0.1 s)
    assert all(0 <= x - y <= 0.05 + 1e-9 for x, y in zip(a, plain, strict=True))


def test_ramp_cycle_and_pause() -> None:
    ramp = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 10, "ramp_to": 50})
    times = _send_times(ramp, 0.0, 10.0)
    # ∫ 10 → 50 over 10 s = 300 messages, the second half busier than the first
    assert len(times) == pytest.approx(300, abs=3)
    assert sum(t >= 5 for t in times) > 1.4 * sum(t < 5 for t in times)
    cycle = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 20, "cycle_s": 10,
                                         "cycle_amplitude": 1.0})
    times = _send_times(cycle, 0.0, 10.0)
    # a whole period of a sine averages to the base rate; the peak quarter is the busiest
    assert len(times) == pytest.approx(200, abs=4)
    peak = sum(1.25 <= t < 3.75 for t in times)
    trough = sum(6.25 <= t < 8.75 for t in times)
    assert peak > 5 * trough
    paused = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 10,
                                          "pauses": [{"at": 2, "duration": 3}],
                                          "bursts": [{"at": 3, "count": 50}, {"at": 6, "count": 5}]})
    times = _send_times(paused, 0.0, 10.0)
    assert not [t for t in times if 2.0 <= t < 5.0]  # the pause holds the burst back too
    assert len(times) == pytest.approx(70 + 5, abs=2)


def test_periodic_bursts() -> None:
    spec = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 0,
                                        "bursts": [{"at": 1, "count": 20, "every": 3}]})
    times = _send_times(spec, 0.0, 10.0)
    assert sorted(set(times)) == [1.0, 4.0, 7.0]
    assert len(times) == 60
    spec = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 0,
                                        "bursts": [{"at": 1, "count": 20, "every": 3, "repeat": 2}]})
    assert sorted(set(_send_times(spec, 0.0, 10.0))) == [1.0, 4.0]


def test_key_skew() -> None:
    even = ProducerSpec.model_validate({"name": "p", "topic": "a", "keys": 100})
    assert _key_weights(even) is None  # keys in turn
    skew = ProducerSpec.model_validate({"name": "p", "topic": "a", "keys": 100, "key_skew": 1.2})
    cum = _key_weights(skew)
    assert cum is not None
    assert len(cum) == 100
    # Zipf 1.2: the hottest key alone outweighs the coldest half
    assert cum[0] > cum[-1] - cum[49]
    with pytest.raises(ValueError, match="key_skew needs keys"):
        ProducerSpec.model_validate({"name": "p", "topic": "a", "key_skew": 1.0})


def test_the_seed_is_the_truths_first_line(tmp_path: Path) -> None:
    path = tmp_path / "truth.jsonl"
    truth.write_truth(path, [truth.Produce("t", 0, 0, 10.0), truth.RunInfo("s", 7, "abc", 9.5),
                             truth.EndState(20.0, (), ())])
    back = truth.load(path)
    assert back[0] == truth.RunInfo("s", 7, "abc", 9.5)
    ti = truth.TruthIndex(back)
    assert ti.run is not None
    assert ti.run.seed == 7
