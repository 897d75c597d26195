"""The per-partition pass, per chunk of whole keys: everything a step computes per partition
(:func:`lagscope.analytics.step.run_step` builds its input in key, kind and time order).

The rows of a key arrive together and in order, and every rule is a handful of array operations
over the chunk (:mod:`lagscope.analytics.kseries` enriches the series; one module per rule
family: :mod:`~lagscope.analytics.np_status`, :mod:`~lagscope.analytics.np_episodes`,
:mod:`~lagscope.analytics.np_points`, :mod:`~lagscope.analytics.np_gaps`,
:mod:`~lagscope.analytics.np_growth`, :mod:`~lagscope.analytics.np_state`; each is tested
against hand-computed cases and against a Spark SQL statement of the rule, tests/analytics).

Input (:data:`PASS_IN`), sorted by ``(_h, _k, t)``: ``_h`` a code of the key (and of its
generation: :func:`lagscope.analytics.step.generations`), ``_k`` = ``_h`` · 16 + the row's kind
(:data:`KIND_BITS`), and the key's own columns (``cluster, group_id, topic, partition``: the
outputs carry them, so nothing is joined back). The numeric columns are those of a sweep; the
other kinds put their values in them, and what does not fit in the struct ``x`` or, for the
per-key lists the state carries, the binary ``b`` (both null on sweeps, which are nearly all the
rows: every column costs a shuffle field and a conversion per row, and a list as one row per
element would make the state's rows, not the sweep's, the step's cost):

- :data:`SWEEP`: a fresh sweep row: ``t``, ``committed``, ``end``, ``log_start``, ``rec_t``, ``lso``,
  ``owner_h`` (a code of its owner, null without one), ``starved`` (its owner advanced another of
  its partitions far faster over the same interval: :func:`lagscope.analytics.kseries.starved_rows`,
  which needs the whole group, so the step computes it before the pass);
- :data:`STATE`: the key's carried last row, as a sweep, and ``x`` = its running markers
  (:data:`STATE_X`, null: NaN);
- :data:`HISTORY`: a carried end-offset point (``t`` = tc, ``end`` = e, ``committed`` = ep,
  ``rec_t`` = tp), as :mod:`lagscope.analytics.kernel` reads it;
- :data:`ENTRIES`: a key's carried Burrow entries, packed in ``b`` (:data:`ENTRY_B`, one value per
  key: up to ``burrow_window`` entries);
- :data:`COMMIT`: a commit record of the commit stream (``t``, ``committed`` = its offset,
  ``end`` = its position in ``__consumer_offsets``);
- :data:`GAPS`: a key's carried commit-gap samples, packed in ``b`` (:data:`GAP_B`: up to 64 per
  key);
- :data:`MINUTE`: the key's carried last partition minute (``t`` = its start, ``end`` = its last
  lag, ``x`` = :data:`MINUTE_X`).

Output (:data:`PASS_OUT`), one row kind per ``_o``:

- :data:`OUT_MINUTE`: each key's minute rows (its last fresh sweep of each minute) with the
  minute's totals, lag in seconds and the partition's status at that sweep;
- :data:`OUT_ANOMALY`: the per-partition anomalies (stall, stop, retention_loss, rewind,
  commit_gap, lag_growth): ``kind``, ``start_t``, ``end_t``, ``severity``, ``magnitude``, ``unit``,
  ``detail``, ``cause``;
- :data:`OUT_ADVANCE`: the advances the per-group pass's skip rules judge
  (:func:`lagscope.analytics.np_points.advances`): ``start_t`` (t0), ``end_t`` (t1), ``advance``,
  ``capacity``, ``exact``, ``at_end``, ``from_lost``, ``unowned``, ``deleted``;
- :data:`OUT_CAPACITY`: each key's demonstrated capacity (``capacity``, messages/s) from each
  row ``t`` where it changed (the running maximum: a state row's carried one first; keys that
  showed none are left out): the skip rules sum a member's or group's partitions as they were
  before the commit judged (causal: a batch and steps judge a commit alike);
- the next step's state: :data:`OUT_SERIES` (each key's last row with its markers),
  :data:`OUT_HISTORY` (end-offset points: ``end`` = e, ``t`` = tc, ``tp``, ``ep``),
  :data:`OUT_ENTRY` (the last Burrow entries), :data:`OUT_GAP` (the learned gap samples),
  :data:`OUT_MINUTE_STATE` (the last partition minute and its open growth run).

Pure: pyarrow and numpy, no Spark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lagscope.analytics import kernel, np_episodes, np_gaps, np_growth, np_points, np_state, np_status
from lagscope.analytics.kseries import Commits, Found, Series, enrich, key_bounds
from lagscope.config import AnalyticsRulesConfig

__all__ = ["COMMIT", "ENTRIES", "ENTRY_B", "GAPS", "GAP_B", "HISTORY", "KIND_BITS", "MINUTE", "OUT_ADVANCE",
           "OUT_ANOMALY", "OUT_CAPACITY", "OUT_ENTRY", "OUT_GAP", "OUT_HISTORY", "OUT_MINUTE", "OUT_MINUTE_STATE",
           "OUT_SERIES", "PASS_IN", "PASS_OUT", "STATE", "STATE_OUT", "STATE_X", "SWEEP", "PassParams", "pass_batches",
           "pass_table"]

HISTORY, STATE, SWEEP = kernel.HISTORY, kernel.STATE, kernel.SWEEP
COMMIT, MINUTE, ENTRIES, GAPS = 4, 6, 7, 8
#: bits of ``_k`` that hold the row's kind
KIND_BITS = 4
(OUT_MINUTE, OUT_ENTRY, OUT_ANOMALY, OUT_SERIES, OUT_HISTORY, OUT_GAP, OUT_MINUTE_STATE, OUT_ADVANCE,
 OUT_CAPACITY) = range(9)

_MARKERS_F = ["m_change_t", "m_pending_t", "m_max_rate", "m_sat_rate", "m_rate", "m_ret_t", "m_end_t", "m_commit_t",
              "m_alive_t", "m_drop_t", "m_owned_t", "m_tenure_t", "m_change_takeover"]
_US = pa.timestamp("us", tz="UTC")

#: a carried state row's ``x`` (``m_idle``: the kind and reason of the idle episode open at the
#: row, :func:`lagscope.analytics.np_episodes.idle_code`; ``m_lost``: whether the retention loss
#: open at the row is proven, 1 or 0; both read by the episodes, not the series;
#: ``m_member_rate``: the running member capacity, :func:`lagscope.analytics.np_points.member_capacity_through`;
#: ``m_tenure_owner``: the step's code of the state's ``tenure_owner``, the owner whose tenure
#: ``m_tenure_t`` dates, which the pass writes as ``tenure_owner_h`` and the state keeps by name);
#: :data:`STATE_OUT` those the pass writes back as they are
STATE_OUT = (*_MARKERS_F, "m_max_committed", "m_idle", "m_lost", "m_member_rate")
STATE_X = (*STATE_OUT, "m_tenure_owner")
#: a carried minute's ``x`` (``m_g_start`` in epoch seconds)
MINUTE_X = ("produce_rate", "consume_rate", "m_g_start", "m_g_lag0", "m_g_n")

#: ``x``: up to :data:`X_WIDTH` values of a state row or carried minute (a struct, not a list: a
#: null list on every sweep row made Spark's conversion to Arrow five times slower; a null
#: struct costs about what no column does)
X_WIDTH = 18
X_TYPE = pa.struct([(f"x{i}", pa.float64()) for i in range(X_WIDTH)])

#: the packed values of ``b`` (little-endian float64, row after row): a Burrow entry, a gap sample
ENTRY_B = ("t", "c", "lag", "rebased")
GAP_B = ("t", "gap_s")

_KEY_FIELDS = [("cluster", pa.string()), ("group_id", pa.string()), ("topic", pa.string()), ("partition", pa.int32())]

PASS_IN = pa.schema([
    *kernel.LAG_SECONDS_IN, ("lso", pa.int64()), ("owner_h", pa.int64()), ("starved", pa.bool_()),
    ("member_rate", pa.float64()), ("x", X_TYPE),
    ("b", pa.binary()), *_KEY_FIELDS,
])

PASS_OUT = pa.schema([
    ("_o", pa.int8()), *_KEY_FIELDS, *kernel.LAG_SECONDS_OUT,
    ("burrow_status", pa.string()), ("status", pa.string()), ("reason", pa.string()),
    ("owner_h", pa.int64()), ("tenure_owner_h", pa.int64()), ("rec_ts", _US), ("lso", pa.int64()),
    *((m, pa.float64()) for m in _MARKERS_F), ("m_max_committed", pa.int64()), ("m_idle", pa.float64()),
    ("m_lost", pa.float64()), ("m_member_rate", pa.float64()), ("tp", pa.float64()), ("ep", pa.int64()),
    ("kind", pa.string()), ("start_t", pa.float64()), ("end_t", pa.float64()), ("severity", pa.string()),
    ("magnitude", pa.float64()), ("unit", pa.string()), ("detail", pa.string()), ("cause", pa.string()),
    ("advance", pa.int64()), ("capacity", pa.float64()), ("member_capacity", pa.float64()), ("exact", pa.bool_()),
    ("at_end", pa.bool_()),
    ("from_lost", pa.bool_()), ("unowned", pa.bool_()), ("deleted", pa.int64()),
    ("b", pa.binary()), ("gap_s", pa.float64()), ("produce_rate", pa.float64()), ("consume_rate", pa.float64()),
    ("m_g_start", pa.float64()), ("m_g_lag0", pa.int64()), ("m_g_n", pa.int32()),
])


@dataclass(frozen=True)
class PassParams:
    """What the pass's rules take: their thresholds, the newest end-offset points lag in seconds
    uses (:mod:`lagscope.lag`), and whether the step reads the commit stream (then the rules use
    its exact commits, a key without any included).

    ``partial_minute``: a provisional step's minute in progress (``floor(t / 60)``), None in a
    full step. Lag growth compares each minute's lag *at its end* with the minute before's; the
    minute in progress has no end yet, and its lag so far (a moment's sample: a caught-up
    consumer's lag swings between 0 and a poll's worth within seconds) against the last
    minute's end is a coin flip, which fired and resolved lag_growth warnings for caught-up
    groups at every provisional step. So that minute never grows: a provisional step reports a
    lag growth as the full steps before it saw it (open), and the full step over the minute
    judges the minute whole."""

    rules: AnalyticsRulesConfig
    history_points: int
    commit_stream: bool = False
    partial_minute: int | None = None


_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]


class _Chunk:
    """The columns of one chunk's rows of one kind, as numpy arrays (nulls: NaN / validity)."""

    def __init__(self, tbl: pa.Table, mask: _B, key: _I) -> None:
        self.tbl = tbl.filter(pa.array(mask)) if not bool(mask.all()) else tbl
        self.key = key[mask]

    def __len__(self) -> int:
        return len(self.key)

    def long(self, name: str) -> tuple[_I, _B]:
        col = self.tbl.column(name).combine_chunks()
        if col.null_count == 0:
            return np.asarray(col, dtype=np.int64), np.ones(len(col), bool)
        return np.asarray(col.fill_null(0), dtype=np.int64), np.asarray(col.is_valid(), dtype=bool)

    def double(self, name: str) -> _F:
        col = self.tbl.column(name).combine_chunks()
        return np.asarray(col.fill_null(np.nan) if col.null_count else col, dtype=np.float64)

    def xs(self, width: int) -> _F:
        """The first ``width`` fields of ``x`` as a (rows × ``width``) array (null: NaN)."""
        col = self.tbl.column("x").combine_chunks()
        out = np.full((len(self), width), np.nan)
        for i in range(width):
            f = pc.struct_field(col, [i])
            out[:, i] = np.asarray(f.fill_null(np.nan) if f.null_count else f, dtype=np.float64)
        return out


