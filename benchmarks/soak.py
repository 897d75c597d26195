"""The fault-injection soak of ``lagscope run`` (issue 26 items 2–4): what the production process
survives, with figures, and proof that nothing is lost.

    flock /tmp/lagscope-heavy.lock .venv/bin/python benchmarks/soak.py --minutes 30 --seed 26 \\
        --report benchmarks/results/soak.md

Runs as root (it mounts a tmpfs for the lake). What runs, all on 127.0.0.1:

- a local Kafka broker (:class:`lagscope.devtools.broker.LocalBroker`, one ``__consumer_offsets``
  partition);
- ``lagscope run`` as a subprocess, supervised by this script (restarted at once when it dies, as
  systemd's ``Restart=always`` would): the collector sweeping every ``--sweep-interval`` seconds
  with the ``__consumer_offsets`` tail, the analytics loop (Spark ``local[2]``) every
  ``--analytics-interval`` seconds, the findings' metrics on the collector's ``/metrics``, and the
  alerts every ``--alerts-interval`` seconds to a real webhook receiver
  (:class:`lagscope.devtools.sink.WebhookSink`, in this process);
- the lake on a small tmpfs mounted for the run, the results and the outbox on the disk;
- simulator scenarios (``--scenario``, ``demo`` by default: a crash, a stall, a rewind, a slow
  group and a burst) one after another for the whole run, each with its own seed drawn from
  ``--seed``, their topics and groups deleted after each (``cleanup``).

At random points drawn from ``--seed`` (the schedule is printed and recorded) it injects, one at
a time, each followed by a wait of one analytics interval for the recovery:

- ``kill``: SIGKILL of the ``lagscope run`` process (×10 in 30 min, scaled for shorter runs),
  then of the Spark JVM it started if that outlived it (a supervisor's cgroup kill), and a restart;
- ``broker``: the broker stopped (SIGTERM) and started again on the same port;
- ``bad_files``: a truncated copy of a real file (``head -c 100``) and a garbage file dropped into
  the lake (``offsets``) and into the results (``lag_trends``), named as their siblings;
- ``disk_full``: the lake's tmpfs filled with a ballast file for a minute (scaled), then freed;
- ``engine``: the analytics' Spark JVM (a child of ``lagscope run``, found in the process tree)
  killed with SIGKILL while it computes (its CPU time moving);

and, in a lane of its own, ``receiver``: the webhook receiver down for five minutes (scaled),
and on while no notification waits for it (up to twice that: :func:`hold_receiver`).

When the time is up, no fault is injected any more, and the run goes on until the recovery of
every fault has been seen (:func:`end_wait`: the analytics' results or step after it, the bad
files quarantined), for at most one analytics step (allowed one interval), one interval and
:data:`END_MARGIN_S` after that fault's end; the fault plan itself is not lengthened. Then the
scenario in progress is stopped, the tail drains, the outbox drains,
``lagscope run`` gets SIGTERM, the lake is copied off the tmpfs (always unmounted, in a
``finally``), and the checks run:

- **recovery**: after each fault, the first successful sweep that started after it ended (from
  the lake's ``sweeps`` table) and the first result file the analytics wrote after it ended
  (polled), each within one interval of its loop; after the receiver's outage, the backlog of
  webhooks delivered;
- **results**: every result table but ``advice`` (rewritten whole by each step) equals, row for
  row as ``tests/analytics/test_analytics_job.py`` compares them (``lag_trends`` and ``status``
  whole rows; ``anomalies`` and ``rebalances`` their current rows without ``as_of_ts``), those of
  a clean ``lagscope analyze --incremental`` over the same lake (the quarantined files are
  already moved aside) from the live run's first step to the live checkpoint's watermark: the
  minutes the live pipeline has finalised;
- **commits**: every commit the simulator's truth says the coordinator acknowledged is a row of
  the lake's ``commits`` (a multiset match on group, topic, partition, offset): lost 0; no
  ``__consumer_offsets`` record is in the lake twice (by ``source_partition``,
  ``source_offset``): duplicates 0;
- **alerts**: every notification in the outbox was delivered, none is pending or dead, each
  idempotency key reached the receiver exactly once, and no key the outbox lacks arrived;
- **quarantine**: exactly the files dropped are in ``_quarantine`` (no real file went there);
- **memory**: the RSS of the ``lagscope run`` process (and of its Spark JVM) sampled every 2 s, the
  slope of a least-squares line through it, per life of the process and over the whole run.

The Markdown report goes to ``--report`` (or stdout); ``--json`` keeps every figure.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime as dt
import errno
import itertools
import json
import logging
import math
import os
import platform
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lagscope.devtools.spark_standalone import pid_alive

log = logging.getLogger("soak")

LAGSCOPE = [sys.executable, "-m", "lagscope"]
CLUSTER = "soak"
ROUTE = "soak-receiver"
#: the tables compared with the clean analysis (advice: every step rewrites it whole)
COMPARED = ("lag_trends", "status", "anomalies", "rebalances")
EVENT_TABLES = {"anomalies": ("key",), "rebalances": ("cluster", "group_id", "start_ts")}
KINDS = ("kill", "broker", "bad_files", "disk_full", "engine", "receiver")
#: the faults that stop the analytics' engine: after them, the step that resumes the analytics
#: must also be one the new engine finished (its results written); after the others, which
#: leave the steps going, the next step beginning is the recovery (:func:`analytics_back`)
ENGINE_FAULTS = ("kill", "engine")
#: a loop's own scheduling (start to start, on a busy machine)
SWEEP_JITTER_S = 0.5
#: the verdict of an anomalies table whose episodes all match but some were judged differently
RECLASSIFIED = "anomalies judged again by later steps"
#: the run's end waits for the last faults' recoveries up to one analytics step (allowed one
#: interval) + one interval + this after the fault's end (:func:`end_wait`)
END_MARGIN_S = 10.0


# ------------------------------------------------------------------------------------------
# options and the schedule


@dataclass
class SoakOptions:
    workdir: Path
    minutes: float = 30.0
    seed: int = 26
    scenario: str = "demo"
    sweep_interval_s: float = 5.0
    analytics_interval_s: float = 30.0
    alerts_interval_s: float = 5.0
    tmpfs_mb: int = 256
    #: overrides of the scaled counts and durations (None: scaled from ``minutes``)
    kills: int | None = None
    disk_full_s: float | None = None
    receiver_down_s: float | None = None
    #: False: no fault at all (``--no-faults``): one life of the process, for its memory over time
    faults: bool = True
    #: True (``--steady``): one run of the scenario for the whole soak (its duration stretched to the
    #: run's), so the groups and topics are the same from start to end; else runs of a minute back
    #: to back, each with new groups and topics
    steady: bool = False
    #: seconds between the samples of ``benchmarks/memtrace.py`` (``--trace-memory``): lagscope run
    #: under tracemalloc, its memory by source line into ``<workdir>/memtrace``; None: not traced
    trace_memory_s: float | None = None
    #: the analytics' ``forget_after_s`` (``--forget-after-s``; None: the default, an hour): the
    #: silence after which a deleted group's partitions leave the carried state, so the memory of a
    #: workload whose groups come and go levels off after it
    forget_after_s: float | None = None
    #: variables added to the environment of ``lagscope run`` only (``--run-env KEY=VALUE``): an
    #: allocator's settings to compare memory side by side (``MALLOC_ARENA_MAX``,
    #: ``ARROW_DEFAULT_MEMORY_POOL``), without changing the broker's or the harness's
    run_env: dict[str, str] = field(default_factory=dict)


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings as a dict; a string without ``=`` or with an empty or non-identifier
    key is a :class:`ValueError` that names it."""
    out: dict[str, str] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.isidentifier():
            raise ValueError(f"--run-env wants KEY=VALUE, got {item!r}")
        out[key] = value
    return out


@dataclass
class Planned:
    kind: str
    #: seconds after the run's start (lane A: the gap before it, from the previous fault's recovery)
    at_s: float
    duration_s: float = 0.0


def scaled(opts: SoakOptions) -> tuple[int, float, float]:
    """(kills, disk full s, receiver down s): 10, 60 s and 300 s for 30 minutes, scaled down."""
    scale = opts.minutes / 30.0
    kills = opts.kills if opts.kills is not None else max(1, round(10 * scale))
    disk = opts.disk_full_s if opts.disk_full_s is not None else (60.0 if opts.minutes >= 15 else 20.0)
    receiver = opts.receiver_down_s if opts.receiver_down_s is not None else max(30.0, min(300.0, 300.0 * scale))
    return kills, disk, receiver


#: the longest a simulator scenario may last (its model's bound)
SCENARIO_MAX_S = 3600.0


def steady_scenario(name: str, opts: SoakOptions) -> Any:
    """The scenario ``name`` stretched to the whole soak (``--steady``): its duration the run's
    length plus two minutes for the drain (at most an hour, the simulator's bound), everything else
    as the file says: its faults happen once, in its first minute, then its groups keep consuming
    what its producers keep sending, the same groups and topics to the end."""
    from lagscope.devtools.sim.runner import load_scenario

    sc = load_scenario(name)
    return sc.model_copy(update={"duration": min(SCENARIO_MAX_S, max(sc.duration, opts.minutes * 60.0 + 120.0))})


def plan(opts: SoakOptions) -> tuple[list[Planned], Planned | None]:
    """The faults of lane A in order, each with the random gap before it, and the receiver's outage
    (none of either without faults).

    Lane A's faults stop sweeps or analytics: one at a time, each followed by one analytics
    interval for its recovery (plus its own duration and the broker's restart). The slack left in
    the run is shared out at random (from the seed) between the gaps."""
    if not opts.faults:
        return [], None
    rng = random.Random(opts.seed)
    kills, disk_s, receiver_s = scaled(opts)
    lane = [Planned("kill", 0.0) for _ in range(kills)]
    lane += [Planned("broker", 0.0, 8.0), Planned("bad_files", 0.0), Planned("disk_full", 0.0, disk_s),
             Planned("engine", 0.0)]
    rng.shuffle(lane)
    total = opts.minutes * 60.0
    warmup = opts.analytics_interval_s + 20.0  # a first step done before the first fault
    cooldown = opts.analytics_interval_s + 5.0
    needed = sum(p.duration_s + opts.analytics_interval_s + 5.0 for p in lane)
    slack = total - warmup - cooldown - needed
    if slack < 0:
        raise SystemExit(f"{opts.minutes:g} min cannot hold {len(lane)} faults with their recoveries "
                         f"({needed + warmup + cooldown:.0f} s needed): lengthen --minutes or shorten the intervals")
    cuts = sorted(rng.uniform(0, slack) for _ in lane)
    prev = 0.0
    for p, cut in zip(lane, cuts, strict=True):
        p.at_s = cut - prev  # the random part of the gap before it
        prev = cut
    lane[0].at_s += warmup
    latest = max(warmup, total - receiver_s - cooldown - 10.0)
    receiver = Planned("receiver", rng.uniform(warmup, latest), receiver_s)
    return lane, receiver


