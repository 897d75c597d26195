"""Pure processing of the drill-down app: DataFrames in, new DataFrames out (inputs untouched).

    >>> format_duration(3725.0)
    '1h 2m 5s'
    >>> format_duration(None)
    '—'
"""

from __future__ import annotations

import datetime as dt
import io
import math
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from lagscope import delivery as accounting

__all__ = [
    "CommitSummary",
    "DeliverySummary",
    "WindowStats",
    "accumulated_during",
    "advice_for_cause",
    "commit_steps",
    "delivery_bucket",
    "delivery_over_time",
    "format_duration",
    "ownership_at",
    "ownership_change",
    "processing_gaps",
    "relative_minutes",
    "split_rollups",
    "summarize_commits",
    "summarize_delivery",
    "to_csv_bytes",
    "to_parquet_bytes",
    "window_stats",
]


def format_duration(seconds: float | None) -> str:
    """``1h 2m 5s`` style; ``—`` for None/NaN; ``∞`` for infinity."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "—"
    if math.isinf(seconds):
        return "∞"
    total = round(seconds)
    if total < 60:
        return f"{seconds:.1f}s" if seconds < 10 else f"{total}s"
    days, rem = divmod(total, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "", f"{minutes}m" if minutes else "",
             f"{secs}s" if secs and not days else ""]
    return " ".join(p for p in parts if p)


def split_rollups(rollups: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Group-level rows (null topic) and topic-level rows of a ``lag_series(level="rollups")``."""
    is_group = rollups["topic"].isna()
    return rollups.loc[is_group].reset_index(drop=True), rollups.loc[~is_group].reset_index(drop=True)


# --------------------------------------------------------------------------------------------
# Commit history (Partition page)
# --------------------------------------------------------------------------------------------

def commit_steps(history: pd.DataFrame) -> pd.DataFrame:
    """Each change of one partition's committed offset, with the gap since the previous change.

    ``history``: columns ts, committed_offset (one partition, any order). Repeated values (a
    sweep that saw no new commit, a commit of the same offset) are not steps. Output columns:
    ts, committed_offset, previous_offset, delta, gap_s (seconds since the previous change),
    kind (``advance`` or ``rewind``: the offset went backwards), reprocessed (for a rewind,
    the messages that will be consumed a second time: previous − new; else 0).
    """
    cols = ["ts", "committed_offset", "previous_offset", "delta", "gap_s", "kind", "reprocessed"]
    h = (history.loc[history["committed_offset"].notna(), ["ts", "committed_offset"]]
         .sort_values("ts", kind="stable").reset_index(drop=True))
    if h.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    offsets = h["committed_offset"].astype("int64")
    changed = offsets.ne(offsets.shift())
    changed.iloc[0] = False  # the first value is the baseline, not a step
    prev = offsets.shift()
    prev_change_ts = h["ts"].where(changed | (h.index == 0)).ffill().shift()
    steps = pd.DataFrame({
        "ts": h["ts"],
        "committed_offset": offsets,
        "previous_offset": prev,
        "gap_s": (h["ts"] - prev_change_ts).dt.total_seconds(),
    }).loc[changed]
    steps["previous_offset"] = steps["previous_offset"].astype("int64")
    steps["delta"] = steps["committed_offset"] - steps["previous_offset"]
    steps["kind"] = ["rewind" if d < 0 else "advance" for d in steps["delta"]]
    steps["reprocessed"] = (-steps["delta"]).clip(lower=0)
    return steps[cols].reset_index(drop=True)


@dataclass(frozen=True)
class CommitSummary:
    """What the Partition page's headline says about one partition's commits."""

    changes: int
    rewinds: int
    reprocessed: int
    skips: int
    never_processed: int
    longest_gap_s: float | None


def summarize_commits(steps: pd.DataFrame, anomalies: pd.DataFrame) -> CommitSummary:
    """Rewinds from the history itself (exact); skips and retention loss from the analytics'
    anomalies (a skip cannot be told from fast consumption by the offsets alone)."""
    lost = anomalies
    if len(anomalies):
        # a retention loss not proven (a warning: its owner may hold the records) counts no message
        unproven = (anomalies["kind"] == "retention_loss") & (anomalies.get("severity") == "warning")
        lost = anomalies.loc[anomalies["kind"].isin(["skip", "retention_loss"]) & ~unproven]
    rewinds = steps.loc[steps["kind"] == "rewind"] if len(steps) else steps
    gap = steps["gap_s"].max() if len(steps) else None
    return CommitSummary(
        changes=len(steps),
        rewinds=len(rewinds),
        reprocessed=int(rewinds["reprocessed"].sum()) if len(rewinds) else 0,
        skips=len(lost),
        never_processed=int(lost["magnitude"].fillna(0).sum()) if len(lost) else 0,
        longest_gap_s=None if gap is None or pd.isna(gap) else float(gap),
    )


