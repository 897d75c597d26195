"""Latency of lagscope's Burrow API over HTTP for a large cluster (issue 22: the status endpoint
answers in ≤ 50 ms p99 for 10,000 groups).

    .venv/bin/python benchmarks/burrow_api.py --groups 10000 --record

1. **The cluster**: a synthetic lake and results folder in the layout the API reads
   (:mod:`lagscope.burrow.snapshot`): ``--groups`` groups, each reading one or two of
   ``--topics`` topics (topics of 1, 2, 3, 4, 6, 8 or 12 partitions; 1–12 partitions per group),
   ``--sweeps`` sweeps ``--interval-s`` apart ending now (one lake file per sweep, as the
   collector writes them; by default an hour at 15 s, what the server reads at start with the
   default ``burrow_api.history``, which fills every partition's window of ``--intervals``
   entries), owners on most groups, and ``--evaluations`` evaluations ``--eval-every-s`` apart
   in the results (an hour at the analytics' 60 s; mostly OK, some WARN, some ERR with
   STOP/STALL partitions, so that ``/status`` bodies list partitions).
2. **The server**, in a child process (so that the client never shares its interpreter lock):
   the real :class:`~lagscope.burrow.BurrowApi` on 127.0.0.1, port 0, refreshing every
   ``--refresh-s``. The first snapshot's build time and the process's resident memory before
   the build, after it and at its peak (``VmHWM``) are reported.
3. **Steady state**: one client on one keep-alive connection (as Burrow's clients poll: one
   group after another) sends a shuffled mix of requests, each timed from send to the last byte
   of the body: ``/status`` and ``/lag`` of random groups (``--requests`` each), the consumer
   detail and topic detail of random groups and topics, the list endpoints (``--list-requests``
   each: clusters, consumers, topics) and the **reference**, ``/burrow/admin``, a constant
   answer through the same server, handler and router (``--requests``): the HTTP stack's and the
   client's own cost, so that ``status p99 / reference p99`` is what lagscope's work adds.
4. **During refreshes**: ``--refresh-rounds`` times, the parent writes a new sweep of every group
   and a new evaluation, then polls ``/status`` of random groups until the child has rebuilt its
   snapshot; the requests that overlapped a rebuild are reported apart (the rebuild holds the
   interpreter lock in turns with the request threads), with the rebuilds' durations.

The load average is read at start and end: above ``--max-load`` (2.5) at start the benchmark
refuses to run; above it at end the result is marked invalid. ``--record`` writes the Markdown
report to benchmarks/results/burrow_api.md (only a valid run; written to a temporary file and
renamed); without it the report is only printed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import http.client
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "benchmarks" / "results" / "burrow_api.md"
CLUSTER = "bench"
TARGET_P99_MS = 50.0
#: partitions of a topic: topic i has TOPIC_SIZES[i % len(TOPIC_SIZES)]
TOPIC_SIZES = (1, 2, 3, 4, 6, 8, 12)


# -- the cluster ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    """Every group's partitions as flat arrays (one element per group-partition), and the
    per-row constants from which each sweep's offsets derive."""

    groups: list[str]
    topics: list[str]
    row_group: np.ndarray[Any, np.dtype[np.int64]]      # index into groups
    row_topic: np.ndarray[Any, np.dtype[np.int64]]      # index into topics
    row_partition: np.ndarray[Any, np.dtype[np.int32]]
    row_lag: np.ndarray[Any, np.dtype[np.int64]]        # the row's steady lag (messages)
    row_growth: np.ndarray[Any, np.dtype[np.int64]]     # lag added per sweep (a falling-behind group)
    group_owned: np.ndarray[Any, np.dtype[np.bool_]]    # has members (else Empty: no owners)
    group_status: list[str]                             # Burrow's status of the evaluation
    rate: int = 500                                     # messages produced per partition per sweep

    @property
    def rows(self) -> int:
        return len(self.row_group)

    @cached_property
    def read_topics(self) -> list[str]:
        """The topics some group reads (the API lists no others)."""
        return [self.topics[t] for t in np.unique(self.row_topic)]


