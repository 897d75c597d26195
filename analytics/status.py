"""The ``status`` table: a Burrow-compatible evaluation beside lagscope's own, per partition and
group, once per minute (at the minute's last sweep). The partition rows come from the
per-partition pass (:mod:`lagscope.analytics.np_status`); this module makes the table and its
group rows: per group and minute the worst partition (Burrow: anything worse than ERR counts as
ERR; lagscope: the worst status in its own order, and among partitions of that status the
reason of the one with the most lag), the lags summed, the largest lag in seconds.

**Burrow** (``core/internal/evaluator/caching.go``), evaluated over the last ``N`` offset
*entries* of a partition (Burrow stores one per commit; from sweeps, an entry is a sweep at
which the committed offset changed or an owner was assigned — an assigned consumer commits
periodically — so a consumer that is gone stops adding entries, as it would in Burrow):

1. if the current lag is 0, or any entry in the window has lag 0 → OK;
2. the offset decreased between two consecutive entries → REWIND;
3. now − last entry time > last − first entry time → STOP;
4. every entry has the same offset → STALL;
5. the lag never decreases from one entry to the next → WARN;
otherwise OK. A group is the worst of its partitions, anything worse than ERR counted as ERR.

Burrow's known false alarms follow from these rules: a consumer of a low-traffic topic that
only commits when it consumes is STOP (rule 3) as soon as one message waits; a steady lag of
a few messages that is never exactly 0 at the entries is WARN (rule 5); an idle topic whose
consumer stopped committing is STOP.

``burrow_status`` keeps Burrow's semantics, its false alarms included (a compatibility
column, for dashboards and tools built on Burrow's answers); ``status`` is lagscope's own.

**lagscope** (worst first): ``ERR`` when committed < log start (messages lost);
``REWIND`` when the window rewound (also when the lag touched 0 in the window: the messages
were processed twice all the same); ``STOP`` when work is pending, nothing was committed for
``stop_after_s`` and nobody has owned the partition for ``stop_after_s`` either; ``STALL`` when
nothing was committed for ``stall_after_s`` with an owner, or one gone for less than
``stop_after_s`` (a restart); ``WARN`` when the lag in seconds is at least ``warn_lag_s`` *and* grew
over the window without ever decreasing; ``IDLE`` when caught up on a topic that has not
been written to for ``stall_after_s``; else ``OK``. So: no STOP at zero lag, no WARN on a
steady small lag (its lag seconds stay small), no alarm on an idle topic.

**Starved partitions.** A partition row sees its own partition only, so it says ``STALL`` (or
``STOP``) for a partition whose owner is alive and committing on its other partitions. The
per-group pass judges those (:func:`lagscope.analytics.groups.judge_idle`); here a ``STALL`` or
``STOP`` row inside one of its partition's starved segments (an owner's tenure of the partition
in the episode, from that owner's first progress elsewhere in it on: each row judged by its
owner at its own time) becomes ``OK`` (``WARN`` from
``5 × stall_after_s`` into the episode), its reason prefixed with :data:`STARVED_REASON`, and the
group row is the worst of the rows so judged: a group whose members all progress is not
STALL/STOP for a starved partition. Burrow's column is left as Burrow would say it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lagscope.analytics.arrays import dates as _date
from lagscope.analytics.arrays import doubles as _dbl
from lagscope.analytics.arrays import gmax as _gmax
from lagscope.analytics.arrays import groups as _groups
from lagscope.analytics.arrays import gsum as _gsum
from lagscope.analytics.arrays import key_code as _key_code
from lagscope.analytics.arrays import longs as _long
from lagscope.analytics.arrays import nullable_doubles as _nn
from lagscope.analytics.arrays import seconds as _secs
from lagscope.analytics.kseries import asof

__all__ = ["BURROW_RANK", "HELD_REASON", "OWN_RANK", "STARVED_REASON", "STATUS_COLUMNS", "held_rows",
           "starved_rows", "status"]

_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]
_US = pa.timestamp("us", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")

STATUS_COLUMNS = ["cluster", "eval_ts", "group_id", "topic", "partition", "burrow_status", "status",
                  "reason", "lag", "lag_seconds"]

#: Burrow's order (its StatusConstant values)
BURROW_RANK = {"OK": 1, "IDLE": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}
#: lagscope's own order, worst last: the dashboards' (worst first ERR, STOP, STALL, REWIND,
#: WARN, OK, IDLE), which is also the alerts' (ERR, STOP, STALL critical; REWIND, WARN warning)
OWN_RANK = {"IDLE": 0, "OK": 1, "WARN": 2, "REWIND": 3, "STALL": 4, "STOP": 5, "ERR": 6}


def _dict_codes(col: pa.ChunkedArray) -> tuple[_I, list[Any]]:
    """Each value's index in the distinct values (-1: null) and the distinct values."""
    enc = pc.dictionary_encode(col.combine_chunks())
    return np.asarray(enc.indices.fill_null(-1), dtype=np.int64), enc.dictionary.to_pylist()


