"""The series state in numpy (lagscope.analytics.np_state) against Spark's state_rows and
compact_history on random two-step series."""

from __future__ import annotations

import numpy as np
import pytest
from enriched_arrays import owner_hash, random_cases, series_arrays, two_steps
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # noqa: N812
from spark_reference import compact_history, history_points, state_rows
from spark_series import KEY, STATE_MARKERS

from lagscope.analytics import np_state

pytestmark = pytest.mark.spark


def _f(v: object) -> float:
    return float("nan") if v is None else float(v)  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_state_rows_match_spark(spark: SparkSession, seed: int) -> None:
    # every key's last row and its markers, after a step seeded by the previous one's state
    steps = two_steps(spark, random_cases(np.random.default_rng(seed), n_keys=16), split_s=200.0)
    s, keys = series_arrays(steps.enriched)
    got = np_state.state_rows(s)
    want = {tuple(r[k] for k in KEY): r for r in state_rows(steps.enriched).collect()}
    assert len(want) == len(got.key) == len(keys)
    for i, k in enumerate(got.key):
        w = want[keys[k]]
        assert got.t[i] == pytest.approx(w["t"])
        assert owner_hash(w["owner"]) == got.owner[i]
        for m, typ in STATE_MARKERS.items():
            g = getattr(got, m)[i]
            if typ.typeName() == "string":  # an owner: its hash, ok where named
                assert bool(getattr(got, f"{m}_ok")[i]) == (w[m] is not None), m
                assert g == (owner_hash(w[m]) if w[m] is not None else 0), m
            elif typ.typeName() == "long":
                ok = getattr(got, f"{m}_ok")[i]
                assert (w[m] is None) == (not ok), m
                if ok:
                    assert g == w[m], m
            elif m != "m_commit_t":
                np.testing.assert_allclose(g, _f(w[m]), rtol=1e-12, equal_nan=True, err_msg=m)


@pytest.mark.parametrize(("seed", "newest"), [(21, 120), (22, 3), (23, 1)])
def test_compact_history_matches_spark(spark: SparkSession, seed: int, newest: int) -> None:
    # the end-offset points a next step needs: the newest history_points of those of the last
    # history epoch above the last committed offset; carried points included
    steps = two_steps(spark, random_cases(np.random.default_rng(seed), n_keys=16, n_sweeps=60), split_s=300.0)
    s, keys = series_arrays(steps.enriched)
    number = {k: i for i, k in enumerate(keys)}
    # carried points: the first step's, as a previous step would have kept them
    first_enriched = steps.enriched  # the carried history is any set of epoch-0 points of the keys
    carried = (history_points(first_enriched).where(F.col("tc") < 260).select(*KEY, "e", "tc", "tp", "ep"))
    spark_all = history_points(steps.enriched).unionByName(carried.withColumn("end_epoch", F.lit(0).cast("long")))
    want = compact_history(spark_all, steps.enriched, history_points=newest).collect()
    crows = carried.collect()
    cp = np_state.Points(
        key=np.array([number[tuple(r[k] for k in KEY)] for r in crows], np.int64),
        e=np.array([r["e"] for r in crows], np.int64), tc=np.array([r["tc"] for r in crows]),
        tp=np.array([r["tp"] for r in crows]), ep=np.array([r["ep"] for r in crows], np.int64),
        epoch=np.zeros(len(crows), np.int64))
    fresh = np_state.history_points(s)
    both = np_state.Points(*(np.concatenate([getattr(fresh, f), getattr(cp, f)])
                             for f in np_state.Points.__dataclass_fields__))
    got = np_state.compact_history(both, s, history_points=newest)
    got_rows = sorted((keys[k], int(e), round(tc, 6), round(tp, 6), int(ep))
                      for k, e, tc, tp, ep in zip(got.key, got.e, got.tc, got.tp, got.ep, strict=True))
    want_rows = sorted((tuple(r[k] for k in KEY), r["e"], round(r["tc"], 6), round(r["tp"], 6), r["ep"])
                       for r in want)
    assert got_rows == want_rows
    assert len(want_rows) > 0
