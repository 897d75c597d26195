"""The rewind and skip point events of the ``anomalies`` table over one chunk of enriched series
rows (:class:`lagscope.analytics.kseries.Series`) and, optionally, the commit stream's records
of the same keys (:class:`lagscope.analytics.kseries.Commits`): the numpy counterpart of
its Spark SQL reference ``transform_point_events`` (tests/analytics), row for row.

The rules (one sweep interval, or one commit):

- **rewind** (sweeps): a fresh row (not the carried state row) with a committed offset and a
  previous one, whose committed offset went down (``dc < 0``) by more than nothing once the log
  start is taken into account: ``rewound = prev_committed − max(committed, log_start or 0) > 0``
  (messages below the log start cannot be read again). Not when ``rebased``: the end offset went
  down after the committed offset last changed (topic re-created, log truncated), so the lower
  offset lies in another log and nothing is re-read. Magnitude = ``rewound`` (messages processed
  twice), start = the previous sweep (``t − dt``), end = the sweep.
- **skip** (sweeps): the committed offset jumped past everything committed before:
  ``jump = committed − max(prev_committed, max_committed_before or prev_committed,
  log_start or 0)`` (after a rewind the group re-consumes what it had processed already, fast:
  only what lies past the highest offset ever committed counts), with ``jump > skip_min_messages``,
  a known consume rate (``max_rate_before > 0``), the new offset at or past the previous sweep's
  end (``committed ≥ prev_end``: everything pending was passed over; an unknown ``prev_end`` is
  no skip) and ``jump > skip_factor · max_rate_before · dt`` (further than the group ever consumed
  in such an interval). Magnitude = ``jump − min(jump, floor((prev_rate or 0) · dt))``: the jump
  minus what the previous interval's rate could have processed, i.e. messages never processed.
  A row is a rewind first, else a skip (the two exclude each other anyway).
- With the commit stream every commit is compared with the key's commit before it (in
  ``(t, seq)`` order, ``__consumer_offsets`` order): a **commit rewind** is a commit within the
  step's range (``t > lo``, the key's state row time, no bound without one; ``t ≤ hi``, the key's
  last fresh sweep; none without fresh sweeps) with ``offset < prev_offset`` and
  ``prev_offset − max(offset, log_start or 0) > 0``, where ``log_start`` is the last known log
  start of the sweeps *strictly before* the commit (a commit at a sweep's time sorts before that
  sweep), and not ``rebased``: the first sweep at or after the commit (a sweep at the commit's
  own time included) saw its last end drop after the previous commit's time (a drop is seen only
  by the sweep after it; no such sweep, or no drop: not rebased). Start = end = the commit.
  A sweep rewind with a commit rewind of its key within ``[t0 − margin_s, t1 + margin_s]`` is
  that one and is dropped (counted once).
- With the commit stream a **skip** (still found from the sweeps: its jump stays committed) is
  timed by the commit of its key within ``[t0 − margin_s, t1 + margin_s]`` with the largest jump
  past everything committed before it (``offset − max_before > 0``; any commit, in the step's
  range or not): start = end = that commit; without such a commit it keeps the sweep interval.
  Ties of the largest jump: Spark's ``max_by`` keeps whichever tied row its aggregation sees
  last, an order a join leaves undefined; here the latest tied commit (in ``(t, seq)`` order)
  wins.

Output (:class:`lagscope.analytics.kseries.Found`): ``start_t``/``end_t`` in epoch seconds (the
table's timestamps truncate seconds·1e6 to a long), severity ``critical`` for a skip, ``warning``
for a rewind, unit ``messages``, details as Spark's ``%.0f`` (:func:`java_fixed`). Rows are
ordered by key and start time.

Pure numpy: no Spark here.
"""

from __future__ import annotations

import numpy as np

from lagscope.analytics.kseries import (
    F64,
    I64,
    B,
    Commits,
    Found,
    Series,
    java_fixed,
    key_bounds,
    segmented_cummax,
)

__all__ = ["point_events"]

_REWIND_DETAIL = "committed offset went back: {} messages will be processed again"
_SKIP_DETAIL = "committed offset jumped past {} messages that were never processed"


def _rank(data_key: I64, data_t: F64, q_key: I64, q_t: F64, *, inclusive: bool) -> I64:
    """For each query ``(q_key, q_t)``: how many data points ``(data_key, data_t)`` come before it
    in ``(key, t)`` order (``(key, t) < (q_key, q_t)``; ``≤`` with ``inclusive``). For data sorted
    by ``(key, t)`` that is the position where the query would go (a merge, not a loop)."""
    nd = len(data_key)
    k = np.concatenate((data_key, q_key))
    t = np.concatenate((data_t, q_t))
    is_q = np.concatenate((np.zeros(nd, bool), np.ones(len(q_key), bool)))
    # on equal (key, t): data before the query (inclusive) or the query before the data
    tie = is_q if inclusive else ~is_q
    order = np.lexsort((tie, t, k))
    before = np.cumsum(~is_q[order])  # data points up to each position
    out = np.empty(len(q_key), np.int64)
    at_q = is_q[order]
    out[order[at_q] - nd] = before[at_q]
    return out


