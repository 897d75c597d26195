"""Settings: validation table, environment overrides, secrets, docs in step, CLI exit status."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lagscope.cli import app
from lagscope.config import load_config, parse_duration, render_markdown
from lagscope.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]

GOOD = """
clusters:
  - name: prod
    bootstrap_servers: "k1:9092,k2:9092"
collector: {interval_s: 5, lake: LAKE}
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "lagscope.yaml"
    p.write_text(text.replace("LAKE", str(tmp_path / "lake")))
    return p


# (yaml, expected start of the one-line error) — every invalid case names its field
INVALID = [
    # an unknown security protocol: the Literal's message, with the list index in the path
    ("clusters: [{name: a, bootstrap_servers: 'h:1', security: {protocol: TLS}}]",
     "clusters[0].security.protocol: Input should be 'PLAINTEXT'"),
    # SASL without a mechanism is incomplete: named at the security section
    ("clusters: [{name: a, bootstrap_servers: 'h:1', security: {protocol: SASL_SSL, username: u, password: p}}]",
     "clusters[0].security: sasl_mechanism is required with protocol SASL_SSL"),
    # SASL without any password source
    ("clusters: [{name: a, bootstrap_servers: 'h:1', "
     "security: {protocol: SASL_PLAINTEXT, sasl_mechanism: PLAIN, username: u}}]",
     "clusters[0].security: password or password_file is required"),
    # an unsupported SASL mechanism (GSSAPI is not offered)
    ("clusters: [{name: a, bootstrap_servers: 'h:1', security: {protocol: SASL_SSL, sasl_mechanism: GSSAPI}}]",
     "clusters[0].security.sasl_mechanism: Input should be 'PLAIN'"),
    # a CA file that does not exist is caught before connecting
    ("clusters: [{name: a, bootstrap_servers: 'h:1', security: {protocol: SSL, ca_file: /nonexistent/ca.pem}}]",
     "clusters[0].security: ca_file: no such file"),
    # bootstrap entries must be host:port
    ("clusters: [{name: a, bootstrap_servers: 'justahost'}]",
     "clusters[0].bootstrap_servers: 'justahost' is not host:port"),
    # the second cluster is the bad one: the index says so
    ("clusters: [{name: a, bootstrap_servers: 'h:1'}, {name: b, bootstrap_servers: 'h:99999'}]",
     "clusters[1].bootstrap_servers: 'h:99999' is not host:port"),
    # a cluster name becomes a lake folder: no slashes
    ("clusters: [{name: 'a/b', bootstrap_servers: 'h:1'}]",
     "clusters[0].name: 'a/b' is not a valid cluster name"),
    # duplicate names would mix two clusters in one lake partition
    ("clusters: [{name: a, bootstrap_servers: 'h:1'}, {name: a, bootstrap_servers: 'h:2'}]",
     "clusters: cluster names must be unique; repeated: a"),
    # a broken regex in the group filter
    ("clusters: [{name: a, bootstrap_servers: 'h:1', groups: {include: ['(unclosed']}}]",
     "clusters[0].groups.include: invalid regular expression '(unclosed'"),
    # a missing required field
    ("clusters: [{name: a}]", "clusters[0].bootstrap_servers: Field required"),
    # typos are errors, not silently ignored settings
    ("collector: {intervall_s: 5}", "collector.intervall_s: unknown setting"),
    # the interval must be positive
    ("collector: {interval_s: 0}", "collector.interval_s: Input should be greater than 0"),
    # a lake is a local folder or an s3:// object store: another scheme names nothing lagscope reads
    ("collector: {lake: 'gs://bucket/lake'}", "collector.lake: 'gs://bucket/lake': a lake is a local path"),
    # the tail's start must be a duration or earliest/latest
    ("clusters: [{name: a, bootstrap_servers: 'h:1', consumer_offsets_tail: {start: yesterday}}]",
     "clusters[0].consumer_offsets_tail.start: not a duration"),
    # metrics port range
    ("metrics: {port: 70000}", "metrics.port: Input should be less than 65536"),
    # the file is YAML but not a mapping
    ("- just\n- a list", "lagscope.yaml: the top level must be a mapping"),
    # not YAML at all
    ("clusters: [unclosed", "lagscope.yaml: not valid YAML"),
]


@pytest.mark.parametrize(("text", "expected"), INVALID)
def test_invalid_configuration_is_one_line_naming_the_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text), environ={})
    message = str(info.value)
    assert "\n" not in message
    # the file path prefix is only there for file-level errors
    assert message.split(" ", 1)[0].endswith("lagscope.yaml:") or message.startswith(expected)
    assert expected in message


def test_defaults_and_comma_separated_bootstrap(tmp_path: Path) -> None:
    s = load_config(_write(tmp_path, GOOD), environ={})
    assert s.clusters[0].bootstrap_servers == ["k1:9092", "k2:9092"]
    assert s.collector.interval_s == 5
    assert s.collector.lake_path == tmp_path / "lake"
    assert s.metrics.bind == "127.0.0.1"
    assert s.clusters[0].security.protocol == "PLAINTEXT"
    assert s.clusters[0].consumer_offsets_tail.enabled is False


