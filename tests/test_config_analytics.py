"""The ``analytics`` section: validation, the job taking it as it is (its defaults are the
analytics' own), and how analyze, run and demo use it (command-line options override the file).
No Spark session: the job entry points are replaced by recorders, the wiring is what is under test."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from typer.testing import CliRunner

from lagscope.analytics.configured import with_overrides
from lagscope.cli import app

if TYPE_CHECKING:
    from lagscope.analytics.job import StepFiles
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig, load_config
from lagscope.errors import ConfigError

TUNED = {
    "results": "RESULTS",
    "master": "local[3]",
    "shuffle_partitions": 3,
    "driver_memory": "768m",
    "interval_s": 7,
    "backfill": "2h",
    "read_committed_groups": ["payments"],
    "session_timeout_s": 12,
    "heartbeat_s": 2,
    "network_s": 0.5,
    "rebalance_timeout_s": 90,
    "rules": {"stall_after_s": 33, "stop_after_s": 44, "gap_k": 4, "storm_count": 5, "warn_lag_s": 7,
              "burrow_window": 6},
}


def _config(tmp_path: Path, analytics: dict[str, Any] | None = None, **sections: Any) -> Path:
    lake = tmp_path / "lake"
    lake.mkdir(exist_ok=True)
    data: dict[str, Any] = {"collector": {"lake": str(lake)}, **sections}
    if analytics is not None:
        data["analytics"] = yaml.safe_load(yaml.safe_dump(analytics).replace("RESULTS", str(tmp_path / "res")))
    path = tmp_path / "lagscope.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_analytics_defaults_live_in_the_config_only() -> None:
    # the analytics take the config's models (no copy of their fields or defaults exists) and
    # without overrides the section goes through unchanged
    import lagscope.analytics as analytics_pkg

    assert not (Path(analytics_pkg.__file__).parent / "params.py").exists()
    assert with_overrides(AnalyticsConfig()) == AnalyticsConfig()
    assert AnalyticsConfig().rules == AnalyticsRulesConfig()
    assert AnalyticsConfig().driver_memory == "1g"


def test_file_values_reach_the_job_settings(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, TUNED)).analytics
    s = with_overrides(cfg)
    assert s.rules == AnalyticsRulesConfig(stall_after_s=33.0, stop_after_s=44.0, gap_k=4.0, storm_count=5,
                                           warn_lag_s=7.0, burrow_window=6)
    assert s.rules.gap_min_s == AnalyticsRulesConfig().gap_min_s  # not in the file: the default
    assert (s.session_timeout_s, s.heartbeat_s, s.network_s, s.rebalance_timeout_s) == (12.0, 2.0, 0.5, 90.0)
    assert s.read_committed_groups == ["payments"]
    assert cfg.results_path == tmp_path / "res"
    assert cfg.backfill_s() == 7200.0


def test_overrides_win_and_none_means_not_given() -> None:
    cfg = AnalyticsConfig.model_validate(TUNED)
    s = with_overrides(cfg, rules={"stall_after_s": 5.0, "stop_after_s": None}, read_committed_groups=["a"],
                       extra_read_committed=["b", "a"], heartbeat_s=None, session_timeout_s=20.0)
    assert s.rules.stall_after_s == 5.0
    assert s.rules.stop_after_s == 44.0  # None: the file's value stays
    assert s.heartbeat_s == 2.0
    assert s.session_timeout_s == 20.0
    assert s.read_committed_groups == ["a", "b"]  # the option replaced the file's list; extras added once
    with pytest.raises(ValueError, match="not rule thresholds: stall"):
        with_overrides(cfg, rules={"stall": 1.0})
    with pytest.raises(ValueError, match="not analytics settings: stall_after_s"):
        with_overrides(cfg, stall_after_s=1.0)  # a threshold goes in rules=
    # an override is validated like the file, naming its field
    with pytest.raises(ConfigError, match=r"^rules\.stall_after_s: Input should be greater than 0$"):
        with_overrides(cfg, rules={"stall_after_s": -1.0})


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    path = _config(tmp_path, TUNED)
    cfg = load_config(path, environ={"LAGSCOPE_ANALYTICS__RULES__STALL_AFTER_S": "9",
                                     "LAGSCOPE_ANALYTICS__MASTER": "local[1]",
                                     "LAGSCOPE_ANALYTICS__READ_COMMITTED_GROUPS": '["x", "y"]'}).analytics
    assert cfg.rules.stall_after_s == 9.0
    assert cfg.rules.stop_after_s == 44.0
    assert cfg.master == "local[1]"
    assert with_overrides(cfg).read_committed_groups == ["x", "y"]


def test_read_committed_regex_from_the_command_line_is_checked(tmp_path: Path) -> None:
    cfg = load_config(_config(tmp_path, TUNED)).analytics
    with pytest.raises(ConfigError, match=r"read_committed_groups: invalid regular expression 'tx-\['"):
        with_overrides(cfg, read_committed_groups=["tx-["])
    with pytest.raises(ConfigError, match=r"read_committed_groups: 'tx-\*' looks like a glob pattern.*write 'tx-\.\*'"):
        with_overrides(cfg, read_committed_groups=["tx-*"])


# (analytics section, expected one-line error) — each names its field
INVALID = [
    # a negative threshold
    ({"rules": {"stall_after_s": -1}}, "analytics.rules.stall_after_s: Input should be greater than 0"),
    # a typo in a rule name is an error, not an ignored setting
    ({"rules": {"stal_after_s": 10}}, "analytics.rules.stal_after_s: unknown setting"),
    # a storm needs at least two rebalances
    ({"rules": {"storm_count": 1}}, "analytics.rules.storm_count: Input should be greater than or equal to 2"),
    # the backfill is a duration
    ({"backfill": "yesterday"}, "analytics.backfill: not a duration"),
    # the results are written locally
    ({"results": "gs://bucket/results"}, "analytics.results: 'gs://bucket/results': results are a local path, a "
                                         "file:// URI or s3://bucket/prefix"),
    # JVM memory sizes only
    ({"driver_memory": "two gigs"}, "analytics.driver_memory: 'two gigs' is not a JVM memory size"),
    # the loop interval must be positive
    ({"interval_s": 0}, "analytics.interval_s: Input should be greater than 0"),
    # a count given as text
    ({"rules": {"gap_min_samples": "many"}}, "analytics.rules.gap_min_samples: Input should be a valid integer"),
    # read_committed groups are regexes, like the clusters' list
    ({"read_committed_groups": ["payments-("]}, "analytics.read_committed_groups"),
]


@pytest.mark.parametrize(("section", "expected"), INVALID)
def test_invalid_analytics_settings_are_one_line(tmp_path: Path, section: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_config(tmp_path, section))
    assert str(err.value).startswith(expected), str(err.value)
    assert "\n" not in str(err.value)


class Recorder:
    """Stands in for run_batch / run_incremental / build_session: records what analyze passed."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def session(self, master: str, **kw: Any) -> Any:
        self.calls.append(("session", {"master": master, **kw}))
        return self

    def stop(self) -> None:
        self.calls.append(("stop", {}))

    def batch(self, spark: Any, lake: Path, results: Path, **kw: Any) -> StepFiles:
        self.calls.append(("batch", {"lake": lake, "results": results, **kw}))
        assert spark is self  # every run is on the session analyze built
        from lagscope.analytics.job import StepFiles
        return StepFiles({"status": 1})

    def incremental(self, spark: Any, lake: Path, results: Path, **kw: Any) -> StepFiles:
        self.calls.append(("incremental", {"lake": lake, "results": results, **kw}))
        assert spark is self
        from lagscope.analytics.job import StepFiles
        return StepFiles()

    def get(self, name: str) -> dict[str, Any]:
        return next(kw for n, kw in self.calls if n == name)


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    import lagscope.analytics.job as job
    import lagscope.analytics.session as session

    rec = Recorder()
    monkeypatch.setattr(job, "run_batch", rec.batch)
    monkeypatch.setattr(job, "run_incremental", rec.incremental)
    monkeypatch.setattr(session, "build_session", rec.session)
    # analyze stops only a session it started itself: in a full test run other tests' Spark
    # session is active, so pretend there is none (the recorder is the session analyze builds)
    from pyspark.sql import SparkSession
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    for key in [k for k in os.environ if k.startswith("LAGSCOPE_ANALYTICS")]:
        monkeypatch.delenv(key)
    return rec


