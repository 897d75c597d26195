"""An incremental step, or a batch, in this process, without Spark: the same per-partition pass
(:func:`lagscope.analytics.onepass.pass_table`) and the same tables and state as
:func:`lagscope.analytics.job.run_step`, over pyarrow tables.

Why: a step of a running deployment is one new sweep or a few (100,000 partitions is 100,000
rows), and Spark's fixed costs, not the rows, made its time: a dozen jobs, each scheduled,
shuffled and committed, and seconds of plan analysis, 13 s for a step whose numbers take about
one. Here the pass runs on the same numpy code over the step's rows, and the group-level work
(rollups, group status, member sweeps) is a few array operations.

What stays on Spark: a step that has a rebalance window to report (a settled sweep whose
generation or members differ from the group's last settled one, or a generation record of the
commit stream inside the settled span: :func:`rebalance_possible`), a step whose state was
written in one of the older layouts the Spark side still reads, a step over more than
``max_rows`` new rows. Rebalances are rare and their windows are worked out in Spark
(:mod:`lagscope.analytics.rebalances`): one implementation of them, not two. The caller
(:func:`lagscope.analytics.job.run_incremental`) falls back when :func:`run_local_step` returns
``None``; both engines read and write the same state, so a run may alternate.

A batch (:func:`run_local_batch`) is a first step over its whole range: the groups are shared
out into buckets of about two million offset rows, and each bucket is such a step (no state
carried or written) in a process forked from this one, as many at once as there are cores; a
bucket with a possible rebalance window sends the whole batch to Spark.

Without a rebalance window the group-level parts are simple: the ``rebalances`` table and the
storms are empty, no anomaly lies in an outage, and the carried recent rebalances pass through
unchanged (:func:`lagscope.analytics.findings.storm_state` of its own output is that output:
cutting rebalances older than a window before the open storm changes no count inside it).
"""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
import os
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from lagscope.analytics import kernel, onepass
from lagscope.analytics.io import stage_arrow
from lagscope.analytics.status import BURROW_RANK, OWN_RANK
from lagscope.analytics.trends import ETA_NOISE, TREND_COLUMNS

if TYPE_CHECKING:
    from lagscope.analytics.job import Settings

__all__ = ["LocalInputs", "LocalStep", "group_buckets", "member_sweeps", "rebalance_possible", "run_local_batch",
           "run_local_step", "sweep_table"]

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]

_US = pa.timestamp("us", tz="UTC")
_MS = pa.timestamp("ms", tz="UTC")
KEY = ["cluster", "group_id", "topic", "partition"]



@dataclass
class LocalInputs:
    """A step's lake rows (already limited to its range) and the carried state, as pyarrow tables."""

    offsets: pa.Table
    members: pa.Table
    commits: pa.Table | None
    group_events: pa.Table | None
    state: dict[str, pa.Table]


@dataclass
class LocalStep:
    """The four result tables (with ``cluster`` and ``date``) and the next state's parts."""

    tables: dict[str, pa.Table]
    state: dict[str, pa.Table]


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------

