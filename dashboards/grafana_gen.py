"""Grafana dashboards as code (grafana-foundation-sdk builders) and their provisioning files.

Four dashboards, each a function returning the SDK's ``Dashboard`` model:

- **Overview** (``lagscope-overview``): clusters up, groups by lagscope status and by state,
  worst lag in seconds, total lag, recent rebalances, open anomalies, messages lost and
  reprocessed in the time range, sweep health.
- **Group** (``lagscope-group``): lag and lag in seconds per topic and partition, produce vs
  consume rate, members, state timeline, analytics status, messages lost and reprocessed by
  cause (delivery), retention headroom.
- **Rebalances** (``lagscope-rebalances``): frequency, causes, last duration against the
  bound, duration quantiles, windows in progress, generation and members.
- **Anomalies** (``lagscope-anomalies``): open anomalies by kind and severity, anomalies
  found, statuses, retention headroom, catch-up ETA.

Every dashboard has the template variables ``datasource`` (a Prometheus data source),
``cluster``, ``group`` and ``topic``, the lagscope annotations (rebalance windows and
anomalies written by :mod:`lagscope.dashboards.annotations`, matched by tag), and data links
into the Streamlit app that carry the selection and the time range
(``?cluster=…&group=…&topic=…&partition=…&from=<ms>&to=<ms>&page=…``).

The queries use the collector's names (docs/metrics.md: kafka_exporter families label the
group ``consumergroup``, lagscope's ``group``) and the results exporter's
(:mod:`lagscope.analytics.results_metrics`).

    >>> boards = build_all(app_url="http://localhost:8501")
    >>> sorted(boards)
    ['lagscope-anomalies', 'lagscope-group', 'lagscope-overview', 'lagscope-rebalances']

``lagscope dashboards generate`` writes them as JSON under ``dashboards/grafana/`` beside
the provisioning files (``provisioning/dashboards/lagscope.yaml``,
``provisioning/datasources/lagscope.yaml``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from grafana_foundation_sdk.builders import bargauge, piechart, stat, statetimeline, table, timeseries
from grafana_foundation_sdk.builders import common as bcommon
from grafana_foundation_sdk.builders import dashboard as bdash
from grafana_foundation_sdk.builders import prometheus as bprom
from grafana_foundation_sdk.cog.builder import Builder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as mcommon
from grafana_foundation_sdk.models import dashboard as mdash
from grafana_foundation_sdk.models import piechart as mpie
from grafana_foundation_sdk.models import prometheus as mprom

from lagscope.dashboards import links

__all__ = [
    "ANNOTATION_TAG",
    "DEFAULT_APP_URL",
    "DEFAULT_OUT_DIR",
    "DEFAULT_PROMETHEUS_URL",
    "PROMETHEUS_DS_UID",
    "build_all",
    "dashboard_json",
    "generate",
    "panel_targets",
]

#: where ``lagscope dashboards generate`` writes by default (the repository's folder)
DEFAULT_OUT_DIR = Path(__file__).resolve().parent / "grafana"
#: the Streamlit app's default address (the CLI resolves the configured one: lagscope.dashboards.links)
DEFAULT_APP_URL = links.DEFAULT_APP_URL
DEFAULT_PROMETHEUS_URL = "http://localhost:9090"
#: the uid of the provisioned Prometheus data source (the ``datasource`` variable's default)
PROMETHEUS_DS_UID = "lagscope-prometheus"
#: every annotation lagscope writes carries this tag (plus ``rebalance`` or ``anomaly``)
ANNOTATION_TAG = "lagscope"

_DS = mdash.DataSourceRef(type_val="prometheus", uid="${datasource}")
_GRAFANA_DS = mdash.DataSourceRef(type_val="grafana", uid="-- Grafana --")

# selectors: the kafka_exporter families name the group label `consumergroup`
_SEL = 'cluster=~"$cluster", group=~"$group"'
_SEL_T = 'cluster=~"$cluster", group=~"$group", topic=~"$topic"'
_KSEL = 'cluster=~"$cluster", consumergroup=~"$group"'
_KSEL_T = 'cluster=~"$cluster", consumergroup=~"$group", topic=~"$topic"'


def _in_range(counter: str, selector: str) -> str:
    """How much ``counter`` grew within the dashboard's time range, per series: its value less its
    value at the range's start, a series absent then counting from 0 (the first loss of a group,
    topic and cause is a new series, which ``increase()`` cannot see)."""
    return f"{counter}{{{selector}}} - ({counter}{{{selector}}} offset $__range or {counter}{{{selector}}} * 0)"


# ---------------------------------------------------------------------------------------------
# links into the Streamlit app
# ---------------------------------------------------------------------------------------------

def _app_link(app_url: str, page: str, *, group_label: str = "group", topic: bool = False,
              partition: bool = False) -> str:
    """A data link URL: the clicked series' labels, the dashboard's time range (epoch ms)."""
    parts = ["cluster=${__field.labels.cluster}", f"group=${{__field.labels.{group_label}}}"]
    if topic:
        parts.append("topic=${__field.labels.topic}")
    if partition:
        parts.append("partition=${__field.labels.partition}")
    parts += ["from=${__from}", "to=${__to}", f"page={page}"]
    return f"{app_url.rstrip('/')}/?" + "&".join(parts)


def _data_link(title: str, url: str) -> bdash.DashboardLink:
    return bdash.DashboardLink(title).url(url).target_blank(True)


def _dashboard_link(app_url: str, page: str) -> bdash.DashboardLink:
    url = (f"{app_url.rstrip('/')}/?cluster=${{cluster}}&group=${{group}}&topic=${{topic}}"
           f"&from=${{__from}}&to=${{__to}}&page={page}")
    return (bdash.DashboardLink("lagscope app").type(mdash.DashboardLinkType.LINK).url(url)
            .icon("external link").tooltip("Open the selection and time range in the lagscope app")
            .target_blank(True).keep_time(False).include_vars(False).as_dropdown(False))


# ---------------------------------------------------------------------------------------------
# panels
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Q:
    """One PromQL target: expression, legend, instant (for tables and stats) or range."""

    expr: str
    legend: str = ""
    instant: bool = False


def _target(q: Q, ref: str) -> bprom.Dataquery:
    t = bprom.Dataquery().expr(q.expr).ref_id(ref).datasource(_DS)
    if q.legend:
        t = t.legend_format(q.legend)
    return t.instant().format(mprom.PromQueryFormat.TABLE) if q.instant else t.range()


def _with_targets(panel: Any, queries: Sequence[Q]) -> Any:
    for i, q in enumerate(queries):
        panel = panel.with_target(_target(q, chr(ord("A") + i)))
    return panel


def _common(panel: Any, title: str, description: str, queries: Sequence[Q], *, w: int, h: int,
            unit: str | None, links: Sequence[bdash.DashboardLink]) -> Any:
    panel = panel.title(title).description(description).datasource(_DS).span(w).height(h)
    if unit:
        panel = panel.unit(unit)
    if links:
        panel = panel.data_links(list(links))
    return _with_targets(panel, queries)


def _ts(title: str, description: str, queries: Sequence[Q], *, unit: str | None = None, w: int = 12, h: int = 8,
        links: Sequence[bdash.DashboardLink] = (), stack: bool = False) -> timeseries.Panel:
    p = timeseries.Panel().fill_opacity(10).line_width(1).show_points(mcommon.VisibilityMode.NEVER)
    p = p.legend(bcommon.VizLegendOptions().display_mode(mcommon.LegendDisplayMode.TABLE)
                 .placement(mcommon.LegendPlacement.BOTTOM).show_legend(True).calcs(["lastNotNull", "max"]))
    if stack:
        p = p.stacking(bcommon.StackingConfig().mode(mcommon.StackingMode.NORMAL))
    return _common(p, title, description, queries, w=w, h=h, unit=unit, links=links)  # type: ignore[no-any-return]


def _stat(title: str, description: str, queries: Sequence[Q], *, unit: str | None = None, w: int = 6, h: int = 5,
          links: Sequence[bdash.DashboardLink] = (), thresholds: Sequence[tuple[float | None, str]] = ()
          ) -> stat.Panel:
    p = stat.Panel().reduce_options(bcommon.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
    p = p.graph_mode(mcommon.BigValueGraphMode.AREA).color_mode(mcommon.BigValueColorMode.VALUE)
    if thresholds:
        p = p.thresholds(_thresholds(thresholds))
    return _common(p, title, description, queries, w=w, h=h, unit=unit, links=links)  # type: ignore[no-any-return]


def _bars(title: str, description: str, queries: Sequence[Q], *, unit: str | None = None, w: int = 12, h: int = 8,
          links: Sequence[bdash.DashboardLink] = (), thresholds: Sequence[tuple[float | None, str]] = ()
          ) -> bargauge.Panel:
    p = bargauge.Panel().orientation(mcommon.VizOrientation.HORIZONTAL).display_mode(
        mcommon.BarGaugeDisplayMode.GRADIENT).reduce_options(bcommon.ReduceDataOptions().calcs(["lastNotNull"]))
    if thresholds:
        p = p.thresholds(_thresholds(thresholds))
    return _common(p, title, description, queries, w=w, h=h, unit=unit, links=links)  # type: ignore[no-any-return]


def _pie(title: str, description: str, queries: Sequence[Q], *, w: int = 6, h: int = 8) -> piechart.Panel:
    p = piechart.Panel().pie_type(mpie.PieChartType.DONUT).hide_from(
        bcommon.HideSeriesConfig().legend(False).tooltip(False).viz(False))
    p = p.reduce_options(bcommon.ReduceDataOptions().calcs(["lastNotNull"]))
    return _common(p, title, description, queries, w=w, h=h, unit=None, links=())  # type: ignore[no-any-return]


def _table(title: str, description: str, queries: Sequence[Q], *, w: int = 12, h: int = 8,
           links: Sequence[bdash.DashboardLink] = (), hide: Sequence[str] = ("Time",)) -> table.Panel:
    p = table.Panel().show_header(True)
    for field_name in hide:
        p = p.override_by_name(field_name, [mdash.DynamicConfigValue(id_val="custom.hidden", value=True)])
    return _common(p, title, description, queries, w=w, h=h, unit=None, links=links)  # type: ignore[no-any-return]


def _timeline(title: str, description: str, queries: Sequence[Q], *, w: int = 24, h: int = 6) -> statetimeline.Panel:
    p = statetimeline.Panel().show_value(mcommon.VisibilityMode.NEVER).merge_values(True).fill_opacity(70)
    p = p.line_width(0).mappings([
        mdash.ValueMap(options={"1": mdash.ValueMappingResult(text="in state", color="green")})])
    return _common(p, title, description, queries, w=w, h=h, unit=None, links=())  # type: ignore[no-any-return]


def _thresholds(steps: Sequence[tuple[float | None, str]]) -> bdash.ThresholdsConfig:
    return bdash.ThresholdsConfig().mode(mdash.ThresholdsMode.ABSOLUTE).steps(
        [mdash.Threshold(value=v, color=c) for v, c in steps])


def _row(title: str) -> bdash.Row:
    return bdash.Row(title)


# ---------------------------------------------------------------------------------------------
# dashboards
# ---------------------------------------------------------------------------------------------

def _variables() -> list[Any]:
    ds = (bdash.DatasourceVariable("datasource").label("Data source").type("prometheus")
          .current(mdash.VariableOption(selected=True, text="Prometheus", value=PROMETHEUS_DS_UID)))

    def query_var(name: str, label: str, query: str) -> bdash.QueryVariable:
        return (bdash.QueryVariable(name).label(label).datasource(_DS).query(query)
                .refresh(mdash.VariableRefresh.ON_TIME_RANGE_CHANGED).sort(mdash.VariableSort.ALPHABETICAL_ASC)
                .multi(True).include_all(True).all_value(".*")
                .current(mdash.VariableOption(selected=True, text="All", value="$__all")))

    return [
        ds,
        query_var("cluster", "Cluster", "label_values(lagscope_up, cluster)"),
        query_var("group", "Group", 'label_values(lagscope_group_members{cluster=~"$cluster"}, group)'),
        query_var("topic", "Topic", f"label_values(kafka_consumergroup_lag{{{_KSEL}}}, topic)"),
    ]


def _annotations() -> list[Builder[mdash.AnnotationQuery]]:
    def by_tags(name: str, kind: str, color: str) -> bdash.AnnotationQuery:
        return (bdash.AnnotationQuery().name(name).datasource(_GRAFANA_DS).enable(True).hide(False)
                .icon_color(color).target(bdash.AnnotationTarget().type("tags")
                                          .tags([ANNOTATION_TAG, kind]).match_any(False).limit(500)))

    builtin = (bdash.AnnotationQuery().name("Annotations & Alerts").datasource(_GRAFANA_DS).enable(True)
               .hide(True).icon_color("rgba(0, 211, 255, 1)").type("dashboard")
               .target(bdash.AnnotationTarget().type("dashboard").limit(100).match_any(False).tags([])))
    return [builtin, by_tags("Rebalance windows", "rebalance", "orange"),
            by_tags("Anomalies", "anomaly", "red")]


def _base(uid: str, title: str, description: str, app_url: str, page: str) -> bdash.Dashboard:
    d = (bdash.Dashboard(title).uid(uid).description(description).tags(["lagscope", "kafka"])
         .editable().refresh("30s").time("now-3h", "now").timezone("browser")
         .tooltip(mdash.DashboardCursorSync.CROSSHAIR).variables(_variables())
         .annotations(_annotations()).link(_dashboard_link(app_url, page)))
    return d.link(bdash.DashboardLink("lagscope dashboards").type(mdash.DashboardLinkType.DASHBOARDS)
                  .tags(["lagscope"]).as_dropdown(True).keep_time(True).include_vars(True)
                  .target_blank(False).icon("external link").tooltip("").url(""))


_DASHBOARD_TITLES = {
    "lagscope-overview": "lagscope / Overview",
    "lagscope-group": "lagscope / Group",
    "lagscope-rebalances": "lagscope / Rebalances",
    "lagscope-anomalies": "lagscope / Anomalies",
}

_STATUS_COLORS: list[tuple[float | None, str]] = [(None, "green"), (1, "red")]


def overview(app_url: str = DEFAULT_APP_URL) -> mdash.Dashboard:
    group_link = [_data_link("Open group in lagscope", _app_link(app_url, "group"))]
    kgroup_link = [_data_link("Open group in lagscope", _app_link(app_url, "group", group_label="consumergroup"))]
    d = _base("lagscope-overview", _DASHBOARD_TITLES["lagscope-overview"],
              "Every watched cluster and consumer group at a glance: status, worst lag in seconds, "
              "recent rebalances and open anomalies.", app_url, "overview")
    d = d.with_row(_row("Clusters and groups"))
    d = d.with_panel(_stat("Clusters up", "Clusters whose latest sweep succeeded (lagscope_up).",
                           [Q('sum(lagscope_up{cluster=~"$cluster"})')], w=4))
    d = d.with_panel(_stat("Groups watched", "Consumer groups seen by the latest sweeps.",
                           [Q(f"count(lagscope_group_members{{{_SEL}}})")], w=4))
    d = d.with_panel(_stat("Groups not OK", "Groups whose lagscope status (analytics) is not OK or IDLE.",
                           [Q(f'count(lagscope_group_status{{{_SEL}, status!~"OK|IDLE"}} == 1) or vector(0)')],
                           w=4, thresholds=_STATUS_COLORS))
    d = d.with_panel(_stat("Open anomalies", "Anomalies the analytics found that have not ended yet.",
                           [Q(f"sum(lagscope_anomalies_open{{{_SEL}}}) or vector(0)")], w=4,
                           thresholds=_STATUS_COLORS))
    d = d.with_panel(_pie("Groups by status", "lagscope's group status (from the analytics' status table).",
                          [Q(f"count by (status) (lagscope_group_status{{{_SEL}}} == 1)", "{{status}}")], w=4, h=5))
    d = d.with_panel(_pie("Groups by state", "Coordinator state of the groups at the latest sweep.",
                          [Q(f"count by (state) (lagscope_group_state{{{_SEL}}} == 1)", "{{state}}")], w=4, h=5))
    d = d.with_row(_row("Lag"))
    d = d.with_panel(_bars("Worst lag in seconds", "The 10 groups furthest behind, in seconds "
                           "(largest partition time lag of each group).",
                           [Q(f"topk(10, max by (cluster, group) (lagscope_group_lag_seconds{{{_SEL}}}))",
                              "{{cluster}} / {{group}}", instant=True)],
                           unit="s", links=group_link, thresholds=[(None, "green"), (60, "orange"), (300, "red")]))
    d = d.with_panel(_ts("Lag in seconds by group", "Largest partition time lag of each group over time.",
                         [Q(f"max by (cluster, group) (lagscope_group_lag_seconds{{{_SEL}}})",
                            "{{cluster}} / {{group}}")], unit="s", links=group_link))
    d = d.with_panel(_ts("Total lag by group (messages)", "Sum of the partitions' offset lag "
                         "(partitions without a commit left out).",
                         [Q(f"sum by (cluster, consumergroup) (kafka_consumergroup_lag{{{_KSEL}}} >= 0)",
                            "{{cluster}} / {{consumergroup}}")], unit="short", links=kgroup_link))
    d = d.with_panel(_table("Group status", "Each group's lagscope status (analytics); click to open it.",
                            [Q(f"max by (cluster, group, status) (lagscope_group_status{{{_SEL}}} == 1)",
                               instant=True)], links=[_data_link(
                                   "Open group in lagscope",
                                   f"{app_url.rstrip('/')}/?cluster=${{__data.fields.cluster}}"
                                   "&group=${__data.fields.group}&from=${__from}&to=${__to}&page=group")],
                            hide=("Time", "Value")))
    d = d.with_row(_row("Rebalances and anomalies"))
    d = d.with_panel(_bars("Rebalances in the time range", "Rebalance windows per group in the dashboard's "
                           "time range (analytics).",
                           [Q(f"sum by (cluster, group) (increase(lagscope_rebalances_total{{{_SEL}}}[$__range]))",
                              "{{cluster}} / {{group}}", instant=True)], unit="short", links=group_link))
    d = d.with_panel(_table("Open anomalies", "Anomalies still open, by group, kind and severity.",
                            [Q(f"sum by (cluster, group, kind, severity) (lagscope_anomalies_open{{{_SEL}}} > 0)",
                               instant=True)], links=[_data_link(
                                   "Open group in lagscope",
                                   f"{app_url.rstrip('/')}/?cluster=${{__data.fields.cluster}}"
                                   "&group=${__data.fields.group}&from=${__from}&to=${__to}&page=group")]))
    delivery_link = [_data_link("Open delivery in lagscope", _app_link(app_url, "delivery"))]
    d = d.with_panel(_bars("Messages lost in the time range", "Messages never processed per group in the "
                           "dashboard's time range, all causes (skips, offset resets, retention; analytics).",
                           [Q(f"sum by (cluster, group) ({_in_range('lagscope_messages_lost_total', _SEL)})",
                              "{{cluster}} / {{group}}", instant=True)], unit="short", links=delivery_link,
                           thresholds=[(None, "green"), (1, "red")]))
    d = d.with_panel(_bars("Messages reprocessed in the time range", "Messages processed twice per group in "
                           "the dashboard's time range, all causes (rewinds, offset resets back; analytics).",
                           [Q(f"sum by (cluster, group) ({_in_range('lagscope_messages_reprocessed_total', _SEL)})",
                              "{{cluster}} / {{group}}", instant=True)], unit="short", links=delivery_link,
                           thresholds=[(None, "green"), (1, "orange")]))
    d = d.with_row(_row("Collector"))
    d = d.with_panel(_ts("Sweep duration", "Wall time of each cluster's latest sweep.",
                         [Q('lagscope_sweep_duration_seconds{cluster=~"$cluster"}', "{{cluster}}")], unit="s"))
    d = d.with_panel(_ts("Failed sweeps", "Sweeps that failed, per second.",
                         [Q('sum by (cluster) (rate(lagscope_sweeps_total{cluster=~"$cluster", result="failed"}'
                            '[$__rate_interval])) or sum by (cluster) (lagscope_up{cluster=~"$cluster"}) * 0',
                            "{{cluster}}")], unit="ops"))
    return d.build()


def group(app_url: str = DEFAULT_APP_URL) -> mdash.Dashboard:
    part_link = [_data_link("Open partition in lagscope", _app_link(app_url, "partition", topic=True, partition=True))]
    kpart_link = [_data_link("Open partition in lagscope", _app_link(app_url, "partition", group_label="consumergroup",
                                                                     topic=True, partition=True))]
    group_link = [_data_link("Open group in lagscope", _app_link(app_url, "group"))]
    d = _base("lagscope-group", _DASHBOARD_TITLES["lagscope-group"],
              "One consumer group: lag in messages and in seconds per topic and partition, produce vs "
              "consume rate, members and state.", app_url, "group")
    d = d.with_row(_row("Lag"))
    d = d.with_panel(_ts("Lag per partition (messages)", "Offset lag: end - committed (end = last stable "
                         "offset for read_committed groups).",
                         [Q(f"kafka_consumergroup_lag{{{_KSEL_T}}} >= 0", "{{topic}}[{{partition}}]")],
                         unit="short", links=kpart_link))
    d = d.with_panel(_ts("Lag in seconds per partition", "How long ago the next unconsumed message was written "
                         "(estimate; see docs/metrics.md).",
                         [Q(f"lagscope_partition_lag_seconds{{{_SEL_T}}}", "{{topic}}[{{partition}}]")],
                         unit="s", links=part_link))
    d = d.with_panel(_ts("Lag per topic (messages)", "Sum of the topic's partition lags.",
                         [Q(f"kafka_consumergroup_lag_sum{{{_KSEL_T}}}", "{{consumergroup}} {{topic}}")],
                         unit="short", stack=True))
    d = d.with_panel(_ts("Lag in seconds per topic", "The topic's largest partition time lag.",
                         [Q(f"max by (cluster, group, topic) (lagscope_partition_lag_seconds{{{_SEL_T}}})",
                            "{{group}} {{topic}}")], unit="s",
                         links=[_data_link("Open topic in lagscope", _app_link(app_url, "group", topic=True))]))
    d = d.with_panel(_ts("Produce vs consume rate", "Messages written to the group's topics vs messages the "
                         "group commits past, per second.",
                         [Q(f'sum by (cluster, topic) (rate(kafka_topic_partition_current_offset{{cluster=~"$cluster", '
                            f'topic=~"$topic"}}[$__rate_interval])) and on (cluster, topic) '
                            f"kafka_consumergroup_lag_sum{{{_KSEL_T}}}", "produce {{topic}}"),
                          Q(f"sum by (cluster, topic) (rate(kafka_consumergroup_current_offset_sum{{{_KSEL_T}}}"
                            "[$__rate_interval]))", "consume {{topic}}")], unit="ops"))
    d = d.with_row(_row("Membership"))
    d = d.with_panel(_ts("Members", "Members of the group (0: no consumer is running).",
                         [Q(f"lagscope_group_members{{{_SEL}}}", "{{group}}")], unit="short", w=8, links=group_link))
    d = d.with_panel(_ts("Assigned partitions", "Distinct partitions assigned to the group's members.",
                         [Q(f"lagscope_group_assigned_partitions{{{_SEL}}}", "{{group}}")], unit="short", w=8))
    d = d.with_panel(_stat("Status (analytics)", "lagscope's status of the group (OK, WARN, ERR, STOP, STALL, "
                           "REWIND, IDLE).", [Q(f"lagscope_group_status{{{_SEL}}} == 1", "{{status}}")],
                           w=8, h=8, links=group_link))
    d = d.with_panel(_timeline("State timeline", "The group's coordinator state over time.",
                               [Q(f"lagscope_group_state{{{_SEL}}} == 1", "{{state}}")]))
    d = d.with_row(_row("Delivery"))
    delivery_link = [_data_link("Open delivery in lagscope", _app_link(app_url, "delivery", topic=True))]
    d = d.with_panel(_ts("Messages lost by cause", "Messages never processed since the results exporter "
                         "started, by topic and cause (seek, admin_reset, out_of_range_reset, retention): "
                         "each step up is a loss the analytics found; exact where one commit shows it all (an "
                         "admin reset), else a bound (docs/metrics.md).",
                         [Q(f"sum by (cluster, group, topic, cause) (lagscope_messages_lost_total{{{_SEL_T}}})",
                            "{{topic}} {{cause}}")], unit="short", w=8, links=delivery_link))
    d = d.with_panel(_ts("Messages reprocessed by cause", "Messages processed twice since the results exporter "
                         "started, by topic and cause (rewind, admin_reset): each step up is a rewind the "
                         "analytics found.",
                         [Q(f"sum by (cluster, group, topic, cause) "
                            f"(lagscope_messages_reprocessed_total{{{_SEL_T}}})", "{{topic}} {{cause}}")],
                         unit="short", w=8, links=delivery_link))
    d = d.with_panel(_bars("Lost and reprocessed in the time range", "Per topic and cause, what the dashboard's "
                           "time range added (a series new in the range counts from 0).",
                           [Q(f"sum by (cluster, group, topic, cause) "
                              f"({_in_range('lagscope_messages_lost_total', _SEL_T)})",
                              "lost {{topic}} {{cause}}", instant=True),
                            Q(f"sum by (cluster, group, topic, cause) "
                              f"({_in_range('lagscope_messages_reprocessed_total', _SEL_T)})",
                              "reprocessed {{topic}} {{cause}}", instant=True)],
                           unit="short", w=8, links=delivery_link))
    d = d.with_row(_row("Retention"))
    d = d.with_panel(_ts("Retention headroom", "Time until the committed offset would fall below the log start "
                         "at current rates (messages deleted before they are consumed).",
                         [Q(f"lagscope_retention_headroom_seconds{{{_SEL_T}}}", "{{topic}}[{{partition}}]")],
                         unit="s", links=part_link))
    d = d.with_panel(_ts("Log start and committed offsets", "Log start offset of the partitions vs the "
                         "group's committed offsets.",
                         [Q(f'kafka_topic_partition_oldest_offset{{cluster=~"$cluster", topic=~"$topic"}} and on '
                            f"(cluster, topic, partition) kafka_consumergroup_current_offset{{{_KSEL_T}}}",
                            "log start {{topic}}[{{partition}}]"),
                          Q(f"kafka_consumergroup_current_offset{{{_KSEL_T}}} >= 0",
                            "committed {{topic}}[{{partition}}]")], unit="short"))
    d = d.with_row(_row("Advice"))
    d = d.with_panel(_table("Advice (analytics)", "What to change in the group's settings, from the rebalances "
                            "and findings of the results' retention window: the rule, the setting, its current "
                            "value (empty when unknown), the suggestion and the confidence (docs/analytics.md, "
                            "Advice). The evidence and the expected effect in numbers: the app's Group page.",
                            [Q("max by (cluster, group, rule, setting, current, suggested, confidence) "
                               f"(lagscope_advice_info{{{_SEL}}})", instant=True)],
                            w=24, h=6, links=group_link, hide=("Time", "Value")))
    return d.build()


def rebalances(app_url: str = DEFAULT_APP_URL) -> mdash.Dashboard:
    link = [_data_link("Open rebalances in lagscope", _app_link(app_url, "rebalance"))]
    d = _base("lagscope-rebalances", _DASHBOARD_TITLES["lagscope-rebalances"],
              "Rebalance windows found by the analytics: how often, why, and how long against the bound "
              "the group's settings imply.", app_url, "rebalance")
    d = d.with_row(_row("Frequency and causes"))
    d = d.with_panel(_ts("Rebalances per hour", "Rebalance windows per group, per hour.",
                         [Q(f"sum by (cluster, group) (increase(lagscope_rebalances_total{{{_SEL}}}[1h]))",
                            "{{cluster}} / {{group}}")], unit="short", links=link))
    d = d.with_panel(_pie("Causes", "Rebalance causes in the time range (join, leave, session_timeout, "
                          "max_poll_interval, static_member_bounce, unknown).",
                          [Q(f"sum by (cause) (increase(lagscope_rebalances_total{{{_SEL}}}[$__range]))",
                             "{{cause}}", instant=True)], w=6))
    d = d.with_panel(_stat("In progress", "Groups with a rebalance window still open.",
                           [Q(f"sum(lagscope_rebalance_in_progress{{{_SEL}}})")], w=6, h=8,
                           thresholds=[(None, "green"), (1, "orange")]))
    d = d.with_row(_row("Duration against the bound"))
    d = d.with_panel(_ts("Last duration", "Duration of the group's last closed rebalance window.",
                         [Q(f"lagscope_rebalance_last_duration_seconds{{{_SEL}}}", "{{cluster}} / {{group}}")],
                         unit="s", links=link))
    d = d.with_panel(_bars("Duration / bound", "Last window's duration divided by the bound its settings imply "
                           "(session.timeout + heartbeat for a crash, max.poll.interval for a slow member); "
                           "above 1 is slower than the settings allow.",
                           [Q(f"lagscope_rebalance_over_bound_ratio{{{_SEL}}}", "{{cluster}} / {{group}}",
                              instant=True)], unit="percentunit", links=link,
                           thresholds=[(None, "green"), (0.8, "orange"), (1, "red")]))
    d = d.with_panel(_ts("Duration quantiles", "p50 and p95 of the closed windows' durations.",
                         [Q(f"histogram_quantile(0.5, sum by (cluster, group, le) "
                            f"(lagscope_rebalance_duration_seconds_bucket{{{_SEL}}}))", "p50 {{group}}"),
                          Q(f"histogram_quantile(0.95, sum by (cluster, group, le) "
                            f"(lagscope_rebalance_duration_seconds_bucket{{{_SEL}}}))", "p95 {{group}}")], unit="s"))
    d = d.with_panel(_ts("Members and assignment", "Members of the group and partitions assigned to them "
                         "(a rebalance shows as a dip), and whether a window is open.",
                         [Q(f"lagscope_group_members{{{_SEL}}}", "members {{group}}"),
                          Q(f"lagscope_group_assigned_partitions{{{_SEL}}}", "assigned {{group}}"),
                          Q(f"lagscope_rebalance_in_progress{{{_SEL}}}", "rebalancing {{group}}")],
                         unit="short", links=link))
    return d.build()


def anomalies(app_url: str = DEFAULT_APP_URL) -> mdash.Dashboard:
    link = [_data_link("Open group in lagscope", _app_link(app_url, "group"))]
    part_link = [_data_link("Open partition in lagscope", _app_link(app_url, "partition", topic=True, partition=True))]
    d = _base("lagscope-anomalies", _DASHBOARD_TITLES["lagscope-anomalies"],
              "Commit-gap anomalies, stalls, stops, starved partitions, rewinds, skips and retention loss found by the "
              "analytics.",
              app_url, "group")
    d = d.with_panel(_bars("Open anomalies by kind", "Anomalies still open, by kind.",
                           [Q(f"sum by (kind) (lagscope_anomalies_open{{{_SEL}}})", "{{kind}}", instant=True)],
                           unit="short", thresholds=[(None, "green"), (1, "red")]))
    d = d.with_panel(_ts("Open anomalies by group and severity", "Anomalies still open over time.",
                         [Q(f"sum by (cluster, group, severity) (lagscope_anomalies_open{{{_SEL}}})",
                            "{{group}} {{severity}}")], unit="short", links=link, stack=True))
    d = d.with_panel(_ts("Anomalies found", "New anomalies per hour, by kind.",
                         [Q(f"sum by (kind) (increase(lagscope_anomalies_total{{{_SEL}}}[1h]))", "{{kind}}")],
                         unit="short"))
    d = d.with_panel(_ts("Group status", "lagscope's group status over time (1 = current).",
                         [Q(f"lagscope_group_status{{{_SEL}}} == 1", "{{group}} {{status}}")],
                         unit="short", links=link))
    d = d.with_panel(_ts("Retention headroom", "Smallest time until retention deletes unconsumed messages.",
                         [Q(f"min by (cluster, group, topic, partition) "
                            f"(lagscope_retention_headroom_seconds{{{_SEL_T}}})",
                            "{{group}} {{topic}}[{{partition}}]")],
                         unit="s", links=part_link))
    d = d.with_panel(_ts("Catch-up ETA", "Time until the partition catches up at current rates.",
                         [Q(f"lagscope_catchup_eta_seconds{{{_SEL_T}}}", "{{group}} {{topic}}[{{partition}}]")],
                         unit="s", links=part_link))
    return d.build()


_BUILDERS: dict[str, Callable[[str], mdash.Dashboard]] = {
    "lagscope-overview": overview,
    "lagscope-group": group,
    "lagscope-rebalances": rebalances,
    "lagscope-anomalies": anomalies,
}


def _number_panels(model: mdash.Dashboard) -> mdash.Dashboard:
    """Give every panel (rows and the panels inside collapsed rows too) a unique id, 1, 2, …"""
    next_id = 1
    for panel in model.panels or []:
        panel.id_val = next_id
        next_id += 1
        for inner in getattr(panel, "panels", None) or []:
            inner.id_val = next_id
            next_id += 1
    return model


def build_all(app_url: str = DEFAULT_APP_URL) -> dict[str, mdash.Dashboard]:
    """Every dashboard by uid."""
    return {uid: _number_panels(build(app_url)) for uid, build in _BUILDERS.items()}


def dashboard_json(model: mdash.Dashboard) -> dict[str, Any]:
    """The dashboard as plain JSON data (what Grafana stores)."""
    data: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    return data


def _panels(data: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for p in data.get("panels") or []:
        yield p
        yield from p.get("panels") or []


def panel_targets(data: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(panel title, PromQL)`` for every target of every panel of a dashboard's JSON."""
    for p in _panels(data):
        for t in p.get("targets") or []:
            if t.get("expr"):
                yield p.get("title", ""), t["expr"]