def test_analyze_takes_lake_results_master_and_rules_from_the_file(tmp_path: Path, recorder: Recorder) -> None:
    path = _config(tmp_path, TUNED, time_lag={"history_points": 40})
    result = CliRunner().invoke(app, ["analyze", "--config", str(path), "--since", "2026-11-20",
                                      "--until", "2026-11-21"])
    assert result.exit_code == 0, result.output
    session, batch = recorder.get("session"), recorder.get("batch")
    assert session == {"master": "local[3]", "shuffle_partitions": 3, "driver_memory": "768m",
                       "log_file": tmp_path / "res" / "_logs" / "spark.log", "extra_conf": {}}
    # the roots as the job opens them: local folders (an s3:// URL would be the bucket's store)
    assert (batch["lake"].is_object_store, Path(batch["lake"].base)) == (False, tmp_path / "lake")
    assert (batch["results"].is_object_store, Path(batch["results"].base)) == (False, tmp_path / "res")
    assert (batch["since"], batch["until"]) == (dt.date(2026, 11, 20), dt.date(2026, 11, 21))
    assert batch["settings"] == load_config(path).analytics
    assert batch["settings"].rules.stall_after_s == 33.0
    assert batch["history_points"] == 40  # the collector's bound too (time_lag)
    assert ("stop", {}) in recorder.calls  # the session it built is stopped


