"""The analytics' findings as Prometheus metrics: a custom collector over the result tables.

The analytics write ``rebalances``, ``anomalies``, ``status`` and ``lag_trends`` under
``<results>/<table>/cluster=…/date=…`` (see :mod:`lagscope.schema`). :class:`ResultsCollector`
reads the latest of them and exposes, per scrape:

===========================================================  =========  ==========================================
metric                                                       type       labels
===========================================================  =========  ==========================================
``lagscope_rebalances_total``                                counter    cluster, group, cause
``lagscope_rebalance_duration_seconds``                      histogram  cluster, group (closed windows)
``lagscope_rebalance_last_duration_seconds``                 gauge      cluster, group
``lagscope_rebalance_over_bound_ratio``                      gauge      cluster, group (last closed window)
``lagscope_rebalance_last_end_timestamp_seconds``            gauge      cluster, group (last closed window)
``lagscope_rebalance_in_progress``                           gauge      cluster, group (1 while a window is open)
``lagscope_anomalies_open``                                  gauge      cluster, group, kind, severity
``lagscope_anomalies_total``                                 counter    cluster, group, kind, severity
``lagscope_group_status``                                    gauge      cluster, group, status (1 = current)
``lagscope_group_burrow_status``                             gauge      cluster, group, status (1 = current)
``lagscope_retention_headroom_seconds``                      gauge      cluster, group, topic, partition
``lagscope_catchup_eta_seconds``                             gauge      cluster, group, topic, partition
``lagscope_results_last_update_timestamp_seconds``           gauge      table
``lagscope_results_read_errors_total``                       counter    (none)
``lagscope_results_files_read_total``                        counter    (none)
===========================================================  =========  ==========================================

The tables are brought up to date at most every ``refresh_s`` seconds, reading only the files
that are new or changed since the previous reading (:class:`TableFiles`: by path, modification
time and size; an incremental analytics step adds files, so a refresh reads that step's files
only); between refreshes every scrape serves the last complete reading (one immutable
:class:`ResultsReading`, replaced whole). A table that cannot be read keeps its previous
reading and counts a read error, so a scrape never fails and a transient error never turns
into zeros.

    >>> from prometheus_client import CollectorRegistry
    >>> registry = CollectorRegistry()
    >>> registry.register(ResultsCollector("/var/lib/lagscope/results"))  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from lagscope.errors import ConfigError, LakeError
from lagscope.lake import check_schema_version
from lagscope.schema import TABLES

__all__ = [
    "DURATION_BUCKETS",
    "GROUP_STATUSES",
    "ResultsCollector",
    "ResultsReading",
    "TableFiles",
    "current_rows",
    "read_results",
    "serve",
]

log = logging.getLogger(__name__)

#: buckets of ``lagscope_rebalance_duration_seconds`` (s): from a cooperative blip to a
#: max.poll.interval-bound rebalance (the default max.poll.interval.ms is 300 000)
DURATION_BUCKETS: tuple[float, ...] = (0.5, 1, 2, 5, 10, 15, 30, 45, 60, 120, 300, 600)

#: every value ``status.status`` can take; one series per value, 1 on the current one
GROUP_STATUSES: tuple[str, ...] = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND", "IDLE")
#: every value ``status.burrow_status`` can take
BURROW_STATUSES: tuple[str, ...] = ("OK", "WARN", "ERR", "STOP", "STALL", "REWIND")

_TABLES = ("rebalances", "anomalies", "status", "lag_trends")


@dataclass(frozen=True)
class ResultsReading:
    """One complete reading of the result tables, as plain rows per table (column → value)."""

    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: per table: the newest modification time of its files (epoch s); absent when no file
    updated: dict[str, float] = field(default_factory=dict)
    #: per table: the files this reading had to read (new or changed since the previous one)
    files_read: dict[str, list[Path]] = field(default_factory=dict)


@dataclass(frozen=True)
class _FileRows:
    stamp: tuple[int, int]  # (mtime in ns, size): a file rewritten in place gets a new stamp
    mtime: float
    rows: tuple[dict[str, Any], ...]


def _partition_value(folder: Path, key: str) -> str | None:
    prefix = f"{key}="
    return folder.name[len(prefix):] if folder.name.startswith(prefix) else None


class TableFiles:
    """The rows of one result table under ``root``, file by file, re-reading only what changed.

    The analytics only ever add files (an incremental step), replace a file by its name (a
    step re-run after a crash) or replace a day's files (a batch run): a refresh lists the
    table's files and reads those whose (path, modification time, size) it has not read yet;
    rows of files that are gone are dropped. ``refresh`` is all or nothing: on an error the
    previous files stay.
    """

    def __init__(self, root: Path | str, table: str) -> None:
        if table not in TABLES:
            raise LakeError(f"unknown result table {table!r}")
        self.root = Path(root)
        self.table = table
        self._files: dict[Path, _FileRows] = {}

    def _listing(self) -> dict[Path, os.stat_result]:
        folder = self.root / self.table
        out: dict[Path, os.stat_result] = {}
        if not folder.is_dir():
            return out
        for cdir in folder.glob("cluster=*"):
            for ddir in cdir.glob("date=*"):
                for path in ddir.glob("*.parquet"):
                    if path.name.startswith((".", "_")):
                        continue  # a file being written (lake.write_table, Spark's staging)
                    try:
                        out[path] = path.stat()
                    except FileNotFoundError:
                        continue  # replaced between the listing and the stat
        return out

    def _read(self, path: Path) -> tuple[dict[str, Any], ...]:
        import pyarrow.dataset as ds

        schema = TABLES[self.table].schema
        dataset = ds.dataset(str(path), format="parquet", schema=schema)
        for fragment in dataset.get_fragments():
            check_schema_version(fragment.physical_schema.metadata, fragment.path)
        try:
            rows = dataset.to_table().to_pylist()
        except pa.ArrowInvalid as exc:
            raise LakeError(f"cannot read result file {path}: {exc}") from exc
        cluster = _partition_value(path.parent.parent, "cluster")
        date = _partition_value(path.parent, "date")
        return tuple({**row, "cluster": cluster, "date": date} for row in rows)

    def refresh(self) -> list[Path]:
        """Bring the rows up to date with the files on disk; returns the files read."""
        files: dict[Path, _FileRows] = {}
        read: list[Path] = []
        for path, st in sorted(self._listing().items()):
            stamp = (st.st_mtime_ns, st.st_size)
            cached = self._files.get(path)
            if cached is not None and cached.stamp == stamp:
                files[path] = cached
                continue
            try:
                rows = self._read(path)
            except FileNotFoundError:
                continue  # deleted by a batch run since the listing: it is gone
            except (pa.ArrowInvalid, OSError) as exc:
                raise LakeError(f"cannot read result file {path}: {exc}") from exc
            files[path] = _FileRows(stamp, st.st_mtime, rows)
            read.append(path)
        self._files = files
        return read

    def rows(self) -> list[dict[str, Any]]:
        return [row for f in self._files.values() for row in f.rows]

    def newest_mtime(self) -> float | None:
        return max((f.mtime for f in self._files.values()), default=None)


def _read_all(tables: Mapping[str, TableFiles], previous: ResultsReading | None) -> tuple[ResultsReading, int]:
    rows: dict[str, list[dict[str, Any]]] = {}
    updated: dict[str, float] = {}
    files_read: dict[str, list[Path]] = {}
    errors = 0
    for name, files in tables.items():
        try:
            files_read[name] = files.refresh()
            rows[name] = files.rows()
            mtime = files.newest_mtime()
            if mtime is not None:
                updated[name] = mtime
        except (LakeError, OSError) as exc:
            errors += 1
            log.warning("cannot read result table %s under %s: %s", name, files.root, exc)
            if previous is not None:
                rows[name] = previous.rows.get(name, [])
                if name in previous.updated:
                    updated[name] = previous.updated[name]
    return ResultsReading(rows, updated, files_read), errors


def read_results(root: Path | str, tables: Iterable[str] = _TABLES,
                 *, previous: ResultsReading | None = None) -> tuple[ResultsReading, int]:
    """Read the result tables under ``root`` whole; returns the reading and the number of read errors.

    A table whose read fails keeps its rows from ``previous`` (if any). (:class:`ResultsCollector`
    keeps a :class:`TableFiles` per table instead, so that a refresh reads only new files.)
    """
    return _read_all({t: TableFiles(root, t) for t in tables}, previous)


def _latest_by(rows: Iterable[dict[str, Any]], key: Callable[[dict[str, Any]], tuple[Any, ...]],
               ts: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The row with the greatest ``ts`` per ``key`` (ties: the later row wins)."""
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in rows:
        k = key(row)
        cur = latest.get(k)
        if row.get(ts) is not None and (cur is None or cur.get(ts) is None or row[ts] >= cur[ts]):
            latest[k] = row
    return latest


