"""The in-process incremental step (:mod:`lagscope.analytics.local`) against the Spark step: the
same lake stepped through by both engines gives the same result tables and the same state, row
for row; a step with a rebalance window goes to Spark, and the engines alternate on one state."""

from __future__ import annotations

import datetime as dt
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from analytics_builders import T0, at
from pyspark.sql import SparkSession

from lagscope.analytics import local
from lagscope.analytics.findings import RuleParams
from lagscope.analytics.job import Settings, run_batch, run_incremental
from lagscope.errors import ConfigError
from lagscope.lake import write_rows
from lagscope.schema import COMMITS, GROUP_EVENTS, MEMBERS, OFFSETS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SETTINGS = Settings(rules=RuleParams(stall_after_s=40, stop_after_s=40, gap_min_s=5),
                    read_committed_groups=("txn-.*",))
SWEEP_S = 10
MINUTES = 6


def _partition_path(rng: random.Random, kind: str, n: int) -> list[tuple[int, int | None, int, int, int | None]]:
    """(t, committed, end, log_start, rec_ms) per sweep for one partition of behaviour ``kind``."""
    out: list[tuple[int, int | None, int, int, int | None]] = []
    end, committed, log_start = 1000, 990, 0
    rate = rng.choice([0, 3, 20, 200])
    for i in range(n):
        t = i * SWEEP_S
        end += rate * SWEEP_S + rng.randint(0, 5) * (rate > 0)
        if kind == "steady":
            committed = max(committed, end - rng.randint(0, 10))
        elif kind == "stall" and 12 <= i <= 30:
            pass  # committed offset stuck while the end moves
        elif kind == "rewind" and i == 20:
            committed -= 500
        elif kind == "skip" and i == 25:
            committed = end
        elif kind == "retention" and i >= 15:
            log_start = min(end, log_start + 400)
            committed = min(committed + 5, end)
        elif kind == "recreate" and i == 22:
            end, committed, log_start = 50, 10, 0
        elif kind == "idle":
            end = 1000
            committed = 1000
        else:
            committed = min(end, committed + rng.randint(0, 3 * max(rate, 1) * SWEEP_S))
        rec = (T0.timestamp() + t - rng.uniform(0, 20)) * 1000 if kind == "steady" and committed < end else None
        out.append((t, None if kind == "nocommit" else committed, end, log_start, int(rec) if rec else None))
    return out


def _lake(root: Path, *, seed: int, rebalance_at: int | None, commit_stream: bool) -> None:
    """Six groups of several partitions (each partition a behaviour) over ``MINUTES`` minutes; group
    ``g0`` keeps one member, ``g1`` has none (its partitions unowned), ``txn-g2`` reads committed
    (lso below the high watermark); with ``rebalance_at``, ``g0`` changes members at that sweep."""
    rng = random.Random(seed)
    kinds = ["steady", "stall", "rewind", "skip", "retention", "recreate", "idle", "nocommit", "slow"]
    n = MINUTES * 60 // SWEEP_S
    offsets: list[dict[str, Any]] = []
    members: list[dict[str, Any]] = []
    commits: list[dict[str, Any]] = []
    seq = 0
    for gi, group in enumerate(["g0", "g1", "txn-g2", "g3", "g4", "g5"]):
        parts = [(tp, p) for tp in ("a", "b") for p in range(3)]
        for tp, p in parts:
            path = _partition_path(rng, rng.choice(kinds), n)
            prev_c: int | None = None
            for i, (t, c, e, ls, rec) in enumerate(path):
                owner = None if group == "g1" else ("m2" if rebalance_at is not None and group == "g0"
                                                   and i >= rebalance_at else "m1")
                lso = e - rng.randint(0, 30) if group.startswith("txn") else e
                lag = None if c is None else max(0, (lso if group.startswith("txn") else e) - c)
                offsets.append({"sweep_ts": at(t), "group_id": group, "topic": tp, "partition": p,
                                "committed_offset": c, "log_start_offset": ls, "log_end_offset": e,
                                "last_stable_offset": lso, "member_id": owner, "group_state": "Stable",
                                "lag": lag, "committed_record_ts": dt.datetime.fromtimestamp(rec / 1000, dt.UTC)
                                if rec else None})
                if commit_stream and c is not None and (c != prev_c or rng.random() < 0.3):
                    seq += 1
                    ct = at(t - rng.uniform(0.1, SWEEP_S - 0.1))
                    commits.append({"group_id": group, "topic": tp, "partition": p, "committed_offset": c,
                                    "commit_ts": ct, "record_ts": ct, "source_partition": gi % 3,
                                    "source_offset": seq})
                prev_c = c
        for i in range(n):
            if group == "g1":
                members.append({"sweep_ts": at(i * SWEEP_S), "group_id": group, "group_state": "Empty",
                                "generation": 3, "member_id": None, "assignment": []})
                continue
            mid = "m2" if rebalance_at is not None and group == "g0" and i >= rebalance_at else "m1"
            gen = 8 if mid == "m2" else 7
            members.append({"sweep_ts": at(i * SWEEP_S), "group_id": group, "group_state": "Stable",
                            "generation": gen, "member_id": mid, "group_instance_id": None,
                            "assignment": [{"topic": tp, "partition": p} for tp, p in parts]})
    write_rows(root, OFFSETS, "c", offsets)
    write_rows(root, MEMBERS, "c", members)
    if commit_stream:
        write_rows(root, COMMITS, "c", commits)
        write_rows(root, GROUP_EVENTS, "c", [{
            "group_id": "g3", "record_type": "group_metadata", "generation": 7, "record_ts": at(0),
            "source_partition": 0, "source_offset": 1, "value_version": 3,
            "members": [{"member_id": "m1", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 60_000,
                         "assignment": []}]}])


