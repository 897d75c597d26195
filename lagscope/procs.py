"""Stopping the child processes lagscope starts (the Kafka broker, Spark daemons)."""

from __future__ import annotations

import contextlib
import logging
import signal
import subprocess

__all__ = ["terminate"]

log = logging.getLogger(__name__)


def terminate(proc: subprocess.Popen[bytes], grace: float, what: str = "process") -> None:
    """SIGTERM ``proc`` and wait ``grace`` seconds for a clean exit; SIGKILL it if it hangs."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        log.warning("%s pid %s did not stop in %.0fs; killing it", what, proc.pid, grace)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        proc.wait(timeout=10)
