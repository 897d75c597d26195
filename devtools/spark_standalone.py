"""A Spark standalone cluster (one master, N workers) on 127.0.0.1, started from pyspark itself.

pyspark's wheel carries the Spark jars and ``bin/spark-class``, so no Spark download is
needed: the master is ``org.apache.spark.deploy.master.Master`` and each worker
``org.apache.spark.deploy.worker.Worker``, both bound to loopback on free ports.

    >>> with StandaloneCluster(workdir) as cluster:                # doctest: +SKIP
    ...     subprocess.run(["lagscope", "analyze", "--master", cluster.master_url, ...])

``start()`` returns once every worker has registered with the master (read from the master's
``/json`` status page) and stops whatever it already started when a step fails. ``stop()``
stops the workers, then the master (reverse order), each by its PID: SIGTERM, then SIGKILL
after a grace period. Logs go to ``<workdir>/master.log`` and ``<workdir>/worker-<i>.log``.

A driver that connects to this cluster from the same machine must run the same Python as
the executors: :meth:`StandaloneCluster.driver_env` gives the environment for that.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from lagscope.errors import SparkClusterError
from lagscope.procs import terminate

__all__ = [
    "ClusterState",
    "StandaloneCluster",
    "free_port",
    "pid_alive",
    "spark_home",
    "stop_recorded",
]

log = logging.getLogger(__name__)

_MASTER_MAIN = "org.apache.spark.deploy.master.Master"
_WORKER_MAIN = "org.apache.spark.deploy.worker.Worker"
_HOST = "127.0.0.1"
_STATE_FILE = "cluster.json"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_HOST, 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    """The Spark home of the installed pyspark (``$SPARK_HOME`` wins when it is set)."""
    env = os.environ.get("SPARK_HOME")
    if env:
        home = Path(env)
    else:
        import pyspark

        home = Path(pyspark.__file__).resolve().parent
    if not (home / "bin" / "spark-class").exists() or not (home / "jars").is_dir():
        raise SparkClusterError(f"no Spark installation at {home} (bin/spark-class and jars/ are needed)")
    return home


@dataclass
class ClusterState:
    """What ``lagscope spark start`` records, so that ``stop`` finds the processes again."""

    master_url: str
    master_ui: str
    master_pid: int
    worker_pids: list[int] = field(default_factory=list)
    workdir: str = ""

    def save(self, path: Path) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path) -> ClusterState:
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError) as exc:
            raise SparkClusterError(f"cannot read the cluster state {path}: {exc}") from exc


class StandaloneCluster:
    """One Spark standalone master and ``workers`` workers on 127.0.0.1.

    ``worker_cores`` and ``worker_memory`` are what each worker offers to executors; the
    daemons themselves run with ``daemon_memory`` of heap (they only schedule).
    """

    def __init__(self, workdir: Path, *, workers: int = 1, worker_cores: int = 2,
                 worker_memory: str = "1g", daemon_memory: str = "256m",
                 python: str | None = None) -> None:
        if workers < 1:
            raise SparkClusterError(f"a standalone cluster needs at least one worker, not {workers}")
        if worker_cores < 1:
            raise SparkClusterError(f"worker_cores must be at least 1, not {worker_cores}")
        self.workdir = Path(workdir).resolve()
        self.workers = workers
        self.worker_cores = worker_cores
        self.worker_memory = worker_memory
        self.daemon_memory = daemon_memory
        self.python = python or sys.executable
        self.master_port = 0
        self.ui_port = 0
        self._master: subprocess.Popen[bytes] | None = None
        self._workers: list[subprocess.Popen[bytes]] = []

    # -- addresses -------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``: what ``--master`` takes."""
        return f"spark://{_HOST}:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://{_HOST}:{self.ui_port}"

    @property
    def master_pid(self) -> int | None:
        return self._master.pid if self._master else None

    @property
    def worker_pids(self) -> list[int]:
        return [p.pid for p in self._workers]

    def driver_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """Environment for a driver process on this machine: loopback, the executors' Python."""
        env = dict(os.environ if base is None else base)
        env.update({"SPARK_LOCAL_IP": _HOST, "PYSPARK_PYTHON": self.python,
                    "PYSPARK_DRIVER_PYTHON": self.python})
        return env

    # -- lifecycle -------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = self.driver_env()
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOG_DIR": str(self.workdir / "logs"),
            "SPARK_WORKER_DIR": str(self.workdir / "work"),
            "SPARK_DAEMON_MEMORY": self.daemon_memory,
            "SPARK_CONF_DIR": str(self.workdir / "conf"),
            # no REST submission server: it would take the fixed port 6066 (two clusters on one
            # machine would collide) and nothing here submits through it
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        })
        env.pop("SPARK_MASTER_HOST", None)
        return env

    def _launch(self, args: list[str], log_name: str) -> subprocess.Popen[bytes]:
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise SparkClusterError("java is not on PATH and JAVA_HOME is unset (Spark needs Java 17)")
        out = (self.workdir / log_name).open("ab")
        try:
            # spark-class execs the JVM, so the PID we keep is the JVM's own
            return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args],
                                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=self._env(), start_new_session=True)
        finally:
            out.close()

    def start(self, timeout: float = 180.0) -> StandaloneCluster:
        """Start the master, then the workers; return when all workers are registered."""
        if self._master is not None:
            return self
        for sub in ("logs", "work", "conf"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        self.master_port, self.ui_port = free_port(), free_port()
        deadline = time.monotonic() + timeout
        try:
            self._master = self._launch(
                [_MASTER_MAIN, "--host", _HOST, "--port", str(self.master_port),
                 "--webui-port", str(self.ui_port)], "master.log")
            self._wait(lambda s: s.get("status") == "ALIVE", deadline, "the master to come up")
            for i in range(self.workers):
                self._workers.append(self._launch(
                    [_WORKER_MAIN, "--host", _HOST, "--port", str(free_port()),
                     "--webui-port", str(free_port()), "--cores", str(self.worker_cores),
                     "--memory", self.worker_memory, "--work-dir", str(self.workdir / "work"),
                     self.master_url], f"worker-{i}.log"))
            self._wait(lambda s: _alive_workers(s) >= self.workers, deadline,
                       f"{self.workers} worker(s) to register")
        except BaseException:
            self.stop(grace=5)
            raise
        ClusterState(master_url=self.master_url, master_ui=self.ui_url,
                     master_pid=self._master.pid, worker_pids=self.worker_pids,
                     workdir=str(self.workdir)).save(self.workdir / _STATE_FILE)
        log.info("Spark standalone master %s (ui %s, pid %s), %d worker(s)", self.master_url,
                 self.ui_url, self._master.pid, self.workers)
        return self

    def status(self) -> dict[str, Any]:
        """The master's ``/json`` status page (workers, their state, cores, running apps)."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=5) as resp:  # noqa: S310
                data: dict[str, Any] = json.loads(resp.read())
                return data
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise SparkClusterError(f"the Spark master at {self.ui_url} did not answer: {exc}") from exc

    def _wait(self, ready: Any, deadline: float, what: str) -> None:
        last: Exception | None = None
        while time.monotonic() < deadline:
            for proc, name in self._processes():
                if proc.poll() is not None:
                    raise SparkClusterError(f"the Spark {name} exited while waiting for {what}; "
                                            f"log tail:\n{self.log_tail()}")
            try:
                if ready(self.status()):
                    return
            except SparkClusterError as exc:
                last = exc
            time.sleep(0.3)
        raise SparkClusterError(f"timed out waiting for {what} ({last}); log tail:\n{self.log_tail()}")

    def _processes(self) -> list[tuple[subprocess.Popen[bytes], str]]:
        procs = [(self._master, "master")] if self._master else []
        return procs + [(w, f"worker {i}") for i, w in enumerate(self._workers)]

    def log_tail(self, lines: int = 20) -> str:
        text = ""
        for f in sorted(self.workdir.glob("*.log")):
            with contextlib.suppress(OSError):
                tail = f.read_text(errors="replace").splitlines()[-lines:]
                text += f"--- {f.name}\n" + "\n".join(tail) + "\n"
        return text

    def stop(self, grace: float = 20.0) -> None:
        """Stop the workers, then the master, by PID (SIGTERM; SIGKILL after ``grace`` s)."""
        workers, self._workers = self._workers, []
        master, self._master = self._master, None
        for proc in [*reversed(workers), *([master] if master else [])]:
            terminate(proc, grace, "Spark daemon")
        with contextlib.suppress(OSError):
            (self.workdir / _STATE_FILE).unlink()

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def _alive_workers(status: dict[str, Any]) -> int:
    return sum(1 for w in status.get("workers", []) if w.get("state") == "ALIVE")


def pid_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped by its parent) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # /proc/<pid>/stat: "pid (comm) state ..."; comm may hold spaces, so split after ')'
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        # gone since the signal, where there is a /proc; without one the signal is all we know
        return not Path("/proc/self").exists()
    except (OSError, IndexError):
        return True


def stop_recorded(workdir: Path, grace: float = 20.0) -> ClusterState:
    """Stop a cluster that ``lagscope spark start`` recorded in ``<workdir>/cluster.json``."""
    path = Path(workdir) / _STATE_FILE
    if not path.exists():
        raise SparkClusterError(f"no Spark cluster recorded in {workdir} (nothing to stop)")
    state = ClusterState.load(path)
    for pid in [*reversed(state.worker_pids), state.master_pid]:
        if not pid_alive(pid):
            continue
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    path.unlink(missing_ok=True)
    return state
