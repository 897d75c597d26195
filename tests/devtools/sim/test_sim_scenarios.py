"""Every built-in scenario runs against the real broker, and its ground truth agrees with what
the broker itself reports at the end (OffsetFetch, ListOffsets); then one test per fault kind
checks that the fault left the trace it must leave.

The scenarios run concurrently (a few at a time) in a module fixture, so the whole module takes
about as long as the slowest few scenarios, not their sum.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from lagscope.devtools.sim import truth
from lagscope.devtools.sim.runner import RunResult, builtin_scenarios, load_scenario, run_scenario
from lagscope.devtools.sim.truth import Assign, Commit, EndState, Fault, Produce, Revoke

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: the demo runs a minute; it has its own (shorter) check in test_sim_cli.py; the skip matrix's
#: scenarios run minutes each: their mechanisms are checked on a short run in
#: test_sim_skip_matrix.py, the matrix itself by benchmarks/analytics_accuracy.py --matrix; the
#: commit-gap sweep (53 s) is commit-gaps' mechanism at more sizes, its schedule checked in
#: test_gap_floor.py, the sweep itself by benchmarks/analytics_accuracy.py --scenarios commit-gaps-sweep
SCENARIOS = [n for n in builtin_scenarios()
             if n not in ("demo", "commit-gaps-sweep") and not n.startswith("skip-matrix-")]
PARALLEL = 4
#: lag (messages) that still counts as caught up at the end: ~0.5 s of production per partition
CAUGHT_UP = 12


class Runs:
    """Scenario runs in a thread pool, started up front for the selected tests, or on demand."""

    def __init__(self, bootstrap: str, base: Path) -> None:
        self.bootstrap, self.base = bootstrap, base
        self.pool = ThreadPoolExecutor(max_workers=PARALLEL, thread_name_prefix="scenario")
        self.futures: dict[str, Future[RunResult]] = {}

    def submit(self, name: str) -> Future[RunResult]:
        if name not in self.futures:
            self.futures[name] = self.pool.submit(run_scenario, name, self.bootstrap, self.base / name,
                                                  cleanup=True)
        return self.futures[name]


@pytest.fixture(scope="module")
def runs(bootstrap: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Runs]:
    r = Runs(bootstrap, tmp_path_factory.mktemp("sim"))
    for item in request.session.items:
        if item.module is not request.module:
            continue
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("name") if callspec else _USES.get(getattr(item, "originalname", ""))
        if name:
            r.submit(name)
    try:
        yield r
    finally:
        r.pool.shutdown(wait=True)


#: the scenario each fault-specific test reads
_USES = {
    "test_steady_consumers_keep_up": "steady",
    "test_slow_consumer_lag_grows": "slow-consumer",
    "test_burst_then_catch_up": "burst-catchup",
    "test_idle_topic_nothing_after_stop": "idle-topic",
    "test_crash_rebalances_after_session_timeout": "crash",
    "test_graceful_leave_rebalances_at_once": "graceful-leave",
    "test_join_shares_partitions": "join",
    "test_poll_timeout_evicts_member": "poll-timeout",
    "test_crashes_under_a_long_session_wait_for_it": "crash-long-session",
    "test_a_crash_of_the_only_member_leaves_its_partitions_unconsumed": "crash-only-member",
    "test_repeated_poll_timeouts_evict_and_rejoin": "poll-timeout-repeat",
    "test_static_member_bounce_does_not_rebalance": "static-bounce",
    "test_stall_commits_same_offset": "stall",
    "test_stop_commits_nothing": "stop",
    "test_commit_gaps_are_irregular": "commit-gaps",
    "test_rewind_commits_backwards": "rewind",
    "test_skip_jumps_to_end": "skip",
    "test_retention_overrun": "retention-overrun",
    "test_transactional_lso_lag_zero": "transactional",
    "test_rebalance_storm": "rebalance-storm",
    "test_rolling_restart_of_dynamic_members_rebalances": "rolling-restart-storm",
    "test_quiet_bursts_one_off_and_periodic": "quiet-bursts",
    "test_quiet_slow_member_owns_every_partition": "quiet-slow-many-partitions",
    "test_quiet_pauses_and_idle_topic": "quiet-pauses-idle",
    "test_quiet_ramp_and_cycle": "quiet-ramp-diurnal",
    "test_quiet_auto_commit_every_few_seconds": "quiet-auto-commit",
    "test_quiet_rolling_restart_keeps_the_generation": "quiet-rolling-restart",
    "test_quiet_transactions_abort_and_commit_past_markers": "quiet-transactions",
    "test_quiet_compacted_topic_keeps_up": "quiet-compacted",
    "test_quiet_skewed_keys": "quiet-skewed-keys",
    "test_mixed_stall_during_rebalance": "mixed-stall-rebalance",
    "test_mixed_rewind_after_burst": "mixed-burst-rewind",
    "test_mixed_skip_while_another_group_lags": "mixed-skip-while-lagging",
    "test_mixed_crash_during_burst": "mixed-crash-burst",
    "test_mixed_retention_overrun_on_slow_group": "mixed-retention-slow",
}


def _result(runs: Runs, name: str) -> tuple[RunResult, list[truth.Record]]:
    result = runs.submit(name).result(timeout=300)
    return result, truth.load(result.truth_path)


def _commits(records: list[truth.Record], group: str) -> dict[tuple[str, int], list[Commit]]:
    out: dict[tuple[str, int], list[Commit]] = defaultdict(list)
    for r in records:
        if isinstance(r, Commit) and r.group == group:
            out[(r.topic, r.partition)].append(r)
    return out


def _faults(records: list[truth.Record], kind: str) -> list[Fault]:
    return [r for r in records if isinstance(r, Fault) and r.kind == kind]


def _of(records: list[truth.Record], cls: type, member: str) -> list:  # type: ignore[type-arg]
    return [r for r in records if isinstance(r, cls) and getattr(r, "member", None) == member]


def _timeline(records: list[truth.Record], group: str, t0: float) -> str:
    """The group's assignments, revocations and faults, seconds from the start: a failure's context."""
    rows = [r for r in records if isinstance(r, (Assign, Revoke, Fault)) and r.group == group]
    return "\n".join(f"{getattr(r, 'ts', getattr(r, 'start', 0.0)) - t0:7.2f} {r}" for r in rows)


def _end(records: list[truth.Record]) -> EndState:
    last = records[-1]
    assert isinstance(last, EndState)
    return last


# --------------------------------------------------------------------------------------------
# every scenario: truth agrees with the broker
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", SCENARIOS)
def test_truth_agrees_with_broker(runs: Runs, name: str) -> None:
    result, records = _result(runs, name)
    sc = result.scenario
    es = _end(records)
    assert es == result.end_state
    assert result.failures == (), f"processes failed: {result.failures} (logs in {result.out_dir / 'logs'})"
    assert not result.stopped_early
    assert sum(isinstance(r, EndState) for r in records) == 1
    # the run line first: the scenario and the seed its schedule was drawn from, t0
    assert records[0] == truth.RunInfo(sc.name, sc.seed, result.names.run_id, result.t0)
    stamps = [truth.record_ts(r) for r in records[1:-1]]
    assert stamps == sorted(stamps), "truth is sorted by time"

    # produced: every offset the broker holds was acknowledged to a producer, once
    transactional = {result.names.topic(p.topic) for p in sc.producers if p.transactional}
    produced: dict[tuple[str, int], list[int]] = defaultdict(list)
    for r in records:
        if isinstance(r, Produce):
            produced[(r.topic, r.partition)].append(r.offset)
            assert result.t0 - 1 <= r.ts <= es.ts, "produce timestamps are the broker's CreateTime of this run"
    assert produced, "the scenario produced something"
    for pe in es.partitions:
        offs = produced[(pe.topic, pe.partition)]
        assert len(offs) == len(set(offs))
        if pe.topic in transactional:
            # control markers take offsets too: the log end is past the last data record
            assert offs
            assert max(offs) < pe.end
        else:
            assert sorted(offs) == list(range(pe.end)), f"{pe.topic}:{pe.partition}"
            assert pe.lso == pe.end

    # committed: the last acknowledged commit of each partition is what OffsetFetch returns
    index = truth.TruthIndex(records)
    for g in sc.groups:
        group = result.names.group(g.name)
        broker = es.committed_of(group)
        commits = _commits(records, group)
        assert set(broker) == set(commits), f"{g.name}: partitions with commits"
        killed = {f.member: f.start for f in _faults(records, "crash") if f.group == group}
        for tp, cs in commits.items():
            last = max(cs, key=lambda c: c.ts)
            if last.member in killed and last.ts <= killed[last.member]:
                # the last commit is a SIGKILLed member's: the kill can land between the broker's
                # acknowledgement and the truth's line, so the broker may hold one commit more
                assert last.offset <= broker[tp], f"{g.name} {tp}: truth {last.offset} vs broker {broker[tp]}"
                continue
            assert last.offset == broker[tp], f"{g.name} {tp}: truth {last.offset} vs broker {broker[tp]}"
            # the index's lag at the end equals the broker's (non-transactional: no markers)
            if tp[0] not in transactional:
                pe = es.end_of(*tp)
                assert index.lag_at(group, tp[0], tp[1], es.ts) == max(0, pe.end - broker[tp])

    # every scheduled action left a fault record, every member got partitions at some point
    for g in sc.groups:
        group = result.names.group(g.name)
        for m in g.members:
            kinds = [f.kind for f in records if isinstance(f, Fault) and f.member == m.name and f.group == group]
            expected = [a.kind for a in m.actions] + (["join"] if m.join_at > 0 else [])
            assert sorted(kinds) == sorted(expected), f"{m.name}: faults {kinds} vs actions {expected}"
            for f in records:
                if isinstance(f, Fault) and f.member == m.name and f.group == group:
                    assert f.start <= f.end
                    # a fault on the member's partitions names them
                    if f.kind in ("stall", "stop", "commit_gap", "rewind", "skip", "crash"):
                        assert f.partitions, f"{m.name}: {f.kind} names no partition"
            assert any(a.partitions for a in _of(records, Assign, m.name)), f"{m.name} never got partitions"


# --------------------------------------------------------------------------------------------
# per scenario: the fault shows
# --------------------------------------------------------------------------------------------

def _lag_at_end(result: RunResult, group: str, topic: str | None = None) -> dict[tuple[str, int], int]:
    """The group's lag per partition at the end (of every topic, or of ``topic`` only)."""
    es = result.end_state
    committed = es.committed_of(result.names.group(group))
    return {(p.topic, p.partition): p.end - committed.get((p.topic, p.partition), 0) for p in es.partitions
            if topic is None or p.topic == result.names.topic(topic)}


