"""Files that cannot be read, made from real lake or result files: what the readers quarantine."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lagscope import lake
from lagscope.lake import write_rows
from lagscope.schema import SCHEMA_VERSION, TABLES

#: the ways a file goes bad: cut short (a copy interrupted), not Parquet at all, a data page
#: that fails to decode behind a good footer, written by a lagscope of a newer major schema
KINDS = ("truncated", "garbage", "corrupt_page", "newer_major")


def spoil(path: Path, kind: str) -> None:
    """Make the file at ``path`` unreadable in the way ``kind`` says (in place, same name)."""
    data = path.read_bytes()
    if kind == "truncated":
        path.write_bytes(data[:100])  # `head -c 100`
    elif kind == "garbage":
        path.write_bytes(b"this is not parquet\n" * 20)
    elif kind == "corrupt_page":
        # the first column chunk's page header right after the leading magic bytes: the footer
        # still reads (the check at listing passes), the data does not
        spoilt = bytearray(data)
        spoilt[4:44] = b"\xff" * 40
        path.write_bytes(bytes(spoilt))
        assert pq.read_metadata(path).num_rows > 0
        with pytest.raises(OSError):
            pq.ParquetFile(path).read()
    elif kind == "newer_major":
        table = pq.read_table(path, partitioning=None)
        meta = {**(table.schema.metadata or {}), lake.SCHEMA_VERSION_KEY: f"{SCHEMA_VERSION + 1}.0".encode()}
        pq.write_table(table.replace_schema_metadata(meta), path)
    else:
        raise ValueError(kind)


def in_quarantine(path: Path) -> Path:
    """Where :func:`lagscope.lake.quarantine` puts the file of a table at ``path``."""
    parts = path.parts
    at = next(i for i, p in enumerate(parts) if p.startswith("cluster="))
    return Path(*parts[:at], lake.QUARANTINE_DIR, *parts[at:])


def quarantine_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The warning lines of the quarantine."""
    return [r.getMessage() for r in caplog.records
            if r.name == "lagscope.lake" and r.levelno == logging.WARNING]


def sample_lake(root: Path, start: dt.datetime, *, sweeps: int = 24, every_s: int = 10) -> dict[str, list[Path]]:
    """A lake of one group of two partitions on cluster ``c``: one offsets, members and commits
    file per sweep (as the collector and the ``__consumer_offsets`` tail write them), partition 1
    stalling in the middle. Returns the files per table, in time order."""
    files: dict[str, list[Path]] = {"offsets": [], "members": [], "commits": []}
    for i in range(sweeps):
        t = start + dt.timedelta(seconds=every_s * i)
        ends = (10 * every_s * i, 10 * every_s * i)
        done = (max(0, ends[0] - 5), max(0, ends[1] - 5) if not sweeps // 3 <= i < 2 * sweeps // 3 else
                max(0, 10 * every_s * (sweeps // 3) - 5))
        offsets = [{"sweep_ts": t, "group_id": "g", "topic": "t", "partition": p, "committed_offset": done[p],
                    "log_start_offset": 0, "log_end_offset": ends[p], "last_stable_offset": ends[p],
                    "member_id": "m1", "group_state": "Stable", "lag": ends[p] - done[p], "lag_basis": "hw"}
                   for p in (0, 1)]
        members = [{"sweep_ts": t, "group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
                    "generation": 1, "member_id": "m1",
                    "assignment": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}]
        commits = [{"group_id": "g", "topic": "t", "partition": p, "committed_offset": done[p], "commit_ts": t,
                    "record_ts": t, "source_partition": 0, "source_offset": 2 * i + p} for p in (0, 1)]
        for table, rows in (("offsets", offsets), ("members", members), ("commits", commits)):
            path = write_rows(root, TABLES[table], "c", rows)
            assert path is not None
            files[table].append(path)
    return files
