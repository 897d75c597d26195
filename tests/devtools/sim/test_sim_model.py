"""The scenario file model and the truth format, without Kafka."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lagscope.devtools.sim import truth
from lagscope.devtools.sim.model import ProducerSpec, Scenario, load_scenario_file, randomise
from lagscope.devtools.sim.runner import builtin_scenarios, load_scenario, plan_names
from lagscope.devtools.sim.worker import _send_times
from lagscope.errors import ScenarioError


def _base(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "name": "t", "duration": 10,
        "topics": [{"name": "a", "partitions": 2}],
        "producers": [{"name": "p", "topic": "a", "rate": 10}],
        "groups": [{"name": "g", "topics": ["a"], "members": [{"name": "m1"}]}],
    }
    d.update(over)
    return d


def _member(**kw: Any) -> dict[str, Any]:
    return {"groups": [{"name": "g", "topics": ["a"], "members": [{"name": "m1", **kw}]}]}


@pytest.mark.parametrize(("over", "message"), [
    # a producer must write to a topic of the scenario
    ({"producers": [{"name": "p", "topic": "nope"}]}, "unknown topic"),
    # a group must subscribe to topics of the scenario
    ({"groups": [{"name": "g", "topics": ["zz"], "members": [{"name": "m"}]}]}, "unknown topic"),
    # names become part of Kafka names: no spaces or dots
    ({"topics": [{"name": "a b"}]}, "pattern"),
    # member names identify truth records: unique within a group
    ({"groups": [{"name": "g", "topics": ["a"], "members": [{"name": "m"}, {"name": "m"}]}]}, "duplicate member"),
    # an action after the end would never run
    (_member(actions=[{"kind": "crash", "at": 10}]), "not before the end"),
    # nothing can happen to a member after it crashed
    (_member(actions=[{"kind": "crash", "at": 2}, {"kind": "rewind", "at": 3, "messages": 5}]), "nothing may follow"),
    # a bounce is away for a while
    (_member(actions=[{"kind": "bounce", "at": 2}]), "needs a duration"),
    # the assignors kafka-python has
    (_member(partition_assignment_strategy="uniform"), "partition_assignment_strategy"),
    # stop_polling without a duration is undefined
    (_member(actions=[{"kind": "stop_polling", "at": 2}]), "needs a duration"),
    # rewind needs how far
    (_member(actions=[{"kind": "rewind", "at": 2}]), "needs messages"),
    # an action before the member exists
    (_member(join_at=5, actions=[{"kind": "leave", "at": 2}]), "before join_at"),
    # Kafka rejects heartbeat >= session timeout
    (_member(session_timeout_ms=3000, heartbeat_interval_ms=3000), "heartbeat_interval_ms"),
    # unknown keys are typos, not ignored
    ({"topcs": []}, "Extra inputs"),
    # an unknown action kind
    (_member(actions=[{"kind": "explode", "at": 1}]), "kind"),
    # leave_open only makes sense for a transactional producer
    ({"producers": [{"name": "p", "topic": "a", "leave_open": True}]}, "transactional"),
    # expected advice names a rule the analytics have
    ({"expect_advice": [{"group": "g", "rule": "shorter_timeouts", "setting": "session.timeout.ms"}]},
     "unknown rule"),
    # … and a setting that rule can name (the session-timeout rule never names max.poll.records)
    ({"expect_advice": [{"group": "g", "rule": "session_timeout_crash", "setting": "max.poll.records"}]},
     "not 'max.poll.records'"),
    # … for a group of the scenario
    ({"expect_advice": [{"group": "zz", "rule": "max_poll_interval", "setting": "max.poll.interval.ms"}]},
     "unknown group"),
    # one advice per group and rule (the table has one row per group and rule)
    ({"expect_advice": [{"group": "g", "rule": "restart_storm", "setting": "group.instance.id"},
                        {"group": "g", "rule": "restart_storm", "setting": "group.protocol"}]},
     "duplicate expected advice"),
    # a no-fault scenario expects no advice: there is nothing to fix
    ({"no_fault": True, "expect_advice": [{"group": "g", "rule": "max_poll_interval",
                                           "setting": "max.poll.interval.ms"}]}, "expects no advice"),
    # the skip's own fields on another action are typos, not ignored
    (_member(actions=[{"kind": "rewind", "at": 2, "messages": 5, "partitions": "one"}]), "only apply to skip"),
    (_member(actions=[{"kind": "stall", "at": 2, "mechanism": "admin_reset"}]), "only apply to skip"),
    (_member(actions=[{"kind": "stop", "at": 2, "size": 10}]), "only apply to skip"),
    # a skip covers one partition or all, by a mechanism the simulator has
    (_member(actions=[{"kind": "skip", "at": 2, "partitions": "two"}]), "partitions"),
    (_member(actions=[{"kind": "skip", "at": 2, "mechanism": "rewind"}]), "mechanism"),
    (_member(actions=[{"kind": "skip", "at": 2, "state": "asleep"}]), "state"),
    (_member(actions=[{"kind": "skip", "at": 2, "size": 0}]), "size"),
    # catching up waits for the backlog to fall to the size: it needs one
    (_member(actions=[{"kind": "skip", "at": 2, "state": "catching_up"}]), "catching_up needs a size"),
    # an out-of-range reset to the end is the client's auto_offset_reset=latest
    (_member(actions=[{"kind": "skip", "at": 2, "mechanism": "out_of_range"}]), "needs auto_offset_reset: latest"),
    (_member(auto_offset_reset="none"), "auto_offset_reset"),
    # a burst names a partition of its topic, and no keys decide where it goes
    ({"producers": [{"name": "p", "topic": "a", "bursts": [{"at": 1, "count": 5, "partition": 2}]}]},
     "is not one of the topic's"),
    ({"producers": [{"name": "p", "topic": "a", "keys": 4, "bursts": [{"at": 1, "count": 5, "partition": 0}]}]},
     "with keys"),
])
def test_invalid_scenarios_fail_with_one_line(tmp_path: Path, over: dict[str, Any], message: str) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(_base(**over)))  # JSON is YAML
    with pytest.raises(ScenarioError) as exc:
        load_scenario_file(f)
    assert message in str(exc.value)
    assert "\n" not in str(exc.value)


def test_dynamic_bounce_and_assignor_are_valid(tmp_path: Path) -> None:
    # a dynamic member's bounce is a restart (it leaves and joins again); the assignor is a
    # member setting, the client's default when not given
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(_base(**_member(actions=[{"kind": "bounce", "at": 2, "duration": 1}],
                                            partition_assignment_strategy="cooperative-sticky"))))
    (m,) = load_scenario_file(f).groups[0].members
    assert m.group_instance_id is None
    assert m.actions[0].kind == "bounce"
    assert m.partition_assignment_strategy == "cooperative-sticky"
    f.write_text(json.dumps(_base()))
    assert load_scenario_file(f).groups[0].members[0].partition_assignment_strategy is None


def test_unreadable_scenario(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario_file(f)
    with pytest.raises(ScenarioError, match="no scenario"):
        load_scenario("no-such-scenario")


def test_builtin_scenarios_cover_the_issue() -> None:
    names = set(builtin_scenarios())
    assert {"steady", "slow-consumer", "burst-catchup", "idle-topic", "crash", "graceful-leave", "join",
            "poll-timeout", "static-bounce", "stall", "stop", "commit-gaps", "rewind", "skip",
            "retention-overrun", "transactional", "rebalance-storm", "demo"} <= names
    for name in names:
        assert load_scenario(name).name == name


def test_expected_advice_of_the_builtin_scenarios() -> None:
    # the faults that call for a change of settings name it; the no-fault scenarios expect none
    want = {"crash-long-session": {("readers", "session_timeout_crash", "session.timeout.ms")},
            "poll-timeout-repeat": {("readers", "max_poll_interval", "max.poll.interval.ms")},
            # churn (distinct members joining and leaving) rebalancing in a fraction of a heartbeat:
            # neither static membership nor cooperative-sticky would shorten it (no entry: none)
            # nor would either shorten rolling-restart-storm's (restarts slower than its rebalances)
            "retention-overrun": {("readers", "retention_vs_catchup", "retention.ms")}}
    for name in builtin_scenarios():
        sc = load_scenario(name)
        got = {(e.group, e.rule, e.setting) for e in sc.expect_advice}
        if sc.no_fault:
            assert not got, name
        if name in want:
            assert got == want[name], name
    # the seed's schedule keeps what the file expects
    sc = load_scenario("crash-long-session")
    assert randomise(sc, 5).expect_advice == sc.expect_advice


def test_names_are_prefixed_and_unique() -> None:
    sc = load_scenario("static-bounce")
    a, b = plan_names(sc), plan_names(sc)
    assert a.run_id != b.run_id
    assert a.topic("events") == f"sim-static-bounce-{a.run_id}-events"
    assert a.group("readers").startswith(a.prefix)
    assert a.instance_ids == {"c1": f"{a.prefix}-c1", "c2": f"{a.prefix}-c2"}
    assert plan_names(sc, "fixed").prefix == "sim-static-bounce-fixed"


def test_send_times_rate_bursts_and_stop() -> None:
    spec = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 10, "start": 1, "stop": 3,
                                        "bursts": [{"at": 2, "count": 5}, {"at": 4, "count": 7}]})
    times = _send_times(spec, 100.0, 110.0)
    # 2 s at 10/s, plus the burst at 2 s; the burst at 4 s is after the producer stopped
    assert len(times) == 20 + 5
    assert times == sorted(times)
    assert min(times) == 101.0
    assert max(times) < 103.0
    assert times.count(102.0) == 5 + 1  # the burst and the steady message due at 2 s


def test_truth_round_trip_and_sorting(tmp_path: Path) -> None:
    recs: list[truth.Record] = [
        truth.Commit("g", "m", "t", 0, 5, 12.0),
        truth.Produce("t", 0, 4, 10.5, None),
        truth.Fault("crash", "g", "m", 11.0, 11.0, {"pid": 7}),
        truth.Assign("g", "m", (("t", 0),), 9.0),
        truth.Revoke("g", "m", (("t", 0),), 13.0, lost=True),
        truth.EndState(20.0, (truth.PartitionEnd("t", 0, 0, 5, 5),), (truth.GroupOffset("g", "t", 0, 5),)),
        truth.Produce("t", 0, 3, 10.0, "committed"),
    ]
    path = tmp_path / "truth.jsonl"
    truth.write_truth(path, recs)
    back = truth.load(path)
    assert [truth.record_ts(r) for r in back] == [9.0, 10.0, 10.5, 11.0, 12.0, 13.0, 20.0]
    assert isinstance(back[-1], truth.EndState)
    assert back[-1].committed_of("g") == {("t", 0): 5}
    assert back[-1].end_of("t", 0).end == 5
    assert sorted(map(repr, back)) == sorted(map(repr, recs))
    first = json.loads(path.read_text().splitlines()[0])
    assert first == {"type": "assign", "group": "g", "member": "m", "partitions": [["t", 0]], "ts": 9.0,
                     "generation": -1, "member_id": ""}


def test_parts_tolerate_a_torn_last_line(tmp_path: Path) -> None:
    w = truth.TruthWriter(tmp_path / "a.jsonl")
    w.write(truth.Produce("t", 0, 0, 1.0))
    w.close()
    with (tmp_path / "a.jsonl").open("a") as f:
        f.write('{"type":"commit","group":"g","mem')  # SIGKILL mid-line
    assert truth.read_parts(tmp_path) == [truth.Produce("t", 0, 0, 1.0)]
    # the merged file is strict: a torn line there is an error, with its place
    (tmp_path / "truth.jsonl").write_text('{"type":"produce"}\n')
    with pytest.raises(ScenarioError, match="bad truth record"):
        truth.load(tmp_path / "truth.jsonl")
    (tmp_path / "truth.jsonl").write_text("nope\n")
    with pytest.raises(ScenarioError, match=r"truth\.jsonl:1"):
        truth.load(tmp_path / "truth.jsonl")


def test_scenario_model_is_exported() -> None:
    sc = Scenario.model_validate(_base())
    assert sc.groups[0].members[0].session_timeout_ms == 6000
    assert sc.groups[0].members[0].enable_auto_commit is True


def _index() -> truth.TruthIndex:
    # offsets 0..4 written at t=10..14; commits 2 at t=12.5 and 5 at t=16; a rewind to 1 at 17
    recs: list[truth.Record] = [truth.Produce("t", 0, o, 10.0 + o) for o in range(5)]
    recs += [truth.Commit("g", "m", "t", 0, 2, 12.5), truth.Commit("g", "m", "t", 0, 5, 16.0),
             truth.Commit("g", "m", "t", 0, 1, 17.0)]
    return truth.TruthIndex(recs)


@pytest.mark.parametrize(("t", "end", "committed", "lag", "time_lag"), [
    (9.0, 0, None, None, None),   # nothing written, nothing committed
    (12.0, 3, None, None, None),  # written, but no commit yet: lag unknown, not zero
    (12.5, 3, 2, 1, 0.5),         # offset 2 (written at 12.0) is the next unconsumed one
    (14.0, 5, 2, 3, 2.0),         # still offset 2, now 2 s old
    (16.0, 5, 5, 0, 0.0),         # caught up
    (17.5, 5, 1, 4, 6.5),         # rewound to offset 1, written at 11.0
])
def test_truth_index_at(t: float, end: int, committed: int | None, lag: int | None, time_lag: float | None) -> None:
    ti = _index()
    assert ti.end_at("t", 0, t) == end
    assert ti.committed_at("g", "t", 0, t) == committed
    assert ti.lag_at("g", "t", 0, t) == lag
    assert ti.time_lag_at("g", "t", 0, t) == time_lag
    assert ti.produce_ts("t", 0, 3) == 13.0
    assert ti.produce_ts("t", 0, 9) is None
    assert [c.offset for c in ti.commits("g", "t", 0)] == [2, 5, 1]


def test_a_queued_burst_is_in_the_log_when_acknowledged_not_when_created(tmp_path: Path) -> None:
    # offsets 0..2 created at 10 s and acknowledged at once; a burst 3..5 created at 11 s that the
    # producer's queue holds: acknowledged at 14 s. Between 11 and 14 s the broker's end is 3
    # (sweeps read 3 there), not 6; from 14 s the burst waits, aged from its CreateTime
    recs: list[truth.Record] = [truth.Produce("t", 0, o, 10.0, acked=10.01) for o in range(3)]
    recs += [truth.Produce("t", 0, o, 11.0, acked=14.0) for o in range(3, 6)]
    recs += [truth.Commit("g", "m", "t", 0, 3, 10.5)]
    path = tmp_path / "truth.jsonl"
    truth.write_truth(path, recs)
    ti = truth.TruthIndex(truth.load(path))  # through the file: the acknowledgement is kept
    assert [ti.end_at("t", 0, t) for t in (10.0, 10.01, 12.0, 13.99, 14.0)] == [0, 3, 3, 3, 6]
    assert [ti.lag_at("g", "t", 0, t) for t in (12.0, 14.0)] == [0, 3]
    assert ti.time_lag_at("g", "t", 0, 12.0) == 0.0  # nothing pending in the log yet
    assert ti.time_lag_at("g", "t", 0, 15.0) == 4.0  # offset 3, created at 11 s
    # a truth written before the acknowledgement was recorded: the CreateTime stands in
    old = [{k: v for k, v in json.loads(line).items() if k != "acked"} for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(d) + "\n" for d in old))
    before = truth.TruthIndex(truth.load(path))
    assert [before.end_at("t", 0, t) for t in (10.0, 12.0)] == [3, 6]


def test_rebalances_from_listener_records() -> None:
    A, R, F = truth.Assign, truth.Revoke, truth.Fault  # noqa: N806 - short names keep the table readable
    p0, p1 = ("t", 0), ("t", 1)
    recs: list[truth.Record] = [
        # the group forms: both revoke nothing, then get one partition each
        R("g", "a", (), 1.0), R("g", "b", (), 1.1), A("g", "a", (p0,), 1.5, 1), A("g", "b", (p1,), 1.6, 1),
        # b crashes at 5; the session expires and a alone rebalances at 8 .. 8.2 (generation 2)
        F("crash", "g", "b", 5.0, 5.0), R("g", "a", (p0,), 8.0), A("g", "a", (p0, p1), 8.2, 2),
        # a static bounce of a: it revokes while closing, then is given generation 2 again: no rebalance
        F("bounce", "g", "a", 10.0, 12.0), R("g", "a", (p0, p1), 10.0, closing=True),
        R("g", "a", (), 11.9), A("g", "a", (p0, p1), 12.0, 2),
        # the end of the run: closing revocations start nothing
        R("g", "a", (p0, p1), 20.0, closing=True),
    ]
    got = truth.TruthIndex(recs).rebalances("g")
    assert [(r.start, r.end, r.members) for r in got] == [(1.0, 1.6, ("a", "b")), (8.0, 8.2, ("a",))]
    assert got[0].cause is None
    assert got[1].cause is not None
    assert got[1].cause.kind == "crash"
    assert [r.generation for r in got] == [1, 2]
    assert truth.TruthIndex(recs).rebalances("other") == []


def test_fault_partitions_round_trip(tmp_path: Path) -> None:
    f = truth.Fault("stall", "g", "m", 1.0, 2.0, {"x": 1}, (("t", 0), ("t", 3)))
    truth.write_truth(tmp_path / "truth.jsonl", [f])
    assert truth.load(tmp_path / "truth.jsonl") == [f]
    # a truth written before faults named partitions still reads
    (tmp_path / "old.jsonl").write_text('{"type":"fault","kind":"crash","group":"g","member":"m",'
                                        '"start":1.0,"end":1.0,"detail":{}}\n')
    assert truth.load(tmp_path / "old.jsonl")[0].partitions == ()  # type: ignore[union-attr]


def test_held_partitions_replays_assigns_and_revokes() -> None:
    recs: list[truth.Record] = [
        truth.Assign("g", "m", (("t", 0), ("t", 1)), 1.0),
        truth.Assign("g", "other", (("t", 2),), 1.5),
        truth.Revoke("g", "m", (("t", 0), ("t", 1)), 3.0),
        truth.Assign("g", "m", (("t", 1),), 3.5),
        truth.Assign("g", "m", (("t", 2),), 4.0),  # cooperative: an addition
    ]
    assert truth.held_partitions(recs, "g", "m") == (("t", 1), ("t", 2))
    assert truth.held_partitions(recs[:3], "g", "m") == ()
    assert truth.held_partitions(recs, "h", "m") == ()


def test_retention_overruns_from_the_end_state() -> None:
    recs: list[truth.Record] = [
        *[truth.Produce("t", p, o, 10.0 + o) for p in (0, 1) for o in range(20)],
        truth.Commit("g", "m", "t", 0, 5, 16.0), truth.Commit("g", "m", "t", 1, 20, 31.0),
        truth.Commit("ok", "m", "t", 0, 20, 31.0),
    ]
    end = truth.EndState(40.0, (truth.PartitionEnd("t", 0, 12, 20, 20), truth.PartitionEnd("t", 1, 12, 20, 20)),
                         (truth.GroupOffset("g", "t", 0, 5), truth.GroupOffset("g", "t", 1, 20),
                          truth.GroupOffset("ok", "t", 0, 20)))
    (f,) = truth.retention_overruns(recs, end, {"t": 2.0})
    # g lost offsets 5..11 of t:0; its first unread record was created at 15 s, kept 2 s
    assert (f.kind, f.group, f.member, f.partitions) == ("retention_overrun", "g", "", (("t", 0),))
    assert (f.start, f.end, f.detail) == (17.0, 40.0, {"lost": {"t:0": 7}, "deletable_at": 17.0})
    # without the topic's retention: from the group's last commit of the partition
    (f,) = truth.retention_overruns(recs, end, {})
    assert f.start == 16.0


def test_retention_overruns_dated_by_the_deletion_seen() -> None:
    recs: list[truth.Record] = [*[truth.Produce("t", 0, o, 10.0 + o) for o in range(20)],
                                truth.Commit("g", "m", "t", 0, 5, 16.0)]
    end = truth.EndState(40.0, (truth.PartitionEnd("t", 0, 12, 20, 20),), (truth.GroupOffset("g", "t", 0, 5),))
    moves = [truth.LogStartMove("t", 1, 0, 9, 17.0, 17.05),   # another partition
             truth.LogStartMove("t", 0, 0, 4, 17.5, 17.55),   # deleted only what g had read
             truth.LogStartMove("t", 0, 4, 9, 18.4, 18.46),   # deleted g's first unread record (5)
             truth.LogStartMove("t", 0, 9, 12, 19.4, 19.45)]
    (f,) = truth.retention_overruns(recs, end, {"t": 2.0}, moves)
    # the broker may delete offset 5 from 17 s (created at 15 s, kept 2 s); it did between the
    # polls sent at 18.4 s (5 still there) and answered at 18.46 s (gone): the loss is dated 18.4 s
    assert (f.start, f.detail) == (18.4, {"lost": {"t:0": 7}, "deletable_at": 17.0, "deleted_by": 18.46})
    # a deletion the watch did not see (it ended first): the earliest time it may have happened
    (f,) = truth.retention_overruns(recs, end, {"t": 2.0}, moves[:2])
    assert (f.start, f.detail) == (17.0, {"lost": {"t:0": 7}, "deletable_at": 17.0})


def test_skip_fields_default_to_the_old_skip_and_survive_a_seed(tmp_path: Path) -> None:
    f = tmp_path / "s.yaml"
    f.write_text(json.dumps(_base(**_member(auto_offset_reset="latest", actions=[
        {"kind": "skip", "at": 2},
        {"kind": "skip", "at": 4, "partitions": "one", "mechanism": "admin_reset", "size": 100,
         "state": "lagging", "wait_s": 5},
        {"kind": "skip", "at": 6, "mechanism": "out_of_range", "state": "catching_up", "size": 10},
        {"kind": "rewind", "at": 7, "messages": 3}]))))
    sc = load_scenario_file(f)
    plain, admin, oor, _rewind = sc.groups[0].members[0].actions
    # the old skip: every partition, a seek, at once
    assert (plain.partitions, plain.mechanism, plain.size, plain.state) == ("all", "seek", None, None)
    assert (admin.partitions, admin.mechanism, admin.size, admin.state, admin.wait_s) == (
        "one", "admin_reset", 100, "lagging", 5)
    assert oor.mechanism == "out_of_range"
    assert sc.groups[0].members[0].auto_offset_reset == "latest"
    # a seed's schedule is validated again from its dump: the other actions' defaults pass
    drawn = randomise(sc, 4)
    assert [a.mechanism for a in drawn.groups[0].members[0].actions] == ["seek", "admin_reset", "out_of_range", "seek"]
    assert drawn.groups[0].members[0].actions[3].kind == "rewind"


def test_a_burst_to_one_partition() -> None:
    from lagscope.devtools.sim.worker import _send_plan

    spec = ProducerSpec.model_validate({"name": "p", "topic": "a", "rate": 2,
                                        "bursts": [{"at": 1.0, "count": 3, "partition": 1}, {"at": 2.0, "count": 2}]})
    plan = _send_plan(spec, 100.0, 104.0)
    assert [(t, p) for t, p in plan if p is not None] == [(101.0, 1)] * 3
    # the steady sends and the other burst go to the partitions in turn (None)
    assert sum(1 for _, p in plan if p is None) == 8 + 2
    assert _send_times(spec, 100.0, 104.0) == [t for t, _ in plan]
