"""The hand-built rebalance scenarios (lake rows as dicts; no Spark), shared by the per-group
pass's tests (``test_groups.py``): copied from ``test_analytics_rebalances.py`` with their
hand-computed expectations.

Sweeps every 2 s. Defaults: session timeout 10 s, heartbeat 1 s, network 1 s, rebalance
timeout (max.poll.interval) 30 s. Topic ``t`` has partitions 0 and 1; the end grows by 10 per
sweep; each owner commits at every sweep unless a case says otherwise.
"""

from __future__ import annotations

from typing import Any

from analytics_builders import at, offsets_rows

BOTH = [("m1", None, [0, 1])]
SPLIT = [("m1", None, [0]), ("m2", None, [1])]


def stable(ts: range, gen: int, members: list[Any]) -> list[tuple[Any, ...]]:
    return [(t, "Stable", gen, members) for t in ts]


def offsets(group: str, last: int, owners: dict[int, list[tuple[int, str | None]]],
             frozen: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Offsets for partitions 0/1 up to ``last``: end = 10·t/2; committed = end unless the
    partition is frozen from a time on (then it stays at that time's end) until its new owner
    resumes; ``owners[p]`` is [(from_t, owner)…]."""
    rows: list[dict[str, Any]] = []
    for p in (0, 1):
        series = []
        for t in range(0, last + 1, 2):
            end = 5 * t
            owner = [o for since, o in owners[p] if since <= t][-1]
            f = (frozen or {}).get(p)
            resumed = f is not None and owner != owners[p][0][1]
            c = 5 * f if f is not None and t >= f and not resumed else end
            series.append((t, c, end, 0, owner))
        rows += offsets_rows(series, group=group, partition=p)
    return rows


# (case, member sweeps, offsets, expected:
#  (cause, start s, end s, duration s, before, after, partitions moved, bound s))
CASES: list[tuple[str, list[tuple[Any, ...]], list[dict[str, Any]], tuple[Any, ...]]] = [
    # m2 joins: last settled sweep of gen 1 at 10, Preparing at 12, settled gen 2 at 14 →
    # midpoints 11 … 13 = 2 s; partition 1 moves from m1 to m2; bound = rebalance timeout
    ("join", [*stable(range(0, 11, 2), 1, BOTH), (12, "PreparingRebalance", 1, BOTH),
              *stable(range(14, 17, 2), 2, SPLIT)],
     offsets("join", 16, {0: [(0, "m1")], 1: [(0, "m1"), (14, "m2")]}),
     ("join", 11, 13, 2.0, ["m1"], ["m1", "m2"], 1, 30.0)),
    # m2 leaves promptly (it committed at 10, gone at 12): leave, 11 … 13
    ("leave", [*stable(range(0, 11, 2), 1, SPLIT), (12, "PreparingRebalance", 1, [("m1", None, [0])]),
               *stable(range(14, 17, 2), 2, BOTH)],
     offsets("leave", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m1")]}),
     ("leave", 11, 13, 2.0, ["m1", "m2"], ["m1"], 1, 30.0)),
    # m2 crashes after its commit at 4; the group stays Stable until its session times out
    # (Preparing at 16 = 12 s later ≈ 10 s session timeout, far from 30 s): session_timeout;
    # the rebalance proper 15 … 17; bound 10 + 1 + 1 = 12 s
    ("session", [*stable(range(0, 15, 2), 1, SPLIT), (16, "PreparingRebalance", 1, [("m1", None, [0])]),
                 *stable(range(18, 23, 2), 2, BOTH)],
     offsets("session", 22, {0: [(0, "m1")], 1: [(0, "m2"), (20, "m1")]}, frozen={1: 4}),
     ("session_timeout", 15, 17, 2.0, ["m1", "m2"], ["m1"], 1, 12.0)),
    # m2 stops polling after 4 and is removed 32 s later (≈ 30 s rebalance timeout):
    # max_poll_interval; the rebalance proper 35 … 37; bound 30 s
    ("max-poll", [*stable(range(0, 35, 2), 1, SPLIT), (36, "PreparingRebalance", 1, [("m1", None, [0])]),
                  *stable(range(38, 43, 2), 2, BOTH)],
     offsets("max-poll", 42, {0: [(0, "m1")], 1: [(0, "m2"), (40, "m1")]}, frozen={1: 4}),
     ("max_poll_interval", 35, 37, 2.0, ["m1", "m2"], ["m1"], 1, 30.0)),
    # m2 leaves and m3 joins in the same rebalance (m2 committed at 12, gone at 14): nothing
    # says which came first; a join (joins usually do), 11 … 13; partition 1 moves to m3
    ("join-and-leave", [*stable(range(0, 11, 2), 1, SPLIT), (12, "PreparingRebalance", 1, SPLIT),
                        *stable(range(14, 17, 2), 2, [("m1", None, [0]), ("m3", None, [1])])],
     offsets("join-and-leave", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m3")]}),
     ("join", 11, 13, 2.0, ["m1", "m2"], ["m1", "m3"], 1, 30.0)),
    # static member i2 restarts: same instance, new member id m3, no partition moves (owned
    # by the instance); seen between two settled sweeps 10 and 12 → 11 … 11
    ("static", [*stable(range(0, 11, 2), 1, [("m1", "i1", [0]), ("m2", "i2", [1])]),
                *stable(range(12, 15, 2), 1, [("m1", "i1", [0]), ("m3", "i2", [1])])],
     offsets("static", 14, {0: [(0, "m1")], 1: [(0, "m2"), (12, "m3")]}),
     ("static_member_bounce", 11, 11, 0.0, ["m1", "m2"], ["m1", "m3"], 0, 12.0)),
]


STATIC = [("m1", "i1", [0]), ("m2", "i2", [1])]


def member(mid: str, iid: str | None = None, session_ms: int | None = 8000,
            rebalance_ms: int | None = 20000, parts: tuple[int, ...] = ()) -> dict[str, Any]:
    return {"member_id": mid, "group_instance_id": iid, "client_id": "c", "host": "h",
            "session_timeout_ms": session_ms, "rebalance_timeout_ms": rebalance_ms,
            "assignment": [{"topic": "t", "partition": p} for p in parts]}


def record(group: str, ts: float, gen: int | None, members: list[dict[str, Any]],
            record_type: str = "group_metadata", member_id: str | None = None) -> dict[str, Any]:
    return {"cluster": "c", "date": "2026-01-01", "group_id": group, "record_type": record_type,
            "generation": gen, "members": members, "record_ts": at(ts), "source_partition": 0,
            "source_offset": int(ts * 1000), "value_version": 0, "member_id": member_id}


def commits(group: str, commits: list[tuple[int, float]]) -> list[dict[str, Any]]:
    return [{"cluster": "c", "date": "2026-01-01", "group_id": group, "topic": "t", "partition": p,
             "committed_offset": 10, "commit_ts": at(ts), "record_ts": at(ts), "source_partition": 0,
             "source_offset": i} for i, (p, ts) in enumerate(commits)]


def regular(parts: tuple[int, ...], until: int) -> list[tuple[int, float]]:
    """A commit of each partition at every sweep (every 2 s) up to ``until``."""
    return [(p, float(t)) for t in range(0, until + 1, 2) for p in parts]


# (case, member sweeps (generation null), offsets, group-metadata records, commits,
#  expected: (cause, start s, end s, duration s, bound s, generation before, generation after))
STREAM_CASES: list[tuple[str, list[tuple[Any, ...]], list[dict[str, Any]], list[dict[str, Any]],
                         list[dict[str, Any]], tuple[Any, ...]]] = [
    # m2 crashed after its commit at 3.6; m1 revoked (commit of p0) at 16.0; generation 2 = {m1}
    # written at 17.3 (after A = 14, before the sweep after B = 20): 16.0 … 17.3; timeouts of the
    # record at or before A (generation 1: session 8 s → bound 8 + 1 + 1)
    ("s-crash", [*stable(range(0, 15, 2), None, SPLIT), (16, "PreparingRebalance", None, [("m1", None, [0])]),
                 *stable(range(18, 23, 2), None, BOTH)],
     offsets("s-crash", 22, {0: [(0, "m1")], 1: [(0, "m2"), (20, "m1")]}, frozen={1: 4}),
     [record("s-crash", 0.5, 1, [member("m1"), member("m2")]), record("s-crash", 17.3, 2, [member("m1")])],
     commits("s-crash", [(1, 2.0), (1, 3.6), *regular((0,), 14), (0, 16.0), (0, 19.0), (1, 19.0)]),
     ("session_timeout", 16.0, 17.3, 1.3, 10.0, 1, 2)),
    # m3 joins; both survivors commit on revocation, m1 at 11.2 and m2 at 11.6: the rebalance
    # reached the group at the first of them, 11.2; generation 2 = {m1, m2, m3} at 12.1 (the
    # sweep at 12 still saw the rebalance) → 11.2 … 12.1; bound = the record's rebalance timeout
    ("s-join", [*stable(range(0, 11, 2), None, SPLIT), (12, "CompletingRebalance", None, SPLIT),
                *stable(range(14, 17, 2), None, [*SPLIT, ("m3", None, [])])],
     offsets("s-join", 16, {0: [(0, "m1")], 1: [(0, "m2")]}),
     [record("s-join", 0.5, 1, [member("m1"), member("m2")]),
      record("s-join", 12.1, 2, [member("m1"), member("m2"), member("m3")])],
     commits("s-join", [*regular((0, 1), 10), (0, 11.2), (1, 11.6), (0, 14.0), (1, 14.0)]),
     ("join", 11.2, 12.1, 0.9, 20.0, 1, 2)),
    # m3 joins and m2 leaves (closing commit 11.4) in one rebalance: join (see "join-and-leave");
    # m1 revoked at 11.0 → 11.0 … 12.1
    ("s-late-leaver", [*stable(range(0, 11, 2), None, SPLIT), (12, "PreparingRebalance", None, SPLIT),
                       *stable(range(14, 17, 2), None, [("m1", None, [0]), ("m3", None, [1])])],
     offsets("s-late-leaver", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m3")]}),
     [record("s-late-leaver", 0.5, 1, [member("m1"), member("m2")]),
      record("s-late-leaver", 12.1, 2, [member("m1"), member("m3")])],
     commits("s-late-leaver", [*regular((0, 1), 10), (0, 11.0), (1, 11.4), (0, 14.0), (1, 14.0)]),
     ("join", 11.0, 12.1, 1.1, 20.0, 1, 2)),
    # m2 commits (10.5) and leaves; m1, the survivor, revoked at 11.0 (m2's closing commit is
    # not a revocation of a survivor): 11.0 … 12.1
    ("s-leave", [*stable(range(0, 11, 2), None, SPLIT), (12, "PreparingRebalance", None, SPLIT),
                 *stable(range(14, 17, 2), None, BOTH)],
     offsets("s-leave", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m1")]}),
     [record("s-leave", 0.5, 1, [member("m1"), member("m2")]), record("s-leave", 12.1, 2, [member("m1")])],
     commits("s-leave", [*regular((0, 1), 10), (1, 10.5), (0, 11.0), (0, 14.0), (1, 14.0)]),
     ("leave", 11.0, 12.1, 1.1, 20.0, 1, 2)),
    # static member i2 closes after its commit at 5.0 and is back as m3: the coordinator rewrites
    # generation 1 with m3 at 7.3 (no rebalance): its absence 5.0 … 7.3 against 8 + 1 + 1
    ("s-static", [*stable(range(0, 7, 2), None, STATIC),
                  *stable(range(8, 11, 2), None, [("m1", "i1", [0]), ("m3", "i2", [1])])],
     offsets("s-static", 10, {0: [(0, "m1")], 1: [(0, "m2"), (8, "m3")]}),
     [record("s-static", 0.5, 1, [member("m1", "i1"), member("m2", "i2")]),
      record("s-static", 7.3, 1, [member("m1", "i1"), member("m3", "i2")])],
     commits("s-static", [*regular((0,), 10), (1, 0.0), (1, 2.0), (1, 4.0), (1, 5.0), (1, 8.0), (1, 10.0)]),
     ("static_member_bounce", 5.0, 7.3, 2.3, 10.0, 1, 1)),
]


# (case, member sweeps, offsets, group-metadata records, expected: (cause, bound s))
BOUND_CASES: list[tuple[str, list[tuple[Any, ...]], list[dict[str, Any]], list[dict[str, Any]],
                        tuple[str, float]]] = [
    # classic: m2's record says session 8 s (not the 10 s default) → 8 + 1 + 1; m2 quiet since
    # 4, removed at 16 (12 s: nearer 8 than 20) → session timeout
    ("b-classic", [*stable(range(0, 15, 2), 1, SPLIT), (16, "PreparingRebalance", 1, [("m1", None, [0])]),
                   *stable(range(18, 23, 2), 2, BOTH)],
     offsets("b-classic", 22, {0: [(0, "m1")], 1: [(0, "m2"), (20, "m1")]}, frozen={1: 4}),
     [record("b-classic", 0.5, 1, [member("m1"), member("m2")])],
     ("session_timeout", 10.0)),
    # KIP-848: the member records carry the rebalance timeout (20 s, not the 30 s default) and no
    # session timeout; m2 quiet since 4, removed at 24 (20 s) → max.poll.interval, bound 20 s
    ("b-kip848", [*stable(range(0, 23, 2), 3, SPLIT), (24, "Reconciling", 4, [("m1", None, [0])]),
                  *stable(range(26, 31, 2), 5, BOTH)],
     offsets("b-kip848", 30, {0: [(0, "m1")], 1: [(0, "m2"), (28, "m1")]}, frozen={1: 4}),
     [record("b-kip848", 0.5, None, [member(m, session_ms=None)], "consumer_group_member", m)
      for m in ("m1", "m2")],
     ("max_poll_interval", 20.0)),
    # KIP-848 crash: no session timeout in any record → the 10 s default: 10 + 1 + 1; m2 quiet
    # since 4, removed at 14 (10 s) → session timeout
    ("b-kip848-crash", [*stable(range(0, 13, 2), 3, SPLIT), (14, "Reconciling", 4, [("m1", None, [0])]),
                        *stable(range(16, 21, 2), 5, BOTH)],
     offsets("b-kip848-crash", 20, {0: [(0, "m1")], 1: [(0, "m2"), (18, "m1")]}, frozen={1: 4}),
     [record("b-kip848-crash", 0.5, None, [member(m, session_ms=None)], "consumer_group_member", m)
      for m in ("m1", "m2")],
     ("session_timeout", 12.0)),
    # a session (10 s) longer than max.poll.interval.ms (3 s): m2 quiet since 4, removed at 10
    # (6 s: nearer 10 than 3 in ratio, but a session timeout cannot come before 10 − 1 − 1 = 8 s
    # of silence) → max.poll.interval, bound 3 s
    ("b-slow-poll", [*stable(range(0, 9, 2), 1, SPLIT), (10, "PreparingRebalance", 1, [("m1", None, [0])]),
                     *stable(range(12, 17, 2), 2, BOTH)],
     offsets("b-slow-poll", 16, {0: [(0, "m1")], 1: [(0, "m2"), (14, "m1")]}, frozen={1: 4}),
     [record("b-slow-poll", 0.5, 1, [member(m, session_ms=10_000, rebalance_ms=3_000) for m in ("m1", "m2")])],
     ("max_poll_interval", 3.0)),
]


