"""The enriched per-partition series as numpy arrays: what every per-key rule of the one
vectorised pass reads (equal to the Spark SQL reference ``enrich_series`` in ``tests/analytics/spark_series.py``,
whose docstring defines each column).

A :class:`Series` holds one chunk of *complete* keys: its rows grouped by key (``key``: the key's
number in the chunk, 0 … ``n_keys`` − 1, non-decreasing), and within a key in time order, the
key's carried state row (``is_state``) first. Nulls: a nullable double is ``NaN``; a nullable
long is its values (0 where null) and a validity array ``<name>_ok``; ``owner`` is a 64-bit hash
of the member id (0 where null) with ``owned`` its validity.

Pure numpy: no Spark here.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext

import numpy as np
import numpy.typing as npt
import pandas as pd

from lagscope.analytics.arrays import dense
from lagscope.lag import offset_lag

__all__ = [
    "F64",
    "I64",
    "B",
    "Commits",
    "Found",
    "Series",
    "asof",
    "commit_rates",
    "enrich",
    "ffill_last",
    "java_fixed",
    "key_bounds",
    "key_starts",
    "member_rates",
    "segmented_cummax",
    "segmented_cumsum",
    "shift",
    "sorted_commits",
    "starved_rows",
    "tenure_owners",
]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

_NAN = float("nan")
_LMIN = np.iinfo(np.int64).min


@dataclass
class Series:
    """One chunk of enriched series rows (see the module doc for the layout and nulls)."""

    # identity and order
    key: I64              # key number in the chunk (rows grouped by it, in time order within it)
    is_state: B           # the key's carried row from the previous step (first of its key)
    # the prepared sweep row
    t: F64                # sweep time, epoch seconds
    committed: I64
    committed_ok: B
    end: I64              # the end the group reads to (LSO for read_committed, else high watermark)
    end_ok: B
    log_start: I64
    log_start_ok: B
    lag: I64              # max(0, end − committed); 0 when the end is unknown; null without a commit
    lag_ok: B
    lso: I64
    lso_ok: B
    owner: I64            # hash of the member id owning the partition (0: none)
    owned: B              # an owner is assigned
    rec_t: F64            # produce time of the record at the committed offset (NaN: not fetched)
    starved: B            # a fresh row whose owner, over the same interval, advanced another of its partitions
    #                       more than jump_factor × faster (:func:`starved_rows`): no evidence of capacity
    # carried markers (state rows; NaN / not ok on fresh rows)
    m_change_t: F64
    m_pending_t: F64
    m_max_rate: F64
    m_sat_rate: F64
    m_rate: F64
    m_ret_t: F64
    m_end_t: F64
    m_max_committed: I64
    m_max_committed_ok: B
    m_commit_t: F64
    m_alive_t: F64
    m_drop_t: F64
    m_owned_t: F64        # the last time the partition was owned (NaN on a state row: unknown, a state
    #                       written before the marker existed)
    m_tenure_t: F64       # the state row's tenure_t (NaN: unknown, a state written before the marker existed)
    m_change_takeover: F64  # the state row's change_takeover (NaN: no, a state written before the marker)
    m_tenure_owner: I64   # the owner of the state row's latest owned row (its tenure's owner: the state's
    m_tenure_owner_ok: B  # ``tenure_owner``; not ok: none, or a state without it, which then reads its own owner)
    # enriched (per key, in time order)
    minute: I64           # floor(t / 60): the sweep's minute (window_start = minute · 60 s)
    prev_t: F64
    next_t: F64
    prev_committed: I64
    prev_committed_ok: B
    prev_end: I64
    prev_end_ok: B
    prev_lag: I64
    prev_lag_ok: B
    prev_log_start: I64
    prev_log_start_ok: B
    dt: F64
    dc: I64
    dc_ok: B
    de: I64
    de_ok: B
    lost: B
    changed: B
    change_t: F64
    prev_change_t: F64
    pending_t: F64
    idle_pending_s: F64
    rate: F64
    busy_rate: F64        # rate over an interval with a backlog at both ends (lag > 0 before and after) that
    #                       is not starved, whose starting committed offset retention had not passed (below
    #                       the log start at its end) and no jump to the end (enrich's _without_jumps), else 0
    commit_rate: F64      # with the commit stream: the fastest commit inside the interval that reached the
    #                       log end at its start and carried more than half its advance (advance past
    #                       everything committed before ÷ the time since the previous commit:
    #                       :func:`commit_rates`), else 0
    sat_rate: F64         # rate over a saturated interval (committed at its end + a commit's worth of progress
    #                       < the log end at its start), else 0
    busy_max_before: F64  # the largest busy_rate of earlier rows (seeded by m_max_rate)
    sat_max_before: F64   # the largest sat_rate of earlier rows (seeded by m_sat_rate)
    max_rate_before: F64  # demonstrated capacity: busy_max_before once a saturated interval was seen, else 0
    prev_rate: F64
    max_committed_before: I64
    max_committed_before_ok: B
    ret_t: F64
    end_change_t: F64
    alive_t: F64
    end_epoch: I64
    end_drop_t: F64
    rebased: B
    owned_t: F64          # the last sweep up to the row at which the partition had an owner (its key's first
    #                       row when none had; NaN: unknown, a carried row without m_owned_t and no owner since)
    tenure_t: F64         # commit records from this time on are the current owner's (its tenure's second
    #                       sweep); +inf at a tenure's first sweep (none is yet), -inf when the tenure's start
    #                       is unknown (every record counts: the key was first seen owned, or never changed hands)
    change_takeover: F64  # 1 when the row's change_t was seen at a tenure's first sweep (the previous owner's
    #                       commit on revoke, no progress of the new owner's) or at a sweep without an owner
    #                       (nobody's), else 0

    @property
    def n(self) -> int:
        return len(self.t)

    @property
    def n_keys(self) -> int:
        return int(self.key[-1]) + 1 if len(self.key) else 0

    def take(self, idx: npt.NDArray[np.int64] | B) -> Series:
        """The rows at ``idx`` (indices or a mask), every column."""
        return Series(**{f: getattr(self, f)[idx] for f in self.__dataclass_fields__})


@dataclass
class Commits:
    """The commit stream's records of a chunk's keys (:func:`lagscope.analytics.step.commit_records`):
    grouped by ``key`` (the same numbering as the chunk's :class:`Series`; a key may have commits
    and no series rows), within a key ordered by ``(t, seq)``."""

    key: I64
    t: F64                # the commit's exact time (coordinator's commit timestamp, else the record's)
    offset: I64           # the committed offset
    seq: I64              # position in __consumer_offsets (the coordinator's order)

    @property
    def n(self) -> int:
        return len(self.t)


@dataclass
class Found:
    """Anomaly rows of a rule (the ``anomalies`` table's columns but the key's strings and the
    ``key`` identity, which the Spark side adds): one entry per anomaly."""

    key: I64              # key number in the chunk
    kind: npt.NDArray[np.object_]       # "stall", "stop", "rewind", …
    start_t: F64          # epoch seconds (the table's start_ts = timestamp_micros(cast(start_t·1e6 as long)))
    end_t: F64            # epoch seconds, NaN: open (null end_ts)
    severity: npt.NDArray[np.object_]   # "warning" / "critical"
    magnitude: F64        # NaN: null
    unit: npt.NDArray[np.object_]
    detail: npt.NDArray[np.object_]
    #: why (lagscope.schema.ANOMALIES ``cause``): "rewind", "retention", …; None (the default) where a
    #: kind has none
    cause: npt.NDArray[np.object_] | None = None

    def __post_init__(self) -> None:
        if self.cause is None:
            self.cause = np.full(len(self.start_t), None, dtype=object)

    @property
    def n(self) -> int:
        return len(self.start_t)

    @staticmethod
    def empty() -> Found:
        o = np.array([], dtype=object)
        return Found(np.array([], np.int64), o, np.array([]), np.array([]), o.copy(), np.array([]), o.copy(),
                     o.copy())

    @staticmethod
    def concat(parts: list[Found]) -> Found:
        if not parts:
            return Found.empty()
        return Found(*(np.concatenate([getattr(p, f) for p in parts]) for f in Found.__dataclass_fields__))


def java_fixed(x: float, digits: int) -> str:
    """``x`` with ``digits`` decimals as Spark's ``format_string('%.Nf')`` writes it: Java's
    Formatter rounds the double's shortest decimal representation half up (0.35 → "0.4", where
    Python's ``%`` gives "0.3"). Exact for magnitudes below 1e17 (above, Java's digits are not
    always the shortest ones)."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    with localcontext() as ctx:
        ctx.prec = 800  # every double's digits (1e308 has no exponent overflow)
        return format(Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP), "f")


