"""The object-store lake against local disk (issue 24, item 5), side by side in one run.

    .venv/bin/python benchmarks/s3_vs_disk.py --rows 50000000 --incremental-rows 100000 \\
        --sweep-partitions 100000 --workdir /tmp/lagscope-s3bench --out benchmarks/results/s3_vs_disk.md

It starts a real S3-compatible server itself: gofakes3 on 127.0.0.1 (``scripts/setup.sh --system``
builds it into ``.tools/bin``; started and stopped by its PID through the tests' ``S3Server``, its
objects in one bolt database under the work folder), then measures three things, each on a local
folder and on the bucket, the disk and S3 runs alternating:

1. **the batch** (``run_batch``, Spark ``local[2]``, all the result tables) over the synthetic lake
   of benchmarks/analytics_speed.py (``write_lake``: ``--rows`` offset rows of ``--keys``
   partitions), written once to the folder and once to the bucket by the lake's own writer
   (``write_table``: on the bucket each file put whole, then its commit marker), the results to the
   same kind of root as the lake; ``--batch-runs`` times each, each into an emptied results root;
2. **the incremental step** over one new sweep of ``--incremental-rows`` partitions after one day
   of history (``incremental_lake``, one sweep every ``--history-every-min`` minutes), each root
   primed as analytics_speed primes it (``prime_incremental``), each timed step from a copy of the
   primed results (on the bucket each object read and put whole), ``--incremental-runs`` times each, warm
   session;
3. **the collector's sweep write**: the collector's own row builder (``build_snapshot``, what a
   sweep hands on) over ``--sweep-partitions`` group-partitions shaped as sweep_bench's ``10k``
   case (groups of 2 topics × 5 partitions), each group Stable with one member owning its
   partitions, written by the collector's ``LakeSink`` (offsets, members, the sweeps row: three
   files, each on the bucket an object and its commit marker); one warm-up write each, then
   ``--sweep-runs`` timed writes each (median).

Each measurement is wall time (with the Spark driver JVM's peak heap for the analytics, as in
analytics_speed); the report gives the disk and the S3 figure side by side and the ratio S3/disk
of the medians. The batch's and the step's result rows are counted on both roots: they must be
the same. At the end: the peak RSS (VmHWM) of this process, of the Spark JVM with its Python
workers, and of gofakes3, and the bytes on disk of the local roots and of the bucket's database.

The load average (1 minute) is read at the start and at the end: above ``--max-load`` (2.5) at
either, the report is printed with a warning and **not** written to ``--out``: record only runs
on a quiet machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pyarrow.fs as pafs

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]

from analytics_speed import (  # noqa: E402
    T0,
    JvmHeap,
    _Echo,
    incremental_lake,
    prime_incremental,
    timed,
    write_lake,
)
from helpers.s3server import S3Server  # noqa: E402

from lagscope.analytics.job import RESULT_TABLES, run_batch, run_incremental  # noqa: E402
from lagscope.analytics.session import build_session  # noqa: E402
from lagscope.collector.loop import LakeSink  # noqa: E402
from lagscope.collector.model import Snapshot  # noqa: E402
from lagscope.collector.sweep import _Group, _Raw, build_snapshot  # noqa: E402
from lagscope.config import AnalyticsConfig, ClusterConfig  # noqa: E402
from lagscope.storage import Store, open_store  # noqa: E402

#: a result is recorded (written to --out) only when the 1-minute load average at the start and
#: at the end is at most this
MAX_LOAD = 2.5
#: sweep_bench's shape: 1,000 topics of 5 partitions, 2 topics per group
TOPICS, PARTITIONS, TOPICS_PER_GROUP = 1000, 5, 2

Root = Path | Store


# --------------------------------------------------------------------------------------------
# the two kinds of root
# --------------------------------------------------------------------------------------------

def _store(root: Root) -> Store:
    return root if isinstance(root, Store) else open_store(root)


def empty(root: Root) -> None:
    """Remove everything under a root (a folder, or a prefix of the bucket)."""
    if isinstance(root, Store):
        root.delete_folder("")
    else:
        shutil.rmtree(root, ignore_errors=True)


def copy_tree(src: Root, dst: Root) -> int:
    """Every file under ``src`` copied to the same relative path under ``dst`` (the same kind of
    root; on the bucket each object read and put whole: gofakes3's server-side copy (CopyObject on
    its bolt backend) can crash the server with a bus error). Returns the files copied."""
    if isinstance(src, Store) and isinstance(dst, Store):
        infos = src.filesystem.get_file_info(pafs.FileSelector(src.path(), recursive=True, allow_not_found=True))
        files = [i.path for i in infos if i.type == pafs.FileType.File]
        for path in files:
            with src.filesystem.open_input_stream(path) as f:
                data = f.read()
            with dst.filesystem.open_output_stream(dst.path(path[len(src.path()) + 1:])) as out:
                out.write(data)
        return len(files)
    assert isinstance(src, Path)
    assert isinstance(dst, Path)
    shutil.copytree(src, dst)
    return sum(1 for p in dst.rglob("*") if p.is_file())


def rows(root: Root, table: str) -> int:
    """Rows of a result table under ``root`` (0 when none was written)."""
    store = _store(root)
    folder = store.path(table)
    if store.filesystem.get_file_info(folder).type != pafs.FileType.Directory:
        return 0
    return int(ds.dataset(folder, filesystem=store.filesystem, format="parquet", partitioning="hive").count_rows())


def result_rows(root: Root) -> dict[str, int]:
    return {t: rows(root, t) for t in RESULT_TABLES}


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------

HEADER = ["| measurement | rows | disk s (median) | S3 s (median) | **S3 / disk** | disk runs | S3 runs "
          "| peak driver heap MB disk / S3 |", "|---|---:|---:|---:|---:|---|---|---:|"]


def side_by_side(label: str, n: int, disk: list[tuple[float, float]], s3: list[tuple[float, float]]) -> str:
    d, s = statistics.median(x for x, _ in disk), statistics.median(x for x, _ in s3)
    heap = (f"{max(mb for _, mb in disk):,.0f} / {max(mb for _, mb in s3):,.0f}"
            if all(mb == mb for _, mb in disk + s3) else "–")  # NaN: not a Spark measurement
    return (f"| {label} | {n:,} | {d:.3f} | {s:.3f} | **{s / d:.2f}×** | {', '.join(f'{x:.3f}' for x, _ in disk)} "
            f"| {', '.join(f'{x:.3f}' for x, _ in s3)} | {heap} |")


def same_rows(disk: dict[str, int], s3: dict[str, int]) -> str:
    counts = ", ".join(f"{t} {disk[t]:,}" + ("" if disk[t] == s3[t] else f" (**S3: {s3[t]:,}**)") for t in disk)
    return ("the same on both roots: " if disk == s3 else "**they differ**: ") + counts


def load1() -> float:
    return os.getloadavg()[0]


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg()) + " (1 / 5 / 15 min)"


# --------------------------------------------------------------------------------------------
# the sections
# --------------------------------------------------------------------------------------------

def alternate(runs: int, disk: Callable[[], tuple[float, float]],
              s3: Callable[[], tuple[float, float]]) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """``runs`` measurements of each, disk then S3, alternating."""
    d: list[tuple[float, float]] = []
    s: list[tuple[float, float]] = []
    for _ in range(runs):
        d.append(disk())
        s.append(s3())
    return d, s


def batch_section(spark: Any, heap: JvmHeap, args: argparse.Namespace, roots: dict[str, dict[str, Root]]) -> list[str]:
    sweeps = max(1, args.rows // args.keys)
    written: dict[str, float] = {}
    n = 0
    for kind, r in roots.items():
        empty(r["lake"])
        t = time.perf_counter()
        n = write_lake(r["lake"], keys=args.keys, groups=args.groups, sweeps=sweeps, interval_s=args.interval_s,
                       t0=T0, chunk_sweeps=max(1, 2_000_000 // args.keys))
        written[kind] = time.perf_counter() - t
    until = (T0 + dt.timedelta(seconds=(sweeps - 1) * args.interval_s)).date()

    def batch(r: dict[str, Root]) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            empty(r["results"])
            return timed(heap, lambda: run_batch(spark, r["lake"], r["results"], since=T0.date(), until=until,
                                                 settings=AnalyticsConfig(), progress=False), pause_s=3)
        return run

    disk, s3 = alternate(args.batch_runs, batch(roots["disk"]), batch(roots["s3"]))
    counts = {kind: result_rows(r["results"]) for kind, r in roots.items()}
    return ["## The batch", "",
            f"Synthetic lake (analytics_speed's `write_lake`): {n:,} offset rows ({args.keys:,} partitions × "
            f"{sweeps:,} sweeps every {args.interval_s:g} s, {args.groups} groups), written by the lake's writer in "
            f"{written['disk']:.1f} s to the folder and {written['s3']:.1f} s to the bucket "
            f"(**{written['s3'] / written['disk']:.2f}×**). `run_batch` on local[2], the results on the lake's kind "
            f"of root, each run into an emptied results root after a 3 s pause; disk and S3 alternating, "
            f"{args.batch_runs} runs each.", "", *HEADER,
            side_by_side("batch, all result tables", n, disk, s3), "",
            f"Result rows of the last runs, {same_rows(counts['disk'], counts['s3'])}.", ""]


def incremental_section(spark: Any, heap: JvmHeap, args: argparse.Namespace,
                        roots: dict[str, dict[str, Root]]) -> list[str]:
    keys = args.incremental_rows
    t_hist = T0 + dt.timedelta(days=10)
    primed_s: dict[str, float] = {}
    step_t = t_hist
    for kind, r in roots.items():
        for part in ("inc-lake", "inc-primed", "inc-results"):
            empty(r[part])
        t = time.perf_counter()
        step_t = incremental_lake(r["inc-lake"], keys=keys, groups=args.groups, days=1, t_hist=t_hist,
                                  rebalanced=args.rebalanced_groups, every_min=args.history_every_min)
        prime_incremental(spark, r["inc-lake"], r["inc-primed"], t_hist=t_hist, step_t=step_t,
                          every_min=args.history_every_min)
        primed_s[kind] = time.perf_counter() - t
    until = step_t + dt.timedelta(minutes=1)

    def step(r: dict[str, Root]) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            empty(r["inc-results"])
            copy_tree(r["inc-primed"], r["inc-results"])
            return timed(heap, lambda: run_incremental(spark, r["inc-lake"], r["inc-results"],
                                                       settings=AnalyticsConfig(), until=until), pause_s=3)
        return run

    disk, s3 = alternate(args.incremental_runs, step(roots["disk"]), step(roots["s3"]))
    added = {kind: {t: n - rows(r["inc-primed"], t) for t, n in result_rows(r["inc-results"]).items()}
             for kind, r in roots.items()}
    sweeps = 24 * 60 // args.history_every_min
    return ["## The incremental step", "",
            f"One new sweep of {keys:,} partitions ({args.groups} groups, {args.rebalanced_groups} of them with a new "
            f"generation and member set in it) after one day of history (analytics_speed's `incremental_lake`: a "
            f"sweep every {args.history_every_min} minutes, {sweeps} in the day), each root primed by "
            f"`prime_incremental` (lake written and primed in {primed_s['disk']:.1f} s on disk, "
            f"{primed_s['s3']:.1f} s on S3); each timed step from a copy of the primed results (on the bucket each "
            f"object read and put whole), after a 3 s pause; warm session (local[2], {args.shuffle_partitions} "
            f"shuffle partitions); disk and S3 alternating, {args.incremental_runs} runs each.", "", *HEADER,
            side_by_side("incremental step, 1 new sweep, 1 day of history", keys, disk, s3), "",
            f"Result rows the last timed step added, {same_rows(added['disk'], added['s3'])}.", ""]


def sweep_snapshot(partitions: int, sweep_ts: dt.datetime, seed: int = 42) -> Snapshot:
    """A sweep of ``partitions`` group-partitions as the collector builds it (``build_snapshot``
    over what its requests gathered): groups of 2 topics × 5 partitions of sweep_bench's 1,000
    topics, each group Stable with one member owning its partitions; small lags."""
    rng = random.Random(seed)
    per_group = TOPICS_PER_GROUP * PARTITIONS
    raw = _Raw()
    names = [f"bench-t{i:04d}" for i in range(TOPICS)]
    for t in names:
        for p in range(PARTITIONS):
            end = 1_000_000 + rng.randrange(1_000_000)
            raw.ends[(t, p)] = [end, end, 0]
    for g in range(max(1, partitions // per_group)):
        gid = f"bench-10k-g{g:05d}"
        topics = sorted(rng.sample(names, TOPICS_PER_GROUP))
        tps = [(t, p) for t in topics for p in range(PARTITIONS)]
        member = (f"consumer-{gid}-1-{g:08x}", f"consumer-{gid}-1", "/10.0.0.1")
        group = _Group(gid, 0, state="Stable", protocol="range", generation=1, described=True)
        group.members = [{"member_id": member[0], "group_instance_id": None, "client_id": member[1],
                          "host": member[2], "subscribed_topics": topics,
                          "assignment": [{"topic": t, "partition": p} for t, p in tps]}]
        group.owners = dict.fromkeys(tps, member)
        group.offsets = {tp: (raw.ends[tp][0] - rng.randrange(50), 0, None) for tp in tps}
        raw.groups[gid] = group
    cluster = ClusterConfig(name="bench", bootstrap_servers=["127.0.0.1:9092"])
    return build_snapshot(cluster, raw, sweep_ts, 1000.0, "s3-vs-disk")


def sweep_section(args: argparse.Namespace, roots: dict[str, dict[str, Root]]) -> list[str]:
    sinks = {}
    for kind, r in roots.items():
        empty(r["sweep-lake"])
        sinks[kind] = LakeSink(r["sweep-lake"])
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0)
    count = [0]

    def write(kind: str) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            count[0] += 1
            snap = sweep_snapshot(args.sweep_partitions, t0 + dt.timedelta(seconds=10 * count[0]))
            t = time.perf_counter()
            sinks[kind].update(snap)
            return time.perf_counter() - t, float("nan")
        return run

    for kind in sinks:  # one warm-up write each (the first request opens the connections)
        write(kind)()
    disk, s3 = alternate(args.sweep_runs, write("disk"), write("s3"))
    snap = sweep_snapshot(args.sweep_partitions, t0)
    size = _bytes(roots["disk"]["sweep-lake"]) / (args.sweep_runs + 1)
    return ["## The collector's sweep write", "",
            f"A sweep of {len(snap.offsets):,} group-partitions ({snap.sweep['groups']:,} groups of "
            f"{TOPICS_PER_GROUP} topics × {PARTITIONS} partitions, one member each: {len(snap.members):,} members "
            f"rows) built by the collector's `build_snapshot` and written by its `LakeSink` (offsets, members, the "
            f"sweeps row: three files, {size / 1e6:.1f} MB a sweep on disk; on the bucket each an object and its "
            f"commit marker); one warm-up write each, then {args.sweep_runs} timed writes each, disk and S3 "
            "alternating (the snapshot built before each, untimed).", "", *HEADER,
            side_by_side("sweep write (`LakeSink.update`)", len(snap.offsets), disk, s3), ""]


# --------------------------------------------------------------------------------------------
# memory and bytes
# --------------------------------------------------------------------------------------------

def hwm_mb(pid: int, field: str = "VmHWM") -> float:
    """A process's peak RSS (``VmHWM``; or another field of its /proc status in kB), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(pid: int) -> list[int]:
    """The live processes under ``pid`` (its children, theirs, …)."""
    parents: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                parents[int(d.name)] = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        out += kids
        todo += kids
    return out


