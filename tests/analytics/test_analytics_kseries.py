"""The numpy enriched series (lagscope.analytics.kseries.enrich) against Spark's enrich_series on
random series over two steps (the second seeded by the first's state rows)."""

from __future__ import annotations

import numpy as np
import pytest
from analytics_builders import at
from enriched_arrays import random_cases, series_arrays, two_steps
from pyspark.sql import SparkSession

from lagscope.analytics.kseries import Series, enrich, starved_rows

pytestmark = pytest.mark.spark

_INPUTS = ["key", "is_state", "t", "committed", "committed_ok", "end", "end_ok", "log_start", "log_start_ok",
           "lso", "lso_ok", "owner", "owned", "rec_t", "starved", "m_change_t", "m_pending_t", "m_max_rate",
           "m_sat_rate", "m_rate",
           "m_ret_t", "m_end_t", "m_max_committed", "m_max_committed_ok", "m_commit_t", "m_alive_t", "m_drop_t",
           "m_owned_t", "m_tenure_t", "m_change_takeover", "m_tenure_owner", "m_tenure_owner_ok"]


def _assert_same(got: Series, want: Series) -> None:
    for name in Series.__dataclass_fields__:
        a, b = getattr(got, name), getattr(want, name)
        ok = getattr(want, f"{name}_ok", None)
        if ok is not None:  # a null long's value is unspecified
            a, b = np.where(ok, a, 0), np.where(ok, b, 0)
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-12, equal_nan=True, err_msg=name)
        else:
            np.testing.assert_array_equal(a, b, err_msg=name)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_enrich_matches_spark(spark: SparkSession, seed: int) -> None:
    # random series with stalls, rewinds, resets, re-created topics, retention overruns, missing
    # commits and owners, split into two steps: every running value, seeded by the state rows
    rng = np.random.default_rng(seed)
    steps = two_steps(spark, random_cases(rng), split_s=200.0)
    want, _ = series_arrays(steps.enriched)
    got = enrich(**{name: getattr(want, name) for name in _INPUTS})
    _assert_same(got, want)


def test_enrich_first_step_without_state(spark: SparkSession) -> None:
    # a first step (no state rows) is the same computation from every key's first sweep
    rng = np.random.default_rng(9)
    steps = two_steps(spark, random_cases(rng, n_keys=6), split_s=-1e9)
    want, _ = series_arrays(steps.enriched)
    assert not want.is_state.any()
    _assert_same(enrich(**{name: getattr(want, name) for name in _INPUTS}), want)


@pytest.mark.parametrize("seed", [5, 6])
def test_starved_rows_match_spark_where_an_owners_partitions_share_their_sweeps(spark: SparkSession,
                                                                                seed: int) -> None:
    # the random series swept at shared times (a sweep reads every partition of a group at once):
    # two keys of a group share an owner (m0 or m1), so one's fast advance starves the other's
    # interval. The step's flags (kseries.starved_rows over the group's rows) equal the Spark
    # reference's window, and enrich with them every running value
    rows = random_cases(np.random.default_rng(seed))
    n: dict[int, int] = {}
    for r in rows:
        i = n[r["partition"]] = n.get(r["partition"], -1) + 1
        r["sweep_ts"] = at(10.0 * i)
        r["date"] = r["sweep_ts"].date().isoformat()
    steps = two_steps(spark, rows, split_s=200.0)
    want, keys = series_arrays(steps.enriched)
    assert want.starved.sum() >= 3
    code = {g: i for i, g in enumerate(sorted({k[:2] for k in keys}))}
    group = np.array([code[keys[k][:2]] for k in want.key], np.int64)
    got = starved_rows(want.key, group, want.is_state, want.t, want.committed, want.committed_ok, want.owner,
                       want.owned)
    np.testing.assert_array_equal(got, want.starved)
    _assert_same(enrich(**{name: getattr(want, name) for name in _INPUTS}), want)
