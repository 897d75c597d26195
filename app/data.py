"""Queries of the drill-down app: the sample lake and the result tables through DuckDB.

Pure functions: a connection, a :class:`Lake` and the selection in, a new pandas DataFrame
out. Nothing here knows about Streamlit (the cached wrappers are in :mod:`.store`), so the
benchmarks and the tests call these directly.

A root on an object store (a :class:`~lagscope.storage.Store` of ``s3://bucket/prefix``): the same
partition folders are chosen and the same live files listed (the committed lake files,
:func:`lagscope.lake.object_files`; the visible result files, :func:`lagscope.results.object_files`),
read through the store's pyarrow filesystem into one Arrow table per scan
(:func:`lagscope.lake.read_objects`, which checks footers and quarantines like a local read), and
the same SQL runs over that table (DuckDB queries an Arrow table in place; no httpfs). The
filters are then applied after the read, not pushed into it.

Efficiency: the partition folders to read (``<table>/cluster=<c>/date=<d>``) are chosen here,
from the cluster and the dates of the time range, so no other folder is even listed, and
their live files are listed by the core (:func:`lagscope.lake.list_files` for the sample lake,
:func:`lagscope.results.list_files` for the result tables: no compacted source twice, no half
published analytics step); the remaining filters (group, topic, partition, time) are SQL
predicates with bound parameters, which DuckDB pushes into the Parquet scan (row-group
statistics). SQL text is never built from values: only from the fixed column lists below.

    >>> lake = Lake(Path("lake"), Path("results"))             # doctest: +SKIP
    >>> lag_series(connect(), lake, "prod", "orders", window)  # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from lagscope import delivery as accounting
from lagscope import lake as sample_lake
from lagscope import results as result_tables
from lagscope.app.params import TimeRange
from lagscope.errors import LakeError
from lagscope.schema import RESULT_TABLES, TABLES
from lagscope.storage import Store

__all__ = [
    "Lake",
    "advice",
    "anomalies",
    "clusters",
    "commit_history",
    "connect",
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

#: how far before a range's start to look for rebalances and anomalies that began earlier
#: and are still open (they live in the date partition of their start)
EVENT_LOOKBACK = dt.timedelta(days=1)


@dataclass(frozen=True)
class Lake:
    """Where the app reads: the sample lake (collector) and the result tables (analytics)."""

    samples: Path | Store
    results: Path | Store

    def root_of(self, table: str) -> Path | Store:
        return self.results if table in RESULT_TABLES else self.samples

    def files(self, table: str, clusters: Iterable[str], dates: Iterable[dt.date]) -> list[str]:
        """The live files of ``table`` in the given cluster and date partitions (dates: a
        contiguous range, as :meth:`TimeRange.dates` gives)."""
        days = sorted(dates)
        names = list(clusters)
        if not days or not names:
            return []
        root = self.root_of(table)
        if isinstance(root, Store):
            return _object_files(root, table, names, days)
        for _ in range(_LIST_ATTEMPTS):
            if table in RESULT_TABLES:
                paths = result_tables.list_files(root, table, cluster=names, since=days[0], until=days[-1])
            else:
                paths = sample_lake.list_files(root, table, cluster=names, since=days[0], until=days[-1])
            try:  # unreadable footers go into quarantine (lagscope.lake.check_files)
                return [str(c.path) for c in sample_lake.check_files(paths)[0]]
            except FileNotFoundError:
                continue  # replaced since the listing (compaction, a batch): list again
        return [str(p) for p in paths]


class _Objects(list[str]):
    """The files of one scan of a root on an object store (URLs), and where they are: bound where a
    local scan binds its file list, read into Arrow by :func:`_run`."""

    def __init__(self, urls: Iterable[str], store: Store, table: str, relist: Callable[[], list[str]]) -> None:
        super().__init__(urls)
        self.store = store
        self.table = table
        self._relist = relist

    def arrow(self) -> pa.Table:
        """The files' rows (with ``cluster`` and ``date``), read through the store's filesystem; one
        that cannot be read is quarantined and left out, and the files are listed again when one
        was replaced since (:func:`lagscope.lake.read_objects`)."""
        prefix = self.store.url.rstrip("/") + "/"
        listed = [list(self)]

        def listing() -> list[str]:
            urls = listed.pop() if listed else self._relist()
            return [u.removeprefix(prefix) for u in urls]

        return sample_lake.read_objects(listing, self.store, self.table)


def _object_files(store: Store, table: str, clusters_: list[str], days: list[dt.date]) -> _Objects:
    """:meth:`Lake.files` of a root on an object store: the committed live lake files or the
    visible result files, as URLs."""
    lister = result_tables.object_files if table in RESULT_TABLES else sample_lake.object_files

    def relist() -> list[str]:
        return lister(store, table, cluster=clusters_, since=days[0], until=days[-1])

    return _Objects(relist(), store, table, relist)


def _date_folders(root: Path | Store, table: str, cluster: str) -> list[dt.date]:
    """The dates of ``table``'s partitions of ``cluster``, oldest first (local or object store)."""
    if isinstance(root, Store):
        names = [f.rpartition("/")[2] for f in sample_lake.object_date_folders(root, table, cluster, None, None)]
    else:
        names = [f.name for f in sample_lake.date_folders(root, table, cluster=cluster)]
    return sorted(dt.date.fromisoformat(n.removeprefix("date=")) for n in names)


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection that reads UTC timestamps as UTC."""
    con = duckdb.connect(":memory:", config={"threads": 2})
    con.execute("SET TimeZone = 'UTC'")
    return con


def clusters(lake: Lake) -> list[str]:
    """Clusters that have data in any table, sorted."""
    names: set[str] = set()
    for table in TABLES:
        root = lake.root_of(table)
        if isinstance(root, Store):
            names.update(n.removeprefix("cluster=") for n in root.folders(table) if n.startswith("cluster="))
            continue
        base = root / table
        if base.is_dir():
            names.update(p.name.removeprefix("cluster=") for p in base.glob("cluster=*") if p.is_dir())
    return sorted(names)


def _dates_between(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def _scan(lake: Lake, table: str, clusters_: Sequence[str], dates: Iterable[dt.date]) -> tuple[str, list[str]] | None:
    """``read_parquet(?)`` over the chosen partition files, or None when there are none.

    The file list is a bound parameter; ``cluster`` and ``date`` come from the path.
    """
    files = lake.files(table, clusters_, dates)
    if not files:
        return None
    return (f"{_SCAN_HEAD}?{_SCAN_TAIL}", files)


def _empty(table: str, extra: Sequence[str] = ()) -> pd.DataFrame:
    names = [*TABLES[table].schema.names, "cluster", *extra]
    return pd.DataFrame({n: pd.Series(dtype="object") for n in names})


#: how often a query is run again after quarantining a file it failed on, or lists again
_LIST_ATTEMPTS = 5


def _query(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> pd.DataFrame:
    """Run a query; a file of its lists (``read_parquet(?)``) that fails past its footer goes
    into quarantine (:func:`lagscope.lake.quarantine_unreadable`) and the query runs without it."""
    params = list(params)
    for _ in range(_LIST_ATTEMPTS):
        try:
            return _run(con, sql, params)
        except duckdb.Error as exc:
            # an object store's files are read (and quarantined when unreadable) before the query
            lists = [i for i, p in enumerate(params) if isinstance(p, list) and p and not isinstance(p, _Objects)]
            moved = sample_lake.quarantine_unreadable([f for i in lists for f in params[i]], exc)
            if not moved:
                raise
            gone = {str(q.path) for q in moved}
            for i in lists:
                params[i] = [f for f in params[i] if f not in gone]
                if not params[i]:
                    raise LakeError(f"every file the query reads was unreadable and is in quarantine: "
                                    f"{', '.join(sorted(gone))}") from exc
    return _run(con, sql, params)


#: the scan of :func:`_scan` after its ``?`` (the file list)
_SCAN_HEAD = "read_parquet("
_SCAN_TAIL = ", hive_partitioning = true, union_by_name = true, hive_types = {'cluster': VARCHAR, 'date': VARCHAR})"


def _bind_objects(cur: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> tuple[str, list[Any]]:
    """``sql`` and ``params`` with each scan of an object store's files (:class:`_Objects`)
    replaced by an Arrow table registered on ``cur`` (``read_parquet(?, …)`` → its name, the file
    list dropped from the parameters). The SQL text of the queries has no ``?`` in literals: the
    ``n``-th ``?`` is the ``n``-th parameter."""
    pieces = sql.split("?")
    if len(pieces) != len(params) + 1:
        raise LakeError(f"a query has {len(pieces) - 1} placeholders for {len(params)} parameters")
    out, bound = [pieces[0]], []
    for i, value in enumerate(params):
        after = pieces[i + 1]
        if isinstance(value, _Objects):
            if not (out[-1].endswith(_SCAN_HEAD) and after.startswith(_SCAN_TAIL)):
                raise LakeError("an object store's file list is bound outside a read_parquet scan")
            name = f"objects_{i}"
            cur.register(name, value.arrow())
            out[-1] = out[-1].removesuffix(_SCAN_HEAD)
            out.append(name + after.removeprefix(_SCAN_TAIL))
            continue
        out.append("?" + after)
        bound.append(value)
    return "".join(out), bound


def _run(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any]) -> pd.DataFrame:
    cur = con.cursor()  # one cursor per call: Streamlit sessions run in threads
    try:
        if any(isinstance(p, _Objects) for p in params):
            sql, params = _bind_objects(cur, sql, params)
        relation = cur.sql(sql, params=list(params))
        assert relation is not None  # a SELECT always has a result
        frame: pd.DataFrame = relation.to_arrow_table().to_pandas()
        return frame
    finally:
        cur.close()


def data_end(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str | None) -> dt.datetime | None:
    """The newest timestamp of the cluster's data (status, lag trends or offsets), or None."""
    cluster_list = [cluster] if cluster else clusters(lake)
    newest: dt.datetime | None = None
    for table, column in (("lag_trends", "window_start"), ("status", "eval_ts"), ("offsets", "sweep_ts")):
        for c in cluster_list:
            dates = _date_folders(lake.root_of(table), table, c)
            if not dates:
                continue
            scan = _scan(lake, table, [c], [dates[-1]])
            if scan is None:
                continue
            df = _query(con, f"SELECT max({column}) AS ts FROM {scan[0]}", [scan[1]])  # noqa: S608
            value = df["ts"].iloc[0]
            if pd.notna(value):
                ts = pd.Timestamp(value).to_pydatetime()
                newest = ts if newest is None or ts > newest else newest
    return newest