def _unpack(rows: _Chunk, width: int) -> tuple[_I, _F]:
    """The values packed in ``b`` (:data:`ENTRY_B`, :data:`GAP_B`): each element's key and a
    (elements × ``width``) array."""
    col = rows.tbl.column("b").combine_chunks()
    if len(col) == 0:
        return np.zeros(0, np.int64), np.zeros((0, width))
    _, off_buf, data_buf = col.buffers()
    offsets = np.frombuffer(off_buf, dtype=np.int32)[col.offset:col.offset + len(col) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0]:offsets[-1]].copy().view("<f8")
    counts = np.diff(offsets) // (8 * width)
    return np.repeat(rows.key, counts), data.reshape(-1, width).astype(np.float64)


def _pack(key: _I, cols: list[_F]) -> tuple[_I, pa.Array]:
    """Rows grouped by ``key`` → per key one binary value: its rows' ``cols`` as little-endian
    float64, row after row (the inverse of :func:`_unpack`)."""
    first, _ = key_bounds(key)
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(key)))
    data = np.column_stack(cols).astype("<f8").tobytes() if len(key) else b""
    offsets = np.concatenate([[0], np.cumsum(counts * 8 * len(cols))]).astype(np.int32)
    arr = pa.Array.from_buffers(pa.binary(), len(starts), [None, pa.py_buffer(offsets.tobytes()),
                                                           pa.py_buffer(data)])
    return key[starts], arr


