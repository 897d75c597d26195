"""A retention loss is proven (critical) only where nobody could hold the deleted records: at one
of its sweeps nobody read the partition (no owner, or a silent one) and its committed offset had
not moved for stop_after_s. While a member owns it, the consumer may already have fetched them
(it commits on through them at its pace), so it is a warning whose count is an upper bound. The
proof is carried across steps (``m_lost``): steps cut at every minute, and at all of them, judge
the loss as one pass does. lagscope.analytics.step.run_step over Arrow, no Spark."""

from __future__ import annotations

from typing import Any

import pytest
from analytics_builders import at, members_rows, offsets_rows
from test_step_invariance import _differences, _run

from lagscope.delivery import account_rows

MINUTES = 5
SWEEPS = [5.0 * i for i in range(MINUTES * 12)]


def _end(t: float) -> int:
    return 10 + 2 * int(t)


def _lake() -> dict[str, list[dict[str, Any]]]:
    """Group ``empty``: its only member leaves at t=60 (Empty from then), retention overtakes its
    committed offset (129) from t=90 (log start 40 behind the end), the member is back at t=150
    and sits on the deleted offset until t=200, when its client resets it to the end. Group
    ``edge``: its member owns the partition throughout and reads 3 behind the end, 5 from t=90 to
    t=120, while retention keeps the log start 3 behind it (the member may hold those records)."""
    out: dict[str, list[dict[str, Any]]] = {"offsets": [], "members": [], "commits": []}
    for t in SWEEPS:
        gone = 60 <= t < 150
        committed = _end(t) - 1 if t < 60 else (_end(60) - 1 if t < 200 else _end(t))
        log_start = _end(t) - 40 if t >= 90 else 0
        out["offsets"] += offsets_rows([(t, committed, _end(t), log_start, None if gone else "m1")], group="empty")
        out["members"] += members_rows([(t, "Empty" if gone else "Stable", 1 if t < 60 else 2,
                                         [] if gone else [("m1", None, [0])])], group="empty")
        edge_start = _end(t) - 3 if 90 <= t < 120 else 0
        out["offsets"] += offsets_rows([(t, _end(t) - 3 - (2 if 90 <= t < 120 else 0), _end(t), edge_start)],
                                       group="edge")
        out["members"] += members_rows([(t, "Stable", 1, [("m1", None, [0])])], group="edge")
    return out


def _losses(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((r["group_id"], r["start_ts"], r["severity"], r["magnitude"]) for r in rows
                  if r["kind"] == "retention_loss")


def test_a_loss_while_the_group_was_empty_is_proven_a_live_owners_deficit_is_not() -> None:
    lake = _lake()
    whole = _run(lake, None, at(MINUTES * 60), None, False)
    rows = whole.tables["anomalies"].to_pylist()
    # empty: deleted from t=90 while nobody owned the partition: critical, the largest deficit
    # (log start 40 behind the end, committed 129) at its last sweep before the reset (t=195)
    # edge: 2 below the log start each sweep of 90–115, owned: a warning of at most 2
    assert _losses(rows) == [("edge", at(90), "warning", 2.0),
                             ("empty", at(90), "critical", float(_end(195) - 40 - 129))]
    (edge,) = [r for r in rows if r["group_id"] == "edge" and r["kind"] == "retention_loss"]
    assert edge["detail"].endswith("lost unless its consumer had already fetched them")
    counted = {r["group_id"]: r for r in account_rows([r for r in rows if r["kind"] == "retention_loss"]) if r}
    assert (counted["edge"]["lost"], counted["edge"]["bound"]) == (2, "at_most")
    assert (counted["empty"]["lost"], counted["empty"]["bound"]) == (_end(195) - 40 - 129, "at_least")


@pytest.mark.parametrize("cut_minutes", [[1], [2], [3], [4], [1, 2, 3, 4]])
def test_steps_carry_the_proof(cut_minutes: list[int]) -> None:
    # cut at minute 3 (t=180), the step after sees the episode only from its owned sweeps (the
    # member back at 150): the proof comes from the carried state (m_lost), or it would be a warning
    lake = _lake()
    end = at(MINUTES * 60)
    whole = [_run(lake, None, end, None, False)]
    outs, state, lo = [], None, None
    for hi in [*(at(60 * m) for m in cut_minutes), end]:
        out = _run(lake, lo, hi, state, False)
        outs.append(out)
        state, lo = out.state, hi
    assert _differences(whole, outs, {"anomalies": ("key",)}) == []
    last = {r["key"]: r for o in outs for r in o.tables["anomalies"].to_pylist()}
    assert _losses(list(last.values())) == _losses(whole[0].tables["anomalies"].to_pylist())


def _silent_lake() -> dict[str, list[dict[str, Any]]]:
    """Group ``silent``: its member stays assigned throughout but, in the commit stream, commits
    nothing from t=60 to t=150 (it stopped reading; its committed offset 129 from t=60), while
    retention overtakes that offset from t=90; from t=150 it commits the same offset again, and at
    t=200 its client resets it to the end."""
    out: dict[str, list[dict[str, Any]]] = {"offsets": [], "members": [], "commits": []}
    for t in SWEEPS:
        committed = _end(t) - 1 if t < 60 else (_end(60) - 1 if t < 200 else _end(t))
        log_start = _end(t) - 40 if t >= 90 else 0
        out["offsets"] += offsets_rows([(t, committed, _end(t), log_start, "m1")], group="silent")
        out["members"] += members_rows([(t, "Stable", 1, [("m1", None, [0])])], group="silent")
        if not 60 <= t < 150:
            out["commits"].append({"cluster": "c", "group_id": "silent", "topic": "t", "partition": 0,
                                   "committed_offset": committed, "commit_ts": at(t - 0.5), "record_ts": at(t - 0.5)})
    return out


@pytest.mark.parametrize("cut_minutes", [[], [3], [1, 2, 3, 4]])
def test_an_owner_that_commits_nothing_reads_nothing(cut_minutes: list[int]) -> None:
    # with the commit stream the owner is silent from t=75 (15 s without a commit): the loss from
    # t=90 is proven; its commits from t=150 on do not take the proof back (cut at minute 3, the
    # step after sees only those: the carried m_lost keeps it critical). From sweeps alone an
    # owner that may hold the records: a warning
    lake = _silent_lake()
    end = at(MINUTES * 60)
    for with_commits, severity in ((True, "critical"), (False, "warning")):
        outs, state, lo = [], None, None
        for hi in [*(at(60 * m) for m in cut_minutes), end]:
            out = _run(lake, lo, hi, state, with_commits)
            outs.append(out)
            state, lo = out.state, hi
        last = {r["key"]: r for o in outs for r in o.tables["anomalies"].to_pylist()}
        assert [(s, g) for g, _, s, _ in _losses(list(last.values()))] == [(severity, "silent")], with_commits
