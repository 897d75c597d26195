"""Fixtures of the dashboards' tests (and the results exporter's): one local Spark session for
the tests that run the analytics (as tests/analytics/conftest.py). The synthetic result tables
(``synthetic``) are tests/conftest.py's, shared with the alerts' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers import TEST_DRIVER_MEMORY, TEST_SPARK_CONF
from pyspark.sql import SparkSession

from lagscope.analytics.session import build_session


def pytest_configure(config: pytest.Config) -> None:
    # pyspark warns once about pandas 3 when its testing helpers are imported
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="lagscope-dashboards-tests", shuffle_partitions=2,
                            driver_memory=TEST_DRIVER_MEMORY, extra_conf=TEST_SPARK_CONF)
    try:
        yield session
    finally:
        session.stop()
