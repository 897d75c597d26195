"""The hand-over value between the sweep and its consumers (lake sink, metrics endpoint).

One :class:`Snapshot` is the complete result of one sweep of one cluster. Its rows are plain
mappings keyed by exactly the column names of :mod:`lagscope.schema`, without the partition
columns (``cluster`` is the snapshot's own field; ``date`` is derived from ``sweep_ts``):

- ``sweep``: one row of :data:`lagscope.schema.SWEEPS` — ``sweep_ts`` (``datetime``, UTC),
  ``duration_ms``, ``ok``, ``error``, ``groups``, ``partitions``, ``members``,
  ``group_errors``, ``collector``.
- ``offsets``: rows of :data:`lagscope.schema.OFFSETS` — one per (group, topic, partition):
  ``sweep_ts``, ``group_id``, ``topic``, ``partition``, ``committed_offset``,
  ``commit_leader_epoch``, ``commit_metadata``, ``log_start_offset``, ``log_end_offset``,
  ``last_stable_offset``, ``member_id``, ``client_id``, ``host``, ``group_state``, ``lag``,
  ``lag_basis``.
- ``members``: rows of :data:`lagscope.schema.MEMBERS` — one per (group, member), and one row
  with ``member_id=None`` for a group with no members: ``sweep_ts``, ``group_id``,
  ``group_state``, ``protocol_type``, ``protocol``, ``group_protocol``, ``generation``,
  ``member_id``, ``group_instance_id``, ``client_id``, ``host``, ``subscribed_topics``
  (list of str), ``assignment`` (list of ``{"topic": str, "partition": int}``).

Values are the Python values pyarrow converts to the schema's types (``datetime`` with
``tzinfo=UTC`` for timestamps, ``int`` for offsets, ``None`` for null). A key may be left out,
which means null; a key that is not a column is an error (caught here, not in the sink).

A failed sweep is a Snapshot too: ``sweep["ok"]`` is False, ``sweep["error"]`` says why, and
``offsets``/``members`` are empty (or hold whatever was collected before the failure, which
consumers of a failed snapshot may ignore). Snapshots are immutable and replaced whole: a
consumer keeps a reference and never sees a half-updated one.

    >>> import datetime as dt
    >>> ts = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    >>> snap = Snapshot("prod", {"sweep_ts": ts, "ok": True, "duration_ms": 12.5},
    ...                 offsets=[{"sweep_ts": ts, "group_id": "g", "topic": "t", "partition": 0,
    ...                           "committed_offset": 5, "log_end_offset": 9, "lag": 4, "lag_basis": "hw"}],
    ...                 members=[])
    >>> snap.ok, snap.sweep_ts.year
    (True, 2026)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lagscope.schema import MEMBERS, OFFSETS, PARTITION_COLUMNS, SWEEPS

__all__ = ["MEMBER_COLUMNS", "OFFSET_COLUMNS", "SWEEP_COLUMNS", "Snapshot"]

#: the keys a row of each part may carry (the table's columns, partition columns excluded)
SWEEP_COLUMNS: frozenset[str] = frozenset(SWEEPS.schema.names) - set(PARTITION_COLUMNS)
OFFSET_COLUMNS: frozenset[str] = frozenset(OFFSETS.schema.names) - set(PARTITION_COLUMNS)
MEMBER_COLUMNS: frozenset[str] = frozenset(MEMBERS.schema.names) - set(PARTITION_COLUMNS)


def _check_keys(part: str, row: Mapping[str, Any], allowed: frozenset[str]) -> None:
    unknown = set(row) - allowed
    if unknown:
        raise ValueError(f"Snapshot.{part}: unknown column(s) {sorted(unknown)}")


@dataclass(frozen=True)
class Snapshot:
    """The result of one sweep of one cluster (see the module docstring for the row keys).

    ``cluster``: the cluster's configured name (the lake's ``cluster`` partition, the
    ``cluster`` label of every metric). ``sweep``: the SWEEPS row. ``offsets``: the OFFSETS
    rows. ``members``: the MEMBERS rows.
    """

    cluster: str
    sweep: Mapping[str, Any]
    offsets: Sequence[Mapping[str, Any]] = field(default_factory=tuple)
    members: Sequence[Mapping[str, Any]] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if not self.cluster:
            raise ValueError("Snapshot.cluster must be a non-empty cluster name")
        _check_keys("sweep", self.sweep, SWEEP_COLUMNS)
        if not isinstance(self.sweep.get("sweep_ts"), dt.datetime):
            raise ValueError("Snapshot.sweep['sweep_ts'] must be a datetime")
        for row in self.offsets:
            _check_keys("offsets", row, OFFSET_COLUMNS)
        for row in self.members:
            _check_keys("members", row, MEMBER_COLUMNS)

    @property
    def sweep_ts(self) -> dt.datetime:
        """When the sweep started (UTC)."""
        ts: dt.datetime = self.sweep["sweep_ts"]
        return ts

    @property
    def ok(self) -> bool:
        """True when the sweep completed."""
        return bool(self.sweep.get("ok", False))
