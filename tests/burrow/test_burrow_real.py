"""lagscope's Burrow API against the real Burrow and a real Burrow client.

One workload on one real broker (the simulator's ``steady`` and ``stop`` scenarios), watched by
Debian's Burrow 1.2.1 (with Debian's ZooKeeper) and by lagscope (collector → lake → analytics →
results → the Burrow API). Every endpoint is requested from both; the responses' structure
(keys, JSON types, nesting) must be the same, and the values where the two definitions agree:
offsets, lags, partition counts, groups, topic end offsets, and the group statuses of the
scenarios where Burrow's rules and lagscope's Burrow-compatible evaluation see the same history.

The broker is Kafka 3.9.2 (the compatibility broker of deploy/kafka/pom.xml), not the suite's
4.4.0: Burrow 1.2.1's client (sarama, protocol 2.0.0) asks for ListOffsets versions that Kafka
4 removed (KIP-896: the broker closes the connection, Burrow logs ``failed to fetch offsets
from broker: EOF``), and it cannot decode the offset commit values Kafka 4 writes (version 4).

Where lagscope deliberately differs, the test names the case (:data:`DIFFERENCES`). Then a real
Burrow client, Telegraf's ``burrow`` input (burrow_exporter is not on the Go module proxy),
reads lagscope's API, and its metrics must equal lagscope's own ``/metrics``.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from burrow_procs import Burrow, ZooKeeper, free_port, get, get_json
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from lagscope.analytics.job import run_batch
from lagscope.analytics.results_metrics import ResultsCollector
from lagscope.burrow import BurrowApi, SnapshotBuilder, SnapshotRefresher
from lagscope.burrow.snapshot import cluster_infos
from lagscope.config import AnalyticsConfig, Settings
from lagscope.deploy.run import CollectorComponent
from lagscope.devtools.broker import LEGACY_VERSION, LocalBroker
from lagscope.devtools.sim.model import Scenario
from lagscope.devtools.sim.runner import load_scenario, start_scenario

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.slow]

CLUSTER = "local"
INTERVALS = 10  # Burrow's storage intervals = lagscope's analytics.rules.burrow_window (default 10)

#: where lagscope's answers differ from Burrow's on purpose, and why (docs/burrow.md says the same)
DIFFERENCES = {
    "topic list": "Burrow lists every topic of the cluster (__consumer_offsets too); lagscope the topics "
                  "its swept groups read (it never lists topics nobody consumes)",
    "cluster module": "Burrow shows its client profile (name, kafka-version); lagscope has no profile: "
                      "name 'lagscope', kafka-version ''; refreshes are the sweep interval",
    "entry timestamps": "Burrow stores the commit's time; lagscope the sweep at which it saw the offset "
                        "(at or after the commit, within a sweep interval)",
    "entry windows": "Burrow's entries are commits; lagscope's are sweeps at which the offset moved or an "
                     "owner was assigned: the same last offset, but the window's start, its count "
                     "(complete) and the partition statuses built on them can differ",
    "partition status of a stopped member that stays in the group": "Burrow sees no commits: STOP; lagscope's "
                     "entries go on while an owner is assigned, all at one offset: STALL (the group is "
                     "ERR in both)",
    "DELETE consumer group": "Burrow removes the group from its memory (200); lagscope is read-only: 405",
    "POST /v3/admin/loglevel": "Burrow sets its log level (200); lagscope is read-only: 405",
}


@dataclass
class World:
    broker: LocalBroker
    burrow: Burrow
    api: BurrowApi
    metrics_url: str
    groups: dict[str, str]  # scenario → group
    topics: dict[str, str]  # scenario → topic

    @property
    def lagscope(self) -> str:
        return f"http://127.0.0.1:{self.api.port}"


def _wait(what: str, check: Callable[[], bool], timeout: float = 90.0, every: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, spark: SparkSession, burrow_binary: str,
          zookeeper_jar: str) -> Iterator[World]:
    root = tmp_path_factory.mktemp("burrow-real")
    lake, results = root / "lake", root / "results"
    broker = LocalBroker(root / "kafka", version=LEGACY_VERSION, offsets_partitions=1)
    zk = ZooKeeper(root, zookeeper_jar)
    started: list[Any] = []
    try:
        broker.start()
        started.append(broker)
        zk.start()
        started.append(zk)
        settings = Settings(
            clusters=[{"name": CLUSTER, "bootstrap_servers": [broker.bootstrap], "groups": {"include": ["sim-.*"]}}],
            collector={"interval_s": 1.0, "lake": str(lake), "compaction": {"enabled": False}},
            metrics={"port": 0})
        collector = CollectorComponent(settings, [ResultsCollector(results, refresh_s=1.0)])
        collector.start()
        started.append(collector)
        runs = {name: start_scenario(sc, broker.bootstrap, root / name) for name, sc in _scenarios().items()}
        ended = {name: run.wait() for name, run in runs.items()}
        for name, res in ended.items():
            assert not res.failures, f"{name}: {res.failures}"
        groups = {name: res.names.group("readers") for name, res in ended.items()}
        topics = {name: res.names.topic("events") for name, res in ended.items()}
        burrow = Burrow(root, burrow_binary, zk.address, broker.bootstrap, cluster=CLUSTER, intervals=INTERVALS)
        burrow.start()
        started.append(burrow)
        _wait("Burrow to read the groups' commits", lambda: all(
            get_json(f"{burrow.url}/v3/kafka/{CLUSTER}/consumer/{g}/lag")[0] == 200 for g in groups.values()))
        # quiet sweeps after the end, enough for the stopped group's last window (entries while its member
        # was assigned, up to the scenario's end) to be older than the window is long: Burrow's STOP rule
        # then holds for lagscope's evaluation of the last sweep as it does for Burrow's of now
        quiet_until = max(res.ended for res in ended.values()) + 25
        time.sleep(max(0.0, quiet_until - time.time()))
        days = sorted({d.name.removeprefix("date=") for d in lake.glob("offsets/cluster=*/date=*")})
        run_batch(spark, lake, results, since=dt.date.fromisoformat(days[0]), until=dt.date.fromisoformat(days[-1]),
                  settings=AnalyticsConfig(session_timeout_s=3.0, heartbeat_s=0.5, network_s=0.5,
                                           rebalance_timeout_s=3.0), progress=False)
        builder = SnapshotBuilder(lake, results, intervals=INTERVALS,
                                  clusters=cluster_infos(settings.clusters, settings.collector.interval_s))
        api = BurrowApi(SnapshotRefresher(builder, refresh_s=1.0), port=0, hostname=_burrow_host(burrow))
        api.start()
        started.append(api)
        server = collector.collector.metrics_server
        assert server is not None
        yield World(broker, burrow, api, server.url, groups, topics)
    finally:
        for thing in reversed(started):
            thing.stop()


def _scenarios() -> dict[str, Scenario]:
    """``steady``, and ``stop`` run long enough after its member stops (at 5 s) for the member to
    stay assigned without progress for more sweeps than a window holds (lagscope counts an
    assigned sweep as an entry: "entry windows"), so that both windows, Burrow's and lagscope's,
    hold only entries at the stopped offset, none caught up, whatever the timing of the last
    catch-up before the stop."""
    stop = load_scenario("stop")
    return {"steady": load_scenario("steady"), "stop": stop.model_copy(update={"duration": 5 + 2 * INTERVALS})}


def _burrow_host(burrow: Burrow) -> str:
    """Burrow's ``request.host``: its machine's name (lagscope's default too; the same here)."""
    return str(get_json(f"{burrow.url}/v3/kafka")[1]["request"]["host"])


def both(world: World, path: str, method: str = "GET") -> tuple[tuple[int, Any], tuple[int, Any]]:
    return get_json(world.burrow.url + path, method), get_json(world.lagscope + path, method)


def shape(value: Any) -> Any:
    """The structure of a JSON value: object keys (in order) with their shapes, the set of its
    non-null elements' shapes for an array, the JSON type for a scalar (int and float are one
    JSON type, number)."""
    if isinstance(value, dict):
        return ("object", tuple((k, shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", frozenset(shape(v) for v in value if v is not None))
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if value is None:
        return "null"
    return type(value).__name__


def _same_shape(path: str, ours: Any, theirs: Any) -> None:
    assert shape(ours) == shape(theirs), f"{path}: lagscope {shape(ours)} != Burrow {shape(theirs)}"


def test_every_endpoint_has_burrows_structure(world: World) -> None:
    paths = ["/v3/kafka", f"/v3/kafka/{CLUSTER}", f"/v3/kafka/{CLUSTER}/topic", f"/v3/kafka/{CLUSTER}/consumer"]
    for name in world.groups:
        g, t = world.groups[name], world.topics[name]
        paths += [f"/v3/kafka/{CLUSTER}/topic/{t}", f"/v3/kafka/{CLUSTER}/topic/{t}/consumers",
                  f"/v3/kafka/{CLUSTER}/consumer/{g}", f"/v3/kafka/{CLUSTER}/consumer/{g}/status",
                  f"/v3/kafka/{CLUSTER}/consumer/{g}/lag"]
    for path in paths:
        (bc, burrow), (lc, ours) = both(world, path)
        assert (lc, bc) == (200, 200), path
        if path.endswith("/status") and not burrow["status"]["partitions"] and ours["status"]["partitions"]:
            # Burrow shows only partitions that are not OK: compare the partitions' shape on /lag
            ours["status"]["partitions"] = []
        if path.endswith("/status") and burrow["status"]["partitions"] and not ours["status"]["partitions"]:
            burrow["status"]["partitions"] = []
        _same_shape(path, ours, burrow)
        assert ours["message"] == burrow["message"], path
        assert ours["request"] == burrow["request"], path
    assert get(world.burrow.url + "/burrow/admin") == get(world.lagscope + "/burrow/admin") == (200, b"GOOD")


def test_lists_agree(world: World) -> None:
    (_, burrow), (_, ours) = both(world, "/v3/kafka")
    assert ours["clusters"] == burrow["clusters"] == [CLUSTER]
    (_, burrow), (_, ours) = both(world, f"/v3/kafka/{CLUSTER}/consumer")
    assert sorted(ours["consumers"]) == sorted(burrow["consumers"]) == sorted(world.groups.values())
    # named difference "topic list": Burrow lists __consumer_offsets besides the consumed topics
    (_, burrow), (_, ours) = both(world, f"/v3/kafka/{CLUSTER}/topic")
    assert set(burrow["topics"]) - set(ours["topics"]) == {"__consumer_offsets"}, DIFFERENCES["topic list"]
    assert sorted(ours["topics"]) == sorted(world.topics.values())
    for name, t in world.topics.items():
        (_, burrow), (_, ours) = both(world, f"/v3/kafka/{CLUSTER}/topic/{t}/consumers")
        assert ours["consumers"] == burrow["consumers"] == [world.groups[name]]


def test_topic_offsets_agree(world: World) -> None:
    for t in world.topics.values():
        path = f"/v3/kafka/{CLUSTER}/topic/{t}"
        _wait(f"the end offsets of {t} to agree", lambda p=path: both(world, p)[0][1]["offsets"]  # type: ignore[misc]
              == both(world, p)[1][1]["offsets"], timeout=30)


def _by_partition(status: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(p["topic"], p["partition"]): p for p in status["partitions"]}


def test_lags_offsets_and_counts_agree(world: World) -> None:
    for g in world.groups.values():
        (_, burrow), (_, ours) = both(world, f"/v3/kafka/{CLUSTER}/consumer/{g}/lag")
        b, o = burrow["status"], ours["status"]
        assert (o["cluster"], o["group"]) == (b["cluster"], b["group"])
        assert o["partition_count"] == b["partition_count"], g
        assert o["totallag"] == b["totallag"], g
        assert o["maxlag"]["current_lag"] == b["maxlag"]["current_lag"], g
        bp, op = _by_partition(b), _by_partition(o)
        assert op.keys() == bp.keys(), g
        for key, p in op.items():
            q = bp[key]
            assert p["current_lag"] == q["current_lag"], (g, key)
            assert p["end"]["offset"] == q["end"]["offset"], (g, key)  # the last committed offset
            # (the entry's lag is the lag when it was stored: at the commit for Burrow, at a later sweep
            # for lagscope; "entry windows")
            # named difference "entry timestamps": lagscope saw the offset at a sweep after the commit
            assert p["end"]["timestamp"] >= q["end"]["timestamp"] - 1000, DIFFERENCES["entry timestamps"]
            # owners: the members left at the scenario's end, and Burrow 1.2.1 cannot decode the group
            # metadata records of Kafka 2.3+ anyway (value version 3): both empty here
            assert (p["owner"], p["client_id"]) == (q["owner"], q["client_id"]) == ("", ""), (g, key)
        # the consumer detail: the same partitions, current lags and last offsets
        (_, burrow), (_, ours) = both(world, f"/v3/kafka/{CLUSTER}/consumer/{g}")
        assert ours["topics"].keys() == burrow["topics"].keys()
        for topic, parts in ours["topics"].items():
            theirs = burrow["topics"][topic]
            assert len(parts) == len(theirs)
            for p, q in zip(parts, theirs, strict=True):
                assert len(p["offsets"]) == len(q["offsets"]) == INTERVALS
                assert p["current-lag"] == q["current-lag"]
                assert p["offsets"][-1]["offset"] == q["offsets"][-1]["offset"]


def test_group_statuses_agree_where_the_rules_do(world: World) -> None:
    statuses = {}
    for name, g in world.groups.items():
        (_, burrow), (_, ours) = both(world, f"/v3/kafka/{CLUSTER}/consumer/{g}/status")
        statuses[name] = (ours["status"]["status"], burrow["status"]["status"])
    # steady: the consumers kept up and committed to the end: caught up, OK for both
    assert statuses["steady"] == ("OK", "OK"), statuses
    # stop: the member stopped consuming and committing with lag waiting: ERR for both (Burrow's
    # partitions are STOP, lagscope's STALL: the named difference)
    assert statuses["stop"] == ("ERR", "ERR"), statuses
    (_, burrow), (_, ours) = both(world, f"/v3/kafka/{CLUSTER}/consumer/{world.groups['stop']}/lag")
    lagging = {p["status"] for p in ours["status"]["partitions"] if p["current_lag"] > 0}
    lagging_b = {p["status"] for p in burrow["status"]["partitions"] if p["current_lag"] > 0}
    assert lagging_b == {"STOP"}
    assert lagging <= {"STOP", "STALL"}, DIFFERENCES["partition status of a stopped member that stays in the group"]


def test_not_found_bodies_are_burrows(world: World) -> None:
    for path in ["/v3/kafka/nope", "/v3/kafka/nope/topic", "/v3/kafka/nope/consumer",
                 f"/v3/kafka/{CLUSTER}/topic/nope", f"/v3/kafka/{CLUSTER}/consumer/nope",
                 f"/v3/kafka/{CLUSTER}/consumer/nope/status", f"/v3/kafka/{CLUSTER}/consumer/nope/lag",
                 "/v3/kafka/nope/consumer/nope/status"]:
        (bc, burrow), (lc, ours) = both(world, path)
        assert (lc, ours) == (bc, burrow), path
    for path in ["/", "/v3/nothing", f"/v3/kafka/{CLUSTER}/broker"]:
        assert get(world.lagscope + path) == get(world.burrow.url + path), path


def test_write_endpoints_are_refused(world: World) -> None:
    g = world.groups["steady"]
    for method, path, why in [("DELETE", f"/v3/kafka/{CLUSTER}/consumer/{g}", "DELETE consumer group"),
                              ("POST", "/v3/admin/loglevel", "POST /v3/admin/loglevel")]:
        code, body = get_json(world.lagscope + path, method)
        assert (code, body["error"]) == (405, True), DIFFERENCES[why]
        assert "read-only" in body["message"]
    # still there: nothing was deleted
    assert get_json(f"{world.lagscope}/v3/kafka/{CLUSTER}/consumer/{g}/lag")[0] == 200


# ------------------------------------------------------------------------------------------
# a real Burrow client: Telegraf's burrow input


def _telegraf_metrics(binary: str, url: str, workdir: Path) -> list[tuple[str, dict[str, str], dict[str, Any]]]:
    """One gather of Telegraf's burrow input against ``url`` (``telegraf --test``), parsed from
    its line protocol: (measurement, tags, fields)."""
    conf = workdir / "telegraf.conf"
    conf.write_text(f'[agent]\n  omit_hostname = true\n[[inputs.burrow]]\n  servers = ["{url}"]\n')
    out = subprocess.run([binary, "--config", str(conf), "--test", "--non-strict-env-handling"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    metrics = []
    for line in out.splitlines():
        if not line.startswith("> "):
            continue
        head, fields, _ts = line[2:].rsplit(" ", 2)
        name, *tags = head.split(",")
        parsed: dict[str, Any] = {}
        for kv in fields.split(","):
            k, v = kv.split("=", 1)
            parsed[k] = v.strip('"') if v.startswith('"') else int(v.rstrip("i"))
        metrics.append((name, dict(t.split("=", 1) for t in tags), parsed))
    return metrics


def _own_metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_telegraf_burrow_input_reads_lagscope(world: World, telegraf_binary: str, tmp_path: Path) -> None:
    got = _telegraf_metrics(telegraf_binary, world.lagscope, tmp_path)
    own = _own_metrics(world.metrics_url)
    groups = set(world.groups.values())
    parts = [(t, f) for n, t, f in got if n == "burrow_partition"]
    assert {t["group"] for t, _ in parts} == groups
    for tags, fields in parts:
        lbl = (("cluster", CLUSTER), ("consumergroup", tags["group"]), ("partition", tags["partition"]),
               ("topic", tags["topic"]))
        assert fields["lag"] == own[("kafka_consumergroup_lag", lbl)], tags
        assert fields["offset"] == own[("kafka_consumergroup_current_offset", lbl)], tags
    for tags, fields in [(t, f) for n, t, f in got if n == "burrow_group"]:
        group = tags["group"]
        lags = {k: v for k, v in own.items() if k[0] == "kafka_consumergroup_lag" and ("consumergroup", group) in k[1]}
        assert fields["total_lag"] == sum(lags.values()), group
        assert fields["partition_count"] == len(lags), group
        current = [dict(k[1])["status"] for k, v in own.items()
                   if k[0] == "lagscope_group_burrow_status" and dict(k[1])["group"] == group and v == 1]
        assert [fields["status"]] == current, group
    topics = [(t, f) for n, t, f in got if n == "burrow_topic"]
    assert {t["topic"] for t, _ in topics} == set(world.topics.values())
    for tags, fields in topics:
        lbl = (("cluster", CLUSTER), ("partition", tags["partition"]), ("topic", tags["topic"]))
        assert fields["offset"] == own[("kafka_topic_partition_current_offset", lbl)], tags


def test_run_serves_it_as_a_component(world: World, tmp_path: Path) -> None:
    """`lagscope run --component burrow-api` on the same lake and results, over HTTP, SIGTERM-safe."""
    import signal
    import sys

    lake = world.api.refresher.builder.lake
    results = world.api.refresher.builder.results
    port = free_port()
    cfg = tmp_path / "lagscope.yaml"
    cfg.write_text(f"collector: {{lake: {lake}}}\nanalytics: {{results: {results}}}\n"
                   f"burrow_api: {{enabled: true, port: {port}, refresh_s: 1}}\n")
    proc = subprocess.Popen([sys.executable, "-m", "lagscope.cli", "run", "--config", str(cfg),
                             "--component", "burrow-api"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/v3/kafka/{CLUSTER}/consumer"

        def up() -> bool:
            try:
                return sorted(get_json(url)[1]["consumers"]) == sorted(world.groups.values())
            except OSError:
                return False

        _wait("lagscope run's burrow-api", up, timeout=60, every=0.5)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out.decode(errors="replace")[-2000:]
