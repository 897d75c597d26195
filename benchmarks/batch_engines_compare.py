"""Whether two analytics runs over the same lake wrote the same result tables, row for row.

    .venv/bin/python benchmarks/batch_engines_compare.py WORKDIR/results-auto WORKDIR/results

(``analytics_speed.py`` leaves its in-process batch in ``results-auto`` and its Spark batch in
``results``, and compares them so itself.) Per table, in DuckDB: the rows of each side, the
rows whose columns other than the doubles are on one side only (``EXCEPT ALL`` both ways), and,
with the rows paired on those columns, the largest relative difference of each double (their
last bits may differ: the order of a floating-point sum). Prints Markdown; exits 1 when the tables differ beyond 1e-9.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from lagscope.schema import TABLES

_TOLERANCE = 1e-9


def compare(a: Path, b: Path, table: str, con: duckdb.DuckDBPyConnection) -> tuple[str, bool]:
    spec = TABLES[table]
    doubles = [f.name for f in spec.schema if str(f.type) == "double"]
    others = ["cluster", *(f.name for f in spec.schema if f.name not in doubles)]

    def scan(root: Path) -> str:
        if not (root / table).exists():
            return f"(SELECT {', '.join(f'NULL AS {c}' for c in [*others, *doubles])} WHERE false)"
        return f"read_parquet('{root / table}/**/*.parquet', hive_partitioning = true)"

    cols = ", ".join(others)
    n_a = con.execute(f"SELECT count(*) FROM {scan(a)}").fetchone()[0]  # type: ignore[index]
    n_b = con.execute(f"SELECT count(*) FROM {scan(b)}").fetchone()[0]  # type: ignore[index]
    only_a = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM {scan(a)} EXCEPT ALL "
                         f"SELECT {cols} FROM {scan(b)})").fetchone()[0]  # type: ignore[index]
    only_b = con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM {scan(b)} EXCEPT ALL "
                         f"SELECT {cols} FROM {scan(a)})").fetchone()[0]  # type: ignore[index]
    worst = []
    if doubles and n_a and n_b:
        on = " AND ".join(f"x.{c} IS NOT DISTINCT FROM y.{c}" for c in others)
        rel = ", ".join(
            f"max(CASE WHEN x.{d} IS NULL AND y.{d} IS NULL THEN 0 WHEN x.{d} IS NULL OR y.{d} IS NULL THEN 1e308 "
            f"WHEN isnan(x.{d}) AND isnan(y.{d}) THEN 0 "
            f"ELSE abs(x.{d} - y.{d}) / greatest(abs(x.{d}), abs(y.{d}), 1e-12) END)" for d in doubles)
        got = con.execute(f"SELECT {rel} FROM {scan(a)} x JOIN {scan(b)} y ON {on}").fetchone()
        worst = list(zip(doubles, got or [], strict=True))
    same = n_a == n_b and only_a == 0 and only_b == 0 and all((v or 0) <= _TOLERANCE for _, v in worst)
    diffs = ", ".join(f"{d} {v:.3g}" for d, v in worst if v is not None) or "none"
    return (f"| {table} | {n_a:,} | {n_b:,} | {only_a:,} / {only_b:,} | {diffs} | {'yes' if same else '**no**'} |",
            same)


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    a, b = Path(sys.argv[1]), Path(sys.argv[2])
    for root in (a, b):
        if not root.is_dir():
            print(f"error: {root}: no such results folder", file=sys.stderr)
            return 2
    con = duckdb.connect()
    con.execute("SET threads = 2")
    lines = [f"Result tables of `{a}` against `{b}`:", "",
             "| table | rows (first) | rows (second) | rows on one side only (first / second) | "
             "largest relative difference of the doubles | same |", "|---|---:|---:|---:|---|---|"]
    ok = True
    for table in ("lag_trends", "status", "anomalies", "rebalances"):
        line, same = compare(a, b, table, con)
        lines.append(line)
        ok = ok and same
    print("\n".join(lines))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
