"""``lagscope run``: the production entry point, every long-running part of lagscope in one process.

    lagscope run --config lagscope.yaml                                  # collector + analytics
    lagscope run --config lagscope.yaml            # … + alert webhooks when alerts.routes is set
    lagscope run --config lagscope.yaml --component collector            # one part per container

Components, each with one job and a lifecycle (``start()``, ``stop()``), each in its own
thread:

- ``collector``: the sweep loop (:class:`lagscope.collector.loop.Collector`) with the
  ``__consumer_offsets`` tail where enabled; serves ``/metrics`` on ``metrics.bind:port``.
- ``analytics``: the incremental analytics loop: every ``analytics.interval_s`` seconds one
  :func:`~lagscope.analytics.job.run_incremental` step over the sweeps since the checkpoint
  (whole minutes), then (``analytics.provisional``) one
  :func:`~lagscope.analytics.job.run_provisional` step over the minute in progress,
  in one Spark session kept for the life of the process (``analytics.master``, or ``--master``);
  a full step stops where the lake is complete (:func:`full_step_end`: before sweeps the
  collector holds in memory and before each ``__consumer_offsets`` tail's watermark, waiting
  :data:`TAIL_WAIT_S` at most for a tail);
  hourly, the result tables' date partitions older than ``analytics.retention`` days go.
- ``alerts``: every ``--alerts-interval`` seconds, turns the result tables' findings into
  notifications in the durable outbox and delivers them to ``alerts.routes`` (retried with
  backoff, signed); a default part when ``alerts.routes`` is not empty.
- the analytics' findings as Prometheus metrics (:mod:`lagscope.analytics.results_metrics`):
  on the collector's ``/metrics`` when the collector runs here, else on their own endpoint
  at ``metrics.bind:port``.
- ``burrow-api``: Burrow's HTTP API v3 from the lake and the results (:mod:`lagscope.burrow`)
  on ``burrow_api.bind:port``; a default part when ``burrow_api.enabled``.

The lake and the results may be local folders or ``s3://bucket/prefix`` (the ``storage``
section): every part reads and writes them through :mod:`lagscope.storage` alike. The alerts'
outbox is always a local file (SQLite: the alerting process's own transactional state, which no
other process reads; an object store has no transactions or locks), and Spark's log goes to the
system's temporary folder when the results are in a bucket (no appending to an object).

Start order is downstream first (results metrics, alerts, analytics, then the collector), so
nothing produces before its consumer is up; a start that fails stops what already started.
SIGTERM or SIGINT stops them in reverse: the collector finishes its sweep and flushes the
lake, the analytics finish their step (its checkpoint moves only when its files are in
place), the alerts finish the delivery in flight (the outbox keeps the rest). A periodic job
that fails is logged and rescheduled; a component thread that dies makes the process stop
everything and exit 1, so that a supervisor restarts it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import re
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Protocol

import typer

from lagscope.command import settings_or_exit
from lagscope.config import AlertsConfig, AnalyticsConfig, Settings, parse_duration, resolve_results_root
from lagscope.errors import ConfigError, LagscopeError
from lagscope.lag import HISTORY_POINTS
from lagscope.memory import release_unused
from lagscope.retention import RUN_EVERY_S, Removals, prune
from lagscope.s3a import session_conf
from lagscope.schema import RESULT_TABLES
from lagscope.signals import stop_on_signals
from lagscope.storage import Store, open_root

__all__ = [
    "AlertsLoop",
    "AnalyticsLoop",
    "CollectorComponent",
    "Component",
    "ResultsMetrics",
    "Runner",
    "StepEnd",
    "full_step_end",
    "register",
]

log = logging.getLogger(__name__)

#: how far behind now a full analytics step waits for a ``__consumer_offsets`` tail whose
#: watermark does not move (a tail that cannot read the broker or write the lake): past it the
#: step goes on without the tail's records after ``now - TAIL_WAIT_S`` and says so
TAIL_WAIT_S = 120.0


@dataclass(frozen=True)
class StepEnd:
    """Where a full step stops (:func:`full_step_end`) and why, when not at ``now``."""

    until: dt.datetime
    #: what stopped it before now: ``sweeps held`` or ``tail <cluster>`` (empty: now)
    bound_by: str = ""
    #: the tails the step went on without (their watermark older than the bound): cluster ->
    #: their watermark (None: none yet)
    overdue: dict[str, dt.datetime | None] = field(default_factory=dict)

    def note(self, now: dt.datetime, wait_s: float) -> str:
        """One line for the step's summary: the tails it did not wait for, whose records it may
        lack (their watermark, if any, before the whole minutes it analyses); empty when none."""
        minute = self.until.replace(second=0, microsecond=0)
        late = {c: t for c, t in self.overdue.items() if t is None or t < minute}
        if not late:
            return ""
        tails = ", ".join(f"{c} ({_tail_state(now, t)})" for c, t in sorted(late.items()))
        return (f"analysed up to {minute.isoformat()} without waiting longer for the __consumer_offsets tail of "
                f"{tails}: a full step waits at most {wait_s:.0f} s for a tail")


def _tail_state(now: dt.datetime, mark: dt.datetime | None) -> str:
    if mark is None:
        return "no watermark yet"
    return f"complete before {mark.isoformat()}, {(now - mark).total_seconds():.0f} s ago"


def full_step_end(now: dt.datetime, *, held: dt.datetime | None = None,
                  tails: Mapping[str, dt.datetime | None] | None = None,
                  tail_wait_s: float = TAIL_WAIT_S) -> StepEnd:
    """Where a full step of ``lagscope run`` stops: the lake is complete before it.

    ``held``: the oldest sweep the collector holds in memory (None: none); ``tails``: each running
    ``__consumer_offsets`` tail's watermark (every record read before it is in the lake; None: none
    yet). The end is the earliest of ``now``, ``held`` and each tail's watermark, but no tail holds
    it further back than ``now - tail_wait_s``: a tail that cannot catch up (its broker or lake
    failing) must not stop the analytics for ever; the step then goes on without that tail's
    later records (:attr:`StepEnd.overdue`)."""
    until, bound_by = now, ""
    if held is not None and held < until:
        until, bound_by = held, "sweeps held"
    floor = now - dt.timedelta(seconds=tail_wait_s)
    overdue: dict[str, dt.datetime | None] = {}
    for cluster, mark in sorted((tails or {}).items()):
        if mark is None or mark < floor:
            overdue[cluster] = mark
            mark = floor
        if mark < until:
            until, bound_by = mark, f"tail {cluster}"
    return StepEnd(until, bound_by, overdue)


def _where(root: Path | Store) -> str:
    """A root as the log lines name it (a store by its URL, never its credentials)."""
    return root.url if isinstance(root, Store) else str(root)


def _exists(root: Path | Store) -> bool:
    """Whether a lake or results root holds anything yet: a local folder that exists, or an
    object-store prefix with any object under it (a prefix exists only through its objects)."""
    if not isinstance(root, Store):
        return root.is_dir()
    import pyarrow as pa

    try:
        return bool(root.folders("") or root.names(""))
    except (OSError, pa.ArrowException) as exc:
        log.warning("cannot list %s: %s", root.url, " ".join(str(exc).split()))
        return False


class Component(Protocol):
    name: str

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def is_healthy(self) -> bool: ...


class _Periodic:
    """Runs ``step()`` every ``interval_s`` seconds (start to start) in a thread until stopped.

    A failing step is logged and the next one scheduled; it never ends the loop. A step that
    sets :attr:`retry_now` has the next one start at once instead of at the next interval.
    """

    name = "periodic"

    def __init__(self, interval_s: float) -> None:
        if interval_s <= 0:
            raise ConfigError(f"{self.name} interval must be positive, not {interval_s}")
        self.interval_s = interval_s
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.runs = 0
        self.failures = 0
        #: set by a step: start the next one now rather than at the next interval (read once)
        self.retry_now = False

    def setup(self) -> None:
        """Runs in the thread before the first step."""

    def teardown(self) -> None:
        """Runs in the thread after the last step."""

    def step(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        try:
            self.setup()
            while not self.stopping.is_set():
                began = time.monotonic()
                try:
                    self.step()
                except Exception:
                    self.failures += 1
                    log.exception("%s: the run failed; next one in %.0fs", self.name, self.interval_s)
                self.runs += 1
                if self.retry_now:
                    self.retry_now = False
                    continue
                self.stopping.wait(max(0.0, began + self.interval_s - time.monotonic()))
        finally:
            self.teardown()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"lagscope-{self.name}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 120.0) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s did not stop within %.0fs", self.name, timeout)

    def is_healthy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class CollectorComponent:
    """The sweep loop in a thread; its metrics server also carries ``extra_collectors``."""

    name = "collector"

    def __init__(self, settings: Settings, extra_collectors: list[Any] | None = None, *,
                 results: Path | Store | None = None, removals: Removals | None = None) -> None:
        from lagscope.collector.loop import Collector

        self.collector = Collector(settings, results=results, removals=removals)
        self.extra_collectors = list(extra_collectors or [])
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.collector.start()  # metrics server and commit-log tails; run() will not start them again
        server = self.collector.metrics_server
        for extra in self.extra_collectors:
            if server is not None:
                server.registry.register(extra)
        self._thread = threading.Thread(target=self.collector.run, args=(self.stopping,),
                                        name="lagscope-collector", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 120.0) -> None:
        self.stopping.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.collector.stop()  # idempotent: run() stops it too when it returns

    def is_healthy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class AnalyticsLoop(_Periodic):
    """Incremental analytics every ``interval_s`` in one Spark session on ``master``.

    The engine dying (the JVM out of memory or crashed, the SparkContext stopped) is survivable:
    the failed step's output was never published (the checkpoint did not move), so the loop
    starts a new session and redoes the step: at once after a first failure (the new session's
    start is the wait; the results are late by no more than one interval), at the next interval
    after a second one in a row. After ``max_failures`` failed steps in a row the
    loop gives up: :attr:`fatal` holds one line naming the cause and the setting to change, and
    :meth:`is_healthy` turns false (``lagscope run`` and ``lagscope demo`` then exit non-zero).
    Spark's and the JVM's logs go to ``log_file``; the terminal gets one line per failure.

    ``retention_days``: after its first step and then hourly, the loop removes the result
    tables' date partitions older than this (:func:`lagscope.retention.prune`, counted in
    ``removals``); None or 0 keeps them. The results are never the next step's input (it reads
    the lake and its state), so a removal cannot break it."""

    name = "analytics"

    def __init__(self, lake: Path | Store, results: Path | Store, *, interval_s: float, master: str,
                 settings: AnalyticsConfig | None = None, history_points: int = HISTORY_POINTS,
                 backfill_s: float = 86400.0, shuffle_partitions: int = 4,
                 driver_memory: str | None = None, max_failures: int = 3, log_file: Path | None = None,
                 clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
                 retention_days: int | None = None, removals: Removals | None = None,
                 provisional: bool | None = None, provisional_settle_s: float = 0.0,
                 complete_before: Callable[[], dt.datetime | None] | None = None,
                 tail_watermarks: Callable[[], Mapping[str, dt.datetime | None]] | None = None,
                 tail_wait_s: float = TAIL_WAIT_S, spark_conf: Mapping[str, str] | None = None) -> None:
        super().__init__(interval_s)
        self.lake, self.results, self.master = lake, results, master
        self.settings = settings if settings is not None else AnalyticsConfig()
        self.history_points = history_points
        self.backfill_s = backfill_s
        self.shuffle_partitions = shuffle_partitions
        self.driver_memory = driver_memory or self.settings.driver_memory
        self.max_failures = max_failures
        self.log_file = log_file if log_file is not None else (
            Path(tempfile.gettempdir()) / "lagscope-logs" / "spark.log" if isinstance(results, Store)
            else results / "_logs" / "spark.log")
        self.clock = clock
        self.retention_days = retention_days
        self.removals = removals if removals is not None else Removals()
        #: provisional steps after the full ones (None: ``settings.provisional``), over the sweeps
        #: up to ``provisional_settle_s`` before the clock (a sweep in progress is not in the lake yet)
        self.provisional = self.settings.provisional if provisional is None else provisional
        self.provisional_settle_s = provisional_settle_s
        #: the collector's sweeps held in memory (the lake could not be written): the lake is complete
        #: before the time this returns (None: complete), and no step goes past it (its sweeps would
        #: be written behind a step that already passed their minute)
        self.complete_before = complete_before
        #: the running __consumer_offsets tails' watermarks (the collector's): a full step stops at
        #: the earliest, or at ``tail_wait_s`` before now when one lags further (:func:`full_step_end`)
        self.tail_watermarks = tail_watermarks
        self.tail_wait_s = tail_wait_s
        #: the last step's end and what set it; the tails it went on without (its summary's words)
        self.last_end: StepEnd | None = None
        self.last_overdue = ""
        self._last_prune: dt.datetime | None = None
        #: more settings for the session (the s3a connector's, :func:`lagscope.s3a.session_conf`)
        self.spark_conf = dict(spark_conf or {})
        self.spark: Any = None
        self.files_written = 0
        self.consecutive_failures = 0
        #: why the loop gave up (one line), or None
        self.fatal: str | None = None

    def setup(self) -> None:
        """Start the Spark session now: every step runs on it."""
        try:
            self._session()
        except Exception as exc:
            self._failed(exc)

    def _session(self) -> Any:
        from lagscope.analytics.session import build_session

        if self.spark is None:
            self.spark = build_session(self.master, shuffle_partitions=self.shuffle_partitions,
                                       driver_memory=self.driver_memory, log_file=self.log_file,
                                       extra_conf=self.spark_conf)
        return self.spark

    def _drop_session(self) -> None:
        from lagscope.analytics.session import discard_session

        spark, self.spark = self.spark, None
        discard_session(spark)

    def _failed(self, exc: BaseException) -> None:
        """One line on the terminal, the whole trace in the log file, a new session next time."""
        self.consecutive_failures += 1
        self.failures += 1
        cause = _one_line(exc)
        trace.error("analytics step failed", exc_info=exc)
        self._drop_session()
        if self.consecutive_failures >= self.max_failures:
            hint = _hint(cause, self.driver_memory)
            self.fatal = (f"analytics failed {self.consecutive_failures} times in a row: {cause} — {hint} "
                          f"(Spark's log: {self.log_file})")
            log.error("%s", self.fatal)
            self.stopping.set()
        else:
            # the first failure in a row (an engine killed mid-step) is redone now, on a new session
            self.retry_now = self.consecutive_failures == 1
            log.error("analytics: the step failed (%s); retrying with a new Spark session %s(%d/%d; log: %s)",
                      cause, "now " if self.retry_now else "", self.consecutive_failures, self.max_failures,
                      self.log_file)

    def step(self) -> None:
        from lagscope.analytics.job import run_incremental, run_provisional

        if not _exists(self.lake):
            if self.runs == 0:
                log.warning("analytics: the lake %s does not exist (yet): nothing to analyse until the collector "
                            "writes it", _where(self.lake))
            else:
                log.debug("analytics: no lake at %s yet", _where(self.lake))
            return
        now = self.clock()
        held = self.complete_before() if self.complete_before is not None else None
        if held is not None and held < now:
            log.info("analytics: sweeps from %s are held in memory (the lake cannot be written): this step "
                     "stops there", held.isoformat())
        end = self.last_end = full_step_end(
            now, held=held, tails=self.tail_watermarks() if self.tail_watermarks is not None else None,
            tail_wait_s=self.tail_wait_s)
        until = end.until
        # the provisional step's end: the minute in progress, less a sweep that may still be being
        # written; held sweeps stop it too, the tails do not (it is replaced by the full step)
        pre_until = min(held if held is not None and held < now else now,
                        now - dt.timedelta(seconds=self.provisional_settle_s))
        # one line per step in the trace (Spark's log folder), also when a step writes nothing:
        # when each step began and where it stopped (the soak times the recoveries from it)
        trace.info("analytics step began %s: full step until %s%s, provisional until %s", now.isoformat(),
                   until.isoformat(), f" ({end.bound_by})" if end.bound_by else "",
                   pre_until.isoformat() if self.provisional else "-")
        if end.bound_by.startswith("tail"):
            log.debug("analytics: the full step stops at %s (%s)", until.isoformat(),
                      "waited for the tail as long as it may" if end.overdue else f"the {end.bound_by}'s watermark")
        try:
            # `since` matters only for the very first run (no checkpoint yet): how far back to start
            written = run_incremental(self._session(), self.lake, self.results,
                                      settings=self.settings, history_points=self.history_points,
                                      until=until, since=now - dt.timedelta(seconds=self.backfill_s))
            if self.provisional:
                # the minute in progress, at once: replaced by the full step that covers it
                run_provisional(self._session(), self.lake, self.results, settings=self.settings,
                                history_points=self.history_points, until=pre_until)
        except Exception as exc:
            if self.stopping.is_set():
                raise
            self._failed(exc)
            return
        finally:
            # the step's buffers are freed, done or failed: what the allocators keep goes back (lagscope.memory)
            release_unused()
        self.consecutive_failures = 0
        self.files_written += sum(written.values())
        # a full step done without a tail it waited for as long as it may: said in its summary
        overdue = self.last_overdue = end.note(now, self.tail_wait_s) if written else ""
        if written or written.quarantined:
            log.log(logging.WARNING if overdue else logging.INFO, "analytics: %s%s%s",
                    ", ".join(f"{t} {n} file(s)" for t, n in sorted(written.items())),
                    f"; analysed without {len(written.quarantined)} unreadable lake file(s), quarantined: "
                    + ", ".join(str(q.path) for q in written.quarantined) if written.quarantined else "",
                    f"; {overdue}" if overdue else "")
        self.maybe_prune(now)

    def maybe_prune(self, now: dt.datetime) -> None:
        """Apply the results' retention if an hour (``RUN_EVERY_S``) has passed since the last time;
        a failure is logged (the steps go on)."""
        if not self.retention_days:
            return
        if self._last_prune is not None and (now - self._last_prune).total_seconds() < RUN_EVERY_S:
            return
        self._last_prune = now
        try:
            prune(self.results, RESULT_TABLES, days=self.retention_days, now=now, removals=self.removals,
                  label="results")
        except LagscopeError as exc:
            log.error("analytics: retention of the results skipped: %s", exc)
        except Exception:
            log.exception("analytics: retention of the results failed")

    def is_healthy(self) -> bool:
        return self.fatal is None and super().is_healthy()

    def teardown(self) -> None:
        self._drop_session()


#: the analytics' full failure traces (into Spark's log file, see :class:`AnalyticsLoop`)
trace = logging.getLogger("lagscope.analytics.trace")


def _one_line(exc: BaseException) -> str:
    """An exception's cause in one line: the JVM's error class and message, without its stack."""
    text = str(exc)
    for marker in ("OutOfMemoryError", "SparkContext was shut down", "SparkContext has been shutdown",
                   "Cannot call methods on a stopped SparkContext", "Python worker exited unexpectedly",
                   "Answer from Java side is empty", "Connection refused"):
        if marker in text:
            line = next((ln.strip() for ln in text.splitlines() if marker in ln), marker)
            return line[:300]
    java = re.search(r"(?m)^[\s:]*((?:java|org|scala)\.[\w.$]+(?:Exception|Error)(?::[^\n]*)?)$", text)
    if java:
        return java.group(1).strip()[:300]
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return f"{type(exc).__name__}: {first[:300]}"


def _hint(cause: str, driver_memory: str) -> str:
    if "OutOfMemoryError" in cause or "System memory" in cause or "heap" in cause:
        return f"raise analytics.driver_memory (now {driver_memory})"
    if "Python worker" in cause or "MemoryError" in cause:
        return "give the machine's Python workers more memory or raise analytics.shuffle_partitions"
    return "see the log; analytics.master and analytics.driver_memory set where and how Spark runs"


class AlertsLoop(_Periodic):
    """Findings → outbox → webhooks, every ``interval_s``; the outbox survives restarts."""

    name = "alerts"

    def __init__(self, results: Path | Store, config: AlertsConfig, outbox: Path, *, interval_s: float,
                 app_url: str, gone_after_s: float | None = None) -> None:
        super().__init__(interval_s)
        self.results, self.outbox_path = results, outbox
        self.gone_after_s = gone_after_s  # a group's status unwritten this long is gone (None: the default)
        # a secret that cannot be read fails here, before anything starts; links point at app_url
        config.check_secrets()
        self.config, self.app_url = config, app_url
        self._outbox: Any = None
        self._sender: Any = None
        self._reader: Any = None
        self.delivered = 0

    def setup(self) -> None:
        from lagscope.alerts import FindingsReader, Outbox, Sender

        self._outbox = Outbox(self.outbox_path)
        # each evaluation reads only the result files new since the one before (not every table whole),
        # and keeps a finding that ended only as long as it could still be sent
        self._reader = FindingsReader(self.results, hold_ended_s=self.config.lookback_s,
                                      gone_after_s=self.gone_after_s)
        # a route that was down is probed twice an interval: its backlog goes within one of its return
        self._sender = Sender(self._outbox, self.config, probe_s=self.interval_s / 2)
        if not _exists(self.results):
            log.warning("alerts: the results folder %s does not exist (yet): nothing is evaluated until the "
                        "analytics write it", _where(self.results))

    def step(self) -> None:
        from lagscope.alerts import enqueue_findings
        from lagscope.errors import LakeError

        now = dt.datetime.now(dt.UTC)
        try:
            if _exists(self.results):  # missing: said once at start (an evaluation would resolve every alert)
                enqueue_findings(self._outbox, self.config, self._reader.findings(now), now,
                                 app_url=self.app_url)
                self._reader.forget_sent()
        except LakeError as exc:  # a table being rewritten: try next round
            log.warning("alerts: cannot read the results: %s", exc)
        report = self._sender.run(max_seconds=max(1.0, self.interval_s * 0.8), until_empty=True,
                                  sleep=self.stopping.wait)
        self.delivered += report.delivered

    def teardown(self) -> None:
        for closable in (self._sender, self._outbox):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()


class ResultsMetrics:
    """The findings as Prometheus metrics on their own endpoint (when no collector runs here)."""

    name = "results-metrics"

    def __init__(self, results: Path | Store, bind: str, port: int,
                 extra_collectors: list[Any] | None = None, *, gone_after_s: float | None = None) -> None:
        self.results, self.bind, self.port = results, bind, port
        self.extra_collectors = list(extra_collectors or [])
        self.gone_after_s = gone_after_s
        self._server: Any = None
        self._thread: Any = None

    def start(self) -> None:
        from lagscope.analytics.results_metrics import serve

        self._server, self._thread = serve(self.results, host=self.bind, port=self.port,
                                           gone_after_s=self.gone_after_s, extra_collectors=self.extra_collectors)
        log.info("results metrics on http://%s:%s/metrics", self.bind, self._server.server_port)

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def is_healthy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class Runner:
    """Starts components in order, watches them, stops them in reverse."""

    def __init__(self, components: list[Any]) -> None:
        self.components = components
        self.started: list[Any] = []

    def start(self) -> None:
        try:
            for c in self.components:
                log.info("starting %s", c.name)
                c.start()
                self.started.append(c)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        while self.started:
            c = self.started.pop()
            log.info("stopping %s", c.name)
            try:
                c.stop()
            except Exception:
                log.exception("stopping %s failed", c.name)

    def wait(self, stop: threading.Event, poll_s: float = 1.0) -> int:
        """Block until ``stop`` is set (0) or a component dies (1)."""
        while not stop.wait(poll_s):
            dead = [c.name for c in self.started if not c.is_healthy()]
            if dead:
                log.error("%s stopped unexpectedly; stopping everything", ", ".join(dead))
                return 1
        return 0


class Part(StrEnum):
    collector = "collector"
    analytics = "analytics"
    alerts = "alerts"
    burrow_api = "burrow-api"


def build_components(settings: Settings, parts: set[Part], *, results: Path | Store, outbox: Path,
                     master: str | None = None, analytics_interval_s: float | None = None,
                     alerts_interval_s: float = 30.0, results_metrics: bool = True,
                     backfill_s: float | None = None) -> list[Any]:
    """The components for ``parts``, downstream first (see the module docstring).

    ``master``, ``analytics_interval_s``, ``backfill_s``: None takes the ``analytics`` section's
    value (as do the rule thresholds, timeouts and Spark sizing, which have no option here).
    ``results``: a local folder or a :class:`~lagscope.storage.Store`; the lake is the collector's
    (``collector.lake``, opened with the ``storage`` section)."""
    if Part.collector in parts and not settings.clusters:
        raise ConfigError("clusters: at least one cluster is required to collect")
    if Part.alerts in parts and not settings.alerts.routes:
        raise ConfigError("alerts.routes: the alerts part needs at least one route (docs/alerting.md)")
    out: list[Any] = []
    if Part.burrow_api in parts:  # a reader of the lake and the results: downstream of everything
        from lagscope.burrow import build_api

        out.append(build_api(settings, results=_where(results)))
    # what retention removes, from the collector (lake) and the analytics loop (results), on one /metrics
    removals = Removals()
    # a partition or group whose results stopped for the analytics' forget horizon is gone: the metrics
    # stop exporting it and its status alert resolves
    gone_after_s = settings.analytics.rules.forget_horizon_s()
    on_collector: Any = None
    if settings.metrics.enabled and results_metrics:
        if Part.collector in parts:
            from lagscope.analytics.results_metrics import ResultsCollector

            on_collector = ResultsCollector(results, gone_after_s=gone_after_s)
        else:
            from lagscope.collector.metrics import RetentionCollector

            extra = [RetentionCollector(removals.snapshot)] if Part.analytics in parts else []
            out.append(ResultsMetrics(results, settings.metrics.bind, settings.metrics.port, extra,
                                      gone_after_s=gone_after_s))
    if Part.alerts in parts:
        out.append(AlertsLoop(results, settings.alerts, outbox, interval_s=alerts_interval_s, app_url=settings.ui.url,
                              gone_after_s=gone_after_s))
    collector = CollectorComponent(settings, [on_collector] if on_collector is not None else None,
                                   results=results, removals=removals) if Part.collector in parts else None
    if Part.analytics in parts:
        from lagscope.analytics.configured import with_overrides

        acfg = settings.analytics
        rc = [p for c in settings.clusters for p in c.read_committed_groups]
        if acfg.retention:
            removals.watch([c.name for c in settings.clusters], RESULT_TABLES)
        lake_root = open_root(settings.collector.lake, settings.storage)
        out.append(AnalyticsLoop(
            lake_root, results,
            interval_s=acfg.interval_s if analytics_interval_s is None else analytics_interval_s,
            master=acfg.master if master is None else master,
            settings=with_overrides(acfg, extra_read_committed=rc),
            history_points=settings.time_lag.history_points,
            backfill_s=acfg.backfill_s() if backfill_s is None else backfill_s,
            shuffle_partitions=acfg.shuffle_partitions or 4, driver_memory=acfg.driver_memory,
            retention_days=acfg.retention, removals=removals,
            provisional_settle_s=settings.collector.interval_s,
            complete_before=collector.collector.sink.holding_since if collector is not None else None,
            tail_watermarks=collector.collector.tail_watermarks if collector is not None else None,
            spark_conf=session_conf(settings.storage, lake_root, results)))
    if collector is not None:
        out.append(collector)
    return out


def run(
    config: Annotated[Path, typer.Option("--config", "-c", help="lagscope.yaml (docs/configuration.md).",
                                         dir_okay=False)],
    component: Annotated[list[Part] | None, typer.Option(
        "--component", help="Run only these parts (repeatable). Default: collector and analytics, "
                            "plus alerts when alerts.routes is set, plus burrow-api when burrow_api.enabled.")] = None,
    results: Annotated[str | None, typer.Option(
        help="Result tables root: a folder or s3://bucket/prefix. Default: analytics.results, else 'results' "
             "beside the lake.")] = None,
    outbox: Annotated[Path | None, typer.Option(
        help="The alerts' durable outbox (SQLite, always a local file). Default: alerts-outbox.sqlite beside "
             "local results; with results on an object store, in the current folder.")] = None,
    master: Annotated[str | None, typer.Option(
        help="Spark master for the analytics loop. (config: analytics.master)")] = None,
    analytics_interval: Annotated[float | None, typer.Option(
        help="Seconds between analytics runs. (config: analytics.interval_s)")] = None,
    alerts_interval: Annotated[float, typer.Option(help="Seconds between alert evaluations.")] = 30.0,
    analytics_backfill: Annotated[str | None, typer.Option(
        help="First run only (no checkpoint yet): analyse the sweeps of this long before now. "
             "(config: analytics.backfill)")] = None,
    results_metrics: Annotated[bool, typer.Option(
        help="Serve the findings as Prometheus metrics (on the collector's /metrics when it runs here). "
             "Turn off where another process of the same deployment serves them.")] = True,
) -> None:
    """Run lagscope in production: collector, analytics loop, metrics, webhooks; SIGTERM stops it cleanly."""
    settings = settings_or_exit(config)
    backfill_s: float | None = None
    if analytics_backfill is not None:
        try:
            backfill_s = parse_duration(analytics_backfill)
        except ValueError as exc:
            raise ConfigError(f"--analytics-backfill: {exc}") from None
    parts = set(component) if component else {Part.collector, Part.analytics} \
        | ({Part.alerts} if settings.alerts.routes else set()) \
        | ({Part.burrow_api} if settings.burrow_api.enabled else set())
    lake = settings.collector.lake
    results_root = open_root(str(resolve_results_root(results, lake, settings.analytics)), settings.storage)
    outbox_file = outbox or (Path("alerts-outbox.sqlite").absolute() if isinstance(results_root, Store)
                             else results_root.parent / "alerts-outbox.sqlite")
    components = build_components(settings, parts, results=results_root, outbox=outbox_file,
                                  master=master, analytics_interval_s=analytics_interval,
                                  alerts_interval_s=alerts_interval, results_metrics=results_metrics,
                                  backfill_s=backfill_s)
    runner = Runner(components)
    stop = threading.Event()
    with stop_on_signals(stop, lambda name: log.info("received %s; stopping", name)):
        runner.start()
        typer.echo(f"lagscope running: {', '.join(c.name for c in components)} "
                   f"(lake {lake}, results {_where(results_root)}"
                   + (f", alerts outbox {outbox_file}" if Part.alerts in parts else "") + "); SIGTERM stops it",
                   err=True)
        try:
            code = runner.wait(stop)
        finally:
            runner.stop()
    typer.echo("lagscope stopped", err=True)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
