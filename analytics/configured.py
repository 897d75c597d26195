"""The analytics' settings for one command: the configuration file's ``analytics`` section, then
what the command line gave.

    >>> cfg = load_config("lagscope.yaml")                                      # doctest: +SKIP
    >>> settings = with_overrides(cfg.analytics, rules={"stall_after_s": 30.0})  # doctest: +SKIP

The job takes :class:`lagscope.config.AnalyticsConfig` itself (its defaults are the analytics'
defaults, held nowhere else). ``lagscope analyze``, ``lagscope run`` and ``lagscope demo``
apply their options here (``None`` means "not given", so the file's value stays) and the
result is validated like the file, so a bad option fails with the field's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from lagscope.config import AnalyticsConfig, AnalyticsRulesConfig, format_validation_error
from lagscope.errors import ConfigError

__all__ = ["with_overrides"]


def _given(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (overrides or {}).items() if v is not None}


def with_overrides(cfg: AnalyticsConfig, *, rules: Mapping[str, Any] | None = None,
                   read_committed_groups: Iterable[str] | None = None,
                   extra_read_committed: Iterable[str] = (), **overrides: Any) -> AnalyticsConfig:
    """``cfg`` with the command line's values.

    ``rules``: rule thresholds (``analytics.rules``); ``read_committed_groups``: replaces the
    file's list when given; ``extra_read_committed``: added either way (e.g. the clusters'
    ``read_committed_groups``); ``overrides``: other fields of the section (timeouts, …).
    Raises ValueError for a name that is not a setting, :class:`ConfigError` for a bad value.
    """
    given_rules = _given(rules)
    unknown = sorted(set(given_rules) - set(AnalyticsRulesConfig.model_fields))
    if unknown:
        raise ValueError(f"not rule thresholds: {', '.join(unknown)}")
    unknown = sorted(set(overrides) - set(AnalyticsConfig.model_fields) | set(overrides) & {"rules"})
    if unknown:
        raise ValueError(f"not analytics settings: {', '.join(unknown)}")
    groups = list(cfg.read_committed_groups if read_committed_groups is None else read_committed_groups)
    for g in extra_read_committed:
        if g not in groups:
            groups.append(g)
    data = cfg.model_dump()
    data.update(_given(overrides), read_committed_groups=groups, rules={**data["rules"], **given_rules})
    try:
        return AnalyticsConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None