def key_bounds(key: I64) -> tuple[B, B]:
    """(first row of its key, last row of its key) for rows grouped by ``key``."""
    n = len(key)
    first = np.ones(n, bool)
    last = np.ones(n, bool)
    if n:
        first[1:] = key[1:] != key[:-1]
        last[:-1] = first[1:]
    return first, last


def key_starts(key: I64) -> I64:
    """For rows grouped by ``key``, the index of each row's key's first row."""
    n = len(key)
    if not n:
        return np.zeros(0, np.int64)
    first, _ = key_bounds(key)
    return np.maximum.accumulate(np.where(first, np.arange(n), 0))


def ffill_last(marks: F64, key: I64, *, before: bool = False, start: I64 | None = None) -> F64:
    """Per key, the last non-NaN value of ``marks`` up to each row (``before``: up to the row
    before it); NaN when there is none (Spark's ``last(…, ignorenulls)`` over a running frame).
    ``start``: :func:`key_starts` of ``key`` when the caller has it (a series fills several
    columns over the same keys)."""
    n = len(marks)
    if not n:
        return marks.copy()
    idx = np.where(~np.isnan(marks), np.arange(n), -1)
    acc = np.maximum.accumulate(idx)
    if before:
        acc = np.concatenate(([-1], acc[:-1]))
    if start is None:
        start = key_starts(key)
    return np.where(acc >= start, marks[np.maximum(acc, 0)], _NAN)


