"""The definitions of offset lag and lag in seconds (lagscope.lag): table-driven cases computed by
hand, the end-offset history's bounds, and properties over any history (hypothesis)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lagscope.lag import METHODS, EndOffsetHistory, brackets, lag_end, lag_seconds, offset_lag


def _nullable(values: list[int | None]) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[type-arg]
    return (np.array([0 if v is None else v for v in values], np.int64), np.array([v is not None for v in values]))


# (committed, hw, lso, read_committed) -> (end, on_lso, lag)
OFFSET_CASES = [
    ((100, 150, 150, False), (150, False, 50)),  # the high watermark
    ((150, 160, 150, True), (150, True, 0)),  # read_committed, open transaction: the LSO, caught up
    ((150, 160, 150, False), (160, False, 10)),  # the same partition read uncommitted: the HW
    ((140, 160, None, True), (160, False, 20)),  # LSO unknown: the HW rather than nothing
    ((170, 160, 160, False), (160, False, 0)),  # committed past the end: never negative
    ((None, 160, 160, False), (160, False, None)),  # no commit: no lag
    ((100, None, 90, False), (None, False, None)),  # HW unknown: a read_uncommitted group has no end
]


def test_offset_lag_and_its_end() -> None:
    c, c_ok = _nullable([a[0] for a, _ in OFFSET_CASES])
    hw, hw_ok = _nullable([a[1] for a, _ in OFFSET_CASES])
    lso, lso_ok = _nullable([a[2] for a, _ in OFFSET_CASES])
    end, end_ok, on_lso = lag_end(hw, hw_ok, lso, lso_ok, np.array([a[3] for a, _ in OFFSET_CASES]))
    lag, lag_ok = offset_lag(c, c_ok, end, end_ok)
    got = [(int(e) if eo else None, bool(lo), int(x) if xo else None)
           for e, eo, lo, x, xo in zip(end, end_ok, on_lso, lag, lag_ok, strict=True)]
    assert got == [want for _, want in OFFSET_CASES]


def _history(sweeps: list[tuple[float, int | None]], max_points: int = 100) -> EndOffsetHistory:
    h = EndOffsetHistory(max_points)
    for t, end in sweeps:
        h.observe(t, end)
    return h


def _seconds(h: EndOffsetHistory, committed: int, now: float, end: int,
             record_t: float = math.nan) -> tuple[float, bool, str | None]:
    """Lag in seconds of one group-partition, as the collector computes it."""
    found, e, tc, tp, ep = brackets([h], [committed])
    seconds, lower, method = lag_seconds(np.array([now]), np.array([max(0, end - committed)]), np.array([True]),
                                         np.array([committed]), np.array([record_t]), found, e, tc, tp, ep)
    m = int(method[0])
    return round(float(seconds[0]), 9), bool(lower[0]), METHODS[m - 1] if m else None


# sweeps: (time s, end offset)
STEADY: list[tuple[float, int | None]] = [(0.0, 0), (10.0, 100), (20.0, 200), (30.0, 300)]
BURSTY_IDLE: list[tuple[float, int | None]] = [(0.0, 50), (10.0, 50), (20.0, 50), (30.0, 80), (40.0, 80)]

SECONDS_CASES = [
    # caught up: 0, whatever the history
    (STEADY, 300, 30.0, (0.0, False, "zero")),
    # committed past the end (a truncation) is caught up too, never negative
    (STEADY, 350, 30.0, (0.0, False, "zero")),
    # message 250 is the 50th of the 100 written in (20, 30]: the middle of its share, 50.5/100
    # of the interval → written at 25.05 → 4.95 s behind at 30
    (STEADY, 250, 30.0, (4.95, False, "interpolated")),
    # a later "now" adds to the lag
    (STEADY, 250, 45.0, (19.95, False, "interpolated")),
    # message 100 did not exist at t=10 (the end was 100): the first of (10, 20] → 10.05
    (STEADY, 100, 30.0, (19.95, False, "interpolated")),
    # offset 0: the first message of (0, 10] → 0.05
    (STEADY, 0, 30.0, (29.95, False, "interpolated")),
    # idle topic: the end sat at 50 until t=20 and was 80 at t=30, so message 50 was written after
    # t=20 (never dated back into the idle spell): 20 + 0.5/30·10 → 19.83 s at t=40
    (BURSTY_IDLE, 50, 40.0, (40.0 - (20 + 0.5 / 30 * 10), False, "interpolated")),
    (BURSTY_IDLE, 65, 40.0, (40.0 - (20 + 15.5 / 30 * 10), False, "interpolated")),
    # before the history (the end was already 50 at t=0): at least 40 s, never extrapolated
    (BURSTY_IDLE, 10, 40.0, (40.0, True, "interpolated")),
]


@pytest.mark.parametrize(("sweeps", "committed", "now", "expected"), SECONDS_CASES)
def test_lag_seconds(sweeps: list[tuple[float, int | None]], committed: int, now: float,
                     expected: tuple[float, bool, str]) -> None:
    end = sweeps[-1][1]
    assert end is not None
    got = _seconds(_history(sweeps), committed, now, end)
    assert got == (pytest.approx(expected[0]), expected[1], expected[2])


def test_the_record_time_is_exact_and_wins_over_the_history() -> None:
    assert _seconds(_history(STEADY), 250, 30.0, 300, record_t=26.5) == (3.5, False, "exact")
    # a clock skew never makes it negative
    assert _seconds(_history(STEADY), 250, 30.0, 300, record_t=31.0) == (0.0, False, "exact")


def test_no_history_and_unknown_lag_give_no_value() -> None:
    assert _seconds(EndOffsetHistory(), 5, 10.0, 9)[2] is None
    found, e, tc, tp, ep = brackets([None], [5])
    _, _, method = lag_seconds(np.array([1.0]), np.array([0]), np.array([False]), np.array([5]), np.array([np.nan]),
                               found, e, tc, tp, ep)
    assert method.tolist() == [0]  # the offset lag is unknown (no end): so is the lag in seconds


def test_idle_sweeps_add_no_points() -> None:
    h = _history([(float(i), 7) for i in range(1000)], max_points=3)
    assert h.points == [(7, 0.0, 0.0, 7)]


def test_the_newest_points_are_kept() -> None:
    h = _history([(10.0 * i, end) for i, end in enumerate((10, 20, 30, 40))], max_points=3)
    assert [p[0] for p in h.points] == [20, 30, 40]
    # the oldest kept point still says the end rose from 10 (at t=0) to 20 (at t=10): offset 15 is
    # interpolated in it (0 + 5.5/10·10)
    assert _seconds(h, 15, 30.0, 40) == (24.5, False, "interpolated")
    # offset 5 was written before t=0 (the forgotten first point): "at least" 30 - 0
    assert _seconds(h, 5, 30.0, 40) == (30.0, True, "interpolated")


def test_an_end_that_goes_down_restarts_the_history() -> None:
    h = _history([(0.0, 1000), (10.0, 2000), (20.0, 5)])  # the topic re-created
    assert h.points == [(5, 20.0, 20.0, 5)]
    assert _seconds(h, 0, 20.0, 5) == (0.0, True, "interpolated")


def test_an_unknown_end_restarts_the_history() -> None:
    # the sweep at 20 could not read the end: what came before says nothing about what comes after
    h = _history([(0.0, 100), (10.0, 200), (20.0, None), (30.0, 300)])
    assert h.points == [(300, 30.0, 30.0, 300)]


def test_a_late_sweep_is_ignored() -> None:
    h = _history([(10.0, 100), (5.0, 50)])
    assert h.points == [(100, 10.0, 10.0, 100)]


def test_points_at_or_below_the_committed_offset_are_forgotten() -> None:
    h = _history(STEADY)
    h.forget_through(200)
    assert [p[0] for p in h.points] == [300]
    assert _seconds(h, 250, 30.0, 300) == (pytest.approx(4.95), False, "interpolated")


def test_at_least_one_point() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        EndOffsetHistory(max_points=0)


# successive sweeps: (seconds since the previous sweep, end offset growth)
steps = st.lists(st.tuples(st.floats(min_value=0.1, max_value=120), st.integers(min_value=0, max_value=10_000)),
                 min_size=1, max_size=40)


def _grown(points: list[tuple[float, int]], max_points: int) -> tuple[EndOffsetHistory, float, int]:
    h = EndOffsetHistory(max_points)
    t, end = 0.0, 1000
    h.observe(t, end)
    for dt_s, growth in points:
        t += dt_s
        end += growth
        h.observe(t, end)
    return h, t, end


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(min_value=0, max_value=500_000), st.integers(min_value=1, max_value=50),
       st.floats(min_value=0, max_value=600))
def test_never_negative_never_extrapolated(points: list[tuple[float, int]], committed: int, max_points: int,
                                           extra: float) -> None:
    h, last_t, end = _grown(points, max_points)
    now = last_t + extra
    seconds, lower, method = _seconds(h, committed, now, end)
    assert method is not None
    assert seconds >= 0
    # never older than the oldest remembered sweep time: no extrapolation
    assert seconds <= now - h.points[0][2] + 1e-6
    assert lower == (method == "interpolated" and committed < h.points[0][3])
    assert (method == "zero") == (committed >= end)


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(min_value=0, max_value=500_000), st.integers(min_value=0, max_value=50_000))
def test_a_consumer_further_behind_is_never_less_behind(points: list[tuple[float, int]], committed: int,
                                                        further: int) -> None:
    h, now, end = _grown(points, 1000)
    ahead = _seconds(h, committed, now, end)
    behind = _seconds(h, max(0, committed - further), now, end)
    assert behind[0] >= ahead[0] - 1e-9
