"""An unreadable lake file never stops a step: the driver checks the footers it lists, a route
task names a file that fails past its footer, the file goes into quarantine (one warning,
counted), and the step's results are those of the lake without it."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from helpers.bad_files import in_quarantine, quarantine_lines, sample_lake, spoil
from prometheus_client import CollectorRegistry
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from lagscope import lake as lakes
from lagscope import results
from lagscope.analytics import job
from lagscope.analytics.job import RESULT_TABLES, run_incremental
from lagscope.cli import app
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.lake import QuarantineCounts
from lagscope.storage import open_store

SETTINGS = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=30, stop_after_s=30))
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _results(root: Path) -> dict[str, list[tuple[tuple[str, str], ...]]]:
    """Every result table's rows, sorted (a row as its (column, value) pairs)."""
    out = {}
    for table in RESULT_TABLES:
        rows = results.read(root, table).to_pylist()
        out[table] = sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows)
    return out


def _lakes(tmp_path: Path, table: str, index: int) -> tuple[Path, Path, Path]:
    """A lake, the same lake without one file of ``table``, and that file (still in the first)."""
    bad, clean = tmp_path / "lake", tmp_path / "clean"
    files = sample_lake(bad, T0)
    shutil.copytree(bad, clean)
    victim = files[table][index]
    (clean / victim.relative_to(bad)).unlink()
    return bad, clean, victim


def _analyze(lake: Path, out: Path) -> str:
    done = CliRunner().invoke(app, ["analyze", "--lake", str(lake), "--results", str(out), "--since",
                                    T0.date().isoformat(), "--until", T0.date().isoformat(), "--no-progress"])
    assert done.exit_code == 0, done.output
    return done.output


# (table, how its file goes bad): each table a step reads, each way a file fails (the footer
# checked on the driver, or a page that fails only in the route task)
CASES = [("offsets", "truncated"), ("members", "garbage"), ("commits", "newer_major"), ("offsets", "corrupt_page"),
         ("commits", "corrupt_page")]


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("table", "kind"), CASES)
def test_analyze_goes_on_without_a_bad_file(spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                            quarantined: QuarantineCounts, table: str, kind: str) -> None:
    bad, clean, victim = _lakes(tmp_path, table, 11)  # a sweep in the middle of the stall
    spoil(victim, kind)

    said = _analyze(bad, tmp_path / "out")

    moved = in_quarantine(victim)
    assert moved.exists()
    assert not victim.exists()
    # the printed summary names it; one warning line says what and where
    assert f"analysed without {victim} ({table}, unreadable: " in said
    assert f"quarantined: {moved}" in said
    lines = quarantine_lines(caplog)
    assert len(lines) == 1
    assert str(victim) in lines[0]
    assert str(moved) in lines[0]
    registry = CollectorRegistry()
    registry.register(quarantined)
    assert registry.get_sample_value("lagscope_lake_files_quarantined_total", {"cluster": "c", "table": table}) == 1
    # the results are those of the lake without the file: nothing else is lost
    _analyze(clean, tmp_path / "want")
    got, want = _results(tmp_path / "out"), _results(tmp_path / "want")
    assert got == want
    assert got["lag_trends"]
    assert got["status"]
    # read again (the loop's next step): the file is not seen, nothing more is said
    caplog.clear()
    _analyze(bad, tmp_path / "again")
    assert quarantine_lines(caplog) == []
    assert quarantined.snapshot() == {("c", table): 1}


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_an_incremental_step_goes_on_and_says_so(spark: SparkSession, tmp_path: Path,
                                                 quarantined: QuarantineCounts) -> None:
    bad, clean, victim = _lakes(tmp_path, "offsets", 15)  # in the second step's range
    spoil(victim, "corrupt_page")
    first = run_incremental(spark, bad, tmp_path / "out", settings=SETTINGS, since=T0, until=T0 + dt.timedelta(
        minutes=2))
    assert first.quarantined == ()
    second = run_incremental(spark, bad, tmp_path / "out", settings=SETTINGS, until=T0 + dt.timedelta(minutes=4))
    assert [(q.path, q.table, q.moved_to) for q in second.quarantined] == [(victim, "offsets", in_quarantine(victim))]
    assert "unreadable Parquet data" in second.quarantined[0].reason
    for until in (2, 4):
        run_incremental(spark, clean, tmp_path / "want", settings=SETTINGS, since=T0,
                        until=T0 + dt.timedelta(minutes=until))
    assert _results(tmp_path / "out") == _results(tmp_path / "want")
    assert quarantined.snapshot() == {("c", "offsets"): 1}


def test_a_route_task_names_a_file_it_cannot_read_instead_of_failing(tmp_path: Path) -> None:
    # the route stage's function as a Spark task runs it, in this process: a readable file's
    # rows go on in blobs, an unreadable one is one row naming it (no rows of it are used)
    files = sample_lake(tmp_path, T0, sweeps=2)
    good, broken = files["offsets"]
    spoil(broken, "corrupt_page")
    plan = job._Plan(lake=open_store(tmp_path), results=open_store(tmp_path / "out"), settings=SETTINGS,
                     history_points=10, as_of=T0, buckets=1, places=(7,), staging={}, state_out=None)
    listing = pa.RecordBatch.from_pydict({"tbl": [["offsets", "offsets"]], "path": [[str(good), str(broken)]]})
    out = pa.Table.from_batches(list(job._route(plan)(iter([listing]))))
    tables = out.column("tbl").to_pylist()
    assert tables == ["offsets", "!unreadable"]
    path, reason = out.column("blob")[1].as_py().decode().split("\n", 1)
    assert path == str(broken)
    assert reason.startswith("unreadable Parquet data: ")
    assert pa.ipc.open_stream(out.column("blob")[0].as_py()).read_all().num_rows == 2
    assert broken.exists()  # the driver moves it, not the task
    assert lakes.QUARANTINE_DIR not in {p.name for p in (tmp_path / "offsets").iterdir()}
