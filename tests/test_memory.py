"""lagscope.memory: the allocators of a long-lived process, each measured in a process of its own
(an arena limit or a default pool, once set, is the process's for good)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lagscope import memory

glibc = pytest.mark.skipif(memory._glibc() is None, reason="glibc's malloc only")

# eight threads each allocate through malloc and wait until all have, then glibc lists its arenas
_ARENAS = textwrap.dedent("""
    import ctypes, sys, threading
    from lagscope.memory import tune_allocators
    if sys.argv[1] == "tune":
        print(tune_allocators())
    gate = threading.Barrier(9)
    def work():
        keep = [bytearray(100_000) for _ in range(20)]
        gate.wait(); gate.wait()
    threads = [threading.Thread(target=work) for _ in range(8)]
    [t.start() for t in threads]; gate.wait()
    sys.stdout.flush()
    ctypes.CDLL("libc.so.6").malloc_stats()   # one "Arena N:" line each, on stderr
    gate.wait(); [t.join() for t in threads]
""")

# 200 MB in blocks of 1,000 bytes (malloc's, not pymalloc's), 99 in 100 freed: the free pages
# sit between the kept blocks, where free() gives nothing back
_RELEASE = textwrap.dedent("""
    import sys
    from lagscope.memory import release_unused, tune_allocators
    if sys.argv[2] == "tuned":
        tune_allocators()   # Arrow's pool on glibc: its release_unused is the trim
    def rss():
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) / 1024
    blocks = [bytearray(1000) for _ in range(200_000)]
    kept = blocks[::100]; del blocks
    before = rss()
    if sys.argv[1] == "release":
        release_unused()
    print(before, rss())
""")


def _python(code: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES", "ARROW_DEFAULT_MEMORY_POOL")}
    return subprocess.run([sys.executable, "-c", code, *args], env={**clean, **env}, capture_output=True,
                          text=True, timeout=120, check=True)


@glibc
def test_tuned_process_makes_at_most_two_arenas_where_glibc_would_make_one_per_thread() -> None:
    tuned = _python(_ARENAS, "tune")
    plain = _python(_ARENAS, "plain")
    assert tuned.stderr.count("Arena ") == memory.ARENA_MAX
    # glibc's own limit is 8 per core: the main thread's arena and one per thread (9) from 2 cores up
    assert plain.stderr.count("Arena ") >= 8
    assert "glibc's malloc at most 2 arenas" in tuned.stdout


@glibc
@pytest.mark.parametrize("env", [{"MALLOC_ARENA_MAX": "3"}, {"GLIBC_TUNABLES": "glibc.malloc.arena_max=3"}])
def test_operators_arena_limit_wins(env: dict[str, str]) -> None:
    done = _python(_ARENAS, "tune", **env)
    assert done.stderr.count("Arena ") == 3
    assert "arenas" not in done.stdout


# Parquet written and read back through a filtered dataset (the lake's paths: they take C++'s
# default pool, not only pyarrow's), then which pool served them
_ARROW = textwrap.dedent("""
    import sys, tempfile
    from lagscope.memory import tune_allocators
    if sys.argv[1] == "tune":
        tune_allocators()
    import pyarrow as pa, pyarrow.dataset as ds, pyarrow.parquet as pq
    folder = tempfile.mkdtemp()
    pq.write_table(pa.table({"x": list(range(500_000))}), folder + "/part.parquet")
    assert ds.dataset(folder).to_table(filter=ds.field("x") > 10).num_rows == 500_000 - 11
    print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().max_memory())
""")


def test_arrow_allocates_from_the_system_allocator_unless_the_environment_chose() -> None:
    tuned = _python(_ARROW, "tune").stdout.split()
    plain = _python(_ARROW, "plain").stdout.split()
    chosen = _python(_ARROW, "tune", ARROW_DEFAULT_MEMORY_POOL="mimalloc").stdout.split()
    assert tuned == ["system", "0"]  # mimalloc never served a byte
    assert plain[0] == "mimalloc"
    assert int(plain[1]) > 1_000_000
    assert chosen[0] == "mimalloc"


@glibc
@pytest.mark.parametrize("pool", ["tuned", "mimalloc"])
def test_release_unused_gives_the_free_pages_between_kept_blocks_back(pool: str) -> None:
    before, after = map(float, _python(_RELEASE, "release", pool).stdout.split())
    kept_before, kept_after = map(float, _python(_RELEASE, "keep", pool).stdout.split())
    assert before > 200
    assert kept_before > 200
    assert after < before - 100            # most of the 198 MB freed goes back
    assert kept_after > kept_before - 20   # the control: free() alone keeps them


def test_settle_releases_every_interval_until_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[float] = []
    monkeypatch.setattr(memory, "release_unused", lambda: calls.append(time.monotonic()))
    stop = memory.settle(every_s=0.02)
    deadline = time.monotonic() + 10
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    assert len(calls) >= 3
    time.sleep(0.1)
    stopped_at = len(calls)
    time.sleep(0.1)
    assert len(calls) == stopped_at


def test_the_command_tunes_the_process_before_pyarrow_is_imported(tmp_path: Path) -> None:
    # `lagscope` and `python -m lagscope` (lagscope.__main__): a command that imports pyarrow runs
    # with Arrow on the system allocator (were lagscope.cli imported first, pyarrow would already
    # have chosen mimalloc); its --verbose log names what was set
    code = textwrap.dedent("""
        import sys
        from lagscope.__main__ import main
        sys.argv = ["lagscope", "--verbose", "lake", "prune", "--lake", sys.argv[1], "--dry-run"]
        try:
            main()
        except SystemExit:
            pass
        import os, threading, pyarrow as pa
        print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().max_memory(),
              os.environ.get("ARROW_DEFAULT_MEMORY_POOL", "-"),
              "lagscope-memory" in [t.name for t in threading.enumerate()])
    """)
    done = _python(code, str(tmp_path))
    # Arrow on glibc, the variable taken back (the children keep Arrow's default), the releaser running
    assert done.stdout.split()[-4:] == ["system", "0", "-", "True"]
    assert "allocators: " in done.stderr
    assert "Arrow's default pool on the system allocator" in done.stderr


def test_the_allocators_benchmark_reads_the_speed_benchmarks_rows() -> None:
    # benchmarks/allocators_speed.py compares the medians analytics_speed prints: its rows as
    # analytics_speed writes them (its own _row), the median of each row's runs
    from helpers.benchmarks import load_benchmark

    speed, bench = load_benchmark("analytics_speed"), load_benchmark("allocators_speed")
    report = "\n".join([
        "| measurement | rows | seconds | rows/s | peak driver heap MB |",
        speed._row("incremental step, 1 new sweep, 1 day of history: median of 3 (1.90, 1.50, 1.70 s); "
                   "rebalances rows written: 0", 100_000, 1.7, 300.0),
        speed._row("incremental step, 1 new sweep, 7 days of history: median of 2 (2.00, 1.00 s); "
                   "rebalances rows written: 0", 100_000, 1.5, 280.0),
        speed._row("the batch, 50,000,000 rows", 50_000_000, 46.1, 900.0)])
    assert bench.medians(report) == {"1 day of history": 1.7, "7 days of history": 1.5}


def test_the_allocators_benchmark_stops_on_a_run_that_failed() -> None:
    bench = Path(__file__).parents[1] / "benchmarks" / "allocators_speed.py"
    got = subprocess.run([sys.executable, str(bench), "--", "--no-such-option"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert got.returncode == 1
    assert "error: the default run failed (exit 2)" in got.stderr
    assert "--no-such-option" in got.stderr  # analytics_speed's own complaint, passed on