def _ok_long(v: _F) -> tuple[_I, _B]:
    """A long carried in ``x`` (NaN: null) as values and validity."""
    ok = ~np.isnan(v)
    return np.where(ok, v, 0).astype(np.int64), ok


def _series(rows: _Chunk, is_state: _B, jump_factor: float,
            commits: Commits | None) -> tuple[Series, _F, _F, _F, _F]:
    """The chunk's series rows (state and fresh, in key and time order) enriched (a jump to the end
    beyond ``jump_factor`` × the rate before it, the rules' ``skip_factor``, is no capacity; with
    ``commits``, judged by the pace of its commit too), and
    per row the carried ``m_idle`` and ``m_lost`` (NaN but on state rows), the sweeps'
    ``member_rate`` (NaN on state rows) and the carried ``m_member_rate``."""
    cols: dict[str, object] = {"key": rows.key, "is_state": is_state}
    for name in ("committed", "end", "log_start", "lso"):
        cols[name], cols[f"{name}_ok"] = rows.long(name)
    cols["owner"], cols["owned"] = rows.long("owner_h")
    starved = rows.tbl.column("starved").combine_chunks()
    cols["starved"] = np.asarray(starved.fill_null(False), dtype=bool)
    cols["t"] = rows.double("t")
    cols["rec_t"] = rows.double("rec_t")
    # the markers of the state rows (the fresh rows' are null)
    marks = np.full((len(rows), len(STATE_X)), np.nan)
    si = np.flatnonzero(is_state)
    if len(si):
        marks[si] = _Chunk(rows.tbl, is_state, rows.key).xs(len(STATE_X))
    for j, m in enumerate(_MARKERS_F):
        cols[m] = marks[:, j]
    cols["m_max_committed"], cols["m_max_committed_ok"] = _ok_long(marks[:, len(_MARKERS_F)])
    n = len(_MARKERS_F)
    cols["m_tenure_owner"], cols["m_tenure_owner_ok"] = _ok_long(marks[:, n + 4])
    return (enrich(**cols, jump_factor=jump_factor, commits=commits),  # type: ignore[arg-type]
            marks[:, n + 1], marks[:, n + 2], rows.double("member_rate"), marks[:, n + 3])


