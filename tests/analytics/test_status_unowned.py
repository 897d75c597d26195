"""lagscope's own STOP counts the time without an owner as well as the time without a commit
(docs/analytics.md, the ``status`` table): a partition is STOP once nobody has owned it for
``stop_after_s`` *and* work has been pending without a commit for ``stop_after_s``; unowned for
less than that, with work pending for ``stall_after_s``, it is STALL (it had an owner recently:
the per-group pass may then judge it starved). Each partition's last-owned time is a running
value carried in the state (``m_owned_t``). Numpy only, no Spark: the partition rule on
:func:`lagscope.analytics.kseries.enrich`'s series, and whole steps
(:func:`lagscope.analytics.step.run_step` over Arrow, as each Spark task runs them).

Thresholds: ``stall_after_s`` 30 s, ``stop_after_s`` 120 s. Sweeps every 5 s for 5 minutes, so the
status rows (each minute's last sweep) are at 55, 115, 175, 235 and 295 s. Every partition stands
still at committed 100 of 1000 from the start (work pending since 0 s).

- ``restart``: owned by m1 until 105 s, nobody from 110 s (a slow single-member group
  restarting), m2 from 200 s;
- ``gone``: owned by m1 until 105 s, nobody after;
- ``never``: nobody ever owns it (unowned since its first sweep).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import numpy as np
import pyarrow as pa
from analytics_builders import at, members_rows, offsets_rows
from test_starved import run as run_starved
from test_starved import slow

from lagscope.analytics import step
from lagscope.analytics.kseries import Series, enrich
from lagscope.analytics.np_status import burrow_entries, minute_rows, partition_status
from lagscope.analytics.status import STARVED_REASON
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.schema import TABLES

STALL_S, STOP_S = 30.0, 120.0
S = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=STALL_S, stop_after_s=STOP_S))
SWEEPS = range(0, 300, 5)
ROWS = (55, 115, 175, 235, 295)


def _owner(case: str, t: float) -> str | None:
    if case == "never" or 105 < t < 200 or (case == "gone" and t > 105):
        return None
    return "m1" if t <= 105 else "m2"


CASES = ("restart", "gone", "never")
#: per case, lagscope's status at each status row (the rule as now defined)
EXPECTED = {
    # pending 55 s, owned: STALL. 115 s: unowned for 10 s (since m1's last sweep at 105 s): STALL.
    # 175 s: pending 175 s ≥ 120 s but unowned for 70 s < 120 s: STALL (it was STOP for counting
    # the time without a commit alone). m2 from 200 s: STALL
    "restart": ["STALL", "STALL", "STALL", "STALL", "STALL"],
    # the same until m2 would have come; at 235 s nobody has owned it for 130 s ≥ 120 s: STOP
    "gone": ["STALL", "STALL", "STALL", "STOP", "STOP"],
    # never owned: unowned since its first sweep (0 s), so STOP from 120 s on, as a group that
    # never had members always was; before that STALL (pending ≥ 30 s, unowned < 120 s)
    "never": ["STALL", "STALL", "STOP", "STOP", "STOP"],
}


def _enriched(cases: tuple[str, ...]) -> Series:
    """The cases' sweeps (one key each, in that order) enriched as the pass enriches them, no
    state rows."""
    rows = [(k, float(t), _owner(c, t)) for k, c in enumerate(cases) for t in SWEEPS]
    n = len(rows)
    key = np.array([r[0] for r in rows], np.int64)
    owned = np.array([r[2] is not None for r in rows])
    ones = np.ones(n, bool)
    kw: dict[str, Any] = {
        "key": key, "is_state": np.zeros(n, bool), "t": np.array([r[1] for r in rows]),
        "committed": np.full(n, 100, np.int64), "committed_ok": ones, "end": np.full(n, 1000, np.int64),
        "end_ok": ones, "log_start": np.zeros(n, np.int64), "log_start_ok": ones,
        "lso": np.full(n, 1000, np.int64), "lso_ok": ones,
        "owner": np.array([{None: 0, "m1": 1, "m2": 2}[r[2]] for r in rows], np.int64), "owned": owned,
        "rec_t": np.full(n, np.nan)}
    # every carried marker the series has (null: no state rows)
    for name in Series.__dataclass_fields__:
        if name.startswith("m_"):
            kw[name] = np.zeros(n, bool) if name.endswith("_ok") else (
                np.zeros(n, np.int64) if name in ("m_max_committed", "m_tenure_owner") else np.full(n, np.nan))
    return enrich(**kw)


def test_the_partition_rule() -> None:
    s = _enriched(CASES)
    rows = minute_rows(s)
    st = partition_status(s, rows, np.full(len(rows), np.nan), burrow_entries(s), n=10, stall_after_s=STALL_S,
                          stop_after_s=STOP_S, warn_lag_s=30.0)
    got = {c: [str(st.status[i]) for i in range(len(rows)) if st.key[i] == k] for k, c in enumerate(CASES)}
    assert [float(t) for t in st.t[st.key == 0]] == list(ROWS)
    assert got == EXPECTED
    reasons = {(CASES[int(st.key[i])], float(st.t[i])): str(st.reason[i]) for i in range(len(rows))}
    # the reasons say how long the partition has been without an owner, and without a commit
    assert reasons[("restart", 175.0)] == "no owner for 70 s and no commit for 175 s with lag 900"
    assert reasons[("never", 55.0)] == "no owner for 55 s and no commit for 55 s with lag 900"
    assert reasons[("gone", 235.0)] == "no owner and no commit for 235 s with lag 900"
    assert reasons[("restart", 235.0)] == "owner assigned but no commit for 235 s with lag 900"


# ---------------------------------------------------------------- whole steps


def _lake(name: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = pa.schema([*TABLES[name].schema, pa.field("cluster", pa.string()), pa.field("date", pa.string())])
    return pa.Table.from_pylist(rows, schema=schema).select(step.READ_COLUMNS[name])


OFFSETS = [r for c in CASES for r in offsets_rows([(t, 100, 1000, 0, _owner(c, t)) for t in SWEEPS], group=c)]
MEMBERS = [r for c in CASES for r in members_rows(
    [(t, "Stable" if _owner(c, t) else "Empty", 1 if t < 200 else 2,
      [(_owner(c, t), None, [0])] if _owner(c, t) else []) for t in SWEEPS], group=c)]


def _step(lo: float | None, hi: float, state: dict[str, pa.Table] | None) -> step.StepOutput:
    def within(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [r for r in rows if (lo is None or r["sweep_ts"] >= at(lo)) and r["sweep_ts"] < at(hi)]

    return step.run_step(step.StepInputs(offsets=_lake("offsets", within(OFFSETS)),
                                         members=_lake("members", within(MEMBERS)), commits=None,
                                         group_events=None, state=state or {}), settings=S, as_of=at(hi))


def _partition_rows(outs: list[step.StepOutput]) -> dict[tuple[str, float], tuple[str, str]]:
    return {(r["group_id"], (r["eval_ts"] - at(0)).total_seconds()): (r["status"], r["reason"])
            for out in outs for r in out.tables["status"].to_pylist() if r["partition"] is not None}


def test_steps_carry_the_last_owned_time() -> None:
    # one pass, and steps cut at every minute: the same status rows. The cut at 120 s falls in
    # the restart: the second step's first rows have no owner, and its row at 175 s is STALL only
    # because the state carries when the partition was last owned (105 s), not its last row's
    # time (115 s, unowned)
    whole = _partition_rows([_step(None, 300, None)])
    assert {c: [whole[(c, float(t))][0] for t in ROWS] for c in CASES} == EXPECTED
    outs, state, lo = [], None, None
    for hi in (60, 120, 180, 240, 300):
        out = _step(lo, hi, state)
        outs.append(out)
        state, lo = out.state, hi
    assert _partition_rows(outs) == whole
    carried = {r["group_id"]: r["m_owned_t"] for r in outs[1].state["series"].to_pylist()}
    assert carried == {"restart": at(105).timestamp(), "gone": at(105).timestamp(), "never": at(0).timestamp()}


def test_a_state_written_before_the_marker_falls_back_to_the_old_rule() -> None:
    # a state without m_owned_t (written before it existed): a partition whose carried row has an
    # owner was owned at that row's time (what the marker would say); one whose carried row has
    # none is of unknown ownership, so the old rule holds for it (STOP after stop_after_s without
    # a commit) until it is owned again
    first = _step(None, 120, None)
    old = {**first.state, "series": first.state["series"].drop_columns(["m_owned_t"])}
    second = _partition_rows([_step(120, 300, old)])
    assert second[("restart", 175.0)][0] == "STOP"  # unknown since when unowned: the old rule
    assert second[("restart", 235.0)][0] == "STALL"  # owned again
    assert second[("gone", 175.0)][0] == "STOP"
    assert second[("never", 175.0)][0] == "STOP"
    early = _step(None, 60, None).state
    owned_at_cut = _partition_rows([_step(60, 300, {**early, "series": early["series"].drop_columns(["m_owned_t"])})])
    assert owned_at_cut[("restart", 175.0)][0] == "STALL"  # the carried row (55 s) had an owner


def test_a_starved_partition_whose_single_owner_restarts() -> None:
    # the docs' case: a slow single-member group (test_starved's m1 draining partitions 0–3 one at
    # a time, 20 s each, stall and stop after 10 s) restarts: nobody owns the partitions from 52 s
    # to 58 s, then m1b. Partition 3 has waited 58 s at minute 0's evaluation, its owner gone 8 s
    # (< 10 s): the partition's own status is STALL, not STOP, and the group pass judges it
    # starved (WARN: it has waited past 5 × stall_after_s)
    offsets, members = slow("restart", 20)
    for r in offsets:
        t = (r["sweep_ts"] - at(0)).total_seconds()
        r["member_id"] = None if 52 <= t <= 58 else ("m1b" if t >= 60 else "m1")
    out = run_starved(offsets, members)
    p3 = {r["eval_ts"]: (r["status"], r["reason"]) for r in out.tables["status"].to_pylist() if r["partition"] == 3}
    assert p3[at(0) + dt.timedelta(seconds=58)] == (
        "WARN", f"{STARVED_REASON}no owner for 8 s and no commit for 58 s with lag 300")
