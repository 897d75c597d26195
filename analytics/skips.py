"""Skips: messages a group never processed, found from evidence of not processing (never from
size), and the rewinds an operator's reset wrote. Part of the per-group pass
(:mod:`lagscope.analytics.groups`), which sees each group whole: its partitions' advances
(:func:`lagscope.analytics.np_points.advances`, from the per-partition pass), its member sweeps
(carried ones included) and its group-metadata records.

An *advance* is ``a`` = new offset − max(everything committed before, log start) > 0, per commit
where the commit stream has the key (its interval: since the key's previous commit), else per
sweep interval. Each skip has a ``cause``; the first that holds wins:

1. ``admin_reset``: the advance was written while the group had no members, although it had
   members before (an operator's ``kafka-consumer-groups --reset-offsets … --execute`` needs an
   empty group). Any size; magnitude = ``a`` exactly. Never for a group with no members in
   anything seen (a standalone committer: Flink's KafkaSource, ``assign()`` + ``commitSync``).
2. ``out_of_range_reset``: everything committed before lay below the log start (a retention
   overrun, itself the ``retention_loss`` episode) and the advance from the log start is more
   than ``skip_factor`` × the group's capacity before it × the interval could reach: the
   consumer was reset to the latest offset (``auto.offset.reset=latest``); judged even where the
   partition showed no capacity of its own (a member that stopped reading it shows none there).
   An advance also carries what it passed below the log start of the sweep after it
   (``deleted``: retention passed the consumer between two sweeps, so no ``retention_loss``
   episode counts it); the rule judges ``deleted`` + ``a`` and reports the deleted part as a
   ``retention_loss`` (cause ``retention``), the rest as the skip: a reset onto the log start
   (``earliest``) proves a loss by its pace, and is no reset to the latest. The partition's
   capacity × the interval explains the part past the log start first, then the deleted one. A
   ``seek`` and an ``admin_reset`` report their deleted part alike.
3. ``seek``: the new offset is at or past the end known before it, and the advances are more than
   ``skip_factor`` × the *member's capacity* × the interval, judged per commit request of the
   group (the commits of one group at one commit timestamp; without the commit stream, one
   sweep): Σ advances of the request's partitions that reached the end beyond what their own
   capacity could have processed > ``skip_factor`` × the member's capacity × the request's
   longest interval. A request of one partition is the per-partition verdict; a loss spread thin
   over many partitions counts by its sum. Reported on each partition of the request whose own
   advance exceeds what its own capacity could have processed, once.

*Demonstrated capacity* (:attr:`lagscope.analytics.kseries.Series.max_rate_before`, per
partition): the largest rate over sweep intervals with a backlog at both ends, once the partition
showed a saturated interval after an earlier busy one (committed at its end plus a commit's worth
of progress, the larger of its own advance and the previous interval's rate over it, below the log
end at its start: the consumer never waited for messages, so its advance measures what it can do; a partition's
first busy interval alone may be one early commit), leaving out *starved* intervals (its owner
advanced another of its partitions more than ``skip_factor`` × faster meanwhile:
:func:`lagscope.analytics.kseries.starved_rows`), intervals whose starting committed offset lay
below the log start at their end (retention passed it: the advance may be a reset over deleted
messages) and *jumps*: an
interval that ended at or past the log end at its start faster than ``skip_factor`` × the rate
kept before it (and, until the capacity is trusted, than ``skip_factor`` × the producers' rate
over it: one at about the producers' pace is a consumer keeping up; with the commit stream, the
interval is as fast as the fastest commit inside it that reached that end and carried more than
half its advance: :func:`lagscope.analytics.kseries.commit_rates`) — a seek's own advance is
no evidence of capacity. Lag at both ends alone does
not show it: a caught-up consumer a commit behind at every sweep advances at the producers' rate.
An interval that ends caught up shows only a lower bound and counts for nothing. A partition
that never showed capacity is never judged for ``seek`` or ``out_of_range_reset``: a caught-up
consumer taking a burst, or a consumer catching up fast, is not a skip. Every capacity is the
one shown strictly before the commit judged (:class:`Capacities`, from
:data:`lagscope.analytics.onepass.OUT_CAPACITY`: each partition's running capacity with the time
it changed), so a batch and incremental steps judge a commit alike and a later, larger capacity
never hides an earlier skip. A consumer that shares its time between six busy partitions shows a
sixth of its pace on each and can give a burst on one of them all of it, so:

- the *member's capacity* (``seek``): an OffsetCommit request is written by one member, for the
  partitions it owns (``commitSync()`` commits every assigned partition's position), so what it
  could have processed is what that member can do, not the whole group: what it showed it does
  *at once*, the largest *member capacity* (or capacity) shown through any partition owned by
  the member(s) that own the request's partitions, from the group's member sweep at or before
  the request and the one at or after it (``owners``; the larger of the two, as a rebalance
  between them may have given the member more), each member once. A partition's member capacity
  (``member_capacity`` of :data:`lagscope.analytics.onepass.OUT_CAPACITY`) is the largest rate its
  owner showed over its partitions together in one sweep interval where this partition's own
  showed capacity (:func:`lagscope.analytics.kseries.member_rates`,
  :func:`lagscope.analytics.np_points.member_capacity_through`). Not the sum of the partitions'
  capacities: each is its best interval, and partitions that took turns being the busy one each
  show the member's whole pace, at different times. A partition's member capacity restarts where
  its owner changes (another member's pace is no measure of this one's); where one of the
  member's partitions showed a capacity but no member capacity (none since its owner changed, or
  a state from before it was kept), their summed capacities count instead. In a group of 20
  members the group's capacity is 20 × a member's: a member seeking to the end of its few
  partitions would pass unreported. Where no sweep names a
  partition's owner (no member sweeps, a group without members) that partition's own capacity
  counts instead, added up, so the request is judged on its own partitions;
- the *group's capacity* (``out_of_range_reset``): the sum over all its partitions.

Magnitude (messages never processed) = ``a − min(a, floor(capacity · interval))`` with the
partition's own capacity (exact ``a`` for ``admin_reset``); for a ``seek`` what the consumer could
have processed is also no more than the partition's share of the member's capacity × the request's
interval (shared in proportion to the request's advances); severity ``critical`` for every skip
(a loss is never silent).

*Empty group* at an advance (from ``lo`` to ``hi``: the commit's time, or the sweep interval):
where the group's ``group_metadata`` records reach back to ``hi``, the latest at or before ``hi``
has no members (a ``group_tombstone`` counts as none) and none in ``[lo, hi]`` has members;
otherwise the member sweeps: the last at or before ``lo`` and the first at or after ``hi`` both
have no members. *Had members before*: a record or member sweep before ``lo`` with members.
The same test makes a rewind written while the group was empty (after it had members) an
``admin_reset``.

Pure: pyarrow and numpy, no Spark.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lagscope.analytics.arrays import dates, timestamps
from lagscope.analytics.kseries import java_fixed

__all__ = ["ADVANCE_COLUMNS", "Capacities", "Membership", "membership", "rewind_causes", "skip_rows",
           "wanted_groups"]

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]

#: the per-partition pass's advance rows the rules read
ADVANCE_COLUMNS = ("cluster", "group_id", "topic", "partition", "start_t", "end_t", "advance", "capacity", "exact",
                   "at_end", "from_lost", "unowned", "deleted")

_DETAIL = {
    "seek": "committed offset jumped to the end past {} messages that were never processed (seek)",
    "admin_reset": "offsets reset while the group had no members: {} messages never processed (admin reset)",
    "out_of_range_reset": "committed offset below the log start reset past {} messages that were never processed "
                          "(auto.offset.reset after retention)",
    # a skip's deleted part (kind retention_loss)
    "retention": "retention deleted {} messages past the committed offset between two sweeps and the offset was "
                 "then reset past them: never processed",
}


@dataclass
class _Timeline:
    """One group's membership observations: sorted times and whether members were there."""

    rec_t: list[float] = field(default_factory=list)
    rec_has: list[bool] = field(default_factory=list)
    sw_t: list[float] = field(default_factory=list)
    sw_has: list[bool] = field(default_factory=list)


