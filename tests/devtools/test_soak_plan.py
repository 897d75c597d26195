"""The soak's fault schedule (benchmarks/soak.py ``plan``), without running anything."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from pathlib import Path

import pytest
import yaml
from helpers.benchmarks import load_benchmark

soak = load_benchmark("soak")


def test_the_schedule_has_every_fault_once_and_the_scaled_kills_and_is_the_seeds() -> None:
    opts = soak.SoakOptions(Path("/nowhere"), minutes=30.0, seed=7)
    lane, receiver = soak.plan(opts)
    kinds = [p.kind for p in lane]
    assert kinds.count("kill") == 10
    assert {k for k in kinds if k != "kill"} == {"broker", "bad_files", "disk_full", "engine"}
    assert receiver is not None
    assert receiver.kind == "receiver"
    assert receiver.duration_s == 300.0
    # the first fault after the warm-up (a first step done), the receiver back before the run ends
    assert lane[0].at_s >= opts.analytics_interval_s + 20.0
    assert receiver.at_s + receiver.duration_s <= opts.minutes * 60.0
    again, _ = soak.plan(soak.SoakOptions(Path("/nowhere"), minutes=30.0, seed=7))
    assert [(p.kind, p.at_s) for p in again] == [(p.kind, p.at_s) for p in lane]
    other, _ = soak.plan(soak.SoakOptions(Path("/nowhere"), minutes=30.0, seed=8))
    assert [(p.kind, p.at_s) for p in other] != [(p.kind, p.at_s) for p in lane]


def test_without_faults_nothing_is_planned() -> None:
    lane, receiver = soak.plan(soak.SoakOptions(Path("/nowhere"), minutes=30.0, faults=False))
    assert lane == []
    assert receiver is None


def test_a_run_too_short_for_its_faults_is_refused_with_what_it_needs() -> None:
    import pytest

    with pytest.raises(SystemExit, match="cannot hold"):
        soak.plan(soak.SoakOptions(Path("/nowhere"), minutes=2.0))


def test_the_load_over_the_run_says_how_long_it_was_not_quiet() -> None:
    samples = [(0.0, 1.0), (2.0, 3.0), (4.0, 3.5), (6.0, 2.0), (8.0, 1.0)]
    got = soak.load_summary(samples)
    assert got["max"] == 3.5
    assert got["mean"] == 2.1
    assert got["above_quiet_s"] == 4.0  # the samples at 2 s and 4 s, each until the next
    assert soak.load_summary([]) == {}
    assert "not quiet" in soak._load_line(got)
    assert "not quiet" not in soak._load_line(soak.load_summary([(0.0, 1.0), (2.0, 2.4)]))


def test_the_memory_shape_is_the_mean_of_each_five_minutes() -> None:
    samples = [(100.0 + t, 200.0 + t / 60.0, 500.0) for t in range(0, 900, 2)]
    got = soak._means_by(samples, 100.0, 300.0, 1)
    assert len(got) == 3
    assert got[0] < got[1] < got[2]
    assert abs(got[2] - got[1] - 5.0) < 0.1  # 1 MB a minute


def test_steady_stretches_one_scenario_over_the_run_with_the_same_groups_and_topics() -> None:
    from lagscope.devtools.sim.runner import load_scenario

    demo = load_scenario("demo")
    sc = soak.steady_scenario("demo", soak.SoakOptions(Path("/nowhere"), minutes=25.0, steady=True, faults=False))
    assert sc.duration == 25 * 60 + 120  # the run and its drain
    assert [t.name for t in sc.topics] == [t.name for t in demo.topics]
    assert [g.name for g in sc.groups] == [g.name for g in demo.groups]
    assert [p.rate for p in sc.producers] == [p.rate for p in demo.producers]
    # the simulator's bound: an hour at most
    assert soak.steady_scenario("demo", soak.SoakOptions(Path("/nowhere"), minutes=120.0)).duration == 3600


@pytest.mark.parametrize("forget", [None, 900.0])
def test_the_run_config_forgets_partitions_after_the_chosen_silence(forget: float | None) -> None:
    from lagscope.config import Settings

    s = soak.Soak(soak.SoakOptions(Path("/nowhere"), faults=False, forget_after_s=forget))
    cfg = Settings.model_validate(s._settings("127.0.0.1:9092", "http://127.0.0.1:1", 9999))
    assert cfg.analytics.rules.forget_after_s == (3600.0 if forget is None else forget)
    assert cfg.analytics.rules.stall_after_s == 8.0  # the demo's rules kept


def test_memtrace_summarises_what_grew_per_hour() -> None:
    memtrace = load_benchmark("memtrace")
    assert memtrace.child_kind("/usr/lib/jvm/bin/java -cp spark org.apache.spark.deploy.SparkSubmit") == "jvm"
    assert memtrace.child_kind("/work/.venv/bin/python -m pyspark.daemon") == "pyspark_worker"
    assert memtrace.child_kind("/bin/sh -c true") == "other"
    assert memtrace.fit_mb_per_h([(0.0, 100.0), (1800.0, 110.0), (3600.0, 120.0)]) == 20.0
    assert memtrace.fit_mb_per_h([(0.0, 100.0), (60.0, 100.0)]) is None
    samples = [
        {"t": 1000.0, "age_s": 240.0, "traced_mb": 50.0},  # the baseline: no "grown" yet
        {"t": 1900.0, "age_s": 1140.0, "traced_mb": 52.0, "baseline_t": 1000.0,
         "grown": [{"where": "a.py:1", "mb": 3.0, "blocks": 10, "d_mb": 1.0, "d_blocks": 5}]},
        {"t": 2800.0, "age_s": 2040.0, "traced_mb": 54.0, "baseline_t": 1000.0,
         "grown": [{"where": "a.py:1", "mb": 4.0, "blocks": 20, "d_mb": 2.0, "d_blocks": 15},
                   {"where": "b.py:7", "mb": 1.0, "blocks": 1, "d_mb": -0.5, "d_blocks": -1},
                   {"where": "c.py:3", "mb": 9.0, "blocks": 90, "d_mb": 3.0, "d_blocks": 30}]},
    ]
    table = memtrace.growth_table(samples)
    # the last sample's growth since the baseline, largest first, per hour over the 1800 s between them
    assert [(r["where"], r["mb_per_h"]) for r in table] == [("c.py:3", 6.0), ("a.py:1", 4.0), ("b.py:7", -1.0)]
    assert memtrace.growth_table(samples[:1]) == []


def _watcher(files: dict[str, float], results: Path = Path("/nowhere")) -> object:
    w = soak.Watcher(results, None, [])  # type: ignore[arg-type]
    w.files = files
    return w


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat()


def _trace_step(results: Path, began: float, full_until: float, pre_until: float | None, bound: str = "") -> None:
    """The line lagscope run's analytics loop writes to its trace at each step's start."""
    log = results / "_logs" / "pyspark.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("a") as f:
        f.write(f"2026-11-28 00:51:03,800 INFO lagscope.analytics.trace: analytics step began {_iso(began)}: "
                f"full step until {_iso(full_until)}{f' ({bound})' if bound else ''}, provisional until "
                f"{'-' if pre_until is None else _iso(pre_until)}\n")


def test_the_end_waits_for_the_last_faults_recovery_and_no_longer_than_its_bound(tmp_path: Path) -> None:
    # the record's case: bad files dropped 51 s before the planned end; their step began 18 s
    # after them and had not written its files when the run ended: the recovery went unmeasured
    interval = 30.0
    fault = soak.FaultRecord("bad_files", 1000.0, 1000.0)
    dropped = [{"path": "/x", "at": 1000.0}, {"path": "/y", "at": 1000.0}]
    files: dict[str, float] = {"/r/inc-1-2-00000.parquet": 990.0}
    w = _watcher(files, tmp_path)
    _trace_step(tmp_path, 985.0, 960.0, 980.0)  # a step before the fault

    def seen(f: soak.FaultRecord) -> bool:
        return soak.recovery_seen(f, w.first_result_after, lambda t: w.first_step_after(t, 5.0), dropped)

    bound = 1000.0 + 2 * interval + soak.END_MARGIN_S
    assert soak.end_wait([fault], seen, interval, now=1051.0) == bound
    # quarantined, but no step after it yet: still waiting
    for d in dropped:
        d["quarantined_at"] = 1018.0
    assert soak.end_wait([fault], seen, interval, now=1060.0) == bound
    # a step began 18 s after the fault (its provisional end 5 s before that: the settle): seen,
    # the end does not wait
    _trace_step(tmp_path, 1018.0, 960.0, 1013.0)
    assert soak.end_wait([fault], seen, interval, now=1063.0) is None
    # a recovery never seen: the wait ends at the bound (the verdict then says it was not seen)
    assert soak.end_wait([soak.FaultRecord("broker", 1100.0, 1116.0)], seen, interval, now=1150.0) == \
        1116.0 + 2 * interval + soak.END_MARGIN_S
    assert soak.end_wait([soak.FaultRecord("broker", 1100.0, 1116.0)], seen, interval, now=1186.0) is None


def test_after_a_kill_the_end_waits_for_the_new_engines_first_results(tmp_path: Path) -> None:
    files: dict[str, float] = {"/r/pre-1-900000-00000.parquet": 901.0}
    w = _watcher(files, tmp_path)
    _trace_step(tmp_path, 1010.0, 960.0, 1005.0)  # a step began: not what a kill's recovery waits for

    def seen(f: soak.FaultRecord) -> bool:
        return soak.recovery_seen(f, w.first_result_after, lambda t: w.first_step_after(t, 5.0), [])

    kill = soak.FaultRecord("kill", 1000.0, 1001.0)
    receiver = soak.FaultRecord("receiver", 700.0, 1000.0)  # its backlog is measured after the run
    assert seen(receiver)
    assert soak.end_wait([receiver, kill], seen, 30.0, now=1010.0) == 1001.0 + 60.0 + soak.END_MARGIN_S
    files["/r/inc-1-2-00000.parquet"] = 1020.0  # a full step's files after the restart
    assert soak.end_wait([receiver, kill], seen, 30.0, now=1021.0) is None


def test_the_plan_is_not_lengthened_by_the_end_wait() -> None:
    # the 5-minute CI soak keeps its plan: every fault, with its recovery, inside the minutes
    opts = soak.SoakOptions(Path("/nowhere"), minutes=5.0, seed=5, kills=1)
    lane, receiver = soak.plan(opts)
    at = 0.0
    for p in lane:
        at += p.at_s
        assert at + p.duration_s + opts.analytics_interval_s + 5.0 <= opts.minutes * 60.0
        at += p.duration_s + opts.analytics_interval_s + 5.0
    assert receiver is not None
    assert receiver.at_s + receiver.duration_s <= opts.minutes * 60.0


def test_a_step_began_is_seen_from_its_trace_also_when_it_wrote_no_provisional_file(tmp_path: Path) -> None:
    # CI's case: steps at 3.8 s past each minute; their full step reached the minute's start, past
    # the provisional end (the start less the 5-s settle), so they wrote no provisional file and a
    # recovery read from those files waited for the step after (40 s for a broker outage)
    w = _watcher({}, tmp_path)
    minute = 1_795_827_060.0
    fault_end = minute - 6.3
    _trace_step(tmp_path, minute - 26.2, minute - 60.0, minute - 31.2, "tail soak")
    _trace_step(tmp_path, minute + 3.8, minute, minute - 1.2)
    _trace_step(tmp_path, minute + 33.8, minute, minute + 28.8)
    assert w.first_step_after(fault_end, 5.0) == pytest.approx(minute + 3.8)  # type: ignore[attr-defined]


def test_a_step_stopped_at_sweeps_held_since_before_the_fault_has_not_recovered(tmp_path: Path) -> None:
    # the lake's disk full: sweeps held in memory from 990 on; the step at 1012 reads to 990 only
    w = _watcher({}, tmp_path)
    _trace_step(tmp_path, 1012.0, 990.0, 990.0, "sweeps held")
    assert w.first_step_after(1000.0, 5.0) is None  # type: ignore[attr-defined]
    _trace_step(tmp_path, 1042.0, 990.0, 1037.0)
    assert w.first_step_after(1000.0, 5.0) == pytest.approx(1042.0)  # type: ignore[attr-defined]
    # without provisional steps a step counts from its start
    _trace_step(tmp_path, 1030.0, 1020.0, None)
    assert w.first_step_after(1000.0, 5.0) == pytest.approx(1030.0)  # type: ignore[attr-defined]


def test_a_differing_anomaly_comes_with_what_the_lake_held_of_its_partition(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    t0 = dt.datetime(2026, 11, 28, 0, 50, 37, 98000, tzinfo=dt.UTC)

    def write(table: str, ts: str, rows: list[dict[str, object]]) -> None:
        folder = tmp_path / "lake" / table / f"cluster={soak.CLUSTER}" / "date=2026-11-28"
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / "f.parquet")

    key = {"group_id": "audit", "topic": "payments", "partition": 0}
    write("offsets", "sweep_ts", [
        {"sweep_ts": t0 + dt.timedelta(seconds=s), **key, "committed_offset": 10, "log_end_offset": 30,
         "member_id": "m1"} for s in (0, 20, 300)] + [
        {"sweep_ts": t0, **key, "partition": 1, "committed_offset": 1, "log_end_offset": 1, "member_id": "m1"}])
    write("commits", "commit_ts", [
        {"commit_ts": t0 + dt.timedelta(seconds=21), **key, "committed_offset": 12, "source_offset": 7},
        {"commit_ts": None, **key, "committed_offset": None, "source_offset": 8}])  # a tombstone
    _trace_step(tmp_path / "res", t0.timestamp() + 26.7, t0.timestamp() - 37.0, t0.timestamp() + 21.7)
    got = soak.lake_evidence(tmp_path / "lake", tmp_path / "res" / "_logs" / "pyspark.log",
                             {**key, "start_ts": t0})
    assert got["key"] == "audit/payments/0"
    assert [x.split(" ")[0] for x in got["sweeps"]] == ["00:50:37.098", "00:50:57.098"]  # not 5 min later
    assert "committed_offset=10 log_end_offset=30 member_id=m1 (file written" in got["sweeps"][0]
    assert len(got["commits"]) == 1
    assert got["commits"][0].startswith("00:50:58.098 committed_offset=12 source_offset=7")
    assert got["steps"] == ["00:51:03 (provisional until 00:50:58)"]


def test_after_an_engine_fault_the_analytics_are_back_when_a_step_began_that_the_new_engine_finished() -> None:
    def back(kind: str, began: float | None, written: float | None) -> float | None:
        f = soak.FaultRecord(kind, 1000.0, 1001.0, detail={"step_began_s": began, "results_written_s": written})
        return soak.analytics_back(f)

    # a new process's (or Spark session's) first step began 18 s after the restart, done at 61 s:
    # the analytics resumed at 18 s; the step's length is its own figure
    assert back("kill", 17.8, 60.9) == 17.8
    assert back("engine", 0.2, 44.2) == 0.2
    # a step began on the new engine but nothing was written since: not back yet
    assert back("kill", 17.8, None) is None
    assert back("engine", 5.0, 3.0) is None  # results from before that step (another engine's)
    # the faults that leave the engine going: the step beginning is the recovery
    assert back("broker", 21.9, None) == 21.9
    assert back("broker", None, 2.0) is None


def _clean_run_but(f: soak.FaultRecord) -> soak.SoakResult:
    """A soak's result whose every check held, with the one fault ``f`` (its recovery to judge)."""
    opts = {"sweep_interval_s": 5.0, "analytics_interval_s": 30.0, "alerts_interval_s": 5.0, "faults": False}
    return soak.SoakResult(opts=opts, began=0.0, ended=1.0, load_start=(0.0, 0.0, 0.0), load_end=(0.0, 0.0, 0.0),
                           faults=[f], schedule=[], lives=[], unexpected_exits=[], scenarios=[], watermark=None,
                           first_step_start=None, commits={"acknowledged": 9, "lost": 0, "duplicated": 0},
                           alerts={"notifications": 1, "lost": [], "unknown": [], "repeated": {}, "pending": 0,
                                   "dead": 0},
                           quarantine={"missing": [], "unexpected": [], "dropped": 0}, results={}, rss={},
                           problems=[], logs={})


