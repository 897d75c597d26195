"""Tail ``__consumer_offsets``: every commit and every group change, exactly, into the lake.

    >>> tailer = CommitLogTailer("127.0.0.1:9092", "lake", "prod", start="1h")  # doctest: +SKIP
    >>> threading.Thread(target=tailer.run, args=(stop_event,)).start()          # doctest: +SKIP

What it does (see docs/commitlog.md):

- **Reads** every partition of ``__consumer_offsets`` with a group-less kafka-python consumer
  (``assign()``, no commits of its own, raw bytes, ``exclude_internal_topics=False``,
  ``isolation_level=read_committed`` so that the offsets of aborted transactions, which never
  took effect, are never reported).
- **Decodes** with the pure :mod:`lagscope.collector.offsets_codec`; an unknown version or a
  corrupt record is counted and skipped with its coordinates, never fatal.
- **Writes** the lake tables ``commits`` and ``group_events`` (:mod:`lagscope.schema`), one file
  per table and date per flush (every ``flush_records`` records or ``flush_interval_s``).
- **Starts fast**: without saved positions it seeks by time (``offsets_for_times``, e.g. the
  last hour) instead of replaying the whole topic; the sweeps hold the rest of the state.
- **Resumes exactly** after a crash, without duplicate rows: positions live in
  ``<lake>/_state/commitlog/<cluster>.json`` and each flush is two-phase. The state file is
  first rewritten with the flush's *intent* (its offset ranges and the lake folders it will
  touch), then the lake files are written (atomically, by :mod:`lagscope.lake`), then the state
  file is rewritten with the new positions. A restart that finds an intent reads back the rows
  of those ranges that did reach the lake and does not write them again.
- **On an object store** (a :class:`~lagscope.storage.Store` lake, ``s3://bucket/prefix``) the
  same protocol runs through the store: the state file is one object put whole over the old one
  at each of the two steps (no reader ever sees half of it: a PUT replaces an object or does not),
  and the lake files are put whole, then made visible by their commit markers
  (:func:`lagscope.lake.write_table`). A tail killed after a file's object but before its marker
  leaves an object no reader lists (nor the restart's read-back: those rows are written again, in
  a new file, once); killed after the marker, the read-back finds the rows and skips them.
- **Filters** groups as the sweeps do: a group outside the cluster's ``groups`` include/exclude
  (:meth:`lagscope.config.GroupFilter.matches`, the one predicate both use) is decoded, counted
  in ``TailStats.excluded`` and never written.
- **Reports** its progress in :class:`TailStats` (records read, decoded, skipped by reason, lag
  behind the topic's end, newest record time, errors), served on ``/metrics`` as
  ``lagscope_commitlog_*`` (:class:`lagscope.collector.metrics.CommitLogCollector`).
- **Says how complete the lake is** (:attr:`CommitLogTailer.watermark`): each lag check asks the
  partitions' end offsets at a time ``t``; once the tail has read up to those ends and flushed
  what it read, every record appended before ``t`` is in the lake, and ``t`` is its watermark.
  ``lagscope run``'s full analytics steps stop there (docs/analytics.md).
- **Degrades**: without READ on ``__consumer_offsets`` (TopicAuthorizationFailed) it logs one
  warning and stops; the collector carries on with sweeps only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import math
import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from lagscope import lake
from lagscope.collector.kafka_client import stop_io_thread
from lagscope.collector.offsets_codec import (
    ConsumerGroupCurrentAssignmentValue,
    ConsumerGroupKey,
    ConsumerGroupMemberValue,
    ConsumerGroupMetadataValue,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupTargetAssignmentMemberValue,
    ConsumerGroupTargetAssignmentMetadataValue,
    DecodedRecord,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordType,
    TopicPartitions,
    UndecodedRecordType,
    UnknownRecordVersion,
    decode_consumer_assignment,
    decode_record,
)
from lagscope.errors import KafkaUnavailable, LagscopeError, LakeError, RecordDecodeError
from lagscope.schema import COMMITS, GROUP_EVENTS
from lagscope.storage import Store

if TYPE_CHECKING:
    from lagscope.config import ClusterConfig

__all__ = [
    "OFFSETS_TOPIC",
    "CommitLogAccessDenied",
    "CommitLogService",
    "CommitLogStateError",
    "CommitLogTailer",
    "CommitLogTopicMissing",
    "StartPosition",
    "TailStats",
    "group_event_row",
    "parse_start",
    "state_path",
]

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
_STATE_VERSION = 1


class CommitLogAccessDenied(KafkaUnavailable):
    """The credentials may not read ``__consumer_offsets`` (TopicAuthorizationFailed)."""


class CommitLogStateError(LakeError):
    """The saved positions file is unreadable: fix or delete it (the tail then starts afresh)."""


class CommitLogTopicMissing(KafkaUnavailable):
    """``__consumer_offsets`` is not in the metadata: no group has used the cluster yet (the
    broker creates the topic on first use), or the credentials may not even Describe it.
    Kafka's all-topics metadata does not tell the two apart, so the tail keeps checking."""


# --------------------------------------------------------------------------------------------
# Start position
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StartPosition:
    """Where to start when there are no saved positions: earliest, latest or a time (epoch ms)."""

    kind: Literal["earliest", "latest", "time"]
    timestamp_ms: int | None = None


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_start(text: str | StartPosition, *, now: float | None = None) -> StartPosition:
    """``'earliest'``, ``'latest'``, a duration back from now (``'1h'``, ``'90s'``) or an ISO time.

    Raises ValueError with one line naming the value.
    """
    if isinstance(text, StartPosition):
        return text
    value = text.strip()
    if value in ("earliest", "latest"):
        return StartPosition(value)  # type: ignore[arg-type]
    clock = time.time() if now is None else now
    for unit in ("ms", "s", "m", "h", "d"):
        number = value.removeprefix("-").removesuffix(unit)
        if value.endswith(unit) and number.replace(".", "", 1).isdigit():
            back = float(number) * _UNITS[unit]
            return StartPosition("time", int((clock - back) * 1000))
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"consumer_offsets_tail.start: {text!r} is not 'earliest', 'latest', "
                         "a duration such as '1h' or an ISO-8601 time") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return StartPosition("time", int(when.timestamp() * 1000))


