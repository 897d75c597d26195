"""Where links into the Streamlit app point: the app's base URL, resolved one way everywhere.

Grafana data links (:mod:`lagscope.dashboards.grafana_gen`), annotation links
(:mod:`lagscope.dashboards.annotations`) and alert payload links
(:mod:`lagscope.dashboards.alerts`) all start with the app's base URL, as its users reach it
(behind a proxy, on another host). It is, highest priority first:

1. given explicitly: a command's ``--app-url``, or ``app_url`` in the alert routes file;
2. ``ui.url`` of lagscope's settings (:mod:`lagscope.config`): the ``--config`` YAML file,
   overridden by the environment variable ``LAGSCOPE_UI__URL``;
3. the default, ``http://localhost:8501`` (``lagscope ui``'s default address).

    >>> app_url("https://lagscope.example.org/")
    'https://lagscope.example.org'
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from lagscope.config import UiConfig, format_validation_error, load_config
from lagscope.errors import ConfigError

__all__ = ["DEFAULT_APP_URL", "app_url"]

#: the app's address when nothing else is configured
DEFAULT_APP_URL: str = UiConfig.model_fields["url"].default


def app_url(explicit: str | None = None, *, config: Path | str | None = None,
            environ: Mapping[str, str] | None = None) -> str:
    """The app's base URL (no trailing slash); see the module docstring for the order.

    Raises :class:`ConfigError` (one line) for a URL that is not http(s) or an invalid settings file.
    """
    if explicit:
        try:
            url = UiConfig(url=explicit).url
        except ValidationError as exc:
            raise ConfigError(f"--app-url {format_validation_error(exc).removeprefix('url: ')}") from None
    else:
        url = load_config(config, environ=environ).ui.url
    return url.rstrip("/")
