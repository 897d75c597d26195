"""Run a scenario against any Kafka cluster and record its ground truth.

    >>> result = run_scenario("steady", "127.0.0.1:9092", Path("out"))      # doctest: +SKIP
    >>> result.names.groups["readers"], result.truth_path
    ('sim-steady-1a2b3c-readers', PosixPath('out/truth.jsonl'))

Or in the background, e.g. while a collector samples the same cluster::

    run = start_scenario("crash", bootstrap, out_dir)
    run.names.topics                # logical -> real topic names, known before the run starts
    ...                             # sample the cluster
    result = run.wait()             # RunResult; re-raises the run's error

How a run goes: create the topics (with their configs) → start one process per producer
and per member (members that join later are started at their time) → carry out crashes
(SIGKILL) at their time, watch the log starts of topics with a retention (50 ms polls, to date
a retention loss by the deletion) → when every member has ended, record the broker's end state
(ListOffsets, OffsetFetch) → stop the producers that hold a transaction open → merge the
per-process truth parts into ``<out>/truth.jsonl`` (sorted by time, end_state last).
``<out>/run.json`` describes the run (scenario, names, t0); ``<out>/logs/`` keeps each
process's log. Ctrl-C (``ScenarioRun.stop()``) ends the run early, still recording the
end state and the truth.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from lagscope.devtools.sim.model import Scenario, load_scenario_file, randomise
from lagscope.devtools.sim.truth import (
    Commit,
    EndState,
    Fault,
    GroupOffset,
    LogStartMove,
    PartitionEnd,
    RunInfo,
    held_partitions,
    read_part,
    read_parts,
    retention_overruns,
    write_truth,
)
from lagscope.errors import KafkaUnavailable, ScenarioError

__all__ = [
    "RunNames",
    "RunResult",
    "ScenarioRun",
    "builtin_scenarios",
    "collect_end_state",
    "load_scenario",
    "plan_names",
    "run_scenario",
    "start_scenario",
]

log = logging.getLogger(__name__)

#: how long the processes of the start may take to be ready
STARTUP_TIMEOUT_S = 60.0
#: how long after the end the runner waits for members before it stops them
END_GRACE_S = 20.0
#: an admin reset: how long the runner waits for the group's members to stop, and for the group
#: to be empty
HOLD_TIMEOUT_S = 30.0
#: the Kafka tool an admin reset runs (kafka-consumer-groups; kafka-tools 4.x)
CONSUMER_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
#: the member a commit of the admin tool is recorded under in the truth
ADMIN_TOOL = "kafka-consumer-groups"


def builtin_scenarios() -> dict[str, Path]:
    """The scenarios shipped in ``devtools/sim/scenarios``: name → file."""
    folder = resources.files("lagscope.devtools.sim") / "scenarios"
    out: dict[str, Path] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".yaml"):
            out[entry.name[:-5]] = Path(str(entry))
    return dict(sorted(out.items()))


def load_scenario(ref: str | Path | Scenario) -> Scenario:
    """A Scenario from itself, a built-in name (``steady``) or a YAML path."""
    if isinstance(ref, Scenario):
        return ref
    builtin = builtin_scenarios()
    if isinstance(ref, str) and ref in builtin:
        return load_scenario_file(builtin[ref])
    p = Path(ref)
    if p.exists():
        return load_scenario_file(p)
    raise ScenarioError(f"no scenario {ref!r}: not a file and not one of {', '.join(builtin)}")


@dataclass(frozen=True)
class RunNames:
    """The real names of one run: every logical name prefixed with ``sim-<scenario>-<run_id>``."""

    run_id: str
    prefix: str
    topics: dict[str, str]
    groups: dict[str, str]
    instance_ids: dict[str, str] = field(default_factory=dict)

    def topic(self, logical: str) -> str:
        return self.topics[logical]

    def group(self, logical: str) -> str:
        return self.groups[logical]


def plan_names(scenario: Scenario, run_id: str | None = None) -> RunNames:
    """The names a run of ``scenario`` uses (a fresh run id unless one is given)."""
    rid = run_id or uuid.uuid4().hex[:8]
    prefix = f"sim-{scenario.name}-{rid}"
    inst = {m.group_instance_id: f"{prefix}-{m.group_instance_id}"
            for g in scenario.groups for m in g.members if m.group_instance_id}
    return RunNames(rid, prefix, {t.name: f"{prefix}-{t.name}" for t in scenario.topics},
                    {g.name: f"{prefix}-{g.name}" for g in scenario.groups}, inst)


@dataclass(frozen=True)
class RunResult:
    """A finished run: where its truth is and what the broker reported at the end."""

    scenario: Scenario
    names: RunNames
    out_dir: Path
    truth_path: Path
    t0: float
    ended: float
    end_state: EndState
    stopped_early: bool = False
    #: processes that exited with an error (not the crashes the scenario asked for); their
    #: logs are in ``<out>/logs/<name>.log``. Their truth up to the failure is kept.
    failures: tuple[str, ...] = ()


@dataclass
class _Proc:
    name: str
    role: str
    popen: subprocess.Popen[bytes]
    leave_open: bool = False


#: how often the runner reads the log starts of the topics with a retention (s)
LOG_START_POLL_S = 0.05


class _Runner:
    def __init__(self, scenario: Scenario, bootstrap: str, out_dir: Path, names: RunNames,
                 client_config: dict[str, Any], cleanup: bool, stop_event: threading.Event,
                 linger_s: float = 0.0) -> None:
        self.sc = scenario
        #: how long the members go on consuming after the schedule (the producers stop with it)
        self.linger_s = linger_s
        self.bootstrap = bootstrap
        self.out = Path(out_dir)
        self.names = names
        self.client_config = dict(client_config)
        self.cleanup = cleanup
        self.stop_event = stop_event
        #: the run's time origin (epoch s), once every process is ready (None before)
        self.t0: float | None = None
        self.parts = self.out / "parts"
        self.logs = self.out / "logs"
        self.procs: list[_Proc] = []
        self.faults: list[Fault] = []
        #: the commits the admin tool wrote (the truth's commit records of resets)
        self.tool_commits: list[Commit] = []
        self.members: dict[tuple[str, str], _Proc] = {}
        self.crashed: list[_Proc] = []
        #: the log start moves the watcher saw (:func:`~lagscope.devtools.sim.truth.retention_overruns`)
        self.log_starts: list[LogStartMove] = []
        self._watch_stop = threading.Event()
        self._watcher: threading.Thread | None = None

    # -- helpers ----------------------------------------------------------------------------
    def _admin(self) -> Any:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        try:
            return KafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=f"{self.names.prefix}-admin",
                                    request_timeout_ms=15000, bootstrap_timeout_ms=10000,
                                    **self.client_config)
        except (KafkaError, OSError, ValueError) as exc:
            raise KafkaUnavailable(f"cannot reach Kafka at {self.bootstrap}: {exc}") from exc

    def _spawn(self, name: str, role: str, cfg: dict[str, Any], leave_open: bool = False) -> _Proc:
        spec_path = self.parts / f"{name}.spec.json"
        fd = os.open(spec_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({**cfg, "role": role, "bootstrap": self.bootstrap, "client_config": self.client_config,
                       "out": str(self.parts / f"{name}.jsonl"), "ready_file": str(self.parts / f"{name}.ready"),
                       "t0_file": str(self.parts / "t0.json")}, f)
        logf = (self.logs / f"{name}.log").open("ab")
        try:
            popen = subprocess.Popen([sys.executable, "-m", "lagscope.devtools.sim.worker", str(spec_path)],
                                     stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)
        finally:
            logf.close()
        p = _Proc(name, role, popen, leave_open)
        self.procs.append(p)
        return p

    def _signal(self, p: _Proc, sig: int) -> None:
        if p.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.popen.send_signal(sig)

    def _wait(self, procs: list[_Proc], deadline: float) -> bool:
        """Wait until ``procs`` have exited or ``deadline``; True if they all did."""
        while time.time() < deadline:
            if all(p.popen.poll() is not None for p in procs):
                return True
            if self.stop_event.wait(0.1):
                return all(p.popen.poll() is not None for p in procs)
        return all(p.popen.poll() is not None for p in procs)

    def _terminate(self, procs: list[_Proc], grace: float = 10.0) -> None:
        for p in procs:
            self._signal(p, signal.SIGTERM)
        deadline = time.time() + grace
        for p in procs:
            try:
                p.popen.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                log.warning("%s (pid %s) did not stop; killing it", p.name, p.popen.pid)
                self._signal(p, signal.SIGKILL)
                p.popen.wait(timeout=10)

    # -- the run ----------------------------------------------------------------------------
    def create_topics(self, admin: Any) -> None:
        from kafka.errors import KafkaError

        new = {self.names.topic(t.name): {"num_partitions": t.partitions, "replication_factor": 1,
                                          "configs": dict(t.configs)} for t in self.sc.topics}
        try:
            admin.create_topics(new, timeout_ms=15000)
            admin.wait_for_topics(list(new), timeout_ms=20000)
        except KafkaError as exc:
            raise ScenarioError(f"cannot create the scenario's topics: {exc}") from exc

    def run(self) -> RunResult:
        admin = self._admin()  # an unreachable cluster fails here, before anything is written
        try:
            self.out.mkdir(parents=True, exist_ok=True)
            self.parts.mkdir(exist_ok=True)
            self.logs.mkdir(exist_ok=True)
            self.create_topics(admin)
            try:
                stopped_early, t0 = self._drive()
            except BaseException:
                self._stop_watching()
                raise
            info = RunInfo(self.sc.name, self.sc.seed, self.names.run_id, t0)
            truth = self.out / "truth.jsonl"
            try:
                end_state = collect_end_state(admin, self.names, self.sc)
                self._stop_watching()
            except KafkaUnavailable:
                self._stop_watching()
                # keep what the processes recorded, without the end state, then fail
                self._terminate([p for p in self.procs if p.popen.poll() is None], grace=15)
                write_truth(truth, [info, *read_parts(self.parts), *self.tool_commits, *self.faults])
                raise
            # now the producers that hold a transaction open may abort it and go
            self._terminate([p for p in self.procs if p.popen.poll() is None], grace=15)
            records = read_parts(self.parts)
            retention = {self.names.topic(t.name): float(t.configs["retention.ms"]) / 1000.0
                         for t in self.sc.topics if "retention.ms" in t.configs}
            overruns = retention_overruns(records, end_state, retention, self.log_starts)
            write_truth(truth, [info, *records, *self.tool_commits, *self.faults, *overruns, end_state])
            if self.cleanup:
                self._cleanup(admin)
            return RunResult(self.sc, self.names, self.out, truth, t0, time.time(), end_state, stopped_early,
                             self.failures())
        finally:
            self._terminate([p for p in self.procs if p.popen.poll() is None], grace=5)
            admin.close()

    def _write_run_json(self, t0: float) -> None:
        info = {"scenario": self.sc.model_dump(mode="json"), "seed": self.sc.seed, "bootstrap": self.bootstrap,
                "t0": t0,
                "run_id": self.names.run_id, "prefix": self.names.prefix, "topics": self.names.topics,
                "groups": self.names.groups, "instance_ids": self.names.instance_ids}
        tmp = self.out / ".run.json.tmp"
        tmp.write_text(json.dumps(info, indent=2))
        tmp.replace(self.out / "run.json")

    def _member_cfg(self, g: Any, m: Any) -> dict[str, Any]:
        return {"spec": m.model_dump(mode="json"),
                "group": self.names.group(g.name), "member": m.name,
                "client_id": f"{self.names.prefix}-{g.name}-{m.name}",
                "topics": [self.names.topic(t) for t in g.topics],
                "topic_partitions": {self.names.topic(t.name): t.partitions for t in self.sc.topics
                                     if t.name in g.topics},
                "group_instance_id": self.names.instance_ids.get(m.group_instance_id or "")}

    def _start(self) -> float:
        """Wait until every process spawned so far is ready, then publish t0; returns t0."""
        deadline = time.time() + STARTUP_TIMEOUT_S
        while True:
            pending = [p for p in self.procs if not (self.parts / f"{p.name}.ready").exists()]
            if not pending:
                break
            dead = [p for p in pending if p.popen.poll() is not None]
            if dead:
                raise ScenarioError(f"{dead[0].name} exited during start-up (code {dead[0].popen.returncode}); "
                                    f"see {self.logs / (dead[0].name + '.log')}")
            if time.time() > deadline:
                raise ScenarioError(f"{pending[0].name} was not ready within {STARTUP_TIMEOUT_S:.0f}s")
            if self.stop_event.wait(0.05):
                break
        t0 = time.time() + 0.3
        self.t0 = t0
        tmp = self.parts / ".t0.tmp"
        tmp.write_text(json.dumps({"t0": t0, "end": t0 + self.sc.duration + self.linger_s,
                                   "schedule_end": t0 + self.sc.duration}))
        tmp.replace(self.parts / "t0.json")
        self._write_run_json(t0)
        return t0

    def _drive(self) -> tuple[bool, float]:
        """Start the processes, carry out the runner's own actions; (stopped early?, t0)."""
        parts = {t.name: t.partitions for t in self.sc.topics}
        for ps in self.sc.producers:
            self._spawn(f"producer-{ps.name}", "producer", {
                "spec": ps.model_dump(mode="json"),
                "topic": self.names.topic(ps.topic), "partitions": parts[ps.topic],
                "client_id": f"{self.names.prefix}-{ps.name}",
                "seed": self.sc.seed, "sends": self.sc.jitter.sends,
                "transactional_id": f"{self.names.prefix}-{ps.name}"}, leave_open=ps.leave_open)
        # every member starts now, also those that join later: they wait in their process until
        # t0 + join_at, so that Python start-up time on a loaded machine never delays a join
        for g in self.sc.groups:
            for m in g.members:
                self.members[(g.name, m.name)] = self._spawn(f"member-{g.name}-{m.name}", "member",
                                                             self._member_cfg(g, m))
        t0 = self._start()
        end = t0 + self.sc.duration + self.linger_s
        self._start_watching()
        resets = sorted(((t0 + a.at, g, m, a) for g in self.sc.groups for m in g.members for a in m.actions
                         if a.kind == "skip" and a.mechanism == "admin_reset"), key=lambda e: e[0])
        resetter = None
        if resets:
            resetter = threading.Thread(target=self._resets, args=(resets, t0 + self.sc.duration),
                                        name="admin-resets", daemon=True)
            resetter.start()
        crashes = sorted(((t0 + a.at, g, m) for g in self.sc.groups for m in g.members
                          for a in m.actions if a.kind == "crash"), key=lambda e: e[0])
        for when, g, m in crashes:
            while time.time() < when:
                if self.stop_event.wait(max(0.0, min(0.1, when - time.time()))):
                    break
            if self.stop_event.is_set():
                break
            proc = self.members[(g.name, m.name)]
            alive = proc.popen.poll() is None
            now = time.time()
            self._signal(proc, signal.SIGKILL)
            self.crashed.append(proc)
            group = self.names.group(g.name)
            self.faults.append(Fault("crash", group, m.name, now, now, {"pid": proc.popen.pid, "was_alive": alive},
                                     self._held(proc, group, m.name)))
        if resetter is not None:
            resetter.join()
        members = [p for p in self.procs if p.role == "member"]
        producers = [p for p in self.procs if p.role == "producer" and not p.leave_open]
        self._wait(members + producers, end + END_GRACE_S)
        if self.stop_event.is_set():
            self._terminate([p for p in self.procs if not p.leave_open])
            return True, t0
        late = [p for p in members + producers if p.popen.poll() is None]
        if late:
            log.warning("%d process(es) still running %.0fs after the end: stopping them", len(late), END_GRACE_S)
            self._terminate(late)
        return False, t0

    # -- the log starts of topics with a retention -------------------------------------------
    def _start_watching(self) -> None:
        """Poll the log start of every partition of the topics with a ``retention.ms`` every
        :data:`LOG_START_POLL_S` until the end state is read: when the broker deletes, the truth
        can date a retention loss by the deletion itself, not by the earliest moment the broker
        may delete (it deletes whole closed segments at its retention check, later)."""
        topics = [t for t in self.sc.topics if "retention.ms" in t.configs]
        if not topics:
            return
        self._watcher = threading.Thread(target=self._watch_log_starts, args=(topics,), name="log-starts",
                                         daemon=True)
        self._watcher.start()

    def _stop_watching(self) -> None:
        self._watch_stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=10)

    def _watch_log_starts(self, topics: list[Any]) -> None:
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec
        from kafka.errors import KafkaError

        try:
            admin = self._admin()
        except KafkaUnavailable as exc:
            log.warning("log starts not watched: %s", exc)
            return
        tps = [TopicPartition(self.names.topic(t.name), p) for t in topics for p in range(t.partitions)]
        last: dict[Any, tuple[float, int]] = {}  # partition -> (sent time of the last poll, log start)
        try:
            while not self._watch_stop.is_set():
                sent = time.time()
                try:
                    earliest = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
                except KafkaError as exc:
                    log.debug("log starts not read (%s)", exc)
                    earliest = {}
                seen = time.time()
                for tp, info in earliest.items():
                    o = int(info.offset)
                    before = last.get(tp)
                    if before is not None and o != before[1]:
                        self.log_starts.append(LogStartMove(tp.topic, tp.partition, before[1], o, before[0], seen))
                    if o >= 0:
                        last[tp] = (sent, o)
                self._watch_stop.wait(LOG_START_POLL_S)
        finally:
            admin.close()

    # -- admin resets ------------------------------------------------------------------------
    def _resets(self, resets: list[tuple[float, Any, Any, Any]], schedule_end: float) -> None:
        """Carry out the ``admin_reset`` skips in time order, one after another: a reset that is
        late (the one before it took long) starts late, never at the same time as another. None
        starts after ``schedule_end`` (the scenario's duration): the members stop then, and a
        reset of the group they leave Empty would land outside the run; such a reset is an
        ``admin_reset_not_run`` fault. A reset's wait for its backlog ends there too."""
        try:
            admin = self._admin()
        except KafkaUnavailable as exc:
            log.warning("admin resets skipped: %s", exc)
            return
        try:
            for n, (when, g, m, a) in enumerate(resets):
                while time.time() < when:
                    if self.stop_event.wait(max(0.0, min(0.1, when - time.time()))):
                        return
                if time.time() >= schedule_end:
                    now = time.time()
                    log.warning("admin reset %d of %s not run: due at %.1fs, the run's schedule ended", n, g.name,
                                a.at)
                    self.faults.append(Fault("admin_reset_not_run", self.names.group(g.name), m.name, now, now,
                                             {"at": a.at, "reason": "the run's schedule ended before its turn"}))
                    continue
                try:
                    self._admin_reset(admin, n, g, m, a, schedule_end)
                except Exception as exc:  # a reset that fails is recorded, the run goes on
                    log.warning("admin reset %d of %s failed: %s", n, g.name, exc)
                    group = self.names.group(g.name)
                    now = time.time()
                    self.faults.append(Fault("admin_reset_failed", group, m.name, now, now, {"error": str(exc)}))
                finally:
                    (self.parts / f"hold-{self.names.group(g.name)}.json").unlink(missing_ok=True)
        finally:
            admin.close()

    def _admin_reset(self, admin: Any, n: int, g: Any, m: Any, a: Any, schedule_end: float) -> None:
        """One ``admin_reset`` skip (see :class:`lagscope.devtools.sim.model.Action`): stop the group's
        members, wait until the group is empty (and, with a ``size``, for the backlog: at most
        ``wait_s``, and not past ``schedule_end``), reset its offsets to the latest with Kafka's own
        tool, record what each commit replaced, restart them."""
        from kafka import TopicPartition
        from kafka.admin import OffsetSpec

        from lagscope.devtools.broker import run_tool

        group = self.names.group(g.name)
        proc = self.members[(g.name, m.name)]
        held = sorted(self._held(proc, group, m.name))
        if not held:  # the member holds nothing: the group's topics, as its subscription
            held = sorted((self.names.topic(t.name), p) for t in self.sc.topics if t.name in g.topics
                          for p in range(t.partitions))
        targets = held[:1] if a.partitions == "one" else held
        rid = f"{n}"
        live = [self.members[(g.name, mm.name)] for mm in g.members
                if self.members[(g.name, mm.name)].popen.poll() is None]
        hold = self.parts / f"hold-{group}.json"
        tmp = self.parts / f".hold-{group}.tmp"
        tmp.write_text(json.dumps({"id": rid}))
        tmp.replace(hold)
        stopping = time.time()
        deadline = stopping + HOLD_TIMEOUT_S
        while time.time() < deadline and not all(
                (self.parts / f"{p.name}.jsonl.held-{rid}").exists() or p.popen.poll() is not None for p in live):
            if self.stop_event.wait(0.05):
                return
        while time.time() < deadline:
            desc = admin.describe_groups([group]).get(group) or {}
            state = str(desc.get("group_state", desc.get("state", "")))
            if state.lower() in ("empty", "dead"):
                break
            if self.stop_event.wait(0.1):
                return
        else:
            raise ScenarioError(f"group {group} not empty {HOLD_TIMEOUT_S:.0f}s after its members were stopped")
        tps = [TopicPartition(t, p) for t, p in targets]
        if a.size is not None:
            until = min(time.time() + a.wait_s, schedule_end)
            while time.time() < until:
                ends = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
                got = admin.list_group_offsets({group: None})[group]
                backlog = sum(int(ends[tp].offset) - int(got[tp].offset) for tp in tps
                              if got.get(tp) is not None and got[tp].offset >= 0)
                if backlog >= a.size:
                    break
                if self.stop_event.wait(0.05):
                    return
        got = admin.list_group_offsets({group: None})[group]
        before = {tp: int(got[tp].offset) for tp in tps if got.get(tp) is not None and got[tp].offset >= 0}
        topics = sorted({t for t, _ in targets})
        spec = [f"{t}:{','.join(str(p) for tt, p in targets if tt == t)}" for t in topics]
        start = time.time()
        out = run_tool(CONSUMER_GROUP_COMMAND, ["--bootstrap-server", self.bootstrap, "--group", group,
                                                "--reset-offsets", "--to-latest", "--execute",
                                                *[x for sp in spec for x in ("--topic", sp)]], timeout=120)
        end = time.time()
        if out.returncode != 0:
            raise ScenarioError(f"the reset tool failed ({out.returncode}): {out.stderr.strip()[-400:]}")
        after: dict[tuple[str, int], int] = {}
        for line in out.stdout.splitlines():
            f = line.split()
            if len(f) == 4 and f[0] == group and f[2].isdigit() and f[3].lstrip("-").isdigit():
                after[(f[1], int(f[2]))] = int(f[3])
        if not after:
            raise ScenarioError(f"the reset tool printed no new offsets: {out.stdout.strip()[-400:]}")
        for (t, p), o in sorted(after.items()):
            self.tool_commits.append(Commit(group, ADMIN_TOOL, t, p, o, end))
        # what each commit replaced: the committed offset before the reset (the members committed
        # what they had processed when they stopped)
        prev = {(tp.topic, tp.partition): o for tp, o in before.items()}
        skipped = {tp: max(0, o - prev[tp]) for tp, o in after.items() if tp in prev}
        def key(tp: tuple[str, int]) -> str:
            return f"{tp[0]}:{tp[1]}"

        self.faults.append(Fault(
            "skip", group, m.name, start, end,
            {"mechanism": "admin_reset", "partitions": a.partitions, "size": a.size, "state": a.state,
             "before": {key(tp): o for tp, o in prev.items()}, "after": {key(tp): o for tp, o in after.items()},
             "skipped": {key(tp): x for tp, x in skipped.items()}, "stopped": stopping, "reset": rid,
             "tool_s": round(end - start, 3)},
            tuple(sorted(tp for tp, x in skipped.items() if x > 0))))
        log.info("admin reset %s of %s: %s (tool %.1fs)", rid, group, skipped, end - start)

    def _held(self, proc: _Proc, group: str, member: str) -> tuple[tuple[str, int], ...]:
        """The partitions a member held when it was killed, from its truth part so far."""
        part = self.parts / f"{proc.name}.jsonl"
        return held_partitions(read_part(part), group, member) if part.exists() else ()

    def failures(self) -> tuple[str, ...]:
        """Processes that exited with an error; a crash the scenario asked for is no failure."""
        crashed = {p.name for p in self.crashed}
        failed = [p for p in self.procs if p.popen.returncode not in (None, 0) and p.name not in crashed]
        for proc in failed:
            log.warning("%s exited with %s; see %s", proc.name, proc.popen.returncode,
                        self.logs / f"{proc.name}.log")
        return tuple(p.name for p in failed)

    def _cleanup(self, admin: Any) -> None:
        from kafka.errors import KafkaError

        try:
            admin.delete_groups(list(self.names.groups.values()))
            admin.delete_topics(list(self.names.topics.values()), timeout_ms=15000)
        except KafkaError as exc:
            log.warning("cleanup of %s failed: %s", self.names.prefix, exc)