@dataclass
class Membership:
    """Per group (``cluster ␟ group_id``) its membership timeline (:func:`membership`)."""

    by_group: dict[str, _Timeline]

    def is_empty(self, group: str, lo: float, hi: float) -> bool:
        """The group had no members from ``lo`` to ``hi`` (module doc)."""
        tl = self.by_group.get(group)
        if tl is None:
            return False
        i = bisect.bisect_right(tl.rec_t, hi) - 1
        if i >= 0:
            j = bisect.bisect_left(tl.rec_t, lo)
            return not tl.rec_has[i] and not any(tl.rec_has[j:i + 1])
        a = bisect.bisect_right(tl.sw_t, lo) - 1
        b = bisect.bisect_left(tl.sw_t, hi)
        return a >= 0 and b < len(tl.sw_t) and not tl.sw_has[a] and not tl.sw_has[b]

    def had_members(self, group: str, before: float) -> bool:
        """A record or member sweep before ``before`` shows members."""
        tl = self.by_group.get(group)
        if tl is None:
            return False
        i = bisect.bisect_left(tl.rec_t, before)
        j = bisect.bisect_left(tl.sw_t, before)
        return any(tl.rec_has[:i]) or any(tl.sw_has[:j])

    def admin(self, group: str, lo: float, hi: float) -> bool:
        """Written by an admin tool: the group was empty, after it had members."""
        return self.is_empty(group, lo, hi) and self.had_members(group, lo)


