"""Lake retention and the analytics: a removal never breaks the next incremental step (the
checkpoint holds what it has not read: the step after a prune gives exactly the results it gives
on the unpruned lake), and a batch asked for days retention removed says they expired."""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from analytics_builders import T0, at, members_rows, offsets_rows
from pyspark.sql import DataFrame, SparkSession
from pyspark.testing import assertDataFrameEqual

from lagscope.analytics.job import run_batch, run_incremental
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.errors import ConfigError, DataExpired
from lagscope.lake import write_rows
from lagscope.retention import analytics_keep_from, prune
from lagscope.schema import MEMBERS, OFFSETS, SAMPLE_TABLES

SETTINGS = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=30, stop_after_s=30))
DAY = 86400
#: long after the lake's three days: every one of them is expired by date
LATER = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)


def _lake(root: Path) -> None:
    """Three days (T0 = 2026-01-01), sweeps every 30 s for 10 minutes around each midnight and noon:
    partition 0 keeps up, partition 1 stalls for two minutes every noon. Its files look written
    when their day ended (retention's "still written to" guard does not hold them). Each partition
    has its own member, so partition 1's owner makes no progress anywhere: a stall, not starved."""
    drop = {"cluster", "date"}
    for base in range(0, 3 * DAY, DAY // 2):
        for t in range(base, base + 600, 30):
            stalled = base % DAY and 120 <= t - base <= 240
            rows: list[dict[str, Any]] = []
            rows += offsets_rows([(t, 10 * t - 5, 10 * t)], partition=0)
            rows += offsets_rows([(t, 10 * (base + 120) - 5 if stalled else 10 * t - 5, 10 * t)], partition=1,
                                  owner="m2")
            write_rows(root, OFFSETS, "c", [{k: v for k, v in r.items() if k not in drop} for r in rows])
            mem = members_rows([(t, "Stable", 1, [("m1", None, [0]), ("m2", None, [1])])])
            write_rows(root, MEMBERS, "c", [{k: v for k, v in r.items() if k not in drop} for r in mem])
    for folder in root.glob("*/cluster=*/date=*"):
        ended = dt.datetime.fromisoformat(folder.name.removeprefix("date=")).replace(tzinfo=dt.UTC) + dt.timedelta(1)
        for p in [*folder.iterdir(), folder]:
            os.utime(p, (ended.timestamp(), ended.timestamp()))


def _read(spark: SparkSession, results: Path, table: str) -> DataFrame:
    return spark.read.option("basePath", str(results / table)).parquet(str(results / table))


def test_a_batch_over_expired_days_says_so(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _lake(lake)
    assert len(prune(lake, SAMPLE_TABLES, days=7, now=LATER).removed) == 3 * 2
    # never started: the check comes before Spark is asked for anything
    with pytest.raises(DataExpired, match=r"the lake's sweeps of 2026-01-02 … 2026-01-03 have expired: retention "
                                          r"removed its days up to 2026-01-03 \(collector.retention\); analyse days "
                                          r"after 2026-01-03"):
        run_batch(None, lake, tmp_path / "results", since=dt.date(2026, 1, 2), until=dt.date(2026, 1, 3),
                  settings=SETTINGS)
    # days after the last removed one were never collected: that is not expiry
    with pytest.raises(ConfigError, match="has no sweeps between 2026-01-04 and 2026-01-05"):
        run_batch(None, lake, tmp_path / "results", since=dt.date(2026, 1, 4), until=dt.date(2026, 1, 5),
                  settings=SETTINGS)


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_pruning_under_the_checkpoint_never_changes_the_next_step(spark: SparkSession, tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    pruned, whole = tmp_path / "pruned" / "lake", tmp_path / "whole" / "lake"
    _lake(pruned)
    shutil.copytree(pruned, whole)  # copy2: the modification times too
    for lake in (pruned, whole):
        run_incremental(spark, lake, lake.parent / "results", settings=SETTINGS, since=T0, until=at(2 * DAY + 3600))
    # the analytics' next step starts at 01-03 01:00: 01-02 is held (the day before), 01-01 may go
    keep_from = analytics_keep_from(pruned.parent / "results")
    assert keep_from == dt.date(2026, 1, 2)
    done = prune(pruned, SAMPLE_TABLES, days=7, now=LATER, keep_from=keep_from)
    assert {(r.table, r.date.isoformat()) for r in done.removed} == {("offsets", "2026-01-01"),
                                                                   ("members", "2026-01-01")}
    assert done.kept_for_analytics == 4
    for lake in (pruned, whole):
        run_incremental(spark, lake, lake.parent / "results", settings=SETTINGS, until=at(3 * DAY))
    for table in ("lag_trends", "status", "anomalies", "rebalances"):
        written = (whole.parent / "results" / table).is_dir()
        assert (pruned.parent / "results" / table).is_dir() == written
        if written:
            assertDataFrameEqual(_read(spark, pruned.parent / "results", table),
                                 _read(spark, whole.parent / "results", table))
    assert _read(spark, pruned.parent / "results", "anomalies").filter("kind = 'stall'").count() > 0

    # a batch over a range retention cut into analyses what is left, and says what expired
    with caplog.at_level(logging.WARNING, logger="lagscope.analytics.job"):
        run_batch(spark, pruned, tmp_path / "batch", since=dt.date(2026, 1, 1), until=dt.date(2026, 1, 2),
                  settings=SETTINGS, progress=False)
    assert any("the lake's sweeps of 2026-01-01 … 2026-01-01 have expired" in r.getMessage()
               for r in caplog.records)
    days = {r["date"] for r in _read(spark, tmp_path / "batch", "lag_trends").select("date").distinct().collect()}
    assert days == {dt.date(2026, 1, 2)}
