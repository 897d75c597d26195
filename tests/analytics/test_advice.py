"""The advice rules (lagscope.analytics.advice) on hand-built rebalance windows, anomalies, lag
trends, member sweeps and generation records: each rule's exact row, thin evidence → none, a
group without faults → none; the evidence carried from step to step and its expiry."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lagscope.analytics import advice
from lagscope.analytics.findings import ANOMALY_COLUMNS
from lagscope.config import AnalyticsConfig, load_config
from lagscope.errors import ConfigError
from lagscope.schema import ADVICE, ANOMALIES, LAG_TRENDS, REBALANCES

UTC = dt.UTC
AS_OF = dt.datetime(2026, 1, 10, tzinfo=UTC)
T0 = dt.datetime(2026, 1, 9, 8, 0, tzinfo=UTC)
S = AnalyticsConfig()  # session 45 s, heartbeat 3 s, network 1 s, rebalance timeout 300 s, retention 30 d


def at(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


def mid(client: str, n: int) -> str:
    """A member id as the broker generates it for a classic member: ``<client.id>-<UUID>``."""
    return f"{client}-{n:08x}-0000-4000-8000-000000000000"


def window(start: float, duration: float, cause: str, *, outage: float | None = None, bound: float = 49.0,
           members: int = 2, moved: int = 1, group: str = "g", gone: tuple[str, ...] = (),
           came: tuple[str, ...] = ()) -> dict[str, Any]:
    """A closed rebalance window; ``outage`` (default: the window) = observed_over_bound × bound;
    ``members`` stay (m0, m1, …), the member ids ``gone`` left, those that ``came`` joined."""
    out = duration if outage is None else outage
    stay = [f"m{i}" for i in range(members)]
    return {"cluster": "c", "group_id": group, "start_ts": at(start), "end_ts": at(start + duration),
            "duration_s": duration, "cause": cause, "source": "sweeps", "generation_before": 1,
            "generation_after": 2, "members_before": stay + list(gone),
            "members_after": stay + list(came), "partitions_moved": moved, "bound_s": bound,
            "observed_over_bound": out / bound, "messages_accumulated": 0, "max_processing_gap_s": None,
            "as_of_ts": AS_OF}


def anomaly(kind: str, start: float, magnitude: float, *, end: float | None = None, group: str = "g",
            partition: int | None = 0) -> dict[str, Any]:
    return {"cluster": "c", "group_id": group, "topic": "t" if partition is not None else None,
            "partition": partition, "kind": kind, "start_ts": at(start),
            "end_ts": at(end if end is not None else start), "severity": "warning", "magnitude": magnitude,
            "unit": "x", "detail": "", "key": f"{kind}|c|{group}|t|{partition}|{start}", "as_of_ts": AS_OF}


def table(schema: pa.Schema, rows: list[dict[str, Any]]) -> pa.Table:
    full = pa.schema([*schema, pa.field("cluster", pa.string())])
    return pa.Table.from_pylist(rows, schema=full)


def members(group: str = "g", *, n: int = 2, partitions: int = 4, protocol: str = "range",
            static: bool = False, group_protocol: str = "classic",
            seen: dict[str, str] | None = None) -> pa.Table:
    """One member sweep of ``n`` members (m0…, client.id c0… on host /10.0.0.1) sharing
    ``partitions`` partitions; ``seen``: member id → host of members an earlier sweep saw (their
    client.id the id's, ``<client.id>-<UUID>``)."""
    rows = []
    for i in range(n):
        rows.append({"cluster": "c", "group_id": group, "sweep_ts": at(-60), "group_state": "Stable",
                     "generation": 1, "member_id": f"m{i}", "group_instance_id": f"i{i}" if static else None,
                     "client_id": f"c{i}", "host": "/10.0.0.1",
                     "assignment": [{"topic": "t", "partition": p} for p in range(partitions) if p % n == i],
                     "protocol": protocol, "group_protocol": group_protocol})
    for k, (m, host) in enumerate((seen or {}).items()):
        rows.append({**rows[0], "sweep_ts": at(-120 - k), "member_id": m, "group_instance_id": None,
                     "client_id": m[:-37], "host": host, "assignment": []})
    return pa.Table.from_pylist(rows)


def generations(group: str = "g", *, session_s: float = 45.0, rebalance_s: float = 300.0) -> pa.Table:
    return pa.table({"cluster": ["c"], "group_id": [group], "gen_t": [at(-120).timestamp()],
                     "session_timeout_s": [session_s], "rebalance_timeout_s": [rebalance_s]})


def run(windows: list[dict[str, Any]] = (), anomalies: list[dict[str, Any]] = (),  # type: ignore[assignment]
        trends: list[dict[str, Any]] = (), mem: pa.Table | None = None,  # type: ignore[assignment]
        gens: pa.Table | None = None, carried: advice.AdviceOutputs | None = None,
        as_of: dt.datetime = AS_OF, settings: AnalyticsConfig = S) -> advice.AdviceOutputs:
    an = table(ANOMALIES.schema, list(anomalies)).select([*ANOMALY_COLUMNS, "as_of_ts"])
    return advice.advise(advice.AdviceInputs(
        rebalances=table(REBALANCES.schema, list(windows)), anomalies=an,
        lag_trends=table(LAG_TRENDS.schema, list(trends)), members=mem if mem is not None else members(),
        generations=gens, carried_evidence=carried.evidence if carried else None,
        carried_groups=carried.groups if carried else None), settings, as_of)


def rows(out: advice.AdviceOutputs) -> list[dict[str, Any]]:
    return out.advice.to_pylist()


def only(out: advice.AdviceOutputs, rule: str) -> dict[str, Any]:
    got = [r for r in rows(out) if r["rule"] == rule]
    assert len(got) == 1, rows(out)
    return got[0]


# ------------------------------------------------------------------------------------- rules

def test_crashes_shorter_session_timeout() -> None:
    # three members timed out (45 s session, outage 49 s: session + heartbeat + network), none came
    # back: 10 s sessions would cut each outage by the 35 s saved
    out = run([window(0, 4, "session_timeout", outage=49), window(3600, 4, "session_timeout", outage=49),
               window(7200, 4, "session_timeout", outage=52)], gens=generations())
    got = only(out, "session_timeout_crash")
    assert got["setting"] == "session.timeout.ms"
    assert got["current_value"] == "session.timeout.ms=45000"
    assert got["suggested"] == "session.timeout.ms=10000 with heartbeat.interval.ms ≤ 3000"
    assert got["measure"] == "outage_s"
    assert got["unit"] == "s"
    assert got["current_amount"] == pytest.approx(49.0)
    assert got["expected_amount"] == pytest.approx(14.0)
    assert "outages of ~49 s would shrink to ~14 s" in got["expected_effect"]
    assert got["evidence_count"] == 3
    assert got["evidence_start_ts"] == at(0)
    assert got["evidence_end_ts"] == at(7204)
    # 3 windows: 1.5× the minimum of 2, the session known from the record → medium
    assert got["confidence"] == "medium"
    assert got["cluster"] == "c"
    assert got["as_of_ts"] == AS_OF
    assert got["date"] == "2026-01-09"


def test_crashes_without_a_record_assume_the_default_and_say_so() -> None:
    out = run([window(0, 4, "session_timeout", outage=49), window(600, 4, "session_timeout", outage=49)])
    got = only(out, "session_timeout_crash")
    assert got["current_value"] is None
    assert "assumed" in got["evidence"]
    assert got["confidence"] == "low"  # the minimum, the value assumed


def test_crashes_that_are_restarts_get_static_membership() -> None:
    # two members timed out and each joined again (the same client.id, a new member id) 30 s after
    # the window: restarts, each costing the group two rebalances (4 + 6 s); with static
    # membership a restart does not rebalance, the member's partitions wait for it (away ~79 s:
    # last progress at 4 − 49, back at 34)
    out = run([window(0, 4, "session_timeout", outage=49, gone=(mid("app-1", 1),)),
               window(34, 6, "join", came=(mid("app-1", 2),)),
               window(3600, 4, "session_timeout", outage=49, gone=(mid("app-2", 1),)),
               window(3634, 6, "join", came=(mid("app-2", 2),))], gens=generations())
    got = only(out, "session_timeout_crash")
    assert got["setting"] == "group.instance.id"
    assert got["current_value"] == "none (dynamic members)"
    assert got["suggested"] == "static membership: a group.instance.id per consumer, session.timeout.ms ≥ 119000"
    assert got["measure"] == "group_stop_s"
    assert got["current_amount"] == pytest.approx(10.0)
    assert got["expected_amount"] == 0.0
    assert "waiting ~79 s for it" in got["expected_effect"]
    assert got["evidence_count"] == 2
    assert "2 of them restarts (the same client.id and host back within ~300 s)" in got["evidence"]


def test_crashes_followed_by_other_consumers_joining_are_no_restarts() -> None:
    # the same windows, but who joined after each crash is another consumer: no restart (the
    # definition restart_storm shares), so the session advice
    out = run([window(0, 4, "session_timeout", outage=49, gone=(mid("app-1", 1),)),
               window(34, 6, "join", came=(mid("app-7", 2),)),
               window(3600, 4, "session_timeout", outage=49, gone=(mid("app-2", 1),)),
               window(3634, 6, "join", came=(mid("app-8", 2),))], gens=generations())
    assert only(out, "session_timeout_crash")["setting"] == "session.timeout.ms"


def test_one_crash_is_no_pattern() -> None:
    assert rows(run([window(0, 4, "session_timeout", outage=49)], gens=generations())) == []


def test_thresholds_are_settings(tmp_path: Path) -> None:
    # analytics.advice in the config file: two crashes are a pattern by default, not when 3 are asked for
    crashes = [window(0, 4, "session_timeout", outage=49), window(600, 4, "session_timeout", outage=49)]
    assert only(run(crashes, gens=generations()), "session_timeout_crash")
    cfg = tmp_path / "lagscope.yaml"
    cfg.write_text("analytics:\n  advice:\n    min_evidence: 3\n    short_session_s: 20\n")
    strict = load_config(cfg).analytics
    assert strict.advice.min_evidence == 3
    assert rows(run(crashes, gens=generations(), settings=strict)) == []
    # the suggested session follows the setting too
    three = [*crashes, window(1200, 4, "session_timeout", outage=49)]
    assert only(run(three, gens=generations(), settings=strict), "session_timeout_crash")["suggested"].startswith(
        "session.timeout.ms=20000")
    cfg.write_text("analytics:\n  advice:\n    restart_share: 1.5\n")
    with pytest.raises(ConfigError, match="restart_share"):
        load_config(cfg)


def test_short_session_already_gets_no_session_advice() -> None:
    out = run([window(0, 4, "session_timeout", outage=14), window(600, 4, "session_timeout", outage=14)],
              gens=generations(session_s=10))
    assert [r["rule"] for r in rows(out)] == []


STORM = [anomaly("rebalance_storm", 0, 3, end=124, partition=None)]


def rolling_restart() -> list[dict[str, Any]]:
    """Two consumers restarted in turn: each leaves (LeaveGroup) and is back 10 s later with the
    same client.id under a new member id: 3 + 5 + 4 + 2 s of rebalancing."""
    return [window(0, 3, "leave", gone=(mid("app-2", 1),)), window(10, 5, "join", came=(mid("app-2", 2),)),
            window(60, 4, "leave", gone=(mid("app-3", 1),)), window(70, 2, "join", came=(mid("app-3", 2),))]


def churn() -> list[dict[str, Any]]:
    """Different consumers joining and leaving (scale-out and in): app-2, app-3 and app-4 join,
    app-2 and app-3 leave: 2 + 3 + 2 + 4 + 3 s of rebalancing."""
    return [window(0, 2, "join", came=(mid("app-2", 1),)), window(10, 3, "join", came=(mid("app-3", 1),)),
            window(20, 2, "leave", gone=(mid("app-2", 1),)), window(30, 4, "join", came=(mid("app-4", 1),)),
            window(40, 3, "leave", gone=(mid("app-3", 1),))]


def test_restart_storm_of_restarts_gets_static_membership() -> None:
    out = run(rolling_restart(), STORM)
    got = only(out, "restart_storm")
    assert got["setting"] == "group.instance.id"
    assert got["current_value"] == "none (dynamic members)"
    # an average partition's pause per storm: today every partition stops 3 + 5 + 4 + 2 s; with
    # static membership a restarting member's half of the partitions waits its 10 s away, twice
    assert got["measure"] == "partition_pause_s"
    assert got["current_amount"] == pytest.approx(14.0)
    assert got["expected_amount"] == pytest.approx(2 * 10.0 / 2)
    assert "~10 s per restart" in got["expected_effect"]
    # cooperative-sticky: a quarter of the partitions (1 of 4 moved) through the two leave windows
    # (3 + 4 s) and the two joins' second rounds (a heartbeat each, 3 s assumed): 0.25 × 13 s
    assert "cooperative-sticky would pause only the moved partitions, ~3.25 s" in got["expected_effect"]
    assert got["evidence_count"] == 4
    assert got["evidence"] == ("1 rebalance storm in 1 day with 4 join/leave windows, ~14 s of rebalancing "
                               "per storm (median); 2 of 2 leaves were restarts (the same client.id and host "
                               "back within ~300 s)")
    assert got["confidence"] == "medium"  # 4 windows of the minimum 3, the members known from the sweep


def restarts(away: float, stop: float) -> list[dict[str, Any]]:
    """Two restarts, each ``away`` s between its leave and its return, each window ``stop`` s."""
    return [window(0, stop, "leave", gone=(mid("app-2", 1),)), window(away, stop, "join", came=(mid("app-2", 2),)),
            window(200, stop, "leave", gone=(mid("app-3", 1),)),
            window(200 + away, stop, "join", came=(mid("app-3", 2),))]


STORM_300 = [anomaly("rebalance_storm", 0, 3, end=300, partition=None)]


def test_restarts_slower_than_the_stops_they_cause_get_the_assignor_not_static_membership() -> None:
    # restarts 60 s away, windows of 10 s (slow rejoiners): static membership would make a
    # restarting member's half of the partitions wait 60 s, twice: 60 s per partition against
    # 40 s of stops today; cooperative-sticky pauses a quarter of them through the two leaves
    # (10 s each) and the joins' second rounds (a 3 s heartbeat each): 0.25 × 26 s
    got = only(run(restarts(60, 10), STORM_300), "restart_storm")
    assert got["setting"] == "partition.assignment.strategy"
    assert (got["current_amount"], got["expected_amount"]) == (pytest.approx(40.0), pytest.approx(6.5))
    assert "static membership would not help: a restart's ~60 s away" in got["evidence"]
    assert "2 of 2 leaves were restarts" in got["evidence"]


def test_sub_heartbeat_rebalances_get_no_assignor_advice() -> None:
    # the same restarts with windows of 0.1 s: static membership would lengthen the pause (60 s
    # away), and so would cooperative-sticky: a join's second round lasts about a heartbeat (3 s),
    # thirty times the whole window it replaces. Nothing predicts a gain: no advice
    assert rows(run(restarts(60, 0.1), STORM_300)) == []


def test_no_storm_advice_without_a_predicted_gain() -> None:
    # a cooperative group (only moved partitions pause today) whose restarts take longer than its
    # stops: neither remedy predicts a gain of min_gain; the consumer protocol has no prediction
    got = only(run(restarts(60, 0.1), STORM_300, mem=members(protocol="cooperative-sticky")), "restart_storm")
    assert got["setting"] == "group.protocol"  # not static: it would lengthen the pause
    # an eager group where even one member's share is most of the group (a group of one) gains nothing
    solo = [window(0, 2, "join", members=0, moved=4, came=(mid("app-2", 1),)),
            window(10, 2, "leave", members=0, moved=4, gone=(mid("app-2", 1),)),
            window(20, 2, "join", members=0, moved=4, came=(mid("app-3", 1),))]
    assert rows(run(solo, STORM, mem=members(n=1))) == []


def test_a_one_member_group_restarted_through_empty_gets_no_static_membership() -> None:
    # one consumer restarted five times, each a window through Empty (gone and back in it: the
    # window is its time away), 2, 2, 2, 8 and 10 s: 24 s of stops per storm, and with static
    # membership its partitions (all of them) would wait the same 24 s. The median time away
    # (2 s) × 5 made it look like 10 s and advised static membership; the mean does not
    times = ((0, 2), (20, 2), (40, 2), (60, 8), (90, 10))
    ws = [window(t, d, "leave", members=0, moved=4, gone=(mid("app-1", k),), came=(mid("app-1", k + 1),))
          for k, (t, d) in enumerate(times)]
    assert rows(run(ws, STORM, mem=members(n=1))) == []
    # the same restarts of one member of four: its quarter of the partitions waits 24 s, 6 s on
    # average (the median made it 2.5 s)
    ws = [window(t, d, "leave", members=3, gone=(mid("app-1", k),), came=(mid("app-1", k + 1),))
          for k, (t, d) in enumerate(times)]
    got = only(run(ws, STORM, mem=members(n=4)), "restart_storm")
    assert (got["setting"], got["expected_amount"]) == ("group.instance.id", pytest.approx(24.0 / 4))


def test_a_quick_restart_inside_one_window_is_a_restart() -> None:
    # gone and back within one rebalance (a JoinGroup and a LeaveGroup in one window: cause join)
    ws = [window(0, 3, "join", gone=(mid("app-2", 1),), came=(mid("app-2", 2),)),
          window(40, 3, "join", gone=(mid("app-3", 1),), came=(mid("app-3", 2),)),
          window(80, 3, "join", gone=(mid("app-4", 1),), came=(mid("app-4", 2),))]
    assert only(run(ws, STORM), "restart_storm")["setting"] == "group.instance.id"


def test_restart_storm_of_churn_gets_cooperative_sticky() -> None:
    # different consumers joining and leaving: static membership would not help (a new member
    # still rebalances); on the eager 'range' assignor only the moved partitions should pause
    out = run(churn(), STORM)
    got = only(out, "restart_storm")
    assert got["setting"] == "partition.assignment.strategy"
    assert got["current_value"] == "range"
    assert got["suggested"].startswith("cooperative-sticky")
    assert got["current_amount"] == pytest.approx(14.0)
    # 1 moved of 4 partitions × (the leaves' 2 + 3 s + three joins' second rounds of a 3 s heartbeat)
    assert got["expected_amount"] == pytest.approx(0.25 * 14)
    assert got["evidence"] == ("1 rebalance storm in 1 day with 5 join/leave windows, ~14 s of rebalancing "
                               "per storm (median); churn: 3 distinct members joined, 2 left, 0 of 2 leaves were "
                               "restarts (the same client.id and host back within ~300 s)")


def test_a_group_that_emptied_keeps_the_settings_its_members_had() -> None:
    # the last sweep saw the group empty (every member gone: one row, no member, no assignor):
    # the settings are those of the latest sweep with a member
    mem = members()
    empty = pa.Table.from_pylist([{**mem.to_pylist()[0], "sweep_ts": at(300), "group_state": "Empty",
                                   "member_id": None, "client_id": None, "host": None, "assignment": [],
                                   "protocol": None, "group_protocol": None}], schema=mem.schema)
    out = run(churn(), STORM, mem=pa.concat_tables([mem, empty]))
    got = only(out, "restart_storm")
    assert got["setting"] == "partition.assignment.strategy"
    assert got["current_value"] == "range"
    assert got["expected_amount"] == pytest.approx(3.5)  # the 4 partitions its members had
    row = out.groups.to_pylist()[0]
    assert (row["members"], row["partitions"], row["sweep_ts"]) == (2, 4, at(-60))


def test_a_group_last_seen_rebalancing_as_it_shut_down_keeps_its_stable_size() -> None:
    # the latest sweep with a member caught the group rebalancing while its members stopped: one
    # of its two members left, holding 2 of its 4 partitions. Its size is the latest Stable
    # sweep's: a halved size would double the static-membership estimate (a test run of the
    # simulator's rolling-restart-storm passed on exactly that, 2026-12-02)
    mem = members()
    leaving = pa.Table.from_pylist([{**mem.to_pylist()[0], "sweep_ts": at(300), "group_state": "PreparingRebalance"}],
                                   schema=mem.schema)
    out = run(churn(), STORM, mem=pa.concat_tables([mem, leaving]))
    row = out.groups.to_pylist()[0]
    assert (row["members"], row["partitions"], row["sweep_ts"]) == (2, 4, at(-60))
    # without a Stable sweep, the latest with a member, as before
    alone = run(churn(), STORM, mem=leaving).groups.to_pylist()[0]
    assert (alone["members"], alone["partitions"], alone["sweep_ts"]) == (1, 2, at(300))


def test_the_stable_pick_carries_across_steps_as_one_pass() -> None:
    mem = members()
    rebalancing = [{**r, "group_state": "PreparingRebalance"} for r in mem.to_pylist()]
    one = pa.Table.from_pylist([{**rebalancing[0], "sweep_ts": at(100)}], schema=mem.schema)
    two = pa.Table.from_pylist([{**r, "sweep_ts": at(200)} for r in rebalancing], schema=mem.schema)
    stable_two = pa.Table.from_pylist([{**r, "sweep_ts": at(150)} for r in mem.to_pylist()], schema=mem.schema)
    for first, second in ((one, two), (stable_two, two), (one, stable_two)):
        batch = run(churn(), STORM, mem=pa.concat_tables([first, second])).groups.to_pylist()
        carried = run(churn(), STORM, mem=first)
        steps = run(churn(), STORM, mem=second, carried=carried).groups.to_pylist()
        assert steps == batch
    # no Stable sweep in either step: the latest with a member (two members at +200), not the
    # first step's pick as if it were Stable; a Stable one carried beats a later rebalancing one
    assert run(churn(), STORM, mem=two, carried=run(churn(), STORM, mem=one)).groups.to_pylist()[0]["members"] == 2
    got = run(churn(), STORM, mem=two, carried=run(churn(), STORM, mem=stable_two)).groups.to_pylist()[0]
    assert (got["members"], got["sweep_ts"], got["stable"]) == (2, at(150), True)


def test_settings_carried_from_before_the_stable_flag_count_as_stable() -> None:
    old = run(churn(), STORM, mem=members()).groups.drop_columns(["stable"])
    mem = members()
    later = pa.Table.from_pylist([{**mem.to_pylist()[0], "sweep_ts": at(300), "group_state": "PreparingRebalance"}],
                                 schema=mem.schema)
    got = advice.group_settings(later, None, old).to_pylist()[0]
    assert (got["members"], got["sweep_ts"], got["stable"]) == (2, at(-60), True)


def test_a_group_last_seen_mid_rebalance_keeps_its_assignor() -> None:
    # the latest sweep caught the churning group rebalancing (members, no protocol chosen yet: the
    # broker names none before the generation completes): the assignor is the latest one named
    mem = members()
    mid_rebalance = pa.Table.from_pylist([{**r, "sweep_ts": at(300), "group_state": "PreparingRebalance",
                                           "protocol": "", "assignment": []} for r in mem.to_pylist()],
                                         schema=mem.schema)
    got = only(run(churn(), STORM, mem=pa.concat_tables([mem, mid_rebalance])), "restart_storm")
    assert got["setting"] == "partition.assignment.strategy"
    assert got["current_value"] == "range"


def test_churn_on_a_cooperative_group_gets_the_consumer_protocol() -> None:
    got = only(run(churn(), STORM, mem=members(protocol="cooperative-sticky")), "restart_storm")
    assert got["setting"] == "group.protocol"
    assert got["current_value"] == "classic"


def test_a_storm_mostly_of_churn_with_one_restart_is_churn() -> None:
    # app-2 restarts (its leave and return: 2 windows), app-3, app-4 and app-5 come and app-3
    # goes: 2 of 6 windows a restart's, below the share of a half → the churn advice
    ws = [window(0, 3, "leave", gone=(mid("app-2", 1),)), window(5, 2, "join", came=(mid("app-2", 2),)),
          window(20, 2, "join", came=(mid("app-3", 1),)), window(30, 2, "join", came=(mid("app-4", 1),)),
          window(40, 2, "leave", gone=(mid("app-3", 1),)), window(50, 2, "join", came=(mid("app-5", 1),))]
    got = only(run(ws, STORM), "restart_storm")
    assert got["setting"] == "partition.assignment.strategy"
    assert "churn: 4 distinct members joined, 2 left, 1 of 2 leaves were restarts" in got["evidence"]


def test_the_same_client_id_on_another_host_is_another_consumer() -> None:
    # autoscaled pods sharing one client.id: the members rows tell their hosts apart; a member
    # back on its own host is a restart, a new pod with the same client.id is churn
    a1, a2, a3, a4 = mid("app", 1), mid("app", 2), mid("app", 3), mid("app", 4)
    ws = [window(0, 3, "leave", gone=(a1,)), window(10, 5, "join", came=(a2,)),
          window(60, 4, "leave", gone=(a3,)), window(70, 2, "join", came=(a4,))]
    other = members(seen={a1: "/10.0.0.5", a2: "/10.0.0.6", a3: "/10.0.0.7", a4: "/10.0.0.8"})
    assert only(run(ws, STORM, mem=other), "restart_storm")["setting"] == "partition.assignment.strategy"
    same = members(seen={a1: "/10.0.0.5", a2: "/10.0.0.5", a3: "/10.0.0.7", a4: "/10.0.0.7"})
    assert only(run(ws, STORM, mem=same), "restart_storm")["setting"] == "group.instance.id"


def test_a_kip848_group_gets_no_storm_advice() -> None:
    for ws in (rolling_restart(), churn()):
        assert rows(run(ws, STORM, mem=members(group_protocol="consumer"))) == []


def test_evidence_carried_without_identities_is_no_restart() -> None:
    # a state written before the windows kept the identities: its windows load and count, but
    # their members are unknown: neither a leave nor a restart (only the fresh one is)
    first = run(rolling_restart()[:2], gens=generations())
    old = first.evidence.drop_columns(["joined", "left"])
    carried = advice.AdviceOutputs(advice=first.advice, evidence=old, groups=first.groups)
    second = run(rolling_restart()[2:], STORM, carried=carried)
    got = only(second, "restart_storm")
    assert got["evidence_count"] == 4
    assert "1 of 1 leaves were restarts" in got["evidence"]
    assert second.evidence.schema == advice.EVIDENCE_SCHEMA


def test_restart_storm_static_group_on_eager_assignor_gets_cooperative() -> None:
    # a static group's storm (here: a rolling restart whose restarts still rebalanced, beyond the
    # session timeout) gets the assignor
    out = run(rolling_restart(), STORM, mem=members(static=True))
    got = only(out, "restart_storm")
    assert got["setting"] == "partition.assignment.strategy"
    assert got["current_value"] == "range"
    # 1 moved of 4 partitions × (the leaves' 3 + 4 s + two joins' second rounds of a 3 s heartbeat)
    assert got["expected_amount"] == pytest.approx(0.25 * 13)


def test_windows_without_a_storm_are_no_restart_storm() -> None:
    ws = [window(0, 3, "leave"), window(60, 5, "join"), window(120, 4, "leave")]
    assert [r["rule"] for r in rows(run(ws))] == []


def test_max_poll_interval() -> None:
    # two members removed after 310 and 330 s of silence under a 300 s interval; a commit gap of
    # 280 s shows batches near the limit: 1.5 × 330 s → 495 s → 9 whole minutes. The first came
    # back (a 6 s join window after its 8 s removal: 14 s of rebalancing), the second did not
    # (8 s); the join at 9000 s is long after the second removal's window, beyond 300 s
    out = run([window(0, 8, "max_poll_interval", outage=310, bound=300), window(100, 6, "join"),
               window(5000, 8, "max_poll_interval", outage=330, bound=300), window(9000, 4, "join")],
              [anomaly("commit_gap", 3000, 280)], gens=generations())
    got = only(out, "max_poll_interval")
    assert got["current_value"] == "max.poll.interval.ms=300000"
    assert got["suggested"] == "max.poll.interval.ms=540000, or max.poll.records halved"
    # the removals' rebalances (removal + rejoin) are what a longer interval avoids: median of
    # 14 and 8 s; the silence itself (the member's batch) stays, so it is not the measure
    assert got["measure"] == "rebalance_s"
    assert got["current_amount"] == pytest.approx(11.0)
    assert got["expected_amount"] == 0.0
    assert "still wait for its batch" in got["expected_effect"]
    assert got["evidence_count"] == 2
    assert got["confidence"] == "medium"
    assert "commit gaps up to ~280 s" in got["evidence"]


def test_eager_large_group() -> None:
    # 6 members on 'range' (eager), 24 partitions; two 20 s windows moving 4 partitions each:
    # cooperative would pause an average partition 20 × 4/24 ≈ 3.3 s
    ws = [window(0, 20, "join", members=6, moved=4), window(9000, 20, "leave", members=6, moved=4)]
    out = run(ws, mem=members(n=6, partitions=24))
    got = only(out, "eager_large_group")
    assert got["current_value"] == "range"
    assert got["current_amount"] == pytest.approx(20.0)
    assert got["expected_amount"] == pytest.approx(20 * 4 / 24, abs=1e-3)
    assert "from ~20 s to ~3 s" in got["expected_effect"]


def test_eager_large_group_predicts_a_sticky_assignors_moves() -> None:
    # range moved 12 of 24 partitions per window (it is not sticky); cooperative-sticky would move
    # about one member's share, 4 of 24 in a group of 6
    ws = [window(0, 20, "join", members=6, moved=12), window(9000, 20, "leave", members=6, moved=12)]
    got = only(run(ws, mem=members(n=6, partitions=24)), "eager_large_group")
    assert got["expected_amount"] == pytest.approx(20 / 6, abs=1e-3)


@pytest.mark.parametrize(("protocol", "members_n", "duration"), [
    ("cooperative-sticky", 6, 20.0),  # already incremental
    ("range", 2, 20.0),               # a small group: a stop of every partition is of few
    ("range", 6, 2.0),                # short windows
])
def test_no_eager_advice(protocol: str, members_n: int, duration: float) -> None:
    ws = [window(0, duration, "join", members=members_n, moved=4),
          window(9000, duration, "leave", members=members_n, moved=4)]
    out = run(ws, mem=members(n=members_n, partitions=24, protocol=protocol))
    assert [r["rule"] for r in rows(out)] == []


def test_rewind_after_rebalance() -> None:
    # rewinds 10 s after two windows (500 and 700 messages processed twice); one unrelated rewind
    ws = [window(0, 5, "join"), window(3600, 5, "leave")]
    an = [anomaly("rewind", 15, 500), anomaly("rewind", 3615, 700), anomaly("rewind", 9000, 50)]
    got = only(run(ws, an), "rewind_after_rebalance")
    assert got["current_amount"] == pytest.approx(600.0)
    assert got["unit"] == "messages"
    assert got["evidence_count"] == 2
    assert got["evidence"] == "2 rewinds right after 2 rebalances in 1 day: 1,200 messages processed twice"


def test_one_rewind_is_no_pattern() -> None:
    assert rows(run([window(0, 5, "join")], [anomaly("rewind", 15, 500)])) == []


def test_rewinds_of_several_partitions_after_one_rebalance_are_no_pattern() -> None:
    # the accuracy run's demo (seed 2): an operator's rewind of two partitions came 40 s after a
    # rebalance; one rebalance followed by rewinds is one occurrence, however many partitions
    one = [window(0, 5, "join")]
    both = [anomaly("rewind", 45, 200, partition=0), anomaly("rewind", 45, 200, partition=1)]
    assert rows(run(one, both)) == []
    # the same after a second rebalance too: a pattern
    got = only(run([*one, window(3600, 5, "leave")], [*both, anomaly("rewind", 3620, 100)]), "rewind_after_rebalance")
    assert got["evidence"] == "3 rewinds right after 2 rebalances in 1 day: 500 messages processed twice"


def test_retention_loss_alone_suffices() -> None:
    # a proven retention loss (critical) is unambiguous: one is enough (low confidence:
    # retention.ms is unknown)
    got = only(run([], [{**anomaly("retention_loss", 100, 1000), "severity": "critical"}]), "retention_vs_catchup")
    assert got["evidence_count"] == 1
    assert got["confidence"] == "low"
    assert got["current_amount"] == 0.0
    assert "1,000 messages" in got["evidence"]


def test_a_retention_loss_not_proven_is_no_evidence() -> None:
    # a warning (its consumer may hold the deleted records): no advice from it alone
    assert "retention_vs_catchup" not in {a["rule"] for a in rows(run([], [anomaly("retention_loss", 100, 1000)]))}


def trend(minute: int, *, eta: float | None = None, headroom: float | None = None) -> list[dict[str, Any]]:
    w = at(minute * 60)
    return [{"cluster": "c", "group_id": "g", "window_start": w, "topic": None, "partition": None,
             "catchup_eta_s": eta},
            {"cluster": "c", "group_id": "g", "window_start": w, "topic": "t", "partition": 0,
             "retention_headroom_s": headroom}]


def test_retention_headroom_below_catchup() -> None:
    # two minutes with 1 h of headroom while catching up takes 2 h: retention for 4 h of headroom
    out = run([], [], trend(0, eta=7200, headroom=3600) + trend(1, eta=7000, headroom=3700))
    got = only(out, "retention_vs_catchup")
    assert got["evidence_count"] == 2
    assert got["current_amount"] == pytest.approx(3600.0)
    assert got["expected_amount"] == pytest.approx(14400.0)
    assert got["suggested"].startswith("retention.ms ≥ 14400000")


def test_one_minute_at_risk_is_no_pattern() -> None:
    assert rows(run([], [], trend(0, eta=7200, headroom=3600) + trend(1, eta=100, headroom=3600))) == []


def test_a_group_without_faults_gets_nothing() -> None:
    # joins of a growing group, caught up: no fault, no advice
    out = run([window(0, 2, "join"), window(600, 2, "join")], [], trend(0, eta=None, headroom=None),
              gens=generations())
    assert rows(out) == []


# ------------------------------------------------------------------------------- the state

def test_evidence_carries_across_steps_and_expires() -> None:
    first = run([window(0, 4, "session_timeout", outage=49)], gens=generations())
    assert rows(first) == []
    # the next step sees the second crash; the settings come from the carried state
    second = run([window(3600, 4, "session_timeout", outage=49)], mem=members().slice(0, 0), carried=first)
    got = only(second, "session_timeout_crash")
    assert got["evidence_count"] == 2
    assert got["current_value"] == "session.timeout.ms=45000"
    # the same window written again by a later step is one piece of evidence
    again = run([window(3600, 4, "session_timeout", outage=49)], carried=second)
    assert only(again, "session_timeout_crash")["evidence_count"] == 2
    # 31 days later both have left the retention window: no advice, no evidence
    late = run([], carried=again, as_of=AS_OF + dt.timedelta(days=31))
    assert rows(late) == []
    assert late.evidence.num_rows == 0


def test_risk_minutes_add_up_across_steps() -> None:
    first = run([], [], trend(0, eta=7200, headroom=3600))
    assert rows(first) == []
    second = run([], [], trend(1, eta=7000, headroom=3700), carried=first)
    assert only(second, "retention_vs_catchup")["evidence_count"] == 2


def test_the_table_matches_the_schema() -> None:
    out = run([window(0, 4, "session_timeout", outage=49), window(600, 4, "session_timeout", outage=49)])
    names = [f.name for f in ADVICE.schema]
    assert out.advice.column_names == ["cluster", *names, "date"]
    for f in ADVICE.schema:
        assert out.advice.schema.field(f.name).type == f.type


def test_a_withdrawn_commit_gap_replaces_its_evidence_and_no_rule_reads_it() -> None:
    # two removals and a 600 s commit gap (the batch the interval must fit: 1.5 × 600 s → 15
    # minutes); a later step withdraws the gap (its row: end_ts set, withdrawn): the carried gap
    # is replaced, the rules no longer read it (1.5 × 330 s → 9 minutes); reported again, it counts
    removals = [window(0, 8, "max_poll_interval", outage=310, bound=300),
                window(5000, 8, "max_poll_interval", outage=330, bound=300)]
    gap = anomaly("commit_gap", 3000, 600, end=None)
    first = run(removals, [gap], gens=generations())  # no withdrawn column: null is false
    assert only(first, "max_poll_interval")["suggested"] == "max.poll.interval.ms=900000, or max.poll.records halved"
    tomb = pa.Table.from_pylist([{**gap, "end_ts": at(3600), "detail": "withdrawn: test", "withdrawn": True}])
    second = advice.advise(advice.AdviceInputs(
        rebalances=table(REBALANCES.schema, []), anomalies=tomb, lag_trends=table(LAG_TRENDS.schema, []),
        members=members(), generations=None, carried_evidence=first.evidence, carried_groups=first.groups), S, AS_OF)
    got = only(second, "max_poll_interval")
    assert got["suggested"] == "max.poll.interval.ms=540000, or max.poll.records halved"
    assert "commit gaps" not in got["evidence"]
    assert [r["kind"] for r in second.evidence.to_pylist() if r["key"] == gap["key"]] == ["withdrawn"]
    third = run([], [gap], carried=second)
    assert only(third, "max_poll_interval")["suggested"] == "max.poll.interval.ms=900000, or max.poll.records halved"
