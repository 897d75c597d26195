"""Pure processing of the app: commit steps, rebalance ownership and gaps, compare stats, exports."""

from __future__ import annotations

import datetime as dt
import io

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lagscope.app import processing

T0 = pd.Timestamp("2026-03-10T10:00:00Z")


def _ts(seconds: float) -> pd.Timestamp:
    return T0 + pd.Timedelta(seconds=seconds)


def test_commit_steps_finds_rewinds_and_gaps() -> None:
    history = pd.DataFrame({"ts": [_ts(s) for s in (0, 30, 60, 90, 120, 150)],
                            "committed_offset": [100, 200, 200, 150, 150, 400]})
    before = history.copy()
    steps = processing.commit_steps(history)
    pd.testing.assert_frame_equal(history, before)  # the input is not modified
    assert steps["committed_offset"].tolist() == [200, 150, 400]
    assert steps["kind"].tolist() == ["advance", "rewind", "advance"]
    assert steps["reprocessed"].tolist() == [0, 50, 0]  # 150..199 will be consumed again
    assert steps["gap_s"].tolist() == [30.0, 60.0, 60.0]  # 30 → 90: the repeated 200 is not a step


def test_commit_steps_of_nothing() -> None:
    empty = processing.commit_steps(pd.DataFrame({"ts": [], "committed_offset": []}))
    assert empty.empty
    assert "reprocessed" in empty.columns


def test_summary_takes_skips_from_anomalies() -> None:
    steps = processing.commit_steps(pd.DataFrame({"ts": [_ts(0), _ts(10), _ts(20)],
                                                  "committed_offset": [10, 5, 9000]}))
    anomalies = pd.DataFrame({"kind": ["skip", "commit_gap"], "magnitude": [8000.0, 300.0]})
    s = processing.summarize_commits(steps, anomalies)
    assert (s.changes, s.rewinds, s.reprocessed, s.skips, s.never_processed) == (2, 1, 5, 1, 8000)
    assert s.longest_gap_s == 10.0


def _offsets(rows: list[tuple[float, str, int, str | None, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["sweep_s", "topic", "partition", "member_id", "lag"]).assign(
        sweep_ts=lambda d: [_ts(s) for s in d["sweep_s"]], client_id=None, host=None)


def test_ownership_before_and_after_a_window() -> None:
    offsets = _offsets([(0, "t", 0, "a", 0), (0, "t", 1, "b", 0),
                        (30, "t", 0, None, 10), (30, "t", 1, None, 10),
                        (60, "t", 0, "a", 40), (60, "t", 1, "a", 30)])
    change = processing.ownership_change(processing.ownership_at(offsets, _ts(10), before=True),
                                         processing.ownership_at(offsets, _ts(50), before=False))
    assert change[["partition", "owner_before", "owner_after", "moved"]].values.tolist() == [
        [0, "a", "a", False], [1, "b", "a", True]]
    acc = processing.accumulated_during(offsets, _ts(10), _ts(50))
    assert dict(zip(acc["partition"], acc["accumulated"], strict=True)) == {0: 40, 1: 30}


def test_processing_gap_per_partition() -> None:
    commits = pd.DataFrame({
        "ts": [_ts(s) for s in (0, 10, 20, 100, 0, 10, 20)],
        "topic": ["t"] * 7, "partition": [0, 0, 0, 0, 1, 1, 1],
        "committed_offset": [1, 2, 2, 9, 1, 2, 2]})
    gaps = processing.processing_gaps(commits, _ts(15), _ts(60))
    # partition 0: last advance 10 s, resumed 100 s → 90 s; partition 1 never resumed (open to the data end)
    assert gaps[["partition", "gap_s", "open"]].values.tolist() == [[0, 90.0, False], [1, 90.0, True]]


def test_window_stats() -> None:
    series = pd.DataFrame({"lag_last": [10, 30], "lag_max": [12, 40], "lag_seconds": [1.0, 4.0],
                           "consume_rate": [5.0, 7.0], "produce_rate": [6.0, 6.0]})
    rb = pd.DataFrame({"duration_s": [20.0, None]})
    s = processing.window_stats(series, rb, pd.DataFrame({"kind": ["stall"]}))
    assert (s.max_lag, s.mean_lag, s.max_lag_seconds, s.mean_consume_rate) == (40, 20.0, 4.0, 6.0)
    assert (s.rebalances, s.rebalance_seconds, s.anomalies) == (2, 20.0, 1)


@pytest.mark.parametrize(("seconds", "text"), [
    (None, "—"), (float("nan"), "—"),  # unknown
    (3.25, "3.2s"), (42.0, "42s"),  # short durations keep precision below 10 s
    (3725.0, "1h 2m 5s"), (90061.0, "1d 1h 1m"),  # days drop the seconds
    (float("inf"), "∞"),
])
def test_format_duration(seconds: float | None, text: str) -> None:
    assert processing.format_duration(seconds) == text


def test_exports_round_trip() -> None:
    df = pd.DataFrame({"ts": [T0], "group_id": ["g"], "lag": [5], "members": [["a", "b"]]})
    assert pq.read_table(io.BytesIO(processing.to_parquet_bytes(df))).to_pylist() == [
        {"ts": dt.datetime(2026, 3, 10, 10, 0, tzinfo=dt.UTC), "group_id": "g", "lag": 5, "members": ["a", "b"]}]
    csv = processing.to_csv_bytes(df).decode().splitlines()
    assert csv[0] == "ts,group_id,lag,members"
    assert csv[1].startswith("2026-03-10T10:00:00.000000Z,g,5,")


@pytest.mark.parametrize(("cause", "expected"), [
    # a timed-out member: the crash advice; rewinds and an eager group's stop follow any rebalance
    ("session_timeout", ["session_timeout_crash", "eager_large_group", "rewind_after_rebalance"]),
    # a removal for max.poll.interval.ms: the interval's advice
    ("max_poll_interval", ["eager_large_group", "max_poll_interval", "rewind_after_rebalance"]),
    # joins and leaves: the restart storm's
    ("join", ["eager_large_group", "restart_storm", "rewind_after_rebalance"]),
    # an unknown cause: only what follows any rebalance
    (None, ["eager_large_group", "rewind_after_rebalance"]),
])
def test_advice_for_cause(cause: str | None, expected: list[str]) -> None:
    from lagscope.app.processing import advice_for_cause

    advice = pd.DataFrame({"rule": ["eager_large_group", "max_poll_interval", "restart_storm",
                                    "retention_vs_catchup", "rewind_after_rebalance", "session_timeout_crash"]})
    got = advice_for_cause(advice, cause)
    assert sorted(got["rule"]) == sorted(expected)
    assert len(advice) == 6  # the input is not changed