def _gkey_array(table: pa.Table) -> pa.Array:
    """``cluster ␟ group_id`` of each row."""
    def plain(name: str) -> pa.Array:
        c = table.column(name).combine_chunks()
        return (c.dictionary_decode() if pa.types.is_dictionary(c.type) else c).cast(pa.string())

    return pc.binary_join_element_wise(plain("cluster"), plain("group_id"), "\x1f")


def _gkeys(table: pa.Table) -> list[str]:
    return _gkey_array(table).to_pylist()  # type: ignore[no-any-return]


def wanted_groups(anomalies: pa.Table, adv: pa.Table | None) -> set[str]:
    """The groups whose membership a rule asks about: those with a rewind, or an advance without
    an owner around it (most steps: none)."""
    out: set[str] = set()
    if anomalies.num_rows and "cause" in anomalies.column_names:
        kind = anomalies.column("kind").combine_chunks().cast(pa.string())
        out.update(_gkeys(anomalies.filter(pc.fill_null(pc.equal(kind, "rewind"), False))))
    if adv is not None and adv.num_rows:
        out.update(_gkeys(adv.filter(pc.fill_null(adv.column("unowned"), False))))
    return out


def _only(table: pa.Table, groups: set[str]) -> pa.Table:
    if not table.num_rows:
        return table
    return table.filter(pc.is_in(_gkey_array(table), value_set=pa.array(sorted(groups), pa.string())))


def membership(msweeps: pa.Table, group_events: pa.Table | None, groups: set[str] | None = None) -> Membership:
    """The membership timelines of ``groups`` (all when None) from their member sweeps
    (``cluster, group_id, t, member_ids``, carried ones included) and their ``group_metadata`` /
    ``group_tombstone`` records (``record_type``, ``members``, ``record_ts``)."""
    by: dict[str, _Timeline] = {}
    if groups is not None:
        if not groups:
            return Membership(by_group=by)
        msweeps = _only(msweeps, groups)
        group_events = _only(group_events, groups) if group_events is not None else None
    if msweeps.num_rows:
        n_ids = np.asarray(pc.list_value_length(msweeps.column("member_ids")).fill_null(0), dtype=np.int64)
        t = np.asarray(msweeps.column("t").combine_chunks().fill_null(np.nan), dtype=np.float64)
        rows = sorted(zip(_gkeys(msweeps), t.tolist(), (n_ids > 0).tolist(), strict=True))
        for g, tt, has in rows:
            tl = by.setdefault(g, _Timeline())
            tl.sw_t.append(tt)
            tl.sw_has.append(has)
    if group_events is not None and group_events.num_rows:
        rt = group_events.column("record_type").combine_chunks()
        rt = (rt.dictionary_decode() if pa.types.is_dictionary(rt.type) else rt).cast(pa.string())
        keep = pc.fill_null(pc.is_in(rt, value_set=pa.array(["group_metadata", "group_tombstone"])), False)
        ev = group_events.filter(keep)
        if ev.num_rows:
            n_mem = np.asarray(pc.list_value_length(ev.column("members")).fill_null(0), dtype=np.int64)
            ts = ev.column("record_ts").combine_chunks().cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            et = np.asarray(ts.fill_null(0), dtype=np.int64) / 1e6
            for g, tt, has in sorted(zip(_gkeys(ev), et.tolist(), (n_mem > 0).tolist(), strict=True)):
                tl = by.setdefault(g, _Timeline())
                tl.rec_t.append(tt)
                tl.rec_has.append(has)
    return Membership(by_group=by)


