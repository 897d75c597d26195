"""The partition ``status`` rows in numpy: the Burrow-compatible evaluation beside lagscope's own,
per partition, once per minute (at the minute's last fresh sweep), over one chunk of whole keys
(a :class:`lagscope.analytics.kseries.Series`). The numpy counterpart of
its Spark SQL reference in tests/analytics (``burrow_entries``, ``entries_state``
and ``partition_status``; the group rows are :func:`lagscope.analytics.status.status`), with the
same rows, values and strings.

**Entries.** Burrow stores one offset *entry* per commit; from sweeps, an entry is a fresh sweep
with a committed offset at which that offset changed or an owner was assigned (an assigned
consumer commits periodically), so a consumer that is gone stops adding entries, as it would in
Burrow. The previous step's last ``n`` entries are carried in (``is_state``). ``rebased``: the
end went down after the committed offset last changed before the sweep (the topic was
re-created or truncated), so a lower offset is in another log, not a re-read.

**Windows.** Entry ``i`` of a key (1-based, in time order) has the window of the last ``n``
entries ``lo … i``, ``lo = max(1, i − n + 1)``; the flags of a consecutive pair of entries sit on
its second entry and the window's pairs are those from ``pairs_lo = i − max(n − 2, 0)`` on (for
``n ≥ 2`` exactly ``lo + 1 … i``; for ``n = 1`` the pair ending at ``i``, as Spark's formula
says). Per window: ``first_t``/``first_lag`` (entry ``lo``'s), ``last_t`` (entry ``i``'s),
``zero_lag`` (an entry of ``lo … i`` has lag 0), ``stalled`` (no offset change on the pairs
after ``lo``), ``rewound`` (an offset decrease on a window pair), ``rewound_own`` (one that is no
drop into a new log: ``~rebased``), ``lag_decreased`` (the lag fell on a window pair). Only the
windows of entries that are their minute's last entry can be a row's (a row is its minute's
last sweep), and of the carried entries only the last one's: those are the candidates.

**Evaluation.** Each minute row takes the window of the latest candidate at or before it (an
entry at the row's own ``t`` counts), none when there is none. With ``lag`` the row's lag
(null → 0):

- Burrow: ``OK`` without a window, at lag 0 or with a lag-0 entry in the window; ``REWIND`` when
  the window rewound; ``STOP`` when ``t − last_t > last_t − first_t`` (the consumer stopped
  committing for longer than the window spans); ``STALL`` when the offset never changed in the
  window; ``WARN`` when the lag never decreased in it; else ``OK``.
- lagscope (worst first): ``ERR`` when committed < log start while nobody reads the partition
  (no owner, and no commit for ``stop_after_s``: messages lost; the retention loss's proof as a
  row without the commit stream sees it: an owner that commits nothing, or a proof from an
  earlier row, leaves the status to STALL or WARN while the anomaly is critical);
  ``REWIND`` when
  the window rewound within one log (``rewound_own``), even if the lag touched 0 in the window or
  is 0 now (messages were processed twice: a re-consumption that caught up fast is still one);
  at lag 0 ``IDLE`` when the end has not changed for ``stall_after_s`` (``t − end_change_t``, 0
  without one) else ``OK``; ``OK`` when held
  at an open transaction (committed = LSO < end: a read_committed group has nothing to read);
  ``STOP`` when nobody has owned the partition for ``stop_after_s`` (``t − owned_t``, its last
  owned sweep; a key never seen owned since its first row; unknown, ``owned_t`` null: long
  enough) and work has been pending without a commit for ``stop_after_s`` as well
  (``idle_pending_s``); ``STALL`` when work has been pending without a commit for
  ``stall_after_s`` and the partition has an owner, or had one less than ``stop_after_s`` ago
  (an owner restarting is not a consumer gone); ``WARN`` when committed < log start otherwise
  (a consumer reading at the retention's edge may hold the deleted records); ``WARN`` when the
  lag in seconds (null → 0) is at least ``warn_lag_s`` and the window's lag never decreased and
  is above its first entry's; else ``OK``.
- reason: the rule that decided, worded (``no committed offset`` after the loss and the rewind
  and before the lag-0 cases when the row has no commit; a STALL without an owner says for how
  long it has had none); numbers as Spark's
  ``format_string``: ``%d`` of longs, ``%.0f`` as :func:`lagscope.analytics.kseries.java_fixed`
  (half up), a null double as an empty string (Spark's ``format_string`` of a null).

**What a partition row can and cannot know.** It sees its own key's rows only: its committed
offset, lag, owner and entries. It cannot see the owner's other partitions, so it cannot tell a
starved partition (its owner alive and committing on its other partitions) from a stalled one:
it says ``STALL`` (or ``STOP``) for both. The per-group pass, which sees all of a group's
partitions, judges that (:func:`lagscope.analytics.groups.judge_idle`), and the status table
(:func:`lagscope.analytics.status.status`) turns the rows inside a starved episode into ``OK``
(``WARN`` once the episode is ``5 × stall_after_s`` long).

Pure numpy: no Spark here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lagscope.analytics.kseries import F64, I64, B, Series, asof, java_fixed, key_bounds

__all__ = ["Entries", "StatusRows", "burrow_entries", "entries_state", "minute_rows", "partition_status"]

_NAN = float("nan")
Strs = npt.NDArray[np.object_]


@dataclass
class Entries:
    """Burrow entries of a chunk's keys, grouped by ``key`` (the chunk's key numbers), in time
    order within a key (ties: the carried entries first, as a key's state row)."""

    key: I64              # key number in the chunk
    t: F64                # the entry's sweep time, epoch seconds
    c: I64                # the committed offset (never null)
    lag: I64              # the lag at the entry (0 where null)
    lag_ok: B             # the lag is not null
    rebased: B            # the end went down since the previous commit (a lower offset is another log)
    is_state: B           # carried from the previous step

    @property
    def n(self) -> int:
        return len(self.t)

    def take(self, idx: I64 | B) -> Entries:
        """The entries at ``idx`` (indices or a mask), every column."""
        return Entries(**{f: getattr(self, f)[idx] for f in self.__dataclass_fields__})

    @staticmethod
    def concat(parts: list[Entries]) -> Entries:
        return Entries(*(np.concatenate([getattr(p, f) for p in parts]) for f in Entries.__dataclass_fields__))


@dataclass
class StatusRows:
    """Partition status rows, aligned with the minute rows they evaluate."""

    key: I64              # key number in the chunk
    t: F64                # the minute row's sweep time (the table's eval_ts)
    burrow_status: Strs   # OK / WARN / STOP / STALL / REWIND
    status: Strs          # lagscope's: OK / IDLE / WARN / STOP / STALL / REWIND / ERR
    reason: Strs          # why lagscope's status
    lag: I64              # the row's lag as stored (0 where null)
    lag_ok: B             # the lag is not null (the row has a committed offset)
    lag_seconds: F64      # the row's lag in seconds, NaN: null


def _sorted(e: Entries) -> Entries:
    """``e`` grouped by key in time order, carried entries first at equal times (stable); ``e``
    itself when it already is (the fresh entries come so from the series: a check of each
    neighbouring pair instead of a sort)."""
    if e.n > 1:
        dk, dt = np.diff(e.key), np.diff(e.t)
        carried_after_fresh = ~e.is_state[:-1] & e.is_state[1:]
        if bool(((dk > 0) | ((dk == 0) & ((dt > 0) | ((dt == 0) & ~carried_after_fresh)))).all()):
            return e
    return e.take(np.lexsort((~e.is_state, e.t, e.key)).astype(np.int64))


def burrow_entries(s: Series, state: Entries | None = None) -> Entries:
    """The entries of a chunk: its fresh sweeps with a committed offset at which that offset
    changed or an owner was assigned (``c`` = committed, the sweep's ``lag`` and ``rebased``),
    plus ``state``, the previous step's last entries (:func:`entries_state`; all marked
    ``is_state`` whatever they say), grouped by key in time order. Spark leaves the order of
    entries at the same time of one key open; here a carried entry sorts before a fresh one and
    otherwise the input order stays (a key's sweeps have distinct times)."""
    sel = ~s.is_state & s.committed_ok & (s.changed | s.owned)
    fresh = Entries(key=s.key[sel], t=s.t[sel], c=s.committed[sel], lag=s.lag[sel], lag_ok=s.lag_ok[sel],
                    rebased=s.rebased[sel], is_state=np.zeros(int(sel.sum()), bool))
    if state is None:
        return fresh
    carried = Entries(key=state.key, t=state.t, c=state.c, lag=np.where(state.lag_ok, state.lag, 0),
                      lag_ok=state.lag_ok, rebased=state.rebased, is_state=np.ones(state.n, bool))
    return _sorted(Entries.concat([fresh, carried]))


def entries_state(e: Entries, n: int) -> Entries:
    """The last ``n`` entries per key (by time; at equal times the later in :func:`burrow_entries`'
    order, where Spark's pick is open): what the next step's windows need, grouped by key in
    time order and marked ``is_state`` (they are the next step's carried entries)."""
    e = _sorted(e)
    _, last = key_bounds(e.key)
    idx = np.arange(e.n)
    # each entry's key's last index: a reversed running minimum of the last rows' indices
    end = np.minimum.accumulate(np.where(last, idx, e.n)[::-1])[::-1] if e.n else idx
    out = e.take(end - idx < n)
    out.is_state = np.ones(out.n, bool)
    return out


def minute_rows(s: Series) -> I64:
    """The indices of the minute rows: each key's fresh sweeps that are their minute's last
    (no next sweep, or the next one in a later minute ``floor(t / 60)``), in ``s``'s order."""
    nxt = np.floor(s.next_t / 60.0)
    last = np.isnan(s.next_t) | (nxt != np.floor(s.t / 60.0))
    return np.flatnonzero(~s.is_state & last).astype(np.int64)


@dataclass
class _Windows:
    """The candidate windows (see the module doc), grouped by key in time order."""

    key: I64
    last_t: F64
    first_t: F64
    zero_lag: B
    first_lag: I64
    first_lag_ok: B
    stalled: B
    rewound: B
    rewound_own: B
    lag_decreased: B


def _window_stats(e: Entries, n: int) -> _Windows:
    """The window of every candidate entry: its minute's last entry, and of the carried entries
    only the last one (see the module doc). Each statistic is an index test on the last entry
    (up to the candidate, in its key) flagged lag 0, offset change, decrease, decrease that is
    no rebase, or lag decrease, in global indices (the same comparisons as per key)."""
    m = e.n
    g = np.arange(m)
    first, last = key_bounds(e.key)
    start = np.maximum.accumulate(np.where(first, g, 0)) if m else g
    has_prev = ~first
    prev = np.maximum(g - 1, 0)
    # pair flags (null at a key's first entry: false); a null lag compares false
    chg = has_prev & (e.c != e.c[prev])
    dec = has_prev & (e.c < e.c[prev])
    own_dec = dec & ~e.rebased
    lagdec = has_prev & e.lag_ok & e.lag_ok[prev] & (e.lag < e.lag[prev])
    zero = e.lag_ok & (e.lag == 0)

    def last_at(flag: B) -> I64:
        """Per entry, the index of the last flagged entry of its key up to it (−1: none)."""
        acc = np.maximum.accumulate(np.where(flag, g, -1)) if m else g
        return np.where(acc >= start, acc, -1)

    lo = np.maximum(start, g - (n - 1))
    pairs_lo = g - max(n - 2, 0)
    zero_at, chg_at, dec_at = last_at(zero), last_at(chg), last_at(dec)
    own_dec_at, lagdec_at = last_at(own_dec), last_at(lagdec)
    # candidates: the entry is its minute's last, and no carried entry followed by a carried one
    nxt = np.minimum(g + 1, max(m - 1, 0))
    minute_last = last | (np.floor(e.t[nxt] / 60.0) != np.floor(e.t / 60.0))
    context_before_last = e.is_state & ~last & e.is_state[nxt]
    c = np.flatnonzero(minute_last & ~context_before_last)
    lo_c = lo[c]
    return _Windows(
        key=e.key[c], last_t=e.t[c], first_t=e.t[lo_c],
        zero_lag=(zero_at[c] >= 0) & (zero_at[c] >= lo_c),
        first_lag=e.lag[lo_c], first_lag_ok=e.lag_ok[lo_c],
        stalled=(chg_at[c] < 0) | (chg_at[c] <= lo_c),
        rewound=(dec_at[c] >= 0) & (dec_at[c] >= pairs_lo[c]),
        rewound_own=(own_dec_at[c] >= 0) & (own_dec_at[c] >= pairs_lo[c]),
        lag_decreased=(lagdec_at[c] >= 0) & (lagdec_at[c] >= pairs_lo[c]),
    )


def _longs(v: I64) -> pa.Array:
    """``%d`` of longs (as Arrow strings: :func:`_cat` joins them without a Python string each)."""
    return pc.cast(pa.array(v, pa.int64()), pa.string())


def _fixed0(x: F64) -> Strs:
    """``%.0f`` of doubles as Spark's ``format_string`` writes them, as
    :func:`lagscope.analytics.kseries.java_fixed` (Java rounds the shortest decimal
    representation half up, away from zero; ``-0`` keeps its sign), and NaN as a null argument:
    an empty string (what Spark's ``format_string`` makes of a null). Vectorised below 2⁵³, where
    rounding the shortest representation to an integer is rounding the exact value (a tie
    ``k.5`` is a double itself); larger and infinite values (never a count of seconds) go
    through ``java_fixed``."""
    neg = np.signbit(x)
    a = np.abs(x)
    ok = a < 2.0**53  # false for NaN and infinities
    a = np.where(ok, a, 0.0)
    fl = np.floor(a)
    r = (fl + ((a - fl) >= 0.5)).astype(np.int64)  # a − floor(a) is exact
    out: Strs = np.strings.add(np.where(neg, "-", ""), r.astype(str)).astype(object)
    out[np.isnan(x)] = ""
    for i in np.flatnonzero(~ok & ~np.isnan(x)):
        out[i] = java_fixed(float(x[i]), 0)
    return out


def _cat(*parts: Strs | pa.Array | str) -> Strs:
    """Element-wise concatenation of string arrays and constants."""
    arrays = [p if isinstance(p, str | pa.Array) else pa.array(p, pa.string()) for p in parts]
    out: Strs = pc.binary_join_element_wise(*arrays, "").to_numpy(zero_copy_only=False)
    return out


def _first_of(conds: list[B], names: list[str], default: str) -> Strs:
    """``np.select(conds, names, default)`` as Python strings: the choice picked by its number
    (no fixed-width string array per row)."""
    out: Strs = np.array([*names, default], dtype=object)[np.select(conds, list(range(len(names))), len(names))]
    return out


def _stall_reason(m: B, owned: B, unowned_s: F64, pending: F64, lag: I64) -> Strs:
    """The reasons of the STALL rows ``m``: with an owner, or without one for ``unowned_s``."""
    out: Strs = np.empty(int(m.sum()), object)
    o, u, p, n = owned[m], unowned_s[m], pending[m], lag[m]
    if o.any():
        out[o] = _cat("owner assigned but no commit for ", _fixed0(p[o]), " s with lag ", _longs(n[o]))
    if not o.all():
        out[~o] = _cat("no owner for ", _fixed0(u[~o]), " s and no commit for ", _fixed0(p[~o]), " s with lag ",
                       _longs(n[~o]))
    return out


def partition_status(s: Series, rows: I64, lag_s: F64, entries: Entries, *, n: int, stall_after_s: float,
                     stop_after_s: float, warn_lag_s: float) -> StatusRows:
    """The partition ``status`` rows of the minute rows ``rows`` (indices in ``s``:
    :func:`minute_rows`) with their lag seconds ``lag_s`` (aligned with ``rows``, NaN: null) and
    the chunk's Burrow entries (:func:`burrow_entries`, carried ones included) over windows of
    ``n`` entries; the rules are the module doc's. Returns rows aligned with ``rows``."""
    win = _window_stats(entries, n)
    key, t = s.key[rows], s.t[rows]
    wi = asof(win.key, win.last_t, key, t)
    has_w = wi >= 0
    j = np.maximum(wi, 0)
    if not len(win.key):  # no window at all: every lookup is void (has_w is all false)
        j = np.zeros(len(rows), np.int64)
        win = _Windows(*(np.zeros(1, getattr(win, f).dtype) for f in _Windows.__dataclass_fields__))
    last_t, first_t = win.last_t[j], win.first_t[j]
    zero_lag, stalled = has_w & win.zero_lag[j], has_w & win.stalled[j]
    rewound, rewound_own = has_w & win.rewound[j], has_w & win.rewound_own[j]
    lag_decreased = win.lag_decreased[j]
    first_lag, first_lag_ok = win.first_lag[j], has_w & win.first_lag_ok[j]

    lag_ok = s.lag_ok[rows]
    lag = np.where(lag_ok, s.lag[rows], 0)  # coalesce(lag, 0)
    lag0 = lag == 0
    committed, committed_ok = s.committed[rows], s.committed_ok[rows]
    owned, lost = s.owned[rows], s.lost[rows]
    unowned_s = t - s.owned_t[rows]  # NaN: unknown (a state written before m_owned_t)
    pending = s.idle_pending_s[rows]
    end_change_t = s.end_change_t[rows]

    # Burrow's rules, in order (np.select takes the first that holds)
    burrow = _first_of(
        [~has_w | lag0 | zero_lag, rewound, has_w & ((t - last_t) > (last_t - first_t)), stalled,
         has_w & ~lag_decreased],
        ["OK", "REWIND", "STOP", "STALL", "WARN"], "OK")

    growing = (np.where(np.isnan(lag_s), 0.0, lag_s) >= warn_lag_s) & has_w & ~lag_decreased & first_lag_ok & (
        lag > first_lag)
    idle = lag0 & ((t - np.where(np.isnan(end_change_t), t, end_change_t)) >= stall_after_s)
    lso, end = s.lso[rows], s.end[rows]
    held = s.lso_ok[rows] & committed_ok & s.end_ok[rows] & (committed == lso) & (lso < end)
    # nobody has owned the partition for stop_after_s (an unknown time counts: the rule before the
    # state carried m_owned_t); an owner gone for less (a restart) leaves a STALL, not a STOP
    gone = ~owned & (np.isnan(unowned_s) | (unowned_s >= stop_after_s))
    stop = gone & (pending >= stop_after_s)
    stall = ~gone & (pending >= stall_after_s)
    # messages below the log start are lost when nobody reads the partition (no owner, no commit
    # for stop_after_s: the retention loss's proof); while a consumer reads it, it may hold them
    proven = lost & ~owned & (pending >= stop_after_s)
    at_edge = lost & ~proven
    own = _first_of([proven, rewound_own, lag0 & idle, lag0, held, stop, stall, at_edge, growing],
                    ["ERR", "REWIND", "IDLE", "OK", "OK", "STOP", "STALL", "WARN", "WARN"], "OK")

    # the reason: the first case that holds (the last one: consuming); formatted per case, on
    # that case's rows only
    ls = s.log_start[rows]
    cases = [proven, rewound_own, ~committed_ok, lag0 & idle, lag0, held, stop, stall, at_edge, growing]
    formats: list[Callable[[B], Strs] | str] = [
        lambda m: _cat("committed offset ", _longs(committed[m]), " is below the log start ", _longs(ls[m])),
        "committed offset went backwards in the window",
        "no committed offset",
        "caught up; no new messages",
        "caught up",
        lambda m: _cat("at the last stable offset ", _longs(lso[m]), ": waiting for an open transaction"),
        lambda m: _cat("no owner and no commit for ", _fixed0(pending[m]), " s with lag ", _longs(lag[m])),
        lambda m: _stall_reason(m, owned, unowned_s, pending, lag),
        lambda m: _cat("committed offset ", _longs(committed[m]), " is below the log start ", _longs(ls[m]),
                       ": lost unless its consumer had already fetched them"),
        lambda m: _cat("lag ", _fixed0(lag_s[m]), " s and growing"),
        lambda m: _cat("consuming; lag ", _longs(lag[m])),
    ]
    which = np.select(cases, list(range(len(cases))), len(cases))
    reason = np.empty(len(rows), object)
    for case, fmt in enumerate(formats):
        sel = which == case
        if sel.any():
            reason[sel] = fmt if isinstance(fmt, str) else fmt(sel)
    return StatusRows(key=key, t=t, burrow_status=burrow, status=own, reason=reason, lag=s.lag[rows],
                      lag_ok=lag_ok, lag_seconds=np.asarray(lag_s, np.float64))
