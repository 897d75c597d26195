"""Commit gaps, their learned per-partition normal, and ``commit_gap`` anomalies over one chunk of
whole keys, in numpy (equal to their Spark SQL reference in tests/analytics: ``commit_gaps``,
``gap_baselines`` and
``transform_gap_anomalies``, which they reproduce exactly).

A **commit gap** is the time a partition's group went without committing while it had work
pending. From the sweeps alone it is the time between two *changes* of the committed offset
(a group that commits the same offset meanwhile cannot be told apart from one that does not
commit); with the commit stream it is the exact time between two consecutive commits (of any
offset), so a group that keeps committing has no gap.

A partition's **normal** is learned from its own gaps: the median and the median absolute
deviation (MAD) of the gaps kept from earlier steps (the latest ``keep`` by time) and this
step's. A **commit_gap** anomaly is a gap far beyond that normal
(``gap > median + k·max(1.4826·MAD, floor)``, robust and per partition), of at least
``min_gap_s``, learned from at least ``min_samples`` gaps, and shorter than ``max_gap_s``
(gaps that long are reported as stall or stop episodes instead).

Keys are the chunk's key numbers (:class:`lagscope.analytics.kseries.Series`). Pure numpy: no
Spark here, no Python loop over rows or keys (but to write the few anomalies' detail strings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lagscope.analytics.kseries import F64, I64, B, Commits, Found, Series, java_fixed, key_bounds

__all__ = ["GAP_SAMPLES", "Baselines", "Gaps", "commit_gaps", "gap_anomalies", "gap_baselines"]

#: how many of its latest commit gaps a partition's learned normal keeps across steps
GAP_SAMPLES = 64

_NAN = float("nan")


@dataclass
class Gaps:
    """Commit gaps (or carried gap samples), one entry each, grouped by key."""

    key: I64              # key number in the chunk
    t: F64                # the gap's end: the commit (or sweep that saw the change) closing it, epoch s
    gap_s: F64            # its length in seconds (it started at t − gap_s)

    @property
    def n(self) -> int:
        return len(self.t)

    @staticmethod
    def empty() -> Gaps:
        return Gaps(np.array([], np.int64), np.array([], np.float64), np.array([], np.float64))


@dataclass
class Baselines:
    """Each key's learned normal commit gap, one entry per key that has at least one gap or
    carried sample (``key`` ascending), and the samples the next step learns from."""

    key: I64              # key number in the chunk (ascending, unique)
    gap_median_s: F64     # median of the key's samples and gaps (even count: mean of the middle two)
    gap_mad_s: F64        # median of their absolute deviations from that median (same median rule)
    gap_n: I64            # how many samples and gaps the two are over
    samples: Gaps         # the next state: per key the latest ``keep`` by (t, gap_s), sorted by key, t, gap_s


def _ranges(key: I64, n_keys: int) -> tuple[I64, I64]:
    """(count, start) per key number for entries sorted by key."""
    count = np.bincount(key, minlength=n_keys).astype(np.int64)
    start: I64 = np.cumsum(count) - count
    return count, start


def _sweep_gaps(s: Series) -> Gaps:
    """From the sweeps: fresh rows whose committed offset changed (``changed``) while the
    previous sweep had lag (``coalesce(prev_lag, 0) > 0``) and an earlier change is known
    (``prev_change_t`` not null). The gap ran from the later of that previous change and the
    moment work became pending as of the previous row (``greatest(prev_change_t, previous
    row's pending_t)``, a null pending_t skipped) to this row."""
    first, _ = key_bounds(s.key)
    prev_pending = np.empty_like(s.pending_t)
    if s.n:
        prev_pending[1:] = s.pending_t[:-1]
        prev_pending[first] = _NAN
    since = np.fmax(s.prev_change_t, prev_pending)  # greatest skips a null (NaN) pending
    sel = (~s.is_state & s.changed & s.prev_lag_ok & (s.prev_lag > 0) & ~np.isnan(s.prev_change_t))
    return Gaps(s.key[sel], s.t[sel], s.t[sel] - since[sel])


def _stream_gaps(s: Series, commits: Commits) -> Gaps:
    """From the commit stream: each commit with a previous commit of its key (in ``(t, seq)``
    order) closes a gap of ``t − previous t`` when it lies in the key's step range (after the
    key's carried state row's t, when it has one, up to its last fresh sweep's t; a key with
    no fresh sweep has none) and the last sweep strictly before it with a known lag (a sweep at
    the same t comes after the commit) had lag > 0."""
    order = np.lexsort((commits.seq, commits.t, commits.key))
    ck, ct = commits.key[order], commits.t[order]
    n_keys = max(s.n_keys, int(ck.max()) + 1 if len(ck) else 0)
    # the previous commit of the key
    cfirst, _ = key_bounds(ck)
    prev_t = np.empty_like(ct)
    if len(ct):
        prev_t[1:] = ct[:-1]
        prev_t[cfirst] = _NAN
    # the key's step range: lo = its state row's t (−inf without one), hi = its last fresh t
    # (NaN without one: no commit is in range)
    lo = np.full(n_keys, _NAN)
    np.fmax.at(lo, s.key[s.is_state], s.t[s.is_state])
    lo = np.where(np.isnan(lo), -np.inf, lo)
    hi = np.full(n_keys, _NAN)
    fresh = ~s.is_state
    np.fmax.at(hi, s.key[fresh], s.t[fresh])
    # as of each commit: the lag of the key's last sweep with a known lag before it (merge the
    # sweeps into the commits, ordered by key, t, then commits before sweeps of the same t)
    nc = len(ct)
    known = s.lag_ok
    m_key = np.concatenate((ck, s.key[known]))
    m_t = np.concatenate((ct, s.t[known]))
    m_lag = np.concatenate((np.zeros(nc, np.int64), s.lag[known]))
    m_src = np.concatenate((np.zeros(nc, np.int64), np.ones(int(known.sum()), np.int64)))
    m_order = np.lexsort((m_src, m_t, m_key))
    o_key, o_lag, o_sweep = m_key[m_order], m_lag[m_order], m_src[m_order] == 1
    pos = np.arange(len(m_order))
    last = np.maximum.accumulate(np.where(o_sweep, pos, -1)) if len(pos) else pos
    at = np.maximum(last, 0)
    o_lag_at = np.where((last >= 0) & (o_key[at] == o_key), o_lag[at], 0)  # coalesce(_lag, 0)
    lag_at = np.zeros(nc, np.int64)
    lag_at[m_order[~o_sweep]] = o_lag_at[~o_sweep]
    sel = ~np.isnan(prev_t) & (lag_at > 0) & (ct > lo[ck]) & (ct <= hi[ck])
    return Gaps(ck[sel], ct[sel], ct[sel] - prev_t[sel])


def commit_gaps(s: Series, commits: Commits | None) -> Gaps:
    """Closed commit gaps with work pending, grouped by key in time order.

    Without the commit stream (``commits`` None), from the sweeps: a fresh row that changed
    the committed offset while the previous sweep had lag closes the gap since the later of the
    previous change and the moment that work became pending (a gap between *changes*).

    With it (:class:`~lagscope.analytics.kseries.Commits`, the chunk's keys' commit records):
    the time between two consecutive commits of the key (any offset, ``(t, seq)`` order), the
    later one in this step's range (after the key's state row, up to its last fresh sweep),
    when the last sweep before it (a sweep at the commit's own t is after it) with a known lag
    had lag > 0: exact, and a group that keeps committing has no gap. Commits of keys without
    series rows close no gap."""
    if commits is None:
        return _sweep_gaps(s)
    return _stream_gaps(s, commits)


def _median_sorted(xs: F64, count: I64, start: I64) -> F64:
    """Per key, the median of its ``xs`` entries (sorted ascending within each key, keys with
    ``count`` ≥ 1): the mean of the elements at 0-based positions ⌊(n−1)/2⌋ and ⌈(n−1)/2⌉
    (the middle one twice for an odd size), as ``(a + b) / 2``."""
    lo = start + (count - 1) // 2
    hi = start + count // 2
    out: F64 = (xs[lo] + xs[hi]) / 2
    return out


def _row_sorted(values: F64, row: I64, col: I64, n_rows: int, width: int) -> F64:
    """``values`` placed at (``row``, ``col``) of an (``n_rows`` × ``width``) NaN-padded matrix,
    each row sorted ascending (the padding last)."""
    m = np.full((n_rows, width), np.nan)
    m[row, col] = values
    m.sort(axis=1)
    return m


def gap_baselines(gaps: Gaps, samples: Gaps | None, n_keys: int, keep: int = GAP_SAMPLES) -> Baselines:
    """Per key with at least one gap or carried sample: the median (``gap_median_s``) and
    median absolute deviation (``gap_mad_s``) of the carried samples and this step's gaps
    together, their number (``gap_n``), and the next state's ``samples``: the latest ``keep``
    of them by (t, gap_s) (structs sort by their fields in order), all of a key's when fewer.

    ``samples``: the earlier steps' samples (the previous :class:`Baselines`' ``samples``, or
    None); ``n_keys``: the chunk's number of keys (every key number is below it). The median of
    n sorted values is the mean of the values at ⌊(n−1)/2⌋ and ⌈(n−1)/2⌉; the MAD the same
    over the sorted |x − median|.

    The values of a key are sorted as one row of a NaN-padded (keys × most values) matrix (many
    short sorts, not one long one: about 8× faster on a step's 100,000 keys × 64 samples), unless
    one key has far more values than the others (then one sort by key and value)."""
    parts = [gaps] if samples is None else [samples, gaps]
    key = np.concatenate([p.key for p in parts]).astype(np.int64)
    t = np.concatenate([p.t for p in parts]).astype(np.float64)
    g = np.concatenate([p.gap_s for p in parts]).astype(np.float64)
    if len(key) and (int(key.min()) < 0 or int(key.max()) >= n_keys):
        raise ValueError("gap key number out of range 0 … n_keys − 1")
    count, start = _ranges(key, n_keys)
    present = np.flatnonzero(count > 0)
    cnt = count[present]
    # grouped by key, stably (each part comes grouped: this merges two runs)
    grouped = np.argsort(key, kind="stable")
    kg = key[grouped]
    rank = np.arange(len(key)) - start[kg]
    width = int(cnt.max()) if len(cnt) else 0
    med_of = np.zeros(n_keys)
    if len(present) * width <= 4 * len(key) + 1024:
        row_of = np.full(n_keys, -1, np.int64)
        row_of[present] = np.arange(len(present))
        rows, at = row_of[kg], np.arange(len(present))
        lo, hi = (cnt - 1) // 2, cnt // 2
        by_gap = _row_sorted(g[grouped], rows, rank, len(present), width)
        median: F64 = (by_gap[at, lo] + by_gap[at, hi]) / 2
        med_of[present] = median
        by_dev = _row_sorted(np.abs(g[grouped] - med_of[kg]), rows, rank, len(present), width)
        mad: F64 = (by_dev[at, lo] + by_dev[at, hi]) / 2
    else:
        st = start[present]
        median = _median_sorted(g[np.lexsort((g, key))], cnt, st)
        med_of[present] = median
        dev = np.abs(g - med_of[key])
        mad = _median_sorted(dev[np.lexsort((dev, key))], cnt, st)
    # the latest ``keep`` by (t, gap_s), from the entries in key, t, gap order (the grouped
    # order already is when the carried samples precede the step's gaps in time)
    tg, gg = t[grouped], g[grouped]
    dk, dtt = np.diff(kg), np.diff(tg)
    in_order = (dk > 0) | ((dk == 0) & ((dtt > 0) | ((dtt == 0) & (np.diff(gg) >= 0))))
    by_t = grouped if bool(in_order.all()) else np.lexsort((g, t, key))
    rank_t = np.arange(len(key)) - start[key[by_t]]
    kept = by_t[rank_t >= count[key[by_t]] - keep]
    return Baselines(key=present.astype(np.int64), gap_median_s=median, gap_mad_s=mad, gap_n=cnt,
                     samples=Gaps(key[kept], t[kept], g[kept]))


def gap_anomalies(gaps: Gaps, base: Baselines, *, k: float, mad_floor_s: float, min_gap_s: float,
                  min_samples: int, max_gap_s: float) -> Found:
    """``commit_gap`` anomalies: each gap of a key with a baseline learned from at least
    ``min_samples`` gaps that is beyond the key's own robust threshold
    (``gap_s > median + k·max(1.4826·MAD, mad_floor_s)``), at least ``min_gap_s`` and below
    ``max_gap_s`` (from which on stall/stop episodes report it). One anomaly per gap, from
    its start (t − gap_s) to its end (t), severity warning, magnitude the gap in s, detail
    ``"<gap> s between commits with lag pending; this partition's normal is <median> s (MAD
    <mad> s)"`` (each ``%.1f``, Java's rounding). Gaps of keys without a baseline are dropped."""
    size = max(int(base.key.max()) + 1 if len(base.key) else 0, int(gaps.key.max()) + 1 if gaps.n else 0)
    where = np.full(size, -1, np.int64)
    where[base.key] = np.arange(len(base.key))
    b = where[gaps.key] if gaps.n else np.array([], np.int64)
    has: B = b >= 0
    bi = np.maximum(b, 0)
    med = np.where(has, base.gap_median_s[bi] if len(base.key) else 0.0, _NAN)
    mad = np.where(has, base.gap_mad_s[bi] if len(base.key) else 0.0, _NAN)
    gn = np.where(has, base.gap_n[bi] if len(base.key) else 0, 0)
    threshold = med + k * np.maximum(mad * 1.4826, mad_floor_s)
    sel = has & (gn >= min_samples) & (gaps.gap_s > threshold) & (gaps.gap_s >= min_gap_s) & (gaps.gap_s < max_gap_s)
    if not sel.any():
        return Found.empty()
    key, t, gap, m, d = gaps.key[sel], gaps.t[sel], gaps.gap_s[sel], med[sel], mad[sel]
    n = len(key)
    detail = np.array([
        f"{java_fixed(float(x), 1)} s between commits with lag pending; this partition's normal is "
        f"{java_fixed(float(y), 1)} s (MAD {java_fixed(float(z), 1)} s)" for x, y, z in zip(gap, m, d, strict=True)
    ], dtype=object)
    return Found(key=key, kind=np.full(n, "commit_gap", dtype=object), start_t=t - gap, end_t=t.copy(),
                 severity=np.full(n, "warning", dtype=object), magnitude=gap.copy(),
                 unit=np.full(n, "s", dtype=object), detail=detail)
