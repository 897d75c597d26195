"""Spark's own S3 connector for an ``s3://`` lake or results root: hadoop-aws (``s3a://``) with
pinned jars, configured from the ``storage`` section, for Spark's own reads and writes.

    >>> conf = spark_conf(StorageConfig(endpoint="http://127.0.0.1:8333", path_style=True))  # doctest: +SKIP
    >>> spark.read.parquet(to_s3a("s3://lagscope/prod/results/lag_trends"))                   # doctest: +SKIP

lagscope's analytics do not need it: their tasks read and write the bucket with pyarrow
(:mod:`lagscope.storage`). It is for what Spark itself opens: a user's
``spark.read.parquet("s3a://…/results/lag_trends")`` in the session lagscope builds, and the
``spark-submit --conf`` set of a cluster job (``lagscope spark s3a-conf``).

The jars (hadoop-aws of pyspark's Hadoop version and the AWS SDK v2 modules it needs) are pinned
in ``deploy/spark/pom.xml`` and fetched from Maven Central once (:func:`ensure_jars`, ``lagscope
spark jars``, ``scripts/setup.sh``) into ``deploy/spark/.cache/s3a-<version>/`` or the folder
``$LAGSCOPE_S3A_JARS`` names (the image's ``/opt/lagscope/s3a-jars``).

No secret goes into the Spark or Hadoop configuration: the credentials come from provider
classes that read the same sources as :mod:`lagscope.storage` on the driver and on each executor
(:data:`PROVIDERS`), never from ``fs.s3a.access.key``/``secret.key``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from lagscope.errors import JarsUnavailable
from lagscope.storage import Store

if TYPE_CHECKING:
    from lagscope.config import StorageConfig

__all__ = ["HADOOP_VERSION", "PROVIDERS", "ensure_jars", "hadoop_conf", "jars", "jars_dir", "session_conf",
           "spark_conf", "submit_args", "to_s3a"]

log = logging.getLogger(__name__)

#: pyspark's bundled Hadoop (pyspark/jars/hadoop-client-api-<version>.jar); hadoop-aws must match
HADOOP_VERSION = "3.5.0"

_SDK = "software.amazon.awssdk.auth.credentials."
#: ``fs.s3a.aws.credentials.provider`` for each ``storage.credentials``: the same sources, in the
#: same order, as the AWS SDK's default chain that pyarrow (lagscope.storage) uses
PROVIDERS: dict[str, tuple[str, ...]] = {
    "default": (f"{_SDK}EnvironmentVariableCredentialsProvider",       # AWS_ACCESS_KEY_ID, …
                f"{_SDK}ProfileCredentialsProvider",                   # AWS_PROFILE in ~/.aws
                f"{_SDK}WebIdentityTokenFileCredentialsProvider",      # AWS_WEB_IDENTITY_TOKEN_FILE
                "org.apache.hadoop.fs.s3a.auth.IAMInstanceCredentialsProvider"),  # the instance's role
    "env": (f"{_SDK}EnvironmentVariableCredentialsProvider",),
    "anonymous": ("org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider",),
}


def to_s3a(url: str) -> str:
    """``s3://bucket/prefix`` → ``s3a://bucket/prefix`` (Spark's scheme for hadoop-aws); any other
    URL or path unchanged."""
    return "s3a://" + url.removeprefix("s3://") if url.startswith("s3://") else url


def _spark_dir() -> Path:
    """deploy/spark (the pom and the default cache), found without importing the deploy room."""
    spec = importlib.util.find_spec("lagscope.deploy")
    if spec is None or not spec.submodule_search_locations:
        raise JarsUnavailable("lagscope.deploy is not installed: cannot find deploy/spark/pom.xml")
    return Path(next(iter(spec.submodule_search_locations))) / "spark"


def jars_dir() -> Path:
    """Where the pinned jars are: ``$LAGSCOPE_S3A_JARS`` or ``deploy/spark/.cache/s3a-<version>``."""
    env = os.environ.get("LAGSCOPE_S3A_JARS")
    return Path(env) if env else _spark_dir() / ".cache" / f"s3a-{HADOOP_VERSION}"


def jars(folder: Path | None = None) -> list[Path]:
    """The pinned jars, sorted; raises :class:`JarsUnavailable` when the folder has none (not
    fetched yet: ``lagscope spark jars``)."""
    folder = jars_dir() if folder is None else folder
    found = sorted(folder.glob("*.jar")) if folder.is_dir() else []
    if not any(p.name == f"hadoop-aws-{HADOOP_VERSION}.jar" for p in found):
        raise JarsUnavailable(f"the s3a jars (hadoop-aws {HADOOP_VERSION}) are not in {folder}: "
                              "run `lagscope spark jars` (Maven fetches them once)")
    return found


def ensure_jars() -> list[Path]:
    """The pinned jars, fetched with Maven into :func:`jars_dir` when they are not there yet (the
    folder is published whole: a reader never sees half of the set). Raises
    :class:`JarsUnavailable` with Maven's own last lines when the fetch fails."""
    folder = jars_dir()
    if (folder / ".complete").exists():
        return jars(folder)
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsUnavailable("Maven (mvn) is not on PATH; it is needed once to fetch the s3a jars")
    tmp = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [mvn, "-q", "-B", "-f", str(_spark_dir() / "pom.xml"), f"-Ds3a.jars={tmp}",
           "dependency:copy-dependencies"]
    log.info("fetching the s3a jars (hadoop-aws %s) with Maven into %s", HADOOP_VERSION, folder)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise JarsUnavailable(f"mvn could not fetch the s3a jars: {tail}")
    shutil.rmtree(folder, ignore_errors=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp.rename(folder)
    (folder / ".complete").touch()
    return jars(folder)


def hadoop_conf(config: StorageConfig) -> dict[str, str]:
    """The ``fs.s3a.*`` settings of the ``storage`` section: endpoint, TLS, region, path-style
    addressing and the credential providers (class names: no key, no token)."""
    out: dict[str, str] = {}
    path_style = config.path_style if config.path_style is not None else config.endpoint is not None
    if config.endpoint is not None:
        out["fs.s3a.endpoint"] = config.endpoint.rstrip("/")
        out["fs.s3a.connection.ssl.enabled"] = str(config.endpoint.startswith("https://")).lower()
    out["fs.s3a.endpoint.region"] = config.region
    out["fs.s3a.path.style.access"] = str(path_style).lower()
    out["fs.s3a.aws.credentials.provider"] = ",".join(PROVIDERS[config.credentials])
    return out


def spark_conf(config: StorageConfig, jar_paths: list[Path] | None = None) -> dict[str, str]:
    """The Spark settings that give a session ``s3a://``: :func:`hadoop_conf` as
    ``spark.hadoop.*``, and ``spark.jars`` the pinned jars (:func:`jars` when None; raises
    :class:`JarsUnavailable` when they are not fetched)."""
    paths = jars() if jar_paths is None else jar_paths
    out = {f"spark.hadoop.{k}": v for k, v in hadoop_conf(config).items()}
    out["spark.jars"] = ",".join(str(p) for p in paths)
    return out


def session_conf(config: StorageConfig, *roots: Path | Store) -> dict[str, str]:
    """:func:`spark_conf` for the session of a job whose lake or results (``roots``) are on an
    object store, so that Spark itself can open the bucket too (a user's
    ``spark.read.parquet("s3a://…")``); none for local roots, and none (one warning line) when
    the jars are not fetched: lagscope's analytics read the bucket with pyarrow and run without."""
    if not any(isinstance(r, Store) and r.is_object_store for r in roots):
        return {}
    try:
        return spark_conf(config)
    except JarsUnavailable as exc:
        log.warning("s3a:// is not configured in the Spark session (lagscope's analytics need none): %s", exc)
        return {}


def submit_args(config: StorageConfig, folder: str | None = None) -> list[str]:
    """``spark-submit`` arguments for a cluster job: the jars of ``folder`` (a path every node has,
    e.g. the image's ``/opt/lagscope/s3a-jars``; default :func:`jars_dir`) on the driver's and
    the executors' class path, and the ``fs.s3a.*`` settings."""
    where = folder if folder is not None else str(jars_dir())
    conf = {"spark.driver.extraClassPath": f"{where}/*", "spark.executor.extraClassPath": f"{where}/*"}
    conf.update({f"spark.hadoop.{k}": v for k, v in hadoop_conf(config).items()})
    return [arg for k, v in conf.items() for arg in ("--conf", f"{k}={v}")]
