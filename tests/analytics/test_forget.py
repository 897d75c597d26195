"""A partition silent for longer than the horizon (``analytics.rules.forget_after_s``, at least the
longest window a rule reads) is forgotten: the step after the horizon drops its carried state, so
the state is bounded by the partitions swept within the horizon, not by every partition ever seen
(issue 26: ``lagscope run``'s memory over hours); and a partition that comes back after such a
silence is judged as a new one — the same way by the steps and by one pass over everything."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import rebalance_cases as rc
from analytics_builders import at
from test_step_invariance import _arrow, random_group

from lagscope.analytics import onepass
from lagscope.analytics import step as steps
from lagscope.config import COMMIT_LOOKBACK_S, AnalyticsConfig, AnalyticsRulesConfig
from lagscope.schema import COMMITS, GROUP_EVENTS, MEMBERS, OFFSETS

SETTINGS = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=15, stop_after_s=15, gap_min_samples=10_000,
                                                      growth_min_minutes=2, storm_window_s=60,
                                                      forget_after_s=60))
HORIZON_S = SETTINGS.rules.forget_horizon_s()
LIFE_MIN = 6  # test_step_invariance.MINUTES: one life of a group
#: the second life of g0 starts this many minutes after the first ended: a silence past the horizon
BACK_MIN = LIFE_MIN + int(HORIZON_S // 60) + 2
END_MIN = BACK_MIN + LIFE_MIN
IDENTITY = {"anomalies": ("key",), "status": ("eval_ts", "group_id", "topic", "partition"),
            "lag_trends": ("window_start", "group_id", "topic", "partition"),
            "rebalances": ("cluster", "group_id", "start_ts")}
TIME = {"anomalies": "start_ts", "status": "eval_ts", "lag_trends": "window_start", "rebalances": "start_ts"}
#: the state parts of a group (each keeps nothing of a group gone past the horizon, but
#: ``msweeps`` the marks of its life, its last sweep and last settled one, for a day:
#: groups.GONE_HOLD_S)
GROUP_PARTS = ("series", "history", "entries", "gaps", "minutes", "pending_gaps", "gap_times", "msweeps",
               "recent_rebalances", "outages", "member_progress", "generations")


def _shifted(rows: list[dict[str, Any]], by: dt.timedelta) -> list[dict[str, Any]]:
    return [{k: (v + by if isinstance(v, dt.datetime) else v) for k, v in r.items()} for r in rows]


def _lake(seed: int, with_records: bool = False, tombstones: bool = True) -> dict[str, list[dict[str, Any]]]:
    """g0 lives twice (minutes 0–6, then again from BACK_MIN, its partitions and members the same
    names, its generations others: a group deleted and made again); g1 lives once, in the first six
    minutes, and never comes back. ``with_records``: the commit stream's ``group_events``: each
    life's generation record a second before its first sweep and one a generation later, with the
    same members, half a minute after it (the group stable then: a generation no sweep saw), and a
    tombstone 10 s after the last sweep of a life that ends (the group deleted; without
    ``tombstones``, none: the group no longer swept for a while); and the second life of g0
    rebalancing (not settled) for its first 70 s."""
    rng = random.Random(seed)
    lake: dict[str, list[dict[str, Any]]] = {"offsets": [], "members": [], "commits": []}
    second = random_group(rng, "g0")
    second["members"] = [{**r, "generation": r["generation"] + 10} for r in second["members"]]
    lives = [(random_group(rng, "g0"), 0.0), (random_group(rng, "g1"), 0.0), (second, BACK_MIN * 60.0)]
    if with_records:
        start = min(r["sweep_ts"] for r in second["members"])
        second["members"] = [{**r, "group_state": "PreparingRebalance"} if r["sweep_ts"] < start + dt.timedelta(
            seconds=70) and r["group_state"] == "Stable" else r for r in second["members"]]
    for life, shift in lives:
        for name, rows in life.items():
            lake[name] += _shifted(rows, dt.timedelta(seconds=shift))
    if with_records:
        lake["group_events"] = []
        for n, (life, shift) in enumerate(lives):
            group = life["members"][0]["group_id"]
            sweeps = sorted({(r["sweep_ts"] - at(0)).total_seconds() + shift for r in life["members"]})
            ids = sorted({r["member_id"] for r in life["members"] if r["sweep_ts"] == min(
                x["sweep_ts"] for x in life["members"]) and r["member_id"]})
            gen = min(r["generation"] for r in life["members"])
            for t, g in ((sweeps[0] - 1.0, gen), (sweeps[0] + 30.0, gen + 1)):
                lake["group_events"].append({**rc.record(group, t, g, [rc.member(m) for m in ids]),
                                             "date": at(t).date().isoformat()})
            if n < 2 and tombstones:  # the first lives end: the group deleted
                t = sweeps[-1] + 10.0
                lake["group_events"].append({**rc.record(group, t, None, [], record_type="group_tombstone"),
                                             "date": at(t).date().isoformat()})
    return lake


def _run(lake: dict[str, list[dict[str, Any]]], lo: dt.datetime | None, hi: dt.datetime,
         state: dict[str, pa.Table] | None, with_commits: bool) -> steps.StepOutput:
    def rows(table: str, col: str, since: dt.datetime | None) -> list[dict[str, Any]]:
        return [r for r in lake[table] if (since is None or r[col] >= since) and r[col] < hi]

    commits = events = None
    if with_commits:  # as the job reads them: from COMMIT_LOOKBACK before the step's start
        commits = _arrow(rows("commits", "commit_ts", None if lo is None else lo - dt.timedelta(
            seconds=COMMIT_LOOKBACK_S)), COMMITS)
    if "group_events" in lake:  # as the job reads them: the UTC days from the step's start's, whole
        events = _arrow([r for r in lake["group_events"] if (lo is None or r["record_ts"].date() >= lo.date())
                         and r["record_ts"].date() <= hi.date()], GROUP_EVENTS)
    return steps.run_step(steps.StepInputs(offsets=_arrow(rows("offsets", "sweep_ts", lo), OFFSETS),
                                           members=_arrow(rows("members", "sweep_ts", lo), MEMBERS),
                                           commits=commits, group_events=events, state=state or {}),
                          settings=SETTINGS, as_of=hi)


def _seen(outs: list[steps.StepOutput], table: str, since: dt.datetime | None = None) -> dict[tuple[Any, ...], Any]:
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for out in outs:
        for r in out.tables[table].to_pylist():
            if since is not None and r[TIME[table]] < since:
                continue
            r.pop("as_of_ts", None)
            seen[tuple(r[c] for c in IDENTITY[table])] = r
    return seen


def _state_groups(state: dict[str, pa.Table]) -> dict[str, set[str]]:
    return {name: set(state[name].column("group_id").to_pylist()) for name in GROUP_PARTS}


def test_the_horizon_is_at_least_every_window_a_rule_reads() -> None:
    rules = AnalyticsRulesConfig(forget_after_s=1.0, stall_after_s=1200.0)
    assert rules.forget_horizon_s() == 1200.0
    assert AnalyticsRulesConfig(forget_after_s=1.0).forget_horizon_s() >= COMMIT_LOOKBACK_S
    assert AnalyticsRulesConfig().forget_horizon_s() == 3600.0
    from lagscope.analytics.job import COMMIT_LOOKBACK

    assert COMMIT_LOOKBACK.total_seconds() == COMMIT_LOOKBACK_S


def test_a_silence_past_the_horizon_starts_a_new_generation_of_the_key() -> None:
    s, c = onepass.SWEEP, onepass.COMMIT
    code = np.array([1, 1, 1, 1, 1, 2, 2, 2])
    kind = np.array([s, s, c, c, s, s, s, c])
    t = np.array([0.0, 10.0, 50.0, 500.0, 600.0, 0.0, 300.0, 700.0])
    # key 1: a silence of 590 s > 100 before its third sweep; the commit at 50 s goes with the
    # sweep after it (600 s: the new generation), as does the one at 500 s; key 2: 300 s apart
    # (a new generation), its commit after its last sweep goes with that sweep's generation
    assert steps.generations(code, kind, t, 100.0).tolist() == [0, 0, 1, 1, 1, 0, 1, 1]
    assert steps.generations(code, kind, t, 1000.0).tolist() == [0] * 8


@pytest.mark.parametrize("seed", range(10))
def test_a_key_back_after_the_horizon_is_new_alike_in_steps_and_in_one_pass(seed: int) -> None:
    # seeds 5–9 with the generation records (5, 7, 9 with the tombstone of a deleted group): no
    # window pairs the records of two lives either
    lake, with_commits = _lake(seed, with_records=seed >= 5, tombstones=seed % 2 == 1), seed % 2 == 0
    end = at(END_MIN * 60)
    whole = [_run(lake, None, end, None, with_commits)]
    outs: list[steps.StepOutput] = []
    state: dict[str, pa.Table] | None = None
    lo = None
    forgotten_at = None
    last_sweep = {"g1": max(r["sweep_ts"].timestamp() for r in lake["members"] if r["group_id"] == "g1")}
    for m in range(1, END_MIN + 1):
        hi = at(60 * m)
        out = _run(lake, lo, hi, state, with_commits)
        outs.append(out)
        state, lo = out.state, hi
        held = _state_groups(state)
        # a group's settings only while another part keeps the group (its advice evidence too)
        assert set(state["advice_groups"].column("group_id").to_pylist()) <= set().union(
            *held.values(), state["advice_evidence"].column("group_id").to_pylist()), m
        if m < LIFE_MIN + HORIZON_S / 60:  # within the horizon of the first life's last sweep: kept
            assert held["series"] == held["msweeps"] == {"g0", "g1"}, m
        else:  # past it: nothing of g1 is carried (nor of g0 before it comes back) but its mark
            marks = state["msweeps"].filter(pc.equal(state["msweeps"].column("group_id"), "g1"))
            assert marks.num_rows <= 2, m  # its last sweep and its last settled one
            assert max(marks.column("t").to_pylist()) == last_sweep["g1"], m
            held.pop("msweeps")
            assert "g1" not in set().union(*held.values()), (m, held)
            if m < BACK_MIN:
                assert all(not groups for groups in held.values()), (m, held)
                forgotten_at = forgotten_at or m
    assert forgotten_at is not None
    for table in IDENTITY:
        one, split = _seen(whole, table), _seen(outs, table)
        assert one == split, table
    # no rebalance window pairs the first life with the second (their generations differ)
    first_end, back_at = at(LIFE_MIN * 60), at(BACK_MIN * 60)
    assert not [r for r in _seen(whole, "rebalances").values() if r["start_ts"] < back_at and r["end_ts"] > first_end]
    # the second life is judged as a new key: as one pass over the second life alone judges it
    back = at(BACK_MIN * 60)
    first_life_end = at(LIFE_MIN * 60)
    second = {k: [r for r in v if min(x for x in r.values() if isinstance(x, dt.datetime)) >= first_life_end]
              for k, v in lake.items()}
    alone = [_run(second, None, end, None, with_commits)]
    for table in IDENTITY:
        assert _seen(whole, table, back) == _seen(alone, table, back), table
    assert _seen(alone, "anomalies", back) or _seen(alone, "status", back)


def test_a_gap_between_two_carried_sweeps_is_no_new_life_and_a_past_life_ends_at_its_mark() -> None:
    # the state carries a life's sweeps with gaps (the Empty sweep its formation started from, its
    # last settled one): two hours between them are no silence of the group. A past life's mark
    # (``life_end``) ends it however close the next sweep is.
    from analytics_builders import members_rows

    from lagscope.analytics import groups

    def sweeps(rows: list[tuple[Any, ...]]) -> pa.Table:
        return groups.member_sweeps(_arrow(members_rows(rows), MEMBERS))

    one = [("m1", None, [0])]
    carried = sweeps([(0.0, "Empty", 1, []), (7200.0, "Stable", 2, one)])
    carried = carried.set_column(carried.schema.get_field_index("is_state"), "is_state",
                                 pa.array([True, True]))
    fresh = sweeps([(7205.0, "Stable", 2, one), (7210.0, "Stable", 2, one)])
    sw = groups._sorted_sweeps(fresh, carried)
    assert groups._changes(sw, 3600.0).new_group.tolist() == [True, False, False, False]
    # the same gap between fresh sweeps (one pass over them) is a new life
    sw = groups._sorted_sweeps(sweeps([(0.0, "Empty", 1, []), (7200.0, "Stable", 2, one)]), None)
    assert groups._changes(sw, 3600.0).new_group.tolist() == [True, True]
    # a mark that ends a past life: the sweep after it starts the next, 5 s later or not
    marked = carried.set_column(carried.schema.get_field_index("life_end"), "life_end", pa.array([False, True]))
    sw = groups._sorted_sweeps(fresh, marked)
    assert groups._changes(sw, 3600.0).new_group.tolist() == [True, False, True, False]
    # and the step carries such a life as the marks of its end (its last and last settled sweep),
    # the next life's own sweeps from its last settled one
    ch = groups._changes(sw, 3600.0)
    keep, current, ends = groups._carried_sweeps(sw, ch, gone_before=7210.0 - 3600.0)
    assert keep.tolist() == [False, True, False, True]
    assert current.tolist() == [False, False, True, True]
    assert ends.tolist() == [False, True, False, False]
