"""Spark on a cluster: a real standalone master + worker on loopback gives the same results as local[*].

The cluster is started once for this module with pyspark's own ``bin/spark-class``
(:class:`lagscope.devtools.spark_standalone.StandaloneCluster`). Jobs run as separate driver
processes (``lagscope …`` subprocesses), exactly as a user runs them, so they never share a
SparkContext with the rest of the test session.
"""

from __future__ import annotations

import datetime as dt
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from helpers.history import make_history
from helpers.s3server import s3a_jars_or_skip

from lagscope.devtools.spark_standalone import ClusterState, StandaloneCluster, pid_alive, stop_recorded
from lagscope.errors import SparkClusterError
from lagscope.lake import write_rows
from lagscope.results import read
from lagscope.schema import OFFSETS, RESULT_TABLES

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LAGSCOPE = [sys.executable, "-m", "lagscope.cli"]
S3A_READER = Path(__file__).resolve().parents[1] / "helpers" / "s3a_reader.py"
T0 = dt.datetime(2026, 11, 20, 23, 50, tzinfo=dt.UTC)  # the sweeps cross midnight: two date partitions


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory, s3_server: Any) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"), workers=1, worker_cores=2)
    # the S3 server's keys in the daemons' environment, as a node's (spark-env.sh, a pod's env):
    # the executors' s3a credential provider reads them there, never from Spark's configuration
    with pytest.MonkeyPatch.context() as env:
        for key, value in s3_server.credentials.items():
            if value:
                env.setenv(key, value)
        cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def make_lake(root: Path, *, sweeps: int = 30, seed: int = 7) -> list[dict[str, Any]]:
    """A small synthetic sample lake: 2 clusters ('1' looks numeric on purpose), 2 groups, 2 topics,
    3 partitions, ``sweeps`` sweeps 30 s apart. Returns every row written (with its cluster)."""
    rng = random.Random(seed)
    written: list[dict[str, Any]] = []
    for cluster in ("prod", "1"):
        for s in range(sweeps):
            ts = T0 + dt.timedelta(seconds=30 * s)
            rows = []
            for group in ("orders", "billing"):
                for topic in ("a", "b"):
                    for p in range(3):
                        end = 1000 + 50 * s + p
                        # orders lags by a random amount; billing is caught up except on partition 2 of b
                        behind = rng.randint(0, 2500) if group == "orders" else (7 if (topic, p) == ("b", 2) else 0)
                        committed = end - behind
                        rows.append({"sweep_ts": ts, "group_id": group, "topic": topic, "partition": p,
                                     "committed_offset": committed, "log_start_offset": 0,
                                     "log_end_offset": end, "last_stable_offset": end,
                                     "group_state": "Stable", "lag": max(0, end - committed)})
            write_rows(root, OFFSETS, cluster, rows)
            written += [{**r, "cluster": cluster} for r in rows]
    return written


def expected_summary(rows: list[dict[str, Any]], warn_at: int) -> list[dict[str, Any]]:
    """The check job's result computed in plain Python, independently of Spark."""
    out = []
    for key in sorted({(r["cluster"], r["group_id"], r["topic"]) for r in rows}):
        mine = [r for r in rows if (r["cluster"], r["group_id"], r["topic"]) == key]
        last_ts = max(r["sweep_ts"] for r in mine)
        lag_last = sum(r["lag"] for r in mine if r["sweep_ts"] == last_ts)
        level = "zero" if lag_last == 0 else ("low" if lag_last < warn_at else "high")
        out.append({"cluster": key[0], "group_id": key[1], "topic": key[2],
                    "sweeps": len({r["sweep_ts"] for r in mine}),
                    "partitions": len({r["partition"] for r in mine}),
                    "partition_lag_max": max(r["lag"] for r in mine), "lag_last": lag_last, "level": level})
    return out