def test_a_recovery_is_held_to_its_bound_only_where_the_machine_was_quiet() -> None:
    samples = [(990.0, 9.0), (1000.0, 2.0), (1010.0, 3.0), (1040.0, 3.2), (1100.0, 9.0)]
    assert soak.window_load(samples, 1000.0, 1041.0) == 2.73
    assert soak.window_load(samples, 2000.0, 2100.0) is None

    def result(load: float | None, analytics_s: float | None) -> soak.SoakResult:
        f = soak.FaultRecord("kill", 1000.0, 1001.0, detail={"load": load, "step_began_s": analytics_s,
                                                              "results_written_s": 60.0},
                             sweep_recovery_s=4.0, analytics_recovery_s=analytics_s)
        return _clean_run_but(f)

    # quiet: 34 s against a 30-s interval is late
    assert "kill at" in soak.verdicts(result(2.0, 34.0))["recovery"][0]
    assert not soak.verdicts(result(2.0, 29.0)).get("recovery")
    # busy: the time is not a result (the report says so), but the recovery must still happen
    assert not soak.verdicts(result(4.1, 34.0)).get("recovery")
    assert "Not judged by time" in soak._untimed_line(result(4.1, 34.0).faults)
    assert soak._untimed_line(result(2.0, 34.0).faults) == ""
    assert soak.verdicts(result(4.1, None))["recovery"]


