"""One simulator process: a producer or a consumer-group member (``python -m lagscope.devtools.sim.worker SPEC``).

The runner writes a JSON spec (mode 0600: it may hold client credentials) and starts one
process per producer and per member, so that a crash is a real SIGKILL of a real client.
Each process writes its ground truth to its own JSONL part file (see :mod:`lagscope.devtools.sim.truth`);
the runner merges them. SIGTERM asks a worker to finish cleanly (final commit, close).

Start-up handshake: a worker creates its Kafka client, touches its ``ready`` file and waits
for the runner's ``t0`` file (``{"t0": epoch s, "end": epoch s}``), which the runner writes
once every process of the start is ready; so Python start-up time never eats into the
schedule. An action ``at`` seconds runs at ``t0 + at``.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import logging
import math
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lagscope.devtools.sim.model import Action, MemberSpec, ProducerSpec
from lagscope.devtools.sim.truth import Assign, Commit, Fault, Produce, Revoke, TruthWriter

__all__ = ["main", "run_member", "run_producer"]

log = logging.getLogger("lagscope.devtools.sim.worker")

_stop = threading.Event()
#: the longest a rewind waits past its time for the member to have a position (s)
REWIND_WAIT_S = 5.0


def _on_term(signum: int, frame: object) -> None:
    _stop.set()


def _await_start(cfg: dict[str, Any]) -> tuple[float, float, float] | None:
    """Say ready, then wait for the runner's t0; (t0, the run's end, the schedule's end: earlier
    when the members linger), None when asked to stop first."""
    Path(cfg["ready_file"]).touch()
    t0_file = Path(cfg["t0_file"])
    while not t0_file.exists():
        if _stop.wait(0.05):
            return None
    d = json.loads(t0_file.read_text())
    return float(d["t0"]), float(d["end"]), float(d["schedule_end"])


def _sleep_until(t: float) -> bool:
    """Sleep until epoch ``t``; False when asked to stop first."""
    while True:
        left = t - time.time()
        if left <= 0:
            return True
        if _stop.wait(min(left, 0.2)):
            return False


# --------------------------------------------------------------------------------------------
# producer
# --------------------------------------------------------------------------------------------

def _send_times(spec: ProducerSpec, t0: float, end: float, rng: random.Random | None = None,
                sends: float = 0.0) -> list[float]:
    """Every send time (epoch s), steady rate (ramped, cycled, paused as the spec says) plus
    bursts, sorted. With ``rng``, each steady send is late by a uniform fraction in
    ``[0, sends]`` of its interval (the same generator state gives the same times)."""
    return [t for t, _ in _send_plan(spec, t0, end, rng, sends)]


def _send_plan(spec: ProducerSpec, t0: float, end: float, rng: random.Random | None = None,
               sends: float = 0.0) -> list[tuple[float, int | None]]:
    """Every send as (time, partition), sorted by time: the partition a burst names (``Burst.partition``),
    None for the others (the partitions in turn, or the key's). See :func:`_send_times`."""
    stop_rel = min(end - t0, spec.stop) if spec.stop is not None else end - t0
    times: list[tuple[float, int | None]] = []

    def late(step: float) -> float:
        return rng.uniform(0.0, sends) * step if (rng is not None and sends) else 0.0

    if spec.ramp_to is None and spec.cycle_s is None and not spec.pauses:
        if spec.rate > 0:  # a steady rate: exact times, no drift from summing intervals
            n = math.floor((stop_rel - spec.start) * spec.rate)
            times.extend((t0 + spec.start + i / spec.rate + late(1.0 / spec.rate), None) for i in range(max(n, 0)))
    elif spec.rate > 0 or (spec.ramp_to or 0) > 0:
        t = spec.start
        while t < stop_rel:
            r = spec.rate_at(t, stop_rel)
            if r <= 1e-9:
                t += 0.01  # a pause, or a cycle's trough: look again a little later
                continue
            step = 1.0 / r
            times.append((t0 + t + late(step), None))
            t += step
    for b in spec.bursts:
        n = 0
        at = b.at
        while at < stop_rel and (b.repeat is None or n < b.repeat):
            if not any(p.at <= at < p.at + p.duration for p in spec.pauses):
                times.extend([(t0 + at, b.partition)] * b.count)
            n += 1
            if b.every is None:
                break
            at = b.at + n * b.every
    times.sort(key=lambda e: e[0])
    return times


def _key_weights(spec: ProducerSpec) -> list[float] | None:
    """Cumulative Zipf weights of the keys (None: every key alike, in turn)."""
    if not spec.keys or not spec.key_skew:
        return None
    w = [1.0 / (i + 1) ** spec.key_skew for i in range(spec.keys)]
    acc, out = 0.0, []
    for x in w:
        acc += x
        out.append(acc)
    return out


def run_producer(cfg: dict[str, Any], writer: TruthWriter) -> None:
    from kafka import KafkaProducer
    from kafka.producer.future import RecordMetadata

    spec = ProducerSpec.model_validate(cfg["spec"])
    topic: str = cfg["topic"]
    partitions: int = cfg["partitions"]
    lock = threading.Lock()
    pending: list[Produce] = []

    kw: dict[str, Any] = {"bootstrap_servers": cfg["bootstrap"], "client_id": cfg["client_id"],
                          "acks": "all", "linger_ms": 5, **cfg.get("client_config", {})}
    if spec.transactional:
        kw["transactional_id"] = cfg["transactional_id"]
        kw["transaction_timeout_ms"] = 60000
    producer = KafkaProducer(**kw)
    value = b"x" * spec.value_bytes
    # the run's seed decides the send jitter and the keys: the same seed, the same schedule
    rng = random.Random(f"lagscope-sim/{cfg.get('seed', 0)}/{spec.name}")
    cum = _key_weights(spec)
    if spec.transactional:
        producer.init_transactions()
    started = _await_start(cfg)
    if started is None:
        producer.close(timeout=5)
        return
    t0, _, end = started  # a producer sends on the schedule only, lingering members or not

    def on_sent(md: RecordMetadata) -> None:
        rec = Produce(md.topic, md.partition, md.offset, md.timestamp / 1000.0, acked=time.time())
        with lock:
            if spec.transactional:
                pending.append(rec)
            else:
                writer.write(rec)

    def send(i: int, partition: int | None = None) -> None:
        if partition is not None:
            fut = producer.send(topic, value=value, partition=partition)
        elif spec.keys:
            k = i % spec.keys if cum is None else bisect.bisect_left(cum, rng.random() * cum[-1])
            fut = producer.send(topic, value=value, key=f"key-{k}".encode())
        else:
            fut = producer.send(topic, value=value, partition=i % partitions)
        fut.add_callback(on_sent)
        fut.add_errback(lambda exc: log.warning("send failed: %s", exc))

    def finish_txn(state: str) -> None:
        with lock:
            recs, pending[:] = list(pending), []
        for r in recs:
            writer.write(dataclasses.replace(r, txn=state))  # type: ignore[arg-type]

    txn_no = 0
    in_txn = 0
    try:
        for i, (t, part) in enumerate(_send_plan(spec, t0, end, rng, float(cfg.get("sends", 0.0)))):
            if t > time.time() and not _sleep_until(t):
                break
            if spec.transactional and in_txn == 0:
                producer.begin_transaction()
            send(i, part)
            if spec.transactional:
                in_txn += 1
                if in_txn >= spec.txn_records:
                    txn_no += 1
                    producer.flush()
                    if spec.abort_every and txn_no % spec.abort_every == 0:
                        producer.abort_transaction()
                        finish_txn("aborted")
                    else:
                        producer.commit_transaction()
                        finish_txn("committed")
                    in_txn = 0
        if spec.transactional and in_txn:
            producer.flush()
            producer.commit_transaction()
            finish_txn("committed")
        producer.flush()
        if spec.transactional and spec.leave_open and not _stop.is_set():
            producer.begin_transaction()
            for j in range(spec.txn_records):
                send(j)
            producer.flush()
            finish_txn("open")
            # hold it open until the runner has recorded the end state (it sends SIGTERM)
            while not _stop.wait(0.2):
                pass
            producer.abort_transaction()
    finally:
        producer.close(timeout=10)


# --------------------------------------------------------------------------------------------
# consumer-group member
# --------------------------------------------------------------------------------------------

@dataclass
class _MemberState:
    committed: dict[Any, int] = field(default_factory=dict)
    consumed: dict[Any, int] = field(default_factory=dict)
    #: modes in force: kind -> (started, until) epoch seconds (until may be inf)
    modes: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: the partitions a mode's fault names: those held when it began
    mode_parts: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)


