"""Where a full step of ``lagscope run`` stops: before sweeps the collector holds and before what
the ``__consumer_offsets`` tails have not written yet, but never held back longer than the tail
wait (pure: the step's jobs are stubbed, no Spark)."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pytest

from lagscope.deploy import run as run_mod
from lagscope.deploy.run import full_step_end

NOW = dt.datetime(2026, 11, 27, 20, 0, 3, tzinfo=dt.UTC)


def _s(seconds: float) -> dt.datetime:
    return NOW - dt.timedelta(seconds=seconds)


def test_a_full_step_stops_at_the_earliest_of_now_the_held_sweeps_and_each_tail() -> None:
    assert full_step_end(NOW).until == NOW
    assert full_step_end(NOW, tails={}).until == NOW
    # the restarted tail has written what it read again only up to 19:59:56: the minute 19:59
    # is not complete yet (the soak's record: its step read the lake before that flush)
    end = full_step_end(NOW, tails={"soak": _s(7)})
    assert (end.until, end.bound_by, end.overdue) == (_s(7), "tail soak", {})
    assert end.until.replace(second=0) < NOW.replace(second=0)  # the minute 19:59 waits
    # the earliest bound wins, whichever it is
    assert full_step_end(NOW, held=_s(30), tails={"a": _s(7), "b": _s(12)}).until == _s(30)
    end = full_step_end(NOW, held=_s(5), tails={"a": _s(7), "b": _s(12)})
    assert (end.until, end.bound_by) == (_s(12), "tail b")
    # a tail ahead of now (its clock) or a held sweep after now change nothing
    assert full_step_end(NOW, held=_s(-1), tails={"a": _s(-2)}).until == NOW


def test_a_tail_that_does_not_catch_up_holds_the_steps_back_by_the_wait_at_most() -> None:
    # stuck for 10 minutes (its broker or its lake failing): the steps go on 120 s behind now
    end = full_step_end(NOW, tails={"a": _s(600), "b": _s(3)}, tail_wait_s=120.0)
    assert end.until == _s(120)
    assert end.overdue == {"a": _s(600)}
    note = end.note(NOW, 120.0)
    assert "tail of a" in note
    assert "600 s ago" in note
    assert "120 s" in note
    # none yet (it never caught up since the process started): the same bound
    end = full_step_end(NOW, tails={"a": None}, tail_wait_s=120.0)
    assert (end.until, end.overdue) == (_s(120), {"a": None})
    assert "no watermark yet" in end.note(NOW, 120.0)
    # within the wait it is waited for, and nothing is said
    end = full_step_end(NOW, tails={"a": _s(119)}, tail_wait_s=120.0)
    assert (end.until, end.overdue, end.note(NOW, 120.0)) == (_s(119), {}, "")
    # late, but complete before the whole minutes the step analyses: nothing to say either
    end = full_step_end(NOW, tails={"a": _s(50)}, tail_wait_s=20.0)
    assert end.overdue == {"a": _s(50)}
    assert end.until == _s(20)
    assert _s(50) >= end.until.replace(second=0)
    assert end.note(NOW, 20.0) == ""


@pytest.fixture
def stubbed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, dt.datetime]]:
    (tmp_path / "lake").mkdir()
    monkeypatch.setattr(run_mod.AnalyticsLoop, "_session", lambda self: object())
    import lagscope.analytics.job as job

    seen: list[tuple[str, dt.datetime]] = []

    def full(*_: object, until: dt.datetime, **__: object) -> job.StepFiles:
        seen.append(("full", until))
        return job.StepFiles({"status": 1})

    monkeypatch.setattr(job, "run_incremental", full)
    monkeypatch.setattr(job, "run_provisional", lambda *_, until, **__: seen.append(("pre", until)) or job.StepFiles())
    return seen


def _loop(tmp_path: Path, marks: dict[str, dt.datetime | None], **kw: object) -> run_mod.AnalyticsLoop:
    return run_mod.AnalyticsLoop(tmp_path / "lake", tmp_path / "res", interval_s=30, master="local[1]",
                                 clock=lambda: NOW, provisional=True, provisional_settle_s=5.0,
                                 tail_watermarks=lambda: marks, **kw)  # type: ignore[arg-type]


def test_the_loop_stops_its_full_step_at_the_tail_but_not_its_provisional_step(
        tmp_path: Path, stubbed: list[tuple[str, dt.datetime]], caplog: pytest.LogCaptureFixture) -> None:
    marks: dict[str, dt.datetime | None] = {"soak": _s(7)}
    loop = _loop(tmp_path, marks)
    with caplog.at_level(logging.INFO, logger="lagscope.deploy.run"):
        loop.step()
    # the provisional step covers the minute in progress at once; the full step replaces it
    assert stubbed == [("full", _s(7)), ("pre", _s(5))]
    assert loop.last_end is not None
    assert loop.last_end.bound_by == "tail soak"
    assert loop.last_overdue == ""
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    stubbed.clear()
    marks["soak"] = _s(1)  # caught up
    loop.step()
    assert stubbed == [("full", _s(1)), ("pre", _s(5))]


def test_the_loop_goes_on_without_a_stuck_tail_and_says_so_in_the_steps_summary(
        tmp_path: Path, stubbed: list[tuple[str, dt.datetime]], caplog: pytest.LogCaptureFixture) -> None:
    loop = _loop(tmp_path, {"soak": _s(900)}, tail_wait_s=120.0)
    with caplog.at_level(logging.INFO, logger="lagscope.deploy.run"):
        loop.step()
    assert stubbed[0] == ("full", _s(120))
    summary = [r for r in caplog.records if r.getMessage().startswith("analytics: status 1 file(s)")]
    assert len(summary) == 1
    assert summary[0].levelno == logging.WARNING
    assert "without waiting longer for the __consumer_offsets tail of soak" in summary[0].getMessage()
    assert "900 s ago" in summary[0].getMessage()
    assert loop.last_overdue in summary[0].getMessage()


def test_held_sweeps_still_stop_both_steps(tmp_path: Path, stubbed: list[tuple[str, dt.datetime]]) -> None:
    loop = _loop(tmp_path, {"soak": _s(2)}, complete_before=lambda: _s(40))
    loop.step()
    assert stubbed == [("full", _s(40)), ("pre", _s(40))]
    assert loop.last_end is not None
    assert loop.last_end.bound_by == "sweeps held"


def test_each_step_traces_its_start_and_where_its_steps_stop(
        tmp_path: Path, stubbed: list[tuple[str, dt.datetime]]) -> None:
    # one line per step in the analytics' trace, written before the step runs (a step that writes
    # no file, or fails, has one too): the soak times the recoveries from it
    loop = _loop(tmp_path, {"soak": _s(7)}, complete_before=lambda: _s(40))
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    trace = logging.getLogger("lagscope.analytics.trace")
    keep, level = Keep(), trace.level
    trace.addHandler(keep)  # its own handler: the trace does not propagate once a session has run
    trace.setLevel(logging.INFO)
    try:
        loop.step()
        loop.complete_before = None
        loop.step()
    finally:
        trace.removeHandler(keep)
        trace.setLevel(level)
    assert lines == [
        f"analytics step began {NOW.isoformat()}: full step until {_s(40).isoformat()} (sweeps held), "
        f"provisional until {_s(40).isoformat()}",
        f"analytics step began {NOW.isoformat()}: full step until {_s(7).isoformat()} (tail soak), "
        f"provisional until {_s(5).isoformat()}",
    ]


def test_lagscope_run_wires_the_collectors_tails_into_the_analytics(tmp_path: Path) -> None:
    from lagscope.config import load_config

    path = tmp_path / "lagscope.yaml"
    path.write_text("clusters: [{name: c1, bootstrap_servers: 'h:1', consumer_offsets_tail: {enabled: true}},\n"
                    "           {name: c2, bootstrap_servers: 'h:2'}]\n"
                    f"collector: {{lake: '{tmp_path / 'lake'}'}}\nmetrics: {{enabled: false}}\n")
    parts = {run_mod.Part.collector, run_mod.Part.analytics}
    comps = run_mod.build_components(load_config(path), parts, results=tmp_path / "results",
                                     outbox=tmp_path / "o.sqlite", results_metrics=False)
    analytics = next(c for c in comps if isinstance(c, run_mod.AnalyticsLoop))
    assert analytics.tail_watermarks is not None
    # before the collector starts its tail: the tail is on, with no watermark yet (waited for)
    assert analytics.tail_watermarks() == {"c1": None}
