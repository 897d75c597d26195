"""One analytics *step* over a set of whole consumer groups, in pyarrow and numpy: lake rows and
the carried state in, the result tables and the next state out. Spark runs it once per
bucket of groups (:mod:`lagscope.analytics.job`); a test or a benchmark can call it directly.

A step is two vectorised passes:

- the **per-partition pass** (:func:`lagscope.analytics.onepass.pass_table`): every sweep row,
  carried state row, end-offset point, Burrow entry, gap sample and commit record of a key in
  one sorted frame; out come the minute rows (lag, lag in seconds, status), the per-partition
  anomalies and the per-partition state parts;
- the **per-group pass** (:func:`lagscope.analytics.groups.group_pass`): member sweeps,
  generation records and the commit stream; out come the rebalance windows, the storms, the
  anomalies a rebalance explains (dropped) and the group state parts.

Then the tables: ``lag_trends`` (:func:`lag_trends`: partitions and their topic and group
rollups), ``status`` (:func:`status`: partitions and their group rows), ``anomalies``
(:func:`anomalies`), ``rebalances``, and ``advice`` (:func:`lagscope.analytics.advice.advise`: from those
tables, the member sweeps, the generation records and the evidence carried from earlier steps).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from lagscope.analytics import advice, findings, groups, kernel, kseries, onepass
from lagscope.analytics.arrays import dates, doubles, key_code, longs, nullable_doubles, seconds, timestamps
from lagscope.analytics.status import status
from lagscope.analytics.trends import lag_trends
from lagscope.config import matches_any
from lagscope.lag import BASIS_LSO, HISTORY_POINTS, lag_end, offset_lag

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from lagscope.config import AnalyticsConfig

__all__ = ["READ_COLUMNS", "StepInputs", "StepOutput", "read_files", "run_step"]

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]

_US = pa.timestamp("us", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")
KEY = ["cluster", "group_id", "topic", "partition"]



@dataclass
class StepInputs:
    """A step's lake rows (already limited to its range) and the carried state, as pyarrow tables."""

    offsets: pa.Table
    members: pa.Table
    commits: pa.Table | None
    group_events: pa.Table | None
    state: dict[str, pa.Table]


@dataclass
class StepOutput:
    """The result tables (with ``cluster`` and ``date``) and the next state's parts."""

    tables: dict[str, pa.Table]
    state: dict[str, pa.Table]


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------

def read_files(paths: Sequence[str], schema: pa.Schema, base: Path | str, *, where: ds.Expression | None = None,
               columns: Sequence[str] | None = None, dictionaries: Sequence[str] = (),
               filesystem: pafs.FileSystem | None = None) -> pa.Table:
    """The rows of lake files ``paths`` (Hive partitions under ``base`` give ``cluster`` and
    ``date``) in ``schema`` (columns an older file lacks read as null): only ``columns`` when
    given, only the rows ``where`` selects (files and row groups whose statistics rule them out
    are not read: a one-minute step reads its minute of a day's partition, not the day).
    ``filesystem``: the one ``paths`` and ``base`` are in (an object store's; default: local).
    ``dictionaries``: string columns read as dictionaries, one dictionary for the whole table (the
    files' own dictionary pages, not a string per row: a batch reads tens of millions of rows)."""
    if dictionaries:
        schema = pa.schema([pa.field(f.name, pa.dictionary(pa.int32(), f.type)) if f.name in dictionaries else f
                            for f in schema])
    if not paths:
        got = schema.empty_table()
        return got.select(list(columns)) if columns is not None else got
    part = ds.partitioning(pa.schema([("cluster", pa.string()), ("date", pa.string())]), flavor="hive")
    fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=list(dictionaries)))
    got = ds.dataset(list(paths), schema=schema, format=fmt, partitioning=part, partition_base_dir=str(base),
                     filesystem=filesystem).to_table(filter=where, columns=columns)
    return got.unify_dictionaries() if dictionaries else got


#: the lake columns an in-process step reads (the others are the collector's context)
READ_COLUMNS = {
    "offsets": ["cluster", "group_id", "topic", "partition", "sweep_ts", "committed_offset", "log_start_offset",
                "log_end_offset", "last_stable_offset", "lag_basis", "member_id", "committed_record_ts"],
    "members": ["cluster", "group_id", "sweep_ts", "group_state", "generation", "member_id", "group_instance_id",
                "assignment", "protocol", "group_protocol", "client_id", "host"],
    "commits": ["cluster", "group_id", "topic", "partition", "committed_offset", "commit_ts", "record_ts",
                "source_partition", "source_offset"],
    "group_events": ["cluster", "group_id", "record_type", "value_version", "generation", "members", "record_ts"],
}


# --------------------------------------------------------------------------------------------
# small array helpers
# --------------------------------------------------------------------------------------------

# series and the pass's input
# --------------------------------------------------------------------------------------------

def prepare(offsets: pa.Table, read_committed_groups: Sequence[str]) -> pa.Table:
    """Lake ``offsets`` rows → the pass's sweep values: ``KEY, t, committed, end, log_start, lag,
    rec_t, lso, owner``. ``end`` is the end the row's lag is measured against
    (:func:`lagscope.lag.lag_end`): the last stable offset where the collector measured it so
    (``lag_basis``) or the group matches ``read_committed_groups``, else the high watermark; a
    row without ``lag_basis`` (a file written before the column) is measured against the high
    watermark unless its group is listed."""
    c, c_ok = longs(offsets.column("committed_offset"))
    hw, hw_ok = longs(offsets.column("log_end_offset"))
    lso, lso_ok = longs(offsets.column("last_stable_offset"))
    on_lso = _equals(offsets.column("lag_basis"), BASIS_LSO)
    if read_committed_groups:
        on_lso |= _matches(offsets.column("group_id"), read_committed_groups)
    end, end_ok, _ = lag_end(hw, hw_ok, lso, lso_ok, on_lso)
    lag, lag_ok = offset_lag(c, c_ok, end, end_ok)
    return pa.table({
        "cluster": offsets.column("cluster"), "group_id": offsets.column("group_id"),
        "topic": offsets.column("topic"), "partition": offsets.column("partition").cast(pa.int32()),
        "t": seconds(offsets.column("sweep_ts")),
        "committed": kernel.nullable(c, c_ok, pa.int64()), "end": kernel.nullable(end, end_ok, pa.int64()),
        "log_start": offsets.column("log_start_offset"), "lag": kernel.nullable(lag, lag_ok, pa.int64()),
        "rec_t": nullable_doubles(seconds(offsets.column("committed_record_ts"))),
        "lso": offsets.column("last_stable_offset"), "owner": offsets.column("member_id"),
    })


