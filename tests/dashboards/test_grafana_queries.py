"""Every panel query of every generated dashboard returns data from a real Prometheus.

Prometheus (Debian's binary, tests/helpers/prometheus.py) scrapes two real endpoints:

- the collector's /metrics (:class:`lagscope.collector.metrics.MetricsServer`) fed by real
  sweeps of the real broker, where a topic and a lagging group were created;
- the results exporter (:mod:`lagscope.analytics.results_metrics`) over result tables written
  with ``lagscope.lake.write_rows`` for the same cluster, group and topic.

Then every target of every dashboard JSON under dashboards/grafana/ is run through the HTTP
query API with the template variables replaced by the real cluster, group and topic, and must
return at least one series; the template variables' own queries must offer those values.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.prometheus import PrometheusServer
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NoError, NotCoordinatorError
from kafka.structs import OffsetAndMetadata
from results_synthetic import write_synthetic

from lagscope.analytics.results_metrics import serve
from lagscope.collector.kafka_client import ClusterClient
from lagscope.collector.metrics import MetricsServer
from lagscope.collector.sweep import sweep
from lagscope.config import ClusterConfig
from lagscope.dashboards import grafana_gen

pytestmark = [pytest.mark.kafka, pytest.mark.prometheus, pytest.mark.slow]

CLUSTER = "dash-itest"
ROOT = Path(__file__).resolve().parents[2]
#: Grafana's built-in variables, as Grafana would expand them for a short time range
BUILTINS = {"$__rate_interval": "15s", "$__interval": "5s", "$__range": "1h"}


@pytest.fixture
def lagging_group(bootstrap: str, unique: str) -> Iterator[tuple[str, str]]:
    """A topic with 2 partitions (10 and 4 messages) and a group committed at 3 and 4, with one live member
    (joined, so the group is Stable with a generation; it never commits, so the lag stays)."""
    topic, group = f"{unique}-t", f"{unique}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        for partition, n in enumerate((10, 4)):
            for i in range(n):
                producer.send(topic, f"m{i}".encode(), partition=partition)
        producer.flush()
        offsets = {TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1),
                   TopicPartition(topic, 1): OffsetAndMetadata(4, "", -1)}
        deadline = time.monotonic() + 60
        while True:
            # a fresh broker creates and loads __consumer_offsets on the first group request: the
            # call may raise, or answer per partition with a retriable error (nothing committed)
            try:
                errors = admin.alter_group_offsets(group, offsets)
                if all(err is NoError for err in errors.values()):
                    break
            except (CoordinatorNotAvailableError, NotCoordinatorError, CoordinatorLoadInProgressError):
                pass
            assert time.monotonic() < deadline, "could not commit the group's offsets"
            time.sleep(0.5)
        committed = admin.list_group_offsets(group)[group]
        assert {tp.partition: om.offset for tp, om in committed.items()} == {0: 3, 1: 4}
        consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                 max_poll_records=1)
        try:
            deadline = time.monotonic() + 60
            while not consumer.assignment():
                consumer.poll(timeout_ms=500)
                assert time.monotonic() < deadline, "the consumer never joined its group"
            yield topic, group
        finally:
            consumer.close(autocommit=False)
    finally:
        producer.close()
        admin.close()


@pytest.fixture
def collector_endpoint(bootstrap: str, lagging_group: tuple[str, str]) -> Iterator[str]:
    """The collector's /metrics, re-fed by a real sweep every second (as `lagscope collect` does)."""
    _, group = lagging_group
    client = ClusterClient(ClusterConfig(name=CLUSTER, bootstrap_servers=[bootstrap]), request_timeout_ms=10000)
    client.connect()
    server = MetricsServer("127.0.0.1", 0).start()
    first = sweep(client, client.cluster, group_ids=[group])
    assert first.ok, first.sweep
    server.update(first)
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(1.0):
            server.update(sweep(client, client.cluster, group_ids=[group]))

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.port}"
    finally:
        stop.set()
        thread.join(15)
        server.stop()
        client.close()


