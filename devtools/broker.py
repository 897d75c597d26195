"""A real single-node Apache Kafka broker (KRaft mode) on 127.0.0.1, for tests and the demo.

The jars come from Maven Central through ``deploy/kafka/pom.xml`` and are cached in
``deploy/kafka/.cache/<version>/libs`` (or ``$LAGSCOPE_KAFKA_CACHE/<version>/libs``): the pom
stays with what production runs (the local broker is part of ``deploy/``), this launcher is a
development tool.

    >>> with LocalBroker(workdir) as broker:          # doctest: +SKIP
    ...     admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)

The broker's own log goes to ``<workdir>/broker.log``, never to the terminal. ``stop()``
sends SIGTERM, waits for a clean shutdown and kills the process if it hangs.

With ``sasl_ssl=True`` a second listener speaks SASL_SSL with SCRAM-SHA-512 over TLS; its CA
is generated at start-up (``<workdir>/tls/ca.pem``) and the SCRAM user's password is random,
kept in ``<workdir>/scram-password`` (mode 0600) and never logged.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import ipaddress
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import lagscope.deploy
from lagscope.errors import BrokerError, JarsUnavailable
from lagscope.procs import terminate

__all__ = [
    "DEFAULT_VERSION",
    "LEGACY_VERSION",
    "TOOLS_VERSION",
    "BrokerState",
    "LocalBroker",
    "ensure_jars",
    "free_port",
    "run_tool",
]

log = logging.getLogger(__name__)

#: the newest Apache Kafka 4.x release on Maven Central (pinned in deploy/kafka/pom.xml)
DEFAULT_VERSION = "4.4.0"
#: the newest 3.9.x, for the compatibility test
LEGACY_VERSION = "3.9.2"
#: kafka-tools (kafka-consumer-groups, console consumer); 4.4.0 is not published on Maven Central
TOOLS_VERSION = "4.3.1"

#: deploy/kafka: the pom that pins the jars, and their cache
KAFKA_DIR = Path(lagscope.deploy.__file__).resolve().parent / "kafka"
POM = KAFKA_DIR / "pom.xml"
SCRAM_USER = "lagscope"

# Main classes, the same in 3.9 and 4.x
_SERVER_MAIN = "kafka.Kafka"
_STORAGE_MAIN = "kafka.tools.StorageTool"


def cache_root() -> Path:
    """Where fetched jars live: ``$LAGSCOPE_KAFKA_CACHE`` or ``deploy/kafka/.cache``."""
    env = os.environ.get("LAGSCOPE_KAFKA_CACHE")
    return Path(env) if env else KAFKA_DIR / ".cache"


def _libs_dir(name: str) -> Path:
    return cache_root() / name / "libs"


def ensure_jars(version: str = DEFAULT_VERSION, *, tools: bool = False) -> Path:
    """Return the folder of jars for ``version`` (or kafka-tools), fetching them with Maven once.

    Raises :class:`JarsUnavailable` with Maven's own last lines when the fetch fails.
    """
    name = f"tools-{version}" if tools else version
    libs = _libs_dir(name)
    marker = libs / ".complete"
    if marker.exists():
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarsUnavailable("Maven (mvn) is not on PATH; it is needed once to fetch the Kafka jars")
    if tools:
        profile, props = "tools", [f"-Dtools.version={version}"]
    elif version.startswith("3."):
        profile, props = "kafka-3.9", [f"-Dkafka.version={version}"]
    else:
        profile, props = "broker", [f"-Dkafka.version={version}"]
    tmp = libs.with_name(f"libs.partial-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    cmd = [mvn, "-q", "-B", "-f", str(POM), "-P", profile, *props,
           f"-Dkafka.libs={tmp}", "dependency:copy-dependencies"]
    log.info("fetching Kafka %s jars with Maven into %s", name, libs)
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
        raise JarsUnavailable(f"mvn could not fetch Kafka {name}: {tail}")
    # publish the folder whole: a reader never sees half a set of jars
    shutil.rmtree(libs, ignore_errors=True)
    tmp.rename(libs)
    marker.touch()
    return libs


#: ports this process has handed out: the kernel may give a port that was bound and closed a
#: moment ago to the next caller, so two servers' listeners would be given the same port (a
#: broker's own listener and controller: "Each listener must have a different port")
_HANDED: set[int] = set()
_HANDED_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now and this process has not handed
    out before."""
    with _HANDED_LOCK:
        for _ in range(100):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = int(s.getsockname()[1])
            if port not in _HANDED:
                _HANDED.add(port)
                return port
    raise BrokerError("no free TCP port on 127.0.0.1 that was not handed out already")


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    java = shutil.which("java")
    if java is None:
        raise BrokerError("java is not on PATH (Java 17 is needed to run the Kafka broker)")
    return java