def _equals(col: pa.ChunkedArray, value: str) -> _B:
    """Whether each row's string is ``value`` (null: no); a dictionary column's values are
    compared once each."""
    c = col.combine_chunks()
    if pa.types.is_dictionary(c.type):
        hit = np.append(np.asarray(pc.equal(c.dictionary, value).fill_null(False), dtype=bool), False)
        return hit[np.asarray(c.indices.fill_null(len(c.dictionary)), dtype=np.int64)]
    return np.asarray(pc.equal(c, value).fill_null(False), dtype=bool)


def _matches(col: pa.ChunkedArray, patterns: Sequence[str]) -> _B:
    """Whether each row's group id matches one of ``patterns`` whole (null: no), as everywhere
    else (:func:`lagscope.config.matches_any`, Python's regular expressions): each distinct
    value is matched once."""
    c = col.combine_chunks()
    enc = c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c)
    hit = np.array([v is not None and matches_any(patterns, v) for v in enc.dictionary.to_pylist()] + [False],
                   dtype=bool)
    return hit[np.asarray(enc.indices.fill_null(len(enc.dictionary)), dtype=np.int64)]


def _x(n: int, values: Sequence[_F] | None) -> pa.Array:
    """The pass's ``x`` struct of ``values`` (the rest null); all null without values."""
    fields = [f"x{i}" for i in range(onepass.X_WIDTH)]
    if values is None:
        return pa.nulls(n, onepass.X_TYPE)
    arrays = [nullable_doubles(v) for v in values] + [pa.nulls(n, pa.float64())
                                                      for _ in range(onepass.X_WIDTH - len(values))]
    return pa.StructArray.from_arrays(arrays, names=fields)


def _rows(keys: pa.Table, kind: int, cols: dict[str, Any]) -> pa.Table:
    """Pass input rows of one kind (missing columns null; ``_h`` and ``_k`` added later)."""
    n = keys.num_rows
    out: dict[str, Any] = {}
    for f in onepass.PASS_IN:
        if f.name in ("_h", "_k"):
            continue
        if f.name in KEY:
            col = keys.column(f.name)
            out[f.name] = col if pa.types.is_dictionary(col.type) else col.cast(f.type)
        elif f.name in cols and cols[f.name] is not None:
            v = cols[f.name]
            out[f.name] = (v if isinstance(v, pa.Array | pa.ChunkedArray) else pa.array(v)).cast(f.type)
        else:
            out[f.name] = pa.nulls(n, f.type)
    out["_kind"] = pa.array(np.full(n, kind, np.int64))
    return pa.table(out)


def generations(code: _I, kind: _I, t: _F, forget_after_s: float) -> _I:
    """Per pass input row, its key's *generation*: a key whose series row (a sweep, or the carried
    state row) comes more than ``forget_after_s`` after the key's previous one starts afresh, as a
    new key (0 for the rows before any such silence, then 1, …). A commit record belongs to the
    generation of the key's first series row at or after it (after the last one: the last
    generation); the carried state's other rows (end-offset points, Burrow entries, gap samples,
    the last minute) to the carried state row's, the key's first (0)."""
    gen = np.zeros(len(code), np.int64)
    is_series = (kind == onepass.STATE) | (kind == onepass.SWEEP)
    si = np.flatnonzero(is_series)
    if len(si) < 2:
        return gen
    si = si[np.lexsort((t[si], code[si]))]
    sc, st = code[si], t[si]
    same = sc[1:] == sc[:-1]
    new = np.zeros(len(si), bool)
    new[1:] = same & (st[1:] - st[:-1] > forget_after_s)
    if not new.any():
        return gen
    starts = np.ones(len(si), bool)
    starts[1:] = ~same
    run = np.cumsum(new)
    g = run - np.maximum.accumulate(np.where(starts, run, 0))  # the silences before it, within its key
    gen[si] = g
    ci = np.flatnonzero(kind == onepass.COMMIT)
    if len(ci):
        # each commit: the first series row of its key at or after it (ties: the commit first)
        ks = np.concatenate([sc, code[ci]])
        ts = np.concatenate([st, t[ci]])
        is_c = np.concatenate([np.zeros(len(si), bool), np.ones(len(ci), bool)])
        gs = np.concatenate([g, np.zeros(len(ci), np.int64)])
        order = np.lexsort((~is_c, ts, ks))
        ks, is_c, gs = ks[order], is_c[order], gs[order]
        n = len(order)
        pos = np.where(~is_c, np.arange(n), n)
        nxt = np.minimum.accumulate(pos[::-1])[::-1]  # the next series row's position (n: none)
        prv = np.maximum.accumulate(np.where(~is_c, np.arange(n), -1))  # the previous one's (-1: none)
        at = np.flatnonzero(is_c)
        nx, pv = nxt[at], prv[at]
        nx_ok = (nx < n) & (ks[np.minimum(nx, n - 1)] == ks[at])
        pv_ok = (pv >= 0) & (ks[np.maximum(pv, 0)] == ks[at])
        cg = np.where(nx_ok, gs[np.minimum(nx, n - 1)], np.where(pv_ok, gs[np.maximum(pv, 0)], 0))
        gen[ci[order[at] - len(si)]] = cg
    return gen


