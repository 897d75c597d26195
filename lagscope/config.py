"""lagscope's settings: one YAML file, environment overrides, validated before any connection.

    >>> settings = load_config("lagscope.yaml")                     # doctest: +SKIP
    >>> settings.clusters[0].name, settings.collector.interval_s    # doctest: +SKIP
    ('prod', 15.0)

Sources, lowest to highest priority: defaults in code, the YAML file, environment variables
``LAGSCOPE_<SECTION>__<FIELD>`` (``__`` descends one level; a list is indexed by position or,
for ``clusters``, by cluster name: ``LAGSCOPE_CLUSTERS__prod__SECURITY__PASSWORD``). A value
that starts with ``[`` or ``{`` is parsed as JSON.

Invalid configuration raises :class:`~lagscope.errors.ConfigError` with ONE line naming the
field (``clusters[0].security.protocol: Input should be 'PLAINTEXT', …``); the CLI prints it
as ``config error: …`` and exits with status 2. Secrets are :class:`pydantic.SecretStr`:
their ``repr``/``str`` is ``**********`` and they never reach a log.

Sections: ``clusters`` (what to sweep), ``collector`` (the sweep loop and the lake),
``metrics`` (the Prometheus endpoint), ``time_lag`` (lag in seconds, collector and analytics
alike), ``analytics`` (the job takes this section as it is: its defaults and rule thresholds are
held here only), ``alerts`` (the webhook routes), ``ui`` and ``burrow_api``. Group patterns are
regular expressions everywhere (:func:`check_group_patterns`).
``docs/configuration.md`` is generated from this module (``python -m lagscope.config >
docs/configuration.md``) and a test keeps it in step.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from lagscope.errors import ConfigError
from lagscope.lag import HISTORY_POINTS

__all__ = [
    "AlertRateLimit",
    "AlertRoute",
    "AlertsConfig",
    "AnalyticsConfig",
    "AnalyticsRulesConfig",
    "BurrowApiConfig",
    "ClusterConfig",
    "CollectorConfig",
    "CompactionConfig",
    "ConsumerOffsetsTailConfig",
    "GroupFilter",
    "MetricsConfig",
    "SecurityConfig",
    "Settings",
    "StorageConfig",
    "TimeLagConfig",
    "UiConfig",
    "check_group_patterns",
    "check_retention_days",
    "load_config",
    "matches_any",
    "parse_duration",
    "render_markdown",
    "resolve_results",
]

ENV_PREFIX = "LAGSCOPE_"
ENV_DELIMITER = "__"

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$")
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def parse_duration(text: str) -> float:
    """``"90s"``, ``"15m"``, ``"1h"``, ``"2d"``, ``"250ms"`` → seconds. Raises ValueError."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (expected a number and ms, s, m, h or d, e.g. '1h')")
    return float(m.group(1)) * _UNIT_S[m.group(2)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)


