"""A stall or a stop when a live owner has never committed a partition it took over (issue 25;
docs/analytics.md "Stall or stop"): ``stop`` needs evidence that commits *stopped*, the current
owner's own commits in its tenure and then silence; a partition its owner has not committed since
taking it over is a ``stall`` ("owner assigned, never committed it since taking it over"). And what
the takeover sweep shows (the previous owner's commit on revoke, dated after the sweep's stamp
yet read by it) is no progress of the new owner's, so its other partitions are not *starved* by
it. Whole steps (lagscope.analytics.step.run_step over Arrow, as each Spark task runs them), no
Spark.

The scenario distils the accuracy benchmark's ``mixed-stall-rebalance`` (seed 3): thresholds
stall_after_s = stop_after_s = 5 s, a session bound of 3 + 0.5 + 0.5 s, sweeps every 0.5 s, the log
end of every partition growing 8 messages a second.

Each commit lands 0.3 s before the sweep that reads it, but c2's last.

- c1 owns partitions 0 and 1; it consumes them up to 7 s, then stops consuming (paused) and keeps
  committing the same offset every 0.5 s: a live member that makes no progress (a stall);
- c2 owns partition 2 and consumes it, committing at every sweep, until the rebalance at 9 s:
  its last commit (on revoke, caught up to the end) lands at ``REVOKE`` = 9.003 s, and the sweep
  stamped 9.0 s reads it and names c1 the owner. Work is pending again from the next sweep
  (9.5 s). c1 never commits partition 2 (``c1_commits``: the variants where it does);
- c2 owns partition 3 throughout and consumes it (the group progresses).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from analytics_builders import at, members_rows, offsets_rows
from test_step_invariance import _arrow, _seen

from lagscope.analytics import step as steps
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.schema import COMMITS, MEMBERS, OFFSETS

S = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=5, stop_after_s=5, gap_min_samples=10_000),
                    session_timeout_s=3, heartbeat_s=0.5, network_s=0.5, rebalance_timeout_s=10)
SWEEPS = [i * 0.5 for i in range(0, 61)]  # 0 … 30 s
HANDOVER, REVOKE = 9.0, 9.003
NEVER = "owner assigned, never committed it since taking it over"
IDLE = {"stall", "stop", "starved"}


def end(t: float) -> int:
    return 1000 + int(8 * t)


def lake(c1_commits: tuple[float, ...] = (), *, only_partition_2: bool = False,
         c1_progress_at: float | None = None, c3_from: float | None = None,
         unowned_until: float | None = None) -> dict[str, list[dict[str, Any]]]:
    """The scenario's lake (module doc). ``c1_commits``: times at which c1 commits partition 2
    (the offset the handover left); ``only_partition_2``: c2 alone, partition 2 only (c2 hands it
    to c1, then leaves: nobody else progresses); ``c1_progress_at``: c1 consumes 3 messages of
    partition 2 and commits them, read by the sweep at that time (its first poll returned a
    batch before the pause took effect); ``c3_from``: a member c3 takes partition 2 over from c1 then
    (another rebalance, no commit: the handover's change stays the partition's last);
    ``unowned_until``: partition 2 has no owner from the handover until then (c1 gets it then)."""
    offsets: list[dict[str, Any]] = []
    commits: list[dict[str, Any]] = []
    seq = iter(range(10**6))

    def commit(p: int, t: float, offset: int) -> None:
        commits.append({"cluster": "c", "date": at(t).date().isoformat(), "group_id": "g", "topic": "t",
                        "partition": p, "committed_offset": offset, "commit_ts": at(t), "record_ts": at(t),
                        "source_partition": 0, "source_offset": next(seq)})

    handed = end(HANDOVER)  # c2's last offset, committed on revoke, which the handover sweep reads
    parts = (2,) if only_partition_2 else (0, 1, 2, 3)
    for p in parts:
        rows = []
        for t in SWEEPS:
            if p in (0, 1):
                c = end(min(t, 7.0)) - 2
                rows.append((t, c, end(t), 0, "c1"))
                commit(p, t - 0.3, c)
            elif p == 2:
                if t < HANDOVER:
                    c = end(t) - 2
                    rows.append((t, c, end(t), 0, "c2"))
                    commit(p, t - 0.3, c)
                elif c1_progress_at is not None and t >= c1_progress_at:
                    rows.append((t, handed + 3, end(t), 0, "c1"))
                elif unowned_until is not None and t < unowned_until:
                    rows.append((t, handed, end(t), 0, None))
                else:
                    rows.append((t, handed, end(t), 0, "c3" if c3_from is not None and t >= c3_from else "c1"))
            else:
                c = end(t) - 2
                rows.append((t, c, end(t), 0, "c2"))
                commit(p, t - 0.3, c)
        offsets += offsets_rows(rows, partition=p)
    commit(2, REVOKE, handed)
    if c1_progress_at is not None:
        commit(2, c1_progress_at - 0.3, handed + 3)
    for t in c1_commits:
        commit(2, t, handed)
    members = members_rows([(t, "Stable", 1 if t < HANDOVER else 2,
                             [("c1", None, [0, 1] if t < HANDOVER else [0, 1, 2]), ("c2", None, [2, 3] if t < HANDOVER
                                                                                     else [3])]
                             if not only_partition_2 else
                             [("c2", None, [2])] if t < HANDOVER else [("c1", None, [2])])
                            for t in SWEEPS])
    if unowned_until is not None:
        members = [r for r in members if r["sweep_ts"] < at(HANDOVER) or r["sweep_ts"] >= at(unowned_until)] + (
            members_rows([(t, "Stable", 2, [("c1", None, [0, 1]), ("c2", None, [3])])
                          for t in SWEEPS if HANDOVER <= t < unowned_until]))
    if c3_from is not None:
        members = [r for r in members if r["sweep_ts"] < at(c3_from)] + members_rows(
            [(t, "Stable", 3, [("c1", None, [0, 1]), ("c2", None, [3]), ("c3", None, [2])])
             for t in SWEEPS if t >= c3_from])
    return {"offsets": offsets, "members": members, "commits": sorted(commits, key=lambda r: r["commit_ts"])}


def run(lk: dict[str, list[dict[str, Any]]], lo: float | None, hi: float,
        state: dict[str, pa.Table] | None = None) -> steps.StepOutput:
    """A step over ``[lo, hi)`` as the job reads the lake (the commits from 15 minutes before ``lo``)."""
    def rows(table: str, col: str, since: float | None) -> list[dict[str, Any]]:
        return [r for r in lk[table] if (since is None or r[col] >= at(since)) and r[col] < at(hi)]

    return steps.run_step(steps.StepInputs(
        offsets=_arrow(rows("offsets", "sweep_ts", lo), OFFSETS), members=_arrow(rows("members", "sweep_ts", lo),
                                                                                 MEMBERS),
        commits=_arrow(rows("commits", "commit_ts", None if lo is None else lo - 900), COMMITS), group_events=None,
        state=state or {}), settings=S, as_of=at(hi))


def idle(outs: list[steps.StepOutput]) -> dict[int, tuple[str, str, float, str]]:
    """Per partition, its idle finding as a reader sees it: kind, severity, start (s), reason."""
    seen = _seen(outs, "anomalies", {"anomalies": ("key",)})
    out = {}
    for r in seen.values():
        if r["kind"] in IDLE:
            assert r["partition"] not in out, r
            why = r["detail"].split("(", 1)[1].split(")", 1)[0] if "(" in r["detail"] else r["detail"]
            out[r["partition"]] = (r["kind"], r["severity"], (r["start_ts"] - at(0)).total_seconds(), why)
    return out


def test_an_owner_that_never_committed_what_it_took_over_is_a_stall() -> None:
    got = idle([run(lake(), None, 31)])
    # partition 2: c1 has never committed it. Pending from 9.5 s; its first mark at 14.5 s, when
    # c2's commit on revoke is 5.5 s old: a stop by the old rule, a stall of a live owner now, a
    # warning beside c2's progress
    assert got[2] == ("stall", "warning", 9.5, NEVER)
    # partitions 0 and 1: c1 commits them (the same offset): stalls, not starved. The handover's
    # commit (9.003, read by c1's first sweep of partition 2) is c2's, no progress of c1's
    assert got[0][:2] == got[1][:2] == ("stall", "warning")
    assert got[0][3] == "owner still assigned"
    assert 3 not in got


@pytest.mark.parametrize(("at_s", "kind"), [(9.5, "stall"), (10.0, "stop"), (12.0, "stop")])
def test_the_new_owners_own_progress_still_starves_its_other_partitions(at_s: float, kind: str) -> None:
    # what c1's tenure's second sweep on shows on partition 2 is its progress: it served partition
    # 2 while 0 and 1 waited (starved). Partition 2 itself, committed by c1 and then silent, is a
    # stop; but a commit dated before the second sweep (9.2 s, read at 9.5 s) is not told from the
    # previous owner's by its time: partition 2 is then "never committed" (the rule's known cost)
    got = idle([run(lake(c1_progress_at=at_s), None, 31)])
    assert got[0][:2] == got[1][:2] == ("starved", "info")
    assert got[2][0] == kind


def test_the_status_of_a_never_committed_partition_is_stall() -> None:
    out = run(lake(), None, 31)
    last = max((r for r in out.tables["status"].to_pylist() if r["partition"] == 2), key=lambda r: r["eval_ts"])
    assert last["status"] == "STALL"


@pytest.mark.parametrize(("c1_at", "kind", "why"), [
    # a commit at the tenure's second sweep is c1's: its commits then stopped, a stop
    ((9.5,), "stop", "owner assigned, no commits"),
    # a recent one of c1's at the first mark: it still commits the same offset (Burrow's STALL)
    ((12.0,), "stall", "owner still assigned"),
    # between its first two sweeps it cannot be told from the previous owner's: not c1's
    ((9.2,), "stall", NEVER),
])
def test_the_owners_own_commits_start_at_its_tenures_second_sweep(c1_at: tuple[float, ...], kind: str,
                                                                     why: str) -> None:
    got = idle([run(lake(c1_at), None, 31)])
    assert (got[2][0], got[2][3]) == (kind, why)


def test_a_lone_owner_that_never_committed_is_critical() -> None:
    # c2 hands partition 2 to c1 and leaves; c1 never commits it: nobody progresses. A stall of
    # its owner's that needs no 5 x stall_after_s to be critical (no sign of processing at all)
    got = idle([run(lake(only_partition_2=True), None, 31)])
    assert got[2][:2] == ("stall", "critical")
    assert got[2][3] == NEVER


def test_an_owner_whose_commits_stopped_is_still_a_stop() -> None:
    # c1 owns partition 2 from its first sweep (the tenure's start unknown: every record counts),
    # commits it, then stops: Burrow's STOP, as before
    lk = lake()
    lk["offsets"] = [r for r in lk["offsets"] if r["partition"] == 2]
    lk["members"] = members_rows([(t, "Stable", 1, [("c1", None, [2])]) for t in SWEEPS])
    lk["commits"] = [r for r in lk["commits"] if r["partition"] == 2]
    for r in lk["offsets"]:
        r["member_id"] = "c1"
    got = idle([run(lk, None, 31)])
    assert got[2][:2] == ("stop", "critical")
    assert got[2][3] == "owner assigned, no commits"


@pytest.mark.parametrize("cut", [8.75, 9.0, 9.25, 9.5, 9.75, 10.0, 12.0, 14.25, 14.5, 14.75])
@pytest.mark.parametrize("c1_at", [(), (9.2,), (9.5,)])
def test_steps_cut_at_the_handover_equal_one_pass(cut: float, c1_at: tuple[float, ...]) -> None:
    # the tenure is a running value carried in the state (m_tenure_t, tenure_owner): a cut on the
    # takeover sweep, on the second sweep or at the first mark judges as one pass
    lk = lake(c1_at)
    one = idle([run(lk, None, 31)])
    first = run(lk, None, cut)
    assert idle([first, run(lk, cut, 31, first.state)]) == one
    # the carried tenure: +inf at the takeover sweep, the second sweep's time after it
    carried = {r["partition"]: r["m_tenure_t"] for r in first.state["series"].to_pylist()}
    last = max(t for t in SWEEPS if t < cut)
    if last == HANDOVER:
        assert carried[2] == float("inf")
    elif last > HANDOVER:
        assert carried[2] == pytest.approx(at(HANDOVER + 0.5).timestamp())
    else:  # c2's tenure, whose start no row shows
        assert carried[2] == float("-inf")


@pytest.mark.parametrize("cut", [10.0, 11.25, 12.0, 14.0])
def test_a_handover_change_carried_past_a_second_takeover_is_nobodys_progress(cut: float) -> None:
    # the change the 9.0 s takeover sweep showed (c2's commit on revoke) stays partition 2's last
    # when c3 takes it over from c1 at 11 s. It was nobody's progress (m_change_takeover carries
    # that): a step after 11 s must not credit it to c1, whose partitions 0 and 1 stay stalls
    lk = lake(c3_from=11.0)
    one = idle([run(lk, None, 31)])
    assert one[0][0] == one[1][0] == "stall"
    assert one[2][0] == "stall"
    assert one[2][3] == NEVER
    first = run(lk, None, cut)
    assert idle([first, run(lk, cut, 31, first.state)]) == one


@pytest.mark.parametrize("cut", [9.25, 9.75, 10.25, 12.0])
def test_a_takeover_after_unowned_sweeps_is_judged_alike_in_steps(cut: float) -> None:
    # partition 2 has no owner from 9.0 s to 10.0 s (c2's commit on revoke read unowned), then c1
    # takes it over and never commits it: the tenure starts at 10.0 s against c2, whom the state
    # carried over the unowned rows (tenure_owner). The change the unowned sweep showed is nobody's
    # progress, carried too (m_change_takeover): a cut after c1's first sweep does not credit it to
    # c1 and starve its partitions 0 and 1
    lk = lake(unowned_until=10.0)
    one = idle([run(lk, None, 31)])
    assert one[2][0] == "stall"
    assert one[2][3] == NEVER
    first = run(lk, None, cut)
    assert idle([first, run(lk, cut, 31, first.state)]) == one


def test_a_state_written_before_tenures_reads_as_an_unknown_tenure() -> None:
    # a state without m_tenure_t, m_change_takeover and tenure_owner (an older lagscope): the takeover it holds is not
    # seen, every record counts (the old rule: a stop) and nothing fails
    lk = lake()
    first = run(lk, None, 10.0)
    old = {**first.state, "series": first.state["series"].drop_columns(["m_tenure_t", "m_change_takeover",
                                                                        "tenure_owner"])}
    got = idle([first, run(lk, 10.0, 31, old)])
    assert got[2][:3] == ("stop", "warning", 9.5)


def _unowned_change_lake() -> dict[str, list[dict[str, Any]]]:
    """Partition 0's committed offset changes at 2 s while nobody owns it (an earlier consumer's
    last commit); x takes it over at 4 s and never commits it, then crashes: it is gone from the
    sweep at 15 s. y owns partition 1 throughout and commits it at every sweep."""
    offsets: list[dict[str, Any]] = []
    members = []
    for t in SWEEPS:
        owner = None if t < 4.0 else "x" if t < 15.0 else "y"
        offsets += offsets_rows([(t, 500 if t < 2.0 else 600, end(t), 0, owner)], partition=0)
        offsets += offsets_rows([(t, end(t) - 2, end(t), 0, "y")], partition=1)
        gen, who = ((1, [("y", None, [1])]) if t < 4.0 else (2, [("x", None, [0]), ("y", None, [1])]) if t < 15.0
                    else (3, [("y", None, [0, 1])]))
        members += members_rows([(t, "Stable", gen, who)])
    return {"offsets": offsets, "members": members, "commits": []}


@pytest.mark.parametrize("cut", [4.25, 6.0, 12.0])
def test_a_change_seen_unowned_is_no_progress_of_the_next_owner_across_steps(cut: float) -> None:
    # the change partition 0 showed while unowned is nobody's progress (one pass credits a member's
    # progress only at a sweep that names it the owner): a step cut after x took the partition over
    # must not date x's last progress to it, which would judge x's departure a poll timeout (15 − 2 s
    # of silence) where one pass, which knows no progress of x's, judges a leave
    lk = _unowned_change_lake()

    def windows(outs: list[steps.StepOutput]) -> list[tuple[str, float]]:
        return sorted((r["cause"], (r["start_ts"] - at(0)).total_seconds())
                      for o in outs for r in o.tables["rebalances"].to_pylist())

    one = windows([run(lk, None, 31)])
    assert [c for c, s in one if s > 14] == ["leave"]
    first = run(lk, None, cut)
    assert windows([first, run(lk, cut, 31, first.state)]) == one