def run_tool(main_class: str, args: list[str], *, version: str = TOOLS_VERSION,
             timeout: float = 120.0, stdin: str | None = None,
             jvm_opts: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a Kafka command-line tool (e.g. ConsumerGroupCommand) from the pinned kafka-tools jars."""
    libs = ensure_jars(version, tools=True)
    cmd = [_java(), "-Xmx512m", *(jvm_opts or []), "-cp", f"{libs}/*", main_class, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          input=stdin, check=False)


def _cluster_id() -> str:
    """A random KRaft cluster id (base64url of a UUID). Never one starting with ``-``, which
    kafka-storage's argument parser would take for an option (1 draw in 64; as Kafka's own
    ``Uuid.randomUuid`` does)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


@dataclass(frozen=True)
class BrokerState:
    """What a running broker is; written to ``<workdir>/broker.json`` for ``lagscope broker stop``."""

    pid: int
    version: str
    bootstrap: str
    workdir: str
    sasl_bootstrap: str | None = None
    ca_file: str | None = None

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__, indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> BrokerState:
        try:
            return cls(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError) as exc:
            raise BrokerError(f"no running broker recorded in {path}: {exc}") from exc


class LocalBroker:
    """A single-node KRaft broker+controller on loopback, started and stopped by this object.

    Lifecycle: ``start()`` fetches the jars if needed, formats the storage, starts the JVM and
    waits until the broker serves metadata; ``stop()`` shuts it down (SIGTERM, then SIGKILL).
    """

    def __init__(
        self,
        workdir: Path,
        *,
        version: str = DEFAULT_VERSION,
        sasl_ssl: bool = False,
        offsets_partitions: int = 10,
        heap: str = "768m",
        extra_config: dict[str, str] | None = None,
        port: int | None = None,
    ) -> None:
        self.workdir = Path(workdir)
        self.version = version
        self.sasl_ssl = sasl_ssl
        self.offsets_partitions = offsets_partitions
        self.heap = heap
        self.extra_config = dict(extra_config or {})
        self.port = port or free_port()
        self.controller_port = free_port()
        self.sasl_port = free_port() if sasl_ssl else None
        self.scram_password = secrets.token_urlsafe(18) if sasl_ssl else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._formatted = False

    # -- addresses --------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str | None:
        return f"127.0.0.1:{self.sasl_port}" if self.sasl_port else None

    @property
    def ca_file(self) -> Path:
        return self.workdir / "tls" / "ca.pem"

    @property
    def log_file(self) -> Path:
        return self.workdir / "broker.log"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- configuration ----------------------------------------------------------------------
    def _server_properties(self) -> dict[str, str]:
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}",
                     f"CONTROLLER://127.0.0.1:{self.controller_port}"]
        advertised = [f"PLAINTEXT://127.0.0.1:{self.port}"]
        protocol_map = ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT"]
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "log.dirs": str(self.workdir / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": str(self.offsets_partitions),
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # tests rebalance in seconds, not the production minimum of 6 s
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            # retention scenarios: let time-based deletion act within seconds
            "log.retention.check.interval.ms": "1000",
            "log.segment.delete.delay.ms": "1000",
            "log.initial.task.delay.ms": "1000",
        }
        if self.sasl_port:
            listeners.append(f"SASL_SSL://127.0.0.1:{self.sasl_port}")
            advertised.append(f"SASL_SSL://127.0.0.1:{self.sasl_port}")
            protocol_map.append("SASL_SSL:SASL_SSL")
            tls = self.workdir / "tls"
            props.update({
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(tls / "server.pem"),
                "ssl.client.auth": "none",
            })
        props["listeners"] = ",".join(listeners)
        props["advertised.listeners"] = ",".join(advertised)
        props["listener.security.protocol.map"] = ",".join(protocol_map)
        props.update(self.extra_config)
        return props

    def _write_configs(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        server = self.workdir / "server.properties"
        server.write_text("".join(f"{k}={v}\n" for k, v in self._server_properties().items()))
        log_file = self.log_file
        # Kafka 4 logs through log4j2, 3.9 through reload4j (log4j 1 syntax): write both.
        (self.workdir / "log4j2.properties").write_text(
            "status = warn\n"
            "appender.file.type = File\n"
            "appender.file.name = FILE\n"
            f"appender.file.fileName = {log_file}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = INFO\n"
            "rootLogger.appenderRef.file.ref = FILE\n"
            "logger.kafka.name = kafka\nlogger.kafka.level = INFO\n"
            "logger.state.name = state.change.logger\nlogger.state.level = WARN\n"
        )
        (self.workdir / "log4j.properties").write_text(
            "log4j.rootLogger=INFO, file\n"
            "log4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={log_file}\n"
            "log4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
            "log4j.logger.state.change.logger=WARN\n"
        )
        if self.sasl_port:
            _write_tls(self.workdir / "tls")
            pw = self.workdir / "scram-password"
            pw.write_text(self.scram_password or "")
            pw.chmod(0o600)
        return server

    def _jvm(self, libs: Path) -> list[str]:
        return [
            _java(), f"-Xmx{self.heap}", "-Xms128m", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
            f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
            f"-Dkafka.logs.dir={self.workdir}",
            "-cp", f"{libs}/*",
        ]

    # -- lifecycle --------------------------------------------------------------------------
    def format(self) -> None:
        """Format the KRaft storage (once per workdir), creating the SCRAM user if SASL is on."""
        libs = ensure_jars(self.version)
        server = self._write_configs()
        if (self.workdir / "data" / "meta.properties").exists():
            self._formatted = True
            return
        cmd = [*self._jvm(libs), _STORAGE_MAIN, "format", "-t", _cluster_id(), "-c", str(server)]
        if self.scram_password:
            cmd += ["--add-scram",
                    f"SCRAM-SHA-512=[name={SCRAM_USER},password={self.scram_password}]"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr)
            if self.scram_password:
                out = out.replace(self.scram_password, "***")
            raise BrokerError(f"kafka-storage format failed: {out.strip()[-800:]}")
        self._formatted = True

    def start(self, timeout: float = 90.0) -> LocalBroker:
        """Start the broker and wait until it serves metadata; raises BrokerError otherwise."""
        if self.is_running():
            return self
        if not self._formatted:
            self.format()
        libs = ensure_jars(self.version)
        server = self.workdir / "server.properties"
        out = (self.workdir / "broker.stdout").open("ab")
        try:
            self._proc = subprocess.Popen(
                [*self._jvm(libs), _SERVER_MAIN, str(server)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            out.close()
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop(grace=5)
            raise
        BrokerState(pid=self._proc.pid, version=self.version, bootstrap=self.bootstrap,
                    workdir=str(self.workdir), sasl_bootstrap=self.sasl_bootstrap,
                    ca_file=str(self.ca_file) if self.sasl_port else None,
                    ).save(self.workdir / "broker.json")
        log.info("Kafka %s serving on %s (pid %s, log %s)", self.version, self.bootstrap,
                 self._proc.pid, self.log_file)
        return self

    def _wait_ready(self, timeout: float) -> None:
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                raise BrokerError(f"the broker exited during start-up; log tail:\n{self.log_tail()}")
            if _port_open(self.port):
                try:
                    admin = KafkaAdminClient(bootstrap_servers=self.bootstrap,
                                             request_timeout_ms=5000, client_id="lagscope-probe")
                    try:
                        cluster = admin.describe_cluster()
                        if cluster.get("brokers"):
                            # ready for groups too: a group coordinator answers (the first
                            # FindCoordinator makes the broker create __consumer_offsets)
                            admin.describe_groups(["lagscope-probe"])
                            return
                    finally:
                        admin.close()
                except (KafkaError, OSError, ValueError) as exc:
                    last = exc
            time.sleep(0.3)
        raise BrokerError(f"the broker did not serve metadata within {timeout:.0f}s ({last}); "
                          f"log tail:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for f in (self.log_file, self.workdir / "broker.stdout"):
            with contextlib.suppress(OSError):
                text += "\n".join(f.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def stop(self, grace: float = 30.0) -> None:
        """Shut the broker down cleanly; kill it if it has not exited after ``grace`` seconds."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        terminate(proc, grace, "broker")
        with contextlib.suppress(OSError):
            (self.workdir / "broker.json").unlink()

    def kill(self) -> None:
        """SIGKILL the broker (a crash, for fault tests); the storage stays, so start() resumes it."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=10)
        self._proc = None

    def __enter__(self) -> LocalBroker:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- client settings for tests -----------------------------------------------------------
    def sasl_client_config(self) -> dict[str, str | None]:
        """kafka-python settings that connect to the SASL_SSL listener."""
        if not self.sasl_port:
            raise BrokerError("this broker was started without the SASL_SSL listener")
        return {
            "bootstrap_servers": self.sasl_bootstrap,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": SCRAM_USER,
            "sasl_plain_password": self.scram_password,
            "ssl_cafile": str(self.ca_file),
        }


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _write_tls(folder: Path) -> None:
    """A throw-away CA and a server certificate for 127.0.0.1/localhost, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lagscope test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(minutes=5))
          .not_valid_after(now + dt.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    server = folder / "server.pem"
    server.write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + cert.public_bytes(pem) + ca.public_bytes(pem))
    server.chmod(0o600)


def stop_recorded(workdir: Path, grace: float = 30.0) -> BrokerState:
    """Stop the broker recorded in ``<workdir>/broker.json`` (for ``lagscope broker stop``)."""
    state_file = Path(workdir) / "broker.json"
    state = BrokerState.load(state_file)
    try:
        os.kill(state.pid, signal.SIGTERM)
    except ProcessLookupError:
        state_file.unlink(missing_ok=True)
        return state
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.kill(state.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.kill(state.pid, signal.SIGKILL)
    state_file.unlink(missing_ok=True)
    return state
