"""``lagscope demo``: the whole product on loopback, with a workload that has something to find.

    lagscope demo                         # own broker; serve until Ctrl-C (on a terminal)
    lagscope demo --bootstrap HOST:PORT   # an existing cluster instead of a local broker
    lagscope demo --duration 0            # exit right after the summary
    lagscope demo --config lagscope.yaml  # its analytics section overrides the demo's thresholds

What runs, all on 127.0.0.1, all stopped again on Ctrl-C/SIGTERM or when the demo ends:

- a local Kafka broker (:class:`lagscope.deploy.broker.LocalBroker`), unless ``--bootstrap``;
- the ``demo`` simulator scenario (growing lag, a SIGKILLed consumer, a stall, a rewind, a
  burst), or the one ``--scenario`` names;
- the collector (sweeps every second + the ``__consumer_offsets`` tail) writing the lake under
  ``<workdir>/lake`` and serving ``/metrics`` with the analytics' findings on the same endpoint;
- the incremental analytics loop (``lagscope run``'s :class:`~lagscope.deploy.run.AnalyticsLoop`)
  writing ``<workdir>/results``, with rule thresholds scaled to a one-minute demo;
- the Streamlit app (``lagscope ui``) over that lake and those results.

When the scenario ends, the demo waits until the analytics have covered the whole run (their
steps end on minute boundaries, so up to a minute more), then prints what they found: rebalance
windows with cause and duration against the bound, anomalies with their magnitudes, lag in
messages and seconds, next to the faults the scenario injected. Each start replaces the
previous demo's lake, results and runs (the broker's data is kept).
"""

from __future__ import annotations

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
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from lagscope.config import AnalyticsConfig, Settings, load_config, resolve_results
from lagscope.deploy.run import AnalyticsLoop, CollectorComponent, Runner
from lagscope.errors import ConfigError
from lagscope.signals import stop_on_signals

__all__ = ["DemoOptions", "demo_analytics_config", "demo_analytics_settings", "register", "run_full_demo"]

log = logging.getLogger(__name__)

BIND = "127.0.0.1"
#: the analytics' step ends this long before "now", so the last sweeps before a minute
#: boundary are in the lake when the step for that minute runs
SETTLE_S = 3.0


def say(text: str = "") -> None:
    print(text, flush=True)


#: rule thresholds for a one-minute demo (the defaults suit hours of production traffic):
#: committed offsets that stand still for 8 s while there is lag are a stall, no commits for
#: 15 s a stop, lag growing for one minute lag growth
DEMO_RULES: dict[str, Any] = {"stall_after_s": 8.0, "stop_after_s": 15.0, "gap_min_s": 6.0, "gap_mad_floor_s": 0.5,
                              "growth_min_minutes": 1, "warn_lag_s": 10.0, "storm_window_s": 120.0}
#: the demo's consumers use a 10 s session timeout
DEMO_ANALYTICS: dict[str, Any] = {"session_timeout_s": 10.0, "heartbeat_s": 3.0, "network_s": 1.0,
                                  "rebalance_timeout_s": 300.0, "master": "local[2]", "interval_s": 3.0}


def demo_analytics_config(config: AnalyticsConfig | None = None) -> AnalyticsConfig:
    """The demo's analytics settings: :data:`DEMO_ANALYTICS` and :data:`DEMO_RULES`, then what
    ``config`` (a ``--config`` file's analytics section) sets explicitly."""
    given: dict[str, Any] = {}
    rules_given: dict[str, Any] = {}
    if config is not None:
        given = config.model_dump(include=config.model_fields_set - {"rules"})
        rules_given = config.rules.model_dump(include=config.rules.model_fields_set)
    return AnalyticsConfig.model_validate({**DEMO_ANALYTICS, **given, "rules": {**DEMO_RULES, **rules_given}})


def demo_analytics_settings(read_committed: tuple[str, ...] = (), config: AnalyticsConfig | None = None) -> Any:
    """The analytics' job settings of the demo (see :func:`demo_analytics_config`)."""
    from lagscope.analytics.configured import job_settings

    return job_settings(demo_analytics_config(config), extra_read_committed=read_committed)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((BIND, 0))
        return int(s.getsockname()[1])


