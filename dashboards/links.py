"""Where links into the Streamlit app point: the app's base URL, resolved one way everywhere.

Grafana data links (:mod:`lagscope.dashboards.grafana_gen`), annotation links
(:mod:`lagscope.dashboards.annotations`) and alert payload links
(:mod:`lagscope.dashboards.alerts`) all start with the app's base URL, as its users reach it
(behind a proxy, on another host). It is, highest priority first:

1. given explicitly: a command's ``--app-url``, or ``app_url`` in the alert routes file;
2. ``ui.url`` of lagscope's settings (:mod:`lagscope.config`): the ``--config`` YAML file,
   overridden by the environment variable ``LAGSCOPE_UI__URL``;
3. the default, ``http://localhost:8501`` (``lagscope ui``'s default address).

Prometheus reads no lagscope settings: the alert rules (``deploy/prometheus/rules/``) carry the
default address in their ``dashboard`` annotations, and ``lagscope dashboards rules`` writes a
copy re-based on the configured URL (:func:`rules_with_app_url`).

    >>> app_url("https://lagscope.example.org/")
    'https://lagscope.example.org'
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from lagscope.config import UiConfig, format_validation_error, load_config
from lagscope.errors import ConfigError

__all__ = ["DEFAULT_APP_URL", "DEFAULT_RULES", "app_url", "rules_with_app_url"]

#: the app's address when nothing else is configured
DEFAULT_APP_URL: str = UiConfig.model_fields["url"].default
#: the alert rules of the source tree (deploy/prometheus/rules/lagscope.yml)
DEFAULT_RULES = Path(__file__).resolve().parents[1] / "deploy" / "prometheus" / "rules" / "lagscope.yml"
#: a ``dashboard`` annotation's value up to the app's base URL (YAML, quoted or not)
_RULE_LINK = re.compile(r'^(\s*dashboard:\s*"?)' + re.escape(DEFAULT_APP_URL) + "/", re.M)


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


def rules_with_app_url(text: str, url: str) -> str:
    """The alert rules file ``text`` with the app links of its ``dashboard`` annotations re-based
    from the default address onto ``url`` (raises :class:`ConfigError` when it has none)."""
    base = app_url(url)
    out, n = _RULE_LINK.subn(lambda m: f"{m.group(1)}{base}/", text)
    if n == 0:
        raise ConfigError(f"no dashboard annotation linking to {DEFAULT_APP_URL}/ in the rules file")
    return out