def make_cluster(groups: int, topics: int, seed: int) -> Cluster:
    """``groups`` groups over ``topics`` topics: each reads one topic, or two when the first has
    at most 6 partitions (a second that fits in 12 in all). 90 % have members; 85 % are OK, 9 %
    WARN (a growing lag), 6 % ERR (a stopped or stalled partition)."""
    rng = random.Random(seed)
    topic_names = [f"topic-{t:04d}" for t in range(topics)]
    sizes = [TOPIC_SIZES[t % len(TOPIC_SIZES)] for t in range(topics)]
    g_idx: list[int] = []
    t_idx: list[int] = []
    p_idx: list[int] = []
    for g in range(groups):
        first = rng.randrange(topics)
        chosen = [first]
        if sizes[first] <= 6 and rng.random() < 0.5:
            room = 12 - sizes[first]
            fits = [t for t in rng.sample(range(topics), min(topics, 8)) if t != first and sizes[t] <= room]
            chosen += fits[:1]
        for t in chosen:
            for p in range(sizes[t]):
                g_idx.append(g)
                t_idx.append(t)
                p_idx.append(p)
    draw = [rng.random() for _ in range(groups)]
    status = ["OK" if d < 0.85 else "WARN" if d < 0.94 else "ERR" for d in draw]
    n = len(g_idx)
    row_group = np.array(g_idx, np.int64)
    lag = np.array([rng.randrange(0, 60) for _ in range(n)], np.int64)
    growth = np.array([40 if status[g] == "WARN" else 0 for g in g_idx], np.int64)
    return Cluster(groups=[f"group-{g:05d}" for g in range(groups)], topics=topic_names, row_group=row_group,
                   row_topic=np.array(t_idx, np.int64), row_partition=np.array(p_idx, np.int32), row_lag=lag,
                   row_growth=growth, group_owned=np.array([rng.random() < 0.9 for _ in range(groups)]),
                   group_status=status)


def _full(spec: Any, columns: dict[str, Any], n: int) -> pa.Table:
    """``columns`` as a table of ``spec``'s schema, the other columns null."""
    return pa.table({f.name: columns[f.name] if isinstance(columns.get(f.name), pa.Array)
                     else pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
                     for f in spec.schema})


def _first_of_group(cluster: Cluster) -> np.ndarray[Any, np.dtype[np.bool_]]:
    return np.r_[True, cluster.row_group[1:] != cluster.row_group[:-1]]


def _constant_offset_columns(cluster: Cluster) -> dict[str, pa.Array]:
    """The offsets columns that are the same in every sweep (names, owners), built once."""
    from lagscope.schema import OFFSETS

    owned = cluster.group_owned[cluster.row_group]
    member = [f"{cluster.groups[g]}-m{p % 3}" if o else None
              for g, p, o in zip(cluster.row_group, cluster.row_partition, owned, strict=True)]
    cols = {
        "group_id": [cluster.groups[g] for g in cluster.row_group],
        "topic": [cluster.topics[t] for t in cluster.row_topic],
        "partition": cluster.row_partition, "log_start_offset": np.zeros(cluster.rows, np.int64),
        "member_id": member, "client_id": [f"{cluster.groups[g]}-client" if o else None
                                           for g, o in zip(cluster.row_group, owned, strict=True)],
        "host": [f"/10.0.{int(g) % 250}.{int(p) % 3 + 1}" if o else None
                 for g, p, o in zip(cluster.row_group, cluster.row_partition, owned, strict=True)],
        "group_state": ["Stable" if o else "Empty" for o in owned],
    }
    return {name: pa.array(values, OFFSETS.schema.field(name).type) for name, values in cols.items()}


