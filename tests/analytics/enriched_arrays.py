"""Test helpers for the numpy rules: random series (two incremental steps, so carried state rows
are exercised) and Spark's enriched series as a :class:`lagscope.analytics.kseries.Series`, so
that each numpy rule can be compared with its Spark reference on the same input."""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from analytics_builders import T0, at
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812
from spark_reference import state_rows
from spark_series import KEY, enrich_series, prepare_series

from lagscope.analytics.io import spark_schema
from lagscope.analytics.kseries import Series

_LONGS = ["committed", "end", "log_start", "lag", "lso", "m_max_committed", "prev_committed", "prev_end",
          "prev_lag", "prev_log_start", "dc", "de", "max_committed_before"]


def owner_hash(owner: Any) -> int:
    """A stable 64-bit hash of a member id (0 for none), as the pass uses for ``Series.owner``."""
    if owner is None or (isinstance(owner, float) and np.isnan(owner)):
        return 0
    return zlib.crc32(str(owner).encode()) + 1


def random_cases(rng: np.random.Generator, n_keys: int = 12, n_sweeps: int = 40, *,
                 interval_s: float = 10.0, seeks: bool = False) -> list[dict[str, Any]]:
    """Offsets lake rows of ``n_keys`` partitions (3 groups) over ``n_sweeps`` sweeps: steady
    consumption, stalls (the committed offset stays), rewinds, jumps past the end (offset reset
    to latest), an end that goes down (topic re-created), retention overruns (log start past
    the committed offset), missing commits and owners, and open transactions (LSO < end).
    ``seeks``: a jump is mostly a seek to the end the sweep before knew, with a backlog again by
    the sweep (lag > 0 at both ends: the interval is busy, its advance a jump)."""
    rows: list[dict[str, Any]] = []
    for k in range(n_keys):
        group, partition = f"g{k % 3}", k
        end, committed, log_start = int(rng.integers(0, 1000)), None, 0
        prev_end = end
        owner: str | None = f"m{k % 2}"
        t = float(rng.integers(0, 30))
        for _ in range(n_sweeps):
            t += interval_s * float(rng.choice([1.0, 1.0, 1.0, 0.5, 2.0, 7.0]))
            end += int(rng.choice([0, 0, 5, 20, 100]))
            u = rng.random()
            if committed is None:
                committed = None if u < 0.3 else max(0, end - int(rng.integers(0, 50)))
            elif u < 0.45:
                committed = min(end, committed + int(rng.integers(0, 60)))  # consumes
            elif u < 0.6:
                pass  # stalls
            elif u < 0.66:
                committed = max(0, committed - int(rng.integers(1, 300)))  # rewind
            elif u < 0.70:
                if seeks and end > prev_end:
                    committed = prev_end + (end - prev_end) // 2  # seek to the end, then more produced
                else:
                    committed = end + int(rng.integers(0, 3))  # reset to latest
            elif u < 0.72:
                end = int(rng.integers(0, 50))  # topic re-created
                committed = min(committed, end)
            elif u < 0.75:
                log_start = min(end, log_start + int(rng.integers(50, 400)))  # retention
            elif u < 0.77:
                committed = None
            if rng.random() < 0.1:
                owner = None if owner is not None else f"m{int(rng.integers(0, 3))}"
            prev_end = end
            lso = end - int(rng.integers(1, 5)) if (k % 4 == 3 and rng.random() < 0.5) else end
            rows.append({
                "cluster": "c", "date": at(t).date().isoformat(), "sweep_ts": at(t), "group_id": group,
                "topic": "t", "partition": partition, "committed_offset": committed,
                "log_start_offset": log_start, "log_end_offset": end, "last_stable_offset": max(0, lso),
                "member_id": owner, "group_state": "Stable",
                "lag": None if committed is None else max(0, end - committed),
            })
    return rows


@dataclass
class TwoSteps:
    """A random lake split at ``split_t`` into two steps: ``enriched`` is the second step's
    enriched series (the first step's state rows carried in), ``series`` its prepared fresh rows,
    ``state`` the carried state rows, ``offsets`` its lake rows."""

    offsets: DataFrame
    series: DataFrame
    state: DataFrame
    enriched: DataFrame