class SecurityConfig(_Section):
    """How to connect and authenticate to a cluster."""

    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="Kafka security.protocol.")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, description="SASL mechanism; required for SASL_PLAINTEXT and SASL_SSL.")
    username: str | None = Field(None, description="SASL user name.")
    password: SecretStr | None = Field(
        None, description="SASL password (secret: never logged). Prefer password_file or the environment.")
    password_file: Path | None = Field(
        None, description="File holding the SASL password (trailing newline stripped); instead of password.")
    ca_file: Path | None = Field(None, description="PEM file of the CA(s) that signed the brokers' certificates.")
    cert_file: Path | None = Field(None, description="PEM client certificate (mutual TLS).")
    key_file: Path | None = Field(None, description="PEM private key of cert_file.")
    check_hostname: bool = Field(True, description="Verify that the broker certificate matches its host name.")

    @model_validator(mode="after")
    def _consistent(self) -> SecurityConfig:
        sasl = self.protocol.startswith("SASL_")
        if sasl:
            if self.sasl_mechanism is None:
                raise ValueError(f"sasl_mechanism is required with protocol {self.protocol}")
            if not self.username:
                raise ValueError(f"username is required with protocol {self.protocol}")
            if self.password is None and self.password_file is None:
                raise ValueError(f"password or password_file is required with protocol {self.protocol}")
        if self.password is not None and self.password_file is not None:
            raise ValueError("give password or password_file, not both")
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together")
        if not self.protocol.endswith("SSL") and (self.ca_file or self.cert_file):
            raise ValueError(f"ca_file/cert_file need an SSL protocol, not {self.protocol}")
        for name in ("password_file", "ca_file", "cert_file", "key_file"):
            path: Path | None = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"{name}: no such file: {path}")
        return self

    def resolved_password(self) -> str | None:
        """The password in clear, for the Kafka client only (never log the result)."""
        if self.password is not None:
            return self.password.get_secret_value()
        if self.password_file is not None:
            try:
                return self.password_file.read_text().rstrip("\r\n")
            except OSError as exc:
                raise ConfigError(f"security.password_file: cannot read {self.password_file}: "
                                  f"{exc.strerror}") from exc
        return None

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments for this security setup (holds the clear password)."""
        opts: dict[str, Any] = {"security_protocol": self.protocol}
        if self.protocol.startswith("SASL_"):
            opts.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.username,
                        sasl_plain_password=self.resolved_password())
        if self.protocol.endswith("SSL"):
            opts["ssl_check_hostname"] = self.check_hostname
            if self.ca_file:
                opts["ssl_cafile"] = str(self.ca_file)
            if self.cert_file:
                opts["ssl_certfile"] = str(self.cert_file)
                opts["ssl_keyfile"] = str(self.key_file)
        return opts


#: the characters a glob pattern keeps literal that a regular expression would not
_REGEX_SPECIAL = set(".^$+{}()|\\")


def _glob_as_regex(glob: str) -> str:
    """The regular expression that matches what the shell-style ``glob`` matches (``*`` any run
    of characters, ``?`` one, ``[!…]`` none of), for the error that suggests it."""
    out = []
    i = 0
    while i < len(glob):
        ch = glob[i]
        if ch == "*":
            out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[" and glob.find("]", i + 2) > 0:
            end = glob.find("]", i + 2)
            body = glob[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append("\\" + ch if ch in _REGEX_SPECIAL else ch)
        i += 1
    return "".join(out)


def _looks_like_glob(pattern: str) -> bool:
    """Whether ``pattern`` is written as a shell glob: a ``*`` that repeats nothing a regex would
    (at the start, or after a plain character as in ``orders-*``; not after ``.``, ``)``, ``]`` or
    an escaped character), or a ``[!…]`` class."""
    escaped = in_class = after_escape = False
    for i, ch in enumerate(pattern):
        if escaped:
            escaped, after_escape = False, True
            continue
        if ch == "\\":
            escaped = True
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            if pattern.startswith("[!", i):
                return True
            in_class = True
        elif ch == "*" and not after_escape and (i == 0 or pattern[i - 1] not in ".)]*+?}"):
            return True
        after_escape = False
    return False


def check_group_patterns(patterns: list[str]) -> list[str]:
    """``patterns`` unchanged when each is a regular expression, else ValueError naming the bad one.

    Group patterns are one language everywhere (the collector's filters, read-committed groups,
    the analytics, the alert routes): Python regular expressions matched against the whole group
    id (:func:`matches_any`). A shell glob (``orders-*``) is refused with the regex it meant,
    never reinterpreted: ``orders-*`` is a valid regex that matches ``orders--``, not ``orders-eu``.
    """
    for p in patterns:
        if _looks_like_glob(p):
            raise ValueError(f"{p!r} looks like a glob pattern, but group patterns are regular expressions "
                             f"matched against the whole group id: write {_glob_as_regex(p)!r}")
        try:
            re.compile(p)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {p!r}: {exc}") from exc
    return patterns


def matches_any(patterns: Iterable[str], group_id: str) -> bool:
    """Whether one of ``patterns`` (regular expressions, see :func:`check_group_patterns`) matches
    the whole of ``group_id``."""
    return any(re.fullmatch(p, group_id) for p in patterns)


class GroupFilter(_Section):
    """Which groups to sweep: a group is swept when it matches an include pattern (or there are
    none) and no exclude pattern. Patterns are Python regular expressions matched against the
    whole group id (``re.fullmatch``)."""

    include: list[str] = Field(default_factory=list, description="Regexes; empty means every group.")
    exclude: list[str] = Field(default_factory=list, description="Regexes of groups to skip.")

    _check = field_validator("include", "exclude")(check_group_patterns)

    def matches(self, group_id: str) -> bool:
        if self.include and not matches_any(self.include, group_id):
            return False
        return not matches_any(self.exclude, group_id)


class ConsumerOffsetsTailConfig(_Section):
    """The optional tail of ``__consumer_offsets`` (exact commit times, group events)."""

    enabled: bool = Field(False, description="Read __consumer_offsets (needs Read on that topic).")
    start: str = Field(
        "1h", description="Where to start on first run: 'earliest', 'latest' or a duration back from now ('1h').")
    batch_probes_per_s: float = Field(
        1.0, ge=0,
        description="Batch probes per second at most (on average; 20 at once): which record batch "
                    "held each commit whose advance passes every one of its group's partition in the 15 "
                    "minutes before, written to the batch_probes table (needs Read on the topics; "
                    "docs/collector.md, 'Batch probes'). 0: none.")

    @field_validator("start")
    @classmethod
    def _start(cls, v: str) -> str:
        if v not in ("earliest", "latest"):
            parse_duration(v)
        return v


class ClusterConfig(_Section):
    """One Kafka cluster to sweep."""

    name: str = Field(description="Cluster name: the lake's cluster partition and the metrics' cluster label.")
    bootstrap_servers: list[str] = Field(
        description="host:port list (a comma-separated string is accepted).", min_length=1)
    security: SecurityConfig = Field(default_factory=SecurityConfig, description="Connection security.")  # type: ignore[arg-type]
    groups: GroupFilter = Field(default_factory=GroupFilter, description="Which groups to sweep.")  # type: ignore[arg-type]
    read_committed_groups: list[str] = Field(
        default_factory=list,
        description="Regexes of groups that consume with isolation.level=read_committed: their lag is "
                    "measured against the last stable offset instead of the high watermark.")
    consumer_offsets_tail: ConsumerOffsetsTailConfig = Field(
        default_factory=ConsumerOffsetsTailConfig, description="Tail of __consumer_offsets.")  # type: ignore[arg-type]

    _check = field_validator("read_committed_groups")(check_group_patterns)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _CLUSTER_NAME.match(v):
            raise ValueError(f"{v!r} is not a valid cluster name (letters, digits, '.', '_', '-'; "
                             "starting with a letter or digit)")
        return v

    @field_validator("bootstrap_servers", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [s.strip() for s in v.split(",") if s.strip()]
        return v

    @field_validator("bootstrap_servers")
    @classmethod
    def _hostports(cls, v: list[str]) -> list[str]:
        for hp in v:
            host, sep, port = hp.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{hp!r} is not host:port")
        return v

    def is_read_committed(self, group_id: str) -> bool:
        return matches_any(self.read_committed_groups, group_id)

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments (bootstrap + security; holds the clear password)."""
        return {"bootstrap_servers": list(self.bootstrap_servers), **self.security.client_options()}


def check_retention_days(v: Any) -> Any:
    """A retention in whole days (``14``, ``"14"`` from the environment), 0 or None to keep
    everything; anything else is one clear line (``"14d"``, ``-1``, ``1.5``, ``true``)."""
    if v is None:
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("days to keep, a whole number such as 14 (0 or null keeps everything)")
    if v < 0:
        raise ValueError("days to keep must be 0 (keep everything) or more")
    if v > 36_500:
        raise ValueError("days to keep: at most 36500 (0 or null keeps everything)")
    return v


