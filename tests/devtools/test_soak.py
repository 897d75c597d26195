"""The soak of ``lagscope run`` (benchmarks/soak.py), in its short form, on every CI run: a few
minutes of the production process on a broker of its own, with one of each fault (SIGKILL of
the process, the broker stopped and started, bad files in the lake and the results, the lake's
filesystem full, the webhook receiver down, the Spark engine killed mid-step), and the same
checks as the 30-minute record (benchmarks/results/soak.md): each fault recovered from (within
one interval where the machine was quiet enough for a timing to be a result), no commit lost or
duplicated, every alert delivered once per idempotency key, exactly the bad files quarantined,
and the lag trends equal, row for row, to one clean analysis (status, anomalies and rebalance windows
too, or the run is an expected failure that lists every row differing: the step-boundary
differences still open, docs/operations.md).

It mounts a tmpfs (CI runs as root). ``LAGSCOPE_SOAK_SEED`` replays another schedule."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.benchmarks import load_benchmark

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

#: minutes of ``lagscope run``; with the set-up and the clean analysis the test takes under 6
MINUTES = 5.0
SEED = int(os.environ.get("LAGSCOPE_SOAK_SEED", "5"))


@pytest.mark.timeout(720)
def test_a_short_soak_under_every_fault_loses_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("the soak mounts a tmpfs for the lake: it runs as root (as CI does)")
    soak = load_benchmark("soak")
    # one kill (the record has ten): the five faults of the lane and their recoveries fill the minutes
    opts = soak.SoakOptions(tmp_path / "soak", minutes=MINUTES, seed=SEED, sweep_interval_s=5.0,
                            analytics_interval_s=30.0, alerts_interval_s=5.0, tmpfs_mb=128, kills=1)
    result = soak.run_soak(opts)
    text = soak.report(result, f"LAGSCOPE_SOAK_SEED={SEED} pytest tests/devtools/test_soak.py")
    failed = soak.verdicts(result)
    print(text)

    # every kind of fault was injected, and the harness itself had nothing to say
    assert {f.kind for f in result.faults} == set(soak.KINDS), text
    assert not failed.get("faults"), text
    assert not failed.get("harness"), text
    # after each, sweeps and analytics steps (or the webhooks' backlog) within one interval
    # (soak.verdicts: the bounds, with the loops' own scheduling slack the report states; a time
    # taken while the load was above soak.QUIET_LOAD is not a result, and the report says so,
    # but the recovery must happen all the same)
    assert not failed.get("recovery"), text
    for f in result.faults:
        assert f.detail.get("load") is not None, text
        if f.kind == "receiver":
            assert f.alerts_recovery_s is not None, text
        else:
            assert f.sweep_recovery_s is not None, text
            assert f.analytics_recovery_s is not None, text
        if f.kind in soak.ENGINE_FAULTS:  # a new engine, which finished a step after the fault
            assert f.detail["results_written_s"] >= f.analytics_recovery_s, text
    # the process died only when killed, and stopped cleanly at the end
    assert result.unexpected_exits == [], text
    assert not failed.get("process"), text

    # the live results against a clean analysis of the same lake up to the live watermark, row for
    # row: the lag trends equal (below: the other tables)
    assert "error" not in result.results, text
    tables = result.results.get("tables")
    assert tables, text
    assert tables["lag_trends"]["equal"], text
    assert tables["lag_trends"]["live"] > 0
    assert tables["status"]["live"] > 0
    assert tables["anomalies"]["episodes_clean"] > 0, text

    # no commit the coordinator acknowledged is missing from the lake, none is there twice
    commits = result.commits
    assert commits["acknowledged"] > 100, text
    assert commits["lost"] == 0, text
    assert commits["duplicated"] == 0, text

    # every notification delivered, each idempotency key exactly once
    alerts = result.alerts
    assert alerts["notifications"] > 0, text
    assert alerts["pending"] == alerts["dead"] == 0, text
    assert alerts["lost"] == [], text
    assert alerts["repeated"] == {}, text
    assert alerts["unknown"] == [], text
    assert alerts["bad_signature"] == 0

    # exactly the dropped files went to quarantine: 2 in the lake, 2 in the results
    q = result.quarantine
    assert q["dropped"] == 4, text
    assert q["missing"] == [], text
    assert q["unexpected"] == [], text

    # memory: sampled and fitted (a few minutes cannot judge a slope; the 30-minute record does)
    assert result.rss["samples"] > 20
    assert result.rss["py_slope_mb_per_h"] is not None
    assert result.rss["py_mb_max"] < 1500, text
    assert set(failed) <= {soak.RECLASSIFIED, "results"}, text

    # status, anomalies and rebalance windows: equal too, except for the classes of step-boundary
    # differences that are still open (docs/operations.md, "Open: episodes cut by a step
    # boundary"; docs/analytics.md: a window's figures that need what follows it, a stall one pass
    # calls starved, an open episode a later rebalance explains). They come and go with where the
    # steps fall: such a run is an expected failure, reported with every row that differs, never
    # a pass; every check above holds either way
    differ = [t for t in ("status", "anomalies", "rebalances") if not tables[t]["equal"]]
    if differ:
        pytest.xfail(f"open: the live {', '.join(differ)} differ from one pass over the same lake: "
                     f"{failed.get('results') or failed.get(soak.RECLASSIFIED)}")

