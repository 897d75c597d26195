"""The docker-compose stack (deploy/compose/compose.yaml) is valid and its parts fit together.

There is no Docker engine (and no compose plugin) on CI machines, so the file is checked the
way `docker compose config` would check it, with real validators:

- the Compose Specification JSON schema (the copy vendored by the ``check-jsonschema`` package,
  Apache-2.0), after `${VAR:-default}` interpolation with an empty environment;
- every bind-mounted file or folder exists, named volumes are declared, `depends_on` names
  services, published ports bind to loopback by default, images are pinned;
- the files it mounts are valid for the programs that read them: lagscope's settings
  (``load_config``), the alert routes, the Grafana datasource uid the generated dashboards
  use, and the Prometheus configuration with its rule files (``promtool check config`` on a
  copy whose container paths are mapped back to the repository through the compose mounts);
- every lagscope command a service runs parses with the real CLI (options and values).
"""

from __future__ import annotations

import copy
import importlib.resources
import itertools
import json
import os
import re
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import jsonschema
import pytest
import typer.main
import yaml

from lagscope.cli import app as lagscope_app
from lagscope.config import load_config

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE_FILE = COMPOSE_DIR / "compose.yaml"

_VAR = re.compile(r"\$(?:\$|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>[^}]*))?\})")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR-default}` and `$$`, applied recursively."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, default = m.group("name"), m.group("op"), m.group("default")
        if op == ":-":
            return env.get(name) or default
        if op == "-":
            return env.get(name, default)
        if name not in env:
            raise AssertionError(f"${{{name}}} has no default and is not set")
        return env[name]

    return _VAR.sub(sub, value)


def load_compose(env: dict[str, str] | None = None) -> dict[str, Any]:
    raw = yaml.safe_load(COMPOSE_FILE.read_text())  # resolves the x-lagscope anchor and << merges
    return interpolate(raw, env or {})


def compose_schema() -> dict[str, Any]:
    ref = importlib.resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema: dict[str, Any] = json.loads(ref.read_text())
    return schema


def schema_errors(doc: dict[str, Any]) -> list[str]:
    schema = compose_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in cls(schema).iter_errors(doc)]


def bind_mounts(service: dict[str, Any]) -> list[tuple[Path, str]]:
    """(host path, container path) of each bind mount (short syntax; a source that is a path)."""
    out = []
    for vol in service.get("volumes", []):
        assert isinstance(vol, str), f"use the short volume syntax: {vol}"
        source, target = vol.split(":")[:2]
        if source.startswith((".", "/")):
            out.append(((COMPOSE_DIR / source).resolve(), target))
    return out


def host_path(service: dict[str, Any], container_path: str) -> Path:
    """Map a path inside a service's container back to the repository through its bind mounts."""
    best: tuple[int, Path] | None = None
    for source, target in bind_mounts(service):
        cp, tp = PurePosixPath(container_path), PurePosixPath(target)
        if cp == tp or tp in cp.parents:
            rel = cp.relative_to(tp)
            if best is None or len(tp.parts) > best[0]:
                best = (len(tp.parts), source / rel)
    assert best is not None, f"{container_path} is not bind-mounted"
    return best[1]


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load_compose()


def test_compose_file_validates_against_the_compose_spec(compose: dict[str, Any]) -> None:
    assert schema_errors(compose) == []
    assert set(compose["services"]) == {"kafka", "collector", "analytics", "app", "webhook-sink",
                                        "prometheus", "grafana"}


@pytest.mark.parametrize(
    ("mutate", "where"),
    [
        # a misspelt service key is not part of the spec (additionalProperties: false)
        (lambda d: d["services"]["collector"].update(comand=["lagscope"]), "services/collector"),
        # a dependency condition is one of three words; "service_ready" is not one of them
        (lambda d: d["services"]["collector"]["depends_on"]["kafka"].update(condition="service_ready"),
         "depends_on"),
        # restart is a string, never a list
        (lambda d: d["services"]["grafana"].update(restart=["always"]), "services/grafana/restart"),
    ],
)
def test_schema_rejects_broken_compose_files(compose: dict[str, Any], mutate: Any, where: str) -> None:
    broken = copy.deepcopy(compose)
    mutate(broken)
    errors = schema_errors(broken)
    assert errors, "the schema accepted a broken file"
    assert any(where in e for e in errors), errors


def test_interpolation_uses_the_environment_then_the_default() -> None:
    # LAGSCOPE_BIND unset → loopback; set → the given address; KAFKA_IMAGE overrides the image
    assert load_compose()["services"]["grafana"]["ports"] == ["127.0.0.1:3000:3000"]
    doc = load_compose({"LAGSCOPE_BIND": "0.0.0.0", "KAFKA_IMAGE": "apache/kafka:4.4.0-rc"})
    assert doc["services"]["grafana"]["ports"] == ["0.0.0.0:3000:3000"]
    assert doc["services"]["kafka"]["image"] == "apache/kafka:4.4.0-rc"
    assert schema_errors(doc) == []


def test_mounts_volumes_dependencies_ports_and_images_fit_together(compose: dict[str, Any]) -> None:
    services = compose["services"]
    declared = set(compose["volumes"])
    used: set[str] = set()
    for name, svc in services.items():
        for source, _target in bind_mounts(svc):
            assert source.exists(), f"{name}: bind mount source {source} does not exist"
            assert ROOT in source.parents, f"{name}: {source} is outside the repository"
        for vol in svc.get("volumes", []):
            src = vol.split(":")[0]
            if not src.startswith((".", "/")):
                assert src in declared, f"{name}: volume {src} is not declared"
                used.add(src)
        deps = svc.get("depends_on", [])
        for dep in deps if isinstance(deps, list) else deps.keys():
            assert dep in services, f"{name} depends on unknown service {dep}"
        for port in svc.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        image = svc["image"]
        assert ":" in image, f"{name}: pin the image ({image})"
        assert not image.endswith(":latest"), f"{name}: pin the image ({image})"
    assert used == declared, f"declared but unused volumes: {declared - used}"
    # the build context is the repository, whose Dockerfile builds the lagscope image
    assert (COMPOSE_DIR / services["collector"]["build"]["context"]).resolve() == ROOT
    assert (ROOT / services["collector"]["build"]["dockerfile"]).is_file()


def test_mounted_lagscope_settings_and_alert_routes_are_valid(compose: dict[str, Any]) -> None:
    collector = compose["services"]["collector"]
    settings_file = host_path(collector, "/etc/lagscope/lagscope.yaml")
    settings = load_config(settings_file, environ=collector["environment"])
    assert settings.clusters[0].bootstrap_servers == ["kafka:9092"]
    # the collector serves /metrics inside the container where Prometheus scrapes it
    assert settings.metrics.enabled
    assert settings.metrics.bind == "0.0.0.0"
    assert str(settings.metrics.port) in collector["expose"]
    assert settings.collector.lake_path.is_relative_to("/var/lib/lagscope")
    # the alert routes are the settings' alerts section; the analytics service runs the alerts part
    assert settings.alerts.routes
    command = compose["services"]["analytics"]["command"]
    assert ("--component", "alerts") in itertools.pairwise(command)
    sink = compose["services"]["webhook-sink"]
    for route in settings.alerts.routes:
        assert route.url.startswith("http://webhook-sink:8080/")
        # the sender signs with the secret the sink checks
        assert route.secret_env in sink["command"]
        assert route.secret_env in sink["environment"]


def test_grafana_datasource_is_the_one_the_dashboards_use(compose: dict[str, Any]) -> None:
    from lagscope.dashboards.grafana_gen import PROMETHEUS_DS_UID

    grafana = compose["services"]["grafana"]
    ds_file = host_path(grafana, "/etc/grafana/provisioning/datasources/prometheus.yaml")
    (ds,) = yaml.safe_load(ds_file.read_text())["datasources"]
    assert ds["uid"] == PROMETHEUS_DS_UID
    assert ds["url"] == "http://prometheus:9090"
    providers = host_path(grafana, "/etc/grafana/provisioning/dashboards")
    (provider_file,) = providers.glob("*.yaml")
    (provider,) = yaml.safe_load(provider_file.read_text())["providers"]
    dash_dir = host_path(grafana, provider["options"]["path"])
    assert sorted(dash_dir.glob("*.json")), f"no generated dashboards in {dash_dir}"


@pytest.mark.prometheus
def test_prometheus_config_and_rules_pass_promtool(compose: dict[str, Any], tmp_path: Path) -> None:
    prom = compose["services"]["prometheus"]
    config = yaml.safe_load(host_path(prom, "/etc/prometheus/prometheus.yml").read_text())
    rule_files = []
    for pattern in config["rule_files"]:
        folder = host_path(prom, str(PurePosixPath(pattern).parent))
        matched = sorted(folder.glob(PurePosixPath(pattern).name))
        assert matched, f"rule_files {pattern} matches nothing in {folder}"
        rule_files += [str(p) for p in matched]
    config["rule_files"] = rule_files
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    proc = subprocess.run(["promtool", "check", "config", str(tmp_path / "prometheus.yml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr
    # each scrape target is a service of the stack on a port that service exposes
    services = compose["services"]
    for job in config["scrape_configs"]:
        for target in job["static_configs"][0]["targets"]:
            host, port = target.split(":")
            assert host in services, target
            assert port in services[host].get("expose", []), target


def test_every_lagscope_command_parses_with_the_real_cli(compose: dict[str, Any]) -> None:
    checked = 0
    for name, svc in compose["services"].items():
        command = svc.get("command")
        if not command or command[0] != "lagscope":
            continue
        root: Any = typer.main.get_command(lagscope_app)
        sub = root.commands.get(command[1])
        assert sub is not None, f"{name}: `lagscope {command[1]}` does not exist"
        sub.make_context(command[1], list(command[2:]))  # raises on unknown options or bad values
        checked += 1
    assert checked == 4  # collector, analytics, app, webhook-sink


def test_the_environment_overrides_the_mounted_settings(compose: dict[str, Any], tmp_path: Path) -> None:
    # KAFKA_BOOTSTRAP reaches the settings through LAGSCOPE_CLUSTERS__0__BOOTSTRAP_SERVERS
    doc = load_compose({"KAFKA_BOOTSTRAP": "broker-1:9094,broker-2:9094"})
    collector = doc["services"]["collector"]
    settings = load_config(host_path(collector, "/etc/lagscope/lagscope.yaml"),
                           environ={**collector["environment"], "PATH": os.environ.get("PATH", "")})
    assert settings.clusters[0].bootstrap_servers == ["broker-1:9094", "broker-2:9094"]


BUCKET_FILE = COMPOSE_DIR / "compose.bucket.yaml"
BUCKET_ENV_EXAMPLE = COMPOSE_DIR / "bucket.env.example"


def _merged_with_bucket(env: dict[str, str] | None = None) -> dict[str, Any]:
    """compose.yaml with compose.bucket.yaml over it, as `docker compose -f … -f …` merges them:
    a service's command and env_file replaced, its environment merged key by key."""
    base = load_compose(env)
    over = interpolate(yaml.safe_load(BUCKET_FILE.read_text()), env or {})
    for name, svc in over["services"].items():
        target = base["services"][name]
        for key, value in svc.items():
            if key == "environment":
                target[key] = {**target.get(key, {}), **value}
            else:
                target[key] = value
    return base


def _env_file(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def _shell_commands(script: str) -> list[list[str]]:
    """The lagscope command lines of a service's `sh -c` script (its `$(…)` and `$VAR` words
    stand for values)."""
    import shlex

    out = []
    for part in re.split(r"[;&]|\bdo\b|\bdone\b", script):
        words = shlex.split(part)
        if words and words[0] == "lagscope":
            out.append(["2026-01-01T00:00:00Z" if w.startswith("$(") else
                        "s3://b/p/results" if w.startswith("$") else w for w in words])
    return out


def test_the_bucket_override_points_every_lagscope_service_at_the_bucket(tmp_path: Path) -> None:
    doc = _merged_with_bucket()
    assert schema_errors(doc) == []
    assert schema_errors(interpolate(yaml.safe_load(BUCKET_FILE.read_text()), {})) == []
    # the credentials and the roots come from the env file only: none is written in a compose file
    for path in (COMPOSE_FILE, BUCKET_FILE):
        assert not re.search(r"AWS_(ACCESS|SECRET|SESSION)", path.read_text()), path
    example = _env_file(BUCKET_ENV_EXAMPLE)
    assert example["AWS_ACCESS_KEY_ID"] == example["AWS_SECRET_ACCESS_KEY"] == ""  # placeholders, no value
    for ignore in (".gitignore", ".dockerignore"):  # neither committed nor copied into an image
        assert "deploy/compose/bucket.env" in (ROOT / ignore).read_text().splitlines()
    bucket_env = {**example, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"}
    services = doc["services"]
    root: Any = typer.main.get_command(lagscope_app)
    commands = 0
    for name in ("collector", "analytics", "app"):
        svc = services[name]
        assert svc["env_file"] == ["./bucket.env"]
        # the env file's variables, then the service's environment (compose's order of precedence)
        environ = {**bucket_env, **svc["environment"]}
        settings = load_config(host_path(svc, "/etc/lagscope/lagscope.yaml"), environ=environ)
        assert settings.collector.lake == "s3://lagscope/kafka/lake"
        assert settings.analytics.results == "s3://lagscope/kafka/results"
        assert (settings.storage.endpoint, settings.storage.path_style) == ("http://minio:9000", True)
        assert settings.storage.credentials == "env"
        # the __consumer_offsets tail writes a bucket lake too: lagscope.yaml's setting holds
        assert settings.clusters[0].consumer_offsets_tail.enabled
        command = svc["command"]
        lines = _shell_commands(command[2]) if command[0] == "sh" else [command]
        for line in lines:
            assert "--config" in line
            assert "--lake" not in line  # the roots are the settings' (the env file)
            sub = root.commands[line[1]]
            sub.make_context(line[1], list(line[2:]))
            commands += 1
    assert commands == 4  # collect, results-exporter, analyze, ui
    assert [c[1] for c in _shell_commands(services["analytics"]["command"][2])] == ["results-exporter", "analyze"]
    assert "9840" in services["analytics"]["command"][2]  # where Prometheus scrapes the findings
    # another env file by name
    assert _merged_with_bucket({"LAGSCOPE_BUCKET_ENV": "/etc/b.env"})["services"]["app"]["env_file"] == ["/etc/b.env"]
