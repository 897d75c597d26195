"""The real things the Burrow API is checked against, on 127.0.0.1, started and stopped by PID:
Debian's ZooKeeper (a temporary standalone server: Burrow 1.2 needs one) and Debian's Burrow
1.2.1 (its TOML in a temporary folder)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from lagscope.devtools.broker import free_port


class _Proc:
    proc: subprocess.Popen[bytes] | None = None
    log: Path

    def stop(self, grace: float = 15.0) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class ZooKeeper(_Proc):
    """A standalone ZooKeeper from Debian's jar on a free loopback port."""

    def __init__(self, workdir: Path, jar: str) -> None:
        self.workdir = workdir / "zookeeper"
        self.jar = jar
        self.port = free_port()
        self.log = self.workdir / "zookeeper.log"

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ZooKeeper:
        (self.workdir / "data").mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(f"tickTime=2000\ndataDir={self.workdir / 'data'}\nclientPort={self.port}\n"
                       "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n4lw.commands.whitelist=ruok\n")
        (self.workdir / "log4j.properties").write_text(
            f"log4j.rootLogger=INFO, file\nlog4j.appender.file=org.apache.log4j.FileAppender\n"
            f"log4j.appender.file.File={self.log}\nlog4j.appender.file.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.file.layout.ConversionPattern=%d %p %m%n\n")
        with (self.workdir / "stdout.log").open("wb") as out:
            self.proc = subprocess.Popen(
                ["java", "-Xmx128m", f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}",
                 "-cp", f"{self.workdir}:{self.jar}", "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)],
                stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"zookeeper exited with {self.proc.returncode}: {self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"ruok")
                    if s.recv(8) == b"imok":
                        return self
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"zookeeper did not answer within {timeout:.0f}s: {self.tail()}")


class Burrow(_Proc):
    """Burrow 1.2.1 reading ``bootstrap``'s ``__consumer_offsets`` (from the oldest offset) and
    refreshing the topics' end offsets every second, ``intervals`` entries per partition."""

    def __init__(self, workdir: Path, binary: str, zookeeper: str, bootstrap: str, *, cluster: str,
                 intervals: int = 10) -> None:
        self.workdir = workdir / "burrow"
        self.binary = binary
        self.port = free_port()
        self.log = self.workdir / "burrow.log"
        self.zookeeper, self.bootstrap, self.cluster, self.intervals = zookeeper, bootstrap, cluster, intervals

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Burrow:
        self.workdir.mkdir(parents=True, exist_ok=True)
        servers = json.dumps([self.bootstrap])
        # kafka-version 2.0.0: the newest protocol this Burrow's sarama knows that Kafka 3.9 still serves
        (self.workdir / "burrow.toml").write_text(f"""
[general]
pidfile="{self.workdir / 'burrow.pid'}"
[logging]
filename="{self.log}"
level="info"
[zookeeper]
servers=["{self.zookeeper}"]
timeout=6
root-path="/burrow"
[client-profile.test]
client-id="burrow-test"
kafka-version="2.0.0"
[cluster.{self.cluster}]
class-name="kafka"
servers={servers}
client-profile="test"
topic-refresh=1
offset-refresh=1
[consumer.{self.cluster}]
class-name="kafka"
cluster="{self.cluster}"
servers={servers}
client-profile="test"
start-latest=false
[httpserver.default]
address="127.0.0.1:{self.port}"
[storage.default]
class-name="inmemory"
workers=4
intervals={self.intervals}
expire-group=604800
min-distance=0
[evaluator.default]
class-name="caching"
expire-cache=1
""")
        with (self.workdir / "stdout.log").open("wb") as out:
            self.proc = subprocess.Popen([self.binary, "-config-dir", str(self.workdir)], stdout=out,
                                         stderr=subprocess.STDOUT, cwd=self.workdir)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Burrow exited with {self.proc.returncode}: {self.tail()}")
            try:
                if get(f"{self.url}/burrow/admin")[1] == b"GOOD":
                    return self
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"Burrow did not answer within {timeout:.0f}s: {self.tail()}")


def get(url: str, method: str = "GET") -> tuple[int, bytes]:
    """(status, body) of one request, error statuses included."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get_json(url: str, method: str = "GET") -> tuple[int, Any]:
    code, body = get(url, method)
    return code, json.loads(body)
