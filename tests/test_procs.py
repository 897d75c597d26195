"""terminate: a clean SIGTERM exit, and SIGKILL for a child that ignores SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from lagscope.procs import terminate


def test_a_cooperative_child_exits_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    terminate(proc, grace=10)
    assert proc.returncode == -signal.SIGTERM


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    code = ("import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "print('ready', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"ready\n"
    started = time.monotonic()
    terminate(proc, grace=0.5, what="stubborn child")
    assert proc.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 10
    proc.stdout.close()
