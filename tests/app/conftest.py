"""Fixtures of the drill-down app's tests: a synthetic lake (see ui_fixture_lake.py), built once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import ui_fixture_lake
import ui_pipeline_lake

from lagscope.app.data import Lake, connect


def pytest_configure(config: pytest.Config) -> None:
    # pyspark (the pipeline lake runs the analytics) warns once about pandas 3 when imported
    config.addinivalue_line("filterwarnings", "ignore:PySpark does not yet fully support pandas:FutureWarning")


@pytest.fixture(scope="session")
def ui_lake(tmp_path_factory: pytest.TempPathFactory) -> ui_fixture_lake.FixtureLake:
    """The synthetic lake: samples and results under one root."""
    return ui_fixture_lake.build(tmp_path_factory.mktemp("ui-lake"))


@pytest.fixture
def lake(ui_lake: ui_fixture_lake.FixtureLake) -> Lake:
    return Lake(ui_lake.root, ui_lake.root)


@pytest.fixture
def con() -> Iterator[object]:
    c = connect()
    yield c
    c.close()


@pytest.fixture
def empty_lake(tmp_path: Path) -> Lake:
    return Lake(tmp_path / "lake", tmp_path / "results")


@pytest.fixture(scope="session")
def ui_pipeline(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> ui_pipeline_lake.PipelineLake:
    """A lake and result tables produced by the real pipeline from a simulator scenario."""
    return ui_pipeline_lake.build(bootstrap, tmp_path_factory.mktemp("ui-pipeline"))
