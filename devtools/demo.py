"""``lagscope demo``: the whole product on loopback, with a workload that has something to find.

    lagscope demo                         # own broker; serve until Ctrl-C (on a terminal)
    lagscope demo --bootstrap HOST:PORT   # an existing cluster instead of a local broker
    lagscope demo --duration 0            # exit right after the summary
    lagscope demo --config lagscope.yaml  # its analytics section overrides the demo's thresholds

What runs, all on 127.0.0.1, all stopped again on Ctrl-C/SIGTERM or when the demo ends:

- a local Kafka broker (:class:`lagscope.devtools.broker.LocalBroker`), unless ``--bootstrap``;
- the ``demo`` simulator scenario (growing lag, a SIGKILLed consumer, a stall, a rewind, a
  burst), or the one ``--scenario`` names;
- the collector (sweeps every second + the ``__consumer_offsets`` tail) writing the lake under
  ``<workdir>/lake`` and serving ``/metrics`` with the analytics' findings on the same endpoint;
- the incremental analytics loop (``lagscope run``'s :class:`~lagscope.deploy.run.AnalyticsLoop`)
  writing ``<workdir>/results``, with rule thresholds scaled to a one-minute demo;
- the alerts (``lagscope run``'s :class:`~lagscope.deploy.run.AlertsLoop`, every second) sending the
  findings to a webhook receiver of the demo's own (:class:`~lagscope.devtools.sink.WebhookSink`
  on an ephemeral port, one route with the defaults: generic JSON, ``min_severity: warning``),
  which notes each delivery's arrival time and payload; or to the routes of ``--config``'s
  ``alerts`` section when it has any (then the demo receives nothing and cannot time them);
- the Streamlit app (``lagscope ui``) over that lake and those results.

The scenario is timed to end just before a minute boundary (:func:`scenario_start_delay`); when
its schedule is over (its producers stop), its consumers keep consuming until the
analytics have covered the run up to that boundary (their steps end on minute boundaries), and
only then does the demo stop them (:func:`judged_end`: a scenario's end leaves every group with
lag pending, which a group status rightly calls STOP, and which is the harness, not a fault).
Then it prints what they found: rebalance
windows with cause and duration against the bound, anomalies with their magnitudes, lag in
messages and seconds, next to the faults the scenario injected, and judges itself against them
(:mod:`lagscope.devtools.sim.score`, as the accuracy benchmark does): per injected fault found or
missed, and how late; the findings that match no injected fault, listed as such. Then, per
injected fault, how long its webhook took end to end (:func:`webhook_verdicts`): from the fault's
start in the truth to the arrival at the receiver of the first alert payload that reports it
(same group, the finding kind the fault calls for, as the score matches them), against the target
of 2 sweep intervals + one analytics step interval + 5 s; or why there is none (a fault that calls
for no finding, a finding below the route's ``min_severity``, a fault not found); and the
webhooks that report nothing the scenario called for (:func:`unexplained_webhooks`). Each start
replaces the previous demo's lake, results, runs and alerts (the broker's data is kept).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from lagscope.config import AlertsConfig, AnalyticsConfig, AnalyticsRulesConfig, Settings, load_config, resolve_results
from lagscope.deploy.run import AlertsLoop, AnalyticsLoop, CollectorComponent, Runner
from lagscope.devtools.sim import score
from lagscope.devtools.sim.truth import Fault
from lagscope.errors import ConfigError
from lagscope.signals import stop_on_signals

__all__ = ["DemoOptions", "DemoResult", "WebhookVerdict", "demo_analytics_config", "judge", "register",
           "run_demo", "run_full_demo", "verdict_lines", "webhook_lines", "webhook_target_s", "webhook_verdicts"]

log = logging.getLogger(__name__)

BIND = "127.0.0.1"
#: the analytics' step ends this long before "now", so the last sweeps before a minute
#: boundary are in the lake when the step for that minute runs
SETTLE_S = 3.0


def say(text: str = "") -> None:
    print(text, flush=True)


class _Held(logging.Filter):
    """Holds a handler's records back while the summary prints (the collector and analytics
    keep running, and a log line in the middle of the summary's lines reads as part of it)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.records.append(record)
        return False


@contextlib.contextmanager
def held_logs() -> Iterator[None]:
    """The root logger's console records are held during the block and written after it."""
    held = [(h, _Held()) for h in logging.getLogger().handlers if isinstance(h, logging.StreamHandler)
            and getattr(h, "stream", None) in (sys.stderr, sys.stdout)]
    for h, f in held:
        h.addFilter(f)
    try:
        yield
    finally:
        for h, f in held:
            h.removeFilter(f)
            for r in f.records:
                h.handle(r)


#: rule thresholds for a one-minute demo (the defaults suit hours of production traffic):
#: committed offsets that stand still for 8 s while there is lag are a stall, no commits for
#: 15 s a stop, lag growing for one minute lag growth
DEMO_RULES: dict[str, Any] = {"stall_after_s": 8.0, "stop_after_s": 15.0, "gap_min_s": 6.0, "gap_mad_floor_s": 0.5,
                              "growth_min_minutes": 1, "warn_lag_s": 10.0, "storm_window_s": 120.0}
#: the demo's consumers use a 10 s session timeout; its steps run every 3 s on two cores
DEMO_ANALYTICS: dict[str, Any] = {"session_timeout_s": 10.0, "master": "local[2]", "interval_s": 3.0}
#: seconds between the demo's alert evaluations (``lagscope run``'s default is 30)
ALERTS_INTERVAL_S = 1.0
#: the demo's own route to its receiver: every other setting is a route's default (generic JSON,
#: min_severity warning), as a route written with only a name and a URL
RECEIVER_ROUTE = "demo-receiver"


