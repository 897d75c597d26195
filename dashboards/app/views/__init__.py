"""One module of layout per page; :data:`VIEWS` maps the URL's ``page`` to its renderer."""

from __future__ import annotations

from collections.abc import Callable

from lagscope.dashboards.app.views import compare, group, overview, partition, rebalance
from lagscope.dashboards.app.widgets import Context

__all__ = ["VIEWS"]

VIEWS: dict[str, Callable[[Context], None]] = {
    "overview": overview.render,
    "group": group.render,
    "rebalance": rebalance.render,
    "partition": partition.render,
    "compare": compare.render,
}
