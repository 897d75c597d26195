"""Where links into the Streamlit app point: the app's base URL, resolved one way everywhere.

Grafana data links (:mod:`lagscope.dashboards.grafana_gen`), annotation links
(:mod:`lagscope.dashboards.annotations`) and alert payload links
(:mod:`lagscope.alerts`) all start with the app's base URL, as its users reach it
(behind a proxy, on another host). It is, highest priority first:

1. given explicitly: a command's ``--app-url``;
2. ``ui.url`` of lagscope's settings (:mod:`lagscope.config`): the ``--config`` YAML file,
   overridden by the environment variable ``LAGSCOPE_UI__URL``;
3. the default, ``http://localhost:8501`` (``lagscope ui``'s default address).

Prometheus reads no lagscope settings: the alert rules (``deploy/prometheus/rules/``) carry the
default address in their ``dashboard`` annotations, and ``lagscope dashboards rules`` generates
them for the configured URL (:mod:`lagscope.alerts.prometheus_rules`).

    >>> app_url("https://lagscope.example.org/")
    'https://lagscope.example.org'
"""

from __future__ import annotations

import os
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
        if config is None:
            # without the settings file only the ui section of the environment counts: the other
            # overrides (LAGSCOPE_CLUSTERS__prod__…) need the file they override to validate
            env = os.environ if environ is None else environ
            environ = {k: v for k, v in env.items() if k.upper().startswith("LAGSCOPE_UI__")}
        url = load_config(config, environ=environ).ui.url
    return url.rstrip("/")
