"""The Spark SQL statement of the per-group rules, kept as the reference that
:mod:`lagscope.analytics.groups` is tested against (``tests/analytics/test_groups.py``): verbatim
copies of ``analytics/rebalances.py`` (member sweeps, generation records, windows, causes, bounds,
exact boundaries, processing gaps), of ``analytics/findings.py`` (storms, storm state, outages),
of the ``changed`` mark of ``analytics/series.py``'s ``enrich_series`` and of the glue of
``analytics/job.py``'s ``run_step`` (``_progress_inputs``, ``_group_lag``, the ``msweeps`` state),
as of commit 945dae5. Nothing here imports the production Spark modules, so it outlives them.

From ``rebalances.py``'s docstring: the rules are stated in :mod:`lagscope.analytics.groups`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F  # noqa: N812

KEY = ["cluster", "group_id", "topic", "partition"]
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
    member ids, (member, instance) pairs, owners of the assigned partitions, settled flag (a
    member row in the lake twice, a sweep written again, counts once)."""
    owner = F.coalesce(F.col("group_instance_id"), F.col("member_id"))
    owned = F.transform(F.coalesce(F.col("assignment"), F.array().cast(
        "array<struct<topic:string,partition:int>>")), lambda a: F.struct(
        F.concat_ws("/", a["topic"], a["partition"].cast("string")).alias("tp"), owner.alias("owner")))
    m = members.withColumn("_owned", owned)
    agg = m.groupBy(*_G, "sweep_ts").agg(
        F.first("group_state", ignorenulls=True).alias("group_state"),
        F.max("generation").alias("generation"),
        F.array_sort(F.collect_set("member_id")).alias("member_ids"),
        F.collect_set(F.when(F.col("group_instance_id").isNotNull(), F.struct(
            F.col("group_instance_id").alias("iid"), F.col("member_id").alias("mid")))).alias("instances"),
        F.array_distinct(F.flatten(F.collect_list("_owned"))).alias("owners"),
    )
    return agg.withColumn("t", _secs(F.col("sweep_ts"))).withColumn(
        "settled", (F.col("group_state") == "Stable") & (F.size("owners") > 0))


_ASSIGNMENT = "array<struct<topic:string,partition:int>>"


def generation_records(group_events: DataFrame) -> DataFrame:
    """``group_events`` → the records rebalance windows use: ``cluster, group_id, gen_t`` (record
    time, s), ``generation, session_timeout_s, rebalance_timeout_s, member_ids`` (sorted; null
    when the record is not a generation), ``instances, owners`` (as in :func:`member_sweeps`).

    - classic ``group_metadata`` with members: one generation, its members' largest session and
      rebalance timeouts;
    - KIP-848 ``consumer_group_member`` (not a tombstone): that member's rebalance timeout; no
      session timeout (KIP-848 takes it from the broker's group.consumer.session.timeout.ms, which
      no record carries: the configured default applies); not a generation (``member_ids`` null).
    """
    ms = F.col("members")

    def owner(m: Column) -> Column:
        return F.coalesce(m["group_instance_id"], m["member_id"])

    owners = F.flatten(F.transform(ms, lambda m: F.transform(
        F.coalesce(m["assignment"], F.array().cast(_ASSIGNMENT)), lambda a: F.struct(
            F.concat_ws("/", a["topic"], a["partition"].cast("string")).alias("tp"), owner(m).alias("owner")))))
    instances = F.filter(F.transform(ms, lambda m: F.struct(m["group_instance_id"].alias("iid"),
                                                            m["member_id"].alias("mid"))),
                         lambda x: x["iid"].isNotNull())
    classic = F.col("record_type") == "group_metadata"
    kip848 = (F.col("record_type") == "consumer_group_member") & F.col("value_version").isNotNull()
    ev = group_events.where((classic | kip848) & (F.size(F.coalesce(ms, F.array())) > 0))
    return ev.select(
        "cluster", "group_id", _secs(F.col("record_ts")).alias("gen_t"),
        F.when(classic, F.col("generation")).alias("generation"),
        F.when(classic, F.array_max(F.transform(ms, lambda m: m["session_timeout_ms"])) / 1000.0)
        .alias("session_timeout_s"),
        (F.array_max(F.transform(ms, lambda m: m["rebalance_timeout_ms"])) / 1000.0).alias("rebalance_timeout_s"),
        F.when(classic, F.array_sort(F.transform(ms, lambda m: m["member_id"]))).alias("member_ids"),
        F.when(classic, instances).alias("instances"), F.when(classic, owners).alias("owners"))


def _record_timeouts(win: DataFrame, gens: DataFrame) -> DataFrame:
    """Per window: the timeouts of the group's latest record at or before sweep A (else, when
    the tail started later, of its first record after A) and that record's generation
    (``_a_gen``, only from a record at or before A)."""
    r = gens.where(F.col("rebalance_timeout_s").isNotNull() | F.col("session_timeout_s").isNotNull()).select(
        F.col("cluster").alias("_c"), F.col("group_id").alias("_g"), F.col("gen_t").alias("_rt"),
        F.struct("session_timeout_s", "rebalance_timeout_s", "generation").alias("_rec"))
    w = win.select("_wid", "cluster", "group_id", F.col("a.t").alias("_at"))
    j = w.join(r, (w["cluster"] == r["_c"]) & (w["group_id"] == r["_g"]))
    before = F.col("_rt") <= F.col("_at")
    last = j.groupBy("_wid").agg(
        F.max_by(F.when(before, F.col("_rec")), F.when(before, F.col("_rt"))).alias("_before"),
        F.min_by(F.when(~before, F.col("_rec")), F.when(~before, F.col("_rt"))).alias("_after"))
    rec = F.coalesce(F.col("_before"), F.col("_after"))
    return (win.join(last, "_wid", "left")
            .withColumn("session_timeout_s", rec["session_timeout_s"])
            .withColumn("rebalance_timeout_s", rec["rebalance_timeout_s"])
            .withColumn("_a_gen", F.col("_before.generation")).drop("_before", "_after"))


def _generation_end(win: DataFrame, gens: DataFrame) -> DataFrame:
    """Per window: the record of the generation sweep B saw: of the generation records after A
    whose members are B's, written before the sweep after B (a sweep sees a generation only once
    its record is written; sweep_ts is the sweep's start), the latest at or before B, else the
    earliest after B (the same members rejoining after B write a later one); only B's own
    generation's when B knows it. ``_b_gen_t``, ``_b_gen``."""
    r = gens.where(F.col("member_ids").isNotNull()).select(
        F.col("cluster").alias("_c"), F.col("group_id").alias("_g"), F.col("gen_t").alias("_et"),
        F.col("member_ids").alias("_em"), F.struct(F.col("gen_t").alias("t"), "generation").alias("_rec"))
    hi = F.coalesce(F.col("b_next_t"), F.col("b.t") + (F.col("b.t") - F.col("b_prev_t")))
    w = win.select("_wid", "cluster", "group_id", F.col("a.t").alias("_at"), F.col("b.member_ids").alias("_bm"),
                   hi.alias("_hi"), F.col("b.t").alias("_bt"), F.col("b.generation").alias("_bg"))
    j = w.join(r, (w["cluster"] == r["_c"]) & (w["group_id"] == r["_g"]) & (r["_et"] > w["_at"])
               & (r["_et"] <= w["_hi"]) & (r["_em"] == w["_bm"])
               & (w["_bg"].isNull() | (F.col("_rec.generation") == w["_bg"])))
    seen = F.col("_et") <= F.col("_bt")
    last = j.groupBy("_wid").agg(F.coalesce(
        F.max_by(F.when(seen, F.col("_rec")), F.when(seen, F.col("_et"))),
        F.min_by(F.when(~seen, F.col("_rec")), F.when(~seen, F.col("_et")))).alias("_rec"))
    return (win.join(last, "_wid", "left").withColumn("_b_gen_t", F.col("_rec.t"))
            .withColumn("_b_gen", F.col("_rec.generation")).drop("_rec"))


