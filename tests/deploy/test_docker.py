"""The image's entrypoint (deploy/docker/entrypoint.sh) and the Dockerfile's inputs.

There is no Docker engine on CI machines, so the image is not built here; what can be
checked without one is: every file the Dockerfile copies exists, and the entrypoint starts
a Spark executor exactly as Spark on Kubernetes describes it (a stand-in `java` on PATH
records the command line it is given).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "docker" / "entrypoint.sh"


def test_every_file_the_dockerfile_copies_exists() -> None:
    text = (ROOT / "Dockerfile").read_text()
    sources = [src for line in text.splitlines()
               if line.startswith("COPY") and "--from=" not in line
               for src in line.split()[1:-1]]
    assert len(sources) >= 9
    for src in sources:
        assert (ROOT / src).exists(), f"Dockerfile copies {src}, which does not exist"
    # the build runs from the lock file without dev tools, and the image does not run as root
    assert "uv sync --frozen --no-dev" in text
    assert re.search(r"^USER 10001", text, re.MULTILINE)
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored
    assert "deploy/kafka/.cache" in ignored


def _run(tmp_path: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    for name in ("java", "lagscope"):
        (fake / name).write_text(f'#!/bin/sh\nprintf "%s\\n" "{name}" "$@" > "{tmp_path}/argv"\n')
        (fake / name).chmod(0o755)
    return subprocess.run(["bash", str(ENTRYPOINT), *args], capture_output=True, text=True, timeout=30,
                          env={"PATH": f"{fake}:/usr/bin:/bin", "SPARK_HOME": "/opt/spark", **env}, check=False)


def test_executor_mode_starts_the_kubernetes_executor_backend(tmp_path: Path) -> None:
    env = {"SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078", "SPARK_EXECUTOR_ID": "3",
           "SPARK_EXECUTOR_CORES": "2", "SPARK_APPLICATION_ID": "spark-abc", "SPARK_EXECUTOR_POD_IP": "10.0.0.9",
           "SPARK_EXECUTOR_MEMORY": "2g", "SPARK_RESOURCE_PROFILE_ID": "0", "SPARK_EXECUTOR_POD_NAME": "exec-3",
           # two JVM options, given out of order: they keep their numeric order
           "SPARK_JAVA_OPT_1": "-Dspark.driver.port=7078", "SPARK_JAVA_OPT_0": "-Dspark.app.id=spark-abc"}
    proc = _run(tmp_path, ["executor"], env)
    assert proc.returncode == 0, proc.stderr
    argv = (tmp_path / "argv").read_text().splitlines()
    assert argv[:5] == ["java", "-Dspark.app.id=spark-abc", "-Dspark.driver.port=7078", "-Xms2g", "-Xmx2g"]
    assert argv[6] == "/opt/spark/conf:/opt/spark/jars/*"
    assert argv[7] == "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend"
    flags = dict(zip(argv[8::2], argv[9::2], strict=True))
    assert flags == {"--driver-url": env["SPARK_DRIVER_URL"], "--executor-id": "3", "--cores": "2",
                     "--app-id": "spark-abc", "--hostname": "10.0.0.9", "--resourceProfileId": "0",
                     "--podName": "exec-3"}


def test_executor_mode_without_the_spark_environment_fails_clearly(tmp_path: Path) -> None:
    proc = _run(tmp_path, ["executor"], {})
    assert proc.returncode != 0
    assert "SPARK_DRIVER_URL is not set" in proc.stderr
    assert not (tmp_path / "argv").exists()


def test_other_arguments_run_as_given(tmp_path: Path) -> None:
    argv = ["lagscope", "run", "--config", "/etc/lagscope/lagscope.yaml"]
    proc = _run(tmp_path, argv, {})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "argv").read_text().splitlines() == argv
