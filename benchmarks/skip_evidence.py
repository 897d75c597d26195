"""What the skip rule saw, per skip of a kept skip-matrix run (``analytics_accuracy.py --matrix --keep``):
for each partition a skip of the truth left messages unprocessed on, the advance the per-partition
pass handed to the per-group skip rule (its span, the advance, the partition's own capacity before
it), the group's capacity before the advance (the step's capacities, each partition's as it was
strictly before the advance, summed over the group's partitions: the bound ``skips.skip_rows``
uses for an out-of-range reset, and an upper bound of a member's for a seek) and whether a
``skip`` finding came of it. One analytics step as the benchmark runs it, with the commit stream.

    .venv/bin/python benchmarks/skip_evidence.py KEPT/seed-1 skip-matrix-seek [--one]

Prints a Markdown table (``--one``: the skips of one partition only). The capture wraps
``lagscope.analytics.groups.group_pass`` to read its inputs; nothing else changes.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import analytics_accuracy as aa

import lagscope.analytics.step as steps
from lagscope.config import AnalyticsRulesConfig


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", type=Path, help="a kept seed folder (KEPT/seed-N)")
    ap.add_argument("scenario")
    ap.add_argument("--one", action="store_true", help="only the skips of one partition")
    args = ap.parse_args()
    seen: dict[str, Any] = {}
    original = steps.groups.group_pass

    def capture(inp: Any, settings: Any) -> Any:
        seen["adv"] = inp.advances.to_pylist() if inp.advances is not None else []
        seen["cap"] = inp.capacities.to_pylist() if inp.capacities is not None else []
        return original(inp, settings)

    steps.groups.group_pass = capture  # type: ignore[assignment]
    rules = AnalyticsRulesConfig(stall_after_s=5.0, stop_after_s=5.0, gap_min_s=1.0, gap_mad_floor_s=0.2, gap_k=4,
                                 growth_min_minutes=5, warn_lag_s=5.0)
    timeouts = {"session_timeout_s": 3.0, "heartbeat_s": 0.5, "network_s": 0.5, "rebalance_timeout_s": 3.0}
    base = args.root / args.scenario
    t0, end = aa.scenario_window(args.scenario, base / "out" / "truth.jsonl")
    got = aa.analyse({args.scenario: (base / "lake", end)}, rules, timeouts, lag=False)
    found = [(a["group_id"], a["topic"], a["partition"], a["start_ts"].timestamp()) for a in got["anomalies"]
             if a["kind"] == "skip"]
    def capacity(group: str, before: float) -> float:
        """The group's summed capacity strictly before ``before`` (each partition's latest row)."""
        last: dict[tuple[str, int], tuple[float, float]] = {}
        for r in seen["cap"]:
            k = (r["topic"], r["partition"])
            if r["group_id"] == group and r["t"] < before and r["t"] >= last.get(k, (-1e18, 0.0))[0]:
                last[k] = (r["t"], float(r["capacity"] or 0.0))
        return sum(v for _, v in last.values())

    print("| group | skip at s | size | spread | partition | lost (truth) | advance seen | span s | own capacity "
          "before /s | group capacity before /s | 5 × it × span | found |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for line in (base / "out" / "truth.jsonl").read_text().splitlines():
        f = json.loads(line)
        if f.get("type") != "fault" or f["kind"] != "skip" or (args.one and f["detail"].get("partitions") != "one"):
            continue
        g = f["group"]
        for k, n in (f["detail"].get("skipped") or {}).items():
            if n <= 0:
                continue
            topic, p = k.rsplit(":", 1)
            near = [a for a in seen["adv"] if a["group_id"] == g and a["topic"] == topic and a["partition"] == int(p)
                    and abs(a["end_t"] - f["end"]) < 1.5]
            a = min(near, key=lambda a: abs(a["end_t"] - f["end"]), default=None)
            hit = any(x[:3] == (g, topic, int(p)) and abs(x[3] - f["end"]) < 2 for x in found)
            cap = capacity(g, a["end_t"] if a is not None else f["end"])
            head = (f"| {g.split('-', 4)[-1]} | {f['start'] - t0:.1f} | {f['detail'].get('size')} | "
                    f"{f['detail'].get('partitions')} | {p} | {n} |")
            if a is None:
                print(f"{head} none kept | | | {cap:.0f} | | {'yes' if hit else 'no'} |")
                continue
            span = a["end_t"] - a["start_t"]
            print(f"{head} {a['advance']} | {span:.3f} | {a['capacity']:.0f} | {cap:.0f} | {5 * cap * span:.0f} | "
                  f"{'yes' if hit else 'no'} |")


if __name__ == "__main__":
    main()