def group_names(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, window: TimeRange) -> list[str]:
    """Groups with status or lag results (or samples) in the window, sorted."""
    names: set[str] = set()
    for table, column in (("status", "eval_ts"), ("lag_trends", "window_start"), ("members", "sweep_ts")):
        scan = _scan(lake, table, [cluster], window.dates())
        if scan is None:
            continue
        df = _query(con, f"SELECT DISTINCT group_id FROM {scan[0]} WHERE {column} >= ? AND {column} < ?",  # noqa: S608
                    [scan[1], window.start, window.end])
        names.update(df["group_id"].tolist())
        if names:
            break
    return sorted(names)


def topics_of(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str, window: TimeRange) -> list[str]:
    """Topics of the group's topic-level lag rows in the window, sorted."""
    scan = _scan(lake, "lag_trends", [cluster], window.dates())
    if scan is None:
        return []
    df = _query(con, f"SELECT DISTINCT topic FROM {scan[0]} WHERE group_id = ? AND topic IS NOT NULL "  # noqa: S608
                     "AND partition IS NULL AND window_start >= ? AND window_start < ? ORDER BY topic",
                [scan[1], group, window.start, window.end])
    return [str(t) for t in df["topic"]]


def group_overview(con: duckdb.DuckDBPyConnection, lake: Lake, clusters_: Sequence[str],
                   window: TimeRange) -> pd.DataFrame:
    """One row per (cluster, group): the latest group-level status in the window, the worst
    lag in seconds and messages in the window (group-level lag trend rows).

    Columns: cluster, group_id, status, burrow_status, reason, eval_ts, lag, lag_seconds,
    worst_lag_seconds, worst_lag. Sorted worst first (status severity, then lag in seconds).
    """
    status_scan = _scan(lake, "status", clusters_, window.dates())
    trend_scan = _scan(lake, "lag_trends", clusters_, window.dates())
    cols = ["cluster", "group_id", "status", "burrow_status", "reason", "eval_ts", "lag", "lag_seconds",
            "worst_lag_seconds", "worst_lag"]
    if status_scan is None and trend_scan is None:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    parts: list[str] = []
    params: list[Any] = []
    if status_scan is not None:
        parts.append(f"""s AS (
            SELECT cluster, group_id, status, burrow_status, reason, eval_ts, lag, lag_seconds
            FROM {status_scan[0]}
            WHERE topic IS NULL AND partition IS NULL AND eval_ts >= ? AND eval_ts < ?
            QUALIFY row_number() OVER (PARTITION BY cluster, group_id ORDER BY eval_ts DESC) = 1)""")  # noqa: S608
        params += [status_scan[1], window.start, window.end]
    else:
        parts.append("""s AS (SELECT NULL::VARCHAR AS cluster, NULL::VARCHAR AS group_id, NULL::VARCHAR AS status,
            NULL::VARCHAR AS burrow_status, NULL::VARCHAR AS reason, NULL::TIMESTAMPTZ AS eval_ts,
            NULL::BIGINT AS lag, NULL::DOUBLE AS lag_seconds WHERE false)""")
    if trend_scan is not None:
        parts.append(f"""t AS (
            SELECT cluster, group_id, max(lag_seconds) AS worst_lag_seconds, max(lag_max) AS worst_lag
            FROM {trend_scan[0]}
            WHERE topic IS NULL AND partition IS NULL AND window_start >= ? AND window_start < ?
            GROUP BY cluster, group_id)""")  # noqa: S608
        params += [trend_scan[1], window.start, window.end]
    else:
        parts.append("""t AS (SELECT NULL::VARCHAR AS cluster, NULL::VARCHAR AS group_id,
            NULL::DOUBLE AS worst_lag_seconds, NULL::BIGINT AS worst_lag WHERE false)""")
    sql = f"""WITH {", ".join(parts)}
        SELECT coalesce(s.cluster, t.cluster) AS cluster, coalesce(s.group_id, t.group_id) AS group_id,
               s.status, s.burrow_status, s.reason, s.eval_ts, s.lag, s.lag_seconds,
               t.worst_lag_seconds, t.worst_lag
        FROM s FULL OUTER JOIN t ON s.cluster = t.cluster AND s.group_id = t.group_id
        ORDER BY CASE s.status WHEN 'ERR' THEN 0 WHEN 'STOP' THEN 1 WHEN 'STALL' THEN 2 WHEN 'REWIND' THEN 3
                 WHEN 'WARN' THEN 4 WHEN 'OK' THEN 6 WHEN 'IDLE' THEN 7 ELSE 5 END,
                 t.worst_lag_seconds DESC NULLS LAST, cluster, group_id"""  # noqa: S608
    return _query(con, sql, params)