def test_analyze_options_override_the_file(tmp_path: Path, recorder: Recorder) -> None:
    path = _config(tmp_path, TUNED)
    other_lake = tmp_path / "other-lake"
    other_lake.mkdir()
    result = CliRunner().invoke(app, [
        "analyze", "--config", str(path), "--incremental", "--lake", str(other_lake),
        "--results", str(tmp_path / "r2"), "--master", "local[1]", "--shuffle-partitions", "2",
        "--stall-after-s", "15", "--heartbeat-s", "1", "--read-committed", "ledger"])
    assert result.exit_code == 0, result.output
    assert recorder.get("session")["master"] == "local[1]"
    assert recorder.get("session")["shuffle_partitions"] == 2
    assert recorder.get("session")["driver_memory"] == "768m"  # not given: the file's
    inc = recorder.get("incremental")
    assert (Path(inc["lake"].base), Path(inc["results"].base)) == (other_lake, tmp_path / "r2")
    s = inc["settings"]
    assert (s.rules.stall_after_s, s.rules.stop_after_s, s.rules.gap_k) == (15.0, 15.0, 4.0)
    assert (s.heartbeat_s, s.session_timeout_s) == (1.0, 12.0)
    assert s.read_committed_groups == ["ledger"]


def test_analyze_without_a_config_keeps_the_old_defaults(tmp_path: Path, recorder: Recorder) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    result = CliRunner().invoke(app, ["analyze", "--lake", str(lake), "--results", str(tmp_path / "r"),
                                      "--since", "2026-11-20"])
    assert result.exit_code == 0, result.output
    assert recorder.get("session") == {"master": "local[*]", "shuffle_partitions": 8,
                                       "driver_memory": "1g",
                                       "log_file": tmp_path / "r" / "_logs" / "spark.log", "extra_conf": {}}
    assert recorder.get("batch")["settings"] == AnalyticsConfig()


def test_analyze_with_a_bad_config_is_one_line_exit_2(tmp_path: Path, recorder: Recorder) -> None:
    path = _config(tmp_path, {"rules": {"warn_lag_s": "soon"}})
    result = CliRunner().invoke(app, ["analyze", "--config", str(path), "--since", "2026-11-20"])
    assert result.exit_code == 2
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert lines == ["config error: analytics.rules.warn_lag_s: Input should be a valid number, "
                     "unable to parse string as a number"]
    assert recorder.calls == []  # nothing started


