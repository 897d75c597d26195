"""Reading the lake as a step's route tasks do: each row once, also beside an interrupted compaction."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from analytics_builders import T0, offsets_rows

from lagscope.analytics.io import spark_arrow_schema
from lagscope.analytics.step import read_files
from lagscope.collector.compaction import compact_folder
from lagscope.lake import list_files, partition_dir, write_rows
from lagscope.schema import OFFSETS


def test_sources_of_a_published_compaction_are_not_read_twice(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # three sweeps, one file each; compaction publishes its file, then "crashes" before deleting
    # the sources (they stay until its next run): listing the folder itself would read both
    for i in range(3):
        rows = offsets_rows([(10 * i, 100 + i, 200 + i)])
        write_rows(tmp_path, OFFSETS, "c", rows, date=T0.date())
    folder = partition_dir(tmp_path, "offsets", "c", T0.date())
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)
    compact_folder(folder, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=3))
    monkeypatch.undo()
    assert len(list(folder.glob("*.parquet"))) == 4  # the compacted file and its three sources

    paths = [str(p) for p in list_files(tmp_path, "offsets", since=T0.date(), until=T0.date())]
    got = read_files(paths, spark_arrow_schema("offsets"), tmp_path / "offsets")
    assert sorted((r["committed_offset"], r["cluster"], r["date"]) for r in got.to_pylist()) == [
        (100 + i, "c", T0.date().isoformat()) for i in range(3)]
