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

import math
import random
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from lagscope.analytics.advice import RULE_SETTINGS, RULES
from lagscope.errors import ScenarioError

__all__ = [
    "ACTION_KINDS",
    "DEFAULT_SEED",
    "SKIP_MECHANISMS",
    "SKIP_STATES",
    "Action",
    "Burst",
    "ExpectedAdvice",
    "GroupSpec",
    "Jitter",
    "MemberSpec",
    "Pause",
    "ProducerSpec",
    "Scenario",
    "TopicSpec",
    "load_scenario_file",
    "randomise",
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
    """``count`` messages sent back to back at ``at`` seconds, on top of the steady rate; with
    ``every``, again every ``every`` seconds (``repeat`` times in all, or until the producer stops)."""

    at: float = Field(ge=0)
    count: int = Field(ge=1, le=200_000)
    every: float | None = Field(None, gt=0, description="Periodic: seconds between bursts.")
    partition: int | None = Field(None, ge=0, description="Every message of the burst to this partition "
                                                          "(default: the partitions in turn, as the steady sends).")
    repeat: int | None = Field(None, ge=1, description="Periodic: bursts in all (default: until the stop).")

    @model_validator(mode="after")
    def _periodic(self) -> Burst:
        if self.repeat is not None and self.every is None:
            raise ValueError(f"burst at {self.at}s: repeat needs every")
        return self


#: how a ``skip`` action loses the messages (see :class:`Action`)
SKIP_MECHANISMS = ("seek", "admin_reset", "out_of_range")
#: the consumer's state a ``skip`` action is labelled with (see :class:`Action`)
SKIP_STATES = ("caught_up", "lagging", "catching_up")


class Pause(_Strict):
    """The producer sends nothing from ``at`` for ``duration`` seconds (its steady rate and bursts)."""

    at: float = Field(ge=0)
    duration: float = Field(gt=0)


class ProducerSpec(_Strict):
    """One producer process writing to one topic."""

    name: str = Field(pattern=_NAME)
    topic: str
    rate: float = Field(10.0, ge=0, description="Steady rate, messages/s (0: bursts only).")
    start: float = Field(0.0, ge=0, description="Seconds from the start when producing begins.")
    stop: float | None = Field(None, ge=0, description="Seconds from the start when it stops (default: the end).")
    ramp_to: float | None = Field(None, ge=0, description="The rate changes linearly from ``rate`` at the "
                                                          "start to this at the stop (a ramp).")
    cycle_s: float | None = Field(None, gt=0, description="Diurnal: the rate follows a sine of this period.")
    cycle_amplitude: float = Field(0.5, ge=0, le=1, description="Diurnal: rate × (1 + amplitude × "
                                                                "sin(2π (t − start) / cycle_s)).")
    bursts: list[Burst] = Field(default_factory=list)
    pauses: list[Pause] = Field(default_factory=list)
    keys: int | None = Field(None, ge=1, description="Distinct keys (key-hash partitioning); "
                                                     "None: partitions in turn, no key.")
    key_skew: float = Field(0.0, ge=0, le=4, description="Zipf exponent over the keys (0: every key "
                                                         "alike; 1.2: a few hot keys).")
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
        if self.key_skew and not self.keys:
            raise ValueError(f"producer {self.name}: key_skew needs keys")
        return self

    def rate_at(self, t: float, stop: float) -> float:
        """The steady rate (messages/s) ``t`` seconds from the scenario's start, ``stop`` its end."""
        if t < self.start or t >= stop or any(p.at <= t < p.at + p.duration for p in self.pauses):
            return 0.0
        r = self.rate
        if self.ramp_to is not None and stop > self.start:
            r += (self.ramp_to - self.rate) * (t - self.start) / (stop - self.start)
        if self.cycle_s is not None:
            r *= 1.0 + self.cycle_amplitude * math.sin(2 * math.pi * (t - self.start) / self.cycle_s)
        return max(r, 0.0)


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
    - ``bounce``: close and reopen after ``duration`` s with the same client id (a restart): a
      static member (``group_instance_id``) sends no LeaveGroup and keeps its membership when
      back within the session timeout (no rebalance); a dynamic one leaves (LeaveGroup: a
      rebalance) and joins again as a new member (another).
    - ``stop_polling``: no poll() for ``duration`` s (heartbeats continue; the member is
      evicted when max.poll.interval.ms passes).
    - ``stall``: from ``at`` (for ``duration`` s, or to the end) the member stops consuming but
      keeps committing the same offsets.
    - ``stop``: from ``at`` (for ``duration`` s, or to the end) it stops consuming and commits nothing.
    - ``commit_gap``: keeps consuming but commits nothing for ``duration`` s.
    - ``rewind``: seek every assigned partition back ``messages`` from its last commit, commit that.
    - ``skip``: messages the member never processes, on ``partitions`` (``all`` it holds, or
      ``one``: the first it holds, topic and partition order), by a ``mechanism``:

      - ``seek`` (default): seek the partitions to their end and commit that;
      - ``admin_reset``: the runner stops every member of the group (each commits what it
        processed and leaves), waits until the group is empty, runs Kafka's own
        ``kafka-consumer-groups --reset-offsets --to-latest --execute`` (the pinned kafka-tools'
        ConsumerGroupCommand) on the partitions, then restarts the members; resets run one after
        another, never at once;
      - ``out_of_range``: the member stops reading the partitions (it keeps committing the same
        offset) until retention has deleted its position (the topic needs a short
        ``retention.ms``), then reads again: the fetch is out of range and the client's
        ``auto_offset_reset`` (which must be ``latest``) moves it to the end.

      ``size``: the backlog to skip, summed over the partitions: from ``at`` the member holds
      them (reads nothing from them; the runner has stopped the group for ``admin_reset``) until
      their backlog is at least ``size`` (the scenario's producer supplies it, e.g. a burst), at
      most ``wait_s``; with ``state: catching_up`` the member keeps reading until the backlog has
      fallen to at most ``size`` (and above 0) instead. None: at once (``seek``), or when retention
      has deleted the position (``out_of_range``). ``state``: what the consumer was doing before,
      as the scenario sets it up (``caught_up``, ``lagging``, ``catching_up`` after a burst), a
      label the skip matrix is scored by. The truth's ``skip`` fault records, per partition, the
      exact messages never processed (``detail.skipped``).
    """

    kind: Literal["crash", "leave", "bounce", "stop_polling", "stall", "stop", "commit_gap", "rewind", "skip"]
    at: float = Field(ge=0)
    duration: float | None = Field(None, gt=0)
    messages: int | None = Field(None, ge=1, description="rewind: how many messages back.")
    partitions: Literal["all", "one"] = Field("all", description="skip: every partition the member holds, or "
                                                                  "the first one.")
    mechanism: Literal["seek", "admin_reset", "out_of_range"] = Field(
        "seek", description="skip: a seek to the end, an admin tool's reset of an emptied group, or the "
                            "client's auto.offset.reset=latest after retention deleted its position.")
    size: int | None = Field(None, ge=1, description="skip: the backlog (messages, over the partitions) to "
                                                     "wait for before skipping.")
    state: Literal["caught_up", "lagging", "catching_up"] | None = Field(
        None, description="skip: the consumer's state before it (a label; catching_up waits for the backlog "
                          "to fall to size).")
    wait_s: float = Field(15.0, gt=0, le=300, description="skip: the longest wait for the backlog (or for "
                                                          "retention), after which it skips what there is.")

    @model_validator(mode="after")
    def _check(self) -> Action:
        if self.kind in _NEEDS_DURATION and self.duration is None:
            raise ValueError(f"action {self.kind} at {self.at}s needs a duration")
        if self.kind == "rewind" and self.messages is None:
            raise ValueError(f"action rewind at {self.at}s needs messages")
        if self.kind != "skip":
            # by value, not by the fields set: a dumped and re-read action names every field
            changed = [f for f in ("partitions", "mechanism", "size", "state", "wait_s")
                       if getattr(self, f) != type(self).model_fields[f].default]
            if changed:
                raise ValueError(f"action {self.kind} at {self.at}s: {', '.join(changed)} only apply to skip")
        elif self.state == "catching_up" and self.size is None:
            raise ValueError(f"action skip at {self.at}s: state catching_up needs a size (the backlog "
                             "to wait for)")
        return self


class MemberSpec(_Strict):
    """One consumer in its own process, with its client settings and its scheduled actions."""

    name: str = Field(pattern=_NAME)
    join_at: float = Field(0.0, ge=0, description="Seconds from the start when the process starts.")
    session_timeout_ms: int = Field(6000, ge=1000)
    heartbeat_interval_ms: int = Field(1000, ge=100)
    max_poll_interval_ms: int = Field(30000, ge=1000)
    group_instance_id: str | None = Field(None, pattern=_NAME, description="Static membership (logical id).")
    partition_assignment_strategy: Literal["range", "roundrobin", "sticky", "cooperative-sticky"] | None = Field(
        None, description="The assignor (kafka-python's partition_assignment_strategy); null: the client's "
                          "default, range then roundrobin (both eager).")
    isolation_level: Literal["read_uncommitted", "read_committed"] = "read_uncommitted"
    enable_auto_commit: bool = Field(True, description="True: commit every auto_commit_interval_ms; "
                                                       "False: commit after every processed batch.")
    auto_commit_interval_ms: int = Field(1000, ge=50)
    max_poll_records: int = Field(50, ge=1)
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        "earliest", description="Where the client starts without a committed offset, or after one out of range.")
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
        for a in acts:
            if a.kind == "skip" and a.mechanism == "out_of_range" and self.auto_offset_reset != "latest":
                raise ValueError(f"member {self.name}: skip by out_of_range at {a.at}s needs "
                                 "auto_offset_reset: latest")
        return self


class GroupSpec(_Strict):
    """A consumer group: its subscribed topics and its members."""

    name: str = Field(pattern=_NAME)
    topics: list[str] = Field(min_length=1)
    members: list[MemberSpec] = Field(min_length=1)


class ExpectedAdvice(_Strict):
    """Advice the run must lead to: a row of the ``advice`` table for ``group`` (logical name)
    from ``rule`` (:data:`lagscope.analytics.advice.RULES`) naming ``setting`` (one the rule can
    name, :data:`lagscope.analytics.advice.RULE_SETTINGS`). A scenario lists every advice its
    faults call for (``expect_advice``); any other advice on its groups is unexpected."""

    group: str
    rule: str
    setting: str

    @model_validator(mode="after")
    def _check(self) -> ExpectedAdvice:
        if self.rule not in RULES:
            raise ValueError(f"expected advice for {self.group}: unknown rule {self.rule!r} "
                             f"(one of {', '.join(RULES)})")
        if self.setting not in RULE_SETTINGS[self.rule]:
            raise ValueError(f"expected advice {self.rule} for {self.group}: it names "
                             f"{' or '.join(RULE_SETTINGS[self.rule])}, not {self.setting!r}")
        return self


class Jitter(_Strict):
    """How much a run's seed varies its schedule (see :func:`randomise`).

    - ``times_s``: each member's ``join_at`` and actions, and each producer's start, stop, bursts
      and pauses, move by one uniform shift in [−times_s, +times_s] per member or producer (so a
      member's own actions keep their order and spacing);
    - ``rates``: each producer's rates (``rate``, ``ramp_to``) are scaled by one factor in
      [1 − rates, 1 + rates];
    - ``sends``: each steady send is late by a uniform fraction in [0, sends] of its interval.
    """

    times_s: float = Field(0.5, ge=0, le=60)
    rates: float = Field(0.1, ge=0, le=0.9)
    sends: float = Field(0.2, ge=0, le=1)


#: the seed of a scenario that names none: runs stay reproducible unless asked otherwise
DEFAULT_SEED = 1


class Scenario(_Strict):
    """A whole run: ``duration`` seconds of producers and consumer groups on fresh topics."""

    name: str = Field(pattern=_NAME)
    description: str = ""
    no_fault: bool = Field(False, description="Realistic traffic with no fault injected: any warning or "
                                              "critical lagscope raises in it is false.")
    seed: int = Field(DEFAULT_SEED, ge=0, description="Seeds the jitter of timings and rates.")
    jitter: Jitter = Field(default_factory=Jitter)
    duration: float = Field(gt=0, le=3600)
    topics: list[TopicSpec] = Field(min_length=1)
    producers: list[ProducerSpec] = Field(default_factory=list)
    groups: list[GroupSpec] = Field(default_factory=list)
    expect_advice: list[ExpectedAdvice] = Field(
        default_factory=list, description="The advice the run must lead to (rule and setting per group); "
                                          "none listed: the run must lead to no advice.")

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        topics = [t.name for t in self.topics]
        _unique("topic", topics)
        _unique("producer", [p.name for p in self.producers])
        _unique("group", [g.name for g in self.groups])
        for p in self.producers:
            if p.topic not in topics:
                raise ValueError(f"producer {p.name}: unknown topic {p.topic!r}")
            if p.key_skew and p.keys is None:
                raise ValueError(f"producer {p.name}: key_skew needs keys")
            n_parts = next(t.partitions for t in self.topics if t.name == p.topic)
            for b in p.bursts:
                if b.at > self.duration:
                    raise ValueError(f"producer {p.name}: burst at {b.at}s is after the end ({self.duration}s)")
                if b.partition is not None and (b.partition >= n_parts or p.keys):
                    raise ValueError(f"producer {p.name}: burst at {b.at}s: partition {b.partition} "
                                     + ("is not one of the topic's" if not p.keys else "with keys"))
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
        names = {g.name for g in self.groups}
        for e in self.expect_advice:
            if e.group not in names:
                raise ValueError(f"expected advice {e.rule}: unknown group {e.group!r}")
        _unique("expected advice", [f"{e.group}/{e.rule}" for e in self.expect_advice])
        if self.no_fault and self.expect_advice:
            raise ValueError("a no_fault scenario expects no advice (expect_advice must be empty)")
        return self


def randomise(scenario: Scenario, seed: int | None = None) -> Scenario:
    """The scenario as one seed plays it: times shifted and rates scaled by ``scenario.jitter``.

    Deterministic: the same scenario and seed give the same result. The result's ``seed`` is the
    one used and its ``jitter`` keeps only ``sends`` (the workers jitter each send from the seed),
    so randomising it again changes nothing. Shifted times stay inside the run: a member's
    actions after its ``join_at`` and before the end, a producer's stop after its start.

        >>> randomise(load_scenario_file(Path("crash.yaml")), seed=7)   # doctest: +SKIP
    """
    seed = scenario.seed if seed is None else seed
    j = scenario.jitter
    rng = random.Random(f"lagscope-sim/{scenario.name}/{seed}")
    end = scenario.duration
    last = end - 0.05  # actions must be before the end

    def clamp(t: float, lo: float, hi: float) -> float:
        return min(max(t, lo), hi)

    producers = []
    for p in scenario.producers:
        dt_ = rng.uniform(-j.times_s, j.times_s) if j.times_s else 0.0
        k = rng.uniform(1 - j.rates, 1 + j.rates) if j.rates else 1.0
        start = clamp(p.start + dt_, 0.0, end) if p.start > 0 else 0.0
        stop = None if p.stop is None else clamp(p.stop + dt_, start, end)
        producers.append(p.model_copy(update={
            "start": start, "stop": stop, "rate": p.rate * k,
            "ramp_to": None if p.ramp_to is None else p.ramp_to * k,
            "bursts": [b.model_copy(update={"at": clamp(b.at + dt_, 0.0, end)}) for b in p.bursts],
            "pauses": [q.model_copy(update={"at": clamp(q.at + dt_, 0.0, end)}) for q in p.pauses]}))
    groups = []
    for g in scenario.groups:
        members = []
        for m in g.members:
            dt_ = rng.uniform(-j.times_s, j.times_s) if j.times_s else 0.0
            join = clamp(m.join_at + dt_, 0.0, last) if m.join_at > 0 else 0.0
            acts = [a.model_copy(update={"at": clamp(a.at + dt_, join, last)}) for a in m.actions]
            members.append(m.model_copy(update={"join_at": join, "actions": acts}))
        groups.append(g.model_copy(update={"members": members}))
    out = scenario.model_copy(update={"seed": seed, "producers": producers, "groups": groups,
                                      "jitter": Jitter(times_s=0, rates=0, sends=j.sends)})
    return Scenario.model_validate(out.model_dump())  # the shifted schedule is checked like a file


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