def rewind_causes(anomalies: pa.Table, members: Membership) -> pa.Table:
    """``anomalies`` with each rewind written while its group was empty (after it had members)
    given the cause ``admin_reset``."""
    if not anomalies.num_rows or "cause" not in anomalies.column_names:
        return anomalies
    kind = anomalies.column("kind").combine_chunks().cast(pa.string())
    idx = np.flatnonzero(np.asarray(pc.equal(kind, "rewind").fill_null(False), dtype=bool))
    if not len(idx):
        return anomalies
    sub = anomalies.take(pa.array(idx))
    g = _gkeys(sub)
    s_us = sub.column("start_ts").combine_chunks().cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    e_us = sub.column("end_ts").combine_chunks().cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    cause = anomalies.column("cause").combine_chunks().cast(pa.string()).to_pylist()
    for i, gg, s, e in zip(idx.tolist(), g, s_us, e_us, strict=True):
        hi = (e if e is not None else s) / 1e6
        if members.admin(gg, s / 1e6, hi):
            cause[i] = "admin_reset"
    at = anomalies.schema.get_field_index("cause")
    return anomalies.set_column(at, anomalies.schema.field(at), pa.array(cause, anomalies.schema.field(at).type))


class Capacities:
    """The partitions' demonstrated capacities over time (``cluster, group_id, topic, partition,
    t, capacity``: each partition's running capacity from ``t`` on), read as they were strictly
    before a time: a skip is judged on what the consumer showed before the commit, never on what
    a later interval (or the skip itself) showed."""

    def __init__(self, capacities: pa.Table | None) -> None:
        self.n = 0 if capacities is None else capacities.num_rows
        #: each group's partitions (for the group's capacity)
        self.by_group: dict[str, list[str]] = {}
        if capacities is None or not self.n:
            self.uniq = pa.array([], pa.string())
            self.mv = np.zeros(0)
            return
        keys = _joined(_gkey_array(capacities), _tps(capacities))
        self.uniq = pc.unique(keys)
        code = np.asarray(pc.index_in(keys, value_set=self.uniq), dtype=np.int64)
        t = np.asarray(capacities.column("t").combine_chunks().fill_null(-np.inf), dtype=np.float64)
        v = np.asarray(capacities.column("capacity").combine_chunks().fill_null(0.0), dtype=np.float64)
        mv = (np.asarray(capacities.column("member_capacity").combine_chunks().fill_null(np.nan), dtype=np.float64)
              if "member_capacity" in capacities.column_names else np.full(self.n, np.nan))
        order = np.lexsort((t, code))
        self.code, self.t, self.v = code[order], t[order], np.maximum(v[order], 0.0)
        #: the member capacity shown through each partition (NaN: unknown)
        self.mv = mv[order]
        for k in self.uniq.to_pylist():
            self.by_group.setdefault(k.rsplit("\x1f", 1)[0], []).append(k)

    def at(self, keys: pa.Array, t: _F) -> _F:
        """The capacity of each ``group ␟ topic/partition`` of ``keys`` strictly before ``t``
        (0 where none was shown by then)."""
        return self.both(keys, t)[0]

    def both(self, keys: pa.Array, t: _F) -> tuple[_F, _F]:
        """:meth:`at` and the member capacity shown through each partition then (NaN where
        unknown)."""
        if not self.n or not len(keys):
            return np.zeros(len(keys)), np.full(len(keys), np.nan)
        q = np.asarray(pc.index_in(keys, value_set=self.uniq).fill_null(-1), dtype=np.int64)
        _, rank = np.unique(np.concatenate((self.t, t)), return_inverse=True)
        rank = rank.reshape(-1).astype(np.int64)
        r = int(rank.max()) + 1
        rows = self.code * r + rank[:self.n]
        pos = np.searchsorted(rows, np.maximum(q, 0) * r + rank[self.n:], side="left") - 1
        ok = (q >= 0) & (pos >= 0) & (self.code[np.maximum(pos, 0)] == q)
        at = np.maximum(pos, 0)
        return np.where(ok, self.v[at], 0.0), np.where(ok, self.mv[at], np.nan)

    def group_at(self, groups: list[str], t: _F) -> _F:
        """Each group's summed capacity over its partitions strictly before ``t``."""
        out = np.zeros(len(groups))
        for i, (g, tt) in enumerate(zip(groups, t.tolist(), strict=True)):
            parts = self.by_group.get(g)
            if parts:
                out[i] = float(self.at(pa.array(parts, pa.string()), np.full(len(parts), tt)).sum())
        return out


