"""What a long-lived lagscope process asks of its memory allocators.

``lagscope run`` is one process for weeks. Measured over hours (benchmarks/results/soak.md), what
its RSS gained was not objects it still held: Python's own allocations grew a few MB an hour
while the allocators kept what had been freed, in glibc's per-thread arenas (up to eight per core,
each keeping its own free pages) and in the mimalloc pool behind Arrow's buffers. So the entry
point (:func:`lagscope.cli.main`) calls :func:`tune_allocators` once, and the analytics loop
calls :func:`release_unused` after each step:

- glibc's malloc makes at most :data:`ARENA_MAX` arenas (``mallopt(M_ARENA_MAX)``, the in-process
  form of ``MALLOC_ARENA_MAX``: the environment variable is read when the process starts, so
  setting it from Python would reach only the children, the Spark JVM among them);
- Arrow's default pool is the system allocator (glibc's, so one allocator to trim), in this
  process only: pyspark's workers keep their own;
- after a step, Arrow's pool and glibc's arenas give their free pages back
  (``release_unused``, ``malloc_trim(0)``).

An operator's own ``MALLOC_ARENA_MAX`` or ``ARROW_DEFAULT_MEMORY_POOL`` wins: each already took
effect when the process started or imported pyarrow, and is left alone. Anywhere glibc is not the
C library (musl, macOS) the malloc part is skipped.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import platform
from collections.abc import Mapping
from functools import cache
from typing import Any

__all__ = ["ARENA_MAX", "release_unused", "tune_allocators"]

log = logging.getLogger(__name__)

#: glibc's malloc arenas at most (its default: eight per core)
ARENA_MAX = 2
#: mallopt's parameter number for the arena limit (glibc's malloc.h)
_M_ARENA_MAX = -8


@cache
def _glibc() -> Any:
    """The C library when it is glibc, else None."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def tune_allocators(environ: Mapping[str, str] | None = None) -> list[str]:
    """Cap glibc's arenas and put Arrow's default pool on the system allocator, unless the
    environment already chose (``MALLOC_ARENA_MAX``, ``ARROW_DEFAULT_MEMORY_POOL``). Returns what
    it set, in words (empty: nothing)."""
    env = os.environ if environ is None else environ
    done: list[str] = []
    libc = _glibc()
    if libc is not None and "MALLOC_ARENA_MAX" not in env and libc.mallopt(_M_ARENA_MAX, ARENA_MAX) == 1:
        done.append(f"glibc malloc arenas at most {ARENA_MAX}")
    if "ARROW_DEFAULT_MEMORY_POOL" not in env:
        import pyarrow as pa

        if pa.default_memory_pool().backend_name != "system":
            pa.set_memory_pool(pa.system_memory_pool())
            done.append("Arrow's default pool on the system allocator")
    if done:
        log.debug("memory: %s", "; ".join(done))
    return done


def release_unused() -> None:
    """Give the free pages Arrow's pool and glibc's arenas keep back to the system."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