def pass_input(series: pa.Table, owner_codes: _I, state: dict[str, pa.Table], commits: pa.Table | None,
               state_owner_codes: tuple[_I, _I] | None, forget_after_s: float = math.inf,
               skip_factor: float = kseries.JUMP_FACTOR) -> pa.Table:
    """The pass's input (:data:`lagscope.analytics.onepass.PASS_IN`) in key, kind and time order:
    ``_h`` a code of the key (:func:`_key_code`) and its generation (:func:`generations`: a key
    silent for more than ``forget_after_s`` comes back as a new one), ``_k`` = code · 16 + kind (the
    pass needs whole keys together, not a particular hash). The sweeps' ``starved`` flags
    (:func:`lagscope.analytics.kseries.starved_rows`, beyond ``skip_factor``) are computed here,
    where the step holds whole groups: the pass holds whole keys only."""
    parts = [_rows(series, onepass.SWEEP, {
        "t": series.column("t"), "committed": series.column("committed"), "end": series.column("end"),
        "log_start": series.column("log_start"), "rec_t": series.column("rec_t"), "lso": series.column("lso"),
        "owner_h": kernel.nullable(owner_codes, owner_codes >= 0, pa.int64())})]
    st = state.get("series")
    if st is not None and st.num_rows:
        assert state_owner_codes is not None
        # a state written before jumps were told apart (it has no m_idle) carries an m_max_rate that
        # may hold a seek's own advance: it is learned again instead, or it would hide skips for good
        stale = {"m_max_rate"} if "m_idle" not in st.column_names else set()
        # a marker the state does not have reads as null: m_owned_t (a state written before it) is
        # then the carried row's own time when it had an owner, else unknown (kseries.enrich)
        marks = [doubles(st.column(m)) if m in st.column_names and m not in stale else np.full(st.num_rows, np.nan)
                 for m in onepass.STATE_OUT]
        # the owner whose tenure m_tenure_t dates (tenure_owner), as the step's code (NaN: none, or a
        # state without it: its own owner)
        marks.append(np.where(state_owner_codes[1] >= 0, state_owner_codes[1], np.nan))
        parts.append(_rows(st, onepass.STATE, {
            "t": st.column("t"), "committed": st.column("committed"), "end": st.column("end"),
            "log_start": st.column("log_start"), "rec_t": nullable_doubles(seconds(st.column("rec_ts"))),
            "lso": st.column("lso"),
            "owner_h": kernel.nullable(state_owner_codes[0], state_owner_codes[0] >= 0, pa.int64()),
            "x": _x(st.num_rows, marks)}))
    h = state.get("history")
    if h is not None and h.num_rows:
        parts.append(_rows(h, onepass.HISTORY, {"t": h.column("tc"), "committed": h.column("ep"),
                                                "end": h.column("e"), "rec_t": h.column("tp")}))
    for name, packed in (("entries", onepass.ENTRIES), ("gaps", onepass.GAPS)):
        p = state.get(name)
        if p is not None and p.num_rows:
            parts.append(_rows(p, packed, {"t": np.zeros(p.num_rows), "b": p.column("b")}))
    if commits is not None and commits.num_rows:
        parts.append(_rows(commits, onepass.COMMIT, {"t": commits.column("t"), "committed": commits.column("offset"),
                                                     "end": commits.column("seq")}))
    m = state.get("minutes")
    if m is not None and m.num_rows:
        x = {"produce_rate": doubles(m.column("produce_rate")), "consume_rate": doubles(m.column("consume_rate")),
             "m_g_start": seconds(m.column("m_g_start")), "m_g_lag0": doubles(m.column("m_g_lag0")),
             "m_g_n": doubles(m.column("m_g_n"))}
        parts.append(_rows(m, onepass.MINUTE, {"t": seconds(m.column("window_start")), "end": m.column("lag_last"),
                                               "x": _x(m.num_rows, [x[c] for c in onepass.MINUTE_X])}))
    if len({p.schema for p in parts}) > 1:  # sweeps read as dictionaries beside other rows' strings
        plain_rows = pa.schema([*(f for f in onepass.PASS_IN if f.name not in ("_h", "_k")), ("_kind", pa.int64())])
        parts = [p.cast(plain_rows) for p in parts]
    rows = pa.concat_tables(parts)
    # the key's strings as dictionaries: coded from their indices, and moved by the sort as
    # indices (the pass turns them back into strings once per key)
    for name in KEY[:3]:
        col = rows.column(name).combine_chunks()
        rows = rows.set_column(rows.column_names.index(name), name,
                               col if pa.types.is_dictionary(col.type) else pc.dictionary_encode(col))
    code = key_code(*(rows.column(k) for k in KEY))
    kind = np.asarray(rows.column("_kind"), dtype=np.int64)
    t = doubles(rows.column("t"))
    if math.isfinite(forget_after_s):
        gen = generations(code, kind, t, forget_after_s)
        if gen.any():  # a key and each generation of it: a key of its own to the pass
            _, code = np.unique(code * (int(gen.max()) + 1) + gen, return_inverse=True)
            code = code.astype(np.int64)
    k = (code << onepass.KIND_BITS) | kind
    at = np.lexsort((t, k))  # a key's state row (kind 1) before its sweeps (kind 2), these in time order
    order = pa.array(at)
    rows = rows.drop_columns(["_kind"]).append_column("_h", pa.array(code, pa.int64())).append_column(
        "_k", pa.array(k, pa.int64())).select(onepass.PASS_IN.names)
    # columns null in every row (a batch's packed state, markers) need no sorting
    out = pa.table({name: pa.nulls(rows.num_rows, col.type) if col.null_count == len(col) else col.take(order)
                    for name, col in zip(rows.column_names, rows.columns, strict=True)})
    starved, member_rate = _per_member(out, code[at], kind[at], t[at], skip_factor)
    out = out.set_column(out.column_names.index("starved"), "starved", starved)
    return out.set_column(out.column_names.index("member_rate"), "member_rate", member_rate)