def collect_end_state(admin: Any, names: RunNames, scenario: Scenario, retry_s: float = 30.0) -> EndState:
    """What the broker reports now for the run's partitions (ListOffsets) and groups (OffsetFetch)."""
    from kafka import TopicPartition
    from kafka.admin import OffsetSpec
    from kafka.errors import KafkaError
    from kafka.protocol.consumer.offsets import IsolationLevel

    tps = [TopicPartition(names.topic(t.name), p) for t in scenario.topics for p in range(t.partitions)]
    groups = [names.group(g.name) for g in scenario.groups]
    deadline = time.monotonic() + retry_s
    while True:
        try:
            earliest = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
            latest = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
            stable = admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST),
                                                  isolation_level=IsolationLevel.READ_COMMITTED)
            committed = admin.list_group_offsets(dict.fromkeys(groups)) if groups else {}
            break
        except KafkaError as exc:
            # e.g. the group coordinator still loading on a broker that just started
            if not getattr(exc, "retriable", False) or time.monotonic() > deadline:
                raise KafkaUnavailable(f"cannot read the end state: {exc}") from exc
            log.info("end state not readable yet (%s); retrying", exc)
            time.sleep(0.5)
    parts = tuple(PartitionEnd(tp.topic, tp.partition, int(earliest[tp].offset), int(latest[tp].offset),
                               int(stable[tp].offset)) for tp in tps)
    offs: list[GroupOffset] = []
    for g, table in sorted(committed.items()):
        for tp, om in sorted(table.items()):
            if om is not None and om.offset >= 0:
                offs.append(GroupOffset(g, tp.topic, tp.partition, int(om.offset)))
    return EndState(time.time(), parts, tuple(offs))