def write_sweep(lake: Path, cluster: Cluster, k: int, at: dt.datetime,
                constant: dict[str, pa.Array] | None = None) -> None:
    """The ``k``-th sweep of every group at ``at``: one lake file, as the collector writes it. A
    partition's end offset grows by ``rate`` per sweep; its committed offset trails it by the
    row's lag (plus its growth, for a group falling behind); ERR groups' first partition stopped
    before the first sweep. ``constant``: :func:`_constant_offset_columns`, when writing many."""
    from lagscope.lake import write_table
    from lagscope.schema import OFFSETS

    n = cluster.rows
    end = 1_000_000 + cluster.row_topic * 7919 + cluster.row_partition.astype(np.int64) * 131 + cluster.rate * k
    committed = end - cluster.row_lag - cluster.row_growth * k
    erred = np.array([s == "ERR" for s in cluster.group_status])[cluster.row_group]
    stopped = erred & _first_of_group(cluster)
    committed = np.where(stopped, end - cluster.rate * k - cluster.row_lag, committed)
    columns: dict[str, Any] = dict(constant or _constant_offset_columns(cluster))
    columns.update({"sweep_ts": [at] * n, "committed_offset": committed, "log_end_offset": end,
                    "last_stable_offset": end, "lag": np.maximum(end - committed, 0)})
    write_table(lake, OFFSETS, CLUSTER, _full(OFFSETS, columns, n), date=at.date())


def write_status(results: Path, cluster: Cluster, at: dt.datetime) -> None:
    """One evaluation at ``at``: the group rows and every partition's (a WARN group's partitions
    WARN, an ERR group's first partition STOP or STALL, the rest OK)."""
    from lagscope.lake import write_table
    from lagscope.schema import STATUS

    groups = len(cluster.groups)
    n = cluster.rows
    part_status = []
    for g, first in zip(cluster.row_group, _first_of_group(cluster), strict=True):
        s = cluster.group_status[g]
        part_status.append("WARN" if s == "WARN" else ("STOP" if g % 2 else "STALL") if s == "ERR" and first else "OK")
    write_table(results, STATUS, CLUSTER, _full(STATUS, {
        "eval_ts": [at] * (groups + n), "group_id": cluster.groups + [cluster.groups[g] for g in cluster.row_group],
        "topic": [None] * groups + [cluster.topics[t] for t in cluster.row_topic],
        "partition": [None] * groups + cluster.row_partition.tolist(),
        "burrow_status": cluster.group_status + part_status, "status": cluster.group_status + part_status,
    }, groups + n), date=at.date())


# -- the server (child process) --------------------------------------------------------------------