# --------------------------------------------------------------------------------------------
# Rows (pure)
# --------------------------------------------------------------------------------------------


def _ts(ms: int | None) -> dt.datetime | None:
    if ms is None or ms < 0:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


TopicNames = Callable[[uuid.UUID], str]


def _assignment(tps: Iterable[TopicPartitions], names: TopicNames) -> list[dict[str, Any]]:
    return [{"topic": names(tp.topic_id), "partition": p} for tp in tps for p in tp.partitions]


_RECORD_TYPE_NAMES = {
    RecordType.GROUP_METADATA: "group_metadata",
    RecordType.CONSUMER_GROUP_METADATA: "consumer_group_metadata",
    RecordType.CONSUMER_GROUP_PARTITION_METADATA: "consumer_group_partition_metadata",
    RecordType.CONSUMER_GROUP_MEMBER_METADATA: "consumer_group_member",
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA: "consumer_group_target_assignment",
    RecordType.CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER: "consumer_group_target_assignment_member",
    RecordType.CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT: "consumer_group_current_assignment",
}


def _member(member_id: str | None, **fields: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"member_id": member_id, "group_instance_id": None, "client_id": None,
                           "host": None, "session_timeout_ms": None, "rebalance_timeout_ms": None,
                           "assignment": None}
    out.update(fields)
    return out


def group_event_row(rec: DecodedRecord, *, record_ts_ms: int, source_partition: int,
                    source_offset: int, topic_names: TopicNames = str) -> dict[str, Any]:
    """The ``group_events`` row of one group record (classic or KIP-848, tombstones included)."""
    key = rec.key
    value = rec.value
    row: dict[str, Any] = {
        "record_ts": _ts(max(record_ts_ms, 0)), "source_partition": source_partition,
        "source_offset": source_offset, "value_version": getattr(value, "version", None),
        "generation": None, "protocol_type": None, "protocol": None, "leader": None,
        "state_ts": None, "members": None, "member_id": None, "previous_generation": None,
        "member_state": None, "subscribed_topics": None, "pending_revocation": None,
    }
    if isinstance(key, GroupMetadataKey):
        row["group_id"] = key.group
        if value is None:
            row["record_type"] = "group_tombstone"
            return row
        assert isinstance(value, GroupMetadataValue)
        row.update(record_type="group_metadata", generation=value.generation,
                   protocol_type=value.protocol_type, protocol=value.protocol, leader=value.leader,
                   state_ts=_ts(value.current_state_timestamp_ms))
        members = []
        for m in value.members:
            assignment: list[dict[str, Any]] | None = None
            if value.protocol_type == "consumer":
                # the assignment is the client's ConsumerProtocolAssignment; a member mid-rebalance
                # may hold none yet; a foreign encoding leaves the column null
                with contextlib.suppress(RecordDecodeError):
                    assignment = [{"topic": t, "partition": p}
                                  for t, p in decode_consumer_assignment(m.assignment)]
            members.append(_member(m.member_id, group_instance_id=m.group_instance_id,
                                   client_id=m.client_id, host=m.client_host,
                                   session_timeout_ms=m.session_timeout_ms,
                                   rebalance_timeout_ms=m.rebalance_timeout_ms,
                                   assignment=assignment))
        row["members"] = members
        return row
    assert isinstance(key, ConsumerGroupKey)
    row["group_id"] = key.group
    row["record_type"] = _RECORD_TYPE_NAMES.get(key.record_type, f"type_{key.record_type}")
    row["member_id"] = key.member_id
    if isinstance(value, ConsumerGroupMetadataValue):
        row["generation"] = value.epoch
    elif isinstance(value, ConsumerGroupTargetAssignmentMetadataValue):
        row["generation"] = value.assignment_epoch
        row["state_ts"] = _ts(value.assignment_timestamp_ms)
    elif isinstance(value, ConsumerGroupMemberValue):
        row["protocol"] = value.server_assignor
        row["subscribed_topics"] = list(value.subscribed_topic_names)
        row["members"] = [_member(key.member_id, group_instance_id=value.instance_id,
                                  client_id=value.client_id, host=value.client_host,
                                  rebalance_timeout_ms=value.rebalance_timeout_ms)]
    elif isinstance(value, ConsumerGroupTargetAssignmentMemberValue):
        row["members"] = [_member(key.member_id,
                                  assignment=_assignment(value.topic_partitions, topic_names))]
    elif isinstance(value, ConsumerGroupCurrentAssignmentValue):
        row["generation"] = value.member_epoch
        row["previous_generation"] = value.previous_member_epoch
        row["member_state"] = value.state_name
        row["members"] = [_member(key.member_id, assignment=_assignment(value.assigned, topic_names))]
        row["pending_revocation"] = _assignment(value.pending_revocation, topic_names)
    elif isinstance(value, ConsumerGroupPartitionMetadataValue):
        row["subscribed_topics"] = [t.topic_name for t in value.topics]
    return row


_DAY_MS = 86_400_000


