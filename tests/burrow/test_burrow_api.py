"""The Burrow API on synthetic lakes and results: every endpoint's shape (Burrow 1.2's, as
recorded from the real Burrow 1.2.1 in test_burrow_real.py), 404s, 405s, the snapshot's
entries, statuses, refresh and expiry, and the HTTP server."""

from __future__ import annotations

import datetime as dt
import http.client
import itertools
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from burrow_synthetic import NOW, Part, status, sweep

from lagscope.burrow import BurrowApi, Snapshot, SnapshotBuilder, SnapshotRefresher, respond
from lagscope.burrow.api import group_status
from lagscope.burrow.snapshot import is_entry

HOST = "test-host"


def _at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


@pytest.fixture
def roots(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "lake", tmp_path / "results"


def _builder(roots: tuple[Path, Path], *, now: float = 60.0, **kw: Any) -> SnapshotBuilder:
    clock = kw.pop("clock", lambda: _at(now).timestamp())
    return SnapshotBuilder(roots[0], roots[1], **{"intervals": 3, "clock": clock, **kw})


def _get(snapshot: Snapshot, path: str, method: str = "GET") -> tuple[int, Any]:
    resp = respond(snapshot, method, path, host=HOST)
    return resp.status, resp.json() if resp.content_type == "application/json" and resp.body else resp.body


@pytest.fixture
def snap(roots: tuple[Path, Path]) -> Snapshot:
    """Cluster prod: group `orders` (topic orders, partitions 0 and 2; 1 never committed) swept
    4 times, evaluated WARN; group `idle` caught up, evaluated OK, never with an owner."""
    lake, results = roots
    for i in range(4):  # orders-0 moves every sweep; orders-2 stays at 5 with an owner
        sweep(lake, "prod", "orders", _at(i * 10), [
            Part("orders", 0, 100 + i, 120 + 2 * i, owner="m1"),
            Part("orders", 1, None, 40, owner="m1"),
            Part("orders", 2, 5, 9, owner="m2")])
        sweep(lake, "prod", "idle", _at(i * 10), [Part("audit", 0, 7, 7)])
    status(results, "prod", "orders", _at(30), ("WARN", "WARN"),
           {("orders", 0): ("WARN", "WARN"), ("orders", 2): ("OK", "OK")})
    status(results, "prod", "idle", _at(30), ("OK", "IDLE"), {("audit", 0): ("OK", "IDLE")})
    return _builder(roots).refresh()


def test_envelope_and_cluster_list(snap: Snapshot) -> None:
    code, body = _get(snap, "/v3/kafka")
    assert code == 200
    # Burrow's key order: error, message, payload, request{url, host}
    assert list(body) == ["error", "message", "clusters", "request"]
    assert body == {"error": False, "message": "cluster list returned", "clusters": ["prod"],
                    "request": {"url": "/v3/kafka", "host": HOST}}


def test_cluster_detail_is_the_module_shape(snap: Snapshot) -> None:
    code, body = _get(snap, "/v3/kafka/prod")
    assert code == 200
    assert body["message"] == "cluster module detail returned"
    module = body["module"]
    assert list(module) == ["class-name", "servers", "client-profile", "topic-refresh", "offset-refresh"]
    assert list(module["client-profile"]) == ["name", "client-id", "kafka-version", "tls", "sasl"]


def test_topics_and_topic_detail(snap: Snapshot) -> None:
    assert _get(snap, "/v3/kafka/prod/topic")[1]["topics"] == ["audit", "orders"]
    code, body = _get(snap, "/v3/kafka/prod/topic/orders")
    # end offsets per partition at the latest sweep, indexed by partition
    assert (code, body["message"], body["offsets"]) == (200, "topic offsets returned", [126, 40, 9])
    code, body = _get(snap, "/v3/kafka/prod/topic/orders/consumers")
    assert (code, body["consumers"]) == (200, ["orders"])


def test_consumer_list_and_detail(snap: Snapshot) -> None:
    assert _get(snap, "/v3/kafka/prod/consumer")[1]["consumers"] == ["idle", "orders"]
    code, body = _get(snap, "/v3/kafka/prod/consumer/orders")
    assert (code, body["message"]) == (200, "consumer detail returned")
    p0, p1, p2 = body["topics"]["orders"]
    assert list(p0) == ["offsets", "owner", "client_id", "current-lag"]
    # a ring of `intervals` (3) slots, oldest first: the last 3 of 4 sweeps (each moved the offset)
    assert [e["offset"] for e in p0["offsets"]] == [101, 102, 103]
    assert p0["offsets"][-1] == {"offset": 103, "timestamp": int(_at(30).timestamp() * 1000), "lag": 23}
    assert (p0["owner"], p0["client_id"], p0["current-lag"]) == ("/10.0.0.2", "client-m1", 23)
    # never committed: an empty ring, as Burrow shows a partition it holds no commit for
    assert p1 == {"offsets": [None, None, None], "owner": "", "client_id": "", "current-lag": 0}
    # unchanged offset but owned: every sweep is an entry (an owner commits periodically)
    assert [e["offset"] for e in p2["offsets"]] == [5, 5, 5]


def test_status_shows_only_partitions_that_are_not_ok(snap: Snapshot) -> None:
    code, body = _get(snap, "/v3/kafka/prod/consumer/orders/status")
    assert (code, body["error"], body["message"]) == (200, False, "consumer status returned")
    st = body["status"]
    assert list(st) == ["cluster", "group", "status", "complete", "partitions", "partition_count", "maxlag",
                        "totallag"]
    assert (st["cluster"], st["group"], st["status"]) == ("prod", "orders", "WARN")
    assert [p["partition"] for p in st["partitions"]] == [0]
    part = st["partitions"][0]
    assert list(part) == ["topic", "partition", "owner", "client_id", "status", "start", "end", "current_lag",
                          "complete"]
    assert part["start"]["offset"] == 101
    assert part["end"]["offset"] == 103
    assert (part["status"], part["current_lag"], part["complete"]) == ("WARN", 23, 1)
    # the never-committed partition is not the group's: 2 partitions, lag 23 + 4
    assert (st["partition_count"], st["totallag"], st["complete"]) == (2, 27, 1)
    assert st["maxlag"]["partition"] == 0


def test_lag_shows_every_partition(snap: Snapshot) -> None:
    code, body = _get(snap, "/v3/kafka/prod/consumer/orders/lag")
    assert code == 200
    assert [(p["partition"], p["status"]) for p in body["status"]["partitions"]] == [(0, "WARN"), (2, "OK")]


def test_idle_is_ok_and_complete_is_a_float32_ratio(roots: tuple[Path, Path], snap: Snapshot) -> None:
    _, body = _get(snap, "/v3/kafka/prod/consumer/idle/lag")
    st = body["status"]
    assert st["status"] == "OK"
    # unowned and unchanged: one entry (the first sweep) of 3, written as Go writes a float32
    assert st["partitions"][0]["complete"] == 0.33333334
    assert st["complete"] == 0


@pytest.mark.parametrize(("path", "message"), [
    ("/v3/kafka/nope", "cluster module not found"),
    ("/v3/kafka/nope/topic", "cluster not found"),
    ("/v3/kafka/nope/consumer", "cluster not found"),
    ("/v3/kafka/prod/topic/nope", "cluster or topic not found"),
    ("/v3/kafka/nope/topic/orders", "cluster or topic not found"),
    ("/v3/kafka/prod/topic/nope/consumers", "cluster or topic not found"),
    ("/v3/kafka/prod/consumer/nope", "cluster or consumer not found"),
    ("/v3/kafka/nope/consumer/orders", "cluster or consumer not found"),
])
def test_unknown_names_are_burrows_404(snap: Snapshot, path: str, message: str) -> None:
    code, body = _get(snap, path)
    assert code == 404
    assert body == {"error": True, "message": message, "request": {"url": path, "host": HOST}}


@pytest.mark.parametrize("path", ["/v3/kafka/prod/consumer/nope/status", "/v3/kafka/nope/consumer/orders/lag"])
def test_unknown_group_status_is_burrows_notfound(snap: Snapshot, path: str) -> None:
    code, body = _get(snap, path)
    cluster, group = path.split("/")[3], path.split("/")[5]
    # Burrow 1.2.1 answers 404 with "error": false and a NOTFOUND status
    assert code == 404
    assert body["error"] is False
    assert body["status"] == {"cluster": cluster, "group": group, "status": "NOTFOUND", "complete": 1,
                              "partitions": [], "partition_count": 0, "maxlag": None, "totallag": 0}


@pytest.mark.parametrize("path", ["/", "/v3", "/v2/kafka", "/v3/kafka/prod/consumer/orders/status/x",
                                  "/v3/kafka/prod/broker", "/burrow/admin/loglevel"])
def test_unrouted_paths_are_invalid_request_type(snap: Snapshot, path: str) -> None:
    resp = respond(snap, "GET", path)
    assert resp.status == 404
    assert json.loads(resp.body) == {"error": True, "message": "invalid request type", "result": {}}


def test_trailing_slash_redirects(snap: Snapshot) -> None:
    resp = respond(snap, "GET", "/v3/kafka/prod/consumer/orders/status/")
    assert resp.status == 301
    assert resp.headers["Location"] == "/v3/kafka/prod/consumer/orders/status"


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("DELETE", "/v3/kafka/prod/consumer/orders", "DELETE, GET, OPTIONS"),  # Burrow's delete-group
    ("POST", "/v3/admin/loglevel", "GET, OPTIONS, POST"),                    # Burrow's set-log-level
    ("PUT", "/v3/kafka/prod/consumer/orders", "DELETE, GET, OPTIONS"),
    ("POST", "/v3/kafka", "GET, OPTIONS"),
    ("DELETE", "/v3/kafka/prod/consumer/orders/status", "GET, OPTIONS"),
])
def test_write_endpoints_are_405_with_a_json_body(snap: Snapshot, method: str, path: str, allow: str) -> None:
    resp = respond(snap, method, path, host=HOST)
    assert resp.status == 405
    assert resp.headers["Allow"] == allow
    body = resp.json()
    assert body["error"] is True
    assert "read-only" in body["message"]
    assert f"{method} {path}" in body["message"]
    assert body["request"] == {"url": path, "host": HOST}


