"""A rebalance window's generation before, its timeouts and its bound do not depend on which UTC
days' lake files a step reads. A step reads the ``group_events`` date partitions from its start's
day on (``analytics/job.py``), so a group whose last generation record was written on an earlier
day has no record before the window's A in that step's rows: the record in force is carried
(the state part ``advice_groups``: its time, generation and timeouts). Three groups whose
generation-1 record is on day D (2025-12-31) and whose rebalance is on day D+1 (2026-01-01): a
join at 00:02 (the new member's timeouts are longer than the group's), a leave across midnight
(its A at 23:59:57.5, its B at 00:00:07.5) and a crash at 00:03; steps cut at every minute
boundary (each reading the lake's days as the job does) equal one pass over both days, row for
row. lagscope.analytics.step.run_step over Arrow, no Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
import rebalance_cases as rc
from analytics_builders import at, members_rows, offsets_rows
from test_step_invariance import SETTINGS, _differences, _run

# SETTINGS (test_step_invariance's): their defaults (45 s session, 300 s rebalance timeout) differ
# from every record's timeouts
FIRST, LAST = -300.0, 300.0  # the lake's sweeps: 23:55 … 00:05
SWEEPS = [FIRST + 2.5 + 5 * i for i in range(int((LAST - FIRST) // 5))]  # …, -2.5, 2.5, … (midnight between two)
#: a reader's identity of a row of each table compared (the anomalies: current rows per key)
IDENTITY = {"rebalances": ("group_id", "start_ts"), "anomalies": ("key",),
            "status": ("eval_ts", "group_id", "topic", "partition")}


def _member(mid: str, session_s: float, rebalance_s: float, parts: tuple[int, ...]) -> dict[str, Any]:
    return rc.member(mid, session_ms=int(session_s * 1000), rebalance_ms=int(rebalance_s * 1000), parts=parts)


def _record(group: str, t: float, gen: int, members: list[dict[str, Any]]) -> dict[str, Any]:
    return {**rc.record(group, t, gen, members), "date": at(t).date().isoformat()}


def _group(group: str, *, change: float, after: list[tuple[str, None, list[int]]],
           before_rec: list[dict[str, Any]], after_rec: list[dict[str, Any]], first_rec: float, gen2_at: float,
           frozen_from: float | None = None) -> dict[str, list[dict[str, Any]]]:
    """One group: m1 (p0) and m2 (p1) settled in generation 1 (its record at ``first_rec``, day D)
    up to the last sweep before ``change``, rebalancing at the sweep after it, settled with
    ``after`` from the next one on (generation 2's record at ``gen2_at``). Sweeps carry no
    generation (DescribeGroups reports none). ``frozen_from``: m2 stopped there (crashed: p1's
    committed offset frozen, no commits) until p1's next owner."""
    m1, m2 = f"{group}-m1", f"{group}-m2"
    split = [(m1, None, [0]), (m2, None, [1])]
    settled = [(f"{group}-{m}", i, ps) for m, i, ps in after]
    p1_after = next(m for m, _, ps in settled if 1 in ps)
    stays = p1_after == m2  # a join: m2 keeps p1 through the rebalance; else it is gone from it on
    rebalancing = min(t for t in SWEEPS if t > change)
    out: dict[str, list[dict[str, Any]]] = {"offsets": [], "members": [], "commits": [], "group_events": []}
    committed = {0: 0, 1: 0}
    for t in SWEEPS:
        end = 10 + int(2 * (t - FIRST))
        state, mem = ("Stable", split) if t < rebalancing else (
            ("PreparingRebalance", split if stays else [(m1, None, [0])]) if t == rebalancing else ("Stable", settled))
        out["members"] += members_rows([(t, state, None, mem)], group=group)
        for p in (0, 1):
            own = m1 if p == 0 else m2 if t < rebalancing or stays else None if t == rebalancing else p1_after
            stuck = p == 1 and frozen_from is not None and frozen_from <= t and own == m2
            if own is not None and not stuck:
                committed[p] = end - 1
                out["commits"].append({"cluster": "c", "group_id": group, "topic": "t", "partition": p,
                                       "committed_offset": committed[p], "commit_ts": at(t - 0.4),
                                       "record_ts": at(t - 0.4)})
            out["offsets"] += offsets_rows([(t, committed[p], end, 0, own)], group=group, partition=p)
    out["group_events"] = [_record(group, first_rec, 1, before_rec), _record(group, gen2_at, 2, after_rec)]
    return out


def lake() -> dict[str, list[dict[str, Any]]]:
    groups = [
        # a join on day D+1: a-m3 (30 s session, 60 s rebalance timeout) joins at 00:02; the
        # timeouts in force at A are generation 1's (8 s, 20 s: a join's bound, 20 s), not the new
        # record's nor the defaults
        _group("a", change=120.0, after=[("m1", None, [0]), ("m2", None, [1]), ("m3", None, [])],
               before_rec=[_member("a-m1", 8, 20, (0,)), _member("a-m2", 8, 20, (1,))],
               after_rec=[_member("a-m1", 8, 20, (0,)), _member("a-m2", 8, 20, (1,)), _member("a-m3", 30, 60, ())],
               first_rec=-3000.0, gen2_at=124.0),
        # a leave across midnight: A at 23:59:52.5, b-m2 gone at 23:59:57.5, generation 2 written
        # at 00:00:01 (day D+1), B at 00:00:02.5; b-m2's timeouts (30 s, 60 s) are the group's
        # largest in generation 1
        _group("b", change=-5.0, after=[("m1", None, [0, 1])],
               before_rec=[_member("b-m1", 8, 20, (0,)), _member("b-m2", 30, 60, (1,))],
               after_rec=[_member("b-m1", 8, 20, (0, 1))], first_rec=-1800.0, gen2_at=1.0),
        # the same with generation 2 written at 23:59:59 (day D): the record that ends the window
        # is on the day before B's
        _group("d", change=-5.0, after=[("m1", None, [0, 1])],
               before_rec=[_member("d-m1", 8, 20, (0,)), _member("d-m2", 30, 60, (1,))],
               after_rec=[_member("d-m1", 8, 20, (0, 1))], first_rec=-1200.0, gen2_at=-1.0),
        # a crash on day D+1: c-m2 stops at 00:03:02.5 and is removed after its 10-s session
        _group("c", change=195.0, after=[("m1", None, [0, 1])],
               before_rec=[_member("c-m1", 10, 25, (0,)), _member("c-m2", 10, 25, (1,))],
               after_rec=[_member("c-m1", 10, 25, (0, 1))], first_rec=-600.0, gen2_at=196.0, frozen_from=182.5),
    ]
    out: dict[str, list[dict[str, Any]]] = {"offsets": [], "members": [], "commits": [], "group_events": []}
    for g in groups:
        for name, rows in g.items():
            out[name] += rows
    return out


@pytest.mark.parametrize("with_commits", [True, False])
def test_one_pass_takes_the_records_of_day_d(with_commits: bool) -> None:
    # the one pass the steps are held to: each window's generation before and timeouts are those
    # of generation 1's record, written on day D; b's and d's windows cross midnight
    got = {r["group_id"]: r for r in _run(lake(), None, at(LAST), None, with_commits).tables["rebalances"].to_pylist()}
    day_d, day_d1 = at(-1).date(), at(0).date()
    assert {g: (r["cause"], r["generation_before"], r["generation_after"], r["bound_s"], r["start_ts"].date(),
                r["end_ts"].date()) for g, r in got.items()} == {
        "a": ("join", 1, 2, 20.0, day_d1, day_d1),
        "b": ("leave", 1, 2, 60.0, day_d, day_d1),
        "d": ("leave", 1, 2, 60.0, day_d, day_d1 if not with_commits else day_d),
        "c": ("session_timeout", 1, 2, 10.0 + SETTINGS.heartbeat_s + SETTINGS.network_s, day_d1, day_d1)}


@pytest.mark.parametrize("with_commits", [True, False])
def test_steps_cut_at_every_minute_equal_one_pass(with_commits: bool) -> None:
    lk = lake()
    end = at(LAST)
    whole = _run(lk, None, end, None, with_commits)
    assert whole.tables["rebalances"].num_rows == 4
    cuts = [at(60 * m) for m in range(-4, 5)]
    for plan in [[at(0)], [at(60)], cuts]:
        outs, state, lo = [], None, None
        for hi in [*plan, end]:
            out = _run(lk, lo, hi, state, with_commits)
            outs.append(out)
            state, lo = out.state, hi
        assert _differences([whole], outs, IDENTITY) == [], [c.isoformat() for c in plan]


def _carried(state: dict[str, pa.Table]) -> dict[str, list[tuple[Any, ...]]]:
    got: dict[str, list[tuple[Any, ...]]] = {}
    for r in state["generations"].to_pylist():
        got.setdefault(r["group_id"], []).append((r["gen_t"], r["generation"], r["session_timeout_s"],
                                                  r["rebalance_timeout_s"]))
    return {g: sorted(v) for g, v in got.items()}


def test_what_is_carried() -> None:
    # at midnight: each group's record in force at its last settled sweep (23:59:57.5 for a and c,
    # 23:59:52.5 for b and d), and d's generation 2, written after that sweep (23:59:59) and before
    # the step's end; b's (00:00:01) is the next step's own
    lk = lake()
    out = _run(lk, None, at(0), None, True)
    assert _carried(out.state) == {
        "a": [(at(-3000).timestamp(), 1, 8.0, 20.0)], "b": [(at(-1800).timestamp(), 1, 30.0, 60.0)],
        "c": [(at(-600).timestamp(), 1, 10.0, 25.0)],
        "d": [(at(-1200).timestamp(), 1, 30.0, 60.0), (at(-1).timestamp(), 2, 8.0, 20.0)]}
    # once settled again, only the record in force: generation 2's
    out = _run(lk, at(0), at(60), out.state, True)
    assert {g: [r[1] for r in v] for g, v in _carried(out.state).items()} == {"a": [1], "b": [2], "c": [1], "d": [2]}


def test_a_group_gone_past_the_horizon_is_forgotten() -> None:
    # no sweep of any group after 00:05: their records are carried while the horizon has not
    # passed since their last sweep, then dropped
    lk = lake()
    out = _run(lk, None, at(LAST), None, True)
    horizon = SETTINGS.rules.forget_horizon_s()
    kept = _run(lk, at(LAST), at(LAST + horizon - 60), out.state, True)
    assert set(_carried(kept.state)) == {"a", "b", "c", "d"}
    gone = _run(lk, at(LAST + horizon - 60), at(LAST + horizon + 60), kept.state, True)
    assert gone.state["generations"].num_rows == 0
