"""The rewind point events of the ``anomalies`` table over one chunk of enriched series rows
(:class:`lagscope.analytics.kseries.Series`) and, optionally, the commit stream's records of the
same keys (:class:`lagscope.analytics.kseries.Commits`): the numpy counterpart of its Spark SQL
reference ``transform_point_events`` (tests/analytics), row for row; and the positive advances
a skip rule judges (:func:`advances`; the rules, per group: :mod:`lagscope.analytics.skips`).

The rules (one sweep interval, or one commit):

- **rewind** (sweeps): a fresh row (not the carried state row) with a committed offset and a
  previous one, whose committed offset went down (``dc < 0``) by more than nothing once the log
  start is taken into account: ``rewound = prev_committed − max(committed, log_start or 0) > 0``
  (messages below the log start cannot be read again). Not when ``rebased``: the end offset went
  down after the committed offset last changed (topic re-created, log truncated), so the lower
  offset lies in another log and nothing is re-read. Magnitude = ``rewound`` (messages processed
  twice), start = the previous sweep (``t − dt``), end = the sweep.
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
- **advances** (:func:`advances`): each positive advance past everything committed before, per
  commit where the commit stream has the key, else per sweep interval, with the evidence the
  skip rules weigh (the demonstrated capacity before it, whether it reached the end, whether
  everything before it was lost to retention, whether the partition had an owner around it).

Output (:class:`lagscope.analytics.kseries.Found`): ``start_t``/``end_t`` in epoch seconds (the
table's timestamps truncate seconds·1e6 to a long), severity ``warning``, unit ``messages``,
cause ``rewind`` (the per-group pass makes it ``admin_reset`` when the group had no members),
details as Spark's ``%.0f`` (:func:`java_fixed`). Rows are ordered by key and start time.

Pure numpy: no Spark here.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    key_starts,
    segmented_cummax,
    shift,
    sorted_commits,
    tenure_owners,
)

__all__ = ["Advances", "advances", "capacity_through", "commit_jumps", "member_capacity_through", "point_events"]

_REWIND_DETAIL = "committed offset went back: {} messages will be processed again"


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


def commit_jumps(s: Series, commits: Commits) -> tuple[Commits, dict[str, np.ndarray]]:  # type: ignore[type-arg]
    """The commits in (key, t, seq) order and each one's context (previous commit, highest offset
    before it, log start, rebased, in the step's range): what :func:`point_events` and
    :func:`advances` read, computed once for both."""
    c = sorted_commits(commits)
    return c, _commit_jumps(s, c, ~s.is_state)


def point_events(s: Series, commits: Commits | None, *, margin_s: float = 1.0,
                 jumps: tuple[Commits, dict[str, np.ndarray]] | None = None) -> Found:  # type: ignore[type-arg]
    """rewind events of the chunk's fresh rows (and, with ``commits``, of its commits): exactly the
    Spark SQL reference ``transform_point_events`` (see the module doc for the rule, the step
    range and the margin). Skips are judged per group (:func:`advances`,
    :mod:`lagscope.analytics.skips`)."""
    fresh = ~s.is_state & s.prev_committed_ok & s.committed_ok
    ls = np.where(s.log_start_ok, s.log_start, 0)
    rewound = s.prev_committed - np.maximum(s.committed, ls)
    is_rewind = fresh & s.dc_ok & (s.dc < 0) & (rewound > 0) & ~s.rebased
    rw = np.flatnonzero(is_rewind)
    rw_t0, rw_t1 = s.t[rw] - s.dt[rw], s.t[rw]
    rw_key, rw_mag = s.key[rw], rewound[rw].astype(np.float64)
    c_key = np.array([], np.int64)
    c_t = np.array([], np.float64)
    c_mag = np.array([], np.float64)
    if commits is not None:
        c, cj = jumps if jumps is not None else commit_jumps(s, commits)
        c_rewound = cj["prev_offset"] - np.maximum(c.offset, np.where(cj["ls_ok"], cj["ls"], 0))
        went_back = cj["prev_ok"] & (c.offset < cj["prev_offset"]) & (c_rewound > 0) & ~cj["rebased"]
        crw = np.flatnonzero(cj["in_step"] & went_back)
        c_key, c_t, c_mag = c.key[crw], c.t[crw], c_rewound[crw].astype(np.float64)
        # a sweep rewind that a commit rewind of its key (within the margin) explains is that one
        n_seen = (_rank(c_key, c_t, rw_key, rw_t1 + margin_s, inclusive=True)
                  - _rank(c_key, c_t, rw_key, rw_t0 - margin_s, inclusive=False))
        keep = n_seen <= 0
        rw_key, rw_t0, rw_t1, rw_mag = rw_key[keep], rw_t0[keep], rw_t1[keep], rw_mag[keep]
    key = np.concatenate((rw_key, c_key))
    t0 = np.concatenate((rw_t0, c_t))
    t1 = np.concatenate((rw_t1, c_t))
    mag = np.concatenate((rw_mag, c_mag))
    order = np.lexsort((t1, t0, key))
    key, t0, t1, mag = key[order], t0[order], t1[order], mag[order]
    n = len(key)
    detail = np.array([_REWIND_DETAIL.format(java_fixed(float(m), 0)) for m in mag], dtype=object)
    return Found(key=key, kind=np.full(n, "rewind", dtype=object), start_t=t0, end_t=t1,
                 severity=np.full(n, "warning", dtype=object), magnitude=mag,
                 unit=np.full(n, "messages", dtype=object), detail=detail,
                 cause=np.full(n, "rewind", dtype=object))


@dataclass
class Advances:
    """The advances of the chunk's keys that a skip rule may judge (:func:`advances`):
    one per commit of the commit stream (keys it has), else per sweep interval."""

    key: I64
    t0: F64           # the key's previous commit (commit stream; NaN when none), else the previous sweep
    t1: F64           # the commit, else the sweep
    exact: B          # from a commit of the commit stream
    advance: I64      # new offset − max(everything committed before, log start before, deleted's top), ≥ 0
    capacity: F64     # the demonstrated capacity before it (messages/s; 0: none shown)
    at_end: B         # the new offset is at or past the end known before it
    from_lost: B      # everything committed before lay below the log start (before it, or after it:
    #                   a retention overrun)
    unowned: B        # the partition had no owner at the sweep before it or the one after
    deleted: I64      # of what it passed, the messages retention deleted by the sweep after it
    #                   (below that sweep's log start; not counted by the retention_loss episode)

    @property
    def n(self) -> int:
        return len(self.t1)


def capacity_through(s: Series) -> F64:
    """Each row's demonstrated capacity up to and including its own interval (a state row's is its
    carried ``m_max_rate``): the largest busy rate, once a saturated interval was seen, else 0."""
    def through(before: F64, own: F64, marker: F64) -> F64:
        carried = np.where(s.is_state & ~np.isnan(marker), marker, 0.0)
        return np.fmax(np.fmax(before, own), carried)

    busy = through(s.busy_max_before, s.busy_rate, s.m_max_rate)
    return np.where(through(s.sat_max_before, s.sat_rate, s.m_sat_rate) > 0, busy, 0.0)


def member_capacity_through(s: Series, member_rate: F64, m_member_rate: F64) -> tuple[F64, F64]:
    """Each row's demonstrated *member* capacity up to and including its own interval, and the
    running value a state row carries (ungated, NaN: none shown).

    ``member_rate`` (:func:`lagscope.analytics.kseries.member_rates`, NaN without an owner) is what
    the row's owner processed over the interval on its partitions that stayed behind throughout;
    an interval of this partition that is evidence of capacity (``busy_rate`` > 0) shows that the
    member did that much at once, plus this partition's own rate where it reached the log end
    known at its start (kept by the jump test as a pace, but left out of the owner's sum). The
    running maximum from the carried ``m_member_rate`` (a state row's) on, over the current owner's
    rows only (it restarts where the owner changes: another member's pace is no measure of this
    one's, which may own more partitions or fewer); gated like
    :func:`capacity_through` (NaN until a saturated interval was seen). NaN where the partition's
    owners never showed one: the skip rules then fall back to the summed partition capacities."""
    # what one owner did is no measure of the next: the running value restarts where the owner
    # changes (the last owner seen, through sweeps without one), and the interval that ends at a
    # new owner's first sweep is its predecessor's
    first, _ = key_bounds(s.key)
    names, at = tenure_owners(s.is_state, s.owner, s.owned, s.m_tenure_owner, s.m_tenure_owner_ok)
    seen = at >= key_starts(s.key)  # an owner seen in the key up to the row: the last one's
    who = np.where(seen, names[np.maximum(at, 0)], 0)
    new_run = first | (seen != shift(seen, first, False)) | (who != shift(who, first, 0))
    tenure = np.cumsum(new_run)
    to_end = s.prev_end_ok & (s.committed >= s.prev_end)
    shown = ~s.is_state & ~new_run & (s.busy_rate > 0) & ~np.isnan(member_rate)
    own = np.where(shown, np.nan_to_num(member_rate) + np.where(to_end, s.busy_rate, 0.0), np.nan)
    seed = np.where(s.is_state, m_member_rate, own)
    run = segmented_cummax(np.where(np.isnan(seed), -np.inf, seed), tenure)
    run = np.where(np.isfinite(run), run, np.nan)
    return np.where(capacity_through(s) > 0, run, np.nan), run


def advances(s: Series, commits: Commits | None,
             jumps: tuple[Commits, dict[str, np.ndarray]] | None = None) -> Advances:  # type: ignore[type-arg]
    """The advances a skip may hide (the rules: :mod:`lagscope.analytics.skips`): per
    commit in the step's range for keys the commit stream has, else per fresh sweep interval. Only
    those that could be one are returned: ``advance > 0`` or ``deleted > 0``, and either ``unowned`` (an empty group's
    reset, judged against the group's membership), ``from_lost`` (everything before it lost to
    retention: judged against the group's capacity) or a demonstrated capacity that could not have
    processed it at face value (``advance > capacity · (t1 − t0)``) with the new offset at the end.

    - ``advance`` = new − max(everything committed before: the key's earlier commits, its sweeps'
      committed offsets and the carried highest; the log start known before it; the log start
      after it, up to new); the last sweep before a commit that already shows its offset (read
      after the sweep's stamp), no earlier commit having written it, counts with what was
      committed before that sweep only;
    - ``deleted``: where new ≥ the log start of the sweep after it (for a sweep interval, its
      own), that log start − max(everything committed before, the log start before it, or before
      the sweep that read the commit itself), ≥ 0. Retention moved the log start past the
      consumer's position between two sweeps, and the consumer's out-of-range offset was reset
      (to the earliest: onto the log start; to the latest: past it too). No sweep showed the
      committed offset below the log start, so no ``retention_loss`` episode counts those
      messages; the skip rules judge them. (A new offset still below the log start is no reset:
      the sweep shows the shortfall, the episode's.) The log start is known at sweeps only: if
      retention moved on after a reset and before the sweep, part of what the reset passed is
      counted as deleted (the total is the same);
    - ``capacity``: the largest rate over sweep intervals busy at both ends (lag > 0 before and
      after, not starved, their starting offset not passed by retention) before it
      (:attr:`Series.max_rate_before`; for a commit, through the last sweep strictly before it);
    - ``at_end``: new ≥ the end of the sweep before it (sweeps: the previous sweep's end)."""
    has_c = np.zeros(s.n_keys, bool)
    if commits is not None and commits.n:
        known = commits.key[commits.key < s.n_keys]
        has_c[known] = True
    first, _ = key_bounds(s.key)
    # per sweep interval: fresh rows of keys without commit records
    fresh = ~s.is_state & s.prev_committed_ok & s.committed_ok & ~has_c[s.key]
    before = np.where(s.max_committed_before_ok, np.maximum(s.max_committed_before, s.prev_committed),
                      s.prev_committed)
    ls = np.where(s.log_start_ok, s.log_start, 0)
    adv = s.committed - np.maximum(before, ls)
    # below the row's log start, above the previous one's (what the previous sweep's retention
    # loss, if any, counted) and above what was committed before: deleted in the interval, where
    # the offset was reset onto the log start or past it (a row still below it is the episode's)
    prev_ls = np.where(s.prev_log_start_ok, s.prev_log_start, 0)
    deleted = np.where(s.log_start_ok & (s.committed >= ls), np.maximum(ls - np.maximum(before, prev_ls), 0), 0)
    at_end = s.prev_end_ok & (s.committed >= s.prev_end)
    from_lost = s.log_start_ok & (before < s.log_start)
    prev_owned = np.where(first, False, np.roll(s.owned, 1)) if s.n else s.owned
    unowned = ~s.owned | ~prev_owned
    sw = np.flatnonzero(fresh & ((adv > 0) | (deleted > 0)))
    parts = [Advances(key=s.key[sw], t0=s.t[sw] - s.dt[sw], t1=s.t[sw], exact=np.zeros(len(sw), bool),
                      advance=np.maximum(adv[sw], 0), capacity=s.max_rate_before[sw], at_end=at_end[sw],
                      from_lost=from_lost[sw], unowned=unowned[sw], deleted=deleted[sw])]
    if commits is not None and commits.n:
        c, cj = jumps if jumps is not None else commit_jumps(s, commits)
        # the last sweep strictly before each commit, the first at or after it
        j = _rank(s.key, s.t, c.key, c.t, inclusive=False) - 1
        j_ok = (j >= 0) & (s.key[np.maximum(j, 0)] == c.key) if s.n else np.zeros(c.n, bool)
        k = j + 1
        k_ok = (k < s.n) & (s.key[np.minimum(k, s.n - 1)] == c.key) if s.n else np.zeros(c.n, bool)
        jj, kk = np.maximum(j, 0), np.minimum(k, max(s.n - 1, 0))
        lmin = np.iinfo(np.int64).min
        own = np.where(s.committed_ok, s.committed, lmin)
        carried = np.where(s.is_state & s.m_max_committed_ok, s.m_max_committed, lmin)
        # committed before each sweep: max_committed_before leaves the row's own out; a state row
        # has none, and its carried highest includes its own committed, so it counts only above it
        sw_before = np.maximum(np.where(s.max_committed_before_ok, s.max_committed_before, lmin),
                               np.where(carried > own, carried, lmin))
        sw_hi = np.maximum(own, sw_before)  # everything a sweep shows (a carried highest above its own is in sw_before)
        # a sweep is stamped with its start but reads the committed offsets later, so the last one
        # before a commit may show that commit's own offset (an admin reset writes one record):
        # then only what was committed before that sweep was committed before the commit
        earlier = cj["prev_ok"] & (cj["max_before"] >= c.offset)  # an earlier record wrote it
        read_it = (j_ok & s.committed_ok[jj] & (s.committed[jj] == c.offset) & ~earlier) if s.n else j_ok
        hi = np.where(j_ok, np.where(read_it, sw_before[jj], sw_hi[jj]), lmin) if s.n else np.full(c.n, lmin)
        hi = np.maximum(hi, np.where(cj["prev_ok"], cj["max_before"], lmin))
        before_ok = hi != lmin
        c_ls = np.where(cj["ls_ok"], cj["ls"], 0)
        floor0 = np.maximum(hi, c_ls)
        # the log start of the sweep after it, where the commit is at or past it (the consumer's
        # offset was out of range and reset onto it, or past it): what lies below it, above what
        # was committed and the log start before, retention deleted. Before a sweep that read the
        # commit itself, the log start before that sweep (the sweep showed no loss: it read the
        # reset offset, not the one retention passed)
        after_ok = (k_ok & s.log_start_ok[kk] & (c.offset >= s.log_start[kk])) if s.n else np.zeros(c.n, bool)
        ls_seen = (np.where(read_it, np.where(s.prev_log_start_ok[jj], s.prev_log_start[jj], 0), c_ls)
                   if s.n else c_ls)
        top = np.where(after_ok, s.log_start[kk], 0) if s.n else np.zeros(c.n, np.int64)
        c_del = np.where(after_ok, np.maximum(top - np.maximum(hi, ls_seen), 0), 0)
        c_adv = c.offset - np.maximum(floor0, top)
        cap = np.where(j_ok, capacity_through(s)[jj], 0.0) if s.n else np.zeros(c.n)
        c_end = j_ok & s.end_ok[jj] & (c.offset >= s.end[jj]) if s.n else np.zeros(c.n, bool)
        c_lost = before_ok & ((cj["ls_ok"] & (hi < cj["ls"])) | (c_del > 0))
        c_unowned = (j_ok & ~s.owned[jj]) | (k_ok & ~s.owned[kk]) if s.n else np.zeros(c.n, bool)
        ci = np.flatnonzero(cj["in_step"] & before_ok & ((c_adv > 0) | (c_del > 0)))
        parts.append(Advances(key=c.key[ci], t0=np.where(cj["prev_ok"][ci], cj["prev_t"][ci], np.nan), t1=c.t[ci],
                              exact=np.ones(len(ci), bool), advance=np.maximum(c_adv[ci], 0), capacity=cap[ci],
                              at_end=c_end[ci], from_lost=c_lost[ci], unowned=c_unowned[ci], deleted=c_del[ci]))
    a = Advances(*(np.concatenate([getattr(p, f) for p in parts]) for f in Advances.__dataclass_fields__))
    with np.errstate(invalid="ignore"):
        unexplained = (a.capacity > 0) & (a.advance > np.floor(a.capacity * (a.t1 - a.t0)))
    # an advance from below the log start is judged on the group's capacity, which a partition
    # that showed none of its own may still have (rare: only after a retention overrun)
    keep = np.flatnonzero(a.unowned | a.from_lost | (unexplained & a.at_end))
    return Advances(*(getattr(a, f)[keep] for f in Advances.__dataclass_fields__))