def provisioning(dashboards_path: str = "/var/lib/grafana/dashboards/lagscope",
                 prometheus_url: str = DEFAULT_PROMETHEUS_URL) -> dict[str, dict[str, Any]]:
    """The Grafana provisioning files (relative path → YAML data)."""
    return {
        "provisioning/dashboards/lagscope.yaml": {
            "apiVersion": 1,
            "providers": [{"name": "lagscope", "orgId": 1, "folder": "lagscope", "type": "file",
                           "disableDeletion": False, "allowUiUpdates": False, "updateIntervalSeconds": 60,
                           "options": {"path": dashboards_path, "foldersFromFilesStructure": False}}],
        },
        "provisioning/datasources/lagscope.yaml": {
            "apiVersion": 1,
            "datasources": [{"name": "Prometheus", "type": "prometheus", "uid": PROMETHEUS_DS_UID,
                             "access": "proxy", "url": prometheus_url, "isDefault": True, "editable": True,
                             "jsonData": {"timeInterval": "15s"}}],
        },
    }


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(text)
    tmp.replace(path)


def render_files(app_url: str = DEFAULT_APP_URL, prometheus_url: str = DEFAULT_PROMETHEUS_URL,
                 dashboards_path: str = "/var/lib/grafana/dashboards/lagscope") -> dict[str, str]:
    """Every generated file (relative path → text), dashboards and provisioning."""
    files = {f"{uid}.json": json.dumps(dashboard_json(model), indent=2, sort_keys=True) + "\n"
             for uid, model in build_all(app_url).items()}
    for rel, data in provisioning(dashboards_path, prometheus_url).items():
        files[rel] = "# generated by `lagscope dashboards generate`: edit dashboards/grafana_gen.py\n" + \
            yaml.safe_dump(data, sort_keys=False)
    return files


def generate(out_dir: Path | str = DEFAULT_OUT_DIR, *, app_url: str = DEFAULT_APP_URL,
             prometheus_url: str = DEFAULT_PROMETHEUS_URL,
             dashboards_path: str = "/var/lib/grafana/dashboards/lagscope") -> list[Path]:
    """Write the dashboards and the provisioning files under ``out_dir`` (each file atomically)."""
    out = Path(out_dir)
    written = []
    for rel, text in render_files(app_url, prometheus_url, dashboards_path).items():
        _write(out / rel, text)
        written.append(out / rel)
    return written