def test_steady_consumers_keep_up(runs: Runs) -> None:
    result, records = _result(runs, "steady")
    # caught up, but for what arrived in the last moments before the members stopped
    assert max(_lag_at_end(result, "readers").values()) <= CAUGHT_UP
    assert len(_faults(records, "crash")) == 0
    # both members shared the partitions
    assert all(any(a.partitions for a in _of(records, Assign, m)) for m in ("c1", "c2"))


def test_slow_consumer_lag_grows(runs: Runs) -> None:
    result, records = _result(runs, "slow-consumer")
    # consumes about 20/s of 40/s for ~12 s: about 240 behind, well above 100
    assert sum(_lag_at_end(result, "slow").values()) > 100
    # lag at commit time, from the truth alone, grows from the first half to the second
    produced = [r for r in records if isinstance(r, Produce)]
    commits = [r for r in records if isinstance(r, Commit)]

    def lag_at(c: Commit) -> int:
        return sum(1 for p in produced if (p.topic, p.partition) == (c.topic, c.partition)
                   and p.ts <= c.ts and p.offset >= c.offset)

    half = result.t0 + result.scenario.duration / 2
    early = [lag_at(c) for c in commits if c.ts < half]
    late = [lag_at(c) for c in commits if c.ts >= half]
    assert early
    assert late
    assert max(late) > max(early)