def _dense(code: _I) -> tuple[_I, int]:
    _, inv = np.unique(code, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), int(inv.max()) + 1 if len(inv) else 0


def _sums(idx: _I, weights: _F, n: int) -> _F:
    """Per ``0…n−1`` the sum of the ``weights`` of its ``idx``."""
    return np.asarray(np.bincount(idx, weights=weights, minlength=n), dtype=np.float64)


def _tps(table: pa.Table, rows: _I | None = None) -> pa.Array:
    """``topic/partition`` of the rows (as the member sweeps' ``owners`` name a partition)."""
    tp = [table.column(c).combine_chunks() for c in ("topic", "partition")]
    if rows is not None:
        tp = [c.take(pa.array(rows)) for c in tp]
    topic = (tp[0].dictionary_decode() if pa.types.is_dictionary(tp[0].type) else tp[0]).cast(pa.string())
    return pc.binary_join_element_wise(topic, tp[1].cast(pa.string()), "/")


def _joined(a: pa.Array, b: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise(a, b, "\x1f")


def _partition_capacity(adv: pa.Table, rows: _I, g: pa.Array, caps: Capacities, t: _F) -> _F:
    return caps.at(_joined(g, _tps(adv, rows)), t)


def _request_capacity(g: pa.Array, tp: pa.Array, t1: _F, req: _I, n_req: int, own: _F, msweeps: pa.Table | None,
                      caps: Capacities) -> _F:
    """Per commit request (``req`` of each of its advances: group ``g``, partition ``tp``, time
    ``t1``, the partition's own capacity ``own``) the capacity it is judged against: per member
    that owns its partitions (at the group's member sweep at or before the request, and at the one
    at or after it: the larger, as a rebalance between them may have given the member more), the
    member's capacity: the largest member capacity (or partition capacity) shown through any of
    the partitions it owns, or, where one of them that showed a capacity has no member capacity
    (a state from before it was kept), their summed capacities; summed over the members, plus the
    own capacity of each advance whose partition the sweep assigns to nobody. Without a sweep on
    either side: the request's own partitions' summed capacities. Vectorised: sweeps and requests
    merged by (group, time)."""
    fallback = _sums(req, own, n_req)
    if msweeps is None or not msweeps.num_rows:
        return fallback
    # the sweeps of the requests' groups, by (group, t); their assignments read only where used
    groups = pc.unique(g)
    all_g = np.asarray(pc.index_in(_gkey_array(msweeps), value_set=groups).fill_null(-1), dtype=np.int64)
    all_t = np.asarray(msweeps.column("t").combine_chunks().fill_null(np.nan), dtype=np.float64)
    rows = np.flatnonzero((all_g >= 0) & ~np.isnan(all_t))
    if not len(rows):
        return fallback
    qg = np.asarray(pc.index_in(g, value_set=groups), dtype=np.int64)
    order = rows[np.lexsort((all_t[rows], all_g[rows]))]
    mg, mt = all_g[order], all_t[order]
    nm = len(mg)
    # the group's sweep at or before each request and the one at or after it
    _, tr = np.unique(np.concatenate((mt, t1)), return_inverse=True)
    tr = tr.reshape(-1).astype(np.int64)
    r = int(tr.max()) + 1
    dk, qk = mg * r + tr[:nm], qg * r + tr[nm:]
    before = np.searchsorted(dk, qk, side="right") - 1
    before_ok = (before >= 0) & (mg[np.maximum(before, 0)] == qg)
    after = np.searchsorted(dk, qk, side="left")
    after_ok = (after < nm) & (mg[np.minimum(after, nm - 1)] == qg)
    # only those sweeps' assignments are read (a day's sweeps of a big group hold millions)
    used = np.unique(np.concatenate((before[before_ok], after[after_ok])))
    if not len(used):
        return fallback
    before, after = np.searchsorted(used, before), np.searchsorted(used, after)
    ms = msweeps.select(["cluster", "group_id", "owners"]).take(pa.array(order[used]))
    mgs = groups.take(pa.array(mg[used]))
    # the sweeps' assignments: (sweep, partition, owner) and each owner's summed capacity per sweep
    owners = ms.column("owners").combine_chunks()
    parent = np.asarray(pc.list_parent_indices(owners), dtype=np.int64)
    flat = pc.list_flatten(owners)
    f_tp, f_owner = flat.field("tp"), flat.field("owner")
    valid = np.asarray(pc.and_(f_tp.is_valid(), f_owner.is_valid()), dtype=bool)
    if not valid.any():
        return fallback
    parent, f_tp, f_owner = parent[valid], f_tp.filter(pa.array(valid)), f_owner.filter(pa.array(valid))
    f_key = _joined(mgs.take(pa.array(parent)), f_tp)
    ocode = np.asarray(pc.dictionary_encode(f_owner).indices, dtype=np.int64)
    pid, n_pairs = _dense(parent * (int(ocode.max()) + 1) + ocode)
    # each (sweep, owner) pair's partitions, to sum as they were before each request
    by_pair = np.argsort(pid, kind="stable")
    pair_start = np.searchsorted(pid[by_pair], np.arange(n_pairs), side="left")
    pair_len = np.bincount(pid, minlength=n_pairs)
    req_t = np.zeros(n_req)
    req_t[req] = t1
    tps = pc.unique(pa.concat_arrays([f_tp, tp]))
    nt = len(tps)
    fk = parent * nt + np.asarray(pc.index_in(f_tp, value_set=tps), dtype=np.int64)
    f_order = np.argsort(fk, kind="stable")
    fk, f_pid = fk[f_order], pid[f_order]
    qtp = np.asarray(pc.index_in(tp, value_set=tps), dtype=np.int64)

    def at(sweep: _I, ok: _B) -> _F:
        """Per request, its bound from one side's sweeps (NaN: no sweep on that side)."""
        code = np.where(ok, sweep, 0) * nt + qtp
        pos = np.minimum(np.searchsorted(fk, code), len(fk) - 1)
        found = ok & (fk[pos] == code)
        # each owner once per request, plus the partitions whose owner is unknown
        k = np.flatnonzero(found)
        u = np.unique(req[k] * n_pairs + f_pid[pos[k]])
        u_req, u_pair = u // n_pairs, u % n_pairs
        reps = pair_len[u_pair]
        first = np.repeat(pair_start[u_pair], reps)
        within = np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)
        entries = by_pair[first + within]
        e_req, e_u = np.repeat(u_req, reps), np.repeat(np.arange(len(u)), reps)
        e_keys = f_key.take(pa.array(entries))
        e_cap, e_mem = caps.both(e_keys, req_t[e_req])
        # per (request, member): the largest capacity shown through its partitions, or their sum
        # where one that showed a capacity has no member capacity
        summed = _sums(e_u, e_cap, len(u))
        top = np.zeros(len(u))
        np.maximum.at(top, e_u, np.fmax(e_cap, np.nan_to_num(e_mem)))
        unknown = np.zeros(len(u), bool)
        np.logical_or.at(unknown, e_u, (e_cap > 0) & np.isnan(e_mem))
        by_owner = _sums(u_req, np.where(unknown, summed, top), n_req)
        sided = by_owner + _sums(req[~found], own[~found], n_req)
        seen = np.zeros(n_req, bool)
        seen[req[ok]] = True
        return np.where(seen, sided, np.nan)

    both = np.fmax(at(before, before_ok), at(after, after_ok))
    largest = np.zeros(n_req)
    np.maximum.at(largest, req, own)  # never below what one of its own partitions showed
    return np.where(np.isnan(both), fallback, np.maximum(both, largest))


