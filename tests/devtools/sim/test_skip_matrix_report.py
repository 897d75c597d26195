"""The skip matrix's report (benchmarks/analytics_accuracy.py, ``matrix_lines``): recall and the
targets count only the skips offsets can prove (score.skip_bounds, from the truth), whatever the
cell's label; the others are counted apart with what was found of them. Pure Python."""

from __future__ import annotations

from helpers.benchmarks import load_benchmark

from lagscope.devtools.sim import truth
from lagscope.devtools.sim.score import Finding, skip_bounds
from lagscope.devtools.sim.truth import Commit, Fault, Produce

T, G = "t", "sim-x-1-g"


def _truth(*, lag: bool) -> list[truth.Record]:
    """One partition written at 20/s from 100 s; c1 processes 10/s (``lag``: its backlog grows, so
    its commit intervals show its pace) or keeps up; at 110 s a burst of 500 lands and c1 seeks to
    the end and commits it."""
    recs: list[truth.Record] = [Produce(T, 0, i, 100.0 + i / 20) for i in range(200)]
    done = 0.0
    for k in range(1, 20):
        t = 100.0 + k * 0.5
        done = min(done + 5.0, 20.0 * (t - 100.0)) if lag else 20.0 * (t - 100.0)
        recs.append(Commit(G, "c1", T, 0, int(done), t))
    recs += [Produce(T, 0, 200 + i, 109.95) for i in range(500)]
    processed = int(done)
    recs.append(Commit(G, "c1", T, 0, 700, 110.0))
    recs.append(Fault("skip", G, "c1", 110.0, 110.0,
                      {"mechanism": "seek", "size": 500, "partitions": "one", "state": "lagging",
                       "processed": {f"{T}:0": processed}, "after": {f"{T}:0": 700},
                       "skipped": {f"{T}:0": 700 - processed}}, ((T, 0),)))
    return recs


def test_recall_counts_the_provable_skips_and_the_others_apart() -> None:
    load_benchmark("rebalance_accuracy")  # analytics_accuracy imports it by name
    aa = load_benchmark("analytics_accuracy")
    runs = []
    for seed, lag in ((1, True), (2, False)):
        ti = truth.TruthIndex(_truth(lag=lag))
        run = aa.MatrixRun("skip-matrix-x", seed, "sim-x-1", ti.faults(), bounds=skip_bounds(ti, 5.0))
        # the analysis found the skip of the lagging run only
        run.findings["stream"] = ([Finding("skip", G, T, 0, 110.0, 110.0, "critical", "", 600.0, "seek")]
                                  if lag else [])
        runs.append(run)
    reasons = [b.reason for r in runs for b in r.bounds.values()]
    assert reasons == ["beyond the bound", "no pace"]
    lines = aa.matrix_lines(runs, "stream", 0.5)
    (row,) = [ln for ln in lines if ln.startswith("| seek | 500 | one | lagging |")]
    cols = [c.strip() for c in row.strip("|").split("|")]
    # skips, partitions, found, recall: the provable one only; evidence; the other apart, not found
    assert (cols[4], cols[6], cols[7], cols[8]) == ("1", "1", "1", "1.00")
    assert cols[16] == "beyond the bound 1, no pace 1"
    assert cols[17] == "1 (0)"
    (by_size,) = [ln for ln in lines if ln.startswith("| 500 | seek |")]
    cols = [c.strip() for c in by_size.strip("|").split("|")]
    assert (cols[2], cols[3], cols[4], cols[5], cols[10]) == ("1", "1", "1", "1.00", "met")
    assert cols[11] == "1 (0)"