def demo_analytics_config(config: AnalyticsConfig | None = None) -> AnalyticsConfig:
    """The demo's analytics settings: :data:`DEMO_ANALYTICS` and :data:`DEMO_RULES`, then what
    ``config`` (a ``--config`` file's analytics section) sets explicitly."""
    given: dict[str, Any] = {}
    rules_given: dict[str, Any] = {}
    if config is not None:
        given = config.model_dump(include=config.model_fields_set - {"rules"})
        rules_given = config.rules.model_dump(include=config.rules.model_fields_set)
    return AnalyticsConfig.model_validate({**DEMO_ANALYTICS, **given, "rules": {**DEMO_RULES, **rules_given}})


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((BIND, 0))
        return int(s.getsockname()[1])


class DemoOptions:
    """What ``lagscope demo`` was asked for."""

    def __init__(self, workdir: Path, *, bootstrap: str | None = None, scenario: str = "demo",
                 metrics_port: int = 0, ui_port: int = 0, duration: float | None = None,
                 master: str = "local[2]", analytics_interval_s: float = 3.0, sweep_interval_s: float = 1.0,
                 ui: bool = True, analytics: AnalyticsConfig | None = None, alerts: AlertsConfig | None = None,
                 seed: int | None = None) -> None:
        self.workdir, self.bootstrap, self.scenario = workdir, bootstrap, scenario
        self.metrics_port, self.ui_port, self.duration = metrics_port, ui_port, duration
        self.master, self.analytics_interval_s, self.sweep_interval_s = master, analytics_interval_s, sweep_interval_s
        self.ui = ui
        #: the --config file's analytics section (its explicit settings override the demo's)
        self.analytics = analytics
        #: the --config file's alerts section when it has routes: the alerts go there, and the demo
        #: runs no receiver of its own (None: the demo's receiver)
        self.alerts = alerts if alerts is not None and alerts.routes else None
        #: the scenario's seed (None: the scenario's own)
        self.seed = seed


class DemoResult:
    """How a demo went: its exit ``code``, and per injected fault its webhook's verdict (None
    when the run ended before its summary or the alerts went to the user's own routes)."""

    def __init__(self, code: int, webhooks: list[WebhookVerdict] | None = None) -> None:
        self.code, self.webhooks = code, webhooks