def test_options_and_admin(snap: Snapshot) -> None:
    resp = respond(snap, "OPTIONS", "/v3/kafka")
    assert (resp.status, resp.headers["Allow"]) == (200, "GET, OPTIONS")
    resp = respond(snap, "GET", "/burrow/admin")
    assert (resp.status, resp.body, resp.content_type) == (200, b"GOOD", "text/plain; charset=utf-8")
    code, body = _get(snap, "/v3/admin/loglevel")
    assert code == 200
    assert body["message"] == "log level returned"
    assert isinstance(body["level"], str)


def test_query_string_and_escaped_names(roots: tuple[Path, Path]) -> None:
    sweep(roots[0], "prod", "a group/with slash", _at(0), [Part("t", 0, 1, 2)])
    snap = _builder(roots).refresh()
    code, body = _get(snap, "/v3/kafka/prod/consumer/a%20group%2Fwith%20slash/lag?x=1")
    assert code == 200
    assert body["status"]["group"] == "a group/with slash"


@pytest.mark.parametrize(("prev", "committed", "owned", "expected"), [
    (None, None, True, False),   # no commit: nothing to store
    (None, 5, False, True),      # a first commit
    (5, 6, False, True),         # the offset moved
    (5, 5, False, False),        # unchanged and nobody owns it: the consumer is gone, no entry
    (5, 5, True, True),          # unchanged but owned: the owner commits periodically
])
def test_is_entry(prev: int | None, committed: int | None, owned: bool, expected: bool) -> None:
    assert is_entry(prev, committed, owned) is expected


