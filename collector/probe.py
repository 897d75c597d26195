"""Which record batch of a partition's log holds offset ``c − 1``: evidence that a committed
offset ``c`` was never the partition's log end.

A consumer that seeks to the end, or resets to latest, commits the high watermark (or, reading
committed, the last stable offset) it found. Both only ever sit on a *batch boundary*: a leader
appends whole batches, followers copy them whole, and the high watermark is the smallest log
end of the in-sync replicas; the last stable offset is at most that, or the base offset of an
open transaction's first batch (docs/collector.md, "Batch probes"). So a committed offset that
lies strictly inside a batch — ``base ≤ c − 1`` and ``c ≤ last`` — was never the end: the
consumer stopped there because it had processed up to it (a poll that ended mid-batch), not
because it jumped to the end.

*Inside* rules out only a jump **to the end**: ``seek(offset)``, ``--shift-by`` or
``--to-offset`` can land anywhere. It never proves that nothing was skipped; the analytics use it
only to drop the "to the end" reading of a commit. *Boundary* (``last == c − 1``) proves nothing
either way (a caught-up consumer commits the end too).

The probe is one Fetch (v4–12: partition names, no topic ids) to the partition's leader for that
one partition, from offset ``c − 1``, with ``max_bytes`` and ``partition_max_bytes`` of 1 and no
wait: the broker returns the whole first batch whose last offset is ≥ ``c − 1`` (a fetch always
returns at least one whole batch for the request's first partition, KIP-74), and the batch's
header (base offset, last offset, leader epoch) is read without decompressing its records. The
probe needs READ on the topic (the sweeps need only DESCRIBE); a refusal is a probe without
evidence, named in its ``reason``.

No evidence (``verdict`` ``none``) when: ``c − 1`` is below the log start (retention) or beyond
the log end (truncation: ``OFFSET_OUT_OF_RANGE``), at or above the high watermark (an empty
answer), the batch found starts after ``c − 1``
(compaction removed the records around it), the batch is of the v0/v1 formats (no last offset),
or the batch was written by a newer leader epoch than the commit's (an unclean election may have
rewritten the log since the commit).
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kafka.errors as kerr
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from kafka.protocol.consumer import FetchRequest
from kafka.record.memory_records import MemoryRecords

from lagscope import lake
from lagscope.collector.kafka_client import ClusterClient, gather
from lagscope.collector.sweep import _metadata, _Raw
from lagscope.errors import KafkaUnavailable
from lagscope.schema import BATCH_PROBES
from lagscope.storage import Store

__all__ = ["BOUNDARY", "INSIDE", "NONE", "Batch", "BatchProber", "Candidate", "Probe", "judge", "probe"]

log = logging.getLogger(__name__)

INSIDE, BOUNDARY, NONE = "inside", "boundary", "none"


@dataclass(frozen=True)
class Probe:
    """A committed offset to probe: ``committed`` on ``topic``/``partition``; ``leader_epoch`` the
    commit's (None: not recorded, no guard against a rewritten log)."""
    topic: str
    partition: int
    committed: int
    leader_epoch: int | None = None


@dataclass(frozen=True)
class Batch:
    """What the log showed of a probe's offset: the batch holding ``committed − 1`` (its base and
    last offsets and leader epoch; None when none was read), the ``verdict`` (:data:`INSIDE`,
    :data:`BOUNDARY`, :data:`NONE`) and, for :data:`NONE`, why."""
    probe: Probe
    verdict: str
    base_offset: int | None = None
    last_offset: int | None = None
    batch_epoch: int | None = None
    reason: str = ""


def judge(p: Probe, base: int, last: int, epoch: int | None) -> Batch:
    """The verdict on ``p`` from the batch ``[base, last]`` (leader epoch ``epoch``) that a fetch
    from ``p.committed − 1`` returned first."""
    c = p.committed
    if epoch is not None and p.leader_epoch is not None and epoch > p.leader_epoch:
        return Batch(p, NONE, base, last, epoch, f"batch of leader epoch {epoch}, after the commit's {p.leader_epoch}")
    if base > c - 1:
        return Batch(p, NONE, base, last, epoch, f"no batch holds offset {c - 1} (compacted or deleted)")
    if last == c - 1:
        return Batch(p, BOUNDARY, base, last, epoch)
    if c <= last:
        return Batch(p, INSIDE, base, last, epoch)
    return Batch(p, NONE, base, last, epoch, f"batch [{base}, {last}] ends before offset {c - 1}")  # (broker bug)


