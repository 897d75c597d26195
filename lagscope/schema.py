"""The lake contract: every table lagscope writes, each field with its meaning and unit.

This module is the source of truth for the sample lake (written by the collector) and the
result tables (written by the analytics). docs/lake.md points here.

Layout (Hive-style partitions, readable by Spark, DuckDB and pyarrow as they are)::

    <lake>/<table>/cluster=<name>/date=<YYYY-MM-DD>/<file>.parquet

- Files are written whole under a temporary name and renamed into place (see
  :mod:`lagscope.lake`), so a crash never leaves half a file and a reader never sees one.
- Every file carries ``lagscope.schema_version`` and ``lagscope.table`` in its Parquet
  key-value metadata.
- Timestamps are UTC, ``timestamp[ms, tz=UTC]``. Offsets are int64. Durations say their unit
  in their name (``_ms``, ``_s``).
- ``cluster`` and ``date`` are partition columns: they are in the path, not in the file.

Sample lake tables (collector): ``offsets``, ``members``, ``sweeps``; with the
``__consumer_offsets`` tail on: ``commits``, ``group_events``, ``batch_probes``.
Result tables (analytics): ``lag_trends``, ``rebalances``, ``anomalies``, ``status``, ``advice``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

__all__ = [
    "ADVICE",
    "ANOMALIES",
    "BATCH_PROBES",
    "COMMITS",
    "GROUP_EVENTS",
    "LAG_TRENDS",
    "MEMBERS",
    "OFFSETS",
    "PARTITION_COLUMNS",
    "REBALANCES",
    "RESULT_TABLES",
    "SAMPLE_TABLES",
    "SCHEMA_VERSION",
    "STATUS",
    "SWEEPS",
    "TABLES",
    "Table",
]

#: bumped when a table's columns change meaning or type; readers check it
SCHEMA_VERSION = 1

#: the partition columns of every table, in path order
PARTITION_COLUMNS = ("cluster", "date")

TS = pa.timestamp("ms", tz="UTC")


def _f(name: str, type_: pa.DataType, doc: str, *, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable, metadata={"doc": doc})


@dataclass(frozen=True)
class Table:
    """A lake table: its name, its Arrow schema (without the partition columns), its purpose."""

    name: str
    schema: pa.Schema
    doc: str


_ASSIGNMENT = pa.list_(pa.struct([("topic", pa.string()), ("partition", pa.int32())]))

# --------------------------------------------------------------------------------------------
# Sample lake (collector)
# --------------------------------------------------------------------------------------------

OFFSETS = Table("offsets", pa.schema([
    _f("sweep_ts", TS, "The sweep's timestamp: one value for every row of one sweep.", nullable=False),
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("topic", pa.string(), "Topic name.", nullable=False),
    _f("partition", pa.int32(), "Partition number.", nullable=False),
    _f("committed_offset", pa.int64(),
       "The group's committed offset (the next offset it will consume); null when none."),
    _f("commit_leader_epoch", pa.int32(), "Leader epoch stored with the commit; null when unknown."),
    _f("commit_metadata", pa.string(), "Metadata string stored with the commit; null when none."),
    _f("log_start_offset", pa.int64(), "Earliest offset still in the log (ListOffsets earliest)."),
    _f("log_end_offset", pa.int64(), "High watermark (ListOffsets latest, read_uncommitted)."),
    _f("last_stable_offset", pa.int64(),
       "Last stable offset (ListOffsets latest, read_committed): the end for read_committed "
       "consumers; equals log_end_offset when no transaction is open."),
    _f("member_id", pa.string(), "Current owner's member id; null when unassigned."),
    _f("client_id", pa.string(), "Current owner's client.id; null when unassigned."),
    _f("host", pa.string(), "Current owner's host as the coordinator sees it; null when unassigned."),
    _f("group_state", pa.string(),
       "Group state at the sweep: Stable, PreparingRebalance, CompletingRebalance, Empty, Dead, "
       "Assigning, Reconciling (KIP-848), Unknown."),
    _f("lag", pa.int64(),
       "Offset lag at the sweep (lagscope.lag.offset_lag): max(0, end - committed), end = "
       "last_stable_offset for read_committed groups (the cluster's read_committed_groups) else "
       "log_end_offset (see lag_basis); null without a commit or without that end."),
    _f("lag_basis", pa.string(),
       "The end lag is measured against: 'lso' (last_stable_offset) or 'hw' (log_end_offset, also "
       "for a read_committed group whose last stable offset is unknown); null when that end is "
       "unknown. Null in files written before the column existed (see docs/collector.md)."),
    _f("committed_record_ts", TS,
       "Produce timestamp of the record at committed_offset (the next unconsumed message), when "
       "the collector fetched it for a lagging partition; null otherwise. Makes lag_seconds exact "
       "(analytics)."),
]), "One row per (sweep, group, topic, partition).")

MEMBERS = Table("members", pa.schema([
    _f("sweep_ts", TS, "The sweep's timestamp.", nullable=False),
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("group_state", pa.string(), "Group state at the sweep (see offsets.group_state)."),
    _f("protocol_type", pa.string(), "'consumer' for consumer groups; other types for Connect etc."),
    _f("protocol", pa.string(),
       "Assignor (classic protocol: range, roundrobin, cooperative-sticky, …) or the server "
       "assignor (KIP-848: uniform, range)."),
    _f("group_protocol", pa.string(), "'classic' or 'consumer' (KIP-848)."),
    _f("generation", pa.int32(), "Generation id (classic) or group epoch (KIP-848); null if unknown."),
    _f("member_id", pa.string(), "Member id; null for a group with no members (one row with nulls)."),
    _f("group_instance_id", pa.string(), "Static membership id (group.instance.id); null if dynamic."),
    _f("client_id", pa.string(), "The member's client.id."),
    _f("host", pa.string(), "The member's host as the coordinator sees it."),
    _f("subscribed_topics", pa.list_(pa.string()), "Topics the member subscribes to."),
    _f("assignment", _ASSIGNMENT, "Partitions assigned to the member."),
]), "One row per (sweep, group, member); a group with no members has one row with null member.")

SWEEPS = Table("sweeps", pa.schema([
    _f("sweep_ts", TS, "The sweep's timestamp (start).", nullable=False),
    _f("duration_ms", pa.float64(), "Wall time of the sweep in milliseconds."),
    _f("ok", pa.bool_(), "True when the sweep completed; false when it failed (see error).",
       nullable=False),
    _f("error", pa.string(), "What failed: why the sweep failed (ok false), or with ok true the groups "
       "counted in group_errors; null when nothing failed."),
    _f("groups", pa.int32(), "Groups recorded."),
    _f("partitions", pa.int32(), "Group-partition rows recorded."),
    _f("members", pa.int32(), "Member rows recorded."),
    _f("group_errors", pa.int32(), "Groups that could not be described or fetched in this sweep."),
    _f("collector", pa.string(), "Collector instance id (host:pid)."),
]), "One row per sweep, failed ones included: a gap in the data is a gap, never a zero.")

COMMITS = Table("commits", pa.schema([
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("topic", pa.string(), "Topic name.", nullable=False),
    _f("partition", pa.int32(), "Partition number.", nullable=False),
    _f("committed_offset", pa.int64(), "Committed offset; null for a tombstone (offset deleted)."),
    _f("leader_epoch", pa.int32(), "Leader epoch stored with the commit (value v3+); null otherwise."),
    _f("metadata", pa.string(), "Metadata string of the commit."),
    _f("commit_ts", TS, "Commit timestamp written by the coordinator (exact)."),
    _f("expire_ts", TS, "Expire timestamp (value v1 only); null otherwise."),
    _f("record_ts", TS, "Timestamp of the __consumer_offsets record itself.", nullable=False),
    _f("source_partition", pa.int32(), "__consumer_offsets partition of the record.", nullable=False),
    _f("source_offset", pa.int64(), "Offset of the record in __consumer_offsets.", nullable=False),
    _f("value_version", pa.int16(), "Record value version; null for a tombstone."),
]), "Every offset commit (and offset tombstone) read from __consumer_offsets.")

_EVENT_MEMBER = pa.struct([
    ("member_id", pa.string()),
    ("group_instance_id", pa.string()),
    ("client_id", pa.string()),
    ("host", pa.string()),
    ("session_timeout_ms", pa.int32()),
    ("rebalance_timeout_ms", pa.int32()),
    ("assignment", _ASSIGNMENT),
])

GROUP_EVENTS = Table("group_events", pa.schema([
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("record_type", pa.string(),
       "'group_metadata' (classic), 'group_tombstone', or a KIP-848 record: 'consumer_group_metadata' "
       "(generation = group epoch), 'consumer_group_partition_metadata', 'consumer_group_member', "
       "'consumer_group_target_assignment' (generation = assignment epoch, state_ts = when it was "
       "computed, 4.x), 'consumer_group_target_assignment_member', 'consumer_group_current_assignment' "
       "(generation = member epoch). A KIP-848 record with a null value_version is its tombstone."),
    _f("generation", pa.int32(), "Generation (classic) or group/member epoch (KIP-848)."),
    _f("protocol_type", pa.string(), "'consumer' etc."),
    _f("protocol", pa.string(), "Assignor chosen for the generation."),
    _f("leader", pa.string(), "Member id of the generation's leader."),
    _f("state_ts", TS, "currentStateTimestamp (value v2+); null otherwise."),
    _f("members", pa.list_(_EVENT_MEMBER), "Members of the generation with their timeouts."),
    _f("record_ts", TS, "Timestamp of the __consumer_offsets record.", nullable=False),
    _f("source_partition", pa.int32(), "__consumer_offsets partition.", nullable=False),
    _f("source_offset", pa.int64(), "Offset in __consumer_offsets.", nullable=False),
    _f("value_version", pa.int16(), "Record value version; null for a tombstone."),
    # written by the commit-log tail for the KIP-848 records, which are per member
    _f("member_id", pa.string(),
       "KIP-848 member-scoped records (consumer_group_member, *_target_assignment_member, "
       "consumer_group_current_assignment, and their tombstones = member removed): the member; "
       "null for group-scoped records and classic group_metadata (see members)."),
    _f("previous_generation", pa.int32(),
       "consumer_group_current_assignment: the member's previous epoch; null otherwise."),
    _f("member_state", pa.string(),
       "consumer_group_current_assignment: stable | unrevoked_partitions | unreleased_partitions | "
       "unknown; null otherwise."),
    _f("subscribed_topics", pa.list_(pa.string()),
       "consumer_group_member: the member's subscribed topic names; "
       "consumer_group_partition_metadata: the group's subscribed topics; null otherwise."),
    _f("pending_revocation", _ASSIGNMENT,
       "consumer_group_current_assignment: partitions the member must still revoke; null otherwise."),
]), "Every group-metadata change read from __consumer_offsets.")

BATCH_PROBES = Table("batch_probes", pa.schema([
    _f("group_id", pa.string(), "Consumer group id of the probed commit.", nullable=False),
    _f("topic", pa.string(), "Topic name.", nullable=False),
    _f("partition", pa.int32(), "Partition number.", nullable=False),
    _f("committed_offset", pa.int64(), "The probed commit's offset c (the batch holding c - 1 is read).",
       nullable=False),
    _f("commit_ts", TS, "The probed commit's timestamp (commits.commit_ts, else its record_ts).", nullable=False),
    _f("advance", pa.int64(),
       "The commit's advance over the group's previous commit of the partition (what made it a candidate).",
       nullable=False),
    _f("verdict", pa.string(),
       "'inside': c - 1 and c lie in one batch, so c was never the log end (no seek or reset to the end); "
       "'boundary': c - 1 is a batch's last offset (proves nothing); 'none': no evidence (reason).",
       nullable=False),
    _f("base_offset", pa.int64(), "Base offset of the batch holding c - 1; null when none was read."),
    _f("last_offset", pa.int64(), "Last offset of that batch; null when none was read."),
    _f("batch_leader_epoch", pa.int32(), "Leader epoch that wrote that batch; null when none was read."),
    _f("reason", pa.string(), "For 'none': why there is no evidence; empty otherwise.", nullable=False),
    _f("probe_ts", TS, "When the log was read (the collector's clock).", nullable=False),
]), "Which record batch held each candidate commit's previous record: evidence that the commit was never the "
    "log end (docs/collector.md, 'Batch probes'). Its date partition is the commit's.")

# --------------------------------------------------------------------------------------------
# Result tables (analytics)
# --------------------------------------------------------------------------------------------

LAG_TRENDS = Table("lag_trends", pa.schema([
    _f("window_start", TS, "Start of the one-minute window.", nullable=False),
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("topic", pa.string(), "Topic; null on the group-level row."),
    _f("partition", pa.int32(), "Partition; null on topic- and group-level rows."),
    _f("lag_last", pa.int64(), "Offset lag at the last sample of the window (messages)."),
    _f("lag_max", pa.int64(), "Largest offset lag in the window (messages)."),
    _f("produce_rate", pa.float64(), "Δ end offset / Δt over the window (messages/s)."),
    _f("consume_rate", pa.float64(), "Δ committed offset / Δt over the window (messages/s)."),
    _f("lag_seconds", pa.float64(),
       "Time lag at the last sample: now - produce time of the next unconsumed message (s)."),
    _f("lag_seconds_is_lower_bound", pa.bool_(),
       "True when the produce time lies before the known end-offset history: lag_seconds is "
       "'at least' this much, never an extrapolation."),
    _f("lag_seconds_method", pa.string(), "'exact' (record timestamp), 'interpolated', 'zero' (caught up)."),
    _f("catchup_eta_s", pa.float64(),
       "lag / (consume_rate - produce_rate) when positive (beyond 1e-9 of the rates: floating-point noise "
       "is no catch-up); null when not catching up."),
    _f("retention_headroom_s", pa.float64(),
       "Seconds until the committed offset would fall below the log start at current rates; "
       "null when it never will."),
]), "Per partition (and per topic / group rollups), per minute.")

REBALANCES = Table("rebalances", pa.schema([
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("start_ts", TS, "When the group stopped making progress because membership changed.",
       nullable=False),
    _f("end_ts", TS, "When it was Stable again with partitions assigned; null while open."),
    _f("duration_s", pa.float64(), "end - start in seconds; null while open."),
    _f("cause", pa.string(),
       "join | leave | session_timeout | max_poll_interval | static_member_bounce | unknown."),
    _f("source", pa.string(), "'commit_stream' (exact, from __consumer_offsets) or 'sweeps'."),
    _f("generation_before", pa.int32(), "Generation before the window."),
    _f("generation_after", pa.int32(), "Generation after the window."),
    _f("members_before", pa.list_(pa.string()), "Member ids before."),
    _f("members_after", pa.list_(pa.string()), "Member ids after."),
    _f("partitions_moved", pa.int32(), "Partitions whose owner changed."),
    _f("bound_s", pa.float64(),
       "Bound implied by the settings: session.timeout + heartbeat.interval + network for a "
       "crash; rebalance timeout (max.poll.interval) for a slow member (s)."),
    _f("observed_over_bound", pa.float64(), "duration_s / bound_s."),
    _f("messages_accumulated", pa.int64(), "Growth of the group's lag during the window (messages); null when "
       "no sweep measured either end (a window from the commit stream's records alone)."),
    _f("max_processing_gap_s", pa.float64(),
       "Largest per-partition gap: last commit by the old owner → first commit by the new (s)."),
    _f("as_of_ts", TS,
       "End of the analysed range when the row was written; of rows with the same group_id and "
       "start_ts, the one with the latest as_of_ts is current."),
]), "One row per rebalance window, written again (a later as_of_ts) when a later step raises its "
       "max_processing_gap_s: a partition's first commit after the window came after the step that found it.")

ANOMALIES = Table("anomalies", pa.schema([
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("topic", pa.string(), "Topic; null for group-level kinds (rebalance_storm)."),
    _f("partition", pa.int32(), "Partition; null for group- or topic-level kinds."),
    _f("kind", pa.string(),
       "commit_gap | stall | stop | starved | rewind | skip | retention_loss | lag_growth | rebalance_storm.",
       nullable=False),
    _f("start_ts", TS, "When the anomaly began.", nullable=False),
    _f("end_ts", TS, "When it ended; null while open."),
    _f("severity", pa.string(), "info | warning | critical.", nullable=False),
    _f("magnitude", pa.float64(),
       "Seconds for commit_gap/stall/stop; messages reprocessed for rewind; messages never "
       "processed for skip and retention_loss (at most that many for a retention_loss warning, not "
       "proven); messages/s for lag_growth; rebalances for storms."),
    _f("unit", pa.string(), "'s', 'messages', 'messages/s' or 'rebalances'."),
    _f("detail", pa.string(), "One human sentence: what happened, with the numbers."),
    _f("key", pa.string(), "Stable identity (kind|cluster|group|topic|partition|start) for dedup.",
       nullable=False),
    _f("cause", pa.string(),
       "skip: seek | admin_reset | out_of_range_reset; retention_loss: retention; rewind: rewind, or "
       "admin_reset when written while the group had no members; null for the other kinds. Null in "
       "files written before the column existed."),
    _f("withdrawn", pa.bool_(),
       "True: a later step found that this key is no finding (a rebalance outage explains it, or "
       "its owner's session may still); readers treat the key as absent. The row repeats the "
       "key's last published kind and severity, with end_ts set. Null (false) in files written "
       "before the column existed."),
    _f("as_of_ts", TS,
       "End of the analysed range when the row was written. An open anomaly (end_ts null) is "
       "written again by later incremental steps, closed once it ends: per key, the row with the "
       "latest as_of_ts is current (firing while end_ts is null, resolved once set)."),
]), "One row per anomaly.")

STATUS = Table("status", pa.schema([
    _f("eval_ts", TS, "When the evaluation applies (end of its window).", nullable=False),
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("topic", pa.string(), "Topic; null on the group-level row."),
    _f("partition", pa.int32(), "Partition; null on the group-level row."),
    _f("burrow_status", pa.string(), "Burrow-compatible: OK | WARN | ERR | STOP | STALL | REWIND."),
    _f("status", pa.string(), "lagscope's own: OK | WARN | ERR | STOP | STALL | REWIND | IDLE."),
    _f("reason", pa.string(), "Why lagscope's status is what it is (one sentence)."),
    _f("lag", pa.int64(), "Offset lag at eval_ts."),
    _f("lag_seconds", pa.float64(), "Time lag at eval_ts (s)."),
]), "Per group and partition over time.")

ADVICE = Table("advice", pa.schema([
    _f("group_id", pa.string(), "Consumer group id.", nullable=False),
    _f("rule", pa.string(),
       "The rule that gave the advice (docs/analytics.md, Advice): session_timeout_crash | restart_storm | "
       "max_poll_interval | eager_large_group | rewind_after_rebalance | retention_vs_catchup.", nullable=False),
    _f("setting", pa.string(),
       "The consumer (or topic) setting to change: session.timeout.ms, group.instance.id, max.poll.interval.ms, "
       "partition.assignment.strategy, group.protocol, commit on revocation, retention.ms, …", nullable=False),
    _f("current_value", pa.string(),
       "The setting's value now, where the group-metadata records (or the member sweeps) tell it: "
       "session.timeout.ms and the rebalance timeout (max.poll.interval.ms) in ms, the assignor, the group "
       "protocol, the static members; null when unknown."),
    _f("suggested", pa.string(), "The suggested value or change, in one phrase.", nullable=False),
    _f("expected_effect", pa.string(),
       "What would change, in one sentence with numbers (e.g. 'outages of ~49 s would shrink to ~14 s')."),
    _f("measure", pa.string(),
       "What current_amount and expected_amount measure: outage_s (a member's last progress to the group "
       "settled again), group_stop_s (the group's rebalance time per restart), storm_rebalance_s (rebalance "
       "time per storm), partition_pause_s (the pause of an "
       "average partition per rebalance), messages_reprocessed (per rebalance), retention_headroom_s."),
    _f("unit", pa.string(), "Unit of current_amount and expected_amount: 's' or 'messages'."),
    _f("current_amount", pa.float64(), "The measure as observed (median over the evidence unless said)."),
    _f("expected_amount", pa.float64(), "The measure expected once the advice is applied (the rule's formula)."),
    _f("evidence", pa.string(), "What the advice rests on, in one sentence with the numbers."),
    _f("evidence_count", pa.int32(),
       "How many windows, findings or minutes the advice rests on (each rule's minimum: docs/analytics.md)."),
    _f("evidence_start_ts", TS, "Start of the earliest piece of evidence."),
    _f("evidence_end_ts", TS, "End of the latest piece of evidence."),
    _f("confidence", pa.string(),
       "low | medium | high: high with at least 3× the rule's minimum evidence and the current value known, "
       "medium with 2× or the current value known, low at the minimum."),
    _f("as_of_ts", TS,
       "End of the analysed range when the row was written. Every step writes the advice of every group it "
       "analysed: a group's current advice is its rows of the latest as_of_ts of its cluster "
       "(lagscope.results.current_advice); a group without rows there has none.", nullable=False),
]), "One row per group and recommendation, recomputed by every step over the results' retention window.")

SAMPLE_TABLES: dict[str, Table] = {t.name: t for t in (OFFSETS, MEMBERS, SWEEPS, COMMITS, GROUP_EVENTS,
                                                      BATCH_PROBES)}
RESULT_TABLES: dict[str, Table] = {t.name: t for t in (LAG_TRENDS, REBALANCES, ANOMALIES, STATUS, ADVICE)}
TABLES: dict[str, Table] = {**SAMPLE_TABLES, **RESULT_TABLES}
