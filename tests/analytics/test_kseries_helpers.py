"""The per-key running helpers of :mod:`lagscope.analytics.kseries` and the status reasons'
string helpers against plain Python loops (pure: no Spark)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lagscope.analytics.kseries import ffill_last, key_starts, member_rates, segmented_cumsum, starved_rows
from lagscope.analytics.np_status import Entries, _cat, _first_of, _fixed0, _longs, _sorted


def _keys(rng: np.random.Generator, n: int) -> np.ndarray:
    return np.sort(rng.integers(0, max(1, n // 4), n)).astype(np.int64)


@pytest.mark.parametrize("n", [0, 1, 2, 17, 500])
def test_key_starts_and_running_values_per_key(n: int) -> None:
    rng = np.random.default_rng(n)
    key = _keys(rng, n)
    marks = np.where(rng.random(n) < 0.3, rng.normal(size=n), np.nan)
    values = rng.integers(0, 3, n).astype(np.int64)
    start = key_starts(key)
    want_start, want_fill, want_before, want_sum = [], [], [], []
    for i in range(n):
        s = i
        while s > 0 and key[s - 1] == key[i]:
            s -= 1
        want_start.append(s)
        seen = [m for m in marks[s:i + 1] if not math.isnan(m)]
        want_fill.append(seen[-1] if seen else math.nan)
        seen_before = [m for m in marks[s:i] if not math.isnan(m)]
        want_before.append(seen_before[-1] if seen_before else math.nan)
        want_sum.append(int(values[s:i + 1].sum()))
    assert start.tolist() == want_start
    for given in (None, start):  # the same with and without the caller's starts
        np.testing.assert_array_equal(ffill_last(marks, key, start=given), np.array(want_fill, np.float64))
        np.testing.assert_array_equal(ffill_last(marks, key, before=True, start=given),
                                      np.array(want_before, np.float64))
        assert segmented_cumsum(values, key, start=given).tolist() == want_sum


def test_reason_strings_are_printf_formats() -> None:
    rng = np.random.default_rng(3)
    longs = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 200, dtype=np.int64), np.array([0, -1, 2**63 - 1])])
    secs = rng.uniform(0, 1e5, len(longs))
    got = _cat("no owner and no commit for ", _fixed0(secs), " s with lag ", _longs(longs))
    assert got.dtype == object
    assert list(got) == [f"no owner and no commit for {_fixed0(np.array([s]))[0]} s with lag {v:d}"
                         for s, v in zip(secs.tolist(), longs.tolist(), strict=True)]
    assert list(_cat("consuming; lag ", _longs(np.zeros(0, np.int64)))) == []


def test_first_of_is_select() -> None:
    rng = np.random.default_rng(5)
    conds = [rng.random(300) < 0.2 for _ in range(4)]
    names = ["ERR", "REWIND", "IDLE", "OK"]
    got = _first_of(conds, names, "WARN")
    assert got.dtype == object
    assert list(got) == list(np.select(conds, names, "WARN"))


@pytest.mark.parametrize("shuffle", [False, True])
def test_entries_sorted_by_key_time_and_carried_first(shuffle: bool) -> None:
    rng = np.random.default_rng(7)
    n = 400
    key = np.sort(rng.integers(0, 20, n)).astype(np.int64)
    t = np.round(rng.uniform(0, 50, n))  # ties on purpose
    is_state = rng.random(n) < 0.3
    order = np.lexsort((~is_state, t, key))
    e = Entries(key=key, t=t, c=rng.integers(0, 9, n), lag=rng.integers(0, 9, n), lag_ok=rng.random(n) < 0.9,
                rebased=rng.random(n) < 0.1, is_state=is_state).take(order)
    if shuffle:
        e = e.take(rng.permutation(n))
    got = _sorted(e)
    want = e.take(np.lexsort((~e.is_state, e.t, e.key)))
    for f in ("key", "t", "c", "lag", "lag_ok", "rebased", "is_state"):
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f))


def _jumps_walked(rate: list[float], to_end: list[bool], seed: list[float], key: list[int],
                  factor: float, floor: list[float], judged: list[float]) -> list[float]:
    """The definition, one row at a time per key: a candidate whose judged pace is faster than
    factor × the largest rate kept before it (the seed included) and than factor × its own floor
    is dropped; one with none kept before it counts. A kept row counts its own rate."""
    out, top, at = [], -math.inf, None
    for r, e, s, k, f, j in zip(rate, to_end, seed, key, floor, judged, strict=True):
        if k != at:
            at, top = k, -math.inf
        if s > -math.inf:
            top = max(top, s)
            out.append(r)
            continue
        if e and r > 0 and top > 0 and j > factor * max(top, f):
            out.append(0.0)
            continue
        out.append(r)
        top = max(top, r)
    return out


@pytest.mark.parametrize("rounds", [1, 4])
@pytest.mark.parametrize("case", range(40))
def test_jumps_are_the_walk_of_the_definition(case: int, rounds: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from lagscope.analytics import kseries
    monkeypatch.setattr(kseries, "_JUMP_ROUNDS", rounds)
    rng = np.random.default_rng(case)
    n = int(rng.integers(1, 120))
    key = np.sort(rng.integers(0, 5, n))
    first = np.r_[True, key[1:] != key[:-1]]
    rate = np.where(rng.random(n) < 0.3, 0.0, np.round(10 ** rng.uniform(0, 3, n), 1))
    to_end = rng.random(n) < 0.5
    seed = np.where(first & (rng.random(n) < 0.4), np.round(10 ** rng.uniform(0, 2, n), 1), -np.inf)
    # the producers' rate over each interval (the floor before the capacity is trusted), else 0
    floor = np.where(rng.random(n) < 0.5, 0.0, np.round(10 ** rng.uniform(0, 2.5, n), 1))
    # the pace judged: the rate, or a commit's inside the interval (faster) on some rows
    judged = np.where(rng.random(n) < 0.3, rate * np.round(10 ** rng.uniform(0, 1.5, n), 1), rate)
    got = kseries._without_jumps(rate, to_end, seed, key, first, 5.0, floor, judged)
    assert got.tolist() == _jumps_walked(rate.tolist(), to_end.tolist(), seed.tolist(), key.tolist(), 5.0,
                                         floor.tolist(), judged.tolist())


def test_a_run_of_jumps_takes_a_bounded_number_of_vector_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    # a caught-up consumer whose producers step up tenfold and stay there: every interval after the
    # first is a jump against the 10/s kept before it. The fixed point settles one per round; the
    # rows left are walked instead of taking 2,000 rounds over the whole chunk
    from lagscope.analytics import kseries
    calls = []
    real = kseries.segmented_cummax
    monkeypatch.setattr(kseries, "segmented_cummax", lambda v, k: calls.append(1) or real(v, k))
    n = 2_000
    rate = np.r_[10.0, np.full(n - 1, 100.0)]
    key = np.zeros(n, np.int64)
    first = np.r_[True, np.zeros(n - 1, bool)]
    got = kseries._without_jumps(rate, np.ones(n, bool), np.full(n, -np.inf), key, first, 5.0, np.zeros(n))
    assert got.tolist() == [10.0] + [0.0] * (n - 1)
    assert len(calls) <= kseries._JUMP_ROUNDS + 1


def _commit_rates_walked(key: list[int], t: list[float], is_state: list[bool], prev_end: list[int],
                         prev_end_ok: list[bool], dc: list[int],
                         commits: list[tuple[int, float, int, int]]) -> list[float]:
    """The definition, commit by commit: its row is the first of its key at or after it; it counts
    on a fresh row with a known previous end when its offset reached that end and its advance past
    the highest offset the key committed before it (earlier in (t, seq) order) is positive and
    more than half the row's; its rate is that advance over the time since the key's previous
    commit (which must be earlier)."""
    out = [0.0] * len(key)
    ordered = sorted(commits, key=lambda c: (c[0], c[1], c[3]))
    for i, (k, ct, off, _) in enumerate(ordered):
        if i == 0 or ordered[i - 1][0] != k:
            continue
        pt = ordered[i - 1][1]
        adv = off - max(c[2] for c in ordered[:i] if c[0] == k)
        if ct <= pt or adv <= 0:
            continue
        rows = [r for r in range(len(key)) if key[r] == k and t[r] >= ct]
        if not rows:
            continue
        r = rows[0]
        if is_state[r] or not prev_end_ok[r] or off < prev_end[r] or 2 * adv <= dc[r]:
            continue
        out[r] = max(out[r], adv / (ct - pt))
    return out


def test_commit_rates_are_the_definition() -> None:
    from lagscope.analytics.kseries import Commits, commit_rates
    rated = 0
    for case in range(30):
        rng = np.random.default_rng(100 + case)
        n = int(rng.integers(1, 60))
        key = np.sort(rng.integers(0, 4, n)).astype(np.int64)
        first = np.r_[True, key[1:] != key[:-1]]
        # in time order within a key (keys restart their clocks: rows of different keys tie)
        t = np.round(np.cumsum(rng.uniform(0.1, 2.0, n)), 1)
        starts = np.flatnonzero(first)
        t = t - np.repeat(t[starts] - np.round(rng.uniform(0, 3, len(starts)), 1), np.diff(np.r_[starts, n]))
        t = np.round(t, 1)
        is_state = first & (rng.random(n) < 0.5)
        prev_end = rng.integers(0, 200, n).astype(np.int64)
        prev_end_ok = ~first & (rng.random(n) < 0.9)
        dc = rng.integers(-20, 120, n).astype(np.int64)
        nc = int(rng.integers(0, 80))
        ck = rng.integers(0, 6, nc).astype(np.int64)  # keys 4 and 5 have no series rows
        ct = np.round(rng.uniform(0, t.max() + 2, nc), 1)  # ties with rows and with each other
        co = rng.integers(0, 300, nc).astype(np.int64)
        seq = rng.permutation(nc).astype(np.int64)
        got = commit_rates(key, t, is_state, prev_end, prev_end_ok, dc, Commits(key=ck, t=ct, offset=co, seq=seq))
        cs = list(zip(ck.tolist(), ct.tolist(), co.tolist(), seq.tolist(), strict=True))
        want = _commit_rates_walked(key.tolist(), t.tolist(), is_state.tolist(), prev_end.tolist(),
                                    prev_end_ok.tolist(), dc.tolist(), cs)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=f"case {case}")
        assert commit_rates(key, t, is_state, prev_end, prev_end_ok, dc, None).tolist() == [0.0] * n
        rated += bool((got > 0).any())
    assert rated >= 10  # the cases are not all zeros


def test_a_partition_is_starved_only_beside_a_far_faster_sibling_of_the_same_owner_at_the_same_sweep() -> None:
    # rows (key, group, is_state, t, committed, owner; owner 0: none), by key and time, the state row first
    rows = [
        # group 0, owner 1: key 0 advanced 400 over 10→11, key 1 only 3 (starved), key 2 100 (a fair share)
        (0, 0, True, 10.0, 1000, 1), (0, 0, False, 11.0, 1400, 1), (0, 0, False, 12.0, 1401, 1),
        (1, 0, False, 10.0, 500, 1), (1, 0, False, 11.0, 503, 1), (1, 0, False, 12.0, 600, 1),
        (2, 0, False, 10.0, 0, 1), (2, 0, False, 11.0, 100, 1), (2, 0, False, 12.0, 101, 1),
        # group 0, owner 2, same sweeps: another member's speed is not key 3's owner's
        (3, 0, False, 10.0, 0, 2), (3, 0, False, 11.0, 1, 2),
        # group 1, owner 1 (the same code, another group): not a sibling of group 0's keys
        (4, 1, False, 10.0, 0, 1), (4, 1, False, 11.0, 2, 1),
        # no owner: never starved
        (5, 0, False, 10.0, 0, 0), (5, 0, False, 11.0, 0, 0),
        # another sweep time (11.5) in group 0, owner 1: no sibling there
        (6, 0, False, 10.5, 0, 1), (6, 0, False, 11.5, 1, 1),
    ]
    key, group, state, t, committed, owner = (np.array(c) for c in zip(*rows, strict=True))
    got = starved_rows(key.astype(np.int64), group.astype(np.int64), state.astype(bool), t.astype(np.float64),
                       committed.astype(np.int64), np.ones(len(rows), bool), owner.astype(np.int64), owner > 0,
                       factor=5.0)
    starved = {(int(k), float(x)) for k, x, g in zip(key, t, got, strict=True) if g}
    # at 11 (key 0's 400/s the fastest): key 1's 3/s is starved, key 2's 100/s is not (400 ≤ 5 × 100);
    # at 12 key 1 is the fastest (97/s): keys 0 and 2 (1/s each) are starved then
    assert starved == {(1, 11.0), (0, 12.0), (2, 12.0)}


def test_a_member_s_rate_sums_its_partitions_behind_throughout_at_the_same_sweep() -> None:
    # rows (key, group, is_state, t, committed, end, log_start, owner; owner 0: none), by key and
    # time, the state row first
    rows = [
        # group 0, owner 1, sweeps at 10 and 11: key 0 advanced 40 behind throughout (lag 460 → 440,
        # its end at 11 below the end at 10), key 1 20 the same; key 2 caught up with its producers
        # (committed at 11 at or past the end at 10: it may have waited, or jumped): left out
        (0, 0, True, 10.0, 1000, 1500, 0, 1), (0, 0, False, 11.0, 1040, 1480, 0, 1),
        (1, 0, False, 10.0, 500, 600, 0, 1), (1, 0, False, 11.0, 520, 610, 0, 1),
        (2, 0, False, 10.0, 98, 100, 0, 1), (2, 0, False, 11.0, 101, 102, 0, 1),
        # key 3, same owner and sweeps: retention passed its start (log start 40 > 30 at 11): left out
        (3, 0, False, 10.0, 30, 300, 20, 1), (3, 0, False, 11.0, 60, 300, 40, 1),
        # key 4: owner 2, the same sweeps: its own member (12/s)
        (4, 0, False, 10.0, 0, 100, 0, 2), (4, 0, False, 11.0, 12, 110, 0, 2),
        # key 5: group 1, owner 1 (the same code, another group): its own member (7/s)
        (5, 1, False, 10.0, 0, 100, 0, 1), (5, 1, False, 11.0, 7, 100, 0, 1),
        # key 6: no owner at 11: NaN; key 7: sweeps at 10.5 and 11.5, owner 1: no sibling there (5/s)
        (6, 0, False, 10.0, 0, 100, 0, 1), (6, 0, False, 11.0, 9, 100, 0, 0),
        (7, 0, False, 10.5, 0, 100, 0, 1), (7, 0, False, 11.5, 5, 100, 0, 1),
    ]
    key, group, state, t, committed, end, log_start, owner = (np.array(c) for c in zip(*rows, strict=True))
    ok = np.ones(len(rows), bool)
    got = member_rates(key.astype(np.int64), group.astype(np.int64), state.astype(bool), t.astype(np.float64),
                       committed.astype(np.int64), ok, end.astype(np.int64), ok, log_start.astype(np.int64), ok,
                       owner.astype(np.int64), owner > 0)
    at = {(int(k), float(x)): float(v) for k, x, v in zip(key, t, got, strict=True)}
    # state rows and a key's first rows have no interval of their own; owner 1 at 11 in group 0:
    # 40 + 20 (keys 0 and 1), shared by every row of that (group, owner, sweep)
    assert math.isnan(at[(0, 10.0)])
    assert at[(1, 10.0)] == at[(2, 10.0)] == 0.0
    assert at[(0, 11.0)] == at[(1, 11.0)] == at[(2, 11.0)] == at[(3, 11.0)] == 60.0
    assert at[(4, 11.0)] == 12.0
    assert at[(5, 11.0)] == 7.0
    assert math.isnan(at[(6, 11.0)])
    assert at[(7, 11.5)] == 5.0