class CompactionConfig(_Section):
    """Merging the small per-sweep files of closed hours into one file per partition folder."""

    enabled: bool = Field(True, description="Compact closed hour buckets while collecting.")
    interval_s: float = Field(300.0, gt=0, description="How often the collector looks for work (s).")
    grace_s: float = Field(
        120.0, ge=0, description="An hour bucket is closed this long after it ends (late writers) (s).")
    min_files: int = Field(2, ge=2, description="Compact a bucket only when it has at least this many files.")


class CollectorConfig(_Section):
    """The sweep loop and the sample lake."""

    interval_s: float = Field(15.0, gt=0, description="Seconds between sweep starts.")
    lake: str = Field("./lake", description="Root of the sample lake: a local path (or file:// URI), or "
                                            "s3://bucket/prefix on an object store (the storage section; the sweeps, "
                                            "the __consumer_offsets tail, compaction and retention write there "
                                            "alike, docs/operations.md).")
    request_timeout_ms: int = Field(10000, ge=100, description="Timeout of each Kafka request (ms).")
    sweep_timeout_s: float | None = Field(
        None, gt=0, description="Give up a sweep after this long; default: the interval, at least 3 request timeouts.")
    instance: str | None = Field(None, description="Collector instance id in the sweeps table; default host:pid.")
    compaction: CompactionConfig = Field(default_factory=CompactionConfig, description="Lake compaction.")  # type: ignore[arg-type]
    retention: int | None = Field(
        14, description="Days of the lake to keep: the collector removes older date partitions hourly (one day of "
                        "margin; never one still written to or not yet analysed); 0 or null keeps everything. 1,000 "
                        "group-partitions at the 15 s interval take about 22 MB a day compacted (docs/operations.md).")

    _check_retention = field_validator("retention", mode="before")(check_retention_days)

    @field_validator("lake")
    @classmethod
    def _lake(cls, v: str) -> str:
        if "://" in v and not v.startswith(("file://", "s3://")):
            raise ValueError(f"{v!r}: a lake is a local path, a file:// URI or s3://bucket/prefix")
        if not v.strip():
            raise ValueError("lake must not be empty")
        return v

    @property
    def lake_is_object_store(self) -> bool:
        """Whether the lake is on an object store (``s3://…``)."""
        return self.lake.startswith("s3://")

    @property
    def lake_path(self) -> Path:
        """The local lake folder. Raises :class:`ConfigError` for a lake on an object store, which
        the commands that read a local lake do not read yet."""
        if self.lake_is_object_store:
            raise ConfigError(f"collector.lake is on an object store ({self.lake}): this reads a local lake only "
                              "so far (issue 24)")
        return Path(self.lake.removeprefix("file://"))

    def effective_sweep_timeout_s(self) -> float:
        if self.sweep_timeout_s is not None:
            return self.sweep_timeout_s
        return max(self.interval_s, 3 * self.request_timeout_ms / 1000)


_CompatName = Literal["kafka_exporter", "kafka-lag-exporter"]
_COMPAT_DEFAULT: tuple[_CompatName, ...] = ("kafka_exporter", "kafka-lag-exporter")