def probe(client: ClusterClient, probes: Sequence[Probe], *, timeout_ms: int = 10_000) -> list[Batch]:
    """Probe each of ``probes`` (one Fetch per probe, to its partition's leader, all at once);
    one :class:`Batch` per probe, in order. A probe of offset 0 (nothing before it), a partition
    without a leader, a failed request or no answer within ``timeout_ms`` is a :data:`NONE` with
    the reason."""
    try:
        got: list[Batch] = client.run(_probe_all, client, list(probes), timeout_ms=timeout_ms)
    except KafkaUnavailable as exc:  # no answer in time: no evidence for any of them
        return [Batch(p, NONE, reason=str(exc)) for p in probes]
    return got


async def _probe_all(client: ClusterClient, probes: list[Probe]) -> list[Batch]:
    out: list[Batch | None] = [None] * len(probes)
    wanted = sorted({p.topic for p in probes if p.committed > 0})
    leaders: dict[tuple[str, int], int] = {}
    if wanted:  # the sweeps' Metadata phase: each partition's leader, the brokers registered
        raw = _Raw()
        by_leader = await _metadata(client, wanted, raw)
        if raw.fatal:
            return [Batch(p, NONE, reason=raw.fatal[0]) for p in probes]
        leaders = {tp: leader for leader, tps in by_leader.items() for tp in tps}
    pending: list[tuple[int, object]] = []
    for i, p in enumerate(probes):
        if p.committed <= 0:
            out[i] = Batch(p, NONE, reason="nothing before offset 0")
            continue
        leader = leaders.get((p.topic, p.partition))
        if leader is None:
            out[i] = Batch(p, NONE, reason="no leader (or the topic is gone)")
            continue
        part_cls = FetchRequest.FetchTopic.FetchPartition
        req = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1, isolation_level=0, session_id=0,
            session_epoch=-1, min_version=4, max_version=12,
            topics=[FetchRequest.FetchTopic(topic=p.topic, partitions=[part_cls(
                partition=p.partition, current_leader_epoch=-1, fetch_offset=p.committed - 1, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1)])],
            forgotten_topics_data=[])
        pending.append((i, client.send(req, node_id=leader)))
    answers = await gather([f for _, f in pending])
    for (i, _), resp in zip(pending, answers, strict=True):
        out[i] = _read(probes[i], resp)
    return [b for b in out if b is not None]


def _read(p: Probe, resp: object) -> Batch:
    if isinstance(resp, Exception):
        return Batch(p, NONE, reason=f"Fetch: {type(resp).__name__}: {resp}")
    code = getattr(resp, "error_code", 0)
    if code:
        return Batch(p, NONE, reason=f"Fetch: {kerr.for_code(code).__name__}")
    for t in getattr(resp, "responses", []):
        for part in t.partitions:
            if part.partition_index != p.partition:
                continue
            if part.error_code:
                return Batch(p, NONE, reason=f"Fetch: {kerr.for_code(part.error_code).__name__}")
            batch = MemoryRecords(bytes(part.records)).next_batch() if part.records else None
            if batch is None:
                return Batch(p, NONE, reason="no whole batch at or after the offset below the high watermark")
            if batch.magic < 2:
                return Batch(p, NONE, reason=f"a v{batch.magic} batch has no last offset")
            epoch = batch.leader_epoch if batch.leader_epoch >= 0 else None
            return judge(p, batch.base_offset, batch.last_offset, epoch)
    return Batch(p, NONE, reason="the partition is missing from the answer")



# ------------------------------------------------------------------------------------------------
# The collector's prober: which commits to probe, at what pace, into the batch_probes table
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Candidate:
    """A commit worth probing: its :class:`Probe`, its group and time, its ``advance`` over the
    group's previous commit of the partition and the largest advance before it (``record``)."""
    probe: Probe
    group_id: str
    commit_ts: dt.datetime
    advance: int
    record: int

    @property
    def ratio(self) -> float:
        """How far the advance passes every earlier one: the order candidates are probed in."""
        return self.advance / max(1, self.record)


@dataclass
class ProberStats:
    """What a :class:`BatchProber` did since start: probes by verdict, candidates found, those
    dropped unprobed (over the pending bound), and failed lake writes."""
    verdicts: collections.Counter[str] = field(default_factory=collections.Counter)
    candidates: int = 0
    dropped: int = 0
    lake_write_errors: int = 0

    def snapshot(self) -> dict[str, Any]:
        """The counters the metrics read (:class:`lagscope.collector.metrics.CommitLogCollector`)."""
        return {"batch_probes": dict(self.verdicts), "batch_probe_candidates": self.candidates,
                "batch_probe_candidates_dropped": self.dropped}


