"""The soak's fault schedule (benchmarks/soak.py ``plan``), without running anything."""

from __future__ import annotations

from pathlib import Path

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


def _watcher(files: dict[str, float]) -> object:
    w = soak.Watcher(Path("/nowhere"), None, [])  # type: ignore[arg-type]
    w.files = files
    return w


def test_the_end_waits_for_the_last_faults_recovery_and_no_longer_than_its_bound() -> None:
    # the record's case: bad files dropped 51 s before the planned end; their step began 18 s
    # after them and had not written its files when the run ended: the recovery went unmeasured
    interval = 30.0
    fault = soak.FaultRecord("bad_files", 1000.0, 1000.0)
    dropped = [{"path": "/x", "at": 1000.0}, {"path": "/y", "at": 1000.0}]
    files: dict[str, float] = {"/r/inc-1-2-00000.parquet": 990.0}
    w = _watcher(files)

    def seen(f: soak.FaultRecord) -> bool:
        return soak.recovery_seen(f, w.first_result_after, lambda t: w.first_step_after(t, 5.0), dropped)

    bound = 1000.0 + 2 * interval + soak.END_MARGIN_S
    assert soak.end_wait([fault], seen, interval, now=1051.0) == bound
    # quarantined, but no step after it yet: still waiting
    for d in dropped:
        d["quarantined_at"] = 1018.0
    assert soak.end_wait([fault], seen, interval, now=1060.0) == bound
    # its provisional step's files (named after the lake it read, 18 s after the fault, less the
    # 5-s settle) are written: seen, the end does not wait
    files["/r/pre-1795809600000-1013000-00000.parquet"] = 1062.0
    assert soak.end_wait([fault], seen, interval, now=1063.0) is None
    # a recovery never seen: the wait ends at the bound (the verdict then says it was not seen)
    assert soak.end_wait([soak.FaultRecord("broker", 1100.0, 1116.0)], seen, interval, now=1150.0) == \
        1116.0 + 2 * interval + soak.END_MARGIN_S
    assert soak.end_wait([soak.FaultRecord("broker", 1100.0, 1116.0)], seen, interval, now=1186.0) is None


def test_after_a_kill_the_end_waits_for_the_new_engines_first_results() -> None:
    files: dict[str, float] = {"/r/pre-1-900000-00000.parquet": 901.0}
    w = _watcher(files)

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
