"""stop_on_signals: SIGINT/SIGTERM set the stop event, name the signal, and the old handlers return."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from lagscope.signals import stop_on_signals


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_sets_stop_and_handlers_are_restored(sig: signal.Signals) -> None:
    before = signal.getsignal(sig)
    stop = threading.Event()
    seen: list[str] = []
    with stop_on_signals(stop, seen.append):
        os.kill(os.getpid(), sig)
        assert stop.wait(5)
    assert seen == [sig.name]
    assert signal.getsignal(sig) is before
