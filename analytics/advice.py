"""Advice: what to change in a consumer group's settings, derived from the faults observed
(the ``advice`` table, :data:`lagscope.schema.ADVICE`; the rules' reasoning in docs/analytics.md,
"Advice").

Every step recomputes the advice of each group it analyses from the group's **evidence** over
the results' retention window (``analytics.retention`` days, 30 when it keeps everything):

- its closed rebalance windows (cause, duration, outage = ``observed_over_bound · bound_s``,
  members before, partitions moved, and the *identities* of the members that joined and left in
  each: :func:`member_identities`);
- its rewind, retention_loss, rebalance_storm and commit_gap anomalies;
- per UTC day, its *retention risk*: the minutes in which a partition's retention headroom was
  below the group's catch-up ETA of the same minute, the day's worst catch-up ETA and its least
  headroom (``lag_trends``);
- its settings as last seen (:data:`GROUP_SCHEMA`): the assignor, group protocol, members, static
  members and assigned partitions of its latest member sweep that saw it Stable with a member
  (else the latest with a member); the session and rebalance timeouts of its latest
  group-metadata record (``__consumer_offsets``).

The evidence is the step's own result rows plus what earlier steps carried (the state parts
``advice_evidence`` and ``advice_groups``, bounded by the faults within the retention window and
one row per group and day, never by the sweeps). Extraction, de-duplication (an anomaly or
window written again by a later step is one piece of evidence: the latest row wins) and expiry
are vectorised; the rules then run once per group that has evidence, over that group's few
rows (groups are few, their evidence small: a Python loop over groups, not over the lake's rows).

A rule never advises on thin evidence (each has a minimum count, :class:`AdviceRulesConfig`), and a
group with no fault evidence gets no advice.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lagscope.analytics.arrays import (
    dates,
    doubles,
    gargmax,
    gmax,
    gmin,
    groups,
    gsum,
    key_code,
    longs,
    seconds,
    timestamps,
)
from lagscope.config import AdviceRulesConfig

if TYPE_CHECKING:
    from lagscope.config import AnalyticsConfig

__all__ = ["ADVICE_COLUMNS", "EVIDENCE_SCHEMA", "GROUP_SCHEMA", "RULES", "RULE_SETTINGS", "AdviceInputs",
           "AdviceOutputs", "advise", "confidence"]

_F = npt.NDArray[np.float64]
_MS = pa.timestamp("ms", tz="UTC")

#: the ``advice`` table's columns a step writes (then ``cluster`` and ``date``)
ADVICE_COLUMNS = ("group_id", "rule", "setting", "current_value", "suggested", "expected_effect", "measure", "unit",
                  "current_amount", "expected_amount", "evidence", "evidence_count", "evidence_start_ts",
                  "evidence_end_ts", "confidence", "as_of_ts")

#: the state part ``advice_evidence``: one row per piece of evidence (kind: rebalance | rewind |
#: retention_loss | rebalance_storm | commit_gap | risk_day, or withdrawn: an anomaly a later step
#: withdrew, or retention_deficit: a retention loss not proven, neither of which a rule reads),
#: ``key`` its identity; a rebalance window's ``joined`` and ``left``: the identities
#: (:func:`member_identities`) of the members that joined and left in it (null: the window's member
#: ids unknown, or evidence carried from a version that did not keep them)
EVIDENCE_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("group_id", pa.string()), ("kind", pa.string()), ("key", pa.string()),
    ("start_ts", _MS), ("end_ts", _MS), ("cause", pa.string()), ("duration_s", pa.float64()),
    ("outage_s", pa.float64()), ("bound_s", pa.float64()), ("members_before", pa.int32()),
    ("partitions_moved", pa.int32()), ("magnitude", pa.float64()), ("low_s", pa.float64()), ("n", pa.int64()),
    ("joined", pa.list_(pa.string())), ("left", pa.list_(pa.string())),
])
#: the evidence columns only a rebalance window has (null in the other rows)
_WINDOW_ONLY = ("cause", "duration_s", "outage_s", "bound_s", "members_before", "partitions_moved", "joined", "left")

#: the state part ``advice_groups``: per group its settings as last seen
GROUP_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("group_id", pa.string()), ("sweep_ts", _MS), ("protocol", pa.string()),
    ("group_protocol", pa.string()), ("members", pa.int32()), ("static_members", pa.int32()),
    ("partitions", pa.int32()), ("gen_ts", _MS), ("session_timeout_s", pa.float64()),
    ("rebalance_timeout_s", pa.float64()), ("stable", pa.bool_()),
])

#: the rules, in the order their rows are written
RULES = ("session_timeout_crash", "restart_storm", "max_poll_interval", "eager_large_group",
         "rewind_after_rebalance", "retention_vs_catchup")

#: per rule, the settings its rows can name (the ``setting`` column): a scenario's expected
#: advice (``expect_advice`` in the simulator) names one of these
RULE_SETTINGS: dict[str, tuple[str, ...]] = {
    "session_timeout_crash": ("session.timeout.ms", "group.instance.id"),
    "restart_storm": ("group.instance.id", "partition.assignment.strategy", "group.protocol"),
    "max_poll_interval": ("max.poll.interval.ms",),
    "eager_large_group": ("partition.assignment.strategy",),
    "rewind_after_rebalance": ("commit on revocation",),
    "retention_vs_catchup": ("retention.ms",),
}

#: assignors that rebalance incrementally (the others stop every partition: eager)
_COOPERATIVE = ("cooperative-sticky",)
_ANOMALY_KINDS = ("rewind", "retention_loss", "rebalance_storm", "commit_gap")


@dataclass
class AdviceInputs:
    """A step's result tables (with ``cluster``), its member sweeps (the lake's ``members`` rows:
    ``cluster, group_id, sweep_ts, member_id, group_instance_id, assignment``, ``protocol``,
    ``group_protocol``, ``client_id`` and ``host`` when read), its generation records
    (:func:`lagscope.analytics.groups.generation_records`, None without the commit stream) and the
    carried parts."""

    rebalances: pa.Table
    anomalies: pa.Table
    lag_trends: pa.Table
    members: pa.Table
    generations: pa.Table | None
    carried_evidence: pa.Table | None
    carried_groups: pa.Table | None


@dataclass
class AdviceOutputs:
    """The ``advice`` rows (:data:`ADVICE_COLUMNS`, ``cluster``, ``date``) and the next state's parts."""

    advice: pa.Table
    evidence: pa.Table
    groups: pa.Table


# --------------------------------------------------------------------------------------------
# evidence
# --------------------------------------------------------------------------------------------

def _col(table: pa.Table, name: str, type_: pa.DataType) -> pa.Array:
    if name not in table.column_names:
        return pa.nulls(table.num_rows, type_)
    c = table.column(name).combine_chunks()
    if pa.types.is_dictionary(c.type):
        c = c.dictionary_decode()
    return c.cast(type_, safe=False)


def _evidence(cols: dict[str, Any], n: int) -> pa.Table:
    return pa.table({f.name: cols[f.name] if f.name in cols else pa.nulls(n, f.type) for f in EVIDENCE_SCHEMA},
                    schema=EVIDENCE_SCHEMA)


