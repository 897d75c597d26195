"""The S3-against-disk benchmark (benchmarks/s3_vs_disk.py) at a tiny size: it starts its own
gofakes3 and stops it by PID, measures the batch, the incremental step and the sweep write on a
folder and on the bucket with the same result rows on both, reports them side by side with the
ratio, and records (``--out``) only under the load bound. Its parts on the session's S3 server: the
sweep it writes is the collector's (rows in the bucket through the lake's reader), the primed
results are copied object for object."""

from __future__ import annotations

import datetime as dt
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.benchmarks import BENCHMARKS, load_benchmark
from helpers.s3server import S3Server

from lagscope import lake
from lagscope.schema import MEMBERS, OFFSETS, SWEEPS

SCRIPT = BENCHMARKS / "s3_vs_disk.py"

#: a row of the side-by-side table: label, rows, disk median, S3 median, ratio, disk runs, S3 runs
ROW = re.compile(r"^\| (?P<label>[^|]+) \| (?P<rows>[\d,]+) \| (?P<disk>[\d.]+) \| (?P<s3>[\d.]+) \| "
                 r"\*\*(?P<ratio>[\d.]+)×\*\* \| (?P<disk_runs>[^|]+) \| (?P<s3_runs>[^|]+) \|", re.M)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=540,
                          check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tiny_run_reports_disk_and_s3_side_by_side_and_records_it(tmp_path: Path) -> None:
    out = tmp_path / "s3_vs_disk.md"
    work = tmp_path / "work"
    proc = _run("--rows", "20000", "--keys", "200", "--groups", "10", "--batch-runs", "2",
                "--incremental-rows", "400", "--incremental-runs", "2", "--history-every-min", "60",
                "--rebalanced-groups", "2", "--sweep-partitions", "2000", "--sweep-runs", "3",
                "--shuffle-partitions", "2", "--workdir", str(work), "--out", str(out), "--max-load", "1000")
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = proc.stdout
    # recorded: the file holds the printed report
    assert out.read_text().strip() == report.strip()
    assert "WARNING: load average" not in proc.stderr

    rows = {m["label"]: m for m in ROW.finditer(report)}
    assert set(rows) == {"batch, all result tables", "incremental step, 1 new sweep, 1 day of history",
                         "sweep write (`LakeSink.update`)"}, report
    expected = {"batch": (20_000, 2), "incremental": (400, 2), "sweep": (2_000, 3)}
    for label, m in rows.items():
        n, runs = expected[label.split()[0].rstrip(",")]
        assert int(m["rows"].replace(",", "")) == n, label
        disk = [float(x) for x in m["disk_runs"].split(",")]
        s3 = [float(x) for x in m["s3_runs"].split(",")]
        assert len(disk) == len(s3) == runs, label
        assert all(x > 0 for x in disk + s3), label
        # the ratio is the medians' (up to the report's rounding of the medians and of the ratio)
        h = {k: 0.5 * 10.0 ** -len(m[k].partition(".")[2]) for k in ("s3", "disk", "ratio")}
        low = (float(m["s3"]) - h["s3"]) / (float(m["disk"]) + h["disk"]) - h["ratio"]
        high = (float(m["s3"]) + h["s3"]) / (float(m["disk"]) - h["disk"]) + h["ratio"]
        assert low <= float(m["ratio"]) <= high, (label, m["s3"], m["disk"], m["ratio"])

    # the batch and the step wrote the same rows on both roots, and not none
    same = re.findall(r"the same on both roots: (.*)\.$", report, re.M)
    assert len(same) == 2, report
    assert "differ" not in report
    counts = [dict((t, int(n.replace(",", ""))) for t, n in re.findall(r"(\w+) ([\d,]+)", s)) for s in same]
    assert counts[0]["lag_trends"] > 0, report
    assert counts[0]["status"] > 0, report
    assert counts[1]["lag_trends"] > 0, report
    assert counts[1]["rebalances"] == 2, report  # the two groups given a new generation in the step's sweep

    # the disk roots were written on disk, the bucket in gofakes3's database, and the server is gone
    assert list((work / "disk" / "lake" / "offsets").rglob("*.parquet"))
    assert list((work / "disk" / "sweep-lake" / "offsets").rglob("*.parquet"))
    assert (work / "s3" / "objects.db").stat().st_size > 0
    pid = int(re.search(r"PID (\d+)", report).group(1))  # type: ignore[union-attr]
    assert not _alive(pid)
    assert "load average at start" in report
    assert "Load average at end" in report


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_above_the_load_bound_it_prints_the_report_and_a_warning_but_records_nothing(tmp_path: Path) -> None:
    out = tmp_path / "s3_vs_disk.md"
    proc = _run("--skip-batch", "--skip-incremental", "--sweep-partitions", "500", "--sweep-runs", "1",
                "--out", str(out), "--max-load", "-1")
    assert proc.returncode == 3, proc.stderr[-4000:]
    assert "WARNING: load average" in proc.stderr
    assert "not recorded" in proc.stderr
    assert str(out) in proc.stderr
    assert not out.exists()
    assert "sweep write (`LakeSink.update`)" in proc.stdout


def test_the_sweep_it_writes_is_the_collectors_and_lands_in_the_bucket(s3_server: S3Server, s3_prefix: str) -> None:
    bench = load_benchmark("s3_vs_disk")
    ts = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
    snap = bench.sweep_snapshot(1000, ts)
    assert len(snap.offsets) == 1000
    assert snap.sweep["groups"] == len(snap.members) == 100
    assert snap.sweep["ok"]
    store = s3_server.store(f"{s3_prefix}/lake")
    bench.LakeSink(store).update(snap)
    got = lake.read_table(store, OFFSETS.name, cluster="bench")
    assert got.num_rows == 1000
    assert set(got.column("group_state").to_pylist()) == {"Stable"}
    assert all(m is not None for m in got.column("member_id").to_pylist())
    assert lake.read_table(store, MEMBERS.name, cluster="bench").num_rows == 100
    assert lake.read_table(store, SWEEPS.name, cluster="bench").num_rows == 1


def test_copy_tree_copies_every_object_and_empty_removes_them(s3_server: S3Server, s3_prefix: str,
                                                             tmp_path: Path) -> None:
    bench = load_benchmark("s3_vs_disk")
    src, dst = s3_server.store(f"{s3_prefix}/primed"), s3_server.store(f"{s3_prefix}/results")
    files = {"_state/checkpoint.json": b"{}", "_state/v-1/series/part-0.parquet": b"x" * 10,
             "lag_trends/cluster=c/date=2026-01-01/inc-1-2-00000.parquet": b"y"}
    for rel, data in files.items():
        src.put(rel, data)
    assert bench.copy_tree(src, dst) == 3
    for rel, data in files.items():
        assert dst.get(rel) == data
    bench.empty(dst)
    assert dst.folders("") == []
    assert dst.names("") == []
    assert src.get("_state/checkpoint.json") == b"{}"
    # the same on a folder
    local_src, local_dst = tmp_path / "primed", tmp_path / "results"
    for rel, data in files.items():
        (local_src / rel).parent.mkdir(parents=True, exist_ok=True)
        (local_src / rel).write_bytes(data)
    assert bench.copy_tree(local_src, local_dst) == 3
    assert (local_dst / "_state/v-1/series/part-0.parquet").read_bytes() == b"x" * 10