def test_the_receiver_stays_down_until_a_notification_waits_for_it_at_most_twice_its_outage() -> None:
    stopping = threading.Event()
    # a notification waits already: down for the outage, no longer
    assert soak.hold_receiver(lambda: 1, 0.2, stopping, poll_s=0.01) < 0.35
    # none before 0.3 s: down until one waits
    t0 = time.monotonic()
    down = soak.hold_receiver(lambda: int(time.monotonic() - t0 > 0.3), 0.2, stopping, poll_s=0.01)
    assert 0.3 <= down < 0.4
    # none ever: twice the outage at most
    assert 0.4 <= soak.hold_receiver(lambda: 0, 0.2, stopping, poll_s=0.01) < 0.5
    # the run stopping ends it
    stopping.set()
    assert soak.hold_receiver(lambda: 0, 5.0, stopping, poll_s=0.01) < 0.1


def test_a_receiver_outage_with_nothing_to_deliver_proved_nothing() -> None:
    def result(detail: dict[str, object], took: float | None) -> soak.SoakResult:
        f = soak.FaultRecord("receiver", 1000.0, 1050.0, detail={"load": 1.0, **detail}, alerts_recovery_s=took)
        return _clean_run_but(f)

    [why] = soak.verdicts(result({"backlog": 0, "backlog_delivered": 0}, None))["recovery"]
    assert "no notification fell in its outage (50 s)" in why
    assert not soak.verdicts(result({"backlog": 3, "backlog_delivered": 3}, 4.0)).get("recovery")
    assert "backlog delivered after 7.0 s" in soak.verdicts(
        result({"backlog": 3, "backlog_delivered": 3}, 7.0))["recovery"][0]


