"""One module of layout per page; :data:`VIEWS` maps the URL's ``page`` to its renderer."""

from __future__ import annotations

from collections.abc import Callable

from lagscope.app.views import compare, delivery, group, overview, partition, rebalance
from lagscope.app.widgets import Context

__all__ = ["VIEWS"]

VIEWS: dict[str, Callable[[Context], None]] = {
    "overview": overview.render,
    "group": group.render,
    "rebalance": rebalance.render,
    "partition": partition.render,
    "delivery": delivery.render,
    "compare": compare.render,
}
