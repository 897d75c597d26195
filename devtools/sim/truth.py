"""Ground truth of a simulator run: one JSON object per line in ``<out>/truth.jsonl``.

Every record has a ``type``; timestamps are epoch seconds (float, wall clock, ``time.time()``);
offsets are Kafka offsets (int); topic and group names are the real (prefixed) names.

- ``produce``  {topic, partition, offset, ts, txn}: a record the broker acknowledged; ``ts``
  is the record's CreateTime from the broker's RecordMetadata (ms precision); ``txn`` is
  null for a non-transactional producer, else "committed", "aborted" or "open".
- ``commit``   {group, member, topic, partition, offset, ts}: an offset commit the
  coordinator acknowledged; ``ts`` is taken right after the acknowledgement.
- ``assign`` {group, member, partitions: [[topic, partition], ...], ts, generation, member_id}:
  the member's rebalance listener, with the group generation and the coordinator-given
  member id it joined with.
- ``revoke`` {group, member, partitions, ts, lost, closing}:
  the member's rebalance listener; ``lost`` is true when the partitions were lost
  (the member was evicted) rather than revoked cleanly; ``closing`` (revoke only) is true
  when the member gave them up because it was closing (leave, bounce, end of the run).
- ``fault``    {kind, group, member, start, end, detail, partitions}: an injected fault or
  operation and the partitions it touches (the member's when it began); ``end`` equals
  ``start`` for instantaneous ones (crash, leave, join, rewind, skip). ``retention_overrun``
  (member "") is the runner's, from the end state: messages deleted before the group read them,
  dated by the deletion the runner saw when it watched the partition's log start.
- ``run``      {scenario, seed, run_id, ts}: the run itself: the scenario's name, the seed its
  timings, rates and send jitter were drawn from (the same seed gives the same schedule), and
  ``ts`` = t0, the scenario's time zero. The first line.
- ``end_state`` {ts, partitions: [{topic, partition, log_start, end, lso}],
  committed: [{group, topic, partition, offset}]}: what the broker reports after the run
  (ListOffsets earliest/latest/latest-read_committed, OffsetFetch). Always the last line.

    >>> records = load("out/truth.jsonl")                 # doctest: +SKIP
    >>> [r for r in records if isinstance(r, Commit)][-1].offset
"""

from __future__ import annotations

import bisect
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from lagscope.errors import ScenarioError

__all__ = [
    "Assign",
    "Commit",
    "EndState",
    "Fault",
    "GroupOffset",
    "LogStartMove",
    "PartitionEnd",
    "Produce",
    "Rebalance",
    "Record",
    "Revoke",
    "RunInfo",
    "TruthIndex",
    "TruthWriter",
    "held_partitions",
    "load",
    "read_part",
    "read_parts",
    "record_from_dict",
    "record_ts",
    "retention_overruns",
    "to_dict",
    "write_truth",
]


@dataclass(frozen=True)
class Produce:
    topic: str
    partition: int
    offset: int
    ts: float
    txn: Literal["committed", "aborted", "open"] | None = None
    #: when the broker's acknowledgement arrived (``time.time()`` in the send callback): the
    #: record was in the log by then. A burst the producer queues is appended seconds after its
    #: CreateTime; None in a truth written before it was recorded (then ``ts`` stands in)
    acked: float | None = None
    type: Literal["produce"] = "produce"


@dataclass(frozen=True)
class Commit:
    group: str
    member: str
    topic: str
    partition: int
    offset: int
    ts: float
    type: Literal["commit"] = "commit"


@dataclass(frozen=True)
class Assign:
    group: str
    member: str
    partitions: tuple[tuple[str, int], ...]
    ts: float
    generation: int = -1
    member_id: str = ""
    type: Literal["assign"] = "assign"


@dataclass(frozen=True)
class Revoke:
    group: str
    member: str
    partitions: tuple[tuple[str, int], ...]
    ts: float
    lost: bool = False
    closing: bool = False
    type: Literal["revoke"] = "revoke"


