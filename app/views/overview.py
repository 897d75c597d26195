"""Overview: groups by status, worst lag in seconds, recent rebalances and anomalies."""

from __future__ import annotations

import streamlit as st

from lagscope.app import processing, store, widgets
from lagscope.app.params import Selection, to_ms

__all__ = ["render"]

_STATUSES = ("ERR", "STOP", "STALL", "REWIND", "WARN", "OK", "IDLE")


def render(ctx: widgets.Context) -> None:
    st.title("Overview")
    if not ctx.clusters:
        widgets.no_data("the lake is empty", widgets.NO_LAKE_HINT)
        return
    clusters = [ctx.sel.cluster] if ctx.sel.cluster else ctx.clusters
    st.caption(f"Cluster: {', '.join(clusters)}")
    groups = store.group_overview(ctx.lake, clusters, ctx.window)
    if groups.empty:
        widgets.no_data("no group status or lag results in this time range",
                        "The analytics job writes them; widen the time range or check that it runs.")
    else:
        counts = groups["status"].fillna("—").value_counts()
        cols = st.columns(len(_STATUSES) + 1)
        cols[0].metric("Groups", len(groups))
        for col, status in zip(cols[1:], _STATUSES, strict=True):
            col.metric(status, int(counts.get(status, 0)))
        worst = groups["worst_lag_seconds"].max()
        st.metric("Worst lag in the range", processing.format_duration(None if worst != worst else float(worst)))

        st.subheader("Groups by status")
        shown = groups[["status", "cluster", "group_id", "lag", "lag_seconds", "worst_lag_seconds", "worst_lag",
                        "burrow_status", "reason", "eval_ts"]]
        st.dataframe(shown, hide_index=True, key="overview_groups")
        widgets.export_buttons(shown, "groups", "export_groups")
        st.markdown("**Open a group** (worst first)")
        buttons = st.columns(4)
        for i, row in enumerate(groups.head(8).itertuples(index=False)):
            with buttons[i % 4]:
                widgets.nav_button(f"{row.group_id} · {row.status or '—'}",
                                   ctx.sel.with_(page="group", cluster=row.cluster, group=row.group_id,
                                                 topic=None, partition=None),
                                   key=f"open_group_{i}", primary=i == 0)

    st.subheader("Recent rebalances")
    rebalances = store.rebalances(ctx.lake, clusters, ctx.window)
    if rebalances.empty:
        st.caption("No rebalance in this time range.")
    else:
        shown_rb = rebalances[["cluster", "group_id", "start_ts", "end_ts", "duration_s", "bound_s",
                               "observed_over_bound", "cause", "partitions_moved", "messages_accumulated"]]
        st.dataframe(shown_rb, hide_index=True, key="overview_rebalances")
        widgets.export_buttons(shown_rb, "rebalances", "export_rebalances")
        buttons = st.columns(4)
        for i, row in enumerate(rebalances.head(4).itertuples(index=False)):
            with buttons[i % 4]:
                widgets.nav_button(
                    f"{row.group_id} @ {row.start_ts:%H:%M:%S}",
                    Selection(page="rebalance", cluster=row.cluster, group=row.group_id,
                              start_ms=ctx.sel.start_ms, end_ms=ctx.sel.end_ms, rebalance_ms=to_ms(row.start_ts)),
                    key=f"open_rebalance_{i}")

    st.subheader("Recent anomalies")
    anomalies = store.anomalies(ctx.lake, clusters, ctx.window)
    if anomalies.empty:
        st.caption("No anomaly in this time range.")
    else:
        shown_an = anomalies[["cluster", "group_id", "kind", "severity", "topic", "partition", "start_ts", "end_ts",
                              "magnitude", "unit", "detail"]]
        st.dataframe(shown_an, hide_index=True, key="overview_anomalies")
        widgets.export_buttons(shown_an, "anomalies", "export_anomalies")