def skip_rows(adv: pa.Table, members: Membership, capacities: pa.Table | None, msweeps: pa.Table | None, *,
              skip_factor: float, schema: pa.Schema) -> pa.Table:
    """The skips (module doc) of the advances ``adv`` (:data:`ADVANCE_COLUMNS`) given the
    partitions' demonstrated ``capacities`` (``cluster, group_id, topic, partition, t, capacity``:
    :class:`Capacities`) and the groups' member sweeps ``msweeps``
    (``cluster, group_id, t, owners``, carried ones included), as ``anomalies`` rows in ``schema``
    (the columns it has; ``as_of_ts`` left null)."""
    if not adv.num_rows:
        return schema.empty_table()
    caps = Capacities(capacities)

    def col(name: str) -> npt.NDArray[Any]:
        c = adv.column(name).combine_chunks()
        if pa.types.is_floating(c.type):
            return np.asarray(c.fill_null(np.nan), dtype=np.float64)
        if pa.types.is_boolean(c.type):
            return np.asarray(c.fill_null(False), dtype=bool)
        return np.asarray(c.fill_null(0), dtype=np.int64)

    t0, t1, a, cap = col("start_t"), col("end_t"), col("advance"), col("capacity")
    exact, at_end, lost, unowned = col("exact"), col("at_end"), col("from_lost"), col("unowned")
    deleted = col("deleted")
    g = _gkeys(adv)
    n = adv.num_rows
    span = t1 - t0
    with np.errstate(invalid="ignore"):
        could = np.where(np.isfinite(span) & (cap > 0), np.floor(cap * span), np.nan)  # NaN: no capacity known
    known = ~np.isnan(could)
    # the group's capacity before each advance that may be an out-of-range reset
    g_cap = cap.copy()
    li = np.flatnonzero(lost)
    if len(li):
        g_cap[li] = np.maximum(cap[li], caps.group_at([g[i] for i in li.tolist()], t1[li]))
    with np.errstate(invalid="ignore"):
        too_far = a + deleted > float(skip_factor) * g_cap * span  # False where unknown (NaN)
    # 1. an empty group's reset: the window is the commit (exact) or the sweep interval
    lo = np.where(exact, t1, t0)
    admin = np.array([bool(unowned[i]) and members.admin(g[i], float(lo[i]), float(t1[i])) for i in range(n)],
                     dtype=bool)
    # 2. out of range (retention) reset to the latest offset
    oor = ~admin & lost & (g_cap > 0) & too_far
    # 3. seek: per partition, then per commit request of the group
    cand = ~admin & ~oor & at_end & known
    seek = np.zeros(n, bool)
    share_of = np.full(n, np.nan)
    # the evidence each verdict rests on, for its detail: what the request (an out-of-range
    # reset: the partition) advanced, over how long, on how many partitions, against which pace
    ev_a, ev_span, ev_cap, ev_parts = (a + deleted).astype(np.float64), span.copy(), g_cap.copy(), np.ones(n, np.int64)
    ci = np.flatnonzero(cand)
    if len(ci):
        # the commit requests: one group, one commit timestamp (from sweeps: one sweep)
        cg = _gkey_array(adv).take(pa.array(ci))
        gcode = np.asarray(pc.dictionary_encode(cg).indices, dtype=np.int64)
        _, tcode = np.unique(t1[ci], return_inverse=True)
        req, n_req = _dense((gcode * (int(tcode.max()) + 1) + tcode.reshape(-1)) * 2 + exact[ci])
        own = np.maximum(cap[ci], _partition_capacity(adv, ci, cg, caps, t1[ci]))
        bound = _request_capacity(cg, _tps(adv, ci), t1[ci], req, n_req, own, msweeps, caps)
        total_a = _sums(req, (a + deleted)[ci].astype(np.float64), n_req)
        longest = np.full(n_req, -np.inf)
        np.maximum.at(longest, req, span[ci])
        seek[ci] = (total_a > float(skip_factor) * bound * longest)[req]
        # the member could have processed its capacity × the request's interval in all, not each
        # partition its own capacity's worth: shared in proportion to the advances
        with np.errstate(invalid="ignore", divide="ignore"):
            share = np.floor(bound[req] * longest[req] * (a + deleted)[ci] / total_a[req])
        share_of[ci] = np.where(np.isfinite(share), share, np.nan)
        ev_a[ci], ev_span[ci], ev_cap[ci] = total_a[req], longest[req], bound[req]
        ev_parts[ci] = np.bincount(req, minlength=n_req)[req]
    # what the consumer could have processed explains the messages it reached after the reset
    # first (they exist: it reads from there on), then the deleted ones (it may have read some
    # before retention deleted them)
    allowed = np.nan_to_num(np.where(seek, np.fmin(could, share_of), could), nan=0.0).astype(np.int64)
    lost_n = np.where(admin, a, a - np.minimum(a, allowed))
    del_n = np.where(admin, deleted, deleted - np.minimum(deleted, np.maximum(allowed - a, 0)))
    cause = np.where(admin, "admin_reset", np.where(oor, "out_of_range_reset", "seek")).astype(object)
    evidence = _Evidence(ev_a, ev_span, ev_cap, ev_parts, exact, float(skip_factor))
    skips = _anomaly_rows(adv, np.flatnonzero((admin | oor | seek) & (lost_n > 0)), exact, t0, t1, lost_n,
                          cause, "skip", schema, evidence)
    # the deleted part of a skip (an empty group's reset, a reset after retention, a jump to the
    # end): a retention loss
    gone = _anomaly_rows(adv, np.flatnonzero((admin | oor | seek) & (del_n > 0)), exact, t0, t1, del_n,
                         np.full(n, "retention", dtype=object), "retention_loss", schema)
    out = pa.concat_tables([skips, gone]) if gone.num_rows else skips
    return out.sort_by([("cluster", "ascending"), ("group_id", "ascending"), ("topic", "ascending"),
                        ("partition", "ascending"), ("start_ts", "ascending")])


