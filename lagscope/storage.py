"""Where the lake and the results live: a local folder or an object store, chosen from the URL.

    >>> store = open_store("s3://lagscope/prod/lake", StorageConfig(endpoint="http://127.0.0.1:8333"))  # doctest: +SKIP
    >>> store.put("offsets/cluster=a/date=2026-11-25/part-1.parquet", data)                          # doctest: +SKIP
    >>> open_store("/var/lib/lagscope/lake").is_object_store                                         # doctest: +SKIP
    False

``s3://bucket/prefix`` opens a :class:`pyarrow.fs.S3FileSystem` with the endpoint, region and
path-style addressing of :class:`~lagscope.config.StorageConfig` and the credentials it names
(the AWS SDK's default chain, the standard environment variables only, or anonymous); anything
else (a path, a ``file://`` URI) is the local filesystem. Credentials are handed to the SDK and
never logged: :class:`Store`'s ``repr`` shows the URL only.

An object store has no rename: an object is written whole under its final key in one request,
after its data is complete (:meth:`Store.put`), so no one reads half of it; what makes a lake
file *visible* there is a commit marker written after it (:mod:`lagscope.lake`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from lagscope.errors import ConfigError, LakeError

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from lagscope.config import StorageConfig

__all__ = ["OBJECT_SCHEMES", "Store", "is_object_url", "open_root", "open_store", "split_url", "write_atomically"]

#: the URL schemes that name an object store
OBJECT_SCHEMES = ("s3://",)

_ENV_KEYS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def is_object_url(root: Path | str) -> bool:
    """Whether ``root`` names an object store (``s3://…``) rather than a local folder."""
    return isinstance(root, str) and root.startswith(OBJECT_SCHEMES)


def split_url(url: str) -> tuple[str, str]:
    """``s3://bucket/a/b`` → ``("bucket", "a/b")`` (the prefix without slashes at its ends).
    Raises :class:`ConfigError` for a URL without a bucket."""
    if not is_object_url(url):
        raise ConfigError(f"not an object-store URL (s3://bucket/prefix): {url!r}")
    rest = url.split("://", 1)[1]
    bucket, _, prefix = rest.partition("/")
    if not bucket or any(c in bucket for c in " \\"):
        raise ConfigError(f"{url!r}: an object-store URL names a bucket: s3://bucket/prefix")
    return bucket, prefix.strip("/")


@dataclass(frozen=True)
class Store:
    """One storage root: a pyarrow filesystem and the root's path inside it (``bucket/prefix``
    on S3, an absolute folder locally). Paths given to its methods are relative to the root."""

    url: str
    filesystem: pafs.FileSystem = field(repr=False)
    base: str
    is_object_store: bool

    def path(self, rel: str = "") -> str:
        """The filesystem path of ``rel`` under the root."""
        rel = rel.strip("/")
        return f"{self.base}/{rel}" if rel else self.base

    def url_of(self, rel: str) -> str:
        """The URL of ``rel`` under the root (``s3://bucket/prefix/rel`` or a local path)."""
        rel = rel.strip("/")
        return f"{self.url.rstrip('/')}/{rel}" if rel else self.url

    def put(self, rel: str, data: bytes) -> None:
        """Write one object whole (object store: one request made after the data is complete,
        so the key holds all of it or nothing; local: temp file, fsync, rename)."""
        import pyarrow as pa

        target = self.path(rel)
        try:
            if self.is_object_store:
                with self.filesystem.open_output_stream(target) as out:
                    out.write(data)
                return
            final = Path(target)
            final.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(final, lambda fh: fh.write(data))
        except (OSError, pa.ArrowException) as exc:
            raise LakeError(f"cannot write {self.url_of(rel)}: {exc}") from exc

    def get(self, rel: str) -> bytes:
        """The whole content of one object (FileNotFoundError when there is none)."""
        with self.filesystem.open_input_stream(self.path(rel)) as fh:
            return bytes(fh.read())

    def names(self, rel: str) -> list[str]:
        """The names of the files directly under the folder ``rel``, sorted (none: empty)."""
        return sorted({i.base_name for i in self._ls(rel) if i.type == _file_type()})

    def folders(self, rel: str) -> list[str]:
        """The names of the folders directly under ``rel``, sorted (none: empty). Each once: a
        store may list a folder both as a common prefix and as the empty ``folder/`` object
        pyarrow leaves where the folder's last file was deleted."""
        return sorted({i.base_name for i in self._ls(rel) if i.type == _dir_type()})

    def delete(self, rel: str) -> None:
        """Delete one file; one that is already gone is no error."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_file(self.path(rel))

    def delete_folder(self, rel: str) -> None:
        """Delete a folder and everything under it; one that is already gone is no error."""
        with contextlib.suppress(FileNotFoundError):
            self.filesystem.delete_dir(self.path(rel))

    def _ls(self, rel: str) -> list[pafs.FileInfo]:
        import pyarrow.fs as pafs

        try:
            return list(self.filesystem.get_file_info(pafs.FileSelector(self.path(rel), allow_not_found=True)))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            return []


def _file_type() -> pafs.FileType:
    import pyarrow.fs as pafs

    return pafs.FileType.File


def _dir_type() -> pafs.FileType:
    import pyarrow.fs as pafs

    return pafs.FileType.Directory


def _endpoint(config: StorageConfig) -> tuple[str | None, str]:
    """The endpoint_override (host:port) and scheme of the configured endpoint."""
    if config.endpoint is None:
        return None, "https"
    scheme, _, rest = config.endpoint.partition("://")
    return rest.rstrip("/"), scheme


def _credentials(config: StorageConfig, environ: os._Environ[str] | dict[str, str]) -> dict[str, object]:
    """The S3FileSystem keyword arguments of the configured credential source (their values go
    to the SDK only: nothing here is logged or kept on the :class:`Store`)."""
    if config.credentials == "anonymous":
        return {"anonymous": True}
    if config.credentials == "env":
        missing = [k for k in _ENV_KEYS if not environ.get(k)]
        if missing:
            raise ConfigError(f"storage.credentials is 'env' but {', '.join(missing)} is not set")
        out: dict[str, object] = {"access_key": environ["AWS_ACCESS_KEY_ID"],
                                  "secret_key": environ["AWS_SECRET_ACCESS_KEY"]}
        if environ.get("AWS_SESSION_TOKEN"):
            out["session_token"] = environ["AWS_SESSION_TOKEN"]
        return out
    return {}  # default: the AWS SDK's own chain (env, profile, web identity, instance role)


def open_root(root: str, config: StorageConfig | None = None) -> Path | Store:
    """A lake or results root of the settings: the local folder (``file://`` stripped), or the
    :class:`Store` of an ``s3://`` URL opened with ``config`` (:func:`open_store`)."""
    return open_store(root, config) if is_object_url(root) else Path(root.removeprefix("file://"))


def open_store(root: Path | str, config: StorageConfig | None = None, *,
               environ: dict[str, str] | None = None) -> Store:
    """The :class:`Store` of a lake or results root: ``s3://bucket/prefix`` opens S3 with
    ``config`` (defaults when None), anything else is a local folder (``file://`` stripped).
    Raises :class:`ConfigError` for a bad URL or missing credentials, before any request."""
    import pyarrow.fs as pafs

    if not is_object_url(root):
        local = Path(str(root).removeprefix("file://")).absolute()
        return Store(str(root), pafs.LocalFileSystem(), str(local), False)
    url = str(root)
    bucket, prefix = split_url(url)
    if config is None:
        from lagscope.config import StorageConfig

        config = StorageConfig()
    endpoint, scheme = _endpoint(config)
    kwargs = _credentials(config, os.environ if environ is None else environ)
    if config.path_style is False:
        kwargs["force_virtual_addressing"] = True
    try:
        fs = pafs.S3FileSystem(region=config.region, endpoint_override=endpoint, scheme=scheme,
                               allow_bucket_creation=False, allow_bucket_deletion=False, **kwargs)  # type: ignore[arg-type]
    except (ValueError, OSError) as exc:
        raise ConfigError(f"storage for {url}: {exc}") from exc
    base = f"{bucket}/{prefix}" if prefix else bucket
    return Store(f"s3://{base}", fs, base, True)


def write_atomically(final: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write a local file through a hidden temp file beside it (``.tmp-<pid>-<name>``: no
    reader lists it), fsynced, then renamed over ``final``: a reader sees all of it or nothing,
    and a failure (or a crash) leaves no file under the final name."""
    tmp = final.with_name(f".tmp-{os.getpid()}-{final.name}")
    try:
        with tmp.open("wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.rename(final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
