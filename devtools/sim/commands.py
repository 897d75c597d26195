"""``lagscope sim …`` (run a scenario, list the built-in ones) and ``lagscope demo``.

``run_demo()`` is the demo's whole flow, kept small so that later components (collector,
analytics, UI) can hook in: it starts a LocalBroker (unless given a bootstrap), starts the
``demo`` scenario in the background, calls ``on_started(run, bootstrap)`` so a caller can start
its own services beside it, waits, prints a ground-truth summary and stops what it started,
also on Ctrl-C.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.table import Table

from lagscope.devtools.sim import truth as _truth
from lagscope.devtools.sim.runner import RunResult, ScenarioRun, builtin_scenarios, load_scenario, start_scenario
from lagscope.errors import ScenarioError

__all__ = ["register", "run_demo", "summarize"]

log = logging.getLogger(__name__)
out = Console()

sim_app = typer.Typer(help="The scenario simulator: real producers and consumer groups with injected faults.",
                      no_args_is_help=True)


def summarize(result: RunResult, console: Console | None = None) -> None:
    """Print a short ground-truth summary of a finished run: per group and partition, the
    broker's end offsets and committed offset, the produced/committed counts and the faults."""
    con = console or out
    records = _truth.load(result.truth_path)
    produced: dict[tuple[str, int], int] = defaultdict(int)
    commits: dict[tuple[str, str, int], int] = defaultdict(int)
    rebalances: dict[str, int] = defaultdict(int)
    faults: list[_truth.Fault] = []
    for r in records:
        if isinstance(r, _truth.Produce):
            produced[(r.topic, r.partition)] += 1
        elif isinstance(r, _truth.Commit):
            commits[(r.group, r.topic, r.partition)] += 1
        elif isinstance(r, _truth.Assign):
            rebalances[r.group] += 1
        elif isinstance(r, _truth.Fault):
            faults.append(r)
    es = result.end_state
    prefix = result.names.prefix + "-"
    table = Table(title=f"{result.scenario.name}: ground truth at the end ({result.out_dir})")
    for col in ("group", "topic", "p", "start", "end", "lso", "committed", "lag", "commits"):
        table.add_column(col, justify="left" if col in ("group", "topic") else "right", no_wrap=True)
    for logical, group in result.names.groups.items():
        committed = es.committed_of(group)
        spec = next(g for g in result.scenario.groups if g.name == logical)
        # read_committed groups can only reach the last stable offset
        stable = any(m.isolation_level == "read_committed" for m in spec.members)
        for t in spec.topics:
            topic = result.names.topic(t)
            for pe in (p for p in es.partitions if p.topic == topic):
                c = committed.get((topic, pe.partition))
                lag = "" if c is None else str(max(0, (pe.lso if stable else pe.end) - c))
                table.add_row(logical, t, str(pe.partition), str(pe.log_start), str(pe.end), str(pe.lso),
                              "-" if c is None else str(c), lag, str(commits[(group, topic, pe.partition)]))
    con.print(table)
    con.print("start/end/lso: the broker's log start, high watermark and last stable offset; "
              "lag = end (lso for read_committed groups) - committed")
    con.print(f"produced {sum(produced.values())} records; partition assignments received per group: "
              + ", ".join(f"{lg} {rebalances[g]}" for lg, g in result.names.groups.items()))
    if result.failures:
        con.print(f"[bold red]failed processes:[/] {', '.join(result.failures)} (logs in {result.out_dir / 'logs'})")
    t0 = result.t0
    for f in faults:
        span = f"{f.start - t0:6.1f}s" + (f" → {f.end - t0:.1f}s" if f.end - f.start >= 0.05 else "")
        con.print(f"  fault {f.kind:<13} {f.group.removeprefix(prefix)}/{f.member} at {span}")