class DemoOptions:
    """What ``lagscope demo`` was asked for."""

    def __init__(self, workdir: Path, *, bootstrap: str | None = None, scenario: str = "demo",
                 metrics_port: int = 0, ui_port: int = 0, duration: float | None = None,
                 master: str = "local[2]", analytics_interval_s: float = 3.0, sweep_interval_s: float = 1.0,
                 ui: bool = True, analytics: AnalyticsConfig | None = None) -> None:
        self.workdir, self.bootstrap, self.scenario = workdir, bootstrap, scenario
        self.metrics_port, self.ui_port, self.duration = metrics_port, ui_port, duration
        self.master, self.analytics_interval_s, self.sweep_interval_s = master, analytics_interval_s, sweep_interval_s
        self.ui = ui
        #: the --config file's analytics section (its explicit settings override the demo's)
        self.analytics = analytics


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
        from lagscope.dashboards.app.cli import streamlit_command

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


def scenario_start_delay(now: dt.datetime, duration_s: float, lead_s: float = 8.0) -> float:
    """Seconds to wait before starting a scenario of ``duration_s`` so that it ends
    ``lead_s + 5`` seconds before a minute boundary: the analytics' step for that minute
    (they end on minute boundaries) then covers the whole run a few seconds after it ends,
    and the wait overlaps the Spark session's start-up instead of following the scenario."""
    end = now.timestamp() + duration_s
    into = end % 60.0
    target = 60.0 - lead_s - 5.0
    return (target - into) % 60.0


def _announce_stop(stop: threading.Event) -> Callable[[str], None]:
    def announce(name: str) -> None:
        if not stop.is_set():
            print(f"\n{name}: stopping the demo …", file=sys.stderr, flush=True)
    return announce


def _minute_ceil(t: dt.datetime) -> dt.datetime:
    floor = t.replace(second=0, microsecond=0)
    return floor if floor == t else floor + dt.timedelta(minutes=1)


