"""An object store's read that fails is not the object's fault: lagscope.lake's footer check on an
object store (check_objects) keeps a good object whose read failed in passing, raises LakeError
(the step is retried later) while the store keeps failing, and quarantines only an object whose
bytes arrive and do not parse. The store here is a pyarrow filesystem that fails the reads of
chosen objects with the OSError pyarrow's S3 filesystem raises for a network error."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest
from helpers.bad_files import spoil

from lagscope import lake
from lagscope.errors import LakeError
from lagscope.schema import SWEEPS
from lagscope.storage import Store

NETWORK = ("When reading information for key 'lake/sweeps/x.parquet' in bucket 'lagscope': AWS Error "
           "NETWORK_CONNECTION during GetObject operation: curlCode: 56, Failure when receiving data from the peer")


class FlakyHandler(pafs.FileSystemHandler):
    """A local folder as a filesystem whose reads of files named in ``fail`` raise OSError
    (``fail[name]`` more times; -1: always)."""

    def __init__(self) -> None:
        self.local = pafs.LocalFileSystem()
        self.fail: dict[str, int] = {}
        self.failed = 0

    def _read(self, path: str) -> None:
        name = path.rpartition("/")[2]
        left = self.fail.get(name, 0)
        if left:
            self.fail[name] = left - 1 if left > 0 else left
            self.failed += 1
            raise OSError(NETWORK)

    def open_input_file(self, path: str) -> Any:
        self._read(path)
        return self.local.open_input_file(path)

    def open_input_stream(self, path: str) -> Any:
        self._read(path)
        return self.local.open_input_stream(path)

    def copy_file(self, src: str, dest: str) -> None:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        self.local.copy_file(src, dest)

    # the rest as the local filesystem does it
    def get_type_name(self) -> str:
        return "flaky"

    def equals(self, other: Any) -> bool:
        return self is other

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> Any:
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self.local.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.local.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise OSError("not here")

    def delete_file(self, path: str) -> None:
        self.local.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.local.move(src, dest)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return self.local.open_output_stream(path)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        return self.local.open_append_stream(path)


def _store(root: Path) -> tuple[Store, FlakyHandler]:
    """An object store (as lagscope.lake sees one) over ``root``, its reads failing on demand; a URL
    of its own, so that no footer check of another test is remembered for it."""
    handler = FlakyHandler()
    root.mkdir(parents=True, exist_ok=True)
    store = Store(f"s3://flaky-{uuid.uuid4().hex[:8]}/lake", pafs.PyFileSystem(handler), str(root.resolve()), True)
    return store, handler


def _one_file(store: Store) -> str:
    """One committed sweeps file in the store; its path relative to the root."""
    rows = [{"sweep_ts": dt.datetime(2026, 5, 1, 12, 0, i, tzinfo=dt.UTC), "duration_ms": 1.0, "ok": True}
            for i in range(3)]
    lake.write_rows(store, SWEEPS, "prod", rows)
    (rel,) = lake.object_files(store, "sweeps")
    return str(rel).removeprefix(store.url + "/")


def _quarantine(root: Path) -> list[Path]:
    return sorted(p for p in (root / "sweeps" / lake.QUARANTINE_DIR).rglob("*.parquet"))


def test_a_read_that_fails_once_keeps_the_good_object(tmp_path: Path, quarantined: lake.QuarantineCounts) -> None:
    store, handler = _store(tmp_path / "lake")
    rel = _one_file(store)
    handler.fail[rel.rpartition("/")[2]] = 1
    good, bad = lake.check_objects(store, [rel])
    assert handler.failed == 1  # the failure happened and was looked past
    assert (good, bad) == ([rel], [])
    assert _quarantine(tmp_path / "lake") == []
    assert sum(quarantined.snapshot().values()) == 0
    assert lake.read_table(store, "sweeps").num_rows == 3


def test_a_store_that_keeps_failing_raises_and_quarantines_nothing(
        tmp_path: Path, quarantined: lake.QuarantineCounts) -> None:
    store, handler = _store(tmp_path / "lake")
    rel = _one_file(store)
    name = rel.rpartition("/")[2]
    handler.fail[name] = -1
    with pytest.raises(LakeError, match="NETWORK_CONNECTION") as err:
        lake.check_objects(store, [rel])
    assert "kept, not quarantined" in str(err.value)
    assert _quarantine(tmp_path / "lake") == []
    assert (tmp_path / "lake" / rel).exists()
    assert sum(quarantined.snapshot().values()) == 0
    # the store answers again: the next step reads the object
    handler.fail[name] = 0
    assert lake.check_objects(store, [rel]) == ([rel], [])


@pytest.mark.parametrize("kind", ["truncated", "garbage"])
def test_an_object_that_arrives_and_does_not_parse_is_quarantined(
        tmp_path: Path, quarantined: lake.QuarantineCounts, kind: str) -> None:
    store, handler = _store(tmp_path / "lake")
    rel = _one_file(store)
    spoil(tmp_path / "lake" / rel, kind)
    handler.fail[rel.rpartition("/")[2]] = 1  # a failure in passing first: the object is still bad
    good, bad = lake.check_objects(store, [rel])
    assert good == []
    assert [b.reason.split(":")[0] for b in bad] == ["unreadable Parquet footer"]
    assert len(_quarantine(tmp_path / "lake")) == 1
    assert not (tmp_path / "lake" / rel).exists()
    assert sum(quarantined.snapshot().values()) == 1