def _bytes(root: Root) -> int:
    if isinstance(root, Store):
        infos = root.filesystem.get_file_info(pafs.FileSelector(root.path(), recursive=True, allow_not_found=True))
        return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


# --------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=50_000_000, help="offset rows of the batch's lake")
    ap.add_argument("--keys", type=int, default=5000, help="partitions of the batch's lake")
    ap.add_argument("--groups", type=int, default=100, help="groups of the batch's and the incremental lakes")
    ap.add_argument("--interval-s", type=float, default=10.0, help="sweep interval of the batch's lake")
    ap.add_argument("--batch-runs", type=int, default=3, help="timed batches on each root, alternating")
    ap.add_argument("--incremental-rows", type=int, default=100_000,
                    help="partitions (rows of the new sweep) of the incremental step")
    ap.add_argument("--incremental-runs", type=int, default=5, help="timed incremental steps on each root")
    ap.add_argument("--history-every-min", type=int, default=20,
                    help="the incremental lake's day of history: one sweep every this many minutes")
    ap.add_argument("--rebalanced-groups", type=int, default=5,
                    help="groups with a new generation and member set in the incremental step's sweep")
    ap.add_argument("--sweep-partitions", type=int, default=100_000, help="group-partitions of the sweep written")
    ap.add_argument("--sweep-runs", type=int, default=7, help="timed sweep writes on each root")
    ap.add_argument("--shuffle-partitions", type=int, default=4,
                    help="the session's shuffle partitions and default parallelism (lagscope run's default)")
    ap.add_argument("--driver-memory", default=AnalyticsConfig().driver_memory, help="spark.driver.memory")
    ap.add_argument("--workdir", type=Path, default=None,
                    help="the local roots and the bucket's database (default: a temporary folder, removed at the end)")
    ap.add_argument("--out", type=Path, default=None,
                    help="write the report here too, if the load average allowed (--max-load)")
    ap.add_argument("--max-load", type=float, default=MAX_LOAD,
                    help="record (--out) only when the 1-minute load average at start and end is at most this")
    ap.add_argument("--skip-batch", action="store_true")
    ap.add_argument("--skip-incremental", action="store_true")
    ap.add_argument("--skip-sweep", action="store_true")
    args = ap.parse_args(argv)

    work = args.workdir or Path(tempfile.mkdtemp(prefix="lagscope-s3bench-"))
    work.mkdir(parents=True, exist_ok=True)
    started, load_start = time.perf_counter(), load1()
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    lines = _Echo([f"# the object-store lake against local disk ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)", "",
                   f"Command: `{' '.join(['.venv/bin/python', 'benchmarks/s3_vs_disk.py', *sys.argv[1:]])}`", "",
                   f"Machine: {platform.machine()}, {os.cpu_count()} cores, {mem_gb:.1f} GB, Python "
                   f"{platform.python_version()}; load average at start {_load()}; driver memory "
                   f"{args.driver_memory}.", ""])
    server = S3Server(work)
    try:
        server.start()
        os.environ.update({k: v for k, v in server.credentials.items() if v})  # the Spark workers' too
        gofakes3_pid = server.pid
        assert gofakes3_pid is not None
        binary = server.binary.relative_to(ROOT) if server.binary.is_relative_to(ROOT) else server.binary
        lines += [f"S3: gofakes3 (`{binary}`, bolt backend) on {server.endpoint}, PID {gofakes3_pid}, bucket "
                  f"`{server.bucket}`, path-style http, the storage section's `credentials: env`; disk: the local "
                  f"filesystem of `{work}`.", ""]
        roots: dict[str, dict[str, Root]] = {
            "disk": {p: work / "disk" / p for p in ("lake", "results", "inc-lake", "inc-primed", "inc-results",
                                                   "sweep-lake")},
            "s3": {p: server.store(f"bench/{p}") for p in ("lake", "results", "inc-lake", "inc-primed",
                                                           "inc-results", "sweep-lake")}}
        spark_pids: list[int] = []
        if not (args.skip_batch and args.skip_incremental):
            spark = build_session("local[2]", shuffle_partitions=args.shuffle_partitions,
                                  driver_memory=args.driver_memory, log_file=work / "spark.log")
            try:
                heap = JvmHeap(spark)
                jvm = spark._jvm  # type: ignore[attr-defined]
                jvm_pid = int(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getName().split("@")[0])
                lines += [f"Spark {spark.version}, local[2], driver heap max {heap.max_mb:,.0f} MB; Spark's log: "
                          f"{work / 'spark.log'}.", ""]
                if not args.skip_batch:
                    lines += batch_section(spark, heap, args, roots)
                if not args.skip_incremental:
                    lines += incremental_section(spark, heap, args, roots)
                spark_pids = [jvm_pid, *descendants(jvm_pid)]
                spark_mb = sum(hwm_mb(p) for p in spark_pids)
            finally:
                spark.stop()
        if not args.skip_sweep:
            lines += sweep_section(args, roots)
        local = sum(_bytes(r) for r in roots["disk"].values())
        bolt = server.workdir / "objects.db"
        bucket_mb = bolt.stat().st_size / 1e6 if bolt.exists() else 0.0
        lines += ["## Memory and bytes", "",
                  f"Peak RSS (VmHWM): this process {hwm_mb(os.getpid()):,.0f} MB"
                  + (f"; the Spark JVM and its {len(spark_pids) - 1} child processes (the Python workers) alive at "
                     f"the end {spark_mb:,.0f} MB (a sum of peaks)" if spark_pids else "")
                  + f"; gofakes3 {hwm_mb(gofakes3_pid):,.0f} MB (its pages of the mapped database counted; "
                  f"anonymous memory at the end {hwm_mb(gofakes3_pid, 'RssAnon'):,.0f} MB). Bytes: the local roots "
                  f"{local / 1e6:,.1f} MB, "
                  f"the bucket's bolt database {bucket_mb:,.1f} MB.", ""]
    finally:
        server.stop()
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    load_end = load1()
    lines += [f"Load average at end {_load()}; {time.perf_counter() - started:.0f} s in all.", ""]
    worst = max(load_start, load_end)
    if worst > args.max_load:
        print(f"WARNING: load average {worst:.2f} (1 min) at the {'start' if load_start >= load_end else 'end'} is "
              f"above {args.max_load:g}: the figures above are not recorded"
              + (f" ({args.out} not written)" if args.out else "") + "; run it again on a quiet machine",
              file=sys.stderr, flush=True)
        return 3
    if args.out:
        args.out.write_text("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
