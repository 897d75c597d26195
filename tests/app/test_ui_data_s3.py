"""The app's data layer on an object store (the real S3 server fixture): the same files on local
disk and in a bucket give every page's queries the same frames; only committed lake files and
visible result files are read; an empty bucket reads as empty frames; ``lagscope ui`` takes
``s3://`` roots and hands the app the storage section, never a secret."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import ui_fixture_lake as fx
from helpers.s3server import S3Server

from lagscope import lake as sample_lake
from lagscope.app import ENV_LAKE, ENV_RESULTS, ENV_STORAGE, data
from lagscope.app import store as app_store
from lagscope.app.params import TimeRange
from lagscope.storage import Store

WHOLE = TimeRange(fx.START, fx.END + dt.timedelta(minutes=1))


@pytest.fixture
def both(ui_lake: fx.FixtureLake, s3_server: S3Server, s3_prefix: str) -> tuple[data.Lake, data.Lake]:
    store = s3_server.store(f"{s3_prefix}/root")
    assert fx.upload(ui_lake.root, store) > 10
    return data.Lake(ui_lake.root, ui_lake.root), data.Lake(store, store)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True), check_dtype=False)


def test_every_page_query_gives_the_same_frames_from_the_bucket(con: Any, both: tuple[data.Lake, data.Lake]) -> None:
    local, s3 = both
    assert data.clusters(s3) == data.clusters(local) == ["prod", "staging"]
    assert data.data_end(con, s3, "prod") == data.data_end(con, local, "prod") is not None
    assert data.data_end(con, s3, None) == data.data_end(con, local, None)
    assert data.group_names(con, s3, "prod", WHOLE) == data.group_names(con, local, "prod", WHOLE) != []
    assert data.topics_of(con, s3, "prod", "orders-svc", WHOLE) == ["orders"]
    late = TimeRange(fx.END - dt.timedelta(minutes=5), fx.END)
    before = TimeRange(fx.START, fx.REBALANCE_START + dt.timedelta(seconds=30))
    queries = [
        lambda lk: data.group_overview(con, lk, ["prod", "staging"], WHOLE),
        lambda lk: data.group_overview(con, lk, ["staging"], WHOLE),
        lambda lk: data.rebalances(con, lk, ["prod"], WHOLE, "orders-svc"),
        lambda lk: data.rebalances(con, lk, ["prod", "staging"], WHOLE),
        lambda lk: data.anomalies(con, lk, ["prod"], WHOLE, "orders-svc", "orders", 2),
        lambda lk: data.anomalies(con, lk, ["prod"], late),
        lambda lk: data.delivery(con, lk, ["prod"], WHOLE),
        lambda lk: data.lag_series(con, lk, "prod", "orders-svc", WHOLE, "group"),
        lambda lk: data.lag_series(con, lk, "prod", "orders-svc", WHOLE, "rollups", "orders"),
        lambda lk: data.latest_partitions(con, lk, "prod", "orders-svc", WHOLE),
        lambda lk: data.partition_series(con, lk, "prod", "orders-svc", WHOLE, [("orders", 1), ("orders", 3)]),
        lambda lk: data.members_at(con, lk, "prod", "orders-svc", fx.REBALANCE_START - dt.timedelta(seconds=1)),
        lambda lk: data.members_between(con, lk, "prod", "orders-svc", before),
        lambda lk: data.offsets_between(con, lk, "prod", "billing", WHOLE, "payments", 0),
        lambda lk: data.commit_history(con, lk, "prod", "billing", WHOLE, "payments", 0)[0],
        lambda lk: data.advice(lk, "prod", "orders-svc"),
    ]
    nonempty = 0
    for query in queries:
        want, got = query(local), query(s3)
        _same(want, got)
        nonempty += not want.empty
    assert not data.advice(local, "prod", "orders-svc").empty
    assert nonempty >= 15  # the comparison is of real rows, not of empty frames


def test_only_committed_lake_files_are_read(con: Any, both: tuple[data.Lake, data.Lake]) -> None:
    local, s3 = both
    store = s3.samples
    assert isinstance(store, Store)
    files = s3.files("offsets", ["prod"], [fx.END.date()])
    assert files
    assert all(f.startswith(store.url + "/offsets/cluster=prod/date=") for f in files)
    want = data.offsets_between(con, local, "prod", "billing", WHOLE)
    # a file a killed collector left without its marker: never read
    folder = files[0].removeprefix(store.url + "/").rpartition("/")[0]
    store.put(f"{folder}/part-99999999T000000000000-deadbeef.parquet",
              Path(local.samples, files[0].removeprefix(store.url + "/")).read_bytes())
    _same(data.offsets_between(con, s3, "prod", "billing", WHOLE), want)
    # a file whose marker is deleted first (retention, quarantine) is no longer read
    name = files[0].rpartition("/")[2]
    store.delete(f"{folder}/{sample_lake.COMMIT_MARKER_PREFIX}{name}")
    assert len(s3.files("offsets", ["prod"], [fx.END.date()])) == len(files) - 1


def test_an_empty_bucket_reads_as_empty_frames(con: Any, s3_server: S3Server, s3_prefix: str) -> None:
    empty = data.Lake(s3_server.store(f"{s3_prefix}/lake"), s3_server.store(f"{s3_prefix}/results"))
    assert data.clusters(empty) == []
    assert data.data_end(con, empty, None) is None
    for frame in (data.group_overview(con, empty, ["prod"], WHOLE), data.rebalances(con, empty, ["prod"], WHOLE),
                  data.lag_series(con, empty, "prod", "g", WHOLE), data.members_at(con, empty, "prod", "g", fx.END),
                  data.advice(empty, "prod", "g")):
        assert frame.empty


def test_the_app_opens_s3_roots_from_its_environment(s3_server: S3Server, s3_prefix: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    url = s3_server.url(f"{s3_prefix}/lake")
    monkeypatch.setenv(ENV_LAKE, url)
    monkeypatch.delenv(ENV_RESULTS, raising=False)
    monkeypatch.setenv(ENV_STORAGE, s3_server.storage_config().model_dump_json())
    app_store._root.cache_clear()
    lk = app_store.current_lake()
    assert isinstance(lk.samples, Store)
    assert isinstance(lk.results, Store)
    assert (lk.samples.url, lk.results.url) == (url, s3_server.url(f"{s3_prefix}/results"))
    assert data.clusters(lk) == []  # it reaches the server (an unknown endpoint would raise)
    app_store._root.cache_clear()


def test_lagscope_ui_takes_bucket_roots_and_hands_the_app_the_storage_section(
        s3_server: S3Server, s3_prefix: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json
    import os

    import yaml
    from typer.testing import CliRunner

    from lagscope.cli import app

    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    seen: dict[str, str] = {}
    monkeypatch.setattr(os, "execve", lambda path, argv, env: seen.update(env))
    lake_url = s3_server.url(f"{s3_prefix}/kafka/lake")
    config = tmp_path / "lagscope.yaml"
    config.write_text(yaml.safe_dump({"collector": {"lake": lake_url},
                                      "storage": {"endpoint": s3_server.endpoint, "credentials": "env"}}))
    result = CliRunner().invoke(app, ["ui", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert seen[ENV_LAKE] == lake_url
    assert seen[ENV_RESULTS] == s3_server.url(f"{s3_prefix}/kafka/results")  # beside the lake, as analyze
    storage = json.loads(seen[ENV_STORAGE])
    assert (storage["endpoint"], storage["credentials"]) == (s3_server.endpoint, "env")
    assert all(v not in seen[ENV_STORAGE] for v in s3_server.credentials.values() if v)
    # a local results folder beside a bucket lake: both as given
    seen.clear()
    result = CliRunner().invoke(app, ["ui", "--config", str(config), "--results", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (seen[ENV_LAKE], seen[ENV_RESULTS]) == (lake_url, str(tmp_path.resolve()))
    # the credentials the source names are missing: one line, nothing served
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    seen.clear()
    result = CliRunner().invoke(app, ["ui", "--config", str(config)])
    assert result.exit_code != 0
    assert not seen
