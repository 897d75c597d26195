"""Delivery accounting: did a group lose or reprocess messages — how many, where, when, why.

Derived from the ``anomalies`` result table, in this one place, for everything that shows it
(the results exporter's ``lagscope_messages_lost_total`` / ``lagscope_messages_reprocessed_total``,
the app's Delivery page, the alerts' payloads). Three kinds of finding carry a count of messages:

=================  =============  ===========================================================
kind               measure        cause (the anomaly's ``cause`` column)
=================  =============  ===========================================================
``skip``           lost           ``seek`` | ``admin_reset`` | ``out_of_range_reset``
``retention_loss`` lost           ``retention``
``rewind``         reprocessed    ``rewind``, or ``admin_reset`` (written while the group had
                                  no members)
=================  =============  ===========================================================

*lost* = messages never processed, *reprocessed* = messages processed twice: the anomaly's
``magnitude`` (unit ``messages``), rounded to a whole number (a finding without one counts 0).
A skip counts only what lies past the log start and past everything committed before, a
retention loss what lies below the log start, so the two never count one message twice.
Rows written before the ``cause`` column existed (or with it null) take the kind's own cause:
skip → ``seek``, retention_loss → ``retention``, rewind → ``rewind`` (:data:`DEFAULT_CAUSE`).

**Exact or a bound.** A finding timed by one commit of the commit stream (the lake's
``commits``, the ``__consumer_offsets`` tail) has ``start_ts == end_ts``: the commit itself,
which shows both offsets, so its count is ``exact`` — except a skip judged by the consumer's
pace (:data:`PACED_CAUSES`: a ``seek``, an ``out_of_range_reset``), an ``estimate``: its count
leaves out what the partition's capacity could have processed since the commit before it (the
consumer may have read some of the messages before it jumped: the commit shows where it started
and where it landed, not where it stopped reading; and it may have read more than that
partition's capacity, giving it the time of its other partitions). So is a ``retention_loss``
timed by one commit: the part of a skip's jump that retention had deleted, less what that capacity
could have read of it first (an admin reset's deleted part is all of it, but its row does not
say whose it is). An ``admin_reset`` (the group was empty: nobody read anything) and a rewind
are exact. Every other finding was seen between two sweeps (or is still open), and its count is
a stated bound (:data:`BOUNDS`):

- ``at_least`` for a rewind or a proven retention loss from sweeps: the committed offset went back
  at least that far between two sweeps (a deeper rewind covered again before the next sweep is
  not seen); the committed offset was at least that far below the log start at a sweep
  (retention may have deleted more between sweeps, and an open loss is still growing);
- ``estimate`` for a skip judged by the pace and a retention loss timed by a commit (above), and
  a skip from sweeps: the jump past everything committed before, less what the partition's
  capacity could have processed since the commit (or the sweep) before it; never more than that
  jump;
- ``at_most`` for a retention loss not proven (severity ``warning``: at every sweep of it a
  member that commits owned the partition or its committed offset still moved, so its consumer
  may already have fetched the deleted records, which its client then returns and it commits on
  through): none of them, or up to that many, were lost.

Bucket = the finding's start (``bucket_ts``); :func:`by_bucket` sums the rows per coarser time
bucket.

    >>> account(anomalies).to_pylist()[0]  # doctest: +SKIP
    {'cluster': 'prod', 'group_id': 'orders', 'topic': 'orders', 'partition': 3, 'kind': 'skip',
     'cause': 'seek', 'bucket_ts': datetime(...), 'end_ts': datetime(...), 'lost': 512,
     'reprocessed': 0, 'exact': False, 'bound': 'estimate', 'key': 'skip|prod|orders|orders|3|…'}

Pure: Arrow tables in, Arrow tables out (inputs untouched).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "BOUNDS",
    "DEFAULT_CAUSE",
    "DELIVERY_COLUMNS",
    "DELIVERY_KINDS",
    "LOSS_CAUSES",
    "PACED_CAUSES",
    "REPROCESS_CAUSES",
    "account",
    "account_rows",
    "by_bucket",
]

#: anomaly kind → what its magnitude counts
DELIVERY_KINDS: dict[str, str] = {"skip": "lost", "retention_loss": "lost", "rewind": "reprocessed"}
#: the cause of a row without a ``cause`` (written before the column existed, or null)
DEFAULT_CAUSE: dict[str, str] = {"skip": "seek", "retention_loss": "retention", "rewind": "rewind"}
#: every cause of lost messages, and of reprocessed ones (the Prometheus ``cause`` label's values)
LOSS_CAUSES: tuple[str, ...] = ("seek", "admin_reset", "out_of_range_reset", "retention")
REPROCESS_CAUSES: tuple[str, ...] = ("rewind", "admin_reset")
#: the skip causes judged by the consumer's pace, whose count is never exact
PACED_CAUSES: tuple[str, ...] = ("seek", "out_of_range_reset")
#: ``bound`` values: the count is exact, a lower bound, an estimate, or an upper bound (module docstring)
BOUNDS: tuple[str, ...] = ("exact", "at_least", "estimate", "at_most")

_TS = pa.timestamp("ms", tz="UTC")

#: the columns of :func:`account`'s result, with their types
DELIVERY_COLUMNS: dict[str, pa.DataType] = {
    "cluster": pa.string(),
    "group_id": pa.string(),
    "topic": pa.string(),
    "partition": pa.int32(),
    "kind": pa.string(),
    "cause": pa.string(),
    "bucket_ts": _TS,  # the finding's start
    "end_ts": _TS,  # its end; null while open
    "lost": pa.int64(),  # messages never processed (0 for a rewind)
    "reprocessed": pa.int64(),  # messages processed twice (0 for a skip or retention loss)
    "exact": pa.bool_(),
    "bound": pa.string(),
    "key": pa.string(),  # the anomaly's stable identity
}
_SCHEMA = pa.schema(list(DELIVERY_COLUMNS.items()))


def _column(table: pa.Table, name: str, type_: pa.DataType, default: Any = None) -> pa.ChunkedArray:
    if name in table.column_names:  # timestamps of another unit: truncated to ms, as the tables store them
        return table.column(name).cast(type_, safe=not pa.types.is_timestamp(type_))
    return pa.chunked_array([pa.nulls(table.num_rows, type_)]) if default is None else \
        pa.chunked_array([pa.array([default] * table.num_rows, type_)])


def account(anomalies: pa.Table, *, cluster: str | None = None) -> pa.Table:
    """One row per finding of ``anomalies`` that counts messages (skip, retention_loss,
    rewind), with :data:`DELIVERY_COLUMNS`; other kinds are left out.

    ``anomalies``: rows of the ``anomalies`` table, ``cause`` optional, ``cluster`` optional
    (``cluster`` names it when the rows have none). Pass the current row of each finding
    (:func:`lagscope.results.current_events`): every row given is counted."""
    if "kind" not in anomalies.column_names or "magnitude" not in anomalies.column_names:
        raise ValueError("delivery accounting needs the anomalies' kind and magnitude columns")
    kinds = anomalies.column("kind").cast(pa.string())
    rows = anomalies.filter(pc.is_in(kinds, value_set=pa.array(sorted(DELIVERY_KINDS))))
    kind = rows.column("kind").cast(pa.string())
    names = sorted(DELIVERY_KINDS)
    default_cause = pc.take(pa.array([DEFAULT_CAUSE[k] for k in names]), pc.index_in(kind, value_set=pa.array(names)))
    cause = pc.coalesce(_column(rows, "cause", pa.string()), default_cause)
    count = pc.cast(pc.round(pc.max_element_wise(
        pc.fill_null(_column(rows, "magnitude", pa.float64()), 0.0), 0.0)), pa.int64())
    is_lost = pc.not_equal(kind, "rewind")
    zero = pa.scalar(0, pa.int64())
    start = _column(rows, "start_ts", _TS)
    end = _column(rows, "end_ts", _TS)
    one_commit = pc.fill_null(pc.equal(start, end), False)
    # a seek or a reset after out-of-range is judged by the consumer's pace, and its count leaves
    # out what that pace could have processed since the commit before it: an estimate, even where
    # one commit shows both offsets
    paced = pc.and_(pc.equal(kind, "skip"), pc.is_in(cause, value_set=pa.array(sorted(PACED_CAUSES))))
    # a retention loss timed by one commit is the deleted part of a skip's jump, less what the
    # consumer's capacity could have read of it before retention deleted it: an estimate too
    deleted_part = pc.and_(one_commit, pc.equal(kind, "retention_loss"))
    estimated = pc.or_(paced, deleted_part)
    exact = pc.and_(one_commit, pc.invert(estimated))
    unproven = pc.fill_null(pc.and_(pc.equal(kind, "retention_loss"),
                                    pc.equal(_column(rows, "severity", pa.string(), "critical"), "warning")), False)
    bound = pc.if_else(exact, "exact", pc.if_else(pc.or_(pc.equal(kind, "skip"), deleted_part), "estimate",
                                                  pc.if_else(unproven, "at_most", "at_least")))
    clusters = _column(rows, "cluster", pa.string(), cluster)
    return pa.Table.from_arrays([
        clusters, _column(rows, "group_id", pa.string()), _column(rows, "topic", pa.string()),
        _column(rows, "partition", pa.int32()), kind, cause, start, end,
        pc.if_else(is_lost, count, zero), pc.if_else(is_lost, zero, count), exact, bound,
        _column(rows, "key", pa.string()),
    ], schema=_SCHEMA)


#: the anomaly columns :func:`account_rows` reads from dict rows, with their types
_ROW_TYPES: dict[str, pa.DataType] = {
    "cluster": pa.string(), "group_id": pa.string(), "topic": pa.string(), "partition": pa.int32(),
    "kind": pa.string(), "cause": pa.string(), "start_ts": _TS, "end_ts": _TS, "magnitude": pa.float64(),
    "severity": pa.string(), "key": pa.string()}


def account_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any] | None]:
    """:func:`account` of anomaly rows given as dicts, one result per row in their order (a dict
    of :data:`DELIVERY_COLUMNS`), None for a row whose kind counts no message; missing keys are
    null. One Arrow pass for all of them (the readers that hold rows: the exporter, the alerts)."""
    picked = [i for i, r in enumerate(rows) if r.get("kind") in DELIVERY_KINDS]
    out: list[dict[str, Any] | None] = [None] * len(rows)
    if picked:
        table = pa.table({name: pa.array([rows[i].get(name) for i in picked], type_)
                          for name, type_ in _ROW_TYPES.items()})
        for i, counted in zip(picked, account(table).to_pylist(), strict=True):
            out[i] = counted
    return out


def by_bucket(delivery: pa.Table, every: dt.timedelta,
              by: Sequence[str] = ("cluster", "group_id", "topic", "cause")) -> pa.Table:
    """:func:`account`'s rows summed per ``by`` and per time bucket of ``every`` (the UTC
    epoch's multiples; the bucket of a row is the one its ``bucket_ts`` falls in): ``by``,
    ``bucket_ts``, ``lost`` (what is known lost: an ``at_most`` row adds nothing, as in the
    Prometheus counter), ``reprocessed``, ``findings`` (how many rows) and ``exact`` (all of
    them exact)."""
    seconds = int(every.total_seconds())
    if seconds <= 0 or seconds != every.total_seconds():
        raise ValueError(f"a delivery bucket is a whole number of seconds > 0, not {every}")
    unknown = [c for c in by if c not in delivery.column_names]
    if unknown:
        raise ValueError(f"cannot bucket delivery rows by {unknown}: not a delivery column")
    bucket = pc.floor_temporal(delivery.column("bucket_ts"), multiple=seconds, unit="second")
    lost = delivery.column("lost")
    if "bound" in delivery.column_names:  # an upper bound only (a retention loss not proven): not summed
        lost = pc.if_else(pc.fill_null(pc.equal(delivery.column("bound"), "at_most"), False), 0, lost)
    keyed = pa.table({**{c: delivery.column(c) for c in by}, "bucket_ts": bucket,
                      "lost": lost, "reprocessed": delivery.column("reprocessed"),
                      "exact": delivery.column("exact"), "one": pa.array([1] * delivery.num_rows, pa.int64())})
    summed = keyed.group_by([*by, "bucket_ts"], use_threads=False).aggregate(
        [("lost", "sum"), ("reprocessed", "sum"), ("one", "sum"), ("exact", "all")])
    out = pa.table({**{c: summed.column(c) for c in by}, "bucket_ts": summed.column("bucket_ts"),
                    "lost": pc.fill_null(summed.column("lost_sum"), 0),
                    "reprocessed": pc.fill_null(summed.column("reprocessed_sum"), 0),
                    "findings": summed.column("one_sum"), "exact": summed.column("exact_all")})
    return out.sort_by([("bucket_ts", "ascending"), *((c, "ascending") for c in by)])
