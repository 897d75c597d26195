"""Partition: commit history, gaps, rewinds and skips with the messages reprocessed or never
processed."""

from __future__ import annotations

import streamlit as st

from lagscope.app import charts, processing, store, widgets

__all__ = ["render"]


def render(ctx: widgets.Context) -> None:
    st.title("Partition")
    picked = widgets.require_group(ctx, 3)
    if picked is None:
        return
    cluster, group, pick = picked
    offsets_all = store.offsets_between(ctx.lake, cluster, group, ctx.window, ctx.sel.topic)
    topics = sorted(set(store.topics_of(ctx.lake, cluster, group, ctx.window)) | set(offsets_all["topic"]))
    with pick[1]:
        topic = widgets.topic_picker(ctx, topics, allow_all=False)
    if topic is None:
        widgets.no_data(f"no topic of {group} in this time range", "Widen the time range.")
        return
    partitions = sorted({int(p) for p in offsets_all.loc[offsets_all["topic"] == topic, "partition"]}
                        | {int(p) for p in store.latest_partitions(ctx.lake, cluster, group, ctx.window, topic)
                           ["partition"]})
    with pick[2]:
        partition = widgets.partition_picker(ctx, partitions)
    if partition is None:
        widgets.no_data(f"no partition of {topic} in this time range", "Widen the time range.")
        return

    commits, source = store.commit_history(ctx.lake, cluster, group, ctx.window, topic, partition)
    offsets = store.offsets_between(ctx.lake, cluster, group, ctx.window, topic, partition)
    anomalies = store.anomalies(ctx.lake, [cluster], ctx.window, group, topic, partition)
    anomalies = anomalies.loc[anomalies["partition"].notna()] if len(anomalies) else anomalies
    if commits.empty and offsets.empty:
        widgets.no_data(f"no commit of {group} on {topic}/{partition} in this time range",
                        "The collector records committed offsets at every sweep; widen the time range.")
        return
    steps = processing.commit_steps(commits)
    summary = processing.summarize_commits(steps, anomalies)

    cols = st.columns(5)
    cols[0].metric("Offset changes", f"{summary.changes:,}")
    cols[1].metric("Longest gap between commits", processing.format_duration(summary.longest_gap_s))
    cols[2].metric("Rewinds", summary.rewinds)
    cols[3].metric("Messages reprocessed", f"{summary.reprocessed:,}")
    cols[4].metric("Messages never processed", f"{summary.never_processed:,}",
                   help="Skips and proven retention losses found by the analytics (anomalies table); a "
                        "retention loss not proven (a warning, at most its count) is not summed.")
    st.caption(f"Commit history from the {source} table"
               + (" (exact commit times)." if source == "commits" else " (the committed offset at each sweep)."))
    st.plotly_chart(charts.commit_chart(offsets, commits, steps, anomalies), key="chart_commits")

    left, right = st.columns(2)
    with left:
        st.subheader("Offset changes")
        st.dataframe(steps, hide_index=True, key="partition_steps")
        widgets.export_buttons(steps, f"{group}-{topic}-{partition}-commits", "export_steps")
    with right:
        st.subheader("Anomalies")
        if anomalies.empty:
            st.caption("No anomaly on this partition in this time range.")
        else:
            shown = anomalies[["kind", "severity", "start_ts", "end_ts", "magnitude", "unit", "detail"]]
            st.dataframe(shown, hide_index=True, key="partition_anomalies")
            widgets.export_buttons(shown, f"{group}-{topic}-{partition}-anomalies", "export_partition_anomalies")
