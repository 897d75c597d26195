"""The time-lag estimate over the end-offset history (pure; table-driven)."""

from __future__ import annotations

import pytest

from lagscope.collector.timelag import EndOffsetHistory, TimeLag

# history: (time s, end offset) points observed by successive sweeps
STEADY = [(0.0, 0), (10.0, 100), (20.0, 200), (30.0, 300)]
BURSTY_IDLE = [(0.0, 50), (10.0, 50), (20.0, 50), (30.0, 80), (40.0, 80)]

CASES = [
    # caught up: committed == latest end → 0, whatever the history
    (STEADY, 300, 30.0, TimeLag(0.0, False, "zero")),
    # committed beyond the end (after a truncation) is caught up too, never negative
    (STEADY, 350, 30.0, TimeLag(0.0, False, "zero")),
    # end was 250 half-way between t=20 (200) and t=30 (300): 25 → 5 s behind at t=30
    (STEADY, 250, 30.0, TimeLag(5.0, False, "interpolated")),
    # exactly on a point: end was 100 at t=10 → 20 s behind
    (STEADY, 100, 30.0, TimeLag(20.0, False, "interpolated")),
    # "now" later than the last sweep adds to the lag
    (STEADY, 250, 45.0, TimeLag(20.0, False, "interpolated")),
    # offset 0 equals the oldest end: the end was 0 at t=0 → 30 s
    (STEADY, 0, 30.0, TimeLag(30.0, False, "interpolated")),
    # idle topic: end sat at 50 from t=0 to t=20, then jumped to 80 by t=30.
    # message 50 appeared after t=20 (the last time the end was still 50), not at t=0:
    # 50 is the start of the jump → t=20 → 20 s at t=40 (never the 40 s an idle-blind method gives)
    (BURSTY_IDLE, 50, 40.0, TimeLag(20.0, False, "interpolated")),
    # inside the jump: 65 is half-way from 50 (t=20) to 80 (t=30) → t=25 → 15 s
    (BURSTY_IDLE, 65, 40.0, TimeLag(15.0, False, "interpolated")),
    # before the history: written before t=0, so at least 40 s — a lower bound, never extrapolated
    (BURSTY_IDLE, 10, 40.0, TimeLag(40.0, True, "lower_bound")),
]


@pytest.mark.parametrize(("points", "committed", "now", "expected"), CASES)
def test_estimate(points: list[tuple[float, int]], committed: int, now: float, expected: TimeLag) -> None:
    h = EndOffsetHistory(max_runs=100)
    for ts, end in points:
        h.observe(ts, end)
    assert h.estimate(committed, now) == expected


def test_empty_history_has_no_estimate() -> None:
    assert EndOffsetHistory().estimate(5, now=10.0) is None


def test_idle_runs_do_not_use_up_the_bound() -> None:
    h = EndOffsetHistory(max_runs=3)
    for i in range(1000):  # an idle partition: one run, whatever the number of sweeps
        h.observe(float(i), 7)
    assert len(h) == 1
    assert h.span_seconds == 999.0


def test_bounded_history_forgets_oldest_changes() -> None:
    h = EndOffsetHistory(max_runs=3)
    for i, end in enumerate((10, 20, 30, 40)):
        h.observe(10.0 * i, end)
    assert len(h) == 3
    # 10 was forgotten: offset 15 now lies before the history (end 20 first seen at t=10)
    assert h.estimate(15, now=30.0) == TimeLag(20.0, True, "lower_bound")


def test_end_going_backwards_restarts_history() -> None:
    h = EndOffsetHistory()
    h.observe(0.0, 1000)
    h.observe(10.0, 2000)
    h.observe(20.0, 5)  # topic re-created
    assert len(h) == 1
    assert h.estimate(0, now=20.0) == TimeLag(0.0, True, "lower_bound")


def test_out_of_order_point_is_ignored() -> None:
    h = EndOffsetHistory()
    h.observe(10.0, 100)
    h.observe(5.0, 50)  # a late sweep result
    assert h.estimate(50, now=10.0) == TimeLag(0.0, True, "lower_bound")


def test_max_runs_must_allow_interpolation() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        EndOffsetHistory(max_runs=1)
