"""The analytics on an object-store lake (analytics/job.py with s3:// roots), on the real S3
server fixture: the same files committed to the bucket as the collector commits them give the
same result tables as the local lake, the checkpoint and the carried state live in the bucket
(one state version, no staging left), an uncommitted object is never read, and a committed
object that fails to decode in a route task is quarantined in the bucket while the step goes on.
The Spark tasks read and write the lake, the staged results and the state through pyarrow's S3
filesystem (the plan they are sent carries the stores)."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from analytics_builders import T0, at, write_stall_lake
from helpers.bad_files import sample_lake, spoil
from helpers.s3server import S3Server
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from lagscope import lake as lakes
from lagscope import results
from lagscope.analytics.io import read_checkpoint
from lagscope.analytics.job import RESULT_TABLES, run_incremental
from lagscope.cli import app
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig
from lagscope.lake import QuarantineCounts
from lagscope.schema import OFFSETS
from lagscope.storage import Store

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SETTINGS = AnalyticsConfig(rules=AnalyticsRulesConfig(stall_after_s=30, stop_after_s=30))


def _results(root: Path | Store) -> dict[str, list[tuple[tuple[str, str], ...]]]:
    """Every result table's rows, sorted (a row as its (column, value) pairs)."""
    out = {}
    for table in RESULT_TABLES:
        rows = results.read(root, table).to_pylist()
        out[table] = sorted(tuple(sorted((k, str(v)) for k, v in r.items())) for r in rows)
    return out


def upload(local: Path, store: Store) -> None:
    """Put a local lake's files into the store, each whole and then its commit marker (as the
    collector commits a file there)."""
    for f in sorted(local.rglob("*.parquet")):
        folder, _, name = f.relative_to(local).as_posix().rpartition("/")
        store.put(f"{folder}/{name}", f.read_bytes())
        store.put(f"{folder}/{lakes.COMMIT_MARKER_PREFIX}{name}", json.dumps({"rows": 0}).encode())


def test_incremental_steps_on_s3_give_the_local_results_and_keep_their_state_there(
        spark: SparkSession, s3_server: S3Server, s3_prefix: str, tmp_path: Path) -> None:
    local = tmp_path / "lake"
    write_stall_lake(local)
    lake, out = s3_server.store(f"{s3_prefix}/lake"), s3_server.store(f"{s3_prefix}/results")
    upload(local, lake)
    # a writer killed before its marker left a whole object of a partition nobody has: never read
    orphan = pa.Table.from_pylist([{"sweep_ts": at(100), "group_id": "g", "topic": "t", "partition": 9,
                                    "committed_offset": 0, "log_end_offset": 10**6, "lag": 10**6}],
                                  schema=OFFSETS.schema)
    sink = pa.BufferOutputStream()
    pq.write_table(orphan, sink)
    lake.put(f"offsets/cluster=c/date={T0.date().isoformat()}/part-orphan.parquet", sink.getvalue().to_pybytes())

    for root_lake, root_out in ((local, tmp_path / "results"), (lake, out)):
        first = run_incremental(spark, root_lake, root_out, settings=SETTINGS, since=T0, until=at(120))
        assert first, "the first step wrote nothing"
        run_incremental(spark, root_lake, root_out, settings=SETTINGS, until=at(240))

    assert _results(out) == _results(tmp_path / "results")
    assert ("partition", "9") not in {pair for rows in _results(out).values() for r in rows for pair in r}
    # the stall partition 1 goes through (commits stuck at 795 from t=90 to 150) is found, from its
    # last commit with work pending to the commit that ended it, closed by the second step
    stalls = [(e["partition"], e["start_ts"], e["end_ts"]) for e in results.current_events(out, "anomalies")
              if e["kind"] == "stall"]
    assert stalls == [(1, at(80), at(160))]
    # the checkpoint and the carried state are in the bucket: one state version, the one the
    # checkpoint names; no staging left behind
    cp = read_checkpoint(out)
    assert cp is not None
    assert dt.datetime.fromisoformat(cp["watermark"]) == at(240)
    assert out.folders("_state") == [cp["version"]]
    assert sorted(out.folders(f"_state/{cp['version']}")) == sorted(
        p.name for p in (tmp_path / "results" / "_state").glob("v-*/*"))
    assert out.folders(".staging") == []
    assert out.names("_state") == ["checkpoint.json"]


def test_a_batch_on_s3_quarantines_an_object_it_cannot_decode_and_goes_on(
        spark: SparkSession, s3_server: S3Server, s3_prefix: str, tmp_path: Path,
        quarantined: QuarantineCounts, monkeypatch: pytest.MonkeyPatch) -> None:
    bad, clean = tmp_path / "lake", tmp_path / "clean"
    files = sample_lake(bad, T0)
    shutil.copytree(bad, clean)
    victim = files["offsets"][15]  # in the stall: its rows change the findings
    (clean / victim.relative_to(bad)).unlink()
    spoil(victim, "corrupt_page")  # the footer reads (the driver's check passes), a page does not
    lake = s3_server.store(f"{s3_prefix}/lake")
    upload(bad, lake)
    # the CLI as a user runs it: s3:// roots, the storage section from --config, the keys from the
    # environment (in this process: it uses the running Spark session)
    for key, value in s3_server.credentials.items():
        if value:
            monkeypatch.setenv(key, value)
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"storage:\n  endpoint: {s3_server.endpoint}\n  path_style: true\n  credentials: env\n"
                      "analytics:\n  rules:\n    stall_after_s: 30\n    stop_after_s: 30\n")
    day = T0.date().isoformat()
    for lake_arg, out_arg in ((str(clean), str(tmp_path / "want")),
                              (lake.url, s3_server.url(f"{s3_prefix}/results"))):
        done = CliRunner().invoke(app, ["analyze", "--config", str(config), "--lake", lake_arg, "--results", out_arg,
                                        "--since", day, "--until", day, "--no-progress"])
        assert done.exit_code == 0, done.output
    out = s3_server.store(f"{s3_prefix}/results")
    assert re.search(rf"lag_trends: [1-9]\d* file\(s\) written under {re.escape(out.url)}/lag_trends\n", done.output)
    name = victim.name
    assert f"analysed without {lake.base}/offsets/cluster=c/date={day}/{name} (offsets, unreadable: " in done.output
    # the step's results are those of the lake without the file
    assert _results(out) == _results(tmp_path / "want")
    assert any(_results(out).values())
    assert quarantined.snapshot() == {("c", "offsets"): 1}
    # moved aside in the bucket: kept under the table's _quarantine, gone (with its marker) from its folder
    assert lake.get(f"offsets/{lakes.QUARANTINE_DIR}/cluster=c/date={day}/{name}") == victim.read_bytes()
    folder = lake.names(f"offsets/cluster=c/date={day}")
    assert name not in folder
    assert f"{lakes.COMMIT_MARKER_PREFIX}{name}" not in folder
