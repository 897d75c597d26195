"""The lag_growth rule and its carried state in numpy: the one-pass counterpart of
its Spark SQL reference in tests/analytics (``transform_lag_growth`` and
``lag_growth_state``, both over ``_growth_pass``), row for row.

**lag_growth**: a partition's lag rose, minute over minute, while its producers outpaced its
consumer, for ``min_minutes`` or more consecutive minutes. A minute *grows* when

- the key has a row for the minute just before it (``minute − 1``: after minutes without rows,
  the collector was down, nothing says how the lag moved in between, so a run neither spans a
  gap nor starts across one),
- its ``lag_last`` is greater than that previous minute's (both known: a null lag never grows
  and never lets the next minute grow),
- and ``coalesce(produce_rate, 0) > coalesce(consume_rate, 0)``.

A run is a maximal sequence of consecutive growing minutes of a key. It starts at its first
minute (``start_t``), from the lag before it (``l0``: the previous minute's ``lag_last``), and
counts its growing minutes (``n``). It ends after its last minute when a later minute (the key's
next row) does not grow (``end_t`` = that last minute + 60 s); it is *open* (``end_t`` NaN, the
table's null ``end_ts``) when its last minute is the key's last row. A run of ``n ≥
min_minutes`` is one anomaly: kind ``lag_growth``, severity ``warning``, unit ``messages/s``,
magnitude = (lag of its last minute − ``coalesce(l0, 0)``) / (seconds from its start to the end
of its last minute, also for an open run), detail ``"lag grew for %d consecutive minutes at
%.1f messages/s"`` (a null magnitude is written ``n``: Java's ``"null"`` cut to the precision).

**Carried state** (one row per key, the key's last row, ``is_state``): an open run continues in
the next step. The state row keeps the last minute's ``minute``/``lag_last``/rates (so the next
step's first minute is compared with it) and, when that minute grew, its run: ``g_start`` (run
start), ``g_lag0`` (``l0``) and ``g_n`` (growing minutes so far). In the next step a state row
with a run (``g_start ≠ −1``) counts as a growing row contributing ``g_n`` minutes (not 1), so a
run that carries on is one run, reported again by every step that sees it with the same start
(the table keeps the latest); a state row never grows by itself otherwise. A run of the state
alone (a key without fresh minutes) is reported again as well: open, as the state saw it.

Layout (see :class:`Minutes`): rows grouped by key, within a key in strictly increasing
``minute`` order, a key's state row first (its minute, the previous step's last, is earlier than
the fresh ones). Spark groups a run by ``(key, start, l0)``; here a run is a block of
consecutive growing rows, which is the same grouping for such input (every run of a key starts
at a distinct minute; a state's ``g_start`` is not after its own minute).

Pure numpy: no Spark here. Vectorised over rows; Python loops only build the anomaly details.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lagscope.analytics.kseries import F64, I64, B, Found, java_fixed, key_bounds, segmented_cumsum, shift

__all__ = ["NO_RUN", "Minutes", "lag_growth", "lag_growth_state"]

NO_RUN = -1
"""``g_start`` of a row without a carried run (Spark's null ``m_g_start``)."""

_DETAIL = "lag grew for {n} consecutive minutes at {mag} messages/s"
_NULL_1F = "n"
"""A null argument of Spark's ``format_string('%.1f')``: Java's formatter writes ``"null"`` and
then applies the precision as a maximum width, as for ``%s``: ``"n"``."""


@dataclass
class Minutes:
    """Partition-minute rows of a chunk of whole keys (the job's lag_trends partition rows,
    unioned with the previous step's :func:`lag_growth_state` rows).

    Minutes are int64 minute numbers: epoch seconds // 60 (``window_start`` = ``minute · 60 s``).
    Nulls: a nullable double is NaN; a nullable long is its values (0 where null) and ``_ok``.
    """

    key: I64              # key number in the chunk (rows grouped by it; a key's state row first)
    minute: I64           # the row's minute (window_start); strictly increasing within a key
    lag_last: I64         # lag of the minute's last sweep (0 where null)
    lag_last_ok: B        # lag_last is not null
    produce_rate: F64     # messages/s produced in the minute (NaN: null, counts as 0)
    consume_rate: F64     # messages/s consumed in the minute (NaN: null, counts as 0)
    is_state: B           # the key's carried row from the previous step (fresh rows: False)
    g_start: I64          # state: minute its open run started (m_g_start); NO_RUN (−1): none / fresh row
    g_lag0: I64           # state: lag before that run (m_g_lag0; 0 where null)
    g_lag0_ok: B          # g_lag0 is not null (False on fresh rows)
    g_n: I64              # state: growing minutes of the run so far (m_g_n; 0 where null: null
    #                       exactly where g_start is NO_RUN in the rows lag_growth_state makes)

    @property
    def n(self) -> int:
        return len(self.minute)

    def take(self, idx: I64 | B) -> Minutes:
        """The rows at ``idx`` (indices or a mask), every column."""
        return Minutes(**{f: getattr(self, f)[idx] for f in self.__dataclass_fields__})


@dataclass
class _Pass:
    """``_growth_pass`` per row: ``grows`` (``_grows``), ``own`` (minutes the row adds to its run:
    ``g_n`` for a state row, 1 for a growing fresh one, else 0), ``cnt`` (running sum of ``own``
    per key, ``_cnt``) and the row's run (``_run``: the last start mark up to it; meaningful on
    growing rows): ``run_s`` (start minute, NO_RUN: null), ``run_l0``/``run_l0_ok``, ``run_c0``
    (``cnt`` before the run)."""

    first: B
    last: B
    grows: B
    own: I64
    cnt: I64
    run_s: I64
    run_l0: I64
    run_l0_ok: B
    run_c0: I64


def _growth_pass(m: Minutes) -> _Pass:
    """The per-row values of Spark's ``_growth_pass`` (see the module doc for the rule)."""
    n = m.n
    first, last = key_bounds(m.key)
    prev_minute = shift(m.minute, first, 0)
    prev_lag = shift(m.lag_last, first, 0)
    prev_lag_ok = shift(m.lag_last_ok, first, False)
    adjacent = ~first & (prev_minute == m.minute - 1)
    produce = np.where(np.isnan(m.produce_rate), 0.0, m.produce_rate)
    consume = np.where(np.isnan(m.consume_rate), 0.0, m.consume_rate)
    # a comparison with a null is null: coalesce(…, False)
    fresh_grows = (~m.is_state & adjacent & m.lag_last_ok & prev_lag_ok & (m.lag_last > prev_lag)
                   & (produce > consume))
    grows = fresh_grows | (m.is_state & (m.g_start != NO_RUN))
    own = np.where(m.is_state, m.g_n, grows.astype(np.int64))
    cnt = segmented_cumsum(own, m.key)
    prev_grows = shift(grows, first, False)
    # start marks: every state row (even without a run: a non-null struct of nulls), and a
    # growing fresh row after a non-growing one; a row's run is the last mark up to it
    marked = m.is_state | (grows & ~prev_grows)
    idx = np.arange(n)
    at = np.maximum.accumulate(np.where(marked, idx, -1)) if n else idx
    key_start = np.maximum.accumulate(np.where(first, idx, 0)) if n else idx
    has_run = at >= key_start
    at = np.maximum(at, 0)
    run_s = np.where(m.is_state, m.g_start, m.minute)[at]
    run_l0 = np.where(m.is_state, m.g_lag0, prev_lag)[at]
    run_l0_ok = np.where(m.is_state, m.g_lag0_ok, prev_lag_ok)[at] & has_run
    run_c0 = np.where(m.is_state, 0, cnt - own)[at]
    return _Pass(first=first, last=last, grows=grows, own=own, cnt=cnt, run_s=np.where(has_run, run_s, NO_RUN),
                 run_l0=np.where(run_l0_ok, run_l0, 0), run_l0_ok=run_l0_ok, run_c0=np.where(has_run, run_c0, 0))


def lag_growth(m: Minutes, *, min_minutes: int) -> Found:
    """lag_growth anomalies of the rows ``m`` (= ``transform_lag_growth(minutes, min_minutes=…)``):
    one per run of ``min_minutes`` or more growing minutes, ordered by key and start.

    ``start_t`` = the run's start minute · 60; ``end_t`` = (its last minute + 1) · 60 when the
    key's next row does not grow, NaN while the run is open; ``magnitude`` = (``lag_last`` of its
    last minute − ``coalesce(l0, 0)``) / ((last minute + 1 − start) · 60 s), NaN (null) when that
    lag is null (only a hand-made state row can have a run and no lag)."""
    p = _growth_pass(m)
    g = p.grows
    if not bool(g.any()):
        return Found.empty()
    nxt = np.zeros(m.n, bool)
    nxt[:-1] = g[1:]
    nxt &= ~p.last
    prev = shift(g, p.first, False)
    starts = np.flatnonzero(g & ~prev)
    ends = np.flatnonzero(g & ~nxt)  # the run's last row (same count and order as starts)
    csum = np.concatenate(([0], np.cumsum(p.own)))
    n_min = csum[ends + 1] - csum[starts]  # sum(_own) over the run's rows
    keep = n_min >= min_minutes
    starts, ends, n_min = starts[keep], ends[keep], n_min[keep]
    s = p.run_s[starts]
    last_minute = m.minute[ends]
    secs = (last_minute + 1).astype(np.float64) * 60.0 - s.astype(np.float64) * 60.0
    l0 = np.where(p.run_l0_ok[starts], p.run_l0[starts], 0)
    lag_ok = m.lag_last_ok[ends]
    mag = np.where(lag_ok, (m.lag_last[ends] - l0).astype(np.float64), np.nan) / secs
    # _end: a later minute of the key that did not grow; open otherwise
    closed = ~p.last[ends]
    end_t = np.where(closed, (last_minute + 1).astype(np.float64) * 60.0, np.nan)
    k = len(starts)
    detail = np.array([_DETAIL.format(n=int(c), mag=_NULL_1F if x != x else java_fixed(float(x), 1))
                       for c, x in zip(n_min, mag, strict=True)], dtype=object)
    return Found(key=m.key[starts], kind=np.full(k, "lag_growth", dtype=object), start_t=s.astype(np.float64) * 60.0,
                 end_t=end_t, severity=np.full(k, "warning", dtype=object), magnitude=mag,
                 unit=np.full(k, "messages/s", dtype=object), detail=detail)


def lag_growth_state(m: Minutes) -> Minutes:
    """The carried state of the rows ``m`` (= ``lag_growth_state(minutes)``): each key's last
    row, ``is_state`` True, with its run when that row grows (``g_start``/``g_lag0``/``g_n`` =
    the run's start, ``l0`` and its minutes up to the row), else ``g_start`` NO_RUN, ``g_lag0``
    not ok, ``g_n`` 0 (Spark's nulls)."""
    p = _growth_pass(m)
    sel = np.flatnonzero(p.last)
    g = p.grows[sel]
    l0_ok = g & p.run_l0_ok[sel]
    return Minutes(
        key=m.key[sel], minute=m.minute[sel], lag_last=m.lag_last[sel], lag_last_ok=m.lag_last_ok[sel],
        produce_rate=m.produce_rate[sel], consume_rate=m.consume_rate[sel], is_state=np.ones(len(sel), bool),
        g_start=np.where(g, p.run_s[sel], NO_RUN), g_lag0=np.where(l0_ok, p.run_l0[sel], 0), g_lag0_ok=l0_ok,
        g_n=np.where(g, p.cnt[sel] - p.run_c0[sel], 0))