def _hi() -> Column:
    """A sweep window's latest record time of generation B: the sweep after B, else one interval after it."""
    return F.coalesce(F.col("b_next_t"), F.col("b.t") + (F.col("b.t") - F.col("b_prev_t")))


#: what a sweep window claimed of the records, carried on its B (``groups.MSWEEP_SCHEMA``)
CLAIMS = ("claimed_gen_t", "claim_hi")


def _missed_generations(win: DataFrame, gens: DataFrame, msweeps: DataFrame) -> DataFrame:
    """Windows of the generations no sweep saw (a rebalance shorter than the sweep interval
    with the same members before and after, or one of several between two sweeps): each
    generation record whose members or generation differ from the group's previous generation
    record, at or before the group's last settled sweep and after the settled sweep the state
    carried in (so that an incremental step reports it once; generations before the group's
    first settled sweep count: every generation change is a rebalance), that is neither the end
    of a sweep window nor inside a sweep window without one (that window stands for it), nor
    after a settled sweep since the previous record that saw members of neither. A = the
    previous record, B = this one; they have the columns of the sweep windows (times are record
    times)."""
    snap = F.struct(F.col("gen_t").alias("t"), "generation", "member_ids", "instances", "owners")
    rw = Window.partitionBy(*_G).orderBy("gen_t")
    g = (gens.where(F.size(F.coalesce(F.col("member_ids"), F.array())) > 0)
         .withColumn("a", F.lag(snap).over(rw)).withColumn("b", snap)
         .where(F.col("a").isNotNull() & ((F.col("a.member_ids") != F.col("b.member_ids"))
                                          | (F.col("a.generation") != F.col("b.generation")))))
    # (the records up to the end a window claimed are judged with it: in an earlier step when
    # carried, in this one when the window is this step's)
    span = msweeps.where("settled").select(
        *_G, F.when(F.col("is_state"), F.greatest(F.col("t"), F.col("claimed_gen_t"))).alias("_s"),
        F.col("t").alias("_l")).unionByName(win.where(F.col("_b_gen_t").isNotNull()).select(
            *_G, F.lit(None).cast("double").alias("_s"), F.col("_b_gen_t").alias("_l"))).groupBy(*_G).agg(
        F.max("_s").alias("_seen"), F.max("_l").alias("_last"))
    g = g.join(span, [*_G]).where((F.col("_seen").isNull() | (F.col("gen_t") > F.col("_seen")))
                                  & (F.col("gen_t") <= F.col("_last")))
    # (with what the windows of earlier steps claimed: those ending at the carried settled sweeps)
    carried = msweeps.where(F.col("settled") & F.col("is_state"))
    ends = win.where(F.col("_b_gen_t").isNotNull()).select(*_G, F.col("_b_gen_t").alias("gen_t")).unionByName(
        carried.where(F.col("claimed_gen_t").isNotNull()).select(*_G, F.col("claimed_gen_t").alias("gen_t")))
    g = g.join(ends, [*_G, "gen_t"], "left_anti")
    open_ = win.where(F.col("_b_gen_t").isNull()).select(
        F.col("cluster").alias("_c"), F.col("group_id").alias("_g"), F.col("a.t").alias("_lo"), _hi().alias("_hi"))
    open_ = open_.unionByName(carried.where(F.col("claim_hi").isNotNull()).select(
        F.col("cluster").alias("_c"), F.col("group_id").alias("_g"), F.col("t").alias("_lo"),
        F.col("claim_hi").alias("_hi")))
    g = g.join(open_, (g["cluster"] == open_["_c"]) & (g["group_id"] == open_["_g"]) & (g["gen_t"] > open_["_lo"])
               & (g["gen_t"] <= open_["_hi"]), "left_anti")
    # nor two records between which the latest settled sweep saw members of neither (a record missing)
    between = msweeps.where("settled").select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                                              F.col("t").alias("_t"), F.array_sort("member_ids").alias("_m"))
    latest = (g.join(between, (g["cluster"] == between["_c"]) & (g["group_id"] == between["_g"])
                     & (between["_t"] > F.col("a.t")) & (between["_t"] < g["gen_t"]))
              .groupBy(*_G, "gen_t").agg(F.max_by("_m", "_t").alias("_between")))
    g = g.join(latest, [*_G, "gen_t"], "left").where(
        F.col("_between").isNull() | (F.col("_between") == F.array_sort("a.member_ids"))
        | (F.col("_between") == F.array_sort("b.member_ids"))).drop("_between")
    return g.select(*_G, "a", "b", F.col("gen_t").alias("b_prev_t"), F.col("gen_t").alias("b_next_t"),
                    F.col("gen_t").alias("a_next_t"), F.xxhash64("cluster", "group_id", "gen_t").alias("_wid"),
                    F.col("gen_t").alias("_b_gen_t"), F.col("generation").alias("_b_gen"),
                    F.lit(True).alias("_from_rec"))


def _start_after_missed(win: DataFrame) -> DataFrame:
    """One window per generation change: a sweep window ending at a record (``_b_gen_t``) with
    windows from the records alone (``_from_rec``) ending between its A and that record starts at
    the latest of their Bs (A := that record, A⁺ := its end). ``_a_rec``: A is a record."""
    rec = win.where("_from_rec").select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                                       F.col("b").alias("_rb"))
    sw = win.where(~F.col("_from_rec") & F.col("_b_gen_t").isNotNull()).select("_wid", "cluster", "group_id",
                                                                               F.col("a.t").alias("_at"), "_b_gen_t")
    j = sw.join(rec, (sw["cluster"] == rec["_c"]) & (sw["group_id"] == rec["_g"]) & (F.col("_rb.t") > F.col("_at"))
                & (F.col("_rb.t") < F.col("_b_gen_t")))
    latest = j.groupBy("_wid").agg(F.max_by("_rb", "_rb.t").alias("_new_a"))
    moved = F.col("_new_a").isNotNull()
    return (win.join(latest, "_wid", "left")
            .withColumn("a", F.when(moved, F.col("_new_a")).otherwise(F.col("a")))
            .withColumn("a_next_t", F.when(moved, F.col("_b_gen_t")).otherwise(F.col("a_next_t")))
            .withColumn("_a_rec", F.col("_from_rec") | moved).drop("_new_a"))