@pytest.fixture
def results_endpoint(tmp_path: Path, lagging_group: tuple[str, str]) -> Iterator[str]:
    topic, group = lagging_group
    write_synthetic(tmp_path / "results", CLUSTER, group, topic, dt.datetime.now(dt.UTC).replace(microsecond=0))
    server, thread = serve(tmp_path / "results", port=0, refresh_s=1.0)
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def prom_regex_escape(value: str) -> str:
    """Escape regex metacharacters as Grafana's Prometheus data source does for a variable value
    (each becomes ``\\\\x`` inside the PromQL string literal, i.e. ``\\x`` in the regex)."""
    return "".join("\\\\" + c if c in "\\^$.|?*+()[]{}" else c for c in value)


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace Grafana's variables as Grafana does for a single selected value (regex-escaped)."""
    for name, value in BUILTINS.items():
        expr = expr.replace(name, value)
    for name, value in values.items():
        expr = re.sub(rf"\$(\{{{name}\}}|{name}\b)", lambda _m, v=value: prom_regex_escape(v), expr)
    assert "$" not in expr, f"unsubstituted variable in {expr}"
    return expr


def test_substitute_escapes_regex_metacharacters() -> None:
    expr = 'x{group=~"$group", topic=~"${topic}"}[$__rate_interval]'
    # '.' is a regex metacharacter (escaped twice: once for the regex, once for the string); '-' is not
    assert substitute(expr, {"group": "a.b", "topic": "t-1"}) == 'x{group=~"a\\\\.b", topic=~"t-1"}[15s]'


def test_every_panel_query_returns_data(tmp_path: Path, lagging_group: tuple[str, str], collector_endpoint: str,
                                        results_endpoint: str) -> None:
    topic, group = lagging_group
    values = {"cluster": CLUSTER, "group": group, "topic": topic}
    boards = {p.stem: json.loads(p.read_text()) for p in sorted(grafana_gen.DEFAULT_OUT_DIR.glob("*.json"))}
    assert len(boards) == 4
    queries = [(uid, title, substitute(expr, values))
               for uid, data in boards.items() for title, expr in grafana_gen.panel_targets(data)]
    assert len(queries) >= 30

    rules = sorted((ROOT / "deploy" / "prometheus" / "rules").glob("*.yml"))
    with PrometheusServer(tmp_path, targets=[collector_endpoint, results_endpoint], scrape_interval="1s",
                          rule_files=rules) as prom:
        prom.wait_for_target_up()
        # rates and increases need two samples of each series inside their window
        prom.wait_for(f'count_over_time(lagscope_up{{cluster="{CLUSTER}"}}[1m]) >= 3', timeout=30)
        prom.wait_for(f'count_over_time(lagscope_group_status{{cluster="{CLUSTER}", status="STALL"}}[1m]) >= 3',
                      timeout=30)
        empty: list[str] = []
        deadline = time.monotonic() + 20
        pending = list(queries)
        while pending:
            empty = []
            for uid, title, expr in pending:
                if not prom.query(expr):
                    empty.append(f"{uid} / {title}: {expr}")
            pending = [q for q in pending if f"{q[0]} / {q[1]}: {q[2]}" in empty]
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert not empty, "panel queries without data:\n" + "\n".join(empty)

        # the template variables offer the real cluster, group and topic
        for data in boards.values():
            for var in data["templating"]["list"]:
                if var["type"] != "query":
                    continue
                m = re.fullmatch(r"label_values\((.+), (\w+)\)", var["query"])
                assert m, var["query"]
                selector, label = substitute(m.group(1), values), m.group(2)
                offered = prom.api(f"label/{label}/values", **{"match[]": selector})
                assert values[var["name"]] in offered, (var["name"], selector, offered)

        # spot checks that the data is the real data, not just "something"
        lag = prom.query_value(f'sum(kafka_consumergroup_lag{{cluster="{CLUSTER}", consumergroup="{group}"}} >= 0)')
        assert lag == 7.0  # (10 - 3) + (4 - 4)
        assert prom.query_value(f'lagscope_group_status{{cluster="{CLUSTER}", group="{group}", status="STALL"}}') == 1

        # the alert rules load and evaluate without error on the real series; those whose
        # condition holds in this data (a STALL status, 30 minutes of retention headroom) are pending
        groups = prom.rules()
        assert {r["name"] for g in groups for r in g["rules"]} >= {"LagscopeGroupStalled", "LagscopeCollectorDown"}
        assert all(r["health"] == "ok" for g in groups for r in g["rules"]), groups
        active = {(r["name"], a["labels"].get("group")): a["state"] for g in groups for r in g["rules"]
                  for a in r.get("alerts", [])}
        assert active.get(("LagscopeGroupStalled", group)) == "pending"
        assert active.get(("LagscopeRetentionLossRisk", group)) == "pending"