def _proc_kb(pid: int | str, key: str) -> int:
    """A ``/proc/<pid>/status`` value in kB (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def serve_child(args: argparse.Namespace) -> None:
    """The server process: build the first snapshot, serve, report each rebuild on stdout (one
    JSON line: monotonic start and end, whether the snapshot changed), stop when stdin closes."""
    from lagscope.burrow import BurrowApi, SnapshotBuilder, SnapshotRefresher
    from lagscope.config import parse_duration

    def say(**msg: Any) -> None:
        with lock:
            print(json.dumps(msg), flush=True)

    lock = threading.Lock()
    rss_before = _proc_kb("self", "VmRSS")
    builder = SnapshotBuilder(args.lake, args.results, intervals=args.intervals, history_s=parse_duration(args.history))
    plain_refresh = builder.refresh

    def timed_refresh() -> Any:
        before = builder.snapshot
        t0 = time.monotonic()
        snap = plain_refresh()
        t1 = time.monotonic()
        if snap is not before:
            say(refresh=[t0, t1], groups=sum(len(c.groups) for c in snap.clusters.values()))
        return snap

    builder.refresh = timed_refresh  # type: ignore[method-assign]
    api = BurrowApi(SnapshotRefresher(builder, args.refresh_s), port=0, hostname="bench")
    api.start()
    say(ready=True, port=api.port, rss_before_kb=rss_before, rss_after_kb=_proc_kb("self", "VmRSS"))
    try:
        sys.stdin.read()  # until the parent closes it
    finally:
        api.stop()


# -- the client ----------------------------------------------------------------------------------


@dataclass
class Server:
    proc: subprocess.Popen[str]
    port: int = 0
    ready: dict[str, Any] = field(default_factory=dict)
    refreshes: list[tuple[float, float]] = field(default_factory=list)
    failed: str = ""
    _event: threading.Condition = field(default_factory=threading.Condition)

    def read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._event:
                if "ready" in msg:
                    self.ready, self.port = msg, msg["port"]
                elif "refresh" in msg:
                    self.refreshes.append(tuple(msg["refresh"]))  # type: ignore[arg-type]
                self._event.notify_all()
        with self._event:
            self.failed = f"the server exited with status {self.proc.wait()}"
            self._event.notify_all()

    def wait(self, done: Any, timeout: float) -> None:
        with self._event:
            if not self._event.wait_for(lambda: done() or self.failed, timeout):
                raise SystemExit(f"burrow_api benchmark: the server did not answer within {timeout:.0f} s")
            if self.failed and not done():
                raise SystemExit(f"burrow_api benchmark: {self.failed}")



@dataclass(frozen=True)
class Timing:
    kind: str
    start: float  # monotonic s (the same clock as the server's rebuild times)
    ms: float
    size: int     # body bytes


class Client:
    """One keep-alive connection; :meth:`get` times one request to the body's last byte and
    fails the benchmark on any answer but 200 (every name it asks for exists)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def get(self, kind: str, path: str) -> Timing:
        t0 = time.monotonic()
        self.conn.request("GET", path)
        resp = self.conn.getresponse()
        body = resp.read()
        t1 = time.monotonic()
        if resp.status != 200:
            raise SystemExit(f"burrow_api benchmark: GET {path} answered {resp.status}: {body[:200]!r}")
        return Timing(kind, t0, (t1 - t0) * 1000, len(body))

    def close(self) -> None:
        self.conn.close()


def _paths(kind: str, cluster: Cluster, rng: random.Random) -> str:
    base = f"/v3/kafka/{CLUSTER}"
    if kind == "reference":
        return "/burrow/admin"
    if kind in ("status", "lag"):
        return f"{base}/consumer/{rng.choice(cluster.groups)}/{kind}"
    if kind == "consumer":
        return f"{base}/consumer/{rng.choice(cluster.groups)}"
    if kind == "topic":
        return f"{base}/topic/{rng.choice(cluster.read_topics)}"
    return {"clusters": "/v3/kafka", "consumers": f"{base}/consumer", "topics": f"{base}/topic"}[kind]


#: endpoint kind → what the report calls it
ENDPOINTS = {
    "status": "`/v3/kafka/<cluster>/consumer/<group>/status`",
    "lag": "`/v3/kafka/<cluster>/consumer/<group>/lag`",
    "consumer": "`/v3/kafka/<cluster>/consumer/<group>`",
    "topic": "`/v3/kafka/<cluster>/topic/<topic>`",
    "consumers": "`/v3/kafka/<cluster>/consumer` (every group)",
    "topics": "`/v3/kafka/<cluster>/topic`",
    "clusters": "`/v3/kafka`",
    "reference": "reference: `/burrow/admin` (constant answer, same server)",
}


def steady(client: Client, cluster: Cluster, args: argparse.Namespace, rng: random.Random) -> list[Timing]:
    """The shuffled mix of every endpoint (so that drift in the machine's load hits all alike)."""
    counts = {"status": args.requests, "lag": args.requests, "reference": args.requests,
              "consumer": args.requests // 4, "topic": args.requests // 4,
              "consumers": args.list_requests, "topics": args.list_requests, "clusters": args.list_requests}
    schedule = [kind for kind, n in counts.items() for _ in range(n)]
    rng.shuffle(schedule)
    return [client.get(kind, _paths(kind, cluster, rng)) for kind in schedule]