def _check(lake: Path, out: Path, master: str, env: dict[str, str]) -> list[dict[str, Any]]:
    proc = subprocess.run([*LAGSCOPE, "spark", "check", "--lake", str(lake), "--out", str(out),
                           "--master", master, "--warn-at", "100"],
                          capture_output=True, text=True, env=env, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = pq.read_table(out).to_pylist()
    return sorted(rows, key=lambda r: (r["cluster"], r["group_id"], r["topic"]))


def test_check_job_runs_on_the_cluster_executors(spark_cluster: StandaloneCluster, tmp_path: Path) -> None:
    rows = make_lake(tmp_path / "lake")
    on_cluster = _check(tmp_path / "lake", tmp_path / "out-cluster", spark_cluster.master_url,
                        spark_cluster.driver_env())
    # the same answer as plain Python over the rows written (local[*] is compared in the analyze test)
    assert on_cluster == expected_summary(rows, warn_at=100)
    # the levels cover the three kinds of lag the lake holds: high (orders), low (billing b), zero (billing a)
    assert {r["level"] for r in on_cluster} == {"high", "low", "zero"}
    # and the job really ran on the cluster's executors (the Python UDF too), not in a local fallback
    apps = spark_cluster.status()["completedapps"]
    assert [a["name"] for a in apps if a["state"] == "FINISHED"].count("lagscope-check") == 1


def _analyze(lake: Path, results: Path, master: str, env: dict[str, str]) -> None:
    proc = subprocess.run([*LAGSCOPE, "analyze", "--lake", str(lake), "--results", str(results),
                           "--since", "2026-11-20", "--until", "2026-11-20", "--master", master,
                           "--shuffle-partitions", "2", "--driver-memory", "1g", "--no-progress"],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _rows(root: Path, table: str) -> list[dict[str, Any]]:
    rows = read(root, table).to_pylist()
    return sorted(rows, key=lambda r: repr(sorted(r.items(), key=lambda kv: kv[0])))


@pytest.mark.timeout(1800)  # two analytics runs; minutes on a loaded 2-core machine
def test_analyze_on_the_cluster_equals_local(spark_cluster: StandaloneCluster, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    make_history(lake, "prod", dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC), minutes=5)
    env = spark_cluster.driver_env()
    # on the cluster's executors (its tasks read the lake and write the staged files: a shared
    # folder here), and on local[2]
    _analyze(lake, tmp_path / "results-cluster", spark_cluster.master_url, env)
    _analyze(lake, tmp_path / "results-local", "local[2]", env)
    for table in RESULT_TABLES:
        on_cluster, on_local = _rows(tmp_path / "results-cluster", table), _rows(tmp_path / "results-local", table)
        assert len(on_cluster) == len(on_local), table
        for a, b in zip(on_cluster, on_local, strict=True):
            assert a.keys() == b.keys()
            for key in a:
                if isinstance(a[key], float):
                    assert a[key] == pytest.approx(b[key], rel=1e-9, nan_ok=True), (table, key)
                else:
                    assert a[key] == b[key], (table, key)
    # the story of the lake is in the results: the stuck group stalls, the healthy one does not
    kinds = {(r["group_id"], r["kind"]) for r in _rows(tmp_path / "results-cluster", "anomalies")}
    assert ("stuck", "stall") in kinds
    assert not any(g == "healthy" for g, _ in kinds)
    assert _rows(tmp_path / "results-cluster", "lag_trends")
    apps = [a["name"] for a in spark_cluster.status()["completedapps"] if a["state"] == "FINISHED"]
    assert "lagscope-analytics" in apps


def test_cluster_status_shows_the_registered_worker(spark_cluster: StandaloneCluster) -> None:
    status = spark_cluster.status()
    assert status["status"] == "ALIVE"
    assert status["aliveworkers"] == 1
    assert status["cores"] == 2
    assert status["url"] == spark_cluster.master_url


def test_cli_start_and_stop_end_master_and_workers_by_pid(tmp_path: Path) -> None:
    workdir = tmp_path / "c"
    start = subprocess.run([*LAGSCOPE, "spark", "start", "--workdir", str(workdir), "--cores", "1",
                            "--memory", "512m"], capture_output=True, text=True, timeout=240, check=False)
    assert start.returncode == 0, start.stderr[-3000:]
    state = ClusterState.load(workdir / "cluster.json")
    pids = [state.master_pid, *state.worker_pids]
    try:
        assert len(pids) == 2
        assert all(pid_alive(pid) for pid in pids)
        assert state.master_url in start.stdout
        # a second start refuses while the first cluster runs
        again = subprocess.run([*LAGSCOPE, "spark", "start", "--workdir", str(workdir)],
                               capture_output=True, text=True, timeout=60, check=False)
        assert again.returncode == 1
        assert "already running" in again.stdout
    finally:
        stop = subprocess.run([*LAGSCOPE, "spark", "stop", "--workdir", str(workdir)],
                              capture_output=True, text=True, timeout=120, check=False)
    assert stop.returncode == 0, stop.stderr[-3000:]
    assert not any(pid_alive(pid) for pid in pids)
    assert not (workdir / "cluster.json").exists()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        # a cluster without workers can run nothing: refused before anything starts
        ({"workers": 0}, "at least one worker"),
        # a worker that offers no cores can run no executor
        ({"worker_cores": 0}, "worker_cores"),
    ],
)
def test_invalid_cluster_is_refused(tmp_path: Path, kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(SparkClusterError, match=message):
        StandaloneCluster(tmp_path, **kwargs)
    assert not (tmp_path / "master.log").exists()


def test_stop_without_a_cluster_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SparkClusterError, match="no Spark cluster recorded"):
        stop_recorded(tmp_path)
    proc = subprocess.run([*LAGSCOPE, "spark", "stop", "--workdir", str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "no Spark cluster recorded" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_check_on_a_lake_without_offsets_fails_clearly(tmp_path: Path) -> None:
    (tmp_path / "lake").mkdir()
    proc = subprocess.run([*LAGSCOPE, "spark", "check", "--lake", str(tmp_path / "lake"),
                           "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "no offsets table" in proc.stderr
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------
# the whole pipeline on object storage (issue 24): simulator → collector → lake in the bucket →
# `lagscope analyze` on this cluster → results in the bucket → the results exporter and the
# results' loader, all on the real S3 server fixture
# --------------------------------------------------------------------------------------------

def _texts(table: Any, columns: list[str]) -> list[tuple[str, ...]]:
    """The rows over ``columns``, each value as text (partition values and timestamps alike), sorted."""
    return sorted(tuple(str(r[c]) for c in columns) for r in table.select(columns).to_pylist())


def _collect_into(bucket_lake: str, storage: Any, bootstrap: str, out: Path, interval_s: float) -> Any:
    """Run the ``stall`` scenario while a collector sweeps its group into ``bucket_lake``;
    returns the run's result (its drawn schedule and t0)."""
    import threading
    import time
    import uuid

    from lagscope.collector.loop import Collector
    from lagscope.config import Settings
    from lagscope.devtools.sim.runner import start_scenario

    run_id = uuid.uuid4().hex[:6]
    settings = Settings(**{
        "clusters": [{"name": "sim", "bootstrap_servers": [bootstrap],
                      "groups": {"include": [f"sim-stall-{run_id}.*"]}}],
        "collector": {"interval_s": interval_s, "lake": bucket_lake, "compaction": {"enabled": False},
                      "retention": 0},
        "metrics": {"enabled": False}, "storage": storage.model_dump()})
    collector = Collector(settings, metrics=False)
    stop = threading.Event()
    th = threading.Thread(target=collector.run, args=(stop,), daemon=True)
    th.start()
    try:
        result = start_scenario("stall", bootstrap, out, run_id=run_id).wait()
        time.sleep(2 * interval_s)
    finally:
        stop.set()
        th.join(timeout=60)
    return result


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_the_pipeline_on_object_storage_finds_the_stall(spark_cluster: StandaloneCluster, bootstrap: str,
                                                       s3_server: Any, s3_prefix: str, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client import CollectorRegistry

    from lagscope import lake as lakes
    from lagscope.analytics.results_metrics import ResultsCollector
    from lagscope.results import current_events, read_publish_state

    creds = {k: v for k, v in s3_server.credentials.items() if v}
    for key, value in creds.items():
        monkeypatch.setenv(key, value)
    lake_url, results_url = s3_server.url(f"{s3_prefix}/lake"), s3_server.url(f"{s3_prefix}/results")
    run = _collect_into(lake_url, s3_server.storage_config(), bootstrap, tmp_path / "sim", 0.5)
    assert not run.failures, run.failures
    lake = s3_server.store(f"{s3_prefix}/lake")
    days = sorted({f.rsplit("=", 1)[1] for f in lakes.object_date_folders(lake, "offsets", "sim", None, None)})
    assert days, "the collector committed no offsets file to the bucket"
    # `lagscope analyze` as a user runs it against the cluster: both roots s3://, the storage
    # section and second-scale rules from the file, the keys from the environment
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"storage: {{endpoint: '{s3_server.endpoint}', path_style: true, credentials: env}}\n"
                      "analytics:\n  session_timeout_s: 3\n  heartbeat_s: 0.5\n  rebalance_timeout_s: 3\n"
                      "  rules: {stall_after_s: 5, stop_after_s: 5}\n")
    proc = subprocess.run([*LAGSCOPE, "analyze", "--config", str(config), "--lake", lake_url, "--results",
                           results_url, "--since", days[0], "--until", days[-1], "--master", spark_cluster.master_url,
                           "--shuffle-partitions", "2", "--driver-memory", "1g", "--no-progress"],
                          capture_output=True, text=True, env={**spark_cluster.driver_env(), **creds}, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"written under {results_url}/anomalies" in proc.stdout, proc.stdout
    assert s3_server.credentials["AWS_SECRET_ACCESS_KEY"] not in proc.stdout + proc.stderr
    apps = [a["name"] for a in spark_cluster.status()["completedapps"] if a["state"] == "FINISHED"]
    assert "lagscope-analytics" in apps  # on the cluster's executors
    out = s3_server.store(f"{s3_prefix}/results")
    assert read_publish_state(out).phase == "done"
    assert out.folders(".staging") == []
    # the finding: the member stops consuming at the drawn time and keeps committing the same
    # offsets; the stall starts at its last commit with work pending (sweeps every 0.5 s)
    (member,) = run.scenario.groups[0].members
    (action,) = member.actions
    fault = run.t0 + action.at
    stalls = [e for e in current_events(out, "anomalies") if e["kind"] == "stall"]
    assert stalls, [(e["kind"], e["group_id"]) for e in current_events(out, "anomalies")]
    assert {e["group_id"] for e in stalls} == {run.names.group(run.scenario.groups[0].name)}
    assert all(fault - 1.5 <= e["start_ts"].timestamp() <= fault + 1.5 for e in stalls), (fault, stalls)
    # the results exporter over the bucket exports it
    registry = CollectorRegistry()
    registry.register(ResultsCollector(out))
    exported = [s for family in registry.collect() for s in family.samples
                if s.name == "lagscope_anomalies_total" and s.labels.get("kind") == "stall"]
    assert {s.labels["group"] for s in exported} == {stalls[0]["group_id"]}
    assert sum(s.value for s in exported) == len(stalls)  # each stall the loader sees, counted once

    # Spark's own s3a:// on the cluster's executors (the pinned hadoop-aws jars, shipped to them by
    # spark.jars): a user's program writes a table to the bucket and reads every result table
    # back, the same rows as pyarrow's read of the same objects
    s3a_jars_or_skip()
    scratch = s3_server.url(f"{s3_prefix}/mine/numbers")
    got = tmp_path / "s3a"
    ran = subprocess.run([sys.executable, str(S3A_READER), str(config), results_url, scratch, str(got),
                          spark_cluster.master_url], env={**spark_cluster.driver_env(), **creds},
                         capture_output=True, text=True, timeout=600, check=False)
    assert ran.returncode == 0, ran.stdout + ran.stderr[-4000:]
    apps = [a["name"] for a in spark_cluster.status()["completedapps"] if a["state"] == "FINISHED"]
    assert "lagscope-s3a-test" in apps  # its reads and writes ran on the cluster's executors
    assert sorted(tuple(r.values()) for r in pq.read_table(got / "scratch.parquet").to_pylist()) == \
        [(1, "one"), (2, "two"), (3, "three")]
    for table in RESULT_TABLES:
        want = read(out, table)
        if not want.num_rows:
            continue
        columns = want.schema.names
        for how in ("folder", "files"):
            spark_read = pq.read_table(got / f"{table}.{how}.parquet")
            assert sorted(spark_read.schema.names) == sorted(columns), (table, how)
            assert _texts(spark_read, columns) == _texts(want, columns), (table, how)