def _model(history: list[tuple[dt.datetime, str, list[Part]]], intervals: int) -> dict[str, list[tuple[Any, ...]]]:
    """The snapshot's partitions by the definition, one sweep at a time: per group, the partitions
    of its latest sweep that have a commit, each (topic, partition, committed, lag, owner, entries)
    where an entry is a sweep with a commit at which the offset changed since the previous sweep
    (or it had none) or an owner is assigned, the last ``intervals`` of them."""
    prev: dict[tuple[str, str, int], int | None] = {}
    ring: dict[tuple[str, str, int], list[tuple[int, int, int]]] = {}
    latest: dict[str, tuple[dt.datetime, list[Part]]] = {}
    for at, group, parts in sorted(history, key=lambda h: h[0]):
        for p in parts:
            key = (group, p.topic, p.partition)
            before = prev.get(key)
            if p.committed is not None and (before is None or p.committed != before or p.owner is not None):
                ring.setdefault(key, []).append((p.committed, int(at.timestamp() * 1000), p.end - p.committed))
            prev[key] = p.committed
        latest[group] = (at, parts)
    return {group: sorted((p.topic, p.partition, p.committed, p.end - p.committed,
                           f"/10.0.0.{len(p.owner)}" if p.owner else "",
                           ring.get((group, p.topic, p.partition), [])[-intervals:])
                          for p in parts if p.committed is not None)
            for group, (_, parts) in latest.items()}