class _CommitColumns:
    """Buffered ``commits`` rows, column by column (timestamps as epoch ms): a commit is the
    common record, and building one dict and three datetimes per row costs more than decoding."""

    __slots__ = ("cols",)

    NAMES = ("group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
             "commit_ts", "expire_ts", "record_ts", "source_partition", "source_offset",
             "value_version")

    def __init__(self) -> None:
        self.cols: tuple[list[Any], ...] = tuple([] for _ in self.NAMES)

    def __len__(self) -> int:
        return len(self.cols[0])

    def appenders(self) -> tuple[Callable[[Any], None], ...]:
        """The columns' bound ``append`` methods, in NAMES order (for the hot loop)."""
        return tuple(col.append for col in self.cols)

    def by_date(self) -> dict[dt.date, pa.Table]:
        """One Arrow table per UTC date of record_ts."""
        if not len(self):
            return {}
        table = pa.table([pa.array(col, type=COMMITS.schema.field(name).type)
                          for name, col in zip(self.NAMES, self.cols, strict=True)], names=list(self.NAMES))
        days = sorted({ts // _DAY_MS for ts in self.cols[8]})
        if len(days) == 1:
            return {_day(days[0]): table}
        day_col = pc.divide(pa.array(self.cols[8], pa.int64()), _DAY_MS)
        return {_day(d): table.filter(pc.equal(day_col, d)) for d in days}


def _day(days_since_epoch: int) -> dt.date:
    return dt.datetime.fromtimestamp(days_since_epoch * 86_400, dt.UTC).date()


# --------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------


def state_path(lake_root: Path | str, cluster: str) -> Path:
    """``<lake>/_state/commitlog/<cluster>.json``."""
    return Path(lake_root) / _state_rel(cluster)


def _state_rel(cluster: str) -> str:
    """The state file's path relative to the lake's root (the object's key under an object store's root)."""
    return f"_state/commitlog/{cluster}.json"


def _write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}-{os.getpid()}")
    with tmp.open("w") as fh:
        json.dump(data, fh, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    # make the rename itself durable
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass
class _Pending:
    """The intent of a flush whose lake files may or may not all have been written."""

    ranges: dict[int, tuple[int, int]]  # source partition -> [first, last] offsets
    folders: dict[str, list[str]]  # table -> dates


# --------------------------------------------------------------------------------------------
# The tailer
# --------------------------------------------------------------------------------------------


@dataclass
class TailStats:
    """Counters since start; read them from another thread as a whole (``snapshot()``)."""

    records: int = 0
    commits: int = 0
    group_events: int = 0
    tombstones: int = 0
    flushes: int = 0
    duplicates_skipped: int = 0
    decode_errors: int = 0
    unknown_versions: Counter[str] = field(default_factory=Counter)
    undecoded_types: Counter[str] = field(default_factory=Counter)
    #: records of groups outside the cluster's ``groups`` filter: decoded, never written
    excluded: int = 0
    #: errors that interrupted the tail (connection, fetch, lake write; each retried)
    errors: int = 0
    #: lake writes that failed, per table: ``commits``, ``group_events``, ``_state`` (the positions)
    lake_write_errors: Counter[str] = field(default_factory=Counter)
    #: the newest record timestamp read (epoch ms; the broker's append time for this topic)
    last_record_ts_ms: int | None = None
    #: records of __consumer_offsets not read yet (Σ end − position), as last measured
    lag_records: int | None = None
    #: True while connected and assigned (between a successful open and the next close)
    connected: bool = False
    #: the tail's completeness watermark (epoch s, this process's clock): every record appended to
    #: __consumer_offsets before it is in the lake (or was skipped by design); None until the
    #: first caught-up check after start (:meth:`CommitLogTailer.watermark`)
    watermark_s: float | None = None

    def snapshot(self) -> dict[str, Any]:
        """A copy, safe to take from another thread while the tail runs."""
        for _ in range(10):
            try:  # the counters may gain a key while being copied: copy again
                unknown, undecoded = dict(self.unknown_versions), dict(self.undecoded_types)
                write_errors = dict(self.lake_write_errors)
                break
            except RuntimeError:
                continue
        else:
            unknown, undecoded, write_errors = {}, {}, {}
        return {"records": self.records, "commits": self.commits, "group_events": self.group_events,
                "tombstones": self.tombstones, "flushes": self.flushes,
                "duplicates_skipped": self.duplicates_skipped, "decode_errors": self.decode_errors,
                "unknown_versions": unknown, "undecoded_types": undecoded, "excluded": self.excluded,
                "errors": self.errors, "lake_write_errors": write_errors,
                "last_record_ts_ms": self.last_record_ts_ms,
                "lag_records": self.lag_records, "connected": self.connected,
                "watermark_s": self.watermark_s}


ConsumerFactory = Callable[..., Any]


def _kafka_consumer(**kwargs: Any) -> Any:
    from kafka import KafkaConsumer

    return KafkaConsumer(**kwargs)


def _is_authorization_error(exc: BaseException) -> bool:
    from kafka.errors import TopicAuthorizationFailedError

    return isinstance(exc, TopicAuthorizationFailedError) or "TopicAuthorizationFailed" in type(exc).__name__


class CommitLogTailer:
    """Reads ``__consumer_offsets`` of one cluster into the ``commits`` and ``group_events`` tables.

    ``client`` is a bootstrap string (``"host:port,…"``) or kafka-python keyword arguments
    (``ClusterConfig.client_options()``). ``start`` applies only when no positions are saved.
    Lifecycle: :meth:`open` (assign + seek), :meth:`poll_batch` / :meth:`run_once`,
    :meth:`flush`, :meth:`close`; or :meth:`run` until a stop event, in a thread.
    """

    def __init__(self, client: str | Mapping[str, Any], lake_root: Path | str | Store, cluster: str, *,
                 start: str | StartPosition = "1h", flush_records: int = 20_000,
                 flush_interval_s: float = 5.0, poll_timeout_ms: int = 500,
                 max_poll_records: int = 5000,
                 group_filter: Callable[[str], bool] | None = None,
                 lag_every_s: float = 5.0,
                 consumer_factory: ConsumerFactory = _kafka_consumer,
                 clock: Callable[[], float] = time.time) -> None:
        lake.partition_dir("/", "commits", cluster, dt.date(2000, 1, 1))  # validates the name
        self.client_options: dict[str, Any] = (
            {"bootstrap_servers": client} if isinstance(client, str) else dict(client))
        #: the lake's object store (an ``s3://`` root or an object-store :class:`Store`), else None
        self._store = lake.object_store(lake_root)
        #: the lake: the object store, or the local folder
        self.lake_root: Path | Store = (
            self._store if self._store is not None
            else Path(lake_root.base if isinstance(lake_root, Store) else lake_root))
        self.cluster = cluster
        self._start_spec = start
        self.start = parse_start(start, now=clock())  # validated now; a duration is re-read at open()
        #: __consumer_offsets did not exist yet when this tail first looked: once it appears,
        #: every record in it is newer than the tail, so it is read from its beginning whatever
        #: ``start`` says (else the first generations and commits of a new cluster are lost)
        self._topic_born_after_start = False
        self.flush_records = flush_records
        self.flush_interval_s = flush_interval_s
        self.poll_timeout_ms = poll_timeout_ms
        self.max_poll_records = max_poll_records
        self._factory = consumer_factory
        self._clock = clock
        #: which groups to record (``ClusterConfig.groups.matches``, the sweeps' filter); None: all
        self.group_filter = group_filter
        self._group_ok: dict[str, bool] = {}  # the filter's verdict per group id (few groups, many records)
        self.lag_every_s = lag_every_s
        self._last_lag = -math.inf
        self.stats = TailStats()
        #: why the tail stopped for good (e.g. no READ access); None while it may run
        self.disabled_reason: str | None = None
        self._consumer: Any = None
        self._positions: dict[int, int] = {}  # next offset to read, per source partition
        self._committed: dict[int, int] = {}  # positions as last saved
        self._commits = _CommitColumns()
        self._events: list[dict[str, Any]] = []
        self._ranges: dict[int, tuple[int, int]] = {}
        self._buffered = 0
        self._last_flush = clock()
        self._seen: set[tuple[str, int, int]] = set()  # rows of an unfinished flush found in the lake
        #: that unfinished flush's intent, kept (in the state file too) until the tail is past it
        self._carried: _Pending | None = None
        self._topic_names: dict[uuid.UUID, str] = {}
        self._last_topic_refresh = 0.0
        #: the last lag check not read through yet: (its time, the end offsets it saw)
        self._probe: tuple[float, dict[int, int]] | None = None
        #: a check read through whose records are still in the buffer: its time (the watermark
        #: once the buffer is flushed)
        self._read_through: float | None = None
        #: called with each commits table once it is in the lake (the batch prober's ``offer``)
        self.on_commits: Callable[[pa.Table], None] | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def state_file(self) -> Path | str:
        """The positions file: its local path, or its URL on an object store."""
        if self._store is not None:
            return self._store.url_of(_state_rel(self.cluster))
        return state_path(Path(str(self.lake_root)), self.cluster)

    @property
    def watermark(self) -> float | None:
        """Every record appended to ``__consumer_offsets`` before this time (epoch s, the tail's
        clock) is in the lake, or was skipped by design (excluded, undecodable); None until the
        first lag check after start has been read through and flushed (a few seconds: one
        ``lag_every_s`` and one ``flush_interval_s`` at most when the tail keeps up).

        It stays where it is while the tail cannot read or write (a broker or lake outage): the
        lake is not known to be complete after it. While ``__consumer_offsets`` does not exist
        yet, each check that finds it missing is the watermark (there is nothing to read)."""
        return self.stats.watermark_s

    def _advance_watermark(self, t: float) -> None:
        if self.stats.watermark_s is None or t > self.stats.watermark_s:
            self.stats.watermark_s = t

    def _note_ends(self, t: float, ends: Mapping[int, int]) -> None:
        """A lag check at ``t`` saw these end offsets: a probe, unless an older one is still
        being read through (kept: under a steady stream, newer ends would always lie ahead)."""
        if self._probe is None:
            self._probe = (t, dict(ends))
        self._check_probe()

    def _check_probe(self) -> None:
        """The probe read through (every partition's position at its end): its time becomes the
        watermark now when nothing is buffered, else at the next flush."""
        probe = self._probe
        consumer = self._consumer
        if probe is None or consumer is None:
            return
        t, ends = probe
        from kafka import TopicPartition

        try:
            for p, end in ends.items():
                at = self._positions.get(p, 0)
                if at < end:
                    # the consumer's position passes control records (transaction markers) too,
                    # which are never returned as records
                    at = max(at, int(consumer.position(TopicPartition(OFFSETS_TOPIC, p)) or 0))
                if at < end:
                    return
        except Exception as exc:  # a statistic's probe: never a reason to stop tailing
            log.debug("commit log tail of %s: cannot read the positions: %s", self.cluster, exc)
            return
        self._probe = None
        if self._ranges:
            self._read_through = t if self._read_through is None else max(t, self._read_through)
        else:
            self._advance_watermark(t)

    @property
    def positions(self) -> dict[int, int]:
        """The saved positions (next offset per ``__consumer_offsets`` partition)."""
        return dict(self._committed)

    def open(self) -> None:
        """Connect, assign every partition and seek (saved positions, else ``start``).

        Raises :class:`CommitLogAccessDenied` without READ on the topic, :class:`KafkaUnavailable`
        when the cluster does not answer.
        """
        from kafka import TopicPartition
        from kafka.errors import KafkaError

        state = self._load_state()
        options = {
            # catch-up reads whole segments of a compacted topic: fetch big (overridable)
            "max_partition_fetch_bytes": 8 * 1024 * 1024,
            "fetch_max_bytes": 64 * 1024 * 1024,
            **self.client_options,
            # what makes this a side-effect-free reader of the internal topic (not overridable)
            "group_id": None,
            "enable_auto_commit": False,
            "exclude_internal_topics": False,
            "isolation_level": "read_committed",
            "auto_offset_reset": "earliest",
            "max_poll_records": self.max_poll_records,
            "client_id": f"lagscope-commitlog-{self.cluster}",
        }
        try:
            consumer = self._factory(**options)
        except KafkaError as exc:
            raise self._wrap(exc) from exc
        self._consumer = consumer
        try:
            partitions = consumer.partitions_for_topic(OFFSETS_TOPIC)
            if not partitions:
                raise CommitLogTopicMissing(
                    f"{OFFSETS_TOPIC} is not visible on cluster {self.cluster} (no group has "
                    "committed yet, or no Describe access to it)")
            tps = [TopicPartition(OFFSETS_TOPIC, p) for p in sorted(partitions)]
            consumer.assign(tps)
            saved = {int(k): int(v) for k, v in state.get("positions", {}).items()}
            fresh = [tp for tp in tps if tp.partition not in saved]
            for tp in tps:
                if tp.partition in saved:
                    consumer.seek(tp, saved[tp.partition])
            self._seek_fresh(fresh)
            self._positions = {tp.partition: int(consumer.position(tp)) for tp in tps}
        except (CommitLogAccessDenied, CommitLogTopicMissing):
            self.close()
            raise
        except KafkaError as exc:
            self.close()
            raise self._wrap(exc) from exc
        self._committed = dict(self._positions)
        self.stats.connected = True
        self._probe = None
        self._last_lag = -math.inf  # a first lag check (the watermark's probe) at the first poll
        log.info("commit log tail of %s: %d partitions from %s", self.cluster, len(tps),
                 "saved positions" if saved else self._describe_start())

    def _describe_start(self) -> str:
        if self.start.kind == "time":
            return f"time {_ts(self.start.timestamp_ms)}"
        return self.start.kind

    def _seek_fresh(self, tps: list[Any]) -> None:
        if not tps:
            return
        c = self._consumer
        self.start = parse_start(self._start_spec, now=self._clock())  # "1h" = the hour before now
        if self.start.kind == "earliest" or self._topic_born_after_start:
            c.seek_to_beginning(*tps)
        elif self.start.kind == "latest":
            c.seek_to_end(*tps)
        else:
            # the ends first: a partition with nothing written since the start time begins at
            # its end as it was *before* the time lookup, so a record appended between the two
            # requests is read (asked after, the end would lie past it). Not seek_to_end():
            # kafka-python resolves that lazily at the first fetch, later still.
            ends = c.end_offsets(tps)
            found = c.offsets_for_times({tp: self.start.timestamp_ms for tp in tps})
            for tp in tps:
                hit = found.get(tp)
                c.seek(tp, ends[tp] if hit is None else hit.offset)

    def close(self) -> None:
        self.stats.connected = False
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with contextlib.suppress(Exception):
                # a group-less consumer needs no network to close: stop its I/O thread first, so
                # that it cannot read a socket close() is shutting
                stop_io_thread(consumer)
            with contextlib.suppress(Exception):
                consumer.close()

    def _wrap(self, exc: BaseException) -> LagscopeError:
        if _is_authorization_error(exc):
            return CommitLogAccessDenied(
                f"no READ access to {OFFSETS_TOPIC} on cluster {self.cluster} "
                f"(TopicAuthorizationFailed)")
        return KafkaUnavailable(f"commit log tail of {self.cluster}: {type(exc).__name__}: {exc}")

    # -- polling ------------------------------------------------------------------------------
    def poll_batch(self, timeout_ms: int | None = None) -> int:
        """Poll once and decode into the buffer; returns the number of records read."""
        from kafka.errors import KafkaError

        if self._consumer is None:
            self.open()
        try:
            batches = self._consumer.poll(
                timeout_ms=self.poll_timeout_ms if timeout_ms is None else timeout_ms,
                max_records=self.max_poll_records)
        except KafkaError as exc:
            raise self._wrap(exc) from exc
        n = 0
        for tp, records in batches.items():
            if not records:
                continue
            self._ingest(tp.partition, records)
            n += len(records)
        return n

    def _ingest(self, partition: int, records: list[Any]) -> None:
        # The hot loop of the tail: locals only, counters summed once per batch.
        stats = self.stats
        events = self._events
        seen = self._seen
        topic_names = self._topic_names
        accept = self.group_filter
        verdicts = self._group_ok
        n_excluded = 0
        (a_group, a_topic, a_part, a_off, a_epoch, a_meta, a_cts, a_ets, a_rts, a_sp, a_so,
         a_ver) = self._commits.appenders()
        floor = self._positions.get(partition, 0)
        first = None
        last = -1
        n_records = n_commits = n_tombstones = 0
        for m in records:
            offset = m.offset
            if offset < floor:
                continue  # already read (a seek raced a fetch)
            if first is None:
                first = offset
            last = offset
            n_records += 1
            try:
                rec = decode_record(m.key, m.value)
            except UndecodedRecordType as exc:
                stats.undecoded_types[exc.name] += 1
                continue
            except UnknownRecordVersion as exc:
                stats.unknown_versions[f"type={exc.record_type} version={exc.version}"] += 1
                log.debug("skipped %s-%d@%d: %s", OFFSETS_TOPIC, partition, offset, exc)
                continue
            except RecordDecodeError as exc:
                stats.decode_errors += 1
                log.warning("undecodable record %s-%d@%d skipped: %s", OFFSETS_TOPIC, partition,
                            offset, exc)
                continue
            key = rec.key
            value = rec.value
            if accept is not None:
                ok = verdicts.get(key.group)
                if ok is None:
                    ok = verdicts[key.group] = accept(key.group)
                if not ok:
                    n_excluded += 1
                    continue
            if type(key) is OffsetCommitKey:
                if seen and ("commits", partition, offset) in seen:
                    stats.duplicates_skipped += 1
                    continue
                a_group(key.group)
                a_topic(key.topic)
                a_part(key.partition)
                if value is None:  # offset tombstone
                    n_tombstones += 1
                    a_off(None)
                    a_epoch(None)
                    a_meta(None)
                    a_cts(None)
                    a_ets(None)
                    a_ver(None)
                else:
                    assert type(value) is OffsetCommitValue
                    if value.topic_id is not None:
                        topic_names[value.topic_id] = key.topic
                    a_off(value.offset)
                    a_epoch(value.leader_epoch)
                    a_meta(value.metadata)
                    ts = value.commit_timestamp_ms
                    a_cts(ts if ts >= 0 else None)
                    a_ets(value.expire_timestamp_ms)
                    a_ver(value.version)
                rts = m.timestamp
                a_rts(rts if rts > 0 else 0)
                a_sp(partition)
                a_so(offset)
                n_commits += 1
            else:
                if value is None:
                    n_tombstones += 1
                elif isinstance(value, ConsumerGroupPartitionMetadataValue):
                    for t in value.topics:
                        topic_names[t.topic_id] = t.topic_name
                if seen and ("group_events", partition, offset) in seen:
                    stats.duplicates_skipped += 1
                    continue
                events.append(group_event_row(rec, record_ts_ms=m.timestamp,
                                              source_partition=partition, source_offset=offset,
                                              topic_names=self._topic_name))
                stats.group_events += 1
        stats.records += n_records
        stats.commits += n_commits
        stats.tombstones += n_tombstones
        stats.excluded += n_excluded
        if records:
            newest = records[-1].timestamp  # the coordinator's clock: rising within a partition
            if stats.last_record_ts_ms is None or newest > stats.last_record_ts_ms:
                stats.last_record_ts_ms = newest
        if first is not None:
            lo = self._ranges.get(partition, (first, last))[0]
            self._ranges[partition] = (lo, last)
            self._positions[partition] = last + 1
            self._buffered += last - first + 1

    def _topic_name(self, topic_id: uuid.UUID) -> str:
        """Topic name of a KIP-848 topic id: learnt from commits, else from cluster metadata."""
        name = self._topic_names.get(topic_id)
        if name is not None:
            return name
        now = self._clock()
        if self._consumer is not None and now - self._last_topic_refresh > 30.0:
            self._last_topic_refresh = now
            try:
                self._consumer.topics()
                cluster = self._consumer._client.cluster
                for t in cluster.topics():
                    tid = cluster.topic_id(t)
                    if tid is not None:
                        self._topic_names[tid] = t
            except Exception as exc:  # metadata is best effort: the id is kept instead
                log.debug("topic metadata refresh failed: %s", exc)
            name = self._topic_names.get(topic_id)
            if name is not None:
                return name
        return str(topic_id)

    def is_flush_due(self) -> bool:
        return bool(self._ranges) and (
            self._buffered >= self.flush_records
            or self._clock() - self._last_flush >= self.flush_interval_s)

    def run_once(self, timeout_ms: int | None = None) -> int:
        """Poll once, flush when due; returns the number of records read."""
        n = self.poll_batch(timeout_ms)
        self._check_probe()
        if self.is_flush_due():
            self.flush()
        if self._clock() - self._last_lag >= self.lag_every_s:
            self.measure_lag()
        return n

    def measure_lag(self) -> int | None:
        """Records of ``__consumer_offsets`` not read yet (Σ end offset − position), into
        ``stats.lag_records``; None (and the last value kept) when the broker does not answer.
        The ends asked at this time are also the watermark's probe (:attr:`watermark`)."""
        asked = self._last_lag = self._clock()
        if self._consumer is None:
            return None
        from kafka import TopicPartition

        tps = [TopicPartition(OFFSETS_TOPIC, p) for p in self._positions]
        try:
            ends = self._consumer.end_offsets(tps)
            self._note_ends(asked, {tp.partition: int(ends[tp]) for tp in tps})
            lag = sum(max(0, int(ends[tp]) - max(self._positions[tp.partition], int(self._consumer.position(tp))))
                      for tp in tps)
        except Exception as exc:  # a statistic: never a reason to stop tailing
            log.debug("commit log tail of %s: cannot measure the lag: %s", self.cluster, exc)
            return None
        self.stats.lag_records = lag
        return lag

    # -- flushing -----------------------------------------------------------------------------
    def flush(self) -> None:
        """Write the buffered rows (one file per table and date), then save the positions.

        Two-phase: the intent (ranges + folders) is saved first, the lake files second, the
        positions last; a crash in between is repaired by :meth:`open` without duplicates.
        """
        self._last_flush = self._clock()
        if not self._ranges:
            return
        events: dict[dt.date, list[dict[str, Any]]] = {}
        for row in self._events:
            events.setdefault(row["record_ts"].date(), []).append(row)
        commits = self._commits.by_date()
        ranges = dict(self._ranges)
        folders = {"commits": {d.isoformat() for d in commits},
                   "group_events": {d.isoformat() for d in events}}
        carried = self._carried
        if carried is not None:  # the rows of an older unfinished flush not re-read yet stay known
            for p, (lo, hi) in carried.ranges.items():
                mine = ranges.get(p)
                ranges[p] = (lo, hi) if mine is None else (min(lo, mine[0]), max(hi, mine[1]))
            for t, dates in carried.folders.items():
                folders.setdefault(t, set()).update(dates)
        pending = {"ranges": {str(p): list(r) for p, r in ranges.items()},
                   "folders": {t: sorted(d) for t, d in folders.items() if d}}
        with self._counting_failures("_state"):
            self._save_state(self._committed, pending)
        for date, data in sorted(commits.items()):
            with self._counting_failures(COMMITS.name):
                lake.write_table(self.lake_root, COMMITS, self.cluster, data, date=date)
            if self.on_commits is not None:
                try:
                    self.on_commits(data)
                except Exception:  # a consumer of the commits (the batch prober) never stops the tail
                    log.exception("commit log tail of %s: the commits' consumer raised", self.cluster)
        for date, rows in sorted(events.items()):
            with self._counting_failures(GROUP_EVENTS.name):
                lake.write_rows(self.lake_root, GROUP_EVENTS, self.cluster, rows, date=date)
        # what is left of the older intent: its ranges this tail has not read past yet
        if carried is not None:
            left = {p: (max(lo, self._positions.get(p, 0)), hi) for p, (lo, hi) in carried.ranges.items()
                    if self._positions.get(p, 0) <= hi}
            carried = _Pending(left, carried.folders) if left else None
        with self._counting_failures("_state"):
            self._save_state(self._positions, None if carried is None else {
                "ranges": {str(p): list(r) for p, r in carried.ranges.items()}, "folders": carried.folders})
        self._carried = carried
        self._committed = dict(self._positions)
        self._commits = _CommitColumns()
        self._events = []
        self._ranges = {}
        self._buffered = 0
        positions = self._positions
        self._seen = {s for s in self._seen if s[2] >= positions.get(s[1], 0)} if carried is not None else set()
        self.stats.flushes += 1
        if self._read_through is not None:  # what was read through that check is in the lake now
            self._advance_watermark(self._read_through)
            self._read_through = None

    @contextlib.contextmanager
    def _counting_failures(self, table: str) -> Iterator[None]:
        """Counts a lake write that raises in ``stats.lake_write_errors[table]`` (and re-raises)."""
        try:
            yield
        except Exception:
            self.stats.lake_write_errors[table] += 1
            raise

    # -- state --------------------------------------------------------------------------------
    def _save_state(self, positions: Mapping[int, int], pending: Mapping[str, Any] | None) -> None:
        state = {
            "version": _STATE_VERSION, "cluster": self.cluster,
            "updated": dt.datetime.now(dt.UTC).isoformat(),
            "positions": {str(p): o for p, o in sorted(positions.items())},
            "pending": pending,
        }
        if self._store is not None:  # one object put whole over the old one (module docstring)
            self._store.put(_state_rel(self.cluster), json.dumps(state, sort_keys=True).encode())
            return
        _write_json_atomic(Path(self.state_file), state)

    def _read_state_text(self) -> str | None:
        """The state file's text, None when there is none (raises OSError when unreadable; on an
        object store a failed request is :class:`LakeError`, retried by :meth:`run` like any
        other: the object is not known to be bad)."""
        if self._store is not None:
            try:
                data = self._store.get(_state_rel(self.cluster))
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise LakeError(f"cannot read the commit log positions {self.state_file}: {exc}") from exc
            return data.decode()
        path = Path(self.state_file)
        return path.read_text() if path.exists() else None

    def _load_state(self) -> dict[str, Any]:
        path = self.state_file
        try:
            text = self._read_state_text()
            if text is None:
                return {}
            state: dict[str, Any] = json.loads(text)
            if state.get("version") != _STATE_VERSION or not isinstance(state.get("positions"), dict):
                raise ValueError("unexpected layout")
            for k, v in state["positions"].items():
                int(k), int(v)
            raw = state.get("pending")
            pending = None if not raw else _Pending(
                ranges={int(p): (int(r[0]), int(r[1])) for p, r in raw.get("ranges", {}).items()},
                folders={str(t): [str(x) for x in d] for t, d in raw.get("folders", {}).items()})
        except (OSError, ValueError, TypeError, KeyError, AttributeError, IndexError) as exc:
            raise CommitLogStateError(f"cannot read the commit log positions {path}: {exc}") from exc
        self._carried = pending
        if pending is not None:
            self._seen = self._rows_in_lake(pending)
            log.info("commit log tail of %s: resuming after an unfinished flush; %d of its rows "
                     "are already in the lake and will not be written again", self.cluster,
                     len(self._seen))
        return state

    def _rows_in_lake(self, pending: _Pending) -> set[tuple[str, int, int]]:
        import pyarrow.dataset as ds

        seen: set[tuple[str, int, int]] = set()
        for table, dates in pending.folders.items():
            if table not in ("commits", "group_events") or not dates:
                continue
            expr = ds.field("date").isin(dates)
            ranges = None
            for p, (lo, hi) in pending.ranges.items():
                r = ((ds.field("source_partition") == p) & (ds.field("source_offset") >= lo)
                     & (ds.field("source_offset") <= hi))
                ranges = r if ranges is None else ranges | r
            if ranges is not None:
                expr = expr & ranges
            data = lake.read_table(self.lake_root, table, cluster=self.cluster,
                                   columns=["source_partition", "source_offset"], filter=expr)
            for p, o in zip(data.column("source_partition").to_pylist(),
                            data.column("source_offset").to_pylist(), strict=True):
                seen.add((table, int(p), int(o)))
        return seen

    # -- the loop -----------------------------------------------------------------------------
    def run(self, stop: threading.Event, *, error_backoff_s: float = 5.0,
            report_every_s: float = 60.0, missing_topic_retry_s: float = 60.0) -> None:
        """Tail until ``stop`` is set; flush and close on the way out.

        Without READ access: one warning, then return (the collector goes on with sweeps).
        While ``__consumer_offsets`` is not visible (a new cluster creates it with the first
        commit): one warning, then quiet checks after 1 s, 2 s, 4 s, … up to every
        ``missing_topic_retry_s``, so a tail started on a fresh cluster begins within seconds
        of the first commit and an idle one costs little. Other Kafka or lake errors are logged and retried after
        ``error_backoff_s``.
        """
        warned_missing = False
        missing_wait_s = min(1.0, missing_topic_retry_s)
        last_report = self._clock()
        reported = self.stats.records
        try:
            while not stop.is_set():
                now = self._clock()
                if now - last_report >= report_every_s:
                    rate = (self.stats.records - reported) / (now - last_report)
                    log.info("commit log tail of %s: %d records (%.0f/s), %d commits, %d group events, "
                             "%d unknown, %d undecodable", self.cluster, self.stats.records, rate,
                             self.stats.commits, self.stats.group_events,
                             sum(self.stats.unknown_versions.values()), self.stats.decode_errors)
                    last_report, reported = now, self.stats.records
                try:
                    if self._consumer is None:
                        self.open()
                        if warned_missing:
                            log.info("commit log tail of %s: %s is visible now; tailing", self.cluster,
                                     OFFSETS_TOPIC)
                            warned_missing = False
                        missing_wait_s = min(1.0, missing_topic_retry_s)
                    self.run_once()
                except CommitLogAccessDenied as exc:
                    self.stats.errors += 1
                    self.disabled_reason = str(exc)
                    log.warning("%s; the __consumer_offsets tail is off for cluster %s and the "
                                "collector carries on with sweeps only", exc, self.cluster)
                    return
                except CommitLogStateError as exc:
                    self.stats.errors += 1
                    self.disabled_reason = str(exc)
                    log.error("%s; the __consumer_offsets tail is off for cluster %s until it is fixed "
                              "or deleted (deleting it restarts the tail from 'start')", exc, self.cluster)
                    return
                except CommitLogTopicMissing as exc:
                    self._topic_born_after_start = True
                    self._advance_watermark(now)  # nothing was appended to it before this check
                    if not warned_missing:
                        log.warning("%s; the tail checks again (backing off to every %.0fs) and the "
                                    "collector carries on with sweeps meanwhile", exc, missing_topic_retry_s)
                        warned_missing = True
                    else:
                        log.debug("%s", exc)
                    self.close()
                    stop.wait(missing_wait_s)
                    missing_wait_s = min(missing_wait_s * 2, missing_topic_retry_s)
                except (KafkaUnavailable, LakeError, OSError) as exc:
                    self.stats.errors += 1
                    log.warning("commit log tail of %s: %s; retrying in %.0fs", self.cluster, exc,
                                error_backoff_s)
                    self.close()
                    self._drop_buffer()
                    stop.wait(error_backoff_s)
        finally:
            try:
                if self._consumer is not None:
                    self.flush()
            finally:
                self.close()

    @classmethod
    def from_config(cls, cluster: ClusterConfig, lake_root: Path | str | Store, **kwargs: Any) -> CommitLogTailer:
        """A tailer for one configured cluster (``consumer_offsets_tail.start``, its security, and
        its ``groups`` filter: the groups the sweeps skip are not recorded either)."""
        groups = cluster.groups
        return cls(cluster.client_options(), lake_root, cluster.name,
                   start=cluster.consumer_offsets_tail.start,
                   group_filter=groups.matches if groups.include or groups.exclude else None, **kwargs)

    def _drop_buffer(self) -> None:
        """Forget unflushed rows; the next open() seeks back to the saved positions."""
        self._commits = _CommitColumns()
        self._events = []
        self._ranges = {}
        self._buffered = 0
        self._positions = dict(self._committed)
        self._probe = None  # a new one after the next open
        self._read_through = None  # its records are read again


class CommitLogService:
    """One :class:`CommitLogTailer` thread per cluster whose ``consumer_offsets_tail.enabled``.

    Lifecycle: :meth:`start` starts the threads, :meth:`stop` sets the stop event and joins
    them (each flushes what it has read and saves its positions on the way out). A tailer
    without READ access stops itself after one warning; the others carry on.

        >>> service = CommitLogService(settings.clusters, lake_root).start()   # doctest: +SKIP
        >>> service.stop()                                                   # doctest: +SKIP
    """

    def __init__(self, clusters: Iterable[ClusterConfig], lake_root: Path | str | Store, *,
                 tailer_factory: Callable[[ClusterConfig, Path | str | Store], CommitLogTailer] | None = None
                 ) -> None:
        make = tailer_factory or CommitLogTailer.from_config
        self.tailers: dict[str, CommitLogTailer] = {
            c.name: make(c, lake_root) for c in clusters if c.consumer_offsets_tail.enabled}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._thread_of: dict[str, threading.Thread] = {}

    def start(self) -> CommitLogService:
        self._stop.clear()
        for name, tailer in self.tailers.items():
            th = threading.Thread(target=tailer.run, args=(self._stop,), daemon=True,
                                  name=f"lagscope-commitlog-{name}")
            th.start()
            self._threads.append(th)
            self._thread_of[name] = th
        return self

    def watermarks(self) -> dict[str, float | None]:
        """Per cluster whose tail runs: its watermark (:attr:`CommitLogTailer.watermark`, epoch s;
        None before its first). A tail stopped for good (no READ access, an unreadable positions
        file: ``disabled_reason``) or whose thread has ended is left out: nothing more will come
        from it, so nothing waits for it."""
        out: dict[str, float | None] = {}
        for name, tailer in self.tailers.items():
            th = self._thread_of.get(name)
            if tailer.disabled_reason is None and th is not None and th.is_alive():
                out[name] = tailer.watermark
        return out

    def stats(self) -> dict[str, dict[str, Any]]:
        """Per cluster: the tail's counters and, when it stopped for good, why."""
        return {name: {**t.stats.snapshot(), "disabled_reason": t.disabled_reason}
                for name, t in self.tailers.items()}

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        for th in self._threads:
            th.join(timeout_s)
            if th.is_alive():
                log.warning("%s did not stop within %.0fs", th.name, timeout_s)
        self._threads = []
