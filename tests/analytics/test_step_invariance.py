"""Incremental steps judge every episode as one pass over the same rows does (issue 26, item 3):
random groups with stalls, stops, starved partitions and owners that leave, analysed in one step
and again as steps cut at every minute boundary (and at all of them at once); the tables a reader
sees (the current row of each anomaly key, every status and lag-trend row) must be equal, row for
row. lagscope.analytics.step.run_step over Arrow, no Spark."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import pyarrow as pa
import pytest
from analytics_builders import at, members_rows, offsets_rows

from lagscope.analytics import step as steps
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.schema import COMMITS, GROUP_EVENTS, MEMBERS, OFFSETS

# commit gaps learn their normal from the gaps seen so far (a documented difference, hindsight:
# docs/analytics.md "Incremental mode"), so none is judged here: no partition shows the samples
SETTINGS = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=15, stop_after_s=15, gap_min_samples=10_000,
                                                      growth_min_minutes=2))
MINUTES = 6
#: a reader's identity of a row of each table (the anomalies: current rows per key)
IDENTITY = {"anomalies": ("key",), "status": ("eval_ts", "group_id", "topic", "partition"),
            "lag_trends": ("window_start", "group_id", "topic", "partition")}


def _arrow(rows: list[dict[str, Any]], table: Any) -> pa.Table:
    schema = pa.schema([pa.field("cluster", pa.string()), *table.schema])
    got = pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)
    return got.select([c for c in steps.READ_COLUMNS[table.name] if c in got.column_names])


def random_group(rng: random.Random, group: str) -> dict[str, list[dict[str, Any]]]:
    """One group's sweeps (every 5 s, a random phase) over :data:`MINUTES` minutes: 1–3 members,
    2–5 partitions dealt among them, each partition stuck (its committed offset frozen while the
    end grows) for random stretches of 5–150 s, so that an owner progresses on some of its
    partitions while others wait (starved), or on none (stalled); with some chance every member
    leaves at a random sweep (the group Empty from then: open stalls lose their owner), and with
    some chance the commit stream (the group's stuck partitions keep committing the same offset,
    or nothing at all: a stop)."""
    parts = rng.randint(2, 5)
    members = [f"{group}-m{i}" for i in range(rng.randint(1, 3))]
    owner = {p: members[p % len(members)] for p in range(parts)}
    phase = rng.choice([0.0, 0.25, 1.5, 2.75, 4.9])
    sweeps = [phase + 5 * i for i in range(int((MINUTES * 60 - phase) // 5) + 1)]
    sweeps = [t for t in sweeps if t < MINUTES * 60]
    leave_at = rng.choice(sweeps[len(sweeps) // 4:]) if rng.random() < 0.4 else None
    silent_when_stuck = rng.random() < 0.5
    stuck: dict[int, list[tuple[float, float]]] = {}
    for p in range(parts):
        spans, t = [], rng.uniform(0, 60)
        while t < MINUTES * 60:
            length = rng.uniform(5, 150)
            spans.append((t, t + length))
            t += length + rng.uniform(5, 90)
        stuck[p] = spans
    out: dict[str, list[dict[str, Any]]] = {"offsets": [], "members": [], "commits": []}
    committed = dict.fromkeys(range(parts), 0)
    rate = {p: rng.choice([1, 2, 5]) for p in range(parts)}
    for t in sweeps:
        gone = leave_at is not None and t >= leave_at
        for p in range(parts):
            end = 10 + rate[p] * int(t)
            frozen = gone or any(a <= t < b for a, b in stuck[p])
            if not frozen:
                committed[p] = max(committed[p], end - rng.randint(0, 2))
            out["offsets"] += offsets_rows([(t, committed[p], end, 0, None if gone else owner[p])], group=group,
                                           partition=p)
            if rng.random() < 0.8 and not (frozen and (gone or silent_when_stuck)):
                out["commits"].append({"cluster": "c", "group_id": group, "topic": "t", "partition": p,
                                       "committed_offset": committed[p], "commit_ts": at(round(t - 0.4, 3)),
                                       "record_ts": at(round(t - 0.4, 3))})
        assignment = [(m, None, [p for p in range(parts) if owner[p] == m]) for m in members]
        out["members"] += members_rows([(t, "Empty" if gone else "Stable", 2 if gone else 1,
                                         [] if gone else assignment)], group=group)
    return out


def _run(lake: dict[str, list[dict[str, Any]]], lo: dt.datetime | None, hi: dt.datetime,
         state: dict[str, pa.Table] | None, with_commits: bool) -> steps.StepOutput:
    """A step over ``[lo, hi)`` as the job reads the lake: the sweeps in range, the commits from 15
    minutes before ``lo``, and the ``group_events`` (when the lake has them) of the UTC days from
    ``lo``'s to ``hi``'s, whole (one pass, ``lo`` None: every day up to ``hi``'s)."""
    def rows(table: str, col: str, since: dt.datetime | None) -> list[dict[str, Any]]:
        return [r for r in lake[table] if (since is None or r[col] >= since) and r[col] < hi]

    commits = events = None
    if with_commits:  # as the job reads them: from 15 minutes before the step's start
        commits = _arrow(rows("commits", "commit_ts", None if lo is None else lo - dt.timedelta(minutes=15)),
                         COMMITS)
    if "group_events" in lake:
        events = _arrow([r for r in lake["group_events"] if (lo is None or r["record_ts"].date() >= lo.date())
                         and r["record_ts"].date() <= hi.date()], GROUP_EVENTS)
    return steps.run_step(steps.StepInputs(offsets=_arrow(rows("offsets", "sweep_ts", lo), OFFSETS),
                                           members=_arrow(rows("members", "sweep_ts", lo), MEMBERS),
                                           commits=commits, group_events=events, state=state or {}),
                          settings=SETTINGS, as_of=hi)


def _seen(outs: list[steps.StepOutput], table: str,
          identity: dict[str, tuple[str, ...]]) -> dict[tuple[Any, ...], dict[str, Any]]:
    """What a reader sees of the steps' ``table``: per identity, the latest step's row; none where
    that row withdraws the key (``lagscope.results.current_rows``)."""
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for out in outs:
        for r in out.tables[table].to_pylist():
            r.pop("as_of_ts", None)
            k = tuple(r[c] for c in identity[table])
            if r.pop("withdrawn", None):
                seen.pop(k, None)
            else:
                seen[k] = r
    return seen


def _lake(seed: int) -> tuple[dict[str, list[dict[str, Any]]], bool]:
    rng = random.Random(seed)
    lake: dict[str, list[dict[str, Any]]] = {"offsets": [], "members": [], "commits": []}
    for g in range(3):
        for name, rows in random_group(rng, f"g{g}").items():
            lake[name] += rows
    return lake, seed % 2 == 0


def _differences(whole: list[steps.StepOutput], outs: list[steps.StepOutput],
                 identity: dict[str, tuple[str, ...]] = IDENTITY) -> list[str]:
    """Each row of the tables in ``identity`` that one pass (``whole``) and the steps disagree on."""
    found = []
    for table in identity:
        one, split = _seen(whole, table, identity), _seen(outs, table, identity)
        for k in sorted(set(one) | set(split), key=repr):
            if one.get(k) != split.get(k):
                found.append(f"{table} {k}: one pass {one.get(k)}, steps {split.get(k)}")
    return found


@pytest.mark.parametrize("seed", range(20))
def test_steps_cut_at_any_minute_equal_one_pass(seed: int) -> None:
    lake, with_commits = _lake(seed)
    end = at(MINUTES * 60)
    whole = [_run(lake, None, end, None, with_commits)]
    assert not any(whole[0].tables["anomalies"].column("withdrawn").to_pylist())  # one pass withdraws nothing
    kinds = {r["kind"] for r in whole[0].tables["anomalies"].to_pylist()}
    assert kinds & {"stall", "stop", "starved"}, kinds  # the input has episodes for the cuts to go through
    cuts = [at(60 * m) for m in range(1, MINUTES)]
    for plan in [[c] for c in cuts] + [cuts]:
        outs, state, lo = [], None, None
        for hi in [*plan, end]:
            out = _run(lake, lo, hi, state, with_commits)
            outs.append(out)
            state, lo = out.state, hi
        assert _differences(whole, outs) == [], [c.time().isoformat() for c in plan]


def test_the_inputs_hold_every_kind_of_episode() -> None:
    # the seeds above are not idle: together they hold starved partitions, stalls, stops, and
    # episodes open at a step's end (cut through by a boundary)
    kinds: set[str] = set()
    crossing = 0
    for seed in range(20):
        lake, with_commits = _lake(seed)
        rows = _run(lake, None, at(MINUTES * 60), None, with_commits).tables["anomalies"].to_pylist()
        kinds |= {r["kind"] for r in rows}
        crossing += sum(1 for r in rows if r["kind"] in ("stall", "stop", "starved") and r["end_ts"] is not None
                        and r["start_ts"].minute != r["end_ts"].minute)
    assert {"stall", "stop", "starved"} <= kinds
    assert crossing >= 10
