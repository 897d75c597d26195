"""Fixtures of the results-out tests (exporter, webhooks, dashboards): see results_synthetic;
one local Spark session for the tests that run the analytics (as tests/analytics/conftest.py)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from results_synthetic import Synthetic, write_synthetic

from lagscope.analytics.session import build_session


def pytest_configure(config: pytest.Config) -> None:
    # pyspark warns once about pandas 3 when its testing helpers are imported
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture
def synthetic(tmp_path: Path) -> Synthetic:
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return write_synthetic(tmp_path / "results", "prod", "orders-svc", "orders", now)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session("local[2]", app_name="lagscope-dashboards-tests", shuffle_partitions=2,
                            driver_memory="3g")
    try:
        yield session
    finally:
        session.stop()