def advice(lake: Lake, cluster: str, group: str) -> pd.DataFrame:
    """The group's current advice (:func:`lagscope.results.current_advice`: the rows of the
    cluster's latest analytics step), by rule; empty with the table's columns when it has none.
    Current, not of the time range: advice rests on the results' whole retention window."""
    rows = result_tables.current_advice(lake.results, cluster=cluster, group=group)
    if not rows:
        return _empty("advice")
    df = pd.DataFrame(rows).drop(columns=["date"], errors="ignore")
    return df.sort_values("rule", kind="stable").reset_index(drop=True)


def _current_events(con: duckdb.DuckDBPyConnection, lake: Lake, table: str, clusters_: Sequence[str],
                    window: TimeRange, key: str, where: str, params: Sequence[Any]) -> pd.DataFrame:
    """The events of an append-only result table (rebalance windows, anomalies) that overlap the
    range, open ones included (looked for from :data:`EVENT_LOOKBACK` before it: an event lives in
    the date partition of its start), newest first. An event is written again until it closes: of
    its rows (same ``cluster`` and ``key``, a fixed column list), the current one (latest
    ``as_of_ts``). ``where``: a fixed predicate of ``?`` parameters, bound to ``params``."""
    dates = _dates_between((window.start - EVENT_LOOKBACK).date(), window.end.date())
    scan = _scan(lake, table, clusters_, dates)
    if scan is None:
        return _empty(table)
    sql = (f"SELECT * FROM (SELECT * EXCLUDE (date) FROM {scan[0]} WHERE {where} "  # noqa: S608
           f"QUALIFY row_number() OVER (PARTITION BY cluster, {key} ORDER BY as_of_ts DESC NULLS LAST, "
           "end_ts DESC NULLS LAST) = 1) "
           "WHERE start_ts < ? AND (end_ts IS NULL OR end_ts >= ?) ORDER BY start_ts DESC")
    return _query(con, sql, [scan[1], *params, window.end, window.start])


