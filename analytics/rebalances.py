"""The ``rebalances`` table: one row per rebalance window.

From sweeps (``members``): a group is *settled* at a sweep when it is Stable with at least
one partition assigned. A window lies between two settled sweeps A and B whose generation or
member set differ. The group stopped making progress between A and the sweep after it
(A⁺), and was settled again between the sweep before B (B⁻) and B; without finer evidence the
midpoints are the estimates (error ≤ half a sweep interval at each end):
``start = (A + A⁺)/2``, ``end = (B⁻ + B)/2``.

Cause, from the member sets of A and B:

- a ``group_instance_id`` present on both sides with a new member id → ``static_member_bounce``;
- members gone (without a static return): when the departed member's partitions last showed
  progress (a commit, or lag 0) long before A⁺, it did not leave promptly: the gap is
  compared with the session timeout and the rebalance timeout (max.poll.interval.ms), the
  nearer (in ratio) wins: ``session_timeout`` or ``max_poll_interval``. A gap under
  ``leave_gap_s`` (or a quarter of the session timeout) → ``leave``;
- only new members → ``join``; neither → ``unknown``.

The window is the rebalance proper (the group stopped → settled again). For a timed-out
member the processing of its partitions stopped earlier, at its last progress
(``quiet_from_ts``, an internal column): ``observed_over_bound`` measures that member's
whole outage, last progress → settled, against the bound, which is what the bound bounds.

Bound: ``session + heartbeat + network`` for session timeouts and static bounces, the
rebalance timeout otherwise. Timeouts come from the group-metadata records (``group_events``)
of generation A when the ``__consumer_offsets`` tail ran, else from the given defaults.

With the commit stream the boundaries are exact: ``end`` = the record time of the first
group-metadata record of generation B; ``start`` = the group's last commit before ``end`` (consumers
commit when their partitions are revoked); a timed-out member's last progress is the last
commit of its partitions; ``source`` says which.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F  # noqa: N812

__all__ = ["REBALANCE_COLUMNS", "member_sweeps", "transform_rebalances"]

REBALANCE_COLUMNS = ["cluster", "group_id", "start_ts", "end_ts", "duration_s", "cause", "source",
                     "generation_before", "generation_after", "members_before", "members_after",
                     "partitions_moved", "bound_s", "observed_over_bound", "messages_accumulated",
                     "max_processing_gap_s"]

_G = ["cluster", "group_id"]


def _secs(col: Column) -> Column:
    return F.unix_micros(col).cast("double") / F.lit(1e6)


def _ts(seconds: Column) -> Column:
    return F.timestamp_micros((seconds * F.lit(1e6)).cast("long"))


def member_sweeps(members: DataFrame) -> DataFrame:
    """``members`` lake rows → one row per (cluster, group, sweep): state, generation, sorted
    member ids, (member, instance) pairs, owners of the assigned partitions, settled flag."""
    owner = F.coalesce(F.col("group_instance_id"), F.col("member_id"))
    owned = F.transform(F.coalesce(F.col("assignment"), F.array().cast(
        "array<struct<topic:string,partition:int>>")), lambda a: F.struct(
        F.concat_ws("/", a["topic"], a["partition"].cast("string")).alias("tp"), owner.alias("owner")))
    m = members.withColumn("_owned", owned)
    agg = m.groupBy(*_G, "sweep_ts").agg(
        F.first("group_state", ignorenulls=True).alias("group_state"),
        F.max("generation").alias("generation"),
        F.array_sort(F.collect_set("member_id")).alias("member_ids"),
        F.collect_list(F.when(F.col("group_instance_id").isNotNull(), F.struct(
            F.col("group_instance_id").alias("iid"), F.col("member_id").alias("mid")))).alias("instances"),
        F.flatten(F.collect_list("_owned")).alias("owners"),
    )
    return agg.withColumn("t", _secs(F.col("sweep_ts"))).withColumn(
        "settled", (F.col("group_state") == "Stable") & (F.size("owners") > 0))


def transform_rebalances(
    msweeps: DataFrame,
    alive: DataFrame,
    group_lag: DataFrame,
    changes: DataFrame,
    *,
    timeouts: DataFrame | None = None,
    commits: DataFrame | None = None,
    session_timeout_s: float = 45.0,
    heartbeat_s: float = 3.0,
    network_s: float = 1.0,
    rebalance_timeout_s: float = 300.0,
    leave_gap_s: float = 2.0,
) -> DataFrame:
    """Rebalance windows.

    - ``msweeps``: :func:`member_sweeps` rows (state rows of the previous step included);
    - ``alive``: ``cluster, group_id, owner, alive_t``: times at which a member showed progress
      (its partition's committed offset moved, or it was caught up);
    - ``group_lag``: ``cluster, group_id, t, group_lag`` (Σ lag per sweep);
    - ``changes``: ``cluster, group_id, topic, partition, t``: times the committed offset
      changed (from sweeps, or exact commit times);
    - ``timeouts``: ``cluster, group_id, generation, session_timeout_s, rebalance_timeout_s,
      gen_t`` from group-metadata records (optional); ``commits``: ``cluster, group_id, topic,
      partition, t`` exact commit times (optional).
    """
    w = Window.partitionBy(*_G).orderBy("t")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    snap = F.struct("t", "generation", "member_ids", "instances", "owners")
    s = (msweeps.withColumn("_a", F.last(F.when(F.col("settled"), snap), ignorenulls=True).over(before))
         .withColumn("_prev_t", F.lag("t").over(w))
         .withColumn("_a_next_t", F.last(F.when(F.lag("settled").over(w), F.col("t")), ignorenulls=True).over(upto)))
    changed = F.col("settled") & F.col("_a").isNotNull() & (
        (F.coalesce(F.col("generation"), F.lit(-1)) != F.coalesce(F.col("_a.generation"), F.lit(-1)))
        | (F.col("member_ids") != F.col("_a.member_ids")))
    win = s.where(changed).select(
        *_G, F.col("_a").alias("a"), F.struct("t", "generation", "member_ids", "instances", "owners").alias("b"),
        F.col("_prev_t").alias("b_prev_t"), F.col("_a_next_t").alias("a_next_t"))
    # static members that came back with a new member id; members gone for good; newcomers
    a_iids = F.transform(F.col("a.instances"), lambda x: x["iid"])
    b_iids = F.transform(F.col("b.instances"), lambda x: x["iid"])
    bounced_iids = F.array_intersect(a_iids, b_iids)
    a_by_iid = F.map_from_entries(F.transform(F.col("a.instances"), lambda x: F.struct(x["iid"], x["mid"])))
    b_by_iid = F.map_from_entries(F.transform(F.col("b.instances"), lambda x: F.struct(x["iid"], x["mid"])))
    win = win.withColumn("_bounced", F.filter(bounced_iids, lambda i: F.element_at(a_by_iid, i) != F.element_at(
        b_by_iid, i)))
    bounced_mids = F.transform(F.col("_bounced"), lambda i: F.element_at(a_by_iid, i))
    win = (win.withColumn("_gone", F.array_except(F.col("a.member_ids"), F.col("b.member_ids")))
           .withColumn("_gone", F.array_except(F.col("_gone"), bounced_mids))
           .withColumn("_new", F.array_except(F.col("b.member_ids"), F.col("a.member_ids")))
           .withColumn("_new", F.array_except(F.col("_new"), F.transform(
               F.col("_bounced"), lambda i: F.element_at(b_by_iid, i)))))
    # timeouts of generation A (group-metadata records) or the defaults
    if timeouts is not None:
        at = timeouts.select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                             F.col("generation").alias("_gen"), "session_timeout_s", "rebalance_timeout_s")
        win = win.join(at, (win["cluster"] == at["_c"]) & (win["group_id"] == at["_g"])
                       & (win["a.generation"] == at["_gen"]), "left").drop("_c", "_g", "_gen")
        bt = timeouts.select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                             F.col("generation").alias("_gen"), F.col("gen_t").alias("_b_gen_t"))
        win = win.join(bt, (win["cluster"] == bt["_c"]) & (win["group_id"] == bt["_g"])
                       & (win["b.generation"] == bt["_gen"]), "left").drop("_c", "_g", "_gen")
    else:
        win = (win.withColumn("session_timeout_s", F.lit(None).cast("double"))
               .withColumn("rebalance_timeout_s", F.lit(None).cast("double"))
               .withColumn("_b_gen_t", F.lit(None).cast("double")))
    win = (win.withColumn("_session", F.coalesce(F.col("session_timeout_s"), F.lit(session_timeout_s)))
           .withColumn("_rebal", F.coalesce(F.col("rebalance_timeout_s"), F.lit(rebalance_timeout_s))))
    # last progress of the departed members (before A⁺)
    win = win.withColumn("_wid", F.monotonically_increasing_id())
    gone = win.select(*_G, "_wid", "a_next_t", F.explode("_gone").alias("owner"))
    al = alive.select(*_G, "owner", "alive_t")
    last_alive = (gone.join(al, [*_G, "owner"], "left")
                  .where(F.col("alive_t").isNull() | (F.col("alive_t") <= F.col("a_next_t")))
                  .groupBy("_wid", "owner").agg(F.max("alive_t").alias("_alive"))
                  .groupBy("_wid").agg(F.min("_alive").alias("_last_alive")))
    win = win.join(last_alive, "_wid", "left")
    gap = F.col("a_next_t") - F.coalesce(F.col("_last_alive"), F.col("a.t"))
    prompt = gap <= F.greatest(F.lit(leave_gap_s), F.col("_session") / 4)
    nearer_session = F.abs(F.log(gap / F.col("_session"))) <= F.abs(F.log(gap / F.col("_rebal")))
    cause = (F.when(F.size("_bounced") > 0, F.lit("static_member_bounce"))
             .when(F.size("_gone") > 0, F.when(prompt, F.lit("leave"))
                   .when(nearer_session, F.lit("session_timeout")).otherwise(F.lit("max_poll_interval")))
             .when(F.size("_new") > 0, F.lit("join"))
             .otherwise(F.lit("unknown")))
    win = win.withColumn("cause", cause)
    timed_out = F.col("cause").isin("session_timeout", "max_poll_interval")
    sweep_start = (F.col("a.t") + F.col("a_next_t")) / 2
    sweep_end = (F.col("b_prev_t") + F.col("b.t")) / 2
    # the rebalance proper starts when the group stops (A → A⁺); a timed-out member stopped
    # earlier, at its last progress: that is where the bound (crash/slow member → recovered) is
    # measured from, and where its partitions' processing stopped
    win = (win.withColumn("_start", sweep_start).withColumn("_end", sweep_end)
           .withColumn("_quiet_from", F.when(timed_out & F.col("_last_alive").isNotNull(), F.col("_last_alive"))
                       .otherwise(sweep_start)))
    win = win.withColumn("source", F.lit("sweeps"))
    if commits is not None:
        win = _exact_bounds(win, commits)
    bound = F.when(F.col("cause").isin("session_timeout", "static_member_bounce"),
                   F.col("_session") + F.lit(heartbeat_s + network_s)).otherwise(F.col("_rebal"))
    win = (win.withColumn("bound_s", bound)
           .withColumn("duration_s", F.greatest(F.lit(0.0), F.col("_end") - F.col("_start")))
           .withColumn("_observed", F.greatest(F.lit(0.0), F.col("_end") - F.least(F.col("_quiet_from"),
                                                                                   F.col("_start")))))
    # partitions whose owner changed
    a_map = F.map_from_entries(F.transform(F.col("a.owners"), lambda x: F.struct(x["tp"], x["owner"])))
    moved = F.size(F.filter(F.col("b.owners"), lambda x: F.coalesce(
        F.element_at(a_map, x["tp"]) != x["owner"], F.lit(True))))
    win = win.withColumn("partitions_moved", moved.cast("int"))
    # lag accumulated between A and B
    gl = group_lag.select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"), "t", "group_lag")
    ga = gl.select("_c", "_g", F.col("t").alias("_ta"), F.col("group_lag").alias("_la"))
    gb = gl.select(F.col("_c").alias("_c2"), F.col("_g").alias("_g2"), F.col("t").alias("_tb"),
                   F.col("group_lag").alias("_lb"))
    win = (win.join(ga, (win["cluster"] == ga["_c"]) & (win["group_id"] == ga["_g"]) & (win["a.t"] == ga["_ta"]),
                    "left").drop("_c", "_g", "_ta")
           .join(gb, (win["cluster"] == gb["_c2"]) & (win["group_id"] == gb["_g2"]) & (win["b.t"] == gb["_tb"]),
                 "left").drop("_c2", "_g2", "_tb"))
    win = win.withColumn("messages_accumulated", F.greatest(F.lit(0), F.col("_lb") - F.col("_la")).cast("long"))
    win = win.join(_processing_gaps(win, commits if commits is not None else changes), "_wid", "left")
    out = win.select(
        *_G, _ts(F.col("_start")).alias("start_ts"), _ts(F.col("_end")).alias("end_ts"), "duration_s", "cause",
        "source", F.col("a.generation").alias("generation_before"), F.col("b.generation").alias("generation_after"),
        F.col("a.member_ids").alias("members_before"), F.col("b.member_ids").alias("members_after"),
        "partitions_moved", "bound_s", (F.col("_observed") / F.col("bound_s")).alias("observed_over_bound"),
        "messages_accumulated", "max_processing_gap_s", _ts(F.col("_quiet_from")).alias("quiet_from_ts"))
    return out.withColumn("date", F.date_format("start_ts", "yyyy-MM-dd"))


def _exact_bounds(win: DataFrame, commits: DataFrame) -> DataFrame:
    """Commit-stream boundaries: end = first group-metadata record of generation B; start =
    last commit of the departed member's partitions (timeouts) or of the group (otherwise)."""
    has_end = F.col("_b_gen_t").isNotNull()
    win = win.withColumn("_end", F.when(has_end, F.col("_b_gen_t")).otherwise(F.col("_end")))
    c = commits.select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                       F.concat_ws("/", "topic", F.col("partition").cast("string")).alias("_ctp"),
                       F.col("t").alias("_ct"))
    owners = win.select("_wid", "cluster", "group_id", "a_next_t", "_end", "_gone",
                        F.explode_outer("a.owners").alias("_o"))
    gone_tps = owners.select("_wid", "cluster", "group_id", "a_next_t", "_end",
                             F.array_contains(F.col("_gone"), F.col("_o.owner")).alias("_is_gone"),
                             F.col("_o.tp").alias("_tp"))
    j = gone_tps.join(c, (gone_tps["cluster"] == c["_c"]) & (gone_tps["group_id"] == c["_g"])
                      & (gone_tps["_tp"] == c["_ctp"]) & (c["_ct"] <= gone_tps["_end"]), "inner")
    last = j.groupBy("_wid").agg(
        F.max(F.when(F.col("_is_gone") & (F.col("_ct") <= F.col("a_next_t")), F.col("_ct"))).alias("_gone_last"),
        F.max("_ct").alias("_group_last"))
    win = win.join(last, "_wid", "left")
    timed_out = F.col("cause").isin("session_timeout", "max_poll_interval")
    start = F.when(F.col("_group_last").isNotNull() & (F.col("_group_last") >= F.col("a.t")), F.col("_group_last"))
    quiet = F.when(timed_out & F.col("_gone_last").isNotNull(), F.col("_gone_last"))
    return (win.withColumn("_start", F.coalesce(start, F.col("_start")))
            .withColumn("_quiet_from", F.coalesce(quiet, F.col("_quiet_from")))
            .withColumn("source", F.when(has_end, F.lit("commit_stream")).otherwise(F.col("source")))
            .drop("_gone_last", "_group_last"))


def _processing_gaps(win: DataFrame, changes: DataFrame, lookaround_s: float = 900.0) -> DataFrame:
    """Per window: the largest per-partition gap between the last commit at or before the
    start and the first commit after it (within ``lookaround_s``)."""
    wv = win.select("_wid", F.col("cluster").alias("_c"), F.col("group_id").alias("_g"), "_start", "_end")
    ch = changes.select("cluster", "group_id", "topic", "partition", "t")
    j = ch.join(F.broadcast(wv), (ch["cluster"] == wv["_c"]) & (ch["group_id"] == wv["_g"])
                & (ch["t"] >= wv["_start"] - lookaround_s) & (ch["t"] <= wv["_end"] + lookaround_s))
    per = j.groupBy("_wid", "topic", "partition").agg(
        F.max(F.when(F.col("t") <= F.col("_start"), F.col("t"))).alias("_lb"),
        F.min(F.when(F.col("t") > F.col("_start"), F.col("t"))).alias("_fa"))
    return per.where(F.col("_lb").isNotNull() & F.col("_fa").isNotNull()).groupBy("_wid").agg(
        F.max(F.col("_fa") - F.col("_lb")).alias("max_processing_gap_s"))