def _left_by(win: DataFrame, msweeps: DataFrame, empty_records: DataFrame | None) -> DataFrame:
    """Per window: ``_left_by``, the first sight of the group Empty (an Empty sweep, a record
    without members) in (A, A⁺]."""
    sights = msweeps.where(F.col("group_state") == "Empty").select(
        F.col("cluster").alias("_ec"), F.col("group_id").alias("_eg"), F.col("t").alias("_et"))
    if empty_records is not None:
        sights = sights.unionByName(empty_records.select(F.col("cluster").alias("_ec"), F.col("group_id").alias("_eg"),
                                                         F.col("gen_t").alias("_et")))
    w = win.select("_wid", "cluster", "group_id", F.col("a.t").alias("_at"), "a_next_t")
    j = w.join(sights, (w["cluster"] == sights["_ec"]) & (w["group_id"] == sights["_eg"])
               & (F.col("_et") > F.col("_at"))
               & (F.col("_et") <= F.col("a_next_t")))
    return win.join(j.groupBy("_wid").agg(F.min("_et").alias("_left_by")), "_wid", "left")


#: builds a step's per-sweep rebalance inputs (``alive``, ``group_lag``, ``changes``: see
#: :func:`transform_rebalances`) for the groups of a ``cluster, group_id`` frame
ProgressInputs = Callable[[DataFrame], tuple[DataFrame, DataFrame, DataFrame]]