def _commit_jumps(s: Series, c: Commits, fresh_sweep: B) -> dict[str, np.ndarray]:  # type: ignore[type-arg]
    """Each commit (``c`` sorted by key, ``t``, ``seq``) with ``prev_ok``/``prev_offset``/``prev_t``
    (the key's previous commit), ``max_before`` (highest offset committed before it; valid with
    ``prev_ok``), ``ls``/``ls_ok`` (the last non-null log start of the key's sweeps strictly
    before it), ``rebased`` (the first sweep at or after it saw its last end drop after
    ``prev_t``) and ``in_step`` (after the key's state row, up to its last fresh sweep)."""
    ns, nc = s.n, c.n
    # the sweeps and the commits of a key in one (t, src) order, commits (src 0) first on a tie
    uk = np.concatenate((s.key, c.key))
    ut = np.concatenate((s.t, c.t))
    src = np.concatenate((np.ones(ns, np.int8), np.zeros(nc, np.int8)))
    order = np.lexsort((np.arange(ns + nc), src, ut, uk))
    n = ns + nc
    pos = np.arange(n)
    is_sw = order < ns
    first, last = key_bounds(uk[order])
    # log start: last non-null of the sweeps up to the row (a commit row is no sweep)
    ls_ok_u = np.concatenate((s.log_start_ok, np.zeros(nc, bool)))[order]
    ls_u = np.concatenate((s.log_start, np.zeros(nc, np.int64)))[order]
    acc = np.maximum.accumulate(np.where(ls_ok_u, pos, -1)) if n else pos
    start = np.maximum.accumulate(np.where(first, pos, 0)) if n else pos
    ls_found = acc >= start
    ls_val = np.where(ls_found, ls_u[np.maximum(acc, 0)] if n else ls_u, 0)
    # drop: coalesce(end_drop_t, −inf) of the first sweep from the row on
    drop_u = np.concatenate((np.where(np.isnan(s.end_drop_t), -np.inf, s.end_drop_t), np.full(nc, np.nan)))[order]
    nxt = np.minimum.accumulate(np.where(is_sw, pos, n)[::-1])[::-1] if n else pos
    stop = np.minimum.accumulate(np.where(last, pos, n)[::-1])[::-1] if n else pos
    drop_val = np.where(nxt <= stop, drop_u[np.minimum(nxt, n - 1)] if n else drop_u, np.nan)
    at_c = ~is_sw
    ci = order[at_c] - ns
    c_ls = np.zeros(nc, np.int64)
    c_ls_ok = np.zeros(nc, bool)
    c_drop = np.full(nc, np.nan)
    c_ls[ci], c_ls_ok[ci], c_drop[ci] = ls_val[at_c], ls_found[at_c], drop_val[at_c]
    # the key's step range: lo = its state row's t, hi = its last fresh sweep's t
    nk = max(s.n_keys, int(c.key.max()) + 1 if nc else 0)
    lo = np.full(nk, -np.inf)
    np.maximum.at(lo, s.key[s.is_state], s.t[s.is_state])
    hi = np.full(nk, -np.inf)
    np.maximum.at(hi, s.key[fresh_sweep], s.t[fresh_sweep])
    in_step = (c.t > lo[c.key]) & (c.t <= hi[c.key])
    # the previous commit of the key, the highest offset before it
    cfirst, _ = key_bounds(c.key)
    prev_ok = ~cfirst
    prev_offset = np.zeros(nc, np.int64)
    prev_t = np.full(nc, np.nan)
    cmax = segmented_cummax(c.offset, c.key) if nc else c.offset
    max_before = np.zeros(nc, np.int64)
    if nc:
        prev_offset[1:], prev_t[1:], max_before[1:] = c.offset[:-1], c.t[:-1], cmax[:-1]
    prev_offset[cfirst], prev_t[cfirst], max_before[cfirst] = 0, np.nan, 0
    rebased = prev_ok & (c_drop > prev_t)  # NaN (no sweep after, no previous commit): False
    return {"prev_ok": prev_ok, "prev_offset": prev_offset, "prev_t": prev_t, "max_before": max_before,
            "ls": c_ls, "ls_ok": c_ls_ok, "rebased": rebased, "in_step": in_step}


def _sorted_commits(c: Commits) -> Commits:
    """``c`` in (key, t, seq) order (the documented order; sorted again only if it is not)."""
    order = np.lexsort((c.seq, c.t, c.key))
    if bool(np.all(order == np.arange(c.n))):
        return c
    return Commits(key=c.key[order], t=c.t[order], offset=c.offset[order], seq=c.seq[order])


