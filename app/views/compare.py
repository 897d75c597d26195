"""Compare: two time windows of the same group side by side."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lagscope.app import charts, processing, store, widgets
from lagscope.app.params import TimeRange, from_ms, to_ms

__all__ = ["render"]

_SHIFTS: dict[str, dt.timedelta | None] = {
    "the window just before": None,
    "one day earlier": dt.timedelta(days=1),
    "one week earlier": dt.timedelta(days=7),
}
_CUSTOM = "custom (from the link)"


def _second_window(ctx: widgets.Context) -> tuple[TimeRange, str]:
    sel = ctx.sel
    if sel.start2_ms is not None and sel.end2_ms is not None:
        b = TimeRange(from_ms(sel.start2_ms), from_ms(sel.end2_ms))
        for name, shift in _SHIFTS.items():
            candidate = ctx.window.previous() if shift is None else TimeRange(ctx.window.start - shift,
                                                                              ctx.window.end - shift)
            if candidate == b:
                return b, name
        return b, _CUSTOM
    return ctx.window.previous(), "the window just before"


def _on_shift(window: TimeRange) -> None:
    sel = widgets.read_selection()
    choice = st.session_state["w_compare"]
    if choice == _CUSTOM:
        return
    shift = _SHIFTS[choice]
    b = window.previous() if shift is None else TimeRange(window.start - shift, window.end - shift)
    widgets.go(sel.with_(start_ms=to_ms(window.start), end_ms=to_ms(window.end),
                         start2_ms=to_ms(b.start), end2_ms=to_ms(b.end)))


def _stats(column: DeltaGenerator, title: str, window: TimeRange,
           stats: processing.WindowStats) -> None:
    with column:
        st.subheader(title)
        st.caption(f"{window.start:%Y-%m-%d %H:%M} → {window.end:%Y-%m-%d %H:%M} UTC")
        st.metric("Max lag (messages)", "—" if stats.max_lag is None else f"{stats.max_lag:,}")
        st.metric("Max lag (time)", processing.format_duration(stats.max_lag_seconds))
        st.metric("Mean consume / produce rate",
                  "—" if stats.mean_consume_rate is None
                  else f"{stats.mean_consume_rate:,.1f} / {stats.mean_produce_rate or 0:,.1f} per s")
        st.metric("Rebalances", f"{stats.rebalances} ({processing.format_duration(stats.rebalance_seconds)})")
        st.metric("Anomalies", stats.anomalies)


def render(ctx: widgets.Context) -> None:
    st.title("Compare")
    picked = widgets.require_group(ctx, 2)
    if picked is None:
        return
    cluster, group, pick = picked
    b_window, choice = _second_window(ctx)
    with pick[1]:
        options = [*_SHIFTS, _CUSTOM]
        st.session_state["w_compare"] = choice
        st.selectbox("Compare with", options, key="w_compare", on_change=_on_shift, args=(ctx.window,))

    windows = {"A": ctx.window, "B": b_window}
    series: dict[str, pd.DataFrame] = {}
    table_rows = []
    cols = st.columns(2)
    for col, (name, window) in zip(cols, windows.items(), strict=True):
        s = store.lag_series(ctx.lake, cluster, group, window, "group")
        rb = store.rebalances(ctx.lake, [cluster], window, group)
        an = store.anomalies(ctx.lake, [cluster], window, group)
        stats = processing.window_stats(s, rb, an)
        _stats(col, f"Window {name}", window, stats)
        series[name] = s.assign(minutes=processing.relative_minutes(s, window.start))
        table_rows.append({"window": name, "from": window.start, "to": window.end, **stats.__dict__})
    if series["A"].empty and series["B"].empty:
        widgets.no_data(f"no lag results for {group} in either window", "Pick other windows.")
        return
    names = tuple(f"{n}: {w.start:%m-%d %H:%M} → {w.end:%m-%d %H:%M}" for n, w in windows.items())
    st.caption("Both windows on one axis: minutes since each window's start.")
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.compare_chart(series["A"], series["B"], "minutes", "lag_last", names,
                                             "Lag in messages", "messages"), key="chart_compare_lag")
    with right:
        st.plotly_chart(charts.compare_chart(series["A"], series["B"], "minutes", "lag_seconds", names,
                                             "Lag in seconds", "seconds"), key="chart_compare_lag_seconds")
    summary = pd.DataFrame(table_rows)
    st.dataframe(summary, hide_index=True, key="compare_summary")
    widgets.export_buttons(summary, f"{group}-compare", "export_compare")
