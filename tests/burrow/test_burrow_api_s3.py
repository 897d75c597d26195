"""The Burrow API over a lake and results in a bucket (the real S3 server fixture): the same
snapshot, endpoint by endpoint, as from the same files on disk; a sweep put into the bucket later
is seen at the next refresh; ``lagscope burrow-api`` opens s3:// roots with the storage section."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from burrow_synthetic import NOW, Part, status, sweep
from helpers.s3server import S3Server, put_tree

from lagscope.burrow import SnapshotBuilder, respond
from lagscope.burrow.setup import build_api
from lagscope.config import Settings
from lagscope.storage import Store

PATHS = ["/v3/kafka", "/v3/kafka/prod", "/v3/kafka/prod/topic", "/v3/kafka/prod/topic/orders",
         "/v3/kafka/prod/consumer", "/v3/kafka/prod/consumer/orders", "/v3/kafka/prod/consumer/orders/status",
         "/v3/kafka/prod/consumer/orders/lag", "/v3/kafka/prod/consumer/idle/lag"]


def _at(seconds: float) -> dt.datetime:
    return NOW + dt.timedelta(seconds=seconds)


def _body(builder: SnapshotBuilder, path: str) -> tuple[int, Any]:
    resp = respond(builder.snapshot, "GET", path, host="h")
    body = resp.json()
    body.pop("request", None)  # names the host and the path only
    return resp.status, body


def _sweeps(lake: Path, start: int, stop: int) -> None:
    for i in range(start, stop):
        sweep(lake, "prod", "orders", _at(i * 10), [Part("orders", 0, 100 + i, 120 + 2 * i, owner="m1"),
                                                    Part("orders", 2, 5, 9, owner="m2")])
        sweep(lake, "prod", "idle", _at(i * 10), [Part("audit", 0, 7, 7)])


def test_the_snapshot_from_the_bucket_is_the_one_from_disk(tmp_path: Path, s3_server: S3Server,
                                                          s3_prefix: str) -> None:
    lake, results = tmp_path / "lake", tmp_path / "results"
    _sweeps(lake, 0, 4)
    status(results, "prod", "orders", _at(30), ("WARN", "WARN"),
           {("orders", 0): ("WARN", "WARN"), ("orders", 2): ("OK", "OK")})
    status(results, "prod", "idle", _at(30), ("OK", "IDLE"), {("audit", 0): ("OK", "IDLE")})
    s3_lake, s3_results = s3_server.store(f"{s3_prefix}/lake"), s3_server.store(f"{s3_prefix}/results")
    assert put_tree(lake, s3_lake) > 0
    assert put_tree(results, s3_results) > 0
    clock = {"now": _at(60).timestamp()}
    local = SnapshotBuilder(lake, results, intervals=3, clock=lambda: clock["now"])
    bucket = SnapshotBuilder(s3_lake, s3_results, intervals=3, clock=lambda: clock["now"])
    local.refresh()
    bucket.refresh()
    seen = 0
    for path in PATHS:
        want = _body(local, path)
        assert want[0] == 200, path
        assert _body(bucket, path) == want, path
        seen += 1
    assert seen == len(PATHS)
    lag = _body(bucket, "/v3/kafka/prod/consumer/orders/lag")[1]
    assert lag["status"]["status"] == "WARN"  # the results' status, read from the bucket
    # two more sweeps, written to disk and put into the bucket: both builders see them at the next refresh
    _sweeps(tmp_path / "more", 4, 6)
    _sweeps(lake, 4, 6)
    put_tree(tmp_path / "more", s3_lake)
    clock["now"] = _at(80).timestamp()
    local.refresh()
    bucket.refresh()
    for path in PATHS:
        assert _body(bucket, path) == _body(local, path), path
    entries = _body(bucket, "/v3/kafka/prod/consumer/orders/lag")[1]["status"]["partitions"][0]
    assert entries["end"]["offset"] == 105  # the last sweep's committed offset


def test_build_api_opens_s3_roots_with_the_storage_section(s3_server: S3Server, s3_prefix: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    url = s3_server.url(f"{s3_prefix}/kafka/lake")
    settings = Settings(clusters=[{"name": "prod", "bootstrap_servers": "h:1"}],  # type: ignore[list-item]
                        collector={"lake": url},  # type: ignore[arg-type]
                        storage={"endpoint": s3_server.endpoint, "credentials": "env"})  # type: ignore[arg-type]
    api = build_api(settings, port=0)
    builder = api.refresher.builder
    assert isinstance(builder.lake, Store)
    assert isinstance(builder.results, Store)
    assert (builder.lake.url, builder.results.url) == (url, s3_server.url(f"{s3_prefix}/kafka/results"))
    builder.refresh()  # an empty bucket: an empty snapshot, no error
    assert respond(builder.snapshot, "GET", "/v3/kafka", host="h").status == 200
