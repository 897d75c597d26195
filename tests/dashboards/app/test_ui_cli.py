"""``lagscope ui``: the command line it runs, and its one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lagscope.dashboards.app import ENV_LAKE, ENV_RESULTS, MAIN_SCRIPT
from lagscope.dashboards.app.cli import UiConfigError, streamlit_command

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
