"""The commit-log tailer's logic against a fake consumer: resume, crash repair, fast start, ACLs."""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from commitlog_records import (
    Group,
    Member,
    cg_current_value,
    cg_key,
    consumer_assignment,
    group_key,
    group_value,
    i16,
    offset_key,
    offset_value,
    string,
)
from kafka import TopicPartition
from kafka.errors import TopicAuthorizationFailedError
from kafka.structs import OffsetAndTimestamp

from lagscope import lake
from lagscope.collector import commitlog
from lagscope.collector.commitlog import (
    CommitLogAccessDenied,
    CommitLogStateError,
    CommitLogTailer,
    CommitLogTopicMissing,
    StartPosition,
    parse_start,
    state_path,
)
from lagscope.errors import LakeError

T0 = 1_790_000_000_000  # ms, 2026-09-21


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


class FakeConsumer:
    """Just the KafkaConsumer surface the tailer uses, over an in-memory __consumer_offsets."""

    def __init__(self, log: dict[int, list[Rec]], *, deny_poll: bool = False,
                 hide_topic: threading.Event | None = None, **options: Any) -> None:
        self.log = log
        self.options = options
        self.deny_poll = deny_poll
        self.hide_topic = hide_topic
        self.pos: dict[TopicPartition, int] = {}
        self.closed = False

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        assert topic == "__consumer_offsets"
        return set() if self.hide_topic is not None and self.hide_topic.is_set() else set(self.log)

    def assign(self, tps: list[TopicPartition]) -> None:
        self.pos = {tp: 0 for tp in tps}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.pos[tp] = offset

    def seek_to_beginning(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.pos[tp] = 0

    def seek_to_end(self, *tps: TopicPartition) -> None:
        for tp in tps:
            self.pos[tp] = len(self.log[tp.partition])

    def offsets_for_times(self, query: dict[TopicPartition, int]) -> dict[TopicPartition, Any]:
        out: dict[TopicPartition, Any] = {}
        for tp, ts in query.items():
            hit = next((r for r in self.log[tp.partition] if r.timestamp >= ts), None)
            out[tp] = None if hit is None else OffsetAndTimestamp(hit.offset, hit.timestamp, -1)
        return out

    def position(self, tp: TopicPartition) -> int:
        return self.pos[tp]

    def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: len(self.log[tp.partition]) for tp in tps}

    def poll(self, timeout_ms: int = 0, max_records: int | None = None) -> dict[TopicPartition, list[Rec]]:
        if self.deny_poll:
            raise TopicAuthorizationFailedError("__consumer_offsets")
        out = {}
        for tp, p in self.pos.items():
            recs = self.log[tp.partition][p:p + (max_records or 1000)]
            if recs:
                out[tp] = recs
                self.pos[tp] = p + len(recs)
        if not out:
            time.sleep(timeout_ms / 1000)  # a real consumer waits for data
        return out

    def topics(self) -> set[str]:
        return set()

    def close(self) -> None:
        self.closed = True


def _factory(log: dict[int, list[Rec]], **flags: Any) -> Any:
    def make(**options: Any) -> FakeConsumer:
        return FakeConsumer(log, **flags, **options)
    return make


def _append(log: dict[int, list[Rec]], partition: int, key: bytes | None, value: bytes | None,
            ts: int) -> None:
    part = log.setdefault(partition, [])
    part.append(Rec(len(part), key, value, ts))


def _mixed_log(n: int = 30) -> dict[int, list[Rec]]:
    """Two partitions: commits, classic generations, a tombstone, KIP-848 and junk records."""
    log: dict[int, list[Rec]] = {0: [], 1: []}
    a = consumer_assignment([("orders", [0, 1])])
    for i in range(n):
        p = i % 2
        ts = T0 + i * 1000
        _append(log, p, offset_key(f"g{p}", "orders", i % 3), offset_value(3, i, "", ts, leader_epoch=1), ts)
        if i % 5 == 0:
            g = Group(generation=i, leader="m1", state_ts=ts,
                      members=[Member("m1", session_timeout=10_000, rebalance_timeout=20_000, assignment=a)])
            _append(log, p, group_key(f"g{p}"), group_value(3, g), ts)
    _append(log, 0, offset_key("g0", "orders", 0), None, T0 + 99_000)  # offset tombstone
    _append(log, 1, i16(11) + string("share"), b"\x00\x00", T0 + 99_000)  # share group: not decoded
    _append(log, 1, offset_key("g1", "orders", 0), i16(9) + b"\x00" * 20, T0 + 99_000)  # future version
    _append(log, 1, b"\x00", b"junk", T0 + 99_000)  # corrupt
    return log


