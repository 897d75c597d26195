"""The alerts read the result tables through lagscope.results: a result file that cannot be read
is moved into quarantine and the findings come from the rest; a results folder that does not
exist is said once at start, not at every round."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pytest
from helpers.bad_files import KINDS, in_quarantine, quarantine_lines, spoil
from helpers.results_synthetic import Synthetic, anomaly

from lagscope.alerts import findings_from_results
from lagscope.config import AlertsConfig
from lagscope.deploy.run import AlertsLoop
from lagscope.lake import QuarantineCounts, write_rows
from lagscope.schema import ANOMALIES


@pytest.mark.parametrize("kind", KINDS)
def test_a_bad_result_file_is_skipped_with_one_warning(synthetic: Synthetic, caplog: pytest.LogCaptureFixture,
                                                       quarantined: QuarantineCounts, kind: str) -> None:
    want = sorted((f.key, f.state) for f in findings_from_results(synthetic.root, synthetic.now))
    assert want
    # a stall anomaly of another group, in a file that cannot be read: it must not fire
    start = synthetic.now - dt.timedelta(minutes=3)
    bad = write_rows(synthetic.root, ANOMALIES, synthetic.cluster,
                     [anomaly(synthetic.cluster, "billing", "invoices", "stall", start, None, "critical",
                              as_of=synthetic.now)])
    assert bad is not None
    spoil(bad, kind)

    got = sorted((f.key, f.state) for f in findings_from_results(synthetic.root, synthetic.now))

    assert got == want
    assert in_quarantine(bad).exists()
    assert not bad.exists()
    lines = quarantine_lines(caplog)
    assert len(lines) == 1
    assert str(bad) in lines[0]
    assert "table anomalies" in lines[0]
    assert quarantined.snapshot() == {(synthetic.cluster, "anomalies"): 1}


def test_the_alerts_loop_says_once_that_the_results_folder_is_missing(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    missing = tmp_path / "results"
    loop = AlertsLoop(missing, AlertsConfig(), tmp_path / "outbox.sqlite", interval_s=60.0,
                      app_url="http://localhost:8501")
    loop.setup()
    try:
        for _ in range(3):
            loop.step()
    finally:
        loop.teardown()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert lines == [f"alerts: the results folder {missing} does not exist (yet): nothing is evaluated until the "
                     "analytics write it"]
