"""The exceptions lagscope raises, under one root.

    LagscopeError
    ├── ConfigError            invalid configuration (raised at start-up, before any connection)
    ├── BrokerError            the local test/demo broker could not be fetched, started or stopped
    │   └── JarsUnavailable    the Kafka jars are missing and Maven could not fetch them
    ├── KafkaUnavailable       a cluster did not answer (connection refused, timeout, no coordinator)
    ├── ProtocolError          a Kafka response could not be understood
    ├── RecordDecodeError      a __consumer_offsets record could not be decoded
    ├── LakeError              the sample lake could not be read or written
    │   ├── DataExpired        the days asked for were removed by retention
    │   └── FileQuarantined    a file failed while being read and was moved into quarantine
    ├── SparkClusterError      a local Spark standalone cluster could not be started or stopped
    └── ScenarioError          a simulator scenario is invalid or failed to run

Third-party errors are wrapped at the boundary: ``raise KafkaUnavailable(...) from exc``.
"""

from __future__ import annotations

__all__ = [
    "BrokerError",
    "ConfigError",
    "DataExpired",
    "FileQuarantined",
    "JarsUnavailable",
    "KafkaUnavailable",
    "LagscopeError",
    "LakeError",
    "ProtocolError",
    "RecordDecodeError",
    "ScenarioError",
    "SparkClusterError",
]


class LagscopeError(Exception):
    """Root of every error lagscope raises on purpose."""


class ConfigError(LagscopeError):
    """Invalid configuration; the message is one line naming the field."""


class BrokerError(LagscopeError):
    """The local broker could not be fetched, started or stopped."""


class JarsUnavailable(BrokerError):
    """Jars (Kafka's, or the s3a connector's) are not in their cache and Maven could not fetch them."""


class KafkaUnavailable(LagscopeError):
    """A Kafka cluster or one of its brokers did not answer."""


class ProtocolError(LagscopeError):
    """A Kafka response could not be understood."""


class RecordDecodeError(LagscopeError):
    """A record of __consumer_offsets could not be decoded (truncated, unknown version, …)."""


class LakeError(LagscopeError):
    """The sample lake could not be read or written."""


class DataExpired(LakeError):
    """The days asked for are gone: retention removed them (``collector.retention``)."""


class FileQuarantined(LakeError):
    """A file failed while being read (past its footer) and was moved into its table's quarantine
    (:func:`lagscope.lake.quarantine`): read again without it."""


class SparkClusterError(LagscopeError):
    """A local Spark standalone master or worker could not be started, reached or stopped."""


class ScenarioError(LagscopeError):
    """A simulator scenario is invalid or could not be run."""