def _rows(root: Path, table: str) -> list[dict[str, Any]]:
    return lake.read_table(root, table, cluster="c1").to_pylist()


def _drain(t: CommitLogTailer) -> None:
    t.open()
    while t.measure_lag() != 0:
        t.run_once(0)
    t.flush()
    t.close()


# -- start positions --------------------------------------------------------------------------

NOW = 1_800_000_000.0


@pytest.mark.parametrize(("text", "expected"), [
    ("earliest", StartPosition("earliest")),                    # replay everything still in the log
    ("latest", StartPosition("latest")),                        # only what happens from now on
    ("1h", StartPosition("time", int((NOW - 3600) * 1000))),    # the analysis window: last hour
    ("90s", StartPosition("time", int((NOW - 90) * 1000))),     # seconds
    ("-30m", StartPosition("time", int((NOW - 1800) * 1000))),  # a leading minus reads the same
    ("2026-01-01T00:00:00Z", StartPosition("time", 1_767_225_600_000)),  # an absolute time
    ("2026-01-01T00:00:00", StartPosition("time", 1_767_225_600_000)),   # naive times are UTC
])
def test_parse_start(text: str, expected: StartPosition) -> None:
    assert parse_start(text, now=NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "1 hour", "h", ""])
def test_parse_start_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"consumer_offsets_tail\.start"):
        parse_start(text, now=NOW)


# -- reading, batching, counting --------------------------------------------------------------

def test_reads_everything_in_few_files_and_counts_the_rest(tmp_path: Path) -> None:
    log = _mixed_log()
    t = CommitLogTailer("unused:9092", tmp_path, "c1", start="earliest", consumer_factory=_factory(log),
                        flush_records=10_000, flush_interval_s=3600)
    _drain(t)
    commits = _rows(tmp_path, "commits")
    events = _rows(tmp_path, "group_events")
    assert len(commits) == 31
    assert len(events) == 6
    assert t.stats.undecoded_types == Counter({"share_group_metadata": 1})
    assert t.stats.unknown_versions == Counter({"type=1 version=9": 1})
    assert t.stats.decode_errors == 1
    # one flush: one file per table, not one per record
    assert len(list((tmp_path / "commits").rglob("*.parquet"))) == 1
    tomb = [r for r in commits if r["committed_offset"] is None]
    assert len(tomb) == 1
    assert tomb[0]["commit_ts"] is None
    assert tomb[0]["value_version"] is None
    c5 = next(r for r in commits if r["source_partition"] == 1 and r["committed_offset"] == 5)
    assert c5["commit_ts"] == dt.datetime.fromtimestamp((T0 + 5000) / 1000, dt.UTC)
    assert (c5["group_id"], c5["partition"], c5["leader_epoch"], c5["value_version"]) == ("g1", 2, 1, 3)
    ev = next(r for r in events if r["generation"] == 5)
    assert ev["members"][0]["session_timeout_ms"] == 10_000
    assert ev["members"][0]["rebalance_timeout_ms"] == 20_000
    assert ev["members"][0]["assignment"] == [{"topic": "orders", "partition": 0},
                                              {"topic": "orders", "partition": 1}]
    assert t.positions == {0: len(log[0]), 1: len(log[1])}


def test_restart_resumes_without_duplicates(tmp_path: Path) -> None:
    log = _mixed_log(20)
    _drain(CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log)))
    first = len(_rows(tmp_path, "commits"))
    for i in range(5):
        _append(log, 0, offset_key("g0", "orders", 0), offset_value(3, 100 + i, "", T0, leader_epoch=1), T0)
    # start="earliest" is ignored: saved positions win
    _drain(CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log)))
    rows = _rows(tmp_path, "commits")
    assert len(rows) == first + 5
    keys = [(r["source_partition"], r["source_offset"]) for r in rows]
    assert len(keys) == len(set(keys))


class Crash(BaseException):
    """A crash in the middle of a flush (not an Exception: nothing may catch it)."""


