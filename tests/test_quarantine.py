"""Unreadable files are moved into their table's quarantine and the reading goes on without them
(lagscope.lake: quarantine, check_files, read_live): real Parquet files, spoilt the ways files
go bad, read against the same lake without the file."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pytest
from helpers.bad_files import KINDS, in_quarantine, quarantine_lines, sample_lake, spoil
from prometheus_client import CollectorRegistry

from lagscope import lake, results
from lagscope.collector.compaction import compact_folder
from lagscope.schema import STATUS

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _rows(root: Path, table: str) -> list[tuple[object, ...]]:
    got = lake.read_table(root, table).to_pylist()
    return sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in got)


@pytest.mark.parametrize("table", ["offsets", "members", "commits"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_lake_file_is_quarantined_and_the_rest_reads(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            quarantined: lake.QuarantineCounts,
                                                            kind: str, table: str) -> None:
    bad, clean = tmp_path / "lake", tmp_path / "clean"
    files = sample_lake(bad, T0)
    shutil.copytree(bad, clean)
    victim = files[table][7]
    spoil(victim, kind)
    spoilt = victim.read_bytes()
    (clean / victim.relative_to(bad)).unlink()  # the same lake without that file

    got = _rows(bad, table)

    # the rows are those of the lake without the file, which is no longer among the table's files
    assert got == _rows(clean, table)
    assert len(got) == len(_rows(clean, table)) > 0
    assert victim not in lake.list_files(bad, table)
    # moved, not deleted: byte for byte in the table's quarantine, under its own partition path
    moved = in_quarantine(victim)
    assert moved == bad / table / "_quarantine" / victim.relative_to(bad / table)
    assert moved.read_bytes() == spoilt
    # one warning line naming the file, its table, why, and where it went
    lines = quarantine_lines(caplog)
    assert len(lines) == 1, lines
    assert str(victim) in lines[0]
    assert f"table {table}" in lines[0]
    assert str(moved) in lines[0]
    assert "\n" not in lines[0]
    assert ("newer than the" in lines[0]) == (kind == "newer_major")
    # counted, as the metrics endpoints serve it
    registry = CollectorRegistry()
    registry.register(lake.QUARANTINED)
    assert registry.get_sample_value(lake.QUARANTINE_METRIC, {"cluster": "c", "table": table}) == 1

    # never read again: a second read says nothing and counts nothing
    caplog.clear()
    assert _rows(bad, table) == got
    assert quarantine_lines(caplog) == []
    assert quarantined.snapshot() == {("c", table): 1}


def test_the_other_tables_and_files_are_untouched(tmp_path: Path, quarantined: lake.QuarantineCounts) -> None:
    files = sample_lake(tmp_path, T0)
    spoil(files["offsets"][0], "garbage")
    before = {p: p.read_bytes() for t in ("members", "commits") for p in files[t]}
    for table in ("offsets", "members", "commits"):
        lake.read_table(tmp_path, table)
    assert {p: p.read_bytes() for p in before} == before  # nothing recorded is lost
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("_quarantine/**/*.parquet")) == [
        in_quarantine(files["offsets"][0]).relative_to(tmp_path)]
    assert quarantined.snapshot() == {("c", "offsets"): 1}


def test_a_second_bad_file_of_the_same_name_keeps_the_first(tmp_path: Path,
                                                             quarantined: lake.QuarantineCounts) -> None:
    files = sample_lake(tmp_path, T0, sweeps=3)
    victim = files["offsets"][1]
    spoil(victim, "truncated")
    first = victim.read_bytes()
    lake.read_table(tmp_path, "offsets")
    victim.write_bytes(b"again")  # a new bad file under the same name (a copy tool retrying)
    lake.read_table(tmp_path, "offsets")
    kept = {p.name: p.read_bytes() for p in in_quarantine(victim).parent.iterdir()}
    assert kept == {victim.name: first, f"{victim.stem}.1.parquet": b"again"}
    assert quarantined.snapshot() == {("c", "offsets"): 2}


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_result_file_is_quarantined_and_the_rest_reads(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                             quarantined: lake.QuarantineCounts, kind: str) -> None:
    root = tmp_path / "results"
    rows = [{"group_id": "g", "topic": None, "partition": None, "eval_ts": T0 + dt.timedelta(minutes=i),
             "status": "OK", "lag": i} for i in range(4)]
    paths = [lake.write_rows(root, STATUS, "c", [r]) for r in rows]
    assert all(p is not None for p in paths)
    victim = paths[2]
    assert victim is not None
    spoil(victim, kind)
    got = results.read(root, "status").to_pylist()
    assert sorted(r["lag"] for r in got) == [0, 1, 3]
    assert in_quarantine(victim).exists()
    assert not victim.exists()
    assert len(quarantine_lines(caplog)) == 1
    assert quarantined.snapshot() == {("c", "status"): 1}


def test_compaction_merges_the_readable_sources_only(tmp_path: Path, quarantined: lake.QuarantineCounts) -> None:
    files = sample_lake(tmp_path, T0, sweeps=4)
    spoil(files["offsets"][1], "truncated")
    folder = files["offsets"][0].parent
    want = len(lake.read_table(tmp_path, "offsets"))  # quarantines the bad one
    spoil(files["offsets"][2], "corrupt_page")  # a page that fails only when the merge reads it
    done = compact_folder(folder, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=3))
    assert done.files_out == 0  # the merge stopped at the page: nothing half-merged
    assert in_quarantine(files["offsets"][2]).exists()
    done = compact_folder(folder, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=3))
    assert (done.files_in, done.files_out) == (2, 1)
    assert len(lake.read_table(tmp_path, "offsets")) == want - 2
    assert quarantined.snapshot() == {("c", "offsets"): 2}
