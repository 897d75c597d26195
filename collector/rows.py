"""Rows stored as columns: a ``Sequence[Mapping[str, Any]]`` that costs a few lists, not a dict per row.

A sweep of 100,000 group-partitions as 100,000 dicts of 15 keys is ~100 MB of Python objects;
as 15 lists it is ~15 MB (the strings and small ints are shared). :class:`ColumnRows`
satisfies :class:`~lagscope.collector.model.Snapshot`'s row contract (each row a read-only
mapping keyed by lake column names) with light views, and turns into an Arrow table column
by column for the lake without ever building the dicts.

    >>> rows = ColumnRows({"group_id": ["g", "g"], "partition": [0, 1]})
    >>> len(rows), rows[1]["partition"], dict(rows[0])
    (2, 1, {'group_id': 'g', 'partition': 0})
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, overload

import pyarrow as pa

__all__ = ["ColumnRows"]


class _Row(Mapping[str, Any]):
    """A read-only view of row ``i`` of a :class:`ColumnRows`."""

    __slots__ = ("_cols", "_i")

    def __init__(self, cols: dict[str, list[Any]], i: int) -> None:
        self._cols = cols
        self._i = i

    def __getitem__(self, key: str) -> Any:
        return self._cols[key][self._i]

    def get(self, key: str, default: Any = None) -> Any:
        col = self._cols.get(key)
        return default if col is None else col[self._i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cols)

    def __len__(self) -> int:
        return len(self._cols)

    def __contains__(self, key: object) -> bool:
        return key in self._cols

    def __repr__(self) -> str:
        return repr(dict(self))


class ColumnRows(Sequence[Mapping[str, Any]]):
    """Equal-length columns, read as rows (see the module docstring). Immutable by convention."""

    __slots__ = ("_cols", "_n")

    def __init__(self, columns: dict[str, list[Any]]) -> None:
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"ColumnRows: columns of different lengths {sorted(lengths)}")
        self._cols = columns
        self._n = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Any]]: ...

    def __getitem__(self, index: int | slice) -> Mapping[str, Any] | Sequence[Mapping[str, Any]]:
        if isinstance(index, slice):
            return [_Row(self._cols, i) for i in range(*index.indices(self._n))]
        if index < 0:
            index += self._n
        if not 0 <= index < self._n:
            raise IndexError("ColumnRows index out of range")
        return _Row(self._cols, index)

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        cols = self._cols
        for i in range(self._n):
            yield _Row(cols, i)

    def column(self, name: str) -> list[Any]:
        """One column (a copy): all values of ``name`` in row order."""
        return list(self._cols[name])

    def to_arrow(self, schema: pa.Schema) -> pa.Table:
        """An Arrow table of ``schema``; columns the rows lack are null."""
        arrays = [pa.array(self._cols[f.name], type=f.type) if f.name in self._cols
                  else pa.nulls(self._n, type=f.type) for f in schema]
        return pa.Table.from_arrays(arrays, schema=schema)