class BatchProber:
    """Probes the commits that advance past their recent history, and writes each verdict to the
    ``batch_probes`` lake table: the log's evidence, kept while it can be read (retention and
    compaction remove it), for the skip rule (docs/collector.md, "Batch probes").

    **Candidates.** Each commit of a group's partition advances over the group's previous commit
    of it; a commit is a candidate when its advance is larger than every advance of that series in
    the ``window_s`` before it (15 minutes: the analytics' commit look-back), and there was one (a
    first advance has nothing to pass). The skip rule calls a commit a seek only when its advance
    is several times what the group's demonstrated pace explains, which at a steady commit
    interval is an advance past the recent ones; the commits of a drain after a burst are often
    such advances too. With noisy steady advances a series sets a record about once per window.
    A tombstone ends its series; a rewind only moves it.

    **Budget.** Probes run from the collector's loop after a sweep of the cluster, ``rate_per_s``
    per second on average (``burst`` at once), largest ``ratio`` first; each ``(group, topic,
    partition, offset)`` once (a group's evidence is its own). At most ``max_pending`` candidates
    wait: beyond that the smallest are dropped (counted). A probe that raised is a ``none`` row
    with the error as its reason.

    :meth:`offer` is called by the ``__consumer_offsets`` tail's thread with each commits table it
    wrote; :meth:`run` by the loop with the cluster's client. Rows that cannot be written are held
    (up to ``max_held`` rows) and written with the next run's, each in its commit's date.
    """

    def __init__(self, cluster: str, lake_root: Path | str | Store, *, rate_per_s: float = 1.0,
                 burst: int = 20, max_pending: int = 1000, window_s: float = 900.0,
                 max_offered: int = 256, max_held: int = 10_000, timeout_ms: int = 5000,
                 clock: Callable[[], float] = time.monotonic,
                 now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)) -> None:
        if rate_per_s <= 0:
            raise ValueError("rate_per_s must be positive")
        self.cluster = cluster
        self.lake_root = lake_root
        self.rate_per_s = rate_per_s
        self.burst = max(1, burst)
        self.max_pending = max_pending
        self.window_s = window_s
        self.max_held = max_held
        self.timeout_ms = timeout_ms
        self._clock = clock
        self._now = now
        self.stats = ProberStats()
        self._lock = threading.Lock()
        self._offered: collections.deque[pa.Table] = collections.deque()
        self._max_offered = max_offered
        #: per (group, topic, partition): its last committed offset and the advances of the window
        #: that may still be its largest ((t in ms, advance), advances decreasing: a sliding maximum)
        self._series: dict[tuple[str, str, int], tuple[list[int], collections.deque[tuple[int, int]]] | None] = {}
        self._pending: list[Candidate] = []
        #: (group, topic, partition, offset) already probed or pending, oldest first (bounded)
        self._done: dict[tuple[str, str, int, int], None] = {}
        self._held: list[dict[str, Any]] = []
        self._tokens = float(self.burst)
        self._last = clock()

    # -- the tail's side ------------------------------------------------------------------------
    def offer(self, commits: pa.Table) -> None:
        """A commits table the tail wrote (``commits`` schema, in the order read). Thread-safe."""
        with self._lock:
            self._offered.append(commits.select(["group_id", "topic", "partition", "committed_offset",
                                                 "leader_epoch", "commit_ts", "record_ts"]))
            unread = 0
            while len(self._offered) > self._max_offered:
                unread += self._offered.popleft().num_rows
        if unread:
            log.warning("cluster %s: %d commit(s) not examined for batch probes: more than %d files waited for "
                        "the collector's loop", self.cluster, unread, self._max_offered)

    # -- the loop's side ------------------------------------------------------------------------
    def select(self) -> list[Candidate]:
        """Read the offered tables into the series; the new candidates, in commit order."""
        with self._lock:
            tables, self._offered = list(self._offered), collections.deque()
        found: list[Candidate] = []
        for table in tables:
            found.extend(self._select(table))
        self.stats.candidates += len(found)
        return found

    def _select(self, table: pa.Table) -> list[Candidate]:
        """One offered table's candidates. The loop over its rows sees plain ints only (the
        series by a code per distinct key, times in ms): a busy cluster commits tens of
        thousands of offsets a second, and the loop shares the process with the tail."""
        if not table.num_rows:
            return []
        window_ms = self.window_s * 1000.0
        offsets = table.column("committed_offset")
        valid = pc.is_valid(offsets).to_pylist()
        off = offsets.fill_null(0).to_pylist()
        t_ms = pc.coalesce(table.column("commit_ts"), table.column("record_ts")).cast(pa.int64()).to_pylist()
        codes = []
        names = []
        for name in ("group_id", "topic"):
            enc = pc.dictionary_encode(table.column(name)).combine_chunks()
            codes.append(np.asarray(enc.indices, dtype=np.int64))
            names.append(enc.dictionary.to_pylist())
        part = np.asarray(table.column("partition").combine_chunks(), dtype=np.int64)
        combo = (codes[0] * len(names[1]) + codes[1]) * (int(part.max()) + 1) + part
        _, first, code = np.unique(combo, return_index=True, return_inverse=True)
        keys = [(names[0][codes[0][f]], names[1][codes[1][f]], int(part[f])) for f in first.tolist()]
        series = self._series
        states = [series.get(k) for k in keys]
        picked: list[tuple[int, int, int]] = []  # (row, advance, record)
        for i, (c, ok, o, t) in enumerate(zip(code.tolist(), valid, off, t_ms, strict=True)):
            st = states[c]
            if not ok:  # a tombstone: the group's offset of the partition is gone
                states[c] = None
                continue
            if st is None:
                states[c] = ([o], collections.deque())
                continue
            last, recent = st
            adv = o - last[0]
            last[0] = o
            if adv <= 0:
                continue
            while recent and recent[0][0] < t - window_ms:
                recent.popleft()
            if recent and adv > recent[0][1]:
                picked.append((i, adv, recent[0][1]))
            while recent and recent[-1][1] <= adv:
                recent.pop()
            recent.append((t, adv))
        for k, st in zip(keys, states, strict=True):
            if st is None:
                series.pop(k, None)
            else:
                series[k] = st
        if not picked:
            return []
        rows = pa.array([r for r, _, _ in picked], pa.int64())
        sub = table.take(rows)
        ts = pc.coalesce(sub.column("commit_ts"), sub.column("record_ts")).to_pylist()
        epochs = sub.column("leader_epoch").to_pylist()
        return [Candidate(Probe(keys[code[r]][1], keys[code[r]][2], off[r], e), keys[code[r]][0], when, adv, record)
                for (r, adv, record), when, e in zip(picked, ts, epochs, strict=True)]

    def run(self, client: ClusterClient) -> list[Batch]:
        """Select, probe what the budget allows, write the verdicts; the batches probed now."""
        for c in self.select():
            k = (c.group_id, c.probe.topic, c.probe.partition, c.probe.committed)
            if k not in self._done:
                self._done[k] = None
                self._pending.append(c)
        while len(self._done) > 100_000:
            del self._done[next(iter(self._done))]
        self._pending.sort(key=lambda c: -c.ratio)
        if len(self._pending) > self.max_pending:
            self.stats.dropped += len(self._pending) - self.max_pending
            del self._pending[self.max_pending:]
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.rate_per_s)
        self._last = now
        n = min(len(self._pending), int(self._tokens))
        batches: list[Batch] = []
        if n:
            todo, self._pending = self._pending[:n], self._pending[n:]
            self._tokens -= n
            try:
                batches = probe(client, [c.probe for c in todo], timeout_ms=self.timeout_ms)
            except Exception as exc:  # evidence, never a reason to lose the candidates' rows
                log.warning("cluster %s: %d batch probe(s) failed: %s: %s", self.cluster, n, type(exc).__name__, exc)
                batches = [Batch(c.probe, NONE, reason=f"{type(exc).__name__}: {exc}") for c in todo]
            at = self._now()
            for c, b in zip(todo, batches, strict=True):
                self.stats.verdicts[b.verdict] += 1
                self._held.append({
                    "group_id": c.group_id, "topic": c.probe.topic, "partition": c.probe.partition,
                    "committed_offset": c.probe.committed, "commit_ts": c.commit_ts, "advance": c.advance,
                    "verdict": b.verdict, "base_offset": b.base_offset, "last_offset": b.last_offset,
                    "batch_leader_epoch": b.batch_epoch, "reason": b.reason, "probe_ts": at})
        self._write()
        return batches

    def _write(self) -> None:
        """The held rows, one file per commit date (the analytics read a commit's probes by its
        date); what fails stays held."""
        if not self._held:
            return
        by_date: dict[dt.date, list[dict[str, Any]]] = {}
        for row in self._held:
            by_date.setdefault(row["commit_ts"].astimezone(dt.UTC).date(), []).append(row)
        left: list[dict[str, Any]] = []
        for date, rows in sorted(by_date.items()):
            if left:  # an earlier date failed: the lake is failing, try again next run
                left.extend(rows)
                continue
            try:
                lake.write_rows(self.lake_root, BATCH_PROBES, self.cluster, rows, date=date)
            except Exception as exc:
                self.stats.lake_write_errors += 1
                log.error("cluster %s: could not write %d batch probe(s), held for the next sweep: %s",
                          self.cluster, len(self._held), exc)
                left.extend(rows)
        if len(left) > self.max_held:
            log.error("cluster %s: dropped %d batch probe verdict(s) held beyond %d while the lake failed",
                      self.cluster, len(left) - self.max_held, self.max_held)
            del left[:len(left) - self.max_held]
        self._held = left
