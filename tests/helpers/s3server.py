"""A real S3-compatible server process on loopback for the object-store tests: gofakes3's server
(built by ``scripts/setup.sh --system`` into ``.tools/bin``), its objects in a temp folder (one
bolt database file: its ``fs`` backend cannot hold the empty ``folder/`` objects pyarrow leaves
where a folder's last file was deleted).

    with S3Server(tmp_path) as s3:
        fs = s3.filesystem()                      # pyarrow S3FileSystem, path-style, http
        store = s3.store("lake")                  # lagscope.storage.Store of s3://<bucket>/lake

It starts ``gofakes3 -backend bolt -bolt.db <dir>/objects.db -host 127.0.0.1:<free port> -initialbucket
<bucket>``, waits until the server lists the bucket, and stops it by its PID (SIGTERM, then
SIGKILL) at teardown. A missing binary is a failure, not a skip. gofakes3 accepts any
credentials (it does not check signatures); the clients sign with the ones :attr:`credentials`
gives all the same. The AWS SDK is kept off the instance-metadata address for the whole test
process (``AWS_EC2_METADATA_DISABLED``): nothing but loopback is ever asked; and it computes
checksums only where an operation requires them (``AWS_REQUEST_CHECKSUM_CALCULATION``), which
gofakes3 needs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

__all__ = ["GOFAKES3", "S3Server", "S3ServerError", "s3a_jars_or_skip"]

ROOT = Path(__file__).resolve().parents[2]
GOFAKES3 = ROOT / ".tools" / "bin" / "gofakes3"

# the SDK's credential and region chain must never reach for 169.254.169.254
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"
# gofakes3, like many S3-compatible stores, refuses the AWS SDK's default streamed upload checksums
# (HTTP 411 MissingContentLength on UploadPart): checksums only where the operation requires them
# (docs/configuration.md, storage)
os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
os.environ["AWS_RESPONSE_CHECKSUM_VALIDATION"] = "when_required"


def s3a_jars_or_skip() -> list[Path]:
    """The s3a connector's jars (``lagscope.s3a.jars``; fetched by ``scripts/setup.sh``): without
    them a test is skipped on a developer's machine and fails in CI (``CI=true``)."""
    import pytest

    from lagscope import s3a
    from lagscope.errors import JarsUnavailable

    try:
        return s3a.jars()
    except JarsUnavailable as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the s3a jars are missing in CI (scripts/setup.sh fetches them): {exc}")
        pytest.skip(str(exc))


class S3ServerError(RuntimeError):
    """The S3 server could not be started."""


class S3Server:
    """One gofakes3 process serving ``bucket`` from ``workdir/s3`` on 127.0.0.1."""

    def __init__(self, workdir: Path, *, bucket: str = "lagscope", binary: Path = GOFAKES3) -> None:
        self.workdir = Path(workdir) / "s3"
        self.bucket = bucket
        self.binary = Path(binary)
        self.port = 0
        #: what the clients sign with (gofakes3 takes any; never a real key)
        self.credentials = {"AWS_ACCESS_KEY_ID": "lagscope-test",
                            "AWS_SECRET_ACCESS_KEY": uuid.uuid4().hex, "AWS_SESSION_TOKEN": ""}
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self, timeout_s: float = 20.0) -> S3Server:
        if not self.binary.exists():
            raise S3ServerError(f"{self.binary} is missing: run scripts/setup.sh --system (it builds gofakes3)")
        from lagscope.devtools.broker import free_port

        self.workdir.mkdir(parents=True, exist_ok=True)
        for _ in range(3):  # a free port taken by someone else before the server binds it: another
            self.port = free_port()
            log = (self.workdir / "server.log").open("ab")
            self._proc = subprocess.Popen(
                [str(self.binary), "-backend", "bolt", "-bolt.db", str(self.workdir / "objects.db"),
                 "-host", f"127.0.0.1:{self.port}", "-initialbucket", self.bucket],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            log.close()
            if self._wait_ready(timeout_s):
                return self
            self.stop()
        raise S3ServerError(f"gofakes3 did not start; see {self.workdir / 'server.log'}")

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.endpoint}/", timeout=2) as resp:
                    if resp.status == 200 and f"<Name>{self.bucket}</Name>".encode() in resp.read():
                        return True
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def url(self, prefix: str = "") -> str:
        """``s3://<bucket>/<prefix>``."""
        return f"s3://{self.bucket}/{prefix.strip('/')}".rstrip("/")

    def storage_config(self) -> Any:
        """The settings' ``storage`` section for this server (credentials from the environment)."""
        from lagscope.config import StorageConfig

        return StorageConfig(endpoint=self.endpoint, path_style=True, credentials="env")

    def filesystem(self) -> Any:
        """A pyarrow S3FileSystem on this server (http, path-style, this server's credentials)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(access_key=self.credentials["AWS_ACCESS_KEY_ID"],
                                 secret_key=self.credentials["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
                                 endpoint_override=f"127.0.0.1:{self.port}", scheme="http",
                                 force_virtual_addressing=False)

    def store(self, prefix: str = "") -> Any:
        """A :class:`lagscope.storage.Store` of ``s3://<bucket>/<prefix>`` on this server."""
        from lagscope.storage import open_store

        env = {k: v for k, v in self.credentials.items() if v}
        return open_store(self.url(prefix), self.storage_config(), environ=env)


def put_tree(root: Path, store: Any) -> int:
    """Every file under the local folder ``root`` put into ``store`` (a
    :class:`lagscope.storage.Store`) under the same relative path, each lake file followed by its
    commit marker (as the collector writes a bucket lake); hidden files left out. Returns the
    files put."""
    from lagscope.lake import COMMIT_MARKER_PREFIX
    from lagscope.schema import SAMPLE_TABLES

    n = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in rel.split("/")):
            continue
        store.put(rel, path.read_bytes())
        n += 1
        if rel.split("/")[0] in SAMPLE_TABLES and path.suffix == ".parquet" and "/_" not in f"/{rel}":
            store.put(f"{rel.rpartition('/')[0]}/{COMMIT_MARKER_PREFIX}{path.name}", b"{}")
    return n
