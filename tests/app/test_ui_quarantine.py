"""The app's reads skip a file that cannot be read: it goes into its table's quarantine (one
warning) and the page shows what the rest of the lake and the results hold."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import ui_fixture_lake as fx
from helpers.bad_files import KINDS, in_quarantine, quarantine_lines, spoil

from lagscope.app import data
from lagscope.app.params import TimeRange
from lagscope.lake import QuarantineCounts

WHOLE = TimeRange(fx.START, fx.END + dt.timedelta(minutes=1))


def _copies(ui_lake: fx.FixtureLake, tmp_path: Path, table: str) -> tuple[data.Lake, data.Lake, Path]:
    """The fixture lake twice, one with one more file of ``table`` (a copy of one of its files,
    to be spoilt), one without it."""
    bad, clean = tmp_path / "bad", tmp_path / "clean"
    shutil.copytree(ui_lake.root, bad)
    shutil.copytree(ui_lake.root, clean)
    first = Path(sorted(data.Lake(bad, bad).files(table, ["prod"], WHOLE.dates()))[0])
    victim = first.with_name("part-29991231T000000000000-badbad00.parquet")
    shutil.copyfile(first, victim)
    return data.Lake(bad, bad), data.Lake(clean, clean), victim


# (table, the query that reads it)
QUERIES: list[tuple[str, Any]] = [
    ("status", lambda con, lake: data.group_overview(con, lake, ["prod"], WHOLE)),
    ("lag_trends", lambda con, lake: data.lag_series(con, lake, "prod", "orders-svc", WHOLE)),
    ("offsets", lambda con, lake: data.offsets_between(con, lake, "prod", "orders-svc", WHOLE)),
]


@pytest.mark.parametrize(("table", "query"), QUERIES, ids=[q[0] for q in QUERIES])
@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_file_is_quarantined_and_the_page_reads_the_rest(ui_lake: fx.FixtureLake, tmp_path: Path, con: Any,
                                                               caplog: pytest.LogCaptureFixture,
                                                               quarantined: QuarantineCounts,
                                                               table: str, query: Any, kind: str) -> None:
    bad, clean, victim = _copies(ui_lake, tmp_path, table)
    spoil(victim, kind)
    got = query(con, bad)
    pd.testing.assert_frame_equal(got, query(con, clean))
    assert len(got) > 0
    assert in_quarantine(victim).exists()
    assert not victim.exists()
    lines = quarantine_lines(caplog)
    assert len(lines) == 1
    assert str(victim) in lines[0]
    assert f"table {table}" in lines[0]
    assert quarantined.snapshot() == {("prod", table): 1}
