"""The stall, stop and retention_loss episodes of a chunk of whole keys in one vectorised numpy
pass over the enriched series (:class:`lagscope.analytics.kseries.Series`): the same rows,
values and strings as its Spark SQL reference (``transform_episodes``, tests/analytics), and the
commit marker the next step's state rows carry (``last_commit_marker`` there).

The rules (per key, over its rows in time order, the carried state row included, so an episode
open at the end of the previous step keeps its start):

- **lagging**: lag > 0 (a null lag is 0), unless the group is held at an open transaction
  (``committed = lso < end``: a read_committed group has nothing to consume).
- **silent** (only with the commit stream): the commit stream knows the key (it has a record of
  it at or before the row, or the state row carries ``m_commit_t``) and the key's last commit
  record at or before the row is ``stop_after_s`` or more ago.
- **stall**: lagging, owned, not silent, and ``idle_pending_s ≥ stall_after_s`` (the committed
  offset has not moved while work was pending; with the commit stream the group still commits
  the same offset: Burrow's STALL).
- **stop**: not a stall, lagging, nobody owns the partition or it is silent, and
  ``idle_pending_s ≥ stop_after_s`` (the consumer is gone, or commits nothing at all: Burrow's
  STOP). From sweeps alone an owned partition without progress is a stall.
- **never committed** (only with the commit stream): an owned partition whose last commit
  record is not its current owner's (records are the owner's from its tenure's second sweep
  on, ``tenure_t``: :class:`lagscope.analytics.kseries.Series`) is a stall, not a stop, however
  silent: nothing shows the owner's commits stopped (a rebalance gave a live member the
  partition, and the last record is the previous owner's). Reason ``never committed`` (below),
  critical like a stop.
- **retention_loss**: committed < log start (``lost``); the episode starts at ``ret_t``. It is
  *proven* when at one of its sweeps nobody read the partition (no member owned it, or its owner
  was silent) and its committed offset had not moved for ``stop_after_s`` (``idle_pending_s``:
  the stop rule's consumer gone): a live owner may already have fetched the deleted records (its
  client returns the buffered fetch and commits on through them at its pace), which offsets
  cannot tell from a loss, and so may a committer without members (``assign()`` + commit,
  Flink's KafkaSource) that still progresses; a partition nobody reads is read again from the
  committed offset, which retention deleted. The reset that follows a loss is judged as a skip
  (``out_of_range_reset``, :mod:`lagscope.analytics.np_points`) when it jumps beyond the group's
  capacity.

A row of a stall or stop is an *idle* mark starting at ``t − idle_pending_s``; a lost row a
*loss* mark starting at ``ret_t``: two independent conditions (a stopped consumer whose
messages the retention deletes is both), each its own episode. The start is rounded to 3
decimals as Spark's ``round`` (:func:`spark_round`). An episode is the marks of a key with the
same class and start: one no-progress run is one episode, of the kind (and with the reason,
``why``) of its earliest mark, the kind it had when it crossed its threshold (a stalled member
that then loses its partitions is still the one stall). It ends at the next sweep of a mark
whose next sweep carries no mark of the same episode (the latest such next sweep); open
(``end_t`` NaN) when its last mark is the key's last sweep. Its duration is
``(end, else its last mark's t) − start``.

Output (:class:`lagscope.analytics.kseries.Found`), per episode: kind ``stall`` / ``stop`` /
``retention_loss``; severity ``critical`` for stops, proven retention losses, a never-committed
stall and a stall of ``5 × stall_after_s`` or longer, else ``warning``; magnitude the duration in ``s``, for a
retention loss the largest ``log_start − committed`` of its rows in ``messages`` (messages
never processed; for one not proven, at most that many); detail ``"no commit progress for %.1f s
with lag pending (<why>)"`` (why: ``no owner`` / ``owner assigned, no commits`` / ``owner still
assigned`` / ``owner assigned, never committed it since taking it over``, of the first mark) or
``"committed offset fell %d messages below the log start: "`` followed by ``"never processed (no
consumer held them)"`` (proven) or ``"lost unless its consumer had already fetched them"``.

These are the judgements one partition's rows allow. The per-group pass judges each stall and
stop again across its group (:func:`lagscope.analytics.groups.judge_idle`): one whose owner made
progress on its other partitions is ``starved``, and one beside another member's progress a
``warning``.

Pure numpy: no Spark here.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal

import numpy as np

from lagscope.analytics.kseries import F64, I64, B, Commits, Found, Series, asof, java_fixed, key_bounds

__all__ = ["commit_marker", "episodes", "idle_code", "last_commit_t", "spark_round"]

_NAN = float("nan")
_LMIN = np.iinfo(np.int64).min
_CTX = Context(prec=800)  # enough digits for any double at any scale (no inexact quantize)

_KINDS = np.array(["stall", "stop", "retention_loss"], dtype=object)
_STALL, _STOP, _LOSS = 0, 1, 2
_WHYS = np.array(["no owner", "owner assigned, no commits", "owner still assigned",
                  "owner assigned, never committed it since taking it over"], dtype=object)
_NEVER = 3  # the why of an owner that has not committed the partition since it took it over


# --------------------------------------------------------------------------------------------
# Spark's number formats
# --------------------------------------------------------------------------------------------

def _java_decimal(x: float) -> Decimal:
    """The decimal value Java's ``BigDecimal.valueOf(x)`` / ``Formatter`` work from: the digits
    of ``Double.toString(x)`` (Python's ``repr``: the shortest digits that read back as ``x``;
    Java 17's are the same but for rare over-long outputs such as ``1e23``)."""
    return Decimal(repr(float(x)))


def spark_round(x: F64, digits: int) -> F64:
    """Spark's ``round(x, digits)`` of doubles: NaN/±inf as they are, else
    ``BigDecimal.valueOf(x).setScale(digits, HALF_UP).doubleValue()``, i.e. HALF_UP (ties away
    from zero) on the *decimal digits of* ``Double.toString(x)``, not on the double's exact
    binary value (``round(1.0005, 3)`` is 1.001 although the double is 1.000499999…); never −0.0.

    Vectorised: ``y = x·10^digits`` is within 2 ulp(y) of the decimal's scaled value, so when
    ``y`` is farther than that from a half-integer (and ``|y| < 2^52``) both round to the same
    integer ``k``, and ``k / 10^digits`` (exact ``k``, one correctly rounded division) is the
    double nearest the rounded decimal, as ``doubleValue`` is. The few others (ties up to the
    error bound) go through :class:`decimal.Decimal` one by one."""
    x = np.asarray(x, dtype=np.float64)
    scale = 10.0 ** digits
    with np.errstate(invalid="ignore", over="ignore"):
        y = x * scale
        k = np.rint(y)
        near_tie = np.abs(np.abs(y - np.trunc(y)) - 0.5) <= 4.0 * np.spacing(np.abs(y))
        slow = np.isfinite(x) & (near_tie | ~(np.abs(y) < 2.0 ** 52))
        out = np.where(np.isfinite(x), k / scale, x) + 0.0
    if slow.any():
        q = Decimal(1).scaleb(-digits)
        idx = np.flatnonzero(slow)
        out[idx] = [float(_java_decimal(v).quantize(q, rounding=ROUND_HALF_UP, context=_CTX)) + 0.0
                    for v in x[idx]]
    return out


# --------------------------------------------------------------------------------------------
# the commit stream
# --------------------------------------------------------------------------------------------

def _asof(mark_key: I64, mark_t: F64, row_key: I64, row_t: F64) -> F64:
    """Per row, the time of its key's latest mark at or before ``row_t`` (NaN: none; NaN marks
    are no marks; :func:`lagscope.analytics.kseries.asof`)."""
    i = asof(mark_key, mark_t, row_key, row_t)
    return np.where(i >= 0, mark_t[np.maximum(i, 0)] if len(mark_t) else _NAN, _NAN)


def _state_marks(s: Series) -> tuple[I64, F64]:
    """The state rows' ``m_commit_t`` as commit records (older than the step's commits)."""
    sel = s.is_state & ~np.isnan(s.m_commit_t)
    return s.key[sel], s.m_commit_t[sel]


def last_commit_t(s: Series, commits: Commits | None) -> tuple[F64, B]:
    """Per series row: ``last_commit_t``, the time of the key's last commit record at or before
    the row (a commit at the row's own time counts; a state row's ``m_commit_t`` counts as a
    commit record older than the step's commits), NaN when there is none; and
    ``commits_known``, the commit stream has a record of the key at or before the row (or the
    state row carries ``m_commit_t``, or it has a record without a time): from the key's first
    record on, so that a row is judged the same whether a later record is in its step or not.
    Without the commit stream (``None``): all NaN, all False (Spark's ``_with_last_commit``)."""
    if commits is None:
        return np.full(s.n, _NAN), np.zeros(s.n, bool)
    sk, st = _state_marks(s)
    mk = np.concatenate([commits.key, sk])
    mt = np.concatenate([commits.t, st])
    lct = _asof(mk, mt, s.key, s.t)
    # known from the key's first record on (what a row knows, whatever a later step reads), or
    # by a record without a time (it is no earlier or later than any row)
    size = max(s.n_keys, int(mk.max()) + 1 if len(mk) else 0)
    timeless = np.zeros(size, bool)
    timeless[commits.key[np.isnan(commits.t)]] = True
    return lct, ~np.isnan(lct) | timeless[s.key]


def commit_marker(s: Series, commits: Commits | None) -> F64:
    """Per key number (length ``s.n_keys``): the ``m_commit_t`` the next step's state row of the
    key carries: the greater of the key's carried ``m_commit_t`` (its state row's) and the time of
    the key's last commit record of the step at or before its last row (NaN if neither). The next
    step reads commits only from shortly before its start, so a group silent for longer is still
    known to have committed then, however many steps it stays silent (a stop stays a stop).
    A key number without rows: NaN."""
    out = np.full(s.n_keys, _NAN)
    own = np.full(s.n_keys, _NAN)
    np.fmax.at(own, s.key, s.m_commit_t)  # only a state row has one
    _, last = key_bounds(s.key)
    lk, lt = s.key[last], s.t[last]
    latest = _asof(commits.key, commits.t, lk, lt) if commits is not None else np.full(len(lk), _NAN)
    out[lk] = np.fmax(own[lk], latest)
    return out


# --------------------------------------------------------------------------------------------
# the episodes
# --------------------------------------------------------------------------------------------

def _bits(v: F64) -> I64:
    """A double's identity as equality sees it (one NaN, −0.0 = 0.0), for grouping/joining."""
    return np.where(np.isnan(v), _NAN, v + 0.0).view(np.int64)


def idle_code(kind: I64, why: I64) -> F64:
    """The ``m_idle`` marker of an idle episode of ``kind`` (stall 0, stop 1) and reason ``why``."""
    return (kind * 4 + why).astype(np.float64)


def episodes(s: Series, commits: Commits | None, *, stall_after_s: float, stop_after_s: float,
             carried_idle: F64 | None = None, idle_out: F64 | None = None,
             carried_lost: F64 | None = None, lost_out: F64 | None = None) -> Found:
    """stall, stop and retention_loss episodes of the chunk (see the module doc for the rules
    and the output; Spark's ``transform_episodes``). ``commits``: the commit stream's records of
    the chunk's keys, or ``None`` without it.

    ``carried_idle``: per row of ``s``, the ``m_idle`` marker a state row carries (NaN: none), the
    kind and reason (:func:`idle_code`) of the idle episode its previous step left open: the
    episode keeps them (its first mark was in that step, and its rows are not here: a stall whose
    owner then left stays the stall one pass sees, not a stop judged from the rows after the
    boundary). ``idle_out`` (length ``s.n_keys``), when given, receives per key the marker of the
    episode open at its last row (NaN: none), for the next state row.

    ``carried_lost`` / ``lost_out``: the same for the retention loss open at a state row, the
    ``m_lost`` marker (1: proven, some earlier sweep of it had no reader; 0: not proven yet; NaN:
    none), so a loss proven in an earlier step stays proven when its later sweeps have an owner."""
    lct, known = last_commit_t(s, commits)
    # held at an open transaction: committed = LSO < end (nulls: false)
    at_lso = s.lso_ok & s.committed_ok & s.end_ok & (s.committed == s.lso) & (s.lso < s.end)
    lagging = s.lag_ok & (s.lag > 0) & ~at_lso
    owned = s.owned
    with np.errstate(invalid="ignore"):
        silent = known & ((s.t - np.where(np.isnan(lct), -np.inf, lct)) >= stop_after_s)
        # the last record is the current owner's: from its tenure's second sweep on, or any record
        # when the tenure's start is unknown (a record without a time too)
        own = (s.tenure_t == -np.inf) | (lct >= s.tenure_t)
        fresh = owned & known & ~own  # its owner has not committed it since taking it over
        idle = s.idle_pending_s
        stall = lagging & owned & (~silent | fresh) & (idle >= stall_after_s)
        stop = ~stall & lagging & (~owned | (silent & ~fresh)) & (idle >= stop_after_s)
    why = np.where(~owned, 0, np.where(silent & fresh, 3, np.where(silent, 1, 2)))

    # the marks: loss rows (class 0) and stuck rows (class 1)
    loss_rows = np.flatnonzero(s.lost)
    idle_rows = np.flatnonzero(stall | stop)
    if idle_out is not None:
        idle_out[:] = np.nan
    if lost_out is not None:
        lost_out[:] = np.nan
    if len(loss_rows) + len(idle_rows) == 0:
        return Found.empty()
    row = np.concatenate([loss_rows, idle_rows])
    cls = np.concatenate([np.zeros(len(loss_rows), np.int64), np.ones(len(idle_rows), np.int64)])
    kind = np.concatenate([np.full(len(loss_rows), _LOSS), np.where(stall[idle_rows], _STALL, _STOP)])
    start = spark_round(np.concatenate([s.ret_t[loss_rows], s.t[idle_rows] - idle[idle_rows]]), 3)
    key, t, next_t = s.key[row], s.t[row], s.next_t[row]
    sbits = _bits(start)

    # goes on: a mark of the same key, class and start at the mark's next sweep
    has_next = ~np.isnan(next_t)
    here = np.stack([key, _bits(t), cls, sbits], axis=1)
    there = np.stack([key, _bits(next_t), cls, sbits], axis=1)[has_next]
    _, inv = np.unique(np.concatenate([here, there]), axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    goes_on = np.zeros(len(row), bool)
    goes_on[has_next] = np.isin(inv[len(here):], inv[:len(here)])
    ended = has_next & ~goes_on

    # the episodes: marks grouped by (key, class, start), each group's marks in time order
    groups, g = np.unique(np.stack([key, cls, sbits], axis=1), axis=0, return_inverse=True)
    g = g.reshape(-1)
    order = np.lexsort((t, g))
    firsts = np.flatnonzero(np.r_[True, g[order][1:] != g[order][:-1]])
    first_mark = order[firsts]
    last_t = np.maximum.reduceat(t[order], firsts)
    end_t = np.fmax.reduceat(np.where(ended, next_t, _NAN)[order], firsts)
    lost_by = np.where(s.lost[row], s.log_start[row] - s.committed[row], _LMIN)
    lost = np.maximum.reduceat(lost_by[order], firsts)
    lost_ok = lost != _LMIN
    # a loss is proven at a sweep where nobody reads the partition: no member owns it, or its owner
    # commits nothing at all (silent), and its committed offset has not moved for stop_after_s
    # (the stop rule's consumer gone; a committer without members that still progresses may hold
    # them), or by the proof a state row carries from its step
    with np.errstate(invalid="ignore"):
        unheld = (cls == 0) & (~owned | silent)[row] & (idle[row] >= stop_after_s)
    if carried_lost is not None:
        unheld |= (cls == 0) & (carried_lost[row] == 1)
    proven = np.logical_or.reduceat(unheld[order], firsts)

    ep_kind = kind[first_mark]
    ep_why = why[row[first_mark]]
    if carried_idle is not None:  # an episode open at the previous step's end keeps its first mark's judgement
        code = carried_idle[row[first_mark]]
        keep = (cls[first_mark] == 1) & ~np.isnan(code)
        ep_kind = np.where(keep, np.nan_to_num(code) // 4, ep_kind).astype(np.int64)
        ep_why = np.where(keep, np.nan_to_num(code) % 4, ep_why).astype(np.int64)
    if idle_out is not None:
        _, last_row = key_bounds(s.key)
        open_mark = (cls == 1) & last_row[row]
        idle_out[key[open_mark]] = idle_code(ep_kind, ep_why)[g[open_mark]]
    if lost_out is not None:
        _, last_row = key_bounds(s.key)
        open_loss = (cls == 0) & last_row[row]
        lost_out[key[open_loss]] = proven[g[open_loss]].astype(np.float64)
    ep_start = groups[:, 2].copy().view(np.float64)
    is_loss = ep_kind == _LOSS
    dur = np.where(np.isnan(end_t), last_t, end_t) - ep_start
    magnitude = np.where(is_loss, np.where(lost_ok, lost.astype(np.float64), _NAN), dur)
    with np.errstate(invalid="ignore"):
        critical = np.where(is_loss, proven, (ep_kind == _STOP) | (ep_why == _NEVER) | (dur >= 5 * stall_after_s))
    severity = np.where(critical, "critical", "warning").astype(object)
    unit = np.where(is_loss, "messages", "s").astype(object)
    detail = np.array([
        (f"committed offset fell {int(n) if ok else 'null'} messages below the log start: "
         + ("never processed (no consumer held them)" if pr else "lost unless its consumer had already fetched them")
         if k == _LOSS else
         f"no commit progress for {'null' if d != d else java_fixed(float(d), 1)} s with lag pending ({w})")
        for k, n, ok, d, w, pr in zip(ep_kind, lost, lost_ok, dur, _WHYS[ep_why], proven, strict=True)],
        dtype=object)
    return Found(key=groups[:, 0].copy(), kind=_KINDS[ep_kind], start_t=ep_start, end_t=end_t,
                 severity=severity, magnitude=magnitude, unit=unit, detail=detail,
                 cause=np.array(["retention" if x else None for x in is_loss], dtype=object))