def rebalances(con: duckdb.DuckDBPyConnection, lake: Lake, clusters_: Sequence[str], window: TimeRange,
               group: str | None = None) -> pd.DataFrame:
    """Rebalance windows that overlap the range (open ones included), newest first; of the rows
    of one window (same group and start), the current one (latest ``as_of_ts``)."""
    return _current_events(con, lake, "rebalances", clusters_, window, "group_id, start_ts",
                           "(? IS NULL OR group_id = ?)", [group, group])


def anomalies(con: duckdb.DuckDBPyConnection, lake: Lake, clusters_: Sequence[str], window: TimeRange,
              group: str | None = None, topic: str | None = None, partition: int | None = None) -> pd.DataFrame:
    """Anomalies that overlap the range (open ones included), newest first; per ``key``, the
    current row (latest ``as_of_ts``), none when that row is withdrawn (a later step found the
    anomaly is no finding; files written before the ``withdrawn`` column: none is).

    With ``topic``/``partition`` given, group-level rows (null topic/partition) are kept too.
    """
    df = _current_events(con, lake, "anomalies", clusters_, window, "key",
                         "(? IS NULL OR group_id = ?) AND (? IS NULL OR topic IS NULL OR topic = ?) "
                         "AND (? IS NULL OR partition IS NULL OR partition = ?)",
                         [group, group, topic, topic, partition, partition])
    if "withdrawn" in df.columns and len(df):  # not in SQL: a column no file has cannot be named there
        df = df.loc[~df["withdrawn"].astype("boolean").fillna(False).to_numpy(dtype=bool)].reset_index(drop=True)
    return df