@dataclass(frozen=True)
class Fault:
    kind: str
    group: str
    member: str
    start: float
    end: float
    detail: dict[str, Any] = field(default_factory=dict)
    #: the partitions the fault touches: those the member held when it began (a crash, a stall),
    #: or whose data it concerns (a retention overrun)
    partitions: tuple[tuple[str, int], ...] = ()
    type: Literal["fault"] = "fault"


@dataclass(frozen=True)
class RunInfo:
    scenario: str
    seed: int
    run_id: str
    ts: float
    type: Literal["run"] = "run"


@dataclass(frozen=True)
class PartitionEnd:
    topic: str
    partition: int
    log_start: int
    end: int
    lso: int


@dataclass(frozen=True)
class GroupOffset:
    group: str
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class EndState:
    ts: float
    partitions: tuple[PartitionEnd, ...]
    committed: tuple[GroupOffset, ...]
    type: Literal["end_state"] = "end_state"

    def end_of(self, topic: str, partition: int) -> PartitionEnd:
        for p in self.partitions:
            if (p.topic, p.partition) == (topic, partition):
                return p
        raise KeyError((topic, partition))

    def committed_of(self, group: str) -> dict[tuple[str, int], int]:
        return {(c.topic, c.partition): c.offset for c in self.committed if c.group == group}


Record = RunInfo | Produce | Commit | Assign | Revoke | Fault | EndState


#: faults that change a group's membership (and so cause a rebalance)
_MEMBERSHIP_FAULTS = ("crash", "leave", "join", "bounce", "stop_polling")


@dataclass(frozen=True)
class Rebalance:
    """A rebalance of one group as the truth shows it (see :meth:`TruthIndex.rebalances`)."""

    group: str
    start: float
    end: float
    members: tuple[str, ...]
    cause: Fault | None
    generation: int = -1


