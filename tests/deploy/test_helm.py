"""The Helm chart (deploy/k8s/lagscope) renders and every manifest it renders is valid.

- ``helm lint --strict`` and ``helm template`` with the real Helm (built from the Go module
  proxy by ``scripts/setup.sh --system`` into ``.tools/bin``); the chart's values.schema.json
  is enforced by Helm itself;
- core kinds (Deployment, CronJob, Service, …) against the Kubernetes JSON schemas, strict
  (unknown fields are errors), from the ``kubernetes-validate`` package;
- ServiceMonitor and PrometheusRule decoded strictly into prometheus-operator's own Go types
  (``deploy/k8s/crdcheck``, built by setup.sh); the PrometheusRule's rules pass ``promtool``;
- what ties the manifests together: selectors match pod labels, the ServiceMonitor finds the
  collector's metrics port, the mounted settings load, every lagscope command parses with the
  real CLI, the spark-submit file is the one the Dockerfile puts in the image.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer.main
import yaml

from lagscope.cli import app as lagscope_app
from lagscope.config import load_config

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "k8s" / "lagscope"
KUBE_VERSION = "1.33.0"
TOOLS = ROOT / ".tools" / "bin"

FULL_VALUES: dict[str, Any] = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "prometheusRule": {"enabled": True},
    # merged into the chart's default config (its clusters stay)
    "config": {"alerts": {"routes": [{"name": "oncall", "url": "https://hooks.example.org/lagscope",
                                      "format": "generic", "groups": ["orders-.*"],
                                      "secret_env": "LAGSCOPE_ONCALL_SECRET"}]}},
    "existingSecret": "lagscope-secrets",
    "extraEnv": [{"name": "LAGSCOPE_COLLECTOR__INTERVAL_S", "value": "30"}],
    "analytics": {"sparkConf": {"spark.sql.adaptive.enabled": True}, "executor": {"instances": 3}},
    "app": {"service": {"type": "LoadBalancer"}},
}


def tool(name: str) -> str:
    """A tool that scripts/setup.sh --system installs into .tools/bin (or one on PATH)."""
    path = TOOLS / name
    if path.exists():
        return str(path)
    found = shutil.which(name)
    assert found, f"{name} is missing: run scripts/setup.sh --system (it builds it into .tools/bin)"
    return found


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HELM_CACHE_HOME": "/tmp/lagscope-helm/cache",
           "HELM_CONFIG_HOME": "/tmp/lagscope-helm/config", "HELM_DATA_HOME": "/tmp/lagscope-helm/data"}
    proc = subprocess.run([tool("helm"), *args], capture_output=True, text=True, timeout=120, env=env, check=False)
    if check:
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def render(tmp_path: Path, values: dict[str, Any] | None = None, *extra: str,
           release: str = "rel") -> list[dict[str, Any]]:
    args = ["template", release, str(CHART), "--namespace", "observability", "--kube-version", KUBE_VERSION]
    if values:
        (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
        args += ["-f", str(tmp_path / "values.yaml")]
    out = helm(*args, *extra).stdout
    (tmp_path / "rendered.yaml").write_text(out)
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def core_errors(doc: dict[str, Any]) -> str | None:
    try:
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return f"{doc['kind']}/{doc['metadata']['name']}: {'/'.join(map(str, exc.path))}: {exc.message}"
    return None


def crdcheck(docs: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([tool("crdcheck")], input=yaml.safe_dump_all(docs), capture_output=True,
                          text=True, timeout=60, check=False)


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return render(tmp_path_factory.mktemp("helm-full"), FULL_VALUES)


def test_chart_lints_strictly() -> None:
    out = helm("lint", "--strict", str(CHART), "--kube-version", KUBE_VERSION)
    assert "0 chart(s) failed" in out.stdout


def test_default_render_has_the_components(tmp_path: Path) -> None:
    docs = render(tmp_path)
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
    assert kinds == ["ConfigMap/rel-lagscope", "CronJob/rel-lagscope-analytics", "Deployment/rel-lagscope-app",
                     "Deployment/rel-lagscope-collector", "PersistentVolumeClaim/rel-lagscope-lake",
                     "Role/rel-lagscope-spark", "RoleBinding/rel-lagscope-spark", "Service/rel-lagscope-app",
                     "Service/rel-lagscope-collector", "ServiceAccount/rel-lagscope"]
    assert [e for e in map(core_errors, docs) if e] == []


def test_full_render_validates_against_the_kubernetes_and_operator_schemas(full: list[dict[str, Any]]) -> None:
    core = [d for d in full if not d["apiVersion"].startswith("monitoring.coreos.com/")]
    assert [e for e in map(core_errors, core) if e] == []
    proc = crdcheck(full)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(proc.stdout.splitlines()) == ["ok PrometheusRule/rel-lagscope", "ok ServiceMonitor/rel-lagscope"]


@pytest.mark.parametrize(
    ("kind", "mutate", "expected"),
    [
        # a container port is a number; a name there is refused by the Kubernetes schema
        ("Deployment", lambda d: d["spec"]["template"]["spec"]["containers"][0]["ports"][0]
         .update(containerPort="metrics"), "containerPort"),
        # a misspelt field of a CronJob is refused in strict mode
        ("CronJob", lambda d: d["spec"].update(schedul="* * * * *"), "schedul"),
        # a misspelt ServiceMonitor endpoint field is refused by the operator's types
        ("ServiceMonitor", lambda d: d["spec"]["endpoints"][0].update(intervall="5s"), "intervall"),
        # a rule's `for` must be a duration
        ("PrometheusRule", lambda d: d["spec"]["groups"][0]["rules"][0].update({"for": ["5m"]}), "INVALID"),
    ],
)
def test_validators_reject_broken_manifests(full: list[dict[str, Any]], kind: str, mutate: Any,
                                            expected: str) -> None:
    doc = copy.deepcopy(by_kind(full, kind)[0])
    mutate(doc)
    if doc["apiVersion"].startswith("monitoring.coreos.com/"):
        proc = crdcheck([doc])
        assert proc.returncode == 1
        assert expected in proc.stdout
    else:
        error = core_errors(doc)
        assert error is not None
        assert expected in error


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # values.schema.json: at least one executor
        (["--set", "analytics.executor.instances=0"], "analytics/executor/instances"),
        # values.schema.json: the master is a Spark master URL
        (["--set", "analytics.master=http://x"], "analytics/master"),
        # executors on Kubernetes cannot read a lake that lives in the driver pod only
        (["--set", "lake.persistence.enabled=false"], "needs the lake on a shared volume"),
        # the alert routes are config.alerts now (lagscope's settings): the old top-level key is refused
        (["--set", "alerts.lookback_s=60"], "additional properties 'alerts' not allowed"),
        # a bucket needs its name; credentials are never a value of the chart
        (["--set", "objectStore.enabled=true"], "objectStore"),
        (["--set", "objectStore.enabled=true,objectStore.bucket=bucket-1,objectStore.accessKey=x"],
         "additional properties 'accessKey' not allowed"),
        (["--set", "objectStore.enabled=true,objectStore.bucket=bucket-1,objectStore.endpoint=minio:9000"],
         "objectStore/endpoint"),
        # the outbox's claim: a Kubernetes quantity, one writer, an absolute mount of its own
        (["--set", "collector.outbox.persistence.size=lots"], "collector/outbox/persistence/size"),
        (["--set-json", 'collector.outbox.persistence.accessModes=["ReadWriteMany"]'],
         "collector/outbox/persistence/accessModes"),
        (["--set", "collector.outbox.mountPath=outbox"], "collector/outbox/mountPath"),
        (["--set", "collector.outbox.persistence.enabeld=true"], "additional properties 'enabeld' not allowed"),
        (["--set-json", 'config.alerts.routes=[{"name":"a","url":"https://h.example.org"}]',
          "--set", "collector.outbox.mountPath=/var/lib/lagscope/"], "must differ from lake.mountPath"),
    ],
)
def test_bad_values_fail_the_render_with_a_clear_message(args: list[str], message: str) -> None:
    proc = helm("template", "rel", str(CHART), "--kube-version", KUBE_VERSION, *args, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    if doc["kind"] == "CronJob":
        spec = spec["jobTemplate"]["spec"]
    pod: dict[str, Any] = spec["template"]
    return pod


def test_selectors_services_and_the_service_monitor_fit_together(full: list[dict[str, Any]]) -> None:
    deployments = {d["metadata"]["name"]: d for d in by_kind(full, "Deployment")}
    for svc in by_kind(full, "Service"):
        target = deployments[svc["metadata"]["name"]]
        labels = target["spec"]["template"]["metadata"]["labels"]
        assert svc["spec"]["selector"].items() <= labels.items()
        assert target["spec"]["selector"]["matchLabels"].items() <= labels.items()
        port_names = {p["name"] for c in target["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= port_names
    (monitor,) = by_kind(full, "ServiceMonitor")
    selected = [s for s in by_kind(full, "Service")
                if monitor["spec"]["selector"]["matchLabels"].items() <= s["metadata"]["labels"].items()]
    assert [s["metadata"]["name"] for s in selected] == ["rel-lagscope-collector"]
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in selected[0]["spec"]["ports"]}
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    # the collector never runs twice on the same clusters
    assert deployments["rel-lagscope-collector"]["spec"]["replicas"] == 1


def _scrape_jobs(docs: list[dict[str, Any]]) -> dict[str, str]:
    """The ``job`` label prometheus-operator gives each Service a ServiceMonitor selects: the value
    of the Service's label named by ``spec.jobLabel`` when it has it, else the Service's name."""
    jobs = {}
    for monitor in by_kind(docs, "ServiceMonitor"):
        job_label = monitor["spec"].get("jobLabel")
        for svc in by_kind(docs, "Service"):
            name, labels = svc["metadata"]["name"], svc["metadata"].get("labels", {})
            if monitor["spec"]["selector"]["matchLabels"].items() <= labels.items():
                jobs[name] = labels.get(job_label, name)
    return jobs


def _rule_jobs() -> set[str]:
    jobs = set()
    for f in sorted((ROOT / "deploy" / "prometheus" / "rules").glob("*.yml")):
        for group in yaml.safe_load(f.read_text())["groups"]:
            for rule in group["rules"]:
                jobs |= set(re.findall(r'\bjob\s*=~?\s*"([^"]+)"', rule["expr"]))
    return jobs


@pytest.mark.parametrize(("release", "values", "service"), [
    ("lagscope", {}, "lagscope-collector"),                     # the name the rules were written for
    ("obs", {}, "obs-lagscope-collector"),                      # any other release name
    ("rel", {"fullnameOverride": "kafka-lag"}, "kafka-lag-collector"),
    ("rel", {"nameOverride": "lag"}, "rel-lag-collector"),
])
def test_the_scrape_job_is_the_one_the_alert_rules_match_whatever_the_release(
        tmp_path: Path, release: str, values: dict[str, Any], service: str) -> None:
    # the rules match up{job="lagscope-collector"}: with another job name LagscopeCollectorAbsent
    # fires forever and LagscopeCollectorDown never fires
    assert _rule_jobs() == {"lagscope-collector"}
    docs = render(tmp_path, {**values, "serviceMonitor": {"enabled": True}}, release=release)
    assert _scrape_jobs(docs) == {service: "lagscope-collector"}
    assert _rule_jobs() <= set(_scrape_jobs(docs).values())
    proc = crdcheck(by_kind(docs, "ServiceMonitor"))
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _container_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def _cli_parses(argv: list[str]) -> None:
    root: Any = typer.main.get_command(lagscope_app)
    sub = root.commands.get(argv[0])
    assert sub is not None, f"`lagscope {argv[0]}` does not exist"
    if argv[0] in ("spark", "lake"):  # command groups
        sub = sub.commands[argv[1]]
        argv = argv[1:]
    sub.make_context(argv[0], list(argv[1:]))


def test_commands_settings_and_image_paths_are_consistent(full: list[dict[str, Any]], tmp_path: Path) -> None:
    (configmap,) = by_kind(full, "ConfigMap")
    (cron,) = by_kind(full, "CronJob")
    collector = next(d for d in by_kind(full, "Deployment") if d["metadata"]["name"].endswith("collector"))
    container = _pod(collector)["spec"]["containers"][0]
    env = _container_env(container)
    # the settings the chart mounts load with the environment the chart gives the container
    (tmp_path / "lagscope.yaml").write_text(configmap["data"]["lagscope.yaml"])
    settings = load_config(tmp_path / "lagscope.yaml", environ=env)
    assert str(settings.collector.lake_path) == "/var/lib/lagscope/lake"
    assert (settings.metrics.bind, settings.metrics.port) == ("0.0.0.0", 9839)
    assert settings.collector.interval_s == 30  # extraEnv reaches the settings
    # the alert routes are the settings' alerts section, and with routes the collector runs the alerts part
    assert [r.name for r in settings.alerts.routes] == ["oncall"]
    assert ("--component", "alerts") in itertools.pairwise(container["args"])
    # every lagscope command line parses with the real CLI
    for doc in by_kind(full, "Deployment"):
        args = _pod(doc)["spec"]["containers"][0]["args"]
        assert args[0] == "lagscope"
        _cli_parses(args[1:])
    driver = _pod(cron)["spec"]["containers"][0]
    args = driver["args"]
    # before each run, retention: the results the run writes, with the settings the collector has
    (prune,) = _pod(cron)["spec"]["initContainers"]
    assert prune["args"][:3] == ["lagscope", "lake", "prune"]
    _cli_parses(prune["args"][1:])
    assert prune["args"][prune["args"].index("--results") + 1] == args[args.index("--results") + 1]
    config = container["args"][container["args"].index("--config") + 1]
    assert prune["args"][prune["args"].index("--config") + 1] == config
    assert prune["volumeMounts"] == driver["volumeMounts"]
    assert args[0] == "spark-submit"
    entry = next(a for a in args if a.endswith(".py"))
    _cli_parses(args[args.index(entry) + 1:])
    # the spark-submit file is where the Dockerfile copies deploy/spark/entry.py
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"COPY deploy/spark/entry.py {entry}" in dockerfile
    # the executors get the lake volume the driver has, and the master is the same for both
    claim = _pod(cron)["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"]
    assert f"spark.kubernetes.executor.volumes.persistentVolumeClaim.lake.options.claimName={claim}" in args
    masters = [args[i + 1] for i, a in enumerate(args) if a == "--master"]
    assert len(masters) == 2
    assert len(set(masters)) == 1
    assert masters[0].startswith("k8s://")
    assert "spark.executor.instances=3" in args
    # the first incremental run needs a start: analytics.backfill (24h) before the render
    since = dt.datetime.fromisoformat(args[args.index("--since") + 1])
    assert abs((dt.datetime.now(dt.UTC) - since) - dt.timedelta(hours=24)) < dt.timedelta(minutes=10)


@pytest.mark.prometheus
def test_prometheus_rule_carries_the_repository_rules_and_they_pass_promtool(
        full: list[dict[str, Any]], tmp_path: Path) -> None:
    (rule,) = by_kind(full, "PrometheusRule")
    groups = rule["spec"]["groups"]
    expected = []
    for f in sorted((ROOT / "deploy" / "prometheus" / "rules").glob("*.yml")):
        expected += yaml.safe_load(f.read_text())["groups"]
    assert groups == expected
    assert groups, "no rule groups"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}))
    proc = subprocess.run(["promtool", "check", "rules", str(tmp_path / "rules.yml")],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    count = sum(len(g["rules"]) for g in groups)
    assert re.search(rf"SUCCESS: {count} rules found", proc.stdout + proc.stderr)


def _all_env(container: dict[str, Any]) -> list[dict[str, Any]]:
    return list(container.get("env", []))


def test_the_bucket_values_reach_every_container_and_the_settings_open_the_bucket(
        tmp_path: Path, s3_server: Any, s3_prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """objectStore: the s3 roots, the storage section and the credentials' Secret reach the
    collector, the app, the CronJob's retention and its spark-submit (driver and executors); no
    volume is shared; the settings a container loads open the bucket (the real S3 server)."""
    from lagscope import lake
    from lagscope.storage import open_store

    values = {"objectStore": {"enabled": True, "bucket": s3_server.bucket, "prefix": f"/{s3_prefix}/",
                              "endpoint": s3_server.endpoint, "region": "eu-west-1", "pathStyle": True,
                              "credentials": "env", "credentialsSecret": "lagscope-bucket",
                              "checksumWhenRequired": True, "sessionToken": True},
              "lake": {"persistence": {"enabled": False}}, "existingSecret": "lagscope-secrets"}
    docs = render(tmp_path, values)
    for doc in docs:
        assert core_errors(doc) is None
    lake_url = f"s3://{s3_server.bucket}/{s3_prefix}/lake"
    results_url = f"s3://{s3_server.bucket}/{s3_prefix}/results"
    assert by_kind(docs, "PersistentVolumeClaim") == []
    (configmap,) = by_kind(docs, "ConfigMap")
    (tmp_path / "lagscope.yaml").write_text(configmap["data"]["lagscope.yaml"])
    (cron,) = by_kind(docs, "CronJob")
    pods = [_pod(d) for d in [*by_kind(docs, "Deployment"), cron]]
    containers = [c for pod in pods for c in [*pod["spec"].get("initContainers", []), *pod["spec"]["containers"]]]
    assert len(containers) == 4  # collector, app, retention, spark driver
    for pod in pods:
        assert all("persistentVolumeClaim" not in v for v in pod["spec"]["volumes"])
    for container in containers:
        env = _container_env(container)
        # never a credential inline: only the Secret's names
        assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} & {e["name"] for e in
                                                                                       _all_env(container)}
        assert [r["secretRef"]["name"] for r in container["envFrom"]] == ["lagscope-secrets", "lagscope-bucket"]
        assert env["AWS_REQUEST_CHECKSUM_CALCULATION"] == "when_required"
        settings = load_config(tmp_path / "lagscope.yaml", environ=env)
        assert (settings.collector.lake, settings.analytics.results) == (lake_url, results_url)
        assert (settings.storage.endpoint, settings.storage.region) == (s3_server.endpoint, "eu-west-1")
        assert (settings.storage.path_style, settings.storage.credentials) == (True, "env")
        args = container["args"]
        if "--lake" in args:
            assert args[args.index("--lake") + 1] == lake_url
        if "--results" in args:
            assert args[args.index("--results") + 1] == results_url
    by_name = {c["name"]: c for c in containers}
    collector, app, prune, driver = (by_name[n] for n in ("collector", "app", "retention", "spark-driver"))
    assert collector["args"][:4] == ["lagscope", "collect", "--config", "/etc/lagscope/lagscope.yaml"]
    assert app["args"][:3] == ["lagscope", "ui", "--config"]
    assert prune["args"][:3] == ["lagscope", "lake", "prune"]
    for c in (collector, app, prune):
        _cli_parses(c["args"][1:])
    args = driver["args"]
    entry = next(a for a in args if a.endswith(".py"))
    assert args[args.index(entry) + 1:args.index(entry) + 8] == [
        "analyze", "--config", "/etc/lagscope/lagscope.yaml", "--lake", lake_url, "--results", results_url]
    _cli_parses(args[args.index(entry) + 1:])
    confs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    assert "spark.kubernetes.executor.secretKeyRef.AWS_ACCESS_KEY_ID=lagscope-bucket:AWS_ACCESS_KEY_ID" in confs
    assert "spark.kubernetes.executor.secretKeyRef.AWS_SECRET_ACCESS_KEY=lagscope-bucket:AWS_SECRET_ACCESS_KEY" in confs
    assert "spark.kubernetes.executor.secretKeyRef.AWS_SESSION_TOKEN=lagscope-bucket:AWS_SESSION_TOKEN" in confs
    assert "spark.executorEnv.AWS_REQUEST_CHECKSUM_CALCULATION=when_required" in confs
    assert not [c for c in confs if "persistentVolumeClaim" in c]
    # Spark's own s3a://: the set `lagscope spark s3a-conf` gives for the settings the driver loads,
    # the jars where the image has them
    assert _s3a_confs(confs) == _s3a_expected(load_config(tmp_path / "lagscope.yaml", environ=_container_env(driver)))
    # permanent keys (the default): the executors are not told to expect a token the Secret lacks
    plain = render(tmp_path, {**values, "objectStore": {**values["objectStore"], "sessionToken": False}})
    (plain_cron,) = by_kind(plain, "CronJob")
    plain_args = [a for c in _pod(plain_cron)["spec"]["containers"] for a in c["args"]]
    assert not [a for a in plain_args if "AWS_SESSION_TOKEN" in a]
    # what the collector's settings open is the bucket: a sweep file written through them is read back
    # through the app's (the Secret's variables stand in the environment, as envFrom puts them)
    for k, v in s3_server.credentials.items():
        monkeypatch.setenv(k, v)
    mine = load_config(tmp_path / "lagscope.yaml", environ=_container_env(collector))
    theirs = load_config(tmp_path / "lagscope.yaml", environ=_container_env(app))
    import pyarrow as pa

    from lagscope.schema import SWEEPS
    row = {"sweep_ts": dt.datetime(2026, 5, 1, 12, tzinfo=dt.UTC), "duration_ms": 1.0, "ok": True}
    lake.write_rows(open_store(mine.collector.lake, mine.storage), SWEEPS, "prod", [row])
    got = lake.read_table(open_store(theirs.collector.lake, theirs.storage), "sweeps")
    assert got.column("ok").to_pylist() == [True]
    assert isinstance(got, pa.Table)


IMAGE_S3A_JARS = "/opt/lagscope/s3a-jars"


def _s3a_confs(confs: list[str]) -> dict[str, str]:
    """The CronJob's s3a settings: the class path and the fs.s3a keys of its --conf values."""
    return dict(c.split("=", 1) for c in confs if "fs.s3a." in c or "extraClassPath" in c)


