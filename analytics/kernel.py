"""Vectorised per-key passes: numpy over the Arrow batches of a key-sorted frame.

Spark hands a task's rows to Python as Arrow batches (``mapInArrow``) after one shuffle by a
64-bit key hash and a sort within each partition; a pass here walks them as whole arrays
(differences, running counts, segment reductions, one binary search), so a step pays Spark's
read, shuffle and sort once and then the cost of a few array operations per row, instead of a
Spark window operator (and its sort) per ordering the rule needs.

The input rows of one key arrive together and in order: sorted by ``(_h, _k, t)``, where
``_h`` is a 64-bit hash of the key, ``_k`` = ``(h2 + 2^31)·4 + kind`` packs a second,
independent 32-bit hash ``h2`` (two keys would have to collide in both to be mixed up) and the
row's kind, which orders a key's carried history points (0) before its carried state row (1)
and its fresh sweeps (2), and ``t`` is the time. A key may span batches: a batch's trailing key
is held until the key's rows are complete. Only what the pass needs crosses to Python (each
column costs a conversion per row): the lag, the sweep's timestamp and the key's strings are
derived or joined back on the Spark side.

Pure: no Spark here (its Spark SQL reference is ``tests/analytics/spark_trends.py``);
tested on its own with hand-computed rows and against the definitions on random ones. The
definitions of offset lag and lag in seconds, and the bounds of the end-offset history, are
:mod:`lagscope.lag`'s, which the collector's live metrics use too.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lagscope.lag import HISTORY_POINTS, lag_seconds, offset_lag

__all__ = [
    "HISTORY",
    "LAG_SECONDS_IN",
    "LAG_SECONDS_OUT",
    "STATE",
    "SWEEP",
    "key_chunks",
    "lag_seconds_batches",
    "lag_seconds_table",
    "nullable",
]

#: ``_kind`` of an input row: a carried end-offset point, the carried last row, a fresh sweep
HISTORY, STATE, SWEEP = 0, 1, 2

#: the input columns: a sweep row (state or fresh) carries its time ``t`` (epoch seconds, the
#: microseconds / 1e6), its offsets and ``rec_t`` (the produce time of the record at the committed
#: offset, when known); a carried point row ``t`` = tc, ``end`` = e, ``committed`` = ep and
#: ``rec_t`` = tp (the columns a point does not otherwise use)
LAG_SECONDS_IN = pa.schema([
    ("_h", pa.int64()), ("_k", pa.int64()), ("t", pa.float64()), ("committed", pa.int64()), ("end", pa.int64()),
    ("log_start", pa.int64()), ("rec_t", pa.float64()),
])

_US = pa.timestamp("us", tz="UTC")

#: one row per reported sweep (each minute's last fresh sweep of a key, or every fresh sweep)
LAG_SECONDS_OUT = pa.schema([
    ("_h", pa.int64()), ("_h2", pa.int32()), ("ts", _US), ("t", pa.float64()), ("window_start", _US),
    ("committed", pa.int64()), ("end", pa.int64()), ("log_start", pa.int64()), ("lag", pa.int64()),
    ("lag_max", pa.int64()), ("minute_end_rise", pa.int64()), ("minute_committed_rise", pa.int64()),
    ("minute_log_start_rise", pa.int64()), ("minute_span_s", pa.float64()), ("lag_s", pa.float64()),
    ("lag_s_lower", pa.bool_()), ("lag_s_code", pa.int32()),
])

#: rows gathered before a pass (a pass's fixed cost is a few dozen array operations)
_CHUNK_ROWS = 200_000

_I64 = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]


def _col(tbl: pa.Table, name: str, dtype: type, fill: object) -> tuple[npt.NDArray, _B]:  # type: ignore[type-arg]
    """A column as (values with nulls filled, validity)."""
    col = tbl.column(name).combine_chunks()
    if col.null_count == 0:
        return np.asarray(col, dtype=dtype), np.ones(len(col), bool)
    return np.asarray(col.fill_null(fill), dtype=dtype), np.asarray(col.is_valid(), dtype=bool)


def nullable(values: npt.NDArray, valid: _B | None, typ: pa.DataType) -> pa.Array:  # type: ignore[type-arg]
    """``values`` as an Arrow array of ``typ``, null where ``valid`` is false."""
    if valid is None or bool(valid.all()):
        return pa.array(values, typ)
    return pa.array(values, typ, mask=~valid)


def _diff(v: npt.NDArray, ok: _B, has_prev: _B) -> tuple[npt.NDArray, _B]:  # type: ignore[type-arg]
    """``v − v[previous row]`` and where both exist."""
    out = np.zeros_like(v)
    out[1:] = v[1:] - v[:-1]
    valid = has_prev.copy()
    valid[1:] &= ok[1:] & ok[:-1]
    return out, valid


def _segment_sum(v: npt.NDArray, ok: _B, starts: _I64) -> tuple[npt.NDArray, _B]:  # type: ignore[type-arg]
    """Per segment (rows ``starts[i] … starts[i+1]−1``): the sum over ``ok`` rows, and whether
    there was one."""
    s = np.add.reduceat(np.where(ok, v, 0), starts)
    return s, np.add.reduceat(ok.astype(np.int64), starts) > 0


def _bracket(p_seg: _I64, p_e: _I64, q_seg: _I64, q_c: _I64) -> _I64:
    """For each query ``(q_seg, q_c)``, the index of the point of the same segment with the
    smallest ``e > q_c`` (the earliest of equal ones), or −1. The points come in segment order;
    within a segment they usually rise (an end that went down starts a new segment), but not
    across a sweep whose end was unknown, so they are put in ``(segment, e)`` order first when
    they are not in it.

    One binary search over a combined key: each segment's offsets relative to its smallest,
    the segment as the high part (``segment · span + relative``). When the offsets of a segment
    span too much for that to fit 63 bits, one search per segment instead."""
    out = np.full(len(q_seg), -1, np.int64)
    if len(q_seg) == 0 or len(p_seg) == 0:
        return out
    order = None
    if bool(np.any((p_seg[1:] == p_seg[:-1]) & (p_e[1:] <= p_e[:-1]))):
        order = np.lexsort((p_e, p_seg))  # stable: equal points keep their time order
        p_seg, p_e = p_seg[order], p_e[order]
    n_seg = int(max(p_seg[-1], q_seg.max())) + 1
    first = np.ones(len(p_seg), bool)
    first[1:] = p_seg[1:] != p_seg[:-1]
    base = np.zeros(n_seg, np.int64)
    base[p_seg[first]] = p_e[first]
    rel = p_e - base[p_seg]
    span = int(rel.max()) + 2
    if n_seg * span < 2**62:
        pk = p_seg * span + rel
        # below the segment's first point: −1, still above every point of the segments before
        qk = q_seg * span + np.clip(q_c - base[q_seg], -1, span - 1)
        j = np.searchsorted(pk, qk, side="right")
    else:  # offsets spanning more than 2^62 / segments in one chunk
        lo = np.searchsorted(p_seg, q_seg, side="left")
        hi = np.searchsorted(p_seg, q_seg, side="right")
        j = np.array([lo[i] + np.searchsorted(p_e[lo[i]:hi[i]], q_c[i], side="right")
                      for i in range(len(q_seg))], np.int64)
    inside = j < len(p_seg)
    jj = np.where(inside, j, 0)
    inside &= p_seg[jj] == q_seg
    out[inside] = jj[inside] if order is None else order[jj[inside]]
    return out


def lag_seconds_table(tbl: pa.Table, *, every_sweep: bool = False, history_points: int = HISTORY_POINTS) -> pa.Table:
    """One pass over complete keys (:data:`LAG_SECONDS_IN`, in key order) → their reported rows
    (:data:`LAG_SECONDS_OUT`). Per row of a key's series (its state row and fresh sweeps, in time
    order):

    - ``dt``, ``de``, ``dc``, ``dls``: the differences to the previous row (none at the key's
      first row); an interval is *counted* in its minute when ``dt > 0``;
    - the end-offset history of :mod:`lagscope.lag`: a fresh row with a known end is a *point*
      when the previous row's end differs: ``(e, tc, tp, ep)`` = ``(end, t, prev t, prev end)``,
      or ``(end, t, t, end)`` where a new *epoch* starts: at the key's first row, where the end
      went down and after a row whose end is unknown (which starts one too);
    - per key and minute of fresh rows: ``lag_max`` and the rises ``minute_end_rise``,
      ``minute_committed_rise``, ``minute_log_start_rise`` (each ``max(0, Δ)``, 0 where a side is
      unknown) and ``minute_span_s`` over its counted intervals (null without one);
    - at the reported rows: the offset lag (:func:`lagscope.lag.offset_lag`) and
      :func:`lagscope.lag.lag_seconds` with its method (``lag_s_code``, 1-based in
      :data:`lagscope.lag.METHODS`), read from the point of the row's epoch with the smallest
      ``e > committed`` among its newest ``history_points`` up to the row.
    """
    n = tbl.num_rows
    if n == 0:
        return LAG_SECONDS_OUT.empty_table()
    h, _ = _col(tbl, "_h", np.int64, 0)
    k, _ = _col(tbl, "_k", np.int64, SWEEP)
    h2 = k >> 2
    kind = k & 3
    t, _ = _col(tbl, "t", np.float64, 0.0)
    c, cv = _col(tbl, "committed", np.int64, 0)
    e, ev = _col(tbl, "end", np.int64, 0)
    ls, lsv = _col(tbl, "log_start", np.int64, 0)
    rec, recv = _col(tbl, "rec_t", np.float64, 0.0)
    hist = kind == HISTORY
    lag, lagv = offset_lag(c, cv & ~hist, e, ev)

    key_start = np.ones(n, bool)
    key_start[1:] = (h[1:] != h[:-1]) | (h2[1:] != h2[:-1])
    ser = ~hist
    fresh = kind == SWEEP
    # the series rows (state + fresh) of a key, with their previous series row
    ser_idx = np.flatnonzero(ser)
    m = len(ser_idx)
    if m == 0:
        return LAG_SECONDS_OUT.empty_table()
    s_key = np.cumsum(key_start)[ser_idx]  # key number of each series row
    s_first = np.ones(m, bool)
    s_first[1:] = s_key[1:] != s_key[:-1]
    has_prev = ~s_first
    st, sc, scv, se, sev = t[ser_idx], c[ser_idx], cv[ser_idx], e[ser_idx], ev[ser_idx]
    sls, slsv = ls[ser_idx], lsv[ser_idx]
    s_fresh = fresh[ser_idx]
    dt = np.zeros(m)
    dt[1:] = st[1:] - st[:-1]
    de, dev = _diff(se, sev, has_prev)
    dc, dcv = _diff(sc, scv, has_prev)
    dls, dlsv = _diff(sls, slsv, has_prev)
    dropped = dev & (de < 0)
    prev_sev = np.zeros(m, bool)
    prev_sev[1:] = sev[:-1]
    prev_sev &= has_prev

    # (key, epoch) segments over all rows in order: a key's first row (a carried point or its
    # first series row), every series row whose end went down or is unknown starts one
    seg_start = key_start.copy()
    seg_start[ser_idx] |= dropped | ~sev
    seg = np.cumsum(seg_start) - 1

    # points: the carried ones, then each fresh row with a known end that differs from the
    # previous row's (a first point of its epoch where that was unknown or higher)
    p_first = ~prev_sev | dropped
    p_new = s_fresh & sev & (p_first | (de != 0))
    prev_i = np.maximum(np.arange(m) - 1, 0)
    is_point = hist.copy()
    is_point[ser_idx[p_new]] = True
    p_rows = np.flatnonzero(is_point)  # in row order: by key, carried points first, then time
    p_e = e[p_rows]
    p_tc = t[p_rows]
    s_tp = np.where(p_first, st, st[prev_i])
    s_ep = np.where(p_first, se, se[prev_i])
    tp_all = rec.copy()  # a carried point's tp and ep
    ep_all = c.copy()
    tp_all[ser_idx] = s_tp
    ep_all[ser_idx] = s_ep
    p_tp, p_ep, p_seg = tp_all[p_rows], ep_all[p_rows], seg[p_rows]

    # minutes of the fresh rows (a state row is an earlier step's: a step ends on a minute)
    f_pos = np.flatnonzero(s_fresh)  # positions within the series rows
    if len(f_pos) == 0:
        return LAG_SECONDS_OUT.empty_table()
    f_idx = ser_idx[f_pos]
    minute = np.floor(t[f_idx] / 60.0).astype(np.int64)
    f_key = s_key[f_pos]
    m_start = np.ones(len(f_pos), bool)
    m_start[1:] = (f_key[1:] != f_key[:-1]) | (minute[1:] != minute[:-1])
    starts = np.flatnonzero(m_start)
    counted = has_prev[f_pos] & (dt[f_pos] > 0)

    def rise(d: _I64, ok: _B) -> tuple[_I64, _B]:
        # max(0, Δ), 0 where a side is unknown (Spark's greatest skips nulls)
        return _segment_sum(np.where(ok[f_pos], np.maximum(d[f_pos], 0), 0), counted, starts)

    end_rise, end_rise_ok = rise(de, dev)
    committed_rise, committed_rise_ok = rise(dc, dcv)
    log_start_rise, log_start_rise_ok = rise(dls, dlsv)
    span_s, span_ok = _segment_sum(dt[f_pos], counted, starts)
    f_lag, f_lagv = lag[f_idx], lagv[f_idx]
    lag_max = np.maximum.reduceat(np.where(f_lagv, f_lag, np.iinfo(np.int64).min), starts)
    lag_maxv = np.add.reduceat(f_lagv.astype(np.int64), starts) > 0

    if every_sweep:
        q = np.arange(len(f_pos))
        q_min = np.cumsum(m_start) - 1  # each row's minute
    else:
        q = np.append(starts[1:] - 1, len(f_pos) - 1)  # each minute's last fresh row
        q_min = np.arange(len(starts))
    qi = f_idx[q]
    qc, qlag, qlagv = c[qi], lag[qi], lagv[qi]
    look = qlagv & (qlag > 0) & ~recv[qi]  # lagging, its record's produce time unknown
    j = np.full(len(q), -1, np.int64)
    li = np.flatnonzero(look)
    j[li] = _bracket(p_seg, p_e, seg[qi[li]], qc[li])
    # the history as of the row: its epoch's points up to it, the newest history_points of them
    newest = np.searchsorted(p_rows, qi, side="right") - 1
    found = (j >= 0) & (j <= newest)
    oldest = np.maximum(np.searchsorted(p_seg, seg[qi], side="left"), newest - history_points + 1)
    jj = np.where(found, np.maximum(j, oldest), 0)
    if len(p_rows) == 0:  # nothing to index (no query is then found either)
        p_e, p_tc, p_tp, p_ep = (np.zeros(1, np.int64), np.zeros(1), np.zeros(1), np.zeros(1, np.int64))
    tq = t[qi]
    seconds, lower, method = lag_seconds(tq, qlag, qlagv, qc, np.where(recv[qi], rec[qi], np.nan), found,
                                         p_e[jj], p_tc[jj], p_tp[jj], p_ep[jj])
    known = method > 0
    window_us = minute[q] * 60_000_000
    return pa.table({
        "_h": pa.array(h[qi], pa.int64()), "_h2": pa.array(h2[qi] - 2**31, pa.int32()),
        # t = µs / 1e6 exactly: µs · 1e6 is within an ulp of the integer (for |µs| < 2^52)
        "ts": pa.array(np.rint(tq * 1e6).astype(np.int64), pa.int64()).cast(_US), "t": pa.array(tq, pa.float64()),
        "window_start": pa.array(window_us, pa.int64()).cast(_US),
        "committed": nullable(qc, cv[qi], pa.int64()), "end": nullable(e[qi], ev[qi], pa.int64()),
        "log_start": nullable(ls[qi], lsv[qi], pa.int64()), "lag": nullable(qlag, qlagv, pa.int64()),
        "lag_max": nullable(lag_max[q_min], lag_maxv[q_min], pa.int64()),
        "minute_end_rise": nullable(end_rise[q_min], end_rise_ok[q_min], pa.int64()),
        "minute_committed_rise": nullable(committed_rise[q_min], committed_rise_ok[q_min], pa.int64()),
        "minute_log_start_rise": nullable(log_start_rise[q_min], log_start_rise_ok[q_min], pa.int64()),
        "minute_span_s": nullable(span_s[q_min], span_ok[q_min], pa.float64()),
        "lag_s": nullable(seconds, known, pa.float64()),
        "lag_s_lower": nullable(lower, known, pa.bool_()),
        "lag_s_code": nullable(method, known, pa.int32()),
    }, schema=LAG_SECONDS_OUT)


def key_chunks(batches: Iterable[pa.RecordBatch], *, kind_bits: int = 2,
               chunk_rows: int | None = None) -> Iterator[pa.Table]:
    """A task's key-sorted batches (``mapInArrow``) as tables of whole keys: rows are gathered
    into chunks that end where a key ends, once they hold at least ``chunk_rows`` rows
    (default :data:`_CHUNK_ROWS`; ``_k >> kind_bits`` is the key's second hash)."""
    least = chunk_rows if chunk_rows is not None else _CHUNK_ROWS
    pending: list[pa.RecordBatch] = []
    held = 0
    for b in batches:
        if b.num_rows == 0:
            continue
        pending.append(b)
        held += b.num_rows
        if held < least:
            continue
        h = np.asarray(b.column("_h"))
        k = np.asarray(b.column("_k")) >> kind_bits
        other = np.flatnonzero((h != h[-1]) | (k != k[-1]))
        if len(other) == 0:  # the whole batch is one key: it may go on in the next
            continue
        cut = int(other[-1]) + 1
        pending[-1] = b.slice(0, cut)
        yield pa.Table.from_batches(pending)
        pending = [b.slice(cut)]
        held = b.num_rows - cut
    if held:
        yield pa.Table.from_batches(pending)


def lag_seconds_batches(batches: Iterable[pa.RecordBatch], *, every_sweep: bool = False,
                        history_points: int = HISTORY_POINTS) -> Iterator[pa.RecordBatch]:
    """:func:`lag_seconds_table` over a task's key-sorted batches (``mapInArrow``), a chunk of
    whole keys at a time (:func:`key_chunks`)."""
    for chunk in key_chunks(batches):
        yield from lag_seconds_table(chunk, every_sweep=every_sweep, history_points=history_points).to_batches()
