"""Benchmark: the Group page of the drill-down app over one day of data for 10,000 partitions.

Target (issue 7): page load <= 2 s.

The synthetic lake is generated once into ``benchmarks/.work/ui-lake`` (gitignored): one group
reading 10 topics x 1,000 partitions, one day (1,440 one-minute windows) of ``lag_trends``
(14.4 M partition rows + topic and group rollups), group-level ``status``, ``members`` every
minute (20 members, 500 partitions each), a few rebalances and anomalies; written through
:mod:`lagscope.lake` in hourly files, as an incremental analytics run would.

Measured, each best and median of ``--repeat`` runs:

- data layer: every query the Group page makes, no cache, on a fresh DuckDB connection (as
  after a restart) and on one long-lived connection (as the app keeps it, st.cache_resource);
- AppTest render of the Group page, cold cache (``st.cache_data.clear()`` before each run), for
  "all topics" (one line per topic) and for one topic (its 10 partitions furthest behind);
- AppTest render, warm cache (a rerun, as when a widget changes).

    .venv/bin/python benchmarks/ui_group_page.py [--repeat 5] [--regenerate]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

from lagscope.lake import write_rows, write_table
from lagscope.schema import ANOMALIES, LAG_TRENDS, MEMBERS, REBALANCES, STATUS

WORK = Path(__file__).resolve().parent / ".work" / "ui-lake"
CLUSTER = "bench"
GROUP = "bench-group"
TOPICS = [f"topic-{i:02d}" for i in range(10)]
PARTITIONS_PER_TOPIC = 1_000
MINUTES = 1_440
MEMBERS_N = 20
DAY = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
TARGET_S = 2.0


def _ts(values: np.ndarray) -> pa.Array:
    return pa.array(values.astype("datetime64[ms]"), type=pa.timestamp("ms", tz="UTC"))


def generate(root: Path) -> None:
    rng = np.random.default_rng(7)
    n_parts = len(TOPICS) * PARTITIONS_PER_TOPIC
    topic_of = np.repeat(np.arange(len(TOPICS)), PARTITIONS_PER_TOPIC)
    part_of = np.tile(np.arange(PARTITIONS_PER_TOPIC), len(TOPICS)).astype(np.int32)
    produce = rng.uniform(5, 50, n_parts)
    growth = np.where(rng.random(n_parts) < 0.01, rng.uniform(1, 5, n_parts), 0.0)  # 1 % of partitions fall behind
    lag = rng.integers(0, 200, n_parts).astype(np.float64)
    topic_names = pa.array(TOPICS)
    day0 = np.datetime64(DAY.replace(tzinfo=None), "ms")
    for hour in range(MINUTES // 60):
        minutes = np.arange(hour * 60, hour * 60 + 60)
        # partition rows, sorted by window then topic/partition
        lags = np.empty((60, n_parts))
        for i in range(60):
            lag = np.maximum(0.0, lag + growth * 60 + rng.normal(0, 20, n_parts))
            lags[i] = lag
        lag_last = lags.reshape(-1).astype(np.int64)
        prod = np.tile(produce, 60)
        cons = prod - np.tile(growth, 60)
        rows = 60 * n_parts
        win = np.repeat(day0 + minutes.astype("timedelta64[m]"), n_parts)
        lag_s = lag_last / prod
        eta = np.full(rows, np.nan)
        part_tbl = pa.table({
            "window_start": _ts(win), "group_id": pa.array([GROUP] * rows),
            "topic": pa.DictionaryArray.from_arrays(pa.array(np.tile(topic_of, 60).astype(np.int32)),
                                                    topic_names).cast(pa.string()),
            "partition": pa.array(np.tile(part_of, 60)),
            "lag_last": lag_last, "lag_max": lag_last + rng.integers(0, 50, rows),
            "produce_rate": prod, "consume_rate": cons, "lag_seconds": lag_s,
            "lag_seconds_is_lower_bound": pa.array(np.zeros(rows, dtype=bool)),
            "lag_seconds_method": pa.array(["interpolated"] * rows),
            "catchup_eta_s": pa.array(eta, from_pandas=True),
            "retention_headroom_s": pa.nulls(rows, pa.float64()),
        })
        # topic and group rollups of the same hour
        per_topic = lags.reshape(60, len(TOPICS), PARTITIONS_PER_TOPIC).sum(axis=2)
        roll_win = day0 + minutes.astype("timedelta64[m]")
        roll: list[dict[str, object]] = []
        for i, m in enumerate(roll_win):
            when = m.astype(dt.datetime).replace(tzinfo=dt.UTC)
            for t, name in enumerate(TOPICS):
                roll.append({"window_start": when, "group_id": GROUP, "topic": name, "partition": None,
                             "lag_last": int(per_topic[i, t]), "lag_max": int(per_topic[i, t]),
                             "produce_rate": float(produce[topic_of == t].sum()),
                             "consume_rate": float((produce - growth)[topic_of == t].sum()),
                             "lag_seconds": float(lags[i][topic_of == t].max() / 5.0),
                             "lag_seconds_is_lower_bound": False, "lag_seconds_method": "interpolated",
                             "catchup_eta_s": None, "retention_headroom_s": None})
            roll.append({"window_start": when, "group_id": GROUP, "topic": None, "partition": None,
                         "lag_last": int(per_topic[i].sum()), "lag_max": int(per_topic[i].sum()),
                         "produce_rate": float(produce.sum()), "consume_rate": float((produce - growth).sum()),
                         "lag_seconds": float(lags[i].max() / 5.0), "lag_seconds_is_lower_bound": False,
                         "lag_seconds_method": "interpolated", "catchup_eta_s": None,
                         "retention_headroom_s": None})
        roll_tbl = pa.Table.from_pylist(roll, schema=LAG_TRENDS.schema)
        write_table(root, LAG_TRENDS, CLUSTER, pa.concat_tables([roll_tbl, part_tbl.cast(LAG_TRENDS.schema)]),
                    date=DAY.date(), prefix=f"h{hour:02d}")
        write_rows(root, STATUS, CLUSTER, [
            {"eval_ts": r["window_start"] + dt.timedelta(minutes=1), "group_id": GROUP,  # type: ignore[operator]
             "topic": None, "partition": None, "burrow_status": "WARN", "status": "WARN", "reason": "lag grows",
             "lag": r["lag_last"], "lag_seconds": r["lag_seconds"]} for r in roll if r["topic"] is None],
            date=DAY.date())
        # members every minute: 20 members x 500 partitions
        assignment = [[{"topic": TOPICS[t], "partition": int(p)} for t, p in zip(
            topic_of[k::MEMBERS_N], part_of[k::MEMBERS_N], strict=True)] for k in range(MEMBERS_N)]
        write_rows(root, MEMBERS, CLUSTER, [
            {"sweep_ts": m.astype(dt.datetime).replace(tzinfo=dt.UTC), "group_id": GROUP, "group_state": "Stable",
             "protocol_type": "consumer", "protocol": "range", "group_protocol": "classic", "generation": 3,
             "member_id": f"member-{k:02d}", "group_instance_id": None, "client_id": f"client-{k:02d}",
             "host": f"/10.0.1.{k}", "subscribed_topics": TOPICS, "assignment": assignment[k]}
            for m in roll_win for k in range(MEMBERS_N)], date=DAY.date())
        print(f"  hour {hour:02d} written", flush=True)
    write_rows(root, REBALANCES, CLUSTER, [
        {"group_id": GROUP, "start_ts": DAY + dt.timedelta(hours=h), "end_ts": DAY + dt.timedelta(hours=h, seconds=40),
         "duration_s": 40.0, "cause": "join", "source": "sweeps", "generation_before": 2, "generation_after": 3,
         "members_before": [], "members_after": [], "partitions_moved": 500, "bound_s": 300.0,
         "observed_over_bound": 40 / 300, "messages_accumulated": 10_000, "max_processing_gap_s": 45.0}
        for h in (3, 11, 19)])
    write_rows(root, ANOMALIES, CLUSTER, [
        {"group_id": GROUP, "topic": TOPICS[0], "partition": p, "kind": "commit_gap",
         "start_ts": DAY + dt.timedelta(hours=p % 24), "end_ts": None, "severity": "warning", "magnitude": 120.0,
         "unit": "s", "detail": "no commit for 120 s", "key": f"commit_gap|{p}"} for p in range(50)])
    (root / "COMPLETE").write_text("generated\n")


def _measure(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--regenerate", action="store_true")
    args = parser.parse_args()
    if args.regenerate or not (WORK / "COMPLETE").exists():
        print(f"generating the lake into {WORK} (once)")
        t = time.perf_counter()
        generate(WORK)
        print(f"generated in {time.perf_counter() - t:.0f} s")
    size_mb = sum(p.stat().st_size for p in WORK.rglob("*.parquet")) / 1e6

    os.environ["LAGSCOPE_UI_LAKE"] = str(WORK)
    os.environ["LAGSCOPE_UI_RESULTS"] = str(WORK)
    import logging

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from lagscope.app import MAIN_SCRIPT, data
    from lagscope.app.params import TimeRange, to_ms

    lake = data.Lake(WORK, WORK)
    window = TimeRange(DAY, DAY + dt.timedelta(days=1))

    shared = data.connect()  # the app keeps one connection (st.cache_resource)

    def data_layer(topic: str | None, fresh: bool = True) -> None:
        con = data.connect() if fresh else shared
        data.data_end(con, lake, CLUSTER)
        data.group_names(con, lake, CLUSTER, window)
        data.topics_of(con, lake, CLUSTER, GROUP, window)
        data.lag_series(con, lake, CLUSTER, GROUP, window, "rollups", topic)
        latest = data.latest_partitions(con, lake, CLUSTER, GROUP, window, topic)
        data.rebalances(con, lake, [CLUSTER], window, GROUP)
        data.anomalies(con, lake, [CLUSTER], window, GROUP, topic)
        data.members_at(con, lake, CLUSTER, GROUP, window.end)
        if topic is not None:
            worst = [(str(t), int(p)) for t, p in latest[["topic", "partition"]].head(10).itertuples(index=False)]
            data.partition_series(con, lake, CLUSTER, GROUP, window, worst)
        if fresh:
            con.close()

    query = {"page": "group", "cluster": CLUSTER, "group": GROUP, "from": str(to_ms(window.start)),
             "to": str(to_ms(window.end))}

    def render(topic: str | None, cold: bool) -> Callable[[], object]:
        def run() -> None:
            if cold:
                st.cache_data.clear()
            at = AppTest.from_file(str(MAIN_SCRIPT), default_timeout=120)
            for k, v in {**query, **({"topic": topic} if topic else {})}.items():
                at.query_params[k] = v
            at.run()
            assert not at.exception, at.exception
            assert any(m.label == "Lag (messages)" for m in at.metric)
            assert len(at.get("plotly_chart")) == 3
        return run

    logging.getLogger("streamlit").setLevel(logging.ERROR)  # "no runtime" notices of bare AppTest runs
    # pay the imports (streamlit, plotly, duckdb) once, outside the measurements
    render(None, cold=True)()

    results: list[tuple[str, float, float]] = []
    for name, fn in (("data layer, all topics (fresh connection)", lambda: data_layer(None)),
                     ("data layer, one topic (fresh connection)", lambda: data_layer(TOPICS[3])),
                     ("data layer, all topics (the app's long-lived connection)", lambda: data_layer(None, False)),
                     ("data layer, one topic (the app's long-lived connection)",
                      lambda: data_layer(TOPICS[3], False)),
                     ("AppTest Group page, all topics, cold cache", render(None, cold=True)),
                     ("AppTest Group page, one topic, cold cache", render(TOPICS[3], cold=True)),
                     ("AppTest Group page, all topics, warm cache", render(None, cold=False))):
        best, median = _measure(fn, args.repeat)
        results.append((name, best, median))
        print(f"{name:<58} best {best:6.3f} s   median {median:6.3f} s", flush=True)

    worst = max(m for _, _, m in results)
    print(f"\nlake: {size_mb:.0f} MB Parquet, {len(TOPICS) * PARTITIONS_PER_TOPIC:,} partitions x {MINUTES} minutes")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"worst median {worst:.3f} s against the {TARGET_S:.1f} s target: {'PASS' if worst <= TARGET_S else 'FAIL'}")


if __name__ == "__main__":
    main()
