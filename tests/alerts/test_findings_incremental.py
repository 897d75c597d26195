"""The alerts' long-lived reader (:class:`lagscope.alerts.findings.FindingsReader`) reads only the
result files new since its last evaluation, and its findings equal a whole read's
(:func:`findings_from_results`) after every step: full, provisional, a batch that replaces a day,
a day that retention removed."""

from __future__ import annotations

import datetime as dt
import random
import shutil
from pathlib import Path
from typing import Any

from helpers.results_steps import publish_batch_rows, publish_provisional_step, publish_step

from lagscope.alerts.findings import Finding, FindingsReader, findings_from_results

T0 = dt.datetime(2026, 3, 1, 23, 50, tzinfo=dt.UTC)  # the steps cross midnight: two date folders
MIN = dt.timedelta(minutes=1)
S = dt.timedelta(seconds=1)
GROUPS = ("g1", "g2", "g3")


def _status(group: str, ts: dt.datetime, status: str, partition: int | None = None) -> dict[str, Any]:
    return {"eval_ts": ts, "group_id": group, "topic": None if partition is None else "t", "partition": partition,
            "status": status, "burrow_status": status, "reason": "", "lag": 0, "lag_seconds": 0.0}


def _anomaly(group: str, start: dt.datetime, end: dt.datetime | None, as_of: dt.datetime,
             severity: str = "critical") -> dict[str, Any]:
    return {"group_id": group, "topic": "t", "partition": 0, "kind": "stall", "start_ts": start, "end_ts": end,
            "severity": severity, "magnitude": 1.0, "unit": "s", "detail": "",
            "key": f"stall|prod|{group}|t|0|{start.isoformat()}", "as_of_ts": as_of}


def _rebalance(group: str, start: dt.datetime, end: dt.datetime | None, as_of: dt.datetime) -> dict[str, Any]:
    return {"group_id": group, "start_ts": start, "end_ts": end, "cause": "join", "duration_s":
            None if end is None else (end - start).total_seconds(), "bound_s": 10.0, "as_of_ts": as_of}


def _view(found: list[Finding]) -> list[str]:
    return sorted(map(repr, found))


def _step_rows(rng: random.Random, start: dt.datetime, until: dt.datetime,
               open_: dict[str, dt.datetime]) -> dict[str, list[dict[str, Any]]]:
    """One step's rows: a group-level (and a partition) status per group, anomalies that open, stay
    open (written again) or close, a rebalance window now and then."""
    rows: dict[str, list[dict[str, Any]]] = {"status": [], "anomalies": [], "rebalances": []}
    for g in GROUPS:
        rows["status"].append(_status(g, until - S, rng.choice(["OK", "WARN", "STALL"])))
        rows["status"].append(_status(g, until - S, "OK", partition=0))
        if g in open_:
            end = until - 2 * S if rng.random() < 0.4 else None
            rows["anomalies"].append(_anomaly(g, open_[g], end, until))
            if end is not None:
                del open_[g]
        elif rng.random() < 0.5:
            open_[g] = start + 5 * S
            rows["anomalies"].append(_anomaly(g, open_[g], None, until, rng.choice(["warning", "critical"])))
        if rng.random() < 0.3:
            rows["rebalances"].append(_rebalance(g, start + 3 * S, start + 9 * S, until))
    return rows