def two_steps(spark: SparkSession, rows: list[dict[str, Any]], split_s: float,
              commits: DataFrame | None = None) -> TwoSteps:
    """``commits`` (``KEY``, ``t``, ``seq``, ``offset``): the commit stream both steps read."""
    df = spark.createDataFrame(rows, spark_schema("offsets"))
    split = at(split_s)
    first = prepare_series(df.where(F.col("sweep_ts") < F.lit(split)))
    state = state_rows(enrich_series(first, commits=commits)).localCheckpoint()
    second_off = df.where(F.col("sweep_ts") >= F.lit(split))
    second = prepare_series(second_off)
    return TwoSteps(offsets=second_off, series=second, state=state,
                    enriched=enrich_series(second, state, commits=commits))


def random_commits(rng: np.random.Generator, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Commit records for :func:`random_cases`' rows (``KEY``, ``t`` in epoch seconds, ``seq``,
    ``offset``): before most sweeps with a committed offset, the commit that wrote it, some of them
    a moment after a commit of the previous offset (an advance in a tenth of a second or less: a
    jump at its own pace), some of them a little later than the sweep (the next interval's)."""
    out: list[dict[str, Any]] = []
    last: dict[tuple[Any, ...], int | None] = {}
    for r in sorted(rows, key=lambda r: (r["group_id"], r["partition"], r["sweep_ts"])):
        k = ("c", r["group_id"], "t", r["partition"])
        c, prev = r["committed_offset"], last.get(k)
        last[k] = c
        if c is None or rng.random() < 0.2:
            continue
        t = r["sweep_ts"].timestamp() - float(rng.choice([0.05, 0.5, 2.0, -0.3]))
        if prev is not None and rng.random() < 0.5:
            out.append({"key": k, "t": t - float(rng.choice([0.01, 0.1, 1.0])), "offset": prev})
        out.append({"key": k, "t": t, "offset": int(c)})
    return [{"cluster": k[0], "group_id": k[1], "topic": k[2], "partition": k[3], "t": e["t"], "seq": i,
             "offset": e["offset"]} for i, e in enumerate(out) for k in [e["key"]]]


def series_arrays(enriched: DataFrame) -> tuple[Series, list[tuple[Any, ...]]]:
    """Spark's enriched series (:func:`lagscope.analytics.series.enrich_series`) → a
    :class:`Series` (rows by key, time order, a key's state row first) and the keys in key-number
    order (``(cluster, group_id, topic, partition)``)."""
    pdf = enriched.toPandas()
    pdf["_state_first"] = ~pdf["is_state"].astype(bool)
    pdf = pdf.sort_values([*KEY, "t", "_state_first"], kind="stable").reset_index(drop=True)
    keys = list(pdf[KEY].drop_duplicates().itertuples(index=False, name=None))
    number = {k: i for i, k in enumerate(keys)}
    key = np.array([number[k] for k in pdf[KEY].itertuples(index=False, name=None)], np.int64)
    cols: dict[str, Any] = {"key": key}
    for name in Series.__dataclass_fields__:
        if name in cols or name.endswith("_ok") or name in ("owned", "minute"):
            continue
        if name == "owner":
            cols["owner"] = np.array([owner_hash(o) for o in pdf["owner"]], np.int64)
            cols["owned"] = pdf["owner"].notna().to_numpy()
        elif name == "m_tenure_owner":
            cols[name] = np.array([owner_hash(o) for o in pdf[name]], np.int64)
            cols[f"{name}_ok"] = pdf[name].notna().to_numpy()
        elif name == "rec_t":
            cols["rec_t"] = _secs(pdf["rec_ts"])
        elif name in _LONGS:
            v = pdf[name]
            ok = v.notna().to_numpy()
            cols[name] = np.where(ok, v.fillna(0).astype("int64").to_numpy(), 0)
            cols[f"{name}_ok"] = ok
        elif name in ("is_state", "lost", "changed", "rebased", "starved"):
            cols[name] = pdf[name].fillna(False).astype(bool).to_numpy()
        elif name == "end_epoch":
            cols[name] = pdf[name].astype("int64").to_numpy()
        else:
            cols[name] = pdf[name].astype("float64").to_numpy()
    cols["minute"] = np.floor(cols["t"] / 60.0).astype(np.int64)
    return Series(**cols), keys


def _secs(ts: pd.Series) -> np.ndarray:  # type: ignore[type-arg]
    out = np.full(len(ts), np.nan)
    ok = ts.notna().to_numpy()
    if ok.any():
        vals = pd.to_datetime(ts[ok], utc=True)
        out[ok] = (vals - pd.Timestamp(T0)).dt.total_seconds().to_numpy() + T0.timestamp()
    return out