def test_burst_then_catch_up(runs: Runs) -> None:
    result, records = _result(runs, "burst-catchup")
    # caught up, but for what arrived in the last moments before the members stopped
    assert max(_lag_at_end(result, "readers").values()) <= CAUGHT_UP
    burst_at = result.t0 + 3
    # (sending 600 records takes a moment on a loaded machine)
    burst = [r for r in records if isinstance(r, Produce) and burst_at - 0.05 <= r.ts <= burst_at + 3.0]
    assert len(burst) >= 600
    # right after the burst the group is hundreds behind, a few seconds later it is not
    ti = truth.TruthIndex(records)
    group = result.names.group("readers")
    tps = [(p.topic, p.partition) for p in result.end_state.partitions]

    def total_lag(t: float) -> int:
        return sum(ti.lag_at(group, tp[0], tp[1], t) or 0 for tp in tps)

    assert max(total_lag(burst_at + d / 10) for d in range(1, 40)) >= 300
    assert total_lag(result.t0 + result.scenario.duration - 1) <= 2 * CAUGHT_UP


def test_idle_topic_nothing_after_stop(runs: Runs) -> None:
    result, records = _result(runs, "idle-topic")
    stop = result.t0 + 3
    assert max(r.ts for r in records if isinstance(r, Produce)) <= stop + 2.0
    assert set(_lag_at_end(result, "readers").values()) == {0}
    # the consumer keeps committing (the same offsets) while the topic is idle
    late = [r for r in records if isinstance(r, Commit) and r.ts > stop + 3]
    assert late


def test_crash_rebalances_after_session_timeout(runs: Runs) -> None:
    result, records = _result(runs, "crash")
    (crash,) = _faults(records, "crash")
    assert crash.member == "c2"
    assert crash.detail["was_alive"]
    # nothing from c2 after the SIGKILL
    assert not [r for r in records if getattr(r, "member", None) == "c2" and truth.record_ts(r) > crash.start
                and not isinstance(r, Fault)]
    takeover = [a for a in _of(records, Assign, "c1") if a.ts > crash.start and len(a.partitions) == 4]
    assert takeover, "c1 takes all four partitions after the crash"
    gap = takeover[0].ts - crash.start
    # the coordinator waits for c2's session (3 s, counted from its last heartbeat) to expire:
    # seconds, not the few milliseconds of a LeaveGroup
    assert 1.5 <= gap <= 3.0 + 5.0, gap
    # the truth's rebalance after the crash names the crash as its cause
    (after,) = [r for r in truth.TruthIndex(records).rebalances(result.names.group("readers"))
                if r.start > crash.start]
    assert after.cause == crash
    assert after.members == ("c1",)
    assert after.end == takeover[0].ts


