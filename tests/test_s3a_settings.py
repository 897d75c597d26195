"""lagscope.s3a without Spark: the s3a settings each storage section gives, the jars' folder and the
spark-submit set of ``lagscope spark s3a-conf`` (tests/analytics/test_s3a.py runs them on Spark
against the real S3 server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lagscope import s3a
from lagscope.cli import app
from lagscope.config import StorageConfig
from lagscope.errors import JarsUnavailable
from lagscope.s3a import session_conf
from lagscope.storage import open_store


def test_s3_urls_map_to_s3a_and_nothing_else_changes() -> None:
    assert s3a.to_s3a("s3://bucket/a/results/lag_trends") == "s3a://bucket/a/results/lag_trends"
    assert s3a.to_s3a("/var/lib/lagscope/results") == "/var/lib/lagscope/results"
    assert s3a.to_s3a("s3a://bucket/x") == "s3a://bucket/x"


def test_an_s3_compatible_endpoint_gives_path_style_over_its_scheme() -> None:
    conf = s3a.hadoop_conf(StorageConfig(endpoint="http://127.0.0.1:9000/", region="eu-west-1", credentials="env"))
    assert conf == {
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.endpoint.region": "eu-west-1",
        "fs.s3a.path.style.access": "true",
        "fs.s3a.aws.credentials.provider":
            "software.amazon.awssdk.auth.credentials.EnvironmentVariableCredentialsProvider",
    }
    tls = s3a.hadoop_conf(StorageConfig(endpoint="https://minio.example.org", path_style=False))
    assert (tls["fs.s3a.connection.ssl.enabled"], tls["fs.s3a.path.style.access"]) == ("true", "false")


def test_aws_itself_is_virtual_hosted_with_the_sdk_chain_and_anonymous_signs_nothing() -> None:
    conf = s3a.hadoop_conf(StorageConfig(region="us-west-2"))
    assert "fs.s3a.endpoint" not in conf
    assert (conf["fs.s3a.endpoint.region"], conf["fs.s3a.path.style.access"]) == ("us-west-2", "false")
    providers = conf["fs.s3a.aws.credentials.provider"].split(",")
    # the same sources as the store layer's default chain, in its order: env, profile, web identity, instance
    assert [p.rsplit(".", 1)[1] for p in providers] == [
        "EnvironmentVariableCredentialsProvider", "ProfileCredentialsProvider",
        "WebIdentityTokenFileCredentialsProvider", "IAMInstanceCredentialsProvider"]
    anon = s3a.hadoop_conf(StorageConfig(credentials="anonymous"))
    assert anon["fs.s3a.aws.credentials.provider"] == "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider"


def test_no_key_ever_enters_the_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEKEYID")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "session-token-value")
    jar = tmp_path / f"hadoop-aws-{s3a.HADOOP_VERSION}.jar"
    jar.touch()
    for creds in ("default", "env", "anonymous"):
        cfg = StorageConfig(endpoint="http://127.0.0.1:9000", credentials=creds)  # type: ignore[arg-type]
        text = repr(s3a.spark_conf(cfg, [jar])) + repr(s3a.submit_args(cfg, "/opt/jars"))
        for secret in ("AKIAEXAMPLEKEYID", "very-secret-value", "session-token-value"):
            assert secret not in text
        assert "access.key" not in text
        assert "secret.key" not in text


def test_the_jars_come_from_their_folder_or_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LAGSCOPE_S3A_JARS", str(tmp_path))
    assert s3a.jars_dir() == tmp_path
    with pytest.raises(JarsUnavailable, match="lagscope spark jars"):
        s3a.jars()
    for name in (f"hadoop-aws-{s3a.HADOOP_VERSION}.jar", "bundle-2.0.jar", "notes.txt"):
        (tmp_path / name).touch()
    assert [p.name for p in s3a.jars()] == ["bundle-2.0.jar", f"hadoop-aws-{s3a.HADOOP_VERSION}.jar"]
    conf = s3a.spark_conf(StorageConfig())
    assert conf["spark.jars"] == ",".join(str(tmp_path / n) for n in ("bundle-2.0.jar",
                                                                      f"hadoop-aws-{s3a.HADOOP_VERSION}.jar"))


def test_the_default_folder_is_beside_the_pom() -> None:
    assert (s3a.jars_dir().parent.parent / "pom.xml").is_file()
    pom = (s3a.jars_dir().parent.parent / "pom.xml").read_text()
    assert f"<hadoop.version>{s3a.HADOOP_VERSION}</hadoop.version>" in pom
    # pyspark's own Hadoop is the version pinned
    import pyspark

    bundled = Path(pyspark.__file__).parent / "jars" / f"hadoop-client-api-{s3a.HADOOP_VERSION}.jar"
    assert bundled.is_file(), f"pyspark does not bundle Hadoop {s3a.HADOOP_VERSION}: change the pin with it"


def test_analyze_adds_s3a_only_for_a_bucket(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            caplog: pytest.LogCaptureFixture) -> None:
    storage = StorageConfig(endpoint="http://127.0.0.1:9000", credentials="anonymous")
    local = open_store(tmp_path / "lake")
    bucket = open_store("s3://bucket/results", storage)
    monkeypatch.setenv("LAGSCOPE_S3A_JARS", str(tmp_path / "none"))
    assert session_conf(storage, local, local) == {}
    assert session_conf(storage, local, bucket) == {}  # no jars: a warning, and the analytics run without
    assert "s3a:// is not configured" in caplog.text
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / f"hadoop-aws-{s3a.HADOOP_VERSION}.jar").touch()
    got = session_conf(storage, local, bucket)
    assert got["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert got["spark.jars"].endswith(f"hadoop-aws-{s3a.HADOOP_VERSION}.jar")


def test_s3a_conf_prints_the_submit_set_of_the_settings(tmp_path: Path) -> None:
    config = tmp_path / "lagscope.yaml"
    config.write_text("storage:\n  endpoint: https://minio.example.org:9000\n  region: eu-west-1\n"
                      "  path_style: true\n  credentials: default\n")
    done = CliRunner().invoke(app, ["spark", "s3a-conf", "--config", str(config), "--jars", "/opt/lagscope/s3a-jars"])
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0::2] == ["--conf"] * (len(lines) // 2)
    conf = dict(v.split("=", 1) for v in lines[1::2])
    assert conf["spark.driver.extraClassPath"] == conf["spark.executor.extraClassPath"] == "/opt/lagscope/s3a-jars/*"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "https://minio.example.org:9000"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "true"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"] == ",".join(s3a.PROVIDERS["default"])
