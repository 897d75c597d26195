"""Lag in seconds and the per-minute ``lag_trends`` table.

Offset lag and lag in seconds (``zero``, ``exact`` or ``interpolated`` over the end-offset
history, "at least" when the committed offset is older than the history) are defined once, in
:mod:`lagscope.lag`, for the analytics and the collector's live metrics alike.

Lag in seconds is reported per minute, at the minute's last sweep (the ``lag_trends`` row and
the ``status`` evaluation of that minute), so it is computed for those rows only: the *minute
rows*, one per key and minute, each carrying its minute's totals. They come from the per-partition
pass (:mod:`lagscope.analytics.kernel`: the differences, the minute totals and the bracketing
point, a binary search over the key's points). This module turns them into the table: per
partition and minute the last and largest lag, the produce, consume and log-start rates over
the minute's intervals, lag in seconds, the catch-up ETA (``lag / (consume − produce)`` when the
net rate is positive beyond float noise, 0 when caught up) and the retention headroom (time
until the log start passes the committed offset), and the topic and group rollups (lags and
rates summed, lag seconds and its method from the partition with the most, the least headroom).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lagscope.analytics.arrays import dates as _date
from lagscope.analytics.arrays import doubles as _dbl
from lagscope.analytics.arrays import gargmax as _gargmax
from lagscope.analytics.arrays import gmax as _gmax
from lagscope.analytics.arrays import gmin as _gmin
from lagscope.analytics.arrays import groups as _groups
from lagscope.analytics.arrays import gsum as _gsum
from lagscope.analytics.arrays import key_code as _key_code
from lagscope.analytics.arrays import longs as _long
from lagscope.analytics.arrays import nullable_doubles as _nn
from lagscope.lag import METHODS

__all__ = ["ETA_NOISE", "TREND_COLUMNS", "lag_trends"]

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_US = pa.timestamp("us", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")
KEY = ["cluster", "group_id", "topic", "partition"]

TREND_COLUMNS = ["cluster", "window_start", "group_id", "topic", "partition", "lag_last", "lag_max",
                 "produce_rate", "consume_rate", "lag_seconds", "lag_seconds_is_lower_bound",
                 "lag_seconds_method", "catchup_eta_s", "retention_headroom_s"]

#: a net rate (consume − produce) within this fraction of the rates is no catch-up: equal rates
#: summed over partitions in another order differ in their last bits, and a steady lag would get
#: an ETA of 10¹⁵ s from that noise
ETA_NOISE = 1e-9


def _method(code: pa.ChunkedArray | pa.Array) -> pa.Array:
    names = pa.array([None, *METHODS], pa.string())
    c, ok = _long(code)
    return names.take(pa.array(np.where(ok, c, 0)))


def _eta(lag: _F, produce: _F, consume: _F) -> _F:
    net = consume - produce
    scale = np.fmax(np.abs(consume), np.abs(produce))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lag == 0, 0.0, np.where((lag > 0) & (net > scale * ETA_NOISE), lag / net, np.nan))


def lag_trends(minutes: pa.Table) -> pa.Table:
    """The minute rows → ``lag_trends``: the partition rows and their topic and group rollups."""
    n = minutes.num_rows
    de, dc, dls, dtt = (_dbl(minutes.column(c)) for c in (
        "minute_end_rise", "minute_committed_rise", "minute_log_start_rise", "minute_span_s"))
    with np.errstate(divide="ignore", invalid="ignore"):
        produce = np.where(dtt > 0, de / dtt, np.nan)
        consume = np.where(dtt > 0, dc / dtt, np.nan)
        ls_rate = np.where(dtt > 0, dls / dtt, np.nan)
    c, c_ok = _long(minutes.column("committed"))
    ls, ls_ok = _long(minutes.column("log_start"))
    ls_speed = np.maximum(np.nan_to_num(ls_rate), np.where(ls_ok & (ls > 0), np.nan_to_num(produce), 0.0))
    closing = ls_speed - np.nan_to_num(consume)
    with np.errstate(divide="ignore", invalid="ignore"):
        headroom = np.where(~(c_ok & ls_ok), np.nan, np.where(c < ls, 0.0, np.where(
            closing > 0, (c - ls) / closing, np.nan)))
    lag, lag_ok = _long(minutes.column("lag"))
    lagf = np.where(lag_ok, lag, np.nan).astype(np.float64)
    lmax, lmax_ok = _long(minutes.column("lag_max"))
    lmaxf = np.where(lmax_ok, lmax, np.nan).astype(np.float64)
    lag_s = _dbl(minutes.column("lag_s"))
    lower = minutes.column("lag_s_lower").combine_chunks()
    code, code_ok = _long(minutes.column("lag_s_code"))
    codef = np.where(code_ok, code, np.nan).astype(np.float64)
    win = minutes.column("window_start").combine_chunks().cast(pa.int64())
    win_us = np.asarray(win, dtype=np.int64)

    def table(keys: dict[str, pa.Array], lag_last: _F, lag_max: _F, pr: _F, cr: _F, ls_: _F, low: pa.Array,
              meth: _F, eta: _F, head: _F, w_us: _I) -> pa.Table:
        m_ok = ~np.isnan(meth)
        return pa.table({
            **keys, "window_start": pa.array(w_us, pa.int64()).cast(_US).cast(_MS),
            "lag_last": pa.array(np.nan_to_num(lag_last).astype(np.int64), pa.int64(), mask=np.isnan(lag_last)),
            "lag_max": pa.array(np.nan_to_num(lag_max).astype(np.int64), pa.int64(), mask=np.isnan(lag_max)),
            "produce_rate": _nn(pr), "consume_rate": _nn(cr), "lag_seconds": _nn(ls_),
            "lag_seconds_is_lower_bound": low,
            "lag_seconds_method": _method(pa.array(np.nan_to_num(meth).astype(np.int64), pa.int64(), mask=~m_ok)),
            "catchup_eta_s": _nn(eta), "retention_headroom_s": _nn(head)})

    per = table({k: minutes.column(k).combine_chunks() for k in KEY}, lagf, lmaxf, produce, consume, lag_s, lower,
                codef, _eta(lagf, produce, consume), headroom, win_us)
    out = [per]
    for level in (KEY[:3], KEY[:2]):
        gcode = _key_code(*(minutes.column(k) for k in level), win)
        order, starts, gid = _groups(gcode)
        ng = len(starts)
        o = order
        sl, smax = _gsum(lagf[o], starts), _gsum(lmaxf[o], starts)
        sp, sc = _gsum(produce[o], starts), _gsum(consume[o], starts)
        best = _gargmax(lag_s[o], starts, gid)
        pick = np.where(best >= 0, o[np.maximum(best, 0)], 0)
        low = lower.take(pa.array(pick)).to_numpy(zero_copy_only=False)
        low_arr = pa.array(low, pa.bool_(), mask=best < 0) if ng else pa.array([], pa.bool_())
        meth = np.where(best >= 0, codef[pick], np.nan)
        first = o[starts]
        keys = {k: minutes.column(k).combine_chunks().take(pa.array(first)) for k in level}
        for k in KEY[len(level):]:
            keys[k] = pa.nulls(ng, pa.string() if k == "topic" else pa.int32())
        out.append(table(keys, sl, smax, sp, sc, _gmax(lag_s[o], starts), low_arr, meth,
                         _eta(sl, sp, sc), _gmin(headroom[o], starts), win_us[first]))
    if n == 0:
        out = [per]
    allrows = pa.concat_tables([t.select(TREND_COLUMNS).cast(out[0].select(TREND_COLUMNS).schema) for t in out])
    return allrows.append_column("date", _date(allrows.column("window_start")))
