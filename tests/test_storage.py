"""lagscope/storage.py: a store of an s3:// URL on the real S3 server fixture, a local store, the
URL rules, the credential sources and the storage settings' checks."""

from __future__ import annotations

import pytest
from helpers.s3server import S3Server

from lagscope.config import StorageConfig, load_config
from lagscope.errors import ConfigError
from lagscope.storage import is_object_url, open_store, split_url


def test_a_store_puts_lists_and_deletes(s3_server: S3Server, s3_prefix: str) -> None:
    store = s3_server.store(s3_prefix)
    assert store.is_object_store
    assert store.url == f"s3://{s3_server.bucket}/{s3_prefix}"
    store.put("x/cluster=a/f1.parquet", b"1")
    store.put("x/cluster=a/f2.parquet", b"22")
    store.put("x/cluster=b/f3.parquet", b"333")
    assert store.names("x/cluster=a") == ["f1.parquet", "f2.parquet"]
    assert store.folders("x") == ["cluster=a", "cluster=b"]
    assert store.get("x/cluster=b/f3.parquet") == b"333"
    store.delete("x/cluster=a/f1.parquet")
    store.delete("x/cluster=a/f1.parquet")  # already gone: no error
    assert store.names("x/cluster=a") == ["f2.parquet"]
    assert store.names("nothing/here") == []
    assert store.folders("nothing") == []


def test_a_local_store_writes_through_a_temp_file(tmp_path: pytest.TempPathFactory) -> None:
    store = open_store(str(tmp_path))
    assert not store.is_object_store
    store.put("a/b/c.bin", b"abc")
    assert store.get("a/b/c.bin") == b"abc"
    assert store.names("a/b") == ["c.bin"]
    assert store.folders("a") == ["b"]


@pytest.mark.parametrize(("url", "expected"), [
    ("s3://bucket/a/b", ("bucket", "a/b")),
    ("s3://bucket/a/b/", ("bucket", "a/b")),   # a trailing slash names the same prefix
    ("s3://bucket", ("bucket", "")),           # the bucket's root
])
def test_split_url(url: str, expected: tuple[str, str]) -> None:
    assert split_url(url) == expected


@pytest.mark.parametrize("url", ["s3://", "s3:///prefix", "/var/lib/lake"])
def test_split_url_refuses_what_names_no_bucket(url: str) -> None:
    with pytest.raises(ConfigError):
        split_url(url)


@pytest.mark.parametrize(("root", "expected"), [
    ("s3://b/p", True),
    ("/var/lib/lake", False),
    ("file:///var/lib/lake", False),   # a file:// URI is a local folder
])
def test_is_object_url(root: str, expected: bool) -> None:
    assert is_object_url(root) is expected


def test_env_credentials_must_be_set_and_never_show() -> None:
    config = StorageConfig(endpoint="http://127.0.0.1:1", credentials="env")
    with pytest.raises(ConfigError, match="AWS_SECRET_ACCESS_KEY"):
        open_store("s3://b/p", config, environ={"AWS_ACCESS_KEY_ID": "id-only"})
    secret = "s3cr3t-" + "x" * 20
    store = open_store("s3://b/p", config, environ={"AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": secret})
    assert secret not in repr(store)
    assert secret not in str(store)


@pytest.mark.parametrize(("section", "message"), [
    ({"endpoint": "127.0.0.1:9000"}, "http://host"),            # no scheme: which one is meant is unknown
    ({"endpoint": "http://h:9000/bucket"}, "no path"),         # the bucket belongs in the s3:// URL
    ({"path_style": True}, "needs an endpoint"),               # AWS itself is addressed virtual-hosted
    ({"credentials": "keys"}, "credentials"),                  # not a source lagscope knows
])
def test_storage_settings_are_checked_at_start(section: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(None, environ={f"LAGSCOPE_STORAGE__{k.upper()}": str(v).lower() if isinstance(v, bool) else str(v)
                                   for k, v in section.items()})


def test_storage_settings_from_the_environment() -> None:
    settings = load_config(None, environ={"LAGSCOPE_STORAGE__ENDPOINT": "http://127.0.0.1:9000",
                                          "LAGSCOPE_STORAGE__PATH_STYLE": "true",
                                          "LAGSCOPE_STORAGE__REGION": "eu-west-1"})
    assert settings.storage == StorageConfig(endpoint="http://127.0.0.1:9000", path_style=True, region="eu-west-1")


def test_a_folder_whose_last_file_was_deleted_is_listed_once(s3_server: S3Server, s3_prefix: str) -> None:
    store = s3_server.store(s3_prefix)
    store.put("t/date=1/a.parquet", b"1")
    store.put("t/date=2/b.parquet", b"2")
    store.delete("t/date=1/a.parquet")  # pyarrow keeps the folder as an empty "t/date=1/" object
    store.put("t/date=1/c.parquet", b"3")
    assert store.folders("t") == ["date=1", "date=2"]
    assert store.names("t/date=1") == ["c.parquet"]