def test_run_builds_its_analytics_loop_from_the_file(tmp_path: Path) -> None:
    from lagscope.deploy.run import AnalyticsLoop, Part, build_components

    settings = load_config(_config(tmp_path, TUNED, time_lag={"history_points": 40}, clusters=[
        {"name": "c", "bootstrap_servers": "h:1", "read_committed_groups": ["tx-.*"]}]))
    (loop,) = build_components(settings, {Part.analytics}, results=tmp_path / "res", outbox=tmp_path / "o.sqlite",
                               results_metrics=False)
    assert isinstance(loop, AnalyticsLoop)
    assert (loop.master, loop.interval_s, loop.backfill_s) == ("local[3]", 7.0, 7200.0)
    assert (loop.shuffle_partitions, loop.driver_memory) == (3, "768m")
    assert loop.settings.rules.stall_after_s == 33.0
    assert loop.settings.read_committed_groups == ["payments", "tx-.*"]
    assert loop.history_points == 40  # time_lag's, the collector's bound too
    # the command line's values win
    (loop,) = build_components(settings, {Part.analytics}, results=tmp_path / "res", outbox=tmp_path / "o.sqlite",
                               results_metrics=False, master="local[1]", analytics_interval_s=2.0, backfill_s=60.0)
    assert (loop.master, loop.interval_s, loop.backfill_s) == ("local[1]", 2.0, 60.0)
    # without an analytics section: the loop's former defaults
    (loop,) = build_components(load_config(None, environ={}), {Part.analytics}, results=tmp_path / "res",
                               outbox=tmp_path / "o.sqlite", results_metrics=False)
    assert (loop.master, loop.interval_s, loop.backfill_s) == ("local[*]", 60.0, 86400.0)
    assert (loop.shuffle_partitions, loop.driver_memory, loop.settings) == (4, "1g", AnalyticsConfig())


def test_demo_keeps_its_thresholds_unless_the_file_sets_them(tmp_path: Path) -> None:
    from lagscope.devtools.demo import DEMO_RULES, demo_analytics_config

    plain = demo_analytics_config()
    assert plain.rules.stall_after_s == DEMO_RULES["stall_after_s"] == 8.0
    assert plain.session_timeout_s == 10.0
    assert demo_analytics_config().master == "local[2]"
    # the file sets stall_after_s and heartbeat_s only: those change, the demo's other values stay
    cfg = load_config(_config(tmp_path, {"heartbeat_s": 1.5, "master": "local[1]",
                                         "rules": {"stall_after_s": 20}})).analytics
    tuned = demo_analytics_config(cfg)
    assert tuned.rules.stall_after_s == 20.0
    assert tuned.rules.stop_after_s == DEMO_RULES["stop_after_s"]
    assert tuned.heartbeat_s == 1.5
    assert tuned.session_timeout_s == 10.0  # the demo's, not the file's default 45
    assert demo_analytics_config(cfg).master == "local[1]"
    assert demo_analytics_config(cfg).interval_s == 3.0


def test_demo_with_a_bad_config_is_one_line_exit_2(tmp_path: Path) -> None:
    path = _config(tmp_path, {"rules": {"stall_after_s": 0}})
    result = CliRunner().invoke(app, ["demo", "--config", str(path), "--workdir", str(tmp_path / "demo")])
    assert result.exit_code == 2
    assert [ln for ln in result.output.splitlines() if ln.strip()] == [
        "config error: analytics.rules.stall_after_s: Input should be greater than 0"]
    assert not (tmp_path / "demo").exists()  # stopped before anything started


def test_the_results_root_beside_an_object_store_lake() -> None:
    from lagscope.config import resolve_results_root

    assert resolve_results_root(None, "s3://b/prod/kafka/lake") == "s3://b/prod/kafka/results"
    assert resolve_results_root(None, "s3://b/lake/") == "s3://b/results"
    assert resolve_results_root("s3://b/r/", "s3://b/lake") == "s3://b/r"
    assert resolve_results_root(None, "./lake") == Path("results")
    assert resolve_results_root(None, "file:///srv/lake") == Path("/srv/results")
    on_s3 = AnalyticsConfig(results="s3://b/findings")
    assert resolve_results_root(None, "/srv/lake", on_s3) == "s3://b/findings"
    assert resolve_results_root("/tmp/r", "s3://b/lake", on_s3) == Path("/tmp/r")  # the option wins
    with pytest.raises(ConfigError, match="whole bucket"):
        resolve_results_root(None, "s3://b")
    # the commands that take local results only say so in one line
    with pytest.raises(ConfigError, match=r"analytics.results is on an object store \(s3://b/findings\)"):
        on_s3.results_path  # noqa: B018