def delivery(con: duckdb.DuckDBPyConnection, lake: Lake, clusters_: Sequence[str], window: TimeRange,
             group: str | None = None, topic: str | None = None) -> pd.DataFrame:
    """Messages lost and reprocessed: the delivery accounting (:func:`lagscope.delivery.account`)
    of the skips, retention losses and rewinds that overlap the range (the current row of each),
    newest first. Columns: :data:`lagscope.delivery.DELIVERY_COLUMNS`."""
    found = anomalies(con, lake, clusters_, window, group, topic)
    found = found.loc[found["kind"].isin(list(accounting.DELIVERY_KINDS))] if len(found) else found
    if found.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in accounting.DELIVERY_COLUMNS})
    columns = [c for c in ("cluster", "group_id", "topic", "partition", "kind", "cause", "start_ts", "end_ts",
                           "magnitude", "severity", "key") if c in found.columns]
    table = pa.Table.from_pandas(found[columns], preserve_index=False)
    out: pd.DataFrame = accounting.account(table).to_pandas()
    return out.sort_values(["bucket_ts", "group_id", "topic", "partition"], ascending=[False, True, True, True],
                           kind="stable").reset_index(drop=True)


_CHART_COLS = "window_start, topic, partition, lag_last, lag_seconds"
_TREND_COLS = ("window_start, topic, partition, lag_last, lag_max, produce_rate, consume_rate, lag_seconds, "
               "lag_seconds_is_lower_bound, lag_seconds_method, catchup_eta_s, retention_headroom_s")


