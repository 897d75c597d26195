"""Rebalance: members and partition ownership before, during and after one window; cause;
duration against the bound the settings imply; the group's advice on rebalances of that cause;
per-partition processing gap; messages accumulated."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from lagscope.app import charts, processing, store, widgets
from lagscope.app.params import TimeRange, from_ms, to_ms

__all__ = ["render"]


def _context_window(row: pd.Series, data_end: dt.datetime | None) -> TimeRange:
    """The window plus as much again (at least two minutes) on each side."""
    start = row["start_ts"].to_pydatetime()
    end = row["end_ts"].to_pydatetime() if pd.notna(row["end_ts"]) else (data_end or start + dt.timedelta(minutes=5))
    margin = max(dt.timedelta(minutes=2), end - start)
    return TimeRange(start - margin, end + margin)


def _pick(ctx: widgets.Context, rebalances: pd.DataFrame) -> pd.Series | None:
    if rebalances.empty:
        return None
    starts = [to_ms(t) for t in rebalances["start_ts"]]
    # without rebalance=<ms>: the window nearest the middle of the range (an annotation's link
    # puts the same margin on both sides of its window)
    middle = to_ms(ctx.window.start + ctx.window.duration / 2)
    wanted = ctx.sel.rebalance_ms if ctx.sel.rebalance_ms is not None else middle
    nearest = min(range(len(starts)), key=lambda i: abs(starts[i] - wanted))
    labels = {ms: f"{from_ms(ms):%Y-%m-%d %H:%M:%S} · {cause}" for ms, cause in zip(
        starts, rebalances["cause"].fillna("unknown"), strict=True)}
    st.session_state["w_rebalance"] = starts[nearest]
    st.selectbox("Rebalance window", starts, format_func=labels.__getitem__, key="w_rebalance",
                 on_change=_on_rebalance)
    return rebalances.iloc[nearest]


def _on_rebalance() -> None:
    sel = widgets.read_selection()
    widgets.go(sel.with_(rebalance_ms=int(st.session_state["w_rebalance"])))


def render(ctx: widgets.Context) -> None:
    st.title("Rebalance")
    picked = widgets.require_group(ctx, 2)
    if picked is None:
        return
    cluster, group, pick = picked
    search = ctx.window
    if ctx.sel.rebalance_ms is not None:  # the link names a window: find it even outside the range
        at = from_ms(ctx.sel.rebalance_ms)
        search = TimeRange(min(ctx.window.start, at - dt.timedelta(minutes=1)),
                           max(ctx.window.end, at + dt.timedelta(minutes=1)))
    rebalances = store.rebalances(ctx.lake, [cluster], search, group)
    with pick[1]:
        row = _pick(ctx, rebalances)
    if row is None:
        widgets.no_data(f"no rebalance of {group} in this time range",
                        "The analytics job finds rebalance windows (rebalances table); widen the time range.")
        return

    duration, bound = row["duration_s"], row["bound_s"]
    cols = st.columns([2, 1, 1.2, 1.2, 1.2])
    cols[0].metric("Cause", str(row["cause"] or "unknown").replace("_", " "))
    cols[1].metric("Duration", processing.format_duration(duration) if pd.notna(duration) else "still open")
    over = row["observed_over_bound"]
    cols[2].metric("Bound from the settings", processing.format_duration(bound) if pd.notna(bound) else "—",
                   delta=f"{over:.2f}× the bound" if pd.notna(over) else None,
                   delta_color="inverse" if pd.notna(over) and over > 1 else "off")
    cols[3].metric("Messages accumulated", f"{int(row['messages_accumulated']):,}"
                   if pd.notna(row["messages_accumulated"]) else "—")
    cols[4].metric("Longest processing gap", processing.format_duration(row["max_processing_gap_s"])
                   if pd.notna(row["max_processing_gap_s"]) else "—")
    end_text = f"{row['end_ts']:%H:%M:%S} UTC" if pd.notna(row["end_ts"]) else "still open"
    st.caption(f"Generation {row['generation_before']} → {row['generation_after']} · "
               f"{row['partitions_moved']} partitions moved · source: {row['source']} · "
               f"{row['start_ts']:%Y-%m-%d %H:%M:%S} → {end_text}")
    if pd.notna(over) and over > 1:
        st.warning(f"This rebalance took {over:.1f}× longer than the group's settings imply "
                   f"({processing.format_duration(duration)} against {processing.format_duration(bound)}).")

    widgets.advice_section(processing.advice_for_cause(store.advice(ctx.lake, cluster, group), row["cause"]),
                           key="rebalance_advice",
                           empty="No advice on rebalances like this one: one window is no pattern; the analytics "
                                 "advise once the group's rebalances and findings show one.")

    around = _context_window(row, ctx.data_end)
    members = store.members_between(ctx.lake, cluster, group, around)
    offsets = store.offsets_between(ctx.lake, cluster, group, around)
    if members.empty and offsets.empty:
        widgets.no_data("no sweep samples around this window", "The sample lake has no members/offsets rows here.")
        return
    colors = charts.member_colors([*members["member_id"].dropna(), *offsets["member_id"].dropna()])
    st.plotly_chart(charts.member_timeline(members, row, colors), key="chart_members")
    st.plotly_chart(charts.ownership_timeline(offsets, row, colors), key="chart_ownership")

    start = row["start_ts"].to_pydatetime()
    end = row["end_ts"].to_pydatetime() if pd.notna(row["end_ts"]) else around.end
    left, right = st.columns(2)
    with left:
        st.subheader("Ownership before → after")
        change = processing.ownership_change(processing.ownership_at(offsets, start, before=True),
                                             processing.ownership_at(offsets, end, before=False))
        st.dataframe(change, hide_index=True, key="rebalance_ownership")
        widgets.export_buttons(change, f"{group}-ownership", "export_ownership")
    with right:
        st.subheader("Members before → after")
        before = set(row["members_before"] if row["members_before"] is not None else [])
        after = set(row["members_after"] if row["members_after"] is not None else [])
        roster = pd.DataFrame({"member_id": sorted(before | after)})
        roster["before"] = roster["member_id"].isin(before)
        roster["after"] = roster["member_id"].isin(after)
        roster["change"] = ["left" if b and not a else "joined" if a and not b else "stayed"
                            for b, a in zip(roster["before"], roster["after"], strict=True)]
        st.dataframe(roster, hide_index=True, key="rebalance_members")
        widgets.export_buttons(roster, f"{group}-members", "export_roster")

    commits, source = store.commit_history(ctx.lake, cluster, group, around)
    left, right = st.columns(2)
    with left:
        st.subheader("Processing gap per partition")
        st.caption(f"Last commit before the window → first commit after it (from {source}).")
        gaps = processing.processing_gaps(commits, start, end)
        st.dataframe(gaps, hide_index=True, key="rebalance_gaps")
        widgets.export_buttons(gaps, f"{group}-gaps", "export_gaps")
    with right:
        st.subheader("Messages accumulated per partition")
        acc = processing.accumulated_during(offsets, start, end)
        st.dataframe(acc, hide_index=True, key="rebalance_accumulated")
        widgets.export_buttons(acc, f"{group}-accumulated", "export_accumulated")
