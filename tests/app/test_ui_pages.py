"""Every page of the app rendered by streamlit.testing's AppTest on the synthetic lake."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
import ui_fixture_lake as fx
from streamlit.testing.v1 import AppTest

from lagscope.app import ENV_LAKE, ENV_RESULTS, MAIN_SCRIPT
from lagscope.app.params import to_ms

Open = Callable[..., AppTest]


def _opener(monkeypatch: pytest.MonkeyPatch, samples: Path, results: Path) -> Open:
    monkeypatch.setenv(ENV_LAKE, str(samples))
    monkeypatch.setenv(ENV_RESULTS, str(results))

    def open_(**params: object) -> AppTest:
        at = AppTest.from_file(str(MAIN_SCRIPT), default_timeout=60)
        for name, value in params.items():
            at.query_params[name] = str(value)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at
    return open_


@pytest.fixture
def open_app(monkeypatch: pytest.MonkeyPatch, ui_lake: fx.FixtureLake) -> Open:
    return _opener(monkeypatch, ui_lake.root, ui_lake.root)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def table(at: AppTest, *columns: str) -> pd.DataFrame:
    """The first dataframe on the page with all these columns."""
    for element in at.dataframe:
        frame: pd.DataFrame = element.value
        if set(columns) <= set(frame.columns):
            return frame
    raise AssertionError(f"no table with columns {columns}")


def figure(at: AppTest, key: str) -> dict[str, object]:
    chart = next(c for c in at.get("plotly_chart") if c.proto.id.endswith(key) or key in c.proto.id)
    spec: dict[str, object] = json.loads(chart.proto.spec)
    return spec


def test_overview_groups_by_status(open_app: Open, ui_lake: fx.FixtureLake) -> None:
    at = open_app()
    assert at.title[0].value == "Overview"
    m = metrics(at)
    assert (m["Groups"], m["ERR"], m["WARN"], m["OK"], m["STALL"]) == ("3", "1", "1", "1", "0")
    groups = at.dataframe[0].value
    assert groups["group_id"].tolist() == ["orders-svc", "audit", "billing"]
    orders_lag = sum(v for (g, _, _), v in ui_lake.final_lag.items() if g == "orders-svc")
    assert groups["lag"].iloc[0] == orders_lag
    assert at.dataframe[1].value["cause"].tolist() == ["session_timeout"]  # recent rebalances
    assert sorted(at.dataframe[2].value["kind"]) == ["lag_growth", "rewind", "skip"]  # recent anomalies
    assert len(at.get("download_button")) == 6  # CSV + Parquet for each of the three tables


def test_overview_filtered_by_cluster(open_app: Open) -> None:
    at = open_app(cluster="staging")
    assert metrics(at)["Groups"] == "1"
    assert at.dataframe[0].value["group_id"].tolist() == ["audit"]
    assert at.sidebar.selectbox(key="w_cluster").value == "staging"


def test_overview_click_opens_the_worst_group(open_app: Open, ui_lake: fx.FixtureLake) -> None:
    at = open_app()
    at.button(key="open_group_0").click().run()
    assert at.query_params["page"] == "group"
    assert at.query_params["group"] == "orders-svc"
    assert at.title[0].value == "Group"
    lag = sum(v for (g, _, _), v in ui_lake.final_lag.items() if g == "orders-svc")
    assert metrics(at)["Lag (messages)"] == f"{lag:,}"


def test_group_page(open_app: Open, ui_lake: fx.FixtureLake) -> None:
    at = open_app(page="group", cluster="prod", group="orders-svc")
    m = metrics(at)
    assert m["Members now"] == "1"  # m-b left in the rebalance
    assert m["Produce rate"] == "200.0/s"  # 4 partitions x 50 msg/s
    assert m["Consume rate"] == "120.0/s"  # m-a alone: 4 x 30 msg/s
    assert m["Catch-up ETA"] == "never"
    lag = figure(at, "chart_lag")
    data = lag["data"]
    assert isinstance(data, list)
    assert {t["name"] for t in data} >= {"orders", "rebalance window", "anomaly"}
    shapes = lag["layout"]["shapes"]  # type: ignore[index]
    assert len(shapes) == 1  # the rebalance window, shaded
    assert shapes[0]["x0"].startswith(fx.REBALANCE_START.strftime("%Y-%m-%dT%H:%M:%S"))
    partitions = table(at, "lag_last", "catchup_eta_s")
    assert partitions["partition"].tolist()[0] == 1  # the rewind left partition 1 furthest behind
    assert table(at, "member_id", "assigned")["member_id"].tolist() == ["m-a"]
    assert table(at, "member_id", "assigned")["partitions"].tolist() == [4]
    # the advice section: the current step's two rows (not the superseded one), by rule
    advice = table(at, "rule", "suggested", "confidence")
    assert advice["rule"].tolist() == ["retention_vs_catchup", "session_timeout_crash"]
    assert "stale" not in advice["suggested"].tolist()
    assert any("session.timeout.ms=10000" in i.value and "outages of ~73 s would shrink to ~38 s" in i.value
               for i in at.info)


def test_group_page_per_partition_and_on_to_the_rebalance(open_app: Open) -> None:
    at = open_app(page="group", cluster="prod", group="orders-svc", topic="orders")
    names = {t["name"] for t in figure(at, "chart_lag_seconds")["data"]}  # type: ignore[attr-defined]
    assert {"orders/0", "orders/1", "orders/2", "orders/3"} <= names
    at.button(key="open_rebalance_0").click().run()
    assert at.query_params["page"] == "rebalance"
    assert at.query_params["rebalance"] == str(to_ms(fx.REBALANCE_START))
    assert metrics(at)["Cause"] == "session timeout"


def test_rebalance_page_deep_link(open_app: Open) -> None:
    at = open_app(page="rebalance", cluster="prod", group="orders-svc", rebalance=to_ms(fx.REBALANCE_START),
                  **{"from": to_ms(fx.END - dt.timedelta(minutes=10)), "to": to_ms(fx.END)})
    m = metrics(at)
    assert (m["Cause"], m["Duration"], m["Bound from the settings"]) == ("session timeout", "1m", "13s")
    assert next(x for x in at.metric if x.label == "Bound from the settings").delta == "4.62× the bound"
    assert "4.6× longer" in at.warning[0].value
    ownership = table(at, "owner_before", "moved")
    assert ownership.loc[ownership["moved"], "partition"].tolist() == [2, 3]  # m-b's partitions moved to m-a
    assert set(ownership["owner_after"]) == {"m-a"}
    roster = table(at, "member_id", "change")
    assert dict(zip(roster["member_id"], roster["change"], strict=True)) == {"m-a": "stayed", "m-b": "left"}
    gaps = table(at, "resumed_ts", "gap_s")
    # no commit for the whole window: every partition paused at least the 60 s of the window
    assert len(gaps) == 4
    assert (gaps["gap_s"] >= 60).all()
    accumulated = table(at, "accumulated")
    assert int(accumulated["accumulated"].sum()) == int(m["Messages accumulated"].replace(",", ""))
    names = {t["name"] for t in figure(at, "chart_members")["data"]}  # type: ignore[attr-defined]
    assert {"client-a @ /10.0.0.1", "client-b @ /10.0.0.2"} <= names
    # the advice on a session timeout: the crash rule's, not the retention's
    assert table(at, "rule", "suggested", "confidence")["rule"].tolist() == ["session_timeout_crash"]


@pytest.mark.parametrize(("partition", "rewinds", "reprocessed", "never"), [
    (1, "1", f"{fx.REWIND_BY:,}", "0"),  # the rewind: exactly REWIND_BY messages come again
    (2, "0", "0", None),  # the skip: the lag it had is never processed (from the anomalies table)
    (0, "0", "0", "0"),  # an ordinary partition
])
def test_partition_page(open_app: Open, ui_lake: fx.FixtureLake, partition: int, rewinds: str,
                        reprocessed: str, never: str | None) -> None:
    at = open_app(page="partition", cluster="prod", group="orders-svc", topic="orders", partition=partition)
    m = metrics(at)
    assert (m["Rewinds"], m["Messages reprocessed"]) == (rewinds, reprocessed)
    assert m["Messages never processed"] == (never if never is not None else f"{ui_lake.skipped:,}")
    assert m["Longest gap between commits"] == "1m 30s"  # the 60 s window + the 30 s sweep before it
    steps = table(at, "reprocessed", "gap_s")
    assert (steps["kind"] == "rewind").sum() == int(rewinds)
    traces = {t["name"] for t in figure(at, "chart_commits")["data"]}  # type: ignore[attr-defined]
    assert "committed offset" in traces
    assert ("rewind" in traces) == (partition == 1)
    assert ("skip" in traces) == (partition == 2)


def test_compare_page(open_app: Open) -> None:
    mid = fx.START + dt.timedelta(hours=1)
    at = open_app(page="compare", cluster="prod", group="orders-svc", **{
        "from": to_ms(mid), "to": to_ms(fx.END), "from2": to_ms(fx.START), "to2": to_ms(mid)})
    summary = table(at, "window", "max_lag")
    a, b = summary.iloc[0], summary.iloc[1]
    assert (a["rebalances"], b["rebalances"]) == (1, 0)  # the rebalance is in the second hour
    assert a["max_lag"] > 10 * b["max_lag"]  # the lag grew after it
    assert at.selectbox(key="w_compare").value == "the window just before"
    at.selectbox(key="w_compare").set_value("one day earlier").run()
    assert at.query_params["from2"] == str(to_ms(mid - dt.timedelta(days=1)))
    assert table(at, "window", "max_lag")["max_lag"].isna().iloc[1]  # nothing a day earlier


@pytest.mark.parametrize("page", ["overview", "group", "rebalance", "partition", "delivery", "compare"])
def test_every_page_says_when_there_is_no_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               page: str) -> None:
    at = _opener(monkeypatch, tmp_path / "lake", tmp_path / "results")(page=page, cluster="prod", group="g")
    assert any("No data yet" in i.value for i in at.info), [i.value for i in at.info]


@pytest.mark.parametrize("page", ["group", "rebalance", "partition", "compare"])
def test_the_group_pages_say_when_the_cluster_has_no_group(open_app: Open, page: str) -> None:
    at = open_app(page=page, cluster="nope")
    assert [i.value for i in at.info if "No data yet" in i.value] == [
        f"**No data yet: no consumer group in cluster nope in this time range.** "
        f"{'The collector records groups at every sweep; widen' if page == 'group' else 'Widen'} the time range."]
    assert [s.label for s in at.selectbox] == ["Cluster", "Time range"]  # the sidebar's only: the page stops


def test_a_bad_link_is_reported(open_app: Open) -> None:
    at = open_app(page="group", partition="seven")
    assert "partition='seven' is not an integer" in at.error[0].value
    assert at.title[0].value == "Overview"
