"""One local Spark session for the analytics tests (local[2], 2 shuffle partitions, UI off)
(builders for inline lake rows: analytics_builders.py)."""

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
    # one session serves every Spark test of the run; at 3g a reference statement late in a full
    # run failed with AGGREGATE_OUT_OF_MEMORY that passes alone (the session's heap is shared), and
    # at 4g twice more (CI, test_groups' random seed 4; measured, TEST_SPARK_CONF)
    session = build_session("local[2]", app_name="lagscope-tests", shuffle_partitions=2,
                            driver_memory=TEST_DRIVER_MEMORY, extra_conf=TEST_SPARK_CONF)
    try:
        yield session
    finally:
        session.stop()