def _view(snap: Snapshot) -> dict[str, list[tuple[Any, ...]]]:
    return {g.group: [(p.topic, p.partition, p.committed, p.current_lag, p.owner,
                       [(e.offset, e.timestamp, e.lag) for e in p.entries]) for p in g.partitions]
            for g in snap.clusters["prod"].groups.values()}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_entries_match_the_definition_however_the_lake_is_read(roots: tuple[Path, Path], seed: int) -> None:
    """Random sweeps (partitions that come and go, offsets that stay, move or vanish, owners that
    come and go), read in several refreshes and in windows of a few rows, or all at once: the
    same snapshot, and the one the definition gives."""
    rng = random.Random(seed)
    lake = roots[0]
    history: list[tuple[dt.datetime, str, list[Part]]] = []
    committed: dict[tuple[str, str, int], int] = {}
    now = [0.0]
    incremental = _builder(roots, intervals=4, read_rows=7, clock=lambda: _at(now[0]).timestamp())
    for i in range(36):
        at = _at(10 * i + rng.randrange(3))
        for group in ("a", "b", "c"):
            if rng.random() < 0.2:
                continue  # this group was not swept this time
            parts = []
            for topic, partition in [("t", 0), ("t", 1), ("u", 0)]:
                if rng.random() < 0.15:
                    continue  # not the group's partition at this sweep
                key = (group, topic, partition)
                move = rng.random()
                committed[key] = committed.get(key, 0) + (0 if move < 0.4 else rng.randrange(1, 20))
                offset = None if move > 0.9 else committed[key]
                parts.append(Part(topic, partition, offset, committed[key] + rng.randrange(5),
                                  owner=rng.choice([None, "m1", "m22"])))
            if parts:
                sweep(lake, "prod", group, at, parts)
                history.append((at, group, parts))
        now[0] = 10 * i + 5
        if i % 9 == 8:
            incremental.refresh()
    expected = _model(history, 4)
    assert _view(incremental.refresh()) == expected
    fresh = _builder(roots, intervals=4, clock=lambda: _at(now[0]).timestamp())
    assert _view(fresh.refresh()) == expected


def test_windows_read_every_row_once(roots: tuple[Path, Path]) -> None:
    """Reading the history in windows of a few rows (windows of 60 s halved down to 1 s, then
    doubled) loses no sweep and reads none twice, also one stamped on a window's edge: an owned
    partition has one entry per sweep, here every 250 ms for two minutes and one after ``now``
    (a collector's clock ahead)."""
    lake, results = roots
    times = [_at(-120 + 0.25 * i) for i in range(480)] + [_at(5)]
    for i, at in enumerate(times):
        sweep(lake, "prod", "g", at, [Part("t", 0, i, i + 1, owner="m")])
        if i % 40 == 0:
            status(results, "prod", "g", at, ("OK" if i < 440 else "WARN", "OK"), {("t", 0): ("OK", "OK")})
    builder = _builder(roots, intervals=1000, read_rows=3, now=0.0, history_s=600)
    g = builder.refresh().clusters["prod"].groups["g"]
    assert [e.timestamp for e in g.partitions[0].entries] == [int(at.timestamp() * 1000) for at in times]
    assert [e.offset for e in g.partitions[0].entries] == list(range(len(times)))
    assert g.status == "WARN"  # the latest evaluation, read in a later window than the others