def run_demo(
    workdir: Path = Path(".lagscope") / "demo",
    *,
    bootstrap: str | None = None,
    scenario: str = "demo",
    on_started: Callable[[ScenarioRun, str], None] | None = None,
    console: Console | None = None,
) -> RunResult | None:
    """Run the demo: broker (unless ``bootstrap``) + scenario; summary; stop everything.

    Returns the run's result, or None when interrupted before the scenario started.
    """
    from lagscope.devtools.broker import LocalBroker

    con = console or out
    workdir.mkdir(parents=True, exist_ok=True)
    broker: LocalBroker | None = None
    run: ScenarioRun | None = None
    try:
        if bootstrap is None:
            broker = LocalBroker(workdir / "broker", offsets_partitions=1)
            con.print("starting a local Kafka broker …")
            broker.start()
            bootstrap = broker.bootstrap
            con.print(f"Kafka on {bootstrap} (log: {broker.log_file})")
        sc = load_scenario(scenario)
        run = start_scenario(sc, bootstrap, workdir / "runs" / sc.name)
        con.print(f"scenario {sc.name} ({sc.duration:.0f}s): {sc.description.strip()}")
        con.print(f"topics: {', '.join(run.names.topics.values())}; groups: {', '.join(run.names.groups.values())}")
        if on_started is not None:
            on_started(run, bootstrap)
        result = _wait_interruptibly(run)
        summarize(result, con)
        con.print(f"truth: {result.truth_path}")
        return result
    except KeyboardInterrupt:
        con.print("interrupted: stopping …")
        if run is not None:
            run.stop()
            result = run.wait()
            summarize(result, con)
            return result
        return None
    finally:
        if broker is not None:
            broker.stop()


def _wait_interruptibly(run: ScenarioRun) -> RunResult:
    try:
        return run.wait()
    except KeyboardInterrupt:
        run.stop()
        out.print("interrupted: recording the end state …")
        return run.wait()


@sim_app.command("list")
def list_cmd() -> None:
    """List the built-in scenarios with their durations."""
    for name, path in builtin_scenarios().items():
        sc = load_scenario(path)
        first = sc.description.strip().split(". ")[0].rstrip(".")
        typer.echo(f"{name:<22} {sc.duration:>5.0f}s  {first}")


@sim_app.command("run")
def run_cmd(
    scenario: Annotated[str, typer.Argument(help="A built-in scenario name or a YAML file.")],
    bootstrap: Annotated[str, typer.Option("--bootstrap", "-b", help="Kafka bootstrap servers.")],
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Where truth.jsonl, run.json and logs go.")],
    run_id: Annotated[str | None, typer.Option(help="Run id for names (default: random).")] = None,
    cleanup: Annotated[bool, typer.Option(help="Delete the run's topics and groups afterwards.")] = False,
    client_config: Annotated[Path | None, typer.Option(
        help="YAML mapping of extra kafka-python settings for every client (security_protocol, sasl_*, "
             "ssl_cafile, …).")] = None,
    seed: Annotated[int | None, typer.Option(
        min=0, help="Seed of the run's timings, rates and send jitter (default: the scenario's seed); "
                    "recorded in the truth. The same seed gives the same schedule.")] = None,
) -> None:
    """Run a scenario against a cluster and write its ground truth to OUT/truth.jsonl."""
    sc = load_scenario(scenario)
    extra = _read_client_config(client_config) if client_config else {}
    if out_dir.exists() and (out_dir / "truth.jsonl").exists():
        raise ScenarioError(f"{out_dir} already holds a run's truth.jsonl; choose another --out")
    run = start_scenario(sc, bootstrap, out_dir, run_id=run_id, cleanup=cleanup, client_config=extra, seed=seed)
    typer.echo(f"running {sc.name} ({sc.duration:.0f}s, seed {run.scenario.seed}) as {run.names.prefix} …")
    result = _wait_interruptibly(run)
    summarize(result)
    typer.echo(f"truth: {result.truth_path}")


def _read_client_config(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"cannot read client config {path}: {exc}".replace("\n", " ")) from exc
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ScenarioError(f"client config {path}: expected a mapping of kafka-python settings")
    return data


def register(app: typer.Typer) -> None:
    app.add_typer(sim_app, name="sim")
    # ``lagscope demo`` (the whole product around run_demo's workload) is lagscope.devtools.demo