def test_a_crash_of_the_only_member_leaves_its_partitions_unconsumed(runs: Runs) -> None:
    result, records = _result(runs, "crash-only-member")
    (crash,) = _faults(records, "crash")
    solo = result.names.group("solo")
    assert (crash.group, crash.member, len(crash.partitions)) == (solo, "s1", 3)
    # nobody is left: no assignment, no commit of solo after the SIGKILL; readers keeps up
    assert not [r for r in records if isinstance(r, Assign | Commit) and r.group == solo and r.ts > crash.start]
    assert all(lag > 50 for lag in _lag_at_end(result, "solo").values()), _lag_at_end(result, "solo")
    assert all(lag <= CAUGHT_UP for lag in _lag_at_end(result, "readers").values()), _lag_at_end(result, "readers")


def test_graceful_leave_rebalances_at_once(runs: Runs) -> None:
    _, records = _result(runs, "graceful-leave")
    (leave,) = _faults(records, "leave")
    takeover = [a for a in _of(records, Assign, "c1") if a.ts > leave.start and len(a.partitions) == 4]
    assert takeover
    # LeaveGroup: far sooner than the 6 s session timeout
    assert takeover[0].ts - leave.start < 3.0
    # c2 committed on its way out (the revoke listener or the leave itself)
    assert [c for c in _of(records, Commit, "c2") if c.ts >= leave.start - 0.01]


def test_join_shares_partitions(runs: Runs) -> None:
    _, records = _result(runs, "join")
    (join,) = _faults(records, "join")
    c1_first = [a for a in _of(records, Assign, "c1") if a.ts < join.start]
    assert c1_first
    assert len(c1_first[-1].partitions) == 4
    c2 = [a for a in _of(records, Assign, "c2") if a.partitions]
    c1_after = [a for a in _of(records, Assign, "c1") if a.ts > join.start]
    assert c2
    assert c1_after
    assert len(c2[0].partitions) == 2
    # c1's share in the generation c2 joined (a later one, c2 gone at teardown or timed out on a
    # loaded machine and back, may give c1 all four again)
    shared = [a for a in c1_after if a.generation == c2[0].generation]
    assert shared
    assert len(shared[-1].partitions) == 2
    assert [r for r in _of(records, Revoke, "c1") if r.ts > join.start and r.partitions]


def test_poll_timeout_evicts_member(runs: Runs) -> None:
    _, records = _result(runs, "poll-timeout")
    (stall,) = _faults(records, "stop_polling")
    assert stall.end - stall.start >= 6.5
    takeover = [a for a in _of(records, Assign, "c1") if stall.start < a.ts < stall.end and len(a.partitions) == 4]
    assert takeover, "c1 holds all partitions while c2 does not poll"
    # evicted once max.poll.interval.ms (3 s) passed, not at once and not after the 6 s session
    assert 2.0 <= takeover[0].ts - stall.start <= 3.0 + 3.0
    # c2 comes back after it polls again
    assert [a for a in _of(records, Assign, "c2") if a.ts > stall.end and a.partitions]


def _premise_holds(runs: Runs, name: str, broken: Callable[[RunResult, list[truth.Record]], str | None],
                   tmp_path: Path) -> None:
    """The scenario's premise (``broken`` says why a run broke it, None when it held) holds on the
    module's run, else on a run of the scenario alone: a premise that a run among four at once on
    2 cores can break by load, but a simulator's fault breaks on every run."""
    result, records = _result(runs, name)
    first = broken(result, records)
    if first is None:
        return
    again = run_scenario(name, runs.bootstrap, tmp_path / "again", cleanup=True)
    second = broken(again, truth.load(again.truth_path))
    assert second is None, f"first run:\n{first}\n\nrun again alone:\n{second}"


def _long_session_crashes_broken(result: RunResult, records: list[truth.Record]) -> str | None:
    """Why the run broke the scenario's premise (each crash's rebalance is its own, waits for the
    15 s session, and keeps the survivors), with the group's timeline; None when it held."""
    crashes = sorted(_faults(records, "crash"), key=lambda f: f.start)
    assert [f.member for f in crashes] == ["c2", "c3"]
    rbs = truth.TruthIndex(records).rebalances(result.names.group("readers"))
    why = None
    for crash in crashes:
        # the rebalance after each crash is its own (the group settled in between) and waits for
        # the 15 s session (from the last heartbeat, up to 3 s before the kill); a run where load
        # merged or hid one broke the premise (rerun alone), it is no error of the check
        after = [r for r in rbs if r.cause == crash]
        if len(after) != 1:
            why = f"{len(after)} rebalances caused by {crash.member}'s crash"
            break
        assert 15.0 - 3.0 - 0.5 <= after[0].start - crash.start <= 15.0 + 3.0, after[0].start - crash.start
    survivors = [r.members for r in rbs if r.cause is not None]
    if why is None and survivors == [("c1", "c3"), ("c1",)]:
        return None
    return f"{why or 'survivors'} {survivors}, rebalances {rbs}:\n" + _timeline(
        records, result.names.group("readers"), result.t0)


