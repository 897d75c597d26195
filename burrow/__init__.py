"""Burrow's HTTP API v3 (read endpoints) served from lagscope's lake and results, so that tools
built on Burrow (exporters, dashboards, scripts polling ``…/consumer/<group>/status``) keep
working when lagscope replaces it. See docs/burrow.md.

    >>> api = build_api(load_config("lagscope.yaml"))   # doctest: +SKIP
    >>> api.start().url                                 # doctest: +SKIP
    'http://127.0.0.1:8000/v3/kafka'

- :mod:`~lagscope.burrow.snapshot`: the in-memory index, rebuilt when the lake or the results
  change, replaced whole;
- :mod:`~lagscope.burrow.api`: routing and Burrow's JSON shapes (pure);
- :mod:`~lagscope.burrow.server`: the HTTP server component.
"""

from lagscope.burrow.api import Response, respond
from lagscope.burrow.server import BurrowApi
from lagscope.burrow.setup import build_api
from lagscope.burrow.snapshot import (
    ClusterInfo,
    ClusterView,
    Entry,
    GroupView,
    PartitionView,
    Snapshot,
    SnapshotBuilder,
    SnapshotRefresher,
)

__all__ = [
    "BurrowApi",
    "ClusterInfo",
    "ClusterView",
    "Entry",
    "GroupView",
    "PartitionView",
    "Response",
    "Snapshot",
    "SnapshotBuilder",
    "SnapshotRefresher",
    "build_api",
    "respond",
]
