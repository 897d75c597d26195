"""The URL contract (docs/ui.md): parsing query parameters into a Selection and back."""

from __future__ import annotations

import datetime as dt

import pytest

from lagscope.app.params import (
    Selection,
    SelectionError,
    TimeRange,
    from_ms,
    parse_selection,
    to_ms,
    to_query,
)


def test_full_link_is_parsed() -> None:
    sel = parse_selection({"page": "rebalance", "cluster": "prod", "group": "orders", "topic": "t",
                           "partition": "3", "from": "1000", "to": "2000", "rebalance": "1500", "orgId": "1"})
    assert sel == Selection(page="rebalance", cluster="prod", group="orders", topic="t", partition=3,
                            start_ms=1000, end_ms=2000, rebalance_ms=1500)


@pytest.mark.parametrize("sel", [
    Selection(),  # the bare app: the overview
    Selection(page="group", cluster="prod", group="g", start_ms=1, end_ms=2),  # a Grafana data link
    Selection(page="partition", cluster="c", group="g", topic="t", partition=0),  # partition 0 is a value
    Selection(page="compare", cluster="c", group="g", start_ms=10, end_ms=20, start2_ms=0, end2_ms=10),
    Selection(page="delivery", cluster="c", group="g", topic="t", finding="skip|c|g|t|0|2026-03-01T12:00:00+00:00"),
])
def test_round_trip(sel: Selection) -> None:
    assert parse_selection(to_query(sel)) == sel


@pytest.mark.parametrize(("query", "message"), [
    ({"page": "lag"}, "unknown page 'lag'"),  # a page that does not exist is named in the error
    ({"partition": "x"}, "partition='x' is not an integer"),  # a non-number partition
    ({"from": "yesterday"}, "epoch milliseconds"),  # times are epoch ms, and the error says so
    ({"from": "2000", "to": "1000"}, "must be before"),  # an empty or reversed range
    ({"rebalance": "-5"}, "must not be negative"),
])
def test_bad_links_say_what_is_wrong(query: dict[str, str], message: str) -> None:
    with pytest.raises(SelectionError, match=message):
        parse_selection(query)


@pytest.mark.parametrize("query", [
    {"page": "", "cluster": "", "partition": ""},  # Grafana renders an unset variable as an empty string
    {"cluster": "$__all", "group": "All", "topic": ".*"},  # ...and a variable set to "All" like this
])
def test_empty_and_all_values_mean_not_chosen(query: dict[str, str]) -> None:
    assert parse_selection(query) == Selection()


def test_time_range_dates_and_previous() -> None:
    r = TimeRange(dt.datetime(2026, 1, 1, 23, 0, tzinfo=dt.UTC), dt.datetime(2026, 1, 3, 1, 0, tzinfo=dt.UTC))
    assert r.dates() == [dt.date(2026, 1, 1), dt.date(2026, 1, 2), dt.date(2026, 1, 3)]
    assert r.previous() == TimeRange(dt.datetime(2025, 12, 31, 21, 0, tzinfo=dt.UTC), r.start)  # 26 h earlier
    assert from_ms(to_ms(r.start)) == r.start