def point_events(s: Series, commits: Commits | None, *, skip_factor: float, skip_min_messages: int,
                 margin_s: float = 1.0) -> Found:
    """rewind and skip events of the chunk's fresh rows (and, with ``commits``, of its commits):
    exactly the Spark SQL reference ``transform_point_events`` (see the module doc for
    each rule, the step range, the margin and the tie rule)."""
    fresh = ~s.is_state & s.prev_committed_ok & s.committed_ok
    ls = np.where(s.log_start_ok, s.log_start, 0)
    rewound = s.prev_committed - np.maximum(s.committed, ls)
    is_rewind = fresh & s.dc_ok & (s.dc < 0) & (rewound > 0) & ~s.rebased
    mcb = np.where(s.max_committed_before_ok, s.max_committed_before, s.prev_committed)
    jump = s.committed - np.maximum(np.maximum(s.prev_committed, mcb), ls)
    with np.errstate(invalid="ignore"):  # dt is NaN on a key's first row (never fresh)
        too_far = jump.astype(np.float64) > float(skip_factor) * s.max_rate_before * s.dt
    is_skip = (fresh & ~is_rewind & (jump > skip_min_messages) & (s.max_rate_before > 0)
               & s.prev_end_ok & (s.committed >= s.prev_end) & too_far)
    rw = np.flatnonzero(is_rewind)
    sk = np.flatnonzero(is_skip)
    # processed = least(jump, floor(coalesce(prev_rate, 0) · dt) as a long)
    prev_rate = np.where(np.isnan(s.prev_rate[sk]), 0.0, s.prev_rate[sk])
    processed = np.minimum(jump[sk], np.floor(prev_rate * s.dt[sk]).astype(np.int64))
    rw_t0, rw_t1 = s.t[rw] - s.dt[rw], s.t[rw]
    sk_t0, sk_t1 = s.t[sk] - s.dt[sk], s.t[sk]
    rw_key, rw_mag = s.key[rw], rewound[rw].astype(np.float64)
    sk_key, sk_mag = s.key[sk], (jump[sk] - processed).astype(np.float64)
    c_key = np.array([], np.int64)
    c_t = np.array([], np.float64)
    c_mag = np.array([], np.float64)
    if commits is not None:
        c = _sorted_commits(commits)
        cj = _commit_jumps(s, c, ~s.is_state)
        c_rewound = cj["prev_offset"] - np.maximum(c.offset, np.where(cj["ls_ok"], cj["ls"], 0))
        went_back = cj["prev_ok"] & (c.offset < cj["prev_offset"]) & (c_rewound > 0) & ~cj["rebased"]
        crw = np.flatnonzero(cj["in_step"] & went_back)
        c_key, c_t, c_mag = c.key[crw], c.t[crw], c_rewound[crw].astype(np.float64)
        # a sweep rewind that a commit rewind of its key (within the margin) explains is that one
        n_seen = (_rank(c_key, c_t, rw_key, rw_t1 + margin_s, inclusive=True)
                  - _rank(c_key, c_t, rw_key, rw_t0 - margin_s, inclusive=False))
        keep = n_seen <= 0
        rw_key, rw_t0, rw_t1, rw_mag = rw_key[keep], rw_t0[keep], rw_t1[keep], rw_mag[keep]
        # a skip's time: the commit (within the margin) with the largest jump past all before it
        j = c.offset - cj["max_before"]
        jx = np.flatnonzero(cj["prev_ok"] & (j > 0))  # in (key, t, seq) order
        lo = _rank(c.key[jx], c.t[jx], sk_key, sk_t0 - margin_s, inclusive=False)
        hi = _rank(c.key[jx], c.t[jx], sk_key, sk_t1 + margin_s, inclusive=True)
        lens = np.maximum(hi - lo, 0)
        ev = np.repeat(np.arange(len(sk)), lens)
        cand = lo[ev] + (np.arange(len(ev)) - (np.cumsum(lens) - lens)[ev])  # positions in jx
        by = np.lexsort((cand, j[jx[cand]], ev))  # per event by jump, the latest tied commit last
        _, best = key_bounds(ev[by])
        win = by[best]
        timed = c.t[jx[cand[win]]]
        sk_t0, sk_t1 = sk_t0.copy(), sk_t1.copy()
        sk_t0[ev[win]] = timed
        sk_t1[ev[win]] = timed
    key = np.concatenate((rw_key, c_key, sk_key))
    t0 = np.concatenate((rw_t0, c_t, sk_t0))
    t1 = np.concatenate((rw_t1, c_t, sk_t1))
    mag = np.concatenate((rw_mag, c_mag, sk_mag))
    is_sk = np.concatenate((np.zeros(len(rw_key) + len(c_key), bool), np.ones(len(sk_key), bool)))
    order = np.lexsort((is_sk, t1, t0, key))
    key, t0, t1, mag, is_sk = key[order], t0[order], t1[order], mag[order], is_sk[order]
    kind = np.where(is_sk, "skip", "rewind").astype(object)
    severity = np.where(is_sk, "critical", "warning").astype(object)
    unit = np.full(len(key), "messages", dtype=object)
    detail = np.array([(_SKIP_DETAIL if k else _REWIND_DETAIL).format(java_fixed(float(m), 0))
                       for k, m in zip(is_sk, mag, strict=True)], dtype=object)
    return Found(key=key, kind=kind, start_t=t0, end_t=t1, severity=severity, magnitude=mag, unit=unit,
                 detail=detail)
