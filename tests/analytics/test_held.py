"""Stalls and stops held while their owner looks crashed (lagscope.analytics.groups.judge_idle,
**Held**; docs/analytics.md "Definitions"), through whole steps as each Spark task runs them
(lagscope.analytics.step.run_step over Arrow, no Spark): hand-computed scenarios, each with why it
expects what it expects.

A member that is SIGKILLed keeps its partitions until the broker expires its session: until
then a crash and a consumer stuck alive look the same. An owner silent on every partition it
owns is not yet a stall or a stop while the broker may still remove it: the hold lasts the
member's session bound (session + heartbeat + network, as for a crashed member's rebalance) from
the episode's start, and while the group is then rebalancing, until it settles.

Thresholds: stall_after_s = stop_after_s = 10 s; session 20 s, heartbeat 1 s, network 1 s: a
bound of 22 s. Sweeps every 2 s. m1 owns partitions 0 and 1 and commits its last progress at
30 s (its episodes start there; released at 52 s); m2 owns 2 and 3 and progresses throughout.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from analytics_builders import at, members_rows, offsets_rows

from lagscope.analytics import step
from lagscope.analytics.status import HELD_REASON
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.schema import TABLES

S = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=10, stop_after_s=10), session_timeout_s=20,
                    heartbeat_s=1, network_s=1, rebalance_timeout_s=30)
T = range(0, 121, 2)
STUCK = 100 + 5 * 30  # m1's partitions' committed offset from 30 s on


def lake(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema).select(step.READ_COLUMNS[name])


def run(offsets: list[dict[str, Any]], members: list[dict[str, Any]], upto: float,
        state: dict[str, pa.Table] | None = None) -> step.StepOutput:
    """One step over the rows before ``upto`` (a provisional or full step ending then)."""
    return step.run_step(step.StepInputs(
        offsets=lake("offsets", [r for r in offsets if r["sweep_ts"] < at(upto)]),
        members=lake("members", [r for r in members if r["sweep_ts"] < at(upto)]),
        commits=None, group_events=None, state=state or {}), settings=S, as_of=at(upto))


def idle(out: step.StepOutput) -> list[tuple[Any, ...]]:
    return sorted((r["partition"], r["kind"], r["severity"], r["start_ts"])
                  for r in out.tables["anomalies"].to_pylist() if r["kind"] in ("stall", "stop", "starved"))


def status_of(out: step.StepOutput, partition: int | None) -> dict[Any, tuple[str, str]]:
    return {r["eval_ts"]: (r["status"], r["reason"]) for r in out.tables["status"].to_pylist()
            if r["partition"] == partition}


def crash(*, removed: bool) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """m1 goes silent at 30 s. ``removed``: the broker expires it (the group rebalances at 50–52 s,
    Stable again at 54 s with m2 owning everything, which commits on 0 and 1 from 54 s on);
    else it stays in the group, silent (a consumer stuck alive, or never expired)."""
    offsets: list[dict[str, Any]] = []
    for p in (0, 1):
        rows = []
        for t in T:
            if removed and t >= 54:
                rows.append((t, STUCK + 10 + 5 * (t - 54), 1000, 0, "m2"))
            elif removed and t >= 50:
                rows.append((t, STUCK, 1000, 0, None))
            else:
                rows.append((t, 100 + 5 * min(t, 30), 1000, 0, "m1"))
        offsets += offsets_rows(rows, partition=p)
    for p in (2, 3):
        offsets += offsets_rows([(t, 100 + 5 * t, 1000) for t in T], partition=p, owner="m2")
    members = []
    for t in T:
        if removed and t >= 54:
            members += members_rows([(t, "Stable", 2, [("m2", None, [0, 1, 2, 3])])])
        elif removed and t >= 50:
            members += members_rows([(t, "PreparingRebalance", 1, [("m2", None, [2, 3])])])
        else:
            members += members_rows([(t, "Stable", 1, [("m1", None, [0, 1]), ("m2", None, [2, 3])])])
    return offsets, members


def test_a_crashed_owner_removed_within_its_session_bound_is_no_stop() -> None:
    # at 46 s m1 has been silent 16 s on both its partitions (≥ stall_after_s: a stall warning,
    # and STALL statuses, before the hold): within its bound (52 s) the broker may still expire
    # it, so nothing is reported; at 53 s the bound has passed but the group is rebalancing (the
    # broker removed m1 at ~50 s): still held, until it settles at 54 s, where the rebalance
    # window owns the outage. No step reports a stall or stop of m1's partitions, no status of
    # them is STALL or STOP
    offsets, members = crash(removed=True)
    for upto in (46, 53, 55, 120):
        out = run(offsets, members, upto)
        assert idle(out) == [], upto
        assert not {s for p in (0, 1, None) for s, _ in status_of(out, p).values()} & {"STALL", "STOP"}, upto
    # what the step at 46 s showed instead: the partitions' own evaluation, held
    (row,) = status_of(run(offsets, members, 46), 0).values()
    assert row == ("OK", f"{HELD_REASON}owner assigned but no commit for 14 s with lag 750")
    assert any(r["cause"] == "session_timeout" for r in run(offsets, members, 120).tables["rebalances"].to_pylist())


def test_a_silent_owner_never_removed_is_a_stall_from_its_true_start_once_the_bound_has_passed() -> None:
    # m1 stays in the group, silent: before its bound (52 s) nothing, from it on the stall of
    # each of its partitions, dated from 30 s (the detection waits 22 s instead of 10 s; the
    # finding's start does not move); a warning: m2 progresses. The same in one step or two
    offsets, members = crash(removed=False)
    assert idle(run(offsets, members, 52)) == []
    want = [(0, "stall", "warning", at(30)), (1, "stall", "warning", at(30))]
    assert idle(run(offsets, members, 54)) == want
    first = run(offsets, members, 60)
    assert idle(first) == want
    second = step.run_step(step.StepInputs(
        offsets=lake("offsets", [r for r in offsets if r["sweep_ts"] >= at(60)]),
        members=lake("members", [r for r in members if r["sweep_ts"] >= at(60)]),
        commits=None, group_events=None, state=first.state), settings=S, as_of=at(120))
    assert idle(second) == want
    # status: held before the bound, STALL from it on (the minute's row at 58 s)
    early = status_of(run(offsets, members, 50), 0)
    assert [s for s, _ in early.values()] == ["OK"]
    assert status_of(first, 0)[at(58)][0] == "STALL"
    assert status_of(first, None)[at(58)][0] == "STALL"


def test_an_owner_alive_on_another_partition_is_not_held() -> None:
    # m1 keeps committing on partition 1 while partition 0 stands still from 30 s: m1 is alive,
    # partition 0 is starved at once (16 s at 46 s: info), as without the hold
    offsets, members = crash(removed=False)
    offsets = [r for r in offsets if r["partition"] != 1] + offsets_rows(
        [(t, 100 + 5 * t, 1000) for t in T], partition=1, owner="m1")
    assert idle(run(offsets, members, 46)) == [(0, "starved", "info", at(30))]


def test_a_partition_left_without_an_owner_outside_a_rebalance_is_not_held() -> None:
    # m1 stops progressing at 20 s and its partition shows no owner from 22 s on, while the group
    # is not rebalancing (no member sweep says so): the member is gone, nobody is left for the
    # broker to expire: a stop once stop_after_s has passed, though m1's session (60 s here)
    # would have held a silent owner until 82 s; its status STOP
    settings = S.model_copy(update={"session_timeout_s": 60})
    offsets = offsets_rows([(t, 100 + 5 * min(t, 20), 1000, 0, "m1" if t <= 20 else None) for t in T])
    out = step.run_step(step.StepInputs(
        offsets=lake("offsets", [r for r in offsets if r["sweep_ts"] < at(46)]),
        members=lake("members", []), commits=None, group_events=None, state={}), settings=settings, as_of=at(46))
    assert idle(out) == [(0, "stop", "critical", at(20))]
    assert status_of(out, 0)[at(44)][0] == "STOP"
    # the same partition still owned by the silent m1: held
    owned = offsets_rows([(t, 100 + 5 * min(t, 20), 1000) for t in T])
    held = step.run_step(step.StepInputs(
        offsets=lake("offsets", [r for r in owned if r["sweep_ts"] < at(46)]),
        members=lake("members", []), commits=None, group_events=None, state={}), settings=settings, as_of=at(46))
    assert idle(held) == []
    assert status_of(held, 0)[at(44)][0] == "OK"


def test_the_session_bound_is_the_groups_own_from_its_generation_record() -> None:
    # the default session here is 5 s (a bound of 7 s: released at 37 s), but the group's
    # generation record (__consumer_offsets) says its members' session is 20 s: the bound is
    # 22 s, so at 46 s the silent m1's stall is still held; without the record, it is reported
    import rebalance_cases as rc

    settings = S.model_copy(update={"session_timeout_s": 5})
    offsets, members = crash(removed=False)
    gen = [rc.record("g", 0.0, 1, [rc.member("m1", session_ms=20000, parts=(0, 1)),
                                   rc.member("m2", session_ms=20000, parts=(2, 3))])]

    def stalls(events: list[dict[str, Any]] | None) -> list[tuple[Any, ...]]:
        return idle(step.run_step(step.StepInputs(
            offsets=lake("offsets", [r for r in offsets if r["sweep_ts"] < at(46)]),
            members=lake("members", [r for r in members if r["sweep_ts"] < at(46)]), commits=None,
            group_events=lake("group_events", events) if events is not None else None, state={}),
            settings=settings, as_of=at(46)))

    assert stalls(gen) == []
    assert stalls(None) == [(0, "stall", "warning", at(30)), (1, "stall", "warning", at(30))]


def test_an_owner_committing_the_same_offset_is_alive_and_not_held() -> None:
    # with the commit stream: m1 keeps committing partitions 0 and 1 every 2 s, the same offset
    # from 30 s on. It is alive (a crashed member commits nothing): its stalls are reported at
    # stall_after_s, not held for its session bound. Silent instead (no record after 30 s): held
    offsets, members = crash(removed=False)

    def commits(alive: bool) -> list[dict[str, Any]]:
        return [{"cluster": "c", "date": "2026-01-01", "group_id": "g", "topic": "t", "partition": p,
                 "committed_offset": 100 + 5 * min(t, 30), "commit_ts": at(t), "record_ts": at(t),
                 "source_partition": 0, "source_offset": i}
                for i, (t, p) in enumerate((t, p) for t in range(0, 46, 2) for p in (0, 1)) if alive or t <= 30]

    def at_46(alive: bool) -> list[tuple[Any, ...]]:
        return idle(step.run_step(step.StepInputs(
            offsets=lake("offsets", [r for r in offsets if r["sweep_ts"] < at(46)]),
            members=lake("members", [r for r in members if r["sweep_ts"] < at(46)]),
            commits=lake("commits", commits(alive)), group_events=None, state={}), settings=S, as_of=at(46)))

    assert [(p, k) for p, k, _, _ in at_46(True)] == [(0, "stall"), (1, "stall")]
    assert at_46(False) == []


def only_member(back: float | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """m1 alone owns partitions 0 and 1 and goes silent at 30 s; the broker expires it at ~49 s:
    from 50 s the group is Empty, the partitions without an owner. ``back``: a new member m3
    joins then (Stable, generation 3) and commits progress on both from that sweep on."""
    offsets: list[dict[str, Any]] = []
    for p in (0, 1):
        rows = []
        for t in T:
            if back is not None and t >= back:
                rows.append((t, STUCK + 5 * (t - back + 1), 1000, 0, "m3"))
            elif t >= 50:
                rows.append((t, STUCK, 1000, 0, None))
            else:
                rows.append((t, 100 + 5 * min(t, 30), 1000, 0, "m1"))
        offsets += offsets_rows(rows, partition=p)
    members = []
    for t in T:
        if back is not None and t >= back:
            members += members_rows([(t, "Stable", 3, [("m3", None, [0, 1])])])
        elif t >= 50:
            members += members_rows([(t, "Empty", 2, [])])
        else:
            members += members_rows([(t, "Stable", 1, [("m1", None, [0, 1])])])
    return offsets, members


def test_a_group_whose_only_member_crashed_is_released_when_it_goes_empty() -> None:
    # the group is Empty from 50 s: the broker has removed m1 and nothing is left to rebalance, so
    # the hold ends at the release (52 s) instead of lasting the rebalance timeout (to 82 s, when
    # an Empty group counted as rebalancing): the stalls are reported from the first step after
    # it, dated 30 s, and the status says STOP (no member of the group progresses), not OK (held)
    offsets, members = only_member(None)
    assert idle(run(offsets, members, 52)) == []
    got = run(offsets, members, 60)
    assert [(p, k, s) for p, k, _, s in idle(got)] == [(0, "stall", at(30)), (1, "stall", at(30))]
    assert status_of(got, 0)[at(58)][0] == "STOP"


def test_a_finding_reported_open_then_explained_by_a_rebalance_is_withdrawn() -> None:
    # m3 joins at 80 s: one pass sees the window through Empty (a session timeout: m1's last
    # progress at 30 s, carried across the steps as the partitions' last owner's) owning the
    # outage, and reports no stall. A step ending at 60 s reported them open; the step after it
    # withdraws them: one row per key, with the kind and severity they were published with, the
    # episode's end, and withdrawn set, so a reader sees what one pass shows
    offsets, members = only_member(80)
    whole = run(offsets, members, 120)
    assert idle(whole) == []
    assert not any(whole.tables["anomalies"].column("withdrawn").to_pylist())
    assert [r["cause"] for r in whole.tables["rebalances"].to_pylist()] == ["session_timeout"]
    first = run(offsets, members, 60)
    assert [(p, k, sev) for p, k, sev, _ in idle(first)] == [(0, "stall", "warning"), (1, "stall", "warning")]
    assert sorted(first.state["open_keys"].column("key").to_pylist()) == sorted(
        first.tables["anomalies"].column("key").to_pylist())

    def after(state: dict[str, pa.Table], lo: float, hi: float) -> step.StepOutput:
        return step.run_step(step.StepInputs(
            offsets=lake("offsets", [r for r in offsets if at(lo) <= r["sweep_ts"] < at(hi)]),
            members=lake("members", [r for r in members if at(lo) <= r["sweep_ts"] < at(hi)]),
            commits=None, group_events=None, state=state), settings=S, as_of=at(hi))

    second = after(first.state, 60, 120)
    rows = second.tables["anomalies"].to_pylist()
    assert [(r["partition"], r["kind"], r["severity"], r["end_ts"], r["withdrawn"]) for r in rows] == [
        (0, "stall", "warning", at(80), True), (1, "stall", "warning", at(80), True)]
    assert {r["key"] for r in rows} == set(first.tables["anomalies"].column("key").to_pylist())
    assert second.state["open_keys"].num_rows == 0
    # a state written before open_keys existed withdraws nothing (the keys it published stay)
    old = after({k: v for k, v in first.state.items() if k != "open_keys"}, 60, 120)
    assert old.tables["anomalies"].num_rows == 0
    # once withdrawn, a later step does not withdraw it again
    assert after(second.state, 120, 121).tables["anomalies"].num_rows == 0