@pytest.mark.parametrize("sizes", [[0] * 40, [100] * 40, [0, 0, 50, 50, 50, 1, 1, 1, 1, 1, 0, 0, 0, 0]])
def test_windows_tile_the_history(roots: tuple[Path, Path], sizes: list[int]) -> None:
    """The windows cover [since, ∞) edge to edge (ends inclusive, in ms), the last open-ended,
    shorter after a window of more than read_rows rows and longer after one of less than a quarter."""
    import pyarrow as pa

    builder = _builder(roots, read_rows=20)
    asked: list[tuple[int, int | None]] = []

    def read(since: int, until: int | None) -> pa.Table:
        asked.append((since, until))
        return pa.table({"x": [0] * (sizes[len(asked) - 1] if len(asked) <= len(sizes) else 0)})

    list(builder._windows(read, 1_000, 3_601_000))
    assert asked[0][0] == 1_000
    assert asked[-1][1] is None
    assert all(nxt[0] == cur[1] + 1 for cur, nxt in itertools.pairwise(asked) if cur[1] is not None)
    spans = [until - since + 1 for since, until in asked[:-1] if until is not None]

    def next_span(i: int) -> int:  # after window i
        size = sizes[i] if i < len(sizes) else 0
        return max(int(spans[i] * (2 if size < 5 else 1 if size <= 20 else 0.5)), 1000)

    assert spans[0] == 60_000
    assert all(spans[i] == next_span(i - 1) for i in range(1, len(spans)))
    # the open window starts where the next closed one would have ended after now
    assert asked[-1][0] <= 3_601_000 < asked[-1][0] + next_span(len(spans) - 1) - 1


def test_a_partitions_first_sweep_is_an_entry_whatever_its_neighbour_says(roots: tuple[Path, Path]) -> None:
    """Neither owned nor moving: a partition's first commit is an entry even when the partition
    sorted before it has the same offset (each key's predecessor is its own)."""
    sweep(roots[0], "prod", "g", _at(0), [Part("t", 0, 7, 9), Part("t", 1, 7, 9)])
    g = _builder(roots).refresh().clusters["prod"].groups["g"]
    assert [len(p.entries) for p in g.partitions] == [1, 1]


def test_lagscope_status_source_maps_to_burrow_words(roots: tuple[Path, Path]) -> None:
    lake, results = roots
    sweep(lake, "prod", "g", _at(0), [Part("t", 0, 0, 10), Part("t", 1, 5, 5)])
    # Burrow's rules say STOP (a false alarm on t-1, caught up), lagscope's own says STALL on t-0, IDLE on t-1
    status(results, "prod", "g", _at(0), ("ERR", "STALL"), {("t", 0): ("STOP", "STALL"), ("t", 1): ("STOP", "IDLE")})
    burrow = _builder(roots).refresh()
    own = _builder(roots, status_source="lagscope").refresh()
    assert [p.status for p in burrow.clusters["prod"].groups["g"].partitions] == ["STOP", "STOP"]
    g = own.clusters["prod"].groups["g"]
    # a group worse than ERR is ERR (Burrow's group rule); IDLE is OK
    assert (g.status, [p.status for p in g.partitions]) == ("ERR", ["STALL", "OK"])


def test_group_not_evaluated_yet_is_ok(roots: tuple[Path, Path]) -> None:
    sweep(roots[0], "prod", "new", _at(0), [Part("t", 0, 1, 5)])
    st = group_status(_builder(roots).refresh().clusters["prod"].groups["new"], show_all=True)
    assert (st["status"], st["partitions"][0]["status"], st["totallag"]) == ("OK", "OK", 4)


def test_refresh_is_incremental_and_takes_the_latest(roots: tuple[Path, Path]) -> None:
    lake, results = roots
    now = [60.0]
    builder = _builder(roots, clock=lambda: _at(now[0]).timestamp())
    sweep(lake, "prod", "g", _at(0), [Part("t", 0, 1, 5, owner="m")])
    first = builder.refresh()
    assert builder.refresh() is first  # nothing changed: the same snapshot
    sweep(lake, "prod", "g", _at(10), [Part("t", 0, 4, 5, owner="m"), Part("t", 1, 0, 0, owner="m")])
    status(results, "prod", "g", _at(10), ("WARN", "WARN"), {("t", 0): ("WARN", "WARN")})
    second = builder.refresh()
    assert second is not first
    g = second.clusters["prod"].groups["g"]
    assert [(p.partition, p.current_lag, p.status) for p in g.partitions] == [(0, 1, "WARN"), (1, 0, "OK")]
    assert [e.offset for e in g.partitions[0].entries] == [1, 4]
    # an older evaluation written later (a re-run) does not replace the newer one
    status(results, "prod", "g", _at(0), ("OK", "OK"), {("t", 0): ("OK", "OK")})
    assert builder.refresh().clusters["prod"].groups["g"].status == "WARN"
    # a partition gone from the group's latest sweep is no longer the group's
    sweep(lake, "prod", "g", _at(20), [Part("t", 0, 5, 5, owner="m")])
    assert [p.partition for p in builder.refresh().clusters["prod"].groups["g"].partitions] == [0]