def _rank(col: pa.ChunkedArray, ranks: dict[str, int]) -> _I:
    idx, names = _dict_codes(col)
    table = np.array([ranks.get(v, 0) for v in names] + [0], dtype=np.int64)  # [-1]: null → 0
    return table[idx]


#: the reason's prefix of a partition row inside a starved episode
STARVED_REASON = "starved (its owner commits progress on its other partitions): "
#: the reason's prefix of a partition row held while its owner looks crashed (the broker may still
#: remove it: lagscope.analytics.groups, **Held**)
HELD_REASON = ("held (its owner is silent on all its partitions, within its session bound: the broker may "
               "still remove it): ")


def starved_rows(minutes: pa.Table, starved: pa.Table) -> tuple[_B, _B]:
    """Per minute row: whether it is a ``STALL`` or ``STOP`` row inside one of its partition's
    ``starved`` segments (:data:`lagscope.analytics.groups.STARVED_SCHEMA`: an owner's tenure in an
    episode, start ≤ eval ≤ end, an open one without end) at or after its ``from_ts`` (that owner's
    first progress elsewhere in the episode: a row before could not know), and whether it is at or
    past the episode's ``warn_ts``."""
    n = minutes.num_rows
    if not n or not starved.num_rows:
        return np.zeros(n, bool), np.zeros(n, bool)
    cols = ("cluster", "group_id", "topic", "partition")
    code = _key_code(*[pa.concat_arrays([minutes.column(c).combine_chunks().cast(starved.schema.field(c).type),
                                         starved.column(c).combine_chunks()]) for c in cols])
    mk, sk = code[:n], code[n:]
    t = _secs(minutes.column("ts"))
    start, end, warn = _secs(starved.column("start_ts")), _secs(starved.column("end_ts")), _secs(
        starved.column("warn_ts"))
    since = _secs(starved.column("from_ts"))
    i = asof(sk, start, mk, t)
    j = np.maximum(i, 0)
    bad = _dict_codes(minutes.column("status"))
    name = np.array([*bad[1], None], dtype=object)[bad[0]]
    inside = ((i >= 0) & ((np.isnan(end[j])) | (t <= end[j])) & (t >= since[j])
              & np.isin(name, ["STALL", "STOP"]))
    return inside, inside & (t >= warn[j])


def held_rows(minutes: pa.Table, held: pa.Table) -> _B:
    """Per minute row: whether it is a ``STALL`` or ``STOP`` row inside one of its partition's
    ``held`` episodes (:data:`lagscope.analytics.groups.HELD_SCHEMA`: start ≤ eval ≤ end, an open
    one without end) before its ``until_ts`` (the owner's session bound past its start, or its
    first activity)."""
    n = minutes.num_rows
    if not n or not held.num_rows:
        return np.zeros(n, bool)
    cols = ("cluster", "group_id", "topic", "partition")
    code = _key_code(*[pa.concat_arrays([minutes.column(c).combine_chunks().cast(held.schema.field(c).type),
                                         held.column(c).combine_chunks()]) for c in cols])
    mk, hk = code[:n], code[n:]
    t = _secs(minutes.column("ts"))
    start, end, until = _secs(held.column("start_ts")), _secs(held.column("end_ts")), _secs(held.column("until_ts"))
    i = asof(hk, start, mk, t)
    j = np.maximum(i, 0)
    bad = _dict_codes(minutes.column("status"))
    name = np.array([*bad[1], None], dtype=object)[bad[0]]
    return ((i >= 0) & ((np.isnan(end[j])) | (t <= end[j])) & (t < until[j])
            & np.isin(name, ["STALL", "STOP"]))


def _rewrite(minutes: pa.Table, inside: _B, new_status: npt.NDArray[np.str_], prefix: str) -> pa.Table:
    st = minutes.column("status").combine_chunks().cast(pa.string())
    rs = minutes.column("reason").combine_chunks().cast(pa.string())
    new_st = pc.if_else(pa.array(inside), pa.array(new_status), st)
    new_rs = pc.if_else(pa.array(inside), pc.binary_join_element_wise(
        pa.array([prefix] * minutes.num_rows, pa.string()), rs, ""), rs)
    minutes = minutes.set_column(minutes.schema.get_field_index("status"), "status", new_st)
    return minutes.set_column(minutes.schema.get_field_index("reason"), "reason", new_rs)


