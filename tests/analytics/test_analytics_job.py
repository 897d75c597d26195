"""The job end to end over a synthetic lake: the CLI batch, the incremental mode (same results
as the batch, carried across steps), idempotent re-runs, readable result tables."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow.dataset as ds
import pytest
from analytics_builders import T0, at, members_rows, offsets_rows, write_stall_lake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from pyspark.testing import assertDataFrameEqual
from typer.testing import CliRunner

from lagscope.analytics.job import run_incremental
from lagscope.cli import app
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.lake import write_rows
from lagscope.schema import MEMBERS, OFFSETS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SETTINGS = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=30, stop_after_s=30))


def _read(spark: SparkSession, results: Path, table: str) -> DataFrame:
    return spark.read.option("basePath", str(results / table)).parquet(str(results / table))


def _current(df: DataFrame) -> DataFrame:
    """Of rows with one key, the latest written (anomalies are re-written until they close)."""
    latest = df.groupBy("key").agg(F.max("as_of_ts").alias("as_of_ts"))
    return df.join(latest, ["key", "as_of_ts"]).drop("as_of_ts")


@pytest.mark.timeout(1800)
def test_batch_cli_and_incremental_agree(spark: SparkSession, tmp_path: Path) -> None:
    lake, batch, inc = tmp_path / "lake", tmp_path / "batch", tmp_path / "inc"
    write_stall_lake(lake)
    # the CLI in this process: it uses the running session (a new JVM per test is too slow)
    cli = ["analyze", "--lake", str(lake), "--results", str(batch), "--since", T0.date().isoformat(),
           "--until", T0.date().isoformat(), "--stall-after-s", "30", "--no-progress"]
    done = CliRunner().invoke(app, cli)
    assert done.exit_code == 0, done.output
    assert "lag_trends:" in done.output
    assert SparkSession.getActiveSession() is not None  # not stopped: the CLI did not start it

    stored = set(spark.sparkContext._jsc.getPersistentRDDs().keys())
    run_incremental(spark, lake, inc, settings=SETTINGS, since=T0, until=at(120))
    # the rows a step stored for its consumers are freed when it is done (``lagscope run``
    # steps every minute in one process): none stored since is left (by ids: Spark's cleaner
    # may meanwhile free earlier ones whose frames were garbage-collected)
    assert set(spark.sparkContext._jsc.getPersistentRDDs().keys()) - stored == set()
    saved = tmp_path / "state-after-step-1"
    shutil.copytree(inc / "_state", saved)
    run_incremental(spark, lake, inc, settings=SETTINGS, until=at(240))

    # lag trends and status: identical, row for row
    for table in ("lag_trends", "status"):
        assertDataFrameEqual(_read(spark, inc, table), _read(spark, batch, table))
    # anomalies: the stall opened in step 1 (end null) and closed in step 2; its current row
    # equals the batch's (from the last commit at 80, with work pending, to the commit at 160)
    batch_anoms = _read(spark, batch, "anomalies").drop("as_of_ts")
    inc_anoms = _current(_read(spark, inc, "anomalies")).select(*batch_anoms.columns)
    assertDataFrameEqual(inc_anoms, batch_anoms)
    assertDataFrameEqual(inc_anoms.select("kind", "partition", "start_ts", "end_ts"),
                         spark.createDataFrame([("stall", 1, at(80), at(160))],
                                               "kind string, partition int, start_ts timestamp, end_ts timestamp"))

    # re-running step 2 (a crash before the checkpoint moved) replaces its files: same output
    before = sorted(p.relative_to(inc) for p in inc.rglob("*.parquet") if "_state" not in p.parts)
    trends_before = _read(spark, inc, "lag_trends").collect()
    shutil.rmtree(inc / "_state")
    shutil.copytree(saved, inc / "_state")
    run_incremental(spark, lake, inc, settings=SETTINGS, until=at(240))
    after = sorted(p.relative_to(inc) for p in inc.rglob("*.parquet") if "_state" not in p.parts)
    assert after == before
    assertDataFrameEqual(_read(spark, inc, "lag_trends"), trends_before)

    # nothing new: no work, no files
    assert run_incremental(spark, lake, inc, settings=SETTINGS, until=at(240)) == {}

    # the result tables are plain Hive-partitioned Parquet: pyarrow and DuckDB read them
    table = ds.dataset(batch / "lag_trends", format="parquet", partitioning="hive").to_table()
    assert table.schema.field("window_start").type.unit == "ms"
    assert set(table.column("cluster").to_pylist()) == {"c"}
    n = duckdb.sql(f"SELECT count(*) FROM read_parquet('{batch}/lag_trends/*/*/*.parquet', hive_partitioning=1) "
                   "WHERE partition IS NOT NULL").fetchall()
    assert n == [(2 * 4,)]  # 2 partitions × 4 minutes


def test_analyze_rejects_bad_input(tmp_path: Path) -> None:
    # a missing lake is one clear line and exit 1, before any Spark starts
    done = subprocess.run([sys.executable, "-m", "lagscope.cli", "analyze", "--lake", str(tmp_path / "nope"),
                           "--results", str(tmp_path / "r"), "--since", "2026-01-01"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1
    said = " ".join(done.stderr.split())  # the console wraps long lines
    assert said.startswith("error: --lake ")
    assert said.endswith("nope: no such folder")
    bad = subprocess.run([sys.executable, "-m", "lagscope.cli", "analyze", "--lake", str(tmp_path),
                          "--results", str(tmp_path / "r"), "--since", "yesterday"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert bad.returncode == 1
    assert "--since: not an ISO date or time: 'yesterday'" in " ".join(bad.stderr.split())



@pytest.mark.timeout(1200)
def test_incremental_step_after_midnight_reads_the_commit_lookback(spark: SparkSession, tmp_path: Path) -> None:
    # midnight M (2026-01-02). The group commits every 5–10 s; at M+5 s it rewinds 600 → 450
    # (150 messages to be processed again) and commits 700 at M+8: the sweeps (every 10 s)
    # never see the rewind, the commit stream does. The step [M, M+60 s) compares the commit at
    # M+5 with the one before it, at M−15 s: in the previous day's partition, inside the step's
    # 15-minute commit look-back, so that partition is read too
    from lagscope.schema import COMMITS

    lake, inc = tmp_path / "lake", tmp_path / "inc"
    m = 86400
    commits = [(-60, 400), (-50, 450), (-40, 500), (-30, 520), (-20, 560), (-15, 600), (5, 450), (8, 700),
               (15, 750), (25, 800), (35, 850), (45, 900)]
    drop = {"cluster", "date"}
    for n, (t, o) in enumerate(commits):
        write_rows(lake, COMMITS, "c", [{"group_id": "g", "topic": "t", "partition": 0, "committed_offset": o,
                                         "commit_ts": at(m + t), "record_ts": at(m + t), "source_partition": 7,
                                         "source_offset": n}])
    for t in range(-60, 51, 10):
        c = max(o for tc, o in commits if tc <= t)
        write_rows(lake, OFFSETS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in offsets_rows([(m + t, c, 2000)])])
        write_rows(lake, MEMBERS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in members_rows([(m + t, "Stable", 1, [("m1", None, [0])])])])
    run_incremental(spark, lake, inc, settings=SETTINGS, since=at(m - 60), until=at(m))
    run_incremental(spark, lake, inc, settings=SETTINGS, until=at(m + 60))
    schema = "start_ts timestamp, magnitude double"
    rewinds = (_current(_read(spark, inc, "anomalies")).where(F.col("kind") == "rewind").select("start_ts", "magnitude")
               if (inc / "anomalies").exists() else spark.createDataFrame([], schema))  # none written at all
    assertDataFrameEqual(rewinds, spark.createDataFrame([(at(m + 5), 150.0)], schema))


@pytest.mark.timeout(1200)
def test_a_step_after_midnight_has_the_generation_record_of_the_day_before(spark: SparkSession,
                                                                          tmp_path: Path) -> None:
    # midnight M (2026-01-02). Generation 1 ({m1, m2}; m2's 45-s session and 90-s rebalance
    # timeout the group's largest) was written at M−30 min, in the previous day's partition; m2
    # leaves at M+15 s (10 s after its last progress: within a quarter of its session, a leave),
    # generation 2 ({m1}) at M+25 s. The step [M, M+60 s) reads the group records of its own day
    # only: the record in force at the window's A (M+10 s) is carried from the step before, so the
    # window's generation before is 1 and its timeouts generation 1's (a leave's bound: the
    # rebalance timeout, 90 s; not generation 2's 20 s nor the default 300 s)
    from lagscope.schema import GROUP_EVENTS

    lake, inc = tmp_path / "lake", tmp_path / "inc"
    m = 86400
    drop = {"cluster", "date"}

    def member(mid: str, session_s: int, rebalance_s: int, parts: list[int]) -> dict[str, object]:
        return {"member_id": mid, "group_instance_id": None, "client_id": "c", "host": "h",
                "session_timeout_ms": session_s * 1000, "rebalance_timeout_ms": rebalance_s * 1000,
                "assignment": [{"topic": "t", "partition": p} for p in parts]}

    for n, (t, gen, ms) in enumerate([(-1800, 1, [member("m1", 8, 20, [0]), member("m2", 45, 90, [1])]),
                                      (25, 2, [member("m1", 8, 20, [0, 1])])]):
        write_rows(lake, GROUP_EVENTS, "c", [{"group_id": "g", "record_type": "group_metadata", "generation": gen,
                                              "members": ms, "record_ts": at(m + t), "source_partition": 0,
                                              "source_offset": n, "value_version": 3}])
    for t in range(-60, 51, 10):
        state, mem = (("Stable", [("m1", None, [0]), ("m2", None, [1])]) if t <= 10 else
                      ("PreparingRebalance", [("m1", None, [0])]) if t == 20 else ("Stable", [("m1", None, [0, 1])]))
        p1 = "m2" if t <= 10 else None if t == 20 else "m1"
        write_rows(lake, OFFSETS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in [*offsets_rows([(m + t, 10 * t + 990, 10 * t + 1000, 0, "m1")]),
                                                  *offsets_rows([(m + t, 10 * t + 990, 10 * t + 1000, 0, p1)],
                                                                partition=1)]])
        write_rows(lake, MEMBERS, "c", [{k: v for k, v in r.items() if k not in drop}
                                        for r in members_rows([(m + t, state, None, mem)])])
    run_incremental(spark, lake, inc, settings=SETTINGS, since=at(m - 60), until=at(m))
    run_incremental(spark, lake, inc, settings=SETTINGS, until=at(m + 60))
    got = [(r["cause"], r["generation_before"], r["generation_after"], r["bound_s"])
           for r in _read(spark, inc, "rebalances").collect()]
    assert got == [("leave", 1, 2, 90.0)]


def test_a_step_is_a_handful_of_spark_jobs_whatever_its_history(spark: SparkSession, tmp_path: Path) -> None:
    # route → one shuffle → the passes, plus the placement lookup the first time a bucket count
    # is seen: counted with Spark's status tracker, for a first step and for a
    # later one with the state carried (the same job: no lineage grows with the history)
    lake, inc = tmp_path / "lake", tmp_path / "inc"
    write_stall_lake(lake)
    tracker = spark.sparkContext.statusTracker()
    counts = []
    for i, (since, until) in enumerate([(T0, at(60)), (None, at(120)), (None, at(180))]):
        group = f"lagscope-step-{i}-{tmp_path.name}"
        spark.sparkContext.setJobGroup(group, "one incremental step")
        try:
            run_incremental(spark, lake, inc, settings=SETTINGS, since=since, until=until)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        jobs = tracker.getJobIdsForGroup(group)
        stages = {s for j in jobs if (info := tracker.getJobInfo(j)) is not None for s in info.stageIds}
        counts.append((len(jobs), len(stages)))
    # a steady step: the route stage's shuffle map job and the passes' result job
    assert counts[1] == counts[2] == (2, 3), counts  # a later step is the same job as the one before
    assert counts[0][0] <= 4, counts  # the first also asks Spark where its buckets' keys hash to