def test_the_reader_reads_only_new_files_and_finds_what_a_whole_read_finds(tmp_path: Path) -> None:
    rng = random.Random(26)
    reader = FindingsReader(tmp_path)
    open_: dict[str, dt.datetime] = {}
    publish_step(tmp_path, "prod", T0 - MIN, T0, {"status": [_status("g1", T0 - S, "OK")]})
    assert reader.findings(T0) == findings_from_results(tmp_path, T0) == []
    assert reader.files_read == 1
    w = T0
    states = set()
    for i in range(14):
        now = w + MIN
        if i % 3 == 2:  # a provisional step from the watermark, then the full step over its minute
            pre = publish_provisional_step(tmp_path, "prod", w, w + 30 * S, _step_rows(rng, w, w + 30 * S,
                                                                                        dict(open_)))
            got = reader.findings(now)
            assert _view(got) == _view(findings_from_results(tmp_path, now))
            # the provisional step's anomalies and windows, nothing else (status: the full steps' only)
            assert reader.files_read == pre["anomalies"] + pre.get("rebalances", 0)
        written = publish_step(tmp_path, "prod", w, w + MIN, _step_rows(rng, w, w + MIN, open_))
        got = reader.findings(now)
        assert _view(got) == _view(findings_from_results(tmp_path, now))
        # only the step's files were read (of the tables the alerts read)
        assert reader.files_read == sum(written.values()), (i, written)
        states |= {(f.source, f.state) for f in got}
        # nothing new: nothing read, the same findings
        assert _view(reader.findings(now)) == _view(got)
        assert reader.files_read == 0
        w += MIN
    # the sequence had something of each: anomalies firing and resolved, rebalances, group statuses
    assert {("anomalies", "firing"), ("anomalies", "resolved"), ("rebalances", "resolved"),
            ("status", "firing")} <= states

    # a batch replaces the second day: that folder is read again whole, the findings follow
    day = w.date()
    publish_batch_rows(tmp_path, "prod", day, day, {"status": [_status("g2", w - S, "STOP")],
                                                    "anomalies": [_anomaly("g3", w - 30 * S, None, w)]})
    got = reader.findings(w)
    assert _view(got) == _view(findings_from_results(tmp_path, w))
    assert reader.files_read > 0
    assert [f.key for f in got if f.source == "status" and f.group == "g2"] == ["status|prod|g2|STOP"]

    # retention removes the first day: what it held is forgotten
    for table in ("anomalies", "rebalances", "status"):
        shutil.rmtree(tmp_path / table / "cluster=prod" / f"date={T0.date().isoformat()}", ignore_errors=True)
    assert _view(reader.findings(w)) == _view(findings_from_results(tmp_path, w))
    assert reader.files_read == 0


def test_a_withdrawn_anomaly_is_no_finding_until_a_later_step_reports_it_again(tmp_path: Path) -> None:
    # step 1 publishes g1's stall open (withdrawn null: not withdrawn); a provisional step
    # withdraws it, then the full step over its range; a later step reports it again
    reader = FindingsReader(tmp_path)
    start = T0 - 30 * S
    stall = _anomaly("g1", start, None, T0)
    gone = {**stall, "end_ts": T0 - 5 * S, "detail": "withdrawn: a rebalance outage explains it", "withdrawn": True}

    def view(now: dt.datetime) -> list[tuple[str, str]]:
        got = reader.findings(now)
        assert _view(got) == _view(findings_from_results(tmp_path, now))
        return [(f.key, f.state) for f in got]

    publish_step(tmp_path, "prod", T0 - MIN, T0, {"anomalies": [stall]})
    assert view(T0) == [(stall["key"], "firing")]
    publish_provisional_step(tmp_path, "prod", T0, T0 + 30 * S, {"anomalies": [{**gone, "as_of_ts": T0 + 30 * S}]})
    assert view(T0 + 30 * S) == []
    publish_step(tmp_path, "prod", T0, T0 + MIN, {"anomalies": [{**gone, "as_of_ts": T0 + MIN}]})
    assert view(T0 + MIN) == []
    assert reader.files_read == 1  # the withdrawn row is kept: the open one read before stays outranked
    publish_step(tmp_path, "prod", T0 + MIN, T0 + 2 * MIN, {"anomalies": [{**stall, "as_of_ts": T0 + 2 * MIN,
                                                                            "withdrawn": False}]})
    assert view(T0 + 2 * MIN) == [(stall["key"], "firing")]