def segmented_cummax(values: npt.NDArray, key: I64) -> npt.NDArray:  # type: ignore[type-arg]
    """Per key, the running maximum of ``values`` up to each row (pandas' grouped cummax)."""
    out: npt.NDArray = pd.Series(values).groupby(key, sort=False).cummax().to_numpy(dtype=values.dtype)  # type: ignore[type-arg]
    return out


def shift(v: npt.NDArray, first: B, fill: object) -> npt.NDArray:  # type: ignore[type-arg]
    """The previous row's value within the key (``fill`` at a key's first row)."""
    out = np.empty_like(v)
    if len(v):
        out[1:] = v[:-1]
        out[first] = fill
    return out


def _next(v: npt.NDArray, last: B, fill: object) -> npt.NDArray:  # type: ignore[type-arg]
    out = np.empty_like(v)
    if len(v):
        out[:-1] = v[1:]
        out[last] = fill
    return out


#: the default ``jump_factor`` of :func:`enrich` (the rules' ``skip_factor`` default)
JUMP_FACTOR = 5.0


#: rounds of :func:`_without_jumps`' vectorised fixed point before the keys still changing are
#: walked one candidate at a time (a round settles at least one more jump of a key; a run of
#: jumps, a caught-up consumer's producers stepping up and staying up, would take one each)
_JUMP_ROUNDS = 4


def _without_jumps(rate: F64, to_end: B, seed: F64, key: I64, first: B, factor: float, floor: F64,
                   judged: F64 | None = None) -> F64:
    """``rate`` (a busy interval's, else 0) with the *jumps* set to 0: an interval that ended at or
    past the log end at its start (``to_end``) faster than ``factor`` × the largest rate kept
    before it (seeded by ``seed``, a state row's carried maximum; −inf elsewhere) and than
    ``factor`` × its own ``floor`` (the producers' rate over the interval; 0 once the capacity is
    trusted, :func:`enrich`). "Faster" is ``judged`` (default ``rate``): the interval's pace as
    judged, which may be finer than its rate (the fastest commit inside it), while a kept interval
    still counts its own ``rate``. Such an advance
    is what a seek to the end looks like, so it is never evidence of capacity itself; one with no
    rate kept before it counts (nothing to judge it against: the first pace a consumer shows).
    Causal: the answer of one walk per key in time order. Computed first as a fixed point:
    dropping a jump only lowers the maxima after it, so starting from every rate kept, each round
    drops a superset of the last, and a key whose drops a round leaves unchanged has its answer.
    The keys still changing after :data:`_JUMP_ROUNDS` rounds are walked, their candidates only
    (every other rate is kept whatever the verdicts: its running maximum is one vector pass)."""
    out = rate.copy()
    judged = rate if judged is None else judged
    seeded = seed > -np.inf
    cand = np.flatnonzero(to_end & (rate > 0) & ~seeded)  # a carried row is judged by its own step
    if not len(cand):
        return out
    dropped = np.zeros(len(cand), bool)
    for _ in range(_JUMP_ROUNDS):
        kept = shift(segmented_cummax(np.where(seeded, seed, out), key), first, -np.inf)[cand]
        now = (kept > 0) & (judged[cand] > factor * np.maximum(kept, floor[cand]))
        moving = now != dropped
        if not moving.any():
            return out
        dropped = now
        out[cand] = np.where(dropped, 0.0, rate[cand])
    walk = cand[np.isin(key[cand], key[cand[moving]])]
    is_cand = np.zeros(len(rate), bool)
    is_cand[cand] = True
    base = shift(segmented_cummax(np.where(seeded, seed, np.where(is_cand, -np.inf, rate)), key), first,
                 -np.inf)[walk]
    verdict = np.zeros(len(walk), bool)
    at, top = None, -np.inf  # the key walked, the largest candidate kept in it so far
    for i, (k, b, r, j, f) in enumerate(zip(key[walk].tolist(), base.tolist(), rate[walk].tolist(),
                                            judged[walk].tolist(), floor[walk].tolist(), strict=True)):
        if k != at:
            at, top = k, -np.inf
        m = max(b, top)
        if m > 0 and j > factor * max(m, f):
            verdict[i] = True
        else:
            top = max(top, r)
    out[walk] = np.where(verdict, 0.0, rate[walk])
    return out


def sorted_commits(c: Commits) -> Commits:
    """``c`` in (key, t, seq) order (the documented order; sorted again only if it is not)."""
    order = np.lexsort((c.seq, c.t, c.key))
    if bool(np.all(order == np.arange(c.n))):
        return c
    return Commits(key=c.key[order], t=c.t[order], offset=c.offset[order], seq=c.seq[order])