def _crash_in_first_flush(root: Path, log: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A tail reads ``log`` to its end and dies in its first flush: the commits file is written,
    the process dies before the group_events file is durable. Returns the tables it wrote or
    tried to write, in order."""
    real_write = lake.write_table
    calls: list[str] = []

    def write(root_: Any, table: Any, cluster: str, data: Any, **kw: Any) -> Any:
        calls.append(table.name)
        if table.name == "group_events":
            raise Crash
        return real_write(root_, table, cluster, data, **kw)

    with monkeypatch.context() as m:
        m.setattr(commitlog.lake, "write_table", write)
        t = CommitLogTailer("x:1", root, "c1", start="earliest", consumer_factory=_factory(log))
        t.open()
        while t.measure_lag() != 0:
            t.poll_batch(0)
        with pytest.raises(Crash):
            t.flush()
    return calls


def test_crash_between_lake_files_and_positions_is_repaired(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    log = _mixed_log(40)
    # the commits file is durable, group_events is not
    assert _crash_in_first_flush(tmp_path, log, monkeypatch) == ["commits", "group_events"]
    assert _rows(tmp_path, "commits")
    assert not _rows(tmp_path, "group_events")

    again = CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log))
    _drain(again)
    commits = _rows(tmp_path, "commits")
    events = _rows(tmp_path, "group_events")
    assert again.stats.duplicates_skipped == len(commits)
    keys = [(r["source_partition"], r["source_offset"]) for r in commits]
    assert len(keys) == len(set(keys)) == 41  # 40 commits + the tombstone, each once
    assert len(events) == 8
    assert state_path(tmp_path, "c1").exists()


def test_crash_repair_survives_small_flushes_and_a_second_crash(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The unfinished flush covered 41 commits. After the restart the tail flushes in small steps
    # (a busy topic fills the buffer before it is back past the old intent): the rows of the
    # old intent not re-read yet must still be skipped, and must stay known across a second
    # crash, else they are written twice.
    log = _mixed_log(40)
    _crash_in_first_flush(tmp_path, log, monkeypatch)

    # restart: read a few records per poll and flush after each poll, then crash again
    again = CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log),
                            max_poll_records=3, flush_records=1)
    again.open()
    for _ in range(2):
        again.run_once(0)
    again.close()  # a second crash: nothing more is flushed

    third = CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log),
                            max_poll_records=3, flush_records=1)
    third.open()
    while third.measure_lag() != 0:
        third.run_once(0)
    third.flush()
    third.close()
    commits = _rows(tmp_path, "commits")
    keys = [(r["source_partition"], r["source_offset"]) for r in commits]
    assert len(keys) == len(set(keys)) == 41
    assert len(_rows(tmp_path, "group_events")) == 8
    assert not commitlog.json.loads(state_path(tmp_path, "c1").read_text())["pending"]


def test_fast_start_by_time(tmp_path: Path) -> None:
    log = _mixed_log(40)
    log[2] = [Rec(0, offset_key("old", "t", 0), offset_value(3, 1, "", T0, leader_epoch=0), T0)]
    start = dt.datetime.fromtimestamp((T0 + 30_000) / 1000, dt.UTC).isoformat()
    t = CommitLogTailer("x:1", tmp_path, "c1", start=start, consumer_factory=_factory(log))
    _drain(t)
    commits = _rows(tmp_path, "commits")
    # only records at or after the start time; partition 2 has none, so it starts at its end
    assert commits
    assert min(r["record_ts"] for r in commits) >= dt.datetime.fromtimestamp(
        (T0 + 30_000) / 1000, dt.UTC)
    assert not any(r["group_id"] == "old" for r in commits)
    assert t.positions[2] == 1


def test_fast_start_reads_a_record_appended_during_the_time_lookup(tmp_path: Path) -> None:
    # partition 0 has nothing since the start time when the tail looks it up; a group's commit
    # lands right after that lookup, before the tail asks for the end (a group starting as the
    # tail starts: in CI its first generation record was lost that way). It is read
    class AppendDuringLookup(FakeConsumer):
        def offsets_for_times(self, query: dict[TopicPartition, int]) -> dict[TopicPartition, Any]:
            out = super().offsets_for_times(query)
            _append(self.log, 0, offset_key("new", "t", 0), offset_value(3, 7, "", T0 + 60_000, leader_epoch=0),
                    T0 + 60_000)
            return out

    log: dict[int, list[Rec]] = {0: [Rec(0, offset_key("old", "t", 0), offset_value(3, 1, "", T0, leader_epoch=0),
                                         T0)]}
    start = dt.datetime.fromtimestamp((T0 + 30_000) / 1000, dt.UTC).isoformat()
    t = CommitLogTailer("x:1", tmp_path, "c1", start=start,
                        consumer_factory=lambda **o: AppendDuringLookup(log, **o))
    _drain(t)
    assert [(r["group_id"], r["committed_offset"]) for r in _rows(tmp_path, "commits")] == [("new", 7)]


def test_kip848_topic_ids_named_from_commits(tmp_path: Path) -> None:
    tid = uuid.uuid4()
    log: dict[int, list[Rec]] = {0: []}
    # Kafka 4 offset commits carry the topic id: the tailer learns id -> name from them
    _append(log, 0, offset_key("g", "orders", 0), offset_value(4, 5, "", T0, leader_epoch=0, topic_id=tid), T0)
    _append(log, 0, cg_key(8, "g", "m-1"), cg_current_value(4, 3, 0, [(tid, [0, 1])]), T0 + 1)
    _append(log, 0, cg_key(5, "g", "m-1"), None, T0 + 2)  # the member left
    _drain(CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log)))
    events = sorted(_rows(tmp_path, "group_events"), key=lambda r: r["source_offset"])
    cur, gone = events
    assert (cur["record_type"], cur["member_id"], cur["generation"], cur["previous_generation"],
            cur["member_state"]) == ("consumer_group_current_assignment", "m-1", 4, 3, "stable")
    assert cur["members"][0]["assignment"] == [{"topic": "orders", "partition": 0},
                                               {"topic": "orders", "partition": 1}]
    assert (gone["record_type"], gone["member_id"], gone["value_version"]) == (
        "consumer_group_member", "m-1", None)


# -- access denied ----------------------------------------------------------------------------

def test_no_read_access_warns_once_and_stops(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Describe allowed, Read denied: the fetch fails with TopicAuthorizationFailed
    log = _mixed_log(4)
    t = CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log, deny_poll=True))
    stop = threading.Event()
    with caplog.at_level(logging.WARNING, logger="lagscope.collector.commitlog"):
        th = threading.Thread(target=t.run, args=(stop,), kwargs={"error_backoff_s": 0.01})
        th.start()
        th.join(10)
    assert not th.is_alive(), "run() must return by itself on an authorization error"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "sweeps only" in warnings[0].getMessage()
    assert "__consumer_offsets" in warnings[0].getMessage()
    assert t.disabled_reason is not None
    assert not (tmp_path / "commits").exists()


def test_open_raises_on_a_missing_topic(tmp_path: Path) -> None:
    hidden = threading.Event()
    hidden.set()
    t = CommitLogTailer("x:1", tmp_path, "c1", consumer_factory=_factory({0: []}, hide_topic=hidden))
    with pytest.raises(CommitLogTopicMissing, match="not visible"):
        t.open()
    assert not isinstance(CommitLogTopicMissing("x"), CommitLogAccessDenied)


@pytest.mark.parametrize("start", ["earliest", "latest"])
def test_missing_topic_warns_once_and_waits_for_it(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                   start: str) -> None:
    # a fresh cluster: __consumer_offsets appears when the first group commits. Whatever the
    # start, the topic is read from its beginning: all of it was written after the tail began
    # (with "latest" the first commits, already in the log when the tail sees it, were lost)
    log = _mixed_log(6)
    hidden = threading.Event()
    hidden.set()
    t = CommitLogTailer("x:1", tmp_path, "c1", start=start, flush_interval_s=0.05, poll_timeout_ms=10,
                        consumer_factory=_factory(log, hide_topic=hidden))
    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="lagscope.collector.commitlog"):
        th = threading.Thread(target=t.run, args=(stop,), kwargs={"missing_topic_retry_s": 0.05})
        th.start()
        time.sleep(0.5)  # ~10 checks while the topic is missing
        assert th.is_alive()
        assert not (tmp_path / "commits").exists()
        hidden.clear()
        deadline = time.monotonic() + 10
        while len(_rows(tmp_path, "commits")) < 7 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        th.join(10)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # one about the topic (however many checks), one about the corrupt record in the log
    assert sum("not visible" in w for w in warnings) == 1
    assert sum("undecodable record" in w for w in warnings) == 1
    assert any("visible now" in r.getMessage() for r in caplog.records)
    assert len(_rows(tmp_path, "commits")) == 7
    assert t.disabled_reason is None


class _RecordingStop(threading.Event):
    """A stop event that records how long the tail asks to wait, and stops after ``n`` waits."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(float(timeout or 0))
        if len(self.waits) >= self.n:
            self.set()
        return self.is_set()


def test_missing_topic_checks_back_off_from_one_second_to_the_cap(tmp_path: Path) -> None:
    # a tail started on a fresh cluster must notice the first commit within seconds, not a minute,
    # and an idle cluster must not be asked every second forever
    hidden = threading.Event()
    hidden.set()
    t = CommitLogTailer("x:1", tmp_path, "c1", consumer_factory=_factory({0: []}, hide_topic=hidden))
    stop = _RecordingStop(8)
    t.run(stop, missing_topic_retry_s=10.0)
    assert stop.waits == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0, 10.0, 10.0]


