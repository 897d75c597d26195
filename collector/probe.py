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

from collections.abc import Sequence
from dataclasses import dataclass

import kafka.errors as kerr
from kafka.protocol.consumer import FetchRequest
from kafka.record.memory_records import MemoryRecords

from lagscope.collector.kafka_client import ClusterClient, gather
from lagscope.collector.sweep import _metadata, _Raw
from lagscope.errors import KafkaUnavailable

__all__ = ["BOUNDARY", "INSIDE", "NONE", "Batch", "Probe", "judge", "probe"]

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

