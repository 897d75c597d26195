"""Small array helpers of the vectorised passes: Arrow columns to numpy and back with Spark's
conversions (timestamps as µs, seconds truncated to µs, null as NaN), dense codes of key
columns, and per-group reductions over grouped rows (nulls skipped, as SQL aggregates)."""

from __future__ import annotations

import datetime as dt

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["dates", "dense", "doubles", "gargmax", "gmax", "gmin", "groups", "gsum", "key_code", "longs",
           "nullable_doubles", "seconds", "timestamps"]

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]
_US = pa.timestamp("us", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")


def seconds(ts: pa.ChunkedArray | pa.Array) -> _F:
    """Timestamps → epoch seconds (µs / 1e6, as Spark's ``unix_micros / 1e6``); null → NaN."""
    us = pc.cast(ts, _US).cast(pa.int64())
    return np.asarray(us.fill_null(0), dtype=np.int64) / 1e6 + np.where(
        np.asarray(us.is_valid(), dtype=bool), 0.0, np.nan)


def longs(col: pa.ChunkedArray | pa.Array) -> tuple[_I, _B]:
    c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(c.fill_null(0), dtype=np.int64), np.asarray(c.is_valid(), dtype=bool)


def doubles(col: pa.ChunkedArray | pa.Array) -> _F:
    c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(c.cast(pa.float64()).fill_null(np.nan), dtype=np.float64)


def nullable_doubles(values: _F) -> pa.Array:
    """Doubles, NaN as null."""
    return pa.array(values, pa.float64(), mask=np.isnan(values))


def key_code(*cols: pa.ChunkedArray | pa.Array) -> _I:
    """A code per row, equal exactly where every column is (nulls equal to nulls), below 2³¹:
    each column's own code (a dictionary's index, an integer's offset from the least) combined in
    mixed radix, re-coded densely only when that would not fit (cheaper than coding the
    columns' joined strings)."""
    n = len(cols[0])
    code = np.zeros(n, np.int64)
    span = 1
    for col in cols:
        c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if pa.types.is_integer(c.type) or pa.types.is_timestamp(c.type):
            v, ok = longs(c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c)
            lo = int(v[ok].min()) if ok.any() else 0
            vals = np.where(ok, v - lo + 1, 0)
            card = int(vals.max()) + 1 if n else 1
        else:
            enc = c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c)
            card = len(enc.dictionary) + 1
            vals = np.asarray(enc.indices.fill_null(card - 1), dtype=np.int64)
        if span * card >= 1 << 62:  # re-code what there is densely first
            code, span = dense(code)
        code = code * card + vals
        span *= card
    if span >= 1 << 31:
        code, span = dense(code)
    return code


def dense(code: _I) -> tuple[_I, int]:
    _, inv = np.unique(code, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), int(inv.max()) + 1 if len(inv) else 1


def timestamps(secs: _F, unit: pa.DataType = _MS) -> pa.Array:
    """Epoch seconds → timestamps, as Spark's ``timestamp_micros((s · 1e6).cast(long))``."""
    ok = ~np.isnan(secs)
    us = np.trunc(np.nan_to_num(secs) * 1e6).astype(np.int64)
    return pa.array(us, pa.int64(), mask=~ok).cast(_US).cast(unit, safe=False)


def dates(ts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``YYYY-MM-DD`` (UTC) of timestamps: formatted once per distinct day."""
    c = ts.combine_chunks() if isinstance(ts, pa.ChunkedArray) else ts
    us = np.asarray(c.cast(_US).cast(pa.int64()).fill_null(0), dtype=np.int64)
    days, inv = np.unique(us // 86_400_000_000, return_inverse=True)
    names = pa.array([(dt.date(1970, 1, 1) + dt.timedelta(days=int(d))).isoformat() for d in days], pa.string())
    out = names.take(pa.array(inv.reshape(-1).astype(np.int64)))
    return out if c.null_count == 0 else pc.if_else(c.is_valid(), out, pa.nulls(len(c), pa.string()))


def groups(code: _I) -> tuple[_I, _I, _I]:
    """Rows grouped by ``code``: (order, starts of the groups in that order, group of each
    ordered row)."""
    order = np.argsort(code, kind="stable")
    sc = code[order]
    first = np.ones(len(sc), bool)
    first[1:] = sc[1:] != sc[:-1]
    return order, np.flatnonzero(first), np.cumsum(first) - 1


def gsum(values: _F, starts: _I) -> _F:
    """Per group: Σ of the non-NaN values, NaN when there is none (Spark's ``sum``)."""
    ok = ~np.isnan(values)
    s = np.add.reduceat(np.where(ok, values, 0.0), starts) if len(values) else np.zeros(0)
    n = np.add.reduceat(ok.astype(np.int64), starts) if len(values) else np.zeros(0, np.int64)
    return np.where(n > 0, s, np.nan)


def gmax(values: _F, starts: _I) -> _F:
    ok = ~np.isnan(values)
    m = np.maximum.reduceat(np.where(ok, values, -np.inf), starts) if len(values) else np.zeros(0)
    return np.where(np.isneginf(m) & (np.add.reduceat(ok.astype(np.int64), starts) == 0), np.nan, m) if len(
        values) else m


def gmin(values: _F, starts: _I) -> _F:
    return -gmax(-values, starts)


def gargmax(by: _F, starts: _I, gid: _I) -> _I:
    """Per group of the grouped rows (:func:`groups`: ``starts``, ``gid``), the row with the
    largest non-NaN ``by`` (-1 when all are NaN); ties: the first."""
    n = len(by)
    if not n:
        return np.zeros(0, np.int64)
    ok = ~np.isnan(by)
    v = np.where(ok, by, -np.inf)
    top = np.maximum.reduceat(v, starts)
    first = np.minimum.reduceat(np.where(ok & (v == top[gid]), np.arange(n), n), starts)
    return np.where(first < n, first, -1)


# --------------------------------------------------------------------------------------------
