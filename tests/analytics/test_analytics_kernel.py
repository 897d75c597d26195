"""The vectorised lag-seconds pass (lagscope.analytics.kernel) without Spark: hand-computed
rows, and random series against a row-by-row reference written from the definitions."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lagscope.analytics import kernel
from lagscope.analytics.kernel import HISTORY, LAG_SECONDS_IN, STATE, SWEEP, lag_seconds_batches, lag_seconds_table
from lagscope.lag import HISTORY_POINTS, METHODS

Row = tuple[float, int | None, int | None, int | None, float | None]  # t, committed, end, log_start, rec_t


@dataclass
class Key:
    h: int
    h2: int = 0
    history: list[tuple[int, float, float, int]] = field(default_factory=list)  # e, tc, tp, ep
    state: Row | None = None
    fresh: list[Row] = field(default_factory=list)


def _lag(c: int | None, e: int | None) -> int | None:
    # lagscope.lag.offset_lag: max(0, end − committed), null without a commit or an end
    return None if c is None or e is None else max(0, e - c)


def _table(keys: list[Key]) -> pa.Table:
    rows: list[dict[str, Any]] = []
    for k in sorted(keys, key=lambda k: (k.h, k.h2)):
        packed = (k.h2 + 2**31) * 4
        for e, tc, tp, ep in k.history:  # a point row: t = tc, end = e, committed = ep, rec_t = tp
            rows.append({"_h": k.h, "_k": packed + HISTORY, "t": tc, "end": e, "committed": ep, "rec_t": tp})
        series = ([(STATE, k.state)] if k.state else []) + [(SWEEP, r) for r in k.fresh]
        for kind, (t, c, e, ls, rec) in series:
            rows.append({"_h": k.h, "_k": packed + kind, "t": t, "committed": c, "end": e, "log_start": ls,
                         "rec_t": rec})
    return pa.Table.from_pylist(rows, schema=LAG_SECONDS_IN)


def _reference(k: Key, every_sweep: bool, history_points: int = HISTORY_POINTS) -> list[dict[str, Any]]:
    """Row by row, from the definitions (lagscope.lag and kernel.lag_seconds_table's docstring)."""
    series = ([k.state] if k.state else []) + list(k.fresh)
    n_state = len(series) - len(k.fresh)
    points = [(0, e, tc, tp, ep) for e, tc, tp, ep in k.history]  # (epoch, e, tc, tp, ep)
    epoch = 0
    info = []
    for i, (t, c, e, ls, _rec) in enumerate(series):
        prev = series[i - 1] if i else None
        de = e - prev[2] if prev and e is not None and prev[2] is not None else None
        dc = c - prev[1] if prev and c is not None and prev[1] is not None else None
        dls = ls - prev[3] if prev and ls is not None and prev[3] is not None else None
        dt = t - prev[0] if prev else None
        if e is None or (de is not None and de < 0):
            epoch += 1  # the history restarts where the end is unknown or went down
        first = prev is None or prev[2] is None or (de is not None and de < 0)
        if i >= n_state and e is not None and (first or de != 0):
            points.append((epoch, e, t, t if first else prev[0], e if first else prev[2]))  # type: ignore[index]
        info.append({"dt": dt, "de": de, "dc": dc, "dls": dls, "epoch": epoch, "points": len(points)})
    out = []
    fresh = list(range(n_state, len(series)))
    minutes: dict[int, list[int]] = {}
    for i in fresh:
        minutes.setdefault(math.floor(series[i][0] / 60), []).append(i)
    for minute, idx in minutes.items():
        counted = [i for i in idx if info[i]["dt"] is not None and info[i]["dt"] > 0]

        def rise(name: str, counted: list[int] = counted) -> int | None:
            return sum(max(info[i][name], 0) if info[i][name] is not None else 0 for i in counted) if counted else None

        lags = [_lag(series[i][1], series[i][2]) for i in idx]
        known = [x for x in lags if x is not None]
        totals = {"lag_max": max(known) if known else None, "minute_end_rise": rise("de"),
                  "minute_committed_rise": rise("dc"), "minute_log_start_rise": rise("dls"),
                  "minute_span_s": sum(info[i]["dt"] for i in counted) if counted else None}
        for i in (idx if every_sweep else idx[-1:]):
            t, c, e, ls, rec = series[i]
            lag = _lag(c, e)
            method: str | None = None
            lag_s: float | None = None
            lower: bool | None = None
            if lag == 0:
                method, lag_s, lower = "zero", 0.0, False
            elif lag is not None and rec is not None:
                method, lag_s, lower = "exact", max(0.0, t - rec), False
            elif lag is not None:
                # the history as of the row: its epoch's points so far, the newest history_points
                history = [p for p in points[:info[i]["points"]] if p[0] == info[i]["epoch"]][-history_points:]
                above = [p for p in history if p[1] > c]  # type: ignore[operator]
                if above:
                    _, pe, tc, tp, ep = min(above, key=lambda p: p[1])
                    inside = c >= ep  # type: ignore[operator]
                    est = tp + (c - ep + 0.5) / (pe - ep) * (tc - tp) if inside else tp  # type: ignore[operator]
                    method, lag_s, lower = "interpolated", max(0.0, t - est), not inside
            out.append({"_h": k.h, "_h2": k.h2, "t": t, "window_start": minute * 60, "committed": c, "end": e,
                        "log_start": ls, "lag": lag, **totals, "lag_s": lag_s, "lag_s_lower": lower,
                        "lag_s_method": method})
    return out


def _kernel_rows(tbl: pa.Table, every_sweep: bool, history_points: int = HISTORY_POINTS) -> list[dict[str, Any]]:
    got = []
    for r in lag_seconds_table(tbl, every_sweep=every_sweep, history_points=history_points).to_pylist():
        r["window_start"] = int(r["window_start"].timestamp())
        code = r.pop("lag_s_code")
        r["lag_s_method"] = METHODS[code - 1] if code else None
        # the sweep's timestamp, rebuilt from t to the microsecond
        assert r.pop("ts") == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=round(r["t"] * 1e6))
        got.append(r)
    return got