def _step_through(spark: SparkSession, lake: Path, results: Path, engine: str) -> list[dict[str, int]]:
    """Steps of two minutes each (a step is several sweeps, some of them minutes whole). With
    ``auto`` no session is passed: a step that needs Spark gets it from the factory."""
    return [run_incremental(None if engine == "auto" else spark, lake, results, settings=SETTINGS, since=T0,
                            until=at(60 * m), engine=engine, spark_factory=lambda: spark)
            for m in range(2, MINUTES + 1, 2)]


def _rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    t = ds.dataset(str(path), format="parquet", partitioning="hive").to_table()
    t = t.select(sorted(t.column_names))
    # ordered by everything but the doubles (whose last bits may differ: the rows would pair up
    # differently), then by the doubles rounded
    return sorted(t.to_pylist(), key=lambda r: ([(type(v).__name__, str(v)) for v in r.values()
                                                 if not isinstance(v, float)],
                                                [round(v, 3) for v in r.values() if isinstance(v, float)
                                                 and not math.isnan(v)]))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        # sums of rates in another order: the rollups' last bits, and an ETA that divides by
        # their (small) difference
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, list) and isinstance(b, list):  # collected sets: no order
        return sorted(map(str, a)) == sorted(map(str, b))
    return bool(a == b)


def _assert_same_tables(spark_res: Path, local_res: Path, *, state: bool = True) -> None:
    for table in ("lag_trends", "status", "anomalies", "rebalances"):
        a = [{k: v for k, v in r.items() if k != "as_of_ts"} for r in _rows(spark_res / table)]
        b = [{k: v for k, v in r.items() if k != "as_of_ts"} for r in _rows(local_res / table)]
        assert len(a) == len(b), table
        for x, y in zip(a, b, strict=True):
            assert x.keys() == y.keys(), table
            assert all(_same(x[c], y[c]) for c in x), (table, x, y)
    if not state:
        return
    versions = [json.loads((r / "_state" / "checkpoint.json").read_text())["version"] for r in (spark_res, local_res)]
    for part in ("series", "history", "gaps", "entries", "minutes", "msweeps", "recent_rebalances"):
        a = _rows(spark_res / "_state" / versions[0] / part)
        b = _rows(local_res / "_state" / versions[1] / part)
        assert len(a) == len(b), part
        for x, y in zip(a, b, strict=True):
            assert all(_same(x[c], y.get(c)) for c in x), (part, x, y)