def read_files(paths: Sequence[str], schema: pa.Schema, base: Path, *, where: ds.Expression | None = None,
               columns: Sequence[str] | None = None, dictionaries: Sequence[str] = ()) -> pa.Table:
    """The rows of lake files ``paths`` (Hive partitions under ``base`` give ``cluster`` and
    ``date``) in ``schema`` (columns an older file lacks read as null): only ``columns`` when
    given, only the rows ``where`` selects (files and row groups whose statistics rule them out
    are not read: a one-minute step reads its minute of a day's partition, not the day).
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
    got = ds.dataset(list(paths), schema=schema, format=fmt, partitioning=part,
                     partition_base_dir=str(base)).to_table(filter=where, columns=columns)
    return got.unify_dictionaries() if dictionaries else got


#: the lake columns an in-process step reads (the others are the collector's context)
READ_COLUMNS = {
    "offsets": ["cluster", "group_id", "topic", "partition", "sweep_ts", "committed_offset", "log_start_offset",
                "log_end_offset", "last_stable_offset", "lag", "member_id", "committed_record_ts"],
    "members": ["cluster", "group_id", "sweep_ts", "group_state", "generation", "member_id", "group_instance_id",
                "assignment"],
    "commits": ["cluster", "group_id", "topic", "partition", "committed_offset", "commit_ts", "record_ts",
                "source_partition", "source_offset"],
    "group_events": ["cluster", "group_id", "record_type", "members", "record_ts"],
}


def read_state_part(path: Path) -> pa.Table | None:
    """A state part written by either engine (a folder of Parquet files), or ``None``."""
    if not path.exists():
        return None
    return ds.dataset(str(path), format="parquet").to_table()


def state_is_current(state: dict[str, pa.Table]) -> bool:
    """Whether the carried state is in the layout this engine reads (older ones, one row per
    Burrow entry or gap sample, are read by the Spark step, which rewrites them packed)."""
    for name in ("entries", "gaps"):
        t = state.get(name)
        if t is not None and "b" not in t.column_names:
            return False
    return True


# --------------------------------------------------------------------------------------------
# small array helpers
# --------------------------------------------------------------------------------------------

def _secs(ts: pa.ChunkedArray | pa.Array) -> _F:
    """Timestamps → epoch seconds (µs / 1e6, as Spark's ``unix_micros / 1e6``); null → NaN."""
    us = pc.cast(ts, _US).cast(pa.int64())
    return np.asarray(us.fill_null(0), dtype=np.int64) / 1e6 + np.where(
        np.asarray(us.is_valid(), dtype=bool), 0.0, np.nan)


def _long(col: pa.ChunkedArray | pa.Array) -> tuple[_I, _B]:
    c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(c.fill_null(0), dtype=np.int64), np.asarray(c.is_valid(), dtype=bool)


def _dbl(col: pa.ChunkedArray | pa.Array) -> _F:
    c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.asarray(c.cast(pa.float64()).fill_null(np.nan), dtype=np.float64)


def _nn(values: _F) -> pa.Array:
    """Doubles, NaN as null."""
    return pa.array(values, pa.float64(), mask=np.isnan(values))


def _key_code(*cols: pa.ChunkedArray | pa.Array) -> _I:
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
            v, ok = _long(c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c)
            lo = int(v[ok].min()) if ok.any() else 0
            vals = np.where(ok, v - lo + 1, 0)
            card = int(vals.max()) + 1 if n else 1
        else:
            enc = c if pa.types.is_dictionary(c.type) else pc.dictionary_encode(c)
            card = len(enc.dictionary) + 1
            vals = np.asarray(enc.indices.fill_null(card - 1), dtype=np.int64)
        if span * card >= 1 << 62:  # re-code what there is densely first
            code, span = _dense(code)
        code = code * card + vals
        span *= card
    if span >= 1 << 31:
        code, span = _dense(code)
    return code


def _dense(code: _I) -> tuple[_I, int]:
    _, inv = np.unique(code, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), int(inv.max()) + 1 if len(inv) else 1


def _ts_col(secs: _F, unit: pa.DataType = _MS) -> pa.Array:
    """Epoch seconds → timestamps, as Spark's ``timestamp_micros((s · 1e6).cast(long))``."""
    ok = ~np.isnan(secs)
    us = np.trunc(np.nan_to_num(secs) * 1e6).astype(np.int64)
    return pa.array(us, pa.int64(), mask=~ok).cast(_US).cast(unit, safe=False)


def _date(ts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``YYYY-MM-DD`` (UTC) of timestamps: formatted once per distinct day."""
    c = ts.combine_chunks() if isinstance(ts, pa.ChunkedArray) else ts
    us = np.asarray(c.cast(_US).cast(pa.int64()).fill_null(0), dtype=np.int64)
    days, inv = np.unique(us // 86_400_000_000, return_inverse=True)
    names = pa.array([(dt.date(1970, 1, 1) + dt.timedelta(days=int(d))).isoformat() for d in days], pa.string())
    out = names.take(pa.array(inv.reshape(-1).astype(np.int64)))
    return out if c.null_count == 0 else pc.if_else(c.is_valid(), out, pa.nulls(len(c), pa.string()))


def _groups(code: _I) -> tuple[_I, _I, _I]:
    """Rows grouped by ``code``: (order, starts of the groups in that order, group of each
    ordered row)."""
    order = np.argsort(code, kind="stable")
    sc = code[order]
    first = np.ones(len(sc), bool)
    first[1:] = sc[1:] != sc[:-1]
    return order, np.flatnonzero(first), np.cumsum(first) - 1


def _gsum(values: _F, starts: _I) -> _F:
    """Per group: Σ of the non-NaN values, NaN when there is none (Spark's ``sum``)."""
    ok = ~np.isnan(values)
    s = np.add.reduceat(np.where(ok, values, 0.0), starts) if len(values) else np.zeros(0)
    n = np.add.reduceat(ok.astype(np.int64), starts) if len(values) else np.zeros(0, np.int64)
    return np.where(n > 0, s, np.nan)


def _gmax(values: _F, starts: _I) -> _F:
    ok = ~np.isnan(values)
    m = np.maximum.reduceat(np.where(ok, values, -np.inf), starts) if len(values) else np.zeros(0)
    return np.where(np.isneginf(m) & (np.add.reduceat(ok.astype(np.int64), starts) == 0), np.nan, m) if len(
        values) else m


def _gmin(values: _F, starts: _I) -> _F:
    return -_gmax(-values, starts)


def _gargmax(by: _F, starts: _I, gid: _I) -> _I:
    """Per group of the grouped rows (:func:`_groups`: ``starts``, ``gid``), the row with the
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
# series and the pass's input
# --------------------------------------------------------------------------------------------

def prepare(offsets: pa.Table, read_committed_groups: Sequence[str]) -> pa.Table:
    """Lake ``offsets`` rows → the pass's sweep values (as
    :func:`lagscope.analytics.series.prepare_series`): ``KEY, t, committed, end, log_start, lag,
    rec_t, lso, owner``."""
    c, c_ok = _long(offsets.column("committed_offset"))
    hw, hw_ok = _long(offsets.column("log_end_offset"))
    lso, lso_ok = _long(offsets.column("last_stable_offset"))
    cl, cl_ok = _long(offsets.column("lag"))
    by_lag = (lso_ok & hw_ok & (lso < hw) & c_ok & cl_ok & (cl == np.maximum(0, lso - c))
              & (cl != np.maximum(0, hw - c)))
    if read_committed_groups:
        pattern = "^(?:" + "|".join(f"(?:{p})" for p in read_committed_groups) + ")$"
        listed = _matches(offsets.column("group_id"), pattern)
    else:
        listed = np.zeros(offsets.num_rows, bool)
    use_lso = (listed | by_lag)
    end = np.where(use_lso & lso_ok, lso, hw)
    end_ok = np.where(use_lso & lso_ok, True, hw_ok)
    lag_ok = c_ok & end_ok
    lag = np.where(lag_ok, np.maximum(0, end - c), 0)
    return pa.table({
        "cluster": offsets.column("cluster"), "group_id": offsets.column("group_id"),
        "topic": offsets.column("topic"), "partition": offsets.column("partition").cast(pa.int32()),
        "t": _secs(offsets.column("sweep_ts")),
        "committed": kernel.nullable(c, c_ok, pa.int64()), "end": kernel.nullable(end, end_ok, pa.int64()),
        "log_start": offsets.column("log_start_offset"), "lag": kernel.nullable(lag, lag_ok, pa.int64()),
        "rec_t": _nn(_secs(offsets.column("committed_record_ts"))), "lso": offsets.column("last_stable_offset"),
        "owner": offsets.column("member_id"),
    })


def _matches(col: pa.ChunkedArray, pattern: str) -> _B:
    """Whether each row's string matches ``pattern`` (null: no); a dictionary column's values
    are matched once each."""
    c = col.combine_chunks()
    if pa.types.is_dictionary(c.type):
        hit = np.append(np.asarray(pc.match_substring_regex(c.dictionary, pattern).fill_null(False), dtype=bool),
                        False)
        return hit[np.asarray(c.indices.fill_null(len(c.dictionary)), dtype=np.int64)]
    return np.asarray(pc.match_substring_regex(c, pattern).fill_null(False), dtype=bool)


def _x(n: int, values: Sequence[_F] | None) -> pa.Array:
    """The pass's ``x`` struct of ``values`` (the rest null); all null without values."""
    fields = [f"x{i}" for i in range(onepass.X_WIDTH)]
    if values is None:
        return pa.nulls(n, onepass.X_TYPE)
    arrays = [_nn(v) for v in values] + [pa.nulls(n, pa.float64()) for _ in range(onepass.X_WIDTH - len(values))]
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


def pass_input(series: pa.Table, owner_codes: _I, state: dict[str, pa.Table], commits: pa.Table | None,
               state_owner_codes: _I | None) -> pa.Table:
    """The pass's input (:data:`lagscope.analytics.onepass.PASS_IN`) in key, kind and time order:
    ``_h`` a code of the key (:func:`_key_code`), ``_k`` = code · 16 + kind (the pass needs whole keys
    together, not a particular hash)."""
    parts = [_rows(series, onepass.SWEEP, {
        "t": series.column("t"), "committed": series.column("committed"), "end": series.column("end"),
        "log_start": series.column("log_start"), "rec_t": series.column("rec_t"), "lso": series.column("lso"),
        "owner_h": kernel.nullable(owner_codes, owner_codes >= 0, pa.int64())})]
    st = state.get("series")
    if st is not None and st.num_rows:
        assert state_owner_codes is not None
        marks = [_dbl(st.column(m)) if m in st.column_names else np.full(st.num_rows, np.nan)
                 for m in onepass.STATE_X]
        parts.append(_rows(st, onepass.STATE, {
            "t": st.column("t"), "committed": st.column("committed"), "end": st.column("end"),
            "log_start": st.column("log_start"), "rec_t": _nn(_secs(st.column("rec_ts"))), "lso": st.column("lso"),
            "owner_h": kernel.nullable(state_owner_codes, state_owner_codes >= 0, pa.int64()),
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
        x = {"produce_rate": _dbl(m.column("produce_rate")), "consume_rate": _dbl(m.column("consume_rate")),
             "m_g_start": _secs(m.column("m_g_start")), "m_g_lag0": _dbl(m.column("m_g_lag0")),
             "m_g_n": _dbl(m.column("m_g_n"))}
        parts.append(_rows(m, onepass.MINUTE, {"t": _secs(m.column("window_start")), "end": m.column("lag_last"),
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
    code = _key_code(*(rows.column(k) for k in KEY))
    kind = np.asarray(rows.column("_kind"), dtype=np.int64)
    k = (code << onepass.KIND_BITS) | kind
    t = _dbl(rows.column("t"))
    order = pa.array(np.lexsort((t, k)))
    rows = rows.drop_columns(["_kind"]).append_column("_h", pa.array(code, pa.int64())).append_column(
        "_k", pa.array(k, pa.int64())).select(onepass.PASS_IN.names)
    # columns null in every row (a batch's packed state, markers) need no sorting
    return pa.table({name: pa.nulls(rows.num_rows, col.type) if col.null_count == len(col) else col.take(order)
                     for name, col in zip(rows.column_names, rows.columns, strict=True)})


def commit_records(commits: pa.Table) -> pa.Table:
    """Lake ``commits`` rows → ``KEY, t, offset, seq`` (as
    :func:`lagscope.analytics.findings.commit_records`)."""
    c = commits.filter(pc.is_valid(commits.column("committed_offset")))
    t = _secs(pc.coalesce(c.column("commit_ts"), c.column("record_ts")))
    sp, _ = _long(c.column("source_partition"))
    so, _ = _long(c.column("source_offset"))
    return pa.table({"cluster": c.column("cluster"), "group_id": c.column("group_id"), "topic": c.column("topic"),
                     "partition": c.column("partition").cast(pa.int32()), "t": pa.array(t),
                     "offset": c.column("committed_offset"), "seq": pa.array(sp * (1 << 40) + so, pa.int64())})


# --------------------------------------------------------------------------------------------
# member sweeps (the rebalance windows' input) and when a step may have a window
# --------------------------------------------------------------------------------------------

def member_sweeps(members: pa.Table) -> list[dict[str, Any]]:
    """``members`` lake rows → one row per (cluster, group, sweep), as
    :func:`lagscope.analytics.rebalances.member_sweeps` (member ids sorted; instances and owners
    sorted too: the Spark side keeps them in no particular order)."""
    by: dict[tuple[str, str, Any], dict[str, Any]] = {}
    cols = ["cluster", "group_id", "sweep_ts", "group_state", "generation", "member_id", "group_instance_id",
            "assignment"]
    for r in members.select(cols).to_pylist():
        k = (r["cluster"], r["group_id"], r["sweep_ts"])
        s = by.get(k)
        if s is None:
            s = by[k] = {"cluster": r["cluster"], "group_id": r["group_id"], "sweep_ts": r["sweep_ts"],
                         "group_state": None, "generation": None, "member_ids": set(), "instances": set(),
                         "owners": set()}
        if s["group_state"] is None:
            s["group_state"] = r["group_state"]
        if r["generation"] is not None and (s["generation"] is None or r["generation"] > s["generation"]):
            s["generation"] = r["generation"]
        if r["member_id"] is not None:
            s["member_ids"].add(r["member_id"])
        if r["group_instance_id"] is not None:
            s["instances"].add((r["group_instance_id"], r["member_id"]))
        owner = r["group_instance_id"] if r["group_instance_id"] is not None else r["member_id"]
        for a in r["assignment"] or []:
            s["owners"].add((f"{a['topic']}/{a['partition']}", owner))
    out = []
    for s in by.values():
        owners = sorted(s["owners"], key=lambda o: (o[0], o[1] or ""))
        out.append({**s, "t": s["sweep_ts"].timestamp(), "member_ids": sorted(s["member_ids"]),
                    "instances": [{"iid": i, "mid": m} for i, m in sorted(s["instances"], key=lambda x: (
                        x[0], x[1] or ""))],
                    "owners": [{"tp": tp, "owner": o} for tp, o in owners],
                    "settled": s["group_state"] == "Stable" and len(owners) > 0})
    return out


def _state_msweeps(ms: pa.Table | None) -> list[dict[str, Any]]:
    if ms is None or not ms.num_rows:
        return []
    rows: list[dict[str, Any]] = ms.to_pylist()
    for r in rows:
        r["t"] = float(r["t"])
    return rows


#: the columns :func:`rebalance_possible` reads of each member sweep
SWEEP_CHECK = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("t", pa.float64()),
                         ("generation", pa.int64()), ("member_ids", pa.list_(pa.string())), ("settled", pa.bool_())])


def sweep_table(members: pa.Table) -> pa.Table:
    """``members`` lake rows → one row per (cluster, group, sweep) in :data:`SWEEP_CHECK`: the
    largest generation, the distinct member ids sorted, settled (Stable with an assignment), as
    :func:`member_sweeps` (array code: a batch has a million member sweeps)."""
    key = ["cluster", "group_id", "sweep_ts"]
    if not members.num_rows:
        return SWEEP_CHECK.empty_table()
    m = members.select([*key, "group_state", "generation", "member_id", "assignment"])
    m = m.append_column("_na", pc.list_value_length(m.column("assignment")).fill_null(0))
    per = m.group_by(key, use_threads=False).aggregate([("group_state", "first"), ("generation", "max"),
                                                        ("_na", "sum")])
    # each sweep's distinct member ids, sorted: runs of the sorted distinct (sweep, id) rows
    ids = m.select([*key, "member_id"]).filter(pc.is_valid(m.column("member_id")))
    ids = ids.group_by([*key, "member_id"]).aggregate([]).sort_by([(c, "ascending") for c in [*key, "member_id"]])
    new = np.zeros(ids.num_rows, bool)
    new[:1] = True
    for c in key:
        col = ids.column(c)
        if ids.num_rows:
            new[1:] |= np.asarray(pc.not_equal(col.slice(1), col.slice(0, ids.num_rows - 1)), dtype=bool)
    starts = np.flatnonzero(new)
    lists = pa.ListArray.from_arrays(pa.array(np.append(starts, ids.num_rows), pa.int32()),
                                     ids.column("member_id").combine_chunks())
    at = ids.take(pa.array(starts)).select(key).append_column("_l", pa.array(np.arange(len(starts)), pa.int64()))
    per = per.join(at, key, join_type="left outer")
    li, has = _long(per.column("_l"))
    member_ids = pc.if_else(pa.array(has), lists.take(pa.array(np.where(has, li, 0))) if len(starts) else
                            pa.nulls(per.num_rows, pa.list_(pa.string())),
                            pa.array([[]] * per.num_rows, pa.list_(pa.string())))
    settled = pc.and_(pc.equal(per.column("group_state_first"), "Stable").fill_null(False),
                      pc.greater(per.column("_na_sum"), 0))
    return pa.table({"cluster": per.column("cluster"), "group_id": per.column("group_id"),
                     "t": pa.array(_secs(per.column("sweep_ts"))),
                     "generation": per.column("generation_max").cast(pa.int64()),
                     "member_ids": member_ids, "settled": settled},
                    schema=SWEEP_CHECK)


def rebalance_possible(sweeps: pa.Table, group_events: pa.Table | None) -> bool:
    """Whether :func:`lagscope.analytics.rebalances.transform_rebalances` could report a window
    over member sweeps ``sweeps`` (:data:`SWEEP_CHECK`): a settled sweep whose generation or
    member ids differ from the group's previous settled sweep, or (with the commit stream) a
    generation record inside the group's span of settled sweeps (a generation no sweep saw).
    Errs on the side of yes (then Spark decides)."""
    s = sweeps.filter(sweeps.column("settled").fill_null(False))
    if not s.num_rows:
        return False
    s = s.sort_by([("cluster", "ascending"), ("group_id", "ascending"), ("t", "ascending")])
    grp = _key_code(s.column("cluster"), s.column("group_id"))
    gen, ok = _long(s.column("generation"))
    gen = np.where(ok, gen, -1)
    n = np.asarray(pc.list_value_length(s.column("member_ids")).fill_null(0), dtype=np.int64)
    ids = pc.binary_join(s.column("member_ids"), "\x1f").fill_null("")
    same_ids = np.asarray(pc.equal(ids.slice(1), ids.slice(0, len(ids) - 1)), dtype=bool)
    same = grp[1:] == grp[:-1]
    if bool((same & ((gen[1:] != gen[:-1]) | (n[1:] != n[:-1]) | ~same_ids)).any()):
        return True
    if group_events is None or not group_events.num_rows:
        return False
    ev = group_events.filter(pc.and_(pc.equal(group_events.column("record_type"), "group_metadata").fill_null(False),
                                     pc.greater(pc.list_value_length(group_events.column("members")).fill_null(0), 0)))
    if not ev.num_rows:
        return False
    spans = s.group_by(["cluster", "group_id"]).aggregate([("t", "min"), ("t", "max")])
    hit = ev.select(["cluster", "group_id", "record_ts"]).join(spans, ["cluster", "group_id"], join_type="inner")
    rt = _secs(hit.column("record_ts"))
    return bool(((np.asarray(hit.column("t_min"), dtype=np.float64) < rt)
                 & (rt <= np.asarray(hit.column("t_max"), dtype=np.float64))).any())


_MSWEEP_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("group_id", pa.string()), ("t", pa.float64()), ("sweep_ts", _MS),
    ("group_state", pa.string()), ("generation", pa.int32()), ("member_ids", pa.list_(pa.string())),
    ("instances", pa.list_(pa.struct([("iid", pa.string()), ("mid", pa.string())]))),
    ("owners", pa.list_(pa.struct([("tp", pa.string()), ("owner", pa.string())]))),
    ("settled", pa.bool_()), ("is_state", pa.bool_()), ("group_lag", pa.int64()),
])


def _msweeps_state(msweeps: list[dict[str, Any]], series: pa.Table) -> pa.Table:
    """Each group's member sweeps since its last settled one, with the group lag at each (Σ lag
    over the step's sweep rows, each partition once; a carried sweep keeps its own)."""
    by: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for s in msweeps:
        by.setdefault((s["cluster"], s["group_id"]), []).append(s)
    keep: list[dict[str, Any]] = []
    for rows in by.values():
        settled = [s["t"] for s in rows if s["settled"]]
        since = max(settled) if settled else None
        keep += [s for s in rows if since is None or s["t"] >= since]
    wanted = {(s["cluster"], s["group_id"], s["t"]) for s in keep if not s.get("is_state")}
    sums: dict[tuple[str, str, float], int | None] = {}
    if wanted and series.num_rows:
        at = pa.Table.from_pylist([{"cluster": c, "group_id": g, "t": t} for c, g, t in wanted],
                                  schema=pa.schema([("cluster", pa.string()), ("group_id", pa.string()),
                                                    ("t", pa.float64())]))
        rows = series.select([*KEY, "t", "lag"]).join(at, ["cluster", "group_id", "t"], join_type="inner")
        # each partition once (a sweep written twice is in the lake twice), then Spark's sum: nulls
        # skipped, null when all are
        once = rows.group_by([*KEY, "t"]).aggregate([("lag", "max")])
        per = once.group_by(["cluster", "group_id", "t"]).aggregate([("lag_max", "sum")])
        for r in per.to_pylist():
            sums[(r["cluster"], r["group_id"], r["t"])] = r["lag_max_sum"]
    out = []
    for s in keep:
        lag = s.get("group_lag") if s.get("is_state") else sums.get((s["cluster"], s["group_id"], s["t"]))
        out.append({**{f: s.get(f) for f in _MSWEEP_SCHEMA.names}, "is_state": True, "group_lag": lag})
    return pa.Table.from_pylist(out, schema=_MSWEEP_SCHEMA)


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


def _method(code: pa.ChunkedArray | pa.Array) -> pa.Array:
    names = pa.array([None, *kernel.METHODS], pa.string())
    c, ok = _long(code)
    return names.take(pa.array(np.where(ok, c, 0)))


def _eta(lag: _F, produce: _F, consume: _F) -> _F:
    net = consume - produce
    scale = np.fmax(np.abs(consume), np.abs(produce))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(lag == 0, 0.0, np.where((lag > 0) & (net > scale * ETA_NOISE), lag / net, np.nan))


def lag_trends(minutes: pa.Table) -> pa.Table:
    """The minute rows → ``lag_trends`` (as :func:`lagscope.analytics.trends.transform_lag_trends`:
    the partition rows and their topic and group rollups)."""
    n = minutes.num_rows
    de, dc, dls, dtt = (_dbl(minutes.column(c)) for c in ("m_de", "m_dc", "m_dls", "m_dt"))
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




def _dict_codes(col: pa.ChunkedArray) -> tuple[_I, list[Any]]:
    """Each value's index in the distinct values (-1: null) and the distinct values."""
    enc = pc.dictionary_encode(col.combine_chunks())
    return np.asarray(enc.indices.fill_null(-1), dtype=np.int64), enc.dictionary.to_pylist()


def _rank(col: pa.ChunkedArray, ranks: dict[str, int]) -> _I:
    idx, names = _dict_codes(col)
    table = np.array([ranks.get(v, 0) for v in names] + [0], dtype=np.int64)  # [-1]: null → 0
    return table[idx]


def status(minutes: pa.Table) -> pa.Table:
    """The ``status`` table: each minute row's evaluation and the group rows (as
    :func:`lagscope.analytics.status.with_group_rows`)."""
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




def anomalies(rows: pa.Table, as_of: dt.datetime) -> pa.Table:
    """The pass's anomaly rows → the ``anomalies`` table (as :func:`lagscope.analytics.perkey.anomaly_rows`
    and :func:`lagscope.analytics.findings.finish`), with ``date`` and ``as_of_ts``."""
    start = _ts_col(_dbl(rows.column("start_t")))
    ms = np.asarray(start.cast(pa.int64()).fill_null(0), dtype=np.int64)
    part = rows.column("partition").cast(pa.string()).fill_null("")
    key = pc.binary_join_element_wise(rows.column("kind"), rows.column("cluster"), rows.column("group_id"),
                                      rows.column("topic").fill_null(""), part, pa.array(ms.astype(str)), "|")
    n = rows.num_rows
    return pa.table({
        "cluster": rows.column("cluster"), "group_id": rows.column("group_id"), "topic": rows.column("topic"),
        "partition": rows.column("partition"), "kind": rows.column("kind"), "start_ts": start,
        "end_ts": _ts_col(_dbl(rows.column("end_t"))), "severity": rows.column("severity"),
        "magnitude": rows.column("magnitude"), "unit": rows.column("unit"), "detail": rows.column("detail"),
        "key": key, "date": _date(start),
        "as_of_ts": pa.array([as_of] * n, _US).cast(_MS) if n else pa.array([], _MS)})


# --------------------------------------------------------------------------------------------
# the step
# --------------------------------------------------------------------------------------------

def _owner_codes(series: pa.Table, state: pa.Table | None) -> tuple[_I, _I | None, pa.Array]:
    """Dense codes of the owners (member ids) of the step's rows and the carried rows (-1: none)
    and the distinct owners (the pass compares owners by these codes; the state keeps names)."""
    cols = [series.column("owner")]
    if state is not None and state.num_rows:
        cols.append(state.column("owner"))
    else:
        own = cols[0].combine_chunks()
        if pa.types.is_dictionary(own.type):  # read so (a batch): its indices are the codes
            return np.asarray(own.indices.fill_null(-1), dtype=np.int64), None, own.dictionary.cast(pa.string())
    both = pa.chunked_array([c.cast(pa.string()) for chunk in cols for c in chunk.chunks], pa.string())
    enc = pc.dictionary_encode(both).combine_chunks()
    codes = np.asarray(enc.indices.fill_null(-1), dtype=np.int64)
    n = series.num_rows
    return codes[:n], (codes[n:] if len(cols) > 1 else None), enc.dictionary


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


#: the largest chunk of the in-process pass (rows)
_CHUNK_ROWS = 500_000


def run_local_step(inputs: LocalInputs, *, settings: Settings, as_of: dt.datetime,
                   max_rows: int = 2_000_000, workers: int | None = None, with_state: bool = True) -> LocalStep | None:
    """One incremental step in this process (see the module doc); ``None`` when the step is one
    for Spark (a possible rebalance window, an older state layout, more than ``max_rows``).
    ``with_state=False``: the tables only (a batch carries no state)."""
    st = inputs.state
    workers = workers if workers is not None else max(1, os.cpu_count() or 1)
    if not state_is_current(st) or inputs.offsets.num_rows > max_rows:
        return None
    carried = st.get("msweeps")
    checked = sweep_table(inputs.members)
    if carried is not None and carried.num_rows:
        checked = pa.concat_tables([checked, carried.select(SWEEP_CHECK.names).cast(SWEEP_CHECK)])
    if rebalance_possible(checked, inputs.group_events):
        return None
    p = settings.rules
    series = prepare(inputs.offsets, settings.read_committed_groups)
    commits = commit_records(inputs.commits) if inputs.commits is not None else None
    owners, state_owners, owner_names = _owner_codes(series, st.get("series"))
    inp = pass_input(series, owners, st, commits, state_owners)
    params = onepass.PassParams(rules=p, history_recent_s=settings.history_recent_s,
                                commit_stream=commits is not None)
    passed = _run_pass(inp, params, workers)

    part = _Parts(passed)
    minutes = part.get(onepass.OUT_MINUTE, [
        *KEY, "ts", "window_start", "committed", "log_start", "lag", "lag_max", "m_de", "m_dc", "m_dls", "m_dt",
        "lag_s", "lag_s_lower", "lag_s_code", "burrow_status", "status", "reason"])
    anomaly_in = part.get(onepass.OUT_ANOMALY, [*KEY, "kind", "start_t", "end_t", "severity", "magnitude", "unit",
                                                "detail"])
    tables = {
        "lag_trends": lag_trends(minutes),
        "rebalances": None,  # no window: nothing to write
        "anomalies": anomalies(anomaly_in, as_of),
        "status": status(minutes),
    }
    if not with_state:
        return LocalStep(tables={k: v for k, v in tables.items() if v is not None}, state={})

    # the next state (the columns the Spark step writes)
    last = part.get(onepass.OUT_SERIES, [*KEY, "ts", "t", "committed", "end", "log_start", "lag", "owner_h", "rec_ts",
                                         "lso", *onepass.STATE_X])
    oc, oc_ok = _long(last.column("owner_h"))
    owner = owner_names.take(pa.array(np.where(oc_ok, oc, 0))).cast(pa.string())
    owner = pc.if_else(pa.array(oc_ok), owner, pa.nulls(len(owner), pa.string()))
    markers = {m: last.column(m) for m in onepass.STATE_X}
    series_state = pa.table({
        **{k: last.column(k) for k in KEY}, "ts": last.column("ts").cast(_MS, safe=False), "t": last.column("t"),
        "committed": last.column("committed"), "end": last.column("end"), "log_start": last.column("log_start"),
        "lag": last.column("lag"), "owner": owner, "group_state": pa.nulls(last.num_rows, pa.string()),
        "rec_ts": last.column("rec_ts").cast(_MS, safe=False), "lso": last.column("lso"),
        **{m: markers[m] for m in ("m_change_t", "m_pending_t", "m_max_rate", "m_rate", "m_ret_t", "m_end_t",
                                   "m_max_committed", "m_commit_t", "m_alive_t", "m_drop_t")},
        "is_state": pa.array(np.ones(last.num_rows, bool))})
    hist = part.get(onepass.OUT_HISTORY, [*KEY, "end", "t", "tp", "ep"])
    mins = part.get(onepass.OUT_MINUTE_STATE, [*KEY, "window_start", "lag", "produce_rate", "consume_rate",
                                               "m_g_start", "m_g_lag0", "m_g_n"])
    recent = st.get("recent_rebalances")
    state = {
        "series": series_state,
        "history": pa.table({**{k: hist.column(k) for k in KEY}, "e": hist.column("end"), "tc": hist.column("t"),
                             "tp": hist.column("tp"), "ep": hist.column("ep")}),
        "gaps": part.get(onepass.OUT_GAP, [*KEY, "b"]),
        "entries": part.get(onepass.OUT_ENTRY, [*KEY, "b"]),
        "minutes": pa.table({
            **{k: mins.column(k) for k in KEY}, "window_start": mins.column("window_start").cast(_MS, safe=False),
            "lag_last": mins.column("lag"), "produce_rate": mins.column("produce_rate"),
            "consume_rate": mins.column("consume_rate"), "m_g_start": _ts_col(_dbl(mins.column("m_g_start"))),
            "m_g_lag0": mins.column("m_g_lag0"), "m_g_n": mins.column("m_g_n"),
            "is_state": pa.array(np.ones(mins.num_rows, bool))}),
        "msweeps": _msweeps_state([*[{**r, "is_state": False} for r in member_sweeps(inputs.members)],
                                   *_state_msweeps(carried)], series),
        "recent_rebalances": (recent.select(["cluster", "group_id", "start_ts", "end_ts"]) if recent is not None
                              else pa.schema([("cluster", pa.string()), ("group_id", pa.string()),
                                              ("start_ts", _MS), ("end_ts", _MS)]).empty_table()),
    }
    return LocalStep(tables={k: v for k, v in tables.items() if v is not None}, state=state)


def write_state_part(path: Path, table: pa.Table) -> None:
    """A state part as one Parquet file in its folder (either engine reads it; snappy, as Spark
    writes it: the next step reads it back at once)."""
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path / "part-00000.parquet", compression="snappy")


# --------------------------------------------------------------------------------------------
# a batch: the groups in buckets, each bucket a step with no state, on the machine's cores
# --------------------------------------------------------------------------------------------

@dataclass
class _Batch:
    """What the batch's worker processes inherit (fork): the inputs, each row's bucket, where to
    write, the step's settings."""

    inputs: LocalInputs
    buckets: dict[str, npt.NDArray[np.int32]]
    staging: dict[str, Path]
    keep_dates: pa.Array
    settings: Settings
    as_of: dt.datetime


_BATCH: _Batch | None = None


def group_buckets(offsets: pa.Table, *, workers: int, bucket_rows: int) -> tuple[_I, _I, pa.Array, _I]:
    """Each group id a bucket (all of a group's rows together, whatever its cluster), so that
    buckets hold about ``bucket_rows`` offset rows and there are at least ``workers`` of them
    (largest group first, to the emptiest bucket): (each row's group (-1: none), each group's
    bucket, the group ids, each group's rows)."""
    if not offsets.num_rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), pa.array([], pa.string()), np.zeros(0, np.int64)
    gid = offsets.column("group_id")
    if not pa.types.is_dictionary(gid.type):
        gid = pc.dictionary_encode(gid)  # one dictionary for all chunks, as read_files gives it
    names = gid.chunk(0).dictionary
    code = np.concatenate([np.asarray(c.indices.fill_null(-1) if c.null_count else c.indices, dtype=np.int64)
                           for c in gid.chunks])
    sizes = np.bincount(code[code >= 0] if gid.null_count else code, minlength=len(names)).astype(np.int64)
    if not sizes.all():  # a dictionary value no row has
        names, sizes, remap = names.filter(pa.array(sizes > 0)), sizes[sizes > 0], np.cumsum(sizes > 0) - 1
        code = np.where(code >= 0, remap[np.maximum(code, 0)], -1)
    n = max(workers, -(-int(sizes.sum()) // max(1, bucket_rows)), 1)
    n = min(-(-n // workers) * workers, len(sizes))  # whole rounds of ``workers``: no core idles at the end
    load = np.zeros(n, np.int64)
    bucket = np.zeros(len(sizes), np.int64)
    for g in np.argsort(-sizes, kind="stable"):
        b = int(np.argmin(load))
        bucket[g] = b
        load[b] += sizes[g]
    return code, bucket, names, sizes


def _bucket_of(tbl: pa.Table | None, names: pa.Array, bucket: _I) -> npt.NDArray[np.int32] | None:
    """Each row's bucket (-1: a group without offset rows, so without a result row)."""
    if tbl is None:
        return None
    i, ok = _long(pc.index_in(tbl.column("group_id"), value_set=names))
    return np.where(ok, bucket[np.where(ok, i, 0)], -1).astype(np.int32)


def _run_bucket(b: int) -> tuple[int, dict[str, int] | None]:
    """A worker: bucket ``b``'s groups as one step with no state, its tables staged as
    ``part-{b}`` (only the batch's days). Returns (offset rows, rows staged per table) or
    ``None`` when the bucket is one for Spark."""
    job = _BATCH
    assert job is not None, "the batch's inputs are set before its workers start"

    def rows(name: str) -> pa.Table | None:
        tbl = getattr(job.inputs, name)
        mask = job.buckets.get(name)
        return None if tbl is None or mask is None else tbl.filter(pa.array(mask == b))

    offsets, members = rows("offsets"), rows("members")
    assert offsets is not None
    assert members is not None
    done = run_local_step(LocalInputs(offsets=offsets, members=members, commits=rows("commits"),
                                      group_events=rows("group_events"), state={}),
                          settings=job.settings, as_of=job.as_of, max_rows=offsets.num_rows, workers=1,
                          with_state=False)
    if done is None:
        return offsets.num_rows, None
    staged = {}
    for name, tbl in done.tables.items():
        kept = tbl.filter(pc.is_in(tbl.column("date"), value_set=job.keep_dates))
        stage_arrow(job.staging[name], name, kept, part=f"{b:05d}")
        staged[name] = kept.num_rows
    return offsets.num_rows, staged


def run_local_batch(inputs: LocalInputs, *, settings: Settings, as_of: dt.datetime, staging: dict[str, Path],
                    days: Sequence[str], workers: int | None = None, bucket_rows: int = 2_000_000,
                    max_group_rows: int = 10_000_000,
                    progress: Callable[[int, int, int], None] | None = None) -> dict[str, int] | None:
    """A batch in this process and its forks: the groups in buckets (:func:`group_buckets`), each
    bucket a step with no state (the same tables as one Spark batch step: a batch is a first step
    over its whole range), the buckets run ``workers`` at a time, each in its own process (the
    pass is numpy, but its glue is Python: threads would share one interpreter lock), each
    writing its tables into ``staging[table]`` (the caller publishes them). Returns the rows
    staged per table, or ``None`` (nothing staged to keep) when the batch is one for Spark: a
    possible rebalance window, a group of more than ``max_group_rows`` offset rows.
    ``progress(buckets done, buckets, offset rows done)`` after each bucket."""
    global _BATCH  # the workers inherit it through fork
    workers = workers if workers is not None else max(1, os.cpu_count() or 1)
    code, bucket, names, sizes = group_buckets(inputs.offsets, workers=workers, bucket_rows=bucket_rows)
    if len(sizes) and int(sizes.max()) > max_group_rows:
        return None
    n = int(bucket.max()) + 1 if len(bucket) else 0
    of_group = np.append(bucket, -1).astype(np.int32)  # code -1 (no group id): the last, no bucket
    buckets = {"offsets": of_group[code]}
    for name in ("members", "commits", "group_events"):
        of = _bucket_of(getattr(inputs, name), names, bucket)
        if of is not None:
            buckets[name] = of
    _BATCH = _Batch(inputs=inputs, buckets=buckets, staging=staging, keep_dates=pa.array(list(days), pa.string()),
                    settings=settings, as_of=as_of)
    staged: Counter[str] = Counter()
    rows = 0
    try:
        with ExitStack() as stack:
            # each bucket checks its own groups for a rebalance window first: the first that has
            # one stops the batch (the buckets not started are cancelled; the caller drops what
            # was staged)
            outcomes: Iterable[tuple[int, dict[str, int] | None]] = map(_run_bucket, range(n))
            if workers > 1 and n > 1 and "fork" in mp.get_all_start_methods():
                pool = stack.enter_context(ProcessPoolExecutor(max_workers=min(workers, n),
                                                               mp_context=mp.get_context("fork")))
                stack.callback(pool.shutdown, wait=True, cancel_futures=True)
                outcomes = (f.result() for f in as_completed([pool.submit(_run_bucket, b) for b in range(n)]))
            for i, (done, got) in enumerate(outcomes, 1):
                if got is None:
                    return None
                rows += done
                staged.update(got)
                if progress is not None:
                    progress(i, n, rows)
    finally:
        _BATCH = None
    return dict(staged)
