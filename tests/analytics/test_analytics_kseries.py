"""The numpy enriched series (lagscope.analytics.kseries.enrich) against Spark's enrich_series on
random series over two steps (the second seeded by the first's state rows)."""

from __future__ import annotations

import numpy as np
import pytest
from analytics_builders import at
from enriched_arrays import random_cases, random_commits, series_arrays, two_steps
from pyspark.sql import SparkSession
from pyspark.sql import types as T  # noqa: N812

from lagscope.analytics.kseries import Commits, Series, enrich, starved_rows

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


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_enrich_with_the_commit_stream_matches_spark(spark: SparkSession, seed: int) -> None:
    # the same random series with commit records: some a moment after the previous one (a jump at
    # its own pace), some after their sweep. The interval's commit rate and every running value
    # built on it (a jump judged by its commit's pace is no capacity) equal the reference's
    rng = np.random.default_rng(seed)
    rows = random_cases(rng, seeks=True)
    cs = random_commits(rng, rows)
    schema = T.StructType([T.StructField("cluster", T.StringType()), T.StructField("group_id", T.StringType()),
                           T.StructField("topic", T.StringType()), T.StructField("partition", T.IntegerType()),
                           T.StructField("t", T.DoubleType()), T.StructField("seq", T.LongType()),
                           T.StructField("offset", T.LongType())])
    steps = two_steps(spark, rows, split_s=200.0, commits=spark.createDataFrame(cs, schema))
    want, keys = series_arrays(steps.enriched)
    number = {k: i for i, k in enumerate(keys)}
    known = [c for c in cs if (c["cluster"], c["group_id"], c["topic"], c["partition"]) in number]
    commits = Commits(key=np.array([number[(c["cluster"], c["group_id"], c["topic"], c["partition"])]
                                    for c in known], np.int64),
                      t=np.array([c["t"] for c in known]), offset=np.array([c["offset"] for c in known], np.int64),
                      seq=np.array([c["seq"] for c in known], np.int64))
    got = enrich(**{name: getattr(want, name) for name in _INPUTS}, commits=commits)
    assert (want.commit_rate > 0).sum() >= 5
    _assert_same(got, want)
    # some interval's verdict turned on its commit: a jump by its commit's pace, not by its own rate
    plain = enrich(**{name: getattr(want, name) for name in _INPUTS})
    assert (plain.busy_rate > 0).sum() > (got.busy_rate > 0).sum()


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