def test_bad_cluster_name_and_corrupt_state(tmp_path: Path) -> None:
    with pytest.raises(LakeError, match="invalid cluster name"):
        CommitLogTailer("x:1", tmp_path, "../evil")
    path = state_path(tmp_path, "c1")
    path.parent.mkdir(parents=True)
    for bad in ("{not json",  # a torn or foreign file
                '{"version": 1, "positions": {"0": "x"}, "pending": null}',  # a bad offset
                '{"version": 1, "positions": {}, "pending": {"ranges": {"0": [1]}}}'):  # a bad intent
        path.write_text(bad)
        t = CommitLogTailer("x:1", tmp_path, "c1", consumer_factory=_factory({0: []}))
        with pytest.raises(CommitLogStateError, match="cannot read the commit log positions"):
            t.open()
    # in the loop: one error, the tail stops, nothing else is touched
    stop = threading.Event()
    t.run(stop)
    assert t.disabled_reason is not None
    assert path.read_text().startswith('{"version": 1, "positions": {}')


def test_rows_across_midnight_go_to_their_own_date(tmp_path: Path) -> None:
    midnight = 1_790_035_200_000  # 2026-09-22T00:00:00Z
    log: dict[int, list[Rec]] = {0: []}
    for ts in (midnight - 1, midnight, midnight + 1):
        _append(log, 0, offset_key("g", "t", 0), offset_value(3, ts, "", ts, leader_epoch=0), ts)
    _drain(CommitLogTailer("x:1", tmp_path, "c1", start="earliest", consumer_factory=_factory(log)))
    rows = _rows(tmp_path, "commits")
    by_date = Counter(r["date"] for r in rows)
    assert by_date == Counter({"2026-09-21": 1, "2026-09-22": 2})
    assert {r["commit_ts"] for r in rows if r["date"] == "2026-09-21"} == {
        dt.datetime.fromtimestamp((midnight - 1) / 1000, dt.UTC)}