def status(minutes: pa.Table, starved: pa.Table | None = None, held: pa.Table | None = None) -> pa.Table:
    """The ``status`` table: each minute row's evaluation and the group rows. ``starved``: the
    per-group pass's starved episodes; a ``STALL``/``STOP`` row inside one is ``OK`` (``WARN``
    from the episode's ``warn_ts`` on), its reason prefixed with :data:`STARVED_REASON`.
    ``held``: its held episodes; a ``STALL``/``STOP`` row inside one before its ``until_ts`` is
    ``OK``, its reason prefixed with :data:`HELD_REASON`."""
    if held is not None and held.num_rows:
        inside = held_rows(minutes, held)
        if inside.any():
            minutes = _rewrite(minutes, inside, np.full(minutes.num_rows, "OK"), HELD_REASON)
    if starved is not None and starved.num_rows:
        inside, late = starved_rows(minutes, starved)
        if inside.any():
            minutes = _rewrite(minutes, inside, np.where(late, "WARN", "OK"), STARVED_REASON)
    eval_ts = minutes.column("ts").combine_chunks()
    parts = pa.table({
        "cluster": minutes.column("cluster"), "eval_ts": eval_ts.cast(_MS, safe=False),
        "group_id": minutes.column("group_id"), "topic": minutes.column("topic"),
        "partition": minutes.column("partition"), "burrow_status": minutes.column("burrow_status"),
        "status": minutes.column("status"), "reason": minutes.column("reason"), "lag": minutes.column("lag"),
        "lag_seconds": minutes.column("lag_s")})
    us = np.asarray(eval_ts.cast(pa.int64()), dtype=np.int64)
    minute = us // 60_000_000
    gcode = _key_code(minutes.column("cluster"), minutes.column("group_id"), pa.array(minute))
    order, starts, gid = _groups(gcode)
    ng = len(starts)
    br = _rank(minutes.column("burrow_status"), BURROW_RANK)[order]
    lr = _rank(minutes.column("status"), OWN_RANK)[order]
    lag, lag_ok = _long(minutes.column("lag"))
    lag, lag_ok = lag[order], lag_ok[order]
    idx, names = _dict_codes(minutes.column("reason"))
    by_name = np.argsort(np.array(names, dtype=object)) if names else np.zeros(0, np.int64)
    rank_of = np.empty(len(names) + 1, np.int64)
    rank_of[by_name] = np.arange(1, len(names) + 1)
    rank_of[-1] = 0  # null: lowest
    rr = rank_of[idx][order]
    # the worst: the largest (own rank, lag or -1, reason); ties: any (identical status and reason)
    sel = np.lexsort((rr, np.where(lag_ok, lag, -1), lr, gid))
    last = np.ones(len(sel), bool)
    if len(sel):
        last[:-1] = gid[sel][1:] != gid[sel][:-1]
    worst = order[sel[last]]
    bmax = np.maximum.reduceat(br, starts) if ng else np.zeros(0, np.int64)
    burrow = np.where(bmax >= 3, "ERR", np.where(bmax == 2, "WARN", "OK"))
    first = order[starts]
    lag_f = np.where(lag_ok, lag, np.nan).astype(np.float64)
    lsum = _gsum(lag_f, starts)
    groups = pa.table({
        "cluster": minutes.column("cluster").take(pa.array(first)),
        "eval_ts": pa.array(np.maximum.reduceat(us[order], starts) if ng else np.zeros(0, np.int64),
                            pa.int64()).cast(_US).cast(_MS, safe=False),
        "group_id": minutes.column("group_id").take(pa.array(first)),
        "topic": pa.nulls(ng, pa.string()), "partition": pa.nulls(ng, pa.int32()),
        "burrow_status": pa.array(burrow.tolist() if ng else [], pa.string()),
        "status": minutes.column("status").take(pa.array(worst)),
        "reason": minutes.column("reason").take(pa.array(worst)),
        "lag": pa.array(np.nan_to_num(lsum).astype(np.int64), pa.int64(), mask=np.isnan(lsum)),
        "lag_seconds": _nn(_gmax(_dbl(minutes.column("lag_s"))[order], starts)),
    })
    both = pa.concat_tables([parts.cast(groups.schema), groups]) if ng else parts
    return both.append_column("date", _date(both.column("eval_ts")))