def _both_engines(spark: SparkSession, lake: Path, tmp_path: Path) -> list[bool]:
    """Step through ``lake`` on Spark (``tmp_path/spark``) and with ``auto`` (``tmp_path/local``);
    returns, per ``auto`` step, whether it ran in this process."""
    _step_through(spark, lake, tmp_path / "spark", "spark")
    calls = []
    real = local.run_local_step

    def counted(*a: Any, **kw: Any) -> local.LocalStep | None:
        got = real(*a, **kw)
        calls.append(got is not None)
        return got

    local.run_local_step = counted  # type: ignore[assignment]
    try:
        _step_through(spark, lake, tmp_path / "local", "auto")
    finally:
        local.run_local_step = real  # type: ignore[assignment]
    return calls


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("commit_stream", [False, True], ids=["sweeps", "commit-stream"])
def test_local_steps_equal_spark_steps(spark: SparkSession, tmp_path: Path, commit_stream: bool) -> None:
    lake = tmp_path / "lake"
    _lake(lake, seed=7, rebalance_at=None, commit_stream=commit_stream)
    calls = _both_engines(spark, lake, tmp_path)
    assert calls == [True] * (MINUTES // 2)  # every step ran in this process
    # something to compare: each kind of finding is there
    kinds = {r["kind"] for r in _rows(tmp_path / "local" / "anomalies")}
    assert {"stall", "rewind", "retention_loss"} <= kinds, kinds
    methods = {r["lag_seconds_method"] for r in _rows(tmp_path / "local" / "lag_trends")}
    assert {"zero", "interpolated", "exact"} <= methods, methods
    _assert_same_tables(tmp_path / "spark", tmp_path / "local")


@pytest.mark.timeout(1800)
def test_a_step_with_a_rebalance_runs_on_spark_and_the_engines_alternate(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _lake(lake, seed=11, rebalance_at=15, commit_stream=False)  # g0's members change at t = 150 s (step 2)
    calls = _both_engines(spark, lake, tmp_path)
    assert calls == [True, False, True]
    rb = _rows(tmp_path / "local" / "rebalances")
    assert [(r["group_id"], r["members_before"], r["members_after"]) for r in rb] == [("g0", ["m1"], ["m2"])]
    _assert_same_tables(tmp_path / "spark", tmp_path / "local")


@pytest.mark.timeout(1800)
@pytest.mark.parametrize(("commit_stream", "rebalance_at"), [(False, None), (True, None), (True, 15)],
                         ids=["sweeps", "commit-stream", "rebalance"])
def test_a_batch_in_this_process_equals_the_spark_batch(spark: SparkSession, tmp_path: Path, commit_stream: bool,
                                                        rebalance_at: int | None) -> None:
    lake = tmp_path / "lake"
    _lake(lake, seed=5, rebalance_at=rebalance_at, commit_stream=commit_stream)
    day = T0.date()
    run_batch(spark, lake, tmp_path / "spark", since=day, until=day, settings=SETTINGS, engine="spark",
              progress=False)
    calls: list[bool] = []
    real = local.run_local_batch

    def counted(*a: Any, **kw: Any) -> dict[str, int] | None:
        got = real(*a, **kw)
        calls.append(got is not None)
        return got

    local.run_local_batch = counted  # type: ignore[assignment]
    try:
        # the groups in two buckets, each in its own process (this machine's cores, at least two)
        for _ in range(2):  # a second run over the same days replaces the first's files
            run_batch(None, lake, tmp_path / "local", since=day, until=day, settings=SETTINGS, engine="auto",
                      progress=False, spark_factory=lambda: spark)
    finally:
        local.run_local_batch = real  # type: ignore[assignment]
    assert calls == [rebalance_at is None] * 2  # a rebalance window: the batch ran on Spark
    if rebalance_at is None:
        kinds = {r["kind"] for r in _rows(tmp_path / "local" / "anomalies")}
        assert {"stall", "rewind", "retention_loss"} <= kinds, kinds
        assert len(list((tmp_path / "local" / "lag_trends" / "cluster=c" / f"date={day}").glob("*.parquet"))) == 2
    else:
        assert [r["group_id"] for r in _rows(tmp_path / "local" / "rebalances")] == ["g0"]
    _assert_same_tables(tmp_path / "spark", tmp_path / "local", state=False)


def test_groups_share_out_into_buckets() -> None:
    offsets = pa.table({"cluster": ["c"] * 10 + ["d"] * 2, "group_id": ["a"] * 6 + ["b"] * 3 + ["e"] + ["a"] * 2})
    code, bucket, names, sizes = local.group_buckets(offsets, workers=2, bucket_rows=100)
    assert sorted(names.to_pylist()) == ["a", "b", "e"]
    assert names.take(pa.array(code)).to_pylist() == offsets.column("group_id").to_pylist()
    assert dict(zip(names.to_pylist(), sizes.tolist(), strict=True)) == {"a": 8, "b": 3, "e": 1}
    # the largest group (both clusters' "a": 8 rows) alone, the others beside it
    assert np.bincount(bucket[code]).tolist() == [8, 4]
    _, bucket, _, _ = local.group_buckets(offsets, workers=2, bucket_rows=4)
    assert bucket.max() + 1 == 3  # 12 rows, about 4 to a bucket
    # the same read as dictionaries (a batch reads the group ids so)
    dicts = offsets.set_column(1, "group_id", pa.chunked_array([pc.dictionary_encode(offsets.column("group_id")
                                                                                      .combine_chunks())]))
    code_d, bucket_d, names_d, sizes_d = local.group_buckets(dicts, workers=2, bucket_rows=100)
    assert names_d.take(pa.array(code_d)).to_pylist() == offsets.column("group_id").to_pylist()
    assert dict(zip(names_d.to_pylist(), sizes_d.tolist(), strict=True)) == {"a": 8, "b": 3, "e": 1}
    assert np.bincount(bucket_d[code_d]).tolist() == [8, 4]
    _, bucket, _, _ = local.group_buckets(offsets.slice(0, 6), workers=2, bucket_rows=4)
    assert bucket.tolist() == [0]  # one group: one bucket


def test_group_argmax_is_the_first_largest_value() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        by = rng.choice([np.nan, 1.0, 2.0, 3.0, 5.0], n)
        order, starts, gid = local._groups(rng.integers(0, 6, n))
        got = local._gargmax(by[order], starts, gid)
        for g in range(len(starts)):
            rows = np.flatnonzero(gid == g)
            vals = by[order][rows]
            assert got[g] == (-1 if np.isnan(vals).all() else rows[np.nanargmax(vals)])


def test_key_code_is_equal_exactly_where_the_columns_are() -> None:
    rng = np.random.default_rng(2)
    n = 5000
    cols = [pa.array(rng.choice(["a", "b", None], n)), pa.array(rng.choice(["x", "yy", "z"], n)).dictionary_encode(),
            pa.array(rng.integers(-3, 3, n), pa.int32()), pa.array(rng.integers(0, 2**40, n) * 10**6, pa.int64())]
    code = local._key_code(*cols)
    assert code.max() < 2**31  # dense again: the last column alone spans 2⁴⁰ values
    rows = list(zip(*(c.to_pylist() for c in cols), strict=True))
    first: dict[tuple[Any, ...], int] = {}
    for r, c in zip(rows, code.tolist(), strict=True):
        assert first.setdefault(r, c) == c
    assert len(set(first.values())) == len(first)


def test_rebalance_possible() -> None:
    def sweeps(*rows: tuple[float, int | None, list[str], bool]) -> pa.Table:
        return pa.Table.from_pylist([{"cluster": "c", "group_id": "g", "t": t, "generation": gen, "member_ids": ids,
                                      "settled": settled} for t, gen, ids, settled in rows], schema=local.SWEEP_CHECK)

    assert not local.rebalance_possible(sweeps((0, 1, ["a"], True), (10, 1, ["a"], True)), None)
    assert local.rebalance_possible(sweeps((0, 1, ["a"], True), (10, 2, ["a"], True)), None)  # new generation
    assert local.rebalance_possible(sweeps((0, 1, ["a"], True), (10, 1, ["a", "b"], True)), None)  # new member
    assert local.rebalance_possible(sweeps((0, 1, ["a", "b"], True), (10, 1, ["a"], True)), None)  # one left
    assert local.rebalance_possible(sweeps((10, 1, ["b"], True), (0, 1, ["a"], True)), None)  # in time order
    # an unsettled sweep between two equal settled ones is no window; nor are two groups' sweeps
    assert not local.rebalance_possible(sweeps((0, 1, ["a"], True), (5, None, [], False), (10, 1, ["a"], True)),
                                        None)
    two = pa.concat_tables([sweeps((0, 1, ["a"], True)), sweeps((0, 2, ["b"], True)).set_column(
        1, "group_id", pa.array(["h"]))])
    assert not local.rebalance_possible(two, None)
    events = pa.Table.from_pylist([{"cluster": "c", "group_id": "g", "record_type": "group_metadata",
                                    "record_ts": at(5), "members": [{"member_id": "a"}]}])
    # a generation record between two settled sweeps: a generation no sweep saw
    t0 = T0.timestamp()
    assert local.rebalance_possible(sweeps((t0, 1, ["a"], True), (t0 + 10, 1, ["a"], True)), events)
    assert not local.rebalance_possible(sweeps((t0 + 10, 1, ["a"], True), (t0 + 20, 1, ["a"], True)), events)


def test_sweep_table_is_member_sweeps_in_arrays() -> None:
    def row(ts: int, gid: str, state: str | None, gen: int | None, mid: str | None,
            assignment: list[dict[str, Any]] | None) -> dict[str, Any]:
        return {"cluster": "c", "group_id": gid, "sweep_ts": at(ts), "group_state": state, "generation": gen,
                "member_id": mid, "group_instance_id": None, "assignment": assignment}

    tp = [{"topic": "t", "partition": 0}]
    members = pa.Table.from_pylist([
        row(0, "g", "Stable", 3, "b", tp), row(0, "g", "Stable", 4, "a", []), row(0, "g", "Stable", None, "a", None),
        row(10, "g", "PreparingRebalance", 4, "a", tp),
        row(20, "g", None, None, None, None), row(20, "g", "Stable", 5, "c", None),  # Stable, nothing assigned
        row(0, "h", "Stable", 1, "x", tp)])
    want = sorted((s["group_id"], s["t"], s["generation"], s["member_ids"], s["settled"])
                  for s in local.member_sweeps(members))
    got = sorted((r["group_id"], r["t"], r["generation"], r["member_ids"], r["settled"])
                 for r in local.sweep_table(members).to_pylist())
    assert got == want
    assert [w[2:] for w in want if w[0] == "g"] == [(4, ["a", "b"], True), (4, ["a"], False), (5, ["c"], False)]

    # many sweeps of several members, rows in no order (a group_by alone would not keep ids sorted)
    rng = random.Random(3)
    rows = [row(10 * i, g, rng.choice(["Stable", "Stable", None]), rng.choice([None, 1, 2]), m,
                rng.choice([[], None, tp]))
            for i in range(300) for g in ("g", "h") for m in rng.sample("abcdefghij", rng.randint(0, 5))]
    rng.shuffle(rows)
    members = pa.Table.from_pylist(rows)
    assert (sorted((s["group_id"], s["t"], s["generation"], s["member_ids"]) for s in local.member_sweeps(members))
            == sorted((r["group_id"], r["t"], r["generation"], r["member_ids"])
                      for r in local.sweep_table(members).to_pylist()))


def test_unknown_engine_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown analytics engine"):
        run_incremental(None, tmp_path / "lake", tmp_path / "res", settings=SETTINGS, since=T0, until=at(60),
                        engine="duckdb")


@pytest.mark.timeout(600)
def test_a_defect_of_the_in_process_step_falls_back_to_spark(spark: SparkSession, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    lake = tmp_path / "lake"
    _lake(lake, seed=3, rebalance_at=None, commit_stream=False)

    def broken(*a: Any, **kw: Any) -> local.LocalStep | None:
        raise RuntimeError("a defect")

    monkeypatch.setattr(local, "run_local_step", broken)
    written = run_incremental(None, lake, tmp_path / "res", settings=SETTINGS, since=T0, until=at(120),
                              spark_factory=lambda: spark)
    assert written["lag_trends"] > 0
    assert written["status"] > 0
    assert "failed; running it on Spark" in caplog.text
    assert "a defect" in caplog.text
    # the checkpoint moved: the next step starts where Spark's ended
    assert json.loads((tmp_path / "res" / "_state" / "checkpoint.json").read_text())["watermark"].startswith(
        at(120).isoformat()[:16])