def transform_rebalances(
    msweeps: DataFrame,
    inputs: ProgressInputs,
    *,
    generations: DataFrame | None = None,
    empty_records: DataFrame | None = None,
    commits: DataFrame | None = None,
    session_timeout_s: float = 45.0,
    heartbeat_s: float = 3.0,
    network_s: float = 1.0,
    rebalance_timeout_s: float = 300.0,
    leave_gap_s: float = 2.0,
) -> DataFrame:
    """Rebalance windows.

    - ``msweeps``: :func:`member_sweeps` rows (state rows of the previous step included);
    - ``inputs``: called with the groups that have a window (few: built for those only, since
      Spark does not push a filter on the groups below the window functions and aggregations
      they come from), returns
      ``alive`` (``cluster, group_id, owner, alive_t``: times at which a member showed progress,
      its partition's committed offset moved or it was caught up), ``group_lag``
      (``cluster, group_id, t, group_lag``: Σ lag per sweep) and ``changes``
      (``cluster, group_id, topic, partition, t``: times the committed offset changed);
    - ``generations``: :func:`generation_records` of the ``group_events`` (optional);
      ``empty_records``: ``cluster, group_id, gen_t`` of their classic records without a member
      (the group Empty: created, or every member gone; optional);
      ``commits``: ``cluster, group_id, topic, partition, t`` exact commit times (optional).
    """
    w = Window.partitionBy(*_G).orderBy("t")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    upto = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    snap = F.struct("t", "generation", "member_ids", "instances", "owners")
    s = (msweeps.withColumn("_a", F.last(F.when(F.col("settled"), snap), ignorenulls=True).over(before))
         .withColumn("_prev_t", F.lag("t").over(w)).withColumn("_next_t", F.lead("t").over(w))
         .withColumn("_a_next_t", F.last(F.when(F.lag("settled").over(w), F.col("t")), ignorenulls=True).over(upto)))
    changed = F.col("settled") & F.col("_a").isNotNull() & (
        (F.coalesce(F.col("generation"), F.lit(-1)) != F.coalesce(F.col("_a.generation"), F.lit(-1)))
        | (F.col("member_ids") != F.col("_a.member_ids")))
    win = s.where(changed).select(
        *_G, F.col("_a").alias("a"), F.struct("t", "generation", "member_ids", "instances", "owners").alias("b"),
        F.col("_prev_t").alias("b_prev_t"), F.col("_next_t").alias("b_next_t"), F.col("_a_next_t").alias("a_next_t"))
    win = win.withColumn("_wid", F.xxhash64("cluster", "group_id", "b.t"))
    # the record of the generation B saw (the window's exact end); generations the sweeps missed
    if generations is not None:
        win = _generation_end(win, generations).withColumn("_from_rec", F.lit(False))
        win = _start_after_missed(win.unionByName(_missed_generations(win, generations, msweeps)))
    else:
        win = (win.withColumn("_b_gen_t", F.lit(None).cast("double"))
               .withColumn("_b_gen", F.lit(None).cast("int")).withColumn("_from_rec", F.lit(False))
               .withColumn("_a_rec", F.lit(False)))
    win = _left_by(win, msweeps, empty_records)
    # materialised where several uses follow (each use of a DataFrame repeats its whole plan: the
    # reference's plans grew with the square of its steps, minutes to plan a step of 5 groups)
    win = win.localCheckpoint()
    # the per-sweep inputs matter only for groups with a window (few): built for those only
    with_window = F.broadcast(win.select(*_G).distinct())
    alive, group_lag, changes = (x.localCheckpoint() for x in inputs(with_window))
    if commits is not None:
        commits = commits.join(with_window, list(_G), "left_semi").localCheckpoint()
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
    # timeouts in force at A (the group's latest record at or before it), else the defaults
    if generations is not None:
        win = _record_timeouts(win, generations)
    else:
        win = (win.withColumn("session_timeout_s", F.lit(None).cast("double"))
               .withColumn("rebalance_timeout_s", F.lit(None).cast("double"))
               .withColumn("_a_gen", F.lit(None).cast("int")))
    win = (win.withColumn("_session", F.coalesce(F.col("session_timeout_s"), F.lit(session_timeout_s)))
           .withColumn("_rebal", F.coalesce(F.col("rebalance_timeout_s"), F.lit(rebalance_timeout_s))))
    # last progress of the departed members (before A⁺)
    gone = win.select(*_G, "_wid", "a_next_t", F.explode("_gone").alias("owner"))
    al = alive.select(*_G, "owner", "alive_t")
    last_alive = (gone.join(al, [*_G, "owner"], "left")
                  .where(F.col("alive_t").isNull() | (F.col("alive_t") <= F.col("a_next_t")))
                  .groupBy("_wid", "owner").agg(F.max("alive_t").alias("_alive"))
                  .groupBy("_wid").agg(F.min("_alive").alias("_last_alive")))
    win = win.join(last_alive, "_wid", "left")
    departed_by = F.least(F.col("a_next_t"), F.col("_left_by"))  # (least skips a null)
    gap = departed_by - F.coalesce(F.col("_last_alive"), F.col("a.t"))
    prompt = gap <= F.greatest(F.lit(leave_gap_s), F.col("_session") / 4)
    nearer_session = F.abs(F.log(gap / F.col("_session"))) <= F.abs(F.log(gap / F.col("_rebal")))
    # the timeout the gap can have been: a session timeout only from session − heartbeat − network
    # on, a poll timeout only from rebalance − network on; both or neither: the nearer in ratio
    can_session = gap >= F.col("_session") - F.lit(heartbeat_s + network_s)
    can_poll = gap >= F.col("_rebal") - F.lit(network_s)
    session_cause = F.when(can_session & ~can_poll, True).when(can_poll & ~can_session, False).otherwise(
        F.coalesce(nearer_session, F.lit(False)))
    cause = (F.when(F.size("_bounced") > 0, F.lit("static_member_bounce"))
             .when(F.size("_gone") > 0, F.when(prompt & (F.size("_new") > 0) & F.col("_left_by").isNull(),
                                               F.lit("join"))
                   .when(prompt, F.lit("leave"))
                   .when(session_cause, F.lit("session_timeout")).otherwise(F.lit("max_poll_interval")))
             .when(F.size("_new") > 0, F.lit("join"))
             .otherwise(F.lit("unknown")))
    win = win.withColumn("cause", cause)
    timed_out = F.col("cause").isin("session_timeout", "max_poll_interval")
    # the change happened in (A, A⁺), and by the first sight of the group Empty when members left
    change_by = F.when(F.size("_gone") > 0, F.least(F.col("a_next_t"), F.col("_left_by"))).otherwise(
        F.col("a_next_t"))
    win = win.withColumn("_change_by", change_by)
    sweep_start = (F.col("a.t") + F.col("_change_by")) / 2
    sweep_end = (F.col("b_prev_t") + F.col("b.t")) / 2
    # the rebalance proper starts when the group stops (A → A⁺); a timed-out member stopped
    # earlier, at its last progress: that is where the bound (crash/slow member → recovered) is
    # measured from, and where its partitions' processing stopped
    sweep_end = F.when(F.col("_a_rec") & F.col("_b_gen_t").isNotNull(), F.col("_b_gen_t")).otherwise(sweep_end)
    win = (win.withColumn("_start", sweep_start).withColumn("_end", sweep_end)
           .withColumn("_quiet_from", F.when(timed_out & F.col("_last_alive").isNotNull(), F.col("_last_alive"))
                       .otherwise(sweep_start)))
    # a window from the records alone (b_prev_t = B's record time) ends at a record
    from_records = F.coalesce(F.col("_b_gen_t").isNotNull() & (F.col("b_prev_t") == F.col("b.t")), F.lit(False))
    win = win.withColumn("source", F.when(from_records, F.lit("commit_stream")).otherwise(F.lit("sweeps")))
    if commits is not None:
        win = _exact_bounds(win, commits)
    win = win.localCheckpoint()
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
    # null when either end's group lag is unknown (a window from the records alone): the
    # production rule's fix of the earlier greatest(0, null) = 0
    grew = F.col("_lb") - F.col("_la")
    win = win.withColumn("messages_accumulated", F.when(grew.isNotNull(), F.greatest(F.lit(0), grew)).cast("long"))
    win = win.join(_processing_gaps(win, commits if commits is not None else changes), "_wid", "left").localCheckpoint()
    # the group seen Empty between the sides (a sweep of a sweep window, a generation record
    # without members): for the storms' formation (:func:`formation`)
    sides = (F.col("cluster") == F.col("_ec")) & (F.col("group_id") == F.col("_eg")) & (
        F.col("a.t") < F.col("_et")) & (F.col("_et") < F.col("b.t"))
    empties = msweeps.where(F.col("group_state") == "Empty").select(
        F.col("cluster").alias("_ec"), F.col("group_id").alias("_eg"), F.col("t").alias("_et"))
    flagged = win.join(empties, sides, "left_semi").select("_wid")
    if empty_records is not None:
        flagged = flagged.union(win.join(empty_records.select(
            F.col("cluster").alias("_ec"), F.col("group_id").alias("_eg"), F.col("gen_t").alias("_et")),
            sides, "left_semi").select("_wid"))
    win = win.join(flagged.distinct().withColumn("_through_empty", F.lit(True)), "_wid", "left").withColumn(
        "_through_empty", F.coalesce(F.col("_through_empty"), F.lit(False)))
    # the group seen forming before A (:func:`formation`): an Empty sweep before A and no sweep
    # window since it that lost a member (other than through Empty), or a generation-1 record at
    # or before A and no record since it that lost a member
    # (``win`` materialised once here: each use of it repeats its whole plan, and this adds four)
    win = win.localCheckpoint()
    wk = win.select("_wid", *_G, F.col("a.t").alias("_at"))
    cand = wk.join(empties, (F.col("cluster") == F.col("_ec")) & (F.col("group_id") == F.col("_eg"))
                   & (F.col("_et") < F.col("_at"))).select("_wid", "cluster", "group_id", "_at", "_et")
    cand = cand.withColumn("_last_e", F.max("_et").over(Window.partitionBy("_wid"))).where(
        F.col("_et") == F.col("_last_e")).drop("_last_e")
    breaks = _sweep_breaks(msweeps)
    blocked = cand.join(breaks, (F.col("cluster") == F.col("_kc")) & (F.col("group_id") == F.col("_kg"))
                        & (F.col("_kt") > F.col("_et")) & (F.col("_kt") <= F.col("_at")), "left_semi")
    formed = cand.join(blocked, ["_wid", "_et"], "left_anti").select("_wid")
    if generations is not None:
        gw = Window.partitionBy(*_G).orderBy("gen_t")
        recs = generations.where(F.col("member_ids").isNotNull()).select(*_G, "gen_t", "generation", "member_ids")
        if empty_records is not None:  # the group Empty: as a record without a member
            recs = recs.unionByName(empty_records.select(*_G, "gen_t", F.lit(None).cast("int").alias("generation"),
                                                         F.array().cast("array<string>").alias("member_ids")))
        recs = recs.withColumn("_prev", F.lag("member_ids").over(gw))
        recs = recs.select(F.col("cluster").alias("_rc"), F.col("group_id").alias("_rg"), F.col("gen_t").alias("_rt"),
                           F.col("generation").alias("_rgen"),
                           (F.col("_prev").isNotNull() & (F.size(F.array_except("_prev", "member_ids")) > 0)
                            & (F.coalesce(F.col("generation"), F.lit(0)) != 1)).alias("_lost"),
                           ((F.col("generation") == 1) | (F.size("member_ids") == 0)).alias("_born"))
        same = (F.col("cluster") == F.col("_rc")) & (F.col("group_id") == F.col("_rg")) & (F.col("_rt") <= F.col("_at"))
        born = wk.join(recs.where("_born"), same).groupBy("_wid").agg(F.max("_rt").alias("_born_t"))
        lost = wk.join(recs.where("_lost"), same).select("_wid", F.col("_rt").alias("_lost_t"))
        formed = formed.union(born.join(lost, (born["_wid"] == lost["_wid"]) & (F.col("_lost_t") > F.col("_born_t")),
                                        "left_anti").select("_wid"))
    win = win.join(formed.distinct().withColumn("_formed_in_view", F.lit(True)), "_wid", "left").withColumn(
        "_formed_in_view", F.coalesce(F.col("_formed_in_view"), F.lit(False)))
    out = win.select(
        *_G, _ts(F.col("_start")).alias("start_ts"), _ts(F.col("_end")).alias("end_ts"), "duration_s", "cause",
        "source", F.coalesce(F.col("a.generation"), F.col("_a_gen")).alias("generation_before"),
        F.coalesce(F.col("b.generation"), F.col("_b_gen")).alias("generation_after"),
        F.col("a.member_ids").alias("members_before"), F.col("b.member_ids").alias("members_after"),
        "partitions_moved", "bound_s", (F.col("_observed") / F.col("bound_s")).alias("observed_over_bound"),
        "messages_accumulated", "max_processing_gap_s", _ts(F.col("_quiet_from")).alias("quiet_from_ts"),
        "_through_empty", "_formed_in_view",
        # what a sweep window claimed of the records, for the state's sweep that is its B
        F.when(~from_records, F.col("b.t")).alias("_claim_t"), F.col("_b_gen_t").alias("_claimed_gen_t"),
        F.when(F.col("_b_gen_t").isNull(), _hi()).alias("_claim_hi"))
    return out.withColumn("date", F.date_format("start_ts", "yyyy-MM-dd"))


