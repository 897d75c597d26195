"""How long the group pass carries a rebalance outage into the next step (pure: no Spark)."""

from __future__ import annotations

import pyarrow as pa

from lagscope.analytics import groups


def _outages(ends_s: list[float]) -> pa.Table:
    return pa.table({"cluster": ["c"] * len(ends_s), "group_id": ["g"] * len(ends_s),
                     "q0_us": [int((e - 5) * 1e6) for e in ends_s], "q1_us": [int(e * 1e6) for e in ends_s]},
                    schema=groups.OUTAGE_SCHEMA)


def test_an_outage_is_carried_as_long_as_a_gap_it_explains_can_last() -> None:
    # the step's last sweep at 1,000 s; outages ended 100, 400 and 700 s before it. By default
    # (a gap ends within 300 s) the first only; with thresholds of 600 s a gap that began in the
    # second can still end in the next step, so it is carried too
    series = pa.table({"t": [0.0, 1000.0]})
    out = _outages([900.0, 600.0, 300.0])
    kept = groups._outage_state(out, series)
    assert kept.column("q1_us").to_pylist() == [900_000_000]
    kept = groups._outage_state(out, series, max(groups.OUTAGE_CARRY_S, min(600.0, 900.0) + 1.0))
    assert kept.column("q1_us").to_pylist() == [900_000_000, 600_000_000]
