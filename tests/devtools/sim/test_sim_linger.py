"""A run whose members linger past the schedule (``start_scenario(linger_s=)``, what ``lagscope
demo`` uses so that the run's own end is not in the minutes it judges), on the tests' broker."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lagscope.devtools.sim import truth
from lagscope.devtools.sim.runner import start_scenario
from lagscope.devtools.sim.truth import Produce, Revoke

pytestmark = pytest.mark.kafka


LINGER = """
name: linger
description: One member consumes a steady producer.
duration: 4
topics: [{name: t, partitions: 1}]
producers: [{name: p, topic: t, rate: 20}]
groups:
  - name: g
    topics: [t]
    members: [{name: a}]
"""


def test_lingering_members_consume_past_the_schedule_until_stopped(bootstrap: str, tmp_path: Path) -> None:
    # lagscope demo's run: the producers stop with the schedule, the members go on (still in
    # their group, committing) until the run is stopped, and the truth is written as ever
    f = tmp_path / "linger.yaml"
    f.write_text(LINGER)
    run = start_scenario(f, bootstrap, tmp_path / "run", linger_s=120.0, cleanup=True)
    deadline = time.monotonic() + 60
    while run.t0 is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run.t0 is not None
    schedule_end = run.t0 + 4.0
    time.sleep(max(0.0, schedule_end + 3.0 - time.time()))
    assert not run.done()
    run.stop()
    result = run.wait(timeout=60)
    records = truth.load(result.truth_path)
    produced = [r.ts for r in records if isinstance(r, Produce)]
    assert produced
    assert max(produced) < schedule_end + 0.5
    # the member left when stopped, after the schedule: revoked then, not at its end
    revoked = [r.ts for r in records if isinstance(r, Revoke) and r.partitions]
    assert revoked
    assert min(revoked) > schedule_end + 2.0, revoked
    assert result.end_state is not None
    assert result.stopped_early
