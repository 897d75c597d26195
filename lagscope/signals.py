"""Stop a long-running command cleanly on SIGINT (Ctrl-C) and SIGTERM (``kill``, Kubernetes)."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["stop_on_signals"]


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event,
                    on_signal: Callable[[str], None] | None = None) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM set ``stop`` (after ``on_signal(name)``, if given).

    The previous handlers are restored on the way out. Must be entered from the main thread.

        >>> stop = threading.Event()
        >>> with stop_on_signals(stop):           # doctest: +SKIP
        ...     while not stop.wait(1.0):
        ...         work()
    """

    def handler(signum: int, _frame: Any) -> None:
        if on_signal is not None:
            on_signal(signal.Signals(signum).name)
        stop.set()

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