class TruthIndex:
    """Questions about a run's truth at any instant, for comparing lake rows and analytics.

        >>> ti = TruthIndex(load("out/truth.jsonl"))                # doctest: +SKIP
        >>> ti.lag_at(group, topic, 0, t), ti.time_lag_at(group, topic, 0, t)

    "At t" means: the records with a timestamp ≤ t. The log end at t is counted from produce
    records in the log by t (acknowledged by t: ``acked``; ``ts``, the CreateTime, in a truth
    without it), so it ignores transaction markers; it is exact for non-transactional topics up
    to the milliseconds between a record's append and its acknowledgement. The CreateTime is
    not when a record exists: a burst the producer queues is appended seconds later (the skip
    matrix's 100,000 burst ran 20,000–30,000 messages ahead of the broker's end by CreateTime).
    """

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self._produce: dict[tuple[str, int], list[Produce]] = {}
        self._commits: dict[tuple[str, str, int], list[Commit]] = {}
        #: per partition, built on first use: the produce times in order and the log end by each
        self._ends: dict[tuple[str, int], tuple[list[float], list[int]]] = {}
        for r in records:
            if isinstance(r, Produce):
                self._produce.setdefault((r.topic, r.partition), []).append(r)
            elif isinstance(r, Commit):
                self._commits.setdefault((r.group, r.topic, r.partition), []).append(r)
        for ps in self._produce.values():
            ps.sort(key=lambda p: p.offset)
        for cs in self._commits.values():
            cs.sort(key=lambda c: c.ts)
        ends = [r for r in records if isinstance(r, EndState)]
        self.end_state: EndState | None = ends[-1] if ends else None
        runs = [r for r in records if isinstance(r, RunInfo)]
        #: the run's scenario, seed and t0 (None in a truth written before seeds were recorded)
        self.run: RunInfo | None = runs[0] if runs else None

    def produce_ts(self, topic: str, partition: int, offset: int) -> float | None:
        """The CreateTime of the record at ``offset`` (None: no data record there)."""
        for p in self._produce.get((topic, partition), []):
            if p.offset == offset:
                return p.ts
        return None

    def end_at(self, topic: str, partition: int, t: float) -> int:
        """The log end offset at ``t``: one past the last record in the log by then (acknowledged;
        created, in a truth without ``acked``), 0 if none."""
        tp = (topic, partition)
        if tp not in self._ends:
            ps = sorted((_in_log(p), p.offset) for p in self._produce.get(tp, []))
            ends: list[int] = []
            for _, o in ps:
                ends.append(max(o + 1, ends[-1]) if ends else o + 1)
            self._ends[tp] = ([ts for ts, _ in ps], ends)
        times, ends = self._ends[tp]
        i = bisect.bisect_right(times, t)
        return ends[i - 1] if i else 0

    def commits(self, group: str, topic: str, partition: int) -> list[Commit]:
        """Every commit of one partition by one group, in time order."""
        return list(self._commits.get((group, topic, partition), []))

    def committed_at(self, group: str, topic: str, partition: int, t: float) -> int | None:
        """The group's committed offset at ``t`` (None: nothing committed yet)."""
        last = None
        for c in self._commits.get((group, topic, partition), []):
            if c.ts > t:
                break
            last = c.offset
        return last

    def lag_at(self, group: str, topic: str, partition: int, t: float) -> int | None:
        """Offset lag at ``t``: max(0, end − committed); None before the first commit."""
        c = self.committed_at(group, topic, partition, t)
        return None if c is None else max(0, self.end_at(topic, partition, t) - c)

    def time_lag_at(self, group: str, topic: str, partition: int, t: float) -> float | None:
        """Seconds behind at ``t``: t − CreateTime of the first record not yet committed among
        those in the log by ``t`` (0 when caught up; None before the first commit)."""
        c = self.committed_at(group, topic, partition, t)
        if c is None:
            return None
        pending = [p.ts for p in self._produce.get((topic, partition), []) if p.offset >= c and _in_log(p) <= t]
        return max(0.0, t - min(pending)) if pending else 0.0

    def faults(self, kind: str | None = None) -> list[Fault]:
        return [r for r in self.records if isinstance(r, Fault) and (kind is None or r.kind == kind)]

    def rebalances(self, group: str) -> list[Rebalance]:
        """The group's rebalances, one per generation its members were assigned in, in time order.

        A rebalance ends with the last member's first assignment in the new generation; it starts
        at the first revocation after the previous generation was complete (revocations of a
        closing member excluded), or at its first assignment when nobody revoked. A static
        member that comes back without a rebalance is given the current generation again, so
        it makes no new rebalance. ``cause`` is the latest membership fault (crash, leave, join,
        bounce, stop_polling) of the group after the previous rebalance ended and before this one
        started, if any: after a crash the group stopped progressing at ``cause.start``.
        """
        events = self.assignments(group)
        causes = sorted((f for f in self.faults() if f.group == group and f.kind in _MEMBERSHIP_FAULTS),
                        key=lambda f: f.start)
        gens: dict[int, list[Assign]] = {}
        seen: set[tuple[str, int]] = set()
        for r in events:
            if isinstance(r, Assign) and (r.member, r.generation) not in seen:
                seen.add((r.member, r.generation))
                gens.setdefault(r.generation, []).append(r)
        revokes = [r for r in events if isinstance(r, Revoke) and not r.closing]
        out: list[Rebalance] = []
        prev_end = -math.inf
        for gen, assigns in sorted(gens.items(), key=lambda kv: kv[1][0].ts):
            first, end = assigns[0].ts, max(a.ts for a in assigns)
            before = [r.ts for r in revokes if prev_end < r.ts <= first]
            start = min(before) if before else first
            cause = [f for f in causes if prev_end <= f.start <= start]
            out.append(Rebalance(group, start, end, tuple(sorted({a.member for a in assigns})),
                                 cause[-1] if cause else None, gen))
            prev_end = end
        return out

    def assignments(self, group: str, member: str | None = None) -> list[Assign | Revoke]:
        """The group's assign and revoke records (of one member), in time order."""
        return [r for r in self.records if isinstance(r, Assign | Revoke) and r.group == group
                and (member is None or r.member == member)]