@dataclass
class _Evidence:
    """Per advance, what its verdict rests on: the advance judged (``a``: the commit request's,
    summed over its ``parts`` partitions, for a seek), over ``span`` seconds, against ``skip_factor``
    × ``cap`` messages/s (the member's capacity for a seek, the group's for an out-of-range reset);
    ``exact``: one commit, else a sweep interval."""

    a: _F
    span: _F
    cap: _F
    parts: _I
    exact: _B
    skip_factor: float

    def says(self, i: int, cause: str) -> str:
        """What the detail of advance ``i``'s skip of ``cause`` adds: the numbers behind it."""
        if cause == "admin_reset":
            return ""
        over = f" over {self.parts[i]} partitions" if self.parts[i] > 1 else ""
        span = java_fixed(float(self.span[i]), 1)
        how = (f"in one commit, {span} s after the one before" if self.exact[i]
               else f"between two sweeps {span} s apart")
        whose = "its member" if cause == "seek" else "the group"
        said = (f": advanced {java_fixed(float(self.a[i]), 0)} messages{over} {how}, more than "
                f"{self.skip_factor:g} × the {java_fixed(float(self.cap[i]), 1)} messages/s "
                f"{whose} showed it can process")
        if cause == "seek":
            # offsets cannot tell the one case apart (docs/analytics.md, skip): say which it would be
            said += ("; a consumer that a slow downstream held to that pace and then released catches up as "
                     "fast: its logs show a seek or an offset reset if this was one")
        return said


