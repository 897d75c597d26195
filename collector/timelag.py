"""Live time-lag estimate from a bounded in-memory history of (end offset, sweep time) points.

Time lag is how long ago the next unconsumed message (the one at the committed offset ``c``)
was written. The collector does not read that record; it estimates the write time from the
history of the partition's end offset (high watermark) seen by past sweeps:

- The history is a list of *runs*: ``(end, first_seen, last_seen)``, one per distinct end
  offset, in sweep order. An idle partition whose end does not move keeps one run whose
  ``last_seen`` advances, so the bound on the history (``max_runs``) is a bound on the number
  of *changes* remembered, and an idle topic never pushes useful points out.
- Message ``c`` did not exist while the end offset was ``≤ c``, and existed once it was
  ``> c``. Take the last run whose end is ``≤ c`` (A) and the run after it (B, end ``> c``):
  the end moved from ``A.end`` to ``B.end`` between ``A.last_seen`` and ``B.first_seen``.
  Assuming a steady write rate inside that interval, the end offset was ``c`` at::

      t(c) = A.last_seen + (c - A.end) / (B.end - A.end) * (B.first_seen - A.last_seen)

  and ``lag_seconds = now - t(c)``, where ``now`` is the latest sweep's time (so the value is
  the time lag *at the sweep*, reproducible from the lake). This never extrapolates: ``t(c)``
  always lies between two observed points.
- ``c ≥`` the latest end (caught up, or a commit past the end after a truncation):
  0 seconds, method ``zero``.
- ``c <`` the oldest remembered end: message ``c`` was written before the history starts,
  so the time lag is *at least* ``now - oldest.first_seen``. That value is reported with
  ``is_lower_bound=True`` (method ``lower_bound``), never an extrapolated guess.
- The end offset going backwards (topic deleted and re-created, unclean truncation) makes the
  old points meaningless: the history restarts from the new point.

Pure and single-threaded: the metrics collector owns one :class:`EndOffsetHistory` per
partition and feeds it under its own lock.

    >>> h = EndOffsetHistory(max_runs=10)
    >>> h.observe(100.0, 10); h.observe(110.0, 30); h.observe(120.0, 30)
    >>> h.estimate(20, now=120.0)      # end was 20 half-way between t=100 and t=110
    TimeLag(seconds=15.0, is_lower_bound=False, method='interpolated')
    >>> h.estimate(5, now=120.0)       # before the history: at least 20 s
    TimeLag(seconds=20.0, is_lower_bound=True, method='lower_bound')
    >>> h.estimate(30, now=120.0)
    TimeLag(seconds=0.0, is_lower_bound=False, method='zero')
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass

__all__ = ["EndOffsetHistory", "TimeLag"]


@dataclass(frozen=True)
class TimeLag:
    """A time-lag estimate in seconds; ``is_lower_bound`` means "at least this much"."""

    seconds: float
    is_lower_bound: bool
    method: str  # 'zero' | 'interpolated' | 'lower_bound'


@dataclass
class _Run:
    end: int
    first_seen: float
    last_seen: float


class EndOffsetHistory:
    """The remembered end offsets of one partition (at most ``max_runs`` distinct values)."""

    def __init__(self, max_runs: int = 120) -> None:
        if max_runs < 2:
            raise ValueError("max_runs must be at least 2")
        self._runs: deque[_Run] = deque(maxlen=max_runs)

    def __len__(self) -> int:
        return len(self._runs)

    @property
    def span_seconds(self) -> float:
        """Time covered by the history (0 when empty)."""
        if not self._runs:
            return 0.0
        return self._runs[-1].last_seen - self._runs[0].first_seen

    def observe(self, ts: float, end: int) -> None:
        """Record that the end offset was ``end`` at time ``ts`` (seconds since the epoch).

        Points older than the latest one are ignored (a late, out-of-order sweep).
        """
        if self._runs:
            last = self._runs[-1]
            if ts < last.last_seen:
                return
            if end == last.end:
                last.last_seen = ts
                return
            if end < last.end:
                self._runs.clear()
        self._runs.append(_Run(end, ts, ts))

    def estimate(self, committed: int, now: float) -> TimeLag | None:
        """Time lag of a consumer whose committed offset is ``committed``, at time ``now``.

        None when the history is empty (nothing observed yet).
        """
        if not self._runs:
            return None
        runs = self._runs
        if committed >= runs[-1].end:
            return TimeLag(0.0, False, "zero")
        if committed < runs[0].end:
            return TimeLag(max(0.0, now - runs[0].first_seen), True, "lower_bound")
        # the last run whose end is <= committed (exists: runs[0].end <= committed)
        ends = [r.end for r in runs]
        i = bisect.bisect_right(ends, committed) - 1
        a, b = runs[i], runs[i + 1]
        frac = (committed - a.end) / (b.end - a.end)
        t = a.last_seen + frac * (b.first_seen - a.last_seen)
        return TimeLag(max(0.0, now - t), False, "interpolated")
