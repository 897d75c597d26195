"""The skip matrix's mechanisms on the real broker (issue 28): a seek to the end after a stated
backlog on one partition, Kafka's own reset tool on an emptied group, and the client's
out-of-range reset after retention deleted its position. Each skip's exact counts in the truth
are checked against what the broker and the commits show, independently of the member's own
bookkeeping. One short run (about 25 s) for the three."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lagscope.devtools.sim import truth
from lagscope.devtools.sim.model import Scenario
from lagscope.devtools.sim.runner import ADMIN_TOOL, RunResult, run_scenario
from lagscope.devtools.sim.truth import Commit, Fault, Produce

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

_M = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 500, "auto_commit_interval_ms": 500}
_RETAIN = {"retention.ms": "2000", "segment.ms": "500", "file.delete.delay.ms": "100"}

SCENARIO = Scenario.model_validate({
    "name": "skip-mechanisms", "duration": 18, "jitter": {"times_s": 0},
    "topics": [{"name": "s", "partitions": 2}, {"name": "a", "partitions": 2},
               {"name": "o", "partitions": 2, "configs": _RETAIN}],
    "producers": [
        {"name": "ps", "topic": "s", "rate": 10, "bursts": [{"at": 5.0, "count": 300, "partition": 0}]},
        {"name": "pa", "topic": "a", "rate": 4, "bursts": [{"at": 5.5, "count": 40}]},
        {"name": "po", "topic": "o", "rate": 4, "bursts": [{"at": 7.5, "count": 30, "partition": 0}]}],
    "groups": [
        {"name": "seeker", "topics": ["s"], "members": [{"name": "c1", "max_poll_records": 500, **_M, "actions": [
            {"kind": "skip", "at": 4, "size": 300, "partitions": "one", "state": "caught_up"}]}]},
        {"name": "reset", "topics": ["a"], "members": [{"name": "c1", **_M, "actions": [
            {"kind": "skip", "at": 4, "size": 40, "mechanism": "admin_reset", "state": "caught_up"}]}]},
        {"name": "expired", "topics": ["o"], "members": [{"name": "c1", "auto_offset_reset": "latest", **_M,
                                                           "actions": [
            {"kind": "skip", "at": 4, "size": 20, "partitions": "one", "mechanism": "out_of_range",
             "state": "caught_up"}]}]}],
})


@pytest.fixture(scope="module")
def run(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, list[truth.Record]]:
    result = run_scenario(SCENARIO, bootstrap, tmp_path_factory.mktemp("skips"), cleanup=True)
    assert not result.failures
    return result, truth.load(result.truth_path)


def _skip(records: list[truth.Record], group: str) -> Fault:
    (f,) = [r for r in records if isinstance(r, Fault) and r.kind == "skip" and r.group == group]
    return f


def _commits(records: list[truth.Record], group: str, tp: tuple[str, int]) -> list[Commit]:
    return sorted((r for r in records if isinstance(r, Commit) and r.group == group
                   and (r.topic, r.partition) == tp), key=lambda c: c.ts)


def _end_at(records: list[truth.Record], tp: tuple[str, int], t: float) -> int:
    """The log end at ``t`` from the produce records: one past the last created by then."""
    return 1 + max((r.offset for r in records if isinstance(r, Produce) and (r.topic, r.partition) == tp
                    and r.ts <= t), default=-1)


def test_a_seek_after_a_backlog_counts_what_it_jumped(run: tuple[RunResult, list[truth.Record]]) -> None:
    result, records = run
    group, topic = result.names.group("seeker"), result.names.topic("s")
    f = _skip(records, group)
    assert f.detail["mechanism"] == "seek"
    assert f.detail["partitions"] == "one"
    # one partition (the first the member holds), after the 300-message burst it waited for
    assert f.partitions == ((topic, 0),)
    (n,) = f.detail["skipped"].values()
    assert n >= 300
    tp = (topic, 0)
    cs = _commits(records, group, tp)
    jump = next(c for c in cs if c.ts >= f.start)
    before = [c.offset for c in cs if c.ts < f.start]
    # the commit lands on the log end at the seek, and what it skipped is exactly new − processed:
    # the member processed no more than its last commit before (it held the partition)
    assert _end_at(records, tp, f.start - 0.5) <= jump.offset <= _end_at(records, tp, f.end + 0.001)
    assert jump.offset - n == f.detail["processed"][f"{topic}:0"] == before[-1]
    # the other partition was read on: no jump there
    other = _commits(records, group, (topic, 1))
    assert max(b.offset - a.offset for a, b in itertools.pairwise(other)) < n


def test_an_admin_reset_counts_what_its_commit_replaced(run: tuple[RunResult, list[truth.Record]]) -> None:
    result, records = run
    group, topic = result.names.group("reset"), result.names.topic("a")
    f = _skip(records, group)
    assert f.detail["mechanism"] == "admin_reset"
    # the members left before the tool ran, and came back after it returned
    stops = [r for r in records if isinstance(r, Fault) and r.kind == "admin_stop" and r.group == group]
    assert len(stops) == 1
    assert stops[0].start <= f.start
    assert stops[0].end >= f.end
    assert sum(f.detail["skipped"].values()) >= 40
    for p in (0, 1):
        tp = (topic, p)
        cs = _commits(records, group, tp)
        tool = [c for c in cs if c.member == ADMIN_TOOL]
        assert len(tool) == 1
        # the tool's commit replaced the member's last commit before the stop, by exactly the count
        prior = [c for c in cs if c.ts < tool[0].ts and c.member != ADMIN_TOOL][-1]
        assert prior.ts <= f.start
        assert f.detail["before"][f"{topic}:{p}"] == prior.offset
        assert tool[0].offset - prior.offset == f.detail["skipped"][f"{topic}:{p}"]
        # to the latest: the log end while the tool ran
        assert _end_at(records, tp, f.start - 0.2) <= tool[0].offset <= _end_at(records, tp, f.end + 0.001)
        # the member came back from the reset offset
        after = [c.offset for c in cs if c.ts > tool[0].ts]
        assert after
        assert min(after) >= tool[0].offset
    # the broker agrees at the end
    committed = result.end_state.committed_of(group)
    assert all(committed[(topic, p)] >= f.detail["after"][f"{topic}:{p}"] for p in (0, 1))


def test_an_out_of_range_reset_counts_from_the_log_start(run: tuple[RunResult, list[truth.Record]]) -> None:
    result, records = run
    group, topic = result.names.group("expired"), result.names.topic("o")
    f = _skip(records, group)
    key = f"{topic}:0"
    assert f.detail["mechanism"] == "out_of_range"
    assert f.partitions == ((topic, 0),)
    processed, log_start, to = f.detail["processed"][key], f.detail["log_start"][key], f.detail["reset_to"][key]
    # retention deleted the member's position, the client reset to the end: the skip counts from the
    # log start, retention's own loss (its fault) what lay below it
    assert processed < log_start <= to
    assert f.detail["skipped"][key] == to - log_start >= 20
    (lost,) = [r for r in records if isinstance(r, Fault) and r.kind == "retention_overrun" and r.group == group]
    assert lost.detail["lost"][key] == log_start - processed
    tp = (topic, 0)
    # the reset's target is the log end then, and the member's next commit moves onto it
    assert to <= _end_at(records, tp, f.end + 0.001)
    cs = _commits(records, group, tp)
    held = [c.offset for c in cs if c.ts < f.start]
    later = [c.offset for c in cs if c.ts >= f.start]
    # the member committed what it processed while held; a record the client fetched before the
    # hold may still be returned (and processed) after it, before the fetch from the deleted
    # position resets: so the commits show no more than processed, and what it processed had been
    # produced by the hold's end
    assert held
    assert held[-1] <= processed <= _end_at(records, tp, f.start)
    jump = next(i for i, o in enumerate(later) if o > processed)
    assert all(o <= processed for o in later[:jump])
    assert later[jump] >= to


def test_runs_without_artifacts_left(run: tuple[RunResult, list[truth.Record]]) -> None:
    result, _ = run
    # the hold files of the resets are gone (a member restarted after each)
    assert not list((Path(result.out_dir) / "parts").glob("hold-*.json"))


def test_a_reset_due_after_the_schedule_is_not_run_and_none_waits_past_it(
        bootstrap: str, tmp_path: Path) -> None:
    # the first reset waits for a backlog that never comes: its wait ends with the schedule (8 s), not
    # after its 60 s; the second, due at 2 s, has no turn before the end and is recorded as not run
    sc = Scenario.model_validate({
        "name": "late-resets", "duration": 8, "jitter": {"times_s": 0},
        "topics": [{"name": "a", "partitions": 1}],
        "producers": [{"name": "pa", "topic": "a", "rate": 2}],
        "groups": [{"name": "g", "topics": ["a"], "members": [{"name": "c1", **_M, "actions": [
            {"kind": "skip", "at": 1, "size": 1_000_000, "mechanism": "admin_reset", "wait_s": 60},
            {"kind": "skip", "at": 2, "size": 1, "mechanism": "admin_reset"}]}]}]})
    result = run_scenario(sc, bootstrap, tmp_path, cleanup=True)
    assert not result.failures
    records = truth.load(result.truth_path)
    group = result.names.group("g")
    (first,) = [r for r in records if isinstance(r, Fault) and r.kind == "skip" and r.group == group]
    assert first.detail["stopped"] < result.t0 + 8 <= first.start
    assert first.start - (result.t0 + 8) < 2.0  # the wait ended with the schedule, then the tool ran
    (late,) = [r for r in records if isinstance(r, Fault) and r.kind == "admin_reset_not_run"]
    assert late.group == group
    assert late.detail["at"] == 2
    assert late.start >= result.t0 + 8