# -- configuration ----------------------------------------------------------------------------

def test_service_tails_only_enabled_clusters(tmp_path: Path) -> None:
    from lagscope.collector.commitlog import CommitLogService
    from lagscope.config import ClusterConfig, ConsumerOffsetsTailConfig

    log = _mixed_log(10)
    on = ClusterConfig(name="c1", bootstrap_servers=["x:1"],
                       consumer_offsets_tail=ConsumerOffsetsTailConfig(enabled=True, start="earliest"))
    off = ClusterConfig(name="c2", bootstrap_servers=["y:1"])  # the tail is off by default

    def make(cluster: ClusterConfig, root: Path | str) -> CommitLogTailer:
        t = CommitLogTailer.from_config(cluster, root, consumer_factory=_factory(log),
                                        flush_interval_s=0.05, poll_timeout_ms=10)
        assert t.start == StartPosition("earliest")
        assert t.client_options["bootstrap_servers"] == ["x:1"]
        return t

    service = CommitLogService([on, off], tmp_path, tailer_factory=make)
    assert list(service.tailers) == ["c1"]
    service.start()
    try:
        deadline = time.monotonic() + 10
        while len(_rows(tmp_path, "commits")) < 11 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        service.stop()
    assert len(_rows(tmp_path, "commits")) == 11
    assert service.tailers["c1"].positions == {0: len(log[0]), 1: len(log[1])}
    stats = service.stats()["c1"]
    assert (stats["commits"], stats["group_events"], stats["decode_errors"]) == (11, 2, 1)
    assert stats["disabled_reason"] is None
