"""The collection loop: sweep every cluster each interval, write the lake, feed /metrics.

    >>> collector = Collector(load_config("lagscope.yaml"))      # doctest: +SKIP
    >>> collector.run(stop)        # until stop.set() (SIGINT/SIGTERM in the CLI)  # doctest: +SKIP

Components and lifecycle (start receivers before senders, stop in reverse):
:class:`LakeSink` (writes each Snapshot to the lake), the metrics server (optional, gets each
Snapshot whole), then one :class:`~lagscope.collector.kafka_client.ClusterClient` per cluster.

Faults: a sweep that fails (broker down, timeout) is a Snapshot with ``ok=False`` and the
error, written to ``sweeps`` like any other: a gap is visible as a gap, never as zeros.
After :data:`RECONNECT_AFTER` failed sweeps in a row the cluster's client is rebuilt
(fresh bootstrap), and connection back-off is capped at 1 s, so collection resumes with the
first sweep after the broker returns. Anything else that goes wrong in one iteration (a
bug, a full disk) is logged and the next sweep is scheduled: the loop never dies of it. A lake
write that fails is counted per (cluster, table) (:meth:`Collector.lake_write_errors`, served as
``lagscope_lake_write_errors_total``), since the sweep itself, and ``lagscope_up``, look fine,
and the sweep is held in memory and written when the lake can be written again
(:data:`MAX_HELD_ROWS`).

Maintenance, in one background thread so that it never delays a sweep: compaction of closed
hours every ``compaction.interval_s``, and retention (:mod:`lagscope.retention`) at the first
iteration, then hourly: the lake's date partitions older than ``collector.retention`` days go,
except those the analytics' checkpoint (under the results root) has not read yet.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from lagscope.collector.compaction import compact_lake
from lagscope.collector.kafka_client import ClusterClient
from lagscope.collector.model import Snapshot
from lagscope.collector.probe import BatchProber
from lagscope.collector.rows import ColumnRows
from lagscope.collector.sweep import collector_id, failed_snapshot, sweep
from lagscope.config import ClusterConfig, Settings, resolve_results, resolve_results_root
from lagscope.errors import LagscopeError, LakeError
from lagscope.lake import write_rows, write_table
from lagscope.retention import RUN_EVERY_S, Removals, analytics_keep_from, prune
from lagscope.schema import MEMBERS, OFFSETS, SAMPLE_TABLES, SWEEPS
from lagscope.storage import Store, open_root, open_store

__all__ = ["MAX_HELD_ROWS", "RECONNECT_AFTER", "Collector", "LakeSink", "SnapshotReceiver"]

log = logging.getLogger(__name__)

#: failed sweeps in a row after which a cluster's client is closed and rebuilt
RECONNECT_AFTER = 3

#: offsets and members rows of the sweeps the lake sink holds in memory while the lake cannot be
#: written (about 150 MB); beyond it the oldest held sweep is dropped, with an error in the log.
#: The newest sweep is always held.
MAX_HELD_ROWS = 1_000_000


class SnapshotReceiver(Protocol):
    """Anything that takes each new Snapshot whole (the metrics server does)."""

    def update(self, snapshot: Snapshot) -> None: ...


class LakeSink:
    """Writes a Snapshot's rows to the lake: offsets, members, then the sweeps row.

    Each table's rows of one sweep are one atomic file (:func:`lagscope.lake.write_rows`).
    The sweeps row is written last, so a sweep listed in ``sweeps`` has all its data files;
    a crash in between leaves data without a sweeps row, which readers treat as not swept.

    A write that fails is counted per ``(cluster, table)`` in :meth:`write_errors`
    (``lagscope_lake_write_errors_total`` on /metrics) and raises a :class:`LakeError`; the
    sweep is held, with the tables it has already written, and written before the next one
    (oldest first; a full disk or an unmounted volume loses no sweep that fits in
    :data:`MAX_HELD_ROWS`). No sweeps row is written for a sweep whose data is missing.
    """

    def __init__(self, root: Path | str | Store, *, max_held_rows: int = MAX_HELD_ROWS) -> None:
        #: a local folder, or an object store (:mod:`lagscope.storage`: files committed by a marker)
        self.root: Path | Store = root if isinstance(root, Store) else Path(root)
        self.max_held_rows = max_held_rows
        self._lock = threading.Lock()
        self._write_errors: Counter[tuple[str, str]] = Counter()
        # sweeps not (fully) written yet, oldest first, each with the tables already written
        self._held: deque[tuple[Snapshot, set[str]]] = deque()

    @property
    def held(self) -> int:
        """Sweeps waiting to be written (the lake could not be written when they came)."""
        return len(self._held)

    def holding_since(self) -> dt.datetime | None:
        """The time of the oldest sweep held in memory, None when every sweep is in the lake:
        the lake is complete before it (the analytics of ``lagscope run`` stop there)."""
        held = self._held
        try:
            return held[0][0].sweep_ts if held else None
        except IndexError:  # written meanwhile (another thread)
            return None

    def update(self, snapshot: Snapshot) -> None:
        self._held.append((snapshot, set()))
        self.flush()

    def flush(self) -> None:
        """Write the held sweeps, oldest first (raises :class:`LakeError` if one still fails)."""
        while self._held:
            held, done = self._held[0]
            try:
                self._write(held, done)
            except Exception as exc:
                self._drop_beyond_bound()
                raise LakeError(
                    f"could not write the sweep of {held.sweep_ts.isoformat()} ({type(exc).__name__}: {exc}); "
                    f"{len(self._held)} sweep(s) held in memory, written when the lake can be written again"
                ) from exc
            self._held.popleft()

    def _write(self, snapshot: Snapshot, done: set[str]) -> None:
        date = snapshot.sweep_ts.astimezone(dt.UTC).date()
        for table, rows in ((OFFSETS, snapshot.offsets), (MEMBERS, snapshot.members)):
            if not rows or table.name in done:
                continue
            with self._counting_failures(snapshot.cluster, table.name):
                if isinstance(rows, ColumnRows):  # column by column, never a dict per row
                    write_table(self.root, table, snapshot.cluster, rows.to_arrow(table.schema), date=date)
                else:
                    write_rows(self.root, table, snapshot.cluster, rows, date=date)
            done.add(table.name)
        with self._counting_failures(snapshot.cluster, SWEEPS.name):
            write_rows(self.root, SWEEPS, snapshot.cluster, [snapshot.sweep], date=date)

    def _drop_beyond_bound(self) -> None:
        rows = sum(len(s.offsets) + len(s.members) for s, _ in self._held)
        while len(self._held) > 1 and rows > self.max_held_rows:
            old, _ = self._held.popleft()
            rows -= len(old.offsets) + len(old.members)
            log.error("cluster %s: dropped the sweep of %s, held since the lake could not be written: more than "
                      "%d rows are held", old.cluster, old.sweep_ts.isoformat(), self.max_held_rows)

    def write_errors(self) -> dict[tuple[str, str], int]:
        """Failed writes since start, per ``(cluster, table)`` (only those that failed at least once)."""
        with self._lock:
            return dict(self._write_errors)

    @contextlib.contextmanager
    def _counting_failures(self, cluster: str, table: str) -> Iterator[None]:
        try:
            yield
        except Exception:
            with self._lock:
                self._write_errors[(cluster, table)] += 1
            raise


def describe(snapshot: Snapshot) -> str:
    """The one log line of a sweep."""
    s = snapshot.sweep
    head = (f"sweep cluster={snapshot.cluster} {'ok' if snapshot.ok else 'FAILED'} "
            f"groups={s.get('groups', 0)} partitions={s.get('partitions', 0)} members={s.get('members', 0)} "
            f"duration={float(s.get('duration_ms') or 0):.0f}ms errors={s.get('group_errors', 0)}")
    if s.get("error"):
        err = str(s["error"])
        head += f" error={err[:300]}{'…' if len(err) > 300 else ''}"
    return head


class _ClusterRun:
    def __init__(self, cluster: ClusterConfig, factory: Callable[[ClusterConfig], ClusterClient]) -> None:
        self.cluster = cluster
        self.factory = factory
        self.client: ClusterClient | None = None
        self.failures = 0

    def get_client(self) -> ClusterClient:
        if self.client is None:
            self.client = self.factory(self.cluster)
        return self.client

    def reset(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            try:
                client.close()
            except Exception as exc:  # closing a broken client must not stop the loop
                log.debug("closing client of %s: %s", self.cluster.name, exc)


class Collector:
    """Sweeps the configured clusters every ``collector.interval_s`` (see the module docstring).

    Inject what depends on the environment: ``client_factory`` (Kafka), ``receivers``
    (defaults: the lake sink, plus the metrics server when enabled), ``clock``/``sleep``.
    ``results``: the results root whose analytics checkpoint retention respects (default: as
    ``lagscope analyze`` resolves it); ``removals``: the retention counters served on /metrics
    (shared with the analytics loop in ``lagscope run``).
    """

    def __init__(self, settings: Settings, *,
                 client_factory: Callable[[ClusterConfig], ClusterClient] | None = None,
                 receivers: list[SnapshotReceiver] | None = None,
                 metrics: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 results: Path | Store | None = None,
                 removals: Removals | None = None) -> None:
        self.settings = settings
        cfg = settings.collector
        self.instance = cfg.instance or collector_id()
        self._factory = client_factory or (lambda c: ClusterClient(c, request_timeout_ms=cfg.request_timeout_ms))
        #: the lake: a local folder or an object store (the settings' storage section)
        self.lake_root = open_root(cfg.lake, settings.storage)
        self.sink = LakeSink(self.lake_root)
        self.receivers: list[SnapshotReceiver] = list(receivers) if receivers is not None else [self.sink]
        self._metrics_enabled = settings.metrics.enabled if metrics is None else metrics
        self.metrics_server: Any = None
        #: the __consumer_offsets tails (clusters with consumer_offsets_tail.enabled), in threads
        self.commitlog: Any = None
        self._runs = [_ClusterRun(c, self._factory) for c in settings.clusters]
        self._clock = clock
        self._last_compaction = clock()
        self._last_prune: float | None = None  # None: prune at the first iteration
        #: the maintenance thread (compaction or retention), one at a time
        self._maintenance: threading.Thread | None = None
        #: the results, whose checkpoint retention honours (a Store when the lake is on an object
        #: store: the results' root resolved as ``lagscope analyze`` does, opened with the same storage)
        self.results: Path | Store = (
            results if isinstance(results, Store)
            else resolve_results(results, cfg.lake_path, settings.analytics) if not isinstance(self.lake_root, Store)
            else open_store(resolve_results_root(results, cfg.lake, settings.analytics), settings.storage))
        self.removals = removals if removals is not None else Removals()
        for c in settings.clusters:
            self.removals.watch([c.name], ("offsets", "members", "sweeps")
                                + (("commits", "group_events", "batch_probes") if c.consumer_offsets_tail.enabled
                                   else ()))
        self.sweeps = 0
        self.latest: dict[str, Snapshot] = {}
        #: per cluster whose tail is on (and probes not set to 0): the batch prober the tail feeds
        self.probers: dict[str, BatchProber] = {
            c.name: BatchProber(c.name, self.lake_root, rate_per_s=c.consumer_offsets_tail.batch_probes_per_s,
                                timeout_ms=min(5000, cfg.request_timeout_ms))
            for c in settings.clusters
            if c.consumer_offsets_tail.enabled and c.consumer_offsets_tail.batch_probes_per_s > 0}

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> Collector:
        if self._metrics_enabled and self.metrics_server is None:
            from lagscope.collector.metrics import LakeWriteCollector, MetricsServer, RetentionCollector
            from lagscope.lake import QUARANTINED

            m = self.settings.metrics
            self.metrics_server = MetricsServer(m.bind, m.port,
                                                history_points=self.settings.time_lag.history_points,
                                                compat=m.compat).start()
            self.metrics_server.registry.register(LakeWriteCollector(self.lake_write_errors))
            self.metrics_server.registry.register(RetentionCollector(self.removals.snapshot))
            self.metrics_server.registry.register(QUARANTINED)  # every reader's quarantined files
            self.receivers.append(self.metrics_server)
        if self.commitlog is None and any(c.consumer_offsets_tail.enabled for c in self.settings.clusters):
            from lagscope.collector.commitlog import CommitLogService

            self.commitlog = CommitLogService(self.settings.clusters, self.lake_root)
            for name, tailer in self.commitlog.tailers.items():
                prober = self.probers.get(name)
                if prober is not None:
                    tailer.on_commits = prober.offer
            self.commitlog.start()
            if self.metrics_server is not None:  # the tails' statistics on the same /metrics
                from lagscope.collector.metrics import CommitLogCollector

                self.metrics_server.registry.register(CommitLogCollector(self.tail_stats))
        return self

    def tail_watermarks(self) -> dict[str, dt.datetime | None]:
        """Per cluster whose ``__consumer_offsets`` tail is on and running: the time before which
        every record it reads is in the lake (:meth:`CommitLogService.watermarks`), None before
        its first (or before the tails start). A tail stopped for good is left out."""
        commitlog = self.commitlog
        if commitlog is None:
            return {c.name: None for c in self.settings.clusters if c.consumer_offsets_tail.enabled}
        return {name: None if t is None else dt.datetime.fromtimestamp(t, dt.UTC)
                for name, t in commitlog.watermarks().items()}

    def tail_stats(self) -> dict[str, dict[str, Any]]:
        """Per cluster whose tail is on: its statistics (:meth:`CommitLogService.stats`) and its
        batch prober's (:meth:`ProberStats.snapshot`)."""
        commitlog = self.commitlog
        out = commitlog.stats() if commitlog is not None else {}
        for name, prober in self.probers.items():
            if name in out:
                out[name] = {**out[name], **prober.stats.snapshot()}
        return out

    def stop(self) -> None:
        maintenance, self._maintenance = self._maintenance, None
        if maintenance is not None:
            maintenance.join()  # a merge in progress finishes (its hidden temp file would remain otherwise)
        commitlog, self.commitlog = self.commitlog, None
        if commitlog is not None:
            commitlog.stop()
        for run in reversed(self._runs):
            run.reset()
        if self.sink.held:  # a last attempt: what is held in memory is lost when the process ends
            try:
                self.sink.flush()
            except LakeError as exc:
                log.error("stopping with sweeps not written: %s", exc)
        server, self.metrics_server = self.metrics_server, None
        if server is not None:
            self.receivers.remove(server)
            server.stop()

    def lake_write_errors(self) -> dict[tuple[str, str], int]:
        """Failed lake writes since start per ``(cluster, table)``: the sweeps' (the lake sink) and
        the ``__consumer_offsets`` tails'. Every table a cluster writes is listed, at 0 until a
        write fails, so that ``increase()`` over ``lagscope_lake_write_errors_total`` sees the first."""
        from lagscope.collector.metrics import LAKE_TABLES

        out: dict[tuple[str, str], int] = {}
        for run in self._runs:
            tables = LAKE_TABLES["sweep"] + (LAKE_TABLES["commitlog"] if run.cluster.consumer_offsets_tail.enabled
                                             else ())
            out.update({(run.cluster.name, t): 0 for t in tables})
        for key, n in self.sink.write_errors().items():
            out[key] = out.get(key, 0) + n
        commitlog = self.commitlog
        if commitlog is not None:
            for cluster, st in commitlog.stats().items():
                for table, n in (st.get("lake_write_errors") or {}).items():
                    out[(cluster, table)] = out.get((cluster, table), 0) + int(n)
        for cluster, prober in self.probers.items():
            out[(cluster, "batch_probes")] = out.get((cluster, "batch_probes"), 0) + prober.stats.lake_write_errors
        return out

    # -- one iteration -------------------------------------------------------------------
    def sweep_cluster(self, run: _ClusterRun) -> Snapshot:
        cfg = self.settings.collector
        started = time.perf_counter()
        now = dt.datetime.now(dt.UTC)
        now = now.replace(microsecond=now.microsecond // 1000 * 1000)
        try:
            client = run.get_client()
            snap = sweep(client, run.cluster, timeout_s=cfg.effective_sweep_timeout_s(),
                         collector=self.instance, now=now)
        except Exception as exc:  # never let a sweep kill the loop; record it as failed
            log.exception("sweep of %s raised", run.cluster.name)
            snap = failed_snapshot(run.cluster.name, now, (time.perf_counter() - started) * 1000,
                                   f"{type(exc).__name__}: {exc}", self.instance)
        if snap.ok:
            run.failures = 0
        else:
            run.failures += 1
            if run.failures >= RECONNECT_AFTER:
                log.info("cluster %s: %d failed sweeps in a row; reconnecting", run.cluster.name, run.failures)
                run.reset()
                run.failures = 0
        return snap

    def deliver(self, snapshot: Snapshot) -> None:
        for receiver in self.receivers:
            try:
                receiver.update(snapshot)
            except (LakeError, OSError) as exc:
                log.error("cluster %s: could not write sweep %s to %s: %s", snapshot.cluster,
                          snapshot.sweep_ts.isoformat(), type(receiver).__name__, exc)
            except Exception:
                log.exception("cluster %s: %s failed on sweep %s", snapshot.cluster,
                              type(receiver).__name__, snapshot.sweep_ts.isoformat())

    def run_once(self) -> list[Snapshot]:
        """Sweep every cluster once, deliver each Snapshot, return them."""
        out: list[Snapshot] = []
        for run in self._runs:
            snap = self.sweep_cluster(run)
            (log.info if snap.ok else log.warning)("%s", describe(snap))
            self.deliver(snap)
            self.latest[run.cluster.name] = snap
            prober = self.probers.get(run.cluster.name)
            if prober is not None and snap.ok:
                try:
                    prober.run(run.get_client())
                except Exception:  # evidence for the analytics, never a reason to stop sweeping
                    log.exception("cluster %s: batch probes failed", run.cluster.name)
            self.sweeps += 1
            out.append(snap)
        return out

    def maybe_compact(self, *, force: bool = False, wait: bool = False) -> None:
        """Compact closed hours every ``compaction.interval_s``, in a background thread (one at a
        time) so that a large hour never delays a sweep."""
        comp = self.settings.collector.compaction
        if not comp.enabled:
            return
        if not force and self._clock() - self._last_compaction < comp.interval_s:
            return
        if self._in_background(self._compact, "lagscope-compaction", wait=wait):
            self._last_compaction = self._clock()

    def maybe_prune(self, *, force: bool = False, wait: bool = False) -> None:
        """Apply ``collector.retention`` at the first call, then every ``RUN_EVERY_S`` (an hour), in
        the maintenance thread (never beside a compaction: a busy thread means next iteration)."""
        if not self.settings.collector.retention:
            return
        if not force and self._last_prune is not None and self._clock() - self._last_prune < RUN_EVERY_S:
            return
        if self._in_background(self._prune, "lagscope-retention", wait=wait):
            self._last_prune = self._clock()

    def _in_background(self, target: Callable[[], None], name: str, *, wait: bool) -> bool:
        """Run ``target`` in the maintenance thread unless it is busy (False: try again later)."""
        if self._maintenance is not None and self._maintenance.is_alive():
            return False
        self._maintenance = threading.Thread(target=target, name=name, daemon=True)
        self._maintenance.start()
        if wait:
            self._maintenance.join()
        return True

    def _prune(self) -> None:
        try:
            keep_from = analytics_keep_from(self.results)
            prune(self.lake_root, SAMPLE_TABLES, days=self.settings.collector.retention,
                  keep_from=keep_from, removals=self.removals, label="lake")
        except LagscopeError as exc:  # e.g. an unreadable checkpoint: nothing is removed until it is readable
            log.error("retention of the lake skipped: %s; will retry in %.0fs", exc, RUN_EVERY_S)
        except Exception:
            log.exception("retention of the lake failed; will retry in %.0fs", RUN_EVERY_S)

    def _compact(self) -> None:
        comp = self.settings.collector.compaction
        try:
            result = compact_lake(self.lake_root, grace_s=comp.grace_s, min_files=comp.min_files)
        except Exception:
            log.exception("compaction failed; will retry in %.0fs", comp.interval_s)
            return
        if result.files_in or result.orphans_removed:
            log.info("compaction: %d bucket(s), %d files → %d, %d orphan(s) removed", result.buckets,
                     result.files_in, result.files_out, result.orphans_removed)

    def run(self, stop: threading.Event, *, max_sweeps: int | None = None) -> None:
        """Sweep every ``interval_s`` (start to start) until ``stop`` is set."""
        interval = self.settings.collector.interval_s
        self.start()
        try:
            while not stop.is_set():
                began = self._clock()
                try:
                    self.run_once()
                    self.maybe_compact()
                    self.maybe_prune()
                except LagscopeError as exc:
                    log.error("collection iteration failed: %s; next sweep in %.0fs", exc, interval)
                except Exception:
                    log.exception("collection iteration failed; next sweep in %.0fs", interval)
                if max_sweeps is not None and self.sweeps >= max_sweeps:
                    break
                # start to start; an overrun sweep is followed at once by the next (never a backlog)
                stop.wait(max(0.0, began + interval - self._clock()))
        finally:
            self.stop()