def refreshing(client: Client, server: Server, cluster: Cluster, args: argparse.Namespace, lake: Path,
               results: Path, rng: random.Random) -> tuple[list[Timing], list[tuple[float, float]]]:
    """``--refresh-rounds`` times: a new sweep and evaluation, then ``/status`` (and the reference,
    alternately) of random groups until the server has rebuilt and been idle for two refresh
    periods. Returns the requests and the rebuilds."""
    timings: list[Timing] = []
    first = len(server.refreshes)
    constant = _constant_offset_columns(cluster)
    for r in range(args.refresh_rounds):
        seen = len(server.refreshes)
        at = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=1)
        write_sweep(lake, cluster, args.sweeps + r, at, constant)
        write_status(results, cluster, at)
        deadline = time.monotonic() + args.server_timeout_s
        while True:
            kind = "status" if len(timings) % 2 == 0 else "reference"
            timings.append(client.get(kind, _paths(kind, cluster, rng)))
            rebuilt = server.refreshes[seen:]
            if rebuilt and time.monotonic() > rebuilt[-1][1] + 2 * args.refresh_s:
                break
            if time.monotonic() > deadline:
                raise SystemExit("burrow_api benchmark: the server did not rebuild after a new sweep")
    return timings, server.refreshes[first:]


# -- the report ------------------------------------------------------------------------------------


def _pct(ms: list[float], q: float) -> float:
    return float(np.percentile(np.array(ms), q, method="higher")) if ms else float("nan")


def _row(label: str, ts: list[Timing], ref_p99: float | None) -> str:
    ms = [t.ms for t in ts]
    p99 = _pct(ms, 99)
    ratio = f"{p99 / ref_p99:.2f}" if ref_p99 else "1.00"
    size = int(np.median([t.size for t in ts])) if ts else 0
    worst = max(ms, default=float("nan"))
    return f"| {label} | {len(ts):,} | {size:,} | {_pct(ms, 50):.2f} | {p99:.2f} | {worst:.2f} | {ratio} |"