def _sweep_breaks(msweeps: DataFrame) -> DataFrame:
    """The sweep windows that end a formation (:func:`formation`): a member before not there
    after, and no Empty sweep between the sides; ``_kc, _kg, _kt`` (B's time)."""
    w = Window.partitionBy(*_G).orderBy("t")
    before = w.rowsBetween(Window.unboundedPreceding, -1)
    snap = F.struct("t", "generation", "member_ids")
    s = msweeps.withColumn("_a", F.last(F.when(F.col("settled"), snap), ignorenulls=True).over(before))
    changed = F.col("settled") & F.col("_a").isNotNull() & (
        (F.coalesce(F.col("generation"), F.lit(-1)) != F.coalesce(F.col("_a.generation"), F.lit(-1)))
        | (F.col("member_ids") != F.col("_a.member_ids")))
    ids = F.coalesce(F.col("member_ids"), F.array().cast("array<string>"))
    a_ids = F.coalesce(F.col("_a.member_ids"), F.array().cast("array<string>"))
    lost = s.where(changed & (F.size(F.array_except(a_ids, ids)) > 0)).select(
        F.col("cluster").alias("_kc"), F.col("group_id").alias("_kg"), F.col("_a.t").alias("_ka"),
        F.col("t").alias("_kt"))
    empties = msweeps.where(F.col("group_state") == "Empty").select(*_G, F.col("t").alias("_et"))
    through = lost.join(empties, (F.col("_kc") == F.col("cluster")) & (F.col("_kg") == F.col("group_id"))
                        & (F.col("_et") > F.col("_ka")) & (F.col("_et") < F.col("_kt")), "left_semi")
    return lost.join(through, ["_kc", "_kg", "_ka", "_kt"], "left_anti").select("_kc", "_kg", "_kt")


def formation(rb: DataFrame) -> DataFrame:
    """``rb`` with ``_forming``: the rebalance belongs to its group's formation (it only adds
    members, and so did every rebalance since the group was last seen Empty). By group in start
    order: a row is a pure join (``_join``: its members before a subset of those after, not
    through Empty); a chain starts at a row whose group had no member before it, whose generation
    before was 1 or, the group's first row, which saw the group forming before its A
    (``_formed_in_view``), and at the row
    after one that went through Empty or left the group without a member; a pure join is
    formation when a chain started at or before it and no row that is not a pure join lies
    between that start and it."""
    w = Window.partitionBy(*_G).orderBy("start_ts", "end_ts")
    before, after = F.col("members_before"), F.col("members_after")
    join = (before.isNotNull() & after.isNotNull() & ~F.col("_through_empty")
            & (F.size(F.array_except(before, after)) == 0))
    emptied = F.col("_through_empty") | (after.isNotNull() & (F.size(after) == 0))
    starts = ((before.isNotNull() & (F.size(before) == 0)) | (F.col("generation_before") == 1)
              | (F.col("_formed_in_view") & (F.row_number().over(w) == 1))
              | F.coalesce(F.lag(emptied).over(w), F.lit(False)))
    r = rb.withColumn("_i", F.row_number().over(w)).withColumn("_join", join)
    last_start = F.max(F.when(starts, F.col("_i"))).over(w.rowsBetween(Window.unboundedPreceding, 0))
    last_break = F.max(F.when(~F.col("_join"), F.col("_i"))).over(w.rowsBetween(Window.unboundedPreceding, -1))
    forming = F.col("_join") & last_start.isNotNull() & (last_start > F.coalesce(last_break, F.lit(0)))
    return r.withColumn("_forming", forming).drop("_i", "_join")


def _exact_bounds(win: DataFrame, commits: DataFrame) -> DataFrame:
    """Commit-stream boundaries (eager protocols: nobody processes during a rebalance, and each
    member commits when its partitions are revoked).

    - end = the record of generation B (``_b_gen_t``), when the tail wrote one;
    - start = the earliest of the surviving members' last commits in [A, end] (each one's
      revocation commit: the first of them is when the rebalance reached the group), else the
      group's last commit in [A, end]; for a static member bounce, the bounced member's last
      commit before end (its absence); with no such commit, the middle of (A, end) when the end
      is exact and before A⁺ (else the sweeps' midpoint of (A, A⁺)); never after the end;
    - a timed-out member's last progress = the last commit of its partitions before A⁺.
    """
    has_end = F.col("_b_gen_t").isNotNull()
    win = win.withColumn("_end", F.when(has_end, F.col("_b_gen_t")).otherwise(F.col("_end")))
    c = commits.select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                       F.concat_ws("/", "topic", F.col("partition").cast("string")).alias("_ctp"),
                       F.col("t").alias("_ct"))
    mid_iid = F.map_from_entries(F.transform(F.col("a.instances"), lambda x: F.struct(x["mid"], x["iid"])))
    gone_owners = F.transform(F.col("_gone"), lambda m: F.coalesce(F.element_at(mid_iid, m), m))
    b_owners = F.array_distinct(F.transform(F.col("b.owners"), lambda x: x["owner"]))
    owners = win.select("_wid", "cluster", "group_id",
                        F.least(F.col("a_next_t"), F.col("_left_by")).alias("a_next_t"),  # (the departure)
                        "_end", F.col("a.t").alias("_at"),
                        (F.col("a.t") - F.col("_session") - F.col("_rebal")).alias("_lo"),
                        gone_owners.alias("_gone_o"), b_owners.alias("_b_o"), "_bounced",
                        F.explode("a.owners").alias("_o"))
    tps = owners.select("_wid", "cluster", "group_id", "a_next_t", "_end", "_at", "_lo",
                        F.col("_o.owner").alias("_own"),
                        F.array_contains("_gone_o", F.col("_o.owner")).alias("_is_gone"),
                        F.array_contains("_b_o", F.col("_o.owner")).alias("_is_surv"),
                        F.array_contains("_bounced", F.col("_o.owner")).alias("_is_bounced"),
                        F.col("_o.tp").alias("_tp"))
    j = tps.join(c, (tps["cluster"] == c["_c"]) & (tps["group_id"] == c["_g"]) & (tps["_tp"] == c["_ctp"])
                 & (c["_ct"] <= tps["_end"]) & (c["_ct"] >= tps["_lo"]), "inner")
    recent = F.col("_ct") >= F.col("_at")
    per_owner = j.groupBy("_wid", "_own").agg(
        F.max(F.when(F.col("_is_gone") & (F.col("_ct") <= F.col("a_next_t")), F.col("_ct"))).alias("_gone_last"),
        F.max(F.when(F.col("_is_bounced"), F.col("_ct"))).alias("_bounce_last"),
        F.max(F.when(F.col("_is_surv") & recent, F.col("_ct"))).alias("_surv_last"),
        F.max(F.when(recent, F.col("_ct"))).alias("_group_last"))
    last = per_owner.groupBy("_wid").agg(
        F.max("_gone_last").alias("_gone_last"),
        F.max("_bounce_last").alias("_bounce_last"), F.min("_surv_last").alias("_surv_start"),
        F.max("_group_last").alias("_group_last"))
    win = win.join(last, "_wid", "left")
    static = F.col("cause") == "static_member_bounce"
    # no commit to go by: the sweeps' estimate within an exact end (the change happened in (A, end])
    by = F.least(F.col("_end"), F.col("_change_by"))
    estimate = F.when(has_end & (by < F.col("a_next_t")), (F.col("a.t") + by) / 2).otherwise(F.col("_start"))
    start = F.when(static, F.coalesce(F.col("_bounce_last"), estimate)).otherwise(
        F.coalesce(F.col("_surv_start"), F.col("_group_last"), estimate))
    start = F.least(start, F.col("_end"))
    timed_out = F.col("cause").isin("session_timeout", "max_poll_interval")
    quiet = (F.when(timed_out & F.col("_gone_last").isNotNull(), F.col("_gone_last"))
             .when(static, F.col("_start")).otherwise(F.col("_quiet_from")))
    return (win.withColumn("_start", start)
            .withColumn("_quiet_from", quiet)
            .withColumn("source", F.when(has_end, F.lit("commit_stream")).otherwise(F.col("source")))
            .drop("_gone_last", "_bounce_last", "_surv_start", "_group_last", "_change_by"))


