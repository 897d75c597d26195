"""`lagscope alerts` on result tables in a bucket (the real S3 server fixture): the same findings as
from the same results on disk, `alerts evaluate --results s3://…` then `alerts deliver` delivers
them to a receiver (the outbox a local file), and a prefix without any object is an error, never
"no findings" (which would resolve every firing alert)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from helpers.results_synthetic import write_synthetic
from helpers.s3server import S3Server
from test_webhooks_delivery import SECRET, Receiver, port, serve  # noqa: F401 (fixtures)
from typer.testing import CliRunner

from lagscope.alerts import findings_from_results, results_exist
from lagscope.cli import app
from lagscope.errors import LakeError
from lagscope.storage import Store

NOW = dt.datetime.now(dt.UTC).replace(microsecond=0)


@pytest.fixture
def store(s3_server: S3Server, s3_prefix: str) -> Store:
    return s3_server.store(f"{s3_prefix}/results")  # type: ignore[no-any-return]


def test_the_same_findings_as_from_disk(store: Store, tmp_path: Path) -> None:
    write_synthetic(tmp_path / "results", "prod", "orders-svc", "orders", NOW)
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    on_disk = findings_from_results(tmp_path / "results", NOW)
    assert len(on_disk) >= 3
    assert sorted(map(repr, findings_from_results(store, NOW))) == sorted(map(repr, on_disk))


def test_a_prefix_without_objects_is_an_error(s3_server: S3Server, s3_prefix: str) -> None:
    empty = s3_server.store(f"{s3_prefix}/nothing-here")
    assert not results_exist(empty)
    with pytest.raises(LakeError, match="no result tables at s3://"):
        findings_from_results(empty, NOW)


def test_cli_evaluate_then_deliver_from_bucket_results(store: Store, s3_server: S3Server, tmp_path: Path,
                                                       port: int, serve: Any,  # noqa: F811
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    write_synthetic(store, "prod", "orders-svc", "orders", NOW)  # type: ignore[arg-type]
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("LAGSCOPE_TEST_WEBHOOK_SECRET", SECRET)
    config = tmp_path / "lagscope.yaml"
    config.write_text(
        "ui: {url: 'http://app.test:8501'}\n"
        f"storage: {{endpoint: '{s3_server.endpoint}', path_style: true, credentials: env}}\n"
        "alerts:\n"
        "  routes:\n"
        f"    - {{name: generic, url: 'http://127.0.0.1:{port}/hook', format: generic, min_severity: info,\n"
        "        secret_env: LAGSCOPE_TEST_WEBHOOK_SECRET, timeout_s: 1}\n")
    outbox = tmp_path / "outbox.sqlite"
    runner = CliRunner()
    evaluated = runner.invoke(app, ["alerts", "evaluate", "--results", store.url, "--config", str(config),
                                    "--outbox", str(outbox)])
    assert evaluated.exit_code == 0, evaluated.output
    queued = int(evaluated.output.split(" notifications queued")[0].rsplit(" ", 1)[1])
    assert queued >= 6
    # the same results on disk queue as many
    write_synthetic(tmp_path / "results", "prod", "orders-svc", "orders", NOW)
    local = runner.invoke(app, ["alerts", "evaluate", "--results", str(tmp_path / "results"), "--config",
                                str(config), "--outbox", str(tmp_path / "local.sqlite")])
    assert local.exit_code == 0, local.output
    assert local.output == evaluated.output
    receiver = Receiver()
    serve(receiver, port)
    up = runner.invoke(app, ["alerts", "deliver", "--config", str(config), "--outbox", str(outbox),
                             "--max-seconds", "10"])
    assert up.exit_code == 0, up.output
    assert "pending 0" in up.output
    assert len({r.headers["Idempotency-Key"] for r in receiver.requests}) == queued
    for out in (evaluated.output, up.output):
        assert s3_server.credentials["AWS_SECRET_ACCESS_KEY"] not in out
    # a mistyped prefix: one error, nothing queued (no resolution of what fires)
    wrong = runner.invoke(app, ["alerts", "evaluate", "--results", store.url + "-typo", "--config", str(config),
                                "--outbox", str(outbox)])
    assert wrong.exit_code != 0
    assert "no result tables at s3://" in wrong.output + str(wrong.exception)
