"""The demo's summary is printed whole: log lines written while it prints (the collector and the
analytics keep running) come after it, in their order, and none is lost."""

from __future__ import annotations

import logging
import sys

import pytest

from lagscope.devtools.demo import held_logs, say


def test_log_lines_during_the_summary_come_after_it(capsys: pytest.CaptureFixture[str]) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("LOG %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    old = root.level
    root.setLevel(logging.INFO)
    try:
        with held_logs():
            say("summary line 1")
            logging.getLogger("lagscope.collector").info("sweep 1")
            say("summary line 2")
            logging.getLogger("lagscope.collector").warning("sweep 2")
            say("summary line 3")
        logging.getLogger("lagscope.collector").info("sweep 3")
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["summary line 1", "summary line 2", "summary line 3", "LOG sweep 1", "LOG sweep 2",
                     "LOG sweep 3"]
    assert not handler.filters
