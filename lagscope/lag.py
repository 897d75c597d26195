"""Offset lag and lag in seconds: the one definition of each, used by every component.

The sweep (:mod:`lagscope.collector.sweep`) computes the lake's ``offsets.lag`` and
``offsets.lag_basis`` with :func:`lag_end` and :func:`offset_lag`; the live metrics
(:mod:`lagscope.collector.metrics`) keep one :class:`EndOffsetHistory` per group-partition and
turn it into seconds with :func:`lag_seconds`; the analytics call the same functions over whole
columns (:mod:`lagscope.analytics.step`, :mod:`lagscope.analytics.kernel`, which keeps the same
history vectorised). The functions are numpy over arrays (a value and a validity array for a
nullable integer, NaN for a null float), so a component calls them once per sweep or batch.

**Offset lag** = ``max(0, end − committed)``. ``end`` is the last stable offset (LSO) for a group
that reads with ``isolation.level=read_committed`` (a transactional topic ends in commit markers,
so lag against the high watermark never reaches 0 there), else the high watermark (HW). A
read_committed group whose LSO is unknown is measured against the HW rather than not at all.
Null without a commit or without the end.

**Lag in seconds** = the sweep's time − the produce time of the message at the committed offset
``c`` (the next one the group consumes):

- ``zero``: the offset lag is 0 (caught up; an idle caught-up topic is 0 s);
- ``exact``: the produce time of the record at ``c`` is known (``offsets.committed_record_ts``);
- ``interpolated``: estimated from the history of the end offset (the end the lag is measured
  against) seen by past sweeps. A *point* ``(e, tc, tp, ep)`` records one rise of the end: it was
  ``ep`` at ``tp`` (the last sweep that saw it) and ``e`` at ``tc`` (the first that saw it), so
  messages ``ep … e−1`` were written in ``(tp, tc]``. The point with the smallest ``e > c``
  brackets message ``c``; assuming a steady write rate inside that one interval, message
  ``ep + k`` of the ``n = e − ep`` is written in the middle of its share of it::

      t(c) = tp + (c − ep + ½) / (e − ep) · (tc − tp)

  (the ½: message ``c`` is written while the end moves from ``c`` to ``c + 1``, so the middle
  of that step; without it, the first message of a burst would be dated at ``tp``, when it did
  not exist yet). Only the interval in which the message arrived is used, so an idle spell before a
  burst adds nothing, and nothing is extrapolated: when ``c`` lies before the remembered history
  (``c < ep`` of the oldest point) the value is ``t − tp``, flagged as a lower bound ("at least").

**The history and its bounds** (the same for the collector's live values and the analytics'):

- a point is recorded when a sweep sees the end differ from the previous sweep's; an idle
  partition records none, however many sweeps see it;
- the history restarts (a new *epoch*, its first point ``(e, t, t, e)``: "written at or before
  ``t``") where the end went down (topic deleted and re-created, log truncated) or where a sweep
  could not read it: the points before say nothing about offsets after;
- only the newest :data:`HISTORY_POINTS` points (``time_lag.history_points``) are used: an offset
  older than those is a lower bound;
- points at or below the committed offset are forgotten (by the collector at each sweep, by the
  analytics at the end of each step): they can never bracket a later offset, unless the group
  rewinds, whose next values may then be lower bounds where a history that kept them interpolates.

    >>> h = EndOffsetHistory(max_points=10)
    >>> for t, end in ((100.0, 10), (110.0, 30), (120.0, 30)):
    ...     h.observe(t, end)
    >>> h.bracket(20)                   # 10 → 30 between t=100 and t=110
    (30, 110.0, 100.0, 10)
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "BASIS_HW",
    "BASIS_LSO",
    "HISTORY_POINTS",
    "METHODS",
    "EndOffsetHistory",
    "Point",
    "brackets",
    "lag_end",
    "lag_seconds",
    "offset_lag",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
B = npt.NDArray[np.bool_]

#: ``offsets.lag_basis``: the lag was measured against the high watermark / the last stable offset
BASIS_HW, BASIS_LSO = "hw", "lso"

#: the methods of lag in seconds, as :func:`lag_seconds` codes them (1-based; 0: unknown)
METHODS = ("zero", "interpolated", "exact")

#: default of ``time_lag.history_points``: the newest end-offset points used per group-partition
HISTORY_POINTS = 120

#: an end-offset point: the end rose from ``ep`` (last seen at ``tp``) to ``e`` (first seen at ``tc``)
Point = tuple[int, float, float, int]


def lag_end(hw: I64, hw_ok: B, lso: I64, lso_ok: B, read_committed: B) -> tuple[I64, B, B]:
    """The end each row's lag is measured against: ``(end, end_ok, on_lso)``. ``on_lso``: the
    LSO (a read_committed row whose LSO is known), else the HW (``end_ok`` false when unknown)."""
    on_lso = read_committed & lso_ok
    return np.where(on_lso, lso, hw), on_lso | hw_ok, on_lso


def offset_lag(committed: I64, committed_ok: B, end: I64, end_ok: B) -> tuple[I64, B]:
    """``max(0, end − committed)`` and where it is known (a commit and an end)."""
    ok = committed_ok & end_ok
    return np.where(ok, np.maximum(end - committed, 0), 0), ok


def lag_seconds(now: F64, lag: I64, lag_ok: B, committed: I64, record_t: F64, found: B,
                e: I64, tc: F64, tp: F64, ep: I64) -> tuple[F64, B, I32]:
    """Lag in seconds at time ``now`` (see the module doc): ``(seconds, is_lower_bound, method)``,
    ``method`` the 1-based code of :data:`METHODS` (0: unknown, and then ``seconds`` means
    nothing). ``record_t``: the produce time of the record at ``committed`` (NaN: not read);
    ``found``: whether the history holds a point with ``e > committed``, and ``e, tc, tp, ep`` the
    one with the smallest ``e`` (any values where not found)."""
    lagging = lag_ok & (lag > 0)
    exact = lagging & ~np.isnan(record_t)
    interpolated = lagging & np.isnan(record_t) & found
    method = np.where(lag_ok & ~lagging, 1, 0).astype(np.int32)
    method[interpolated] = 2
    method[exact] = 3
    inside = committed >= ep
    with np.errstate(divide="ignore", invalid="ignore"):
        written = tp + ((committed - ep).astype(np.float64) + 0.5) / (e - ep).astype(np.float64) * (tc - tp)
    estimate = np.where(inside, written, tp)
    seconds = np.select([method == 3, method == 2], [now - record_t, now - estimate], 0.0)
    return np.maximum(seconds, 0.0), interpolated & ~inside, method


class EndOffsetHistory:
    """The end-offset points of one group-partition (see the module doc), fed sweep by sweep.

    ``observe`` each sweep's end (``None``: not read), then ``forget_through`` the committed
    offset; ``bracket`` finds the point the lag in seconds is read from."""

    __slots__ = ("_e", "_ep", "_last_end", "_last_t", "_tc", "_tp", "max_points")

    def __init__(self, max_points: int = HISTORY_POINTS) -> None:
        if max_points < 1:
            raise ValueError("max_points must be at least 1")
        self.max_points = max_points
        self._e: list[int] = []
        self._tc: list[float] = []
        self._tp: list[float] = []
        self._ep: list[int] = []
        self._last_end: int | None = None
        self._last_t = float("-inf")

    @property
    def points(self) -> list[Point]:
        """The remembered points, oldest first."""
        return list(zip(self._e, self._tc, self._tp, self._ep, strict=True))

    def _restart(self) -> None:
        for col in (self._e, self._tc, self._tp, self._ep):
            col.clear()

    def _append(self, e: int, tc: float, tp: float, ep: int) -> None:
        if len(self._e) >= self.max_points:
            for col in (self._e, self._tc, self._tp, self._ep):
                del col[0]
        self._e.append(e)
        self._tc.append(tc)
        self._tp.append(tp)
        self._ep.append(ep)

    def observe(self, t: float, end: int | None) -> None:
        """A sweep at ``t`` (epoch seconds) saw the end at ``end``. A sweep older than the
        latest one observed is ignored (a late result)."""
        if t < self._last_t:
            return
        last_end, last_t = self._last_end, self._last_t
        self._last_end, self._last_t = end, t
        if end is None:
            self._restart()
        elif last_end is None or end < last_end:
            self._restart()
            self._append(end, t, t, end)
        elif end > last_end:
            self._append(end, t, last_t, last_end)

    def forget_through(self, committed: int | None) -> None:
        """Forget the points whose end is at or below ``committed`` (they bracket no offset from
        ``committed`` on)."""
        if committed is None or not self._e or self._e[0] > committed:
            return
        n = bisect.bisect_right(self._e, committed)
        for col in (self._e, self._tc, self._tp, self._ep):
            del col[:n]

    def bracket(self, committed: int) -> Point | None:
        """The point with the smallest end above ``committed``, or None."""
        i = bisect.bisect_right(self._e, committed)
        if i == len(self._e):
            return None
        return self._e[i], self._tc[i], self._tp[i], self._ep[i]


def brackets(histories: Sequence[EndOffsetHistory | None], committed: Sequence[int]) -> tuple[B, I64, F64, F64, I64]:
    """:meth:`EndOffsetHistory.bracket` of many as the arrays :func:`lag_seconds` takes."""
    n = len(committed)
    found = np.zeros(n, bool)
    e, ep = np.zeros(n, np.int64), np.zeros(n, np.int64)
    tc, tp = np.zeros(n), np.zeros(n)
    for i, (h, c) in enumerate(zip(histories, committed, strict=True)):
        p = h.bracket(c) if h is not None else None
        if p is not None:
            found[i] = True
            e[i], tc[i], tp[i], ep[i] = p
    return found, e, tc, tp, ep