def test_environment_overrides_file_by_index_and_by_cluster_name(tmp_path: Path) -> None:
    env = {
        "LAGSCOPE_COLLECTOR__INTERVAL_S": "2.5",  # scalar in a section
        "LAGSCOPE_CLUSTERS__0__GROUPS__EXCLUDE": '["tmp-.*"]',  # JSON list, list indexed by position
        "LAGSCOPE_CLUSTERS__prod__SECURITY__PROTOCOL": "SASL_SSL",  # list indexed by cluster name
        "LAGSCOPE_CLUSTERS__prod__SECURITY__SASL_MECHANISM": "SCRAM-SHA-512",
        "LAGSCOPE_CLUSTERS__prod__SECURITY__USERNAME": "svc",
        "LAGSCOPE_CLUSTERS__prod__SECURITY__PASSWORD": "s3cr3t-from-env",
        "LAGSCOPE_KAFKA_CACHE": "/not/a/setting",  # other LAGSCOPE_ variables are ignored
    }
    s = load_config(_write(tmp_path, GOOD), environ=env)
    c = s.clusters[0]
    assert s.collector.interval_s == 2.5
    assert c.groups.exclude == ["tmp-.*"]
    assert not c.groups.matches("tmp-1")
    assert c.groups.matches("orders")
    assert c.security.protocol == "SASL_SSL"
    assert c.client_options()["sasl_plain_password"] == "s3cr3t-from-env"
    assert "s3cr3t-from-env" not in repr(s)
    assert "s3cr3t-from-env" not in str(s.model_dump())


def test_env_naming_an_unknown_cluster_fails(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no list entry named 'staging'"):
        load_config(_write(tmp_path, GOOD), environ={"LAGSCOPE_CLUSTERS__staging__NAME": "x"})


def test_env_naming_a_cluster_when_none_is_configured_fails(tmp_path: Path) -> None:
    # the file has no clusters (or no file at all): the message names the cluster, not a type error
    with pytest.raises(ConfigError, match="LAGSCOPE_CLUSTERS__prod__SECURITY__PASSWORD: no list entry named 'prod'"):
        load_config(None, environ={"LAGSCOPE_CLUSTERS__prod__SECURITY__PASSWORD": "x"})


def test_env_with_a_misspelled_section_fails(tmp_path: Path) -> None:
    # LAGSCOPE_<SECTION>__<FIELD> with a section that does not exist is a typo, not another tool's
    # variable: it is refused like an unknown key in the file instead of being silently ignored
    with pytest.raises(ConfigError, match="LAGSCOPE_COLECTOR__INTERVAL_S: unknown section 'colector'"):
        load_config(_write(tmp_path, GOOD), environ={"LAGSCOPE_COLECTOR__INTERVAL_S": "5"})


def test_password_file_is_read_and_never_shown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    secret = tmp_path / "pw"
    secret.write_text("file-secret-123\n")
    text = (f"clusters: [{{name: a, bootstrap_servers: 'h:1', security: {{protocol: SASL_PLAINTEXT, "
            f"sasl_mechanism: PLAIN, username: u, password_file: {secret}}}}}]")
    with caplog.at_level(logging.DEBUG):
        s = load_config(_write(tmp_path, text), environ={})
        logging.getLogger("test").info("loaded %r", s)
    assert s.clusters[0].security.resolved_password() == "file-secret-123"
    assert "file-secret-123" not in caplog.text


def test_error_next_to_a_password_does_not_echo_it(tmp_path: Path) -> None:
    text = ("clusters: [{name: a, bootstrap_servers: 'h:1', security: {protocol: SASL_SSL, "
            "sasl_mechanism: PLAIN, username: u, password: hunter2-secret, bogus: 1}}]")
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text), environ={})
    assert "hunter2-secret" not in str(info.value)
    assert "clusters[0].security.bogus: unknown setting" in str(info.value)


@pytest.mark.parametrize(("text", "seconds"), [
    ("1h", 3600.0),  # hours
    ("15m", 900.0),  # minutes
    ("90s", 90.0),  # seconds
    ("250ms", 0.25),  # milliseconds
    ("2d", 172800.0),  # days
])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


def test_docs_configuration_md_is_in_step_with_the_model() -> None:
    doc = (REPO / "docs" / "configuration.md").read_text()
    assert doc == render_markdown(), "regenerate: python -m lagscope.config > docs/configuration.md"


def test_cli_config_error_exits_2_with_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, "clusters: [{name: a, bootstrap_servers: 'h:1', security: {protocol: TLS}}]")
    result = CliRunner().invoke(app, ["collect", "--config", str(path), "--once"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("config error:")]
    assert lines == ["config error: clusters[0].security.protocol: Input should be 'PLAINTEXT', 'SSL', "
                     "'SASL_PLAINTEXT' or 'SASL_SSL'"]
