"""Cached access to the lake for the pages: ``st.cache_resource`` for the DuckDB client,
``st.cache_data(ttl=…)`` for query results (keyed by the lake paths and the selection).

The app is read-only: it opens the lake's Parquet files and nothing else. Where it reads
comes from the environment that ``lagscope ui`` sets:

- ``LAGSCOPE_UI_LAKE``: the sample lake root (default ``.lagscope/lake``)
- ``LAGSCOPE_UI_RESULTS``: the result tables root (default: ``results`` beside the lake)
- ``LAGSCOPE_UI_STORAGE``: the ``storage`` section (JSON) for a root that is an ``s3://`` URL,
  whose credentials the AWS SDK finds in the environment as configured (never in this variable)
"""

from __future__ import annotations

import datetime as dt
import functools
import os
from pathlib import Path

import duckdb
import pandas as pd
import streamlit as st

from lagscope.app import DEFAULT_LAKE, ENV_LAKE, ENV_RESULTS, ENV_STORAGE, data
from lagscope.app.params import TimeRange
from lagscope.config import StorageConfig, resolve_results_root
from lagscope.storage import Store, is_object_url, open_store

__all__ = [
    "CACHE_TTL_S",
    "DEFAULT_LAKE",
    "ENV_LAKE",
    "ENV_RESULTS",
    "advice",
    "anomalies",
    "clusters",
    "commit_history",
    "current_lake",
    "data_end",
    "delivery",
    "group_names",
    "group_overview",
    "lag_series",
    "latest_partitions",
    "members_at",
    "members_between",
    "offsets_between",
    "partition_series",
    "rebalances",
    "topics_of",
]


#: seconds a query result is reused: the collector sweeps every few seconds, the analytics
#: run every minute or so, so a minute-old answer is as fresh as the results themselves
CACHE_TTL_S = 60


def current_lake() -> data.Lake:
    samples = os.environ.get(ENV_LAKE) or str(DEFAULT_LAKE)
    results = os.environ.get(ENV_RESULTS) or str(resolve_results_root(None, samples))
    return _lake(samples, results)


@functools.lru_cache(maxsize=8)
def _root(where: str) -> Path | Store:
    """A root of the app: a local folder, or the store of an ``s3://`` URL opened with the
    ``storage`` section of ``LAGSCOPE_UI_STORAGE`` (opened once per process)."""
    if not is_object_url(where):
        return Path(where)
    return open_store(where, StorageConfig.model_validate_json(os.environ.get(ENV_STORAGE) or "{}"))


def _name(root: Path | Store) -> str:
    return root.url if isinstance(root, Store) else str(root)


@st.cache_resource
def _connection() -> duckdb.DuckDBPyConnection:
    return data.connect()


def _lake(samples: str, results: str) -> data.Lake:
    return data.Lake(_root(samples), _root(results))


def _key(lake: data.Lake) -> tuple[str, str]:
    return _name(lake.samples), _name(lake.results)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _clusters(samples: str, results: str) -> list[str]:
    names: list[str] = data.clusters(_lake(samples, results))
    return names


def clusters(lake: data.Lake) -> list[str]:
    return _clusters(*_key(lake))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _data_end(samples: str, results: str, cluster: str | None) -> dt.datetime | None:
    end: dt.datetime | None = data.data_end(_connection(), _lake(samples, results), cluster)
    return end


def data_end(lake: data.Lake, cluster: str | None) -> dt.datetime | None:
    return _data_end(*_key(lake), cluster)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _group_names(samples: str, results: str, cluster: str, start: dt.datetime, end: dt.datetime) -> list[str]:
    names: list[str] = data.group_names(_connection(), _lake(samples, results), cluster, TimeRange(start, end))
    return names


def group_names(lake: data.Lake, cluster: str, window: TimeRange) -> list[str]:
    return _group_names(*_key(lake), cluster, window.start, window.end)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _topics_of(samples: str, results: str, cluster: str, group: str, start: dt.datetime,
               end: dt.datetime) -> list[str]:
    names: list[str] = data.topics_of(_connection(), _lake(samples, results), cluster, group,
                                      TimeRange(start, end))
    return names


def topics_of(lake: data.Lake, cluster: str, group: str, window: TimeRange) -> list[str]:
    return _topics_of(*_key(lake), cluster, group, window.start, window.end)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _group_overview(samples: str, results: str, clusters_: tuple[str, ...], start: dt.datetime,
                    end: dt.datetime) -> pd.DataFrame:
    return data.group_overview(_connection(), _lake(samples, results), clusters_, TimeRange(start, end))


def group_overview(lake: data.Lake, clusters_: list[str], window: TimeRange) -> pd.DataFrame:
    return _group_overview(*_key(lake), tuple(clusters_), window.start, window.end)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _advice(samples: str, results: str, cluster: str, group: str) -> pd.DataFrame:
    return data.advice(_lake(samples, results), cluster, group)


def advice(lake: data.Lake, cluster: str, group: str) -> pd.DataFrame:
    return _advice(*_key(lake), cluster, group)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _rebalances(samples: str, results: str, clusters_: tuple[str, ...], start: dt.datetime, end: dt.datetime,
                group: str | None) -> pd.DataFrame:
    return data.rebalances(_connection(), _lake(samples, results), clusters_, TimeRange(start, end), group)