def held_partitions(records: list[Record], group: str, member: str) -> tuple[tuple[str, int], ...]:
    """The partitions ``member`` of ``group`` held after ``records`` (its assigns and revokes, in
    time order; an assignment adds, a revocation removes, so eager and cooperative both replay)."""
    held: set[tuple[str, int]] = set()
    for r in sorted((r for r in records if isinstance(r, Assign | Revoke) and r.group == group
                     and r.member == member), key=lambda r: r.ts):
        if isinstance(r, Assign):
            held |= set(r.partitions)
        else:
            held -= set(r.partitions)
    return tuple(sorted(held))


@dataclass(frozen=True)
class LogStartMove:
    """A partition's log start seen to move from ``before`` to ``after`` (the broker deleted the
    offsets between): after ``since`` (the time the poll that still saw ``before`` was sent) and
    by ``seen`` (the time the poll that saw ``after`` was answered). The runner's, not a truth
    record: it dates the ``retention_overrun`` faults."""

    topic: str
    partition: int
    before: int
    after: int
    since: float
    seen: float


def retention_overruns(records: list[Record], end: EndState, retention_s: dict[str, float],
                       log_starts: list[LogStartMove] | None = None) -> list[Fault]:
    """One ``retention_overrun`` fault per group whose committed offset is below the log start at
    the end: messages the broker deleted before the group read them. ``partitions`` the
    partitions concerned, ``detail.lost`` ``"topic:partition"`` → messages deleted unread.

    ``start``: when the loss began, the deletion of the first unread record (the end's committed
    offset ``o``: every record before it was read): the earliest time the runner's watch of the
    log starts (``log_starts``) allows, the send time of the last poll that still saw ``o`` in the
    log (``detail.deleted_by``: the answer that saw it gone; the two are one poll interval apart).
    Without a move that deleted ``o`` (no watch, or the deletion came after the watch ended): the
    earliest time the loss can have begun, the CreateTime of the first unread record + the
    topic's retention (``retention_s``: topic → s), else the group's last commit of the partition.
    ``detail.deletable_at``: that earliest time, in every case; ``end``: the end state's time."""
    produced = {(r.topic, r.partition, r.offset): r.ts for r in records if isinstance(r, Produce)}
    last_commit: dict[tuple[str, str, int], float] = {}
    for r in records:
        if isinstance(r, Commit):
            k = (r.group, r.topic, r.partition)
            last_commit[k] = max(last_commit.get(k, r.ts), r.ts)
    moves = sorted(log_starts or [], key=lambda m: m.seen)
    out: list[Fault] = []
    for g in sorted({c.group for c in end.committed}):
        lost: dict[str, int] = {}
        starts: list[float] = []
        deletable: list[float] = []
        seen: list[float] = []
        parts: list[tuple[str, int]] = []
        for (topic, p), o in sorted(end.committed_of(g).items()):
            log_start = end.end_of(topic, p).log_start
            if o >= log_start:
                continue
            parts.append((topic, p))
            lost[f"{topic}:{p}"] = log_start - o
            created = produced.get((topic, p, o))
            if created is not None and topic in retention_s:
                may = created + retention_s[topic]
            else:
                may = last_commit.get((g, topic, p), end.ts)
            deletable.append(may)
            gone = next((m for m in moves if m.topic == topic and m.partition == p and m.before <= o < m.after), None)
            if gone is not None:
                starts.append(gone.since)
                seen.append(gone.seen)
            else:
                starts.append(may)
        if parts:
            detail: dict[str, Any] = {"lost": lost, "deletable_at": min(deletable)}
            if seen:
                detail["deleted_by"] = min(seen)
            out.append(Fault("retention_overrun", g, "", min(starts), end.ts, detail, tuple(parts)))
    return out


def _in_log(p: Produce) -> float:
    """When a produced record was in the log at the latest: its acknowledgement's arrival, or
    its CreateTime in a truth written before that was recorded."""
    return p.ts if p.acked is None else max(p.ts, p.acked)


def record_ts(r: Record) -> float:
    """The time a record is sorted by (a fault's start)."""
    return r.start if isinstance(r, Fault) else r.ts


