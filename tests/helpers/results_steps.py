"""Result tables published as the analytics publish them, without Spark: rows in, one
incremental step (``inc-<from>-<to>-…`` files, then the checkpoint), one provisional step
(``pre-<from>-<to>-…`` files, then the provisional marker) or one batch out, through
the analytics' own staging and publishing (:mod:`lagscope.analytics.io`)."""

from __future__ import annotations

import datetime as dt
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from lagscope.analytics.io import (
    Checkpoint,
    drop_provisional,
    new_staging,
    publish_batch,
    publish_incremental,
    publish_provisional,
    spark_arrow_schema,
    stage_arrow,
    write_checkpoint,
)
from lagscope.results import TIME_COLUMN, batch_tag, inc_tag

__all__ = ["publish_batch_rows", "publish_provisional_step", "publish_step"]

Rows = Mapping[str, Sequence[Mapping[str, Any]]]


def _stage(results: Path, cluster: str, tables: Rows) -> dict[str, Path]:
    staged: dict[str, Path] = {}
    for table, rows in tables.items():
        data = pa.Table.from_pylist(
            [{**r, "cluster": cluster, "date": r[TIME_COLUMN[table]].astimezone(dt.UTC).date().isoformat()}
             for r in rows], schema=spark_arrow_schema(table))
        staged[table] = new_staging(results, table)
        stage_arrow(staged[table], table, data)
    return staged


def publish_step(results: Path, cluster: str, start: dt.datetime, until: dt.datetime, tables: Rows,
                 *, checkpoint: bool = True) -> dict[str, int]:
    """Publish ``tables`` (table → rows without cluster/date) as the incremental step
    ``[start, until)``, then move the checkpoint to ``until`` (unless ``checkpoint`` is False:
    a step that crashed between publishing and checkpointing)."""
    staged = _stage(results, cluster, tables)
    try:
        written = publish_incremental(results, staged, tag=inc_tag(start, until), clusters=[cluster])
    finally:
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)
    if checkpoint:  # as run_incremental: the checkpoint, then the provisional files it hid go
        write_checkpoint(results, Checkpoint(watermark=until.isoformat(), version="v-test"))
        drop_provisional(results)
    return written


def publish_provisional_step(results: Path, cluster: str, start: dt.datetime, until: dt.datetime,
                             tables: Rows) -> dict[str, int]:
    """Publish ``tables`` as the provisional step ``[start, until)`` (``start``: the checkpoint's
    watermark), as :func:`lagscope.analytics.job.run_provisional` does."""
    staged = _stage(results, cluster, tables)
    try:
        return publish_provisional(results, staged, start=start, until=until)
    finally:
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)


def publish_batch_rows(results: Path, cluster: str, since: dt.date, until: dt.date, tables: Rows) -> dict[str, int]:
    """Publish ``tables`` as one batch over the days ``since … until``."""
    staged = _stage(results, cluster, tables)
    try:
        return publish_batch(results, staged, tag=batch_tag(since, until))
    finally:
        for folder in staged.values():
            shutil.rmtree(folder, ignore_errors=True)
