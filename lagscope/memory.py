"""What a long-lived lagscope process asks of its memory allocators.

``lagscope run`` is one process for weeks. Measured over hours (benchmarks/results/soak.md), what
its RSS gained was not objects it still held: Python's own allocations grew a few MB an hour
while the allocators kept what had been freed, in glibc's per-thread arenas (up to eight per core,
each keeping its own free pages) and in the mimalloc pool behind Arrow's buffers. So the entry
point (:mod:`lagscope.__main__`, the ``lagscope`` command) calls :func:`tune_allocators` before
anything imports pyarrow, and the analytics loop calls :func:`release_unused` after each step:

- glibc's malloc makes at most :data:`ARENA_MAX` arenas (``mallopt(M_ARENA_MAX)``, the in-process
  form of ``MALLOC_ARENA_MAX``, which glibc reads only when a process starts), in this process
  only: the Spark JVM it starts keeps glibc's default;
- Arrow's default pool is the system allocator (``ARROW_DEFAULT_MEMORY_POOL=system``: Arrow reads
  it when pyarrow is imported, for every allocation that names no pool, the Parquet reader's and
  writer's among them), so what Arrow frees goes to the same glibc arenas; pyspark's Python
  workers inherit the variable;
- after a step, those arenas give their free pages back (``malloc_trim(0)``, through the pool's
  ``release_unused``).

An operator's own choice wins: with ``MALLOC_ARENA_MAX`` (or glibc's ``arena_max`` tunable in
``GLIBC_TUNABLES``) or ``ARROW_DEFAULT_MEMORY_POOL`` set, that setting is left alone. Where glibc
is not the C library (musl, macOS) the malloc part is skipped.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections.abc import MutableMapping
from functools import cache
from typing import Any

__all__ = ["ARENA_MAX", "TUNED", "release_unused", "tune_allocators"]

#: glibc's malloc arenas at most (its default: eight per core)
ARENA_MAX = 2
#: mallopt's parameter number for the arena limit (glibc's malloc.h)
_M_ARENA_MAX = -8
#: what :func:`tune_allocators` set in this process, in words (the command line logs it)
TUNED: list[str] = []


@cache
def _glibc() -> Any:
    """glibc, when it is this process's C library, else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL("libc.so.6")
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.malloc_trim.argtypes = [ctypes.c_size_t]
    return libc


def tune_allocators(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Cap glibc's arenas and put Arrow's default pool on the system allocator, each unless the
    environment already chose. Call it before pyarrow is imported (the pool is chosen then).
    Returns what it set, in words, also kept in :data:`TUNED`."""
    env = os.environ if environ is None else environ
    done: list[str] = []
    libc = _glibc()
    chosen = env.get("MALLOC_ARENA_MAX") or "glibc.malloc.arena_max" in env.get("GLIBC_TUNABLES", "")
    if libc is not None and not chosen and libc.mallopt(_M_ARENA_MAX, ARENA_MAX) == 1:
        done.append(f"glibc's malloc at most {ARENA_MAX} arenas")
    if not env.get("ARROW_DEFAULT_MEMORY_POOL"):
        env["ARROW_DEFAULT_MEMORY_POOL"] = "system"
        done.append("Arrow's default pool on the system allocator"
                    + (" (for the children only: pyarrow was already imported)" if "pyarrow" in sys.modules else ""))
    TUNED[:] = done
    return done


def release_unused() -> None:
    """Give the free pages Arrow's default pool and glibc's arenas keep back to the system."""
    import pyarrow as pa

    pool = pa.default_memory_pool()
    pool.release_unused()  # the system allocator's is malloc_trim(0)
    libc = _glibc()
    if libc is not None and pool.backend_name != "system":
        libc.malloc_trim(0)