class _Streamlit:
    """``lagscope ui`` as a child process in its own session (a terminal's Ctrl-C reaches the
    demo, which stops it in order)."""

    name = "app"

    def __init__(self, lake: Path, results: Path, port: int, log_file: Path) -> None:
        self.lake, self.results, self.port, self.log_file = lake, results, port, log_file
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{BIND}:{self.port}/"

    def start(self) -> None:
        from lagscope.app.cli import streamlit_command

        argv, env = streamlit_command(self.lake, self.results, self.port, BIND)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as out:
            self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            log.warning("the app did not stop on SIGTERM within 15s; killing it")
            self.proc.kill()
            self.proc.wait(5)

    def is_healthy(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class DemoAnalytics(AnalyticsLoop):  # type: ignore[misc]
    """The analytics loop of ``lagscope run`` with two demo twists: no steps over the minutes
    before the scenario (:meth:`begin`; the Spark session starts early, the first step waits
    until a minute of the scenario is over, so it has no empty minutes to grind through), and
    :meth:`stop` does not wait out a step in progress: its Spark jobs are cancelled (the demo's
    results are thrown away at the next start)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.begun = threading.Event()
        self._after = dt.datetime.max.replace(tzinfo=dt.UTC)

    def begin(self, after: dt.datetime) -> None:
        """Run steps from the first one whose range (it ends on a minute boundary) goes past ``after``."""
        self._after = after
        self.begun.set()

    def step(self) -> None:
        if not self.begun.is_set() or self.stopping.is_set():
            return
        if self.clock().replace(second=0, microsecond=0) <= self._after:
            return
        try:
            super().step()
        except Exception:
            if not self.stopping.is_set():
                raise
            log.info("analytics: the step in progress was cancelled (stopping)")

    def stop(self, timeout: float = 60.0) -> None:
        self.stopping.set()
        deadline = time.monotonic() + timeout
        thread = self._thread
        while thread is not None and thread.is_alive() and time.monotonic() < deadline:
            spark = self.spark
            if spark is not None:
                try:
                    spark.sparkContext.cancelAllJobs()
                except Exception:
                    log.debug("cancelling the analytics' Spark jobs failed", exc_info=True)
            thread.join(0.5)
        super().stop(max(1.0, deadline - time.monotonic()))


class DemoAlerts(AlertsLoop):  # type: ignore[misc]
    """The alerts loop of ``lagscope run``, noting when the last evaluation began that left nothing
    pending in the outbox (:attr:`settled_from`): every finding the results held then has been
    delivered (or given up on), so the summary can wait for the analytics' last step's alerts."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settled_from: dt.datetime | None = None

    def step(self) -> None:
        began = dt.datetime.now(dt.UTC)
        super().step()
        if self._outbox is not None and self._outbox.next_due_at() is None:
            self.settled_from = began


def scenario_start_delay(now: dt.datetime, duration_s: float, lead_s: float = 8.0) -> float:
    """Seconds to wait before starting a scenario of ``duration_s`` so that its schedule ends
    ``lead_s + 5`` seconds before a minute boundary: the analytics' step for that minute (they
    end on minute boundaries) then covers the whole schedule a few seconds after it ends, and the
    wait overlaps the Spark session's start-up instead of following the scenario. A boundary
    then also falls before the first fault of a one-minute scenario, so its full step leaves a
    checkpoint and the provisional steps publish the faults as they come."""
    end = now.timestamp() + duration_s
    into = end % 60.0
    target = 60.0 - lead_s - 5.0
    return (target - into) % 60.0


#: how long the demo's run may go on past its scenario's schedule: its members keep consuming
#: until the analytics have covered the minute the schedule ends in, then the demo stops the run
#: (:func:`judged_end`)
LINGER_S = 300.0


def judged_end(t0: float, schedule_s: float) -> dt.datetime:
    """The end of the range the summary judges for a run from ``t0`` (epoch s) whose scenario's
    schedule is ``schedule_s`` long: the first minute boundary at or after the schedule's end.
    The run's members go on consuming to that boundary and past it (:data:`LINGER_S`): a
    scenario's end stops its consumers, every group left with lag pending (a group status STOP,
    rightly), which is the harness, not a fault, and must not be in the judged minutes."""
    return _minute_ceil(dt.datetime.fromtimestamp(t0 + schedule_s, dt.UTC))


def _announce_stop(stop: threading.Event) -> Callable[[str], None]:
    def announce(name: str) -> None:
        if not stop.is_set():
            print(f"\n{name}: stopping the demo …", file=sys.stderr, flush=True)
    return announce


def _minute_ceil(t: dt.datetime) -> dt.datetime:
    floor = t.replace(second=0, microsecond=0)
    return floor if floor == t else floor + dt.timedelta(minutes=1)


def _prepare(workdir: Path) -> tuple[Path, Path, Path, Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    lake, runs, alerts = workdir / "lake", workdir / "runs", workdir / "alerts"
    results = resolve_results(None, lake)  # beside the lake, where `lagscope ui --lake` looks
    for folder in (lake, results, runs, alerts):  # the previous demo's data: the analytics start afresh
        if folder.exists():
            shutil.rmtree(folder)
    return lake, results, runs, alerts


def webhook_target_s(sweep_interval_s: float, analytics_interval_s: float) -> float:
    """The end-to-end target of a fault's webhook (issue 25): 2 sweep intervals + one analytics
    step interval + 5 s."""
    return 2 * sweep_interval_s + analytics_interval_s + 5.0


def run_full_demo(opts: DemoOptions, stop: threading.Event | None = None) -> int:
    """The demo's whole flow (see the module docstring). Returns the exit code."""
    return run_demo(opts, stop).code


def run_demo(opts: DemoOptions, stop: threading.Event | None = None) -> DemoResult:
    """The demo's whole flow (see the module docstring): its exit code and the webhooks' verdicts."""
    from lagscope.analytics.results_metrics import ResultsCollector
    from lagscope.devtools.broker import LocalBroker
    from lagscope.devtools.sim.runner import ScenarioRun, load_scenario, plan_names, start_scenario
    from lagscope.devtools.sink import WebhookSink

    stop = stop or threading.Event()
    sc = load_scenario(opts.scenario)  # a bad --scenario fails before anything starts
    lake, results, runs, alerts_dir = _prepare(opts.workdir)
    broker: LocalBroker | None = None
    runner: Runner | None = None
    app: _Streamlit | None = None
    run: ScenarioRun | None = None
    receiver: WebhookSink | None = None
    code = 0
    verdicts: list[WebhookVerdict] | None = None
    try:
        bootstrap = opts.bootstrap
        if bootstrap is None:
            broker = LocalBroker(opts.workdir / "broker", offsets_partitions=1)
            say("starting a local Kafka broker …")
            broker.start()
            bootstrap = broker.bootstrap
        if stop.is_set():
            return DemoResult(0)
        run_id = uuid.uuid4().hex[:8]
        names = plan_names(sc, run_id)
        settings = Settings.model_validate({
            "clusters": [{"name": "demo", "bootstrap_servers": bootstrap,
                          "groups": {"include": [re.escape(names.prefix) + "-.*"]},
                          "consumer_offsets_tail": {"enabled": True, "start": "latest"}}],
            "collector": {"interval_s": opts.sweep_interval_s, "lake": str(lake), "compaction": {"enabled": False}},
            "metrics": {"enabled": True, "bind": BIND, "port": opts.metrics_port},
        })
        if opts.ui:
            app = _Streamlit(lake, results, opts.ui_port or free_port(), opts.workdir / "logs" / "app.log")
        alerts_config = opts.alerts
        if alerts_config is None:  # the receiver before the sender that posts to it
            receiver = WebhookSink(alerts_dir / "webhooks.jsonl", bind=BIND, port=0).start()
            alerts_config = AlertsConfig.model_validate(
                {"routes": [{"name": RECEIVER_ROUTE, "url": f"{receiver.url}/{RECEIVER_ROUTE}"}]})
        analytics = DemoAnalytics(lake, results, interval_s=opts.analytics_interval_s, master=opts.master,
                                  settings=demo_analytics_config(opts.analytics), backfill_s=600.0,
                                  shuffle_partitions=2,
                                  log_file=opts.workdir / "logs" / "spark.log",
                                  clock=lambda: dt.datetime.now(dt.UTC) - dt.timedelta(seconds=SETTLE_S))
        alerts = DemoAlerts(results, alerts_config, alerts_dir / "outbox.sqlite", interval_s=ALERTS_INTERVAL_S,
                            app_url=app.url if app is not None else settings.ui.url)
        collector = CollectorComponent(settings, [ResultsCollector(results, refresh_s=2.0)])
        runner = Runner([alerts, analytics, collector])  # downstream first, as in `lagscope run`
        runner.start()
        if app is not None:
            app.start()
        server = collector.collector.metrics_server
        say("")
        say("lagscope demo is running (everything on 127.0.0.1):")
        say(f"  Kafka            {bootstrap}" + (f"  (log: {broker.log_file})" if broker else ""))
        say(f"  metrics          {server.url}  (kafka_consumergroup_lag…, lagscope_* findings)")
        if app is not None:
            say(f"  app              {app.url}  (Streamlit drill-down; log: {app.log_file})")
        if receiver is not None:
            say(f"  webhooks         {receiver.url}/received  (the alerts' deliveries to the demo's receiver; "
                f"kept in {receiver.out})")
        else:
            say(f"  webhooks         to your routes ({', '.join(r.name for r in alerts_config.routes)}, "
                "from --config's alerts section)")
        say(f"  lake             {lake}")
        say(f"  results          {results}")
        say(f"  scenario         {sc.name} ({sc.duration:.0f}s), groups {names.prefix}-*: {sc.description.strip()}")
        say("Ctrl-C stops everything.")
        say("")
        delay = scenario_start_delay(dt.datetime.now(dt.UTC), sc.duration)
        if delay > 1.0:
            say(f"starting the analytics (Spark); the scenario starts in {delay:.0f}s, timed to end just "
                "before a minute boundary, where the analytics' steps end …")
            if stop.wait(delay):
                return DemoResult(0)
        analytics.begin(dt.datetime.now(dt.UTC))
        # the members linger past the schedule (still consuming) until the analytics have
        # covered the judged minutes; the demo then stops the run (judged_end)
        run = start_scenario(sc, bootstrap, runs / sc.name, run_id=run_id, seed=opts.seed, linger_s=LINGER_S)
        say(f"scenario {sc.name} started ({sc.duration:.0f}s) …")
        interrupted = False
        while not run.done() and (run.t0 is None or time.time() < run.t0 + sc.duration):
            if stop.wait(0.5):
                interrupted = True
                break
            dead = [c.name for c in [*runner.started, *([app] if app else [])] if not c.is_healthy()]
            if dead:
                log.error("%s stopped unexpectedly; stopping the demo", ", ".join(dead))
                code = 1
                break
        end: dt.datetime | None = None
        if run.t0 is not None and not interrupted and code == 0:
            if run.done():
                run.wait()  # a run that ended before its schedule: its error, if it failed
            end = judged_end(run.t0, sc.duration)
            # the summary judges the scenario's minutes: no provisional step past its end (the
            # full step that covers it deletes those before it, and hides any in flight)
            analytics.provisional = False
            _wait_for_analytics(results, end, analytics, stop)
        run.stop()
        if interrupted or stop.is_set():
            say("interrupted: recording the scenario's end state …")
        result = run.wait()
        if end is None:  # interrupted, or a component died: what ran of the schedule
            end = dt.datetime.fromtimestamp(min(result.t0 + sc.duration, time.time()), dt.UTC)
        if not stop.is_set() and code == 0:
            _wait_for_alerts(alerts, dt.datetime.now(dt.UTC), stop)
        if analytics.fatal is not None:
            say(f"the analytics could not run: {analytics.fatal}")
            code = 1
        webhooks = None
        if receiver is not None:
            webhooks = WebhookCheck(receiver.records(), min_severity=alerts_config.routes[0].min_severity,
                                    target_s=webhook_target_s(opts.sweep_interval_s, opts.analytics_interval_s))
        with held_logs():
            verdicts = print_summary(results, prefix=names.prefix,
                                     start=dt.datetime.fromtimestamp(result.t0, dt.UTC), end=end,
                                     truth=result.truth_path, t0=result.t0,
                                     rules=demo_analytics_config(opts.analytics).rules,
                                     tolerance_s=2 * opts.sweep_interval_s + 1, webhooks=webhooks,
                                     routes=[r.name for r in alerts_config.routes])
        if code == 0 and not stop.is_set():
            if opts.duration is None and sys.stdin.isatty() and sys.stdout.isatty():
                say("still serving the URLs above; Ctrl-C stops everything.")
                stop.wait()
            elif opts.duration:
                say(f"serving the URLs above for {opts.duration:g}s more (Ctrl-C stops everything) …")
                stop.wait(opts.duration)
        return DemoResult(code, verdicts)
    finally:
        say("stopping: app, collector, analytics, alerts" + (", webhook receiver" if receiver else "")
            + (", broker" if broker else "") + " …")
        if run is not None and not run.done():
            run.stop()
            run.wait()
        if app is not None:
            app.stop()
        if runner is not None:
            runner.stop()
        if receiver is not None:
            receiver.stop()
        if broker is not None:
            broker.stop()
        say("demo stopped.")


def _wait_for_alerts(alerts: DemoAlerts, since: dt.datetime, stop: threading.Event, timeout_s: float = 30.0) -> None:
    """Block until an alert evaluation that began at or after ``since`` has left nothing pending
    (the findings of the analytics' last step are delivered), for at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not stop.wait(0.2):
        if alerts.settled_from is not None and alerts.settled_from >= since:
            return
        if time.monotonic() > deadline or not alerts.is_healthy():
            say("the alerts did not deliver everything in time; the summary shows what arrived so far")
            return


def _wait_for_analytics(results: Path, until: dt.datetime, analytics: AnalyticsLoop, stop: threading.Event) -> None:
    """Block until the analytics' checkpoint reaches ``until`` (they ran over the whole scenario)."""
    from lagscope.analytics.io import read_checkpoint

    say(f"scenario over; its consumers keep consuming until the analytics have covered it up to "
        f"{until:%H:%M:%S} UTC (steps end on minute boundaries) …")
    deadline = time.monotonic() + max(0.0, (until - dt.datetime.now(dt.UTC)).total_seconds()) + 300.0
    while not stop.wait(1.0):
        cp = read_checkpoint(results)
        if cp is not None and dt.datetime.fromisoformat(cp["watermark"]) >= until:
            return
        if int(time.monotonic()) % 30 == 0:
            say(f"  … the analytics' last step ended at {cp['watermark'] if cp else 'none yet'}")
        if time.monotonic() > deadline or not analytics.is_healthy():
            say("the analytics did not finish in time; the summary shows what they wrote so far")
            return


# --------------------------------------------------------------------------------------------
# the summary
# --------------------------------------------------------------------------------------------

def _read(results: Path, table: str) -> list[dict[str, Any]]:
    """The table's rows (of rebalances and anomalies, the current ones); none when unreadable."""
    from lagscope import results as result_tables
    from lagscope.errors import LakeError

    try:
        if table in result_tables.EVENT_IDENTITY:
            return result_tables.current_events(results, table)
        rows: list[dict[str, Any]] = result_tables.read(results, table).to_pylist()
        return rows
    except LakeError as exc:
        log.warning("cannot read %s: %s", table, exc)
        return []


def _fmt_s(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "?"
    return f"{v:.1f}s"


def summary_lines(results: Path, *, prefix: str, start: dt.datetime, end: dt.datetime) -> list[str]:
    """What the analytics found for the groups ``prefix-*`` that began in ``[start, end)``."""
    short = prefix + "-"
    lines: list[str] = []
    mine = _mine(prefix, start, end)
    windows = _read(results, "rebalances")
    reb = sorted((r for r in windows if mine(r)), key=lambda r: r["start_ts"])
    lines.append(f"rebalance windows: {len(reb)}")
    for r in reb:
        dur = r.get("duration_s")
        bound = r.get("bound_s")
        ratio = r.get("observed_over_bound")
        # the ratio measures what the bound bounds: for a timed-out member its whole outage (last
        # progress → settled), which can be much longer than the rebalance proper
        observed = ratio * bound if ratio is not None and bound is not None else None
        if observed is not None and dur is not None and abs(observed - dur) >= 0.05:
            against = f"; outage {_fmt_s(observed)}, {ratio:.2f}x its bound {_fmt_s(bound)}"
        elif ratio is not None:
            against = f" ({ratio:.2f}x its bound {_fmt_s(bound)})"
        else:
            against = f" (bound {_fmt_s(bound)})"
        state = f"took {_fmt_s(dur)}{against}" if dur is not None else "still open"
        extra = []
        if r.get("partitions_moved") is not None:
            extra.append(f"{r['partitions_moved']} partitions moved")
        if r.get("messages_accumulated") is not None:
            extra.append(f"{r['messages_accumulated']} messages of lag accumulated")
        lines.append(f"  {r['group_id'].removeprefix(short):<10} cause {r.get('cause') or 'unknown':<16} "
                     f"at {r['start_ts']:%H:%M:%S}: {state}" + (f"; {', '.join(extra)}" if extra else "")
                     + f" [{r.get('source')}]")
    anom = sorted((a for a in _read(results, "anomalies") if mine(a)),
                  key=lambda a: (a["kind"], a["group_id"], a["start_ts"]))
    by_kind: dict[str, int] = {}
    for a in anom:
        by_kind[a["kind"]] = by_kind.get(a["kind"], 0) + 1
    lines.append(f"anomalies: {len(anom)}" + (f" ({', '.join(f'{k} {n}' for k, n in sorted(by_kind.items()))})"
                                               if anom else ""))
    for a in anom:
        where = a["group_id"].removeprefix(short)
        if a.get("topic"):
            where += f" on {str(a['topic']).removeprefix(short)}" + (
                f"/{a['partition']}" if a.get("partition") is not None else "")
        mag = a.get("magnitude")
        unit = a.get("unit") or ""
        if a["kind"] == "rewind" and mag is not None:
            what = f"{mag:.0f} messages reprocessed"
        elif mag is not None:
            what = f"{mag:.1f} {unit}".rstrip()
        else:
            what = ""
        state = "open" if a.get("end_ts") is None else f"ended {a['end_ts']:%H:%M:%S}"
        lines.append(f"  {a['kind']:<12} {where}: {what} (from {a['start_ts']:%H:%M:%S}, {state}, {a['severity']})")
    trends = [t for t in _read(results, "lag_trends")
              if str(t["group_id"]).startswith(short) and t.get("topic") is None and t.get("partition") is None]
    last: dict[str, dict[str, Any]] = {}
    for t in trends:
        cur = last.get(t["group_id"])
        if cur is None or t["window_start"] > cur["window_start"]:
            last[t["group_id"]] = t
    lines.append("lag at the end (group level, last analysed minute):")
    for g in sorted(last):
        t = last[g]
        secs = t.get("lag_seconds")
        sec_txt = "" if secs is None else (f", {'at least ' if t.get('lag_seconds_is_lower_bound') else ''}"
                                           f"{secs:.1f}s behind")
        lines.append(f"  {g.removeprefix(short):<10} {t.get('lag_last')} messages{sec_txt}")
    return lines


def _mine(prefix: str, start: dt.datetime, end: dt.datetime) -> Callable[[Mapping[str, Any]], bool]:
    """Rows of the groups ``prefix-*`` that began in ``[start − 5 s, end)``."""
    short = prefix + "-"

    def mine(row: Mapping[str, Any]) -> bool:
        s = row.get("start_ts")
        return (str(row["group_id"]).startswith(short) and s is not None
                and start - dt.timedelta(seconds=5) <= s < end)

    return mine


def judge(results: Path, *, prefix: str, start: dt.datetime, end: dt.datetime, truth: Path,
          rules: AnalyticsRulesConfig, tolerance_s: float) -> tuple[score.RunScore, list[Fault]]:
    """The demo's findings (anomalies and rebalance windows of its groups, as the summary lists
    them) scored against its truth: (the score, the injected faults)."""
    from lagscope.devtools.sim import truth as _truth

    mine = _mine(prefix, start, end)
    findings = ([score.Finding.from_anomaly(a) for a in _read(results, "anomalies") if mine(a)]
                + [score.Finding.from_rebalance(r) for r in _read(results, "rebalances") if mine(r)])
    ti = _truth.TruthIndex(_truth.load(truth))
    # the run went on past the judged range (its consumers lingering, judged_end): what the truth
    # calls for is judged up to its end
    scored = score.score_run(score.expected_findings(ti, rules, until=end.timestamp(), gap_until=end.timestamp()),
                             findings, tolerance_s=tolerance_s,
                             real=score.real_events(ti, rules=rules, gap_until=end.timestamp()))
    return scored, ti.faults()


def _where(f: score.Finding, short: str) -> str:
    """A finding's group (and partition) as the summary names them, ``short`` (``prefix-``) cut."""
    return f.group.removeprefix(short) + (f" on {str(f.topic).removeprefix(short)}/{f.partition}"
                                          if f.partition is not None else "")


def verdict_lines(scored: score.RunScore, faults: list[Fault], *, prefix: str, t0: float) -> list[str]:
    """Per injected fault: found (by what, how late) or missed; what the traffic itself called
    for; then every finding that matches no injected fault."""
    short = prefix + "-"

    def who(group: str, member: str = "") -> str:
        return group.removeprefix(short) + (f"/{member}" if member else "")

    lines = []
    for f, ms in score.fault_verdicts(scored, faults):
        head = f"  {f.kind:<12} {who(f.group, f.member):<18} at {f.start - t0:5.1f}s: "
        if not ms:
            lines.append(head + "calls for no finding")
            continue
        parts = []
        for m in ms:
            if m.finding is None:
                parts.append(f"MISSED (no {m.expected.kind})")
            else:
                parts.append(f"found: {m.finding.kind} {_where(m.finding, short)}, {m.delay:.1f}s late")
        lines.append(head + "; ".join(parts))
    traffic = [m for m in scored.matches if m.expected.fault is None]
    for m in traffic:
        where = ""
        if len(m.expected.partitions) == 1:
            topic, part = m.expected.partitions[0]
            where = f" on {topic.removeprefix(short)}/{part}"
        state = "MISSED" if m.finding is None else f"found, {m.delay:.1f}s late"
        lines.append(f"  {m.expected.kind:<12} {who(m.expected.group) + where:<18} at {m.expected.start - t0:5.1f}s: "
                     f"{state} (the traffic's own, no injected fault)")
    lines.append(f"findings that match no injected fault: {len(scored.unmatched)}")
    for u in scored.unmatched:
        lines.append(f"  {u.kind:<12} {_where(u, short)} at {u.start - t0:.1f}s ({u.severity})")
    if scored.informational:
        kinds = sorted({u.kind for u in scored.informational})
        lines.append(f"informational, not alarms: {len(scored.informational)} ({', '.join(kinds)}: "
                     "how the consumers work, no fault)")
    return lines


class WebhookCheck:
    """What the summary needs to time the webhooks: the receiver's ``records`` (each with its
    ``received_ts`` and ``payload``, :class:`~lagscope.devtools.sink.WebhookSink`), the route's
    ``min_severity`` and the target (s)."""

    def __init__(self, records: list[dict[str, Any]], *, min_severity: str, target_s: float) -> None:
        self.records, self.min_severity, self.target_s = records, min_severity, target_s


@dataclass(frozen=True)
class WebhookVerdict:
    """One injected fault's webhook: ``delay_s`` from the fault's start (the truth's) to the
    arrival of the first payload that reports it (None: none arrived), ``alert`` that payload's
    kind and severity; ``due`` whether a webhook was due (a payload arrived, or an alert finding
    reports the fault at or above the route's ``min_severity``); ``reason`` why there is none."""

    fault: Fault
    target_s: float
    delay_s: float | None = None
    alert: str = ""
    due: bool = False
    reason: str = ""

    @property
    def passed(self) -> bool | None:
        """Delivered within the target; False when late or due and not delivered; None when no
        webhook was due."""
        if not self.due:
            return None
        return self.delay_s is not None and self.delay_s <= self.target_s

    @property
    def minute_wait_s(self) -> float:
        """Seconds from the fault's start to the end of its minute: the analytics analyse whole
        minutes, so no finding of it is published before then."""
        return (-self.fault.start) % 60.0


def _payload_finding(payload: Mapping[str, Any]) -> score.Finding | None:
    """A generic payload (``lagscope.alert/v1``) as a finding to match; None for another format."""
    try:
        ends = payload.get("ends_at")
        return score.Finding(str(payload["kind"]), str(payload["group"]), payload.get("topic"),
                             payload.get("partition"), dt.datetime.fromisoformat(payload["starts_at"]).timestamp(),
                             dt.datetime.fromisoformat(ends).timestamp() if ends else None,
                             str(payload.get("severity") or ""))
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def webhook_verdicts(scored: score.RunScore, faults: list[Fault], received: list[dict[str, Any]],
                     alert_findings: list[score.Finding], *, min_severity: str, target_s: float,
                     tolerance_s: float, own_s: Mapping[str, float] | None = None) -> list[WebhookVerdict]:
    """Per injected fault, its webhook's verdict (:class:`WebhookVerdict`).

    A payload reports a fault when, read as a finding (kind, group, topic, partition, start, end),
    it matches one of the findings the fault calls for as :func:`score.matches` decides (the same
    kind and group, a partition the fault names, overlapping times): a stall's payload is a stall
    of that group on the member's partitions, a crash's a rebalance window of its group. Its delay
    runs from the fault's start to the first such payload's ``received_ts``. Without one, the
    reason comes from ``alert_findings`` (the alerts' findings at the end, with their severities:
    a rebalance window is ``info`` until it outlasts its bound). A delivered webhook's target is
    ``target_s`` + the rule's own threshold for the kind it reports (``own_s``,
    :func:`score.own_thresholds`: no stall can be reported before the partition has made no
    progress for ``stall_after_s``), as the accuracy benchmark's detection delay budget."""
    from lagscope.alerts.findings import severity_rank

    arrivals = sorted(((float(r["received_ts"]), f) for r in received
                       if (f := _payload_finding(r.get("payload") or {})) is not None), key=lambda a: a[0])
    out = []
    for fault, ms in score.fault_verdicts(scored, faults):
        if not ms:
            out.append(WebhookVerdict(fault, target_s, reason="calls for no finding"))
            continue

        def reports(f: score.Finding, ms: list[score.Match] = ms) -> bool:
            return any(score.matches(m.expected, f, tolerance_s) for m in ms)

        first = next(((ts, f) for ts, f in arrivals if reports(f)), None)
        if first is not None:
            ts, f = first
            out.append(WebhookVerdict(fault, target_s + (own_s or {}).get(f.kind, 0.0), delay_s=ts - fault.start,
                                      alert=f"{f.kind} {f.severity}", due=True))
            continue
        reporting = [f for f in alert_findings if reports(f)]
        loud = [f for f in reporting if severity_rank(f.severity) >= severity_rank(min_severity)]
        if loud:
            out.append(WebhookVerdict(fault, target_s, due=True, alert=f"{loud[0].kind} {loud[0].severity}",
                                      reason=f"NOT DELIVERED: a {loud[0].kind} {loud[0].severity} finding reports it"))
        elif reporting:
            kinds = " or ".join(sorted({f"{f.kind} {f.severity}" for f in reporting}))
            out.append(WebhookVerdict(fault, target_s, reason=f"its finding ({kinds}) is below the route's "
                                      f"min_severity {min_severity}: not alerted, by design"))
        elif all(m.finding is None for m in ms):
            out.append(WebhookVerdict(fault, target_s, reason="the fault was not found (MISSED above)"))
        else:
            out.append(WebhookVerdict(fault, target_s, reason="no alert finding reports it"))
    return out


#: a group status payload read as the finding kinds it reports (OK and IDLE fire nothing): a
#: partition without progress (STALL, STOP) is a stall's, a stop's or a membership fault's
_STATUS_KINDS = {"STALL": ("stall", "stop", "rebalance"), "STOP": ("stop", "stall", "rebalance"),
                 "REWIND": ("rewind",), "ERR": ("retention_loss", "skip"), "WARN": ("lag_growth",)}


def unexplained_webhooks(scored: score.RunScore, received: list[dict[str, Any]], *, prefix: str,
                         tolerance_s: float, until: float = math.inf) -> list[tuple[score.Finding, str]]:
    """The firing payloads of the run's groups (``prefix-*``) that report nothing the run called
    for: no finding an injected fault or the traffic itself calls for (a lag growth) matches them
    as :func:`score.matches` decides, and they overlap no informational finding of their kind and
    group (a formation's rebalance window, a starved partition). A group status payload is a
    minute's evaluation: it reports a finding of a kind :data:`_STATUS_KINDS` gives its value
    whose interval reaches into the minute before its evaluation (within ``tolerance_s``). Only
    payloads of findings that start before ``until`` (the judged range's end: later ones are of
    minutes the truth is not judged over). Each (key, start) once, in arrival order, with its
    ``detail``."""
    expected = [m.expected for m in scored.matches]
    info = [score.Expected(f.kind, f.group, (), f.start, math.inf if f.end is None else f.end)
            for f in scored.informational]
    out, seen = [], set()
    for r in sorted(received, key=lambda r: float(r.get("received_ts") or 0)):
        payload = r.get("payload") or {}
        f = _payload_finding(payload)
        if (f is None or payload.get("status") != "firing" or not f.group.startswith(prefix + "-")
                or f.start >= until):
            continue
        key = (payload.get("key"), f.start)
        if key in seen:
            continue
        seen.add(key)
        if f.kind == "status":
            kinds = _STATUS_KINDS.get(str((payload.get("labels") or {}).get("status")), ())
            if any(e.kind in kinds and e.group == f.group and e.start <= f.start + tolerance_s
                   and e.end >= f.start - 60.0 - tolerance_s for e in expected):
                continue
        elif any(score.matches(e, f, tolerance_s) for e in [*expected, *info]):
            continue
        out.append((f, str(payload.get("detail") or "")))
    return out


def webhook_lines(verdicts: list[WebhookVerdict], *, prefix: str, t0: float) -> list[str]:
    """Per injected fault: its webhook's delay against the target, or why there is none."""
    short = prefix + "-"
    lines = []
    for v in verdicts:
        f = v.fault
        head = f"  {f.kind:<12} {f.group.removeprefix(short) + '/' + f.member:<18} at {f.start - t0:5.1f}s: "
        if v.delay_s is None:
            lines.append(head + ("" if v.due else "no webhook: ") + v.reason
                         + (f", target {v.target_s:.1f}s: FAIL" if v.due else ""))
            continue
        past = v.delay_s - v.minute_wait_s
        when = f"{past:.1f}s after" if past >= 0 else f"{-past:.1f}s before"
        lines.append(head + f"delivered after {v.delay_s:.1f}s ({v.alert}; {when} the fault's minute ended), "
                     f"target {v.target_s:.1f}s: " + ("PASS" if v.passed else "FAIL"))
    return lines


def _alert_findings(results: Path) -> list[score.Finding]:
    """The alerts' findings in the results now, as findings to match (none when unreadable)."""
    from lagscope.alerts.findings import findings_from_results
    from lagscope.errors import LakeError

    try:
        found = findings_from_results(results, dt.datetime.now(dt.UTC))
    except LakeError as exc:
        log.warning("cannot read the alerts' findings: %s", exc)
        return []
    return [score.Finding(f.kind, f.group, f.topic, f.partition, f.starts_at.timestamp(),
                          f.ends_at.timestamp() if f.ends_at else None, f.severity) for f in found]


def print_summary(results: Path, *, prefix: str, start: dt.datetime, end: dt.datetime,
                  truth: Path, t0: float, rules: AnalyticsRulesConfig | None = None,
                  tolerance_s: float = 3.0, webhooks: WebhookCheck | None = None,
                  routes: list[str] | None = None) -> list[WebhookVerdict] | None:
    """Print the summary; returns the webhooks' verdicts (None without ``webhooks``: the alerts
    went to the user's ``routes``, which the demo does not receive)."""
    verdicts: list[WebhookVerdict] | None = None
    say(f"=== what lagscope found ({start:%H:%M:%S} → {end:%H:%M:%S} UTC; results in {results}) ===")
    for line in summary_lines(results, prefix=prefix, start=start, end=end):
        say(line)
    if truth.exists():
        scored, faults = judge(results, prefix=prefix, start=start, end=end, truth=truth,
                               rules=rules or AnalyticsRulesConfig(), tolerance_s=tolerance_s)
        if faults:
            short = prefix + "-"
            say("injected by the scenario (ground truth, " + str(truth) + "):")
            for f in faults:
                say(f"  {f.kind:<12} {f.group.removeprefix(short)}/{f.member} at {f.start - t0:.1f}s")
        say(f"judged against the injected faults (within {tolerance_s:g}s; lagscope.devtools.sim.score):")
        for line in verdict_lines(scored, faults, prefix=prefix, t0=t0):
            say(line)
        if webhooks is not None:
            own = score.own_thresholds(rules or AnalyticsRulesConfig())
            verdicts = webhook_verdicts(scored, faults, webhooks.records, _alert_findings(results),
                                        min_severity=webhooks.min_severity, target_s=webhooks.target_s,
                                        tolerance_s=tolerance_s, own_s=own)
            say(f"webhooks, from the fault to its arrival at the demo's receiver (route {RECEIVER_ROUTE}, "
                f"min_severity {webhooks.min_severity}; target 2 sweep intervals + one analytics step "
                f"interval + 5 s = {webhooks.target_s:g}s, + the rule's own threshold (stall {own['stall']:g}s, "
                f"stop {own['stop']:g}s); {len(webhooks.records)} received):")
            for line in webhook_lines(verdicts, prefix=prefix, t0=t0):
                say(line)
            stray = unexplained_webhooks(scored, webhooks.records, prefix=prefix, tolerance_s=tolerance_s,
                                         until=end.timestamp())
            say(f"webhooks that report nothing the scenario called for: {len(stray)}")
            for sf, detail in stray:
                say(f"  {sf.kind:<12} {_where(sf, prefix + '-')} at {sf.start - t0:.1f}s ({sf.severity}): {detail}")
        elif routes:
            say(f"webhooks: not timed: the alerts go to your routes ({', '.join(routes)}, from --config), "
                "which the demo does not receive; without an alerts section it runs a receiver of its own")
    say("=== end of summary ===")
    return verdicts



# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

def register(app: typer.Typer) -> None:
    @app.command("demo")
    def demo(
        workdir: Annotated[Path, typer.Option(help="Demo state: broker data, lake, results, runs, logs.")] = (
            Path(".lagscope") / "demo"),
        bootstrap: Annotated[str | None, typer.Option(help="Use this cluster instead of starting a broker.")] = None,
        scenario: Annotated[str, typer.Option(help="A built-in scenario name or a YAML file.")] = "demo",
        duration: Annotated[float | None, typer.Option(
            min=0, help="Seconds to keep serving after the summary (0: exit right away). "
                        "Default: until Ctrl-C on a terminal, else exit after the summary.")] = None,
        metrics_port: Annotated[int, typer.Option(min=0, max=65535, help="Port of /metrics (0: a free one).")] = 0,
        ui_port: Annotated[int, typer.Option(min=0, max=65535, help="Port of the app (0: a free one).")] = 0,
        master: Annotated[str | None, typer.Option(
            help="Spark master of the analytics loop (default: analytics.master of --config, else local[2]).")] = None,
        config: Annotated[Path | None, typer.Option(
            "--config", "-c", dir_okay=False,
            help="A lagscope.yaml whose analytics section (rule thresholds, timeouts, master, interval) "
                 "overrides the demo's own settings where it sets them, and whose alerts routes, if any, "
                 "take the alerts instead of the demo's webhook receiver.")] = None,
        seed: Annotated[int | None, typer.Option(
            help="The scenario's seed (its timings, rates and send jitter); default: the scenario's own.")] = None,
    ) -> None:
        """The whole product on loopback: broker, a workload with faults, collector, analytics, metrics, app."""
        if bootstrap is not None and not re.fullmatch(r"[^\s:,]+:\d+(,[^\s:,]+:\d+)*", bootstrap):
            raise ConfigError(f"--bootstrap {bootstrap!r} is not host:port[,host:port…]")
        analytics: AnalyticsConfig | None = None
        alerts: AlertsConfig | None = None
        if config is not None:
            try:
                loaded = load_config(config)
                loaded.alerts.check_secrets()  # an unreadable route secret fails now, before anything starts
            except ConfigError as exc:
                typer.echo(f"config error: {exc}", err=True)
                raise typer.Exit(2) from None
            analytics, alerts = loaded.analytics, loaded.alerts
        acfg = demo_analytics_config(analytics)
        stop = threading.Event()
        with stop_on_signals(stop, _announce_stop(stop)):
            code = run_full_demo(DemoOptions(workdir, bootstrap=bootstrap, scenario=scenario, duration=duration,
                                             metrics_port=metrics_port, ui_port=ui_port,
                                             master=master or acfg.master, analytics_interval_s=acfg.interval_s,
                                             analytics=analytics, alerts=alerts, seed=seed), stop)
        if code:
            raise typer.Exit(code)
