"""Burrow's HTTP API v3, read side: routing and Burrow's JSON shapes, over a :class:`Snapshot`.

Pure: ``respond(snapshot, method, path, host=…)`` → a :class:`Response` (status, headers,
body), no I/O, so that every endpoint is tested without a socket. The shapes are Burrow 1.2's
(its ``core/internal/httpserver``), checked against the real Burrow 1.2.1 in
tests/burrow/test_burrow_real.py:

==================================================  ==========================================
endpoint (GET)                                      payload besides ``error``/``message``/``request``
==================================================  ==========================================
``/burrow/admin``                                   ``GOOD`` (text/plain: a health check)
``/v3/kafka``                                       ``clusters``: names
``/v3/kafka/<cluster>``                             ``module``: the cluster's connection settings
``/v3/kafka/<cluster>/topic``                       ``topics``: names
``/v3/kafka/<cluster>/topic/<topic>``               ``offsets``: end offset per partition
``/v3/kafka/<cluster>/topic/<topic>/consumers``     ``consumers``: the groups reading the topic
``/v3/kafka/<cluster>/consumer``                    ``consumers``: group names
``/v3/kafka/<cluster>/consumer/<group>``            ``topics``: per topic, per partition its
                                                    offset entries, owner, client_id, current-lag
``/v3/kafka/<cluster>/consumer/<group>/status``     ``status``: the group status, partitions
                                                    that are not OK, maxlag, totallag, …
``/v3/kafka/<cluster>/consumer/<group>/lag``        ``status``: the same with every partition
``/v3/admin/loglevel``                              ``level``: the log level
==================================================  ==========================================

Errors as Burrow answers them: an unknown cluster, topic or group is a 404 with Burrow's body
(for ``status``/``lag`` Burrow's quirk: 404 with ``"error": false`` and status ``NOTFOUND``);
a path Burrow does not route is its 404 ``invalid request type``; a trailing slash is a 301 to
the path without it. Read-only: Burrow's write endpoints (``DELETE`` a consumer group,
``POST`` a log level) and any other method on a known path answer 405 with an ``Allow``
header and a JSON body that says why.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import numpy as np

from lagscope.burrow.snapshot import ClusterView, Entry, GroupView, PartitionView, Snapshot

__all__ = ["Response", "consumer_detail", "group_status", "respond"]

_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_READ = "GET, OPTIONS"

#: Burrow's body for a path it does not route (its NotFound handler; sent as text/plain)
_INVALID = b'{"error":true,"message":"invalid request type","result":{}}\n'


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = _JSON
    headers: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        return json.loads(self.body)


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _f32(x: float) -> float | int:
    """A ratio as Go writes a float32: the shortest decimal that reads back as the same
    float32 (``0.1``, not 0.10000000149011612), and a whole number without a fraction."""
    if x == int(x):
        return int(x)
    return float(np.format_float_positional(np.float32(x), unique=True, trim="-"))


def _entry(e: Entry | None) -> dict[str, int] | None:
    return None if e is None else {"offset": e.offset, "timestamp": e.timestamp, "lag": e.lag}


def _complete(p: PartitionView, intervals: int) -> float:
    return len(p.entries) / intervals


def _partition(p: PartitionView, intervals: int) -> dict[str, Any]:
    return {"topic": p.topic, "partition": p.partition, "owner": p.owner, "client_id": p.client_id,
            "status": p.status, "start": _entry(p.entries[0] if p.entries else None),
            "end": _entry(p.entries[-1] if p.entries else None), "current_lag": p.current_lag,
            "complete": _f32(_complete(p, intervals))}


def group_status(g: GroupView, *, show_all: bool) -> dict[str, Any]:
    """Burrow's ``ConsumerGroupStatus``: ``show_all`` for ``/lag`` (every partition), else only
    the partitions that are not OK (``/status``). ``maxlag`` is the first partition (in topic,
    partition order) with the largest current lag; ``complete`` the share of partitions whose
    entry window is full."""
    parts = [_partition(p, g.intervals) for p in g.partitions]
    maxlag: dict[str, Any] | None = None
    for p in parts:
        if maxlag is None or p["current_lag"] > maxlag["current_lag"]:
            maxlag = p
    full = sum(1 for p in g.partitions if len(p.entries) >= g.intervals)
    return {
        "cluster": g.cluster, "group": g.group, "status": g.status,
        "complete": _f32(full / len(parts)) if parts else 1,
        "partitions": parts if show_all else [p for p in parts if p["status"] != "OK"],
        "partition_count": len(parts), "maxlag": maxlag,
        "totallag": sum(p.current_lag for p in g.partitions),
    }


def _not_found_status(cluster: str, group: str) -> dict[str, Any]:
    return {"cluster": cluster, "group": group, "status": "NOTFOUND", "complete": 1, "partitions": [],
            "partition_count": 0, "maxlag": None, "totallag": 0}


def consumer_detail(g: GroupView) -> dict[str, list[dict[str, Any]]]:
    """Burrow's ``ConsumerTopics``: per topic a list indexed by partition number, each with the
    ring of ``intervals`` offset entries (oldest first, empty slots null and first), owner,
    client_id and ``current-lag``. Partitions the group has no commit for are empty slots."""
    topics: dict[str, list[dict[str, Any]]] = {}
    by_topic: dict[str, dict[int, PartitionView]] = {}
    for p in g.partitions:
        by_topic.setdefault(p.topic, {})[p.partition] = p
    for topic, parts in by_topic.items():
        rows: list[dict[str, Any]] = []
        for i in range(max(parts) + 1):
            q = parts.get(i)
            entries: list[dict[str, int] | None] = [None] * g.intervals
            if q is not None and q.entries:
                entries[g.intervals - len(q.entries):] = [_entry(e) for e in q.entries]
            rows.append({"offsets": entries, "owner": q.owner if q else "", "client_id": q.client_id if q else "",
                         "current-lag": q.current_lag if q else 0})
        topics[topic] = rows
    return topics


def _module(c: ClusterView) -> dict[str, Any]:
    info = c.info
    return {"class-name": "kafka", "servers": list(info.servers),
            "client-profile": {"name": "lagscope", "client-id": info.client_id, "kafka-version": "",
                               "tls": dict(info.tls) if info.tls is not None else None,
                               "sasl": dict(info.sasl) if info.sasl is not None else None},
            "topic-refresh": info.refresh_s, "offset-refresh": info.refresh_s}


class _Router:
    """One request: the path's parts and how to answer."""

    def __init__(self, snapshot: Snapshot, method: str, path: str, host: str) -> None:
        self.s = snapshot
        self.method = method.upper()
        self.path = path
        self.host = host

    def envelope(self, status: int, message: str, payload: Mapping[str, Any] | None = None, *,
                 error: bool = False, headers: Mapping[str, str] | None = None) -> Response:
        body: dict[str, Any] = {"error": error, "message": message, **(payload or {}),
                                "request": {"url": self.path, "host": self.host}}
        return Response(status, _dumps(body), headers=headers or {})

    def missing(self, message: str) -> Response:
        return self.envelope(404, message, error=True)

    def read_only(self, allow: str, why: str) -> Response:
        return self.envelope(405, f"lagscope serves Burrow's API read-only: {self.method} {self.path} is not "
                                  f"supported ({why})", error=True, headers={"Allow": allow})

    def answer(self) -> Response:
        parts = [unquote(p) for p in self.path.split("/")[1:]]
        if len(parts) > 1 and parts[-1] == "" and self._routes(parts[:-1]) is not None:
            return Response(301, b"", _TEXT, {"Location": self.path.rstrip("/")})
        route = self._routes(parts)
        if route is None:
            return Response(404, _INVALID, _TEXT)
        allow, handler, why = route
        if self.method == "OPTIONS":
            return Response(200, b"", _TEXT, {"Allow": allow})
        if self.method != "GET":
            return self.read_only(allow, why)
        return handler()

    def _routes(self, p: list[str]) -> tuple[str, Callable[[], Response], str] | None:
        """(allowed methods, GET handler, why other methods are refused) of the path, or None."""
        ro = "lagscope reads Kafka, it changes nothing"
        if p == ["burrow", "admin"]:
            return _READ, lambda: Response(200, b"GOOD", _TEXT), ro
        if p == ["v3", "admin", "loglevel"]:
            return "GET, OPTIONS, POST", self.loglevel, "set the log level with lagscope's --verbose"
        if len(p) < 2 or p[0] != "v3" or p[1] != "kafka" or any(not x for x in p[2:]):
            return None
        rest = p[2:]
        if not rest:
            return _READ, self.clusters, ro
        cluster = rest[0]
        if len(rest) == 1:
            return _READ, lambda: self.cluster(cluster), ro
        if rest[1] == "topic" and len(rest) == 2:
            return _READ, lambda: self.topics(cluster), ro
        if rest[1] == "topic" and len(rest) == 3:
            return _READ, lambda: self.topic(cluster, rest[2]), ro
        if rest[1] == "topic" and len(rest) == 4 and rest[3] == "consumers":
            return _READ, lambda: self.topic_consumers(cluster, rest[2]), ro
        if rest[1] == "consumer" and len(rest) == 2:
            return _READ, lambda: self.consumers(cluster), ro
        if rest[1] == "consumer" and len(rest) == 3:
            return ("DELETE, GET, OPTIONS", lambda: self.consumer(cluster, rest[2]),
                    "a consumer group is deleted in Kafka itself (kafka-consumer-groups --delete); "
                    "lagscope drops it once it is gone")
        if rest[1] == "consumer" and len(rest) == 4 and rest[3] in ("status", "lag"):
            return _READ, lambda: self.status(cluster, rest[2], show_all=rest[3] == "lag"), ro
        return None

    # -- handlers --------------------------------------------------------------------------------

    def loglevel(self) -> Response:
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
        return self.envelope(200, "log level returned", {"level": level})

    def clusters(self) -> Response:
        return self.envelope(200, "cluster list returned", {"clusters": list(self.s.clusters)})

    def cluster(self, name: str) -> Response:
        c = self.s.clusters.get(name)
        if c is None:
            return self.missing("cluster module not found")
        return self.envelope(200, "cluster module detail returned", {"module": _module(c)})

    def topics(self, name: str) -> Response:
        c = self.s.clusters.get(name)
        if c is None:
            return self.missing("cluster not found")
        return self.envelope(200, "topic list returned", {"topics": list(c.topics)})

    def topic(self, name: str, topic: str) -> Response:
        c = self.s.clusters.get(name)
        offsets = c.topics.get(topic) if c is not None else None
        if offsets is None:
            return self.missing("cluster or topic not found")
        return self.envelope(200, "topic offsets returned", {"offsets": list(offsets)})

    def topic_consumers(self, name: str, topic: str) -> Response:
        c = self.s.clusters.get(name)
        groups = c.topic_groups.get(topic) if c is not None else None
        if groups is None:
            return self.missing("cluster or topic not found")
        return self.envelope(200, "consumers of topic returned", {"consumers": list(groups)})

    def consumers(self, name: str) -> Response:
        c = self.s.clusters.get(name)
        if c is None:
            return self.missing("cluster not found")
        return self.envelope(200, "consumer list returned", {"consumers": list(c.groups)})

    def _group(self, name: str, group: str) -> GroupView | None:
        c = self.s.clusters.get(name)
        return c.groups.get(group) if c is not None else None

    def consumer(self, name: str, group: str) -> Response:
        g = self._group(name, group)
        if g is None:
            return self.missing("cluster or consumer not found")
        return self.envelope(200, "consumer detail returned", {"topics": consumer_detail(g)})

    def status(self, name: str, group: str, *, show_all: bool) -> Response:
        g = self._group(name, group)
        if g is None:  # Burrow: 404, yet "error": false and a NOTFOUND status
            return self.envelope(404, "consumer status returned", {"status": _not_found_status(name, group)})
        return self.envelope(200, "consumer status returned", {"status": group_status(g, show_all=show_all)})


def respond(snapshot: Snapshot, method: str, path: str, *, host: str = "lagscope") -> Response:
    """Answer one request (``path`` without the query string) from ``snapshot``.

        >>> respond(Snapshot(), "GET", "/v3/kafka").json()["clusters"]
        []
    """
    return _Router(snapshot, method, path.split("?", 1)[0], host).answer()
