"""The ``anomalies`` table: its rules and the thresholds they take (:class:`lagscope.config.AnalyticsRulesConfig`).

The per-partition rules run in the step's per-partition pass (:mod:`lagscope.analytics.onepass`):
stall, stop and retention loss in :mod:`~lagscope.analytics.np_episodes`, rewind (and the advances
a skip is judged on) in :mod:`~lagscope.analytics.np_points`, commit gaps in
:mod:`~lagscope.analytics.np_gaps`, lag growth in :mod:`~lagscope.analytics.np_growth`; the
group-level ones (rebalance storms, the outages a rebalance explains, skips in
:mod:`~lagscope.analytics.skips`) in the per-group pass (:mod:`lagscope.analytics.groups`). Each is tested
against hand-computed cases and against a Spark SQL statement of the same rule
(``tests/analytics/spark_reference*.py``), except the skips: hand-computed behavioural cases
(``tests/analytics/test_skips.py``).

Episodes (a condition that holds over consecutive sweeps, reported with start and end):

- **stall**: the partition has an owner, lag > 0, and its committed offset has not moved for
  ``stall_after_s`` while work was pending; with the commit stream, the group still commits
  (the same offset: Burrow's STALL). Starts when the work became pending or the last commit
  happened (the later of the two); magnitude = seconds.
- **stop**: as stall, but nobody owns the partition (the consumer is gone) or, with the commit
  stream, nothing at all was committed for ``stop_after_s`` (Burrow's STOP: no commits, owner
  or not); ``stop_after_s``. From sweeps alone an owned partition without progress is a stall:
  an OffsetFetch cannot tell a commit of the same offset from no commit.
- One no-progress run is one episode: it keeps the kind it had when it crossed its threshold
  (a stalled member that later loses its partitions, or leaves an empty group, is one stall,
  not a stall and a stop).
- **starved**: a stall or stop whose owner (the member assigned to the partition) made commit
  progress on another of its partitions during the episode: the consumer is alive and working
  and schedules its partitions unevenly (a slow consumer draining its partitions one at a time).
  Judged in the per-group pass, which sees all of a group's partitions; ``info``, ``warning``
  once it lasts ``5 × stall_after_s``. The key stays the stall's or stop's.
- **Severity** of stalls and stops: ``critical`` only when no member of the group made progress
  during the episode (a stop; a stall of ``5 × stall_after_s``); while other members progress,
  a ``warning``. Elsewhere ``critical`` is for lost data (skip, a proven retention_loss).
- **retention_loss**: committed < log start; magnitude = messages never processed (the
  largest log start − committed of the episode). ``critical`` when proven (a sweep of it where
  no member owned the partition, or its owner committed nothing at all, and its committed offset
  had not moved for ``stop_after_s``: nobody held or read the deleted records), else a
  ``warning`` with that many at most (a live consumer may have fetched them before retention
  deleted them). What retention deleted between two sweeps, past what the last sweep showed,
  is counted at the reset that follows when the reset is a skip (beyond the group's capacity, a
  seek, or an empty group's reset): a critical ``retention_loss`` of the per-group pass
  (:mod:`lagscope.analytics.skips`), one row per reset.

Point events (one sweep interval, or one commit):

- **rewind**: the committed offset went backwards; magnitude = messages processed twice
  (previous committed − max(new committed, log start)): the duplicates at-least-once allows.
  Not after the end offset went down since the previous commit (the topic was deleted and
  re-created, or the log truncated): the lower offset is in another log, nothing is re-read.
  With the commit stream (lake ``commits``) every commit is compared with the one before it
  (``__consumer_offsets`` order), so a rewind that a later commit covered before the next
  sweep is found, timed exactly (start = end = the commit); a sweep rewind a commit rewind
  explains is not reported twice. Without it, from the sweeps.
- **skip**: messages the group never processed, from evidence of not processing, never from
  size (:mod:`lagscope.analytics.skips`, judged per group over the advances of
  :func:`lagscope.analytics.np_points.advances`): ``admin_reset`` (written while the group had no
  members, after it had some; exact at any size with the commit stream), ``out_of_range_reset`` (everything before lay
  below the log start and the advance from it exceeds ``skip_factor`` × the group's demonstrated
  capacity × the interval), ``seek`` (to the end, beyond ``skip_factor`` × the capacity of the
  member that owns the request's partitions × the interval, per commit request of the group).
  Capacities are those shown before the commit judged, a jump to the end never counting as one.
  Without demonstrated capacity (a consumer always caught up) no seek: a burst is never a skip.
  Magnitude = messages never processed; always critical; ``cause`` says which.
- **commit_gap**: a gap between commits, with work pending, far beyond the partition's own
  normal: ``gap > median + k·max(1.4826·MAD, floor)`` over its learned gaps (robust,
  per partition), and ``≥ min_gap_s``. Gaps long enough to be stalls or stops are reported
  as those instead. Magnitude = seconds.

Minute-level: **lag_growth** (lag rose and produce > consume for ``growth_min_minutes``
consecutive minutes; magnitude = messages/s of growth). Group-level: **rebalance_storm**
(``storm_count`` rebalances within ``storm_window_s``; magnitude = rebalances).

Thresholds (``analytics.rules``): the defaults are unchanged by the accuracy work; what
changed is what the rules measure (the commit stream's exact commits, one episode per
no-progress run; skips from evidence of not processing, with no size floor). The accuracy benchmark's
second-scale scenarios commit every 0.5 s, so it scales the time thresholds by the commit
interval: stall/stop after 10 intervals (5 s; the 60 s defaults are 12 intervals of the Java
client's 5 s auto-commit), commit gaps from 2 intervals (1 s; default 10 s). Its earlier 2 s
made a 4 s commit gap a stop by definition (gaps ≥ ``stall_after_s`` are stalls or stops),
and a slow consumer alternating between its partitions a stall.
"""

from __future__ import annotations

__all__ = ["ANOMALY_COLUMNS"]

ANOMALY_COLUMNS = ["cluster", "group_id", "topic", "partition", "kind", "start_ts", "end_ts",
                   "severity", "magnitude", "unit", "detail", "key", "cause"]
