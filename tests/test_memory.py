"""lagscope.memory: the allocators of a long-lived process, each measured in a process of its own
(an arena limit or a default pool, once set, is the process's for good)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import lagscope.cli
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
    from lagscope.memory import release_unused
    def rss():
        return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS")) / 1024
    blocks = [bytearray(1000) for _ in range(200_000)]
    kept = blocks[::100]; del blocks
    before = rss()
    if sys.argv[1] == "release":
        release_unused()
    print(before, rss())
""")


def _python(code: str, arg: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "ARROW_DEFAULT_MEMORY_POOL")}
    return subprocess.run([sys.executable, "-c", code, arg], env={**clean, **env}, capture_output=True,
                          text=True, timeout=120, check=True)


@glibc
def test_tuned_process_makes_at_most_two_arenas_where_glibc_would_make_one_per_thread() -> None:
    tuned = _python(_ARENAS, "tune")
    plain = _python(_ARENAS, "plain")
    assert tuned.stderr.count("Arena ") == memory.ARENA_MAX
    # glibc's own limit is 8 per core: the main thread's arena and one per thread (9) from 2 cores up
    assert plain.stderr.count("Arena ") >= 8
    assert "glibc malloc arenas at most 2" in tuned.stdout


@glibc
def test_operators_arena_limit_wins() -> None:
    done = _python(_ARENAS, "tune", MALLOC_ARENA_MAX="3")
    assert done.stderr.count("Arena ") == 3
    assert "arenas" not in done.stdout


def test_arrow_pool_goes_to_the_system_allocator_unless_the_environment_chose() -> None:
    code = ("import pyarrow as pa; from lagscope.memory import tune_allocators; "
            "done = tune_allocators(); print(pa.default_memory_pool().backend_name, done)")
    assert _python(code, "").stdout.startswith("system ")
    chosen = _python(code, "", ARROW_DEFAULT_MEMORY_POOL="mimalloc").stdout
    assert chosen.startswith("mimalloc ")
    assert "Arrow" not in chosen


@glibc
def test_release_unused_gives_the_free_pages_between_kept_blocks_back() -> None:
    before, after = map(float, _python(_RELEASE, "release").stdout.split())
    kept_before, kept_after = map(float, _python(_RELEASE, "keep").stdout.split())
    assert before > 200
    assert kept_before > 200
    assert after < before - 100            # most of the 198 MB freed goes back
    assert kept_after > kept_before - 20   # without it, free() alone keeps them


def test_entry_point_tunes_before_any_command(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(lagscope.cli, "tune_allocators", lambda: calls.append("tune"))
    monkeypatch.setattr(lagscope.cli, "app", lambda: calls.append("app"))
    lagscope.cli.main()
    assert calls == ["tune", "app"]