def test_crashes_under_a_long_session_wait_for_it(runs: Runs, tmp_path: Path) -> None:
    # Once in many CI runs (2 cores, four scenarios at once) the rebalance after c2's crash was
    # assigned to c3 alone, c1 joining the generation after: a member the load kept from rejoining
    # in time. The premise is Kafka's (a crash's survivors rejoin its rebalance): a simulator or a
    # truth index that broke it fails on a run of its own too
    _premise_holds(runs, "crash-long-session", _long_session_crashes_broken, tmp_path)


def test_repeated_poll_timeouts_evict_and_rejoin(runs: Runs) -> None:
    _, records = _result(runs, "poll-timeout-repeat")
    stops = sorted(_faults(records, "stop_polling"), key=lambda f: f.start)
    assert len(stops) == 2
    for stall in stops:
        # each 5.5 s silence outlasts the 3 s interval: c1 holds every partition before it ends, c2
        # has partitions again after it
        assert stall.end - stall.start >= 4.5
        assert [a for a in _of(records, Assign, "c1") if stall.start < a.ts < stall.end and len(a.partitions) == 4]
        assert [a for a in _of(records, Assign, "c2") if a.ts > stall.end and a.partitions]


def _static_bounce_rebalanced(result: RunResult, records: list[truth.Record]) -> str | None:
    """Why the run broke the scenario's premise (the bounced static member gets its partitions
    back and c1 keeps its own throughout), with the group's timeline; None when it held."""
    (bounce,) = _faults(records, "bounce")
    assert 1.5 <= bounce.end - bounce.start <= 5
    before = [a for a in _of(records, Assign, "c2") if a.ts < bounce.start and a.partitions][-1]
    after = [a for a in _of(records, Assign, "c2") if a.ts >= bounce.start and a.partitions]
    assert after
    assert set(after[0].partitions) == set(before.partitions), "same partitions back"
    # c1 was never revoked between the bounce and its own close at the end
    end = result.t0 + result.scenario.duration
    revoked = [r for r in _of(records, Revoke, "c1") if bounce.start <= r.ts < end - 0.5 and r.partitions]
    # and the truth shows no rebalance after the group formed
    rebalances = truth.TruthIndex(records).rebalances(result.names.group("readers"))
    if not revoked and not [r for r in rebalances if r.start >= bounce.start]:
        return None
    return f"c1 revoked {revoked}, rebalances {rebalances}:\n" + _timeline(
        records, result.names.group("readers"), result.t0)


def test_static_member_bounce_does_not_rebalance(runs: Runs, tmp_path: Path) -> None:
    # Once in many CI runs (2 cores, four scenarios at once) c1 has been revoked after the bounce
    # for a reason the run's records do not show: a broker or client stalled by the load. The
    # premise is Kafka's (a static member back within its session is not a rebalance): a simulator
    # that broke it (a LeaveGroup on close, a new instance id) fails on a run of its own too
    _premise_holds(runs, "static-bounce", _static_bounce_rebalanced, tmp_path)


def test_stall_commits_same_offset(runs: Runs) -> None:
    result, records = _result(runs, "stall")
    (stall,) = _faults(records, "stall")
    for tp, cs in _commits(records, result.names.group("readers")).items():
        after = [c.offset for c in cs if c.ts > stall.start + 0.05]
        before = [c.offset for c in cs if c.ts <= stall.start]
        assert len(after) >= 5, "keeps committing"
        assert set(after) == {before[-1]}, f"{tp}: the committed offset does not move"
    assert all(v > 30 for v in _lag_at_end(result, "readers").values())


def test_stop_commits_nothing(runs: Runs) -> None:
    result, records = _result(runs, "stop")
    (stop,) = _faults(records, "stop")
    commits = [r for r in records if isinstance(r, Commit)]
    assert [c for c in commits if c.ts < stop.start]
    assert not [c for c in commits if c.ts > stop.start + 0.05]
    assert all(v > 30 for v in _lag_at_end(result, "readers").values())


