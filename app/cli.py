"""``lagscope ui``: serve the drill-down app (Streamlit) on loopback, read-only.

    lagscope ui --lake .lagscope/lake --results .lagscope/results --port 8501
    lagscope ui --lake .lagscope/lake          # results: .lagscope/results, beside the lake
    lagscope ui --config lagscope.yaml         # collector.lake, and analytics.results or beside it
    lagscope ui --config lagscope.yaml --lake s3://bucket/kafka/lake   # a bucket: the storage section
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from lagscope.app import DEFAULT_LAKE, ENV_LAKE, ENV_RESULTS, ENV_STORAGE, MAIN_SCRIPT
from lagscope.command import settings_or_exit
from lagscope.config import StorageConfig, resolve_results_root
from lagscope.errors import LagscopeError
from lagscope.storage import is_object_url, open_store

__all__ = ["register", "streamlit_command"]

log = logging.getLogger(__name__)


class UiConfigError(LagscopeError):
    """A ``lagscope ui`` option that cannot work (the message says which)."""


def streamlit_command(lake: Path | str, results: Path | str, port: int, bind: str,
                      storage: StorageConfig | None = None) -> tuple[list[str], dict[str, str]]:
    """The ``streamlit run`` command line and environment that serve the app.

    Headless (no browser is opened), no usage statistics, no file watcher, no development
    mode; the lake paths (or ``s3://`` URLs) travel in the environment (``LAGSCOPE_UI_LAKE``/
    ``_RESULTS``), and with an ``s3://`` root the settings' ``storage`` section
    (``LAGSCOPE_UI_STORAGE``: endpoint, region, path-style, credential source; the credentials
    themselves stay where that source finds them).
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
    env = {**os.environ, ENV_LAKE: _where(lake), ENV_RESULTS: _where(results),
           "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false"}
    if is_object_url(str(lake)) or is_object_url(str(results)):
        env[ENV_STORAGE] = (storage or StorageConfig()).model_dump_json()
    return argv, env


def _where(root: Path | str) -> str:
    return str(root) if is_object_url(str(root)) else str(Path(root).resolve())


def _check_folder(path: Path, option: str) -> None:
    if path.exists() and not path.is_dir():
        raise UiConfigError(f"{option} {path} is not a folder")


def register(app: typer.Typer) -> None:
    @app.command("ui")
    def ui(
        lake: Annotated[str | None, typer.Option(help="Sample lake root (the collector's output): a folder or "
                                                      "s3://bucket/prefix (with the storage section of --config). "
                                                      "Default: collector.lake of --config, else "
                                                      f"{DEFAULT_LAKE}.")] = None,
        results: Annotated[str | None, typer.Option(help="Result tables root (the analytics' output). "
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
        storage: StorageConfig | None = None
        if config is not None:
            settings = settings_or_exit(config)
            lake_root = lake if lake is not None else settings.collector.lake
            results_root = resolve_results_root(results, lake_root, settings.analytics)
            storage = settings.storage
        else:
            lake_root = lake if lake is not None else str(DEFAULT_LAKE)
            results_root = resolve_results_root(results, lake_root)
        roots: list[Path | str] = []
        for root, option, given in ((lake_root, "--lake", lake is not None),
                                    (results_root, "--results", results is not None)):
            if is_object_url(str(root)):
                open_store(str(root), storage)  # a bad URL or missing credentials: one line, before serving
                roots.append(str(root))
                continue
            path = Path(str(root).removeprefix("file://"))
            roots.append(path)
            _check_folder(path, option)
            if given and not path.exists():
                raise UiConfigError(f"{option} {path} does not exist")
            if not path.exists():
                log.warning("ui: %s %s does not exist (yet): the app shows nothing from it until it is written",
                            option, path)
        argv, env = streamlit_command(roots[0], roots[1], port, bind, storage)
        typer.echo(f"lagscope ui on http://{bind}:{port} (lake {roots[0]}, results {roots[1]}); Ctrl-C stops it",
                   err=True)
        sys.stderr.flush()
        # become the Streamlit server: one process, so its PID is the one to stop and Ctrl-C reaches it
        os.execve(argv[0], argv, env)  # noqa: S606