def current_rows(rows: Iterable[Mapping[str, Any]],
                 key: Callable[[Mapping[str, Any]], Hashable]) -> list[Mapping[str, Any]]:
    """One row per identity, the current one.

    The analytics write an open rebalance window or anomaly again at every incremental step
    until it closes (schema: ``as_of_ts``): of the rows with one identity, the one with the
    latest ``as_of_ts`` is current; on a tie (or without ``as_of_ts``) a closed row wins over
    an open one, since a window or an anomaly never reopens.
    """
    best: dict[Hashable, Mapping[str, Any]] = {}
    for row in rows:
        k = key(row)
        cur = best.get(k)
        if cur is None or _rank(row) >= _rank(cur):
            best[k] = row
    return list(best.values())


def _rank(row: Mapping[str, Any]) -> tuple[float, int]:
    as_of = row.get("as_of_ts")
    return (as_of.timestamp() if as_of is not None else -math.inf, 0 if row.get("end_ts") is None else 1)


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    f = float(value)
    return f if math.isfinite(f) else None


class ResultsCollector(Collector):
    """A prometheus_client custom collector over the result tables under ``root``.

    ``refresh_s``: the tables are re-read when the last reading is older than this.
    ``clock``: injectable monotonic clock (tests).
    """

    def __init__(self, root: Path | str, *, refresh_s: float = 15.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.root = Path(root)
        self.refresh_s = refresh_s
        self._clock = clock
        self._lock = threading.Lock()
        self._tables = {t: TableFiles(self.root, t) for t in _TABLES}
        self._reading: ResultsReading | None = None
        self._read_at = -math.inf
        self._read_errors = 0
        self._files_read = 0

    def reading(self) -> ResultsReading:
        """The current reading, brought up to date first (new or changed files only) when it is
        older than ``refresh_s``."""
        with self._lock:
            now = self._clock()
            if self._reading is None or now - self._read_at >= self.refresh_s:
                reading, errors = _read_all(self._tables, self._reading)
                self._reading, self._read_at = reading, now
                self._read_errors += errors
                self._files_read += sum(len(v) for v in reading.files_read.values())
            return self._reading

    def collect(self) -> Iterator[Any]:
        reading = self.reading()
        yield from _rebalance_metrics(reading.rows.get("rebalances", []))
        yield from _anomaly_metrics(reading.rows.get("anomalies", []))
        yield from _status_metrics(reading.rows.get("status", []))
        yield from _trend_metrics(reading.rows.get("lag_trends", []))
        updated = GaugeMetricFamily(
            "lagscope_results_last_update_timestamp_seconds",
            "Newest modification time of a result table's files (Unix time, s).", labels=["table"])
        for table, mtime in sorted(reading.updated.items()):
            updated.add_metric([table], mtime)
        yield updated
        yield CounterMetricFamily("lagscope_results_read_errors",
                                  "Result-table reads that failed (the previous reading was kept).",
                                  value=self._read_errors)
        yield CounterMetricFamily("lagscope_results_files_read",
                                  "Result files read (each new or changed file once).",
                                  value=self._files_read)


def _rebalance_metrics(rows: list[dict[str, Any]]) -> Iterator[Any]:
    rows = [dict(r) for r in current_rows(rows, lambda r: (r["cluster"], r["group_id"], r["start_ts"]))]
    total = CounterMetricFamily("lagscope_rebalances",
                                "Rebalance windows found by the analytics, by cause.",
                                labels=["cluster", "group", "cause"])
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    durations: dict[tuple[str, str], list[float]] = defaultdict(list)
    in_progress: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        cg = (row["cluster"], row["group_id"])
        counts[(*cg, row.get("cause") or "unknown")] += 1
        in_progress[cg] += 0
        if row.get("end_ts") is None:
            in_progress[cg] += 1
        elif (d := _finite(row.get("duration_s"))) is not None:
            durations[cg].append(d)
    for labels, n in sorted(counts.items()):
        total.add_metric(list(labels), n)
    yield total

    hist = HistogramMetricFamily("lagscope_rebalance_duration_seconds",
                                 "Durations of closed rebalance windows (s).", labels=["cluster", "group"])
    for cg, values in sorted(durations.items()):
        buckets = [(_le(b), float(sum(1 for v in values if v <= b))) for b in DURATION_BUCKETS]
        buckets.append(("+Inf", float(len(values))))
        hist.add_metric(list(cg), buckets, sum_value=sum(values))
    yield hist

    closed = _latest_by((r for r in rows if r.get("end_ts") is not None),
                        lambda r: (r["cluster"], r["group_id"]), "end_ts")
    last = GaugeMetricFamily("lagscope_rebalance_last_duration_seconds",
                             "Duration of the group's last closed rebalance window (s).",
                             labels=["cluster", "group"])
    ratio = GaugeMetricFamily("lagscope_rebalance_over_bound_ratio",
                              "Last closed window's duration / the bound its settings imply "
                              "(> 1: slower than the settings allow).", labels=["cluster", "group"])
    ended = GaugeMetricFamily("lagscope_rebalance_last_end_timestamp_seconds",
                              "End of the group's last closed rebalance window (Unix time, s): how old "
                              "the window the two gauges above describe is.", labels=["cluster", "group"])
    for cg, row in sorted(closed.items()):
        if (d := _finite(row.get("duration_s"))) is not None:
            last.add_metric(list(cg), d)
        if (r := _finite(row.get("observed_over_bound"))) is not None:
            ratio.add_metric(list(cg), r)
        ended.add_metric(list(cg), row["end_ts"].timestamp())
    yield last
    yield ratio
    yield ended

    open_ = GaugeMetricFamily("lagscope_rebalance_in_progress",
                              "1 while the group has an open rebalance window, else 0.",
                              labels=["cluster", "group"])
    for cg, n in sorted(in_progress.items()):
        open_.add_metric(list(cg), 1.0 if n else 0.0)
    yield open_


def _le(bound: float) -> str:
    return repr(float(bound))


def _anomaly_metrics(rows: list[dict[str, Any]]) -> Iterator[Any]:
    rows = [dict(r) for r in current_rows(rows, lambda r: (r["cluster"], r["key"]))]
    labels = ["cluster", "group", "kind", "severity"]
    open_ = GaugeMetricFamily("lagscope_anomalies_open",
                              "Anomalies still open (no end yet); 0 once every one of the series ended.",
                              labels=labels)
    total = CounterMetricFamily("lagscope_anomalies", "Anomalies found by the analytics.", labels=labels)
    n_open: dict[tuple[str, str, str, str], int] = defaultdict(int)
    n_all: dict[tuple[str, str, str, str], int] = defaultdict(int)
    for row in rows:
        key = (row["cluster"], row["group_id"], row["kind"], row["severity"])
        n_all[key] += 1
        n_open[key] += 1 if row.get("end_ts") is None else 0
    for key in sorted(n_all):
        open_.add_metric(list(key), n_open[key])
        total.add_metric(list(key), n_all[key])
    yield open_
    yield total


def _status_metrics(rows: list[dict[str, Any]]) -> Iterator[Any]:
    group_rows = [r for r in rows if r.get("topic") is None and r.get("partition") is None]
    latest = _latest_by(group_rows, lambda r: (r["cluster"], r["group_id"]), "eval_ts")
    own = GaugeMetricFamily("lagscope_group_status",
                            "lagscope's group status: 1 on the current status, 0 on the others.",
                            labels=["cluster", "group", "status"])
    burrow = GaugeMetricFamily("lagscope_group_burrow_status",
                               "Burrow-compatible group status: 1 on the current status, 0 on the others.",
                               labels=["cluster", "group", "status"])
    for (cluster, group), row in sorted(latest.items()):
        for status in GROUP_STATUSES:
            own.add_metric([cluster, group, status], 1.0 if row.get("status") == status else 0.0)
        for status in BURROW_STATUSES:
            burrow.add_metric([cluster, group, status], 1.0 if row.get("burrow_status") == status else 0.0)
    yield own
    yield burrow


def _trend_metrics(rows: list[dict[str, Any]]) -> Iterator[Any]:
    part_rows = [r for r in rows if r.get("topic") is not None and r.get("partition") is not None]
    latest = _latest_by(part_rows, lambda r: (r["cluster"], r["group_id"], r["topic"], r["partition"]),
                        "window_start")
    labels = ["cluster", "group", "topic", "partition"]
    headroom = GaugeMetricFamily("lagscope_retention_headroom_seconds",
                                 "Seconds until the committed offset would fall below the log start "
                                 "at current rates (absent when it never will).", labels=labels)
    eta = GaugeMetricFamily("lagscope_catchup_eta_seconds",
                            "Seconds until the partition catches up at current rates "
                            "(absent when it is not catching up).", labels=labels)
    for (cluster, group, topic, partition), row in sorted(latest.items()):
        lv = [cluster, group, topic, str(partition)]
        if (h := _finite(row.get("retention_headroom_s"))) is not None:
            headroom.add_metric(lv, h)
        if (e := _finite(row.get("catchup_eta_s"))) is not None:
            eta.add_metric(lv, e)
    yield headroom
    yield eta


def serve(root: Path | str, *, host: str = "127.0.0.1", port: int = 9309,
          refresh_s: float = 15.0) -> tuple[Any, Any]:
    """Serve the results metrics on ``http://host:port/metrics`` (a daemon thread).

    Returns ``(server, thread)``; ``server.shutdown()`` stops it.
    """
    registry = CollectorRegistry()
    registry.register(ResultsCollector(root, refresh_s=refresh_s))
    try:
        server, thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigError(f"results metrics: cannot listen on {host}:{port}: {exc}") from exc
    log.info("results metrics on http://%s:%d/metrics (results %s)", host, server.server_port, root)
    return server, thread

