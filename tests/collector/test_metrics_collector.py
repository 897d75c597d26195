"""The live metrics collector: values, disappearance, duplicates, failed sweeps (fresh registry per test)."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from lagscope.collector.metrics import GROUP_STATES, METRICS, LagCollector
from lagscope.collector.model import Snapshot
from lagscope.collector.sweep import lag_columns
from lagscope.errors import ConfigError

T0 = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)


def off(group: str, topic: str, partition: int, committed: int | None, end: int, *, start: int = 0,
        lso: int | None = None, lag: int | str | None = "auto", read_committed: bool = False,
        member: str | None = None, client: str | None = None, host: str | None = None, state: str = "Stable",
        ts: dt.datetime = T0) -> dict[str, Any]:
    """An OFFSETS row; ``lag`` and ``lag_basis`` are what the sweep computes (lag_columns) unless
    ``lag`` is given."""
    lso = end if lso is None else lso
    (auto,), (basis,) = lag_columns([committed], [end], [lso], [read_committed])
    return {"sweep_ts": ts, "group_id": group, "topic": topic, "partition": partition,
            "committed_offset": committed, "log_start_offset": start, "log_end_offset": end,
            "last_stable_offset": lso, "member_id": member, "client_id": client,
            "host": host, "group_state": state, "lag": auto if lag == "auto" else lag, "lag_basis": basis}


def mem(group: str, member: str | None, assignment: Sequence[tuple[str, int]] = (), *, state: str = "Stable",
        client: str | None = "c1", host: str | None = "10.0.0.1", instance: str | None = None,
        protocol_type: str = "consumer", protocol: str | None = "range", group_protocol: str = "classic",
        generation: int | None = 7, ts: dt.datetime = T0) -> dict[str, Any]:
    return {"sweep_ts": ts, "group_id": group, "group_state": state, "protocol_type": protocol_type,
            "protocol": protocol, "group_protocol": group_protocol, "generation": generation,
            "member_id": member, "group_instance_id": instance, "client_id": client if member else None,
            "host": host if member else None, "subscribed_topics": sorted({t for t, _ in assignment}),
            "assignment": [{"topic": t, "partition": p} for t, p in assignment]}


def snap(offsets: Sequence[Mapping[str, Any]] = (), members: Sequence[Mapping[str, Any]] = (), *,
         cluster: str = "prod", ts: dt.datetime = T0, ok: bool = True, duration_ms: float = 250.0,
         group_errors: int = 0) -> Snapshot:
    sweep = {"sweep_ts": ts, "duration_ms": duration_ms, "ok": ok, "error": None if ok else "boom",
             "groups": 0, "partitions": len(offsets), "members": len(members), "group_errors": group_errors,
             "collector": "test:1"}
    return Snapshot(cluster, sweep, offsets=list(offsets), members=list(members))


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def collector(registry: CollectorRegistry) -> LagCollector:
    return LagCollector(registry=registry)


def _base_snapshot() -> Snapshot:
    return snap(
        offsets=[
            off("orders", "t", 0, 90, 100, start=5, member="m1", client="c1", host="10.0.0.1"),
            off("orders", "t", 1, 50, 80, start=0, member="m2", client="c2", host="10.0.0.2"),
            off("orders", "u", 0, None, 30),  # no commit on u/0 yet
            off("billing", "t", 0, 100, 100, start=5, state="Empty"),  # caught up, no members
        ],
        members=[
            mem("orders", "m1", [("t", 0), ("u", 0)], client="c1", host="10.0.0.1"),
            mem("orders", "m2", [("t", 1)], client="c2", host="10.0.0.2", instance="static-2"),
            mem("billing", None, state="Empty", protocol=None, generation=3),
        ],
    )


KE = {"cluster": "prod", "consumergroup": "orders", "topic": "t"}
KLE = {"cluster": "prod", "cluster_name": "prod", "group": "orders", "topic": "t"}

# (metric, labels, expected value) after _base_snapshot()
VALUE_CASES = [
    # kafka_exporter: lag per partition = end - committed
    ("kafka_consumergroup_lag", {**KE, "partition": "0"}, 10),
    ("kafka_consumergroup_lag", {**KE, "partition": "1"}, 30),
    # kafka_exporter's convention: -1 where the group has no committed offset
    ("kafka_consumergroup_lag", {**KE, "topic": "u", "partition": "0"}, -1),
    ("kafka_consumergroup_current_offset", {**KE, "topic": "u", "partition": "0"}, -1),
    ("kafka_consumergroup_current_offset", {**KE, "partition": "1"}, 50),
    # sums over the topic's partitions that have a commit
    ("kafka_consumergroup_lag_sum", KE, 40),
    ("kafka_consumergroup_current_offset_sum", KE, 140),
    # u has no commit at all: no sum series for it (as kafka_exporter)
    ("kafka_consumergroup_lag_sum", {**KE, "topic": "u"}, None),
    # members per group, and an empty group is still there with 0
    ("kafka_consumergroup_members", {"cluster": "prod", "consumergroup": "orders"}, 2),
    ("kafka_consumergroup_members", {"cluster": "prod", "consumergroup": "billing"}, 0),
    # partition offsets, once per partition even though two groups read t/0
    ("kafka_topic_partition_current_offset", {"cluster": "prod", "topic": "t", "partition": "0"}, 100),
    ("kafka_topic_partition_oldest_offset", {"cluster": "prod", "topic": "t", "partition": "0"}, 5),
    ("kafka_partition_latest_offset", {"cluster": "prod", "cluster_name": "prod", "topic": "t", "partition": "1"}, 80),
    ("kafka_partition_earliest_offset", {"cluster": "prod", "cluster_name": "prod", "topic": "t", "partition": "0"}, 5),
    ("lagscope_partition_last_stable_offset", {"cluster": "prod", "topic": "u", "partition": "0"}, 30),
    # kafka-lag-exporter: member labels from the owner of the partition
    ("kafka_consumergroup_group_lag", {**KLE, "partition": "0", "member_host": "10.0.0.1", "consumer_id": "m1",
                                       "client_id": "c1"}, 10),
    ("kafka_consumergroup_group_offset", {**KLE, "partition": "1", "member_host": "10.0.0.2", "consumer_id": "m2",
                                          "client_id": "c2"}, 50),
    # the unassigned, uncommitted partition has no kafka-lag-exporter series
    ("kafka_consumergroup_group_lag", {**KLE, "topic": "u", "partition": "0", "member_host": "",
                                       "consumer_id": "", "client_id": ""}, None),
    ("kafka_consumergroup_group_max_lag", {"cluster": "prod", "cluster_name": "prod", "group": "orders",
                                           "is_simple_consumer": "false"}, 30),
    ("kafka_consumergroup_group_sum_lag", {"cluster": "prod", "cluster_name": "prod", "group": "orders"}, 40),
    ("kafka_consumergroup_group_topic_sum_lag", KLE, 40),
    ("kafka_consumergroup_group_sum_lag", {"cluster": "prod", "cluster_name": "prod", "group": "billing"}, 0),
    # lagscope's group series
    ("lagscope_group_members", {"cluster": "prod", "group": "orders"}, 2),
    ("lagscope_group_assigned_partitions", {"cluster": "prod", "group": "orders"}, 3),
    ("lagscope_group_assigned_partitions", {"cluster": "prod", "group": "billing"}, 0),
    ("lagscope_group_generation", {"cluster": "prod", "group": "billing"}, 3),
    ("lagscope_group_state", {"cluster": "prod", "group": "orders", "state": "Stable"}, 1),
    ("lagscope_group_state", {"cluster": "prod", "group": "orders", "state": "Empty"}, 0),
    ("lagscope_group_state", {"cluster": "prod", "group": "billing", "state": "Empty"}, 1),
    ("lagscope_group_info", {"cluster": "prod", "group": "orders", "protocol_type": "consumer", "protocol": "range",
                             "group_protocol": "classic"}, 1),
    ("lagscope_member_assigned_partitions", {"cluster": "prod", "group": "orders", "member_id": "m2",
                                             "client_id": "c2", "host": "10.0.0.2",
                                             "group_instance_id": "static-2"}, 1),
    # caught-up partition: time lag 0, not a lower bound
    ("lagscope_partition_lag_seconds", {"cluster": "prod", "group": "billing", "topic": "t", "partition": "0"}, 0),
    ("lagscope_partition_lag_seconds_is_lower_bound",
     {"cluster": "prod", "group": "billing", "topic": "t", "partition": "0"}, 0),
    # first sweep: a lagging partition's time lag is only known to be >= 0 (no history yet)
    ("lagscope_partition_lag_seconds_is_lower_bound",
     {"cluster": "prod", "group": "orders", "topic": "t", "partition": "0"}, 1),
    # sweep series
    ("lagscope_up", {"cluster": "prod"}, 1),
    ("lagscope_sweep_duration_seconds", {"cluster": "prod"}, 0.25),
    ("lagscope_sweeps_total", {"cluster": "prod", "result": "ok"}, 1),
    ("lagscope_sweeps_total", {"cluster": "prod", "result": "failed"}, 0),
    ("lagscope_last_sweep_timestamp_seconds", {"cluster": "prod"}, T0.timestamp()),
]


@pytest.mark.parametrize(("metric", "labels", "expected"), VALUE_CASES,
                         ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(VALUE_CASES)])
def test_values(registry: CollectorRegistry, collector: LagCollector, metric: str, labels: dict[str, str],
                expected: float | None) -> None:
    collector.update(_base_snapshot())
    assert registry.get_sample_value(metric, labels) == expected


def _series(registry: CollectorRegistry) -> list[tuple[str, tuple[tuple[str, str], ...]]]:
    """Every exposed (sample name, labels), parsed back from the text exposition."""
    text = generate_latest(registry).decode()
    return [(s.name, tuple(sorted(s.labels.items())))
            for fam in text_string_to_metric_families(text) for s in fam.samples]


def test_deleted_group_removed_partition_departed_member_disappear(registry: CollectorRegistry,
                                                                      collector: LagCollector) -> None:
    collector.update(_base_snapshot())
    # next sweep: billing deleted, t/1 no longer read by orders, m2 left (orders has one member, Empty-ish)
    later = T0 + dt.timedelta(seconds=30)
    collector.update(snap(
        offsets=[off("orders", "t", 0, 95, 110, member="m1", client="c1", host="10.0.0.1", ts=later),
                 off("orders", "u", 0, None, 30, ts=later)],
        members=[mem("orders", "m1", [("t", 0), ("u", 0)], ts=later)],
        ts=later))
    gone = [
        ("kafka_consumergroup_members", {"cluster": "prod", "consumergroup": "billing"}),
        ("lagscope_group_state", {"cluster": "prod", "group": "billing", "state": "Empty"}),
        ("kafka_consumergroup_lag", {**KE, "partition": "1"}),
        ("kafka_topic_partition_current_offset", {"cluster": "prod", "topic": "t", "partition": "1"}),
        ("lagscope_member_assigned_partitions", {"cluster": "prod", "group": "orders", "member_id": "m2",
                                                 "client_id": "c2", "host": "10.0.0.2",
                                                 "group_instance_id": "static-2"}),
    ]
    for metric, labels in gone:
        assert registry.get_sample_value(metric, labels) is None, (metric, labels)
    assert registry.get_sample_value("kafka_consumergroup_lag", {**KE, "partition": "0"}) == 15
    assert registry.get_sample_value("lagscope_group_members", {"cluster": "prod", "group": "orders"}) == 1
    assert not any(dict(labels).get("group") == "billing" or dict(labels).get("consumergroup") == "billing"
                   for _, labels in _series(registry))


def test_group_with_no_members_stays_visible(registry: CollectorRegistry, collector: LagCollector) -> None:
    # every member left: the coordinator reports the group Empty with no members; its commits remain
    collector.update(snap(offsets=[off("g", "t", 0, 3, 10, state="Empty")],
                          members=[mem("g", None, state="Empty")]))
    assert registry.get_sample_value("kafka_consumergroup_members", {"cluster": "prod", "consumergroup": "g"}) == 0
    assert registry.get_sample_value("lagscope_group_state", {"cluster": "prod", "group": "g", "state": "Empty"}) == 1
    assert registry.get_sample_value("kafka_consumergroup_lag",
                                     {"cluster": "prod", "consumergroup": "g", "topic": "t", "partition": "0"}) == 7


def test_duplicate_rows_never_duplicate_a_series(registry: CollectorRegistry, collector: LagCollector) -> None:
    base = _base_snapshot()
    # every row twice, the second copy of one offset row with a newer value (the last one wins)
    offsets = [*base.offsets, *base.offsets, off("orders", "t", 0, 95, 100, member="m1", client="c1",
                                                 host="10.0.0.1")]
    members = [*base.members, *base.members]
    collector.update(snap(offsets, members))
    series = _series(registry)
    assert len(series) == len(set(series)), "duplicate series in the exposition"
    assert registry.get_sample_value("kafka_consumergroup_lag", {**KE, "partition": "0"}) == 5
    # the sums count each partition once
    assert registry.get_sample_value("kafka_consumergroup_lag_sum", KE) == 35
    assert registry.get_sample_value("lagscope_group_members", {"cluster": "prod", "group": "orders"}) == 2


def test_failed_sweep_leaves_a_gap_not_stale_values(registry: CollectorRegistry, collector: LagCollector) -> None:
    collector.update(_base_snapshot())
    later = T0 + dt.timedelta(seconds=30)
    collector.update(snap(ts=later, ok=False, duration_ms=5000.0))
    assert registry.get_sample_value("lagscope_up", {"cluster": "prod"}) == 0
    assert registry.get_sample_value("kafka_consumergroup_lag", {**KE, "partition": "0"}) is None
    assert registry.get_sample_value("lagscope_sweeps_total", {"cluster": "prod", "result": "failed"}) == 1
    assert registry.get_sample_value("lagscope_sweeps_total", {"cluster": "prod", "result": "ok"}) == 1
    # the last *successful* sweep is still the first one
    assert registry.get_sample_value("lagscope_last_sweep_timestamp_seconds", {"cluster": "prod"}) == T0.timestamp()
    assert registry.get_sample_value("lagscope_sweep_duration_seconds", {"cluster": "prod"}) == 5.0
    # recovery brings the series back
    collector.update(_base_snapshot())
    assert registry.get_sample_value("kafka_consumergroup_lag", {**KE, "partition": "0"}) == 10


def test_counters_accumulate_group_errors(registry: CollectorRegistry, collector: LagCollector) -> None:
    for i, errors in enumerate((2, 0, 3)):
        collector.update(snap(ts=T0 + dt.timedelta(seconds=i), group_errors=errors))
    assert registry.get_sample_value("lagscope_sweep_errors_total", {"cluster": "prod"}) == 5
    assert registry.get_sample_value("lagscope_sweeps_total", {"cluster": "prod", "result": "ok"}) == 3


def test_clusters_are_kept_apart(registry: CollectorRegistry, collector: LagCollector) -> None:
    collector.update(snap([off("g", "t", 0, 1, 5)], [mem("g", "m", [("t", 0)])], cluster="eu"))
    collector.update(snap([off("g", "t", 0, 1, 9)], [mem("g", "m", [("t", 0)])], cluster="us"))
    lag = {"consumergroup": "g", "topic": "t", "partition": "0"}
    assert registry.get_sample_value("kafka_consumergroup_lag", {**lag, "cluster": "eu"}) == 4
    assert registry.get_sample_value("kafka_consumergroup_lag", {**lag, "cluster": "us"}) == 8
    # one family per name: a second TYPE line for a name would fail the scrape
    text = generate_latest(registry).decode()
    assert text.count("# TYPE kafka_consumergroup_lag gauge") == 1
    # a cluster's update never touches the other's series
    collector.update(snap(cluster="eu"))
    assert registry.get_sample_value("kafka_consumergroup_lag", {**lag, "cluster": "eu"}) is None
    assert registry.get_sample_value("kafka_consumergroup_lag", {**lag, "cluster": "us"}) == 8
    collector.forget("us")
    assert registry.get_sample_value("lagscope_up", {"cluster": "us"}) is None


@pytest.mark.parametrize(("reported", "expected_series"), [
    # a known state: one series per known state, exactly one of them 1
    ("Reconciling", {**dict.fromkeys(GROUP_STATES, 0.0), "Reconciling": 1.0}),
    # a state lagscope does not know gets its own series next to the known ones
    ("Migrating", {**dict.fromkeys(GROUP_STATES, 0.0), "Migrating": 1.0}),
    # no state reported (null): Unknown
    (None, {**dict.fromkeys(GROUP_STATES, 0.0), "Unknown": 1.0}),
])
def test_group_state_series(registry: CollectorRegistry, collector: LagCollector, reported: str | None,
                            expected_series: dict[str, float]) -> None:
    collector.update(snap(members=[{**mem("g", "m"), "group_state": reported}]))
    got = {dict(labels)["state"]: registry.get_sample_value("lagscope_group_state", dict(labels))
           for name, labels in _series(registry) if name == "lagscope_group_state"}
    assert got == expected_series


def test_simple_consumer_group_flag(registry: CollectorRegistry, collector: LagCollector) -> None:
    # a group that only commits (assign() + commit) has an empty protocol type
    collector.update(snap([off("s", "t", 0, 1, 3)], [mem("s", None, protocol_type="", state="Empty")]))
    assert registry.get_sample_value("kafka_consumergroup_group_max_lag", {
        "cluster": "prod", "cluster_name": "prod", "group": "s", "is_simple_consumer": "true"}) == 2


def test_undescribed_group_has_no_member_series(registry: CollectorRegistry, collector: LagCollector) -> None:
    # offsets but no MEMBERS row (describe failed): membership unknown, not 0
    collector.update(snap([off("g", "t", 0, 1, 3)], [], group_errors=1))
    assert registry.get_sample_value("lagscope_group_members", {"cluster": "prod", "group": "g"}) is None
    assert registry.get_sample_value("kafka_consumergroup_lag",
                                     {"cluster": "prod", "consumergroup": "g", "topic": "t", "partition": "0"}) == 2


def test_time_lag_from_history(registry: CollectorRegistry, collector: LagCollector) -> None:
    # the end offset grows by 100 every 10 s; the consumer's committed offset stays behind
    labels = {"cluster": "prod", "group": "g", "topic": "t", "partition": "0"}
    for i, (end, committed) in enumerate([(100, 100), (200, 150), (300, 150), (400, 250)]):
        ts = T0 + dt.timedelta(seconds=10 * i)
        collector.update(snap([off("g", "t", 0, committed, end, ts=ts)], [mem("g", "m", [("t", 0)], ts=ts)], ts=ts))
    # message 250 is the 50th of the 100 written between t=10 s (end 200) and t=20 s (300): in the
    # middle of its share, at 10 + 50.5/100·10 = 15.05 s; now is 30 s → 14.95 s behind
    assert registry.get_sample_value("lagscope_partition_lag_seconds", labels) == pytest.approx(14.95)
    assert registry.get_sample_value("lagscope_partition_lag_seconds_is_lower_bound", labels) == 0
    assert registry.get_sample_value("lagscope_group_lag_seconds", {"cluster": "prod", "group": "g"}) == \
        pytest.approx(14.95)
    assert registry.get_sample_value("kafka_consumergroup_group_max_lag_seconds", {
        "cluster": "prod", "cluster_name": "prod", "group": "g", "is_simple_consumer": "false"}) == \
        pytest.approx(14.95)


def test_time_lag_before_history_is_a_lower_bound(registry: CollectorRegistry, collector: LagCollector) -> None:
    labels = {"cluster": "prod", "group": "g", "topic": "t", "partition": "0"}
    for i, end in enumerate((500, 600, 700)):
        ts = T0 + dt.timedelta(seconds=10 * i)
        collector.update(snap([off("g", "t", 0, 50, end, ts=ts)], ts=ts))
    # offset 50 was written before the first sweep saw end=500: at least 20 s, never extrapolated
    assert registry.get_sample_value("lagscope_partition_lag_seconds", labels) == 20.0
    assert registry.get_sample_value("lagscope_partition_lag_seconds_is_lower_bound", labels) == 1


def test_every_declared_metric_is_exposed(registry: CollectorRegistry, collector: LagCollector) -> None:
    # the base snapshot exercises every family: no metric is declared (and documented) but never served
    collector.update(_base_snapshot())
    exposed = {fam.name for fam in text_string_to_metric_families(generate_latest(registry).decode())
               if fam.samples}
    declared = {m.name.removesuffix("_total") for m in METRICS if m.source == "sweep"}
    assert declared == exposed  # the commit-log tail's families: test_commitlog_metrics.py


def test_concurrent_updates_and_scrapes(registry: CollectorRegistry, collector: LagCollector) -> None:
    errors: list[BaseException] = []
    stop = threading.Event()

    def scrape() -> None:
        try:
            while not stop.is_set():
                series = _series(registry)
                assert len(series) == len(set(series))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=scrape) for _ in range(2)]
    for t in threads:
        t.start()
    for i in range(200):
        ts = T0 + dt.timedelta(seconds=i)
        n = 1 + i % 5  # the number of partitions changes every sweep
        collector.update(snap([off("g", "t", p, i, i + p, ts=ts) for p in range(n)], ts=ts))
    stop.set()
    for t in threads:
        t.join()
    assert not errors
    assert registry.get_sample_value("lagscope_sweeps_total", {"cluster": "prod", "result": "ok"}) == 200


def test_snapshot_rejects_unknown_columns() -> None:
    with pytest.raises(ValueError, match="unknown column"):
        snap([{**off("g", "t", 0, 1, 2), "lag_ms": 3}])


def test_time_lag_exact_from_the_committed_record(registry: CollectorRegistry, collector: LagCollector) -> None:
    labels = {"cluster": "prod", "group": "g", "topic": "t", "partition": "0"}
    ts = T0 + dt.timedelta(seconds=100)
    cases = [
        # the record at the committed offset was produced 42.5 s before the sweep: exact, whatever the history
        (T0 + dt.timedelta(seconds=57.5), 42.5),
        # a producer clock ahead of the collector's never makes a negative lag
        (ts + dt.timedelta(seconds=3), 0.0),
    ]
    for record_ts, expected in cases:
        row = {**off("g", "t", 0, 10, 20, ts=ts), "committed_record_ts": record_ts}
        collector.update(snap([row], ts=ts))
        assert registry.get_sample_value("lagscope_partition_lag_seconds", labels) == expected
        assert registry.get_sample_value("lagscope_partition_lag_seconds_is_lower_bound", labels) == 0


@pytest.mark.parametrize("openmetrics", [False, True])
def test_rendered_exposition_equals_the_collected_series(registry: CollectorRegistry, collector: LagCollector,
                                                         openmetrics: bool) -> None:
    # the fast renderer (what /metrics serves) must say exactly what the collector's families say,
    # escaping included: Kafka group ids may hold quotes, backslashes and newlines
    weird = 'we"ird\\g\nx'
    base = _base_snapshot()
    collector.update(snap([*base.offsets, off(weird, "t", 0, 1, 100)],
                          [*base.members, mem(weird, "m9", [("t", 0)], client='c"9')]))
    collector.update(snap([*base.offsets, off(weird, "t", 0, 2, 100)], [*base.members, mem(weird, None)],
                          cluster="eu"))
    text = collector.exposition(openmetrics).decode()
    if openmetrics:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse
    else:
        parse = text_string_to_metric_families
    served = {(s.name, tuple(sorted(s.labels.items())), s.value) for fam in parse(text) for s in fam.samples}
    collected = {(s.name, tuple(sorted(s.labels.items())), s.value) for fam in registry.collect() for s in fam.samples}
    assert served == collected
    assert any(dict(labels).get("consumergroup") == weird for _, labels, _ in served)


@pytest.mark.parametrize(("compat", "present", "absent"), [
    # both exporter families by default
    (("kafka_exporter", "kafka-lag-exporter"), {"kafka_consumergroup_lag", "kafka_consumergroup_group_lag"}, set()),
    # kafka_exporter only: kafka-lag-exporter's names are not served (fewer series)
    (("kafka_exporter",), {"kafka_consumergroup_lag"},
     {"kafka_consumergroup_group_lag", "kafka_partition_latest_offset"}),
    # none: lagscope's own names only, which always include the sweep health
    ((), {"lagscope_partition_lag_seconds", "lagscope_up"},
     {"kafka_consumergroup_lag", "kafka_consumergroup_group_lag"}),
])
def test_compat_families(compat: tuple[str, ...], present: set[str], absent: set[str]) -> None:
    registry = CollectorRegistry()
    collector = LagCollector(registry=registry, compat=compat)
    collector.update(_base_snapshot())
    collected = {fam.name for fam in registry.collect() if fam.samples}
    served = {fam.name for fam in text_string_to_metric_families(collector.exposition().decode()) if fam.samples}
    for names in (collected, served):
        assert present <= names
        assert not absent & names


def test_unknown_compat_family_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown family"):
        LagCollector(compat=["burrow"])