def test_run_env_takes_key_value_pairs_for_the_run_process_only() -> None:
    assert soak.parse_env(["MALLOC_ARENA_MAX=2", "ARROW_DEFAULT_MEMORY_POOL=system", "EMPTY="]) == {
        "MALLOC_ARENA_MAX": "2", "ARROW_DEFAULT_MEMORY_POOL": "system", "EMPTY": ""}
    for bad in ("MALLOC_ARENA_MAX", "=2", "NOT A KEY=1"):
        with pytest.raises(ValueError, match="KEY=VALUE"):
            soak.parse_env([bad])


def test_a_bad_run_env_is_refused_before_anything_starts(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = Path(soak.__file__)
    done = subprocess.run([sys.executable, str(script), "--run-env", "MALLOC_ARENA_MAX",
                           "--workdir", str(tmp_path / "w")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "--run-env wants KEY=VALUE, got 'MALLOC_ARENA_MAX'" in done.stderr
    assert not (tmp_path / "w").exists()


def test_the_report_says_what_run_env_added() -> None:
    import dataclasses

    result = _clean_run_but(soak.FaultRecord("kill", 1000.0, 1001.0, detail={}))
    opts = soak.SoakOptions(Path("/nowhere"), minutes=1.0, faults=False, run_env={"MALLOC_ARENA_MAX": "2"})
    result.opts = {k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(opts).items()}
    assert soak.describe_run(result).endswith("; `lagscope run`'s environment adds `MALLOC_ARENA_MAX=2` (`--run-env`).")
    result.opts["run_env"] = {}
    assert "--run-env" not in soak.describe_run(result)


def test_rss_fit_gives_the_slope_after_the_forget_horizon_apart() -> None:
    # a life of 40 minutes, sampled every 10 s: +30 MB over the first 15 (the carried state filling
    # up to the horizon), then flat but for a ripple: the whole life's slope is the fill's, the
    # settled one about 0; a life with less than 10 minutes after the horizon has none
    def mb(t: float) -> float:
        return 200.0 + min(t, 900.0) / 30.0 + (1.0 if int(t / 10) % 2 else 0.0)

    samples = [(1000.0 + t, 7, mb(t), 500.0) for t in range(0, 2400, 10)]
    short = [(5000.0 + t, 8, mb(t), 500.0) for t in range(0, 1200, 10)]
    lives = [{"pid": 7, "start": 1000.0, "end": 3400.0}, {"pid": 8, "start": 5000.0, "end": 6200.0}]
    fit = soak.rss_fit(samples + short, lives, settled_after_s=900.0)
    whole, brief = fit["lives"]
    assert whole["py_slope_mb_per_h"] > 20
    assert abs(whole["py_slope_settled_mb_per_h"]) < 1
    assert whole["settled_after_min"] == 15
    assert brief["py_slope_settled_mb_per_h"] is None
    # 25 minutes settled: over 20, so the halves are given; both about 0 here
    assert all(abs(h) < 1 for h in whole["py_slope_settled_halves_mb_per_h"])
    assert brief["py_slope_settled_halves_mb_per_h"] is None


def test_rss_fit_tells_a_leak_from_memory_that_levels_off() -> None:
    # settled from minute 15, sampled every 10 s to minute 75: a leak of 12 MB/h keeps its slope in
    # both halves of the settled window; a fill that levels off (6 MB over a half-hour, then flat)
    # has most of its slope in the first half and none in the second
    def leak(t: float) -> float:
        return 200.0 + t / 300.0

    def fill(t: float) -> float:
        return 200.0 + min(max(t - 900.0, 0.0), 1800.0) / 300.0

    lives = [{"pid": 1, "start": 0.0, "end": 4500.0}, {"pid": 2, "start": 10_000.0, "end": 14_500.0}]
    samples = [(float(t), 1, leak(t), 500.0) for t in range(0, 4500, 10)]
    samples += [(10_000.0 + t, 2, fill(t), 500.0) for t in range(0, 4500, 10)]
    got = {x["pid"]: x["py_slope_settled_halves_mb_per_h"] for x in soak.rss_fit(samples, lives, 900.0)["lives"]}
    assert got[1] == pytest.approx([12.0, 12.0], abs=0.1)
    first, second = got[2]
    assert first > 10
    assert abs(second) < 1


def test_a_kept_run_is_fitted_again_when_its_report_is_rendered_again() -> None:
    # the JSON keeps the samples: --from-json fits them with the code that renders (here the
    # halves of the settled window, which a run kept with an older fit lacks)
    result = _clean_run_but(soak.FaultRecord("kill", 1000.0, 1001.0, detail={"step_began_s": 5.0}))
    result.lives = [{"pid": 3, "start": 0.0, "end": 4500.0}]
    result.settled_after_s = 900.0
    result.rss_samples = [[float(t), 3, 200.0 + t / 300.0, 500.0] for t in range(0, 4500, 10)]
    result.rss = {"samples": 0, "py_slope_mb_per_h": None, "jvm_slope_mb_per_h": None, "py_mb_max": 0.0,
                  "jvm_mb_max": 0.0, "lives": [{"pid": 3, "minutes": 75.0}]}  # an older fit's
    again = soak.from_json(json.loads(json.dumps(result.to_json())))
    life = again.rss["lives"][0]
    assert again.rss["samples"] == 450
    assert life["py_slope_settled_halves_mb_per_h"] == pytest.approx([12.0, 12.0], abs=0.1)
    assert any("That window's first half: 12.0 MB/h; its second half: 12.0 MB/h" in line
               for line in soak.memory_lines(again.rss))


def test_the_soak_settles_after_its_analytics_forget_horizon() -> None:
    # the rules' horizon: the run's --forget-after-s, never under the longest window a rule reads
    for forget, horizon in ((None, 3600.0), (1200.0, 1200.0), (60.0, 900.0)):
        s = soak.Soak(soak.SoakOptions(Path("/nowhere"), minutes=1.0, faults=False, forget_after_s=forget))
        assert s._forget_horizon_s() == horizon


def test_the_settled_window_starts_when_every_hold_is_full(tmp_path: Path) -> None:
    # the longest of the forget horizon, the alerts' lookback and the exporter's hold of closed
    # events, and the margin: a shorter forget horizon does not start it before the others filled
    from lagscope.analytics.results_metrics import HOLD_CLOSED_S

    for forget, lookback, want in ((900.0, None, max(3600.0, HOLD_CLOSED_S)),
                                   (900.0, 7200.0, 7200.0),
                                   (10800.0, None, 10800.0)):
        s = soak.Soak(soak.SoakOptions(tmp_path, minutes=1.0, faults=False, forget_after_s=forget))
        alerts = {} if lookback is None else {"lookback_s": lookback}
        s.config.write_text(yaml.safe_dump({"alerts": alerts}))
        assert s._settled_after_s() == want + soak.SETTLE_MARGIN_S


def test_the_carried_state_is_counted_per_part_and_its_growth_reported(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    results = tmp_path / "results"
    assert soak.state_rows(results) is None  # no checkpoint yet
    held = results / "_state" / "v-1-a"
    for part, groups in (("msweeps", ["g1", "g2", "g2"]), ("open_keys", None)):
        (held / part).mkdir(parents=True)
        cols = {"t": [1.0, 2.0, 3.0]} | ({"group_id": groups} if groups else {})
        pq.write_table(pa.table(cols), held / part / "part-1.parquet")
    (results / "_state" / "checkpoint.json").write_text(json.dumps({"version": "v-1-a"}))
    assert soak.state_rows(results) == {"msweeps": [3, 2], "open_keys": [3, 0]}
    (results / "_state" / "checkpoint.json").write_text(json.dumps({"version": "v-2-b"}))  # replaced meanwhile
    assert soak.state_rows(results) is None

    # a part that grows with every group seen against one that levels off, from the settled start
    lives = [{"start": 0.0, "end": 100.0}, {"start": 100.0, "end": None}]
    samples = [[100.0 + 60 * i, {"msweeps": [10 + 4 * i, 10 + 4 * i], "series": [30 + (i % 2), 10]}]
               for i in range(20)]
    g = soak.state_growth(samples, lives, settled_after_s=600.0)
    assert (g["from_min"], g["to_min"]) == (10, 19)
    assert g["parts"]["msweeps"] == {"rows": [50, 86, 86], "groups": [50, 86, 86]}
    assert g["parts"]["series"] == {"rows": [30, 31, 31], "groups": [10, 10, 10]}
    line = soak.state_lines(g)[0]
    assert "`msweeps` 50 → 86 rows (max 86), 50 → 86 groups (max 86)" in line
    assert soak.state_growth(samples, lives, settled_after_s=1e6) == {}
