"""Retention of the lake and the result tables (lagscope.retention) on synthetic lakes: which date
partitions expire around the boundary, that today's and anything still written to stay, that the
analytics' checkpoint holds what it has not read, a crash between rename and delete, dry runs,
the lock, the counters and their metrics, the configuration and ``lagscope lake prune``."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from lagscope import retention
from lagscope.cli import app
from lagscope.collector.metrics import RetentionCollector
from lagscope.config import load_config
from lagscope.errors import ConfigError, LakeError
from lagscope.lake import partition_dir, read_table, write_table
from lagscope.retention import Removals, analytics_keep_from, expired_through, prune
from lagscope.schema import OFFSETS, SAMPLE_TABLES, SWEEPS

NOW = dt.datetime(2026, 11, 25, 8, 0, tzinfo=dt.UTC)


def _day(d: dt.date) -> dt.datetime:
    return dt.datetime.combine(d, dt.time(12), dt.UTC)


def _write_day(root: Path, day: dt.date, *, cluster: str = "prod", written: dt.datetime | None = None) -> None:
    """One offsets and one sweeps file of ``day``, last written at ``written`` (default: at the end of
    that day, as the collector would have left it)."""
    ts = _day(day)
    for table, row in ((OFFSETS, {"sweep_ts": ts, "group_id": "g", "topic": "t", "partition": 0,
                                  "committed_offset": 1, "log_end_offset": 5, "lag": 4}),
                       (SWEEPS, {"sweep_ts": ts, "duration_ms": 1.0, "ok": True})):
        write_table(root, table, cluster, pa.Table.from_pylist([row], schema=table.schema), date=day)
    _age(root, day, cluster, written or dt.datetime.combine(day + dt.timedelta(days=1), dt.time(), dt.UTC))


def _age(root: Path, day: dt.date, cluster: str, written: dt.datetime) -> None:
    for table in ("offsets", "sweeps"):
        folder = partition_dir(root, table, cluster, day)
        for p in [*folder.iterdir(), folder]:
            os.utime(p, (written.timestamp(), written.timestamp()))


def _dates(root: Path, table: str = "offsets", cluster: str = "prod") -> list[str]:
    base = root / table / f"cluster={cluster}"
    return sorted(p.name.removeprefix("date=") for p in base.glob("date=*"))


def _lake(root: Path, first: dt.date, last: dt.date, clusters: tuple[str, ...] = ("prod",)) -> None:
    day = first
    while day <= last:
        for c in clusters:
            _write_day(root, day, cluster=c)
        day += dt.timedelta(days=1)


def _tree(root: Path) -> list[tuple[str, int, float]]:
    return sorted((str(p.relative_to(root)), p.stat().st_size if p.is_file() else 0, p.stat().st_mtime)
                  for p in root.rglob("*"))


# ------------------------------------------------------------------------------------------------
# which partitions expire


@pytest.mark.parametrize(("now", "days", "oldest_kept"), [
    # horizon = now − 7 d − 1 d = 11-17 08:00: every day before 11-17 is older than it
    (NOW, 7, "2026-11-17"),
    # just after midnight the horizon's day is 11-17 too (00:00:01): 11-16 ends before it
    (dt.datetime(2026, 11, 25, 0, 0, 1, tzinfo=dt.UTC), 7, "2026-11-17"),
    # just before midnight: still 11-17 (23:59:59 on 11-17)
    (dt.datetime(2026, 11, 25, 23, 59, 59, tzinfo=dt.UTC), 7, "2026-11-17"),
    # one day: yesterday and the day before stay (the extra day of margin)
    (NOW, 1, "2026-11-23"),
    # a local time with an offset is the same instant in UTC: 11-25 01:00+02:00 = 11-24 23:00 UTC
    (dt.datetime(2026, 11, 25, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=2))), 1, "2026-11-22"),
])
def test_partitions_older_than_the_horizon_go_the_others_stay(tmp_path: Path, now: dt.datetime, days: int,
                                                               oldest_kept: str) -> None:
    # 11-10 … 11-26 (tomorrow: a collector whose clock is ahead)
    _lake(tmp_path, dt.date(2026, 11, 10), dt.date(2026, 11, 26), clusters=("prod", "test"))
    done = prune(tmp_path, SAMPLE_TABLES, days=days, now=now)
    for cluster in ("prod", "test"):
        for table in ("offsets", "sweeps"):
            kept = _dates(tmp_path, table, cluster)
            assert kept[0] == oldest_kept
            assert kept[-1] == "2026-11-26"
            assert len(kept) == (dt.date(2026, 11, 26) - dt.date.fromisoformat(oldest_kept)).days + 1
    gone = (dt.date.fromisoformat(oldest_kept) - dt.date(2026, 11, 10)).days
    assert len(done.removed) == gone * 2 * 2  # days × clusters × tables
    assert done.bytes == sum(r.bytes for r in done.removed) > 0
    # the rows of the days left are all still readable
    assert sorted(set(read_table(tmp_path, "offsets").column("date").to_pylist())) == _dates(tmp_path)


def test_today_and_partitions_still_written_to_are_never_removed(tmp_path: Path) -> None:
    today = NOW.date()
    old = dt.date(2026, 10, 1)
    _write_day(tmp_path, today, written=NOW - dt.timedelta(days=400))  # a very old mtime: the date keeps it
    # an old day written to an hour ago (an open anomaly rewritten each step, a late record)
    _write_day(tmp_path, old, written=NOW - dt.timedelta(hours=1))
    # … and one whose last write is only just inside the horizon
    _write_day(tmp_path, dt.date(2026, 10, 2), written=retention.horizon(NOW, 1) + dt.timedelta(seconds=1))
    _write_day(tmp_path, dt.date(2026, 10, 3))  # really expired
    done = prune(tmp_path, SAMPLE_TABLES, days=1, now=NOW)
    assert _dates(tmp_path) == ["2026-10-01", "2026-10-02", today.isoformat()]
    assert {(r.table, r.date.isoformat()) for r in done.removed} == {("offsets", "2026-10-03"),
                                                                   ("sweeps", "2026-10-03")}


@pytest.mark.parametrize("days", [0, None])
def test_zero_or_null_keeps_everything(tmp_path: Path, days: int | None) -> None:
    _lake(tmp_path, dt.date(2020, 1, 1), dt.date(2020, 1, 3))
    before = _tree(tmp_path)
    assert prune(tmp_path, SAMPLE_TABLES, days=days, now=NOW).removed == ()
    assert _tree(tmp_path) == before


def test_only_the_given_tables_and_lagscope_partitions_are_touched(tmp_path: Path) -> None:
    _lake(tmp_path, dt.date(2026, 1, 1), dt.date(2026, 1, 1))
    stray = tmp_path / "offsets" / "cluster=prod" / "date=not-a-date"
    stray.mkdir()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "date=2020-01-01").mkdir()
    done = prune(tmp_path, ["offsets"], days=7, now=NOW)
    assert [(r.table, r.date) for r in done.removed] == [("offsets", dt.date(2026, 1, 1))]
    assert _dates(tmp_path, "sweeps") == ["2026-01-01"]
    assert stray.is_dir()
    assert (tmp_path / "notes" / "date=2020-01-01").is_dir()


# ------------------------------------------------------------------------------------------------
# what the analytics still need


def test_the_analytics_checkpoint_holds_what_it_has_not_read(tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    from lagscope.analytics.io import Checkpoint, write_checkpoint

    lake, results = tmp_path / "lake", tmp_path / "results"
    _lake(lake, dt.date(2026, 10, 1), dt.date(2026, 10, 10))
    assert analytics_keep_from(results) is None  # no checkpoint: no hold
    # the analytics are stuck at 10-05 10:00: the next step reads 10-05 on (its commits from 09:45)
    write_checkpoint(results, Checkpoint(watermark="2026-10-05T10:00:00+00:00", version="v-1"))
    keep_from = analytics_keep_from(results)
    assert keep_from == dt.date(2026, 10, 4)
    with caplog.at_level(logging.WARNING, logger="lagscope.retention"):
        done = prune(lake, SAMPLE_TABLES, days=7, now=NOW, keep_from=keep_from)
    assert _dates(lake) == [f"2026-10-{d:02d}" for d in range(4, 11)]
    assert done.kept_for_analytics == 7 * 2
    assert any("keeping 14 expired lake partition(s) from 2026-10-04 on" in r.getMessage() for r in caplog.records)
    # a checkpoint just after midnight still holds the day before (15 minutes of commits before it)
    write_checkpoint(results, Checkpoint(watermark="2026-10-08T00:05:00+00:00", version="v-2"))
    assert analytics_keep_from(results) == dt.date(2026, 10, 7)


def test_the_commit_lookback_fits_in_the_day_kept_before_the_watermark() -> None:
    from lagscope.analytics.job import COMMIT_LOOKBACK

    # analytics_keep_from keeps the day before the watermark's: enough while the lookback is under a day
    assert dt.timedelta(days=1) > COMMIT_LOOKBACK


def test_an_unreadable_checkpoint_is_an_error_not_a_licence(tmp_path: Path) -> None:
    retention.checkpoint_file(tmp_path).parent.mkdir(parents=True)
    retention.checkpoint_file(tmp_path).write_text("{not json")
    with pytest.raises(LakeError, match="unreadable analytics checkpoint"):
        analytics_keep_from(tmp_path)


def test_the_record_says_which_days_expired(tmp_path: Path) -> None:
    _lake(tmp_path, dt.date(2026, 10, 1), dt.date(2026, 10, 3), clusters=("prod", "test"))
    assert expired_through(tmp_path, "offsets") is None
    _write_day(tmp_path, dt.date(2026, 10, 5), cluster="test")
    prune(tmp_path, SAMPLE_TABLES, days=30, now=dt.datetime(2026, 11, 3, 12, tzinfo=dt.UTC))  # horizon 10-03 12:00
    assert expired_through(tmp_path, "offsets") == dt.date(2026, 10, 2)
    assert expired_through(tmp_path, "offsets", ["prod"]) == dt.date(2026, 10, 2)
    assert expired_through(tmp_path, "offsets", ["other"]) is None
    prune(tmp_path, SAMPLE_TABLES, days=30, now=dt.datetime(2026, 11, 10, tzinfo=dt.UTC))
    assert expired_through(tmp_path, "offsets", ["prod"]) == dt.date(2026, 10, 3)
    assert expired_through(tmp_path, "offsets", ["test"]) == dt.date(2026, 10, 5)


# ------------------------------------------------------------------------------------------------
# atomicity, crashes, dry runs, the lock


class _Crash(BaseException):
    """The process dying (not an Exception: nothing may catch it)."""


def test_a_crash_between_rename_and_delete_is_invisible_and_cleaned_next_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    _lake(tmp_path, dt.date(2026, 10, 1), dt.date(2026, 10, 2))
    real_delete = retention._delete
    calls: list[Path] = []

    def dies_halfway(folder: Path) -> None:
        calls.append(folder)
        first = sorted(folder.iterdir())[0]
        first.unlink()  # part of the folder is already deleted …
        raise _Crash    # … when the process dies

    monkeypatch.setattr(retention, "_delete", dies_halfway)
    with pytest.raises(_Crash):
        prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW)
    # the partition being removed is already out of every reader's sight, the others untouched
    assert len(calls) == 1
    assert calls[0].parent == tmp_path / "_state" / "trash"
    first = read_table(tmp_path, "offsets")
    assert sorted(set(first.column("date").to_pylist())) == ["2026-10-02"]
    assert expired_through(tmp_path, "offsets") == dt.date(2026, 10, 2)  # the intent was recorded first
    monkeypatch.setattr(retention, "_delete", real_delete)
    with caplog.at_level(logging.INFO, logger="lagscope.retention"):
        done = prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW)
    assert done.leftovers == 1
    assert list((tmp_path / "_state" / "trash").iterdir()) == []
    assert {(r.table, r.date.isoformat()) for r in done.removed} == {
        ("offsets", "2026-10-02"), ("sweeps", "2026-10-01"), ("sweeps", "2026-10-02")}
    assert read_table(tmp_path, "offsets").num_rows == 0
    assert any("leftover" in r.getMessage() for r in caplog.records)


def test_each_removal_is_one_log_line_with_the_bytes_freed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _lake(tmp_path, dt.date(2026, 10, 1), dt.date(2026, 10, 1))
    size = sum(f.stat().st_size for f in partition_dir(tmp_path, "offsets", "prod", dt.date(2026, 10, 1)).iterdir())
    with caplog.at_level(logging.INFO, logger="lagscope.retention"):
        prune(tmp_path, ["offsets"], days=7, now=NOW)
    lines = [r.getMessage() for r in caplog.records if r.name == "lagscope.retention"]
    assert lines == [f"retention: removed lake offsets cluster=prod date=2026-10-01 (1 files, {size} bytes freed)"]


def test_a_dry_run_lists_and_removes_nothing(tmp_path: Path) -> None:
    _lake(tmp_path, dt.date(2026, 10, 1), dt.date(2026, 10, 3))
    before = _tree(tmp_path)
    done = prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW, dry_run=True)
    assert done.dry_run
    assert len(done.removed) == 6
    assert _tree(tmp_path) == before  # not even the record, the lock or the trash folder
    # … and then the same partitions go for real
    assert [(r.table, r.date) for r in prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW).removed] == \
        [(r.table, r.date) for r in sorted(done.removed, key=lambda r: (r.date, r.table))]


def test_a_second_pruner_of_the_same_root_skips(tmp_path: Path) -> None:
    _lake(tmp_path, dt.date(2026, 10, 1), dt.date(2026, 10, 1))
    with retention._exclusive(tmp_path) as mine:
        assert mine
        assert prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW).removed == ()
        assert _dates(tmp_path) == ["2026-10-01"]
    assert len(prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW).removed) == 2


def test_negative_days_are_refused(tmp_path: Path) -> None:
    _lake(tmp_path, dt.date(2026, 10, 1), dt.date(2026, 10, 1))
    with pytest.raises(ValueError, match="0 \\(keep everything\\) or more"):
        prune(tmp_path, SAMPLE_TABLES, days=-1, now=NOW)


# ------------------------------------------------------------------------------------------------
# counters and metrics


def test_removals_are_counted_and_served_as_counters(tmp_path: Path) -> None:
    _lake(tmp_path, dt.date(2026, 10, 1), dt.date(2026, 10, 2))
    removals = Removals()
    removals.watch(["prod", "idle"], ["offsets", "sweeps"])
    registry = CollectorRegistry()
    registry.register(RetentionCollector(removals.snapshot))
    value = registry.get_sample_value
    assert value("lagscope_retention_removed_partitions_total", {"cluster": "prod", "table": "offsets"}) == 0
    done = prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW, removals=removals)
    offsets_bytes = sum(r.bytes for r in done.removed if r.table == "offsets")
    assert value("lagscope_retention_removed_partitions_total", {"cluster": "prod", "table": "offsets"}) == 2
    assert value("lagscope_retention_removed_bytes_total", {"cluster": "prod", "table": "offsets"}) == offsets_bytes
    assert value("lagscope_retention_removed_partitions_total", {"cluster": "prod", "table": "sweeps"}) == 2
    assert value("lagscope_retention_removed_partitions_total", {"cluster": "idle", "table": "offsets"}) == 0
    # a dry run counts nothing
    _lake(tmp_path, dt.date(2026, 10, 3), dt.date(2026, 10, 3))
    prune(tmp_path, SAMPLE_TABLES, days=7, now=NOW, removals=removals, dry_run=True)
    assert value("lagscope_retention_removed_partitions_total", {"cluster": "prod", "table": "offsets"}) == 2


# ------------------------------------------------------------------------------------------------
# configuration


def test_defaults_are_documented_days() -> None:
    settings = load_config(None, environ={})
    assert settings.collector.retention == 14
    assert settings.analytics.retention == 30
    env = load_config(None, environ={"LAGSCOPE_COLLECTOR__RETENTION": "3", "LAGSCOPE_ANALYTICS__RETENTION": "0"})
    assert (env.collector.retention, env.analytics.retention) == (3, 0)


@pytest.mark.parametrize(("value", "message"), [
    ("14d", "days to keep, a whole number such as 14 (0 or null keeps everything)"),
    (1.5, "days to keep, a whole number such as 14 (0 or null keeps everything)"),
    (True, "days to keep, a whole number such as 14 (0 or null keeps everything)"),
    (-1, "days to keep must be 0 (keep everything) or more"),
    (10**6, "days to keep: at most 36500 (0 or null keeps everything)"),
])
@pytest.mark.parametrize("section", ["collector", "analytics"])
def test_a_bad_retention_is_one_clear_line(tmp_path: Path, section: str, value: object, message: str) -> None:
    path = tmp_path / "lagscope.yaml"
    path.write_text(yaml.safe_dump({section: {"retention": value}}))
    with pytest.raises(ConfigError) as err:
        load_config(path, environ={})
    assert str(err.value) == f"{section}.retention: {message}"


def test_null_keeps_everything_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "lagscope.yaml"
    path.write_text("collector: {retention: null}\nanalytics: {retention: 0}\n")
    settings = load_config(path, environ={})
    assert (settings.collector.retention, settings.analytics.retention) == (None, 0)


# ------------------------------------------------------------------------------------------------
# lagscope lake prune


def _config(tmp_path: Path, lake: Path, **sections: object) -> Path:
    path = tmp_path / "lagscope.yaml"
    data: dict[str, object] = {"collector": {"lake": str(lake), "retention": 7}}
    data.update(sections)
    path.write_text(yaml.safe_dump(data))
    return path


def test_lake_prune_dry_run_then_for_real(tmp_path: Path) -> None:
    lake, results = tmp_path / "lake", tmp_path / "results"
    old = dt.date(2020, 1, 1)
    _lake(lake, old, old)
    _write_day(results, old)  # stands in for a result partition: same layout
    (results / "offsets").rename(results / "lag_trends")
    config = _config(tmp_path, lake, analytics={"retention": 30})
    before = _tree(tmp_path)
    runner = CliRunner()
    got = runner.invoke(app, ["lake", "prune", "--config", str(config), "--dry-run"])
    assert got.exit_code == 0, got.output
    assert "would remove lake offsets cluster=prod date=2020-01-01: 1 files" in got.output
    assert "would remove results lag_trends cluster=prod date=2020-01-01: 1 files" in got.output
    assert f"lake {lake}: would remove 2 partition(s) older than 7 days" in got.output
    assert _tree(tmp_path) == before
    got = runner.invoke(app, ["lake", "prune", "--config", str(config)])
    assert got.exit_code == 0, got.output
    assert f"lake {lake}: removed 2 partition(s) older than 7 days" in got.output
    assert f"results {results}: removed 1 partition(s) older than 30 days" in got.output
    assert _dates(lake) == []
    assert _dates(results, "lag_trends") == []
    assert _dates(results, "sweeps") == ["2020-01-01"]  # not a result table: not the results' retention's


def test_lake_prune_keeps_forever_when_retention_is_off(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _lake(lake, dt.date(2020, 1, 1), dt.date(2020, 1, 1))
    config = _config(tmp_path, lake, collector={"lake": str(lake), "retention": 0}, analytics={"retention": None})
    got = CliRunner().invoke(app, ["lake", "prune", "--config", str(config)])
    assert got.exit_code == 0, got.output
    assert "kept forever (collector.retention is 0)" in got.output
    assert "kept forever (analytics.retention is None)" in got.output
    assert _dates(lake) == ["2020-01-01"]


def test_lake_prune_with_a_bad_config_exits_2_and_removes_nothing(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _lake(lake, dt.date(2020, 1, 1), dt.date(2020, 1, 1))
    config = _config(tmp_path, lake, collector={"lake": str(lake), "retention": "2w"})
    got = CliRunner().invoke(app, ["lake", "prune", "--config", str(config)])
    assert got.exit_code == 2
    assert "config error: collector.retention: days to keep, a whole number" in got.output
    assert _dates(lake) == ["2020-01-01"]


def test_lake_prune_respects_the_analytics_checkpoint(tmp_path: Path) -> None:
    lake, results = tmp_path / "lake", tmp_path / "results"
    _lake(lake, dt.date(2020, 1, 1), dt.date(2020, 1, 3))
    retention.checkpoint_file(results).parent.mkdir(parents=True)
    retention.checkpoint_file(results).write_text(json.dumps({"watermark": "2020-01-03T00:00:00+00:00",
                                                              "version": "v-1"}))
    got = CliRunner().invoke(app, ["lake", "prune", "--config", str(_config(tmp_path, lake))])
    assert got.exit_code == 0, got.output
    assert "removed 2 partition(s)" in got.output  # 01-01 of offsets and sweeps
    assert "4 expired partition(s) kept until the analytics read them" in got.output
    assert _dates(lake) == ["2020-01-02", "2020-01-03"]
