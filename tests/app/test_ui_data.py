"""The app's queries against the synthetic lake: values, filters, partition pruning, no data."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
import ui_fixture_lake as fx

from lagscope.app import data
from lagscope.app.params import TimeRange
from lagscope.collector.compaction import compact_folder
from lagscope.lake import partition_dir, write_rows
from lagscope.schema import ANOMALIES, COMMITS, OFFSETS, Table

WHOLE = TimeRange(fx.START, fx.END + dt.timedelta(minutes=1))  # status rows are stamped at the end of their minute


def test_only_the_selected_partition_folders_are_read(lake: data.Lake) -> None:
    files = lake.files("offsets", ["prod"], [fx.END.date()])
    assert files
    assert all("/offsets/cluster=prod/date=2026-03-10/" in f for f in files)
    # another date: nothing, and the staging cluster is never listed for prod
    assert lake.files("offsets", ["prod"], [fx.END.date() + dt.timedelta(days=1)]) == []
    assert data.clusters(lake) == ["prod", "staging"]


def test_sources_of_a_published_compaction_are_not_read_twice(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # a compaction that published its file and "crashed" before deleting its sources leaves
    # both until its next run: the app reads the compacted file only
    day = dt.date(2026, 1, 1)
    for i in range(3):
        write_rows(tmp_path, OFFSETS, "c", [{"sweep_ts": dt.datetime(2026, 1, 1, 0, 0, 10 * i, tzinfo=dt.UTC),
                                            "group_id": "g", "topic": "t", "partition": 0,
                                            "committed_offset": i, "log_end_offset": 10}], date=day)
    folder = partition_dir(tmp_path, "offsets", "c", day)
    monkeypatch.setattr(Path, "unlink", lambda self, missing_ok=False: None)
    compact_folder(folder, now=dt.datetime.now(dt.UTC) + dt.timedelta(hours=3))
    monkeypatch.undo()
    assert len(list(folder.glob("*.parquet"))) == 4
    files = data.Lake(tmp_path, tmp_path / "results").files("offsets", ["c"], [day])
    assert [Path(f).name for f in files] == [p.name for p in folder.glob("compact-*.parquet")]


def test_data_end_is_the_newest_result(con: Any, lake: data.Lake) -> None:
    end = data.data_end(con, lake, "prod")
    assert end is not None
    assert end >= fx.END - dt.timedelta(minutes=1)


def test_overview_lists_groups_worst_first(con: Any, lake: data.Lake, ui_lake: fx.FixtureLake) -> None:
    ov = data.group_overview(con, lake, ["prod", "staging"], WHOLE)
    assert ov["group_id"].tolist() == ["orders-svc", "audit", "billing"]  # ERR, WARN, OK
    assert ov["status"].tolist() == ["ERR", "WARN", "OK"]
    orders = ov.iloc[0]
    assert orders["lag"] == sum(v for (g, _, _), v in ui_lake.final_lag.items() if g == "orders-svc")
    # filtered by cluster: staging's group only
    assert data.group_overview(con, lake, ["staging"], WHOLE)["group_id"].tolist() == ["audit"]


def test_events_overlapping_the_range(con: Any, lake: data.Lake, ui_lake: fx.FixtureLake) -> None:
    rb = data.rebalances(con, lake, ["prod"], WHOLE, "orders-svc")
    # the window was also written while open (cause unknown); the row with the latest as_of_ts is current
    assert rb["cause"].tolist() == ["session_timeout"]
    assert rb["duration_s"].tolist() == [60.0]
    before = TimeRange(fx.START, fx.REBALANCE_START - dt.timedelta(minutes=1))
    assert data.rebalances(con, lake, ["prod"], before).empty
    an = data.anomalies(con, lake, ["prod"], WHOLE, "orders-svc", "orders", 2)
    # partition 2's skip plus the group-level lag growth; partition 1's rewind is filtered out
    assert sorted(an["kind"]) == ["lag_growth", "skip"]
    assert an.loc[an["kind"] == "skip", "magnitude"].item() == ui_lake.skipped  # not the superseded open row
    # the lag growth is still open: it overlaps a range long after its start
    late = TimeRange(fx.END - dt.timedelta(minutes=5), fx.END)
    assert data.anomalies(con, lake, ["prod"], late)["kind"].tolist() == ["lag_growth"]


def test_a_withdrawn_anomaly_is_omitted_and_files_without_the_column_still_read(con: Any, tmp_path: Path) -> None:
    # three stalls written open by a file from before the withdrawn column
    lake = data.Lake(tmp_path, tmp_path)
    start = fx.START + dt.timedelta(minutes=5)

    def stall(p: int, as_of: dt.datetime, end: dt.datetime | None = None, **kw: Any) -> dict[str, Any]:
        return {"group_id": "g", "topic": "t", "partition": p, "kind": "stall", "start_ts": start, "end_ts": end,
                "severity": "critical", "magnitude": 120.0, "unit": "s", "detail": "", "key": f"stall|prod|g|t|{p}",
                "as_of_ts": as_of, **kw}

    old = Table("anomalies", pa.schema([f for f in ANOMALIES.schema if f.name != "withdrawn"]), ANOMALIES.doc)
    write_rows(tmp_path, old, "prod", [stall(p, start + dt.timedelta(minutes=1)) for p in range(3)])
    first = data.anomalies(con, lake, ["prod"], WHOLE)
    assert "withdrawn" not in first.columns
    assert sorted(first["partition"]) == [0, 1, 2]
    # a later step withdraws partition 0's (end_ts set) and writes partition 1's again; partition
    # 2's current row is the old file's (null: not withdrawn)
    later = start + dt.timedelta(minutes=2)
    write_rows(tmp_path, ANOMALIES, "prod", [
        stall(0, later, start + dt.timedelta(seconds=120), detail="withdrawn: test", withdrawn=True),
        stall(1, later, withdrawn=False)])
    assert sorted(data.anomalies(con, lake, ["prod"], WHOLE)["partition"]) == [1, 2]
    assert data.anomalies(con, lake, ["prod"], WHOLE, "g", "t", 0).empty
    # reported again by a later step: shown again
    write_rows(tmp_path, ANOMALIES, "prod", [stall(0, later + dt.timedelta(minutes=1), withdrawn=False)])
    assert sorted(data.anomalies(con, lake, ["prod"], WHOLE)["partition"]) == [0, 1, 2]


def test_lag_series_levels(con: Any, lake: data.Lake) -> None:
    group = data.lag_series(con, lake, "prod", "orders-svc", WHOLE, "group")
    assert group["topic"].isna().all()
    assert len(group) == 120
    assert group["window_start"].is_monotonic_increasing
    topic = data.lag_series(con, lake, "prod", "orders-svc", WHOLE, "topic")
    assert set(topic["topic"]) == {"orders"}
    assert topic["partition"].isna().all()
    assert data.topics_of(con, lake, "prod", "orders-svc", WHOLE) == ["orders"]


def test_latest_partitions_worst_first(con: Any, lake: data.Lake, ui_lake: fx.FixtureLake) -> None:
    latest = data.latest_partitions(con, lake, "prod", "orders-svc", WHOLE)
    assert len(latest) == 4
    expected = sorted(((v, p) for (g, _, p), v in ui_lake.final_lag.items() if g == "orders-svc"), reverse=True)
    assert latest["lag_last"].tolist() == [v for v, _ in expected]
    pairs = [("orders", 1), ("orders", 3)]
    series = data.partition_series(con, lake, "prod", "orders-svc", WHOLE, pairs)
    assert sorted(set(zip(series["topic"], series["partition"], strict=True))) == pairs


def test_members_at_a_time(con: Any, lake: data.Lake) -> None:
    before = data.members_at(con, lake, "prod", "orders-svc", fx.REBALANCE_START - dt.timedelta(seconds=1))
    assert before["member_id"].tolist() == ["m-a", "m-b"]
    after = data.members_at(con, lake, "prod", "orders-svc", fx.END)
    assert after["member_id"].tolist() == ["m-a"]
    assert [(a["topic"], a["partition"]) for a in after["assignment"].iloc[0]] == [("orders", p) for p in range(4)]


def test_commit_history_prefers_the_commit_stream(con: Any, tmp_path: Any, ui_lake: fx.FixtureLake) -> None:
    lake = data.Lake(ui_lake.root, ui_lake.root)
    from_offsets, source = data.commit_history(con, lake, "prod", "billing", WHOLE, "payments", 0)
    assert source == "offsets"
    assert len(from_offsets) == 240
    # a lake with the __consumer_offsets tail: exact commit times win
    root = tmp_path / "with-commits"
    rows = [{"group_id": "g", "topic": "t", "partition": 0, "committed_offset": 10 * i, "leader_epoch": 0,
             "metadata": "", "commit_ts": fx.START + dt.timedelta(seconds=i), "expire_ts": None,
             "record_ts": fx.START + dt.timedelta(seconds=i), "source_partition": 3, "source_offset": i,
             "value_version": 3} for i in range(5)]
    rows.append({**rows[-1], "committed_offset": None, "source_offset": 99})  # a tombstone is not a commit
    write_rows(root, COMMITS, "prod", rows)
    exact, source = data.commit_history(con, data.Lake(root, root), "prod", "g", WHOLE, "t", 0)
    assert source == "commits"
    assert exact["committed_offset"].tolist() == [0, 10, 20, 30, 40]


def test_an_empty_lake_reads_as_empty_frames(con: Any, empty_lake: data.Lake) -> None:
    assert data.clusters(empty_lake) == []
    assert data.data_end(con, empty_lake, None) is None
    assert data.group_overview(con, empty_lake, ["prod"], WHOLE).empty
    for frame in (data.rebalances(con, empty_lake, ["prod"], WHOLE),
                  data.anomalies(con, empty_lake, ["prod"], WHOLE),
                  data.lag_series(con, empty_lake, "prod", "g", WHOLE),
                  data.latest_partitions(con, empty_lake, "prod", "g", WHOLE),
                  data.members_at(con, empty_lake, "prod", "g", fx.END),
                  data.offsets_between(con, empty_lake, "prod", "g", WHOLE)):
        assert isinstance(frame, pd.DataFrame)
        assert frame.empty
