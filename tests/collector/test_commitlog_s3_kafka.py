"""The ``__consumer_offsets`` tail against the real broker writing a lake in the real S3 server
fixture: the same commits and group events as a tail of the same broker writing local disk, and a
tail process killed with SIGKILL during its writes and restarted loses nothing and duplicates
nothing in the bucket."""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.s3server import S3Server
from test_commitlog_kafka import Member, _create_topic, _start_iso

from lagscope import lake
from lagscope.collector.commitlog import CommitLogTailer
from lagscope.storage import Store

pytestmark = pytest.mark.kafka


def _rows(root: Path | Store, table: str, cluster: str, group: str) -> list[dict[str, Any]]:
    return [r for r in lake.read_table(root, table, cluster=cluster).to_pylist() if r["group_id"] == group]


def _key(r: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(r[k]) for k in sorted(r) if k not in ("cluster",))


def test_the_same_commits_in_the_bucket_as_on_disk(bootstrap: str, unique: str, tmp_path: Path,
                                                   s3_server: S3Server, s3_prefix: str) -> None:
    topic = unique
    _create_topic(bootstrap, topic, 2)
    store = s3_server.store(f"{s3_prefix}/lake")
    start = _start_iso()
    tails = [CommitLogTailer(bootstrap, root, "live", start=start, flush_interval_s=0.3, poll_timeout_ms=100)
             for root in (tmp_path / "lake", store)]
    stop = threading.Event()
    threads = [threading.Thread(target=t.run, args=(stop,), kwargs={"error_backoff_s": 0.5}, daemon=True)
               for t in tails]
    for th in threads:
        th.start()
    truth: list[tuple[int, int, float]] = []
    try:
        member = Member(bootstrap, topic, itertools.count(1), truth, threading.Lock())
        member.start()
        member.wait_commits(15)
        member.stop.set()
        member.join(20)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if all(len(_rows(t.lake_root, "commits", "live", topic)) >= len(truth) for t in tails):
                break
            time.sleep(0.3)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
    assert all(t.disabled_reason is None for t in tails)
    on_disk, in_bucket = (_rows(t.lake_root, "commits", "live", topic) for t in tails)
    assert sorted((r["partition"], r["committed_offset"]) for r in on_disk) == sorted((p, o) for p, o, _ in truth)
    assert sorted(map(_key, in_bucket)) == sorted(map(_key, on_disk))
    events = [sorted(map(_key, _rows(t.lake_root, "group_events", "live", topic))) for t in tails]
    assert events[0]
    assert events[1] == events[0]


_RUNNER = """
import os, sys
from lagscope.collector.commitlog import CommitLogTailer
from lagscope.config import StorageConfig
from lagscope.storage import open_store
bootstrap, url, endpoint, start, done = sys.argv[1:]
store = open_store(url, StorageConfig(endpoint=endpoint, path_style=True, credentials="env"))
t = CommitLogTailer(bootstrap, store, "killtest", start=start, flush_records=10,
                    flush_interval_s=0.05, poll_timeout_ms=50, max_poll_records=7)
t.open()
print("open", flush=True)
while True:
    t.run_once()
    if os.path.exists(done) and t.measure_lag() == 0:
        t.flush()
        break
t.close()
"""


@pytest.mark.slow
def test_sigkill_and_restart_in_the_bucket_loses_nothing_and_duplicates_nothing(
        bootstrap: str, unique: str, tmp_path: Path, s3_server: S3Server, s3_prefix: str) -> None:
    topic = unique
    _create_topic(bootstrap, topic, 2)
    store = s3_server.store(f"{s3_prefix}/lake")
    script = tmp_path / "runner.py"
    script.write_text(_RUNNER)
    done = tmp_path / "done"
    truth: list[tuple[int, int, float]] = []
    member = Member(bootstrap, topic, itertools.count(1), truth, threading.Lock())
    member.start()
    env = {**os.environ, **{k: v for k, v in s3_server.credentials.items() if v}}
    cmd = [sys.executable, str(script), bootstrap, store.url, s3_server.endpoint, _start_iso(), str(done)]
    kills = 0
    try:
        for _ in range(3):
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "open"
            time.sleep(random.uniform(0.3, 1.0))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            proc.stdout.close()
            kills += 1
            keys = [(r["source_partition"], r["source_offset"]) for r in _rows(store, "commits", "killtest", topic)]
            assert len(keys) == len(set(keys))
        member.wait_commits(5)
    finally:
        member.stop.set()
        member.join(20)
    done.touch()
    final = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert final.returncode == 0, final.stderr[-2000:]
    assert s3_server.credentials["AWS_SECRET_ACCESS_KEY"] not in final.stdout + final.stderr
    commits = _rows(store, "commits", "killtest", topic)
    keys = [(r["source_partition"], r["source_offset"]) for r in commits]
    assert kills == 3
    assert len(keys) == len(set(keys)), "a row was written twice across the restarts"
    assert sorted((r["partition"], r["committed_offset"]) for r in commits) == sorted(
        (p, o) for p, o, _ in truth), "a commit was lost or invented across the restarts"