def _per_member(rows: pa.Table, code: _I, kind: _I, t: _F, factor: float) -> tuple[pa.Array, pa.Array]:
    """The pass input's ``starved`` and ``member_rate`` columns (``rows`` in pass order: a key's
    state row before its sweeps): :func:`lagscope.analytics.kseries.starved_rows` and
    :func:`lagscope.analytics.kseries.member_rates` over its series rows, null on the other kinds
    (``member_rate`` also where the sweep names no owner)."""
    starved = np.zeros(rows.num_rows, bool)
    rate = np.full(rows.num_rows, np.nan)
    sel = np.flatnonzero((kind == onepass.SWEEP) | (kind == onepass.STATE))
    if len(sel):
        sub = rows.take(pa.array(sel)).select(["cluster", "group_id", "committed", "end", "log_start", "owner_h"])
        group = key_code(sub.column("cluster"), sub.column("group_id"))
        is_state = kind[sel] == onepass.STATE
        committed, committed_ok = longs(sub.column("committed"))
        end, end_ok = longs(sub.column("end"))
        log_start, log_start_ok = longs(sub.column("log_start"))
        owner, owned = longs(sub.column("owner_h"))
        starved[sel] = kseries.starved_rows(code[sel], group, is_state, t[sel], committed, committed_ok, owner, owned,
                                            factor)
        rate[sel] = kseries.member_rates(code[sel], group, is_state, t[sel], committed, committed_ok, end, end_ok,
                                         log_start, log_start_ok, owner, owned)
    sweep = kind == onepass.SWEEP
    return (pa.array(starved, pa.bool_(), mask=~sweep), pa.array(rate, pa.float64(), mask=np.isnan(rate) | ~sweep))


def commit_records(commits: pa.Table) -> pa.Table:
    """Lake ``commits`` rows → ``KEY, t, offset, seq`` (as ``commit_records`` of the Spark
    reference, tests/analytics/spark_reference.py)."""
    c = commits.filter(pc.is_valid(commits.column("committed_offset")))
    t = seconds(pc.coalesce(c.column("commit_ts"), c.column("record_ts")))
    sp, _ = longs(c.column("source_partition"))
    so, _ = longs(c.column("source_offset"))
    return pa.table({"cluster": c.column("cluster"), "group_id": c.column("group_id"), "topic": c.column("topic"),
                     "partition": c.column("partition").cast(pa.int32()), "t": pa.array(t),
                     "offset": c.column("committed_offset"), "seq": pa.array(sp * (1 << 40) + so, pa.int64())})


# --------------------------------------------------------------------------------------------
# result tables from the pass's output
# --------------------------------------------------------------------------------------------

class _Parts:
    """The pass's output by ``_o`` (each part taken with the columns it is read for: most of the
    output's columns are null outside their part)."""

    def __init__(self, passed: pa.Table) -> None:
        self.passed = passed
        self.o = np.asarray(passed.column("_o").combine_chunks(), dtype=np.int64) if passed.num_rows else np.zeros(
            0, np.int64)

    def get(self, o: int, columns: Sequence[str]) -> pa.Table:
        """Part ``o``: the pass writes each chunk's output part after part, so a part is a few
        runs of rows, sliced (no copy; a take copied the state's packed values twice a step)."""
        tbl = self.passed.select(list(columns))
        idx = np.flatnonzero(self.o == o)
        if not len(idx):
            return tbl.slice(0, 0)
        cut = np.flatnonzero(np.diff(idx) != 1) + 1
        starts, ends = idx[np.concatenate([[0], cut])], idx[np.concatenate([cut - 1, [len(idx) - 1]])] + 1
        return pa.concat_tables([tbl.slice(int(a), int(b - a)) for a, b in zip(starts, ends, strict=True)])


def _stamped(table: pa.Table, as_of: dt.datetime) -> pa.Table:
    """``table`` with ``as_of_ts`` (the end of the analysed range) set on every row."""
    if "as_of_ts" in table.column_names:
        table = table.drop_columns(["as_of_ts"])
    return table.append_column("as_of_ts", pa.array([as_of] * table.num_rows, _US).cast(_MS, safe=False))


def anomalies(rows: pa.Table, as_of: dt.datetime) -> pa.Table:
    """The per-partition pass's anomaly rows → ``anomalies`` rows, with their stable ``key``
    (kind|cluster|group|topic|partition|start in ms), ``date`` and ``as_of_ts``."""
    start = timestamps(doubles(rows.column("start_t")))
    ms = np.asarray(start.cast(pa.int64()).fill_null(0), dtype=np.int64)
    part = rows.column("partition").cast(pa.string()).fill_null("")
    key = pc.binary_join_element_wise(rows.column("kind"), rows.column("cluster"), rows.column("group_id"),
                                      rows.column("topic").fill_null(""), part, pa.array(ms.astype(str)), "|")
    n = rows.num_rows
    table = pa.table({
        "cluster": rows.column("cluster"), "group_id": rows.column("group_id"), "topic": rows.column("topic"),
        "partition": rows.column("partition"), "kind": rows.column("kind"), "start_ts": start,
        "end_ts": timestamps(doubles(rows.column("end_t"))), "severity": rows.column("severity"),
        "magnitude": rows.column("magnitude"), "unit": rows.column("unit"), "detail": rows.column("detail"),
        "cause": rows.column("cause"), "key": key, "date": dates(start),
        "as_of_ts": pa.array([as_of] * n, _US).cast(_MS, safe=False) if n else pa.array([], _MS)})
    # the columns of the rules' statement (findings.py), then the table's partition and as_of_ts
    return table.select([*findings.ANOMALY_COLUMNS, "date", "as_of_ts"])


#: the next state's ``open_keys``: the anomalies a step published open of the kinds a later step
#: may find a rebalance explains, or its owner's session may still (:func:`withdrawals`), with the
#: kind, severity and detail they were published with (:func:`as_published`)
OPEN_KEYS_SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("key", pa.string()),
                              ("kind", pa.string()), ("severity", pa.string()), ("detail", pa.string())])