# ------------------------------------------------------------------------------------------
# processes


def free_port() -> int:
    from lagscope.devtools.broker import free_port as fp

    return int(fp())


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        kids[ppid].append(int(entry.name))
    return kids


def descendants(pid: int) -> list[int]:
    kids, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def spark_jvms(pid: int) -> list[int]:
    """The Spark JVMs (spark-submit's java, pyspark's gateway) under ``pid``."""
    return [c for c in descendants(pid) if "java" in _cmdline(c).split(" ", 1)[0] and "spark" in _cmdline(c).lower()]


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def cpu_ticks(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


class Supervised:
    """``lagscope run`` under a supervisor: started, watched, restarted when it dies."""

    def __init__(self, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.argv, self.env, self.log_path = argv, env, log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.lives: list[dict[str, Any]] = []
        self.unexpected_exits: list[dict[str, Any]] = []
        self.lock = threading.RLock()
        self._expect_exit = False

    def start(self) -> float:
        with self.lock:
            fh = self.log_path.open("ab")
            try:
                self.proc = subprocess.Popen(self.argv, env=self.env, stdout=fh, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, start_new_session=True)
            finally:
                fh.close()
            began = time.time()
            self.lives.append({"pid": self.proc.pid, "start": began, "end": None, "how": None})
            self._expect_exit = False
            log.info("lagscope run started (pid %d)", self.proc.pid)
            return began

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def kill(self) -> dict[str, Any]:
        """SIGKILL the process; then the Spark JVMs it started, if they outlive it (as a cgroup's
        kill would). Returns what happened."""
        with self.lock:
            assert self.proc is not None
            self._expect_exit = True
            jvms = spark_jvms(self.proc.pid)
            killed_at = time.time()
            self.proc.kill()
            self.proc.wait(timeout=30)
            self.lives[-1].update(end=killed_at, how="SIGKILL")
            deadline = time.time() + 5.0
            while time.time() < deadline and any(pid_alive(j) for j in jvms):
                time.sleep(0.1)
            orphans = [j for j in jvms if pid_alive(j)]
            for j in orphans:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(j, signal.SIGKILL)
            return {"killed_at": killed_at, "jvms": jvms, "orphans_after_5s": orphans}

    def check(self) -> float | None:
        """Restart the process if it exited on its own; the restart time, else None."""
        with self.lock:
            if self.proc is None or self._expect_exit or self.proc.poll() is None:
                return None
            code = self.proc.returncode
            now = time.time()
            self.lives[-1].update(end=now, how=f"exit {code}")
            self.unexpected_exits.append({"at": now, "code": code})
            log.warning("lagscope run exited on its own (code %s): restarting it", code)
            return self.start()

    def terminate(self, timeout: float = 180.0) -> int | None:
        with self.lock:
            if self.proc is None:
                return None
            self._expect_exit = True
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    log.error("lagscope run did not stop within %.0f s of SIGTERM: killing it", timeout)
                    self.proc.kill()
                    self.proc.wait(timeout=30)
            self.lives[-1].update(end=time.time(), how=f"SIGTERM → exit {self.proc.returncode}")
            for j in spark_jvms(self.proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(j, signal.SIGKILL)
            return self.proc.returncode


# ------------------------------------------------------------------------------------------
# the lake's filesystem


def mount_tmpfs(where: Path, size_mb: int) -> None:
    where.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0755", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"cannot mount a tmpfs at {where} (the soak runs as root): {done.stderr.strip()}")


def unmount(where: Path) -> None:
    done = subprocess.run(["umount", str(where)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        log.warning("umount %s: %s; unmounting lazily", where, done.stderr.strip())
        subprocess.run(["umount", "-l", str(where)], capture_output=True, text=True, check=False)


def fill(path: Path) -> int:
    """Write zeros into ``path`` until the filesystem is full; the bytes written."""
    chunk = b"\0" * (1 << 20)
    n = 0
    with path.open("wb") as fh:
        while True:
            try:
                fh.write(chunk)
                fh.flush()
                n += len(chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    # the last partial chunk's bytes
    return path.stat().st_size if path.exists() else n


# ------------------------------------------------------------------------------------------
# live observation


def metrics_text(port: int) -> str:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as resp:
            return str(resp.read().decode())
    except (urllib.error.URLError, OSError, TimeoutError):
        return ""


def metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            try:
                return float(line.rsplit(" ", 1)[1])
            except ValueError:
                return None
    return None


class Watcher:
    """Polls the results folder (new result files, with their mtimes) and samples the RSS."""

    def __init__(self, results: Path, run: Supervised, dropped: list[dict[str, Any]]) -> None:
        self.results, self.run, self.dropped = results, run, dropped
        self.files: dict[str, float] = {}
        self.rss: list[tuple[float, int, float, float]] = []  # (t, pid, python MB, JVMs MB)
        self.load: list[tuple[float, float]] = []  # (t, the 1-minute load average)
        #: (t, {state part: [rows, groups]}) every STATE_EVERY_S: the analytics' carried state
        self.state: list[tuple[float, dict[str, list[int]]]] = []
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="soak-watcher", daemon=True)
        self.restarts: list[float] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self._thread.join(10)

    def _scan(self) -> None:
        if not self.results.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(self.results):
            dirnames[:] = [d for d in dirnames if not d.startswith("_") and not d.startswith(".")]
            for name in filenames:
                if name.endswith(".parquet") and not name.startswith("."):
                    p = os.path.join(dirpath, name)
                    if p not in self.files:
                        with contextlib.suppress(OSError):
                            self.files[p] = os.stat(p).st_mtime

    def _loop(self) -> None:
        last_rss = last_state = 0.0
        while not self.stopping.wait(0.5):
            restarted = self.run.check()
            if restarted is not None:
                self.restarts.append(restarted)
            with contextlib.suppress(OSError):
                self._scan()
            now = time.time()
            for d in list(self.dropped):  # a dropped bad file gone from its place: quarantined
                if "quarantined_at" not in d and not os.path.exists(d["path"]):
                    d["quarantined_at"] = now
            if now - last_state >= STATE_EVERY_S:
                last_state = now
                held = state_rows(self.results)
                if held is not None:
                    self.state.append((now, held))
            if now - last_rss >= 2.0:
                last_rss = now
                self.load.append((now, os.getloadavg()[0]))
                pid = self.run.pid
                if pid is not None and pid_alive(pid):
                    py = rss_mb(pid)
                    jvm = sum(rss_mb(j) or 0.0 for j in spark_jvms(pid))
                    if py is not None:
                        self.rss.append((now, pid, py, jvm))

    def first_result_after(self, t: float, prefix: str = "") -> float | None:
        after = [m for p, m in self.files.items() if m > t and os.path.basename(p).startswith(prefix)]
        return min(after) if after else None

    def first_step_after(self, t: float, settle_s: float) -> float | None:
        """When the first analytics step that began after ``t`` read the lake, from the line each
        step writes to the analytics' trace (``analytics step began …``, in the results'
        ``_logs/pyspark.log``; lagscope.deploy.run): its provisional end plus ``settle_s`` (the
        collector's interval, by which that end trails the step's start), which held sweeps keep
        earlier: a step stopped at sweeps held since before ``t`` has not seen past the fault.

        Not from the provisional files' names: a step in the first ``settle_s`` of a minute writes
        none (its full step already reached the minute's start, past its provisional end)."""
        began = [b if pre is None else pre + settle_s for b, pre in step_ends(self.results / "_logs" / "pyspark.log")]
        after = [b for b in began if b >= t]
        return min(after) if after else None


#: how often the watcher counts the analytics' carried state (s)
STATE_EVERY_S = 60.0


def state_rows(results: Path) -> dict[str, list[int]] | None:
    """The analytics' carried state that the live checkpoint names (``<results>/_state``): per
    part, its rows and its groups (None when there is none yet, or a step replaced it while read)."""
    import pyarrow.parquet as pq

    root = results / "_state"
    try:
        held = root / json.loads((root / "checkpoint.json").read_text())["version"]
        out: dict[str, list[int]] = {}
        for part in sorted(held.iterdir()):
            rows, groups = 0, set()
            for f in part.glob("*.parquet"):
                pf = pq.ParquetFile(f)
                rows += pf.metadata.num_rows
                if "group_id" in pf.schema_arrow.names:
                    groups.update(pf.read(columns=["group_id"]).column("group_id").to_pylist())
            out[part.name] = [rows, len(groups)]
        return out
    except (OSError, ValueError, KeyError, TypeError):
        return None


def state_growth(samples: list[list[Any]], lives: list[dict[str, Any]], settled_after_s: float) -> dict[str, Any]:
    """Of the longest life's samples of :func:`state_rows` from its settled start on: per part,
    rows and groups at that start, their largest and at the end (a part whose groups grow with
    every group ever seen keeps growing; a bounded one levels off)."""
    def within(x: dict[str, Any]) -> list[tuple[float, dict[str, list[int]]]]:
        return [(t, held) for t, held in samples if x["start"] <= t <= (x.get("end") or math.inf)]

    life = max(lives, key=lambda x: len(within(x)), default=None)
    if life is None:
        return {}
    xs = [(t, held) for t, held in within(life) if t >= life["start"] + settled_after_s]
    if not xs:
        return {}
    parts = sorted({k for _, held in xs for k in held})
    out: dict[str, Any] = {"from_min": round((xs[0][0] - life["start"]) / 60.0, 1),
                           "to_min": round((xs[-1][0] - life["start"]) / 60.0, 1), "parts": {}}
    for k in parts:
        got = [held.get(k, [0, 0]) for _, held in xs]
        out["parts"][k] = {"rows": [got[0][0], max(g[0] for g in got), got[-1][0]],
                           "groups": [got[0][1], max(g[1] for g in got), got[-1][1]]}
    return out


_STEP_LINE = re.compile(r"analytics step began (\S+): full step until \S+(?: \([^)]*\))?, provisional until (\S+)")


def step_ends(trace_log: Path) -> list[tuple[float, float | None]]:
    """Each analytics step's start and provisional end (epoch s; None without provisional steps),
    from its trace line."""
    try:
        text = trace_log.read_text(errors="replace")
    except OSError:
        return []
    out = []
    for m in _STEP_LINE.finditer(text):
        began, pre = m.groups()
        out.append((dt.datetime.fromisoformat(began).timestamp(),
                    None if pre == "-" else dt.datetime.fromisoformat(pre).timestamp()))
    return out


# ------------------------------------------------------------------------------------------
# the soak


@dataclass
class FaultRecord:
    kind: str
    start: float
    end: float
    detail: dict[str, Any] = field(default_factory=dict)
    sweep_recovery_s: float | None = None
    analytics_recovery_s: float | None = None
    alerts_recovery_s: float | None = None
    quarantine_s: float | None = None


@dataclass
class SoakResult:
    opts: dict[str, Any]
    began: float
    ended: float
    load_start: tuple[float, float, float]
    load_end: tuple[float, float, float]
    faults: list[FaultRecord]
    schedule: list[dict[str, Any]]
    lives: list[dict[str, Any]]
    unexpected_exits: list[dict[str, Any]]
    scenarios: list[dict[str, Any]]
    watermark: str | None
    first_step_start: str | None
    commits: dict[str, Any]
    alerts: dict[str, Any]
    quarantine: dict[str, Any]
    results: dict[str, Any]
    rss: dict[str, Any]
    problems: list[str]
    logs: dict[str, str]
    #: the 1-minute load average sampled over the run: mean, max, seconds above QUIET_LOAD
    load_during: dict[str, Any] = field(default_factory=dict)
    #: seconds the run went on past its planned minutes for the last faults' recoveries
    end_waited_s: float = 0.0
    #: the RSS samples ``rss`` was fitted to, ``[t, pid, python_mb, jvm_mb]`` (kept so that a
    #: report rendered again with ``--from-json`` fits them again, with that code's analysis)
    rss_samples: list[list[float]] = field(default_factory=list)
    #: where each life's settled window starts (s after its start)
    settled_after_s: float = 0.0
    #: the watcher's samples of the analytics' carried state, ``[t, {part: [rows, groups]}]``
    state_samples: list[list[Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Soak:
    def __init__(self, opts: SoakOptions) -> None:
        self.o = opts
        self.work = Path(opts.workdir)
        self.mnt = self.work / "lakefs"
        self.lake = self.mnt / "lake"
        self.results = self.work / "results"
        self.outbox = self.work / "alerts-outbox.sqlite"
        self.hooks = self.work / "webhooks.jsonl"
        self.config = self.work / "lagscope.yaml"
        self.sims = self.work / "sim"
        self.rng = random.Random(opts.seed)
        self.faults: list[FaultRecord] = []
        self.scenarios: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []
        self.problems: list[str] = []
        self.stopping = threading.Event()
        #: set at the planned end: no fault is injected after it (the run waits for recoveries)
        self.no_more_faults = threading.Event()
        #: seconds the end waited past the planned minutes for the faults' recoveries
        self.end_waited_s = 0.0
        self.broker: Any = None
        self.sink: Any = None
        self.sink_lock = threading.Lock()
        self.run: Supervised | None = None
        self.watcher: Watcher | None = None

    # -- set-up ---------------------------------------------------------------------------
    def _settings(self, bootstrap: str, sink_url: str, metrics_port: int) -> dict[str, Any]:
        return {
            "clusters": [{"name": CLUSTER, "bootstrap_servers": [bootstrap], "groups": {"include": ["sim-.*"]},
                          "consumer_offsets_tail": {"enabled": True}}],
            "collector": {"interval_s": self.o.sweep_interval_s, "lake": str(self.lake),
                          "request_timeout_ms": 3000},
            "metrics": {"bind": "127.0.0.1", "port": metrics_port},
            "analytics": {"master": "local[2]", "interval_s": self.o.analytics_interval_s, "shuffle_partitions": 2,
                          "backfill": "10m", "session_timeout_s": 10.0,
                          "rules": self._rules()},
            "alerts": {"routes": [{"name": ROUTE, "url": f"{sink_url}/{ROUTE}", "timeout_s": 5}]},
        }

    def _rules(self) -> dict[str, Any]:
        """The run's analytics rules: the demo's thresholds (scenarios of a minute), with ``--forget-after-s``."""
        from lagscope.devtools.demo import DEMO_RULES

        return {**DEMO_RULES, **({} if self.o.forget_after_s is None else {"forget_after_s": self.o.forget_after_s})}

    def _forget_horizon_s(self) -> float:
        """The silence after which the run's analytics forget a partition (its rules')."""
        from lagscope.config import AnalyticsRulesConfig

        return AnalyticsRulesConfig(**self._rules()).forget_horizon_s()

    def _settled_after_s(self) -> float:
        """Where a life's settled window starts: every bounded hold has filled by then. The
        longest of the analytics' forget horizon (after a partition's last sweep), the alerts'
        ``lookback_s`` (the long-lived reader keeps an ended finding that long) and the results
        exporter's :data:`~lagscope.analytics.results_metrics.HOLD_CLOSED_S` (a closed event held
        as a record that long), with :data:`SETTLE_MARGIN_S` for a scenario's run and the first
        steps after the start."""
        from lagscope.analytics.results_metrics import HOLD_CLOSED_S
        from lagscope.config import AlertsConfig

        lookback = AlertsConfig(**yaml.safe_load(self.config.read_text()).get("alerts", {})).lookback_s
        return max(self._forget_horizon_s(), lookback, HOLD_CLOSED_S) + SETTLE_MARGIN_S

    def _start_sink(self, port: int = 0) -> None:
        from lagscope.devtools.sink import WebhookSink

        deadline = time.time() + 30
        while True:
            try:
                self.sink = WebhookSink(self.hooks, port=port).start()
                return
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)

    def _warm_offsets_topic(self, bootstrap: str) -> None:
        """Create ``__consumer_offsets`` (a commit of a group outside the filter) before the tail
        starts: the tail then starts on a topic that exists."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.create_topics([NewTopic("soak-warmup", 1, 1)])
            deadline = time.monotonic() + 120
            while True:
                try:
                    admin.alter_group_offsets("soak-warmup", {TopicPartition("soak-warmup", 0):
                                                              OffsetAndMetadata(0, "", -1)})
                    return
                except KafkaError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        finally:
            admin.close()

    # -- the scenarios ----------------------------------------------------------------------
    def _scenarios(self, bootstrap: str) -> None:
        from lagscope.devtools.sim.runner import start_scenario

        i = 0
        scenario = steady_scenario(self.o.scenario, self.o) if self.o.steady else self.o.scenario
        while not self.stopping.is_set():
            i += 1
            seed = self.rng.randrange(1, 10**6)
            out = self.sims / f"{i:03d}"
            rec: dict[str, Any] = {"n": i, "seed": seed, "out": str(out), "start": time.time()}
            self.scenarios.append(rec)
            try:
                # steady: a run cut short (an error) starts again under the same names
                run = start_scenario(scenario, bootstrap, out, seed=seed, cleanup=True,
                                     run_id=f"steady{self.o.seed}" if self.o.steady else None)
                rec["prefix"] = run.names.prefix
                while not run.done():
                    if self.stopping.wait(0.5):
                        run.stop()
                        break
                result = run.wait(timeout=180)
                rec.update(end=time.time(), stopped_early=result.stopped_early, failures=list(result.failures))
            except Exception as exc:  # a broker outage during the set-up or the end state
                rec.update(end=time.time(), error=f"{type(exc).__name__}: {exc}"[:300])
                log.warning("scenario %d: %s", i, rec["error"])
                self.stopping.wait(2.0)

    # -- the faults ---------------------------------------------------------------------------
    def _wait_until(self, t: float, also: threading.Event | None = None) -> bool:
        """Sleep until ``t``; False when stopped first (or ``also`` was set)."""
        while time.time() < t:
            if self.stopping.wait(min(0.5, t - time.time())) or (also is not None and also.is_set()):
                return False
        return True

    def _fault_kill(self) -> FaultRecord:
        assert self.run is not None
        info = self.run.kill()
        restarted = self.run.start()
        return FaultRecord("kill", info["killed_at"], restarted,
                           {"jvms": len(info["jvms"]), "orphan_jvms": len(info["orphans_after_5s"])})

    def _fault_broker(self, down_s: float) -> FaultRecord:
        began = time.time()
        self.broker.stop()
        time.sleep(down_s)
        self.broker.start()
        return FaultRecord("broker", began, time.time(), {"down_s": down_s})

    def _fault_engine(self) -> FaultRecord:
        """SIGKILL the Spark JVM while it computes: its CPU time moving by 20 ticks in 0.5 s."""
        assert self.run is not None
        deadline = time.time() + 3 * self.o.analytics_interval_s
        while time.time() < deadline:
            pid = self.run.pid
            jvms = spark_jvms(pid) if pid else []
            if jvms:
                before = {j: cpu_ticks(j) or 0 for j in jvms}
                time.sleep(0.5)
                busy = [j for j in jvms if (cpu_ticks(j) or 0) - before[j] >= 20]
                if busy:
                    at = time.time()
                    for j in busy:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(j, signal.SIGKILL)
                    return FaultRecord("engine", at, at, {"pid": busy[0], "busy": True})
            else:
                time.sleep(0.5)
        pid = self.run.pid
        jvms = spark_jvms(pid) if pid else []
        at = time.time()
        for j in jvms:
            with contextlib.suppress(ProcessLookupError):
                os.kill(j, signal.SIGKILL)
        return FaultRecord("engine", at, at, {"pid": jvms[0] if jvms else None, "busy": False})

    def _newest(self, folder: Path, prefix: str = "") -> Path | None:
        files = sorted((p for p in folder.rglob("*.parquet") if "_quarantine" not in p.parts and
                        not any(x.startswith(("_", ".")) for x in p.relative_to(folder).parts)
                        and p.name.startswith(prefix)), key=lambda p: p.stat().st_mtime)
        return files[-1] if files else None

    def _fault_bad_files(self) -> FaultRecord:
        at = time.time()
        made: list[str] = []
        for root, table in ((self.lake, "offsets"), (self.results, "lag_trends")):
            src = self._newest(root / table, "" if table == "offsets" else "inc-")
            if src is None:
                self.problems.append(f"bad_files: no {table} file to copy a name from")
                continue
            stem = src.name[: -len(".parquet")]
            for kind, body in (("truncated", src.read_bytes()[:100]), ("garbage", b"this is not parquet\n" * 20)):
                if table == "offsets":
                    name = f"{stem[:-8]}{self.rng.randrange(16**8):08x}.parquet"
                else:  # a result file of the same (visible) step, another number
                    name = re.sub(r"-(\d+)$", f"-{90000 + len(made):05d}", stem) + ".parquet"
                dest = src.parent / name
                tmp = src.parent / f".{name}.tmp"
                tmp.write_bytes(body)
                tmp.replace(dest)
                made.append(str(dest))
                self.dropped.append({"path": str(dest), "root": str(root), "table": table, "kind": kind, "at": at})
        return FaultRecord("bad_files", at, at, {"files": made})

    def _fault_disk_full(self, hold_s: float) -> FaultRecord:
        ballast = self.mnt / "ballast"
        began = time.time()
        written = fill(ballast)
        time.sleep(max(0.0, hold_s - (time.time() - began)))
        ballast.unlink()
        return FaultRecord("disk_full", began, time.time(), {"ballast_mb": round(written / 2**20, 1)})

    def _receiver_lane(self, p: Planned, t0: float) -> None:
        if not self._wait_until(t0 + p.at_s):
            return
        with self.sink_lock:
            port = self.sink.port
            self.sink.stop()
        began = time.time()
        log.info("fault receiver: down for %.0f s (longer while no notification waits)", p.duration_s)
        down = hold_receiver(lambda: _outbox_pending(self.outbox), p.duration_s, self.stopping)
        with self.sink_lock:
            self._start_sink(port)
        self.faults.append(FaultRecord("receiver", began, time.time(),
                                       {"down_s": p.duration_s, "held_s": round(down - p.duration_s, 1)}))
        log.info("fault receiver: back")

    def _lane(self, lane: list[Planned], t0: float) -> None:
        when = t0
        for p in lane:
            when += p.at_s
            if not self._wait_until(when, also=self.no_more_faults) or self.no_more_faults.is_set():
                return
            log.info("fault %s", p.kind)
            try:
                if p.kind == "kill":
                    rec = self._fault_kill()
                elif p.kind == "broker":
                    rec = self._fault_broker(p.duration_s)
                elif p.kind == "engine":
                    rec = self._fault_engine()
                elif p.kind == "bad_files":
                    rec = self._fault_bad_files()
                elif p.kind == "disk_full":
                    rec = self._fault_disk_full(p.duration_s)
                else:
                    raise ValueError(p.kind)
            except Exception as exc:
                log.exception("fault %s failed", p.kind)
                self.problems.append(f"fault {p.kind} could not be injected: {exc}")
                continue
            self.faults.append(rec)
            log.info("fault %s done (%.1f s)", p.kind, rec.end - rec.start)
            # its recovery: one analytics interval (+5 s) before the next fault's random gap
            when = time.time() + self.o.analytics_interval_s + 5.0

    # -- the end ------------------------------------------------------------------------------
    def _seen(self, f: FaultRecord) -> bool:
        assert self.watcher is not None
        w = self.watcher
        return recovery_seen(f, w.first_result_after, lambda t: w.first_step_after(t, self.o.sweep_interval_s),
                             self.dropped)

    def _wait_for_recoveries(self, lanes: list[threading.Thread]) -> None:
        """At the planned end: no more faults (the one in progress finishes, the receiver's
        outage too); the run goes on until every fault's recovery has been seen, bounded
        (:func:`end_wait`)."""
        self.no_more_faults.set()
        planned_end = time.time()
        for lane in lanes:
            lane.join(240)
        said = False
        while (until := end_wait(list(self.faults), self._seen, self.o.analytics_interval_s, time.time())) is not None:
            if not said:
                log.info("the end waits for the recovery of the last fault(s), until %s at most", _hms(until))
                said = True
            if self.stopping.wait(min(1.0, max(0.0, until - time.time()))):
                break
        self.end_waited_s = round(time.time() - planned_end, 1)

    def _drain(self, port: int, timeout: float = 60.0) -> None:
        """Wait for the tail to have read everything and the outbox to be empty."""
        deadline = time.time() + timeout
        zero = 0
        while time.time() < deadline:
            lag = metric(metrics_text(port), "lagscope_commitlog_lag_records")
            zero = zero + 1 if lag == 0 else 0
            if zero >= 3:
                break
            time.sleep(1.0)
        else:
            self.problems.append("the tail did not drain within the end's wait")
        # the tail has read the records; one more flush interval puts them in the lake
        time.sleep(max(2.0, self.o.sweep_interval_s))
        while time.time() < deadline + 60:
            pending = _outbox_pending(self.outbox)
            if pending == 0:
                return
            time.sleep(1.0)
        self.problems.append("the outbox still had pending notifications at the end")

    # -- the whole run ------------------------------------------------------------------------
    def execute(self) -> SoakResult:
        from lagscope.devtools.broker import LocalBroker

        self.work.mkdir(parents=True, exist_ok=True)
        load_start = os.getloadavg()
        lane, receiver = plan(self.o)
        schedule = [dataclasses.asdict(p) for p in [*lane, *([receiver] if receiver else [])]]
        log.info("schedule (seed %d): %s", self.o.seed,
                 ", ".join(f"{p.kind}+{p.at_s:.0f}s ({p.duration_s:.0f} s)" for p in [*lane, receiver] if p)
                 or "no faults")
        mounted = False
        began = ended = time.time()
        watermark = first_start = None
        metrics_port = free_port()
        threads: list[threading.Thread] = []
        try:
            mount_tmpfs(self.mnt, self.o.tmpfs_mb)
            mounted = True
            self.broker = LocalBroker(self.work / "broker", offsets_partitions=1, port=free_port(), heap="512m")
            self.broker.start()
            self._warm_offsets_topic(self.broker.bootstrap)
            self._start_sink()
            self.config.write_text(yaml.safe_dump(self._settings(self.broker.bootstrap, self.sink.url, metrics_port)))
            env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1", **self.o.run_env}
            lagscope = LAGSCOPE
            if self.o.trace_memory_s:
                lagscope = [sys.executable, str(Path(__file__).with_name("memtrace.py")), "--out",
                            str(self.work / "memtrace"), "--every", str(self.o.trace_memory_s), "--"]
            self.run = Supervised([*lagscope, "run", "--config", str(self.config), "--results", str(self.results),
                                   "--outbox", str(self.outbox), "--alerts-interval", str(self.o.alerts_interval_s)],
                                  env, self.work / "run.log")
            self.watcher = Watcher(self.results, self.run, self.dropped)
            began = self.run.start()
            self.watcher.start()
            # the tail up before the first scenario commits
            deadline = time.time() + 60
            while time.time() < deadline and metric(metrics_text(metrics_port), "lagscope_commitlog_up") != 1:
                time.sleep(0.5)
            threads = [threading.Thread(target=self._scenarios, args=(self.broker.bootstrap,), daemon=True,
                                        name="soak-scenarios"),
                       threading.Thread(target=self._lane, args=(lane, began), daemon=True, name="soak-faults"),
                       *([threading.Thread(target=self._receiver_lane, args=(receiver, began), daemon=True,
                                           name="soak-receiver")] if receiver else [])]
            for t in threads:
                t.start()
            self._wait_until(began + self.o.minutes * 60.0)
            self._wait_for_recoveries(threads[1:])
            self.stopping.set()
            for t in threads:
                t.join(240)
                if t.is_alive():
                    self.problems.append(f"{t.name} did not finish")
            self._drain(metrics_port)
            code = self.run.terminate()
            if code != 0:
                self.problems.append(f"lagscope run exited {code} on SIGTERM (expected 0)")
            ended = time.time()
            self.watcher.stop()
            from lagscope.analytics.io import read_checkpoint

            cp = read_checkpoint(self.results)
            watermark = cp["watermark"] if cp else None
            first_start = _first_step_start(self.results)
            shutil.copytree(self.lake, self.work / "lake", ignore=shutil.ignore_patterns("ballast"))
        finally:
            self.stopping.set()
            if self.run is not None and self.run.proc is not None and self.run.proc.poll() is None:
                self.run.terminate(timeout=60)
            if self.watcher is not None:
                self.watcher.stop()
            with contextlib.suppress(Exception):
                if self.sink is not None:
                    self.sink.stop()
            if self.broker is not None:
                with contextlib.suppress(Exception):
                    self.broker.stop()
            if mounted:
                unmount(self.mnt)
        load_end = os.getloadavg()
        assert self.run is not None
        assert self.watcher is not None
        lake = self.work / "lake"
        self._recoveries(lake)
        settled = self._settled_after_s()
        return SoakResult(
            opts={k: str(v) if isinstance(v, Path) else v for k, v in dataclasses.asdict(self.o).items()},
            began=began, ended=ended, load_start=load_start, load_end=load_end, faults=self.faults,
            schedule=schedule, lives=self.run.lives, unexpected_exits=self.run.unexpected_exits,
            scenarios=self.scenarios, watermark=watermark, first_step_start=first_start,
            commits=check_commits(lake, self.scenarios),
            alerts=check_alerts(self.outbox, self.hooks),
            quarantine=check_quarantine(lake, self.results, self.dropped, self.work / "lakefs" / "lake"),
            results=compare_results(self.config, lake, self.results, self.work / "clean", first_start, watermark),
            rss=rss_fit(self.watcher.rss, self.run.lives, settled),
            rss_samples=[list(x) for x in self.watcher.rss], settled_after_s=settled,
            state_samples=[list(x) for x in self.watcher.state],
            load_during=load_summary(self.watcher.load),
            problems=self.problems, logs={"run": str(self.work / "run.log")}, end_waited_s=self.end_waited_s)

    def _recoveries(self, lake: Path) -> None:
        """Each fault's recovery: the first successful sweep that started after it ended, the
        first result file written after it ended, the receiver's backlog delivered."""
        from lagscope.lake import read_table

        assert self.watcher is not None
        sweeps = read_table(lake, "sweeps", cluster=CLUSTER, columns=["sweep_ts", "ok"]).to_pylist()
        ok = sorted(r["sweep_ts"].timestamp() for r in sweeps if r["ok"])
        hooks = _hook_records(self.hooks)
        for f in self.faults:
            nxt = next((t for t in ok if t >= f.end), None)
            f.sweep_recovery_s = None if nxt is None else round(nxt - f.end, 2)
            step = self.watcher.first_step_after(f.end, self.o.sweep_interval_s)
            f.detail["step_began_s"] = None if step is None else round(step - f.end, 2)
            res = self.watcher.first_result_after(f.end)
            f.detail["results_written_s"] = None if res is None else round(res - f.end, 2)
            full = self.watcher.first_result_after(f.end, prefix="inc-")
            f.detail["full_step_s"] = None if full is None else round(full - f.end, 2)
            f.analytics_recovery_s = analytics_back(f)
            # how busy the machine was while the fault and its recovery ran (its timing is a
            # result only below QUIET_LOAD: :func:`verdicts`)
            f.detail["load"] = window_load(self.watcher.load, f.start, f.end + self.o.analytics_interval_s)
            if f.kind == "receiver":
                # the backlog: every notification created before the receiver came back
                pending = _outbox_created_before(self.outbox, f.end)
                got = {h["idempotency_key"]: h["received_ts"] for h in hooks}
                times = [got[k] for k in pending if k in got]
                first = min((h["received_ts"] for h in hooks if h["received_ts"] >= f.end), default=None)
                f.detail.update(backlog=len(pending), backlog_delivered=len(times))
                f.detail["first_delivery_s"] = None if first is None else round(first - f.end, 2)
                f.alerts_recovery_s = round(max(times) - f.end, 2) if len(times) == len(pending) and times else None
            if f.kind == "bad_files":
                moved = [d.get("quarantined_at") for d in self.dropped if d["at"] == f.start]
                f.quarantine_s = round(max(m for m in moved if m) - f.start, 2) if moved and all(moved) else None


# ------------------------------------------------------------------------------------------
# the checks


def _first_step_start(results: Path) -> str | None:
    """The live run's first incremental step's start: the smallest ``<from>`` of an ``inc-<from>-<to>`` file."""
    starts = [int(m.group(1)) for p in results.rglob("inc-*.parquet") if (m := re.match(r"inc-(\d+)-\d+-", p.name))]
    if not starts:
        return None
    return dt.datetime.fromtimestamp(min(starts) / 1000, dt.UTC).isoformat()


def _outbox_rows(outbox: Path) -> list[dict[str, Any]]:
    if not outbox.exists():
        return []
    db = sqlite3.connect(f"file:{outbox}?mode=ro", uri=True, timeout=10)
    try:
        cur = db.execute("SELECT idempotency_key, finding_key, state, created_at, delivered_at, dead_at, attempts "
                         "FROM outbox ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        db.close()


def _outbox_pending(outbox: Path) -> int:
    try:
        return sum(1 for r in _outbox_rows(outbox) if r["delivered_at"] is None and r["dead_at"] is None)
    except sqlite3.Error:
        return -1


def hold_receiver(pending: Callable[[], int], down_s: float, stopping: threading.Event,
                  poll_s: float = 1.0) -> float:
    """Keep the receiver down for ``down_s``, then on while no notification waits in the outbox
    (``pending()``: the notifications waiting), up to ``down_s`` more, or until the run
    stops; the seconds it was down. An outage no alert fell in has no backlog to deliver, and
    proves nothing about its delivery: the alerts come when the scenario's events do, and a
    short soak's outage can fall between them."""
    began = time.monotonic()
    if stopping.wait(down_s):
        return time.monotonic() - began
    while time.monotonic() - began < 2 * down_s and not pending():
        if stopping.wait(poll_s):
            break
    return time.monotonic() - began


def _outbox_created_before(outbox: Path, t: float) -> list[str]:
    return [r["idempotency_key"] for r in _outbox_rows(outbox) if r["created_at"] < t
            and (r["delivered_at"] is None or r["delivered_at"] >= t)]


def _hook_records(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def check_alerts(outbox: Path, hooks_path: Path) -> dict[str, Any]:
    rows = _outbox_rows(outbox)
    hooks = _hook_records(hooks_path)
    per_key = collections.Counter(h["idempotency_key"] for h in hooks)
    keys = {r["idempotency_key"] for r in rows}
    delivered = [r for r in rows if r["delivered_at"] is not None]
    return {
        "notifications": len(rows),
        "delivered": len(delivered),
        "pending": sum(1 for r in rows if r["delivered_at"] is None and r["dead_at"] is None),
        "dead": sum(1 for r in rows if r["dead_at"] is not None),
        "received": len(hooks),
        "keys_received": len(per_key),
        "lost": sorted(k for k in keys if k not in per_key),
        "repeated": {k: n for k, n in per_key.items() if n > 1},
        "unknown": sorted(k for k in per_key if k not in keys),
        "bad_signature": sum(1 for h in hooks if h.get("signature_ok") is False),
        "transitions": dict(collections.Counter(r["state"] for r in rows)),
        "retried": sum(1 for r in rows if (r["attempts"] or 0) > 1),
    }


def _truth_commits(out: Path) -> list[tuple[str, str, int, int]]:
    from lagscope.devtools.sim.truth import Commit, load, read_parts

    truth = out / "truth.jsonl"
    if truth.exists():
        records = load(truth)
    elif (out / "parts").is_dir():
        records = read_parts(out / "parts")
    else:
        return []
    return [(r.group, r.topic, r.partition, r.offset) for r in records if isinstance(r, Commit)]


def check_commits(lake: Path, scenarios: list[dict[str, Any]]) -> dict[str, Any]:
    from lagscope.lake import read_table

    rows = read_table(lake, "commits", cluster=CLUSTER,
                      columns=["group_id", "topic", "partition", "committed_offset", "source_partition",
                               "source_offset"]).to_pylist()
    truth: collections.Counter[tuple[str, str, int, int]] = collections.Counter()
    for s in scenarios:
        truth.update(_truth_commits(Path(s["out"])))
    got = collections.Counter((r["group_id"], r["topic"], r["partition"], r["committed_offset"])
                              for r in rows if r["committed_offset"] is not None)
    sources = collections.Counter((r["source_partition"], r["source_offset"]) for r in rows)
    lost = {k: n - got[k] for k, n in truth.items() if got[k] < n}
    return {
        "acknowledged": sum(truth.values()),
        "lake_rows": len(rows),
        "lost": sum(lost.values()),
        "lost_examples": [list(k) for k in list(lost)[:10]],
        "duplicated": sum(n - 1 for n in sources.values() if n > 1),
        "extra": sum(max(0, n - truth[k]) for k, n in got.items() if k[0].startswith("sim-")),
        "tombstones": sum(1 for r in rows if r["committed_offset"] is None),
    }


def check_quarantine(lake: Path, results: Path, dropped: list[dict[str, Any]], live_lake: Path) -> dict[str, Any]:
    found = sorted(str(p) for root in (lake, results) for p in root.rglob("*") if p.is_file()
                   and "_quarantine" in p.parts)
    want: list[str] = []
    for d in dropped:
        path = Path(d["path"])
        root = Path(d["root"])
        base = lake if root == live_lake else root
        rel = path.relative_to(root)
        # <root>/<table>/_quarantine/<its path under the table>
        want.append(str(base / rel.parts[0] / "_quarantine" / Path(*rel.parts[1:])))
    return {"dropped": len(dropped), "quarantined": len(found), "missing": sorted(set(want) - set(found)),
            "unexpected": sorted(set(found) - set(want)), "files": found}


def _canon(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    if isinstance(v, dict):
        return sorted((k, _canon(x)) for k, x in v.items())
    if isinstance(v, list):
        return [_canon(x) for x in v]
    return v


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: repr([(k, _canon(r[k])) for k in sorted(r)]))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def table_rows(results: Path, table: str, watermark: dt.datetime) -> list[dict[str, Any]]:
    """The rows a reader sees, up to the watermark: current rows (without ``as_of_ts``) for the
    event tables, whole rows for the others."""
    from lagscope.results import current_rows, read

    rows = read(results, table, until=watermark).to_pylist()
    if table in EVENT_TABLES:
        cols = EVENT_TABLES[table]
        rows = [dict(r) for r in current_rows(rows, lambda r: tuple(r[c] for c in cols))]
        for r in rows:
            r.pop("as_of_ts", None)
    for r in rows:
        r.pop("date", None)
    return _sorted(rows)


def compare_results(config: Path, lake: Path, live: Path, clean: Path, since: str | None,
                    watermark: str | None) -> dict[str, Any]:
    """A clean ``lagscope analyze --incremental`` over the lake from the live run's first step to
    its watermark, and every compared table row for row."""
    if since is None or watermark is None:
        return {"error": "the live run has no full step"}
    # the live results without their provisional files (the minute after the watermark)
    snapshot = clean.parent / "live-results"
    shutil.rmtree(snapshot, ignore_errors=True)
    shutil.copytree(live, snapshot, ignore=shutil.ignore_patterns("pre-*", "_logs"))
    shutil.rmtree(clean, ignore_errors=True)
    began = time.time()
    done = subprocess.run([*LAGSCOPE, "analyze", "--config", str(config), "--lake", str(lake), "--results", str(clean),
                           "--incremental", "--since", since, "--until", watermark, "--master", "local[2]",
                           "--no-progress"], capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    out: dict[str, Any] = {"since": since, "watermark": watermark, "analyze_s": round(time.time() - began, 1)}
    if done.returncode != 0:
        out["error"] = f"lagscope analyze exited {done.returncode}: {done.stderr[-2000:]}"
        return out
    wm = dt.datetime.fromisoformat(watermark)
    tables: dict[str, Any] = {}
    for table in COMPARED:
        a, b = table_rows(snapshot, table, wm), table_rows(clean, table, wm)
        only_live = [r for r in a if not any(_row_eq(r, x) for x in b)] if len(a) < 5000 else []
        diff = len(a) != len(b) or any(not _row_eq(x, y) for x, y in zip(a, b, strict=False))
        only_clean = [r for r in b if not any(_row_eq(r, x) for x in a)] if diff and len(b) < 5000 else []
        tables[table] = {"live": len(a), "clean": len(b), "equal": not diff,
                         "only_live": [_show(r) for r in only_live[:5]] if diff else [],
                         "only_clean": [_show(r) for r in only_clean[:5]]}
        if table == "anomalies":
            tables[table].update(episodes(a, b))
            if diff:  # what the lake held of the first differing keys, and when each row got there
                tables[table]["evidence"] = [lake_evidence(lake, live / "_logs" / "pyspark.log", r)
                                             for r in (only_live + only_clean)[:2]]
    out["tables"] = tables
    return out


def lake_evidence(lake: Path, trace_log: Path, row: dict[str, Any], around_s: float = 60.0) -> dict[str, Any]:
    """The lake's rows of ``row``'s partition within ``around_s`` of its start — its sweeps'
    offsets and its commit records — each with the time its file was written (the file's mtime),
    and the analytics steps that began in that span (their trace lines): what a step could have
    read when it judged the row, against what the clean run read."""
    import pyarrow.parquet as pq

    start = row["start_ts"].timestamp() if isinstance(row["start_ts"], dt.datetime) else \
        dt.datetime.fromisoformat(str(row["start_ts"])).timestamp()
    lo, hi = start - around_s, start + around_s

    def rows(table: str, ts: str, cols: list[str]) -> list[str]:
        found = []
        for path in sorted((lake / table / f"cluster={CLUSTER}").glob("date=*/*.parquet")):
            try:
                data = pq.read_table(path, columns=[ts, "group_id", "topic", "partition", *cols]).to_pylist()
                written = path.stat().st_mtime
            except Exception:  # a quarantined or unreadable file: not evidence
                continue
            for r in data:
                if r[ts] is None:
                    continue
                t = r[ts].timestamp()
                if (r["group_id"], r["topic"], r["partition"]) == (row["group_id"], row["topic"], row["partition"]) \
                        and lo <= t <= hi:
                    found.append((t, f"{_hms(t)}.{int(t * 1000) % 1000:03d} "
                                  + " ".join(f"{c}={r[c]}" for c in cols) + f" (file written {written - t:+.1f} s)"))
        return [x for _, x in sorted(found)]

    steps = []
    for began, pre in step_ends(trace_log):
        if lo <= began <= hi + 60.0:
            steps.append(f"{_hms(began)} (provisional until {'-' if pre is None else _hms(pre)})")
    return {"key": f"{row['group_id']}/{row['topic']}/{row['partition']}", "start": _show(row)["start_ts"],
            "sweeps": rows("offsets", "sweep_ts", ["committed_offset", "log_end_offset", "member_id"]),
            "commits": rows("commits", "commit_ts", ["committed_offset", "source_offset"]),
            "steps": steps}


def episodes(live: list[dict[str, Any]], clean: list[dict[str, Any]]) -> dict[str, Any]:
    """The anomalies as episodes, (group, topic, partition, start): which both sides found, which
    only one did, and which both found but classified differently (kind, severity, detail): an
    open stall whose member then left is the stall one pass reports, but a step after the member
    left judges its carried episode again and writes a new ``stop`` (and a ``stall`` judged
    ``starved`` by one pass may be a ``stall`` to a later step): the finding the soak found."""
    def ident(r: dict[str, Any]) -> tuple[Any, ...]:
        return (r["cluster"], r["group_id"], r["topic"], r["partition"], r["start_ts"])

    def view(rows: list[dict[str, Any]]) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
        out: dict[tuple[Any, ...], list[dict[str, Any]]] = collections.defaultdict(list)
        for r in rows:
            out[ident(r)].append(r)
        return out

    lv, cv = view(live), view(clean)
    both = set(lv) & set(cv)
    reclassified = sorted((k for k in both if len(lv[k]) != len(cv[k]) or any(
        not _row_eq(x, y) for x, y in zip(_sorted(lv[k]), _sorted(cv[k]), strict=False))), key=repr)
    return {"episodes_live": len(lv), "episodes_clean": len(cv),
            "episodes_only_live": [_show(lv[k][0]) for k in sorted(set(lv) - both, key=repr)][:5],
            "episodes_only_clean": [_show(cv[k][0]) for k in sorted(set(cv) - both, key=repr)][:5],
            "episodes_equal": set(lv) == set(cv),
            "reclassified": [{"live": [f"{r['kind']} ({r['severity']}): {r['detail']}" for r in lv[k]],
                              "clean": [f"{r['kind']} ({r['severity']}): {r['detail']}" for r in cv[k]],
                              "episode": _show(dict(zip(("cluster", "group_id", "topic", "partition", "start_ts"),
                                                        k, strict=True)))} for k in reclassified]}


def _row_eq(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def _show(r: dict[str, Any]) -> dict[str, Any]:
    return {k: (v.isoformat() if isinstance(v, dt.datetime) else v) for k, v in r.items()}


def _slope(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope (per second)."""
    if len(points) < 3:
        return None
    n = len(points)
    mx = sum(p[0] for p in points) / n
    my = sum(p[1] for p in points) / n
    sxx = sum((p[0] - mx) ** 2 for p in points)
    if sxx == 0:
        return None
    return sum((p[0] - mx) * (p[1] - my) for p in points) / sxx


def _means_by(samples: list[tuple[float, float, float]], start: float, width_s: float, col: int) -> list[float]:
    """The mean of column ``col`` of ``samples`` in each ``width_s`` from ``start`` (empty spans left out)."""
    spans: dict[int, list[float]] = collections.defaultdict(list)
    for x in samples:
        spans[int((x[0] - start) // width_s)].append(x[col])
    return [round(sum(v) / len(v), 1) for _, v in sorted(spans.items())]


#: the samples a settled slope needs after its start (s)
SETTLED_MIN_S = 600.0
#: a life's carried state has its full size this long after its longest hold from its start (s)
SETTLE_MARGIN_S = 300.0


def rss_fit(samples: list[tuple[float, int, float, float]], lives: list[dict[str, Any]],
            settled_after_s: float = 0.0) -> dict[str, Any]:
    """Slopes in MB per hour: over the whole run and per life, of the Python process and of its
    JVM; each life's means per 5 minutes. A life's *settled* slope is the Python process's from
    ``settled_after_s`` after its start (its longest hold, :meth:`Soak._settled_after_s`: from then
    on a churning workload's carried state has its full size, what is held forgotten as fast as new
    things come), given for at least :data:`SETTLED_MIN_S` of samples after it, else None; and the
    slopes of that window's first and second halves in time, given for at least twice that: a leak
    keeps its slope in both, memory still filling up (an allocator's free lists, a cache short of
    its bound) has a smaller one in the second."""
    def per_h(s: float | None) -> float | None:
        return None if s is None else round(s * 3600.0, 2)

    by_pid: dict[int, list[tuple[float, float, float]]] = collections.defaultdict(list)
    for t, pid, py, jvm in samples:
        by_pid[pid].append((t, py, jvm))
    def halves(xs: list[tuple[float, float, float]]) -> list[float | None] | None:
        if not xs or xs[-1][0] - xs[0][0] < 2 * SETTLED_MIN_S:
            return None
        mid = (xs[0][0] + xs[-1][0]) / 2.0
        return [per_h(_slope([(x[0], x[1]) for x in xs if (x[0] < mid) == first])) for first in (True, False)]

    out_lives = []
    for life in lives:
        s = by_pid.get(life["pid"], [])
        # after the first analytics steps have warmed up the process (its first minute left out)
        warm = [x for x in s if x[0] >= life["start"] + 60.0]
        settled = [x for x in warm if x[0] >= life["start"] + settled_after_s]
        lived = (life["end"] or life["start"]) - life["start"]
        out_lives.append({"pid": life["pid"], "minutes": round(lived / 60, 1),
                          "samples": len(s), "py_mb_first": round(warm[0][1], 1) if warm else None,
                          "py_mb_last": round(warm[-1][1], 1) if warm else None,
                          "py_slope_mb_per_h": per_h(_slope([(x[0], x[1]) for x in warm])),
                          "jvm_slope_mb_per_h": per_h(_slope([(x[0], x[2]) for x in warm if x[2] > 0])),
                          "settled_after_min": round(settled_after_s / 60.0, 1),
                          "py_slope_settled_mb_per_h": per_h(_slope([(x[0], x[1]) for x in settled]))
                          if settled and settled[-1][0] - settled[0][0] >= SETTLED_MIN_S else None,
                          "py_slope_settled_halves_mb_per_h": halves(settled),
                          # the shape: a warm-up levels off, a leak keeps its slope
                          "py_mb_by_5min": _means_by(warm, life["start"], 300.0, 1),
                          "jvm_mb_by_5min": _means_by(warm, life["start"], 300.0, 2)})
    warm_all = [(t, py, jvm) for t, pid, py, jvm in samples
                if any(life["pid"] == pid and t >= life["start"] + 60.0 for life in lives)]
    return {"samples": len(samples),
            "py_slope_mb_per_h": per_h(_slope([(t, py) for t, py, _ in warm_all])),
            "jvm_slope_mb_per_h": per_h(_slope([(t, j) for t, _, j in warm_all if j > 0])),
            "py_mb_max": round(max((x[2] for x in samples), default=0.0), 1),
            "jvm_mb_max": round(max((x[3] for x in samples), default=0.0), 1),
            "lives": out_lives}


#: above this 1-minute load average (on 2 cores) a timing figure is not a result (benchmarks/README)
QUIET_LOAD = 2.5


def load_summary(samples: list[tuple[float, float]]) -> dict[str, Any]:
    """The load average over the run: its mean, its maximum and how long it was above QUIET_LOAD
    (each sample stands for the time to the next one)."""
    if not samples:
        return {}
    above = sum(b[0] - a[0] for a, b in itertools.pairwise(samples) if a[1] > QUIET_LOAD)
    return {"samples": len(samples), "mean": round(sum(x for _, x in samples) / len(samples), 2),
            "max": round(max(x for _, x in samples), 2), "above_quiet_s": round(above, 1)}


def window_load(samples: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """The mean of the 1-minute load average sampled from ``t0`` to ``t1`` (None: no sample)."""
    got = [x for t, x in samples if t0 <= t <= t1]
    return round(sum(got) / len(got), 2) if got else None


def analytics_back(f: FaultRecord) -> float | None:
    """Seconds from a fault's end to the analytics' recovery: the first step that began after it
    and read the lake past it (the line each step writes to the analytics' trace, with where it
    read the lake to). After a kill or an engine kill that step runs on a new engine (a new
    process or a new Spark session, started before the step begins), and it counts only once
    that engine has finished a step: results written after it began (how long that first step
    took is its own figure, ``results_written_s``, reported beside it)."""
    began, written = f.detail.get("step_began_s"), f.detail.get("results_written_s")
    if began is None:
        return None
    if f.kind in ENGINE_FAULTS and (written is None or written < began):
        return None
    return float(began)


def timed(f: FaultRecord) -> bool:
    """Whether a fault's recovery times are a result: the machine's load while it ran and
    recovered (:func:`window_load`) was at most :data:`QUIET_LOAD` (unknown: judged)."""
    load = f.detail.get("load")
    return load is None or load <= QUIET_LOAD


def recovery_seen(f: FaultRecord, first_result_after: Callable[[float], float | None],
                  first_step_after: Callable[[float], float | None], dropped: list[dict[str, Any]]) -> bool:
    """Whether what :func:`analytics_back` measures for ``f`` has happened yet (polled while the
    run goes on): after a kill or an engine kill, results written after it; after the others, a
    step begun after it (for bad files: and each of them quarantined). The receiver's recovery is
    its backlog, measured after the run from the webhooks (delivered within an alerts interval)."""
    if f.kind == "receiver":
        return True
    if f.kind in ENGINE_FAULTS:
        return first_result_after(f.end) is not None
    if f.kind == "bad_files" and not all("quarantined_at" in d for d in dropped if d["at"] == f.start):
        return False
    return first_step_after(f.end) is not None


def end_wait(faults: list[FaultRecord], seen: Callable[[FaultRecord], bool], analytics_interval_s: float,
             now: float) -> float | None:
    """Until when the run's end waits (None: not at all): while the recovery of a fault is not
    seen yet, up to one analytics step (allowed one interval), one interval and
    :data:`END_MARGIN_S` after that fault's end; a recovery not seen by then is the verdict's
    (the run does not wait longer)."""
    bounds = [f.end + 2 * analytics_interval_s + END_MARGIN_S for f in faults if not seen(f)]
    latest = max(bounds, default=None)
    return latest if latest is not None and latest > now else None


def late(f: FaultRecord, took: float | None, bound: float) -> bool:
    """Whether a recovery failed its bound: it must happen; how long it took is held to ``bound``
    only on a quiet machine (:func:`timed`: a timing taken above QUIET_LOAD is not a result, and
    the report says which faults' timings were not judged)."""
    return took is None or (timed(f) and took > bound)


def verdicts(r: SoakResult) -> dict[str, list[str]]:
    """Each property of the soak: its failures (empty: it held)."""
    o = r.opts
    out: dict[str, list[str]] = collections.defaultdict(list)
    for f in r.faults:
        if f.kind != "receiver":
            if late(f, f.sweep_recovery_s, o["sweep_interval_s"] + SWEEP_JITTER_S):
                out["recovery"].append(f"{f.kind} at {_hms(f.start)}: sweeps back after {f.sweep_recovery_s} s "
                                       f"(interval {o['sweep_interval_s']:g} s)")
            if late(f, f.analytics_recovery_s, o["analytics_interval_s"] + SWEEP_JITTER_S):
                out["recovery"].append(f"{f.kind} at {_hms(f.start)}: analytics back after {f.analytics_recovery_s} s "
                                       f"(interval {o['analytics_interval_s']:g} s; first results after "
                                       f"{f.detail.get('results_written_s')} s)")
        elif not f.detail.get("backlog"):
            out["recovery"].append(f"receiver at {_hms(f.start)}: no notification fell in its outage "
                                   f"({f.end - f.start:.0f} s): the backlog's delivery was not exercised")
        elif late(f, f.alerts_recovery_s, o["alerts_interval_s"]):
            out["recovery"].append(f"receiver at {_hms(f.start)}: backlog delivered after {f.alerts_recovery_s} s "
                                   f"(interval {o['alerts_interval_s']:g} s; {f.detail})")
    kinds = {f.kind for f in r.faults}
    for k in KINDS if o.get("faults", True) else ():
        if k not in kinds:
            out["faults"].append(f"no {k} fault was injected")
    if r.unexpected_exits:
        out["process"].append(f"lagscope run exited on its own {len(r.unexpected_exits)} time(s): {r.unexpected_exits}")
    res = r.results
    if "error" in res:
        out["results"].append(res["error"])
    for t, v in res.get("tables", {}).items():
        if t == "anomalies" and not v["equal"] and v.get("episodes_equal"):
            # every episode found by both; some classified differently: the known bug, its own line
            out[RECLASSIFIED].append(
                f"{len(v['reclassified'])} of {v['episodes_clean']} episodes, e.g. {v['reclassified'][:1]}")
        elif not v["equal"]:
            out["results"].append(f"{t}: live {v['live']} rows, clean {v['clean']}; only live {v['only_live'][:2]}, "
                                  f"only clean {v['only_clean'][:2]}"
                                  + "".join(f"; the lake around {e['key']} from {e['start']}: {e}"
                                            for e in v.get("evidence", [])))
        if t in ("lag_trends", "status") and v["live"] == 0:
            out["results"].append(f"{t}: no rows at all")
    c = r.commits
    if c["acknowledged"] == 0:
        out["commits"].append("the scenarios acknowledged no commit")
    if c["lost"]:
        out["commits"].append(f"{c['lost']} acknowledged commit(s) not in the lake, e.g. {c['lost_examples'][:3]}")
    if c["duplicated"]:
        out["commits"].append(f"{c['duplicated']} __consumer_offsets record(s) in the lake twice")
    a = r.alerts
    if a["notifications"] == 0:
        out["alerts"].append("no notification at all")
    for key in ("lost", "unknown"):
        if a[key]:
            out["alerts"].append(f"{key} keys: {a[key][:5]}")
    if a["repeated"]:
        out["alerts"].append(f"keys delivered more than once: {dict(list(a['repeated'].items())[:5])}")
    if a["pending"] or a["dead"]:
        out["alerts"].append(f"pending {a['pending']}, dead {a['dead']}")
    q = r.quarantine
    if q["missing"] or q["unexpected"] or (q["dropped"] == 0 and o.get("faults", True)):
        out["quarantine"].append(f"dropped {q['dropped']}, missing {q['missing']}, unexpected {q['unexpected']}")
    if r.problems:
        out["harness"].extend(r.problems)
    return dict(out)


# ------------------------------------------------------------------------------------------
# the report


def _load_line(ld: dict[str, Any]) -> str:
    if not ld:
        return "."
    line = (f"; over the run (1 min, every 2 s) mean {ld['mean']:.2f}, max {ld['max']:.2f}, above "
            f"{QUIET_LOAD:g} for {ld['above_quiet_s'] / 60:.1f} min.")
    if ld["above_quiet_s"] > 0:
        line += (f" **The machine was not quiet for the whole run: its timings (the recoveries) are not a "
                 f"result above load {QUIET_LOAD:g}.**")
    return line


def _untimed_line(faults: list[FaultRecord]) -> str:
    busy = [f for f in faults if not timed(f)]
    if not busy:
        return ""
    return (" **Not judged by time here (the machine was busy): "
            + ", ".join(f"{f.kind} at {_hms(f.start)} (load {f.detail['load']:.1f})" for f in busy) + ".**")


def _hms(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%H:%M:%S")


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}"


def _range(xs: list[float | None]) -> str:
    got = [x for x in xs if x is not None]
    if not got:
        return "—"
    return f"{min(got):.1f}–{max(got):.1f}" if len(got) > 1 else f"{got[0]:.1f}"


def describe_run(r: SoakResult) -> str:
    """The report's sentence on what ran: how long, the intervals, the workload and the options."""
    o = r.opts
    return (f"{(r.ended - r.began) / 60:.1f} minutes of `lagscope run` (seed {o['seed']}): sweeps every "
            f"{o['sweep_interval_s']:g} s with the `__consumer_offsets` tail, an analytics step every "
            f"{o['analytics_interval_s']:g} s (Spark local[2], provisional steps on), alerts every "
            f"{o['alerts_interval_s']:g} s to a webhook receiver; the lake on a {o['tmpfs_mb']} MB tmpfs; "
            + (f"one run of the simulator's `{o['scenario']}` scenario stretched to the whole soak (`--steady`: "
               "the same groups and topics throughout)" if o.get("steady") else
               f"{len(r.scenarios)} runs of the simulator's `{o['scenario']}` scenario back to back")
            + (f"; partitions forgotten after {o['forget_after_s']:g} s of silence (`--forget-after-s`)"
               if o.get("forget_after_s") is not None else "")
            + (f"; `lagscope run`'s environment adds {', '.join(f'`{k}={v}`' for k, v in o['run_env'].items())}"
               " (`--run-env`)" if o.get("run_env") else "")
            + (f"; the end waited {r.end_waited_s:g} s past the planned {o['minutes']:g} minutes for the last "
               "fault's recovery" if r.end_waited_s else "") + ".")


def memory_lines(m: dict[str, Any]) -> list[str]:
    """The report's lines on the process's memory (:func:`rss_fit`'s figures)."""
    out: list[str] = []
    out.append(f"- **Memory**: {m['samples']} RSS samples; slope of a least-squares line over the run (each life's "
               f"first minute left out): Python {_fmt(m['py_slope_mb_per_h'])} MB/h, Spark JVM "
               f"{_fmt(m['jvm_slope_mb_per_h'])} MB/h; max Python {m['py_mb_max']} MB, JVM {m['jvm_mb_max']} MB.")
    longest = max(m["lives"], key=lambda x: x["minutes"], default=None)
    if longest:
        out.append(f"  The longest life ({longest['minutes']} min): Python {longest['py_mb_first']} → "
                   f"{longest['py_mb_last']} MB, slope {_fmt(longest['py_slope_mb_per_h'])} MB/h; JVM slope "
                   f"{_fmt(longest['jvm_slope_mb_per_h'])} MB/h.")
        if longest.get("py_slope_settled_mb_per_h") is not None:
            out.append(f"  From minute {longest['settled_after_min']:g} on (the longest of the forget horizon, "
                       f"the alerts' lookback and the exporter's hold of closed events, and 5 minutes: every "
                       f"bounded hold full): slope {_fmt(longest['py_slope_settled_mb_per_h'])} MB/h.")
        if longest.get("py_slope_settled_halves_mb_per_h"):
            first, second = longest["py_slope_settled_halves_mb_per_h"]
            out.append(f"  That window's first half: {_fmt(first)} MB/h; its second half: {_fmt(second)} MB/h "
                       f"(a leak keeps its slope; memory still filling up levels off).")
        if longest.get("py_mb_by_5min"):
            out.append(f"  Its mean per 5 minutes: Python {' → '.join(map(str, longest['py_mb_by_5min']))} MB; "
                       f"JVM {' → '.join(map(str, longest['jvm_mb_by_5min']))} MB.")
    return out


def state_lines(g: dict[str, Any]) -> list[str]:
    """The report's lines on the analytics' carried state (:func:`state_growth`)."""
    if not g:
        return []
    cells = [f"`{k}` {v['rows'][0]} → {v['rows'][2]} rows (max {v['rows'][1]}), {v['groups'][0]} → {v['groups'][2]} "
             f"groups (max {v['groups'][1]})" for k, v in g["parts"].items()]
    return [f"- **Carried state** (the analytics' checkpoint, counted every {STATE_EVERY_S:g} s), from minute "
            f"{g['from_min']:g} to {g['to_min']:g} of the longest life: " + "; ".join(cells) + "."]


def report(r: SoakResult, command: str) -> str:
    o = r.opts
    v = verdicts(r)
    title = "under faults" if o.get("faults", True) else "without faults (its memory over one life)"
    lines = [f"# Soak of `lagscope run` {title} ({_hms(r.began)[:5]}–{_hms(r.ended)[:5]} UTC, "
             f"{dt.datetime.fromtimestamp(r.began, dt.UTC):%Y-%m-%d})", "",
             "```bash", command, "```", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
             f"`uptime` load average at start {' / '.join(f'{x:.2f}' for x in r.load_start)}, at end "
             f"{' / '.join(f'{x:.2f}' for x in r.load_end)} (1 / 5 / 15 min)" + _load_line(r.load_during), "",
             describe_run(r), "",
             f"**Verdict: {'every check held' if not v else 'FAILED: ' + ', '.join(sorted(v))}.**", "",
             f"Bounds: sweeps back within one sweep interval (+{SWEEP_JITTER_S:g} s of the loop's own scheduling) of "
             "the fault's end (for a kill: the restart), the first successful sweep that started after it (from "
             "the lake's `sweeps`); analytics back within one analytics interval (+"
             f"{SWEEP_JITTER_S:g} s): the first step that began after the fault and read the lake past it (the "
             "analytics' trace), after a kill or an engine kill on a new engine (a new process or Spark session, "
             "started before the step) that also finished it: its results written (how long after the fault: the "
             "detail's `results_written_s`); the receiver: its backlog delivered within one alerts interval. "
             f"Every recovery must happen; its time is held to the bound only where the load (the detail's `load`: "
             f"the 1-minute load average over the fault and one analytics interval after it) was at most "
             f"{QUIET_LOAD:g}." + _untimed_line(r.faults),
             "",
             "| fault | injected | lasted s | sweeps back s (≤ interval) | analytics back s (≤ interval) | "
             "other recovery | rows lost | duplicates |",
             "|---|---:|---:|---:|---:|---|---:|---:|"]
    c, a, q = r.commits, r.alerts, r.quarantine
    for kind in KINDS:
        fs = [f for f in r.faults if f.kind == kind]
        if not fs:
            lines.append(f"| {kind} | 0 | | | | | | |")
            continue
        other = "—"
        if kind == "receiver":
            first = _range([f.detail.get("first_delivery_s") for f in fs])
            other = (f"backlog {sum(f.detail.get('backlog', 0) for f in fs)} delivered after "
                     f"{_range([f.alerts_recovery_s for f in fs])} s (the first after {first} s)")
        elif kind == "bad_files":
            other = f"{q['quarantined']} of {q['dropped']} quarantined"
        elif kind == "kill":
            other = f"Spark JVMs outliving the process: {sum(f.detail.get('orphan_jvms', 0) for f in fs)}"
        elif kind == "engine":
            other = "mid-step: " + ", ".join("yes" if f.detail.get("busy") else "no" for f in fs)
        lines.append(f"| {kind} | {len(fs)} | {_range([f.end - f.start for f in fs])} | "
                     f"{_range([f.sweep_recovery_s for f in fs]) if kind != 'receiver' else '—'} | "
                     f"{_range([f.analytics_recovery_s for f in fs]) if kind != 'receiver' else '—'} | {other} | "
                     f"{c['lost']} commits, {len(a['lost'])} alerts | {c['duplicated']} commits, "
                     f"{len(a['repeated'])} alerts |")
    states = ", ".join(f"{n} {s}" for s, n in sorted(a["transitions"].items()))
    lines += ["", "Rows lost and duplicates are over the whole run (the faults overlap in what they could lose): "
              "commits against the simulator's truth, alerts per idempotency key.", "",
              "## What it proves", "",
              f"- **Commits**: {c['acknowledged']:,} commits acknowledged by the coordinator (the simulator's truth), "
              f"{c['lost']} of them missing from the lake's `commits`, {c['duplicated']} `__consumer_offsets` records "
              f"in the lake twice ({c['lake_rows']:,} rows; {c['extra']} commits beyond the truth, "
              f"{c['tombstones']} tombstones of the deleted groups).",
              f"- **Alerts**: {a['notifications']} notifications ({states}), "
              f"{a['delivered']} delivered, {a['pending']} pending, {a['dead']} dead; {a['keys_received']} idempotency "
              f"keys received, {len(a['repeated'])} more than once, {len(a['lost'])} never, "
              f"{len(a['unknown'])} unknown to the outbox; {a['retried']} needed more than one attempt.",
              f"- **Quarantine**: {q['dropped']} bad files dropped, {q['quarantined']} in quarantine "
              f"({len(q['missing'])} missing, {len(q['unexpected'])} that were not dropped).",
              ]
    res = r.results
    if "tables" in res:
        eq = ", ".join(f"`{t}` {x['live']:,}/{x['clean']:,} {'equal' if x['equal'] else 'DIFFERENT'}"
                       for t, x in res["tables"].items())
        lines.append(f"- **Results**: the live tables against a clean `lagscope analyze --incremental` from "
                     f"{res['since']} to the live checkpoint's watermark {res['watermark']} (rows live/clean): {eq}.")
    else:
        lines.append(f"- **Results**: not compared: {res.get('error')}")
    lines += memory_lines(r.rss)
    lines += state_lines(state_growth(r.state_samples, r.lives, r.settled_after_s))
    lines.append(f"- **Process**: {len(r.lives)} lives of `lagscope run`, {len(r.unexpected_exits)} exits of its own.")
    if v:
        lines += ["", "## Failures", ""] + [f"- {k}: {x}" for k, xs in sorted(v.items()) for x in xs]
    lines += ["", "## The faults, in order", "",
              "| at (UTC) | fault | lasted s | sweeps back s | analytics back s | detail |",
              "|---|---|---:|---:|---:|---|"]
    for f in sorted(r.faults, key=lambda f: f.start):
        detail = {k: x for k, x in f.detail.items() if k != "files"}
        lines.append(f"| {_hms(f.start)} | {f.kind} | {f.end - f.start:.1f} | {_fmt(f.sweep_recovery_s)} | "
                     f"{_fmt(f.analytics_recovery_s)} | {json.dumps(detail)} |")
    return "\n".join(lines) + "\n"


def from_json(data: dict[str, Any]) -> SoakResult:
    """A result as ``--json`` kept it (to render its report again)."""
    data = {k: v for k, v in data.items() if k != "command"}
    faults = [FaultRecord(**f) for f in data["faults"]]
    for f in faults:
        if "step_began_s" not in f.detail:  # kept before the detail held it: the recovery was the step's start
            f.detail["step_began_s"] = f.analytics_recovery_s
        f.analytics_recovery_s = analytics_back(f)
    r = SoakResult(**{**data, "faults": faults,
                      "load_start": tuple(data["load_start"]), "load_end": tuple(data["load_end"])})
    if r.rss_samples:  # kept with the run: fitted again by this code
        r.rss = rss_fit([(t, int(pid), py, jvm) for t, pid, py, jvm in r.rss_samples], r.lives, r.settled_after_s)
    return r


def run_soak(opts: SoakOptions) -> SoakResult:
    return Soak(opts).execute()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0, help="wall time of lagscope run (default 30)")
    ap.add_argument("--seed", type=int, default=26, help="seed of the fault schedule and the scenarios (default 26)")
    ap.add_argument("--scenario", default="demo")
    ap.add_argument("--sweep-interval", type=float, default=5.0)
    ap.add_argument("--analytics-interval", type=float, default=30.0)
    ap.add_argument("--alerts-interval", type=float, default=5.0)
    ap.add_argument("--no-faults", action="store_true",
                    help="inject nothing: one life of lagscope run, for its memory over the whole run")
    ap.add_argument("--steady", action="store_true",
                    help="one run of --scenario stretched to the whole soak: the same groups and topics "
                         "throughout (default: a new run, new groups and topics, every minute or so)")
    ap.add_argument("--trace-memory", type=float, default=None, metavar="SECONDS",
                    help="run lagscope run under benchmarks/memtrace.py (tracemalloc), a sample every SECONDS "
                         "into <workdir>/memtrace (its RSS then includes tracemalloc's overhead)")
    ap.add_argument("--forget-after-s", type=float, default=None, metavar="SECONDS",
                    help="the analytics' forget_after_s (default: the product's, an hour; at least 900 is used): "
                         "a churning workload's memory levels off after it")
    ap.add_argument("--run-env", action="append", default=[], metavar="KEY=VALUE",
                    help="add a variable to the environment of lagscope run only (repeatable), e.g. "
                         "MALLOC_ARENA_MAX=2 or ARROW_DEFAULT_MEMORY_POOL=system, to compare its memory")
    ap.add_argument("--workdir", type=Path, default=None, help="default: a new folder under /tmp, kept")
    ap.add_argument("--report", type=Path, default=None, help="the Markdown report (default: stdout)")
    ap.add_argument("--json", type=Path, default=None, help="every figure as JSON")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="render the report of a run kept with --json again (with its own command line)")
    args = ap.parse_args()
    if args.from_json:
        data = json.loads(args.from_json.read_text())
        text = report(from_json(data), data.get("command", ""))
        if args.report:
            args.report.write_text(text)
        else:
            print(text)
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("kafka").setLevel(logging.CRITICAL)  # the scenarios' admin clients during the broker's outage
    # SIGTERM (a timeout, a Ctrl-C of flock) unwinds like Ctrl-C: the finally unmounts and stops what started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        run_env = parse_env(args.run_env)
    except ValueError as e:
        ap.error(str(e))
    import tempfile

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="soak-"))
    opts = SoakOptions(workdir, minutes=args.minutes, seed=args.seed, scenario=args.scenario,
                       sweep_interval_s=args.sweep_interval, analytics_interval_s=args.analytics_interval,
                       alerts_interval_s=args.alerts_interval, faults=not args.no_faults, steady=args.steady,
                       trace_memory_s=args.trace_memory, forget_after_s=args.forget_after_s,
                       run_env=run_env)
    result = run_soak(opts)
    command = "flock /tmp/lagscope-heavy.lock .venv/bin/python benchmarks/soak.py " + " ".join(sys.argv[1:])
    text = report(result, command)
    if args.json:
        args.json.write_text(json.dumps({**result.to_json(), "command": command}, indent=1, default=str))
    if args.report:
        args.report.write_text(text)
    else:
        print(text)
    log.info("workdir %s", workdir)
    return 0 if not verdicts(result) else 1


if __name__ == "__main__":
    raise SystemExit(main())
