"""The collector's batch prober (lagscope.collector.probe.BatchProber): which commits it probes
(an advance past every earlier one of the group's partition), at what pace, each once, and the
``batch_probes`` table it writes — from offered tables with a fake probe, then wired into the
collector with the ``__consumer_offsets`` tail on the real broker."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from test_commitlog_filter_metrics import _scrape, _wait

from lagscope import lake
from lagscope.collector import probe as probe_mod
from lagscope.collector.probe import BatchProber, Probe
from lagscope.config import Settings
from lagscope.schema import COMMITS

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)


def _commits(rows: list[tuple[str, str, int, int | None]]) -> pa.Table:
    """A commits table of ``(group, topic, partition, offset)`` rows one second apart (None: a tombstone)."""
    return pa.Table.from_pylist([
        {"group_id": g, "topic": t, "partition": p, "committed_offset": o, "leader_epoch": 0,
         "commit_ts": T0 + dt.timedelta(seconds=i) if o is not None else None,
         "record_ts": T0 + dt.timedelta(seconds=i), "source_partition": 0, "source_offset": i,
         "value_version": 3 if o is not None else None}
        for i, (g, t, p, o) in enumerate(rows)], schema=COMMITS.schema)


class _Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> list[list[Probe]]:
    """Replaces the Fetch with a fake: every probe ``inside`` ``[c − 5, c + 5]``; the calls made."""
    calls: list[list[Probe]] = []

    def fake(client: object, probes: list[Probe], *, timeout_ms: int = 10_000) -> list[probe_mod.Batch]:
        calls.append(list(probes))
        return [probe_mod.judge(p, p.committed - 5, p.committed + 5, 0) for p in probes]

    monkeypatch.setattr(probe_mod, "probe", fake)
    return calls


def test_a_commit_is_a_candidate_when_its_advance_passes_every_earlier_one() -> None:
    prober = BatchProber("c1", "/nonexistent")
    offsets = [0, 10, 20, 25, 60, 70, 200, 150, 300]
    # advances:   10  10   5  35  10  130  -50 150
    prober.offer(_commits([("g", "t", 0, o) for o in offsets]))
    got = [(c.probe.committed, c.advance, c.record) for c in prober.select()]
    # the first advance has nothing to pass; equal is not past; a rewind moves the series only
    assert got == [(60, 35, 10), (200, 130, 35), (300, 150, 130)]
    assert prober.stats.candidates == 3


def test_the_record_to_pass_is_that_of_the_last_fifteen_minutes() -> None:
    # advances of 1,000 (a drain) at 20 s, then 10 a commit; 16 minutes on, a drain's 500 passes
    # every advance of the window (the 1,000 has left it), and so does its next commit's 600
    prober = BatchProber("c1", "/nonexistent")
    times = [0.0, 10.0, 20.0, 30.0, 40.0, 980.0, 990.0, 1000.0, 1010.0]
    offsets = [0, 10, 1010, 1020, 1030, 1040, 1050, 1550, 2150]
    table = _commits([("g", "t", 0, o) for o in offsets])
    at_t = pa.array([T0 + dt.timedelta(seconds=t) for t in times], COMMITS.schema.field("commit_ts").type)
    table = table.set_column(table.schema.get_field_index("commit_ts"), "commit_ts", at_t)
    prober.offer(table)
    got = [(c.probe.committed, c.advance, c.record) for c in prober.select()]
    assert got == [(1010, 1000, 10), (1550, 500, 10), (2150, 600, 500)]


@pytest.mark.parametrize("seed", range(5))
def test_the_candidates_equal_a_plain_reading_of_the_rule(seed: int) -> None:
    # random commits of a few series (rewinds, repeats, tombstones), over 40 minutes, offered in
    # tables of random sizes: the candidates are those of the rule read literally (every earlier
    # advance of the series kept, the window's largest computed afresh for each commit)
    import random

    rng = random.Random(seed)
    keys = [("g1", "t", 0), ("g1", "t", 1), ("g2", "t", 0), ("g2", "u", 3)]
    rows: list[dict[str, Any]] = []
    pos = dict.fromkeys(keys, 0)
    t = 0.0
    for n in range(600):
        g, topic, p = key = rng.choice(keys)
        t += rng.uniform(0.0, 8.0)
        r = rng.random()
        if r < 0.02:
            off: int | None = None
        else:
            pos[key] += rng.choice([0, rng.randint(1, 20), rng.randint(1, 400), -rng.randint(1, 30)])
            off = max(pos[key], 0)
        ts = T0 + dt.timedelta(seconds=t)
        rows.append({"group_id": g, "topic": topic, "partition": p, "committed_offset": off, "leader_epoch": 0,
                     "commit_ts": ts if off is not None else None, "record_ts": ts, "source_partition": 0,
                     "source_offset": n, "value_version": 3 if off is not None else None})
    expected = []
    history: dict[tuple[str, str, int], tuple[int, list[tuple[float, int]]] | None] = {}
    for r in rows:
        key = (r["group_id"], r["topic"], r["partition"])
        if r["committed_offset"] is None:
            history[key] = None
            continue
        got = history.get(key)
        at_s = r["record_ts"].timestamp()
        if got is None:
            history[key] = (r["committed_offset"], [])
            continue
        last, advs = got
        adv = r["committed_offset"] - last
        history[key] = (r["committed_offset"], advs)
        if adv <= 0:
            continue
        recent = [a for u, a in advs if u >= at_s - 900]
        if recent and adv > max(recent):
            expected.append((key, r["committed_offset"], adv, max(recent)))
        advs.append((at_s, adv))
    prober = BatchProber("c1", "/nonexistent")
    cut = 0
    while cut < len(rows):
        size = rng.randint(1, 120)
        prober.offer(pa.Table.from_pylist(rows[cut:cut + size], schema=COMMITS.schema))
        cut += size
    got = [((c.group_id, c.probe.topic, c.probe.partition), c.probe.committed, c.advance, c.record)
           for c in prober.select()]
    assert got == expected
    assert len(expected) > 10


def test_series_are_per_group_and_partition_and_a_tombstone_ends_one() -> None:
    prober = BatchProber("c1", "/nonexistent")
    prober.offer(_commits([("a", "t", 0, 0), ("a", "t", 0, 10), ("b", "t", 0, 100), ("a", "t", 1, 0),
                           ("b", "t", 0, 120), ("a", "t", 1, 50)]))
    assert prober.select() == []  # every series has one advance at most: none to pass yet
    # across tables, the series carry on; a tombstone starts group a's partition 0 afresh
    prober.offer(_commits([("a", "t", 0, 30), ("b", "t", 0, 121), ("a", "t", 0, None), ("a", "t", 0, 1000),
                           ("a", "t", 0, 1100), ("b", "t", 0, 200)]))
    got = [(c.group_id, c.probe.partition, c.probe.committed) for c in prober.select()]
    assert got == [("a", 0, 30), ("b", 0, 200)]


def test_the_budget_probes_the_largest_first_each_once(probed: list[list[Probe]], tmp_path: Path) -> None:
    clock = _Clock()
    prober = BatchProber("c1", tmp_path, rate_per_s=1.0, burst=2, clock=clock, now=lambda: T0)
    # three candidates: advances 20 (past 1), 5 (past 1) and 100 (past 20)
    prober.offer(_commits([("g", "t", 0, 0), ("g", "t", 0, 1), ("g", "t", 0, 21), ("g", "t", 0, 121),
                           ("h", "t", 1, 0), ("h", "t", 1, 1), ("h", "t", 1, 6)]))
    first = prober.run(object())  # type: ignore[arg-type]
    # ratios: 121 → 5.0 (100 / 20), 21 → 20.0, 6 → 5.0: the burst of 2 takes 21 and one of the 5.0s
    assert first[0].probe.committed == 21
    assert len(first) == 2
    assert prober.run(object()) == []  # type: ignore[arg-type]  # no tokens left
    clock.t = 1.0
    third = prober.run(object())  # type: ignore[arg-type]
    assert len(third) == 1
    assert sorted(b.probe.committed for b in first + third) == [6, 21, 121]
    clock.t = 100.0
    # the same commits again (a tail's re-read after a crash): no advance. Group g's offsets
    # deleted and committed again up to 121: a candidate probed before, not again; group k's
    # commit of the same offset is its own (the analytics read each group's probes)
    prober.offer(_commits([("g", "t", 0, 121), ("g", "t", 0, None), ("g", "t", 0, 0), ("g", "t", 0, 1),
                           ("g", "t", 0, 121), ("k", "t", 0, 0), ("k", "t", 0, 1), ("k", "t", 0, 121)]))
    assert [(b.probe.partition, b.probe.committed) for b in prober.run(object())] == [(0, 121)]  # type: ignore[arg-type]
    rows = lake.read_table(tmp_path, "batch_probes", cluster="c1").to_pylist()
    assert sorted((r["group_id"], r["committed_offset"], r["advance"], r["verdict"]) for r in rows) == [
        ("g", 21, 20, "inside"), ("g", 121, 100, "inside"), ("h", 6, 5, "inside"), ("k", 121, 120, "inside")]
    assert {(r["base_offset"], r["last_offset"]) for r in rows if r["committed_offset"] == 21} == {(16, 26)}
    assert prober.stats.snapshot()["batch_probes"] == {"inside": 4}
    assert prober.stats.candidates == 5


def test_the_smallest_waiting_candidates_are_dropped_beyond_the_bound(probed: list[list[Probe]],
                                                                      tmp_path: Path) -> None:
    prober = BatchProber("c1", tmp_path, rate_per_s=0.001, burst=1, max_pending=2, clock=_Clock(),
                         now=lambda: T0)
    rows = [("g", "t", p, o) for p in range(4) for o in (0, 1, 1 + 10 * (p + 2))]  # ratios 20, 30, 40, 50
    prober.offer(_commits(rows))
    got = prober.run(object())  # type: ignore[arg-type]
    assert [b.probe.partition for b in got] == [3]  # the largest, the one token
    assert [c.probe.partition for c in prober._pending] == [2]
    assert prober.stats.dropped == 2


def test_a_probe_that_raises_is_a_none_row_and_loses_no_candidate(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    def broken(client: object, probes: list[Probe], *, timeout_ms: int = 10_000) -> list[probe_mod.Batch]:
        raise RuntimeError("metadata went away")

    monkeypatch.setattr(probe_mod, "probe", broken)
    prober = BatchProber("c1", tmp_path, now=lambda: T0)
    prober.offer(_commits([("g", "t", 0, 0), ("g", "t", 0, 1), ("g", "t", 0, 50)]))
    got = prober.run(object())  # type: ignore[arg-type]
    assert [(b.verdict, b.reason) for b in got] == [("none", "RuntimeError: metadata went away")]
    rows = lake.read_table(tmp_path, "batch_probes", cluster="c1").to_pylist()
    assert [(r["committed_offset"], r["verdict"], r["reason"]) for r in rows] == [
        (50, "none", "RuntimeError: metadata went away")]
    assert prober.stats.snapshot()["batch_probes"] == {"none": 1}


def test_rows_that_cannot_be_written_are_held_for_the_next_run(probed: list[list[Probe]], tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    clock = _Clock()
    prober = BatchProber("c1", blocked, clock=clock, now=lambda: T0)
    prober.offer(_commits([("g", "t", 0, 0), ("g", "t", 0, 1), ("g", "t", 0, 50)]))
    assert len(prober.run(object())) == 1  # type: ignore[arg-type]
    assert prober.stats.lake_write_errors == 1
    prober.lake_root = tmp_path / "lake"  # the lake can be written again
    prober.run(object())  # type: ignore[arg-type]
    rows = lake.read_table(tmp_path / "lake", "batch_probes", cluster="c1").to_pylist()
    assert [(r["committed_offset"], r["verdict"]) for r in rows] == [(50, "inside")]


@pytest.mark.kafka
def test_the_collector_probes_the_tails_candidates_on_the_real_broker(bootstrap: str, unique: str,
                                                                       tmp_path: Path) -> None:
    """Offsets 0–9 are one batch, 10–19 another. A group commits 1, 2, 3 (advances of 1), then 8
    (an advance of 5: inside [0, 9], never the end), 10 (2: no candidate), then 20 (10: the
    boundary of [10, 19])."""
    from lagscope.collector.loop import Collector

    topic, group = unique, f"{unique}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="lagscope-test")
    admin.create_topics([NewTopic(topic, 1, 1)])
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=1000, batch_size=1 << 20)
    try:
        for _ in range(2):
            for i in range(10):
                producer.send(topic, value=b"x" * 50 + bytes([i]), partition=0)
            producer.flush()
    finally:
        producer.close()
    root = tmp_path / "lake"
    settings = Settings.model_validate({
        "clusters": [{"name": "c1", "bootstrap_servers": bootstrap, "groups": {"include": [f"{unique}-.*"]},
                      "consumer_offsets_tail": {"enabled": True, "start": "earliest"}}],
        "collector": {"interval_s": 0.5, "lake": str(root), "compaction": {"enabled": False}},
        "metrics": {"port": 0}})
    collector = Collector(settings)
    stop = threading.Event()
    th = threading.Thread(target=collector.run, args=(stop,), daemon=True)
    th.start()
    try:
        for offset in (1, 2, 3, 8, 10, 20):
            admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(offset, "", -1)})

        def probes() -> list[dict[str, Any]]:
            return lake.read_table(root, "batch_probes", cluster="c1").to_pylist()

        _wait("two batch probes in the lake", lambda: len(probes()) >= 2)
        got = {r["committed_offset"]: (r["verdict"], r["base_offset"], r["last_offset"], r["advance"])
               for r in probes()}
        assert got == {8: ("inside", 0, 9, 5), 20: ("boundary", 10, 19, 10)}
        assert {r["group_id"] for r in probes()} == {group}
        st = collector.tail_stats()["c1"]
        assert st["batch_probes"] == {"inside": 1, "boundary": 1}
        assert st["batch_probe_candidates"] == 2
        # on /metrics, each verdict's series from the start
        served = _scrape(collector.metrics_server.url)
        assert served["lagscope_batch_probes_total"] == {
            (("cluster", "c1"), ("verdict", v)): n for v, n in (("inside", 1.0), ("boundary", 1.0), ("none", 0.0))}
        assert served["lagscope_batch_probe_candidates_dropped_total"] == {(("cluster", "c1"),): 0.0}
    finally:
        stop.set()
        th.join(30)
        admin.close()
    assert not th.is_alive()