def as_published(published: pa.Table, series: pa.Table, carried: pa.Table | None) -> pa.Table:
    """``published`` (the group pass's anomalies) with each open stall, stop or starved episode
    that a previous step published open (``carried``: its ``open_keys``) and whose partition has no
    row in this step (``series``) given the kind, severity and detail it was published with.

    Such an episode's last sweep is before the step, and the group pass judges it by what
    happened from its start to that sweep (its owner's progress on other partitions, the group's):
    the previous step knew at least as much of that span as this one (its commit look-back and
    its rows reach back further), and a step knows a partition's rows before its range only by its
    carried last change. So the previous verdict stands: judged again, a progress elsewhere that
    only the previous step's rows, or commit records that have since left the look-back, showed
    was lost, and the episode flipped from ``starved`` to ``stop`` in a later step (the fault soak
    of 2026-12-02: 15 minutes after the group was deleted). A state written before the part had
    its ``detail`` keeps the verdict of each step."""
    if carried is None or not carried.num_rows or "detail" not in carried.column_names or not published.num_rows:
        return published
    key = published.column("key").cast(pa.string()).combine_chunks()
    at = np.asarray(pc.index_in(key, value_set=carried.column("key").cast(pa.string()).combine_chunks())
                    .fill_null(-1), dtype=np.int64)
    idle = np.asarray(pc.is_in(published.column("kind").cast(pa.string()),
                               value_set=pa.array(["stall", "stop", "starved"])), dtype=bool)
    open_ = np.asarray(pc.is_null(published.column("end_ts")), dtype=bool)
    n = published.num_rows

    def col(t: pa.Table, k: str) -> pa.Array:
        c = t.column(k).combine_chunks()
        return c.cast(pa.int32()) if k == "partition" else c.cast(pa.string())

    code = key_code(*(pa.concat_arrays([col(published, k), col(series, k)]) for k in KEY))
    silent = ~np.isin(code[:n], code[n:])
    use = (at >= 0) & idle & open_ & silent
    if not use.any():
        return published
    was = carried.take(pa.array(np.maximum(at, 0)))
    out = published
    for name in ("kind", "severity", "detail"):
        i = out.schema.get_field_index(name)
        then = was.column(name).cast(out.schema.field(name).type).combine_chunks()
        out = out.set_column(i, out.schema.field(name), pc.if_else(pa.array(use), then,
                                                                 out.column(name).combine_chunks()))
    return out


def withdrawals(found: pa.Table, published: pa.Table, carried: pa.Table | None) -> pa.Table:
    """``published`` (the group pass's anomalies) with ``withdrawn`` (false), and a withdrawal row
    for each key a previous step published open (``carried``: its ``open_keys``) that the
    per-partition pass still finds (``found``) but the group pass no longer reports: a rebalance
    window that ends only now explains it, or its owner's session may still end (held). One pass,
    which sees the window, never reports such a key; the row makes the steps say the same. It
    repeats the key and its identity, with the kind and severity it was published with, ``end_ts``
    its end (else start + magnitude) and ``withdrawn`` true; stamped with the step's end, it is the
    key's current row, and readers treat the key as absent (a later row reporting it again wins)."""
    out = published.append_column("withdrawn", pa.array(np.zeros(published.num_rows, bool)))
    if carried is None or not carried.num_rows or not found.num_rows:
        return out
    fk = found.column("key").cast(pa.string())
    gone = pc.and_(pc.is_in(fk, value_set=carried.column("key").cast(pa.string())),
                   pc.invert(pc.is_in(fk, value_set=published.column("key").cast(pa.string()).combine_chunks())))
    if not pc.any(gone).as_py():
        return out
    keys = pc.unique(fk.filter(gone))
    rows = found.take(pc.index_in(keys, value_set=fk))  # one per key: its first row
    was = carried.take(pc.index_in(keys, value_set=carried.column("key").cast(pa.string())))
    start = seconds(rows.column("start_ts"))
    mag = np.asarray(rows.column("magnitude").cast(pa.float64()).fill_null(0.0), dtype=np.float64)
    end = pc.coalesce(rows.column("end_ts").cast(_MS, safe=False),
                      timestamps(start + mag).cast(_MS, safe=False))
    n = rows.num_rows
    cols = {"kind": was.column("kind"), "severity": was.column("severity"), "end_ts": end,
            "detail": pa.array(["withdrawn: a rebalance that ends only now explains it, or its owner's session "
                                "may still expire"] * n, pa.string()),
            "withdrawn": pa.array(np.ones(n, bool))}
    gone_rows = pa.table({f.name: (cols[f.name] if f.name in cols else rows.column(f.name)).cast(f.type)
                          for f in out.schema}, schema=out.schema)
    return pa.concat_tables([out, gone_rows])


def open_keys(published: pa.Table) -> pa.Table:
    """The ``open_keys`` state part (:data:`OPEN_KEYS_SCHEMA`): of the step's published anomalies,
    the open ones a later step may withdraw (:func:`withdrawals`)."""
    keep = pc.and_(pc.and_(pc.is_null(published.column("end_ts")),
                           pc.is_in(published.column("kind").cast(pa.string()),
                                    value_set=pa.array(groups.OUTAGE_KINDS))),
                   pc.invert(published.column("withdrawn")))
    got = published.filter(keep)
    return pa.table({f.name: got.column(f.name).cast(f.type) for f in OPEN_KEYS_SCHEMA}, schema=OPEN_KEYS_SCHEMA)


# --------------------------------------------------------------------------------------------
# the step
# --------------------------------------------------------------------------------------------

def _owner_codes(series: pa.Table, state: pa.Table | None) -> tuple[_I, tuple[_I, _I] | None, pa.Array]:
    """Dense codes of the owners (member ids) of the step's rows and of the carried rows with
    their ``tenure_owner`` (-1: none; all -1 for a state written without it), and the distinct
    owners (the pass compares owners by these codes; the state keeps names)."""
    cols = [series.column("owner")]
    if state is not None and state.num_rows:
        cols.append(state.column("owner"))
        cols.append(state.column("tenure_owner") if "tenure_owner" in state.column_names else pa.chunked_array(
            [pa.nulls(state.num_rows, pa.string())]))
    else:
        own = cols[0].combine_chunks()
        if pa.types.is_dictionary(own.type):  # read so (a batch): its indices are the codes
            return np.asarray(own.indices.fill_null(-1), dtype=np.int64), None, own.dictionary.cast(pa.string())
    both = pa.chunked_array([c.cast(pa.string()) for chunk in cols for c in chunk.chunks], pa.string())
    enc = pc.dictionary_encode(both).combine_chunks()
    codes = np.asarray(enc.indices.fill_null(-1), dtype=np.int64)
    n = series.num_rows
    if len(cols) == 1:
        return codes, None, enc.dictionary
    m = state.num_rows if state is not None else 0
    return codes[:n], (codes[n:n + m], codes[n + m:]), enc.dictionary