def _s3a_expected(settings: Any) -> dict[str, str]:
    from lagscope import s3a

    args = s3a.submit_args(settings.storage, IMAGE_S3A_JARS)
    return dict(a.split("=", 1) for a in args[1::2])


@pytest.mark.parametrize("store", [
    {"endpoint": "", "region": "eu-central-1", "pathStyle": None, "credentials": "default"},
    {"endpoint": "https://minio.example.org:9000", "pathStyle": None, "credentials": "anonymous"},
    {"endpoint": "http://minio.storage.svc:9000/", "pathStyle": False, "credentials": "env"},
])
def test_the_cronjob_gives_spark_s3a_as_lagscope_spark_s3a_conf_does(tmp_path: Path, store: dict[str, Any]) -> None:
    """Every endpoint, path-style and credentials choice: the CronJob's spark-submit carries the
    s3a settings the storage section it loads gives, and the image holds the jars there."""
    values = {"objectStore": {"enabled": True, "bucket": "bucket-1", **store},
              "lake": {"persistence": {"enabled": False}}}
    docs = render(tmp_path, values)
    (configmap,) = by_kind(docs, "ConfigMap")
    (tmp_path / "lagscope.yaml").write_text(configmap["data"]["lagscope.yaml"])
    (cron,) = by_kind(docs, "CronJob")
    (driver,) = _pod(cron)["spec"]["containers"]
    args = driver["args"]
    confs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    settings = load_config(tmp_path / "lagscope.yaml", environ=_container_env(driver))
    assert settings.storage.credentials == store["credentials"]
    got = _s3a_confs(confs)
    assert got == _s3a_expected(settings)
    assert ("spark.hadoop.fs.s3a.endpoint" in got) == bool(store["endpoint"])
    assert not [c for c in confs if "secret" in c.lower() and "secretKeyRef" not in c]
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert f"COPY --from=s3a-jars /opt/s3a-jars {IMAGE_S3A_JARS}" in dockerfile
    assert f"LAGSCOPE_S3A_JARS={IMAGE_S3A_JARS}" in dockerfile


