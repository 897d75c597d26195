"""What a long-lived lagscope process asks of its memory allocators.

``lagscope run`` is one process for weeks. Measured over hours (benchmarks/results/soak.md), what
its RSS gained was not objects it still held: Python's own allocations grew a few MB an hour
while the allocators kept what had been freed, in glibc's per-thread arenas (up to eight per core,
each keeping its own free pages) and in the mimalloc pool behind Arrow's buffers. So the
``lagscope`` command (:mod:`lagscope.__main__`) calls :func:`tune_allocators` before anything
imports pyarrow and :func:`settle` after, and the analytics loop calls :func:`release_unused`
after each step:

- glibc's malloc makes at most :data:`ARENA_MAX` arenas (``mallopt(M_ARENA_MAX)``, the in-process
  form of ``MALLOC_ARENA_MAX``, which glibc reads only when a process starts);
- Arrow's default pool is the system allocator, for every allocation that names no pool (the
  Parquet reader's and writer's among them), so what Arrow frees goes back to those arenas: the
  process sets ``ARROW_DEFAULT_MEMORY_POOL=system`` for pyarrow's import, which chooses the pool,
  and takes it back after (:func:`settle`);
- free pages go back to the system (``malloc_trim(0)``, through the pool's ``release_unused``)
  after each analytics step and every :data:`RELEASE_EVERY_S` in any case (a thread
  :func:`settle` starts: the collector's writes and merges, the exporter's reads).

Only this process: the children it starts (the Spark JVM, pyspark's workers, Streamlit) keep
their allocators' defaults. An operator's own choice wins: with ``MALLOC_ARENA_MAX`` (or glibc's
``arena_max`` tunable in ``GLIBC_TUNABLES``) or ``ARROW_DEFAULT_MEMORY_POOL`` set, that setting is
left alone (and inherited). Where glibc is not the C library (musl, macOS) the malloc part is
skipped.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
from functools import cache
from typing import Any

__all__ = ["ARENA_MAX", "RELEASE_EVERY_S", "TUNED", "release_unused", "settle", "tune_allocators"]

#: glibc's malloc arenas at most (its default: eight per core)
ARENA_MAX = 2
#: the free pages go back at least this often (s)
RELEASE_EVERY_S = 60.0
#: mallopt's parameter number for the arena limit (glibc's malloc.h)
_M_ARENA_MAX = -8
#: what :func:`tune_allocators` set in this process, in words (the command line logs it)
TUNED: list[str] = []
ARROW_SYSTEM = "Arrow's default pool on the system allocator"
#: the variable this process sets for pyarrow's import (taken back by :func:`settle`)
_POOL_VAR = "ARROW_DEFAULT_MEMORY_POOL"


@cache
def _glibc() -> Any:
    """glibc, when it is this process's C library, else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    return libc


def tune_allocators() -> list[str]:
    """Cap glibc's arenas and have pyarrow's import choose the system allocator, each unless the
    environment already chose (and, for Arrow, unless pyarrow is already imported: its pool is
    chosen then). Returns what it set, in words, also kept in :data:`TUNED`."""
    done: list[str] = []
    libc = _glibc()
    chosen = os.environ.get("MALLOC_ARENA_MAX") or "glibc.malloc.arena_max" in os.environ.get("GLIBC_TUNABLES", "")
    if libc is not None and not chosen and libc.mallopt(_M_ARENA_MAX, ARENA_MAX) == 1:
        done.append(f"glibc's malloc at most {ARENA_MAX} arenas")
    if not os.environ.get(_POOL_VAR) and "pyarrow" not in sys.modules:
        os.environ[_POOL_VAR] = "system"
        done.append(ARROW_SYSTEM)
    TUNED[:] = done
    return done


def settle(every_s: float = RELEASE_EVERY_S) -> threading.Event:
    """After pyarrow's import: its pool is chosen, so the variable :func:`tune_allocators` set is
    taken back (the children keep Arrow's default); and a daemon thread calls
    :func:`release_unused` every ``every_s``. Returns the event that stops the thread."""
    import pyarrow as pa

    pa.default_memory_pool()  # chosen now, if the import did not already
    if ARROW_SYSTEM in TUNED:
        del os.environ[_POOL_VAR]
    stop = threading.Event()

    def release() -> None:
        while not stop.wait(every_s):
            release_unused()

    threading.Thread(target=release, name="lagscope-memory", daemon=True).start()
    return stop


def release_unused() -> None:
    """Give the free pages Arrow's default pool and glibc's arenas keep back to the system."""
    import pyarrow as pa

    pool = pa.default_memory_pool()
    pool.release_unused()  # the system allocator's is malloc_trim(0)
    libc = _glibc()
    if libc is not None and pool.backend_name != "system":
        libc.malloc_trim(0)
