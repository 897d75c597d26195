"""The S3 server fixture (tests/helpers/s3server.py): a real S3-compatible server process on
loopback, objects put, got and listed through pyarrow's S3FileSystem (http, path-style)."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from helpers.s3server import S3Server


def test_the_fixture_server_is_a_process_of_its_own_on_loopback(s3_server: S3Server) -> None:
    assert s3_server.pid is not None
    assert s3_server.pid != os.getpid()
    os.kill(s3_server.pid, 0)  # alive
    assert s3_server.endpoint.startswith("http://127.0.0.1:")
    assert s3_server.credentials["AWS_ACCESS_KEY_ID"]


def test_put_get_list_through_pyarrow_s3filesystem(s3_server: S3Server, s3_prefix: str) -> None:
    fs = s3_server.filesystem()
    base = f"{s3_server.bucket}/{s3_prefix}"
    with fs.open_output_stream(f"{base}/a/one.txt") as out:
        out.write(b"first")
    with fs.open_output_stream(f"{base}/a/two.txt") as out:
        out.write(b"second" * 1000)
    with fs.open_output_stream(f"{base}/b/three.txt") as out:
        out.write(b"third")

    with fs.open_input_stream(f"{base}/a/two.txt") as fh:
        assert fh.read() == b"second" * 1000
    listed = fs.get_file_info(pafs.FileSelector(f"{base}/a"))
    assert sorted((i.base_name, i.size) for i in listed) == [("one.txt", 5), ("two.txt", 6000)]
    everything = fs.get_file_info(pafs.FileSelector(base, recursive=True))
    assert sorted(i.path.removeprefix(base + "/") for i in everything if i.type == pafs.FileType.File) == [
        "a/one.txt", "a/two.txt", "b/three.txt"]
    with pytest.raises(FileNotFoundError):
        fs.open_input_stream(f"{base}/a/none.txt").read()


def test_every_listed_object_has_its_time_of_writing(s3_server: S3Server, s3_prefix: str) -> None:
    # the listing's LastModified with three digits of milliseconds, as S3 writes it: gofakes3
    # dropped trailing zeros ("…:05.24Z"), which pyarrow read as the epoch for 1 object in 10, and
    # the results' retention (oldest file first) removed a newer file first (CI)
    fs = s3_server.filesystem()
    base = f"{s3_server.bucket}/{s3_prefix}"
    before = time.time()
    for i in range(60):
        with fs.open_output_stream(f"{base}/m/{i:02d}") as out:
            out.write(b"x")
    listed = [i for i in fs.get_file_info(pafs.FileSelector(f"{base}/m")) if i.type == pafs.FileType.File]
    assert len(listed) == 60
    epoch = sorted(i.base_name for i in listed if i.mtime is None or i.mtime.timestamp() < before - 5)
    assert epoch == []
    assert all(i.mtime is not None and i.mtime.timestamp() <= time.time() + 5 for i in listed)


def test_a_parquet_file_round_trips_through_the_server(s3_server: S3Server, s3_prefix: str) -> None:
    fs = s3_server.filesystem()
    data = pa.table({"partition": pa.array(range(10_000), pa.int32()), "lag": pa.array(range(10_000), pa.int64())})
    path = f"{s3_server.bucket}/{s3_prefix}/t.parquet"
    pq.write_table(data, path, filesystem=fs)
    assert pq.read_table(path, filesystem=fs).equals(data)


def test_the_server_is_stopped_by_its_pid(tmp_path: pytest.TempPathFactory) -> None:
    server = S3Server(tmp_path).start()  # type: ignore[arg-type]
    pid = server.pid
    fs = server.filesystem()
    with fs.open_output_stream(f"{server.bucket}/k") as out:
        out.write(b"v")
    server.stop()
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped by its PID: no such process any more
    with pytest.raises(OSError):
        fs.open_input_stream(f"{server.bucket}/k").read()


def test_copies_that_grow_the_database_keep_the_server_up_and_the_bytes_whole(tmp_path: pytest.TempPathFactory) -> None:
    """The first copy that grew the bolt file crashed an unpatched gofakes3 (the copied object's
    bytes read from a mapping the write had just replaced; scripts/patches/gofakes3-bolt-copy.patch):
    every move the analytics' publish does on a bucket is a copy."""
    with S3Server(tmp_path) as server:  # type: ignore[arg-type]
        fs = server.filesystem()
        payload = os.urandom(256 * 1024)
        with fs.open_output_stream(f"{server.bucket}/src/a.bin") as out:
            out.write(payload)
        for i in range(40):  # ~10 MiB of copies: the file is remapped several times
            fs.copy_file(f"{server.bucket}/src/a.bin", f"{server.bucket}/dst/{i}.bin")
        assert server.pid is not None
        os.kill(server.pid, 0)  # still alive
        for i in (0, 17, 39):
            with fs.open_input_stream(f"{server.bucket}/dst/{i}.bin") as fh:
                assert fh.read() == payload
