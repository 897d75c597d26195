"""Group: lag and lag in seconds per topic and partition over time (rebalance windows shaded,
anomalies marked), produce vs consume rate, catch-up ETA, the analytics' advice, members now."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from lagscope.app import charts, processing, store, widgets
from lagscope.app.params import to_ms

__all__ = ["render"]

#: partitions drawn one line each when a topic is chosen (the worst ones)
TOP_PARTITIONS = 10


def _label(df: pd.DataFrame, by_partition: bool) -> pd.DataFrame:
    if by_partition:
        return df.assign(series=df["topic"] + "/" + df["partition"].astype(str))
    return df.assign(series=df["topic"])


def render(ctx: widgets.Context) -> None:
    st.title("Group")
    picked = widgets.require_group(ctx, 3, "The collector records groups at every sweep; widen the time range.")
    if picked is None:
        return
    cluster, group, pick = picked
    with pick[1]:
        topic = widgets.topic_picker(ctx, store.topics_of(ctx.lake, cluster, group, ctx.window))
    sel = ctx.sel.with_(cluster=cluster, group=group, topic=topic)

    series, per_topic = processing.split_rollups(store.lag_series(ctx.lake, cluster, group, ctx.window, "rollups",
                                                                  topic))
    latest = store.latest_partitions(ctx.lake, cluster, group, ctx.window, topic)
    rebalances = store.rebalances(ctx.lake, [cluster], ctx.window, group)
    anomalies = store.anomalies(ctx.lake, [cluster], ctx.window, group, topic)
    members = store.members_at(ctx.lake, cluster, group, ctx.window.end)
    if series.empty and latest.empty:
        widgets.no_data(f"no lag results for {group} in this time range",
                        "The analytics job writes them (lag_trends); widen the time range or check that it runs.")
        _members(members)
        return

    now = series.iloc[-1] if len(series) else None
    cols = st.columns(6)
    cols[0].metric("Lag (messages)", f"{int(now['lag_last']):,}" if now is not None and pd.notna(now["lag_last"])
                   else "—")
    lower_bound = now is not None and pd.notna(now["lag_seconds_is_lower_bound"]) and bool(
        now["lag_seconds_is_lower_bound"])
    cols[1].metric("Lag (time)", ("≥ " if lower_bound else "")
                   + processing.format_duration(None if now is None else now["lag_seconds"]))
    cols[2].metric("Produce rate", "—" if now is None else f"{now['produce_rate']:,.1f}/s")
    cols[3].metric("Consume rate", "—" if now is None else f"{now['consume_rate']:,.1f}/s")
    eta = None if now is None else now["catchup_eta_s"]
    cols[4].metric("Catch-up ETA", processing.format_duration(eta) if eta is not None and pd.notna(eta)
                   else "never", help="lag / (consume rate − produce rate); never: the group consumes no faster "
                                      "than its topics are produced to, so the lag does not shrink.")
    cols[5].metric("Members now", int(members["member_id"].notna().sum()))

    if topic is None:
        lines = _label(per_topic, by_partition=False)
        scope = "per topic"
    else:
        worst = [(str(t), int(p)) for t, p in latest[["topic", "partition"]].head(TOP_PARTITIONS).itertuples(
            index=False)]
        lines = _label(store.partition_series(ctx.lake, cluster, group, ctx.window, worst), by_partition=True)
        scope = f"{topic}, the {len(worst)} partitions furthest behind"
    left, right = st.columns(2)
    with left:
        st.plotly_chart(charts.lag_chart(lines, "lag_last", "series", f"Lag in messages ({scope})", "messages",
                                         rebalances, anomalies, ctx.window.end), key="chart_lag")
    with right:
        st.plotly_chart(charts.lag_chart(lines, "lag_seconds", "series", f"Lag in seconds ({scope})", "seconds",
                                         rebalances, anomalies, ctx.window.end), key="chart_lag_seconds")
    st.plotly_chart(charts.rates_chart(series, rebalances, ctx.window.end), key="chart_rates")

    widgets.advice_section(store.advice(ctx.lake, cluster, group), key="group_advice",
                           empty="No advice: the analytics found no pattern of faults in this group's rebalances "
                                 "and findings of the results' retention window.")

    st.subheader("Partitions now")
    st.caption(f"{len(latest):,} partitions, furthest behind first (newest minute of the range).")
    st.dataframe(latest, hide_index=True, key="group_partitions")
    widgets.export_buttons(latest, f"{group}-partitions", "export_partitions")
    if len(latest):
        buttons = st.columns(5)
        for i, row in enumerate(latest.head(5).itertuples(index=False)):
            with buttons[i]:
                widgets.nav_button(f"{row.topic}/{row.partition}",
                                   sel.with_(page="partition", topic=row.topic, partition=int(row.partition)),
                                   key=f"open_partition_{i}")

    _members(members)

    st.subheader("Rebalances")
    if rebalances.empty:
        st.caption("No rebalance in this time range.")
    else:
        shown = rebalances[["start_ts", "end_ts", "duration_s", "bound_s", "observed_over_bound", "cause",
                            "generation_before", "generation_after", "partitions_moved", "messages_accumulated",
                            "max_processing_gap_s"]]
        st.dataframe(shown, hide_index=True, key="group_rebalances")
        widgets.export_buttons(shown, f"{group}-rebalances", "export_group_rebalances")
        rb_buttons = st.columns(4)
        for i, row in enumerate(rebalances.head(4).itertuples(index=False)):
            with rb_buttons[i]:
                widgets.nav_button(f"Rebalance at {row.start_ts:%H:%M:%S} ({row.cause})",
                                   sel.with_(page="rebalance", rebalance_ms=to_ms(row.start_ts)),
                                   key=f"open_rebalance_{i}", primary=i == 0)

    st.subheader("Anomalies")
    if anomalies.empty:
        st.caption("No anomaly in this time range.")
    else:
        shown_an = anomalies[["kind", "severity", "topic", "partition", "start_ts", "end_ts", "magnitude", "unit",
                              "detail"]]
        st.dataframe(shown_an, hide_index=True, key="group_anomalies")
        widgets.export_buttons(shown_an, f"{group}-anomalies", "export_group_anomalies")


def _members(members: pd.DataFrame) -> None:
    st.subheader("Members now")
    present = members.loc[members["member_id"].notna()]
    if present.empty:
        st.caption("No member in the newest sweep (the group is empty, or no sweep has seen it yet).")
        return
    first = present.iloc[0]
    st.caption(f"Sweep {first['sweep_ts']:%Y-%m-%d %H:%M:%S} UTC · state {first['group_state']} · "
               f"generation {first['generation']} · assignor {first['protocol']}")
    shown = present.assign(
        partitions=[len(a) if a is not None else 0 for a in present["assignment"]],
        assigned=[", ".join(f"{x['topic']}/{x['partition']}" for x in (a if a is not None else []))
                  for a in present["assignment"]],
    )[["member_id", "group_instance_id", "client_id", "host", "partitions", "assigned"]]
    st.dataframe(shown, hide_index=True, key="group_members")
    widgets.export_buttons(shown, "members", "export_members")
