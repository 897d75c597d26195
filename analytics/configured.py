"""The analytics' settings from the configuration file's ``analytics`` section.

    >>> cfg = load_config("lagscope.yaml")                                     # doctest: +SKIP
    >>> settings = job_settings(cfg.analytics, rules={"stall_after_s": 30.0})   # doctest: +SKIP

``lagscope analyze``, ``lagscope run`` and ``lagscope demo`` build their
:class:`~lagscope.analytics.job.Settings` here: the file's values (themselves defaulted and
validated by :class:`lagscope.config.AnalyticsConfig`), then whatever the command line gave
(``overrides``; ``None`` means "not given", so the file's value stays).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from lagscope.analytics.findings import RuleParams
from lagscope.analytics.job import Settings
from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig, check_regexes
from lagscope.errors import ConfigError

__all__ = ["job_settings", "rule_params"]

#: the job.Settings fields that come straight from AnalyticsConfig (same names, same units)
_TIMEOUT_FIELDS = ("session_timeout_s", "heartbeat_s", "network_s", "rebalance_timeout_s", "history_recent_s")


def _given(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (overrides or {}).items() if v is not None}


def rule_params(rules: AnalyticsRulesConfig, overrides: Mapping[str, Any] | None = None) -> RuleParams:
    """:class:`RuleParams` from the ``analytics.rules`` section, then ``overrides``."""
    names = {f.name for f in dataclasses.fields(RuleParams)}
    values = {k: v for k, v in rules.model_dump().items() if k in names}
    given = _given(overrides)
    unknown = sorted(set(given) - names)
    if unknown:
        raise ValueError(f"not rule thresholds: {', '.join(unknown)}")
    return RuleParams(**{**values, **given})


def job_settings(cfg: AnalyticsConfig, *, rules: Mapping[str, Any] | None = None,
                 read_committed_groups: Iterable[str] | None = None,
                 extra_read_committed: Iterable[str] = (), **overrides: Any) -> Settings:
    """The analytics' :class:`Settings` from ``cfg``.

    ``rules``: rule thresholds given on the command line; ``read_committed_groups``: replaces
    the file's list when given; ``extra_read_committed``: added either way (e.g. the clusters'
    ``read_committed_groups``); ``overrides``: the timeouts of :data:`_TIMEOUT_FIELDS`.
    """
    unknown = sorted(set(overrides) - set(_TIMEOUT_FIELDS))
    if unknown:
        raise ValueError(f"not analytics settings: {', '.join(unknown)}")
    values: dict[str, Any] = {name: getattr(cfg, name) for name in _TIMEOUT_FIELDS}
    values.update(_given(overrides))
    groups = list(cfg.read_committed_groups if read_committed_groups is None else read_committed_groups)
    for g in extra_read_committed:
        if g not in groups:
            groups.append(g)
    try:
        check_regexes(groups)  # the file's were checked on load; these may come from the command line
    except ValueError as exc:
        raise ConfigError(f"read_committed_groups: {exc}") from exc
    return Settings(rules=rule_params(cfg.rules, rules), read_committed_groups=tuple(groups), **values)