def _member_commits(commits: DataFrame, gens: DataFrame | None, empty_records: DataFrame | None) -> DataFrame:
    """``commits`` without those written while the group was Empty: its latest ``group_metadata``
    record strictly before the commit has no member."""
    if gens is None or empty_records is None:
        return commits
    marks = gens.where(F.col("member_ids").isNotNull()).select(*_G, "gen_t", F.lit(False).alias("_empty")).unionByName(
        empty_records.select(*_G, "gen_t", F.lit(True).alias("_empty")))
    m = marks.select(F.col("cluster").alias("_mc"), F.col("group_id").alias("_mg"), F.col("gen_t").alias("_mt"),
                     "_empty")
    c = commits.withColumn("_cid", F.monotonically_increasing_id()).localCheckpoint()  # (ids fixed once)
    j = c.join(m, (c["cluster"] == m["_mc"]) & (c["group_id"] == m["_mg"]) & (m["_mt"] < c["t"]))
    latest = j.groupBy("_cid").agg(F.max_by("_empty", "_mt").alias("_e"))
    return c.join(latest, "_cid", "left").where(~F.coalesce(F.col("_e"), F.lit(False))).drop("_cid", "_e")


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

# ---------------------------------------------------------------- findings.py (storms, outages)

ANOMALY_COLUMNS = ["cluster", "group_id", "topic", "partition", "kind", "start_ts", "end_ts",
                   "severity", "magnitude", "unit", "detail", "key"]


def _key(kind: Column, start: Column) -> Column:
    return F.concat_ws("|", kind, F.col("cluster"), F.col("group_id"), F.coalesce(F.col("topic"), F.lit("")),
                       F.coalesce(F.col("partition").cast("string"), F.lit("")),
                       F.unix_millis(start).cast("string"))


def finish(df: DataFrame) -> DataFrame:
    """Add ``key`` and order the columns as the table has them."""
    return df.withColumn("key", _key(F.col("kind"), F.col("start_ts"))).select(*ANOMALY_COLUMNS)


def _storm_pass(rebalances: DataFrame, *, count: int, window_s: float) -> DataFrame:
    """Rebalances (``cluster, group_id, start_ts, end_ts``, optionally ``is_state``) with ``_t``
    (start, ms), ``_n`` and ``_first`` (how many started within ``window_s`` before it, and the
    first of them), ``_stormy`` (``_n ≥ count``) and ``_sid`` (consecutive stormy rebalances
    share it)."""
    ctx = F.coalesce(F.col("is_state"), F.lit(False)) if "is_state" in rebalances.columns else F.lit(False)
    r = rebalances.select("cluster", "group_id", "start_ts", "end_ts", ctx.alias("is_state")).withColumn(
        "_t", F.unix_millis("start_ts"))
    wg = Window.partitionBy("cluster", "group_id").orderBy("_t")
    trailing = wg.rangeBetween(-int(window_s * 1000), 0)
    r = (r.withColumn("_n", F.count("*").over(trailing)).withColumn("_first", F.min("start_ts").over(trailing)))
    r = r.withColumn("_stormy", F.col("_n") >= count)
    r = r.withColumn("_new", F.col("_stormy") & ~F.coalesce(F.lag("_stormy").over(wg), F.lit(False)))
    return r.withColumn("_sid", F.sum(F.col("_new").cast("int")).over(wg.rowsBetween(Window.unboundedPreceding, 0)))


def transform_storms(rebalances: DataFrame, *, count: int, window_s: float) -> DataFrame:
    """rebalance_storm: ``count`` or more rebalance windows starting within ``window_s``.
    Consecutive stormy rebalances form one storm, keyed by its first rebalance's start.

    Rows with ``is_state`` true are the previous step's (:func:`storm_state`): context only, a
    storm made of them alone was reported by that step (and their prefix may be cut)."""
    r = _storm_pass(rebalances, count=count, window_s=window_s)
    storms = r.where("_stormy").groupBy("cluster", "group_id", "_sid").agg(
        F.min("_first").alias("start_ts"), F.max("end_ts").alias("end_ts"), F.max("_n").alias("_n"),
        F.min("is_state").alias("_old")).where(~F.col("_old"))
    out = storms.select(
        "cluster", "group_id", F.lit(None).cast("string").alias("topic"), F.lit(None).cast("int").alias("partition"),
        F.lit("rebalance_storm").alias("kind"), "start_ts", "end_ts", F.lit("warning").alias("severity"),
        F.col("_n").cast("double").alias("magnitude"), F.lit("rebalances").alias("unit"),
        F.format_string("%d rebalances within %.0f s", F.col("_n"), F.lit(window_s)).alias("detail"))
    return finish(out)


