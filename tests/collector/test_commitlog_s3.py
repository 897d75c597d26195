"""The ``__consumer_offsets`` tail writing a lake on the real S3 server fixture (a fake consumer, as
in test_commitlog.py): the same commits and group events as on local disk for the same log; its
positions object; a tail that dies between a file's object and its commit marker, or between two
tables' files, resumes with every row once and leaves nothing a reader takes; a tail process
killed with SIGKILL during its writes, restarted a few times, ends with every row exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.s3server import S3Server
from test_commitlog import T0, Crash, _append, _drain, _factory, _mixed_log, offset_key, offset_value

from lagscope import lake
from lagscope.collector.commitlog import CommitLogStateError, CommitLogTailer
from lagscope.errors import LakeError
from lagscope.storage import Store

HERE = Path(__file__).resolve().parent


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/lake")  # type: ignore[no-any-return]


def _rows(root: Path | Store, table: str) -> list[tuple[Any, ...]]:
    """Every row of ``table``, partition columns included, as sorted tuples."""
    data = lake.read_table(root, table, cluster="c1").to_pylist()
    return sorted(tuple(str(v) for v in r.values()) for r in data)


def _keys(root: Path | Store, table: str = "commits") -> list[tuple[int, int]]:
    data = lake.read_table(root, table, cluster="c1", columns=["source_partition", "source_offset"])
    return sorted(zip(data.column("source_partition").to_pylist(), data.column("source_offset").to_pylist(),
                      strict=True))


def _uncommitted(store: Store, table: str) -> list[str]:
    """The Parquet objects of ``table`` without a commit marker (what a killed writer leaves)."""
    out = []
    for folder in lake.object_date_folders(store, table, "c1", None, None):
        names = store.names(folder)
        committed = set(lake.committed_names(names))
        out += [f"{folder}/{n}" for n in names
                if n.endswith(".parquet") and not n.startswith("_") and n not in committed]
    return out


def test_same_rows_on_s3_as_on_disk(tmp_path: Path, store: Store) -> None:
    log = _mixed_log(40)
    for root in (tmp_path, store):
        _drain(CommitLogTailer("x:1", root, "c1", start="earliest", consumer_factory=_factory(log),
                               flush_records=7, max_poll_records=5))
    for i in range(6):  # more after a restart: the saved positions are the bucket's object
        _append(log, i % 2, offset_key("g0", "orders", 0), offset_value(3, 200 + i, "", T0, leader_epoch=1), T0)
    tails = [CommitLogTailer("x:1", root, "c1", start="latest", consumer_factory=_factory(log))
             for root in (tmp_path, store)]
    for t in tails:
        _drain(t)
    assert tails[1].state_file == store.url_of("_state/commitlog/c1.json")
    assert json.loads(store.get("_state/commitlog/c1.json"))["positions"] == \
        json.loads(Path(tails[0].state_file).read_text())["positions"]
    for table in ("commits", "group_events"):
        on_disk = _rows(tmp_path, table)
        assert on_disk, table
        assert _rows(store, table) == on_disk
    assert len(_keys(store)) == len(set(_keys(store))) == 47  # 40 + the tombstone + 6 after the restart
    assert not _uncommitted(store, "commits")
    assert not _uncommitted(store, "group_events")


def test_killed_between_object_and_marker_leaves_nothing_read_and_no_duplicate(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _mixed_log(40)
    real_put = Store.put

    def put(self: Store, rel: str, data: bytes) -> None:
        if rel.startswith("group_events/") and lake.COMMIT_MARKER_PREFIX in rel:
            raise Crash  # the group_events object is in the bucket, its marker never comes
        real_put(self, rel, data)

    with monkeypatch.context() as m:
        m.setattr(Store, "put", put)
        t = CommitLogTailer("x:1", store, "c1", start="earliest", consumer_factory=_factory(log))
        t.open()
        while t.measure_lag() != 0:
            t.poll_batch(0)
        with pytest.raises(Crash):
            t.flush()
    assert len(_uncommitted(store, "group_events")) == 1  # the dead writer's object …
    assert _keys(store, "group_events") == []  # … which no reader takes
    assert len(_keys(store)) == 41  # the commits file was committed before the crash
    pending = json.loads(store.get("_state/commitlog/c1.json"))["pending"]
    assert pending
    assert set(pending["folders"]) == {"commits", "group_events"}

    again = CommitLogTailer("x:1", store, "c1", start="earliest", consumer_factory=_factory(log))
    _drain(again)
    assert again.stats.duplicates_skipped == 41  # the committed commits were read back, not rewritten
    commits, events = _keys(store), _keys(store, "group_events")
    assert len(commits) == len(set(commits)) == 41
    assert len(events) == len(set(events)) == 8  # written again once, in a new committed file
    assert not json.loads(store.get("_state/commitlog/c1.json"))["pending"]


# -- SIGKILL during the writes ----------------------------------------------------------------

_CHILD = """
import sys, threading, time
sys.path[:0] = [{here!r}]
from test_commitlog import _factory, _mixed_log
from helpers.s3server import S3Server
from lagscope.collector.commitlog import CommitLogStateError, CommitLogTailer
from lagscope.errors import LakeError
from lagscope.config import StorageConfig
from lagscope.storage import open_store