def test_a_reader_that_forgets_ended_findings_queues_what_one_that_keeps_them_queues(tmp_path: Path) -> None:
    # `lagscope run` and `alerts serve` hold an ended anomaly or window only for the lookback: past it,
    # it can cause no notification, so forgetting it once its evaluation is queued changes nothing
    # that is sent, only what is kept
    from lagscope.alerts import Outbox, enqueue_findings
    from lagscope.config import AlertsConfig

    config = AlertsConfig.model_validate({"lookback_s": 300, "routes": [{"name": "r", "url": "http://127.0.0.1:9/h"}]})
    hold = dt.timedelta(seconds=config.lookback_s)
    keeping, forgetting = FindingsReader(tmp_path), FindingsReader(tmp_path, hold_ended_s=config.lookback_s)
    rng = random.Random(28)
    open_: dict[str, dt.datetime] = {}
    left_out: set[str] = set()
    w, before = T0, T0
    with Outbox(tmp_path / "a.sqlite") as a, Outbox(tmp_path / "b.sqlite") as b:
        for _ in range(40):
            now = w + MIN
            publish_step(tmp_path, "prod", w, now, _step_rows(rng, w, now, open_))
            kept, got = keeping.findings(now), forgetting.findings(now)
            assert _view(kept) == _view(findings_from_results(tmp_path, now))
            # what it leaves out: findings that had ended more than the hold before its last evaluation
            gone = [f for f in kept if f not in got]
            assert all(f.ends_at is not None and f.ends_at < before - hold for f in gone), gone
            assert _view([f for f in kept if f not in gone]) == _view(got)
            left_out |= {f.key for f in gone}
            for box, found in ((a, kept), (b, got)):
                enqueue_findings(box, config, found, now, app_url="http://app")
            held = forgetting.rows_kept
            assert _view(forgetting.findings(now)) == _view(got)  # evaluated again, not yet queued:
            assert forgetting.rows_kept == held  # nothing forgotten
            forgetting.forget_sent()
            assert [(e["idempotency_key"], e["state"]) for e in a.entries()] == [
                (e["idempotency_key"], e["state"]) for e in b.entries()]
            with a.transaction() as da, b.transaction() as db:
                assert {k: (s.state, s.episode) for k, s in Outbox.states_in(da).items()} == {
                    k: (s.state, s.episode) for k, s in Outbox.states_in(db).items()}
            # kept: per folder a status row per group, the open events and those ended within the hold
            # (at most one anomaly and one window per group and step)
            assert forgetting.rows_kept <= 2 * len(GROUPS) + len(GROUPS) + 2 * len(GROUPS) * (hold // MIN + 2)
            before, w = now, now
    assert len(left_out) > 40
    assert keeping.rows_kept > 4 * forgetting.rows_kept, (keeping.rows_kept, forgetting.rows_kept)


def test_the_status_of_a_group_gone_for_the_horizon_is_no_finding(tmp_path: Path) -> None:
    # `gone` is deleted while STOP: its status rows stop while g1's go on (across midnight); its status
    # alert resolves once its last row is more than the horizon older than its cluster's newest, rather
    # than firing until retention removes its day
    horizon = 600.0
    reader = FindingsReader(tmp_path, gone_after_s=horizon)
    publish_step(tmp_path, "prod", T0 - MIN, T0, {"status": [_status("g1", T0 - S, "STOP"),
                                                           _status("gone", T0 - S, "STOP")]})
    for i in range(1, 14):
        now = T0 + i * MIN
        publish_step(tmp_path, "prod", now - MIN, now, {"status": [_status("g1", now - S, "STOP")]})
        got = reader.findings(now)
        assert _view(got) == _view(FindingsReader(tmp_path, gone_after_s=horizon).findings(now))
        assert sorted(f.group for f in got) == (["g1", "gone"] if i * 60 <= horizon else ["g1"]), i