def _growth_minutes(minutes: pa.Table, mkey: _I, carried: _Chunk) -> np_growth.Minutes:
    """The partition minutes of the chunk (from the minute rows: lag, produce and consume rates
    over the minute's intervals, as ``lag_trends`` has them) and the carried last minutes, each
    key's carried one first."""
    span_s = np.asarray(minutes.column("minute_span_s").combine_chunks().fill_null(np.nan), dtype=np.float64)

    def rate(col: str) -> _F:
        d = np.asarray(minutes.column(col).combine_chunks().fill_null(0), dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(span_s > 0, d / span_s, np.nan)

    lag = minutes.column("lag").combine_chunks()
    window_us = np.asarray(minutes.column("window_start").combine_chunks().cast(pa.int64()), dtype=np.int64)
    n = minutes.num_rows
    fresh = np_growth.Minutes(
        key=mkey, minute=window_us // 60_000_000, lag_last=np.asarray(lag.fill_null(0), dtype=np.int64),
        lag_last_ok=np.asarray(lag.is_valid(), dtype=bool), produce_rate=rate("minute_end_rise"),
        consume_rate=rate("minute_committed_rise"),
        is_state=np.zeros(n, bool), g_start=np.full(n, np_growth.NO_RUN, np.int64), g_lag0=np.zeros(n, np.int64),
        g_lag0_ok=np.zeros(n, bool), g_n=np.zeros(n, np.int64))
    if not len(carried):
        return fresh
    lag_c, lag_c_ok = carried.long("end")
    x = carried.xs(len(MINUTE_X))
    g_start = x[:, 2]
    g_lag0, g_lag0_ok = _ok_long(x[:, 3])
    g_n, _ = _ok_long(x[:, 4])
    state = np_growth.Minutes(
        key=carried.key, minute=np.floor(carried.double("t") / 60.0).astype(np.int64), lag_last=lag_c,
        lag_last_ok=lag_c_ok, produce_rate=x[:, 0], consume_rate=x[:, 1],
        is_state=np.ones(len(carried), bool),
        g_start=np.where(np.isnan(g_start), np_growth.NO_RUN, np.floor(np.nan_to_num(g_start) / 60.0)).astype(
            np.int64), g_lag0=g_lag0, g_lag0_ok=g_lag0_ok, g_n=g_n)
    both = np_growth.Minutes(*(np.concatenate([getattr(state, f), getattr(fresh, f)])
                               for f in np_growth.Minutes.__dataclass_fields__))
    return both.take(np.lexsort((~both.is_state, both.minute, both.key)))


class _Out:
    """Collects the output rows of a chunk (each part a dict of its columns)."""

    def __init__(self, key_h: _I, key_h2: _I, keys: pa.Table) -> None:
        self.key_h, self.key_h2, self.keys = key_h, key_h2, keys
        self.parts: list[pa.Table] = []

    def add(self, o: int, key: _I, cols: dict[str, pa.Array]) -> None:
        n = len(key)
        if n == 0:
            return
        full = {name: cols.get(name) for name in PASS_OUT.names}
        full["_o"] = pa.array(np.full(n, o, np.int8))
        full["_h"] = pa.array(self.key_h[key], pa.int64())
        full["_h2"] = pa.array(self.key_h2[key] - 2**31, pa.int32())
        at = pa.array(key, pa.int64())
        for name, _ in _KEY_FIELDS:
            full[name] = self.keys.column(name).take(at)
        arrays = [a if a is not None else pa.nulls(n, typ) for a, typ in zip(full.values(), PASS_OUT.types,
                                                                             strict=True)]
        self.parts.append(pa.Table.from_arrays([a.cast(typ) for a, typ in zip(arrays, PASS_OUT.types, strict=True)],
                                               schema=PASS_OUT))

    def table(self) -> pa.Table:
        return pa.concat_tables(self.parts) if self.parts else PASS_OUT.empty_table()


def _nan_null(values: _F) -> pa.Array:
    return pa.array(values, pa.float64(), mask=np.isnan(values))


def _micros(t: _F) -> pa.Array:
    """Epoch seconds (``µs / 1e6``, exact) back to the timestamp; NaN: null."""
    ok = ~np.isnan(t)
    us = np.rint(np.nan_to_num(t) * 1e6).astype(np.int64)
    return pa.array(us, pa.int64(), mask=~ok).cast(_US)


def pass_table(tbl: pa.Table, params: PassParams) -> pa.Table:
    """One chunk of whole keys (:data:`PASS_IN`, in key order) → its output rows (:data:`PASS_OUT`)."""
    if tbl.num_rows == 0:
        return PASS_OUT.empty_table()
    h = np.asarray(tbl.column("_h").combine_chunks(), dtype=np.int64)
    k = np.asarray(tbl.column("_k").combine_chunks(), dtype=np.int64)
    kind = k & ((1 << KIND_BITS) - 1)
    h2 = k >> KIND_BITS
    first = np.ones(len(h), bool)
    first[1:] = (h[1:] != h[:-1]) | (h2[1:] != h2[:-1])
    keyno = np.cumsum(first) - 1
    n_keys = int(keyno[-1]) + 1
    keys = tbl.select([f for f, _ in _KEY_FIELDS]).take(pa.array(np.flatnonzero(first)))
    out = _Out(h[first], h2[first], keys.cast(pa.schema(_KEY_FIELDS)))  # the input's may be dictionaries

    ser_mask = (kind == STATE) | (kind == SWEEP)
    has_series = np.zeros(n_keys, bool)
    has_series[keyno[ser_mask]] = True
    carried_entries = _carried_entries(tbl, kind, keyno)
    carried_gaps = _carried_gaps(tbl, kind, keyno)
    minutes_in = _Chunk(tbl, kind == MINUTE, keyno)

    if not bool(ser_mask.any()):  # keys without series rows keep their carried entries, gap samples, minutes
        if carried_entries is not None:
            _add_entries(out, carried_entries)
        if carried_gaps is not None:
            base = np_gaps.gap_baselines(np_gaps.Gaps.empty(), carried_gaps, n_keys)
            _add_gaps(out, base.samples)
        if len(minutes_in):
            empty = pa.table({"minute_span_s": pa.array([], pa.float64()),
                              "minute_end_rise": pa.array([], pa.int64()),
                              "minute_committed_rise": pa.array([], pa.int64()), "lag": pa.array([], pa.int64()),
                              "window_start": pa.array([], _US)})
            _add_minute_state(out, np_growth.lag_growth_state(_growth_minutes(empty, np.array([], np.int64),
                                                                              minutes_in)))
        return out.table()

    # lag in seconds and the minute totals: the lag-seconds pass over the history and series rows
    lsm = kind <= SWEEP
    sub = (tbl if bool(lsm.all()) else tbl.filter(pa.array(lsm))).select(kernel.LAG_SECONDS_IN.names)
    sub = sub.set_column(1, "_k", pa.array((h2[lsm] << 2) | kind[lsm], pa.int64()))
    minutes = kernel.lag_seconds_table(sub, history_points=params.history_points)

    commits: Commits | None = None
    if params.commit_stream:
        cm = (kind == COMMIT) & has_series[keyno]  # a key's commits matter with its sweeps only
        ci = _Chunk(tbl, cm, keyno)
        offset, _ = ci.long("committed")
        seq, _ = ci.long("end")
        ct = ci.double("t")
        order = np.lexsort((seq, ct, ci.key))
        commits = Commits(key=ci.key[order], t=ct[order], offset=offset[order], seq=seq[order])
    series_rows = _Chunk(tbl, ser_mask, keyno)
    s, carried_idle, carried_lost, member_rate, carried_member = _series(
        series_rows, kind[ser_mask] == STATE, params.rules.skip_factor, commits)

    # status at each minute row
    entries = np_status.burrow_entries(s, carried_entries)
    rows = np_status.minute_rows(s)
    if len(rows) != minutes.num_rows:  # both are each key's last fresh sweep of each minute
        raise AssertionError(f"minute rows disagree: {len(rows)} status rows, {minutes.num_rows} lag rows")
    lag_s = np.asarray(minutes.column("lag_s").combine_chunks().fill_null(np.nan), dtype=np.float64)
    p = params.rules
    st = np_status.partition_status(s, rows, lag_s, entries, n=p.burrow_window, stall_after_s=p.stall_after_s,
                                    stop_after_s=p.stop_after_s, warn_lag_s=p.warn_lag_s)
    mkey = s.key[rows]
    mcols = {name: minutes.column(name) for name in minutes.column_names if name not in ("_h", "_h2")}
    mcols.update(burrow_status=pa.array(st.burrow_status, pa.string()), status=pa.array(st.status, pa.string()),
                 reason=pa.array(st.reason, pa.string()))
    out.add(OUT_MINUTE, mkey, mcols)

    # anomalies
    jumps = np_points.commit_jumps(s, commits) if commits is not None else None
    idle = np.full(n_keys, np.nan)
    lost = np.full(n_keys, np.nan)
    found = [
        np_episodes.episodes(s, commits, stall_after_s=p.stall_after_s, stop_after_s=p.stop_after_s,
                             carried_idle=carried_idle, idle_out=idle, carried_lost=carried_lost, lost_out=lost),
        np_points.point_events(s, commits, jumps=jumps),
    ]
    gaps = np_gaps.commit_gaps(s, commits)
    base = np_gaps.gap_baselines(gaps, carried_gaps, n_keys)
    found.append(np_gaps.gap_anomalies(gaps, base, k=p.gap_k, mad_floor_s=p.gap_mad_floor_s, min_gap_s=p.gap_min_s,
                                       min_samples=p.gap_min_samples,
                                       max_gap_s=min(p.stall_after_s, p.stop_after_s)))
    growth_in = _growth_minutes(minutes, mkey, minutes_in)
    if params.partial_minute is not None:
        growth_in = growth_in.take(np.flatnonzero(growth_in.is_state | (growth_in.minute < params.partial_minute)))
    found.append(np_growth.lag_growth(growth_in, min_minutes=p.growth_min_minutes))
    a = Found.concat(found)
    out.add(OUT_ANOMALY, a.key, {
        "kind": pa.array(a.kind, pa.string()), "start_t": pa.array(a.start_t, pa.float64()),
        "end_t": _nan_null(a.end_t), "severity": pa.array(a.severity, pa.string()),
        "magnitude": _nan_null(a.magnitude), "unit": pa.array(a.unit, pa.string()),
        "detail": pa.array(a.detail, pa.string()), "cause": pa.array(a.cause, pa.string())})
    adv = np_points.advances(s, commits, jumps)
    out.add(OUT_ADVANCE, adv.key, {
        "start_t": _nan_null(adv.t0), "end_t": pa.array(adv.t1, pa.float64()),
        "advance": pa.array(adv.advance, pa.int64()), "capacity": pa.array(adv.capacity, pa.float64()),
        "exact": pa.array(adv.exact), "at_end": pa.array(adv.at_end), "from_lost": pa.array(adv.from_lost),
        "unowned": pa.array(adv.unowned), "deleted": pa.array(adv.deleted, pa.int64())})
    cap = np_points.capacity_through(s)
    mcap, member_run = np_points.member_capacity_through(s, member_rate, carried_member)
    first_row, last_row = key_bounds(s.key)
    # each time the running capacity or member capacity changes (a state row's carried one
    # first): the skip rules take a member's or group's capacity as it was before the commit they
    # judge
    prev_cap = np.where(first_row, 0.0, np.roll(cap, 1)) if s.n else cap
    prev_mcap = np.where(first_row, np.nan, np.roll(mcap, 1)) if s.n else mcap
    moved = (cap != prev_cap) | ((mcap != prev_mcap) & ~(np.isnan(mcap) & np.isnan(prev_mcap)))
    shown = np.flatnonzero((cap > 0) & moved)
    out.add(OUT_CAPACITY, s.key[shown], {"t": pa.array(s.t[shown], pa.float64()),
                                         "capacity": pa.array(cap[shown], pa.float64()),
                                         "member_capacity": _nan_null(mcap[shown])})

    # the next step's state
    last = np_state.state_rows(s)
    marker = np_episodes.commit_marker(s, commits)
    out.add(OUT_SERIES, last.key, {
        "ts": _micros(last.t), "t": pa.array(last.t), "committed": kernel.nullable(last.committed, last.committed_ok,
                                                                            pa.int64()),
        "end": kernel.nullable(last.end, last.end_ok, pa.int64()),
        "log_start": kernel.nullable(last.log_start, last.log_start_ok, pa.int64()),
        "lag": kernel.nullable(last.lag, last.lag_ok, pa.int64()),
        "owner_h": kernel.nullable(last.owner, last.owned, pa.int64()),
        "tenure_owner_h": kernel.nullable(last.m_tenure_owner, last.m_tenure_owner_ok, pa.int64()),
        "rec_ts": _micros(last.rec_t), "lso": kernel.nullable(last.lso, last.lso_ok, pa.int64()),
        **{m: _nan_null(getattr(last, m)) for m in _MARKERS_F if m != "m_commit_t"},
        "m_commit_t": _nan_null(marker[last.key]),
        "m_max_committed": kernel.nullable(last.m_max_committed, last.m_max_committed_ok, pa.int64()),
        "m_idle": _nan_null(idle[last.key]), "m_lost": _nan_null(lost[last.key]),
        "m_member_rate": _nan_null(member_run[last_row])})
    hist_in = _Chunk(tbl, (kind == HISTORY) & has_series[keyno], keyno)
    fresh_points = np_state.history_points(s)
    if len(hist_in):
        he, _ = hist_in.long("end")
        hep, _ = hist_in.long("committed")
        carried_points = np_state.Points(key=hist_in.key, e=he, tc=hist_in.double("t"), tp=hist_in.double("rec_t"),
                                         ep=hep, epoch=np.zeros(len(hist_in), np.int64))
        fresh_points = np_state.Points(*(np.concatenate([getattr(fresh_points, f), getattr(carried_points, f)])
                                         for f in np_state.Points.__dataclass_fields__))
    hist = np_state.compact_history(fresh_points, s, history_points=params.history_points)
    out.add(OUT_HISTORY, hist.key, {"end": pa.array(hist.e, pa.int64()), "t": pa.array(hist.tc),
                                    "tp": pa.array(hist.tp), "ep": pa.array(hist.ep, pa.int64())})
    _add_entries(out, np_status.entries_state(entries, p.burrow_window))
    _add_gaps(out, base.samples)
    _add_minute_state(out, np_growth.lag_growth_state(growth_in))
    return out.table()


def _carried_entries(tbl: pa.Table, kind: _I, keyno: _I) -> np_status.Entries | None:
    """The carried Burrow entries (:data:`ENTRIES`, packed per key)."""
    parts = []
    packed = _Chunk(tbl, kind == ENTRIES, keyno)
    if len(packed):
        k, v = _unpack(packed, len(ENTRY_B))
        lag, lag_ok = _ok_long(v[:, 2])
        parts.append(np_status.Entries(key=k, t=v[:, 0], c=v[:, 1].astype(np.int64), lag=lag, lag_ok=lag_ok,
                                       rebased=v[:, 3] == 1, is_state=np.ones(len(k), bool)))
    return np_status.Entries.concat(parts) if parts else None


def _carried_gaps(tbl: pa.Table, kind: _I, keyno: _I) -> np_gaps.Gaps | None:
    """The carried commit-gap samples (:data:`GAPS`, packed per key)."""
    parts = []
    packed = _Chunk(tbl, kind == GAPS, keyno)
    if len(packed):
        k, v = _unpack(packed, len(GAP_B))
        parts.append(np_gaps.Gaps(key=k, t=v[:, 0], gap_s=v[:, 1]))
    if not parts:
        return None
    return np_gaps.Gaps(*(np.concatenate([getattr(p, f) for p in parts]) for f in ("key", "t", "gap_s")))


def _key_time_order(key: _I, t: _F) -> _I | None:
    """The order that sorts rows by (key, t), stably; ``None`` when they already are (the rules
    return their state rows so: the sort of a large state was a tenth of a step)."""
    if len(key) < 2:
        return None
    dk = np.diff(key)
    if bool(((dk > 0) | ((dk == 0) & (np.diff(t) >= 0))).all()):
        return None
    return np.lexsort((t, key))


def _add_entries(out: _Out, e: np_status.Entries) -> None:
    order = _key_time_order(e.key, e.t)
    if order is not None:
        e = e.take(order)
    keys, packed = _pack(e.key, [e.t, e.c.astype(np.float64), np.where(e.lag_ok, e.lag, np.nan).astype(np.float64),
                                 e.rebased.astype(np.float64)])
    out.add(OUT_ENTRY, keys, {"b": packed})


def _add_gaps(out: _Out, g: np_gaps.Gaps) -> None:
    order = _key_time_order(g.key, g.t)
    if order is not None:
        g = np_gaps.Gaps(g.key[order], g.t[order], g.gap_s[order])
    keys, packed = _pack(g.key, [g.t, g.gap_s])
    out.add(OUT_GAP, keys, {"b": packed})


def _add_minute_state(out: _Out, m: np_growth.Minutes) -> None:
    run = m.g_start != np_growth.NO_RUN
    out.add(OUT_MINUTE_STATE, m.key, {
        "window_start": pa.array(m.minute * 60_000_000, pa.int64()).cast(_US),
        "lag": kernel.nullable(m.lag_last, m.lag_last_ok, pa.int64()), "produce_rate": _nan_null(m.produce_rate),
        "consume_rate": _nan_null(m.consume_rate),
        "m_g_start": pa.array((m.g_start * 60).astype(np.float64), pa.float64(), mask=~run),
        "m_g_lag0": kernel.nullable(m.g_lag0, m.g_lag0_ok, pa.int64()),
        "m_g_n": pa.array(m.g_n, pa.int32(), mask=~run)})


def pass_batches(batches: Iterable[pa.RecordBatch], *, params: PassParams) -> Iterator[pa.RecordBatch]:
    """:func:`pass_table` over a task's key-sorted batches (``mapInArrow``), a chunk of whole keys
    at a time."""
    for chunk in kernel.key_chunks(batches, kind_bits=KIND_BITS):
        yield from pass_table(chunk, params).to_batches()