def storm_state(rebalances: DataFrame, *, count: int, window_s: float) -> DataFrame:
    """The rebalances the next step's storms need (``cluster, group_id, start_ts, end_ts``):
    those starting within ``window_s`` before the group's last one, and, when the last one is
    part of a storm, the storm's and those within ``window_s`` before its first (so the storm
    keeps its start, end and size however long it lasts)."""
    r = _storm_pass(rebalances, count=count, window_s=window_s)
    g = Window.partitionBy("cluster", "group_id")
    # the open storm: the one of the group's last rebalance, when that one is stormy
    r = r.withColumn("_open", F.max_by(F.when(F.col("_stormy"), F.col("_sid")), F.col("_t")).over(g))
    r = r.withColumn("_since", F.coalesce(F.min(F.when(F.col("_stormy") & (F.col("_sid") == F.col("_open")),
                                                       F.col("_t"))).over(g), F.max("_t").over(g)))
    return r.where(F.col("_t") >= F.col("_since") - int(window_s * 1000)).select(
        "cluster", "group_id", "start_ts", "end_ts")


def drop_rebalance_outages(episodes: DataFrame, rebalances: DataFrame, idle_after_s: float = 0.0) -> DataFrame:
    """Stall, stop and commit-gap anomalies that lie inside one of the group's rebalance outages (from the
    departed member's last progress, ``quiet_from_ts``, to the end of the window) are the
    rebalance, already reported as such: drop them. A stall or stop that began less than
    ``idle_after_s`` before the outage was none yet when it began: it lies inside too. An open
    episode (``end_ts`` null) lasts at least to its last sweep (start + its duration, the
    magnitude in s): one still going after the group settled is not the rebalance."""
    rb = rebalances.select(F.col("cluster").alias("_c"), F.col("group_id").alias("_g"),
                           F.col("quiet_from_ts").alias("_q0"),
                           F.coalesce(F.col("end_ts"), F.col("start_ts")).alias("_q1"))
    seen_to = F.timestamp_micros(F.unix_micros("start_ts") + (F.coalesce(F.col("magnitude"), F.lit(0.0))
                                                               * F.lit(1e6)).cast("long"))
    # by ``key`` (an anomaly's identity): a generated row id is not stable across the two
    # evaluations of ``episodes`` (the join side and the kept side may be partitioned apart)
    # a commit gap that began inside it is the rebalance's processing gap, however it ends
    ends_inside = F.coalesce(F.col("end_ts"), seen_to) <= F.col("_q1") + F.expr("INTERVAL 1 SECOND")
    gap_began = (F.col("kind") == "commit_gap") & (F.col("start_ts") <= F.col("_q1") + F.expr("INTERVAL 1 SECOND"))
    q0 = F.unix_micros("_q0")
    began = (F.unix_micros("start_ts") >= q0 - 1_000_000) | (
        (F.col("kind") != "commit_gap") & (F.unix_micros("start_ts") > q0 - int(idle_after_s * 1e6)))
    inside = (episodes.where(F.col("kind").isin("stall", "stop", "commit_gap"))
              .join(rb, (F.col("cluster") == F.col("_c")) & (F.col("group_id") == F.col("_g"))
                    & began & (ends_inside | gap_began))
              .select("key").distinct())
    return episodes.join(inside, "key", "left_anti")


# ---------------------------------------------------------------- series.py: the ``changed`` mark of enrich_series

def _changed_series(series: DataFrame, state: DataFrame | None) -> DataFrame:
    """``enrich_series`` reduced to what the rebalance inputs read: ``changed`` (the committed
    offset differs from the previous row's; never on a state row), the rows in the same order."""
    df = series.withColumn("is_state", F.lit(False))
    for name in ("m_change_t", "m_alive_t"):
        df = df.withColumn(name, F.lit(None).cast("double"))
    if state is not None:
        st = state.withColumn("is_state", F.lit(True))
        if "m_alive_t" not in st.columns:
            st = st.withColumn("m_alive_t", F.lit(None).cast("double"))
        df = df.unionByName(st.select(*df.columns), allowMissingColumns=True)
    df = df.withColumn("window_start", F.date_trunc("minute", F.col("ts")))
    w = Window.partitionBy(*KEY).orderBy("window_start", "t")
    df = df.withColumn("prev_committed", F.lag("committed").over(w))
    df = df.withColumn("dc", F.col("committed") - F.col("prev_committed"))
    return df.withColumn("changed", F.col("committed").isNotNull() & ~F.col("is_state")
                         & (F.col("prev_committed").isNull() | (F.col("dc") != 0)))


# ---------------------------------------------------------------- job.py: the glue of run_step

def _group_lag(series: DataFrame) -> DataFrame:
    """``cluster, group_id, t, group_lag``: Σ lag per sweep, each partition once (a sweep written
    twice is in the lake twice)."""
    return (series.select(*KEY, "t", "lag").dropDuplicates([*KEY, "t"])
            .groupBy("cluster", "group_id", "t").agg(F.sum("lag").alias("group_lag")))


def _progress_inputs(series: DataFrame, st: dict[str, DataFrame],
                     groups: DataFrame) -> tuple[DataFrame, DataFrame, DataFrame]:
    g = ["cluster", "group_id"]
    ser = series.join(groups, g, "left_semi")
    carried = st["series"].join(groups, g, "left_semi") if st.get("series") is not None else None
    fresh = _changed_series(ser, carried).where(~F.col("is_state"))
    alive = fresh.where(F.col("owner").isNotNull() & (F.col("changed") | (F.coalesce(F.col("lag"), F.lit(0)) == 0)))
    alive = alive.select("cluster", "group_id", "owner", F.col("t").alias("alive_t"))
    changes = fresh.where(F.col("changed")).select(*KEY, "t")
    if carried is not None:
        # the owners' last progress before the step (m_alive_t: a change seen while nobody owned the
        # partition is nobody's; a state written before it: the last change) of the owner of its
        # row then (alive_owner; change_owner for m_change_t), else of its owner, else of the
        # member that held it before it left
        cols = carried.columns
        before, then = ((F.col("m_alive_t"), "alive_owner") if "m_alive_t" in cols
                        else (F.col("m_change_t"), "change_owner"))
        who = F.coalesce(F.col("owner"), F.col("owner_last")) if "owner_last" in cols else F.col("owner")
        if then in cols:  # the owner of the row then
            who = F.coalesce(F.col(then), who)
        alive = alive.unionByName(carried.where(who.isNotNull() & before.isNotNull())
                                  .select("cluster", "group_id", who.alias("owner"), before.alias("alive_t")))
        changes = changes.unionByName(carried.where(F.col("m_change_t").isNotNull()).select(
            *KEY, F.col("m_change_t").alias("t")))
    if st.get("member_progress") is not None:  # each member's last progress of the earlier steps
        alive = alive.unionByName(st["member_progress"].join(groups, g, "left_semi").select(
            "cluster", "group_id", F.col("member_id").alias("owner"), "alive_t"))
    alive = alive.groupBy("cluster", "group_id", "owner").agg(F.max("alive_t").alias("alive_t"))
    group_lag = _group_lag(ser)
    if st.get("msweeps") is not None:
        group_lag = group_lag.unionByName(st["msweeps"].where(F.col("group_lag").isNotNull()).join(
            groups, g, "left_semi").select("cluster", "group_id", "t", "group_lag"))
    return alive, group_lag, changes