# --------------------------------------------------------------------------------------------
# Delivery (Delivery page)
# --------------------------------------------------------------------------------------------

def delivery_bucket(window: dt.timedelta, bars: int = 48) -> dt.timedelta:
    """The time bucket of the Delivery chart: about ``bars`` buckets over ``window``, whole
    minutes, at least one."""
    minutes = max(1, math.ceil(window.total_seconds() / 60 / bars))
    return dt.timedelta(minutes=minutes)


def delivery_over_time(delivery: pd.DataFrame, every: dt.timedelta) -> pd.DataFrame:
    """Messages lost and reprocessed per time bucket of ``every``, group, topic and cause
    (:func:`lagscope.delivery.by_bucket`): columns group_id, topic, cause, bucket_ts, lost,
    reprocessed, findings, exact."""
    cols = ["group_id", "topic", "cause", "bucket_ts", "lost", "reprocessed", "findings", "exact"]
    if delivery.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    table = pa.Table.from_pandas(delivery, preserve_index=False)
    out: pd.DataFrame = accounting.by_bucket(table, every, by=("group_id", "topic", "cause")).to_pandas()
    return out[cols]


@dataclass(frozen=True)
class DeliverySummary:
    """The Delivery page's headline."""

    lost: int
    reprocessed: int
    findings: int
    exact: int  # findings whose bound is exact (one commit shows them whole: an admin reset, a rewind)


def known_lost(delivery: pd.DataFrame) -> pd.Series:
    """Per delivery row, the messages known lost: 0 for an upper bound only (bound ``at_most``, a
    retention loss not proven: listed, never summed, as in the Prometheus counter)."""
    if "bound" not in delivery.columns:
        return delivery["lost"]
    return delivery["lost"].where(delivery["bound"] != "at_most", 0)


def summarize_delivery(delivery: pd.DataFrame) -> DeliverySummary:
    if delivery.empty:
        return DeliverySummary(0, 0, 0, 0)
    return DeliverySummary(lost=int(known_lost(delivery).sum()),
                           reprocessed=int(delivery["reprocessed"].sum()),
                           findings=len(delivery), exact=int(delivery["exact"].astype(bool).sum()))


# --------------------------------------------------------------------------------------------
# Rebalances (Rebalance page)
# --------------------------------------------------------------------------------------------

def ownership_at(offsets: pd.DataFrame, when: dt.datetime, before: bool = True) -> pd.DataFrame:
    """Owner of each partition at the newest sweep strictly before ``when`` (``before=True``: a
    sweep at the window's start already sees the rebalance) or the oldest sweep at/after it.
    Columns: topic, partition, member_id, client_id, host, sweep_ts."""
    cols = ["topic", "partition", "member_id", "client_id", "host", "sweep_ts"]
    if offsets.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    side = offsets.loc[offsets["sweep_ts"] < when] if before else offsets.loc[offsets["sweep_ts"] >= when]
    if side.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    ts = side["sweep_ts"].max() if before else side["sweep_ts"].min()
    return side.loc[side["sweep_ts"] == ts, cols].sort_values(["topic", "partition"]).reset_index(drop=True)


def ownership_change(before: pd.DataFrame, after: pd.DataFrame) -> pd.DataFrame:
    """Per partition: owner before, owner after, and whether it moved."""
    b = before[["topic", "partition", "member_id"]].rename(columns={"member_id": "owner_before"})
    a = after[["topic", "partition", "member_id"]].rename(columns={"member_id": "owner_after"})
    out = b.merge(a, on=["topic", "partition"], how="outer").sort_values(["topic", "partition"])
    out["moved"] = out["owner_before"].fillna("") != out["owner_after"].fillna("")
    return out.reset_index(drop=True)


def processing_gaps(commits: pd.DataFrame, start: dt.datetime, end: dt.datetime | None) -> pd.DataFrame:
    """Per partition: the last commit advance at/before the window's start, the first one after
    it, and the gap between them (the time the partition was not being processed).

    ``commits``: ts, topic, partition, committed_offset (all partitions of the group). A
    partition with no advance after the start has a null ``resumed_ts`` and its gap runs to
    the end of the data (marked ``open``). Sorted by gap, longest first.
    """
    cols = ["topic", "partition", "last_before_ts", "resumed_ts", "gap_s", "open"]
    rows: list[dict[str, object]] = []
    if commits.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    data_end = commits["ts"].max()
    for (topic, partition), h in commits.groupby(["topic", "partition"], sort=True):
        h = h.sort_values("ts", kind="stable")
        advance = h["committed_offset"].gt(h["committed_offset"].shift())
        advances = h.loc[advance, "ts"]
        earlier = advances.loc[advances <= start]
        later = advances.loc[advances > start]
        last_before = earlier.max() if len(earlier) else h["ts"].min()
        resumed = later.min() if len(later) else None
        stop = resumed if resumed is not None else data_end
        rows.append({"topic": topic, "partition": int(partition), "last_before_ts": last_before,
                     "resumed_ts": resumed, "gap_s": (stop - last_before).total_seconds(),
                     "open": resumed is None})
    out = pd.DataFrame(rows, columns=cols)
    return out.sort_values(["gap_s", "topic", "partition"], ascending=[False, True, True]).reset_index(drop=True)