def to_dict(r: Record) -> dict[str, Any]:
    d = asdict(r)
    t = d.pop("type")
    return {"type": t, **d}


def _parts(v: Any) -> tuple[tuple[str, int], ...]:
    return tuple((str(t), int(p)) for t, p in v)


def record_from_dict(d: dict[str, Any]) -> Record:
    """One parsed JSON line → its typed record; raises ScenarioError on an unknown shape."""
    try:
        t = d["type"]
        if t == "produce":
            acked = d.get("acked")
            return Produce(d["topic"], int(d["partition"]), int(d["offset"]), float(d["ts"]), d.get("txn"),
                           None if acked is None else float(acked))
        if t == "commit":
            return Commit(d["group"], d["member"], d["topic"], int(d["partition"]), int(d["offset"]),
                          float(d["ts"]))
        if t == "assign":
            return Assign(d["group"], d["member"], _parts(d["partitions"]), float(d["ts"]),
                          int(d.get("generation", -1)), str(d.get("member_id", "")))
        if t == "revoke":
            return Revoke(d["group"], d["member"], _parts(d["partitions"]), float(d["ts"]),
                          bool(d.get("lost", False)), bool(d.get("closing", False)))
        if t == "fault":
            return Fault(d["kind"], d["group"], d["member"], float(d["start"]), float(d["end"]),
                         dict(d.get("detail") or {}), _parts(d.get("partitions") or ()))
        if t == "run":
            return RunInfo(str(d["scenario"]), int(d["seed"]), str(d["run_id"]), float(d["ts"]))
        if t == "end_state":
            return EndState(
                float(d["ts"]),
                tuple(PartitionEnd(p["topic"], int(p["partition"]), int(p["log_start"]), int(p["end"]),
                                   int(p["lso"])) for p in d["partitions"]),
                tuple(GroupOffset(c["group"], c["topic"], int(c["partition"]), int(c["offset"]))
                      for c in d["committed"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ScenarioError(f"bad truth record {d!r}: {exc}") from exc
    raise ScenarioError(f"unknown truth record type {d.get('type')!r}")


def load(path: str | Path) -> list[Record]:
    """Read ``truth.jsonl`` (or a per-process part) into typed records, in file order."""
    out: list[Record] = []
    p = Path(path)
    try:
        lines = p.read_text().splitlines()
    except OSError as exc:
        raise ScenarioError(f"cannot read truth file {p}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError as exc:
            raise ScenarioError(f"{p}:{n}: not JSON: {exc}") from exc
        out.append(record_from_dict(d))
    return out


def read_parts(folder: Path) -> list[Record]:
    """Every record of the per-process part files, tolerating a torn last line (SIGKILL)."""
    out: list[Record] = []
    for part in sorted(folder.glob("*.jsonl")):
        out.extend(read_part(part))
    return out


def read_part(part: Path) -> list[Record]:
    """The records of one process's part file, tolerating a torn last line (SIGKILL)."""
    out: list[Record] = []
    for line in part.read_text().splitlines():
        if not line.strip():
            continue
        try:
            d = json.loads(line)
        except ValueError:
            continue  # the tail of a process killed mid-write
        out.append(record_from_dict(d))
    return out


class TruthWriter:
    """Appends records to one process's part file, flushed line by line (a SIGKILL loses nothing
    already written but a torn last line, which :func:`read_parts` drops)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._f: IO[str] = self.path.open("a", buffering=1)

    def write(self, r: Record) -> None:
        self._f.write(json.dumps(to_dict(r), separators=(",", ":")) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def write_truth(path: Path, records: list[Record]) -> None:
    """Write the merged truth file whole: the run first, sorted by time, end_state last, via temp
    + rename."""
    runs: list[Record] = [r for r in records if isinstance(r, RunInfo)]
    body = runs + sorted((r for r in records if not isinstance(r, EndState | RunInfo)), key=record_ts)
    ends = [r for r in records if isinstance(r, EndState)]
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with tmp.open("w") as f:
        for r in [*body, *ends]:
            f.write(json.dumps(to_dict(r), separators=(",", ":")) + "\n")
    tmp.replace(path)
