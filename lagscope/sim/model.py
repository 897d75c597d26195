"""The scenario file: a declarative description of topics, producers and consumer groups.

A scenario is YAML validated by :class:`Scenario`. Times (``at``, ``duration``, ``join_at``,
``start``, ``stop``) are seconds from the scenario's start; rates are messages per second;
Kafka client settings keep Kafka's own names and units (``session_timeout_ms``, …).

    >>> s = Scenario.model_validate({                      # doctest: +SKIP
    ...     "name": "tiny", "duration": 5,
    ...     "topics": [{"name": "t"}],
    ...     "producers": [{"name": "p", "topic": "t", "rate": 10}],
    ...     "groups": [{"name": "g", "topics": ["t"], "members": [{"name": "m1"}]}]})

Names in the file are logical: the runner prefixes every topic, group and
``group_instance_id`` with a run id, so runs never clash on a shared broker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lagscope.errors import ScenarioError

__all__ = [
    "ACTION_KINDS",
    "Action",
    "Burst",
    "GroupSpec",
    "MemberSpec",
    "ProducerSpec",
    "Scenario",
    "TopicSpec",
    "load_scenario_file",
]

_NAME = r"^[A-Za-z0-9_-]{1,60}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TopicSpec(_Strict):
    """A topic the run creates (and deletes again unless asked to keep it)."""

    name: str = Field(pattern=_NAME, description="Logical name; the real topic is '<prefix>-<name>'.")
    partitions: int = Field(1, ge=1, le=64)
    configs: dict[str, str] = Field(default_factory=dict,
                                    description="Topic configs, e.g. retention.ms, segment.ms.")


class Burst(_Strict):
    """``count`` messages sent back to back at ``at`` seconds, on top of the steady rate."""

    at: float = Field(ge=0)
    count: int = Field(ge=1, le=100_000)


class ProducerSpec(_Strict):
    """One producer process writing to one topic."""

    name: str = Field(pattern=_NAME)
    topic: str
    rate: float = Field(10.0, ge=0, description="Steady rate, messages/s (0: bursts only).")
    start: float = Field(0.0, ge=0, description="Seconds from the start when producing begins.")
    stop: float | None = Field(None, ge=0, description="Seconds from the start when it stops (default: the end).")
    bursts: list[Burst] = Field(default_factory=list)
    keys: int | None = Field(None, ge=1, description="Distinct keys (key-hash partitioning); "
                                                     "None: partitions in turn, no key.")
    value_bytes: int = Field(64, ge=1, le=1_000_000)
    transactional: bool = False
    txn_records: int = Field(10, ge=1, description="Records per transaction (transactional only).")
    abort_every: int = Field(0, ge=0, description="Abort every Nth transaction (0: never).")
    leave_open: bool = Field(False, description="Leave the last transaction open until the run's end state "
                                                "is recorded (LSO < high watermark), then abort it.")

    @model_validator(mode="after")
    def _txn_only(self) -> ProducerSpec:
        if not self.transactional and (self.abort_every or self.leave_open):
            raise ValueError(f"producer {self.name}: abort_every/leave_open need transactional: true")
        return self


#: what a scheduled action does to a member (see docs/simulator.md)
ACTION_KINDS = ("crash", "leave", "bounce", "stop_polling", "stall", "stop", "commit_gap", "rewind", "skip")

#: actions that end the member's process (nothing may follow them)
_TERMINAL = ("crash", "leave")
#: actions that need a duration
_NEEDS_DURATION = ("bounce", "stop_polling", "commit_gap")


class Action(_Strict):
    """A fault or operation scheduled on one member.

    - ``crash``: SIGKILL of the member's process (no LeaveGroup; the group notices after
      session.timeout.ms).
    - ``leave``: a clean close (final commit, LeaveGroup).
    - ``bounce``: close and reopen after ``duration`` s with the same ``group_instance_id``
      (static membership: no rebalance when back within the session timeout).
    - ``stop_polling``: no poll() for ``duration`` s (heartbeats continue; the member is
      evicted when max.poll.interval.ms passes).
    - ``stall``: from ``at`` (for ``duration`` s, or to the end) the member stops consuming but
      keeps committing the same offsets.
    - ``stop``: from ``at`` (for ``duration`` s, or to the end) it stops consuming and commits nothing.
    - ``commit_gap``: keeps consuming but commits nothing for ``duration`` s.
    - ``rewind``: seek every assigned partition back ``messages`` from its last commit, commit that.
    - ``skip``: seek every assigned partition to its end, commit that.
    """

    kind: Literal["crash", "leave", "bounce", "stop_polling", "stall", "stop", "commit_gap", "rewind", "skip"]
    at: float = Field(ge=0)
    duration: float | None = Field(None, gt=0)
    messages: int | None = Field(None, ge=1, description="rewind: how many messages back.")

    @model_validator(mode="after")
    def _check(self) -> Action:
        if self.kind in _NEEDS_DURATION and self.duration is None:
            raise ValueError(f"action {self.kind} at {self.at}s needs a duration")
        if self.kind == "rewind" and self.messages is None:
            raise ValueError(f"action rewind at {self.at}s needs messages")
        return self


class MemberSpec(_Strict):
    """One consumer in its own process, with its client settings and its scheduled actions."""

    name: str = Field(pattern=_NAME)
    join_at: float = Field(0.0, ge=0, description="Seconds from the start when the process starts.")
    session_timeout_ms: int = Field(6000, ge=1000)
    heartbeat_interval_ms: int = Field(1000, ge=100)
    max_poll_interval_ms: int = Field(30000, ge=1000)
    group_instance_id: str | None = Field(None, pattern=_NAME, description="Static membership (logical id).")
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted"
    enable_auto_commit: bool = Field(True, description="True: commit every auto_commit_interval_ms; "
                                                       "False: commit after every processed batch.")
    auto_commit_interval_ms: int = Field(1000, ge=50)
    max_poll_records: int = Field(50, ge=1)
    processing_delay_ms: float = Field(0.0, ge=0, description="Sleep per message (a slow consumer).")
    actions: list[Action] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> MemberSpec:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError(f"member {self.name}: heartbeat_interval_ms must be below session_timeout_ms")
        acts = sorted(self.actions, key=lambda a: a.at)
        for a in acts:
            if a.at < self.join_at:
                raise ValueError(f"member {self.name}: action {a.kind} at {a.at}s is before join_at")
        for a in acts[:-1]:
            if a.kind in _TERMINAL:
                raise ValueError(f"member {self.name}: nothing may follow {a.kind} at {a.at}s")
        if any(a.kind == "bounce" for a in acts) and self.group_instance_id is None:
            raise ValueError(f"member {self.name}: bounce needs group_instance_id (static membership)")
        return self


class GroupSpec(_Strict):
    """A consumer group: its subscribed topics and its members."""

    name: str = Field(pattern=_NAME)
    topics: list[str] = Field(min_length=1)
    members: list[MemberSpec] = Field(min_length=1)


class Scenario(_Strict):
    """A whole run: ``duration`` seconds of producers and consumer groups on fresh topics."""

    name: str = Field(pattern=_NAME)
    description: str = ""
    duration: float = Field(gt=0, le=3600)
    topics: list[TopicSpec] = Field(min_length=1)
    producers: list[ProducerSpec] = Field(default_factory=list)
    groups: list[GroupSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        topics = [t.name for t in self.topics]
        _unique("topic", topics)
        _unique("producer", [p.name for p in self.producers])
        _unique("group", [g.name for g in self.groups])
        for p in self.producers:
            if p.topic not in topics:
                raise ValueError(f"producer {p.name}: unknown topic {p.topic!r}")
            for b in p.bursts:
                if b.at > self.duration:
                    raise ValueError(f"producer {p.name}: burst at {b.at}s is after the end ({self.duration}s)")
        for g in self.groups:
            for t in g.topics:
                if t not in topics:
                    raise ValueError(f"group {g.name}: unknown topic {t!r}")
            _unique(f"member of group {g.name}", [m.name for m in g.members])
            _unique(f"group_instance_id in group {g.name}",
                    [m.group_instance_id for m in g.members if m.group_instance_id])
            for m in g.members:
                if m.join_at >= self.duration:
                    raise ValueError(f"member {m.name}: join_at {m.join_at}s is not before the end")
                for a in m.actions:
                    if a.at >= self.duration:
                        raise ValueError(f"member {m.name}: action {a.kind} at {a.at}s is not before the end")
        return self


def _unique(what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"duplicate {what} {n!r}")
        seen.add(n)


def load_scenario_file(path: Path) -> Scenario:
    """Read and validate a scenario YAML file; raises :class:`ScenarioError` with one line."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc}".replace("\n", " ")) from exc
    if not isinstance(data, dict):
        raise ScenarioError(f"scenario {path}: expected a mapping at the top level")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(x) for x in first["loc"])
        raise ScenarioError(f"scenario {path}: {loc + ': ' if loc else ''}{first['msg']}") from exc
