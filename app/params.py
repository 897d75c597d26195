"""The URL contract of the drill-down app: query parameters in, a :class:`Selection` out.

    ?page=overview|group|rebalance|partition|delivery|compare
     &cluster=<name>&group=<id>&topic=<name>&partition=<int>
     &from=<epoch ms>&to=<epoch ms>
     &rebalance=<start epoch ms>              (Rebalance page)
     &finding=<anomaly key>                   (Delivery page: the finding whose commits are shown)
     &from2=<epoch ms>&to2=<epoch ms>         (Compare page: the second window)

Every parameter is optional; an empty value, or Grafana's rendering of a variable set to
"All" (``$__all``, ``All``, ``.*``), means "not chosen". A missing time range means "the last six hours of data"
(relative to the newest data in the lake, not the wall clock, so an idle lake still shows
something). docs/ui.md documents the contract for Grafana data links and alert payloads.

    >>> parse_selection({"page": "group", "cluster": "prod", "group": "orders"}).page
    'group'
    >>> to_query(Selection(page="partition", cluster="prod", group="g", topic="t", partition=3))
    {'page': 'partition', 'cluster': 'prod', 'group': 'g', 'topic': 't', 'partition': '3'}
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, replace

__all__ = [
    "ALL_VALUES",
    "DEFAULT_RANGE",
    "PAGES",
    "Selection",
    "SelectionError",
    "TimeRange",
    "from_ms",
    "parse_selection",
    "to_ms",
    "to_query",
]

#: page keys in navigation order, with their titles
PAGES: dict[str, str] = {
    "overview": "Overview",
    "group": "Group",
    "rebalance": "Rebalance",
    "partition": "Partition",
    "delivery": "Delivery",
    "compare": "Compare",
}

#: the time range shown when the URL carries none
DEFAULT_RANGE = dt.timedelta(hours=6)


class SelectionError(ValueError):
    """A query parameter that cannot be understood (the message names it)."""


def to_ms(when: dt.datetime) -> int:
    """Epoch milliseconds of an aware datetime."""
    return int(when.timestamp() * 1000)


def from_ms(ms: int) -> dt.datetime:
    """Aware UTC datetime of epoch milliseconds."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


@dataclass(frozen=True)
class TimeRange:
    """A half-open UTC interval ``[start, end)``."""

    start: dt.datetime
    end: dt.datetime

    @property
    def duration(self) -> dt.timedelta:
        return self.end - self.start

    def dates(self) -> list[dt.date]:
        """The UTC dates the interval touches: the lake's date partitions to read."""
        first, last = self.start.astimezone(dt.UTC).date(), self.end.astimezone(dt.UTC).date()
        return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]

    def previous(self) -> TimeRange:
        """The interval of the same length just before this one."""
        return TimeRange(self.start - self.duration, self.start)


@dataclass(frozen=True)
class Selection:
    """What the user is looking at. ``None`` means "not chosen" (the page picks a default)."""

    page: str = "overview"
    cluster: str | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    start_ms: int | None = None
    end_ms: int | None = None
    rebalance_ms: int | None = None
    start2_ms: int | None = None
    end2_ms: int | None = None
    finding: str | None = None

    def with_(self, **changes: object) -> Selection:
        return replace(self, **changes)  # type: ignore[arg-type]


_INT_PARAMS = {"partition": "partition", "from": "start_ms", "to": "end_ms", "rebalance": "rebalance_ms",
               "from2": "start2_ms", "to2": "end2_ms"}
_STR_PARAMS = {"cluster": "cluster", "group": "group", "topic": "topic", "finding": "finding"}


#: what Grafana renders for a variable set to "All" (or a regex matching everything): not a
#: choice of one cluster/group/topic, so the app treats it as "not chosen"
ALL_VALUES = frozenset({"$__all", "All", "all", "*", ".*", ".+"})


def _first(value: str | list[str]) -> str:
    return value[-1] if isinstance(value, list) else value


def parse_selection(query: Mapping[str, str | list[str]]) -> Selection:
    """Read the URL's query parameters; raises :class:`SelectionError` on a malformed one.

    Unknown parameters are ignored (Grafana adds its own, e.g. ``orgId``); empty values mean
    "not chosen".
    """
    values: dict[str, object] = {}
    page = _first(query.get("page", "overview")).strip().lower() or "overview"
    if page not in PAGES:
        raise SelectionError(f"unknown page {page!r}; expected one of: {', '.join(PAGES)}")
    values["page"] = page
    for name, attr in _STR_PARAMS.items():
        raw = _first(query.get(name, "")).strip()
        values[attr] = None if not raw or raw in ALL_VALUES else raw
    for name, attr in _INT_PARAMS.items():
        raw = _first(query.get(name, "")).strip()
        if not raw or raw in ALL_VALUES:
            continue
        try:
            number = int(raw)
        except ValueError:
            raise SelectionError(f"query parameter {name}={raw!r} is not an integer"
                                 + (" (epoch milliseconds)" if name != "partition" else "")) from None
        if number < 0:
            raise SelectionError(f"query parameter {name}={raw!r} must not be negative")
        values[attr] = number
    sel = Selection(**values)  # type: ignore[arg-type]
    for lo, hi, names in ((sel.start_ms, sel.end_ms, "from/to"), (sel.start2_ms, sel.end2_ms, "from2/to2")):
        if lo is not None and hi is not None and lo >= hi:
            raise SelectionError(f"time range {names}: 'from' ({lo}) must be before 'to' ({hi})")
    return sel


def to_query(sel: Selection) -> dict[str, str]:
    """The query parameters that reproduce ``sel`` (unset fields are left out)."""
    out: dict[str, str] = {"page": sel.page}
    for name, attr in _STR_PARAMS.items():
        value = getattr(sel, attr)
        if value is not None:
            out[name] = value
    for name, attr in _INT_PARAMS.items():
        value = getattr(sel, attr)
        if value is not None:
            out[name] = str(value)
    return out