def _anomaly_rows(adv: pa.Table, keep: _I, exact: _B, t0: _F, t1: _F, lost_n: _I, cause: npt.NDArray[Any],
                  kind: str, schema: pa.Schema, evidence: _Evidence | None = None) -> pa.Table:
    """The anomaly rows (``kind``: skip, or retention_loss for the deleted part) of the advances
    ``keep``: ``lost_n`` messages each, critical; a skip's detail names its ``evidence``."""
    if not len(keep):
        return schema.empty_table()
    prefix = "skip" if kind == "skip" else f"{kind}|retention"
    start = np.where(exact, t1, t0)[keep]
    start_ts = timestamps(start)
    ms = np.asarray(start_ts.cast(pa.int64()), dtype=np.int64)
    cl = adv.column("cluster").combine_chunks().take(pa.array(keep))
    gr = adv.column("group_id").combine_chunks().take(pa.array(keep))
    tp = adv.column("topic").combine_chunks().take(pa.array(keep))
    pt = adv.column("partition").combine_chunks().take(pa.array(keep))
    plain = [(c.dictionary_decode() if pa.types.is_dictionary(c.type) else c).cast(pa.string()) for c in (cl, gr, tp)]
    pstr = pt.cast(pa.string()).to_pylist()
    m = len(keep)
    mag = lost_n[keep].astype(np.float64)
    causes = cause[keep]
    cols: dict[str, pa.Array] = {
        "cluster": plain[0], "group_id": plain[1], "topic": plain[2], "partition": pt.cast(pa.int32()),
        "kind": pa.array([kind] * m, pa.string()), "start_ts": start_ts, "end_ts": timestamps(t1[keep]),
        "severity": pa.array(["critical"] * m, pa.string()), "magnitude": pa.array(mag),
        "unit": pa.array(["messages"] * m, pa.string()),
        "detail": pa.array([_DETAIL[c].format(java_fixed(float(x), 0))
                            + ("" if evidence is None else evidence.says(int(i), c))
                            for c, x, i in zip(causes, mag, keep, strict=True)], pa.string()),
        # a deleted part's key is apart from the partition's retention_loss episodes'
        # (retention_loss|cluster|…), which may start at the same sweep
        "key": pa.array([f"{prefix}|{c}|{gg}|{t}|{p}|{x}" for c, gg, t, p, x in zip(
            plain[0].to_pylist(), plain[1].to_pylist(), plain[2].to_pylist(), pstr, ms.tolist(), strict=True)],
            pa.string()),
        "cause": pa.array(list(causes), pa.string()), "date": dates(start_ts)}
    return pa.table({f.name: cols[f.name].cast(f.type) if f.name in cols else pa.nulls(m, f.type) for f in schema},
                    schema=schema)