def lag_series(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str, window: TimeRange,
               level: str = "group", topic: str | None = None) -> pd.DataFrame:
    """Lag trend rows of the group, sorted by topic and time, at one level:

    - ``group``: the group-level rows (topic and partition null);
    - ``topic``: the topic-level rows (partition null; one topic if given);
    - ``rollups``: both in one scan (the Group page needs both; the scan of the day's
      partition-level rows is what costs).
    """
    scan = _scan(lake, "lag_trends", [cluster], window.dates())
    if scan is None:
        return pd.DataFrame({c.strip(): pd.Series(dtype="object") for c in _TREND_COLS.split(",")})
    level_sql = {"group": "topic IS NULL AND partition IS NULL",
                 "topic": "topic IS NOT NULL AND partition IS NULL AND (? IS NULL OR topic = ?)",
                 "rollups": "partition IS NULL AND (? IS NULL OR topic IS NULL OR topic = ?)"}[level]
    params: list[Any] = [scan[1], group, window.start, window.end]
    if level != "group":
        params += [topic, topic]
    sql = (f"SELECT {_TREND_COLS} FROM {scan[0]} WHERE group_id = ? AND window_start >= ? AND window_start < ? "  # noqa: S608
           f"AND {level_sql} ORDER BY topic NULLS FIRST, window_start")
    return _query(con, sql, params)


def latest_partitions(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str, window: TimeRange,
                      topic: str | None = None, recent: dt.timedelta = dt.timedelta(minutes=10)) -> pd.DataFrame:
    """Each partition's newest lag trend row within the last ``recent`` of the range, worst
    (largest lag in seconds, then messages) first."""
    scan = _scan(lake, "lag_trends", [cluster], TimeRange(window.end - recent, window.end).dates())
    if scan is None:
        return pd.DataFrame({c.strip(): pd.Series(dtype="object") for c in _TREND_COLS.split(",")})
    sql = (f"SELECT {_TREND_COLS} FROM {scan[0]} WHERE group_id = ? AND partition IS NOT NULL "  # noqa: S608
           "AND (? IS NULL OR topic = ?) AND window_start >= ? AND window_start < ? "
           "QUALIFY row_number() OVER (PARTITION BY topic, partition ORDER BY window_start DESC) = 1 "
           "ORDER BY lag_seconds DESC NULLS LAST, lag_last DESC NULLS LAST, topic, partition")
    return _query(con, sql, [scan[1], group, topic, topic, max(window.start, window.end - recent), window.end])


def partition_series(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str, window: TimeRange,
                     partitions: Sequence[tuple[str, int]]) -> pd.DataFrame:
    """Lag trend rows of the given (topic, partition) pairs, sorted by time: only the columns a
    lag chart draws (window_start, topic, partition, lag_last, lag_seconds), since this scan
    reads the whole range's partition-level rows and every column it returns costs."""
    scan = _scan(lake, "lag_trends", [cluster], window.dates())
    if scan is None or not partitions:
        return pd.DataFrame({c.strip(): pd.Series(dtype="object") for c in _CHART_COLS.split(",")})
    topics = sorted({t for t, _ in partitions})
    numbers = sorted({p for _, p in partitions})
    # IN lists of placeholders (only their count comes from the input): DuckDB pushes a constant
    # IN list into the Parquet scan, where an IN (subquery) would read every row
    sql = (f"SELECT {_CHART_COLS} FROM {scan[0]} WHERE group_id = ? AND window_start >= ? AND window_start < ? "  # noqa: S608
           f"AND partition IN ({', '.join('?' * len(numbers))}) AND topic IN ({', '.join('?' * len(topics))}) "
           "ORDER BY topic, partition, window_start")
    df = _query(con, sql, [scan[1], group, window.start, window.end, *numbers, *topics])
    wanted = set(partitions)
    keep = [(t, int(p)) in wanted for t, p in zip(df["topic"], df["partition"], strict=True)]
    return df.loc[keep].reset_index(drop=True)