def test_history_and_expiry(roots: tuple[Path, Path]) -> None:
    lake, _ = roots
    sweep(lake, "prod", "old", _at(-7200), [Part("t", 0, 1, 5)])
    sweep(lake, "prod", "new", _at(0), [Part("t", 0, 1, 5)])
    # the first reading goes back `history_s` only
    snap = _builder(roots, history_s=3600).refresh()
    assert list(snap.clusters["prod"].groups) == ["new"]
    now = [60.0]
    builder = _builder(roots, expire_group_s=120, clock=lambda: _at(now[0]).timestamp())
    assert list(builder.refresh().clusters["prod"].groups) == ["new"]
    now[0] = 500.0  # not swept for longer than expire_group_s: forgotten, as Burrow's expire-group
    # (and with it the cluster, which no setting names here)
    assert builder.refresh().clusters == {}


def test_configured_cluster_without_data_is_listed(roots: tuple[Path, Path]) -> None:
    from lagscope.burrow import ClusterInfo

    snap = _builder(roots, clusters={"empty": ClusterInfo(servers=("k:9092",), refresh_s=15)}).refresh()
    assert _get(snap, "/v3/kafka")[1]["clusters"] == ["empty"]
    module = _get(snap, "/v3/kafka/empty")[1]["module"]
    assert (module["servers"], module["topic-refresh"]) == (["k:9092"], 15)
    assert _get(snap, "/v3/kafka/empty/consumer")[1]["consumers"] == []


def test_server_keeps_connections_and_answers_every_method(roots: tuple[Path, Path], snap: Snapshot) -> None:
    builder = _builder(roots)
    with BurrowApi(SnapshotRefresher(builder, refresh_s=60), port=0, hostname=HOST) as api:
        conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
        try:
            for _ in range(3):  # one connection, several requests (HTTP/1.1 keep-alive)
                conn.request("GET", "/v3/kafka/prod/consumer/orders/status")
                resp = conn.getresponse()
                body = json.loads(resp.read())
                assert resp.status == 200
                assert resp.getheader("Content-Type") == "application/json"
                assert body["status"]["status"] == "WARN"
            conn.request("DELETE", "/v3/kafka/prod/consumer/orders", body=b"{}")
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())["error"]) == (405, True)
            conn.request("HEAD", "/v3/kafka")  # Burrow routes GET only: HEAD is 405 there too (no body)
            resp = conn.getresponse()
            assert (resp.status, resp.read()) == (405, b"")
        finally:
            conn.close()
        assert api.is_healthy()
    assert not api.is_healthy()


def test_keep_alive_requests_do_not_wait_for_a_delayed_ack(roots: tuple[Path, Path], snap: Snapshot) -> None:
    """Burrow's clients poll group after group on one connection. When the headers and the body
    left in two sends, Nagle's algorithm held the body until the client's delayed ACK of the
    headers: every request after the first took 40 ms or more (Linux's least delayed-ACK time).
    The median of many requests is far below that now, however loaded the machine."""
    builder = _builder(roots)
    with BurrowApi(SnapshotRefresher(builder, refresh_s=60), port=0, hostname=HOST) as api:
        conn = http.client.HTTPConnection("127.0.0.1", api.port, timeout=10)
        took: list[float] = []
        try:
            for path in ["/v3/kafka/prod/consumer/orders/status", "/v3/kafka/prod/consumer/orders/lag"] * 10:
                t0 = time.perf_counter()
                conn.request("GET", path)
                resp = conn.getresponse()
                body = resp.read()
                took.append(time.perf_counter() - t0)
                assert resp.status == 200
                assert json.loads(body)["status"]["group"] == "orders"
        finally:
            conn.close()
    assert statistics.median(took[1:]) < 0.025, took


def test_cli_and_run_know_the_component(tmp_path: Path) -> None:
    from lagscope.cli import app
    from lagscope.config import Settings
    from lagscope.deploy.run import Part as RunPart
    from lagscope.deploy.run import build_components

    assert "burrow-api" in [c.name for c in app.registered_commands]
    settings = Settings(collector={"lake": str(tmp_path / "lake")}, burrow_api={"port": 0})
    comps = build_components(settings, {RunPart.burrow_api}, results=tmp_path / "results",
                             outbox=tmp_path / "o.sqlite")
    assert [c.name for c in comps] == ["burrow-api", "results-metrics"]  # downstream first
    assert isinstance(comps[0], BurrowApi)
