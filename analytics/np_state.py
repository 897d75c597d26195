"""The series part of the next step's state, in numpy over a :class:`~lagscope.analytics.kseries.Series`:
each key's last row with its running markers, and the end-offset points lag in seconds still
needs (equal to the Spark SQL reference in tests/analytics: ``state_rows`` and
``compact_history``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lagscope.analytics.kseries import F64, I64, Series, key_bounds, key_starts, segmented_cumsum, tenure_owners
from lagscope.lag import HISTORY_POINTS

__all__ = ["Points", "compact_history", "history_epochs", "history_points", "state_rows"]


def _fmax(*vs: F64) -> F64:
    """Spark's ``greatest`` over doubles: nulls (NaN) skipped, NaN when all are."""
    out = vs[0]
    for v in vs[1:]:
        out = np.fmax(out, v)
    return out


def state_rows(s: Series) -> Series:
    """Each key's last row (a key without a fresh row keeps its state row), its markers the
    running values up to it: ``m_change_t`` = its last commit change, ``m_pending_t`` the start
    of its pending work, ``m_max_rate`` the largest busy consume rate so far, ``m_sat_rate`` the
    largest saturated one (the busy rate is trusted as capacity once it is > 0), ``m_rate`` its own rate,
    ``m_ret_t`` the start of an open retention loss, ``m_end_t`` the last change of the end,
    ``m_max_committed`` the highest committed offset so far, ``m_alive_t`` the last progress of an
    owner, ``m_drop_t`` the last drop of the end, ``m_owned_t`` the last time it had an owner (null:
    unknown), ``m_tenure_t`` its ``tenure_t``, ``m_change_takeover`` its ``change_takeover`` and
    ``m_tenure_owner`` the owner of its latest owned row (not ok: none); ``m_commit_t`` stays the row's own (the commit
    stream's marker is the caller's). Returned as state rows (``is_state``); the enriched columns
    of the result are those of the last rows and are not meant to be read."""
    _, last = key_bounds(s.key)
    r = s.take(last)
    r.m_change_t = r.change_t
    r.m_pending_t = r.pending_t
    r.m_max_rate = _fmax(r.busy_max_before, r.busy_rate, r.m_max_rate)
    r.m_sat_rate = _fmax(r.sat_max_before, r.sat_rate, r.m_sat_rate)
    r.m_rate = r.rate
    r.m_ret_t = r.ret_t
    r.m_end_t = r.end_change_t
    lmin = np.iinfo(np.int64).min
    mc = np.maximum(np.where(r.max_committed_before_ok, r.max_committed_before, lmin),
                    np.where(r.committed_ok, r.committed, lmin))
    mc = np.maximum(mc, np.where(r.m_max_committed_ok, r.m_max_committed, lmin))
    r.m_max_committed_ok = mc != lmin
    r.m_max_committed = np.where(r.m_max_committed_ok, mc, 0)
    r.m_alive_t = r.alive_t
    r.m_drop_t = r.end_drop_t
    r.m_owned_t = r.owned_t
    r.m_tenure_t = r.tenure_t
    r.m_change_takeover = r.change_takeover
    who, acc = tenure_owners(s.is_state, s.owner, s.owned, s.m_tenure_owner, s.m_tenure_owner_ok)
    at = acc[last]
    r.m_tenure_owner_ok = at >= key_starts(s.key)[last]
    r.m_tenure_owner = np.where(r.m_tenure_owner_ok, who[np.maximum(at, 0)], 0)
    r.is_state = np.ones(len(r.key), bool)
    return r


@dataclass
class Points:
    """End-offset points (see :mod:`lagscope.lag`): the end rose from ``ep`` (seen at ``tp``) to
    ``e`` (first seen at ``tc``); ``epoch`` counts the restarts of the key's history before it."""

    key: I64
    e: I64
    tc: F64
    tp: F64
    ep: I64
    epoch: I64


def history_epochs(s: Series) -> I64:
    """Each row's history epoch (as :func:`lagscope.analytics.kernel.lag_seconds_table` counts
    them): the rows before it, in its key, whose end went down or is unknown."""
    restarts = (s.de_ok & (s.de < 0)) | ~s.end_ok
    return segmented_cumsum(restarts.astype(np.int64), s.key)


def history_points(s: Series) -> Points:
    """The points of the fresh rows: a fresh row with a known end that differs from the previous
    row's; ``(end, t, t, end)`` where the previous end is unknown (a key's first row) or higher (a
    new epoch), else ``(end, t, previous t, previous end)``."""
    first = ~s.prev_end_ok | (s.de_ok & (s.de < 0))
    is_point = ~s.is_state & s.end_ok & (first | (s.de != 0))
    i = np.flatnonzero(is_point)
    nf = first[i]
    return Points(key=s.key[i], e=s.end[i], tc=s.t[i], tp=np.where(nf, s.t[i], s.prev_t[i]),
                  ep=np.where(nf, s.end[i], s.prev_end[i]), epoch=history_epochs(s)[i])


def compact_history(points: Points, s: Series, *, history_points: int = HISTORY_POINTS) -> Points:
    """The points the next step still needs: those of keys with a series row, of the epoch of the
    key's last row, above its last committed offset (an older point can never bracket a later
    offset unless the group rewinds), the newest ``history_points`` of them (the history's bound,
    :mod:`lagscope.lag`). ``points`` may mix the carried ones (epoch 0) and
    :func:`history_points`."""
    _, last = key_bounds(s.key)
    lk = s.key[last]
    n_keys = int(max(lk.max(initial=-1), points.key.max(initial=-1))) + 1
    has = np.zeros(n_keys, bool)
    has[lk] = True
    l_c = np.zeros(n_keys, np.int64)
    l_cok = np.zeros(n_keys, bool)
    l_ep = np.zeros(n_keys, np.int64)
    l_c[lk], l_cok[lk], l_ep[lk] = s.committed[last], s.committed_ok[last], history_epochs(s)[last]
    k = points.key
    keep = np.flatnonzero(has[k] & (points.epoch == l_ep[k]) & (~l_cok[k] | (points.e > l_c[k])))
    keep = keep[np.lexsort((points.tc[keep], k[keep]))]
    kk = k[keep]
    first, _ = key_bounds(kk)
    start = np.maximum.accumulate(np.where(first, np.arange(len(kk)), 0))
    count = np.bincount(kk, minlength=n_keys)[kk] if len(kk) else np.zeros(0, np.int64)
    newest = keep[np.arange(len(kk)) - start >= count - history_points]
    return Points(key=k[newest], e=points.e[newest], tc=points.tc[newest], tp=points.tp[newest],
                  ep=points.ep[newest], epoch=points.epoch[newest])
