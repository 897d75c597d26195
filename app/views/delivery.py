"""Delivery: messages lost and processed twice over time, per group and topic, by cause; the
findings behind them (exact or a bound) and the commits around each one."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import streamlit as st

from lagscope.app import charts, processing, store, widgets
from lagscope.app.params import TimeRange

__all__ = ["render"]

#: how much time around a finding its commits are shown
COMMITS_MARGIN = dt.timedelta(minutes=2)

_FINDING_COLUMNS = ["group_id", "topic", "partition", "kind", "cause", "bucket_ts", "end_ts", "lost", "reprocessed",
                    "exact", "bound"]


def _label(row: pd.Series) -> str:
    at_most = "at most " if row.get("bound") == "at_most" else ""
    count = f"{at_most}{int(row['lost']):,} lost" if row["kind"] != "rewind" else f"{int(row['reprocessed']):,} twice"
    return (f"{row['bucket_ts']:%Y-%m-%d %H:%M:%S} · {row['group_id']} {row['topic']}[{row['partition']}] · "
            f"{row['cause']} · {count}")


def _pick(ctx: widgets.Context, found: pd.DataFrame) -> pd.Series:
    keys = found["key"].tolist()
    labels = dict(zip(keys, (_label(r) for _, r in found.iterrows()), strict=True))
    chosen = ctx.sel.finding if ctx.sel.finding in labels else keys[0]
    st.session_state["w_finding"] = chosen
    st.selectbox("Finding", keys, format_func=labels.__getitem__, key="w_finding", on_change=_on_finding)
    return found.loc[found["key"] == chosen].iloc[0]


def _on_finding() -> None:
    widgets.go(widgets.read_selection().with_(finding=str(st.session_state["w_finding"])))


def render(ctx: widgets.Context) -> None:
    st.title("Delivery")
    cluster = widgets.require_cluster(ctx)
    if cluster is None:
        return
    pick = st.columns(2)
    with pick[0]:
        group = widgets.group_picker(ctx, cluster, allow_all=True)
    everything = store.delivery(ctx.lake, [cluster], ctx.window, group)
    topics = sorted(set(everything["topic"].dropna()) | set(
        store.topics_of(ctx.lake, cluster, group, ctx.window) if group else []))
    with pick[1]:
        topic = widgets.topic_picker(ctx, topics)
    found = everything.loc[everything["topic"] == topic].reset_index(drop=True) if topic else everything
    scope = " ".join(x for x in (group or "every group", topic or "") if x)
    if found.empty:
        widgets.no_data(f"no message lost or processed twice for {scope} in this time range",
                        "Skips, offset resets, retention loss and rewinds the analytics find appear here; "
                        "widen the time range.")
        return

    summary = processing.summarize_delivery(found)
    cols = st.columns(4)
    cols[0].metric("Messages lost", f"{summary.lost:,}",
                   help="Never processed: skips, offset resets, proven retention losses (one not proven, at "
                        "most its count, is listed below only).")
    cols[1].metric("Messages processed twice", f"{summary.reprocessed:,}",
                   help="Rewinds and offset resets back.")
    cols[2].metric("Findings", f"{summary.findings:,}")
    cols[3].metric("Exact", f"{summary.exact:,} of {summary.findings:,}",
                   help="Counts one commit of the commit stream shows whole (an admin reset of an empty group, "
                        "a rewind); the others are a bound (at least, from sweeps; an estimate for a skip "
                        "judged by the consumer's pace and a retention loss timed by one commit; at most for a "
                        "retention loss not proven: see the bound column).")
    every = processing.delivery_bucket(ctx.window.duration)
    buckets = processing.delivery_over_time(found, every)
    st.plotly_chart(charts.delivery_chart(buckets, f"Messages lost and processed twice ({scope}, per "
                                                   f"{processing.format_duration(every.total_seconds())})"),
                    key="chart_delivery")

    st.subheader("By group, topic and cause")
    totals = (found.assign(lost=processing.known_lost(found)).groupby(["group_id", "topic", "cause"], as_index=False)
              .agg(lost=("lost", "sum"), reprocessed=("reprocessed", "sum"), findings=("key", "count"),
                   exact=("exact", "all"))
              .sort_values(["lost", "reprocessed"], ascending=False, kind="stable"))
    st.dataframe(totals, hide_index=True, key="delivery_totals")
    widgets.export_buttons(totals, f"delivery-{cluster}", "export_delivery_totals")

    st.subheader("Findings")
    shown = found[_FINDING_COLUMNS].rename(columns={"bucket_ts": "start_ts"})
    st.dataframe(shown, hide_index=True, key="delivery_findings")
    widgets.export_buttons(shown, f"delivery-{cluster}-findings", "export_delivery_findings")

    st.subheader("Commits around a finding")
    row = _pick(ctx, found)
    start = row["bucket_ts"].to_pydatetime()
    end = row["end_ts"].to_pydatetime() if pd.notna(row["end_ts"]) else (ctx.data_end or start)
    around = TimeRange(start - COMMITS_MARGIN, max(end, start) + COMMITS_MARGIN)
    commits, source = store.commit_history(ctx.lake, cluster, row["group_id"], around, row["topic"],
                                           int(row["partition"]))
    bound = {"exact": "exact (one commit shows it)",
             "at_least": "at least this many (seen between sweeps)",
             "estimate": "an estimate, never more than the jump (the jump less what the consumer's pace could "
                         "have read since the commit or sweep before it)",
             "at_most": "at most this many (its consumer was still reading the partition and may have fetched them "
                        "already: not counted in the totals)"
             }[row["bound"]]
    st.caption(f"{row['kind']} ({row['cause']}) on {row['topic']}[{row['partition']}]: {bound}. "
               + (f"Every commit from the commit stream, {around.start:%H:%M:%S} → {around.end:%H:%M:%S} UTC."
                  if source == "commits" else
                  "The commit stream is not in the lake (the `__consumer_offsets` tail is off): the committed "
                  "offset as each sweep saw it."))
    if commits.empty:
        st.caption("No commit of this partition around the finding.")
        return
    steps = processing.commit_steps(commits)
    st.dataframe(steps, hide_index=True, key="delivery_commits")
    widgets.export_buttons(steps, f"{row['group_id']}-{row['topic']}-{row['partition']}-commits",
                           "export_delivery_commits")
