"""``lagscope ui``: serve the drill-down app (Streamlit) on loopback, read-only.

    lagscope ui --lake .lagscope/lake --results .lagscope/results --port 8501
    lagscope ui --lake .lagscope/lake          # results: .lagscope/results, beside the lake
    lagscope ui --config lagscope.yaml         # collector.lake, and analytics.results or beside it
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from lagscope.app import DEFAULT_LAKE, ENV_LAKE, ENV_RESULTS, MAIN_SCRIPT
from lagscope.command import settings_or_exit
from lagscope.config import resolve_results
from lagscope.errors import LagscopeError

__all__ = ["register", "streamlit_command"]

log = logging.getLogger(__name__)


class UiConfigError(LagscopeError):
    """A ``lagscope ui`` option that cannot work (the message says which)."""


def streamlit_command(lake: Path, results: Path, port: int, bind: str) -> tuple[list[str], dict[str, str]]:
    """The ``streamlit run`` command line and environment that serve the app.

    Headless (no browser is opened), no usage statistics, no file watcher, no development
    mode; the lake paths travel in the environment (``LAGSCOPE_UI_LAKE``/``_RESULTS``).
    """
    argv = [sys.executable, "-m", "streamlit", "run", str(MAIN_SCRIPT),
            "--server.address", bind,
            "--server.port", str(port),
            "--server.headless", "true",
            "--browser.gatherUsageStats", "false",
            "--server.fileWatcherType", "none",
            "--server.runOnSave", "false",
            "--global.developmentMode", "false",
            "--client.toolbarMode", "viewer",
            "--theme.base", "light"]
    env = {**os.environ, ENV_LAKE: str(lake.resolve()), ENV_RESULTS: str(results.resolve()),
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    return argv, env


def _check_folder(path: Path, option: str) -> None:
    if path.exists() and not path.is_dir():
        raise UiConfigError(f"{option} {path} is not a folder")


def register(app: typer.Typer) -> None:
    @app.command("ui")
    def ui(
        lake: Annotated[Path | None, typer.Option(help="Sample lake root (the collector's output). "
                                                       "Default: collector.lake of --config, else "
                                                       f"{DEFAULT_LAKE}.")] = None,
        results: Annotated[Path | None, typer.Option(help="Result tables root (the analytics' output). "
                                                          "Default: analytics.results of --config, else "
                                                          "'results' beside the lake (as analyze and run "
                                                          "write them).")] = None,
        port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8501,
        bind: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = "127.0.0.1",
        config: Annotated[Path | None, typer.Option(
            "--config", "-c", dir_okay=False,
            help="lagscope.yaml: the lake and results defaults of analyze and run.")] = None,
    ) -> None:
        """Serve the Streamlit drill-down app (read-only) at http://BIND:PORT."""
        if config is not None:
            settings = settings_or_exit(config)
            lake_path = lake if lake is not None else settings.collector.lake_path
            results_path = resolve_results(results, lake_path, settings.analytics)
        else:
            lake_path = lake if lake is not None else DEFAULT_LAKE
            results_path = resolve_results(results, lake_path)
        for path, option, given in ((lake_path, "--lake", lake is not None),
                                    (results_path, "--results", results is not None)):
            _check_folder(path, option)
            if given and not path.exists():
                raise UiConfigError(f"{option} {path} does not exist")
            if not path.exists():
                log.warning("ui: %s %s does not exist (yet): the app shows nothing from it until it is written",
                            option, path)
        argv, env = streamlit_command(lake_path, results_path, port, bind)
        typer.echo(f"lagscope ui on http://{bind}:{port} (lake {lake_path}, results {results_path}); Ctrl-C stops it",
                   err=True)
        sys.stderr.flush()
        # become the Streamlit server: one process, so its PID is the one to stop and Ctrl-C reaches it
        os.execve(argv[0], argv, env)  # noqa: S606
