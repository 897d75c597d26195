"""lagscope.delivery: the delivery accounting derived from the anomalies, with and without the
``cause`` column, exact or a bound, and its buckets."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lagscope.delivery import account, account_rows, by_bucket
from lagscope.lake import write_rows
from lagscope.results import current_events
from lagscope.schema import ANOMALIES, Table

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)

#: the anomalies table as written before its ``cause`` column
BEFORE_CAUSE = Table("anomalies", pa.schema([f for f in ANOMALIES.schema if f.name != "cause"]), ANOMALIES.doc)


def _row(kind: str, magnitude: float | None, start: dt.datetime = T0, end: dt.datetime | None = T0,
         partition: int = 0, cause: str | None = None, **extra: Any) -> dict[str, Any]:
    row = {"group_id": "g", "topic": "t", "partition": partition, "kind": kind, "start_ts": start, "end_ts": end,
           "severity": "critical", "magnitude": magnitude, "unit": "messages", "detail": "",
           "key": f"{kind}|c|g|t|{partition}|{start.isoformat()}", "as_of_ts": (end or start) + S, **extra}
    if cause is not None:
        row["cause"] = cause
    return row


@pytest.mark.parametrize(("row", "expected"), [
    # a seek timed by its commit (start == end): never processed, an estimate (its count leaves
    # out what the consumer's pace could have read since the commit before it)
    (_row("skip", 512.4, cause="seek"), ("seek", 512, 0, False, "estimate")),
    # a skip without the cause column (written before it existed): the kind's own cause
    (_row("skip", 70.0), ("seek", 70, 0, False, "estimate")),
    # a reset after out-of-range is judged by the pace too
    (_row("skip", 90.0, cause="out_of_range_reset"), ("out_of_range_reset", 90, 0, False, "estimate")),
    # the part of a skip's jump that retention had deleted, timed by its commit: an estimate too
    (_row("retention_loss", 14.0), ("retention", 14, 0, False, "estimate")),
    # an admin tool's reset to the end, commit-timed: the group was empty, so all of it, exactly
    (_row("skip", 300.0, cause="admin_reset"), ("admin_reset", 300, 0, True, "exact")),
    # a skip between two sweeps: the jump less the previous rate's share, an estimate
    (_row("skip", 130.0, end=T0 + 5 * S, cause="out_of_range_reset"),
     ("out_of_range_reset", 130, 0, False, "estimate")),
    # a retention loss still open: at least that many, and growing
    (_row("retention_loss", 40.0, end=None), ("retention", 40, 0, False, "at_least")),
    # proven (critical: a sweep without an owner) the same
    ({**_row("retention_loss", 40.0, end=None), "severity": "critical"}, ("retention", 40, 0, False, "at_least")),
    # not proven (warning: a member owned it throughout and may have fetched them): at most that many
    ({**_row("retention_loss", 7.0, end=T0 + 5 * S), "severity": "warning"}, ("retention", 7, 0, False, "at_most")),
    # a warning of another kind says nothing about its bound
    ({**_row("rewind", 50.0, end=T0 + 5 * S), "severity": "warning"}, ("rewind", 0, 50, False, "at_least")),
    # a rewind from sweeps: at least that many processed twice
    (_row("rewind", 500.0, end=T0 + 5 * S), ("rewind", 0, 500, False, "at_least")),
    # a rewind commit written while the group had no members: an admin reset, exact
    (_row("rewind", 500.0, cause="admin_reset"), ("admin_reset", 0, 500, True, "exact")),
    # a finding without a count counts nothing (and says so: not exact without both times)
    (_row("skip", None, end=None), ("seek", 0, 0, False, "estimate")),
])
def test_each_finding_is_counted_by_cause_with_its_bound(row: dict[str, Any],
                                                         expected: tuple[Any, ...]) -> None:
    (got,) = account_rows([{**row, "cluster": "c"}])
    assert got is not None
    assert (got["cause"], got["lost"], got["reprocessed"], got["exact"], got["bound"]) == expected
    assert (got["cluster"], got["group_id"], got["topic"], got["partition"], got["bucket_ts"]) == ("c", "g", "t", 0, T0)


def test_kinds_that_count_no_message_are_left_out() -> None:
    rows = [_row("stall", 300.0), _row("lag_growth", 12.0), _row("skip", 5.0)]
    for r in rows:
        r["cause"] = None  # the column present but null: the kind's own cause
    table = pa.Table.from_pylist(rows, schema=ANOMALIES.schema)
    out = account(table, cluster="prod")
    assert out.column("kind").to_pylist() == ["skip"]
    assert out.column("cause").to_pylist() == ["seek"]
    assert out.column("cluster").to_pylist() == ["prod"]
    # dict rows: one result per row, in order, None where the kind counts no message
    assert [r and r["kind"] for r in account_rows(rows)] == [None, None, "skip"]
    assert account_rows([]) == []


def test_needs_kind_and_magnitude() -> None:
    with pytest.raises(ValueError, match="kind and magnitude"):
        account(pa.table({"kind": ["skip"]}))


def test_buckets_sum_per_group_topic_cause() -> None:
    rows = [_row("skip", 10.0, start=T0 + 5 * S, end=T0 + 5 * S, partition=0, cause="seek"),
            _row("skip", 20.0, start=T0 + 50 * S, end=T0 + 55 * S, partition=1, cause="seek"),
            _row("skip", 7.0, start=T0 + 70 * S, end=T0 + 70 * S, partition=0, cause="admin_reset"),
            _row("skip", 4.0, start=T0 + 80 * S, end=T0 + 82 * S, partition=1, cause="admin_reset"),
            _row("rewind", 3.0, start=T0 + 10 * S, end=T0 + 10 * S, partition=2),
            # a retention loss not proven (at most 40): a finding of its bucket, no count of lost messages
            {**_row("retention_loss", 40.0, start=T0 + 65 * S, end=T0 + 75 * S, partition=3), "severity": "warning"}]
    out = by_bucket(account(pa.Table.from_pylist(rows), cluster="c"), dt.timedelta(minutes=1))
    got = [(r["bucket_ts"] - T0, r["cause"], r["lost"], r["reprocessed"], r["findings"], r["exact"])
           for r in out.to_pylist()]
    assert got == [(dt.timedelta(0), "rewind", 0, 3, 1, True),
                   # 10 from one commit and 20 from sweeps, both judged by the pace: not exact
                   (dt.timedelta(0), "seek", 30, 0, 2, False),
                   # one admin reset timed by its commit (exact), one seen between sweeps: not all exact
                   (dt.timedelta(minutes=1), "admin_reset", 11, 0, 2, False),
                   (dt.timedelta(minutes=1), "retention", 0, 0, 1, False)]
    with pytest.raises(ValueError, match="whole number of seconds"):
        by_bucket(account(pa.Table.from_pylist(rows)), dt.timedelta(milliseconds=1500))
    with pytest.raises(ValueError, match="not a delivery column"):
        by_bucket(account(pa.Table.from_pylist(rows)), dt.timedelta(minutes=1), by=("severity",))


def test_from_result_files_before_and_after_the_cause_column(tmp_path: Path) -> None:
    """Files of both layouts in one results folder: the current row of each finding, counted once."""
    old = [_row("rewind", 100.0, start=T0, end=None), _row("rewind", 150.0, start=T0, end=T0 + 5 * S)]
    old[1]["as_of_ts"] = T0 + 10 * S  # the same rewind, closed by a later step
    write_rows(tmp_path, BEFORE_CAUSE, "prod", old)
    write_rows(tmp_path, ANOMALIES, "prod", [_row("skip", 64.0, start=T0 + 60 * S, end=T0 + 60 * S,
                                                   partition=3, cause="admin_reset")])
    out = account(pa.Table.from_pylist(current_events(tmp_path, "anomalies"))).sort_by("bucket_ts").to_pylist()
    assert [(r["cluster"], r["kind"], r["cause"], r["partition"], r["lost"], r["reprocessed"], r["bound"])
            for r in out] == [("prod", "rewind", "rewind", 0, 0, 150, "at_least"),
                              ("prod", "skip", "admin_reset", 3, 64, 0, "exact")]
