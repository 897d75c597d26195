"""Run a lagscope command with its Python memory traced by structure (issue 26: is the RSS of
``lagscope run`` flat, and if not, what grows).

    .venv/bin/python benchmarks/memtrace.py --out /tmp/memtrace --every 60 -- run --config lagscope.yaml

The command after ``--`` runs in this process as ``python -m lagscope …`` would, with
:mod:`tracemalloc` on (``--frames`` frames per allocation). A thread writes one JSON line to
``<out>/samples.jsonl`` every ``--every`` seconds, and one at exit:

- ``rss_mb``: this process's RSS (with tracemalloc's own overhead: its traces cost about 60 bytes
  per live block, so this RSS is not the one to fit a slope to; benchmarks/soak.py samples that
  one in a run without tracing);
- ``traced_mb``: what Python's allocator holds as traced (the live blocks), and its peak;
- ``arrow_mb``: pyarrow's default memory pool (``pa.total_allocated_bytes()``, not traced by
  tracemalloc) and its backend;
- ``children``: the RSS of the process's descendants by kind (the Spark JVM, pyspark's Python
  workers, anything else), which neither tracemalloc nor this process's RSS counts;
- ``top``: the source lines holding the most traced memory, and ``grown``: the lines whose
  holding grew most since the first sample taken after ``--baseline`` seconds (the warm-up),
  each ``{"where", "mb", "blocks", "d_mb", "d_blocks"}``;
- ``types``: the count of live objects per type (``gc.get_objects``) for the types that hold the
  most, and their growth since the baseline.

The summary (:func:`growth_table`) reads the lines back: per source line, what it held at the
baseline and at the end, and the growth per hour.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import runpy
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: how many source lines and types each sample keeps
TOP = 40


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        return None
    return None


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = collections.defaultdict(list)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        kids[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def child_kind(cmdline: str) -> str:
    """``jvm`` (a java process), ``pyspark_worker`` (pyspark's daemon and its workers), or ``other``."""
    exe = cmdline.split(" ", 1)[0]
    if "java" in os.path.basename(exe):
        return "jvm"
    if "pyspark" in cmdline:
        return "pyspark_worker"
    return "other"


def children_rss(pid: int) -> dict[str, float]:
    """The RSS (MB) of ``pid``'s descendants summed by :func:`child_kind`."""
    out: dict[str, float] = collections.defaultdict(float)
    for c in _descendants(pid):
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        out[child_kind(cmd)] += _rss_mb(c) or 0.0
    return {k: round(v, 1) for k, v in sorted(out.items())}


def _where(stat: tracemalloc.Statistic | tracemalloc.StatisticDiff) -> str:
    frames = stat.traceback
    return " < ".join(f"{f.filename.split('site-packages/')[-1].split('/work/')[-1]}:{f.lineno}" for f in frames)


def _type_counts() -> collections.Counter[str]:
    return collections.Counter(type(o).__name__ for o in gc.get_objects())


class Tracer:
    """Samples this process's memory every ``every`` s into ``out/samples.jsonl``."""

    def __init__(self, out: Path, every: float, baseline_s: float, frames: int) -> None:
        self.out, self.every, self.baseline_s, self.frames = out, every, baseline_s, frames
        self.started = time.time()
        self.baseline: tracemalloc.Snapshot | None = None
        self.baseline_types: collections.Counter[str] | None = None
        self.baseline_t: float | None = None
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "samples.jsonl"

    def start(self) -> None:
        tracemalloc.start(self.frames)
        threading.Thread(target=self._loop, name="memtrace", daemon=True).start()

    def _loop(self) -> None:
        while not self.stopping.wait(self.every):
            self.sample()

    def sample(self, final: bool = False) -> None:
        with self.lock:
            now = time.time()
            snap = tracemalloc.take_snapshot().filter_traces((
                tracemalloc.Filter(False, tracemalloc.__file__),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
                tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>")))
            types = _type_counts()
            current, peak = tracemalloc.get_traced_memory()
            rec: dict[str, Any] = {"t": now, "age_s": round(now - self.started, 1), "final": final,
                                   "rss_mb": _rss_mb(os.getpid()), "traced_mb": round(current / 2**20, 2),
                                   "traced_peak_mb": round(peak / 2**20, 2), "children": children_rss(os.getpid())}
            try:
                import pyarrow as pa

                rec["arrow_mb"] = round(pa.total_allocated_bytes() / 2**20, 2)
                rec["arrow_backend"] = pa.default_memory_pool().backend_name
            except Exception:  # pyarrow not imported yet: nothing of it to count
                rec["arrow_mb"] = None
            rec["top"] = [{"where": _where(s), "mb": round(s.size / 2**20, 3), "blocks": s.count}
                          for s in snap.statistics("traceback")[:TOP]]
            rec["types"] = dict(types.most_common(TOP))
            if self.baseline is None and now - self.started >= self.baseline_s:
                self.baseline, self.baseline_types, self.baseline_t = snap, types, now
            elif self.baseline is not None:
                rec["grown"] = [{"where": _where(d), "mb": round(d.size / 2**20, 3), "blocks": d.count,
                                 "d_mb": round(d.size_diff / 2**20, 3), "d_blocks": d.count_diff}
                                for d in snap.compare_to(self.baseline, "traceback")[:TOP]]
                assert self.baseline_types is not None
                rec["types_grown"] = dict((types - self.baseline_types).most_common(TOP))
                rec["baseline_t"] = self.baseline_t
            with self.path.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")


def read_samples(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def growth_table(samples: Sequence[Mapping[str, Any]], n: int = 15) -> list[dict[str, Any]]:
    """From the samples' ``grown`` lists: per source line, what it held in the last sample, its
    growth since the baseline, and that growth per hour (over the time from the baseline's sample
    to the last); the ``n`` lines that grew most, largest first."""
    with_diff = [s for s in samples if s.get("grown")]
    if not with_diff:
        return []
    last = with_diff[-1]
    hours = max((last["t"] - last["baseline_t"]) / 3600.0, 1e-9)
    rows = sorted(last["grown"], key=lambda g: g["d_mb"], reverse=True)[:n]
    return [{**g, "mb_per_h": round(g["d_mb"] / hours, 2)} for g in rows]


def fit_mb_per_h(points: Iterable[tuple[float, float]]) -> float | None:
    """The least-squares slope of (seconds, MB) points, in MB per hour (None for fewer than 3)."""
    pts = list(points)
    if len(pts) < 3:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    if sxx == 0:
        return None
    return round(sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx * 3600.0, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--every", type=float, default=60.0, help="seconds between samples (default 60)")
    ap.add_argument("--baseline", type=float, default=240.0,
                    help="the first sample after this many seconds is the baseline of the growth (default 240)")
    ap.add_argument("--frames", type=int, default=1, help="frames kept per allocation (default 1)")
    ap.add_argument("--summary", action="store_true", help="print the growth table of --out's samples and exit")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then lagscope's arguments")
    args = ap.parse_args()
    if args.summary:
        samples = read_samples(args.out / "samples.jsonl")
        print(json.dumps({"traced_mb_per_h": fit_mb_per_h((s["t"], s["traced_mb"]) for s in samples
                                                            if s.get("grown")),
                          "arrow_mb_per_h": fit_mb_per_h((s["t"], s["arrow_mb"]) for s in samples
                                                         if s.get("grown") and s.get("arrow_mb") is not None),
                          "lines": growth_table(samples)}, indent=1))
        return
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    tracer = Tracer(args.out, args.every, args.baseline, args.frames)
    tracer.start()
    import atexit

    atexit.register(tracer.sample, True)
    sys.argv = ["lagscope", *command]
    runpy.run_module("lagscope", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