def commit_rates(key: I64, t: F64, is_state: B, prev_end: I64, prev_end_ok: B, dc: I64,
                 commits: Commits | None) -> F64:
    """Per series row, the fastest commit of the commit stream inside its interval: a commit of the
    key after the row's previous sweep, up to the row (the first sweep at or after it; one at or
    before a state row belongs to an earlier step), whose offset reached the log end known at the
    interval's start (``prev_end``) and whose advance past everything the key committed before is
    more than half the interval's (``dc``): that advance ÷ the time since the key's previous
    commit. 0 where no commit qualifies (and on every row without ``commits``).

    A sweep interval's rate averages whatever happened inside it: a seek taken a tenth of a second
    after the previous commit, read over a half-second interval, looks like a pace. The commit that
    carried the jump shows it at its own pace, so :func:`enrich` judges a jump by this rate too."""
    n = len(key)
    out = np.zeros(n)
    if commits is None or commits.n == 0 or n == 0:
        return out
    c = sorted_commits(commits)
    ck, ct, co = c.key, c.t, c.offset
    nc = len(ck)
    cfirst, _ = key_bounds(ck)
    prev_t = shift(ct, cfirst, _NAN)
    # past everything committed before (as a skip's advance): a stale commit between two others
    # (another committer, an async commit landing late) is no progress to measure from
    advance = co - shift(segmented_cummax(co, ck), cfirst, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(~cfirst & (ct > prev_t) & (advance > 0), advance / (ct - prev_t), 0.0)
    # each commit's row: the first series row of its key at or after it (commits first on a tie)
    uk = np.concatenate((key, ck))
    ut = np.concatenate((t, ct))
    src = np.concatenate((np.ones(n, np.int8), np.zeros(nc, np.int8)))
    u = np.lexsort((np.arange(n + nc), src, ut, uk))
    pos = np.arange(n + nc)
    nxt = np.minimum.accumulate(np.where(u < n, pos, n + nc)[::-1])[::-1]
    at_c = u >= n
    ci = u[at_c] - n
    nx = nxt[at_c]
    found = nx < n + nc
    row = np.where(found, u[np.minimum(nx, n + nc - 1)], 0)
    found &= key[row] == ck[ci]
    ok = found & ~is_state[row] & prev_end_ok[row] & (co[ci] >= prev_end[row]) & (2 * advance[ci] > dc[row])
    ok &= rate[ci] > 0
    np.maximum.at(out, row[ok], rate[ci][ok])
    return out


def nan_to(v: F64, fill: float) -> F64:
    """``v`` with NaN as ``fill``."""
    return np.where(np.isnan(v), fill, v)


def enrich(*, key: I64, is_state: B, t: F64, committed: I64, committed_ok: B, end: I64, end_ok: B,
           log_start: I64, log_start_ok: B, lso: I64, lso_ok: B, owner: I64, owned: B, rec_t: F64,
           m_change_t: F64, m_pending_t: F64, m_max_rate: F64, m_sat_rate: F64, m_rate: F64, m_ret_t: F64,
           m_end_t: F64,
           m_max_committed: I64, m_max_committed_ok: B, m_commit_t: F64, m_alive_t: F64,
           m_drop_t: F64, m_owned_t: F64, m_tenure_t: F64 | None = None, m_change_takeover: F64 | None = None,
           m_tenure_owner: I64 | None = None, m_tenure_owner_ok: B | None = None, starved: B | None = None,
           jump_factor: float = JUMP_FACTOR, commits: Commits | None = None) -> Series:
    """Prepared series rows (grouped by key, in time order, a key's state row first) → a
    :class:`Series` with every running value of
    the Spark SQL reference ``enrich_series`` (``tests/analytics/spark_series.py``), computed the same way.
    ``commits``: the chunk's commit records (the commit stream), which judge a jump by the pace of
    the commit that made it (:func:`commit_rates`)."""
    first, last = key_bounds(key)
    has_prev = ~first
    n = len(key)
    starved = np.zeros(n, bool) if starved is None else starved
    m_tenure_t = np.full(n, _NAN) if m_tenure_t is None else m_tenure_t
    m_change_takeover = np.full(n, _NAN) if m_change_takeover is None else m_change_takeover
    m_tenure_owner = np.zeros(n, np.int64) if m_tenure_owner is None else m_tenure_owner
    m_tenure_owner_ok = np.zeros(n, bool) if m_tenure_owner_ok is None else m_tenure_owner_ok
    # the offset lag (lagscope.lag), which the rules read as 0 where the end is unknown (as
    # prepare_series: Spark's greatest skips a null); null without a commit
    lag, _ = offset_lag(committed, committed_ok, end, end_ok)
    lag_ok = committed_ok.copy()
    prev_t = np.where(has_prev, shift(t, first, 0.0), _NAN)
    next_t = np.where(~last, _next(t, last, 0.0), _NAN)
    prev_committed, prev_committed_ok = shift(committed, first, 0), shift(committed_ok, first, False)
    prev_end, prev_end_ok = shift(end, first, 0), shift(end_ok, first, False)
    prev_lag, prev_lag_ok = shift(lag, first, 0), shift(lag_ok, first, False)
    prev_ls, prev_ls_ok = shift(log_start, first, 0), shift(log_start_ok, first, False)
    dt = t - prev_t  # NaN at a key's first row
    dc_ok = committed_ok & prev_committed_ok
    dc = np.where(dc_ok, committed - prev_committed, 0)
    de_ok = end_ok & prev_end_ok
    de = np.where(de_ok, end - prev_end, 0)
    lost = committed_ok & log_start_ok & (committed < log_start)
    prev_lost = shift(lost, first, False)
    changed = committed_ok & ~is_state & (~prev_committed_ok | (dc != 0))
    lag0 = ~lag_ok | (lag == 0)  # coalesce(lag, 0) == 0
    starts_pending = lag_ok & (lag > 0) & (~prev_lag_ok | (prev_lag == 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        fresh_rate = np.where((dt > 0) & dc_ok & (dc > 0), dc / dt, 0.0)
    rate = np.where(is_state, np.where(np.isnan(m_rate), 0.0, m_rate), fresh_rate)
    # capacity is shown only by an interval busy from end to end: with a backlog before and after,
    # the consumer never waited for messages, so its advance measures what it can do; unless its
    # owner was busy elsewhere (starved: it served another of its partitions meanwhile, and this
    # one's advance is what it left over, not what it can do), or retention passed the position it
    # started from (committed before < the log start at its end: its advance may be a reset over
    # deleted messages, never read)
    passed = prev_committed_ok & log_start_ok & (prev_committed < log_start)
    busy = ~is_state & prev_lag_ok & (prev_lag > 0) & lag_ok & (lag > 0) & ~starved & ~passed
    # saturated: the committed offset at the end, plus a commit's worth of progress, is still
    # below the log end at the start, so the messages were there all along and the consumer never
    # waited: its advance is its pace. A committed offset is the position at the consumer's last
    # commit, up to a commit's worth of progress behind; with commits about as frequent as the
    # sweeps that is about an interval's pace, taken as the larger of this interval's advance and
    # the previous interval's pace over this one's length (one commit landing early makes this
    # advance small). A consumer keeping up one commit behind, its commits landing just after each
    # sweep, sits a message either side of the end at the start interval after interval, its
    # advance the producers' rate, not what it can do. A caught-up consumer shows lag at both
    # ends of most intervals (records in flight) too. It is evidence only after an earlier busy
    # interval with progress (a state row: a carried busy rate): alone, one interval whose commit
    # landed early shows a keeping-up consumer "saturated" at a fraction of its pace, with
    # nothing else to judge by
    pos_busy = np.where(is_state, nan_to(m_max_rate, 0.0) > 0, busy & (fresh_rate > 0))
    busy_before = shift(segmented_cummax(pos_busy, key), first, False)
    prev_rate = np.where(has_prev, shift(rate, first, 0.0), _NAN)
    unseen = np.fmax(np.maximum(dc, 0).astype(np.float64), prev_rate * dt)  # NaN-free: dc where no previous rate
    sat = busy & prev_end_ok & (committed + unseen < prev_end) & busy_before
    sat_rate = np.where(sat, fresh_rate, 0.0)
    # the largest saturated rate before the row (a state row's own seed is m_sat_rate): the
    # capacity is trusted once it is positive
    sat_seed = np.where(is_state, nan_to(m_sat_rate, -np.inf), sat_rate)
    sat_max = shift(segmented_cummax(sat_seed, key), first, -np.inf)
    sat_max_before = np.where(np.isfinite(sat_max), sat_max, 0.0)
    trusted = sat_max_before > 0
    # until then (nothing is judged a skip yet), an advance to the end is a jump only beyond the
    # factor × the producers' rate over the interval too: a consumer that keeps up reads about what
    # was written (plus the lag it had), so a rate kept before that is lower (a first interval whose
    # commit landed early) does not leave its every later interval out as a jump
    with np.errstate(divide="ignore", invalid="ignore"):
        produced = np.where(~trusted & (dt > 0) & de_ok & (de > 0), de / dt, 0.0)
    # with the commit stream, an interval is as fast as the fastest commit that made its advance
    commit_rate = commit_rates(key, t, is_state, prev_end, prev_end_ok, dc, commits)
    busy_rate = _without_jumps(np.where(busy, fresh_rate, 0.0), busy & prev_end_ok & (committed >= prev_end),
                               np.where(is_state, np.where(np.isnan(m_max_rate), -np.inf, m_max_rate), -np.inf),
                               key, first, jump_factor, produced, np.fmax(fresh_rate, commit_rate))

    def mark(*cases: tuple[B, F64 | float]) -> F64:
        """``when(c1, v1).when(c2, v2)…`` (null otherwise), as a NaN-null double."""
        out = np.full(len(t), _NAN)
        done = np.zeros(len(t), bool)
        for cond, val in cases:
            sel = cond & ~done
            out[sel] = val[sel] if isinstance(val, np.ndarray) else val
            done |= cond
        return out

    change_mark = mark((is_state, m_change_t), (changed, t))
    pending_mark = mark((is_state, nan_to(m_pending_t, -1.0)), (lag0, -1.0), (starts_pending, t))
    ret_mark = mark((is_state, nan_to(m_ret_t, -1.0)), (~lost, -1.0), (~prev_lost, t))
    end_mark = mark((is_state, m_end_t), (~prev_end_ok, t), (de_ok & (de != 0), t))
    drop_mark = mark((is_state, m_drop_t), (de_ok & (de < 0), t))
    alive_mark = mark((is_state, m_alive_t), (owned & (changed | lag0), t))
    # the last owned sweep; a key's first row counts when it has no owner (never seen owned: unowned
    # since its first row). A carried row without the marker (a state written before it) had an
    # owner at its own time if it has one; else it is unknown (-1): null until the key is owned
    owned_mark = mark((is_state, np.where(np.isnan(m_owned_t), np.where(owned, t, -1.0), m_owned_t)),
                      (owned | first, t))

    start = key_starts(key)
    tenure_mark = _tenure_mark(first, start, is_state, t, owner, owned, m_tenure_t, m_tenure_owner,
                               m_tenure_owner_ok)
    takeover = ~is_state & (tenure_mark == np.inf)
    # a change seen at a takeover, or at a sweep without an owner, is nobody's progress (carried: 1)
    change_tk_mark = mark((is_state, nan_to(m_change_takeover, 0.0)),
                          (changed, (takeover | ~owned).astype(np.float64)))
    change_t = ffill_last(change_mark, key, start=start)
    prev_change_t = ffill_last(change_mark, key, before=True, start=start)
    pending = ffill_last(pending_mark, key, start=start)
    ret = ffill_last(ret_mark, key, start=start)
    end_change_t = ffill_last(end_mark, key, start=start)
    alive_t = ffill_last(alive_mark, key, start=start)
    end_drop_t = ffill_last(drop_mark, key, start=start)
    owned_run = ffill_last(owned_mark, key, start=start)
    tenure_t = ffill_last(tenure_mark, key, start=start)
    change_takeover = ffill_last(change_tk_mark, key, start=start)
    # the largest busy rate before the row (a state row's own seed is m_max_rate)
    rate_seed = np.where(is_state, nan_to(m_max_rate, -np.inf), busy_rate)
    rate_max = shift(segmented_cummax(rate_seed, key), first, -np.inf)
    busy_max_before = np.where(np.isfinite(rate_max), rate_max, 0.0)
    # every busy interval is a lower bound of the pace; the bound is trusted once one interval
    # was saturated (an interval merely busy at both ends may have waited for messages between)
    max_rate_before = np.where(trusted, busy_max_before, 0.0)
    committed_seed = np.where(committed_ok, committed, _LMIN)
    if bool(is_state.any()):
        carried = np.where(m_max_committed_ok, m_max_committed, _LMIN)
        committed_seed = np.where(is_state, np.maximum(carried, committed_seed), committed_seed)
    cmax = shift(segmented_cummax(committed_seed, key), first, _LMIN)
    max_committed_before_ok = cmax != _LMIN
    drops = (de_ok & (de < 0)).astype(np.int64)
    end_epoch = segmented_cumsum(drops, key, start=start)
    pending_t = np.where(pending >= 0, pending, _NAN)
    ret_t = np.where(ret >= 0, ret, _NAN)
    # coalesce(end_drop_t > prev_change_t, False): NaN compares False
    rebased = end_drop_t > prev_change_t
    owned_t = np.where(owned_run >= 0, owned_run, _NAN)
    since = np.maximum(nan_to(change_t, -np.inf), nan_to(pending_t, -np.inf))
    since = np.where(np.isfinite(since), since, t)
    idle = np.where(lag0, 0.0, np.maximum(0.0, t - since))
    return Series(
        key=key, is_state=is_state, t=t, committed=committed, committed_ok=committed_ok, end=end, end_ok=end_ok,
        log_start=log_start, log_start_ok=log_start_ok, lag=lag, lag_ok=lag_ok, lso=lso, lso_ok=lso_ok, owner=owner,
        owned=owned, rec_t=rec_t, starved=starved, m_change_t=m_change_t, m_pending_t=m_pending_t,
        m_max_rate=m_max_rate,
        m_sat_rate=m_sat_rate, m_rate=m_rate, m_ret_t=m_ret_t, m_end_t=m_end_t, m_max_committed=m_max_committed,
        m_max_committed_ok=m_max_committed_ok, m_commit_t=m_commit_t, m_alive_t=m_alive_t, m_drop_t=m_drop_t,
        m_owned_t=m_owned_t, m_tenure_t=m_tenure_t, m_change_takeover=m_change_takeover, m_tenure_owner=m_tenure_owner,
        m_tenure_owner_ok=m_tenure_owner_ok,
        minute=np.floor(t / 60.0).astype(np.int64), prev_t=prev_t, next_t=next_t,
        prev_committed=prev_committed, prev_committed_ok=prev_committed_ok, prev_end=prev_end,
        prev_end_ok=prev_end_ok, prev_lag=prev_lag, prev_lag_ok=prev_lag_ok, prev_log_start=prev_ls,
        prev_log_start_ok=prev_ls_ok, dt=dt, dc=dc, dc_ok=dc_ok, de=de, de_ok=de_ok, lost=lost, changed=changed,
        change_t=change_t, prev_change_t=prev_change_t, pending_t=pending_t, idle_pending_s=idle, rate=rate,
        busy_rate=busy_rate, commit_rate=commit_rate, sat_rate=sat_rate, busy_max_before=busy_max_before,
        sat_max_before=sat_max_before,
        max_rate_before=max_rate_before, prev_rate=prev_rate, max_committed_before=np.where(
            max_committed_before_ok, cmax, 0), max_committed_before_ok=max_committed_before_ok, ret_t=ret_t,
        end_change_t=end_change_t, alive_t=alive_t, end_epoch=end_epoch, end_drop_t=end_drop_t, rebased=rebased,
        owned_t=owned_t, tenure_t=tenure_t, change_takeover=change_takeover)


def tenure_owners(is_state: B, owner: I64, owned: B, m_tenure_owner: I64, m_tenure_owner_ok: B) -> tuple[I64, I64]:
    """Per row, the owner it names for tenures (a fresh row its owner, a state row its carried
    tenure owner, else its own), and the index of the latest row up to it that names one (-1:
    none; compare with :func:`key_starts` for the row's own key)."""
    n = len(owner)
    src = np.where(is_state, m_tenure_owner_ok | owned, owned)
    who = np.where(is_state & m_tenure_owner_ok, m_tenure_owner, owner)
    acc = np.maximum.accumulate(np.where(src, np.arange(n), -1)) if n else np.zeros(0, np.int64)
    return who, acc


def _tenure_mark(first: B, start: I64, is_state: B, t: F64, owner: I64, owned: B, m_tenure_t: F64,
                 m_tenure_owner: I64, m_tenure_owner_ok: B) -> F64:
    """The marks whose running value is ``tenure_t``: a *takeover* (a fresh owned row whose owner
    differs from the owner of the key's latest owned row before it, the state row's tenure owner
    included) starts a tenure, +inf (the sweep that shows the new owner may already show the
    previous owner's last commit: a commit on revoke is dated after the sweep's stamp yet read by
    it); the row after it, or after a state row carrying +inf, marks its own time (records from
    the tenure's second sweep on are the new owner's); a state row carries its ``m_tenure_t``
    (unknown: -inf), and a key's first fresh row without one is -inf (no owner is known before it,
    so no change of hands is seen)."""
    n = len(t)
    who, acc = tenure_owners(is_state, owner, owned, m_tenure_owner, m_tenure_owner_ok)
    prev = np.concatenate(([-1], acc[:-1])) if n else acc
    known = prev >= start
    takeover = ~is_state & owned & known & (owner != who[np.maximum(prev, 0)])
    carried_inf = is_state & (m_tenure_t == np.inf)
    after = shift(takeover | carried_inf, first, False)
    out = np.full(n, _NAN)
    out[first] = -np.inf
    out[after] = t[after]
    out[takeover] = np.inf
    out[is_state] = np.where(np.isnan(m_tenure_t), -np.inf, m_tenure_t)[is_state]
    return out


def _interval_rates(key: I64, t: F64, committed: I64, committed_ok: B) -> F64:
    """Per row (grouped by key, in time order), :func:`enrich`'s rate over the interval ending at
    it: Δ committed / Δ t, 0 without progress or without a row before it."""
    first, _ = key_bounds(key)
    dt = t - shift(t, first, np.nan)
    dc = np.where(committed_ok & shift(committed_ok, first, False), committed - shift(committed, first, 0), 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((dt > 0) & (dc > 0), dc / dt, 0.0)


def _owner_sweeps(group: I64, owner: I64, t: F64) -> tuple[I64, int]:
    """One dense code per (group, owner, sweep time) of the rows given, and how many (each coded
    densely first: an owner may be any 64-bit hash)."""
    _, sweep = np.unique(t, return_inverse=True)
    own, n_own = dense(owner)
    member, _ = dense(dense(group)[0] * n_own + own)
    return dense(member * (int(sweep.max()) + 1) + sweep.reshape(-1))


def starved_rows(key: I64, group: I64, is_state: B, t: F64, committed: I64, committed_ok: B, owner: I64, owned: B,
                 factor: float = JUMP_FACTOR) -> B:
    """Per row (grouped by key, in time order, a key's state row first; ``group`` a code of its
    consumer group), whether it is *starved*: a fresh, owned row whose owner advanced another of
    its partitions more than ``factor`` × faster over the same interval (the same sweep: every
    partition of a sweep shares its time). The rate is :func:`enrich`'s (Δ committed / Δ t over the
    interval ending at the row, 0 without progress). A member that serves one partition's burst
    leaves the others lagging while the producers write: their intervals look saturated at what it
    left over (the producers' rate), which is no measure of what it can do. The fastest sibling
    decides, not their sum, so a member sharing its time evenly over N partitions keeps them all."""
    out = np.zeros(len(key), bool)
    rows = np.flatnonzero(~is_state & owned)
    if not len(rows):
        return out
    rate = _interval_rates(key, t, committed, committed_ok)
    # the fastest rate per (group, owner, sweep time)
    cell, n_cells = _owner_sweeps(group[rows], owner[rows], t[rows])
    top = np.zeros(n_cells)
    np.maximum.at(top, cell, rate[rows])
    # another partition was faster (a factor below 1 must not make a row starved by itself)
    out[rows] = (top[cell] > factor * rate[rows]) & (top[cell] > rate[rows])
    return out


def member_rates(key: I64, group: I64, is_state: B, t: F64, committed: I64, committed_ok: B, end: I64, end_ok: B,
                 log_start: I64, log_start_ok: B, owner: I64, owned: B) -> F64:
    """Per fresh, owned row (grouped by key, in time order, a key's state row first; ``group`` a
    code of its consumer group), what its owner processed per second over the interval ending at
    the row, summed over the owner's partitions of that sweep (every partition of a sweep shares
    its time): the rates (Δ committed / Δ t) of the owner's partitions whose interval was *behind
    throughout*: lag > 0 at both ends, the committed offset at the end still below the log end at
    the start (a partition that reached that end may have waited for messages, or jumped to it),
    its starting offset not passed by retention (the advance may be a reset over deleted messages),
    and the same owner at both ends (at a new owner's first sweep the interval was its
    predecessor's).
    NaN on state rows and rows without an owner; 0 where none of the owner's partitions qualifies.

    A member's capacity is what it did at once, not the sum of each partition's best interval:
    a member that reads four partitions at 50/s in all shows each one's 12/s to 50/s (one alone
    busy, the others caught up) at different times, and those best intervals add up to four times
    what it ever did (:mod:`lagscope.analytics.skips`). Starved partitions count: what the member
    left over for them is work it did."""
    out = np.full(len(key), np.nan)
    rows = np.flatnonzero(~is_state & owned)
    if not len(rows):
        return out
    first, _ = key_bounds(key)
    rate = _interval_rates(key, t, committed, committed_ok)
    prev_c, prev_e = shift(committed, first, 0), shift(end, first, 0)
    ok = committed_ok & shift(committed_ok, first, False) & end_ok & shift(end_ok, first, False)
    passed = log_start_ok & (prev_c < log_start)
    # the same owner at both ends: an interval that ends at a new owner's first sweep was read
    # (mostly) by the one before it
    kept = owned & shift(owned, first, False) & (owner == shift(owner, first, 0))
    behind = ok & kept & (prev_c < prev_e) & (committed < end) & (committed < prev_e) & ~passed
    cell, n_cells = _owner_sweeps(group[rows], owner[rows], t[rows])
    total = np.bincount(cell, weights=np.where(behind[rows], rate[rows], 0.0), minlength=n_cells)
    out[rows] = total[cell]
    return out


def asof(mark_key: I64, mark_t: F64, key: I64, t: F64) -> I64:
    """For each ``(key, t)``, the index in the marks of the latest mark of its key at or before
    ``t`` (−1: none): a mark at the same time counts, and among marks of equal time the later in
    input order wins; a NaN mark time is never taken (Spark's running ``last(…, ignorenulls)``
    over the union of marks and rows ordered by ``(key, t, marks first)``)."""
    nm = len(mark_key)
    if len(key) == 0:
        return np.zeros(0, np.int64)
    allk = np.concatenate([mark_key, key])
    order = np.lexsort((np.concatenate([np.zeros(nm, np.int8), np.ones(len(key), np.int8)]),
                        np.concatenate([mark_t, t]), allk))
    marks = np.concatenate([np.arange(nm, dtype=np.float64), np.full(len(key), np.nan)])[order]
    found = ffill_last(marks, allk[order])
    pos = np.empty(len(order), np.int64)
    pos[order] = np.arange(len(order))
    at = found[pos[nm:]]
    return np.where(np.isnan(at), -1, np.nan_to_num(at, nan=-1.0)).astype(np.int64)


def segmented_cumsum(values: I64, key: I64, *, start: I64 | None = None) -> I64:
    """Per key, the running sum of ``values`` up to each row (``start``: as :func:`ffill_last`'s)."""
    total = np.cumsum(values)
    if not len(key):
        return total
    base = total - values  # the sum before each row
    return total - base[start if start is not None else key_starts(key)]
