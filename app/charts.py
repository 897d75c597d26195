"""Plotly figures of the drill-down app. Each function takes DataFrames and returns a new figure.

Rebalance windows are shaded (an open window runs to the chart's right edge) and anomalies
are marked with an ``x`` at their start, hovering their one-sentence detail.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pandas as pd
import plotly.colors
import plotly.graph_objects as go

__all__ = [
    "commit_chart",
    "compare_chart",
    "delivery_chart",
    "lag_chart",
    "member_colors",
    "member_timeline",
    "ownership_timeline",
    "rates_chart",
]

_REBALANCE_FILL = "rgba(255, 165, 0, 0.18)"
_ANOMALY_COLOR = "#d62728"
_HEIGHT = 340


def _layout(fig: go.Figure, title: str, y_title: str, height: int = _HEIGHT) -> go.Figure:
    fig.update_layout(title={"text": title, "x": 0.0, "font": {"size": 15}}, height=height,
                      margin={"l": 10, "r": 10, "t": 40, "b": 10}, hovermode="x unified",
                      legend={"orientation": "h", "y": -0.15}, yaxis_title=y_title)
    return fig


def _shade(fig: go.Figure, rebalances: pd.DataFrame, right_edge: dt.datetime | None) -> None:
    for row in rebalances.itertuples(index=False):
        end = row.end_ts if pd.notna(row.end_ts) else right_edge
        if end is None:
            continue
        fig.add_vrect(x0=row.start_ts, x1=end, fillcolor=_REBALANCE_FILL, line_width=0, layer="below")
    if len(rebalances):
        # a legend entry for the shading (vrects have none)
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name="rebalance window",
                                 marker={"symbol": "square", "size": 12, "color": _REBALANCE_FILL}))


def _mark(fig: go.Figure, anomalies: pd.DataFrame, y: float) -> None:
    if anomalies.empty:
        return
    fig.add_trace(go.Scatter(
        x=anomalies["start_ts"], y=[y] * len(anomalies), mode="markers", name="anomaly",
        marker={"symbol": "x", "size": 11, "color": _ANOMALY_COLOR},
        text=[f"{k}: {d}" for k, d in zip(anomalies["kind"], anomalies["detail"].fillna(""), strict=True)],
        hovertemplate="%{text}<extra></extra>"))


#: bar colours of the causes: losses in reds, duplicates in blues
_LOST_COLORS = {"seek": "#d62728", "admin_reset": "#8c1c13", "out_of_range_reset": "#ff7f0e", "retention": "#e377c2"}
_AGAIN_COLORS = {"rewind": "#1f77b4", "admin_reset": "#17becf"}


def delivery_chart(buckets: pd.DataFrame, title: str) -> go.Figure:
    """Messages lost (above the axis) and processed twice (below it) per time bucket, one bar
    series per cause, stacked."""
    fig = go.Figure()
    if len(buckets):
        by_cause = buckets.groupby(["cause", "bucket_ts"], as_index=False)[["lost", "reprocessed"]].sum()
        for cause, rows in by_cause.groupby("cause", sort=True):
            lost = rows.loc[rows["lost"] > 0]
            if len(lost):
                fig.add_trace(go.Bar(x=lost["bucket_ts"], y=lost["lost"], name=f"lost · {cause}",
                                     marker_color=_LOST_COLORS.get(str(cause), "#d62728"),
                                     hovertemplate="%{y:,} lost<extra>" + str(cause) + "</extra>"))
            again = rows.loc[rows["reprocessed"] > 0]
            if len(again):
                fig.add_trace(go.Bar(x=again["bucket_ts"], y=-again["reprocessed"], name=f"reprocessed · {cause}",
                                     marker_color=_AGAIN_COLORS.get(str(cause), "#1f77b4"),
                                     customdata=again["reprocessed"],
                                     hovertemplate="%{customdata:,} processed twice<extra>" + str(cause) + "</extra>"))
    fig.update_layout(barmode="relative")
    return _layout(fig, title, "messages (lost ↑, processed twice ↓)")


def lag_chart(series: pd.DataFrame, y: str, label: str, title: str, y_title: str,
              rebalances: pd.DataFrame, anomalies: pd.DataFrame,
              window_end: dt.datetime | None = None) -> go.Figure:
    """One line per ``label`` value (e.g. topic, or topic/partition) of column ``y`` over
    ``window_start``, rebalance windows shaded, anomalies marked."""
    fig = go.Figure()
    for name, part in series.groupby(label, sort=True, dropna=False):
        fig.add_trace(go.Scatter(x=part["window_start"], y=part[y], mode="lines", name=str(name)))
    top = float(series[y].max()) if len(series) and pd.notna(series[y].max()) else 1.0
    _shade(fig, rebalances, window_end)
    _mark(fig, anomalies, top * 1.05 if top > 0 else 1.0)
    return _layout(fig, title, y_title)


def rates_chart(series: pd.DataFrame, rebalances: pd.DataFrame, window_end: dt.datetime | None = None) -> go.Figure:
    """Produce rate against consume rate (group level, messages/s)."""
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=series["window_start"], y=series["produce_rate"], mode="lines", name="produce"))
    fig.add_trace(go.Scatter(x=series["window_start"], y=series["consume_rate"], mode="lines", name="consume"))
    _shade(fig, rebalances, window_end)
    return _layout(fig, "Produce vs consume rate", "messages/s")


def member_colors(member_ids: Sequence[str]) -> dict[str, str]:
    """One color per member id (sorted), the same in every chart of a page."""
    palette = plotly.colors.qualitative.D3
    return {m: palette[i % len(palette)] for i, m in enumerate(sorted(set(member_ids)))}


def member_timeline(members: pd.DataFrame, rebalance: pd.Series | None = None,
                    colors: dict[str, str] | None = None) -> go.Figure:
    """Which members were in the group at each sweep (one row per member)."""
    fig = go.Figure()
    present = members.loc[members["member_id"].notna()]
    colors = colors or member_colors(list(present["member_id"]))
    for member, part in present.groupby("member_id", sort=True):
        who = f"{part['client_id'].iloc[0]} @ {part['host'].iloc[0]}"
        fig.add_trace(go.Scatter(x=part["sweep_ts"], y=[str(member)] * len(part), mode="markers",
                                 name=who, marker={"symbol": "square", "size": 9, "color": colors.get(str(member))},
                                 hovertemplate=f"{who}<br>%{{x}}<extra></extra>"))
    if rebalance is not None:
        _shade(fig, pd.DataFrame([rebalance]), members["sweep_ts"].max() if len(members) else None)
    fig.update_yaxes(type="category", automargin=True)
    return _layout(fig, "Members", "", height=max(220, 60 + 28 * present["member_id"].nunique()))


def ownership_timeline(offsets: pd.DataFrame, rebalance: pd.Series | None = None,
                       colors: dict[str, str] | None = None, max_partitions: int = 48) -> go.Figure:
    """Owner (member) of each partition at each sweep; unassigned is grey."""
    keys = offsets[["topic", "partition"]].drop_duplicates().sort_values(["topic", "partition"])
    keys = keys.head(max_partitions)
    data = offsets.merge(keys, on=["topic", "partition"])
    data = data.assign(tp=data["topic"] + "/" + data["partition"].astype(str),
                       owner=data["member_id"].fillna("(unassigned)"))
    colors = {**(colors or member_colors(list(offsets["member_id"].dropna()))), "(unassigned)": "#bbbbbb"}
    fig = go.Figure()
    for owner, part in data.groupby("owner", sort=True):
        fig.add_trace(go.Scatter(
            x=part["sweep_ts"], y=part["tp"], mode="markers", name=str(owner),
            marker={"symbol": "square", "size": 9, "color": colors.get(str(owner))},
            hovertemplate=f"{owner}<br>%{{y}} %{{x}}<extra></extra>"))
    if rebalance is not None:
        _shade(fig, pd.DataFrame([rebalance]), offsets["sweep_ts"].max() if len(offsets) else None)
    fig.update_yaxes(type="category", automargin=True, autorange="reversed")
    return _layout(fig, "Partition ownership", "", height=max(240, 60 + 18 * len(keys)))


def commit_chart(offsets: pd.DataFrame, commits: pd.DataFrame, steps: pd.DataFrame,
                 anomalies: pd.DataFrame) -> go.Figure:
    """Committed offset against the log start/end offsets of one partition; rewinds and the
    analytics' skips marked."""
    fig = go.Figure()
    if len(offsets):
        fig.add_trace(go.Scatter(x=offsets["sweep_ts"], y=offsets["log_end_offset"], mode="lines",
                                 name="log end offset", line={"dash": "dot"}))
        fig.add_trace(go.Scatter(x=offsets["sweep_ts"], y=offsets["log_start_offset"], mode="lines",
                                 name="log start offset", line={"dash": "dot", "color": "#999999"}))
    fig.add_trace(go.Scatter(x=commits["ts"], y=commits["committed_offset"], mode="lines+markers",
                             name="committed offset", line={"shape": "hv"}, marker={"size": 4}))
    rewinds = steps.loc[steps["kind"] == "rewind"] if len(steps) else steps
    if len(rewinds):
        fig.add_trace(go.Scatter(x=rewinds["ts"], y=rewinds["committed_offset"], mode="markers", name="rewind",
                                 marker={"symbol": "triangle-down", "size": 13, "color": "#9467bd"},
                                 text=[f"rewind: {n} messages reprocessed" for n in rewinds["reprocessed"]],
                                 hovertemplate="%{text}<extra></extra>"))
    skips = anomalies.loc[anomalies["kind"].isin(["skip", "retention_loss"])] if len(anomalies) else anomalies
    if len(skips):
        y = float(commits["committed_offset"].max()) if len(commits) else 0.0
        fig.add_trace(go.Scatter(x=skips["start_ts"], y=[y] * len(skips), mode="markers", name="skip",
                                 marker={"symbol": "triangle-up", "size": 13, "color": _ANOMALY_COLOR},
                                 text=[_loss_label(r) for r in skips.to_dict("records")],
                                 hovertemplate="%{text}<extra></extra>"))
    return _layout(fig, "Commit history", "offset")


def _loss_label(anomaly: dict[str, object]) -> str:
    """A skip's or retention loss's hover text: a retention loss not proven (a warning: its owner
    may have fetched the deleted records) is an upper bound."""
    m = anomaly.get("magnitude")
    n = 0.0 if m is None or pd.isna(m) else float(m)  # type: ignore[arg-type]
    if anomaly.get("kind") == "retention_loss" and anomaly.get("severity") == "warning":
        return f"retention_loss: at most {n:.0f} messages lost (the consumer may have fetched them)"
    return f"{anomaly.get('kind')}: {n:.0f} messages never processed"


def compare_chart(a: pd.DataFrame, b: pd.DataFrame, x: str, y: str, names: Sequence[str],
                  title: str, y_title: str) -> go.Figure:
    """Two windows on one relative-time axis (column ``x``: minutes since each window's start)."""
    fig = go.Figure()
    for df, name, color in ((a, names[0], "#1f77b4"), (b, names[1], "#ff7f0e")):
        fig.add_trace(go.Scatter(x=df[x], y=df[y], mode="lines", name=name, line={"color": color}))
    fig.update_xaxes(ticksuffix=" min")  # minutes since each window's start (an axis title would meet the legend)
    return _layout(fig, title, y_title)
