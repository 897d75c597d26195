"""The collector against a real broker writing its lake to the real S3 server fixture: `lagscope
collect --once` with ``collector.lake: s3://…`` and the ``storage`` section, read back through
the lake's object-store reader (issue 24's pipeline, its first leg)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.s3server import S3Server
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.structs import OffsetAndMetadata
from typer.testing import CliRunner

from lagscope import lake
from lagscope.cli import app

pytestmark = pytest.mark.kafka


def test_collect_once_writes_committed_sweeps_to_the_bucket(bootstrap: str, unique: str, tmp_path: Path,
                                                           s3_server: S3Server, s3_prefix: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    topic, group = f"{unique}-t", f"{unique}-g"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
        producer = KafkaProducer(bootstrap_servers=bootstrap)
        for partition, n in ((0, 9), (1, 3)):
            for i in range(n):
                producer.send(topic, f"m{i}".encode(), partition=partition)
        producer.flush()
        producer.close()
        admin.alter_group_offsets(group, {TopicPartition(topic, 0): OffsetAndMetadata(4, "", -1),
                                          TopicPartition(topic, 1): OffsetAndMetadata(3, "", -1)})
    finally:
        admin.close()
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    url = s3_server.url(f"{s3_prefix}/lake")
    config = tmp_path / "lagscope.yaml"
    config.write_text(f"clusters: [{{name: it, bootstrap_servers: '{bootstrap}', "
                      f"groups: {{include: ['{unique}.*']}}}}]\n"
                      f"collector: {{lake: '{url}'}}\n"
                      f"storage: {{endpoint: '{s3_server.endpoint}', path_style: true, credentials: env}}\n"
                      f"metrics: {{port: 0}}\n")
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(app, ["collect", "--config", str(config), "--once"])
        assert result.exit_code == 0, result.output
    assert s3_server.credentials["AWS_SECRET_ACCESS_KEY"] not in result.output
    store = s3_server.store(f"{s3_prefix}/lake")
    rows = lake.read_table(store, "offsets", cluster="it").to_pylist()
    assert sorted((r["partition"], r["committed_offset"], r["log_end_offset"], r["lag"]) for r in rows) == [
        (0, 4, 9, 5), (0, 4, 9, 5), (1, 3, 3, 0), (1, 3, 3, 0)]  # two sweeps, no row twice more
    sweeps = lake.read_table(store, "sweeps", cluster="it").to_pylist()
    assert [s["ok"] for s in sweeps] == [True, True]
    # every file the sweeps wrote is committed: nothing uncommitted lies beside them
    for table in ("offsets", "members", "sweeps"):
        for folder in lake.object_date_folders(store, table, "it", None, None):
            names = store.names(folder)
            assert lake.committed_names(names) == sorted(n for n in names if not n.startswith("_"))
