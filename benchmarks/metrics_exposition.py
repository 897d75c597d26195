"""Cost of the live /metrics endpoint for a large cluster: update, first scrape, cached scrape.

Builds synthetic Snapshots (``--groups`` groups × ``--partitions`` partitions each, 5 members
per group), feeds three successive sweeps to :class:`LagCollector` and times:

1. ``update(snapshot)``: rows → samples (plus the time-lag history);
2. the first scrape after the update: lagscope's renderer (``exposition()``), text format;
3. a second scrape of the same sweep: the cached bytes;
4. the reference: prometheus-client's generic ``generate_latest`` over the same collector
   (what a scrape would cost without the dedicated renderer and the cache).

    .venv/bin/python benchmarks/metrics_exposition.py --groups 500 --partitions 100
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import time
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest

from lagscope.collector.metrics import LagCollector
from lagscope.collector.model import Snapshot


def snapshot(k: int, groups: int, partitions: int) -> Snapshot:
    ts = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=30 * k)
    offsets: list[dict[str, Any]] = [
        {"sweep_ts": ts, "group_id": f"group-{g}", "topic": f"topic-{g % 50}", "partition": p,
         "committed_offset": 1000 * k + p, "log_end_offset": 1000 * k + p + g, "log_start_offset": 0,
         "last_stable_offset": 1000 * k + p + g, "lag": g, "lag_basis": "hw",
         "member_id": f"member-{g}-{p % 5}",
         "client_id": f"client-{g}", "host": "10.0.0.1", "group_state": "Stable"}
        for g in range(groups) for p in range(partitions)]
    members: list[dict[str, Any]] = [
        {"sweep_ts": ts, "group_id": f"group-{g}", "group_state": "Stable", "protocol_type": "consumer",
         "protocol": "range", "group_protocol": "classic", "generation": 1, "member_id": f"member-{g}-{i}",
         "client_id": f"client-{g}", "host": "10.0.0.1", "subscribed_topics": [f"topic-{g % 50}"],
         "assignment": [{"topic": f"topic-{g % 50}", "partition": p} for p in range(i, partitions, 5)]}
        for g in range(groups) for i in range(5)]
    return Snapshot("prod", {"sweep_ts": ts, "ok": True, "duration_ms": 1.0}, offsets, members)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=500)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--sweeps", type=int, default=3)
    args = ap.parse_args()
    registry = CollectorRegistry()
    collector = LagCollector(registry=registry)
    print(f"# {platform.python_version()} on {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print("| sweep | rows | update s | first scrape s | cached scrape ms | reference scrape s | body MB |")
    print("|---|---|---|---|---|---|---|")
    for k in range(args.sweeps):
        snap = snapshot(k, args.groups, args.partitions)
        t = time.perf_counter()
        collector.update(snap)
        t_update = time.perf_counter() - t
        t = time.perf_counter()
        body = collector.exposition()
        t_first = time.perf_counter() - t
        t = time.perf_counter()
        collector.exposition()
        t_cached = time.perf_counter() - t
        t = time.perf_counter()
        generate_latest(registry)
        t_ref = time.perf_counter() - t
        print(f"| {k + 1} | {len(snap.offsets)} | {t_update:.2f} | {t_first:.2f} | {t_cached * 1000:.2f} | "
              f"{t_ref:.2f} | {len(body) / 1e6:.1f} |")


if __name__ == "__main__":
    main()
