"""Group patterns are one language everywhere: Python regular expressions matched against the
whole group id, the same in the collector's filters, the read-committed lists (collector and
analytics) and the alert routes; a pattern written as a shell glob is refused with the regex it
meant, under the name of its key."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from lagscope.alerts import Finding, route_wants
from lagscope.analytics.step import _matches
from lagscope.config import AlertRoute, ClusterConfig, GroupFilter, check_group_patterns, load_config, matches_any
from lagscope.errors import ConfigError

GROUPS = ["payments", "payments-eu", "test-payments", "orders-svc", "orders", "PAYMENTS", ""]


# (patterns, the groups they match) — each case says why
CASES = [
    # a plain name is a regex that matches itself only: the whole id, not a prefix
    (["orders"], {"orders"}),
    # any of a list
    (["orders-.*", "payments"], {"orders-svc", "payments"}),
    # alternation inside one pattern is still anchored at both ends
    (["payments|orders"], {"payments", "orders"}),
    # Python's syntax, beyond RE2's: a lookahead excludes test groups (pyarrow's RE2 would refuse it)
    (["(?!test-).*payments.*"], {"payments", "payments-eu"}),
    # an inline flag
    (["(?i)payments"], {"payments", "PAYMENTS"}),
    # no patterns: nothing matches (an empty read-committed list, a route's empty groups list)
    ([], set()),
]


@pytest.mark.parametrize(("patterns", "expected"), CASES)
def test_every_component_matches_the_same_groups(patterns: list[str], expected: set[str]) -> None:
    check_group_patterns(patterns)
    assert {g for g in GROUPS if matches_any(patterns, g)} == expected
    # the collector: its include filter and its read-committed list
    if patterns:
        include = GroupFilter(include=patterns)
        assert {g for g in GROUPS if include.matches(g)} == expected
    cluster = ClusterConfig(name="c", bootstrap_servers=["h:1"], read_committed_groups=patterns)
    assert {g for g in GROUPS if cluster.is_read_committed(g)} == expected
    # the analytics' read-committed groups, over a plain and a dictionary column with a null
    column = pa.chunked_array([pa.array([*GROUPS, None])])
    for col in (column, pa.chunked_array([column.combine_chunks().dictionary_encode()])):
        hit = _matches(col, patterns) if patterns else [False] * len(col)
        assert {g for g, h in zip([*GROUPS, None], hit, strict=True) if h} == expected
    # the alert routes
    route = AlertRoute(name="r", url="http://x", min_severity="info", groups=patterns)
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    wanted = {g for g in GROUPS if route_wants(route, Finding(
        key=g, source="anomalies", state="firing", kind="stall", severity="critical", cluster="c", group=g,
        summary="s", starts_at=now))}
    assert wanted == expected


@pytest.mark.parametrize(("pattern", "suggestion"), [
    # a trailing star after a plain character: the commonest glob
    ("orders-*", "orders-.*"),
    # a leading star (no regex starts with a repeat)
    ("*-test", ".*-test"),
    # a star and a question mark, and a dot that a glob means literally
    ("orders.v?-*", "orders\\.v.-.*"),
    # a negated glob class
    ("[!t]*", "[^t].*"),
])
def test_globs_are_refused_with_the_regex_they_meant(pattern: str, suggestion: str) -> None:
    with pytest.raises(ValueError, match="looks like a glob pattern") as info:
        check_group_patterns(["payments", pattern])
    assert str(info.value).endswith(f"write {suggestion!r}")


@pytest.mark.parametrize("pattern", [
    "orders.*",          # a dot repeated: a regex
    ".*-test",
    "(eu|us)-.*",        # a group repeated
    "[a-z]+-\\d*",       # a class and an escape repeated
    "orders\\*",         # an escaped star is a literal star
    "colou?r",           # a question mark after a character is the regex's optional
])
def test_regexes_that_resemble_globs_are_accepted(pattern: str) -> None:
    assert check_group_patterns([pattern]) == [pattern]


#: every key that holds group patterns, as a lagscope.yaml fragment with the pattern in it
KEYS = [
    ({"clusters": [{"name": "c", "bootstrap_servers": "h:1", "groups": {"include": ["{p}"]}}]},
     "clusters[0].groups.include"),
    ({"clusters": [{"name": "c", "bootstrap_servers": "h:1", "groups": {"exclude": ["{p}"]}}]},
     "clusters[0].groups.exclude"),
    ({"clusters": [{"name": "c", "bootstrap_servers": "h:1", "read_committed_groups": ["{p}"]}]},
     "clusters[0].read_committed_groups"),
    ({"analytics": {"read_committed_groups": ["{p}"]}}, "analytics.read_committed_groups"),
    ({"alerts": {"routes": [{"name": "r", "url": "http://x", "groups": ["{p}"]}]}}, "alerts.routes[0].groups"),
    # a route's single pattern may be written as a string
    ({"alerts": {"routes": [{"name": "r", "url": "http://x", "groups": "{p}"}]}}, "alerts.routes[0].groups"),
]


def _with(fragment: Any, pattern: str) -> Any:
    return yaml.safe_load(yaml.safe_dump(fragment).replace("'{p}'", f"'{pattern}'"))


@pytest.mark.parametrize(("fragment", "key"), KEYS, ids=[k for _, k in KEYS])
def test_a_glob_in_any_key_fails_naming_the_key(tmp_path: Path, fragment: Any, key: str) -> None:
    path = tmp_path / "lagscope.yaml"
    path.write_text(yaml.safe_dump(_with(fragment, "orders-*")))
    with pytest.raises(ConfigError) as info:
        load_config(path, environ={})
    assert str(info.value) == (f"{key}: 'orders-*' looks like a glob pattern, but group patterns are regular "
                               "expressions matched against the whole group id: write 'orders-.*'")
    # the regex it suggests loads
    path.write_text(yaml.safe_dump(_with(fragment, "orders-.*")))
    load_config(path, environ={})
