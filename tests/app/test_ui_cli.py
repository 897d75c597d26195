"""``lagscope ui``: the command line it runs, and its one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lagscope.app import ENV_LAKE, ENV_RESULTS, MAIN_SCRIPT
from lagscope.app.cli import UiConfigError, streamlit_command

LAGSCOPE = Path(sys.executable).with_name("lagscope")


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_streamlit_runs_headless_on_loopback_without_stats(tmp_path: Path) -> None:
    argv, env = streamlit_command(tmp_path / "lake", tmp_path / "results", 8600, "127.0.0.1")
    assert argv[1:5] == ["-m", "streamlit", "run", str(MAIN_SCRIPT)]
    assert _option(argv, "--server.address") == "127.0.0.1"
    assert _option(argv, "--server.port") == "8600"
    assert _option(argv, "--server.headless") == "true"
    assert _option(argv, "--browser.gatherUsageStats") == "false"
    assert _option(argv, "--server.fileWatcherType") == "none"
    assert env[ENV_LAKE] == str((tmp_path / "lake").resolve())
    assert env[ENV_RESULTS] == str((tmp_path / "results").resolve())


def test_a_missing_lake_is_one_line_and_exit_1(tmp_path: Path) -> None:
    proc = subprocess.run([str(LAGSCOPE), "ui", "--lake", str(tmp_path / "nowhere")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1
    # one message (rich wraps it at the terminal width: compare with the whitespace normalised)
    assert " ".join(proc.stderr.split()).endswith(f"error: --lake {tmp_path / 'nowhere'} does not exist")
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("option", ["--lake", "--results"])
def test_a_file_is_not_a_lake(tmp_path: Path, option: str) -> None:
    from typer.testing import CliRunner

    from lagscope.cli import app

    (tmp_path / "lake").mkdir()
    file = tmp_path / "file.parquet"
    file.write_bytes(b"x")
    args = ["ui", "--lake", str(tmp_path / "lake"), option, str(file)]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, UiConfigError)
    assert str(result.exception) == f"{option} {file} is not a folder"


def _ui_env(monkeypatch: pytest.MonkeyPatch, *args: str) -> dict[str, str]:
    """The environment ``lagscope ui …`` hands Streamlit (the exec is caught: nothing is served)."""
    import os

    from typer.testing import CliRunner

    from lagscope.cli import app

    seen: dict[str, str] = {}

    def execve(path: str, argv: list[str], env: dict[str, str]) -> None:
        seen.update(env)

    monkeypatch.setattr(os, "execve", execve)
    result = CliRunner().invoke(app, ["ui", *args])
    assert result.exit_code == 0, result.output
    return seen


def test_results_default_beside_the_lake_as_analyze_and_run_write_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lagscope.config import Settings, resolve_results

    lake = tmp_path / "data" / "lake"
    lake.mkdir(parents=True)
    env = _ui_env(monkeypatch, "--lake", str(lake))
    assert env[ENV_LAKE] == str(lake.resolve())
    # `lagscope analyze --lake L` and `lagscope run` write <L>/../results (the demo too)
    assert env[ENV_RESULTS] == str((tmp_path / "data" / "results").resolve())
    assert env[ENV_RESULTS] == str(resolve_results(None, lake, Settings().analytics).resolve())


def test_no_options_read_the_default_lake_and_the_results_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = _ui_env(monkeypatch)
    assert env[ENV_LAKE] == str(tmp_path / ".lagscope" / "lake")
    assert env[ENV_RESULTS] == str(tmp_path / ".lagscope" / "results")


def test_an_explicit_results_folder_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lake").mkdir()
    (tmp_path / "elsewhere").mkdir()
    env = _ui_env(monkeypatch, "--lake", str(tmp_path / "lake"), "--results", str(tmp_path / "elsewhere"))
    assert env[ENV_RESULTS] == str((tmp_path / "elsewhere").resolve())


def test_config_gives_the_lake_and_the_results_like_analyze_and_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lake").mkdir()
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"collector: {{lake: {tmp_path / 'lake'}}}\n")
    env = _ui_env(monkeypatch, "--config", str(config))
    assert env[ENV_LAKE] == str((tmp_path / "lake").resolve())
    assert env[ENV_RESULTS] == str((tmp_path / "results").resolve())
    # analytics.results wins over "beside the lake", as for analyze and run
    config.write_text(f"collector: {{lake: {tmp_path / 'lake'}}}\nanalytics: {{results: {tmp_path / 'r'}}}\n")
    assert _ui_env(monkeypatch, "--config", str(config))[ENV_RESULTS] == str((tmp_path / "r").resolve())


def test_the_app_alone_reads_the_results_beside_the_lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # streamlit run of the app's script without `lagscope ui`: only the lake in the environment
    from lagscope.app.store import current_lake

    monkeypatch.setenv(ENV_LAKE, str(tmp_path / "lake"))
    monkeypatch.delenv(ENV_RESULTS, raising=False)
    lake = current_lake()
    assert (lake.samples, lake.results) == (tmp_path / "lake", tmp_path / "results")


def test_a_default_folder_that_does_not_exist_is_one_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    # the lake exists, the results beside it not yet (no analytics ran): the app starts, and says so once
    (tmp_path / "lake").mkdir()
    _ui_env(monkeypatch, "--lake", str(tmp_path / "lake"))
    lines = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert lines == [f"ui: --results {tmp_path / 'results'} does not exist (yet): the app shows nothing from it "
                     "until it is written"]