#: a member id the broker generated for a classic member: ``<client.id>-<UUID>``
_GENERATED_ID = re.compile(r"^(.*)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def member_identities(members: pa.Table, member_ids: pa.Array | None = None) -> dict[str, str]:
    """Member id → the member's *identity*, ``client.id@host``, from the ``members`` rows (those
    of ``member_ids`` only, when given): the same consumer restarted gets a new member id but
    keeps its identity, a different consumer has another. Ids the rows do not name are left out
    (:func:`identity_of` falls back on the id)."""
    if not members.num_rows or "member_id" not in members.column_names:
        return {}
    mid = _col(members, "member_id", pa.string())
    t = pa.table({"m": mid, "c": _col(members, "client_id", pa.string()), "h": _col(members, "host", pa.string())})
    keep = pc.and_(pc.is_valid(mid), pc.is_valid(t.column("c")))
    if member_ids is not None:
        keep = pc.and_(keep, pc.is_in(mid, value_set=member_ids))
    t = t.filter(keep).group_by(["m", "c", "h"], use_threads=False).aggregate([])
    return {m: f"{c}@{h or ''}" for m, c, h in zip(t.column("m").to_pylist(), t.column("c").to_pylist(),
                                                    t.column("h").to_pylist(), strict=True)}


def identity_of(member_id: str, known: dict[str, str]) -> str:
    """A member id's identity (:func:`member_identities`); an id the member rows do not name (a
    member seen by an earlier step's sweeps or only by the group-metadata records): the client.id
    of a broker-generated id (``<client.id>-<UUID>``), host unknown, else the id itself."""
    if member_id in known:
        return known[member_id]
    m = _GENERATED_ID.match(member_id)
    return f"{m.group(1) if m else member_id}@"


def same_identity(a: str, b: str) -> bool:
    """The same consumer: the same client.id, and the same host unless one is unknown."""
    ca, _, ha = a.rpartition("@")
    cb, _, hb = b.rpartition("@")
    return ca == cb and (ha == hb or not ha or not hb)


def rebalance_evidence(rebalances: pa.Table, members: pa.Table | None = None) -> pa.Table:
    """Closed rebalance windows → evidence rows (``outage_s`` = observed_over_bound · bound_s: a
    timed-out member's whole outage, else the window; ``joined``/``left``: the identities of the
    member ids after and not before, before and not after, by ``members``' rows). The identities
    are a Python loop over the step's closed windows (few: one per rebalance), not the lake's rows."""
    rb = rebalances.filter(pc.is_valid(rebalances.column("end_ts"))) if rebalances.num_rows else rebalances
    n = rb.num_rows
    start = _col(rb, "start_ts", _MS)
    ms = np.asarray(start.cast(pa.int64()).fill_null(0), dtype=np.int64)
    outage = doubles(_col(rb, "observed_over_bound", pa.float64())) * doubles(_col(rb, "bound_s", pa.float64()))
    before = _col(rb, "members_before", pa.list_(pa.string()))
    after = _col(rb, "members_after", pa.list_(pa.string()))
    ids = pa.concat_arrays([pc.list_flatten(before), pc.list_flatten(after)]) if n else pa.array([], pa.string())
    known = member_identities(members, ids) if members is not None else {}
    joined: list[list[str] | None] = []
    left: list[list[str] | None] = []
    for b, a in zip(before.to_pylist(), after.to_pylist(), strict=True):
        if b is None or a is None:
            joined.append(None)
            left.append(None)
            continue
        joined.append(sorted({identity_of(m, known) for m in set(a) - set(b)}))
        left.append(sorted({identity_of(m, known) for m in set(b) - set(a)}))
    return _evidence({
        "cluster": _col(rb, "cluster", pa.string()), "group_id": _col(rb, "group_id", pa.string()),
        "kind": pa.array(["rebalance"] * n, pa.string()), "key": pa.array([f"rebalance|{v}" for v in ms.tolist()],
                                                                           pa.string()),
        "start_ts": start, "end_ts": _col(rb, "end_ts", _MS), "cause": _col(rb, "cause", pa.string()),
        "duration_s": _col(rb, "duration_s", pa.float64()), "outage_s": pa.array(outage, mask=np.isnan(outage)),
        "bound_s": _col(rb, "bound_s", pa.float64()),
        "members_before": pc.list_value_length(before).cast(pa.int32()),
        "partitions_moved": _col(rb, "partitions_moved", pa.int32()),
        "joined": pa.array(joined, pa.list_(pa.string())), "left": pa.array(left, pa.list_(pa.string()))}, n)


def anomaly_evidence(anomalies: pa.Table) -> pa.Table:
    """The anomalies the rules read (:data:`_ANOMALY_KINDS`) → evidence rows (key: the anomaly's).
    A withdrawn row (a later step found the anomaly is no finding) becomes kind ``withdrawn``:
    it replaces the key's carried evidence, and no rule reads it. A retention loss not proven (a
    ``warning``: its consumer may hold the deleted records) is kind ``retention_deficit``, which
    no rule reads as a loss either (the group's retention risk minutes count the edge it reads at);
    proven by a later step, its key's evidence becomes the loss."""
    kind = _col(anomalies, "kind", pa.string())
    an = anomalies.filter(pc.is_in(kind, value_set=pa.array(_ANOMALY_KINDS))) if anomalies.num_rows else anomalies
    withdrawn = pc.fill_null(_col(an, "withdrawn", pa.bool_()), False)
    kind = _col(an, "kind", pa.string())
    deficit = pc.fill_null(pc.and_(pc.equal(kind, "retention_loss"),
                                   pc.equal(_col(an, "severity", pa.string()), "warning")), False)
    return _evidence({
        "cluster": _col(an, "cluster", pa.string()), "group_id": _col(an, "group_id", pa.string()),
        "kind": pc.if_else(withdrawn, "withdrawn", pc.if_else(deficit, "retention_deficit", kind)),
        "key": _col(an, "key", pa.string()),
        "start_ts": _col(an, "start_ts", _MS), "end_ts": _col(an, "end_ts", _MS),
        "magnitude": _col(an, "magnitude", pa.float64())}, an.num_rows)


def risk_evidence(lag_trends: pa.Table) -> pa.Table:
    """Per group and UTC day of the step's minutes: ``n`` the minutes in which a partition's
    retention headroom was below the group's catch-up ETA (the group row's), ``magnitude`` the
    day's worst catch-up ETA, ``low_s`` its least headroom (s); days with neither omitted."""
    if not lag_trends.num_rows:
        return EVIDENCE_SCHEMA.empty_table()
    cl, gr = _col(lag_trends, "cluster", pa.string()), _col(lag_trends, "group_id", pa.string())
    is_group = np.asarray(pc.is_null(_col(lag_trends, "topic", pa.string())), dtype=bool)
    is_part = np.asarray(pc.is_valid(_col(lag_trends, "partition", pa.int32())), dtype=bool)
    t = seconds(_col(lag_trends, "window_start", _MS))
    eta = np.where(is_group, doubles(_col(lag_trends, "catchup_eta_s", pa.float64())), np.nan)
    head = np.where(is_part, doubles(_col(lag_trends, "retention_headroom_s", pa.float64())), np.nan)
    # per group-minute: the group's ETA, the least partition headroom
    order, starts, _ = groups(key_code(cl, gr, pa.array(np.round(t * 1000).astype(np.int64))))
    m_eta, m_head = gmax(eta[order], starts), gmin(head[order], starts)
    first = order[starts]
    at_risk = (~np.isnan(m_eta) & ~np.isnan(m_head) & (m_head < m_eta)).astype(np.float64)
    day = np.floor(t[first] / 86400.0)
    mt = t[first]
    # per group-day
    dcode = key_code(cl.take(pa.array(first)), gr.take(pa.array(first)), pa.array(day.astype(np.int64)))
    o2, s2, _ = groups(dcode)
    keep = ~(np.isnan(gmax(m_eta[o2], s2)) & np.isnan(gmin(m_head[o2], s2)))
    rows = first[o2[s2]][keep]
    days = day[o2[s2]][keep]
    n = len(rows)
    return _evidence({
        "cluster": cl.take(pa.array(rows)), "group_id": gr.take(pa.array(rows)),
        "kind": pa.array(["risk_day"] * n, pa.string()),
        "key": pa.array([f"risk_day|{int(d)}" for d in days], pa.string()),
        "start_ts": timestamps(gmin(mt[o2], s2)[keep]), "end_ts": timestamps(gmax(mt[o2], s2)[keep] + 60.0),
        "magnitude": _nd(gmax(m_eta[o2], s2)[keep]), "low_s": _nd(gmin(m_head[o2], s2)[keep]),
        "n": pa.array(np.nan_to_num(gsum(at_risk[o2], s2)[keep]).astype(np.int64))}, n)


def _nd(v: _F) -> pa.Array:
    return pa.array(v, pa.float64(), mask=np.isnan(v))


def merge_evidence(carried: pa.Table | None, fresh: pa.Table, *, keep_from: dt.datetime) -> pa.Table:
    """Carried and fresh evidence: one row per (cluster, group, key), the fresh one where both
    have it (an anomaly or window written again), except ``risk_day`` rows, which add up (a
    day's minutes come in several steps: counts summed, the worst ETA and least headroom kept);
    rows that ended before ``keep_from`` expire."""
    parts = [fresh]
    if carried is not None and carried.num_rows:
        # evidence carried from a version without the identities: null (unknown) there
        missing = [f for f in EVIDENCE_SCHEMA if f.name not in carried.column_names]
        for f in missing:
            carried = carried.append_column(f, pa.nulls(carried.num_rows, f.type))
        parts.insert(0, carried.select(EVIDENCE_SCHEMA.names).cast(EVIDENCE_SCHEMA))
    ev = pa.concat_tables(parts)
    if not ev.num_rows:
        return ev
    risk = np.asarray(pc.equal(ev.column("kind"), "risk_day"), dtype=bool)
    other = ev.filter(pa.array(~risk))
    if other.num_rows:
        order, starts, _ = groups(key_code(other.column("cluster"), other.column("group_id"), other.column("key")))
        last = np.append(starts[1:], len(order)) - 1  # stable sort: the last row of a key is the freshest
        other = other.take(pa.array(order[last]))
    rk = ev.filter(pa.array(risk))
    if rk.num_rows:
        o, s, _ = groups(key_code(rk.column("cluster"), rk.column("group_id"), rk.column("key")))
        head = rk.take(pa.array(o[s]))
        num, _ok = longs(rk.column("n"))
        rk = pa.table({
            **{c: head.column(c) for c in ("cluster", "group_id", "kind", "key")},
            "start_ts": timestamps(gmin(seconds(rk.column("start_ts"))[o], s)),
            "end_ts": timestamps(gmax(seconds(rk.column("end_ts"))[o], s)),
            **{c: pa.nulls(len(s), EVIDENCE_SCHEMA.field(c).type) for c in _WINDOW_ONLY},
            "magnitude": _nd(gmax(doubles(rk.column("magnitude"))[o], s)),
            "low_s": _nd(gmin(doubles(rk.column("low_s"))[o], s)),
            "n": pa.array(np.add.reduceat(num[o], s), pa.int64())}, schema=EVIDENCE_SCHEMA)
    ev = pa.concat_tables([other, rk])
    end = pc.coalesce(ev.column("end_ts"), ev.column("start_ts"))
    return ev.filter(pc.greater_equal(end, pa.scalar(keep_from, _MS)))


def group_settings(members: pa.Table, generations: pa.Table | None, carried: pa.Table | None) -> pa.Table:
    """Per group, its settings as last seen (:data:`GROUP_SCHEMA`): the latest member sweep's
    (the latest that saw the group ``Stable`` with a member, else the latest with a member, when
    any has one) group protocol, member, static member and assigned partition counts, and
    whether that sweep was Stable (``stable``: a carried row competes as what it was, so steps
    pick as one pass over their sweeps would; a row carried from before the flag counts as
    Stable); the assignor of the latest sweep that names one; the latest generation record's
    session and rebalance timeouts (each side from the carried row when the step saw none
    newer)."""
    parts = []
    if members.num_rows:
        cl, gr = _col(members, "cluster", pa.string()), _col(members, "group_id", pa.string())
        ts = _col(members, "sweep_ts", _MS)
        code = key_code(cl, gr, ts.cast(pa.int64()))
        order, starts, _ = groups(code)
        mid, iid = _col(members, "member_id", pa.string()), _col(members, "group_instance_id", pa.string())
        nassign = (np.asarray(pc.list_value_length(members.column("assignment")).fill_null(0), dtype=np.float64)
                   if "assignment" in members.column_names else np.zeros(members.num_rows))
        has_m = np.asarray(mid.is_valid(), dtype=np.float64)
        is_stable = np.asarray(pc.equal(_col(members, "group_state", pa.string()), "Stable").fill_null(False),
                               dtype=np.float64)
        has_i = np.asarray(iid.is_valid(), dtype=np.float64)
        first = order[starts]
        parts.append(pa.table({
            "cluster": cl.take(pa.array(first)), "group_id": gr.take(pa.array(first)),
            "sweep_ts": ts.take(pa.array(first)),
            "protocol": _col(members, "protocol", pa.string()).take(pa.array(first)),
            "group_protocol": _col(members, "group_protocol", pa.string()).take(pa.array(first)),
            "members": pa.array(np.nan_to_num(gsum(has_m[order], starts)).astype(np.int32)),
            "static_members": pa.array(np.nan_to_num(gsum(has_i[order], starts)).astype(np.int32)),
            "partitions": pa.array(np.nan_to_num(gsum(nassign[order], starts)).astype(np.int32)),
            "gen_ts": pa.nulls(len(starts), _MS), "session_timeout_s": pa.nulls(len(starts), pa.float64()),
            "rebalance_timeout_s": pa.nulls(len(starts), pa.float64()),
            "stable": pa.array(np.nan_to_num(gsum(is_stable[order], starts)) > 0)}, schema=GROUP_SCHEMA))
    if generations is not None and generations.num_rows:
        g = generations
        parts.append(pa.table({
            "cluster": _col(g, "cluster", pa.string()), "group_id": _col(g, "group_id", pa.string()),
            "sweep_ts": pa.nulls(g.num_rows, _MS), "protocol": pa.nulls(g.num_rows, pa.string()),
            "group_protocol": pa.nulls(g.num_rows, pa.string()), "members": pa.nulls(g.num_rows, pa.int32()),
            "static_members": pa.nulls(g.num_rows, pa.int32()), "partitions": pa.nulls(g.num_rows, pa.int32()),
            "gen_ts": timestamps(doubles(g.column("gen_t"))),
            "session_timeout_s": _col(g, "session_timeout_s", pa.float64()),
            "rebalance_timeout_s": _col(g, "rebalance_timeout_s", pa.float64()),
            "stable": pa.nulls(g.num_rows, pa.bool_())}, schema=GROUP_SCHEMA))
    if carried is not None and carried.num_rows:  # the settings an earlier step picked by this rule
        if "stable" not in carried.column_names:  # state written before the flag: its pick counts as Stable
            carried = carried.append_column("stable", pa.array(np.ones(carried.num_rows, bool)))
        parts.append(carried.select(GROUP_SCHEMA.names).cast(GROUP_SCHEMA))
    if not parts:
        return GROUP_SCHEMA.empty_table()
    rows = pa.concat_tables(parts)
    order, starts, gid = groups(key_code(rows.column("cluster"), rows.column("group_id")))
    sweep_t = seconds(rows.column("sweep_ts"))[order]
    gen_t = seconds(rows.column("gen_ts"))[order]
    timed = np.asarray(pc.or_(pc.is_valid(rows.column("session_timeout_s")),
                              pc.is_valid(rows.column("rebalance_timeout_s"))), dtype=bool)[order]
    # the latest row of each side (ties: the first, the fresh rows coming before the carried); of
    # the sweeps, the latest that saw the group Stable with a member (a group that emptied, e.g.
    # stopped at the end of a run, keeps the settings its members had: an empty group has no
    # assignor; and one caught rebalancing as its members shut down holds only some of them: a
    # size that halved doubled the static-membership estimate), else the latest with a member,
    # else the latest
    with_members = np.asarray(pc.greater(rows.column("members"), 0).fill_null(False), dtype=bool)[order]
    stable = np.asarray(rows.column("stable").fill_null(False), dtype=bool)[order]
    s_pick = gargmax(np.where(with_members & stable, sweep_t, np.nan), starts, gid)
    s_pick = np.where(s_pick >= 0, s_pick, gargmax(np.where(with_members, sweep_t, np.nan), starts, gid))
    s_pick = np.where(s_pick >= 0, s_pick, gargmax(sweep_t, starts, gid))
    # the assignor: from the latest sweep that names one (a group caught mid-rebalance names none
    # yet, and a churning group often is mid-rebalance), else as the other sweep settings
    named = np.asarray(pc.not_equal(rows.column("protocol"), "").fill_null(False), dtype=bool)[order]
    p_pick = gargmax(np.where(named, sweep_t, np.nan), starts, gid)
    p_pick = np.where(p_pick >= 0, p_pick, s_pick)
    g_pick = gargmax(np.where(timed, gen_t, np.nan), starts, gid)
    ordered = rows.take(pa.array(order))
    k = len(starts)

    def side(pick: npt.NDArray[np.int64], names: tuple[str, ...]) -> dict[str, pa.Array]:
        idx = pa.array(np.where(pick >= 0, pick, 0), mask=pick < 0)
        return {c: ordered.column(c).take(idx) for c in names}

    return pa.table({
        "cluster": ordered.column("cluster").take(pa.array(starts)),
        "group_id": ordered.column("group_id").take(pa.array(starts)),
        **side(s_pick, ("sweep_ts", "group_protocol", "members", "static_members", "partitions", "stable")),
        **side(p_pick, ("protocol",)),
        **side(g_pick, ("gen_ts", "session_timeout_s", "rebalance_timeout_s"))}, schema=GROUP_SCHEMA) if k else \
        GROUP_SCHEMA.empty_table()


# --------------------------------------------------------------------------------------------
# the rules
# --------------------------------------------------------------------------------------------

@dataclass
class _Group:
    """One group's evidence and settings, as Python rows (a group's evidence is small)."""

    cluster: str
    group_id: str
    windows: list[dict[str, Any]]
    anomalies: dict[str, list[dict[str, Any]]]
    risk_days: list[dict[str, Any]]
    settings: dict[str, Any]
    defaults: AnalyticsConfig


@dataclass
class _Advice:
    rule: str
    setting: str
    current_value: str | None
    suggested: str
    expected_effect: str
    measure: str
    unit: str
    current_amount: float | None
    expected_amount: float | None
    evidence: str
    count: int
    first: dt.datetime
    last: dt.datetime
    confidence: str


def confidence(count: int, minimum: int, current_known: bool) -> str:
    """``high`` with at least 3× the rule's minimum evidence and the setting's current value known
    (from the group-metadata records); ``medium`` with 2× the minimum or the value known; else
    ``low`` (the minimum itself, or a value assumed from the defaults)."""
    if count >= 3 * minimum and current_known:
        return "high"
    if count >= 2 * minimum or current_known:
        return "medium"
    return "low"


def _s(x: float) -> str:
    """A duration for a sentence: ``~45 s``, ``~12 min``, ``~3.5 h``."""
    if x < 600:
        return f"~{x:.0f} s"
    if x < 7200:
        return f"~{x / 60:.0f} min"
    return f"~{x / 3600:.1f} h"


def _ms(x: float) -> str:
    return f"{round(x * 1000)}"


def _span(rows: list[dict[str, Any]]) -> tuple[dt.datetime, dt.datetime]:
    first = min(r["start_ts"] for r in rows)
    last = max((r["end_ts"] or r["start_ts"]) for r in rows)
    return first, last


def _days(rows: list[dict[str, Any]]) -> str:
    a, b = _span(rows)
    d = max(1, math.ceil((b - a).total_seconds() / 86400))
    return f"{d} day{'s' if d != 1 else ''}"


def comeback(w: dict[str, Any], windows: list[dict[str, Any]], r: AdviceRulesConfig) -> dict[str, Any] | None:
    """The one definition of a **restart** (session_timeout_crash and restart_storm use it): a
    member that left in window ``w`` (its ``left`` identities) joined again, the same identity
    (:func:`same_identity`), within ``restart_within_s`` after ``w``'s end: in ``w`` itself (a
    quick restart: gone and back in one rebalance) or in a later window starting by then. The
    window it came back in (the earliest), or None: nobody who left came back, or the identities
    are unknown (then nothing is a restart: a join of another consumer is churn, not a restart)."""
    gone = w.get("left") or []
    if not gone:
        return None
    limit = w["end_ts"] + dt.timedelta(seconds=r.restart_within_s)
    for x in [w, *(x for x in windows if w["start_ts"] < x["start_ts"] <= limit)]:
        if any(same_identity(a, b) for a in gone for b in x.get("joined") or []):
            return x
    return None


def session_timeout_crash(g: _Group, r: AdviceRulesConfig) -> _Advice | None:
    """Crashed members keep their partitions unprocessed for the whole session timeout: ≥
    ``min_evidence`` session_timeout windows. When at least ``restart_share`` of them were restarts
    (:func:`comeback`: the timed-out member back, the same client.id and host, within
    ``restart_within_s``) and the group is not static: static membership, the member's partitions
    then wait for it through a restart instead of moving twice; else a shorter session timeout
    (when it is above ``short_session_s``) with heartbeat.interval.ms at most a third of it."""
    crashes = [w for w in g.windows if w["cause"] == "session_timeout" and w["outage_s"] is not None]
    if len(crashes) < r.min_evidence:
        return None
    outage = statistics.median(w["outage_s"] for w in crashes)
    session = g.settings.get("session_timeout_s")
    known = session is not None
    sess = float(session) if session is not None else g.defaults.session_timeout_s
    restarts = []
    for w in crashes:
        quiet = w["end_ts"] - dt.timedelta(seconds=w["outage_s"])
        back = comeback(w, g.windows, r)
        if back is w:  # back within the window itself: one rebalance, the member away until its end
            restarts.append(((w["end_ts"] - quiet).total_seconds(), w["duration_s"] or 0.0))
        elif back is not None:
            stop = (w["duration_s"] or 0.0) + (back["duration_s"] or 0.0)
            restarts.append(((back["start_ts"] - quiet).total_seconds(), stop))
    first_ts, last_ts = _span(crashes)
    n = len(crashes)
    statics = g.settings.get("static_members") or 0
    if restarts and len(restarts) >= r.restart_share * n and not statics and len(restarts) >= r.min_evidence:
        away = statistics.median(x for x, _ in restarts)
        cur = statistics.median(y for _, y in restarts)
        need = max(sess, math.ceil(away * 1.5))
        return _Advice(
            "session_timeout_crash", "group.instance.id", "none (dynamic members)",
            f"static membership: a group.instance.id per consumer, session.timeout.ms ≥ {_ms(need)}",
            f"{len(restarts)} of {n} timed-out members came back within {_s(away)}: with static membership a restart "
            f"would not rebalance, the group's {_s(cur)} of rebalancing per restart (two rebalances) would drop to "
            f"~0 s, the member's own partitions waiting {_s(away)} for it",
            "group_stop_s", "s", cur, 0.0,
            f"{n} session timeouts in {_days(crashes)}, {len(restarts)} of them restarts (the same client.id and "
            f"host back within {_s(r.restart_within_s)}); median outage {_s(outage)}",
            n, first_ts, last_ts, confidence(len(restarts), r.min_evidence, known))
    if sess <= r.short_session_s:
        return None
    new = r.short_session_s
    hb = math.floor(new / 3)
    expected = max(new, outage - (sess - new))
    cur_value = f"session.timeout.ms={_ms(sess)}" if known else None
    return _Advice(
        "session_timeout_crash", "session.timeout.ms", cur_value,
        f"session.timeout.ms={_ms(new)} with heartbeat.interval.ms ≤ {hb * 1000}",
        f"a crashed member's partitions would wait {_s(new)} instead of {_s(sess)} for the coordinator: outages "
        f"of {_s(outage)} would shrink to {_s(expected)}",
        "outage_s", "s", outage, expected,
        f"{n} members timed out in {_days(crashes)} (session timeout {_s(sess)}"
        f"{'' if known else ', assumed: no group-metadata record'}); median outage {_s(outage)}",
        n, first_ts, last_ts, confidence(n, r.min_evidence, known))


def restart_storm(g: _Group, r: AdviceRulesConfig) -> _Advice | None:
    """Join/leave storms: rebalance_storm findings holding at least ``min_storm_windows`` join/leave
    windows in all. The advice is the remedy that shortens the **average partition's pause per
    storm** (``partition_pause_s``) most, given only when it predicts at least ``min_gain`` of it
    saved:

    - today, on an eager assignor every partition stops in every window: the windows' time per
      storm (median); on a cooperative one only the moved partitions do: that × the moved share;
    - **static membership** (a dynamic group whose storm is at least ``restart_share`` restarts,
      :func:`comeback`): no rebalance for a restart within the session timeout, but each
      restarting member's own partitions (1/members of them) wait for it through its time away
      (its leave → its return): restarts per storm × time away (median) / members. It beats
      the rebalances it avoids only when a restart is quick next to them;
    - **cooperative-sticky** (an eager assignor): only the moved partitions pause (a sticky
      assignor moves about one member's share, :func:`_sticky_share`), but a join then takes two
      rounds, and the moved partitions are held by nobody through the second, which lasts about
      one heartbeat interval (the members that revoked nothing learn of it from their next
      heartbeat); a leave takes one round, the leaver's partitions waiting for it as they do
      today: per storm, the share × (joins × heartbeat.interval.ms + the leave windows' time). The
      heartbeat interval is ``analytics.heartbeat_s`` (the group-metadata records do not carry
      it). So cooperative-sticky helps groups whose windows are long next to a heartbeat (slow
      rejoiners: long batches between polls), not those that rebalance in a fraction of one;
    - otherwise (already cooperative, or the assignor unknown) the consumer group protocol
      (KIP-848), without a prediction. None for a KIP-848 group (its reconciliation is
      incremental already).

    Churn (different consumers joining and leaving: scale-out and in, short-lived jobs) never gets
    static membership: it keeps a place only for the *same* member coming back (a new member still
    rebalances, and a departed static member holds its partitions for the whole session timeout)."""
    storms = g.anomalies.get("rebalance_storm", [])
    inside: list[dict[str, Any]] = []
    per_storm: list[float] = []
    rounds: list[float] = []
    for s in storms:
        end = s["end_ts"] or s["start_ts"]
        ws = [w for w in g.windows if w["cause"] in ("join", "leave") and s["start_ts"] <= w["start_ts"] <= end]
        if ws:
            inside += ws
            per_storm.append(sum(w["duration_s"] or 0.0 for w in ws))
            # cooperative: a join's moved partitions wait out the second round (a heartbeat), a
            # leave's the window (as today); times the sticky share, below
            rounds.append(sum(w["duration_s"] or 0.0 for w in ws if w["cause"] == "leave")
                          + g.defaults.heartbeat_s * sum(w["cause"] == "join" for w in ws))
    if len(inside) < max(r.min_storm_windows, r.min_evidence):
        return None
    gp = g.settings.get("group_protocol")
    if gp == "consumer":
        return None  # KIP-848 already: its reconciliation is incremental, no group-wide stop to advise away
    cur = statistics.median(per_storm)
    first_ts, last_ts = _span(inside)
    # restarts: the storm's leaves whose member came back; the windows a restart accounts for
    leaves = [w for w in inside if w.get("left")]
    restart_windows: set[dt.datetime] = set()
    away: list[float] = []
    for w in leaves:
        back = comeback(w, g.windows, r)
        if back is not None:
            restart_windows |= {w["start_ts"], back["start_ts"]}
            away.append((w["duration_s"] or 0.0) if back is w else (back["start_ts"] - w["start_ts"]).total_seconds())
    restarts = len(away)
    share = sum(w["start_ts"] in restart_windows for w in inside) / len(inside)
    restarted = f"{restarts} of {len(leaves)} leaves were restarts (the same client.id and host back within " \
                f"{_s(r.restart_within_s)})"
    evidence = (f"{len(storms)} rebalance storm{'s' if len(storms) != 1 else ''} in {_days(inside)} with "
                f"{len(inside)} join/leave windows, {_s3(cur)} of rebalancing per storm (median); ")
    is_restarts = share >= r.restart_share and restarts > 0
    if is_restarts:
        evidence += restarted
    else:
        came = {i for w in inside for i in w.get("joined") or []}
        went = {i for w in inside for i in w.get("left") or []}
        evidence += f"churn: {len(came)} distinct members joined, {len(went)} left, {restarted}"
    protocol = g.settings.get("protocol")
    eager = protocol is not None and protocol not in _COOPERATIVE
    statics = g.settings.get("static_members") or 0
    known = g.settings.get("members") is not None
    moved = _moved_share(inside, g.settings)
    now = cur if eager else cur * (moved if moved is not None else 1.0)
    worth = now * (1.0 - r.min_gain)
    sticky = _sticky_share(inside, g.settings)
    coop = statistics.median(rounds) * sticky if eager else None
    static = None
    if is_restarts and not statics:
        # the restarts' total time away per storm, as ``cur`` totals the windows' (a median × a
        # count against a sum would favour it whenever one away time is long: a one-member
        # group's restarts are its windows, and static membership cannot shorten them)
        static = restarts / len(per_storm) * statistics.mean(away) / _members(inside, g.settings)
    coop_txt = (f"cooperative-sticky would pause only the moved partitions, {_s3(coop)} per partition per storm"
                if coop is not None else "")
    if static is not None and static <= worth:
        return _Advice(
            "restart_storm", "group.instance.id", "none (dynamic members)",
            "static membership: a group.instance.id per consumer, session.timeout.ms above a restart's time",
            f"a member restarting within its session timeout keeps its partitions: no rebalance (today "
            f"{_s3(cur)} per storm, every partition stopped); each restarting member's own partitions wait for "
            f"it instead, {_s3(statistics.mean(away))} per restart (mean): an average partition's pause per storm "
            f"{_s3(now)} → {_s3(static)}" + (f" ({coop_txt})" if coop_txt else ""),
            "partition_pause_s", "s", now, static, evidence, len(inside), first_ts, last_ts,
            confidence(len(inside), r.min_storm_windows, known))
    if static is not None:
        evidence += (f"; static membership would not help: a restart's {_s3(statistics.mean(away))} away (mean) is "
                     f"longer than the stops it avoids (an average partition would wait ~{_s3(static)} per storm, "
                     f"against {_s3(now)} today)")
    if coop is not None:
        if coop > worth:
            return None
        return _Advice(
            "restart_storm", "partition.assignment.strategy", protocol,
            "cooperative-sticky (or group.protocol=consumer, KIP-848, on brokers ≥ 4.0)",
            f"only the moved partitions would pause (a sticky assignor moves about one member's share, "
            f"{sticky:.0%}, per join or leave; a join's through its second round, about a heartbeat interval, "
            f"{_s3(g.defaults.heartbeat_s)}): an average partition's pause per storm {_s3(now)} → {_s3(coop)}",
            "partition_pause_s", "s", now, coop, evidence, len(inside), first_ts, last_ts,
            confidence(len(inside), r.min_storm_windows, True))
    return _Advice(
        "restart_storm", "group.protocol", gp or "classic",
        "group.protocol=consumer (KIP-848) on brokers ≥ 4.0: members reconcile one at a time",
        f"no group-wide rebalance per join or leave: {_s3(cur)} of rebalancing per storm would shrink to the moved "
        f"partitions' handover",
        "storm_rebalance_s", "s", cur, None, evidence, len(inside), first_ts, last_ts,
        confidence(len(inside), r.min_storm_windows, gp is not None))


def _members(windows: list[dict[str, Any]], settings: dict[str, Any]) -> int:
    """The group's size: its settings' members (the latest Stable sweep's, :func:`group_settings`),
    else the windows' members before (median), at least 1."""
    n = settings.get("members")
    if not n:
        sizes = [w["members_before"] for w in windows if w.get("members_before")]
        n = statistics.median(sizes) if sizes else 1
    return max(1, int(n))


def _sticky_share(windows: list[dict[str, Any]], settings: dict[str, Any]) -> float:
    """The share of the partitions a cooperative-sticky assignor would move per window: what moved
    (:func:`_moved_share`; 1 when unknown), at most one member's share (a sticky assignor moves
    only the partitions of the member that left, or a joining member's share)."""
    moved = _moved_share(windows, settings)
    return min(moved if moved is not None else 1.0, 1.0 / _members(windows, settings))


def _s3(x: float) -> str:
    """Seconds for a pause that can be sub-second: ``~0.35 s`` below 10 s, else as :func:`_s`."""
    return f"~{x:.2f} s" if x < 10 else _s(x)


def _moved_share(windows: list[dict[str, Any]], settings: dict[str, Any]) -> float | None:
    total = settings.get("partitions")
    moved = [w["partitions_moved"] for w in windows if w["partitions_moved"] is not None]
    if not total or not moved:
        return None
    return float(min(1.0, statistics.median(moved) / total))


def max_poll_interval(g: _Group, r: AdviceRulesConfig) -> _Advice | None:
    """Members removed for exceeding max.poll.interval.ms: ≥ ``min_evidence`` max_poll_interval
    windows. A removed member was silent (its last progress → the group settled again) at least
    the interval; commit gaps of the group that did not end in a removal show how long its
    batches take. Suggested: the interval at ``poll_margin`` × the longest silence, in whole
    minutes, or max.poll.records halved (a batch's time follows its records).

    The effect is the removals' rebalances, not the silence: a member whose batch outlasts the
    interval is removed (the group rebalances: the removal window) and joins again when its batch
    is done (the rejoin: the first join window after the removal, within ``restart_within_s``);
    with a longer interval neither happens, but the member's own partitions still wait for its
    batch, which no setting of the interval shortens. So ``rebalance_s``: per removal, the removal
    window + its rejoin window (median) → 0."""
    removed = [w for w in g.windows if w["cause"] == "max_poll_interval" and w["outage_s"] is not None]
    if len(removed) < r.min_evidence:
        return None
    rebal = g.settings.get("rebalance_timeout_s")
    known = rebal is not None
    interval = float(rebal) if rebal is not None else g.defaults.rebalance_timeout_s
    silence = statistics.median(w["outage_s"] for w in removed)
    longest = max(w["outage_s"] for w in removed)
    gaps = [a["magnitude"] for a in g.anomalies.get("commit_gap", []) if a["magnitude"] is not None]
    batch = max([longest, *gaps])
    new = max(interval, math.ceil(batch * r.poll_margin / 60.0) * 60.0)
    joins = [w for w in g.windows if w["cause"] == "join"]
    starts = sorted(w["start_ts"] for w in removed)
    stops = []
    for w in removed:
        nxt = next((t for t in starts if t > w["start_ts"]), None)
        back = [j for j in joins if w["end_ts"] <= j["start_ts"] <= w["end_ts"] + dt.timedelta(
            seconds=r.restart_within_s) and (nxt is None or j["start_ts"] < nxt)]
        rejoin = (min(back, key=lambda j: j["start_ts"])["duration_s"] or 0.0) if back else 0.0
        stops.append((w["duration_s"] or 0.0) + rejoin)
    cur = statistics.median(stops)
    first_ts, last_ts = _span(removed)
    gap_txt = f", commit gaps up to {_s(max(gaps))}" if gaps else ""
    return _Advice(
        "max_poll_interval", "max.poll.interval.ms", f"max.poll.interval.ms={_ms(interval)}" if known else None,
        f"max.poll.interval.ms={_ms(new)}, or max.poll.records halved",
        f"batches of up to {_s(batch)} would fit the interval: the {len(removed)} removals and their rebalances "
        f"(the removal and the rejoin, {cur:.1f} s per removal) would not happen; the member's own partitions "
        f"still wait for its batch",
        "rebalance_s", "s", cur, 0.0,
        f"{len(removed)} members removed for exceeding the {_s(interval)} poll interval in {_days(removed)}"
        f"{'' if known else ' (assumed: no group-metadata record)'}; silent {_s(silence)} (median){gap_txt}",
        len(removed), first_ts, last_ts, confidence(len(removed), r.min_evidence, known))


def eager_large_group(g: _Group, r: AdviceRulesConfig) -> _Advice | None:
    """Eager rebalancing stops every partition of a large group for long windows: a classic group
    on an eager assignor, ≥ ``min_evidence`` windows with at least ``large_members`` members before
    and lasting at least ``long_window_s``. Cooperative-sticky pauses only the moved partitions:
    the average partition's pause per window becomes the window × moved / assigned partitions, at
    most one member's share (:func:`_sticky_share`)."""
    protocol = g.settings.get("protocol")
    if protocol is None or protocol in _COOPERATIVE or g.settings.get("group_protocol") == "consumer":
        return None
    long_ = [w for w in g.windows if (w["members_before"] or 0) >= r.large_members
             and (w["duration_s"] or 0.0) >= r.long_window_s]
    if len(long_) < r.min_evidence:
        return None
    if _moved_share(long_, g.settings) is None:
        return None
    share = _sticky_share(long_, g.settings)
    cur = statistics.median(w["duration_s"] for w in long_)
    exp = cur * share
    first_ts, last_ts = _span(long_)
    return _Advice(
        "eager_large_group", "partition.assignment.strategy", protocol,
        "cooperative-sticky (or group.protocol=consumer, KIP-848, on brokers ≥ 4.0)",
        f"only the moved partitions (~{share:.0%} of {g.settings['partitions']}) would pause: an average partition's "
        f"pause per rebalance would shrink from {_s(cur)} to {_s(exp)}",
        "partition_pause_s", "s", cur, exp,
        f"{len(long_)} rebalances of {statistics.median(w['members_before'] for w in long_):.0f}+ members in "
        f"{_days(long_)} stopped all {g.settings['partitions']} partitions for {_s(cur)} (median), the '{protocol}' "
        f"assignor being eager",
        len(long_), first_ts, last_ts, confidence(len(long_), r.min_evidence, True))


def rewind_after_rebalance(g: _Group, r: AdviceRulesConfig) -> _Advice | None:
    """Commits that lag the processing reprocess after every rebalance: rewinds starting from a
    window's start to ``rewind_after_s`` after its end, after ≥ ``min_evidence`` windows. The
    pattern is in the rebalances, not the partitions: one rebalance followed by rewinds of several
    partitions (an operator's reset that happened to come after it) is one occurrence. Commit
    synchronously on revocation (``onPartitionsRevoked``), or more often: the new owner then
    starts where the old one stopped."""
    rewinds = g.anomalies.get("rewind", [])
    hits: list[dict[str, Any]] = []
    windows_hit: set[dt.datetime] = set()
    for a in rewinds:
        for w in g.windows:
            if w["start_ts"] <= a["start_ts"] <= w["end_ts"] + dt.timedelta(seconds=r.rewind_after_s):
                hits.append(a)
                windows_hit.add(w["start_ts"])
                break
    if len(windows_hit) < r.min_evidence:
        return None
    total = sum(a["magnitude"] or 0.0 for a in hits)
    per = total / max(1, len(windows_hit))
    first_ts, last_ts = _span(hits)
    return _Advice(
        "rewind_after_rebalance", "commit on revocation", None,
        "commit synchronously in onPartitionsRevoked (or commit more often: a lower auto.commit.interval.ms)",
        f"the new owner would start where the old one stopped: ~{per:,.0f} messages reprocessed per rebalance would "
        f"drop to ~0",
        "messages_reprocessed", "messages", per, 0.0,
        f"{len(hits)} rewinds right after {len(windows_hit)} rebalances in {_days(hits)}: {total:,.0f} messages "
        f"processed twice",
        len(hits), first_ts, last_ts, confidence(len(windows_hit), r.min_evidence, True))


def retention_vs_catchup(g: _Group, r: AdviceRulesConfig) -> _Advice | None:
    """Retention headroom shorter than the group's worst catch-up: a proven retention loss (≥
    ``min_retention_losses``: unambiguous, messages were never processed; one not proven is no
    such evidence) or ≥ ``min_risk_minutes``
    minutes in which a partition's headroom was below the group's catch-up ETA. Suggested:
    retention (or consumer capacity) giving a headroom of ``retention_margin`` × the worst catch-up."""
    losses = g.anomalies.get("retention_loss", [])
    risk = sum(d["n"] or 0 for d in g.risk_days)
    if len(losses) < r.min_retention_losses and risk < r.min_risk_minutes:
        return None
    etas = [d["magnitude"] for d in g.risk_days if d["magnitude"] is not None]
    lows = [d["low_s"] for d in g.risk_days if d["low_s"] is not None]
    worst = max(etas) if etas else None
    low = 0.0 if losses else (min(lows) if lows else None)
    lost = sum(a["magnitude"] or 0.0 for a in losses)
    rows = losses + [d for d in g.risk_days if d["n"]]
    first_ts, last_ts = _span(rows)
    parts = []
    if losses:
        parts.append(f"{len(losses)} retention loss{'es' if len(losses) != 1 else ''} ({lost:,.0f} messages never "
                     f"processed)")
    if risk:
        parts.append(f"{risk} minutes with a partition's headroom below the group's catch-up ETA")
    tail = f"; worst catch-up {_s(worst)}" if worst is not None else ""
    tail += f", least headroom {_s(low)}" if low is not None else ""
    count = len(losses) if len(losses) >= r.min_retention_losses else risk
    minimum = r.min_retention_losses if len(losses) >= r.min_retention_losses else r.min_risk_minutes
    saved = f": {lost:,.0f} messages would not have been lost" if losses else ""
    if worst is not None:
        target: float | None = r.retention_margin * worst
        suggested = (f"retention.ms ≥ {_ms(r.retention_margin * worst)} on the group's topics, or consumer capacity "
                     f"to catch up within the headroom")
        effect = (f"a headroom of {_s(r.retention_margin * worst)} ({r.retention_margin:g}× the worst catch-up of "
                  f"{_s(worst)}) would keep the committed offsets above the log start{saved}")
    else:
        target = None
        suggested = "a longer retention.ms on the group's topics, or more consumer capacity"
        effect = f"the committed offsets would stay above the log start{saved}"
    return _Advice(
        "retention_vs_catchup", "retention.ms", None, suggested, effect,
        "retention_headroom_s", "s", low, target,
        f"{' and '.join(parts)} in {_days(rows)}{tail}",
        count, first_ts, last_ts, confidence(count, minimum, False))


#: rule name → rule (each a predicate-like function: the advice, or None)
_RULE_FUNCS: dict[str, Callable[[_Group, AdviceRulesConfig], _Advice | None]] = {
    "session_timeout_crash": session_timeout_crash, "restart_storm": restart_storm,
    "max_poll_interval": max_poll_interval, "eager_large_group": eager_large_group,
    "rewind_after_rebalance": rewind_after_rebalance, "retention_vs_catchup": retention_vs_catchup}


# --------------------------------------------------------------------------------------------
# the step's advice
# --------------------------------------------------------------------------------------------

def retention_start(as_of: dt.datetime, retention_days: int | None) -> dt.datetime:
    """The start of the evidence window: ``retention_days`` before ``as_of`` (30 when the results
    are kept for ever: advice follows what the group does now)."""
    return as_of - dt.timedelta(days=retention_days or 30)


def advise(inp: AdviceInputs, settings: AnalyticsConfig, as_of: dt.datetime,
           rules: AdviceRulesConfig | None = None) -> AdviceOutputs:
    """The step's advice rows and the next state's parts (module doc).

    >>> out = advise(AdviceInputs(rebalances=rb, anomalies=an, lag_trends=lt, members=m, generations=None,
    ...                           carried_evidence=None, carried_groups=None), settings, as_of)  # doctest: +SKIP
    >>> out.advice.column("rule")  # doctest: +SKIP
    """
    r = rules or settings.advice
    fresh = pa.concat_tables([rebalance_evidence(inp.rebalances, inp.members), anomaly_evidence(inp.anomalies),
                              risk_evidence(inp.lag_trends)])
    evidence = merge_evidence(inp.carried_evidence, fresh, keep_from=retention_start(as_of, settings.retention))
    gset = group_settings(inp.members, inp.generations, inp.carried_groups)
    by_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in _candidates(evidence).to_pylist():
        by_group.setdefault((row["cluster"], row["group_id"]), []).append(row)
    known = {(row["cluster"], row["group_id"]): row for row in gset.to_pylist()}
    out: list[dict[str, Any]] = []
    for (cluster, group_id), rows in sorted(by_group.items()):
        anomalies: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            if row["kind"] in _ANOMALY_KINDS:
                anomalies.setdefault(row["kind"], []).append(row)
        g = _Group(cluster, group_id, windows=sorted((x for x in rows if x["kind"] == "rebalance"),
                                                     key=lambda x: x["start_ts"]),
                   anomalies=anomalies, risk_days=[x for x in rows if x["kind"] == "risk_day"],
                   settings=known.get((cluster, group_id), {}), defaults=settings)
        for name in RULES:
            got = _RULE_FUNCS[name](g, r)
            if got is not None:
                out.append(_row(cluster, group_id, got))
    return AdviceOutputs(advice=_advice_table(out, as_of), evidence=evidence, groups=gset)


def _candidates(evidence: pa.Table) -> pa.Table:
    """The evidence the rules read, of the groups a rule could advise: those with a rebalance
    window or an anomaly, or a minute at retention risk (a lagging group's risk days alone, with
    no minute at risk, advise nothing: those groups are many). A group's risk days are summed up
    first into one ``risk_day`` row (minutes at risk, the worst catch-up, the least headroom, the
    span of the days with minutes at risk), so that few rows become Python rows."""
    if not evidence.num_rows:
        return evidence
    code = key_code(evidence.column("cluster"), evidence.column("group_id"))
    n, _ = longs(evidence.column("n"))
    risk = np.asarray(pc.equal(evidence.column("kind"), "risk_day"), dtype=bool)
    fault = ~risk | (n > 0)
    wanted = np.isin(code, code[fault])
    other = evidence.filter(pa.array(wanted & ~risk))
    rk_mask = wanted & risk
    if not rk_mask.any():
        return other
    rk = evidence.filter(pa.array(rk_mask))
    rn = n[rk_mask]
    order, starts, _ = groups(code[rk_mask])
    head = rk.take(pa.array(order[starts]))
    at_risk = rn[order] > 0
    start = np.where(at_risk, seconds(rk.column("start_ts"))[order], np.nan)
    end = np.where(at_risk, seconds(rk.column("end_ts"))[order], np.nan)
    summed = pa.table({
        **{c: head.column(c) for c in ("cluster", "group_id", "kind", "key")},
        "start_ts": timestamps(gmin(start, starts)), "end_ts": timestamps(gmax(end, starts)),
        **{c: pa.nulls(len(starts), EVIDENCE_SCHEMA.field(c).type) for c in _WINDOW_ONLY},
        "magnitude": _nd(gmax(doubles(rk.column("magnitude"))[order], starts)),
        "low_s": _nd(gmin(doubles(rk.column("low_s"))[order], starts)),
        "n": pa.array(np.add.reduceat(rn[order], starts), pa.int64())}, schema=EVIDENCE_SCHEMA)
    return pa.concat_tables([other, summed])


def _row(cluster: str, group_id: str, a: _Advice) -> dict[str, Any]:
    return {"cluster": cluster, "group_id": group_id, "rule": a.rule, "setting": a.setting,
            "current_value": a.current_value, "suggested": a.suggested, "expected_effect": a.expected_effect,
            "measure": a.measure, "unit": a.unit,
            "current_amount": None if a.current_amount is None else round(a.current_amount, 3),
            "expected_amount": None if a.expected_amount is None else round(a.expected_amount, 3),
            "evidence": a.evidence, "evidence_count": a.count, "evidence_start_ts": a.first,
            "evidence_end_ts": a.last, "confidence": a.confidence}


def _advice_table(rows: list[dict[str, Any]], as_of: dt.datetime) -> pa.Table:
    from lagscope.schema import ADVICE

    fields = [ADVICE.schema.field(c) for c in ADVICE_COLUMNS if c != "as_of_ts"]
    cols: dict[str, pa.Array] = {"cluster": pa.array([x["cluster"] for x in rows], pa.string())}
    for f in fields:
        cols[f.name] = pa.array([x[f.name] for x in rows], f.type)
    n = len(rows)
    stamp = pa.array([as_of] * n, pa.timestamp("us", tz="UTC")).cast(_MS, safe=False)
    cols["as_of_ts"] = stamp
    # the date of the last analysed instant (as_of is the range's exclusive end: a batch's is the
    # next midnight, whose day it did not analyse)
    last = pa.array([as_of - dt.timedelta(milliseconds=1)] * n, pa.timestamp("us", tz="UTC"))
    cols["date"] = dates(last) if n else pa.array([], pa.string())
    return pa.table(cols).select(["cluster", *ADVICE_COLUMNS[:-1], "as_of_ts", "date"])
