"""What the rooms' commands share: reading the settings the way every command does."""

from __future__ import annotations

from pathlib import Path

import typer

from lagscope.config import Settings, load_config
from lagscope.errors import ConfigError

__all__ = ["settings_or_exit"]


def settings_or_exit(config: Path | None) -> Settings:
    """lagscope's settings from ``config`` (None: defaults) and the environment; invalid: the one
    line ``config error: …`` on stderr and exit status 2, before anything starts."""
    try:
        return load_config(config)
    except ConfigError as exc:
        typer.echo(f"config error: {exc}", err=True)
        raise typer.Exit(2) from None