class MetricsConfig(_Section):
    """The live Prometheus endpoint of the collector."""

    enabled: bool = Field(True, description="Serve /metrics while collecting.")
    bind: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(9839, ge=0, lt=65536,
                      description="TCP port (0 picks a free port); not 9308, so kafka_exporter can run beside it.")
    compat: list[_CompatName] = Field(
        default_factory=lambda: list(_COMPAT_DEFAULT),
        description="Exporter-compatible name sets served besides lagscope's own lagscope_* series (always "
                    "served): kafka_exporter (kafka_consumergroup_lag, …), kafka-lag-exporter "
                    "(kafka_consumergroup_group_lag, …); [] for the fewest series. lagscope's Grafana dashboards "
                    "and its LagscopeCommitsStalled and LagscopeRetentionLoss alert rules read kafka_exporter's "
                    "names: without them those panels stay empty and those alerts never fire.")

    @field_validator("compat")
    @classmethod
    def _no_repeats(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("a name set is listed twice")
        return v


_DRIVER_MEMORY = re.compile(r"^\d+[kmgt]?$", re.IGNORECASE)


class TimeLagConfig(_Section):
    """Lag in seconds, the same for the collector's live metrics and the analytics (lagscope.lag):
    the end-offset history it is interpolated over."""

    history_points: int = Field(
        HISTORY_POINTS, ge=1, le=100_000,
        description="End-offset points (rises of the end seen between two sweeps) used per group-partition; "
                    "points at or below the committed offset are dropped, so only lagging partitions hold many: "
                    "a committed offset older than these is reported as a lower bound. More reach further back, "
                    "at about 150 bytes each in the collector's memory and a row each in the analytics' state.")


class AnalyticsRulesConfig(_Section):
    """Thresholds of the anomaly and status rules (docs/analytics.md), held here only: the analytics
    take this model, and the Prometheus alert rules watching the same things are generated from it
    (``lagscope dashboards rules``). The defaults suit hours of production traffic; ``lagscope demo``
    uses tighter ones for its one-minute scenario."""

    stall_after_s: float = Field(
        60.0, gt=0, description="stall: lag > 0, an owner (or one gone for less than stop_after_s: a restart), and "
                                "the committed offset still this long (s).")
    stop_after_s: float = Field(
        60.0, gt=0, description="stop: as stall but nobody owns the partition (s). The status says STOP once "
                                "nobody has owned it for this long as well (an owner gone for less, a restart, "
                                "leaves a STALL).")
    skip_factor: float = Field(
        5.0, gt=0, description="skip (`seek`, `out_of_range_reset`): the advance is more than this × the group's "
                               "demonstrated capacity before the commit (the largest rates over intervals with a "
                               "backlog at both ends, once one was saturated; an interval that jumped to the log "
                               "end faster than this × the rate before it never counts, nor one whose owner advanced "
                               "another of its partitions more than this × faster: starved) × the interval. No size "
                               "floor: "
                               "`skip_min_messages` is gone (a file that still sets it fails at start-up, as "
                               "any unknown key does).")
    gap_k: float = Field(
        6.0, gt=0, description="commit_gap: gap > median + gap_k × max(1.4826 × MAD, gap_mad_floor_s) of the "
                               "partition's own gaps.")
    gap_mad_floor_s: float = Field(1.0, gt=0, description="commit_gap: the least spread assumed (s).")
    gap_min_s: float = Field(10.0, ge=0, description="commit_gap: shorter gaps are never anomalies (s).")
    gap_min_samples: int = Field(
        5, ge=1, description="commit_gap: gaps learnt per partition before its gaps are judged.")
    growth_min_minutes: int = Field(
        5, ge=1, description="lag_growth: lag rose and produce > consume this many minutes in a row.")
    storm_count: int = Field(3, ge=2, description="rebalance_storm: this many rebalances …")
    storm_window_s: float = Field(600.0, gt=0, description="… within this window (s).")
    warn_lag_s: float = Field(
        30.0, ge=0, description="status WARN: lag in seconds at least this and growing over the window (s).")
    burrow_window: int = Field(10, ge=2, description="status: offset commits per evaluation window (Burrow's).")
    forget_after_s: float = Field(
        3600.0, gt=0, description="A partition without a sweep for this long (its group or topic deleted, or no "
                                  "longer swept) is forgotten: a step drops its carried state, and a sweep after "
                                  "such a silence starts it afresh, as a new partition, in a batch as in the steps. "
                                  "A group without a member sweep for this long is forgotten too: its next sweep "
                                  "starts a new life, which no rebalance window pairs with the last. "
                                  "The results exporter and the alerts drop a partition's series or a group's status "
                                  "whose rows stopped this long while its cluster's go on (the group is gone). "
                                  "Never less than the longest window a rule reads (the stall and stop thresholds, "
                                  "the storm window, the lag-growth run, the 15 minutes of commit records a step "
                                  "reads before its range): the larger of the two is used (s).")

    def forget_horizon_s(self) -> float:
        """The silence after which a partition is forgotten: ``forget_after_s``, at least the longest
        window a rule reads (:data:`COMMIT_LOOKBACK_S` of commit records among them)."""
        return max(self.forget_after_s, self.stall_after_s, self.stop_after_s, self.storm_window_s,
                   (self.growth_min_minutes + 1) * 60.0, COMMIT_LOOKBACK_S)


#: the commit records an incremental step reads from before its range (s;
#: ``lagscope.analytics.job.COMMIT_LOOKBACK``)
COMMIT_LOOKBACK_S = 900.0


class AdviceRulesConfig(_Section):
    """Thresholds of the advice rules (docs/analytics.md, "Advice", says why each is what it is). A
    rule never advises on less evidence than these ask for."""

    min_evidence: int = Field(
        2, ge=1, description="The least windows or findings a rule rests on (one event is an accident, not a "
                             "pattern).")
    min_retention_losses: int = Field(
        1, ge=1, description="retention_vs_catchup: proven retention losses that suffice (a proven loss is "
                             "unambiguous: messages were never processed; one not proven, a warning, is "
                             "no such evidence) …")
    min_risk_minutes: int = Field(2, ge=1, description="… or this many minutes at risk.")
    short_session_s: float = Field(
        10.0, gt=0, description="session_timeout_crash: the session timeout suggested, and the shortest worth "
                                "advising from (s).")
    restart_within_s: float = Field(
        300.0, gt=0, description="A member that left (crashed, left or was removed) and is back as the same "
                                 "identity (client.id and host) within this is a restart, not churn (s).")
    restart_share: float = Field(
        0.5, gt=0, le=1, description="Static membership is advised when at least this share of the timed-out "
                                     "members (session_timeout_crash) or of a storm's join/leave windows "
                                     "(restart_storm) were restarts; a storm below it is churn.")
    min_storm_windows: int = Field(
        3, ge=1, description="restart_storm: the join/leave windows a storm needs.")
    min_gain: float = Field(
        0.2, ge=0, lt=1, description="restart_storm: a remedy is advised only when it predicts at least this share "
                                     "of the average partition's pause per storm saved.")
    large_members: int = Field(
        4, ge=2, description="eager_large_group: a group this large (members before the window) …")
    long_window_s: float = Field(5.0, gt=0, description="… stopped at least this long per window (s).")
    rewind_after_s: float = Field(
        120.0, gt=0, description="rewind_after_rebalance: a rewind from a window's start to this long after its "
                                 "end (s).")
    poll_margin: float = Field(
        1.5, ge=1, description="max_poll_interval: the interval suggested is this × the longest silence seen, in "
                               "whole minutes.")
    retention_margin: float = Field(
        2.0, ge=1, description="retention_vs_catchup: the headroom suggested is this × the worst catch-up.")


class AnalyticsConfig(_Section):
    """Spark analytics: ``lagscope analyze``, the analytics loop of ``lagscope run`` and the demo.
    Command-line options override these settings."""

    results: str | None = Field(
        None, description="Root of the result tables (local path, file:// URI, or s3://bucket/prefix with the "
                          "storage section: written and read by lagscope analyze and lagscope run, read by the results "
                          "exporter, the alerts, the Burrow API and the app's loaders); default: 'results' beside "
                          "the collector's lake (folder or prefix).")
    master: str = Field("local[*]", description="Spark master: local[*], spark://host:7077, k8s://…, yarn.")
    shuffle_partitions: int | None = Field(
        None, ge=1, description="spark.sql.shuffle.partitions; default: 8 for analyze, 4 for run.")
    driver_memory: str = Field(
        "1g", description="spark.driver.memory (e.g. '2g'): the JVM moves a task's blobs, not the step's tables, "
                          "so a small driver suffices (benchmarks/results/analytics_speed.md).")
    interval_s: float = Field(60.0, gt=0, description="lagscope run: seconds between incremental steps.")
    provisional: bool = Field(
        True, description="lagscope run: after each incremental step, a provisional step over the minute in "
                          "progress (up to one collector interval before now) publishes its findings at once, "
                          "replaced by the next full step; it writes no state (docs/analytics.md). false: "
                          "findings wait for their minute to end.")
    backfill: str = Field(
        "24h", description="lagscope run, first step only (no checkpoint yet): analyse this long before now.")
    read_committed_groups: list[str] = Field(
        default_factory=list,
        description="Regexes (full match, like the clusters' read_committed_groups) of groups that consume "
                    "with isolation.level=read_committed, besides those the collector measured against the "
                    "last stable offset.")
    session_timeout_s: float = Field(
        45.0, gt=0, description="Rebalances: session.timeout.ms assumed when __consumer_offsets does not tell (s).")
    heartbeat_s: float = Field(3.0, gt=0, description="Rebalances and advice: heartbeat.interval.ms assumed (s; the "
                                                       "group-metadata records do not carry it).")
    network_s: float = Field(1.0, ge=0, description="Rebalances: allowance for network delay (s).")
    rebalance_timeout_s: float = Field(
        300.0, gt=0, description="Rebalances: max.poll.interval.ms assumed when __consumer_offsets does not tell (s).")
    retention: int | None = Field(
        30, description="Days of result tables to keep: lagscope run's analytics loop removes older date partitions "
                        "hourly (one day of margin; never one still written to); 0 or null keeps everything.")

    _check_retention = field_validator("retention", mode="before")(check_retention_days)

    _check_rc = field_validator("read_committed_groups")(check_group_patterns)
    rules: AnalyticsRulesConfig = Field(
        default_factory=AnalyticsRulesConfig, description="Rule thresholds.")  # type: ignore[arg-type]
    advice: AdviceRulesConfig = Field(
        default_factory=AdviceRulesConfig, description="Advice rule thresholds.")  # type: ignore[arg-type]

    @field_validator("results")
    @classmethod
    def _results(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.strip():
            raise ValueError("results must not be empty")
        if "://" in v and not v.startswith(("file://", "s3://")):
            raise ValueError(f"{v!r}: results are a local path, a file:// URI or s3://bucket/prefix")
        return v

    @field_validator("driver_memory")
    @classmethod
    def _memory(cls, v: str) -> str:
        if not _DRIVER_MEMORY.match(v):
            raise ValueError(f"{v!r} is not a JVM memory size such as '512m' or '2g'")
        return v

    @field_validator("backfill")
    @classmethod
    def _backfill(cls, v: str) -> str:
        parse_duration(v)
        return v

    @property
    def results_path(self) -> Path | None:
        """The local results folder (None: beside the lake). Raises :class:`ConfigError` for
        results on an object store, which the commands that take a local folder do not write yet."""
        if self.results is not None and self.results.startswith("s3://"):
            raise ConfigError(f"analytics.results is on an object store ({self.results}): this takes local results "
                              "only so far (issue 24; lagscope analyze and results-exporter take s3://)")
        return None if self.results is None else Path(self.results.removeprefix("file://"))

    def backfill_s(self) -> float:
        return parse_duration(self.backfill)


class AlertRateLimit(_Section):
    """At most ``max`` deliveries per ``per_s`` seconds to a route; the rest wait, never dropped."""

    max: int = Field(gt=0, description="Deliveries allowed per window.")
    per_s: float = Field(gt=0, description="Window length (s).")


_ROUTE_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class AlertRoute(_Section):
    """One webhook destination: which findings it wants (severity, clusters, groups, kinds), the
    payload format, a rate limit and the HMAC signing secret (read when signing, never kept)."""

    name: str = Field(description="Letters, digits, '.', '_', '-'; unique among the routes.")
    url: str = Field(description="The webhook's http:// or https:// URL (its path is never logged).")
    format: Literal["generic", "slack", "alertmanager"] = Field("generic", description="Payload format.")
    min_severity: Literal["info", "warning", "critical"] = Field(
        "warning", description="Findings below this severity are not sent.")
    clusters: list[str] | None = Field(None, description="Cluster names; omitted: every cluster.")
    groups: list[str] | None = Field(
        None, description="Regexes of group ids (full match, like the clusters' groups filter); omitted: every "
                           "group.")
    kinds: list[str] | None = Field(
        None, description="Finding kinds (stall, stop, rebalance, status, …); omitted: every kind.")
    rate_limit: AlertRateLimit | None = Field(
        None, description="`{max: N, per_s: S}`: at most N deliveries per S seconds, the rest wait (never "
                          "dropped); omitted: no limit.")
    secret_env: str | None = Field(None, description="Environment variable holding the HMAC-SHA256 key.")
    secret_file: Path | None = Field(None, description="File whose first line is the HMAC-SHA256 key.")
    timeout_s: float = Field(5.0, gt=0, description="Timeout of one delivery (s).")
    headers: dict[str, str] = Field(default_factory=dict, description="Extra request headers.")

    @field_validator("groups", mode="before")
    @classmethod
    def _one_pattern(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("groups")
    @classmethod
    def _patterns(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else check_group_patterns(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _ROUTE_NAME.match(v):
            raise ValueError(f"{v!r} is not a valid route name (letters, digits, '.', '_', '-')")
        return v

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return v

    @model_validator(mode="after")
    def _one_secret(self) -> AlertRoute:
        if self.secret_env and self.secret_file:
            raise ValueError("give secret_env or secret_file, not both")
        return self

    def secret(self) -> bytes | None:
        """The HMAC key, read now from the environment or the file; None when unsigned (never log it)."""
        if self.secret_env:
            value = os.environ.get(self.secret_env)
            if not value:
                raise ConfigError(f"alerts route {self.name}: environment variable {self.secret_env} is not set")
            return value.encode()
        if self.secret_file:
            try:
                lines = self.secret_file.read_text().splitlines()
            except OSError as exc:
                raise ConfigError(f"alerts route {self.name}: cannot read secret_file {self.secret_file}: "
                                  f"{exc.strerror}") from exc
            if not lines or not lines[0].strip():
                raise ConfigError(f"alerts route {self.name}: secret_file {self.secret_file} is empty")
            return lines[0].strip().encode()
        return None


class AlertsConfig(_Section):
    """Alert webhooks (docs/alerting.md): ``lagscope alerts …`` and the alerts part of ``lagscope
    run``, which runs when ``routes`` is not empty. Links in the payloads point at ``ui.url``."""

    runbook_url: str = Field(
        "https://github.com/lagscope/lagscope/blob/main/docs/alerting.md",
        description="The runbooks; a payload links to the finding's section (#group-stalled, …).")
    lookback_s: float = Field(
        3600.0, ge=0, description="A finding first seen already closed is sent only when it ended this recently (s).")
    routes: list[AlertRoute] = Field(default_factory=list, description="Where notifications go.")

    @field_validator("routes")
    @classmethod
    def _unique_names(cls, routes: list[AlertRoute]) -> list[AlertRoute]:
        names = [r.name for r in routes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"route names must be unique; repeated: {', '.join(dupes)}")
        return routes

    def route(self, name: str) -> AlertRoute | None:
        return next((r for r in self.routes if r.name == name), None)

    def check_secrets(self) -> None:
        """Raise :class:`ConfigError` now for a route whose secret cannot be read (unset variable,
        missing or empty file), instead of at each delivery. The secrets are read again when
        signing (a rotated one is picked up) and are not kept."""
        for route in self.routes:
            route.secret()


class StorageConfig(_Section):
    """Object storage for an ``s3://bucket/prefix`` lake or results root (lagscope/storage.py): the
    S3-compatible endpoint and how to authenticate. A local path needs none of it."""

    endpoint: str | None = Field(
        None, description="URL of an S3-compatible store (http://host:port or https://host:port); default: AWS S3 "
                          "of the region. A store that answers uploads with HTTP 411 MissingContentLength refuses the "
                          "AWS SDK's streamed checksums: set AWS_REQUEST_CHECKSUM_CALCULATION=when_required and "
                          "AWS_RESPONSE_CHECKSUM_VALIDATION=when_required in lagscope's environment.")
    region: str = Field("us-east-1", description="The bucket's region (AWS S3; most S3-compatible stores take "
                                                 "any).")
    path_style: bool | None = Field(
        None, description="Address buckets as <endpoint>/<bucket> (true) or <bucket>.<endpoint> (false); default: "
                          "path-style with an endpoint, virtual-hosted on AWS. True needs an endpoint.")
    credentials: Literal["default", "env", "anonymous"] = Field(
        "default", description="default: the AWS SDK's chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/"
                               "AWS_SESSION_TOKEN, then the profile AWS_PROFILE names in ~/.aws, then a web-identity "
                               "token (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN, as on Kubernetes), then the "
                               "instance's role); env: those three variables only, missing ones an error at "
                               "start; anonymous: unsigned requests (a public bucket). Never logged.")

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/?#]+/?$", v):
            raise ValueError("must be http://host[:port] or https://host[:port] (no path)")
        return v

    @model_validator(mode="after")
    def _path_style_needs_endpoint(self) -> StorageConfig:
        if self.path_style and self.endpoint is None:
            raise ValueError("path_style: true needs an endpoint (AWS S3 itself is addressed virtual-hosted)")
        return self


class UiConfig(_Section):
    """The Streamlit drill-down app (fields added by the UI component)."""

    url: str = Field("http://localhost:8501", description=(
        "The app's base URL as its users reach it: the links of Grafana data links, annotations and alert "
        "payloads point here (`LAGSCOPE_UI__URL`)."))

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"^https?://[^\s/?#]+", v):
            raise ValueError("must be an http:// or https:// URL")
        return v


class BurrowApiConfig(_Section):
    """Burrow's HTTP API v3 (read endpoints) served from the lake and the results (docs/burrow.md):
    ``lagscope burrow-api``, and a part of ``lagscope run`` when enabled."""

    enabled: bool = Field(False, description="lagscope run: serve the Burrow API too.")
    bind: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(8000, ge=0, lt=65536, description="TCP port (0 picks a free port); Burrow's default is 8000.")
    refresh_s: float = Field(5.0, gt=0, description="Look for new sweeps and status rows this often (s).")
    history: str = Field("1h", description="At start, read this much of the lake back for the offset entries.")
    expire_group: str = Field("7d", description="Forget a group not swept for this long (Burrow's expire-group).")
    status: Literal["burrow", "lagscope"] = Field(
        "burrow", description="Which status to serve: the Burrow-compatible one (Burrow's rules), or lagscope's "
                              "own in Burrow's words (IDLE is OK; no STOP at zero lag, no WARN on a steady lag).")

    @field_validator("history", "expire_group")
    @classmethod
    def _duration(cls, v: str) -> str:
        parse_duration(v)
        return v


class Settings(BaseSettings):
    """All of lagscope's settings (see :func:`load_config`)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_nested_delimiter=ENV_DELIMITER,
                                      extra="forbid", frozen=True, validate_default=True)

    clusters: list[ClusterConfig] = Field(default_factory=list, description="The Kafka clusters to sweep.")
    collector: CollectorConfig = Field(default_factory=CollectorConfig, description="Sweep loop and lake.")  # type: ignore[arg-type]
    metrics: MetricsConfig = Field(default_factory=MetricsConfig, description="Prometheus endpoint.")  # type: ignore[arg-type]
    time_lag: TimeLagConfig = Field(
        default_factory=TimeLagConfig, description="Lag in seconds (collector and analytics).")  # type: ignore[arg-type]
    analytics: AnalyticsConfig = Field(default_factory=AnalyticsConfig, description="Spark analytics.")  # type: ignore[arg-type]
    alerts: AlertsConfig = Field(default_factory=AlertsConfig, description="Alert webhooks.")  # type: ignore[arg-type]
    storage: StorageConfig = Field(
        default_factory=StorageConfig, description="Object storage (s3:// lake and results).")  # type: ignore[arg-type]
    ui: UiConfig = Field(default_factory=UiConfig, description="Streamlit app.")  # type: ignore[arg-type]
    burrow_api: BurrowApiConfig = Field(
        default_factory=BurrowApiConfig, description="Burrow's HTTP API.")  # type: ignore[arg-type]

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # the environment is merged by load_config (it indexes lists, which pydantic-settings
        # does not), so the model itself only takes what it is given
        return (init_settings,)

    @field_validator("clusters")
    @classmethod
    def _unique_names(cls, v: list[ClusterConfig]) -> list[ClusterConfig]:
        names = [c.name for c in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"cluster names must be unique; repeated: {', '.join(dup)}")
        return v

    def cluster(self, name: str) -> ClusterConfig:
        for c in self.clusters:
            if c.name == name:
                return c
        raise ConfigError(f"clusters: no cluster named {name!r}; configured: "
                          f"{', '.join(c.name for c in self.clusters) or 'none'}")


# ------------------------------------------------------------------------------------------------
# loading


def _env_value(raw: str) -> Any:
    s = raw.strip()
    if s[:1] in "[{":
        try:
            return json.loads(s)
        except ValueError:
            return raw
    return raw


def _apply_env(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """Overlay ``LAGSCOPE_A__B__C=value`` onto ``data`` (lists indexed by position or cluster name)."""
    for key in sorted(environ):
        if not key.upper().startswith(ENV_PREFIX) or key.upper() == "LAGSCOPE_TEST_BOOTSTRAP":
            continue
        path = key[len(ENV_PREFIX):].split(ENV_DELIMITER)
        if not path or path[0].lower() not in Settings.model_fields:
            if len(path) > 1:  # SECTION__FIELD: meant as a setting, so a misspelt section is an error
                raise ConfigError(f"{key}: unknown section {path[0].lower()!r} "
                                  f"(sections: {', '.join(Settings.model_fields)})")
            continue  # other LAGSCOPE_* variables (e.g. LAGSCOPE_KAFKA_CACHE) are not settings
        node: Any = data
        for i, part in enumerate(path):
            last = i == len(path) - 1
            if isinstance(node, list):
                idx = _list_index(node, part, key)
                if last:
                    node[idx] = _env_value(environ[key])
                else:
                    if not isinstance(node[idx], dict):
                        node[idx] = {}
                    node = node[idx]
                continue
            name = part.lower()
            if last:
                node[name] = _env_value(environ[key])
            else:
                child = node.get(name)
                if not isinstance(child, dict | list):
                    # clusters is a list even when the file has none (then indexed by name: an error)
                    child = node[name] = [] if path[i + 1].isdigit() or (i == 0 and name == "clusters") else {}
                node = child
    return data


def _list_index(items: list[Any], part: str, key: str) -> int:
    if part.isdigit():
        idx = int(part)
        while len(items) <= idx:
            items.append({})
        return idx
    for idx, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == part:
            return idx
    raise ConfigError(f"{key}: no list entry named {part!r}")


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not (isinstance(part, str) and ("[" in part or part.startswith("function-"))):
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def format_validation_error(exc: ValidationError) -> str:
    """One line: the first error's field path and message (never the offending value)."""
    errors = exc.errors(include_input=False, include_url=False)
    first = errors[0]
    msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
    if first.get("type") == "extra_forbidden":
        msg = "unknown setting"
    line = f"{_loc(tuple(first.get('loc', ())))}: {msg}"
    if len(errors) > 1:
        line += f" (and {len(errors) - 1} more)"
    return " ".join(line.split())


def resolve_results(results: Path | None, lake: Path, analytics: AnalyticsConfig | None = None) -> Path:
    """The root of the result tables: ``results`` when given (a ``--results`` option), else
    ``analytics.results`` of the settings, else ``results`` beside the lake folder
    (``<lake>/../results``). Every command that writes or reads the results defaults through
    here (``analyze``, ``run``, ``demo``, ``ui``), so that they agree."""
    if results is not None:
        return results
    if analytics is not None and analytics.results_path is not None:
        return analytics.results_path
    return lake.parent / "results"


def resolve_results_root(results: str | Path | None, lake: str | Path,
                         analytics: AnalyticsConfig | None = None) -> Path | str:
    """:func:`resolve_results` for roots that may be on an object store: ``results`` when given,
    else ``analytics.results``, else ``results`` beside the lake (``s3://b/p/lake`` →
    ``s3://b/p/results``). An ``s3://`` root is returned as its URL, a local one as a path."""
    chosen = results if results is not None else (analytics.results if analytics is not None else None)
    if chosen is not None:
        text = str(chosen)
        return text.rstrip("/") if text.startswith("s3://") else Path(text.removeprefix("file://"))
    text = str(lake)
    if text.startswith("s3://"):
        bucket, _, prefix = text.removeprefix("s3://").partition("/")
        prefix = prefix.strip("/")
        if not prefix:
            raise ConfigError(f"the lake is a whole bucket ({text}): give the results' root (--results or "
                              "analytics.results)")
        parent = prefix.rpartition("/")[0]
        return f"s3://{bucket}/{parent}/results" if parent else f"s3://{bucket}/results"
    return Path(text.removeprefix("file://")).parent / "results"


def load_config(path: str | Path | None = None, *, environ: Mapping[str, str] | None = None) -> Settings:
    """Read ``path`` (YAML; None → defaults only), overlay the environment, validate.

    Raises :class:`ConfigError` with one line naming the field; nothing is connected yet.
    """
    data: dict[str, Any] = {}
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text()
        except OSError as exc:
            raise ConfigError(f"{p}: cannot read the configuration file: {exc.strerror}") from exc
        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" (line {mark.line + 1})" if mark is not None else ""
            raise ConfigError(f"{p}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: the top level must be a mapping of sections, not {type(loaded).__name__}")
        data = loaded
    data = _apply_env(data, os.environ if environ is None else environ)
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from None


# ------------------------------------------------------------------------------------------------
# documentation


def _type_name(annotation: Any) -> str:
    text = str(annotation)
    text = re.sub(r"<class '([\w.]+)'>", r"\1", text)
    text = re.sub(r"\b(?:[a-z_]+\.)+([A-Za-z_]+)", r"\1", text)
    text = text.replace("typing.", "").replace("NoneType", "None")
    text = re.sub(r"Optional\[(.*)\]$", r"\1 | None", text)
    text = re.sub(r"Literal\[(.*?)\]", lambda m: " | ".join(m.group(1).split(", ")), text)
    return text.replace(" | ", " or ")


def _default_text(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
        if isinstance(value, BaseModel):
            return "(section)"
        return f"`{json.dumps(value)}`"
    value = field.default
    if isinstance(value, SecretStr):
        return "`**********`"
    return f"`{json.dumps(value, default=str)}`"


def _walk(model: type[BaseModel], prefix: str, lines: list[str], sections: list[tuple[str, type[BaseModel]]]) -> None:
    for name, field in model.model_fields.items():
        ann = field.annotation
        path = f"{prefix}{name}"
        sub = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        inner: tuple[Any, ...] = tuple(getattr(ann, "__args__", ()))
        first = inner[0] if len(inner) == 1 else None
        item = first if isinstance(first, type) and issubclass(first, BaseModel) else None
        if sub is not None:
            sections.append((path, sub))
            continue
        if item is not None:
            sections.append((f"{path}[]", item))
            continue
        lines.append(f"| `{path}` | {_type_name(ann)} | {_default_text(field)} | {field.description or ''} |")


def render_markdown() -> str:
    """docs/configuration.md, generated from the model (a test checks the file is in step)."""
    out = [
        "# Configuration",
        "",
        "<!-- generated by `python -m lagscope.config > docs/configuration.md`; do not edit by hand -->",
        "",
        "One YAML file (`lagscope collect --config lagscope.yaml`), one section per component, defaults",
        "in code. Environment variables override the file: `LAGSCOPE_<SECTION>__<FIELD>` (`__` descends",
        "one level; a list is indexed by position or, for `clusters`, by cluster name), e.g.",
        "`LAGSCOPE_COLLECTOR__INTERVAL_S=5` or `LAGSCOPE_CLUSTERS__prod__SECURITY__PASSWORD=…`. A value",
        "that starts with `[` or `{` is read as JSON.",
        "",
        "Invalid configuration stops lagscope before it connects to anything, with one line naming",
        "the field, and exit status 2:",
        "",
        "```",
        "config error: clusters[0].security.protocol: Input should be 'PLAINTEXT', 'SSL', "
        "'SASL_PLAINTEXT' or 'SASL_SSL'",
        "```",
        "",
        "Secrets (`password`, webhook keys) are never logged or printed; prefer `password_file` or the",
        "environment.",
        "",
        "Group patterns (`groups.include`, `groups.exclude`, `read_committed_groups`, `alerts.routes[].groups`)",
        "are one language everywhere: Python regular expressions matched against the whole group id",
        "(`orders-.*`, `payments|ledger`). A pattern written as a shell glob is refused with the regex it",
        "meant (`'orders-*' looks like a glob pattern, …: write 'orders-.*'`), never read as a different regex.",
        "",
        "```yaml",
        "clusters:",
        "  - name: prod",
        "    bootstrap_servers: [kafka-1:9093, kafka-2:9093]",
        "    security: {protocol: SASL_SSL, sasl_mechanism: SCRAM-SHA-512, username: lagscope,",
        "               password_file: /run/secrets/kafka, ca_file: /etc/kafka/ca.pem}",
        "    groups: {include: ['orders-.*'], exclude: ['.*-test']}",
        "    read_committed_groups: ['payments-.*']",
        "collector: {interval_s: 15, lake: /var/lib/lagscope/lake, retention: 14}",
        "metrics: {bind: 127.0.0.1, port: 9839, compat: [kafka_exporter]}",
        "analytics:",
        "  results: /var/lib/lagscope/results",
        "  master: spark://spark-master:7077",
        "  interval_s: 60",
        "  read_committed_groups: [payments-ledger]",
        "  rules: {stall_after_s: 120, warn_lag_s: 60}",
        "  retention: 30",
        "alerts:",
        "  routes:",
        "    - {name: oncall, url: 'https://hooks.example.org/lagscope', format: alertmanager,",
        "       groups: ['orders-.*'], secret_env: LAGSCOPE_ONCALL_SECRET}",
        "ui: {url: 'https://lagscope.example.org'}",
        "```",
        "",
        "`analytics.rules` holds every rule threshold once: the analytics apply them, and the Prometheus",
        "alert rules that watch the same things are generated from them",
        "(`lagscope dashboards rules --config lagscope.yaml --out …`, [alerting](alerting.md)).",
        "",
        "Command-line options override the file: `lagscope analyze --config lagscope.yaml "
        "--stall-after-s 30`.",
        "",
        "Retention (`collector.retention`, `analytics.retention`) is in whole days; 0 or null keeps",
        "everything, a bad value (`14d`, `-1`) stops lagscope with one line. What goes and when, and",
        "how the defaults are sized: [operations.md](operations.md#retention).",
        "",
    ]
    sections: list[tuple[str, type[BaseModel]]] = [("", Settings)]
    while sections:
        path, model = sections.pop(0)
        rows: list[str] = []
        found: list[tuple[str, type[BaseModel]]] = []
        _walk(model, f"{path}." if path else "", rows, found)
        title = path or "top level"
        doc = (model.__doc__ or "").strip().split("\n\n")[0]
        out += [f"## `{title}`", "", " ".join(doc.split()), ""]
        if rows:
            out += ["| setting | type | default | meaning |", "|---|---|---|---|", *rows, ""]
        else:
            out += ["No settings yet.", ""] if not found else []
        sections = found + sections
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render_markdown())
