"""The route stage's bucket of a row, and its tasks' share of the files (pure: no Spark session)."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pytest

from lagscope.analytics import job
from lagscope.analytics.job import bucket_of


def _want(cluster: list[str | None], group: list[str | None], buckets: int) -> list[int]:
    return [zlib.crc32(f"{c or ''}\0{g or ''}".encode()) % buckets for c, g in zip(cluster, group, strict=True)]


@pytest.mark.parametrize("as_dictionary", [False, True])
@pytest.mark.parametrize("rows", [0, 1, 50, 5000])
def test_bucket_is_the_crc_of_cluster_and_group(as_dictionary: bool, rows: int) -> None:
    rng = np.random.default_rng(rows)
    cluster = [None if x == 0 else f"c{x}" for x in rng.integers(0, 3, rows)]
    # few distinct groups (the table of pairs) and, with many rows, also a dictionary much larger
    # than the rows that use it (the sort of distinct pairs)
    group = [None if x == 0 else f"group-{x}" for x in rng.integers(0, 40 if rows < 1000 else 10**6, rows)]
    c, g = pa.array(cluster, pa.string()), pa.array(group, pa.string())
    if as_dictionary:
        c, g = c.dictionary_encode(), g.dictionary_encode()
    for buckets in (1, 7, 50):
        got = bucket_of(c, g, buckets)
        assert got.dtype == np.int32
        assert got.tolist() == _want(cluster, group, buckets)


def test_a_large_dictionary_few_rows_use() -> None:
    names = pa.array([f"g{i}" for i in range(100_000)])
    g = pa.DictionaryArray.from_arrays(pa.array([5, 99_999, 5, None], pa.int32()), names)
    c = pa.array(["a", "a", "b", "a"]).dictionary_encode()
    assert bucket_of(c, g, 13).tolist() == _want(["a", "a", "b", "a"], ["g5", "g99999", "g5", None], 13)


def test_the_route_tasks_share_the_files_by_rows_not_by_count() -> None:
    # 25 big offsets files and 25 small member files, as a batch lists them: each of two task
    # slots gets half the rows (cut by count after sorting by size, one slot got every big file)
    tasks = [("offsets", f"o{i}") for i in range(25)] + [("members", f"m{i}") for i in range(25)]
    sizes = {f"o{i}": 2_000_000 for i in range(25)} | {f"m{i}": 2_000 for i in range(25)}
    dealt = job._deal(tasks, sizes, 2)
    assert sorted(t for s in dealt for t in s) == sorted(tasks)
    load = [sum(sizes[p] for _, p in s) for s in dealt]
    assert max(load) - min(load) <= 2_000_000
    assert all(12 <= sum(t == "offsets" for t, _ in s) <= 13 for s in dealt)


def test_no_empty_route_task_and_unknown_sizes_still_spread() -> None:
    assert job._deal([("offsets", "a")], {}, 8) == [[("offsets", "a")]]
    dealt = job._deal([("offsets", p) for p in "abcd"], {}, 2)
    assert [len(s) for s in dealt] == [2, 2]
