"""The ``status`` table: a Burrow-compatible evaluation beside lagscope's own, per partition and
group, once per minute (at the minute's last sweep). The partition rows come from the step's
vectorised pass (:mod:`lagscope.analytics.np_status`); this module makes the group rows.

**Burrow** (``core/internal/evaluator/caching.go``), evaluated over the last ``N`` offset
*entries* of a partition (Burrow stores one per commit; from sweeps, an entry is a sweep at
which the committed offset changed or an owner was assigned — an assigned consumer commits
periodically — so a consumer that is gone stops adding entries, as it would in Burrow):

1. if the current lag is 0, or any entry in the window has lag 0 → OK;
2. the offset decreased between two consecutive entries → REWIND;
3. now − last entry time > last − first entry time → STOP;
4. every entry has the same offset → STALL;
5. the lag never decreases from one entry to the next → WARN;
otherwise OK. A group is the worst of its partitions, anything worse than ERR counted as ERR.

Burrow's known false alarms follow from these rules: a consumer of a low-traffic topic that
only commits when it consumes is STOP (rule 3) as soon as one message waits; a steady lag of
a few messages that is never exactly 0 at the entries is WARN (rule 5); an idle topic whose
consumer stopped committing is STOP.

**lagscope** (worst first): ``ERR`` when committed < log start (messages lost);
``REWIND`` when the window rewound; ``STOP`` when work is pending, nobody owns the partition
and nothing was committed for ``stop_after_s``; ``STALL`` the same with an owner
(``stall_after_s``); ``WARN`` when the lag in seconds is at least ``warn_lag_s`` *and* grew
over the window without ever decreasing; ``IDLE`` when caught up on a topic that has not
been written to for ``stall_after_s``; else ``OK``. So: no STOP at zero lag, no WARN on a
steady small lag (its lag seconds stay small), no alarm on an idle topic.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F  # noqa: N812

__all__ = ["BURROW_RANK", "OWN_RANK", "STATUS_COLUMNS", "with_group_rows"]

STATUS_COLUMNS = ["cluster", "eval_ts", "group_id", "topic", "partition", "burrow_status", "status",
                  "reason", "lag", "lag_seconds"]

#: Burrow's order (its StatusConstant values)
BURROW_RANK = {"OK": 1, "IDLE": 1, "WARN": 2, "ERR": 3, "STOP": 4, "STALL": 5, "REWIND": 6}
#: lagscope's own order, worst last: the dashboards' (worst first ERR, STOP, STALL, REWIND,
#: WARN, OK, IDLE), which is also the alerts' (ERR, STOP, STALL critical; REWIND, WARN warning)
OWN_RANK = {"IDLE": 0, "OK": 1, "WARN": 2, "REWIND": 3, "STALL": 4, "STOP": 5, "ERR": 6}


def with_group_rows(parts: DataFrame) -> DataFrame:
    """Partition status rows plus their group rows, with ``date`` (``parts`` is read twice:
    pass stored rows, not a plan that would be computed twice)."""
    return parts.unionByName(_group_rows(parts)).withColumn("date", F.date_format("eval_ts", "yyyy-MM-dd"))


def _rank(col: str, ranks: dict[str, int]) -> Column:
    expr = F.lit(0)
    for name, r in ranks.items():
        expr = F.when(F.col(col) == name, F.lit(r)).otherwise(expr)
    return expr


def _group_rows(parts: DataFrame) -> DataFrame:
    """Group rows per minute: the worst partition (Burrow: anything worse than ERR is ERR;
    lagscope keeps the worst partition's status name in its own order, ERR worst, IDLE only when
    every partition is IDLE; among partitions of that status, the reason of the one with the most
    lag)."""
    p = parts.withColumn("_m", F.date_trunc("minute", "eval_ts")).withColumn(
        "_br", _rank("burrow_status", BURROW_RANK)).withColumn("_lr", _rank("status", OWN_RANK))
    g = p.groupBy("cluster", "group_id", "_m").agg(
        F.max("eval_ts").alias("eval_ts"), F.max("_br").alias("_br"),
        # at equal status, the partition with the most lag (then the reason): a tie broken
        # by row order differed between a batch and the incremental steps over the same rows
        F.max_by(F.struct("status", "reason"), F.struct("_lr", F.coalesce(F.col("lag"), F.lit(-1)).alias("_l"),
                                                        "reason")).alias("_worst"),
        F.sum("lag").alias("lag"), F.max("lag_seconds").alias("lag_seconds"))
    burrow = (F.when(F.col("_br") >= 3, F.lit("ERR")).when(F.col("_br") == 2, F.lit("WARN"))
              .otherwise(F.lit("OK")))
    return g.select(
        "cluster", "eval_ts", "group_id", F.lit(None).cast("string").alias("topic"),
        F.lit(None).cast("int").alias("partition"), burrow.alias("burrow_status"),
        F.col("_worst.status").alias("status"), F.col("_worst.reason").alias("reason"), "lag", "lag_seconds")