store = open_store({url!r}, StorageConfig(endpoint={endpoint!r}, path_style=True, credentials="env"))
log = _mixed_log({n})
t = CommitLogTailer("x:1", store, "c1", start="earliest", consumer_factory=_factory(log),
                    max_poll_records=3, flush_records=2, poll_timeout_ms=0)
t.open()
print("ready", flush=True)
while True:  # flushes every two records until killed; once at the end it idles
    t.run_once(0)
    print("polled", flush=True)  # the parent kills after a number of these, during the next writes
    if t.measure_lag() == 0:
        t.flush()
        print("done", flush=True)
        time.sleep(60)
"""


def test_sigkill_during_writes_then_restart_every_row_once(store: Store, s3_server: S3Server) -> None:
    n = 120
    code = _CHILD.format(here=str(HERE), url=store.url, endpoint=s3_server.endpoint, n=n)
    env = {**os.environ, **{k: v for k, v in s3_server.credentials.items() if v},
           "PYTHONPATH": os.pathsep.join([str(HERE), str(HERE.parent)])}
    mid_run = 0  # kills that found the tail before its end
    # each kill lands a few polls into a life (not after a fixed time, which a fast or a loaded
    # machine turns into "after the end" or "before the first write"), at a point inside the
    # writes that follow the poll it waited for
    for polls, pause in ((3, 0.0), (6, 0.004), (2, 0.011), (8, 0.002), (5, 0.007)):
        proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
            seen = 0
            while seen < polls and (line := proc.stdout.readline().strip()) not in ("", "done"):
                seen += line == "polled"
            time.sleep(pause)
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
        finally:
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            assert proc.stdout is not None
            proc.stdout.close()
        # after each kill: whatever a reader takes is whole, and no row is there twice
        keys = _keys(store)
        assert len(keys) == len(set(keys))
        mid_run += len(keys) < n + 1
        assert len(_keys(store, "group_events")) == len(set(_keys(store, "group_events")))
    assert mid_run >= 3
    final = CommitLogTailer("x:1", store, "c1", start="earliest", consumer_factory=_factory(_mixed_log(n)))
    _drain(final)
    commits = _keys(store)
    assert len(commits) == len(set(commits)) == n + 1  # the commits and the tombstone, each once
    events = _keys(store, "group_events")
    assert len(events) == len(set(events)) == n // 5


def test_a_failed_read_of_the_positions_object_is_retried_not_fatal(store: Store,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    log = _mixed_log(10)
    _drain(CommitLogTailer("x:1", store, "c1", start="earliest", consumer_factory=_factory(log)))
    real_get = Store.get
    failures = [OSError("When reading information for key 'x': AWS Error NETWORK_CONNECTION")]

    def get(self: Store, rel: str) -> bytes:
        if failures:
            raise failures.pop()
        return real_get(self, rel)

    monkeypatch.setattr(Store, "get", get)
    t = CommitLogTailer("x:1", store, "c1", start="earliest", consumer_factory=_factory(log))
    with pytest.raises(LakeError) as err:  # run() retries a LakeError after its backoff …
        t.open()
    assert not isinstance(err.value, CommitLogStateError)  # … a CommitLogStateError would stop the tail
    t.close()
    _drain(t)  # the next attempt reads the positions: nothing is read or written again
    assert t.stats.records == 0
    assert len(_keys(store)) == 11