class ScenarioRun:
    """A scenario running in a background thread: ``names`` now, ``wait()`` for the result."""

    def __init__(self, scenario: Scenario, bootstrap: str, out_dir: Path, names: RunNames,
                 client_config: dict[str, Any], cleanup: bool, linger_s: float = 0.0) -> None:
        self.scenario = scenario
        self.names = names
        self.out_dir = Path(out_dir)
        self._stop = threading.Event()
        self._result: RunResult | None = None
        self._error: BaseException | None = None
        # an Event, not Thread.join: a join interrupted by Ctrl-C can leave the thread
        # looking finished while it still runs
        self._finished = threading.Event()
        self._runner = _Runner(scenario, bootstrap, self.out_dir, names, client_config, cleanup, self._stop,
                               linger_s)
        self._thread = threading.Thread(target=self._main, name=f"scenario-{names.prefix}", daemon=True)
        self._thread.start()

    @property
    def truth_path(self) -> Path:
        return self.out_dir / "truth.jsonl"

    def _main(self) -> None:
        try:
            self._result = self._runner.run()
        except BaseException as exc:
            self._error = exc
        finally:
            self._finished.set()

    def done(self) -> bool:
        return self._finished.is_set()

    @property
    def t0(self) -> float | None:
        """The run's time origin (epoch s) once its processes are ready; None before."""
        return self._runner.t0

    def stop(self) -> None:
        """End the run early: workers get SIGTERM; the end state and the truth are still written."""
        self._stop.set()

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run is over; returns its result or raises its error.

        Ctrl-C while waiting raises KeyboardInterrupt; call ``stop()`` and ``wait()`` again.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._finished.wait(0.2):
            if deadline is not None and time.monotonic() > deadline:
                raise ScenarioError(f"scenario {self.scenario.name} still running after {timeout}s")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def start_scenario(scenario: str | Path | Scenario, bootstrap: str, out_dir: str | Path, *,
                   run_id: str | None = None, client_config: dict[str, Any] | None = None,
                   cleanup: bool = False, seed: int | None = None, linger_s: float = 0.0) -> ScenarioRun:
    """Start a run in the background (see the module docstring); returns at once.

    ``client_config``: extra kafka-python settings for every client (e.g. SASL/TLS).
    ``cleanup``: delete the run's topics and groups after the end state is recorded.
    ``seed``: the seed of the run's timings, rates and send jitter (default: the scenario's
    ``seed``); ``ScenarioRun.scenario`` is the schedule it drew (:func:`model.randomise`).
    ``linger_s``: the members go on consuming this long after the schedule ends (the producers
    stop with it, the schedule is unchanged), unless ``stop()`` comes first: ``lagscope demo``
    stops its run once the analytics have covered the schedule, so that the run's own end (every
    member leaving its group) is not in the minutes it judges.
    """
    sc = randomise(load_scenario(scenario), seed)
    extra = {k: v for k, v in (client_config or {}).items() if k != "bootstrap_servers"}
    return ScenarioRun(sc, bootstrap, Path(out_dir), plan_names(sc, run_id), extra, cleanup, linger_s)


def run_scenario(scenario: str | Path | Scenario, bootstrap: str, out_dir: str | Path, *,
                 run_id: str | None = None, client_config: dict[str, Any] | None = None,
                 cleanup: bool = False, seed: int | None = None) -> RunResult:
    """Run a scenario to its end and return its result (KeyboardInterrupt ends it early, cleanly)."""
    run = start_scenario(scenario, bootstrap, out_dir, run_id=run_id, client_config=client_config,
                         cleanup=cleanup, seed=seed)
    try:
        return run.wait()
    except KeyboardInterrupt:
        run.stop()
        return run.wait()
