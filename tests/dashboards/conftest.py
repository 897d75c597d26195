"""Fixtures of the results-out tests (exporter, webhooks, dashboards): see results_synthetic."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from results_synthetic import Synthetic, write_synthetic


@pytest.fixture
def synthetic(tmp_path: Path) -> Synthetic:
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return write_synthetic(tmp_path / "results", "prod", "orders-svc", "orders", now)