def test_commit_gaps_are_irregular(runs: Runs) -> None:
    _, records = _result(runs, "commit-gaps")
    gaps = _faults(records, "commit_gap")
    assert sorted(round(g.end - g.start) for g in gaps) == [1, 2, 4]
    commits = sorted({c.ts for c in records if isinstance(c, Commit)})
    for g in gaps:
        assert not [t for t in commits if g.start + 0.05 < t < g.end - 0.05]
    deltas = [b - a for a, b in itertools.pairwise(commits)]
    assert max(deltas) >= 3.5  # the 4 s gap
    assert sorted(deltas)[len(deltas) // 2] < 1.0  # the usual cadence is 0.5 s


def test_rewind_commits_backwards(runs: Runs) -> None:
    result, records = _result(runs, "rewind")
    (rw,) = _faults(records, "rewind")
    for tp, cs in _commits(records, result.names.group("readers")).items():
        offsets = [c.offset for c in sorted(cs, key=lambda c: c.ts)]
        drops = [a - b for a, b in itertools.pairwise(offsets) if b < a]
        assert drops == [50], f"{tp}: one step back of 50 ({offsets})"
    assert rw.detail["messages"] == 50
    # caught up, but for what arrived in the last moments before the members stopped
    assert max(_lag_at_end(result, "readers").values()) <= CAUGHT_UP


def test_skip_jumps_to_end(runs: Runs) -> None:
    result, records = _result(runs, "skip")
    (skip,) = _faults(records, "skip")
    produced = [r for r in records if isinstance(r, Produce)]
    for tp, cs in _commits(records, result.names.group("readers")).items():
        cs = sorted(cs, key=lambda c: c.ts)
        before = [c.offset for c in cs if c.ts < skip.start]
        jump = next(c for c in cs if c.ts >= skip.start)
        # the commit lands on the end of the log as ListOffsets saw it between the fault's start
        # and end: past every record created well before, and not past any created after
        surely_written = sum(1 for p in produced if (p.topic, p.partition) == tp and p.ts <= skip.start - 0.5)
        at_most = sum(1 for p in produced if (p.topic, p.partition) == tp and p.ts <= skip.end + 0.001)
        assert surely_written <= jump.offset <= at_most
        steps = [b - a for a, b in itertools.pairwise(before)]
        assert jump.offset - before[-1] > 3 * max(steps, default=1), "a jump, not consumption"


def test_retention_overrun(runs: Runs) -> None:
    result, _records = _result(runs, "retention-overrun")
    (pe,) = result.end_state.partitions
    committed = result.end_state.committed_of(result.names.group("readers"))
    assert pe.log_start > 0, "the broker deleted old segments"
    assert pe.log_start > committed[(pe.topic, pe.partition)], "committed offset below the log start"


def test_transactional_lso_lag_zero(runs: Runs) -> None:
    result, records = _result(runs, "transactional")
    states = {r.txn for r in records if isinstance(r, Produce)}
    assert states == {"committed", "aborted", "open"}
    committed = result.end_state.committed_of(result.names.group("readers"))
    for pe in result.end_state.partitions:
        c = committed[(pe.topic, pe.partition)]
        assert pe.lso < pe.end, "an open transaction holds the LSO below the high watermark"
        assert pe.lso - c == 0, "lag against the LSO is zero"
        assert pe.end - c > 0, "lag against the high watermark is not"


def test_rebalance_storm(runs: Runs) -> None:
    _, records = _result(runs, "rebalance-storm")
    # c1 stays for the whole run and sees a rebalance for each of the 4 joins and 3 leaves, but
    # c2's leave and c4's join, and c3's leave and c5's join, are scheduled together (each moved by
    # up to 0.5 s by the seed): each pair is one rebalance or two
    generations = [a for a in _of(records, Assign, "c1")]
    assert len(generations) >= 5
    assert len(_faults(records, "join")) == 4
    assert len(_faults(records, "leave")) == 3


def test_rolling_restart_of_dynamic_members_rebalances(runs: Runs) -> None:
    _, records = _result(runs, "rolling-restart-storm")
    bounces = sorted(_faults(records, "bounce"), key=lambda f: f.start)
    # c2, c3, c4 and c2 again restarted in turn, each a dynamic member
    assert [(b.member, b.detail.get("static")) for b in bounces] == [
        ("c2", False), ("c3", False), ("c4", False), ("c2", False)]
    for b in bounces:
        assert 4.9 <= b.end - b.start <= 8
        # back as a new member: a dynamic member's place is not kept
        before = [a for a in _of(records, Assign, b.member) if a.ts < b.start][-1]
        after = [a for a in _of(records, Assign, b.member) if a.ts >= b.start]
        assert after, b
        assert after[0].member_id != before.member_id
        # the group rebalanced twice (eager: c1 assigned anew each time), the leave and the rejoin
        gens = {a.generation for a in _of(records, Assign, "c1") if b.start <= a.ts <= b.end + 3.0}
        assert len(gens) >= 2, (b, gens)


def test_scenarios_are_short(tmp_path: Path) -> None:
    # CI budget: each fault scenario (but the demo) stays under 20 s of scheduled time; the
    # realistic no-fault ones need bursts, cycles and restarts to come round: 40 s; the proof of
    # the session-timeout advice needs two timeouts of a session above the advice's 10 s, each
    # settled before the next crash and before the end: 48 s; a rolling restart whose restarts
    # are long next to its rebalances (no advice), four of 5 s: 32 s
    long_ = {"crash-long-session": 48, "rolling-restart-storm": 32}
    for name in SCENARIOS:
        sc = load_scenario(name)
        assert sc.duration <= long_.get(name, 40 if sc.no_fault else 20), name


def test_every_fault_test_names_its_scenario() -> None:
    # the fixture starts the scenarios of the selected tests up front, in parallel
    tests = {n for n in globals() if n.startswith("test_")}
    assert set(_USES) == tests - {"test_truth_agrees_with_broker", "test_scenarios_are_short",
                                  "test_every_fault_test_names_its_scenario"}
    assert set(_USES.values()) == set(SCENARIOS)


# --------------------------------------------------------------------------------------------
# the realistic no-fault scenarios: the traffic they describe, and no fault
# --------------------------------------------------------------------------------------------

def _produced_in(records: list[truth.Record], a: float, b: float, topic: str | None = None) -> list[Produce]:
    return [r for r in records if isinstance(r, Produce) and a <= r.ts < b and (topic is None or r.topic == topic)]


def _no_faults(records: list[truth.Record], *allowed: str) -> None:
    kinds = {f.kind for f in records if isinstance(f, Fault)} - {"join", *allowed}
    assert not kinds, f"a no-fault scenario injected {kinds}"


def test_quiet_bursts_one_off_and_periodic(runs: Runs) -> None:
    result, records = _result(runs, "quiet-bursts")
    _no_faults(records)
    sc = result.scenario
    one_off, periodic = sc.producers[0].bursts
    assert periodic.every is not None
    # the drawn schedule: the one-off burst and every periodic one, each its count at once
    for at in [one_off.at, *(periodic.at + k * periodic.every for k in range(3))]:
        assert len(_produced_in(records, result.t0 + at - 0.01, result.t0 + at + 2.0)) >= 200
    assert max(_lag_at_end(result, "readers").values()) <= CAUGHT_UP


def test_quiet_slow_member_owns_every_partition(runs: Runs) -> None:
    result, records = _result(runs, "quiet-slow-many-partitions")
    _no_faults(records)
    assert any(len(a.partitions) == 8 for a in _of(records, Assign, "slow-1"))
    # it drains the partitions one at a time: after a burst, some partition's committed offset
    # stands still for seconds while the member commits progress on another
    commits = _commits(records, result.names.group("workers"))
    waited = 0.0
    for cs in commits.values():
        moves = [c.ts for prev, c in itertools.pairwise(cs) if c.offset > prev.offset]
        waited = max(waited, *(b - a for a, b in itertools.pairwise(moves)), 0.0)
    assert waited >= 2.0, waited
    # and keeps up on average: far less behind at the end than it produced
    produced = sum(1 for r in records if isinstance(r, Produce))
    assert sum(_lag_at_end(result, "workers").values()) < produced / 4


def test_quiet_pauses_and_idle_topic(runs: Runs) -> None:
    result, records = _result(runs, "quiet-pauses-idle")
    _no_faults(records)
    sc = result.scenario
    orders = next(p for p in sc.producers if p.name == "orders")
    for pause in orders.pauses:
        a = result.t0 + pause.at + 0.05
        assert not _produced_in(records, a, a + pause.duration - 0.1, result.names.topic("orders"))
    audit = next(p for p in sc.producers if p.name == "audit")
    assert audit.stop is not None
    assert not _produced_in(records, result.t0 + audit.stop + 0.1, float("inf"), result.names.topic("audit"))
    # archive reads audit only: the idle topic's lag is 0
    assert set(_lag_at_end(result, "archive", "audit").values()) == {0}


def test_quiet_ramp_and_cycle(runs: Runs) -> None:
    result, records = _result(runs, "quiet-ramp-diurnal")
    _no_faults(records)
    d = result.scenario.duration
    ramp = result.names.topic("ramp")
    first = len(_produced_in(records, result.t0, result.t0 + d / 4, ramp))
    last = len(_produced_in(records, result.t0 + 3 * d / 4, result.t0 + d, ramp))
    assert last > 3 * first
    daily = result.names.topic("daily")
    # a 20 s cycle: its busiest quarter (peak at 5 s) against its quietest (trough at 15 s)
    peak = len(_produced_in(records, result.t0 + 2.5, result.t0 + 7.5, daily))
    trough = len(_produced_in(records, result.t0 + 12.5, result.t0 + 17.5, daily))
    assert peak > 3 * trough
    assert max(_lag_at_end(result, "daily-readers", "daily").values()) <= CAUGHT_UP


def test_quiet_auto_commit_every_few_seconds(runs: Runs) -> None:
    result, records = _result(runs, "quiet-auto-commit")
    _no_faults(records)
    for group, every in (("two-second", 2.0), ("three-second", 3.0)):
        gaps = [b.ts - a.ts for cs in _commits(records, result.names.group(group)).values()
                for a, b in itertools.pairwise(cs) if b.ts - a.ts > 0.2]
        assert gaps
        assert sorted(gaps)[len(gaps) // 2] == pytest.approx(every, abs=0.5), group


def test_quiet_rolling_restart_keeps_the_generation(runs: Runs) -> None:
    result, records = _result(runs, "quiet-rolling-restart")
    _no_faults(records, "bounce")
    bounces = _faults(records, "bounce")
    assert sorted(f.member for f in bounces) == ["c1", "c2", "c3"]
    # static members back within the session: the group never rebalances after it formed
    first = min(f.start for f in bounces)
    rebalances = truth.TruthIndex(records).rebalances(result.names.group("readers"))
    assert [r for r in rebalances if r.start >= first] == []


def test_quiet_transactions_abort_and_commit_past_markers(runs: Runs) -> None:
    result, records = _result(runs, "quiet-transactions")
    _no_faults(records)
    states = {r.txn for r in records if isinstance(r, Produce)}
    assert states == {"committed", "aborted"}
    es = result.end_state
    group = result.names.group("committed")
    for (topic, p), o in es.committed_of(group).items():
        # caught up against the LSO (but for what the last moments' transactions added)
        assert 0 <= es.end_of(topic, p).lso - o <= CAUGHT_UP, (topic, p, o, es.end_of(topic, p))
    # and it committed past markers: an offset whose previous one holds no record is a
    # transaction's commit or abort marker the read_committed consumer stepped over
    produced = {(r.topic, r.partition, r.offset) for r in records if isinstance(r, Produce)}
    past_marker = [c for cs in _commits(records, group).values() for c in cs
                   if c.offset > 0 and (c.topic, c.partition, c.offset - 1) not in produced]
    assert past_marker, "no commit lands right after a transaction marker"


def test_quiet_compacted_topic_keeps_up(runs: Runs) -> None:
    result, records = _result(runs, "quiet-compacted")
    _no_faults(records)
    assert max(_lag_at_end(result, "readers").values()) <= CAUGHT_UP


def test_quiet_skewed_keys(runs: Runs) -> None:
    result, records = _result(runs, "quiet-skewed-keys")
    _no_faults(records)
    per = sorted(p.end for p in result.end_state.partitions)
    assert per[-1] > 3 * per[len(per) // 2], per  # a hot partition, many cold ones
    assert max(_lag_at_end(result, "readers").values()) <= CAUGHT_UP


# --------------------------------------------------------------------------------------------
# the mixed-fault scenarios: every fault named, with its group, partitions and time
# --------------------------------------------------------------------------------------------

def _named(result: RunResult, records: list[truth.Record], kind: str, group: str) -> Fault:
    (f,) = [f for f in _faults(records, kind) if f.group == result.names.group(group)]
    assert f.partitions, f"{kind} on {group} names no partition"
    return f


def test_mixed_stall_during_rebalance(runs: Runs) -> None:
    result, records = _result(runs, "mixed-stall-rebalance")
    crash = _named(result, records, "crash", "workers")
    stall = _named(result, records, "stall", "workers")
    # the stall begins while the group rebalances after the crash (within its 3 s session)
    assert crash.start < stall.start < crash.start + 4
    rebalances = truth.TruthIndex(records).rebalances(result.names.group("workers"))
    assert any(r.cause is not None and r.cause.kind == "crash" for r in rebalances)
    assert not [f for f in _faults(records, "crash") if f.group == result.names.group("bystander")]


def test_mixed_rewind_after_burst(runs: Runs) -> None:
    result, records = _result(runs, "mixed-burst-rewind")
    rewind = _named(result, records, "rewind", "audit")
    burst = result.t0 + result.scenario.producers[0].bursts[0].at
    # 3 s after the burst (each moved by up to 0.5 s by the seed), after the commit that holds it
    assert 0 < rewind.start - burst < 4.5
    assert all(rewind.detail["before"][k] - v == 100 for k, v in rewind.detail["after"].items())


def test_mixed_skip_while_another_group_lags(runs: Runs) -> None:
    result, records = _result(runs, "mixed-skip-while-lagging")
    skip = _named(result, records, "skip", "jumper")
    assert all(v > 0 for v in skip.detail["before"].values())
    assert sum(_lag_at_end(result, "laggard").values()) > 100  # the other group is far behind


def test_mixed_crash_during_burst(runs: Runs) -> None:
    result, records = _result(runs, "mixed-crash-burst")
    crash = _named(result, records, "crash", "readers")
    stop = _named(result, records, "stop", "batch")
    burst = result.t0 + result.scenario.producers[0].bursts[0].at
    # 1.2 s after the burst, each moved by up to 0.5 s by the seed: after it, while it is consumed
    assert burst < crash.start < burst + 2.5
    assert stop.start > crash.start
    assert max(_lag_at_end(result, "readers").values()) <= CAUGHT_UP  # c1 took the backlog


def test_mixed_retention_overrun_on_slow_group(runs: Runs) -> None:
    result, records = _result(runs, "mixed-retention-slow")
    _named(result, records, "stop", "slow")
    overrun = _named(result, records, "retention_overrun", "slow")
    assert overrun.member == ""
    assert all(n > 0 for n in overrun.detail["lost"].values())
    es = result.end_state
    for tp in overrun.partitions:
        assert es.committed_of(result.names.group("slow"))[tp] < es.end_of(*tp).log_start
    assert not [f for f in _faults(records, "retention_overrun") if f.group == result.names.group("fast")]
