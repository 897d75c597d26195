"""The analytics' incremental step under the allocators the ``lagscope`` command sets, beside the
interpreter's defaults (issue 26: the memory fix must not cost the step its speed).

    .venv/bin/python benchmarks/allocators_speed.py --rounds 1 -- --skip-demo --skip-batch \\
        --incremental-rows 100000 --incremental-runs 5

Each round runs ``benchmarks/analytics_speed.py`` (with the arguments after ``--``) twice, each in
a fresh process, one after the other, the order alternating from round to round:

- ``default``: the interpreter as it starts (glibc's per-thread arenas, Arrow's default pool,
  mimalloc);
- ``product``: what :func:`lagscope.__main__.main` does before the command runs
  (:func:`lagscope.memory.tune_allocators` before pyarrow's import, :func:`lagscope.memory.settle`
  after it), and :func:`lagscope.memory.release_unused` after every incremental step inside its
  timing, as ``lagscope run``'s analytics loop does after each step.

The allocators are chosen per process (Arrow reads its variable at import), so the two are never
in one process; each process times its own steps (the median of ``--incremental-runs``, its
variants alternating). Prints each run's medians per variant and the ratio product / default of
the medians per round. Run it on a quiet machine (benchmarks/README.md): a load average above 2.5
makes the figures no result.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ARMS = ("default", "product")
#: a row of analytics_speed's incremental section: its variant and its timed runs
_ROW = re.compile(r"^\| incremental step, 1 new sweep, (?P<label>[^:]+): median of \d+ \((?P<runs>[^)]*) s\)")


def medians(report: str) -> dict[str, float]:
    """The median seconds per variant of an analytics_speed report's incremental rows."""
    out: dict[str, float] = {}
    for line in report.splitlines():
        m = _ROW.match(line)
        if m:
            out[m["label"]] = statistics.median(float(x) for x in m["runs"].split(","))
    return out


def _as(arm: str, args: list[str]) -> None:
    """Run analytics_speed in this process with ``arm``'s allocators."""
    from lagscope import memory  # imports no pyarrow

    if arm == "product":
        memory.tune_allocators()
        import pyarrow  # noqa: F401  (chooses its pool now, as the command's import of the CLI does)

        memory.settle()
    spec = importlib.util.spec_from_file_location("analytics_speed", HERE / "analytics_speed.py")
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if arm == "product":
        step = mod.run_incremental

        def step_and_release(*a: object, **kw: object) -> object:
            try:
                return step(*a, **kw)
            finally:
                memory.release_unused()

        mod.run_incremental = step_and_release
    sys.argv = [str(HERE / "analytics_speed.py"), *args]
    mod.main()


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=1, help="rounds of the two runs, the order alternating")
    ap.add_argument("--as", dest="arm", choices=ARMS, help=argparse.SUPPRESS)  # one run, in this process
    ap.add_argument("rest", nargs=argparse.REMAINDER, help="-- then analytics_speed.py's arguments")
    args = ap.parse_args()
    rest = args.rest[1:] if args.rest[:1] == ["--"] else args.rest
    if args.arm:
        _as(args.arm, rest)
        return 0
    started = time.time()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# the incremental step, the product's allocators beside the defaults ({when})\n")
    print(f"`{' '.join([Path(sys.executable).name, *sys.argv])}`; load average at start "
          f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}\n", flush=True)
    got: list[tuple[int, str, dict[str, float], str]] = []
    for r in range(args.rounds):
        for arm in (ARMS if r % 2 == 0 else ARMS[::-1]):
            load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
            proc = subprocess.run([sys.executable, __file__, "--as", arm, "--", *rest],
                                  capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                print(proc.stdout[-3000:] + proc.stderr[-3000:], file=sys.stderr)
                print(f"error: the {arm} run failed (exit {proc.returncode})", file=sys.stderr)
                return 1
            med = medians(proc.stdout)
            if not med:
                print(proc.stdout[-3000:], file=sys.stderr)
                print(f"error: the {arm} run printed no incremental step (were its arguments right?)",
                      file=sys.stderr)
                return 1
            got.append((r, arm, med, load))
            print(f"- round {r + 1}, {arm} (load at its start {load}): "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in med.items()), flush=True)
    print("\n| round | variant | default s | product s | product / default |\n|---|---|---:|---:|---:|")
    for r in range(args.rounds):
        by = {arm: med for rr, arm, med, _ in got if rr == r}
        for label in by["default"]:
            d, p = by["default"][label], by["product"].get(label)
            print(f"| {r + 1} | {label} | {d:.2f} | {'—' if p is None else f'{p:.2f}'} | "
                  f"{'—' if p is None else f'{p / d:.2f}'} |")
    print(f"\nLoad average at end {' / '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{time.time() - started:.0f} s in all.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