@dataclass
class _SkipJob:
    """A ``skip`` action in progress (:class:`lagscope.devtools.sim.model.Action`): its partitions
    (chosen when it began), the phase (``wait``: for the backlog, or for retention to delete the
    position; ``reset``: for the client's out-of-range reset), what the member had processed and
    what it has seen since."""

    action: Action
    started: float
    targets: list[Any] = field(default_factory=list)
    phase: str = "wait"
    processed: dict[Any, int] = field(default_factory=dict)
    #: out_of_range: the log start when the member read again, and when each partition's position
    #: was first seen deleted
    log_start: dict[Any, int] = field(default_factory=dict)
    deleted_at: dict[Any, float] = field(default_factory=dict)
    resumed: float = 0.0
    #: catching_up: the backlog has been above ``size`` (the burst being caught up with)
    seen_above: bool = False
    #: out_of_range: the offset the client reset each partition to
    jumped: dict[Any, int] = field(default_factory=dict)
    last_check: float = 0.0


class _Member:
    def __init__(self, cfg: dict[str, Any], writer: TruthWriter) -> None:
        self.spec = MemberSpec.model_validate(cfg["spec"])
        self.cfg = cfg
        self.writer = writer
        self.group: str = cfg["group"]
        self.name: str = cfg["member"]
        self.topics: list[str] = cfg["topics"]
        self.t0 = 0.0
        self.end = 0.0
        self.st = _MemberState()
        self.consumer: Any = None
        #: set while the consumer closes, so that the listener's revocation says so
        self.closing = False
        self.skip_job: _SkipJob | None = None
        #: the runner asks the group's members to stop (an admin reset) with this file
        self.hold_file = Path(cfg["out"]).parent / f"hold-{self.group}.json"
        self.hold_done = ""

    # -- client ---------------------------------------------------------------------------
    def _open(self) -> None:
        self._create()
        self._subscribe()

    def _subscribe(self) -> None:
        self.consumer.subscribe(topics=self.topics, listener=self._listener())

    def _create(self) -> None:
        from kafka import KafkaConsumer

        s = self.spec
        kw: dict[str, Any] = {
            "bootstrap_servers": self.cfg["bootstrap"],
            "group_id": self.group,
            "client_id": self.cfg["client_id"],
            "session_timeout_ms": s.session_timeout_ms,
            "heartbeat_interval_ms": s.heartbeat_interval_ms,
            "max_poll_interval_ms": s.max_poll_interval_ms,
            "isolation_level": s.isolation_level,
            "enable_auto_commit": False,  # commits are explicit so that each one is observed
            "auto_offset_reset": s.auto_offset_reset,
            "max_poll_records": s.max_poll_records,
            "request_timeout_ms": max(s.session_timeout_ms + 5000, 15000),
            **self.cfg.get("client_config", {}),
        }
        if self.cfg.get("group_instance_id"):
            kw["group_instance_id"] = self.cfg["group_instance_id"]
        if s.partition_assignment_strategy is not None:
            kw["partition_assignment_strategy"] = (_assignor(s.partition_assignment_strategy),)
        self.consumer = KafkaConsumer(**kw)
        self._await_metadata()

    def _await_metadata(self, timeout: float = 30.0) -> None:
        """Know every partition of the subscribed topics before joining: a group leader that
        joins without them assigns nothing, and the rejoin that its next metadata update
        starts can leave the member without partitions (kafka-python 3)."""
        want: dict[str, int] = self.cfg.get("topic_partitions", {})
        deadline = time.time() + timeout
        while time.time() < deadline and not _stop.is_set():
            if all(len(self.consumer.partitions_for_topic(t)) >= n for t, n in want.items()):
                return
            time.sleep(0.2)
        log.warning("metadata for %s still incomplete after %.0fs", sorted(want), timeout)

    def _close(self) -> None:
        self.closing = True
        try:
            self.consumer.close(autocommit=False)
        finally:
            self.closing = False

    def _step_out(self) -> tuple[tuple[str, int], ...]:
        """Leave the group for a while (a bounce, an operator's hold): commit the position where
        the member may, close the consumer and forget what it consumed; the partitions it held."""
        if self.may_commit():
            self.commit(self._current())
        held = self.held()
        self._close()
        self.consumer = None
        self.st.consumed.clear()
        self.st.committed.clear()
        return held

    def _listener(self) -> Any:
        from kafka import AsyncConsumerRebalanceListener

        member = self

        class Listener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                tps = sorted(revoked)
                if tps and member.may_commit():
                    offsets = {tp: member.st.consumed[tp] for tp in tps if tp in member.st.consumed}
                    if offsets:
                        try:
                            await member.consumer.commit_async(member._om(offsets))
                        except Exception as exc:  # a commit that fails is not ground truth
                            log.warning("commit on revoke failed: %s", exc)
                        else:
                            member._record_commits(offsets)
                member._forget(tps)
                member.writer.write(Revoke(member.group, member.name, _pairs(tps), time.time(),
                                           closing=member.closing))

            async def on_partitions_lost(self, lost: Any) -> None:
                tps = sorted(lost)
                member._forget(tps)
                member.writer.write(Revoke(member.group, member.name, _pairs(tps), time.time(), lost=True,
                                           closing=member.closing))

            async def on_partitions_assigned(self, assigned: Any) -> None:
                tps = sorted(assigned)
                gm = member.consumer.group_metadata()
                member.writer.write(Assign(member.group, member.name, _pairs(tps), time.time(),
                                           int(gm.generation_id), str(gm.member_id)))

        return Listener()

    def _forget(self, tps: list[Any]) -> None:
        for tp in tps:
            self.st.consumed.pop(tp, None)
            self.st.committed.pop(tp, None)

    @staticmethod
    def _om(offsets: dict[Any, int]) -> dict[Any, Any]:
        from kafka import OffsetAndMetadata

        return {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()}

    def _record_commits(self, offsets: dict[Any, int]) -> None:
        now = time.time()
        for tp, o in sorted(offsets.items()):
            self.st.committed[tp] = o
            self.writer.write(Commit(self.group, self.name, tp.topic, tp.partition, o, now))

    def commit(self, offsets: dict[Any, int]) -> bool:
        if not offsets:
            return True
        try:
            self.consumer.commit(self._om(offsets))
        except Exception as exc:  # CommitFailed, RebalanceInProgress, …: not a commit
            log.warning("commit failed (%s): %s", type(exc).__name__, exc)
            return False
        self._record_commits(offsets)
        return True

    # -- modes ----------------------------------------------------------------------------
    def active(self, kind: str, now: float | None = None) -> bool:
        m = self.st.modes.get(kind)
        return m is not None and (now or time.time()) < m[1]

    def may_commit(self) -> bool:
        return not (self.active("stop") or self.active("commit_gap"))

    def _expire_modes(self, now: float, final: bool = False) -> None:
        for kind, (start, until) in list(self.st.modes.items()):
            if final or now >= until:
                self.fault(kind, start, min(now, until), parts=self.st.mode_parts.pop(kind, None))
                del self.st.modes[kind]

    def held(self) -> tuple[tuple[str, int], ...]:
        """The partitions the member holds now."""
        return _pairs(sorted(self.consumer.assignment())) if self.consumer is not None else ()

    def fault(self, kind: str, start: float, end: float, parts: tuple[tuple[str, int], ...] | None = None,
              **detail: Any) -> None:
        """Record a fault naming the partitions it touches (default: those held now)."""
        self.writer.write(Fault(kind, self.group, self.name, start, end, detail,
                                self.held() if parts is None else parts))

    # -- actions --------------------------------------------------------------------------
    def _ready(self, a: Action) -> bool:
        """A rewind waits (up to ``REWIND_WAIT_S`` past its time) until the member has a position
        on a partition it holds: right after a rebalance it may not have read anything yet, and N
        messages back from no position is no rewind. The actions after it wait with it."""
        if a.kind != "rewind" or time.time() >= self.t0 + a.at + REWIND_WAIT_S or self.consumer is None:
            return True
        held = set(self.consumer.assignment())
        return any(tp in held for tp in (*self.st.committed, *self.st.consumed))

    def run_action(self, a: Action) -> bool:
        """Apply one action; False when the member is to end (leave)."""
        now = time.time()
        c = self.consumer
        if a.kind == "leave":
            if self.may_commit():
                self.commit(self._current())
            self.fault("leave", now, now)
            return False
        if a.kind == "bounce":
            held = self._step_out()
            _sleep_until(now + (a.duration or 0))
            self._open()
            self.fault("bounce", now, time.time(), parts=held, static=bool(self.cfg.get("group_instance_id")))
            return True
        if a.kind == "stop_polling":
            _sleep_until(now + (a.duration or 0))
            self.fault("stop_polling", now, time.time(), max_poll_interval_ms=self.spec.max_poll_interval_ms)
            return True
        if a.kind in ("stall", "stop", "commit_gap"):
            if a.kind == "stall" and self.may_commit():
                # the offset that stalls is the one reached now: commit it first
                self.commit(self._current())
                now = time.time()
            self.st.modes[a.kind] = (now, now + a.duration if a.duration else math.inf)
            self.st.mode_parts[a.kind] = self.held()
            return True
        assignment = sorted(c.assignment())
        if a.kind == "rewind":
            n = a.messages or 0
            begin = c.beginning_offsets(assignment) if assignment else {}
            offsets: dict[Any, int] = {}
            before: dict[str, int] = {}
            # a partition taken over since the member's last commit has no commit of its own yet:
            # commit where it stands first, so that the rewind is one in the committed offsets (a
            # commit backwards), not a first commit that lands ahead of the previous owner's
            fresh = {tp: self.st.consumed[tp] for tp in assignment
                     if tp not in self.st.committed and tp in self.st.consumed}
            if fresh:
                self.commit(fresh)
            for tp in assignment:
                base = self.st.committed.get(tp, self.st.consumed.get(tp))
                if base is None:
                    continue
                target = max(base - n, int(begin.get(tp, 0)))
                c.seek(tp, target)
                self.st.consumed[tp] = target
                offsets[tp] = target
                before[f"{tp.topic}:{tp.partition}"] = base
            self.commit(offsets)
            self.fault("rewind", now, time.time(), messages=n, before=before,
                       after={f"{tp.topic}:{tp.partition}": o for tp, o in offsets.items()})
            return True
        if a.kind == "skip":
            # carried out by the loop (:meth:`skip_step`): it may wait for a backlog or for retention
            self.skip_job = _SkipJob(a, now)
            self.skip_step(None)
            return True
        # crash is carried out by the runner (SIGKILL); nothing to do here
        return True

    # -- skips ----------------------------------------------------------------------------
    def _processed(self, tp: Any) -> int:
        """The offset after the last record of ``tp`` the member processed (its position when it has
        processed none since it got the partition)."""
        if tp in self.st.consumed:
            return self.st.consumed[tp]
        return int(self.consumer.position(tp, timeout_ms=5000))

    def held_back(self) -> list[Any]:
        """The partitions a skip in progress keeps the member from reading."""
        j = self.skip_job
        if j is None or j.phase != "wait" or (j.action.state == "catching_up" and j.action.mechanism == "seek"):
            return []
        return j.targets

    def skip_step(self, batch: dict[Any, Any] | None) -> None:
        """Advance the skip in progress (``batch``: what the last poll returned, for the
        out-of-range reset)."""
        j = self.skip_job
        if j is None or self.consumer is None:
            return
        a, c, now = j.action, self.consumer, time.time()
        if not j.targets:
            held = sorted(c.assignment())
            if not held:
                if now > j.started + a.wait_s:
                    log.warning("skip at %.1fs: the member holds no partition; nothing skipped", a.at)
                    self.skip_job = None
                return
            j.targets = held[:1] if a.partitions == "one" else held
        if a.mechanism == "out_of_range":
            if not j.processed:
                # from the processed offset: records the client fetched before the hold would still
                # be returned after it, and read past what retention deletes meanwhile
                j.processed = {tp: self._processed(tp) for tp in j.targets}
                for tp, o in j.processed.items():
                    c.seek(tp, o)
            self._skip_out_of_range(j, batch, now)
            return
        timed_out = now > j.started + a.wait_s
        if a.size is not None and not timed_out:
            if now - j.last_check < 0.02:
                return
            j.last_check = now
            ends = c.end_offsets(j.targets)
            backlog = sum(max(0, int(ends[tp]) - self._processed(tp)) for tp in j.targets)
            if a.state == "catching_up":
                # the burst's backlog first, then the catch-up down to the size
                j.seen_above = j.seen_above or backlog > a.size
                ready = j.seen_above and 0 < backlog <= a.size
            else:
                ready = backlog >= a.size
            if not ready:
                return
        # seek to the end and commit it: what lies between the processed offset and the end is
        # never processed
        start = time.time()
        processed = {tp: self._processed(tp) for tp in j.targets}
        c.seek_to_end(*j.targets)
        after = {tp: int(c.position(tp, timeout_ms=5000)) for tp in j.targets}
        before = {_k(tp): self.st.committed.get(tp, -1) for tp in j.targets}
        self.st.consumed.update(after)
        self.commit(after)
        self._skip_fault(j, start, processed, after, before=before)

    def _skip_out_of_range(self, j: _SkipJob, batch: dict[Any, Any] | None, now: float) -> None:
        a, c = j.action, self.consumer
        if j.phase == "wait":
            if now - j.last_check < 0.1:
                return
            j.last_check = now
            j.processed = {tp: self._processed(tp) for tp in j.targets}
            begin = c.beginning_offsets(j.targets)
            for tp in j.targets:
                if int(begin[tp]) > j.processed[tp]:
                    j.deleted_at.setdefault(tp, now)
            gone = len(j.deleted_at) == len(j.targets)
            if a.size is not None and gone:
                ends = c.end_offsets(j.targets)
                gone = sum(int(ends[tp]) - int(begin[tp]) for tp in j.targets) >= a.size
            if gone or now > j.started + a.wait_s:
                # read again: the fetch from a deleted position is out of range, and the client's
                # auto_offset_reset (latest) moves the position to the end
                j.log_start = {tp: int(begin[tp]) for tp in j.targets}
                j.phase, j.resumed = "reset", now
                return
            return
        for tp in j.targets:
            if tp in j.jumped:
                continue
            # records the client had fetched before the hold are still returned after it: what
            # the member processed grows until the fetch from a deleted offset resets it; the
            # reset is a gap between the last processed offset and the next (a record, or the
            # position when the poll returned none)
            done = self.st.consumed.get(tp, j.processed[tp])
            recs = (batch or {}).get(tp)
            nxt = int(recs[0].offset) if recs else int(c.position(tp, timeout_ms=5000))
            if nxt > done:
                j.jumped[tp] = nxt
                j.processed[tp] = done
        if len(j.jumped) < len(j.targets) and now < j.resumed + a.wait_s:
            return
        for tp in j.targets:
            if tp not in j.jumped:  # never reset: it read on from where it was
                j.processed[tp] = self.st.consumed.get(tp, j.processed[tp])
        after = {tp: j.jumped.get(tp, j.processed[tp]) for tp in j.targets}
        for tp, o in after.items():
            self.st.consumed[tp] = max(self.st.consumed.get(tp, o), o)
        lost = {tp: max(0, j.log_start[tp] - j.processed[tp]) for tp in j.targets}
        if any(lost.values()):
            parts = tuple(_pairs([tp for tp in j.targets if lost[tp]]))
            self.writer.write(Fault("retention_overrun", self.group, self.name,
                                    min(j.deleted_at.values(), default=j.resumed), j.resumed,
                                    {"lost": {_k(tp): n for tp, n in lost.items() if n}}, parts))
        self._skip_fault(j, j.resumed, j.processed, after,
                         log_start={_k(tp): o for tp, o in j.log_start.items()},
                         reset_to={_k(tp): o for tp, o in j.jumped.items()})

    def _skip_fault(self, j: _SkipJob, start: float, processed: dict[Any, int], after: dict[Any, int],
                    **detail: Any) -> None:
        """Record the skip: per partition the messages never processed (``skipped``: from the
        processed offset, or from the log start where retention deleted what lay below it, to the
        new offset); the fault names the partitions that lost any."""
        a = j.action
        floor = {tp: max(processed[tp], j.log_start.get(tp, processed[tp])) for tp in j.targets}
        skipped = {tp: max(0, after[tp] - floor[tp]) for tp in j.targets}
        self.skip_job = None
        self.writer.write(Fault(
            "skip", self.group, self.name, start, time.time(),
            {"mechanism": a.mechanism, "partitions": a.partitions, "size": a.size, "state": a.state,
             "processed": {_k(tp): o for tp, o in processed.items()},
             "after": {_k(tp): o for tp, o in after.items()},
             "skipped": {_k(tp): n for tp, n in skipped.items()}, **detail},
            _pairs([tp for tp in j.targets if skipped[tp] > 0])))

    # -- an admin reset's stop (the runner's) -----------------------------------------------
    def hold_step(self) -> None:
        """When the runner asks (its hold file names a reset this member has not stopped for):
        commit what was processed, leave the group, say so, wait until the runner is done, join
        again."""
        try:
            hold = json.loads(self.hold_file.read_text())
        except (OSError, ValueError):
            return
        rid = str(hold.get("id", ""))
        if not rid or rid == self.hold_done:
            return
        self.hold_done = rid
        start = time.time()
        held = self._step_out()
        Path(f"{self.cfg['out']}.held-{rid}").touch()
        while self.hold_file.exists() and time.time() < self.end:
            if _stop.wait(0.05):
                break
        self._open()
        self.fault("admin_stop", start, time.time(), parts=held, reset=rid)

    def _current(self) -> dict[Any, int]:
        """What to commit now: the position after the last processed record of each partition.

        ``position()`` rather than last offset + 1, so that a read_committed consumer commits
        past a transaction's commit marker (the last stable offset) as Java consumers do.
        """
        out: dict[Any, int] = {}
        assigned = set(self.consumer.assignment())
        for tp, o in self.st.consumed.items():
            if tp not in assigned:
                continue
            try:
                out[tp] = max(o, int(self.consumer.position(tp, timeout_ms=2000)))
            except Exception:
                out[tp] = o
            self.st.consumed[tp] = out[tp]
        return out

    # -- main loop ------------------------------------------------------------------------
    def run(self) -> None:
        s = self.spec
        self._create()
        started = _await_start(self.cfg)
        if started is None or not _sleep_until(started[0] + s.join_at):
            self._close()
            return
        self.t0, self.end, _ = started
        self._subscribe()
        if s.join_at > 0:
            now = time.time()
            self.fault("join", now, now, scheduled=self.t0 + s.join_at)
        # crashes and admin resets are carried out by the runner
        actions = sorted((a for a in s.actions if a.kind != "crash"
                          and not (a.kind == "skip" and a.mechanism == "admin_reset")), key=lambda a: a.at)
        delay = s.processing_delay_ms / 1000.0
        interval = s.auto_commit_interval_ms / 1000.0
        next_commit = time.time() + interval
        partial = False
        try:
            while not _stop.is_set() and time.time() < self.end:
                self.hold_step()
                while (actions and self.skip_job is None and time.time() >= self.t0 + actions[0].at
                       and self._ready(actions[0])):
                    if not self.run_action(actions.pop(0)):
                        return
                self.skip_step(None)
                now = time.time()
                self._expire_modes(now)
                c = self.consumer
                idle = self.active("stall", now) or self.active("stop", now)
                hold = set(c.assignment()) if idle else set(self.held_back()) & set(c.assignment())
                if set(c.paused()) != hold:
                    if c.paused():
                        c.resume(*c.paused())
                    if hold:
                        c.pause(*hold)
                batch = c.poll(timeout_ms=100, max_records=s.max_poll_records)
                if self.skip_job is not None and self.skip_job.phase == "reset":
                    self.skip_step(batch)
                progressed = False
                for tp, recs in batch.items():
                    for r in recs:
                        if delay:
                            time.sleep(delay)
                        self.st.consumed[tp] = r.offset + 1
                        progressed = True
                        if _stop.is_set() or time.time() >= self.end:
                            partial = True
                            break
                    if partial:
                        break
                if partial:
                    break
                now = time.time()
                if not self.may_commit():
                    continue
                if s.enable_auto_commit or idle:
                    if now >= next_commit:
                        next_commit = now + interval
                        self.commit(self._current())
                elif progressed:
                    self.commit(self._current())
            # the end of the run (or SIGTERM): a last commit unless committing is off
            if self.consumer is not None and self.may_commit():
                if partial:
                    self.commit({tp: o for tp, o in self.st.consumed.items()
                                 if tp in self.consumer.assignment()})
                else:
                    self.commit(self._current())
        finally:
            may_commit = self.may_commit()
            self._expire_modes(time.time(), final=True)
            if self.consumer is not None:
                if not may_commit or partial:
                    self.st.consumed.clear()  # the revoke listener must not commit either
                self._close()


def _assignor(name: str) -> type:
    """The kafka-python assignor class of an assignor name (:class:`MemberSpec`)."""
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor

    classes: dict[str, type] = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
                                "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}
    return classes[name]


def _k(tp: Any) -> str:
    """A partition as the truth's details name it: ``topic:partition``."""
    return f"{tp.topic}:{tp.partition}"


def _pairs(tps: list[Any]) -> tuple[tuple[str, int], ...]:
    return tuple((tp.topic, tp.partition) for tp in tps)


def run_member(cfg: dict[str, Any], writer: TruthWriter) -> None:
    _Member(cfg, writer).run()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m lagscope.devtools.sim.worker SPEC.json", file=sys.stderr)
        return 2
    cfg = json.loads(Path(args[0]).read_text())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    writer = TruthWriter(Path(cfg["out"]))
    try:
        if cfg["role"] == "producer":
            run_producer(cfg, writer)
        else:
            run_member(cfg, writer)
    finally:
        writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
