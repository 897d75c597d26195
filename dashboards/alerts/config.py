"""Alert routing configuration: where notifications go, which ones, how fast, how signed.

One YAML (or JSON) file::

    app_url: http://localhost:8501          # the Streamlit app, for links in the payloads (omitted:
                                             # lagscope's ui.url, see lagscope.dashboards.links)
    runbook_url: https://example.org/lagscope/docs/alerting.md
    lookback_s: 3600                         # closed findings older than this are not sent
    routes:
      - name: oncall
        url: https://hooks.example.org/lagscope
        format: alertmanager                 # generic | slack | alertmanager
        min_severity: warning                # info | warning | critical
        clusters: [prod]                     # omitted: every cluster
        groups: "orders-*"                   # fnmatch pattern on the group id; omitted: all
        kinds: [stall, stop, status]         # omitted: every kind
        rate_limit: {max: 30, per_s: 60}     # deliveries per window; the rest wait, never drop
        secret_env: LAGSCOPE_ONCALL_SECRET   # HMAC-SHA256 key from this variable, or
        # secret_file: /run/secrets/oncall   # … from this file (first line)
        timeout_s: 5

Secrets are read when a request is signed, never stored in the config object and never
logged. Invalid configuration raises :class:`~lagscope.errors.ConfigError` with one line.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from lagscope.dashboards import links
from lagscope.dashboards.alerts.findings import Finding, severity_rank
from lagscope.errors import ConfigError

__all__ = ["AlertsConfig", "RateLimit", "Route", "load_config"]


class RateLimit(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    max: int = Field(gt=0, description="deliveries allowed per window")
    per_s: float = Field(gt=0, description="window length (s)")


class Route(BaseModel):
    """One webhook destination with its filters, format, rate limit and signing secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    url: str
    format: Literal["generic", "slack", "alertmanager"] = "generic"
    min_severity: Literal["info", "warning", "critical"] = "warning"
    clusters: list[str] | None = None
    groups: str | None = None
    kinds: list[str] | None = None
    rate_limit: RateLimit | None = None
    secret_env: str | None = None
    secret_file: Path | None = None
    timeout_s: float = Field(default=5.0, gt=0)
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    def matches(self, finding: Finding) -> bool:
        """True when this route wants ``finding`` (severity, cluster, group pattern, kind)."""
        if severity_rank(finding.severity) < severity_rank(self.min_severity):
            return False
        if self.clusters is not None and finding.cluster not in self.clusters:
            return False
        if self.groups is not None and not fnmatch.fnmatchcase(finding.group, self.groups):
            return False
        return self.kinds is None or finding.kind in self.kinds

    def secret(self) -> bytes | None:
        """The HMAC key, read now from the environment or the file; None when unsigned."""
        if self.secret_env:
            value = os.environ.get(self.secret_env)
            if not value:
                raise ConfigError(f"route {self.name}: environment variable {self.secret_env} is not set")
            return value.encode()
        if self.secret_file:
            try:
                text = self.secret_file.read_text().splitlines()
            except OSError as exc:
                raise ConfigError(f"route {self.name}: cannot read secret_file {self.secret_file}: "
                                  f"{exc.strerror}") from exc
            if not text or not text[0].strip():
                raise ConfigError(f"route {self.name}: secret_file {self.secret_file} is empty")
            return text[0].strip().encode()
        return None


class AlertsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    #: omitted: lagscope's ``ui.url`` (LAGSCOPE_UI__URL, else the default), or what the caller
    #: of :func:`load_config` passes as ``app_url`` (``lagscope run``: its settings' ``ui.url``)
    app_url: str = Field(default_factory=links.app_url)
    runbook_url: str = "https://github.com/lagscope/lagscope/blob/main/docs/alerting.md"
    lookback_s: float = Field(default=3600.0, ge=0)
    routes: list[Route] = Field(default_factory=list)

    @field_validator("routes")
    @classmethod
    def _unique_names(cls, routes: list[Route]) -> list[Route]:
        names = [r.name for r in routes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate route names: {', '.join(dupes)}")
        return routes

    def route(self, name: str) -> Route | None:
        return next((r for r in self.routes if r.name == name), None)

    def check_secrets(self) -> None:
        """Raise :class:`ConfigError` now for a route whose secret cannot be read (unset variable,
        missing or empty file), instead of at each delivery. The secrets are read again when
        signing (a rotated one is picked up) and are not kept."""
        for route in self.routes:
            route.secret()


def _one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(root)"
    return f"{where}: {first['msg']}"


def load_config(source: Path | str | dict[str, Any], *, app_url: str | None = None) -> AlertsConfig:
    """Parse and validate an alerts config (a path to YAML/JSON, or an already-parsed dict).

    ``app_url``: the app's base URL when the config sets none (lagscope's ``ui.url``).
    """
    if isinstance(source, dict):
        data: Any = source
        name = "alerts config"
    else:
        path = Path(source)
        name = str(path)
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as exc:
            raise ConfigError(f"cannot read alerts config {path}: {exc.strerror}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"alerts config {path} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{name}: expected a mapping at the top level")
    try:
        cfg = AlertsConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{name}: {_one_line(exc)}") from exc
    if app_url and "app_url" not in cfg.model_fields_set:
        cfg = cfg.model_copy(update={"app_url": links.app_url(app_url)})
    return cfg

