"""Properties of the time-lag estimate over any end-offset history (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lagscope.collector.timelag import EndOffsetHistory

# successive sweeps: (seconds since the previous sweep, end offset growth)
steps = st.lists(st.tuples(st.floats(min_value=0.1, max_value=120), st.integers(min_value=0, max_value=10_000)),
                 min_size=1, max_size=40)


def _history(points: list[tuple[float, int]], max_runs: int) -> tuple[EndOffsetHistory, float, int, int]:
    h = EndOffsetHistory(max_runs=max_runs)
    t, end, first_end = 0.0, 1000, 1000
    for dt_s, growth in points:
        t += dt_s
        end += growth
        h.observe(t, end)
    return h, t, end, first_end


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(min_value=0, max_value=500_000), st.integers(min_value=2, max_value=50),
       st.floats(min_value=0, max_value=600))
def test_never_negative_never_extrapolated(points: list[tuple[float, int]], committed: int, max_runs: int,
                                           extra: float) -> None:
    h, last_t, end, _ = _history(points, max_runs)
    now = last_t + extra
    est = h.estimate(committed, now)
    assert est is not None
    assert est.seconds >= 0
    # the estimate never goes beyond the oldest remembered point: no extrapolation
    assert est.seconds <= now - (last_t - h.span_seconds) + 1e-6
    # caught up exactly when the committed offset reached the latest end
    assert (est.method == "zero") == (committed >= end)


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(min_value=0, max_value=500_000), st.integers(min_value=0, max_value=50_000))
def test_a_consumer_further_behind_is_never_less_behind(points: list[tuple[float, int]], committed: int,
                                                        further: int) -> None:
    h, now, _, _ = _history(points, 1000)
    ahead = h.estimate(committed, now)
    behind = h.estimate(max(0, committed - further), now)
    assert ahead is not None
    assert behind is not None
    assert behind.seconds >= ahead.seconds - 1e-9
