"""The per-key pass's packed state values (lagscope.analytics.onepass): a key's Burrow entries and
gap samples travel as one binary value per key, and come back exactly as they went in."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lagscope.analytics import onepass


def _chunk(keys: np.ndarray, values: pa.Array) -> onepass._Chunk:  # type: ignore[type-arg]
    tbl = pa.table({"b": values})
    return onepass._Chunk(tbl, np.ones(len(keys), bool), keys)


def test_pack_and_unpack_round_trip() -> None:
    # three keys with 2, 0 (absent) and 3 rows; nulls (NaN) and large offsets survive, and the
    # values come back in the order they were packed
    key = np.array([0, 0, 2, 2, 2], np.int64)
    t = np.array([1.5, 2.5, 10.0, 11.0, 12.0])
    c = np.array([100.0, 2.0**52, 7.0, 8.0, 9.0])
    lag = np.array([np.nan, 3.0, 0.0, np.nan, 1.0])
    keys, packed = onepass._pack(key, [t, c, lag])
    assert keys.tolist() == [0, 2]
    assert len(packed) == 2
    got_key, got = onepass._unpack(_chunk(keys, packed), 3)
    assert got_key.tolist() == key.tolist()
    np.testing.assert_array_equal(got, np.column_stack([t, c, lag]))


def test_unpack_a_slice_of_a_larger_array() -> None:
    # Arrow hands the pass slices of its batches: the offsets of a slice start past zero
    _keys, packed = onepass._pack(np.array([0, 1, 1, 2], np.int64), [np.array([1.0, 2.0, 3.0, 4.0])])
    got_key, got = onepass._unpack(_chunk(np.array([1, 2]), packed.slice(1)), 1)
    assert got_key.tolist() == [1, 1, 2]
    assert got[:, 0].tolist() == [2.0, 3.0, 4.0]


def test_pack_nothing() -> None:
    keys, packed = onepass._pack(np.zeros(0, np.int64), [np.zeros(0)])
    assert len(keys) == 0
    assert len(packed) == 0
    got_key, got = onepass._unpack(_chunk(keys, packed), 1)
    assert len(got_key) == 0
    assert got.shape == (0, 1)