def accumulated_during(offsets: pd.DataFrame, start: dt.datetime, end: dt.datetime) -> pd.DataFrame:
    """Per partition: lag at the sweep at/before ``start`` and at/after ``end``, and the growth
    (messages accumulated while the group was rebalancing). Sorted by growth."""
    cols = ["topic", "partition", "lag_before", "lag_after", "accumulated"]
    if offsets.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    before = offsets.loc[offsets["sweep_ts"] <= start]
    after = offsets.loc[offsets["sweep_ts"] >= end]
    if before.empty or after.empty:
        return pd.DataFrame({c: pd.Series(dtype="object") for c in cols})
    b = before.loc[before["sweep_ts"] == before["sweep_ts"].max(), ["topic", "partition", "lag"]]
    a = after.loc[after["sweep_ts"] == after["sweep_ts"].min(), ["topic", "partition", "lag"]]
    out = b.rename(columns={"lag": "lag_before"}).merge(a.rename(columns={"lag": "lag_after"}),
                                                        on=["topic", "partition"], how="outer")
    out["accumulated"] = out["lag_after"].fillna(0) - out["lag_before"].fillna(0)
    return out.sort_values(["accumulated", "topic", "partition"], ascending=[False, True, True]).reset_index(
        drop=True)


# --------------------------------------------------------------------------------------------
# Compare
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WindowStats:
    """Headline numbers of one time window of one group (Compare page)."""

    max_lag: int | None
    mean_lag: float | None
    max_lag_seconds: float | None
    mean_consume_rate: float | None
    mean_produce_rate: float | None
    rebalances: int
    rebalance_seconds: float
    anomalies: int


def _opt(value: object) -> float | None:
    return None if value is None or pd.isna(value) else float(value)  # type: ignore[arg-type]


def window_stats(series: pd.DataFrame, rebalances: pd.DataFrame, anomalies: pd.DataFrame) -> WindowStats:
    """Stats of group-level lag rows plus the window's rebalances and anomalies."""
    has = len(series) > 0
    max_lag = _opt(series["lag_max"].max()) if has else None
    return WindowStats(
        max_lag=None if max_lag is None else int(max_lag),
        mean_lag=_opt(series["lag_last"].mean()) if has else None,
        max_lag_seconds=_opt(series["lag_seconds"].max()) if has else None,
        mean_consume_rate=_opt(series["consume_rate"].mean()) if has else None,
        mean_produce_rate=_opt(series["produce_rate"].mean()) if has else None,
        rebalances=len(rebalances),
        rebalance_seconds=float(rebalances["duration_s"].fillna(0).sum()) if len(rebalances) else 0.0,
        anomalies=len(anomalies),
    )


def relative_minutes(series: pd.DataFrame, start: dt.datetime, column: str = "window_start") -> pd.Series:
    """Minutes since ``start`` for each row: aligns two windows on one axis."""
    if series.empty:
        return pd.Series([], dtype="float64", index=series.index)
    return (series[column] - pd.Timestamp(start)).dt.total_seconds() / 60.0


# --------------------------------------------------------------------------------------------
# Export
# --------------------------------------------------------------------------------------------

def to_csv_bytes(df: pd.DataFrame) -> bytes:
    """The frame as UTF-8 CSV (timestamps in ISO 8601 UTC, no index)."""
    text: str = df.to_csv(index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ")
    return text.encode()


def to_parquet_bytes(df: pd.DataFrame) -> bytes:
    """The frame as a zstd-compressed Parquet file (types kept: timestamps, lists, structs)."""
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df, preserve_index=False), sink, compression="zstd")
    return sink.getvalue()


#: the advice rules that speak to a rebalance of each cause (docs/analytics.md, Advice); a
#: rewind after the window can follow any rebalance
_ADVICE_FOR_CAUSE = {
    "session_timeout": ("session_timeout_crash",),
    "max_poll_interval": ("max_poll_interval",),
    "join": ("restart_storm", "eager_large_group"),
    "leave": ("restart_storm", "eager_large_group"),
    "static_member_bounce": ("session_timeout_crash",),
}


def advice_for_cause(advice: pd.DataFrame, cause: str | None) -> pd.DataFrame:
    """The advice rows that speak to a rebalance of ``cause`` (a new frame): its cause's rules,
    an eager group's, and commits on revocation (a rewind can follow any rebalance)."""
    wanted = {*_ADVICE_FOR_CAUSE.get(cause or "", ()), "eager_large_group", "rewind_after_rebalance"}
    return advice.loc[advice["rule"].isin(wanted)].reset_index(drop=True)
