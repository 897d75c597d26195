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


def test_bucket_with_alert_routes_runs_the_collector_and_alerts_with_a_local_outbox(tmp_path: Path) -> None:
    """objectStore and config.alerts.routes: the collector pod runs `lagscope run` with the
    collector and alerts parts on the bucket's results, its outbox a file on the pod's own volume
    (never in the bucket)."""
    values = {"objectStore": {"enabled": True, "bucket": "bucket-1", "prefix": "kafka", "credentials": "env"},
              "lake": {"persistence": {"enabled": False}},
              "config": {"alerts": {"routes": [{"name": "a", "url": "https://h.example.org"}]}}}
    docs = render(tmp_path, values)
    collector = next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("collector"))
    pod = _pod(collector)["spec"]
    args = pod["containers"][0]["args"]
    assert args[:4] == ["lagscope", "run", "--config", "/etc/lagscope/lagscope.yaml"]
    assert [args[i + 1] for i, a in enumerate(args) if a == "--component"] == ["collector", "alerts"]
    assert args[args.index("--results") + 1] == "s3://bucket-1/kafka/results"
    outbox = args[args.index("--outbox") + 1]
    assert not outbox.startswith("s3://")
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mount = next(p for p in mounts if outbox.startswith(p + "/"))
    assert "emptyDir" in volumes[mounts[mount]]  # the pod's own volume: no PVC, no bucket
    _cli_parses(args[1:])