def _df(spark: SparkSession, table: pa.Table | None) -> DataFrame | None:
    return None if table is None else spark.createDataFrame(table)


def reference_group_pass(spark: SparkSession, *, members: pa.Table, series: pa.Table,
                         carried_series: pa.Table | None, carried_msweeps: pa.Table | None,
                         recent_rebalances: pa.Table | None, group_events: pa.Table | None,
                         commits: pa.Table | None, anomalies: pa.Table, settings: Any,
                         carried_member_progress: pa.Table | None = None) -> dict[str, pa.Table]:
    """The group-level part of ``job.run_step`` (commit 945dae5) over Arrow inputs: ``series`` has
    ``KEY, ts, t, committed, lag, owner``; ``anomalies`` the ANOMALY_COLUMNS. Returns the tables
    ``rebalances`` (without ``quiet_from_ts``), ``anomalies`` (with ``date``), ``msweeps`` and
    ``recent_rebalances`` as Arrow."""
    p = settings.rules
    st: dict[str, DataFrame] = {}
    ser = _df(spark, series)
    assert ser is not None
    if carried_series is not None:
        st["series"] = _df(spark, carried_series)  # type: ignore[assignment]
    if carried_msweeps is not None:
        st["msweeps"] = _df(spark, carried_msweeps)  # type: ignore[assignment]
    if recent_rebalances is not None:
        st["recent_rebalances"] = _df(spark, recent_rebalances)  # type: ignore[assignment]
    if carried_member_progress is not None and carried_member_progress.num_rows:
        st["member_progress"] = _df(spark, carried_member_progress)  # type: ignore[assignment]
    mem = _df(spark, members)
    assert mem is not None
    msweeps = member_sweeps(mem).withColumn("is_state", F.lit(False))
    if st.get("msweeps") is not None:
        msweeps = msweeps.unionByName(st["msweeps"].drop("group_lag"), allowMissingColumns=True)
    for c in CLAIMS:
        if c not in msweeps.columns:
            msweeps = msweeps.withColumn(c, F.lit(None).cast("double"))
    msweeps = msweeps.localCheckpoint()  # read by every part of the statement
    commit_times = None
    cm = _df(spark, commits)
    if cm is not None:
        commit_times = cm.where(F.col("committed_offset").isNotNull()).select(
            *KEY, _secs(F.coalesce(F.col("commit_ts"), F.col("record_ts"))).alias("t"))
    ge = _df(spark, group_events)
    gens = generation_records(ge) if ge is not None else None
    empty_recs = None if ge is None else ge.where(
        (F.col("record_type") == "group_metadata") & (F.size("members") == 0)).select(
        *_G, _secs(F.col("record_ts")).alias("gen_t"))
    if commit_times is not None:
        commit_times = _member_commits(commit_times, gens, empty_recs)
    rb = transform_rebalances(
        msweeps, lambda groups: _progress_inputs(ser, st, groups),
        generations=gens, empty_records=empty_recs, commits=commit_times,
        session_timeout_s=settings.session_timeout_s, heartbeat_s=settings.heartbeat_s,
        network_s=settings.network_s, rebalance_timeout_s=settings.rebalance_timeout_s)
    rb_arrow = rb.toArrow()
    rb = spark.createDataFrame(rb_arrow, schema=rb.schema)
    # a static member's bounce is no rebalance: it never counts toward a storm; nor does a
    # rebalance of the group's formation
    recent_in = formation(rb).where(F.coalesce(F.col("cause") != "static_member_bounce", F.lit(True))
                                    & ~F.col("_forming")).select(
        "cluster", "group_id", "start_ts", "end_ts", F.lit(False).alias("is_state"))
    if st.get("recent_rebalances") is not None:
        recent_in = recent_in.unionByName(st["recent_rebalances"].select(
            "cluster", "group_id", "start_ts", "end_ts", F.lit(True).alias("is_state")))
    storms = transform_storms(recent_in, count=p.storm_count, window_s=p.storm_window_s)
    an = _df(spark, anomalies.select(ANOMALY_COLUMNS))
    assert an is not None
    quiet = drop_rebalance_outages(an, rb, min(p.stall_after_s, p.stop_after_s))
    out_anomalies = quiet.unionByName(storms).withColumn("date", F.date_format("start_ts", "yyyy-MM-dd"))
    settled_w = Window.partitionBy("cluster", "group_id")
    # each group's sweeps since its last settled one, and the Empty sweep before that one while
    # no sweep window since it lost a member (the group still forming)
    ms = msweeps.withColumn("_last_settled", F.max(F.when(F.col("settled"), F.col("t"))).over(settled_w))
    ms = ms.withColumn("_last_empty", F.max(F.when((F.col("group_state") == "Empty")
                                                  & (F.col("t") < F.col("_last_settled")), F.col("t"))).over(settled_w))
    brk = _sweep_breaks(msweeps)
    broken = ms.select(*_G, "_last_settled", "_last_empty").distinct().join(
        brk, (F.col("cluster") == F.col("_kc")) & (F.col("group_id") == F.col("_kg"))
        & (F.col("_kt") > F.col("_last_empty")) & (F.col("_kt") <= F.col("_last_settled")), "left_semi").select(
        *_G, F.lit(True).alias("_broken"))
    ms = ms.join(broken, _G, "left")
    ms = ms.where(F.col("_last_settled").isNull() | (F.col("t") >= F.col("_last_settled"))
                  | ((F.col("t") == F.col("_last_empty")) & F.col("_broken").isNull())).drop(
        "_last_settled", "_last_empty", "_broken")
    ms_at = ms.select("cluster", "group_id", "t")
    lag_at = _group_lag(ser.join(F.broadcast(ms_at), ["cluster", "group_id", "t"], "left_semi"))
    if st.get("msweeps") is not None:
        lag_at = lag_at.unionByName(st["msweeps"].where(F.col("group_lag").isNotNull()).select(
            "cluster", "group_id", "t", "group_lag"))
    ms = ms.withColumn("is_state", F.lit(True)).join(lag_at, ["cluster", "group_id", "t"], "left")
    claims = rb.where(F.col("_claim_t").isNotNull()).select(*_G, F.col("_claim_t").alias("t"), "_claimed_gen_t",
                                                            "_claim_hi")
    ms = ms.join(claims, [*_G, "t"], "left").withColumn(
        "claimed_gen_t", F.coalesce("claimed_gen_t", "_claimed_gen_t")).withColumn(
        "claim_hi", F.coalesce("claim_hi", "_claim_hi")).drop("_claimed_gen_t", "_claim_hi")
    recent = storm_state(recent_in, count=p.storm_count, window_s=p.storm_window_s)
    return {"rebalances": rb_arrow.drop_columns(["quiet_from_ts", "_through_empty", "_formed_in_view", "_claim_t",
                                                 "_claimed_gen_t", "_claim_hi"]),
            "anomalies": out_anomalies.toArrow(),
            "msweeps": ms.toArrow(), "recent_rebalances": recent.toArrow()}
