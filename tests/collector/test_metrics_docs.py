"""docs/metrics.md documents every metric the collector serves, with its type and labels."""

from __future__ import annotations

import re
from pathlib import Path

from lagscope.collector.metrics import METRICS

DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"
ROW = re.compile(r"^\| `(?P<name>[a-z_]+)` \| (?P<type>gauge|counter) \| (?P<labels>[^|]*) \| (?P<unit>[^|]*) \|")


def _documented() -> dict[str, tuple[str, tuple[str, ...]]]:
    rows = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if m:
            labels = tuple(x.strip().strip("`") for x in m["labels"].split(",") if x.strip())
            rows[m["name"]] = (m["type"], labels)
    return rows


def test_every_metric_is_documented_with_type_and_labels() -> None:
    documented = _documented()
    declared = {s.name: (s.type, s.labels) for s in METRICS}
    assert documented == declared


def test_names_follow_prometheus_conventions() -> None:
    for spec in METRICS:
        if spec.type == "counter":
            assert spec.name.endswith("_total"), spec.name
        if spec.origin == "lagscope" and spec.unit == "seconds":
            assert "_seconds" in spec.name, spec.name
        assert "cluster" in spec.labels, spec.name
