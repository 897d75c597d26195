"""Widgets of the drill-down app: the sidebar, navigation that keeps the URL in step, pickers,
exports and the "no data yet" notice.

The URL's query parameters are the single source of truth for what is shown (see
:mod:`.params`): every widget is initialised from them on each run and writes its new value
back to them in its ``on_change`` callback, so the address bar can always be copied as a link.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from lagscope.app import processing, store
from lagscope.app.data import Lake
from lagscope.app.params import (
    DEFAULT_RANGE,
    PAGES,
    Selection,
    SelectionError,
    TimeRange,
    from_ms,
    parse_selection,
    to_ms,
    to_query,
)

__all__ = [
    "ALL_GROUPS",
    "NO_LAKE_HINT",
    "Context",
    "advice_section",
    "export_buttons",
    "go",
    "group_picker",
    "nav_button",
    "no_data",
    "partition_picker",
    "read_selection",
    "require_cluster",
    "require_group",
    "sidebar",
    "topic_picker",
]

_PRESETS: dict[str, dt.timedelta | None] = {
    "Last 1 hour": dt.timedelta(hours=1),
    "Last 6 hours": dt.timedelta(hours=6),
    "Last 24 hours": dt.timedelta(hours=24),
    "Last 7 days": dt.timedelta(days=7),
    "Custom (from the link)": None,
}


@dataclass(frozen=True)
class Context:
    """What every page receives: where to read, what is selected, the resolved time range."""

    lake: Lake
    sel: Selection
    window: TimeRange
    clusters: list[str]
    data_end: dt.datetime | None


def read_selection() -> Selection:
    """The selection in the URL; a malformed parameter is reported and the Overview shown."""
    try:
        return parse_selection(st.query_params.to_dict())
    except SelectionError as exc:
        st.error(f"The link is not valid: {exc}. Showing the overview instead.")
        return Selection()


def _write(sel: Selection) -> None:
    st.query_params.from_dict(to_query(sel))


def go(sel: Selection) -> None:
    """Navigate to ``sel`` (an ``on_click`` callback: the rerun that follows shows it)."""
    _write(sel)


def nav_button(label: str, sel: Selection, key: str, *, primary: bool = False) -> None:
    """A button that opens ``sel``."""
    st.button(label, key=key, on_click=go, args=(sel,), type="primary" if primary else "secondary")


def _ceil_minute(when: dt.datetime) -> dt.datetime:
    """The minute boundary strictly after ``when``: a range ending there includes ``when``."""
    return when.replace(second=0, microsecond=0) + dt.timedelta(minutes=1)


def _resolve_window(sel: Selection, data_end: dt.datetime | None) -> TimeRange:
    end = from_ms(sel.end_ms) if sel.end_ms is not None else _ceil_minute(data_end or dt.datetime.now(dt.UTC))
    start = from_ms(sel.start_ms) if sel.start_ms is not None else end - DEFAULT_RANGE
    if start >= end:
        start = end - DEFAULT_RANGE
    return TimeRange(start, end)


def _preset_of(sel: Selection, window: TimeRange, data_end: dt.datetime | None) -> str:
    if sel.start_ms is None and sel.end_ms is None:
        return next(k for k, v in _PRESETS.items() if v == DEFAULT_RANGE)
    latest = _ceil_minute(data_end) if data_end else None
    for name, span in _PRESETS.items():
        if span is not None and window.duration == span and window.end == latest:
            return name
    return "Custom (from the link)"


def _on_page() -> None:
    sel = read_selection()
    _write(sel.with_(page=st.session_state["w_page"]))


def _on_cluster() -> None:
    sel = read_selection()
    value = st.session_state["w_cluster"]
    cluster = None if value == "(all clusters)" else value
    # another cluster has other groups: drop the narrower selection
    _write(sel.with_(cluster=cluster, group=None, topic=None, partition=None, rebalance_ms=None))


def _on_range(data_end: dt.datetime | None) -> None:
    sel = read_selection()
    span = _PRESETS[st.session_state["w_range"]]
    if span is None:
        return
    end = _ceil_minute(data_end or dt.datetime.now(dt.UTC))
    _write(sel.with_(start_ms=to_ms(end - span), end_ms=to_ms(end)))


def sidebar(lake: Lake, sel: Selection) -> Context:
    """Page, cluster and time range in the sidebar; returns the resolved context."""
    all_clusters = store.clusters(lake)
    with st.sidebar:
        st.markdown("### lagscope")
        st.session_state["w_page"] = sel.page
        st.radio("Page", list(PAGES), format_func=PAGES.__getitem__, key="w_page", on_change=_on_page)
        options = ["(all clusters)", *all_clusters]
        if sel.cluster and sel.cluster not in options:
            options.append(sel.cluster)
        st.session_state["w_cluster"] = sel.cluster or "(all clusters)"
        st.selectbox("Cluster", options, key="w_cluster", on_change=_on_cluster)
        end = store.data_end(lake, sel.cluster)
        window = _resolve_window(sel, end)
        st.session_state["w_range"] = _preset_of(sel, window, end)
        st.selectbox("Time range", list(_PRESETS), key="w_range", on_change=_on_range, args=(end,))
        st.caption(f"{window.start:%Y-%m-%d %H:%M} → {window.end:%Y-%m-%d %H:%M} UTC")
        if end is not None:
            st.caption(f"Newest data: {end:%Y-%m-%d %H:%M:%S} UTC")
        st.caption(f"Lake: `{getattr(lake.samples, 'url', lake.samples)}`  \n"
                   f"Results: `{getattr(lake.results, 'url', lake.results)}`")
    return Context(lake=lake, sel=sel, window=window, clusters=all_clusters, data_end=end)


def _on_pick(field: str, key: str, clears: tuple[str, ...]) -> None:
    sel = read_selection()
    value = st.session_state[key]
    _write(sel.with_(**{field: value}, **dict.fromkeys(clears)))


ALL_GROUPS = "(all groups)"


def group_picker(ctx: Context, cluster: str, *, allow_all: bool = False) -> str | None:
    """Pick a group of the cluster (the URL's group preselected); None when there is none, or
    when ``allow_all`` and ``(all groups)`` is picked (the default then)."""
    names = store.group_names(ctx.lake, cluster, ctx.window)
    if ctx.sel.group and ctx.sel.group not in names:
        names = [ctx.sel.group, *names]
    if allow_all:
        names = [ALL_GROUPS, *names]
    if not names:
        return None
    st.session_state["w_group"] = ctx.sel.group if ctx.sel.group else names[0]
    value: str = st.selectbox("Group", names, key="w_group", on_change=_on_group)
    return None if value == ALL_GROUPS else value


def _on_group() -> None:
    sel = read_selection()
    value = st.session_state["w_group"]
    _write(sel.with_(group=None if value == ALL_GROUPS else value, topic=None, partition=None, rebalance_ms=None,
                     finding=None))


def topic_picker(ctx: Context, topics: list[str], *, allow_all: bool = True) -> str | None:
    """Pick a topic (``(all topics)`` → None when allowed)."""
    options = (["(all topics)"] if allow_all else []) + topics
    if ctx.sel.topic and ctx.sel.topic not in options:
        options.append(ctx.sel.topic)
    if not options:
        return None
    st.session_state["w_topic"] = ctx.sel.topic or options[0]
    value: str = st.selectbox("Topic", options, key="w_topic", on_change=_on_topic)
    return None if value == "(all topics)" else str(value)


def _on_topic() -> None:
    sel = read_selection()
    value = st.session_state["w_topic"]
    _write(sel.with_(topic=None if value == "(all topics)" else value, partition=None))


def partition_picker(ctx: Context, partitions: list[int]) -> int | None:
    """Pick a partition of the chosen topic."""
    options = sorted(set(partitions) | ({ctx.sel.partition} if ctx.sel.partition is not None else set()))
    if not options:
        return None
    st.session_state["w_partition"] = ctx.sel.partition if ctx.sel.partition is not None else options[0]
    value = st.selectbox("Partition", options, key="w_partition", on_change=_on_pick,
                         args=("partition", "w_partition", ()))
    return None if value is None else int(value)


def no_data(what: str, hint: str) -> None:
    """The clear "nothing here yet" notice."""
    st.info(f"**No data yet: {what}.** {hint}", icon="ℹ️")


def export_buttons(df: pd.DataFrame, name: str, key: str) -> None:
    """CSV and Parquet downloads of exactly the table shown (built when clicked)."""
    with st.container(horizontal=True, gap="small"):
        st.download_button("CSV", data=functools.partial(processing.to_csv_bytes, df), file_name=f"{name}.csv",
                           mime="text/csv", key=f"{key}_csv", icon=":material/download:", on_click="ignore",
                           disabled=df.empty)
        st.download_button("Parquet", data=functools.partial(processing.to_parquet_bytes, df),
                           file_name=f"{name}.parquet", mime="application/vnd.apache.parquet",
                           key=f"{key}_parquet", icon=":material/download:", on_click="ignore",
                           disabled=df.empty)


def require_cluster(ctx: Context) -> str | None:
    """The selected cluster, the only one there is, or None (after saying what to do)."""
    if ctx.sel.cluster:
        chosen: str = ctx.sel.cluster
        return chosen
    if len(ctx.clusters) == 1:
        return ctx.clusters[0]
    if not ctx.clusters:
        no_data("the lake has no cluster yet", NO_LAKE_HINT)
    else:
        st.info("Pick a cluster in the sidebar.")
    return None


def require_group(ctx: Context, columns: int, hint: str = "Widen the time range.",
                  ) -> tuple[str, str, list[DeltaGenerator]] | None:
    """The page's cluster (:func:`require_cluster`) and a group of it, picked in the first of a
    row of ``columns`` picker columns: ``(cluster, group, columns)``, the columns for the page's
    other pickers; None (after saying what is missing, with ``hint``) when there is none."""
    cluster = require_cluster(ctx)
    if cluster is None:
        return None
    pick = st.columns(columns)
    with pick[0]:
        group = group_picker(ctx, cluster)
    if group is None:
        no_data(f"no consumer group in cluster {cluster} in this time range", hint)
        return None
    return cluster, group, pick


#: what to do when the lake is empty
NO_LAKE_HINT = ("Start the collector (it writes the sample lake) and the analytics job (it writes the result "
                "tables), or point `lagscope ui --lake … --results …` at an existing lake.")


def advice_section(advice: pd.DataFrame, *, key: str, empty: str) -> None:
    """The advice rows (:func:`lagscope.app.data.advice`): per row the suggestion, its expected
    effect, the evidence and the confidence; then the rows as a table (with export)."""
    st.subheader("Advice")
    if advice.empty:
        st.caption(empty)
        return
    for row in advice.itertuples(index=False):
        current = f" (now {row.current_value})" if isinstance(row.current_value, str) and row.current_value else ""
        st.info(f"**{row.setting}**{current} → **{row.suggested}**  \n{row.expected_effect or ''}  \n"
                f"*Evidence:* {row.evidence} · confidence **{row.confidence}** · rule `{row.rule}`")
    shown = advice[["rule", "setting", "current_value", "suggested", "measure", "current_amount", "expected_amount",
                    "unit", "evidence_count", "evidence_start_ts", "evidence_end_ts", "confidence", "as_of_ts"]]
    st.dataframe(shown, hide_index=True, key=key)
    export_buttons(shown, "advice", f"export_{key}")
