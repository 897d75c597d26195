"""Fixtures of the Burrow API's integration tests: the tools they run (a missing one is a
failure, never a skip: ``scripts/setup.sh --system`` installs them) and a Spark session."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import TEST_DRIVER_MEMORY, TEST_SPARK_CONF
from pyspark.sql import SparkSession

from lagscope.analytics.session import build_session

ROOT = Path(__file__).resolve().parents[2]
ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
TELEGRAF = ROOT / ".tools" / "bin" / "telegraf"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")


def need_tool(path: str | Path | None, what: str) -> str:
    """The tool's path, or the test fails naming the setup step that installs it."""
    if path is None or not Path(path).exists():
        pytest.fail(f"{what} is missing: run scripts/setup.sh --system")
    return str(path)


@pytest.fixture(scope="session")
def burrow_binary() -> str:
    return need_tool(shutil.which("Burrow"), "Debian's burrow (/usr/bin/Burrow)")


@pytest.fixture(scope="session")
def zookeeper_jar() -> str:
    need_tool(shutil.which("java"), "java")
    return need_tool(ZOOKEEPER_JAR, "Debian's zookeeper (/usr/share/java/zookeeper.jar)")


@pytest.fixture(scope="session")
def telegraf_binary() -> str:
    return need_tool(TELEGRAF, "Telegraf with its burrow input (.tools/bin/telegraf)")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="lagscope-tests", shuffle_partitions=2,
                            driver_memory=TEST_DRIVER_MEMORY, extra_conf=TEST_SPARK_CONF)
    try:
        yield session
    finally:
        session.stop()