def rebalances(lake: data.Lake, clusters_: list[str], window: TimeRange, group: str | None = None) -> pd.DataFrame:
    return _rebalances(*_key(lake), tuple(clusters_), window.start, window.end, group)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _anomalies(samples: str, results: str, clusters_: tuple[str, ...], start: dt.datetime, end: dt.datetime,
               group: str | None, topic: str | None, partition: int | None) -> pd.DataFrame:
    return data.anomalies(_connection(), _lake(samples, results), clusters_, TimeRange(start, end), group,
                          topic, partition)


def anomalies(lake: data.Lake, clusters_: list[str], window: TimeRange, group: str | None = None,
              topic: str | None = None, partition: int | None = None) -> pd.DataFrame:
    return _anomalies(*_key(lake), tuple(clusters_), window.start, window.end, group, topic, partition)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _delivery(samples: str, results: str, clusters_: tuple[str, ...], start: dt.datetime, end: dt.datetime,
              group: str | None, topic: str | None) -> pd.DataFrame:
    return data.delivery(_connection(), _lake(samples, results), clusters_, TimeRange(start, end), group, topic)


def delivery(lake: data.Lake, clusters_: list[str], window: TimeRange, group: str | None = None,
             topic: str | None = None) -> pd.DataFrame:
    return _delivery(*_key(lake), tuple(clusters_), window.start, window.end, group, topic)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _lag_series(samples: str, results: str, cluster: str, group: str, start: dt.datetime, end: dt.datetime,
                level: str, topic: str | None) -> pd.DataFrame:
    return data.lag_series(_connection(), _lake(samples, results), cluster, group, TimeRange(start, end),
                           level, topic)


def lag_series(lake: data.Lake, cluster: str, group: str, window: TimeRange, level: str = "group",
               topic: str | None = None) -> pd.DataFrame:
    return _lag_series(*_key(lake), cluster, group, window.start, window.end, level, topic)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _latest_partitions(samples: str, results: str, cluster: str, group: str, start: dt.datetime,
                       end: dt.datetime, topic: str | None) -> pd.DataFrame:
    return data.latest_partitions(_connection(), _lake(samples, results), cluster, group, TimeRange(start, end),
                                  topic)


def latest_partitions(lake: data.Lake, cluster: str, group: str, window: TimeRange,
                      topic: str | None = None) -> pd.DataFrame:
    return _latest_partitions(*_key(lake), cluster, group, window.start, window.end, topic)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _partition_series(samples: str, results: str, cluster: str, group: str, start: dt.datetime, end: dt.datetime,
                      partitions: tuple[tuple[str, int], ...]) -> pd.DataFrame:
    return data.partition_series(_connection(), _lake(samples, results), cluster, group, TimeRange(start, end),
                                 partitions)


def partition_series(lake: data.Lake, cluster: str, group: str, window: TimeRange,
                     partitions: list[tuple[str, int]]) -> pd.DataFrame:
    return _partition_series(*_key(lake), cluster, group, window.start, window.end, tuple(partitions))


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _members_at(samples: str, results: str, cluster: str, group: str, when: dt.datetime) -> pd.DataFrame:
    return data.members_at(_connection(), _lake(samples, results), cluster, group, when)


def members_at(lake: data.Lake, cluster: str, group: str, when: dt.datetime) -> pd.DataFrame:
    return _members_at(*_key(lake), cluster, group, when)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _members_between(samples: str, results: str, cluster: str, group: str, start: dt.datetime,
                     end: dt.datetime) -> pd.DataFrame:
    return data.members_between(_connection(), _lake(samples, results), cluster, group, TimeRange(start, end))


def members_between(lake: data.Lake, cluster: str, group: str, window: TimeRange) -> pd.DataFrame:
    return _members_between(*_key(lake), cluster, group, window.start, window.end)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _offsets_between(samples: str, results: str, cluster: str, group: str, start: dt.datetime, end: dt.datetime,
                     topic: str | None, partition: int | None) -> pd.DataFrame:
    return data.offsets_between(_connection(), _lake(samples, results), cluster, group, TimeRange(start, end),
                                topic, partition)


def offsets_between(lake: data.Lake, cluster: str, group: str, window: TimeRange, topic: str | None = None,
                    partition: int | None = None) -> pd.DataFrame:
    return _offsets_between(*_key(lake), cluster, group, window.start, window.end, topic, partition)


@st.cache_data(ttl=CACHE_TTL_S, show_spinner=False)
def _commit_history(samples: str, results: str, cluster: str, group: str, start: dt.datetime, end: dt.datetime,
                    topic: str | None, partition: int | None) -> tuple[pd.DataFrame, str]:
    out: tuple[pd.DataFrame, str] = data.commit_history(_connection(), _lake(samples, results), cluster, group,
                                                        TimeRange(start, end), topic, partition)
    return out


def commit_history(lake: data.Lake, cluster: str, group: str, window: TimeRange, topic: str | None = None,
                   partition: int | None = None) -> tuple[pd.DataFrame, str]:
    return _commit_history(*_key(lake), cluster, group, window.start, window.end, topic, partition)