def _run_pass(inp: pa.Table, params: onepass.PassParams, workers: int) -> pa.Table:
    """The pass over chunks of whole keys, ``workers`` chunks at a time in threads (numpy and
    pyarrow release the GIL in their loops): about as many chunks as workers, of at most
    :data:`_CHUNK_ROWS` rows."""
    if not inp.num_rows:
        return onepass.PASS_OUT.empty_table()
    size = min(_CHUNK_ROWS, -(-inp.num_rows // max(1, workers)))
    chunks = list(kernel.key_chunks(inp.to_batches(max_chunksize=size), kind_bits=onepass.KIND_BITS,
                                    chunk_rows=size))
    if workers <= 1 or len(chunks) == 1:
        outs = [onepass.pass_table(c, params) for c in chunks]
    else:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="lagscope-pass") as pool:
            outs = list(pool.map(lambda c: onepass.pass_table(c, params), chunks))
    return pa.concat_tables(outs)


#: the largest chunk of the in-process pass (rows): the pass is dozens of whole-column array
#: operations, and a chunk's columns (1.2 MB per 150,000 doubles) that stay in the core's cache
#: take about a fifth less CPU than 500,000-row chunks' (per-chunk fixed costs are ~2 %)
_CHUNK_ROWS = 150_000


def _with_owners(state: pa.Table, series: pa.Table, carried: pa.Table | None) -> pa.Table:
    """``state`` (the next state's series rows) with what the group pass needs to judge an episode
    that outlives its owner across steps, as one pass would: ``owner_last``/``owner_last_t`` the
    member of the key's latest row with an owner (this step's, else the carried one) and its time,
    ``change_owner`` the owner of the row of the key's last commit change (``m_change_t``: this
    step's row at that time, else the carried one) and ``alive_owner`` that of its last progress
    (``m_alive_t``, alike: a partition that changed hands since is not its new owner's progress);
    ``unowned_t`` the first of the key's rows without an owner after its latest one with an owner
    (null: its latest row has one): a commit record between it and the next step's first row is
    nobody's, as one pass dates the record's owner by the row at or before it.
    In numpy over one coding of the keys."""
    def strings(t: pa.Table, name: str) -> pa.Array:
        return t.column(name).combine_chunks().cast(pa.string())

    parts: list[tuple[pa.Table, str, str]] = [(state, "t", "owner"), (series, "t", "owner")]
    at_part: dict[str, int] = {}  # a carried owner column → its part
    if carried is not None and carried.num_rows:
        parts.append((carried, "t", "owner"))
        for t_col, who in (("owner_last_t", "owner_last"), ("m_change_t", "change_owner"),
                           ("m_alive_t", "alive_owner")):
            if who in carried.column_names:
                at_part[who] = len(parts)
                parts.append((carried, t_col, who))
    sizes = [t.num_rows for t, _, _ in parts]
    code = key_code(*(pa.concat_arrays([strings(t, k) if k != "partition" else t.column(k).combine_chunks().cast(
        pa.int32()) for t, _, _ in parts]) for k in KEY))
    when = np.concatenate([doubles(t.column(c).cast(pa.float64())) for t, c, _ in parts])
    owner = pa.concat_arrays([strings(t, o) for t, _, o in parts])
    owned = np.asarray(owner.is_valid(), dtype=bool) & ~np.isnan(when)
    src = np.repeat(np.arange(len(parts)), sizes)
    n = state.num_rows
    st_code = code[:n]

    def pick(rows: _I, at_t: _F | None) -> _I:
        """Per state row: the index (−1: none) of its key's latest row of ``rows`` (with ``at_t``:
        its key's last row of ``rows`` at exactly that time)."""
        q_t = np.full(n, np.inf) if at_t is None else at_t
        ks = np.concatenate([code[rows], st_code])
        ts = np.concatenate([when[rows], q_t])
        is_q = np.concatenate([np.zeros(len(rows), bool), np.ones(n, bool)])
        ref = np.concatenate([rows, np.arange(n)])
        order = np.lexsort((is_q, ts, ks))  # a query after the rows of its key and time
        ks, ts, is_q, ref = ks[order], ts[order], is_q[order], ref[order]
        # the latest row before each position (in key and time order), carried forward
        row_pos = np.where(~is_q, np.arange(len(order)), -1)
        prev = np.maximum.accumulate(row_pos) if len(order) else row_pos
        out = np.full(n, -1, np.int64)
        qi = np.flatnonzero(is_q)
        p = prev[qi]
        ok = (p >= 0) & (ks[np.maximum(p, 0)] == ks[qi])
        if at_t is not None:
            ok &= ts[np.maximum(p, 0)] == ts[qi]
        out[ref[qi[ok]]] = ref[p[ok]]
        return out

    last = pick(np.flatnonzero(owned & (src > 0)), None)

    def owner_at(t_col: str, who: str) -> _I:
        """Per state row: its key's row with an owner at ``t_col`` (this step's, else the carried ``who``)."""
        at_t = doubles(state.column(t_col))
        fresh = pick(np.flatnonzero(owned & (src == 1)), at_t)
        if who in at_part:
            fresh = np.where(fresh >= 0, fresh, pick(np.flatnonzero(owned & (src == at_part[who])), at_t))
        return fresh

    def taken(i: _I) -> pa.Array:
        return pc.if_else(pa.array(i >= 0), owner.take(pa.array(np.maximum(i, 0))), pa.nulls(n, pa.string())) if len(
            owner) else pa.nulls(n, pa.string())

    # the start of the key's run of rows without an owner after its latest owned row: this step's
    # rows, the carried row and where the carried run began
    free = np.flatnonzero(~owned & ~np.isnan(when) & ((src == 1) | (src == 2)))
    cand_code, cand_t = code[free], when[free]
    if carried is not None and carried.num_rows and "unowned_t" in carried.column_names:
        began = doubles(carried.column("unowned_t").cast(pa.float64()))
        has = ~np.isnan(began)
        cand_code = np.concatenate([cand_code, code[src == 2][has]])
        cand_t = np.concatenate([cand_t, began[has]])
    unowned_t = np.full(n, np.inf)
    if n and len(cand_code):
        last_t = np.where(last >= 0, when[np.maximum(last, 0)], -np.inf)
        by_code = np.argsort(st_code, kind="stable")
        row = by_code[np.clip(np.searchsorted(st_code[by_code], cand_code), 0, n - 1)]
        hit = (st_code[row] == cand_code) & (cand_t > last_t[row])
        np.minimum.at(unowned_t, row[hit], cand_t[hit])
    return (state.append_column("owner_last", taken(last))
            .append_column("owner_last_t", nullable_doubles(np.where(last >= 0, when[np.maximum(last, 0)], np.nan)))
            .append_column("change_owner", taken(owner_at("m_change_t", "change_owner")))
            .append_column("alive_owner", taken(owner_at("m_alive_t", "alive_owner")))
            .append_column("unowned_t", nullable_doubles(np.where(np.isinf(unowned_t), np.nan, unowned_t))))


def close_at_silence(episodes: pa.Table, series: pa.Table, carried: pa.Table | None,
                     forget_after_s: float) -> pa.Table:
    """``episodes`` (the per-group pass's starved or held ones: KEY, ``start_ts``, ``end_ts``) with
    each open one (no end) ended at its partition's last row before a silence longer than
    ``forget_after_s`` that follows its start: a partition back after such a silence is a new one
    (:func:`generations`), which an episode of the one before does not reach (its status rows)."""
    if not episodes.num_rows or not math.isfinite(forget_after_s):
        return episodes
    end = seconds(episodes.column("end_ts"))
    open_ = np.isnan(end)
    if not open_.any():
        return episodes
    parts = [series.select([*KEY, "t"])]
    if carried is not None and carried.num_rows:
        parts.append(carried.select([*KEY, "t"]))

    def col(t: pa.Table, name: str) -> pa.Array:
        c = t.column(name).combine_chunks()
        return c.cast(pa.int32()) if name == "partition" else (
            c.dictionary_decode() if pa.types.is_dictionary(c.type) else c).cast(pa.string())

    rows_t = np.concatenate([doubles(p.column("t").cast(pa.float64())) for p in parts])
    code = key_code(*(pa.concat_arrays([col(p, k) for p in [*parts, episodes]]) for k in KEY))
    n = len(rows_t)
    rk, ek = code[:n], code[n:]
    start = seconds(episodes.column("start_ts"))
    o = np.lexsort((rows_t, rk))
    rk, rt = rk[o], rows_t[o]
    for i in np.flatnonzero(open_):
        lo, hi = np.searchsorted(rk, ek[i], "left"), np.searchsorted(rk, ek[i], "right")
        t = rt[lo:hi]
        gaps = np.flatnonzero((np.diff(t) > forget_after_s) & (t[1:] > start[i]))
        if len(gaps):
            end[i] = t[gaps[0]]
    if np.array_equal(np.isnan(end), open_):
        return episodes
    at = episodes.schema.get_field_index("end_ts")
    ok = ~np.isnan(end)
    us = pa.array(np.rint(np.nan_to_num(end) * 1e6).astype(np.int64), pa.int64(), mask=~ok).cast(_US)
    return episodes.set_column(at, "end_ts", us.cast(episodes.schema.field("end_ts").type, safe=False))


def run_step(inputs: StepInputs, *, settings: AnalyticsConfig, as_of: dt.datetime,
             history_points: int = HISTORY_POINTS, workers: int = 1, with_state: bool = True,
             partial_from: dt.datetime | None = None) -> StepOutput:
    """One step over ``inputs`` (whole groups: every row of each of its groups, see the module
    doc). ``settings``: the ``analytics`` section; ``history_points``: ``time_lag.history_points``.
    ``workers``: threads for the per-partition pass's chunks. ``with_state=False``: the
    tables only (a batch carries no state). ``partial_from``: a provisional step's end, inside
    the minute in progress: that minute has its rows (lag trend, status) but is no minute of a
    lag growth (:class:`lagscope.analytics.onepass.PassParams`)."""
    st = inputs.state
    p = settings.rules
    series = prepare(inputs.offsets, settings.read_committed_groups)
    commits = commit_records(inputs.commits) if inputs.commits is not None else None
    owners, state_owners, owner_names = _owner_codes(series, st.get("series"))
    forget_s = p.forget_horizon_s()
    inp = pass_input(series, owners, st, commits, state_owners, forget_s, p.skip_factor)
    params = onepass.PassParams(rules=p, history_points=history_points, commit_stream=commits is not None,
                                partial_minute=None if partial_from is None else int(partial_from.timestamp() // 60))
    passed = _run_pass(inp, params, workers)

    part = _Parts(passed)
    minutes = part.get(onepass.OUT_MINUTE, [
        *KEY, "ts", "window_start", "committed", "log_start", "lag", "lag_max", "minute_end_rise",
        "minute_committed_rise", "minute_log_start_rise", "minute_span_s",
        "lag_s", "lag_s_lower", "lag_s_code", "burrow_status", "status", "reason"])
    anomaly_in = part.get(onepass.OUT_ANOMALY, [*KEY, "kind", "start_t", "end_t", "severity", "magnitude", "unit",
                                                "detail", "cause"])
    advances = part.get(onepass.OUT_ADVANCE, [*KEY, "start_t", "end_t", "advance", "capacity", "exact", "at_end",
                                              "from_lost", "unowned", "deleted"])
    capacities = part.get(onepass.OUT_CAPACITY, [*KEY, "t", "capacity", "member_capacity"])
    found = anomalies(anomaly_in, as_of)
    grouped = groups.group_pass(groups.GroupInputs(
        members=inputs.members, series=series, carried_series=st.get("series"), carried_msweeps=st.get("msweeps"),
        recent_rebalances=st.get("recent_rebalances"), outages=st.get("outages"), group_events=inputs.group_events,
        pending_gaps=st.get("pending_gaps"), gap_times=st.get("gap_times"), member_progress=st.get("member_progress"),
        commits=inputs.commits, carried_generations=st.get("generations"), until=as_of.timestamp(),
        anomalies=found, advances=advances, capacities=capacities), settings)
    tables = {
        "lag_trends": lag_trends(minutes),
        "rebalances": _stamped(pa.concat_tables([grouped.rebalances, grouped.regapped]), as_of),
        "anomalies": withdrawals(found, _stamped(as_published(grouped.anomalies, series, st.get("open_keys")), as_of),
                                 st.get("open_keys")),
        "status": status(minutes, close_at_silence(grouped.starved, series, st.get("series"), forget_s),
                         close_at_silence(grouped.held, series, st.get("series"), forget_s)),
    }
    # advice: from the tables above, the member sweeps, the generation records and the carried evidence
    advised = advice.advise(advice.AdviceInputs(
        # this step's windows: a re-published one (a processing gap raised) keeps the evidence its
        # own step drew from the members who left, whom this step's sweeps may no longer show
        rebalances=_stamped(grouped.rebalances, as_of), anomalies=tables["anomalies"],
        lag_trends=tables["lag_trends"],
        members=inputs.members,
        generations=groups.generation_records(inputs.group_events) if inputs.group_events is not None else None,
        carried_evidence=st.get("advice_evidence"), carried_groups=st.get("advice_groups")), settings, as_of)
    tables["advice"] = advised.advice
    if not with_state:
        return StepOutput(tables=tables, state={})

    # the next state (the columns the Spark step writes)
    last = part.get(onepass.OUT_SERIES, [*KEY, "ts", "t", "committed", "end", "log_start", "lag", "owner_h", "rec_ts",
                                         "lso", *onepass.STATE_OUT, "tenure_owner_h", "_h"])
    # a key silent for longer than the horizon is forgotten (its group or topic gone): its state
    # rows go, every part of them (by the pass's key, ``_h``: one generation of the key)
    silent = doubles(last.column("t")) < as_of.timestamp() - forget_s
    forgotten: pa.Array | None = None
    if silent.any():
        forgotten = last.column("_h").combine_chunks().filter(pa.array(silent))
        last = last.filter(pa.array(~silent))

    def kept(tbl: pa.Table) -> pa.Table:
        if forgotten is None:
            return tbl.drop_columns(["_h"])
        return tbl.filter(pc.invert(pc.is_in(tbl.column("_h"), value_set=forgotten))).drop_columns(["_h"])

    def names(col: str) -> pa.Array:
        """The owners' names of a code column (none at all when no partition of the step had an owner)."""
        oc, oc_ok = longs(last.column(col))
        named = owner_names.take(pa.array(np.where(oc_ok, oc, 0))).cast(pa.string()) if len(
            owner_names) else pa.nulls(len(oc), pa.string())
        return pc.if_else(pa.array(oc_ok), named, pa.nulls(len(named), pa.string()))

    owner = names("owner_h")
    markers = {m: last.column(m) for m in onepass.STATE_OUT}
    series_state = pa.table({
        **{k: last.column(k) for k in KEY}, "ts": last.column("ts").cast(_MS, safe=False), "t": last.column("t"),
        "committed": last.column("committed"), "end": last.column("end"), "log_start": last.column("log_start"),
        "lag": last.column("lag"), "owner": owner, "group_state": pa.nulls(last.num_rows, pa.string()),
        "rec_ts": last.column("rec_ts").cast(_MS, safe=False), "lso": last.column("lso"),
        **markers, "tenure_owner": names("tenure_owner_h"),
        "is_state": pa.array(np.ones(last.num_rows, bool))})
    series_state = _with_owners(series_state, series, st.get("series"))
    hist = kept(part.get(onepass.OUT_HISTORY, [*KEY, "end", "t", "tp", "ep", "_h"]))
    mins = kept(part.get(onepass.OUT_MINUTE_STATE, [*KEY, "window_start", "lag", "produce_rate", "consume_rate",
                                                    "m_g_start", "m_g_lag0", "m_g_n", "_h"]))
    state = {
        "series": series_state,
        "history": pa.table({**{k: hist.column(k) for k in KEY}, "e": hist.column("end"), "tc": hist.column("t"),
                             "tp": hist.column("tp"), "ep": hist.column("ep")}),
        "gaps": kept(part.get(onepass.OUT_GAP, [*KEY, "b", "_h"])),
        "entries": kept(part.get(onepass.OUT_ENTRY, [*KEY, "b", "_h"])),
        "minutes": pa.table({
            **{k: mins.column(k) for k in KEY}, "window_start": mins.column("window_start").cast(_MS, safe=False),
            "lag_last": mins.column("lag"), "produce_rate": mins.column("produce_rate"),
            "consume_rate": mins.column("consume_rate"), "m_g_start": timestamps(doubles(mins.column("m_g_start"))),
            "m_g_lag0": mins.column("m_g_lag0"), "m_g_n": mins.column("m_g_n"),
            "is_state": pa.array(np.ones(mins.num_rows, bool))}),
        "msweeps": grouped.msweeps,
        "recent_rebalances": grouped.recent_rebalances,
        "outages": grouped.outages,
        "pending_gaps": grouped.pending_gaps,
        # of the partitions the series state keeps (a forgotten one leaves nothing behind)
        "gap_times": grouped.gap_times.join(
            series_state.select(KEY).cast(pa.schema([(k, groups.GAP_TIME_SCHEMA.field(k).type) for k in KEY])),
            KEY, join_type="left semi").select(groups.GAP_TIME_SCHEMA.names),
        "generations": grouped.generations,
        "member_progress": grouped.member_progress,
        "advice_evidence": advised.evidence,
        "advice_groups": advised.groups,
        "open_keys": open_keys(tables["anomalies"]),
    }
    # a group's settings only while another part keeps the group (the advice reads them for its
    # evidence; a group gone past the horizon with none left is forgotten whole)
    state["advice_groups"] = groups.of_groups(state["advice_groups"], *(
        state[k] for k in ("series", "msweeps", "generations", "advice_evidence")))
    return StepOutput(tables=tables, state=state)
