"""A lake writer killed with SIGKILL while it writes to an object store leaves nothing a reader
takes for a complete file: 20 kills of a process writing lake files to the real S3 server
fixture, then every committed file reads whole (0 quarantined), no row twice, and exactly the
rows the commit markers account for."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from helpers.s3server import S3Server

from lagscope import lake

KILLS = 20
ROWS = 2_000  # rows per file: a put takes a few ms, so kills land inside writes too

WRITER = """
import datetime as dt, sys
from lagscope import lake
from lagscope.config import StorageConfig
from lagscope.schema import OFFSETS
from lagscope.storage import open_store

url, endpoint, first, rows = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
store = open_store(url, StorageConfig(endpoint=endpoint, path_style=True, credentials="env"))
ts = dt.datetime(2026, 11, 22, 12, 0, tzinfo=dt.UTC)
for n in range(first, first + 1_000_000):
    lake.write_rows(store, OFFSETS, "prod", [
        {"sweep_ts": ts, "group_id": "g", "topic": "t", "partition": i % 64, "committed_offset": n * rows + i,
         "log_end_offset": n * rows + i + 1, "lag": 1} for i in range(rows)])
    if n == first:
        print("ready", flush=True)  # warm: the kill lands among the next writes
"""


@pytest.mark.slow
def test_sigkill_during_writes_leaves_no_partial_file_and_no_duplicate(
        s3_server: S3Server, s3_prefix: str, quarantined: lake.QuarantineCounts) -> None:
    url = s3_server.url(f"{s3_prefix}/lake")
    env = {**os.environ, **{k: v for k, v in s3_server.credentials.items() if v}}
    rng = random.Random(24)
    for kill in range(KILLS):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, url, s3_server.endpoint, str(kill * 100_000),
                                 str(ROWS)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready", proc.stderr.read() if proc.stderr else b""
        time.sleep(rng.uniform(0.05, 0.6))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
    store = s3_server.store(f"{s3_prefix}/lake")
    [folder] = lake.object_date_folders(store, "offsets", None, None, None)
    names = store.names(folder)
    committed = lake.committed_names(names)
    markers = [json.loads(store.get(f"{folder}/{lake.COMMIT_MARKER_PREFIX}{n}")) for n in committed]
    got = lake.read_table(store, "offsets")
    assert quarantined.snapshot() == {}  # no committed file was partial
    offsets = got.column("committed_offset").to_pylist()
    assert len(offsets) == len(set(offsets))  # no row twice
    assert len(offsets) == sum(m["rows"] for m in markers) == ROWS * len(committed)
    assert len(committed) >= 2 * KILLS  # each writer committed its first file, and more before its kill
    uncommitted = [n for n in names if not n.startswith("_") and n not in committed]
    print(f"{len(committed)} committed files, {len(uncommitted)} objects a killed writer left uncommitted")