def _prepare(workdir: Path) -> tuple[Path, Path, Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    lake, runs = workdir / "lake", workdir / "runs"
    results = resolve_results(None, lake)  # beside the lake, where `lagscope ui --lake` looks
    for folder in (lake, results, runs):  # the previous demo's data: the analytics start afresh
        if folder.exists():
            shutil.rmtree(folder)
    return lake, results, runs


def run_full_demo(opts: DemoOptions, stop: threading.Event | None = None) -> int:
    """The demo's whole flow (see the module docstring). Returns the exit code."""
    from lagscope.analytics.results_metrics import ResultsCollector
    from lagscope.deploy.broker import LocalBroker
    from lagscope.sim.runner import ScenarioRun, load_scenario, plan_names, start_scenario

    stop = stop or threading.Event()
    sc = load_scenario(opts.scenario)  # a bad --scenario fails before anything starts
    lake, results, runs = _prepare(opts.workdir)
    broker: LocalBroker | None = None
    runner: Runner | None = None
    app: _Streamlit | None = None
    run: ScenarioRun | None = None
    code = 0
    try:
        bootstrap = opts.bootstrap
        if bootstrap is None:
            broker = LocalBroker(opts.workdir / "broker", offsets_partitions=1)
            say("starting a local Kafka broker …")
            broker.start()
            bootstrap = broker.bootstrap
        if stop.is_set():
            return 0
        run_id = uuid.uuid4().hex[:8]
        names = plan_names(sc, run_id)
        settings = Settings.model_validate({
            "clusters": [{"name": "demo", "bootstrap_servers": bootstrap,
                          "groups": {"include": [re.escape(names.prefix) + "-.*"]},
                          "consumer_offsets_tail": {"enabled": True, "start": "latest"}}],
            "collector": {"interval_s": opts.sweep_interval_s, "lake": str(lake), "compaction": {"enabled": False}},
            "metrics": {"enabled": True, "bind": BIND, "port": opts.metrics_port},
        })
        analytics = DemoAnalytics(lake, results, interval_s=opts.analytics_interval_s, master=opts.master,
                                  settings=demo_analytics_settings(config=opts.analytics), backfill_s=600.0,
                                  shuffle_partitions=2,
                                  driver_memory=demo_analytics_config(opts.analytics).driver_memory,
                                  log_file=opts.workdir / "logs" / "spark.log",
                                  clock=lambda: dt.datetime.now(dt.UTC) - dt.timedelta(seconds=SETTLE_S))
        collector = CollectorComponent(settings, [ResultsCollector(results, refresh_s=2.0)])
        runner = Runner([analytics, collector])  # downstream first, as in `lagscope run`
        runner.start()
        if opts.ui:
            app = _Streamlit(lake, results, opts.ui_port or free_port(), opts.workdir / "logs" / "app.log")
            app.start()
        server = collector.collector.metrics_server
        say("")
        say("lagscope demo is running (everything on 127.0.0.1):")
        say(f"  Kafka            {bootstrap}" + (f"  (log: {broker.log_file})" if broker else ""))
        say(f"  metrics          {server.url}  (kafka_consumergroup_lag…, lagscope_* findings)")
        if app is not None:
            say(f"  app              {app.url}  (Streamlit drill-down; log: {app.log_file})")
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
                return 0
        analytics.begin(dt.datetime.now(dt.UTC))
        run = start_scenario(sc, bootstrap, runs / sc.name, run_id=run_id)
        say(f"scenario {sc.name} started ({sc.duration:.0f}s) …")
        while not run.done():
            if stop.wait(0.5):
                run.stop()
                say("interrupted: recording the scenario's end state …")
                break
            dead = [c.name for c in [*runner.started, *([app] if app else [])] if not c.is_healthy()]
            if dead:
                log.error("%s stopped unexpectedly; stopping the demo", ", ".join(dead))
                run.stop()
                code = 1
                break
        result = run.wait()
        end = dt.datetime.fromtimestamp(result.t0 + sc.duration, dt.UTC)
        end = min(end, dt.datetime.now(dt.UTC))
        if not stop.is_set() and code == 0:
            _wait_for_analytics(results, _minute_ceil(end), analytics, stop)
        if analytics.fatal is not None:
            say(f"the analytics could not run: {analytics.fatal}")
            code = 1
        print_summary(results, prefix=names.prefix, start=dt.datetime.fromtimestamp(result.t0, dt.UTC),
                      end=end, truth=result.truth_path, t0=result.t0)
        if code == 0 and not stop.is_set():
            if opts.duration is None and sys.stdin.isatty() and sys.stdout.isatty():
                say("still serving the URLs above; Ctrl-C stops everything.")
                stop.wait()
            elif opts.duration:
                say(f"serving the URLs above for {opts.duration:g}s more (Ctrl-C stops everything) …")
                stop.wait(opts.duration)
        return code
    finally:
        say("stopping: app, collector, analytics" + (", broker" if broker else "") + " …")
        if run is not None and not run.done():
            run.stop()
            run.wait()
        if app is not None:
            app.stop()
        if runner is not None:
            runner.stop()
        if broker is not None:
            broker.stop()
        say("demo stopped.")


def _wait_for_analytics(results: Path, until: dt.datetime, analytics: AnalyticsLoop, stop: threading.Event) -> None:
    """Block until the analytics' checkpoint reaches ``until`` (they ran over the whole scenario)."""
    from lagscope.analytics.io import read_checkpoint

    say(f"scenario over; waiting for the analytics to cover it up to {until:%H:%M:%S} UTC "
        f"(steps end on minute boundaries) …")
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
    from lagscope.errors import LakeError
    from lagscope.lake import read_table

    try:
        rows: list[dict[str, Any]] = read_table(results, table).to_pylist()
        return rows
    except LakeError as exc:
        log.warning("cannot read %s: %s", table, exc)
        return []


def _current(rows: list[dict[str, Any]], key: Callable[[Mapping[str, Any]], Any]) -> list[Mapping[str, Any]]:
    from lagscope.analytics.results_metrics import current_rows

    return list(current_rows(rows, key))


def _fmt_s(v: float | None) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "?"
    return f"{v:.1f}s"


def summary_lines(results: Path, *, prefix: str, start: dt.datetime, end: dt.datetime) -> list[str]:
    """What the analytics found for the groups ``prefix-*`` that began in ``[start, end)``."""
    short = prefix + "-"
    lines: list[str] = []

    def mine(row: Mapping[str, Any]) -> bool:
        s = row.get("start_ts")
        return (str(row["group_id"]).startswith(short) and s is not None
                and start - dt.timedelta(seconds=5) <= s < end)

    windows = _current(_read(results, "rebalances"), lambda r: (r["cluster"], r["group_id"], r["start_ts"]))
    reb = sorted((r for r in windows if mine(r)), key=lambda r: r["start_ts"])
    lines.append(f"rebalance windows: {len(reb)}")
    for r in reb:
        dur = r.get("duration_s")
        bound = r.get("bound_s")
        ratio = f", {r['observed_over_bound']:.2f}x" if r.get("observed_over_bound") is not None else ""
        state = f"took {_fmt_s(dur)} (bound {_fmt_s(bound)}{ratio})" if dur is not None else "still open"
        extra = []
        if r.get("partitions_moved") is not None:
            extra.append(f"{r['partitions_moved']} partitions moved")
        if r.get("messages_accumulated") is not None:
            extra.append(f"{r['messages_accumulated']} messages of lag accumulated")
        lines.append(f"  {r['group_id'].removeprefix(short):<10} cause {r.get('cause') or 'unknown':<16} "
                     f"at {r['start_ts']:%H:%M:%S}: {state}" + (f"; {', '.join(extra)}" if extra else "")
                     + f" [{r.get('source')}]")
    anom = sorted((a for a in _current(_read(results, "anomalies"), lambda r: r["key"]) if mine(a)),
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


def print_summary(results: Path, *, prefix: str, start: dt.datetime, end: dt.datetime,
                  truth: Path, t0: float) -> None:
    from lagscope.sim import truth as _truth

    say(f"=== what lagscope found ({start:%H:%M:%S} → {end:%H:%M:%S} UTC; results in {results}) ===")
    for line in summary_lines(results, prefix=prefix, start=start, end=end):
        say(line)
    faults = [r for r in _truth.load(truth) if isinstance(r, _truth.Fault)] if truth.exists() else []
    if faults:
        short = prefix + "-"
        say("injected by the scenario (ground truth, " + str(truth) + "):")
        for f in faults:
            say(f"  {f.kind:<12} {f.group.removeprefix(short)}/{f.member} at {f.start - t0:.1f}s")
    say("=== end of summary ===")


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
                 "overrides the demo's own settings where it sets them.")] = None,
    ) -> None:
        """The whole product on loopback: broker, a workload with faults, collector, analytics, metrics, app."""
        if bootstrap is not None and not re.fullmatch(r"[^\s:,]+:\d+(,[^\s:,]+:\d+)*", bootstrap):
            raise ConfigError(f"--bootstrap {bootstrap!r} is not host:port[,host:port…]")
        analytics: AnalyticsConfig | None = None
        if config is not None:
            try:
                analytics = load_config(config).analytics
            except ConfigError as exc:
                typer.echo(f"config error: {exc}", err=True)
                raise typer.Exit(2) from None
        acfg = demo_analytics_config(analytics)
        stop = threading.Event()
        with stop_on_signals(stop, _announce_stop(stop)):
            code = run_full_demo(DemoOptions(workdir, bootstrap=bootstrap, scenario=scenario, duration=duration,
                                             metrics_port=metrics_port, ui_port=ui_port,
                                             master=master or acfg.master, analytics_interval_s=acfg.interval_s,
                                             analytics=analytics), stop)
        if code:
            raise typer.Exit(code)