def _table(by_kind: dict[str, list[Timing]]) -> list[str]:
    ref = _pct([t.ms for t in by_kind.get("reference", [])], 99)
    lines = ["| endpoint | requests | body bytes (median) | p50 ms | p99 ms | max ms | p99 / reference p99 |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for kind, label in ENDPOINTS.items():
        if by_kind.get(kind):
            lines.append(_row(f"**{label}**" if kind == "status" else label, by_kind[kind],
                              None if kind == "reference" else ref))
    return lines


def _overlaps(t: Timing, spans: list[tuple[float, float]]) -> bool:
    end = t.start + t.ms / 1000
    return any(t.start < b and end > a for a, b in spans)


def _load() -> tuple[float, str]:
    avg = os.getloadavg()
    return avg[0], " / ".join(f"{x:.2f}" for x in avg) + " (1 / 5 / 15 min)"


def run(args: argparse.Namespace, work: Path) -> tuple[list[str], bool]:
    """The benchmark; returns the report's lines and whether the run is valid."""
    load0, load0_text = _load()
    invalid: list[str] = []
    if load0 > args.max_load:
        invalid.append(f"load average {load0:.2f} above {args.max_load} at start")
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    lines = [f"# Burrow API latency ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
             f"Command: `{' '.join(['.venv/bin/python', 'benchmarks/burrow_api.py', *sys.argv[1:]])}`", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, {mem_gb:.1f} GB, Python "
             f"{platform.python_version()}; load average at start {load0_text}.", ""]
    lake, results = work / "lake", work / "results"
    shutil.rmtree(lake, ignore_errors=True)
    shutil.rmtree(results, ignore_errors=True)
    rng = random.Random(args.seed)
    t = time.perf_counter()
    cluster = make_cluster(args.groups, args.topics, args.seed)
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    constant = _constant_offset_columns(cluster)
    for k in range(args.sweeps):
        write_sweep(lake, cluster, k, now - dt.timedelta(seconds=args.interval_s * (args.sweeps - 1 - k)), constant)
    for e in range(args.evaluations):
        write_status(results, cluster, now - dt.timedelta(seconds=args.eval_every_s * (args.evaluations - 1 - e)))
    gen_s = time.perf_counter() - t
    per_group = np.bincount(cluster.row_group, minlength=args.groups)
    lines += [f"Cluster: {args.groups:,} groups over {args.topics} topics, {cluster.rows:,} group-partitions "
              f"({per_group.min()}–{per_group.max()} per group, mean {per_group.mean():.1f}); {args.sweeps} sweeps "
              f"{args.interval_s:g} s apart, one lake file each ({args.sweeps * cluster.rows:,} offset rows), window "
              f"{args.intervals} entries; {args.evaluations} evaluations {args.eval_every_s:g} s apart "
              f"({args.evaluations * (args.groups + cluster.rows):,} status rows): "
              f"{cluster.group_status.count('OK'):,} OK, {cluster.group_status.count('WARN'):,} WARN, "
              f"{cluster.group_status.count('ERR'):,} ERR groups. Written in {gen_s:.1f} s. The server reads "
              f"`burrow_api.history` ({args.history}) of them at start.", ""]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--serve", "--lake", str(lake), "--results", str(results),
           "--intervals", str(args.intervals), "--history", args.history, "--refresh-s", str(args.refresh_s)]
    t_spawn = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    server = Server(proc)
    reader = threading.Thread(target=server.read_stdout, daemon=True)
    reader.start()
    try:
        server.wait(lambda: bool(server.ready), args.server_timeout_s)
        build = server.refreshes[0]
        lines += [f"Server: `BurrowApi` in a child process (127.0.0.1, refresh every {args.refresh_s:g} s); "
                  f"first snapshot built in **{build[1] - build[0]:.2f} s** (ready {time.monotonic() - t_spawn:.1f} s "
                  f"after spawn, imports included); resident memory {server.ready['rss_before_kb'] / 1024:,.0f} MB "
                  f"before the build, {server.ready['rss_after_kb'] / 1024:,.0f} MB after it.", ""]
        client = Client(server.port)
        try:
            for _ in range(args.warmup):
                kind = rng.choice(["status", "lag", "reference"])
                client.get(kind, _paths(kind, cluster, rng))
            timings = steady(client, cluster, args, rng)
            by_kind: dict[str, list[Timing]] = {}
            for tm in timings:
                by_kind.setdefault(tm.kind, []).append(tm)
            lines += [f"## Steady state ({len(timings):,} requests, shuffled, one keep-alive connection, after "
                      f"{args.warmup} warm-up requests)", "", *_table(by_kind), ""]
            status_p99 = _pct([t.ms for t in by_kind["status"]], 99)
            if args.refresh_rounds:
                during, rebuilds = refreshing(client, server, cluster, args, lake, results, rng)
                inside = {k: [t for t in during if t.kind == k and _overlaps(t, rebuilds)]
                          for k in ("status", "reference")}
                outside = {k: [t for t in during if t.kind == k and not _overlaps(t, rebuilds)]
                           for k in ("status", "reference")}
                durations = ", ".join(f"{b - a:.2f}" for a, b in rebuilds)
                lines += [f"## During rebuilds ({args.refresh_rounds} rounds: a new sweep of every group and a new "
                          "evaluation, then `/status` of random groups and the reference, alternately)", "",
                          f"Rebuilds (s): {durations}.", "",
                          "| requests | count | p50 ms | p99 ms | max ms |", "|---|---:|---:|---:|---:|"]
                for label, part in (("overlapping a rebuild", inside), ("between rebuilds", outside)):
                    for k in ("status", "reference"):
                        ms = [t.ms for t in part[k]]
                        lines.append(f"| `{k}`, {label} | {len(ms):,} | {_pct(ms, 50):.2f} | {_pct(ms, 99):.2f} | "
                                     f"{max(ms, default=float('nan')):.2f} |")
                lines.append("")
        finally:
            client.close()
        peak_kb = _proc_kb(proc.pid, "VmHWM")
        rss_kb = _proc_kb(proc.pid, "VmRSS")
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    load1, load1_text = _load()
    if load1 > args.max_load:
        invalid.append(f"load average {load1:.2f} above {args.max_load} at end")
    verdict = "meets" if status_p99 <= TARGET_P99_MS else "misses"
    lines += [f"Server process memory: peak resident **{peak_kb / 1024:,.0f} MB** (VmHWM), {rss_kb / 1024:,.0f} MB "
              "at the end.", "",
              f"Target: `/status` p99 ≤ {TARGET_P99_MS:g} ms at 10,000 groups; this run ({args.groups:,} groups) "
              f"{verdict} it: **{status_p99:.2f} ms**.", "",
              f"Load average at end {load1_text}. "
              + ("**Valid.**" if not invalid else f"**INVALID: {'; '.join(invalid)}.**"), ""]
    return lines, not invalid


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=10_000, help="consumer groups of the cluster (target run: 10,000)")
    ap.add_argument("--topics", type=int, default=200, help="topics the groups read")
    ap.add_argument("--sweeps", type=int, default=240,
                    help="sweeps in the lake (default: an hour at the collector's default 15 s, what the server reads "
                         "at start by default)")
    ap.add_argument("--interval-s", type=float, default=15.0, help="seconds between sweeps")
    ap.add_argument("--evaluations", type=int, default=60,
                    help="status evaluations in the results (default: an hour at the analytics' default 60 s)")
    ap.add_argument("--eval-every-s", type=float, default=60.0, help="seconds between evaluations")
    ap.add_argument("--history", default="1h", help="the server's burrow_api.history")
    ap.add_argument("--intervals", type=int, default=10, help="offset entries per partition (Burrow's window)")
    ap.add_argument("--requests", type=int, default=5000,
                    help="requests to /status, /lag and the reference each (a quarter as many consumer and topic "
                         "details)")
    ap.add_argument("--list-requests", type=int, default=200, help="requests to each list endpoint")
    ap.add_argument("--warmup", type=int, default=200, help="untimed requests first")
    ap.add_argument("--refresh-rounds", type=int, default=3, help="new sweeps written while requests run (0: none)")
    ap.add_argument("--refresh-s", type=float, default=1.0, help="the server's refresh period (s)")
    ap.add_argument("--max-load", type=float, default=2.5,
                    help="refuse to start above this 1-min load average; mark the result invalid above it at end")
    ap.add_argument("--ignore-load", action="store_true", help="run even above --max-load (the result is invalid)")
    ap.add_argument("--server-timeout-s", type=float, default=900.0, help="wait this long for the server's snapshot")
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--workdir", type=Path, default=None,
                    help="keep the lake and results here (default: a temporary folder, removed at the end)")
    ap.add_argument("--record", action="store_true", help=f"write the report to {RESULT.relative_to(ROOT)}")
    # the server's child process
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--lake", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--results", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve_child(args)
        return
    if min(args.groups, args.topics, args.requests, args.sweeps, args.evaluations) < 1:
        ap.error("--groups, --topics, --requests, --sweeps and --evaluations must be at least 1")
    load = os.getloadavg()[0]
    if load > args.max_load and not args.ignore_load:
        print(f"burrow_api benchmark: load average {load:.2f} is above {args.max_load}: the machine is not quiet "
              "enough for a latency figure (--ignore-load runs anyway and marks the result invalid)", file=sys.stderr)
        raise SystemExit(3)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lagscope-burrow-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        lines, valid = run(args, work)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    report = "\n".join(lines)
    print(report, flush=True)
    if args.record:
        if not valid:
            print(f"burrow_api benchmark: not recording an invalid run in {RESULT}", file=sys.stderr)
            raise SystemExit(3)
        tmp = RESULT.with_name(f".{RESULT.name}.tmp")
        tmp.write_text(report)
        tmp.replace(RESULT)
        print(f"recorded in {RESULT}", file=sys.stderr)


if __name__ == "__main__":
    main()