def members_at(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str,
               when: dt.datetime, lookback: dt.timedelta = dt.timedelta(days=1)) -> pd.DataFrame:
    """The group's member rows of the newest sweep at or before ``when``.

    Two steps, so that the wide ``assignment`` lists are decoded for one sweep only: find the
    sweep (two narrow columns), then read its rows (row groups pruned by ``sweep_ts``).
    """
    scan = _scan(lake, "members", [cluster], _dates_between((when - lookback).date(), when.date()))
    if scan is None:
        return _empty("members")
    newest = _query(con, f"SELECT max(sweep_ts) AS ts FROM {scan[0]} "  # noqa: S608
                         "WHERE group_id = ? AND sweep_ts <= ? AND sweep_ts > ?",
                    [scan[1], group, when, when - lookback])["ts"].iloc[0]
    if pd.isna(newest):
        return _empty("members")
    at = pd.Timestamp(newest).to_pydatetime()
    scan = _scan(lake, "members", [cluster], [at.date()])
    assert scan is not None  # the sweep was just read from these files
    sql = (f"SELECT * EXCLUDE (date) FROM {scan[0]} WHERE group_id = ? AND sweep_ts = ? "  # noqa: S608
           "ORDER BY member_id")
    return _query(con, sql, [scan[1], group, at])


def members_between(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str,
                    window: TimeRange) -> pd.DataFrame:
    """All member rows of the group in the range, by sweep."""
    scan = _scan(lake, "members", [cluster], window.dates())
    if scan is None:
        return _empty("members")
    sql = (f"SELECT * EXCLUDE (date) FROM {scan[0]} WHERE group_id = ? AND sweep_ts >= ? AND sweep_ts < ? "  # noqa: S608
           "ORDER BY sweep_ts, member_id")
    return _query(con, sql, [scan[1], group, window.start, window.end])


def offsets_between(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str, window: TimeRange,
                    topic: str | None = None, partition: int | None = None) -> pd.DataFrame:
    """Offset samples of the group (optionally one topic / partition) in the range, by sweep."""
    scan = _scan(lake, "offsets", [cluster], window.dates())
    if scan is None:
        return _empty("offsets")
    sql = (f"SELECT sweep_ts, topic, partition, committed_offset, log_start_offset, log_end_offset, "  # noqa: S608
           f"last_stable_offset, lag, member_id, client_id, host, group_state FROM {scan[0]} "
           "WHERE group_id = ? AND sweep_ts >= ? AND sweep_ts < ? AND (? IS NULL OR topic = ?) "
           "AND (? IS NULL OR partition = ?) ORDER BY topic, partition, sweep_ts")
    return _query(con, sql, [scan[1], group, window.start, window.end, topic, topic, partition, partition])


def commit_history(con: duckdb.DuckDBPyConnection, lake: Lake, cluster: str, group: str, window: TimeRange,
                   topic: str | None = None, partition: int | None = None) -> tuple[pd.DataFrame, str]:
    """Commits of the group (optionally one topic / partition) in the range, and their source.

    From the ``commits`` table (exact commit times, every commit) when the
    ``__consumer_offsets`` tail recorded any; otherwise from the ``offsets`` samples (the
    committed offset as each sweep saw it). Columns: ts, topic, partition, committed_offset.
    Source: ``"commits"`` or ``"offsets"``.
    """
    scan = _scan(lake, "commits", [cluster], window.dates())
    if scan is not None:
        sql = (f"SELECT coalesce(commit_ts, record_ts) AS ts, topic, partition, committed_offset "  # noqa: S608
               f"FROM {scan[0]} WHERE group_id = ? AND coalesce(commit_ts, record_ts) >= ? "
               "AND coalesce(commit_ts, record_ts) < ? AND committed_offset IS NOT NULL "
               "AND (? IS NULL OR topic = ?) AND (? IS NULL OR partition = ?) "
               "ORDER BY topic, partition, ts, source_offset")
        df = _query(con, sql, [scan[1], group, window.start, window.end, topic, topic, partition, partition])
        if len(df):
            return df, "commits"
    off = offsets_between(con, lake, cluster, group, window, topic, partition)
    off = off.loc[off["committed_offset"].notna(), ["sweep_ts", "topic", "partition", "committed_offset"]]
    return off.rename(columns={"sweep_ts": "ts"}).reset_index(drop=True), "offsets"