def _same(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        for name, v in w.items():
            if isinstance(v, float) and g[name] is not None:
                assert g[name] == pytest.approx(v, rel=1e-12, abs=1e-9), (name, g, w)
            else:
                assert g[name] == v, (name, g, w)


def test_hand_computed_minute_rows_with_state_and_history() -> None:
    # carried point: end 100 → 200 in (0, 10]; the state row (t=10) committed 150 of end 200;
    # the fresh sweep at t=70 still at 150: message 150 is the 50.5th of those 100, written at
    # 0 + 50.5/100·10 = 5.05 → 64.95 s behind; its minute's only interval is the 60 s from the
    # state row, with no rise of either offset
    k = Key(h=7, history=[(200, 10.0, 0.0, 100)], state=(10.0, 150, 200, 0, None), fresh=[(70.0, 150, 200, 0, None)])
    (row,) = _kernel_rows(_table([k]), every_sweep=False)
    assert row["lag"] == 50
    assert row["lag_s"] == pytest.approx(64.95)
    assert (row["lag_s_lower"], row["lag_s_method"]) == (False, "interpolated")
    assert (row["minute_span_s"], row["minute_end_rise"], row["minute_committed_rise"], row["lag_max"]) == (
        60.0, 0, 0, 50)


def test_a_point_at_the_committed_offset_does_not_bracket_it() -> None:
    # committed 200 and a point with e = 200: the message at 200 is not below that point's end
    # (e > c is needed), so the bracketing point is the next rise, 200 → 300 in (20, 30]
    k = Key(h=1, fresh=[(0.0, 100, 100, 0, None), (10.0, 150, 200, 0, None), (20.0, 190, 200, 0, None),
                        (30.0, 200, 300, 0, None)])
    (row,) = _kernel_rows(_table([k]), every_sweep=False)
    assert row["lag_s"] == pytest.approx(30 - (20 + 0.5 / 100 * 10))


def test_keys_with_the_same_64_bit_hash_stay_apart() -> None:
    # two keys whose 64-bit hashes collide, told apart by the second hash: each its own series
    a = Key(h=5, h2=1, fresh=[(0.0, 0, 10, 0, None), (10.0, 0, 20, 0, None)])
    b = Key(h=5, h2=2, fresh=[(0.0, 100, 100, 0, None), (10.0, 100, 100, 0, None)])
    got = _kernel_rows(_table([a, b]), every_sweep=False)
    _same(got, _reference(a, False) + _reference(b, False))
    assert [r["lag_s_method"] for r in got] == ["interpolated", "zero"]


def test_offsets_too_far_apart_for_one_combined_search() -> None:
    # two segments whose offsets span 2^61: the combined key would overflow, so each segment
    # is searched on its own, with the same answers
    big = 2**61
    a = Key(h=1, fresh=[(0.0, 0, 10, 0, None), (10.0, 5, big, 0, None), (20.0, 5, big + 10, 0, None)])
    b = Key(h=2, fresh=[(0.0, 0, 10, 0, None), (10.0, 5, 20, 0, None)])
    _same(_kernel_rows(_table([a, b]), every_sweep=True), _reference(a, True) + _reference(b, True))


def _random_key(rng: np.random.Generator, h: int) -> Key:
    """A series with the awkward parts: nulls, duplicated sweeps, an end that goes down,
    rewinds, exact produce times, a carried state row and carried points."""
    k = Key(h=h, h2=int(rng.integers(0, 3)))
    t = float(rng.integers(0, 300))
    end = int(rng.integers(0, 1000))
    committed = max(0, end - int(rng.integers(0, 50)))
    if rng.random() < 0.4:  # a previous step: its points, its last row
        tc = t
        for _ in range(int(rng.integers(0, 4))):
            ep, tp = end, tc
            end += int(rng.integers(1, 100))
            tc += float(rng.integers(1, 30))
            k.history.append((end, tc, tp, ep))
        t = tc + float(rng.integers(0, 20))
        committed = max(0, end - int(rng.integers(0, 300)))
        k.state = (t, committed, end, 0, None)
        t = (math.floor(t / 60) + 1) * 60  # a step ends on a minute
    for _ in range(int(rng.integers(1, 25))):
        r = rng.random()
        if r < 0.05:
            end = int(rng.integers(0, 50))  # re-created topic
            committed = min(committed, end)
        elif r < 0.6:
            end += int(rng.integers(0, 200))
        if rng.random() < 0.5:
            committed = min(end, committed + int(rng.integers(0, 250)))
        elif rng.random() < 0.1:
            committed = max(0, committed - int(rng.integers(1, 100)))  # rewind
        row: Row = (t, None if rng.random() < 0.05 else committed, None if rng.random() < 0.03 else end,
                    int(rng.integers(0, 3)) if rng.random() < 0.9 else None,
                    t - float(rng.integers(0, 100)) if rng.random() < 0.1 else None)
        k.fresh.append(row)
        if rng.random() < 0.1:
            k.fresh.append(row)  # a sweep written twice
        t += float(rng.choice([0.5, 5, 10, 45, 70]))
    return k


@pytest.mark.parametrize("history_points", [HISTORY_POINTS, 3])
@pytest.mark.parametrize("every_sweep", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_random_series_match_the_definitions(seed: int, every_sweep: bool, history_points: int) -> None:
    rng = np.random.default_rng(seed)
    keys = [_random_key(rng, h) for h in rng.choice(10**9, size=60, replace=False).tolist()]
    keys.sort(key=lambda k: (k.h, k.h2))
    want = [r for k in keys for r in _reference(k, every_sweep, history_points)]
    _same(_kernel_rows(_table(keys), every_sweep, history_points), want)


def test_batches_split_inside_a_key_give_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    # mapInArrow hands over batches that may end inside a key: the pass waits for the key's end
    rng = np.random.default_rng(99)
    keys = sorted((_random_key(rng, h) for h in range(40)), key=lambda k: (k.h, k.h2))
    tbl = _table(keys)
    whole = lag_seconds_table(tbl)
    monkeypatch.setattr(kernel, "_CHUNK_ROWS", 7)
    got = pa.Table.from_batches(list(lag_seconds_batches(tbl.to_batches(max_chunksize=5))))
    assert got.equals(whole)