ROUTES = {"alerts": {"routes": [{"name": "a", "url": "https://h.example.org"}]}}
BUCKET = {"enabled": True, "bucket": "bucket-1", "prefix": "kafka", "credentials": "env"}


def _collector_pod(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    collector = next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("collector"))
    return collector, _pod(collector)["spec"]


def _outbox_volume(pod: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The --outbox file of the collector and the volume it is on (the deepest mount above it)."""
    container = pod["containers"][0]
    args = container["args"]
    outbox = args[args.index("--outbox") + 1]
    mounts = [m for m in container["volumeMounts"] if outbox.startswith(m["mountPath"].rstrip("/") + "/")]
    assert mounts, f"the outbox {outbox} is on no volume (the root filesystem is read-only)"
    mount = max(mounts, key=lambda m: len(m["mountPath"]))
    return outbox, next(v for v in pod["volumes"] if v["name"] == mount["name"])


def test_bucket_with_alert_routes_runs_the_collector_and_alerts_with_a_local_outbox(tmp_path: Path) -> None:
    """objectStore and config.alerts.routes: the collector pod runs `lagscope run` with the
    collector and alerts parts on the bucket's results, its outbox a local file (never in the
    bucket) on its own claim, which outlives the pod."""
    values = {"objectStore": BUCKET, "lake": {"persistence": {"enabled": False}}, "config": ROUTES}
    docs = render(tmp_path, values)
    collector, pod = _collector_pod(docs)
    args = pod["containers"][0]["args"]
    assert args[:4] == ["lagscope", "run", "--config", "/etc/lagscope/lagscope.yaml"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--component"] == ["collector", "alerts"]
    assert args[args.index("--results") + 1] == "s3://bucket-1/kafka/results"
    outbox, volume = _outbox_volume(pod)
    assert not outbox.startswith("s3://")
    assert volume["persistentVolumeClaim"]["claimName"] == "rel-lagscope-outbox"
    assert [c["metadata"]["name"] for c in by_kind(docs, "PersistentVolumeClaim")] == ["rel-lagscope-outbox"]
    assert "initContainers" not in pod  # no lake claim, so no earlier outbox to move
    assert collector["spec"]["strategy"] == {"type": "Recreate"}
    assert [e for e in map(core_errors, docs) if e] == []
    _cli_parses(args[1:])


@pytest.mark.parametrize("lake", ["volume", "bucket"])
def test_alert_routes_put_the_outbox_on_its_own_read_write_once_claim(tmp_path: Path, lake: str) -> None:
    """With routes the outbox is on a claim of its own, whether the lake is a claim or a bucket:
    ReadWriteOnce with the size and class asked for, mounted in the collector only, --outbox
    inside that mount; the collector is Recreate'd (one replica), so one pod writes it."""
    values: dict[str, Any] = {"config": ROUTES, "collector": {"outbox": {
        "mountPath": "/data/outbox", "persistence": {"size": "2Gi", "storageClass": "fast-ssd"}}}}
    if lake == "bucket":
        values["objectStore"] = BUCKET
    docs = render(tmp_path, values)
    claims = {c["metadata"]["name"]: c for c in by_kind(docs, "PersistentVolumeClaim")}
    assert sorted(claims) == (["rel-lagscope-lake", "rel-lagscope-outbox"] if lake == "volume"
                              else ["rel-lagscope-outbox"])
    spec = claims["rel-lagscope-outbox"]["spec"]
    assert spec == {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast-ssd",
                    "resources": {"requests": {"storage": "2Gi"}}}
    assert claims["rel-lagscope-outbox"]["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    collector, pod = _collector_pod(docs)
    assert collector["spec"]["replicas"] == 1
    assert collector["spec"]["strategy"] == {"type": "Recreate"}
    outbox, volume = _outbox_volume(pod)
    assert outbox == "/data/outbox/alerts-outbox.sqlite"
    assert volume == {"name": "outbox", "persistentVolumeClaim": {"claimName": "rel-lagscope-outbox"}}
    # the other pods do not mount it (a ReadWriteOnce claim would pin them to the collector's node)
    for doc in [*by_kind(docs, "Deployment"), *by_kind(docs, "CronJob")]:
        if doc is not collector:
            assert "rel-lagscope-outbox" not in str(_pod(doc)["spec"]["volumes"])
    assert [e for e in map(core_errors, docs) if e] == []
    _cli_parses(pod["containers"][0]["args"][1:])


def test_an_existing_claim_is_the_outbox_volume_as_is(tmp_path: Path) -> None:
    values = {"config": ROUTES, "collector": {"outbox": {"persistence": {"existingClaim": "my-outbox"}}}}
    docs = render(tmp_path, values)
    assert [c["metadata"]["name"] for c in by_kind(docs, "PersistentVolumeClaim")] == ["rel-lagscope-lake"]
    _, pod = _collector_pod(docs)
    outbox, volume = _outbox_volume(pod)
    assert volume["persistentVolumeClaim"] == {"claimName": "my-outbox"}
    assert outbox == "/var/lib/lagscope-outbox/alerts-outbox.sqlite"


@pytest.mark.parametrize("lake", ["volume", "bucket"])
def test_outbox_persistence_disabled_keeps_the_outbox_under_the_lake_mount(tmp_path: Path, lake: str) -> None:
    """collector.outbox.persistence.enabled=false: the render before the outbox had a claim, the
    file under lake.mountPath: on the lake's claim, or with a bucket on the pod's emptyDir."""
    values: dict[str, Any] = {"config": ROUTES, "collector": {"outbox": {"persistence": {"enabled": False}}}}
    if lake == "bucket":
        values["objectStore"] = BUCKET
    docs = render(tmp_path, values)
    assert "rel-lagscope-outbox" not in [c["metadata"]["name"] for c in by_kind(docs, "PersistentVolumeClaim")]
    _, pod = _collector_pod(docs)
    outbox, volume = _outbox_volume(pod)
    assert outbox == "/var/lib/lagscope/alerts-outbox.sqlite"
    assert volume["name"] == "lake"
    if lake == "bucket":
        assert volume == {"name": "lake", "emptyDir": {}}
    else:
        assert volume["persistentVolumeClaim"] == {"claimName": "rel-lagscope-lake"}
    assert "outbox" not in [v["name"] for v in pod["volumes"]]
    assert "initContainers" not in pod
    _cli_parses(pod["containers"][0]["args"][1:])


def test_without_routes_there_is_no_outbox(tmp_path: Path) -> None:
    for values in ({}, {"objectStore": BUCKET}):
        docs = render(tmp_path, values)
        assert "rel-lagscope-outbox" not in [c["metadata"]["name"] for c in by_kind(docs, "PersistentVolumeClaim")]
        _, pod = _collector_pod(docs)
        assert "--outbox" not in pod["containers"][0]["args"]
        assert "outbox" not in [v["name"] for v in pod["volumes"]]


def _outbox_rows(path: Path) -> tuple[list[dict[str, object]], dict[str, Any]]:
    from lagscope.alerts import Outbox

    with Outbox(path) as box, box.transaction() as db:
        states = Outbox.states_in(db)
    with Outbox(path) as box:
        return box.entries(), states


def test_the_outbox_moves_off_the_lake_claim_once_with_its_wal(tmp_path: Path) -> None:
    """Upgrading a release whose outbox was on the lake's claim: the collector's init container
    (run here with the rendered script and paths) copies it onto the new claim with what its WAL
    still held (a collector killed before a checkpoint), renames the old file, and does nothing
    once the new outbox exists."""
    from lagscope.alerts import Outbox

    lake, new_dir = tmp_path / "lake", tmp_path / "outbox"
    lake.mkdir()
    new_dir.mkdir()
    docs = render(tmp_path, {"config": ROUTES, "lake": {"mountPath": str(lake)},
                             "collector": {"outbox": {"mountPath": str(new_dir)}}})
    _, pod = _collector_pod(docs)
    (init,) = pod["initContainers"]
    assert init["args"][:2] == ["python", "-c"]
    script, old, new = init["args"][2:]
    assert old == str(lake / "alerts-outbox.sqlite")
    assert new == pod["containers"][0]["args"][pod["containers"][0]["args"].index("--outbox") + 1]
    assert {m["name"]: m["mountPath"] for m in init["volumeMounts"]} == {"lake": str(lake), "outbox": str(new_dir),
                                                                         "tmp": "/tmp"}
    # the old outbox as a SIGKILL leaves it: its last transactions in the WAL only
    killed = tmp_path / "killed"
    killed.mkdir()
    box = Outbox(tmp_path / "live.sqlite")
    with box.transaction() as db:
        Outbox.enqueue_in(db, idempotency_key="k1", route="a", finding_key="orders/stall", state="firing",
                          body=b"{}", now=100.0)
        Outbox.set_state_in(db, "orders/stall", "firing", 1, "{}", 100.0)
    for suffix in ("", "-wal"):
        (killed / f"alerts-outbox.sqlite{suffix}").write_bytes((tmp_path / f"live.sqlite{suffix}").read_bytes())
    box.close()
    (tmp_path / "main-only").mkdir()
    (tmp_path / "main-only" / "o.sqlite").write_bytes((killed / "alerts-outbox.sqlite").read_bytes())
    assert _outbox_rows(tmp_path / "main-only" / "o.sqlite")[0] == []  # the rows are in the WAL only
    for suffix in ("", "-wal"):
        (lake / f"alerts-outbox.sqlite{suffix}").write_bytes((killed / f"alerts-outbox.sqlite{suffix}").read_bytes())
    expected = _outbox_rows(killed / "alerts-outbox.sqlite")
    assert [e["idempotency_key"] for e in expected[0]] == ["k1"]

    def move() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", script, old, new], capture_output=True, text=True,
                              timeout=60, check=True)

    assert "moved" in move().stdout
    assert not Path(old).exists()
    assert Path(old + ".moved").exists()
    assert _outbox_rows(Path(new)) == expected
    # the next start: the new outbox exists, nothing is moved, even if an old file is there again
    with Outbox(new) as box, box.transaction() as db:
        Outbox.set_state_in(db, "orders/stall", "resolved", 1, "{}", 200.0)
    Path(old).write_bytes(b"")
    assert move().stdout == ""
    assert Path(old).read_bytes() == b""
    assert _outbox_rows(Path(new))[1]["orders/stall"].state == "resolved"
