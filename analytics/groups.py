"""The per-group pass: rebalance windows, rebalance storms, the anomalies a rebalance explains and
the skips (judged per group: :mod:`lagscope.analytics.skips`), over one step's rows of a set of
whole groups, in pyarrow and numpy (no Spark: Spark runs it per bucket of groups, like the
per-partition pass).

**Settled member sweep.** One *member sweep* is one sweep's ``members`` rows of one group
(:func:`member_sweeps`: its state, largest generation, distinct member ids, (instance, member)
pairs, the owner of each assigned partition). It is *settled* when the group is ``Stable`` with
at least one partition assigned: the group is consuming with a complete assignment. (Null when the
state is unknown and partitions are assigned, which counts as not settled, as in SQL.)

**Window from sweeps** (:func:`sweep_windows`): B is a settled sweep and A the group's previous
settled sweep (carried ones included), and their generation or member ids differ. The group
stopped between A and the sweep after it (A⁺) and was settled again between the sweep before B
(B⁻) and B: ``start = (A + A⁺)/2``, ``end = (B⁻ + B)/2`` (error ≤ half a sweep interval each).
When members left, A⁺ is their departure (:attr:`_Window.change_by`, below: the first sight of
the group Empty when that is earlier): the change cannot start after every member had gone.

**Cause** (:func:`cause_of`), from the member sets of A and B:

- a ``group_instance_id`` on both sides with a new member id → ``static_member_bounce``;
- members gone (not bounced): *gap* = their departure − the earliest of their last progress (an
  owner's partition's committed offset moved, or it was caught up; from earlier steps, the state
  part ``member_progress``) at or before A⁺ (A when unknown); the departure is A⁺, or the first
  sight of the group Empty after A when that is earlier (:attr:`_Window.left_by`: an Empty
  ``group_metadata`` record or member sweep in ``(A, A⁺]``: every member had left by then, and a
  window from the records has its A⁺ at B, which may come long after an operator kept the
  group Empty);
  ``gap ≤ max(leave_gap_s, session/4)`` → ``leave``, or ``join`` when members also came (a
  JoinGroup and a LeaveGroup in one rebalance: nothing says which came first, joins usually do);
  otherwise a timeout (:func:`timeout_cause`): ``session_timeout`` or ``max_poll_interval``
  (the rebalance timeout), whichever the gap can have been — a session timeout only when
  ``gap ≥ session − heartbeat − network`` (the broker removes a crashed member at its last
  heartbeat + session, at most one heartbeat interval before its last progress), a poll timeout
  only when ``gap ≥ rebalance − network`` (removed at its last poll + max.poll.interval.ms, after
  its last progress) — and where both or neither can, the nearer in ratio;
- only new members → ``join``; neither → ``unknown``.

**Bound** (:func:`bound_of`): ``session + heartbeat + network`` for session timeouts and static
bounces, the rebalance timeout otherwise. Timeouts: the group's latest generation record at or
before A (else its first after A) (:func:`generation_records`: classic, the generation members'
largest session and rebalance timeouts; KIP-848, the member's rebalance timeout and no session
timeout), else the settings' defaults. ``observed_over_bound`` = the outage (for a timed-out
member: from its last progress, ``quiet_from``; else the window) over the bound.

**Exact boundaries from the commit stream** (:func:`exact_bounds`, classic groups, eager
rebalancing): ``end`` = the record of the generation B saw, i.e. of the generation records
after A with B's member ids written before the sweep after B, the latest at or before B, else
the earliest after it (:func:`generation_end`: the same members can rejoin after B, and that
later generation is not the one B saw);
``start`` = the earliest of the surviving members' last commits in ``[A, end]`` (their revocation
commits), else the group's last commit in ``[A, end]``; with no commit in ``[A, end]``, the
middle of ``(A, end)``, the interval the change must have happened in (of ``(A, A⁺)``, the
sweeps' estimate, when ``end`` is after A⁺); a static bounce's window is the member's absence
(its last commit → end; without one, from that middle); a timed-out member's last progress is
its partitions' last commit before its departure (above). Only commits in
``[A − session − rebalance timeout, end]`` count, and none written while the group was Empty (its
latest ``group_metadata`` record before the commit has no member: an operator's reset, never a
member's progress nor a rebalance's bound; :func:`_member_commits`).
``source`` = ``commit_stream`` when the end came from a record (always for a window from the
records alone), else ``sweeps``.

**Missed generations** (:func:`missed_generations`): every generation change is a rebalance. A
generation record whose member ids or generation differ from the group's previous record, at or
before the group's last settled sweep (and after the settled sweep the state carried in, which the
previous step judged up to), that is not the end of a sweep window nor inside a sweep window
without one (of this step's windows, or the one that ended at the carried settled sweep: its
claim, ``claimed_gen_t`` / ``claim_hi`` of :data:`MSWEEP_SCHEMA`, since its record can be written
after the step's last sweep): a window from the records alone (A = the previous record, B = this one). That
includes the generations before the group's first settled sweep (members joining one after
another as the group starts): no sweep saw them, the records do. Such a window's start is the
midpoint of the two records (with the commit stream: the surviving members' revocation commits),
its end B's record, its cause from the member sets (new members: ``join``), and its
``messages_accumulated`` null. One window per generation change (:func:`start_after_missed`): a
sweep window whose end is a record, with windows from the records alone ending between its A and
that record, starts at the latest of their Bs (its A that record, A⁺ its end; its end that record
with or without the commits), so each says what its own change was: two generations between two
sweeps are two windows, and a group restarted through Empty is its members' leave (the records
window to the first new generation, its departure bounded by the Empty record) then each further
generation of the new members.

**Carried records** (:func:`generation_state`, :func:`with_carried_records`): a step reads the
``group_events`` of its UTC days only (from its start's day on, whole), so the record in force at
a window's A, or the one that ends it, may be on an earlier day than the step's start (a group
whose last generation change is from yesterday; a rebalance across midnight). The state part
``generations`` carries what the next step's windows read of the records: per group, the latest
record at or before its last settled member sweep (any window's A is at or after it) and every
record after that sweep (the generations of a rebalance still open: the record that ends it,
those no sweep saw) written before the step's end (a later one is among the next step's own); of
a group swept within the horizon (``forget_after_s``) only, and of the records after its last
settled sweep those within the horizon. The per-group pass takes a group's carried records older
than its first record of the step (the step reads the later ones again) before its own: the
windows, timeouts and held stalls of the steps are those of one pass.

**Partitions moved**: B's partitions whose owner (instance id, else member id) is not A's.
**Messages accumulated**: max(0, group lag at B − at A), the group lag Σ lag of the sweep's rows
(each partition once); null when either is unknown (a window from the records alone has no
sweep at either end: nothing measured how much accumulated, which is not 0).
**Processing gap**: per partition, the first commit (commit stream, else committed-offset change)
after the start − the last at or before it, within 900 s around the window; the largest.

**Storms** (:func:`storms`): ``storm_count`` rebalances starting within ``storm_window_s``
(inclusive) of one another (a ``static_member_bounce`` window is no rebalance: the broker replaces
a static member in place, without a new generation, so it never counts; nor does a rebalance of
the group's formation, :func:`formation`: members only arriving since the group was last seen
Empty, docs/analytics.md "Rebalance storm"); consecutive stormy
rebalances are one storm, from the first start in its first rebalance's window to the last end.
Carried rebalances are context only: a storm of carried rebalances alone was reported by the step
that saw it. :func:`storm_state` carries the rebalances the next step needs: those within the
window before the group's last one, and, when that one is stormy, the open storm's and the window
before its first.

**Starved** (:func:`judge_idle`): each stall and stop of the per-partition pass (which sees one
partition) judged across its group, after the outages are dropped. Progress = a committed-offset
change between two rows of a partition (the carried row's last change, ``m_change_t``, counts),
and with the commit stream a commit whose offset is above the partition's previous commit record,
unless it lies inside the change the partition's latest sweep at or before the record shows
(above the offset of the row before that sweep, at most the sweep's own: a sweep stamps before it
reads, so the record of a commit it read is dated after its stamp, and that sweep's change is the
progress); each owned by the partition's owner at that time (the latest row at or
before it). The episode's
owner is the partition's owner at its last row inside the episode (before the sweep that ended
it); its window is ``[start, end]``, an open one's ``[start, start + magnitude]``.

- the owner made progress on another of its partitions in the window → ``starved``: the consumer
  is alive and working, it schedules its partitions unevenly; ``info``, ``warning`` once it lasts
  ``ESCALATE_AFTER × stall_after_s`` (the length at which a stall escalates);
- otherwise it stays a stall or stop; when another partition of the group (another member) made
  progress in the window it is a ``warning`` (the group is alive), else its severity stays the
  per-partition pass's (a stop and a stall of ``5 × stall_after_s`` critical: nobody in the group
  progresses).

The key stays the per-partition pass's (``stall|…`` or ``stop|…`` with the start): the episode is
the same one, and a later step that sees the owner's progress (a judgement only ever moves towards
``starved`` and ``warning`` as the window grows) rewrites that row rather than leaving it open.
The ``starved`` episodes go to the status table (:data:`STARVED_SCHEMA`).

**Held** (:func:`judge_idle`): a stall or stop whose owner shows no *activity* on any partition
since the episode's start (no progress as above, and with the commit stream no commit record at
all, not even of the same offset: a member that commits is alive; a carried partition's last
record, ``m_commit_t``, counts too, so it still does once the step's look-back no longer reaches
it) looks crashed. A SIGKILLed
member keeps its partitions until the broker expires its session, so until then a crash and a
consumer stuck alive look the same, and the rebalance that removes a crashed member owns its
outage (**Outages**). Such an episode is held — not reported — while it is open and its last
sweep is before its *release*: start + the session bound of :func:`bound_of` for a crashed member
(session timeout + heartbeat + network; the session of the group's generation record in force at
the start, as :func:`record_timeouts` takes it, else the default), or, when the group is
rebalancing then (its member sweep at or before the release, or the first after it, not settled),
its first settled or Empty sweep after that (Empty: the broker removed every member, nothing is
left to rebalance), at most the rebalance timeout later; and at the latest when
the partition is first seen without an owner outside a rebalance (its member is gone: nobody is
left for the broker to expire, a stop). Once released it is
reported with its own start and key (the detection waits the bound instead of ``stall_after_s``,
only for a crashed-looking owner); a closed one is reported as it is (its owner resumed: alive;
or the rebalance's outage dropped it). An owner with activity elsewhere is unaffected (``starved``).
A status row is judged by the partition's owner at the row's own time (its latest owned row in
the episode at or before it: one segment per owner's tenure of the partition in the episode, so a
later handover does not change an earlier row): starved from that owner's first progress elsewhere
since the episode's start (:data:`STARVED_SCHEMA`), held while that owner had shown no activity
since the start, before min(release, its first activity) (:data:`HELD_SCHEMA`; the status table
makes such rows ``OK`` with :data:`lagscope.analytics.status.STARVED_REASON` or
:data:`lagscope.analytics.status.HELD_REASON`).

**Served gaps** (:func:`judge_gaps`, from sweeps alone): sweeps see a commit only when it changes
the offset, so a partition its owner serves unevenly (unchanged for a few sweeps while the owner's
other partitions advance) shows a gap between changes that its commits do not have: one commit
request carries every assigned partition's position. A ``commit_gap`` whose partition's owner (at
the gap's last row) changed another of its partitions' committed offset strictly inside the gap
(not in the sweep it starts at, nor in the one that closes it) is dropped. Progress events as for
**Starved**.

**Outages** (:func:`drop_rebalance_outages`): a stall, stop or commit gap of a group that starts
at or after a rebalance's ``quiet_from`` − 1 s (a stall or stop: less than the smaller of
``stall_after_s`` and ``stop_after_s`` before it, so it was no stall or stop yet when the
outage began: what it has of its own is below the rule's threshold) and ends (an open one: start + magnitude s) by its
end + 1 s is that rebalance: dropped (every row with its key); so is a commit gap that starts
there by the window's end + 1 s, however long the new owner took to commit first (the window's
``max_processing_gap_s`` keeps it).

**Processing gap across steps** (:func:`complete_pending`): a window whose partition had a commit
(a committed-offset change, from sweeps alone) at or before its start and none after it yet in
the step that found it is carried (the state part ``pending_gaps``, :data:`PENDING_GAP_SCHEMA`,
with its exact start and end) until that first commit comes, or for :data:`LOOKAROUND_S` after
its end; the step that reads it publishes the window's row again (its ``as_of_ts`` makes it the
current one) when the gap rose, for the result table only (the advice keeps the evidence the
window's own step drew from the members who left). A window found starting in an earlier step
needs each partition's last commit at or before its start and its first after it, both before
the step: with the commit stream the step reads the 15 minutes of commits before it; from sweeps
alone the state part ``gap_times`` (:data:`GAP_TIME_SCHEMA`) carries each partition's changes from
its group's earliest possible window start on (:func:`gap_bounds`: the group's earliest carried
settled sweep; with group records, down to halfway to the record in force then, at most
:data:`LOOKAROUND_S` before it). Without group records a settled group carries nothing, nor does
a group that never settled; with them (and no commit stream, which the collector's tail writes
with them) up to :data:`LOOKAROUND_S` of changes per partition.

**Skips** (:mod:`lagscope.analytics.skips`): the per-partition pass's positive advances judged
with the group's membership (member sweeps, ``group_metadata`` records) and per commit request;
rewinds written while the group was empty get the cause ``admin_reset``.

Times are epoch seconds (floats, µs resolution); a timestamp out is ``timestamp_micros(trunc(s ·
1e6))`` cut to ms, as Spark writes it.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from lagscope.analytics import arrays, skips
from lagscope.analytics.arrays import dates, timestamps
from lagscope.analytics.kseries import asof, java_fixed

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lagscope.config import AnalyticsConfig

__all__ = ["COMMIT_COLUMNS", "ESCALATE_AFTER", "GROUP_EVENT_COLUMNS", "HELD_SCHEMA", "MEMBER_COLUMNS", "MSWEEP_SCHEMA",
           "OUTAGE_KINDS", "REBALANCE_COLUMNS", "RECENT_SCHEMA", "STARVED_SCHEMA", "GroupInputs", "GroupOutputs",
           "drop_rebalance_outages", "empty_records", "formation", "generation_records", "group_pass", "judge_idle",
           "member_sweeps", "storm_state", "storms", "sweep_windows"]

_F = npt.NDArray[np.float64]
_I = npt.NDArray[np.int64]
_B = npt.NDArray[np.bool_]
_MS = pa.timestamp("ms", tz="UTC")
_US = pa.timestamp("us", tz="UTC")

#: the columns read of each input
MEMBER_COLUMNS = ("cluster", "group_id", "sweep_ts", "group_state", "generation", "member_id", "group_instance_id",
                  "assignment")
GROUP_EVENT_COLUMNS = ("cluster", "group_id", "record_type", "value_version", "generation", "members", "record_ts")
COMMIT_COLUMNS = ("cluster", "group_id", "topic", "partition", "committed_offset", "commit_ts", "record_ts")
SERIES_COLUMNS = ("cluster", "group_id", "topic", "partition", "t", "committed", "lag", "owner")
CARRIED_SERIES_COLUMNS = ("cluster", "group_id", "topic", "partition", "t", "committed", "owner", "m_change_t",
                          "m_alive_t")

#: a departed member gone within this of its last progress left (unless a quarter of the session
#: timeout is longer)
LEAVE_GAP_S = 2.0
#: how far around a window the processing gaps look for commits (s)
LOOKAROUND_S = 900.0

_OWNER = pa.struct([("tp", pa.string()), ("owner", pa.string())])
_INSTANCE = pa.struct([("iid", pa.string()), ("mid", pa.string())])

#: one member sweep; the state part ``msweeps`` is these rows with ``is_state``, ``group_lag``
#: and, on a settled sweep that ended a window (its B), what that window claimed of the records:
#: ``claimed_gen_t`` the record of B's generation (:func:`generation_end`), else ``claim_hi``
#: (:attr:`_Window.hi`: the records after A up to it are the window's): a later step's
#: :func:`missed_generations` makes no other window of them
MSWEEP_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("group_id", pa.string()), ("t", pa.float64()), ("sweep_ts", _MS),
    ("group_state", pa.string()), ("generation", pa.int32()), ("member_ids", pa.list_(pa.string())),
    ("instances", pa.list_(_INSTANCE)), ("owners", pa.list_(_OWNER)),
    ("settled", pa.bool_()), ("is_state", pa.bool_()), ("group_lag", pa.int64()),
    ("claimed_gen_t", pa.float64()), ("claim_hi", pa.float64()), ("life_end", pa.bool_()),
])
_CLAIMS = ("claimed_gen_t", "claim_hi")

#: the state part ``outages``: the rebalance outages (µs) a later step's anomalies may lie in
OUTAGE_SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("q0_us", pa.int64()),
                           ("q1_us", pa.int64())])
#: how long after its end an outage is carried, at least: an anomaly it explains ends by then (a
#: stall or stop by its end, a commit gap at most the shorter of the stall and stop thresholds
#: later: :func:`_outage_state` carries that long when it is longer) and is reported by a step
#: that reads the sweep after it
OUTAGE_CARRY_S = 300.0

#: the state part ``recent_rebalances``
RECENT_SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("start_ts", _MS),
                           ("end_ts", _MS)])

#: a starved partition's anomaly is a warning once it lasts this many ``stall_after_s`` (the
#: length at which a stall becomes critical when nobody in its group progresses)
ESCALATE_AFTER = 5.0

#: the ``starved`` segments the status table needs (:func:`lagscope.analytics.status.status`): per
#: owner's tenure of a partition in an idle episode (``start_ts`` its first row, ``end_ts`` the
#: next tenure's or the episode's end), from that owner's first progress elsewhere (``from_ts``)
STARVED_SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("topic", pa.string()),
                            ("partition", pa.int32()), ("start_ts", _MS), ("end_ts", _MS), ("from_ts", _MS),
                            ("warn_ts", _MS)])
#: the owners' tenures in stalls and stops while the owner looked crashed (module doc, **Held**): a
#: status row of the partition inside one (start ≤ eval ≤ end, an open one without end) before
#: ``until_ts`` is held
HELD_SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("topic", pa.string()),
                         ("partition", pa.int32()), ("start_ts", _MS), ("end_ts", _MS), ("until_ts", _MS)])

#: the ``rebalances`` rows out (``lagscope.schema.REBALANCES`` without ``as_of_ts``, plus ``cluster``, ``date``)
REBALANCE_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("group_id", pa.string()), ("start_ts", _MS), ("end_ts", _MS),
    ("duration_s", pa.float64()), ("cause", pa.string()), ("source", pa.string()),
    ("generation_before", pa.int32()), ("generation_after", pa.int32()),
    ("members_before", pa.list_(pa.string())), ("members_after", pa.list_(pa.string())),
    ("partitions_moved", pa.int32()), ("bound_s", pa.float64()), ("observed_over_bound", pa.float64()),
    ("messages_accumulated", pa.int64()), ("max_processing_gap_s", pa.float64()), ("date", pa.string()),
])
REBALANCE_COLUMNS = REBALANCE_SCHEMA.names
#: the state part ``pending_gaps``: a published window whose ``max_processing_gap_s`` a later step
#: may still raise (:func:`complete_pending`): its exact start and end (``start_s``, ``end_s``:
#: epoch s; ``start_ts`` is to the millisecond) and the partitions with a commit at or before its
#: start and none after it yet (``pending_tp``: ``topic/partition``), each with that last
#: commit's time (``pending_lb``)
PENDING_GAP_SCHEMA = pa.schema([*REBALANCE_SCHEMA, ("start_s", pa.float64()), ("end_s", pa.float64()),
                                ("pending_tp", pa.list_(pa.string())), ("pending_lb", pa.list_(pa.float64()))])

#: the state part ``gap_times`` (from sweeps alone: :func:`gap_bounds`): a partition's
#: committed-offset changes back to the earliest start a later step's window can have (``bound_t``,
#: its group's), which the series state's last change alone does not give
GAP_TIME_SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()), ("topic", pa.string()),
                             ("partition", pa.int32()), ("t", pa.float64()), ("bound_t", pa.float64())])


#: the state part ``member_progress`` (:func:`member_progress_state`): each member's last progress
#: (``alive_t``, s: a sweep at which a partition it owned had its committed offset change, or no
#: lag), of the members a later step's window can name as departed. The series state keeps one
#: row per partition, so it carries only the owner of each partition's latest progress
MEMBER_PROGRESS_SCHEMA = pa.schema([("cluster", pa.string()), ("group_id", pa.string()),
                                    ("member_id", pa.string()), ("alive_t", pa.float64())])


_TIMED_OUT = ("session_timeout", "max_poll_interval")
#: the kinds a rebalance outage owns (:func:`drop_rebalance_outages`)
OUTAGE_KINDS = ("stall", "stop", "starved", "commit_gap")
_IDLE_KINDS = ("stall", "stop")


@dataclass
class GroupInputs:
    """One step's rows of a set of whole groups (pyarrow). Columns read: :data:`MEMBER_COLUMNS`
    of ``members``, :data:`SERIES_COLUMNS` of ``series`` (``step.prepare``),
    :data:`CARRIED_SERIES_COLUMNS` of ``carried_series`` (``t`` and ``m_alive_t`` optional), every
    :data:`MSWEEP_SCHEMA` column of ``carried_msweeps``, :data:`RECENT_SCHEMA` of
    ``recent_rebalances``, :data:`GROUP_EVENT_COLUMNS` of ``group_events``,
    :data:`COMMIT_COLUMNS` of ``commits`` (the step's and its look-back), ``cluster, group_id,
    kind, start_ts, end_ts, magnitude, key`` (and ``cause``, when there) of ``anomalies`` (all of
    whose columns pass through), :data:`lagscope.analytics.skips.ADVANCE_COLUMNS` of
    ``advances`` and ``cluster, group_id, topic, partition, t, capacity`` of ``capacities`` (the
    per-partition pass's, for the skip rules: each partition's capacity from ``t`` on)."""

    members: pa.Table
    series: pa.Table
    carried_series: pa.Table | None
    carried_msweeps: pa.Table | None
    recent_rebalances: pa.Table | None
    group_events: pa.Table | None
    commits: pa.Table | None
    anomalies: pa.Table
    advances: pa.Table | None = None
    capacities: pa.Table | None = None
    outages: pa.Table | None = None
    #: the state part ``generations`` carried in (module doc, **Carried records**)
    carried_generations: pa.Table | None = None
    #: the step's end (epoch s): the carried records are those before it; None: no end
    until: float | None = None
    #: the state part ``pending_gaps`` carried in (:data:`PENDING_GAP_SCHEMA`)
    pending_gaps: pa.Table | None = None
    #: the state part ``gap_times`` carried in (:data:`GAP_TIME_SCHEMA`)
    gap_times: pa.Table | None = None
    #: the state part ``member_progress`` carried in (:data:`MEMBER_PROGRESS_SCHEMA`)
    member_progress: pa.Table | None = None


@dataclass
class GroupOutputs:
    """The ``rebalances`` rows (:data:`REBALANCE_SCHEMA`), the anomalies (the input's columns:
    those a rebalance explains dropped, storms added) and the next state parts ``msweeps``
    (:data:`MSWEEP_SCHEMA`), ``recent_rebalances`` (:data:`RECENT_SCHEMA`), ``outages``,
    ``generations`` (:data:`GENERATION_STATE_SCHEMA`), ``pending_gaps``
    (:data:`PENDING_GAP_SCHEMA`), ``gap_times`` (:data:`GAP_TIME_SCHEMA`) and
    ``member_progress`` (:data:`MEMBER_PROGRESS_SCHEMA`); ``regapped``: earlier steps' windows whose processing gap this
    step raised (:data:`REBALANCE_SCHEMA`), for the result table only (their evidence is
    unchanged, and the step's members may no longer name who left)."""

    rebalances: pa.Table
    anomalies: pa.Table
    msweeps: pa.Table
    recent_rebalances: pa.Table
    starved: pa.Table = field(default_factory=lambda: STARVED_SCHEMA.empty_table())
    held: pa.Table = field(default_factory=lambda: HELD_SCHEMA.empty_table())
    outages: pa.Table = field(default_factory=lambda: OUTAGE_SCHEMA.empty_table())
    generations: pa.Table = field(default_factory=lambda: GENERATION_STATE_SCHEMA.empty_table())
    pending_gaps: pa.Table = field(default_factory=lambda: PENDING_GAP_SCHEMA.empty_table())
    regapped: pa.Table = field(default_factory=lambda: REBALANCE_SCHEMA.empty_table())
    gap_times: pa.Table = field(default_factory=lambda: GAP_TIME_SCHEMA.empty_table())
    member_progress: pa.Table = field(default_factory=lambda: MEMBER_PROGRESS_SCHEMA.empty_table())


# --------------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------------

def longs(col: pa.ChunkedArray | pa.Array) -> tuple[_I, _B]:
    """Values (null as 0) and where they are valid."""
    v, ok = arrays.longs(col)
    return np.asarray(v, np.int64), np.asarray(ok, bool)


def key_code(*cols: pa.ChunkedArray | pa.Array) -> _I:
    """:func:`lagscope.analytics.arrays.key_code`: a code per row, equal where every column is."""
    return np.asarray(arrays.key_code(*cols), np.int64)


def seconds(ts: pa.ChunkedArray | pa.Array) -> _F:
    """Timestamps → epoch seconds, as Spark's ``unix_micros / 1e6``; null → NaN."""
    return np.asarray(arrays.seconds(ts), np.float64)


def _plain(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One chunk, dictionaries decoded."""
    c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return c.dictionary_decode() if pa.types.is_dictionary(c.type) else c


def _gkey(table: pa.Table) -> pa.Array:
    """``cluster ␟ group_id`` per row: a group's identity as one string."""
    return pc.binary_join_element_wise(_plain(table.column("cluster")).cast(pa.string()),
                                       _plain(table.column("group_id")).cast(pa.string()), "\x1f")


def of_groups(table: pa.Table, *by: pa.Table) -> pa.Table:
    """The rows of ``table`` of a group (``cluster, group_id``) that one of ``by`` has a row of."""
    if not table.num_rows:
        return table
    keys = [pc.unique(_gkey(b)) for b in by if b.num_rows]
    return table.filter(pa.array(_is_in(_gkey(table), pa.concat_arrays(keys) if keys else pa.array([], pa.string()))))


def _codes(keys: pa.Array, groups: pa.Array) -> tuple[_I, _B]:
    """Each key's index in ``groups`` and whether it is there."""
    idx, ok = longs(pc.index_in(keys, value_set=groups))
    return idx, ok


def _is_in(col: pa.ChunkedArray | pa.Array, values: pa.Array) -> _B:
    """Whether each row's string is one of ``values`` (null: no); a dictionary column's values
    are looked up once each."""
    c = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(c.type):
        hit = np.append(np.asarray(pc.is_in(c.dictionary.cast(pa.string()), value_set=values).fill_null(False),
                                   dtype=bool), False)
        return hit[np.asarray(c.indices.fill_null(len(c.dictionary)), dtype=np.int64)]
    return np.asarray(pc.is_in(c.cast(pa.string()), value_set=values).fill_null(False), dtype=bool)


def _tp(topic: pa.Array, partition: pa.Array) -> pa.Array:
    """``topic/partition`` (SQL's ``concat_ws``: a null part is left out)."""
    return pc.binary_join_element_wise(_plain(topic).cast(pa.string()), _plain(partition).cast(pa.string()), "/",
                                       null_handling="skip")


def _lists(sid: _I, n: int, values: dict[str, pa.Array], *, distinct: bool = True, sort: bool = True) -> pa.Array:
    """Per ``sid`` in ``0…n−1``: the list of its rows' ``values`` (a struct of them when several),
    distinct and sorted (nulls last) unless told otherwise, in row order then."""
    names = list(values)
    t = pa.table({"_s": pa.array(sid, pa.int64()), **values})
    if distinct:
        t = t.group_by(["_s", *names], use_threads=False).aggregate([])
    if sort:
        t = t.sort_by([("_s", "ascending"), *[(c, "ascending") for c in names]])
    elif distinct:
        t = t.sort_by([("_s", "ascending")])
    s = np.asarray(t.column("_s"), dtype=np.int64) if t.num_rows else np.zeros(0, np.int64)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(s, minlength=n), out=offsets[1:])
    if len(names) == 1:
        items = t.column(names[0]).combine_chunks()
    else:
        items = pa.StructArray.from_arrays([t.column(c).combine_chunks() for c in names], names=names)
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), items)


def _list_code(lists: pa.Array | pa.ChunkedArray) -> _I:
    """A code per list of strings, equal exactly where the lists are (null as the empty list)."""
    c = _plain(lists)
    joined = pc.binary_join(c, "\x1f").fill_null("")
    n = np.asarray(pc.list_value_length(c).fill_null(0), dtype=np.int64)
    return key_code(joined, pa.array(n))


def _floats(col: pa.ChunkedArray | pa.Array) -> tuple[_F, _B]:
    c = _plain(col)
    return (np.asarray(c.cast(pa.float64()).fill_null(np.nan), dtype=np.float64),
            np.asarray(c.is_valid(), dtype=bool))


def _flag(col: pa.ChunkedArray | pa.Array) -> _B:
    return np.asarray(_plain(col).fill_null(False), dtype=bool)


# --------------------------------------------------------------------------------------------
# member sweeps and generation records
# --------------------------------------------------------------------------------------------

def member_sweeps(members: pa.Table) -> pa.Table:
    """``members`` lake rows → one member sweep per (cluster, group, sweep) (:data:`MSWEEP_SCHEMA`,
    ``is_state`` false, ``group_lag`` null): the first known state, the largest generation, the
    distinct member ids sorted, the distinct (instance, member) pairs of static members and the
    distinct (``topic/partition``, owner) pairs of the assignment (owner = instance id, else
    member id), both sorted, and whether the sweep is *settled* (``Stable`` with a partition
    assigned). A member row in the lake twice counts once.

    >>> member_sweeps(members).select(["group_id", "t", "settled"])  # doctest: +SKIP
    """
    if not members.num_rows:
        return MSWEEP_SCHEMA.empty_table()
    cluster, group = _plain(members.column("cluster")), _plain(members.column("group_id"))
    sweep_ts = _plain(members.column("sweep_ts"))
    sid, n = _dense(key_code(cluster, group, sweep_ts))
    _, first = np.unique(sid, return_index=True)
    state = _plain(members.column("group_state"))
    ok = np.flatnonzero(np.asarray(state.is_valid(), dtype=bool))
    state_at = np.full(n, -1, np.int64)
    us, where = np.unique(sid[ok], return_index=True)
    state_at[us] = ok[where]
    states = state.take(pa.array(np.where(state_at >= 0, state_at, 0)))
    states = pc.if_else(pa.array(state_at >= 0), states, pa.nulls(n, pa.string()))
    gen, gen_ok = longs(members.column("generation"))
    gmax = np.full(n, np.iinfo(np.int64).min, np.int64)
    np.maximum.at(gmax, sid[gen_ok], gen[gen_ok])
    has_gen = np.zeros(n, bool)
    has_gen[sid[gen_ok]] = True
    mid = _plain(members.column("member_id")).cast(pa.string())
    iid = _plain(members.column("group_instance_id")).cast(pa.string())
    mid_ok = np.asarray(mid.is_valid(), dtype=bool)
    member_ids = _lists(sid[mid_ok], n, {"m": mid.filter(pa.array(mid_ok))})
    iid_ok = np.asarray(iid.is_valid(), dtype=bool)
    instances = _lists(sid[iid_ok], n, {"iid": iid.filter(pa.array(iid_ok)), "mid": mid.filter(pa.array(iid_ok))})
    assignment = _plain(members.column("assignment"))
    parent = np.asarray(pc.list_parent_indices(assignment), dtype=np.int64)
    flat = pc.list_flatten(assignment)
    owner = pc.coalesce(iid, mid).take(pa.array(parent))
    owners = _lists(sid[parent], n, {"tp": _tp(flat.field("topic"), flat.field("partition")), "owner": owner})
    settled = pc.and_kleene(pc.equal(states, "Stable"), pc.greater(pc.list_value_length(owners), 0))
    ts = sweep_ts.take(pa.array(first))
    return pa.table({
        "cluster": cluster.take(pa.array(first)).cast(pa.string()),
        "group_id": group.take(pa.array(first)).cast(pa.string()),
        "t": pa.array(seconds(ts)), "sweep_ts": ts.cast(_MS), "group_state": states,
        "generation": pa.array(gmax, pa.int64(), mask=~has_gen).cast(pa.int32()),
        "member_ids": member_ids, "instances": instances, "owners": owners, "settled": settled,
        "is_state": pa.array(np.zeros(n, bool)), "group_lag": pa.nulls(n, pa.int64()),
        **{c: pa.nulls(n, pa.float64()) for c in _CLAIMS}, "life_end": pa.nulls(n, pa.bool_())}, schema=MSWEEP_SCHEMA)


def _dense(code: _I) -> tuple[_I, int]:
    _, inv = np.unique(code, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), int(inv.max()) + 1 if len(inv) else 0


GENERATION_SCHEMA = pa.schema([
    ("cluster", pa.string()), ("group_id", pa.string()), ("gen_t", pa.float64()), ("generation", pa.int32()),
    ("session_timeout_s", pa.float64()), ("rebalance_timeout_s", pa.float64()),
    ("member_ids", pa.list_(pa.string())), ("instances", pa.list_(_INSTANCE)), ("owners", pa.list_(_OWNER)),
])


#: the state part ``generations`` (module doc, **Carried records**): records, and ``seen_t`` the
#: group's last sweep (offsets or members row, s)
GENERATION_STATE_SCHEMA: pa.Schema = pa.schema([*GENERATION_SCHEMA, pa.field("seen_t", pa.float64())])


def generation_records(group_events: pa.Table) -> pa.Table:
    """``group_events`` → the records the windows use (:data:`GENERATION_SCHEMA`), ``gen_t`` the
    record time (s):

    - classic ``group_metadata`` with members: a generation: ``generation``, its members'
      largest session and rebalance timeouts, ``member_ids`` (sorted, as recorded), ``instances``
      and ``owners`` (in the record's order);
    - KIP-848 ``consumer_group_member`` (not a tombstone): the member's rebalance timeout only
      (KIP-848 takes the session timeout from the broker's group.consumer.session.timeout.ms,
      which no record carries); not a generation (the other columns null)."""
    missing = [c for c in GROUP_EVENT_COLUMNS if c not in group_events.column_names]
    if missing:
        raise ValueError(f"group_events lacks {missing}: the per-group pass reads {list(GROUP_EVENT_COLUMNS)}")
    rt = _plain(group_events.column("record_type")).cast(pa.string())
    classic = pc.equal(rt, "group_metadata").fill_null(False)
    kip = pc.and_(pc.equal(rt, "consumer_group_member").fill_null(False),
                  pc.is_valid(group_events.column("value_version")))
    members = _plain(group_events.column("members"))
    has = pc.greater(pc.list_value_length(members).fill_null(0), 0)
    ev = group_events.filter(pc.and_(pc.or_(classic, kip), has))
    n = ev.num_rows
    if not n:
        return GENERATION_SCHEMA.empty_table()
    is_classic = np.asarray(pc.equal(_plain(ev.column("record_type")).cast(pa.string()), "group_metadata"),
                            dtype=bool)
    ms = _plain(ev.column("members"))
    parent = np.asarray(pc.list_parent_indices(ms), dtype=np.int64)
    flat = pc.list_flatten(ms)

    def largest(name: str) -> tuple[_F, _B]:
        v, ok = longs(flat.field(name))
        top = np.full(n, np.iinfo(np.int64).min, np.int64)
        np.maximum.at(top, parent[ok], v[ok])
        any_ = np.zeros(n, bool)
        any_[parent[ok]] = True
        return top / 1000.0, any_

    sess, sess_ok = largest("session_timeout_ms")
    reb, reb_ok = largest("rebalance_timeout_ms")
    sess_ok &= is_classic
    mid, iid = flat.field("member_id"), flat.field("group_instance_id")
    cm = is_classic[parent]
    member_ids = _lists(parent[cm], n, {"m": mid.filter(pa.array(cm))}, distinct=False)
    ci = cm & np.asarray(iid.is_valid(), dtype=bool)
    instances = _lists(parent[ci], n, {"iid": iid.filter(pa.array(ci)), "mid": mid.filter(pa.array(ci))},
                       distinct=False, sort=False)
    assign = flat.field("assignment")
    aparent = np.asarray(pc.list_parent_indices(assign), dtype=np.int64)
    aflat = pc.list_flatten(assign)
    ca = cm[aparent]
    owner = pc.coalesce(iid, mid).take(pa.array(aparent)).filter(pa.array(ca))
    owners = _lists(parent[aparent][ca], n, {"tp": _tp(aflat.field("topic"), aflat.field("partition")).filter(
        pa.array(ca)), "owner": owner}, distinct=False, sort=False)
    none = pa.array(~is_classic)
    gen, gen_ok = longs(ev.column("generation"))
    return pa.table({
        "cluster": _plain(ev.column("cluster")).cast(pa.string()),
        "group_id": _plain(ev.column("group_id")).cast(pa.string()),
        "gen_t": pa.array(seconds(ev.column("record_ts"))),
        "generation": pa.array(gen, pa.int64(), mask=~(gen_ok & is_classic)).cast(pa.int32()),
        "session_timeout_s": pa.array(sess, pa.float64(), mask=~sess_ok),
        "rebalance_timeout_s": pa.array(reb, pa.float64(), mask=~reb_ok),
        "member_ids": pc.if_else(none, pa.nulls(n, member_ids.type), member_ids),
        "instances": pc.if_else(none, pa.nulls(n, instances.type), instances),
        "owners": pc.if_else(none, pa.nulls(n, owners.type), owners)}, schema=GENERATION_SCHEMA)


def empty_records(group_events: pa.Table) -> dict[tuple[str, str], list[float]]:
    """The classic ``group_metadata`` records of a group without a member (its creation,
    generation 0, or every member gone; a deleted group's tombstone has no value and is not one):
    ``(cluster, group_id)`` → their record times (s), in order. Not generations
    (:func:`generation_records` leaves them out); the sight of the group Empty, as an Empty
    sweep is, for its formation (:func:`formed_in_records`, ``_through_empty``)."""
    rt = _plain(group_events.column("record_type")).cast(pa.string())
    n = pc.list_value_length(_plain(group_events.column("members")))
    ev = group_events.filter(pc.and_(pc.equal(rt, "group_metadata").fill_null(False), pc.equal(n, 0).fill_null(False)))
    out: dict[tuple[str, str], list[float]] = {}
    for c, g, t in zip(_plain(ev.column("cluster")).cast(pa.string()).to_pylist(),
                       _plain(ev.column("group_id")).cast(pa.string()).to_pylist(),
                       seconds(ev.column("record_ts")).tolist(), strict=True):
        out.setdefault((c, g), []).append(t)
    return {k: sorted(v) for k, v in out.items()}


def with_carried_records(gens: pa.Table, carried: pa.Table | None) -> pa.Table:
    """The step's generation records ``gens`` (:data:`GENERATION_SCHEMA`) with, before them, each
    group's carried ones (state part ``generations``) older than the group's first record in
    ``gens``: the step reads the ``group_events`` of its days whole, so a carried record of one of
    those days is among its own (module doc, **Carried records**)."""
    if carried is None or not carried.num_rows:
        return gens
    c = carried.select(GENERATION_SCHEMA.names).cast(GENERATION_SCHEMA)
    if gens.num_rows:
        own = _gkey(gens)
        groups = pc.unique(own)
        code, _ = _codes(own, groups)
        first = np.full(len(groups), np.inf)
        np.fmin.at(first, code, np.asarray(gens.column("gen_t"), dtype=np.float64))
        cc, ok = _codes(_gkey(c), groups)
        ct = np.asarray(c.column("gen_t"), dtype=np.float64)
        c = c.filter(pa.array(~ok | (ct < first[np.where(ok, cc, 0)])))
    return pa.concat_tables([c, gens.select(GENERATION_SCHEMA.names).cast(GENERATION_SCHEMA)]) if c.num_rows else gens


def generation_state(gens: pa.Table, sw: _Sweeps, series: pa.Table, carried: pa.Table | None, *,
                     until: float | None, horizon_s: float) -> pa.Table:
    """The state part ``generations`` (:data:`GENERATION_STATE_SCHEMA`; module doc, **Carried
    records**) from ``gens`` (the step's records with the carried ones,
    :func:`with_carried_records`): of each group whose last sweep (``series``' rows, member sweeps
    ``sw``, the carried ``seen_t``) is within ``horizon_s`` of ``until`` (the step's end, s; None:
    no end, nothing forgotten), its records before ``until``: the latest at or before its last
    settled member sweep (all of that time), and those after it within the horizon."""
    if not gens.num_rows:
        return GENERATION_STATE_SCHEMA.empty_table()
    end = until if until is not None else math.inf
    lo = end - horizon_s if until is not None else -math.inf
    keys = _gkey(gens)
    groups = pc.unique(keys)
    g, _ = _codes(keys, groups)
    ng = len(groups)
    seen = np.full(ng, -np.inf)
    settled = np.full(ng, -np.inf)
    if len(sw.t):
        sg, ok = _codes(sw.groups, groups)  # sw's group codes → these groups
        at = sg[sw.g]
        hit = ok[sw.g]
        t = sw.t
        np.fmax.at(seen, at[hit], t[hit])
        s = hit & sw.settled
        np.fmax.at(settled, at[s], t[s])
    if series.num_rows:
        # only the rows of groups with records (a step's series is most of its rows)
        mine = series.filter(pa.array(_is_in(series.column("group_id"),
                                             pc.unique(_plain(gens.column("group_id")).cast(pa.string())))))
        if mine.num_rows:
            rg, ok = _codes(_gkey(mine), groups)
            rt = np.asarray(_plain(mine.column("t")).cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
            np.fmax.at(seen, rg[ok], rt[ok])
    if carried is not None and carried.num_rows and "seen_t" in carried.column_names:
        cg, ok = _codes(_gkey(carried), groups)
        ct = np.asarray(_plain(carried.column("seen_t")).cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
        np.fmax.at(seen, cg[ok], ct[ok])
    gt = np.asarray(gens.column("gen_t"), dtype=np.float64)
    before = gt < end
    at_or_before = before & (gt <= settled[g])
    latest = np.full(ng, -np.inf)
    np.fmax.at(latest, g[at_or_before], gt[at_or_before])
    keep = (seen[g] >= lo) & before & ((at_or_before & (gt == latest[g])) | ((gt > settled[g]) & (gt >= lo)))
    kept = gens.filter(pa.array(keep)).select(GENERATION_SCHEMA.names).cast(GENERATION_SCHEMA)
    return kept.append_column("seen_t", pa.array(seen[g[keep]], pa.float64())).cast(GENERATION_STATE_SCHEMA)


# --------------------------------------------------------------------------------------------
# windows
# --------------------------------------------------------------------------------------------

@dataclass
class _Snap:
    """One side of a window: a settled member sweep, or a generation record."""

    t: float
    generation: int | None
    member_ids: list[str]
    instances: list[dict[str, Any]]
    owners: pa.Array  # struct<tp, owner>


@dataclass
class _Window:
    g: int  # the group's code
    cluster: str
    group_id: str
    a: _Snap
    b: _Snap
    b_prev_t: float
    b_next_t: float | None
    a_next_t: float
    b_gen_t: float | None = None
    b_gen: int | None = None
    #: the records of the window's life are those after this (:func:`life_start`)
    life_lo: float = -math.inf
    # filled in by the rules
    session: float = 0.0
    rebal: float = 0.0
    a_gen: int | None = None
    bounced: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    last_alive: float | None = None
    cause: str = "unknown"
    start: float = 0.0
    end: float = 0.0
    quiet_from: float = 0.0
    source: str = "sweeps"
    from_records: bool = False  # a generation no sweep saw: a window from the records alone
    #: A is a generation record: a window from the records alone, or a sweep window that starts
    #: at the last generation no sweep saw before its end (:func:`start_after_missed`)
    a_from_record: bool = False
    #: a sweep between A and B saw the group Empty (no member): B's members arrived into it
    through_empty: bool = False
    #: a sweep before A saw the group Empty, and every sweep window since only added members: the
    #: group is forming in view (:func:`formation`)
    a_after_empty: bool = False
    #: the first sight of the group Empty in (A, A⁺] (an Empty record or member sweep), else None:
    #: every member had left by then (:func:`left_by`)
    left_by: float | None = None

    @property
    def departed_by(self) -> float:
        """When the departed members had left at the latest: A⁺, or the first Empty sight before it."""
        return self.a_next_t if self.left_by is None else min(self.a_next_t, self.left_by)

    @property
    def change_by(self) -> float:
        """When the change had happened at the latest, as the sweeps and Empty sights tell: the
        departure when members left (:attr:`departed_by`), else A⁺."""
        return self.departed_by if self.gone else self.a_next_t

    @property
    def hi(self) -> float:
        """The latest a record of generation B can be written: the sweep after B (else one
        interval after it)."""
        return self.b_next_t if self.b_next_t is not None else self.b.t + (self.b.t - self.b_prev_t)


def _owners_of(col: pa.ChunkedArray, i: int) -> pa.Array:
    """Row ``i``'s owners (an empty array when null)."""
    v = col[i].values
    return v if v is not None else pa.array([], _OWNER)


def _snap(ms: pa.Table, i: int) -> _Snap:
    r = ms.slice(i, 1).select(["t", "generation", "member_ids", "instances"]).to_pylist()[0]
    return _Snap(t=float(r["t"]), generation=r["generation"], member_ids=list(r["member_ids"] or []),
                 instances=list(r["instances"] or []), owners=_owners_of(ms.column("owners"), i))


@dataclass
class _Sweeps:
    """The step's member sweeps and the carried ones, by group then time."""

    ms: pa.Table
    g: _I          # group code (index into ``groups``)
    groups: pa.Array
    t: _F
    settled: _B


def _sorted_sweeps(fresh: pa.Table, carried: pa.Table | None) -> _Sweeps:
    parts = [fresh]
    if carried is not None and carried.num_rows:
        for c in (*_CLAIMS, "life_end"):  # a state written before them
            if c not in carried.column_names:
                carried = carried.append_column(c, pa.nulls(carried.num_rows, MSWEEP_SCHEMA.field(c).type))
        parts.append(carried.select(MSWEEP_SCHEMA.names).cast(MSWEEP_SCHEMA))
    ms = pa.concat_tables(parts)
    keys = _gkey(ms)
    groups = pc.unique(keys)
    g, _ = _codes(keys, groups)
    t = np.asarray(ms.column("t").combine_chunks().fill_null(np.nan), dtype=np.float64)
    order = np.lexsort((t, g))
    ms = ms.take(pa.array(order))
    return _Sweeps(ms=ms, g=g[order], groups=groups, t=t[order], settled=_flag(ms.column("settled")))


def sweep_windows(sw: _Sweeps, ch: _Changes) -> list[_Window]:
    """Windows between settled sweeps (see the module doc): B settled, A the group's previous
    settled sweep, their generation (null as −1) or member ids differ. Vectorised over the sweeps;
    one :class:`_Window` per window found."""
    n = len(sw.t)
    if not n:
        return []
    g, a, changed, new_group = sw.g, ch.a, ch.changed, ch.new_group
    empty = np.cumsum(ch.is_empty)
    out = []
    cl, gr = sw.ms.column("cluster"), sw.ms.column("group_id")
    for i in np.flatnonzero(changed).tolist():
        k = int(a[i])
        nxt = float(sw.t[i + 1]) if i + 1 < n and not new_group[i + 1] else None
        out.append(_Window(g=int(g[i]), cluster=cl[i].as_py(), group_id=gr[i].as_py(), a=_snap(sw.ms, k),
                           b=_snap(sw.ms, i), b_prev_t=float(sw.t[i - 1]), b_next_t=nxt,
                           a_next_t=float(sw.t[k + 1]), through_empty=bool(empty[i - 1] > empty[k]),
                           a_after_empty=bool(ch.formed[k])))
    return out


def _seen_sweeps(sw: _Sweeps, ch: _Changes) -> _Sweeps:
    """``sw`` without the carried sweeps before a group's first carried settled one: the Empty
    sweep the state carries for the formation (:func:`_carried_sweeps`) stands alone before it,
    with the sweeps between them dropped, so what the group was doing then is not known from it
    (the held stalls' rebalancing and the skips' membership read the sweeps without it)."""
    n = len(sw.t)
    if not n:
        return sw
    state = _flag(sw.ms.column("is_state")) & _latest_life(sw, ch)  # (a past life's marks stay apart)
    first = np.full(int(sw.g.max()) + 1, np.inf)
    np.fmin.at(first, sw.g[state & sw.settled], sw.t[state & sw.settled])
    keep = ~(state & (sw.t < first[sw.g]) & np.isfinite(first[sw.g]))  # (none settled: all carried, as ever)
    if keep.all():
        return sw
    return _Sweeps(ms=sw.ms.filter(pa.array(keep)), g=sw.g[keep], groups=sw.groups, t=sw.t[keep],
                   settled=sw.settled[keep])


def _latest_life(sw: _Sweeps, ch: _Changes) -> _B:
    """Per sweep: whether it is of its group's latest life (:attr:`_Changes.new_group`)."""
    life = np.cumsum(ch.new_group) - 1
    latest = np.full(int(sw.g.max()) + 1 if len(sw.g) else 0, -1, np.int64)
    np.maximum.at(latest, sw.g, life)
    out: _B = life == latest[sw.g]
    return out


@dataclass
class _Changes:
    """Per member sweep (:class:`_Sweeps` order): ``a`` the group's settled sweep before it (−1:
    none), ``changed`` it ends a sweep window, ``is_empty`` it saw the group Empty, ``new_group``
    the first of a life of the group (its first sweep, or its first after a silence past the
    horizon: the group was gone, deleted or no longer swept, and what it was before is not
    paired with what it is now, as a partition's rows start a new generation of the key after
    such a silence), ``last_empty`` the group's latest Empty sweep at or before it (−1: none)
    and ``formed`` the group was seen Empty and every sweep window since only added members (its
    members before all still there after; one through Empty starts again): the group is still
    forming in view (:func:`formation`)."""

    a: _I
    changed: _B
    is_empty: _B
    new_group: _B
    last_empty: _I
    formed: _B


def _changes(sw: _Sweeps, horizon_s: float = math.inf) -> _Changes:
    """``horizon_s``: the analytics' forget horizon; a group's sweep more than that after its sweep
    before starts a new life of the group (:attr:`_Changes.new_group`)."""
    n = len(sw.t)
    idx = np.arange(n)
    new_group = np.ones(n, bool)
    # a silence past the horizon between two sweeps that follow each other: not between two carried
    # ones (the state carries a life's sweeps with gaps: its formation's Empty sweep, its last
    # settled one); there, the mark of a past life's last sweep (``life_end``) says where it ended
    state = _flag(sw.ms.column("is_state"))
    ended = _flag(sw.ms.column("life_end"))
    new_group[1:] = ((sw.g[1:] != sw.g[:-1]) | ended[:-1]
                     | ((sw.t[1:] - sw.t[:-1] > horizon_s) & ~(state[1:] & state[:-1])))
    gstart = np.maximum.accumulate(np.where(new_group, idx, 0))
    last_settled = np.maximum.accumulate(np.where(sw.settled, idx, -1))
    a = np.full(n, -1, np.int64)
    a[1:] = last_settled[:-1]
    a = np.where(a >= gstart, a, -1)
    gen, gen_ok = longs(sw.ms.column("generation"))
    gen = np.where(gen_ok, gen, -1)
    ids = _list_code(sw.ms.column("member_ids"))
    ai = np.where(a >= 0, a, 0)
    changed = sw.settled & (a >= 0) & ((gen != gen[ai]) | (ids != ids[ai]))
    is_empty = np.asarray(pc.fill_null(pc.equal(sw.ms.column("group_state"), "Empty"), False), dtype=bool)
    last_empty = np.maximum.accumulate(np.where(is_empty, idx, -1))
    last_empty = np.where(last_empty >= gstart, last_empty, -1)
    breaks = changed & (last_empty <= a)  # a window not through Empty; a loss among them breaks
    col = sw.ms.column("member_ids")
    for i in np.flatnonzero(breaks).tolist():
        breaks[i] = not set(col[int(a[i])].as_py() or []) <= set(col[i].as_py() or [])
    last_break = np.maximum.accumulate(np.where(breaks, idx, -1))
    formed = (last_empty >= 0) & (last_break < last_empty)
    return _Changes(a=a, changed=changed, is_empty=is_empty, new_group=new_group, last_empty=last_empty,
                    formed=formed)


@dataclass
class _Records:
    """The generation records of the groups that matter, by group code, in time order."""

    by_group: dict[int, list[dict[str, Any]]]


def _records(gens: pa.Table, groups: pa.Array, wanted: set[int]) -> _Records:
    g, ok = _codes(_gkey(gens), groups)
    keep = ok & np.isin(g, np.fromiter(wanted, np.int64, len(wanted)))
    sub = gens.filter(pa.array(keep))
    gs = g[keep]
    order = np.lexsort((np.asarray(sub.column("gen_t"), dtype=np.float64), gs))
    sub, gs = sub.take(pa.array(order)), gs[order]
    by: dict[int, list[dict[str, Any]]] = {}
    rows = sub.drop_columns(["owners", "instances"]).to_pylist()
    for gg, r in zip(gs.tolist(), rows, strict=True):
        by.setdefault(gg, []).append(r)
    return _Records(by_group=by)


def generation_end(w: _Window, recs: list[dict[str, Any]]) -> None:
    """The record of the generation B saw: of the generation records after A, at or before
    :attr:`_Window.hi`, whose member ids are B's, the latest at or before B, else the earliest
    after B (DescribeGroups reports no generation; a sweep sees a generation only once its record
    is written, so B's is at or before B unless B read the group between the rebalance's end and
    its record; the same members rejoining after B write a later one, which B did not see). When B
    knows its generation (a KIP-848 group's epoch; classic sweeps have none) only a record of that
    generation is B's."""
    before = after = None
    for r in recs:
        if (r["member_ids"] is None or not w.a.t < r["gen_t"] <= w.hi or r["member_ids"] != w.b.member_ids
                or (w.b.generation is not None and r["generation"] != w.b.generation)):
            continue
        if r["gen_t"] <= w.b.t:
            if before is None or r["gen_t"] >= before["gen_t"]:
                before = r
        elif after is None or r["gen_t"] < after["gen_t"]:
            after = r
    best = before if before is not None else after
    if best is not None:
        w.b_gen_t, w.b_gen = float(best["gen_t"]), best["generation"]


@dataclass
class _Lives:
    """Where the lives of the groups of :class:`_Sweeps` end (:attr:`_Changes.new_group`): per
    group code, the last sweep of each life but the latest; and the horizon."""

    ended: dict[int, list[float]]
    horizon_s: float


def group_lives(sw: _Sweeps, ch: _Changes, horizon_s: float) -> _Lives:
    again = ch.new_group.copy()
    if len(again):
        again[0] = False
        again[1:] &= sw.g[1:] == sw.g[:-1]
    ended: dict[int, list[float]] = {}
    for j in np.flatnonzero(again).tolist():
        ended.setdefault(int(sw.g[j]), []).append(float(sw.t[j - 1]))
    return _Lives(ended=ended, horizon_s=horizon_s)


def life_start(lives: _Lives, g: int, t: float) -> float:
    """Which life of its group what is at ``t`` (a sweep, a record) is of, as the last sweep of the
    life before it: of the lives that ended more than the horizon before ``t`` (until the horizon
    has passed the group is the one it was: a record written then is of that life), the latest
    one's last sweep, or −inf. Two things of one group with the same value are of one life."""
    return max((e for e in lives.ended.get(g, []) if e + lives.horizon_s < t), default=-math.inf)


def missed_generations(sw: _Sweeps, gens: pa.Table, windows: list[_Window], lives: _Lives | None = None
                       ) -> list[_Window]:
    """Windows of the generations no sweep saw (see the module doc). Vectorised up to the
    candidates (records whose members or generation differ from the group's previous record,
    inside its span of settled sweeps and the records their windows ended at), which are few.
    Two records of different lives of the group (``lives``, :func:`life_start`) are no window,
    nor is a record without a settled sweep of its life (or a window's end) at or after it, nor
    two records between which the latest settled sweep saw members of neither (a generation
    whose record is missing, the tail down a while: the sweep windows have the changes)."""
    c = gens.filter(pc.greater(pc.list_value_length(gens.column("member_ids")).fill_null(0), 0))
    if not c.num_rows or not len(sw.groups):  # no records, or no sweep to place them after
        return []
    g, ok = _codes(_gkey(c), sw.groups)
    gt = np.asarray(c.column("gen_t"), dtype=np.float64)
    order = np.lexsort((gt, np.where(ok, g, -1)))
    c, g, ok, gt = c.take(pa.array(order)), g[order], ok[order], gt[order]
    ids = _list_code(c.column("member_ids"))
    gen, gen_ok = longs(c.column("generation"))
    same = np.zeros(len(g), bool)
    same[1:] = ok[1:] & ok[:-1] & (g[1:] == g[:-1])
    differs = np.zeros(len(g), bool)
    differs[1:] = (ids[1:] != ids[:-1]) | (gen_ok[1:] & gen_ok[:-1] & (gen[1:] != gen[:-1]))
    ng = len(sw.groups)
    # after the settled sweep the state carried in and the record its window ended at (an earlier
    # step judged the records up to them), at or before the group's last settled sweep or the
    # record a window of the step ended at (a later step's sweeps may see the rest)
    seen, last = np.full(ng, -np.inf), np.full(ng, -np.inf)
    s = sw.settled
    carried = s & _flag(sw.ms.column("is_state"))
    claimed, claimed_ok = _floats(sw.ms.column("claimed_gen_t"))
    claim_hi, claim_hi_ok = _floats(sw.ms.column("claim_hi"))
    np.maximum.at(seen, sw.g[carried], sw.t[carried])
    np.maximum.at(seen, sw.g[carried & claimed_ok], claimed[carried & claimed_ok])
    np.maximum.at(last, sw.g[s], sw.t[s])
    judged = [w for w in windows if w.b_gen_t is not None]
    np.maximum.at(last, np.array([w.g for w in judged], np.int64), np.array([w.b_gen_t for w in judged], np.float64))
    gi = np.where(ok, g, 0)
    cand = same & differs & ok & (gt > seen[gi]) & (gt <= last[gi])
    ends = {(w.g, w.b_gen_t) for w in windows if w.b_gen_t is not None}
    open_ = [(w.g, w.a.t, w.hi) for w in windows if w.b_gen_t is None]
    # and what the windows of earlier steps claimed: those ending at the carried settled sweeps
    ends |= {(int(sw.g[i]), float(claimed[i])) for i in np.flatnonzero(carried & claimed_ok).tolist()}
    open_ += [(int(sw.g[i]), float(sw.t[i]), float(claim_hi[i]))
              for i in np.flatnonzero(carried & claim_hi_ok).tolist()]
    out = []
    settled_t: dict[int, _F] = {}
    for i in np.flatnonzero(cand).tolist():
        gg, t = int(g[i]), float(gt[i])
        if (gg, t) in ends or any(og == gg and lo < t <= hi for og, lo, hi in open_):
            continue
        cluster, group_id = c.column("cluster")[i].as_py(), c.column("group_id")[i].as_py()
        if lives is not None:
            lo = life_start(lives, gg, t)
            if life_start(lives, gg, float(gt[i - 1])) != lo:
                continue  # the record before is of the group's life before
            st = settled_t.get(gg)
            if st is None:  # the group's settled sweeps (``sw``: by group, then time) and window ends
                a, b = np.searchsorted(sw.g, [gg, gg + 1])
                st = settled_t[gg] = np.sort(np.concatenate([sw.t[a:b][sw.settled[a:b]],
                                                             [w.b_gen_t for w in judged if w.g == gg]]))
            k = int(np.searchsorted(st, t, "left"))
            if k == len(st) or life_start(lives, gg, float(st[k])) != lo:
                continue  # no settled sweep of its life (nor a window's end) at or after it
        a, b = _rec_snap(c, i - 1), _rec_snap(c, i)
        lo_, hi_ = np.searchsorted(sw.g, [gg, gg + 1])
        seen_k = np.flatnonzero(sw.settled[lo_:hi_] & (sw.t[lo_:hi_] > a.t) & (sw.t[lo_:hi_] < t))
        if len(seen_k):  # the latest settled sweep between them saw other members: a record is missing
            between = set(sw.ms.column("member_ids")[lo_ + int(seen_k[-1])].as_py() or [])
            if between != set(a.member_ids) and between != set(b.member_ids):
                continue
        out.append(_Window(g=gg, cluster=cluster, group_id=group_id, a=a, b=b, b_prev_t=t, b_next_t=t, a_next_t=t,
                           b_gen_t=t, b_gen=b.generation, from_records=True, a_from_record=True))
    return out


def start_after_missed(windows: list[_Window]) -> None:
    """One window per generation change: a sweep window whose end is a record (``b_gen_t``), with
    windows from the records alone ending between its A and that record (generations no sweep saw,
    :func:`missed_generations`), starts at the latest of their Bs: its A becomes that record (and
    A⁺ its end), so that what it says (members before, cause, partitions moved) is of the last
    change alone, the earlier ones being windows of their own (two generations between two
    sweeps; a group restarted through Empty, its leave a window from the records)."""
    ends: dict[int, list[_Window]] = {}
    for w in windows:
        if w.from_records:
            ends.setdefault(w.g, []).append(w)
    for w in windows:
        if w.from_records or w.b_gen_t is None:
            continue
        inner = [r for r in ends.get(w.g, []) if w.a.t < r.b.t < w.b_gen_t]
        if inner:
            w.a = max(inner, key=lambda r: r.b.t).b
            w.a_next_t = w.b_gen_t
            w.a_from_record = True
            w.through_empty = False  # (its Empty sights are those after the new A: :func:`empty_sights`)


def empty_sights(w: _Window, records: Sequence[float], sweeps: _F) -> None:
    """``w.left_by``: the first of the group's Empty ``group_metadata`` record times ``records``
    and Empty member sweep times ``sweeps`` in (A, A⁺], else None; and a window whose A is a
    record goes through Empty (:attr:`_Window.through_empty`) when an Empty sweep is between its
    sides (a window between two sweeps knows that from its sweeps already)."""
    sights = [t for t in records if w.a.t < t <= w.a_next_t]
    sights += sweeps[(sweeps > w.a.t) & (sweeps <= w.a_next_t)].tolist()
    w.left_by = min(sights) if sights else None
    if w.a_from_record:
        w.through_empty = w.through_empty or bool(((sweeps > w.a.t) & (sweeps < w.b.t)).any())


def _rec_snap(c: pa.Table, i: int) -> _Snap:
    r = c.slice(i, 1).select(["gen_t", "generation", "member_ids", "instances"]).to_pylist()[0]
    return _Snap(t=float(r["gen_t"]), generation=r["generation"], member_ids=list(r["member_ids"] or []),
                 instances=list(r["instances"] or []), owners=_owners_of(c.column("owners"), i))


def record_timeouts(w: _Window, recs: list[dict[str, Any]], default_session: float, default_rebal: float) -> None:
    """The timeouts in force at A: the group's latest record with a timeout at or before A (else
    its first after A); each missing one from the defaults. ``a_gen``: the generation of that
    record at or before A (A's generation when the sweeps have none)."""
    before = after = None
    for r in recs:
        if r["session_timeout_s"] is None and r["rebalance_timeout_s"] is None:
            continue
        if r["gen_t"] <= w.a.t:
            if before is None or r["gen_t"] >= before["gen_t"]:
                before = r
        elif after is None or r["gen_t"] < after["gen_t"]:
            after = r
    rec = before if before is not None else after
    sess = rec["session_timeout_s"] if rec is not None else None
    reb = rec["rebalance_timeout_s"] if rec is not None else None
    w.session = float(sess) if sess is not None else default_session
    w.rebal = float(reb) if reb is not None else default_rebal
    w.a_gen = before["generation"] if before is not None else None


def membership_change(w: _Window) -> None:
    """``bounced``: instance ids on both sides with another member id; ``gone``: A's member ids
    not in B (bounced ones excepted); ``new``: B's not in A (bounced ones excepted)."""
    a_by = {x["iid"]: x["mid"] for x in w.a.instances}
    b_by = {x["iid"]: x["mid"] for x in w.b.instances}
    seen: list[str] = []
    for x in w.a.instances:
        i = x["iid"]
        if i in b_by and i not in seen:
            seen.append(i)
    w.bounced = [i for i in seen if a_by[i] != b_by[i]]
    a_b, b_b = {a_by[i] for i in w.bounced}, {b_by[i] for i in w.bounced}
    b_set, a_set = set(w.b.member_ids), set(w.a.member_ids)
    w.gone = _distinct([m for m in w.a.member_ids if m not in b_set and m not in a_b])
    w.new = _distinct([m for m in w.b.member_ids if m not in a_set and m not in b_b])


def _distinct(xs: list[str]) -> list[str]:
    return list(dict.fromkeys(xs))


def cause_of(w: _Window, leave_gap_s: float, heartbeat_s: float, network_s: float) -> str:
    """The cause (module doc): a static bounce first, then departures judged by the gap between
    the departed members' earliest last progress and A⁺, then joins."""
    if w.bounced:
        return "static_member_bounce"
    if w.gone:
        gap = w.departed_by - (w.last_alive if w.last_alive is not None else w.a.t)
        if gap <= max(leave_gap_s, w.session / 4):
            # with members arriving too: a JoinGroup and a LeaveGroup in one rebalance, nothing
            # says which came first (joins usually do) — unless the group went Empty in between
            return "join" if w.new and w.left_by is None else "leave"
        return timeout_cause(gap, w.session, w.rebal, heartbeat_s, network_s)
    return "join" if w.new else "unknown"


def timeout_cause(gap: float, session: float, rebal: float, heartbeat_s: float, network_s: float) -> str:
    """A departed member's timeout (module doc): the one its silence ``gap`` can have been, else
    the nearer in ratio. A session timeout removes a member at its last heartbeat + the session,
    and its last heartbeat is at most one interval before its last progress: the gap is at least
    session − heartbeat − network. A poll timeout removes it at its last poll + the rebalance
    timeout (max.poll.interval.ms), and its last progress is at or before its last poll: at least
    rebalance − network."""
    can_session = gap >= session - heartbeat_s - network_s
    can_poll = gap >= rebal - network_s
    if can_session != can_poll:
        return "session_timeout" if can_session else "max_poll_interval"
    return "session_timeout" if _nearer_session(gap, session, rebal) else "max_poll_interval"


def _nearer_session(gap: float, session: float, rebal: float) -> bool:
    """|log(gap/session)| ≤ |log(gap/rebal)| (an undefined logarithm: no)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ls = np.log(np.float64(gap) / np.float64(session))
        lr = np.log(np.float64(gap) / np.float64(rebal))
    if np.isnan(ls) or np.isnan(lr):
        return False
    return bool(abs(ls) <= abs(lr))


def bound_of(cause: str, session: float, rebal: float, heartbeat_s: float, network_s: float) -> float:
    """What the settings bound: a crash (and a static member's absence) by session + heartbeat +
    network, anything else by the rebalance timeout."""
    if cause in ("session_timeout", "static_member_bounce"):
        return session + (heartbeat_s + network_s)
    return rebal


@dataclass
class _Times:
    """Per-partition times of a set of groups (commit times, or committed-offset changes), sorted
    by group, partition, time; ``tp`` the ``topic/partition`` string of each."""

    g: _I
    p: _I
    t: _F
    tp: pa.Array
    starts: dict[int, tuple[int, int]]
    topic: pa.Array
    partition: pa.Array

    @staticmethod
    def of(g: _I, topic: pa.Array, partition: pa.Array, t: _F) -> _Times:
        topic, partition = _plain(topic).cast(pa.string()), _plain(partition).cast(pa.int32())
        p = key_code(topic, partition) if len(g) else np.zeros(0, np.int64)
        order = np.lexsort((t, p, g))
        g, p, t = g[order], p[order], t[order]
        idx = pa.array(order)
        topic, partition = topic.take(idx), partition.take(idx)
        starts: dict[int, tuple[int, int]] = {}
        if len(g):
            cut = np.flatnonzero(np.diff(g)) + 1
            lo = np.concatenate([[0], cut])
            hi = np.concatenate([cut, [len(g)]])
            starts = {int(g[a]): (int(a), int(b)) for a, b in zip(lo, hi, strict=True)}
        return _Times(g=g, p=p, t=t, tp=_tp(topic, partition), starts=starts, topic=topic, partition=partition)

    def of_group(self, g: int) -> tuple[_I, _F, pa.Array]:
        a, b = self.starts.get(g, (0, 0))
        return self.p[a:b], self.t[a:b], self.tp.slice(a, b - a)


def exact_bounds(w: _Window, commits: _Times) -> None:
    """Commit-stream boundaries (module doc): end = the record of generation B; start = the
    surviving members' earliest revocation commit, else the group's last commit, in [A, end] (a
    static bounce: the bounced member's last commit), else the middle of (A, end) when the end
    is exact and before A⁺ (else the sweeps' midpoint of (A, A⁺)); never after the end; a
    timed-out member's last progress = its partitions' last commit before its departure
    (:attr:`_Window.departed_by`)."""
    has_end = w.b_gen_t is not None
    if w.b_gen_t is not None:
        w.end = w.b_gen_t
    static = w.cause == "static_member_bounce"
    timed_out = w.cause in _TIMED_OUT
    gone_last = bounce_last = surv_start = group_last = None
    own = w.a.owners
    if len(own):
        _, ct, ctp = commits.of_group(w.g)
        lo = w.a.t - w.session - w.rebal
        in_range = (ct <= w.end) & (ct >= lo)
        ct, ctp = ct[in_range], ctp.filter(pa.array(in_range))
        if len(ct):
            mid_iid = {x["mid"]: x["iid"] for x in w.a.instances}
            gone_owners = [mid_iid[m] if mid_iid.get(m) is not None else m for m in w.gone]
            b_owners = pc.unique(w.b.owners.field("owner")) if len(w.b.owners) else pa.array([], pa.string())
            a_tp, a_owner = own.field("tp"), own.field("owner")
            is_gone = _flag(pc.is_in(a_owner, value_set=pa.array(gone_owners, pa.string())))
            is_surv = _flag(pc.is_in(a_owner, value_set=b_owners))
            is_bounced = _flag(pc.is_in(a_owner, value_set=pa.array(w.bounced, pa.string())))
            # each commit with every A entry (tp, owner) of its partition
            entry = np.asarray(pc.index_in(ctp, value_set=a_tp).fill_null(-1), dtype=np.int64)
            pairs_c, pairs_e = _pairs(ctp, a_tp, entry)
            t = ct[pairs_c]
            recent = t >= w.a.t
            gone_m = is_gone[pairs_e] & (t <= w.departed_by)
            bounce_m = is_bounced[pairs_e]
            if gone_m.any():
                gone_last = float(t[gone_m].max())
            if bounce_m.any():
                bounce_last = float(t[bounce_m].max())
            if recent.any():
                group_last = float(t[recent].max())
            surv = is_surv[pairs_e] & recent
            if surv.any():
                oc, _ = _dense(key_code(a_owner.take(pa.array(pairs_e[surv]))))
                top = np.full(int(oc.max()) + 1, -np.inf)
                np.maximum.at(top, oc, t[surv])
                surv_start = float(top.min())
    # no commit to go by: the sweeps' estimate, which must respect an exact end (A saw the old
    # membership settled, the record says the new one was settled at end: the change happened in
    # (A, end], its middle when that is before the midpoint of (A, A⁺))
    by = min(w.end, w.change_by)
    estimate = (w.a.t + by) / 2 if has_end and by < w.a_next_t else w.start
    if static:
        start = bounce_last if bounce_last is not None else estimate
    else:
        start = surv_start if surv_start is not None else group_last if group_last is not None else estimate
    w.start = min(start, w.end)
    if timed_out and gone_last is not None:
        w.quiet_from = gone_last
    elif static:
        w.quiet_from = w.start
    if has_end:
        w.source = "commit_stream"


def _pairs(ctp: pa.Array, a_tp: pa.Array, first: _I) -> tuple[_I, _I]:
    """(commit, A entry) index pairs of equal ``topic/partition`` (several A entries of one
    partition are rare: then a join)."""
    if len(pc.unique(a_tp)) == len(a_tp):
        ok = first >= 0
        return np.flatnonzero(ok), first[ok]
    j = pa.table({"tp": ctp, "_c": pa.array(np.arange(len(ctp)))}).join(
        pa.table({"tp": a_tp, "_e": pa.array(np.arange(len(a_tp)))}), "tp", join_type="inner")
    return np.asarray(j.column("_c"), dtype=np.int64), np.asarray(j.column("_e"), dtype=np.int64)


def partitions_moved(w: _Window) -> int:
    """B's partitions whose owner is not A's (or that A did not assign)."""
    b = w.b.owners
    if not len(b):
        return 0
    a = w.a.owners
    at = pc.index_in(b.field("tp"), value_set=a.field("tp")) if len(a) else pa.nulls(len(b), pa.int32())
    before = a.field("owner").take(at) if len(a) else pa.nulls(len(b), pa.string())
    return int(np.asarray(pc.not_equal(before, b.field("owner")).fill_null(True), dtype=bool).sum())


def processing_gap(w: _Window, times: _Times,
                   lookaround_s: float = LOOKAROUND_S) -> tuple[float | None, list[str], list[float]]:
    """The largest per-partition gap between the last commit at or before the start and the first
    after it, among the commits within ``lookaround_s`` of the window; and the partitions it is
    still waiting for: those with a commit at or before the start and none after it among
    ``times`` (``topic/partition``, and that last commit's time), whose first commit after it a
    later step may see (:func:`complete_pending`)."""
    p, t, tp = times.of_group(w.g)
    m = (t >= w.start - lookaround_s) & (t <= w.end + lookaround_s)
    p, t = p[m], t[m]
    if not len(t):
        return None, [], []
    tp = tp.filter(pa.array(m))
    pc_, n = _dense(p)
    lb = np.full(n, -np.inf)
    fa = np.full(n, np.inf)
    le = t <= w.start
    np.maximum.at(lb, pc_[le], t[le])
    np.minimum.at(fa, pc_[~le], t[~le])
    both = np.isfinite(lb) & np.isfinite(fa)
    waiting = np.flatnonzero(np.isfinite(lb) & ~np.isfinite(fa))
    _, first = np.unique(pc_, return_index=True)  # a row of each partition, for its name
    names = tp.take(pa.array(first[waiting])).to_pylist() if len(waiting) else []
    return (float((fa - lb)[both].max()) if both.any() else None), names, lb[waiting].tolist()


def complete_pending(carried: pa.Table | None, times: _Times | None, groups: pa.Array,
                     until: float | None) -> tuple[pa.Table, pa.Table]:
    """The carried windows still waiting for a partition's first commit after their start
    (:data:`PENDING_GAP_SCHEMA`) completed with ``times`` (this step's commits, or its committed
    offset changes without the commit stream; ``groups`` their group codes' dictionary): a
    partition's first commit is its first time after both the window's exact start and its last
    commit before (a re-read commit at or before the start is no first one), within
    :data:`LOOKAROUND_S` of the end, as :func:`processing_gap` takes it. Returns the rows whose
    ``max_processing_gap_s`` rose (:data:`REBALANCE_SCHEMA`: re-published, the step's newer
    ``as_of_ts`` makes them the current ones), and the rows still waiting (with the gap so far),
    kept while ``until`` is within :data:`LOOKAROUND_S` of their end."""
    if carried is None or not carried.num_rows:
        return REBALANCE_SCHEMA.empty_table(), PENDING_GAP_SCHEMA.empty_table()
    for f in PENDING_GAP_SCHEMA:  # a column a later version added: null (the exact start: start_ts)
        if f.name not in carried.column_names:
            carried = carried.append_column(f.name, pa.nulls(carried.num_rows, f.type))
    carried = carried.select(PENDING_GAP_SCHEMA.names).cast(PENDING_GAP_SCHEMA)
    for exact, ts in (("start_s", "start_ts"), ("end_s", "end_ts")):
        seconds_ = pc.divide(pc.cast(carried.column(ts).cast(pa.int64()), pa.float64()), 1000.0)
        carried = carried.set_column(carried.schema.get_field_index(exact), exact,
                                     pc.coalesce(carried.column(exact), seconds_))
    g, ok = _codes(_gkey(carried), groups)
    runs: dict[int, dict[str, tuple[int, int]]] = {}  # per group: each partition's run of times

    def run_of(gi: int) -> tuple[_F, dict[str, tuple[int, int]]]:
        p, t, tp = times.of_group(gi) if times is not None else (np.zeros(0, np.int64), np.zeros(0), pa.array([]))
        if gi not in runs:
            cut = np.flatnonzero(np.diff(p)) + 1
            lo, hi = np.concatenate([[0], cut]).astype(np.int64), np.concatenate([cut, [len(p)]]).astype(np.int64)
            runs[gi] = dict(zip(tp.take(pa.array(lo)).to_pylist(), zip(lo.tolist(), hi.tolist(), strict=True),
                                strict=True)) if len(p) else {}
        return t, runs[gi]

    raised, waiting = np.zeros(carried.num_rows, bool), np.zeros(carried.num_rows, bool)
    gaps: list[float | None] = []
    left: list[tuple[list[str], list[float]]] = []
    for i, r in enumerate(carried.select(["start_s", "end_s", "max_processing_gap_s", "pending_tp",
                                          "pending_lb"]).to_pylist()):
        gap, tps, lbs = r["max_processing_gap_s"], r["pending_tp"] or [], r["pending_lb"] or []
        still_tp, still_lb = [], []
        if ok[i] and times is not None:
            t, where = run_of(int(g[i]))
            for name, lb in zip(tps, lbs, strict=True):
                a, b = where.get(name, (0, 0))
                j = a + int(np.searchsorted(t[a:b], max(r["start_s"], lb), side="right"))
                if j < b and t[j] <= r["end_s"] + LOOKAROUND_S:
                    gap = max(gap if gap is not None else -math.inf, float(t[j]) - lb)
                else:
                    still_tp.append(name)
                    still_lb.append(lb)
        else:
            still_tp, still_lb = list(tps), list(lbs)
        raised[i] = gap != r["max_processing_gap_s"]
        waiting[i] = bool(still_tp) and (until is None or r["end_s"] + LOOKAROUND_S >= until)
        gaps.append(gap)
        left.append((still_tp, still_lb))
    now = carried.set_column(carried.schema.get_field_index("max_processing_gap_s"), "max_processing_gap_s",
                             pa.array(gaps, pa.float64()))
    keep = np.flatnonzero(waiting)
    still = now.take(pa.array(keep, pa.int64())).drop_columns(["pending_tp", "pending_lb"]).append_column(
        "pending_tp", pa.array([left[k][0] for k in keep.tolist()], pa.list_(pa.string()))).append_column(
        "pending_lb", pa.array([left[k][1] for k in keep.tolist()], pa.list_(pa.float64())))
    return now.filter(pa.array(raised)).select(REBALANCE_COLUMNS), still.cast(PENDING_GAP_SCHEMA)


def gap_bounds(sw: _Sweeps, keep: _B, gens: pa.Table | None, until: float | None, horizon_s: float) -> _F:
    """Per group of ``sw``: the earliest start a window found by a later step can have, from sweeps
    alone (module doc, **Processing gap across steps**). Its A is a settled sweep at or after the
    group's earliest carried settled sweep S (``keep``: :func:`_carried_sweeps`), so its start is
    too (a group without one has no window before a later settled sweep: +inf); a
    generation no sweep saw (:func:`missed_generations`) has its B after S and its A at or after
    the record in force at S, R: (R + S) / 2, but never before S − :data:`LOOKAROUND_S` (else a
    stable group's records would carry every change since its last rebalance; a window from
    records alone that starts earlier, a generation the sweeps missed after a long settled spell,
    may miss a partition's change before its start: documented). Never before ``until`` −
    ``horizon_s`` (the horizon a step reads back at all)."""
    ng = len(sw.groups)
    first = np.full(ng, np.inf)
    settled = keep & sw.settled
    np.minimum.at(first, sw.g[settled], sw.t[settled])
    bound = first.copy()
    if gens is not None and gens.num_rows:
        c = gens.filter(pc.greater(pc.list_value_length(gens.column("member_ids")).fill_null(0), 0))
        g, ok = _codes(_gkey(c), sw.groups)
        gt = np.asarray(c.column("gen_t"), dtype=np.float64)
        in_force = np.full(ng, -np.inf)
        m = ok & (gt <= first[np.where(ok, g, 0)])
        np.maximum.at(in_force, g[m], gt[m])
        has = np.isfinite(in_force) & np.isfinite(first)
        bound[has] = np.maximum((in_force[has] + first[has]) / 2, first[has] - LOOKAROUND_S)
    if until is not None:
        bound = np.where(np.isfinite(bound), np.maximum(bound, until - horizon_s), bound)
    return bound


def with_gap_times(times: _Times | None, carried: pa.Table | None, groups: pa.Array, wanted: _I) -> _Times | None:
    """``times`` (the step's committed-offset changes of the groups ``wanted``) with the carried
    ``gap_times`` of those groups (:data:`GAP_TIME_SCHEMA`); a time in both counts once in what
    reads it (a gap is a maximum of a first time after less a last time before)."""
    if carried is None or not carried.num_rows:
        return times
    g, ok = _codes(_gkey(carried), groups)
    keep = ok & np.isin(g, wanted)
    if not keep.any():
        return times
    c = carried.filter(pa.array(keep))
    gs = [g[keep]]
    topics = [_plain(c.column("topic")).cast(pa.string())]
    parts = [_plain(c.column("partition")).cast(pa.int32())]
    ts = [np.asarray(_plain(c.column("t")).cast(pa.float64()), dtype=np.float64)]
    if times is not None:
        gs.append(times.g)
        topics.append(times.topic)
        parts.append(times.partition)
        ts.append(times.t)
    return _Times.of(np.concatenate(gs), pa.concat_arrays(topics), pa.concat_arrays(parts), np.concatenate(ts))


def gap_time_state(times: _Times | None, groups: pa.Array, bound: _F, of: _I) -> pa.Table:
    """The state part ``gap_times`` (:data:`GAP_TIME_SCHEMA`): of the groups ``of``, each
    partition's times at or after its last one at or before its group's ``bound`` (all of them
    when none is): a later window starting at or after the bound finds among them its last change
    at or before its start and its first after it. A partition whose only such time is its last
    is left out: the series state carries that one (``m_change_t``)."""
    if times is None or not len(times.t) or not len(of):
        return GAP_TIME_SCHEMA.empty_table()
    gb = bound[times.g]
    new_run = np.ones(len(times.t), bool)
    new_run[1:] = (times.g[1:] != times.g[:-1]) | (times.p[1:] != times.p[:-1])
    run = np.cumsum(new_run) - 1
    nr = int(run[-1]) + 1
    before = np.full(nr, -np.inf)  # per run: its last time at or before the bound
    le = times.t <= gb
    np.maximum.at(before, run[le], times.t[le])
    keep = (times.t >= before[run]) & np.isin(times.g, of) & np.isfinite(gb)
    keep[1:] &= new_run[1:] | (times.t[1:] != times.t[:-1])  # a time carried and read again: once
    kept_n = np.bincount(run[keep], minlength=nr)
    keep &= kept_n[run] > 1
    if not keep.any():
        return GAP_TIME_SCHEMA.empty_table()
    idx = pa.array(np.flatnonzero(keep))
    key = groups.take(pa.array(times.g[keep]))
    cg = pc.split_pattern(key, "\x1f")
    return pa.table({"cluster": pc.list_element(cg, 0), "group_id": pc.list_element(cg, 1),
                     "topic": times.topic.take(idx), "partition": times.partition.take(idx),
                     "t": pa.array(times.t[keep]), "bound_t": pa.array(gb[keep])}, schema=GAP_TIME_SCHEMA)


# --------------------------------------------------------------------------------------------
# each owner's last progress, and the committed-offset changes of the groups with a window
# --------------------------------------------------------------------------------------------

def _progress(series: pa.Table, carried: pa.Table | None, groups: pa.Array,
              wanted: _I) -> tuple[pa.Table, _Times]:
    """Of every group in ``groups``, each owner's progress (``g, owner, t`` rows: a sweep that named
    it the owner at which its partition's committed offset changed, or it had no lag; a carried
    row's ``m_alive_t``, as its ``alive_owner``'s); of the groups
    ``wanted``, every committed-offset change (a carried row's last one included)."""
    g, keep = _codes(_gkey(series), groups)
    s = series.filter(pa.array(keep))
    fresh_g = g[keep]
    parts_g = [fresh_g]
    topic = [_plain(s.column("topic")).cast(pa.string())]
    part = [_plain(s.column("partition")).cast(pa.int32())]
    t = [np.asarray(_plain(s.column("t")).fill_null(np.nan), dtype=np.float64)]
    committed, c_ok = longs(s.column("committed"))
    comm: list[_I] = [committed]
    comm_ok: list[_B] = [c_ok]
    owner = [_plain(s.column("owner")).cast(pa.string())]
    lag, lag_ok = longs(s.column("lag"))
    zero_lag = [~lag_ok | (lag == 0)]
    state = [np.zeros(s.num_rows, bool)]
    alive_seed = [np.full(s.num_rows, np.nan)]
    change_seed = [np.full(s.num_rows, np.nan)]
    if carried is not None and carried.num_rows:
        cg, ckeep = _codes(_gkey(carried), groups)
        c = carried.filter(pa.array(ckeep))
        parts_g.append(cg[ckeep])
        topic.append(_plain(c.column("topic")).cast(pa.string()))
        part.append(_plain(c.column("partition")).cast(pa.int32()))
        t.append(np.full(c.num_rows, -np.inf))  # before every fresh row of its key
        cc, cc_ok = longs(c.column("committed"))
        comm.append(cc)
        comm_ok.append(cc_ok)
        change = np.asarray(_plain(c.column("m_change_t")).cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
        # a key's last progress is ``m_alive_t`` (a change or no lag at a sweep that named an owner;
        # none: NaN), that of the owner of its row then (``alive_owner``), not of its owner now: a
        # partition that changed hands since, or lost its owner (a crashed member's, unowned once
        # the broker expired it), still dates the member's last progress in a later step; and a
        # change seen while nobody owned the partition is nobody's progress, as in one pass. A
        # state written before ``m_alive_t``: its last change, of ``change_owner``; before those
        # columns: of its owner, else of the member that held it last
        c_owner = _plain(c.column("owner")).cast(pa.string())
        if "owner_last" in c.column_names:
            c_owner = pc.coalesce(c_owner, _plain(c.column("owner_last")).cast(pa.string()))
        if "m_alive_t" in c.column_names:
            seed = np.asarray(_plain(c.column("m_alive_t")).cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
            by_time = "alive_owner"
        else:
            seed, by_time = change, "change_owner"
        if by_time in c.column_names:
            c_owner = pc.coalesce(_plain(c.column(by_time)).cast(pa.string()), c_owner)
        owner.append(c_owner)
        zero_lag.append(np.zeros(c.num_rows, bool))
        state.append(np.ones(c.num_rows, bool))
        alive_seed.append(seed)
        change_seed.append(change)
    gg = np.concatenate(parts_g)
    tp_topic = pa.concat_arrays(topic)
    tp_part = pa.concat_arrays(part)
    tt = np.concatenate(t)
    cv, cv_ok = np.concatenate(comm), np.concatenate(comm_ok)
    own = pa.concat_arrays(owner)
    zero, st = np.concatenate(zero_lag), np.concatenate(state)
    alive0, change0 = np.concatenate(alive_seed), np.concatenate(change_seed)
    n = len(gg)
    key = key_code(pa.array(gg), tp_topic, tp_part) if n else np.zeros(0, np.int64)
    order = np.lexsort((~st, tt, key))  # a key's carried row first
    key_o, cv_o, cvok_o = key[order], cv[order], cv_ok[order]
    has_prev = np.zeros(n, bool)
    has_prev[1:] = key_o[1:] == key_o[:-1]
    prev_ok = np.zeros(n, bool)
    prev_ok[1:] = cvok_o[:-1]
    prev = np.zeros(n, np.int64)
    prev[1:] = cv_o[:-1]
    changed_o = cvok_o & ~st[order] & (~has_prev | ~prev_ok | (cv_o != prev))
    changed = np.zeros(n, bool)
    changed[order] = changed_o
    own_ok = np.asarray(own.is_valid(), dtype=bool)
    alive_t = np.where(st, alive0, np.where(own_ok & (changed | zero), tt, np.nan))
    a_ok = own_ok & ~np.isnan(alive_t)
    alive = pa.table({"g": pa.array(gg[a_ok], pa.int64()), "owner": own.filter(pa.array(a_ok)),
                      "t": pa.array(alive_t[a_ok], pa.float64())})
    ch_t = np.where(st, change0, np.where(changed, tt, np.nan))
    ch = ~np.isnan(ch_t) & np.isin(gg, wanted)
    m = pa.array(ch)
    return alive, _Times.of(gg[ch], tp_topic.filter(m), tp_part.filter(m), ch_t[ch])


_PROGRESS = pa.schema([("g", pa.int64()), ("owner", pa.string()), ("t", pa.float64())])


def with_member_progress(alive: pa.Table, carried: pa.Table | None, groups: pa.Array) -> pa.Table:
    """Each owner's last progress (``g, owner, t``): the latest of its progress this step
    (:func:`_progress`) and as carried (the state part ``member_progress`` of the groups in
    ``groups``)."""
    if carried is not None and carried.num_rows:
        g, ok = _codes(_gkey(carried), groups)
        c = carried.filter(pa.array(ok))
        alive = pa.concat_tables([alive, pa.table({
            "g": pa.array(g[ok], pa.int64()), "owner": _plain(c.column("member_id")).cast(pa.string()),
            "t": _plain(c.column("alive_t")).cast(pa.float64())})])
    return alive.group_by(["g", "owner"], use_threads=False).aggregate([("t", "max")]).rename_columns(
        ["g", "owner", "t"])


def member_progress_state(alive: pa.Table, groups: pa.Array, kept: pa.Table, gens: pa.Table) -> pa.Table:
    """The state part ``member_progress`` (:data:`MEMBER_PROGRESS_SCHEMA`): the last progress
    ``alive`` (:func:`with_member_progress`) of each member named in its group's carried member
    sweeps ``kept`` or carried generation records ``gens`` (the next state's ``msweeps`` and
    ``generations``): a later window's A is a settled sweep at or after the group's last settled
    one (a carried sweep, or a later step's, whose members are in the carried sweeps or joined
    after this step) or a record (one of those carried, or a later step's), so its departed
    members are among them; a member that left in a window already found is in neither, and
    goes."""
    if not alive.num_rows:
        return MEMBER_PROGRESS_SCHEMA.empty_table()
    named = []
    for t in (kept, gens):
        if t.num_rows:
            lists = _plain(t.column("member_ids"))
            parent = pa.array(np.asarray(pc.list_parent_indices(lists), dtype=np.int64))
            named.append(pc.binary_join_element_wise(_gkey(t).take(parent), pc.list_flatten(lists), "\x1f"))
    if not named:
        return MEMBER_PROGRESS_SCHEMA.empty_table()
    key = groups.take(alive.column("g").combine_chunks())
    mine = alive.filter(pc.is_in(pc.binary_join_element_wise(key, _plain(alive.column("owner")), "\x1f"),
                                 value_set=pc.unique(pa.concat_arrays(named))).fill_null(False))
    cg = pc.split_pattern(groups.take(mine.column("g").combine_chunks()), "\x1f")
    return pa.table({"cluster": pc.list_element(cg, 0), "group_id": pc.list_element(cg, 1),
                     "member_id": _plain(mine.column("owner")), "alive_t": _plain(mine.column("t"))},
                    schema=MEMBER_PROGRESS_SCHEMA)


def _member_commits(commits: _Times, gens: pa.Table | None, empty: dict[tuple[str, str], list[float]],
                    groups: pa.Array) -> _Times:
    """``commits`` without those written while the group was Empty: the group's latest
    ``group_metadata`` record strictly before the commit has no member (``empty``, against the
    generations of ``gens``). No member wrote them (an operator's reset, ``kafka-consumer-groups
    --reset-offsets``, which works only on an Empty group; a member that joins commits only once
    its generation's record is written): they are no member's progress, nor the start of a
    rebalance (a group restarted through Empty would start its window at the operator's commit).
    The records, not the sweeps: the commits come from the same ``__consumer_offsets`` tail as
    the records (without records there is nothing to judge), a step reads its days' records whole
    (a sweep a step does not carry would judge a commit differently in the next step), and only
    a record is written at the moment the group empties."""
    if gens is None or not empty or not len(commits.t):
        return commits
    rec = gens.filter(pc.is_valid(gens.column("member_ids")))
    rg, rok = _codes(_gkey(rec), groups)
    ek = pa.table({"cluster": pa.array([k[0] for k, ts in empty.items() for _ in ts], pa.string()),
                   "group_id": pa.array([k[1] for k, ts in empty.items() for _ in ts], pa.string())})
    eg, eok = _codes(_gkey(ek), groups)
    mark_g = np.concatenate([rg[rok], eg[eok]])
    mark_t = np.concatenate([np.asarray(rec.column("gen_t"), dtype=np.float64)[rok],
                             np.array([t for ts in empty.values() for t in ts], np.float64)[eok]])
    is_empty = np.concatenate([np.zeros(int(rok.sum()), bool), np.ones(int(eok.sum()), bool)])
    before = asof(mark_g, mark_t, commits.g, np.nextafter(commits.t, -np.inf))
    drop = (before >= 0) & is_empty[np.maximum(before, 0)]
    if not drop.any():
        return commits
    keep = pa.array(~drop)
    return _Times.of(commits.g[~drop], commits.topic.filter(keep), commits.partition.filter(keep), commits.t[~drop])


def _commit_times(commits: pa.Table, groups: pa.Array, wanted: _I) -> _Times:
    """The exact time of each commit of an offset (tombstones dropped): the coordinator's commit
    timestamp, else the record's."""
    missing = [c for c in COMMIT_COLUMNS if c not in commits.column_names]
    if missing:
        raise ValueError(f"commits lacks {missing}: the per-group pass reads {list(COMMIT_COLUMNS)}")
    c = commits.filter(pc.is_valid(commits.column("committed_offset")))
    g, ok = _codes(_gkey(c), groups)
    keep = ok & np.isin(g, wanted)
    c = c.filter(pa.array(keep))
    t = seconds(pc.coalesce(_plain(c.column("commit_ts")).cast(_US), _plain(c.column("record_ts")).cast(_US)))
    return _Times.of(g[keep], _plain(c.column("topic")).cast(pa.string()),
                     _plain(c.column("partition")).cast(pa.int32()), t)


def formed_in_records(recs: list[dict[str, Any]], t: float, empties: Sequence[float] = ()) -> bool:
    """Whether the generation records ``recs`` (one group's, in time order) show the group formed
    by ``t``: a record of it Empty (``empties``, :func:`empty_records`: its creation, or every
    member gone) or of its first generation (1) at or before ``t``, and from it every
    generation's members a superset of the one before, up to ``t`` (members only arrived). The
    Empty record counts as an Empty sweep does: the coordinator stores a generation only when its
    members synced, so a join that replaced generation 1 before its sync leaves the records at 0
    (Empty), then 2."""
    born, prev = False, None
    seen = sorted([*recs, *({"gen_t": e, "generation": None, "member_ids": []} for e in empties)],
                  key=lambda r: r["gen_t"])
    for r in seen:
        ids = r.get("member_ids")
        if ids is None or r["gen_t"] > t:
            continue
        if r.get("generation") == 1 or not len(ids):
            born = True
        elif born and prev is not None and not set(prev) <= set(ids):
            born = False
        prev = ids
    return born


def formation(rows: list[dict[str, Any]]) -> _B:
    """Per rebalance row (``rows``: by group, then start; ``members_before``, ``members_after``,
    ``generation_before``, ``_formed_in_view``, ``_through_empty``): whether it belongs to the
    group's formation (module doc, **Storms**): it only adds members (every member before it is
    still there after it, the same members rejoining included) and so did every rebalance of the
    group since the group was last seen Empty: after a rebalance that left it without a member or
    went through Empty (``_through_empty``: a sweep or generation record between its sides without
    a member: its members before left, which counts, and its members after arrived into the Empty
    group), or from one whose group had no member before it, whose generation before was the
    group's first (1), or, the group's first row of the step, whose group was seen forming before
    its A (``_formed_in_view``: a sweep before A saw it Empty and every sweep window since only
    added members, or the records show generation 1 and no member lost since,
    :func:`formed_in_records`; later rows follow the chain of the step's own rows, which also
    holds the losses only the records saw). Without such a sight (the group formed before the
    step's data) no rebalance is its formation."""
    out = np.zeros(len(rows), bool)
    forming: dict[tuple[str, str], bool] = {}
    life: dict[tuple[str, str], float] = {}
    for i, r in enumerate(rows):
        k = (r["cluster"], r["group_id"])
        if life.get(k, r.get("_life_lo", -math.inf)) != r.get("_life_lo", -math.inf):
            forming.pop(k, None)  # a new life of the group: its first row, as a step's first
        life[k] = r.get("_life_lo", -math.inf)
        before, after = r.get("members_before"), r.get("members_after")
        from_empty = ((before is not None and not len(before)) or r.get("generation_before") == 1
                      or (k not in forming and bool(r.get("_formed_in_view"))))
        through = bool(r.get("_through_empty"))
        adds = before is not None and after is not None and set(before) <= set(after)
        out[i] = adds and not through and (from_empty or forming.get(k, False))
        forming[k] = bool(out[i]) or through or (after is not None and not len(after))
    return out


def _group_lags(series: pa.Table, at: pa.Table) -> pa.Table:
    """``cluster, group_id, _tu`` (sweep time, µs) → the group lag there (Σ lag over the sweep's
    rows, each partition once; null when none is known) as ``group_lag``."""
    s = pa.table({"cluster": _plain(series.column("cluster")).cast(pa.string()),
                  "group_id": _plain(series.column("group_id")).cast(pa.string()),
                  "topic": _plain(series.column("topic")).cast(pa.string()),
                  "partition": _plain(series.column("partition")).cast(pa.int32()),
                  "_tu": pa.array(_tu(np.asarray(_plain(series.column("t")).fill_null(np.nan), dtype=np.float64))),
                  "lag": _plain(series.column("lag")).cast(pa.int64())})
    j = s.join(at.select(["cluster", "group_id", "_tu"]).group_by(["cluster", "group_id", "_tu"]).aggregate([]),
               ["cluster", "group_id", "_tu"], join_type="inner")
    once = j.group_by(["cluster", "group_id", "topic", "partition", "_tu"], use_threads=False).aggregate(
        [("lag", "first")])
    return once.group_by(["cluster", "group_id", "_tu"]).aggregate([("lag_first", "sum")]).rename_columns(
        ["cluster", "group_id", "_tu", "group_lag"])


def _tu(t: _F) -> _I:
    return np.rint(np.nan_to_num(t, nan=0.0) * 1e6).astype(np.int64)


# --------------------------------------------------------------------------------------------
# storms and outages
# --------------------------------------------------------------------------------------------

@dataclass
class _StormPass:
    """Rebalances by group then start (ms): ``n`` (how many started within the window before
    each, itself and ties included), ``first`` (the earliest of them, µs), ``stormy``, ``sid``."""

    g: _I
    t: _I
    start_us: _I
    end_us: _I
    end_ok: _B
    is_state: _B
    n: _I
    first: _I
    stormy: _B
    sid: _I
    order: _I


def _storm_pass(rb: pa.Table, is_state: _B, *, count: int, window_s: float) -> _StormPass:
    start_us, _ = longs(_plain(rb.column("start_ts")).cast(_US).cast(pa.int64()))
    end_us, end_ok = longs(_plain(rb.column("end_ts")).cast(_US).cast(pa.int64()))
    g, _ = _dense(key_code(_gkey(rb))) if rb.num_rows else (np.zeros(0, np.int64), 0)
    order = np.lexsort((start_us, g))
    g, start_us, end_us, end_ok, is_state = g[order], start_us[order], end_us[order], end_ok[order], is_state[order]
    t = np.floor_divide(start_us, 1000)  # SQL's unix_millis
    w = int(window_s * 1000)
    n = len(t)
    base = int(t.min()) if n else 0
    span = int(t.max() - base + w + 2) if n else 1
    comp = g * span + (t - base)
    lo = np.searchsorted(comp, g * span + (t - base - w), side="left")
    hi = np.searchsorted(comp, comp, side="right")
    cnt = (hi - lo).astype(np.int64)
    first = start_us[lo] if n else np.zeros(0, np.int64)  # the earliest start of the range
    stormy = cnt >= count
    same = np.zeros(n, bool)
    same[1:] = g[1:] == g[:-1]
    prev_stormy = np.zeros(n, bool)
    prev_stormy[1:] = stormy[:-1] & same[1:]
    new = stormy & ~prev_stormy
    gstart = np.maximum.accumulate(np.where(~same, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    cs = np.cumsum(new)
    sid = cs - np.where(gstart > 0, cs[np.maximum(gstart - 1, 0)], 0)
    return _StormPass(g=g, t=t, start_us=start_us, end_us=end_us, end_ok=end_ok, is_state=is_state, n=cnt,
                      first=first, stormy=stormy, sid=sid, order=order)


def _java_f0(x: float) -> str:
    """``%.0f`` as Java formats it (half up)."""
    return str(decimal.Decimal(repr(x)).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


def storms(recent: pa.Table, is_state: _B, *, count: int, window_s: float, schema: pa.Schema) -> pa.Table:
    """``rebalance_storm`` anomalies (module doc) over rebalances ``recent`` (``cluster, group_id,
    start_ts, end_ts``; ``is_state``: carried, context only), in ``schema`` (the columns it lacks
    null): start = the earliest start within the window of its first rebalance, end = the last
    end, magnitude = the most rebalances within one window."""
    sp = _storm_pass(recent, is_state, count=count, window_s=window_s)
    idx = np.flatnonzero(sp.stormy)
    if not len(idx):
        return schema.empty_table()
    sk = sp.g[idx] * (int(sp.sid.max()) + 1) + sp.sid[idx]
    _, inv = np.unique(sk, return_inverse=True)
    k = int(inv.max()) + 1
    start = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(start, inv, sp.first[idx])
    end = np.full(k, np.iinfo(np.int64).min)
    ev = sp.end_ok[idx]
    np.maximum.at(end, inv[ev], sp.end_us[idx][ev])
    end_ok = np.zeros(k, bool)
    end_ok[inv[ev]] = True
    nmax = np.zeros(k, np.int64)
    np.maximum.at(nmax, inv, sp.n[idx])
    fresh = np.zeros(k, bool)
    fresh[inv[~sp.is_state[idx]]] = True
    one = np.zeros(k, np.int64)
    one[inv] = sp.order[idx]
    keep = np.flatnonzero(fresh)
    if not len(keep):
        return schema.empty_table()
    rows = recent.take(pa.array(one[keep]))
    start_ts = pa.array(start[keep], pa.int64()).cast(_US).cast(_MS, safe=False)
    cl, gr = _plain(rows.column("cluster")).cast(pa.string()), _plain(rows.column("group_id")).cast(pa.string())
    ms = (start[keep] // 1000).astype(str)
    m = len(keep)
    cols: dict[str, pa.Array] = {
        "cluster": cl, "group_id": gr, "topic": pa.nulls(m, pa.string()), "partition": pa.nulls(m, pa.int32()),
        "kind": pa.array(["rebalance_storm"] * m, pa.string()), "start_ts": start_ts,
        "end_ts": pa.array(end[keep], pa.int64(), mask=~end_ok[keep]).cast(_US).cast(_MS, safe=False),
        "severity": pa.array(["warning"] * m), "magnitude": pa.array(nmax[keep].astype(np.float64)),
        "unit": pa.array(["rebalances"] * m),
        "detail": pa.array([f"{int(x)} rebalances within {_java_f0(window_s)} s" for x in nmax[keep]]),
        "key": pc.binary_join_element_wise(pa.array(["rebalance_storm"] * m, pa.string()), cl, gr,
                                           pa.array([""] * m, pa.string()), pa.array([""] * m, pa.string()),
                                           pa.array(ms, pa.string()), "|"),
        "date": dates(start_ts)}
    return pa.table({f.name: cols[f.name].cast(f.type) if f.name in cols else pa.nulls(m, f.type) for f in schema},
                    schema=schema)


def storm_state(recent: pa.Table, is_state: _B, *, count: int, window_s: float) -> pa.Table:
    """The rebalances the next step's storms need (:data:`RECENT_SCHEMA`): of each group, those
    starting within the window before its last one, or, when that one is stormy, within the window
    before the first of its storm."""
    if not recent.num_rows:
        return RECENT_SCHEMA.empty_table()
    sp = _storm_pass(recent, is_state, count=count, window_s=window_s)
    n = len(sp.g)
    last = np.ones(n, bool)
    last[:-1] = sp.g[1:] != sp.g[:-1]
    # the group's last rebalance (the latest start; the last of equal ones)
    li = np.flatnonzero(last)
    ng = int(sp.g.max()) + 1
    open_sid = np.full(ng, -1, np.int64)
    top_t = np.full(ng, np.iinfo(np.int64).min)
    top_t[sp.g[li]] = sp.t[li]
    at_top = sp.t == top_t[sp.g]
    # rows at the top time share one stormy value and sid
    ti = np.flatnonzero(at_top & sp.stormy)
    open_sid[sp.g[ti]] = sp.sid[ti]
    since = top_t.copy()
    inside = sp.stormy & (sp.sid == open_sid[sp.g]) & (open_sid[sp.g] >= 0)
    first_in = np.full(ng, np.iinfo(np.int64).max)
    np.minimum.at(first_in, sp.g[inside], sp.t[inside])
    since = np.where(first_in < np.iinfo(np.int64).max, first_in, since)
    keep = sp.t >= since[sp.g] - int(window_s * 1000)
    rows = recent.take(pa.array(sp.order[keep]))
    return pa.table({"cluster": _plain(rows.column("cluster")).cast(pa.string()),
                     "group_id": _plain(rows.column("group_id")).cast(pa.string()),
                     "start_ts": _plain(rows.column("start_ts")).cast(_MS, safe=False),
                     "end_ts": _plain(rows.column("end_ts")).cast(_MS, safe=False)}, schema=RECENT_SCHEMA)


# --------------------------------------------------------------------------------------------
# starved partitions: stalls and stops judged across the group
# --------------------------------------------------------------------------------------------


def _count_within(ev_code: _I, ev_t: _F, q_code: _I, lo: _F, hi: _F) -> _I:
    """Per query, how many events of its code lie in ``[lo, hi]`` (times in s, compared in µs):
    one sort of the events by (code, time) and two binary searches for all queries."""
    out = np.zeros(len(q_code), np.int64)
    if not len(ev_code) or not len(q_code):
        return out
    base, top = float(np.min(lo)), float(np.max(hi))
    keep = (ev_t >= base) & (ev_t <= top)
    if not keep.any():
        return out
    span = int(np.ceil((top - base) * 1e6)) + 2

    def comp(c: _I, t: _F) -> _I:
        return c * span + np.rint((t - base) * 1e6).astype(np.int64)

    keys = np.sort(comp(ev_code[keep], ev_t[keep]))
    return (np.searchsorted(keys, comp(q_code, hi), side="right")
            - np.searchsorted(keys, comp(q_code, lo), side="left")).astype(np.int64)


def _first_from(ev_code: _I, ev_t: _F, q_code: _I, lo: _F) -> _F:
    """Per query, the time of the first event of its code at or after ``lo`` (NaN: none): one
    sort of the events by (code, time) and one binary search for all queries (in µs)."""
    out = np.full(len(q_code), np.nan)
    if not len(ev_code) or not len(q_code):
        return out
    base = float(np.min(lo))
    keep = ev_t >= base
    if not keep.any():
        return out
    ec, et = ev_code[keep], ev_t[keep]
    span = int(np.ceil((max(float(et.max()), float(np.max(lo))) - base) * 1e6)) + 2

    def comp(c: _I, t: _F) -> _I:
        return c * span + np.rint((t - base) * 1e6).astype(np.int64)

    k = comp(ec, et)
    order = np.argsort(k, kind="stable")
    keys, cs, ts = k[order], ec[order], et[order]
    i = np.searchsorted(keys, comp(q_code, lo), side="left")
    j = np.minimum(i, len(keys) - 1)
    ok = (i < len(keys)) & (cs[j] == q_code)
    out[ok] = ts[j[ok]]
    return out


def _first_elsewhere(ev_owner: _I, ev_part: _I, ev_t: _F, q_owner: _I, q_part: _I, lo: _F) -> _F:
    """Per query, the time of the first event of its owner at or after ``lo`` on a partition other
    than its own (NaN: none); ``*_part`` codes say the owner and the partition together. A time
    whose events are all on the query's own partition is skipped (a stalled partition has few)."""
    first = _first_from(ev_owner, ev_t, q_owner, lo)
    idx = np.arange(len(q_owner))
    while len(idx):
        f = first[idx]
        ok = ~np.isnan(f)
        idx, f = idx[ok], f[ok]
        if not len(idx):
            break
        own_only = _count_within(ev_owner, ev_t, q_owner[idx], f, f) == _count_within(ev_part, ev_t, q_part[idx],
                                                                                      f, f)
        idx = idx[own_only]
        if len(idx):
            first[idx] = _first_from(ev_owner, ev_t, q_owner[idx], first[idx] + 1e-6)  # the next µs
    return first


@dataclass
class _Progress:
    """Commit progress of the partitions of some groups: one event per committed-offset change
    (a sweep's, a carried row's last one) and, with the commit stream, per commit that advanced
    its partition's offset; ``g`` the group's index, ``p`` the partition's code, ``owner`` the
    owner's code (−1: none), ``t`` when (s)."""

    g: _I
    p: _I
    owner: _I
    t: _F


def _silences(rp: _I, t: _F, forget_after_s: float) -> _I:
    """Per row (partition code ``rp``, time ``t``), its partition's *generation*: the silences
    longer than ``forget_after_s`` between the partition's rows before it (a partition silent that
    long is forgotten and comes back as a new one, :func:`lagscope.analytics.step.generations`)."""
    gen = np.zeros(len(rp), np.int64)
    if len(rp) < 2 or not np.isfinite(forget_after_s):
        return gen
    o = np.lexsort((t, rp))
    brk = np.zeros(len(o), bool)
    brk[1:] = (rp[o][1:] == rp[o][:-1]) & (t[o][1:] - t[o][:-1] > forget_after_s)
    if not brk.any():
        return gen
    first = np.ones(len(o), bool)
    first[1:] = rp[o][1:] != rp[o][:-1]
    run = np.cumsum(brk)
    gen[o] = run - np.maximum.accumulate(np.where(first, run, 0))
    return gen


def _progress_events(series: pa.Table, carried: pa.Table | None, commits: pa.Table | None, groups: pa.Array,
                     ep_topic: pa.Array, ep_partition: pa.Array, ep_q_g: _I, ep_q_t: _F,
                     ep_start: _F, forget_after_s: float = math.inf, *,
                     tenures: bool = False) -> tuple[_Progress, _I, _I, _Progress, _F, _Progress]:
    """The progress events of the groups ``groups`` (see :class:`_Progress`), and per episode (its
    group ``ep_q_g``, partition ``ep_topic``/``ep_partition``, from ``ep_start``) its partition's
    code, its owner's code at ``ep_q_t``: the owner of the partition's latest row with an owner
    at or before it, when that row is at or after ``ep_start`` (−1: none); then the *activity*
    events: the progress events and every commit record (one that commits the same offset too:
    its member is alive; a carried row's last one, ``m_commit_t``, nobody's before its tenure),
    each with its owner as the progress events have it; per episode the time of its partition's
    first row after ``ep_start`` without an owner (NaN: none); and the rows with an owner (a
    carried last owned row at its own time), each an event of its owner.

    ``tenures``: what a partition's first sweep with a new owner shows (a change, or a commit
    record as of it) is no event of that owner's: the commit on revoke of the member that held it
    before is dated after the sweep's stamp yet read by it (the sweep stamps before it reads).
    Nor is a look-back record dated before the carried ``m_tenure_t``, nor the carried change a
    tenure's first sweep or a sweep without an owner showed (``m_change_takeover``;
    :class:`lagscope.analytics.kseries.Series`)."""
    def rows_of(table: pa.Table | None) -> tuple[pa.Table, _I]:
        if table is None or not table.num_rows:
            return pa.table({"topic": pa.array([], pa.string()), "partition": pa.array([], pa.int32())}), np.zeros(
                0, np.int64)
        g, ok = _codes(_gkey(table), groups)
        sub = table.filter(pa.array(ok))
        return sub, g[ok]

    s, sg = rows_of(series)
    c, cg = rows_of(carried)
    k, kg = rows_of(commits.filter(pc.is_valid(commits.column("committed_offset"))) if commits is not None
                    else None)
    ns, nc, nk = s.num_rows, c.num_rows, k.num_rows

    def col(t: pa.Table, name: str, typ: pa.DataType) -> pa.Array:
        return _plain(t.column(name)).cast(typ) if t.num_rows else pa.array([], typ)

    topic = pa.concat_arrays([col(s, "topic", pa.string()), col(c, "topic", pa.string()),
                              col(k, "topic", pa.string()), _plain(ep_topic).cast(pa.string())])
    part = pa.concat_arrays([col(s, "partition", pa.int32()), col(c, "partition", pa.int32()),
                             col(k, "partition", pa.int32()), _plain(ep_partition).cast(pa.int32())])
    gg = np.concatenate([sg, cg, kg, ep_q_g])
    pcode, _ = _dense(key_code(pa.array(gg), topic, part)) if len(gg) else (np.zeros(0, np.int64), 0)
    ps, pcar, pk, pe = np.split(pcode, [ns, ns + nc, ns + nc + nk])
    # a carried row's owner, the owner of its key's latest row with one (``owner_last``: the
    # member that held the partition before it left) and of its last change (``change_owner``)
    def opt(name: str) -> pa.Array:
        return col(c, name, pa.string()) if name in c.column_names else pa.nulls(nc, pa.string())

    owners = pa.concat_arrays([col(s, "owner", pa.string()), col(c, "owner", pa.string()), opt("owner_last"),
                               opt("change_owner"), opt("tenure_owner")])
    ocode = np.asarray(pc.dictionary_encode(owners).indices.fill_null(-1), dtype=np.int64) if len(owners) else (
        np.zeros(0, np.int64))
    os_, oc, oc_last, oc_change, oc_tenure = np.split(ocode, [ns, ns + nc, ns + 2 * nc, ns + 3 * nc])

    # the series rows, each key's carried row first (at −∞): a change from the row before
    st = np.asarray(_plain(s.column("t")).fill_null(np.nan), dtype=np.float64) if ns else np.zeros(0)
    sc, sc_ok = longs(s.column("committed")) if ns else (np.zeros(0, np.int64), np.zeros(0, bool))
    cc, cc_ok = longs(c.column("committed")) if nc else (np.zeros(0, np.int64), np.zeros(0, bool))
    rp = np.concatenate([ps, pcar])
    rt = np.concatenate([st, np.full(nc, -np.inf)])
    rv, rv_ok = np.concatenate([sc, cc]), np.concatenate([sc_ok, cc_ok])
    ro = np.concatenate([os_, oc])
    order = np.lexsort((rt, rp))
    rp_o, rv_o, ok_o = rp[order], rv[order], rv_ok[order]
    same = np.zeros(len(order), bool)
    same[1:] = rp_o[1:] == rp_o[:-1]
    moved = np.zeros(len(order), bool)
    moved[1:] = same[1:] & ok_o[1:] & ok_o[:-1] & (rv_o[1:] != rv_o[:-1])
    seg = ~same  # the first row of a partition's run (of a generation: a silence past the horizon starts one)
    if np.isfinite(forget_after_s) and len(order):  # no progress across a silence past the horizon
        real_t = np.concatenate([st, np.asarray(_plain(c.column("t")).cast(pa.float64()).fill_null(-1e300),
                                                dtype=np.float64) if nc and "t" in c.column_names
                                 else np.full(nc, -1e300)])
        gen_o = _silences(rp, real_t, forget_after_s)[order]
        moved[1:] &= gen_o[1:] == gen_o[:-1]
        seg[1:] |= gen_o[1:] != gen_o[:-1]
    # a tenure's first row: an owner other than the one the partition's latest owned row before it
    # named (a carried row names its tenure's owner, else its own)
    first_of_tenure = np.zeros(len(order), bool)
    if tenures and len(order):
        named = np.concatenate([os_, np.where(oc_tenure >= 0, oc_tenure, oc)])[order]
        acc = np.maximum.accumulate(np.where(named >= 0, np.arange(len(order)), -1))
        prev = np.concatenate(([-1], acc[:-1]))
        p_start = np.maximum.accumulate(np.where(seg, np.arange(len(order)), 0))
        ro_o = ro[order]
        first_of_tenure[order] = ((ro_o >= 0) & (prev >= p_start) & (named[np.maximum(prev, 0)] != ro_o)
                                  & np.isfinite(rt[order]))
    idx = order[moved]
    ev_p, ev_t, ev_o = [rp[idx]], [rt[idx]], [np.where(first_of_tenure[idx], -1, ro[idx])]
    def carried_f(name: str, *, always: bool = False) -> _F:
        """A carried marker the tenures read (NaN: none, or not ``tenures`` unless ``always``)."""
        return (np.asarray(_plain(c.column(name)).cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
                if (tenures or always) and nc and name in c.column_names else np.full(nc, np.nan))

    tenure_c = carried_f("m_tenure_t")
    # the carried rows' last change (before the step)
    ch = carried_f("m_change_t", always=True)
    if nc and "m_change_t" in c.column_names:
        has = ~np.isnan(ch)
        ev_p.append(pcar[has])
        ev_t.append(ch[has])
        who = np.where(oc_change >= 0, oc_change, oc) if "change_owner" in c.column_names else oc
        # seen at a tenure's first sweep or without an owner: nobody's (without ``tenures``, one
        # seen without an owner only: a takeover sweep's change is its owner's, ``change_owner``)
        tk = carried_f("m_change_takeover", always=True) == 1
        nobody = tk if tenures else tk & (oc_change < 0)
        ev_o.append(np.where(nobody, -1, who)[has])
    # the rows' owners as of any time: the latest row of the partition at or before it (a carried
    # row at its own time, the previous step's last sweep: an episode that ends at the step's first
    # sweep was owned by the owner it carries, as one pass sees it)
    ct = (np.asarray(_plain(c.column("t")).cast(pa.float64()).fill_null(-1e300), dtype=np.float64)
          if nc and "t" in c.column_names else np.full(nc, -1e300))
    row_t = np.concatenate([st, ct])
    # a carried row without an owner: nobody's from its own time on (``ct`` known), and from where
    # its run of rows without an owner began (``unowned_t``): a record or commit then is nobody's
    free_c = carried_f("unowned_t", always=True)

    def nobodys(i: _I, when: _F) -> _B:
        """Whether a time ``when`` of the carried row ``i`` (its index among the carried rows) fell
        while the partition had no owner."""
        return (oc[i] < 0) & (((when >= ct[i]) & (ct[i] > -1e299)) | (when >= free_c[i]))

    if nk:
        kt = seconds(pc.coalesce(_plain(k.column("commit_ts")).cast(_US), _plain(k.column("record_ts")).cast(_US)))
        kv, _ = longs(k.column("committed_offset"))
        korder = np.lexsort((kt, pk))
        kp_o, kv_o = pk[korder], kv[korder]
        ksame = np.zeros(nk, bool)
        ksame[1:] = kp_o[1:] == kp_o[:-1]
        adv = np.zeros(nk, bool)
        adv[1:] = ksame[1:] & (kv_o[1:] > kv_o[:-1])
        kidx = korder[adv]
        # a record inside the change the partition's latest sweep at or before it shows (above that
        # sweep's previous row's offset, at most its own) is no progress of its own: that sweep's
        # change is, a progress event at the sweep (a sweep stamps before it reads, so the record of
        # a commit it read is dated after its stamp). A sweep that is no change event (its row or
        # the one before without an offset, the partition's first row, a rewind) takes none. The
        # carried row stands for the sweep of its last change (``m_change_t``, always an event),
        # which showed the value it carries
        pos = np.empty(len(order), np.int64)
        pos[order] = np.arange(len(order))
        q = pos[:ns]
        lo_v = np.concatenate([np.where(moved[q], rv_o[np.maximum(q - 1, 0)], np.iinfo(np.int64).max),
                               np.full(nc, np.iinfo(np.int64).min)])
        hi_v = np.concatenate([sc, cc])
        marks = np.flatnonzero(np.concatenate([~np.isnan(st), cc_ok & ~np.isnan(ch)]))
        at_k = asof(np.concatenate([ps, pcar])[marks], np.concatenate([st, ch])[marks], pk[kidx], kt[kidx])
        hit = np.flatnonzero(at_k >= 0)
        j, v = marks[at_k[hit]], kv[kidx[hit]]
        kidx = np.delete(kidx, hit[(lo_v[j] < v) & (v <= hi_v[j])])
        # a commit's owner: of the partition's row at or before it; a commit before the step's
        # rows (the look-back) belongs to the carried row's owner if at or after that row's own
        # time, and before it, to the carried row's owner, else its last owner, unless at or after
        # the carried run of rows without an owner began (``unowned_t``): nobody's
        k_row_t = np.where(np.isneginf(rt), -1e300, rt)
        k_ro = np.concatenate([os_, np.where(oc >= 0, oc, oc_last)])
        at = asof(rp, k_row_t, pk, kt)
        k_owner = np.where(at >= 0, k_ro[np.maximum(at, 0)] if len(k_ro) else -1, -1)
        if nc:
            k_owner = np.where((at >= ns) & nobodys(np.maximum(at - ns, 0), kt), -1, k_owner)
        if tenures and len(k_ro):
            a = np.maximum(at, 0)
            carried_row = a >= ns
            early = carried_row & (kt < tenure_c[np.maximum(a - ns, 0)] if nc else False)
            k_owner = np.where((at >= 0) & (first_of_tenure[a] | early), -1, k_owner)
        ev_p.append(pk[kidx])
        ev_t.append(kt[kidx])
        ev_o.append(k_owner[kidx])
        act_p, act_t, act_o = [pk], [kt], [k_owner]
    else:
        act_p, act_t, act_o = [], [], []
    # the carried row's last commit record (``m_commit_t``, of any offset) is its owner's activity
    # after the step's look-back no longer reaches the record (one dated before the tenure: nobody's)
    commit_c = carried_f("m_commit_t", always=True)
    has_k = ~np.isnan(commit_c)
    if has_k.any():
        act_p.append(pcar[has_k])
        act_t.append(commit_c[has_k])
        act_o.append(np.where((commit_c < tenure_c) | nobodys(np.arange(nc), commit_c), -1,
                              np.where(oc >= 0, oc, oc_last))[has_k])
    # the episode's owner: of the partition's latest row with an owner at or before ep_q_t, if that
    # row lies inside the episode (a consumer that left at the end of its run leaves rows without
    # an owner behind it: the member that held the partition through the episode is still its owner)
    unowned = np.flatnonzero(ro < 0)
    has_free = ~np.isnan(free_c)  # where the carried run without an owner began
    ep_lost = _first_from(np.concatenate([rp[unowned], pcar[has_free]]),
                          np.concatenate([row_t[unowned], free_c[has_free]]), pe, ep_start + 1e-6)
    if nc and "owner_last_t" in c.column_names:  # the carried last owned rows, at their own time
        lt = np.asarray(_plain(c.column("owner_last_t")).cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
        has = (oc_last >= 0) & ~np.isnan(lt)
        rp = np.concatenate([rp, pcar[has]])
        row_t = np.concatenate([row_t, lt[has]])
        ro = np.concatenate([ro, oc_last[has]])
    owned_rows = np.flatnonzero(ro >= 0)
    ep_at = asof(rp[owned_rows], row_t[owned_rows], pe, ep_q_t)
    ep_row = np.where(ep_at >= 0, owned_rows[np.maximum(ep_at, 0)] if len(owned_rows) else -1, -1)
    inside = (ep_row >= 0) & (row_t[np.maximum(ep_row, 0)] >= ep_start if len(row_t) else False)
    ep_owner = np.where(inside, ro[np.maximum(ep_row, 0)] if len(ro) else -1, -1)
    p_all = np.concatenate(ev_p)
    # the group of each event: the partition code's group
    g_of_p = np.zeros(int(pcode.max()) + 1 if len(pcode) else 0, np.int64)
    g_of_p[pcode] = gg
    progress = _Progress(g=g_of_p[p_all], p=p_all, owner=np.concatenate(ev_o).astype(np.int64),
                         t=np.concatenate(ev_t))
    a_p = np.concatenate([p_all, *act_p])
    activity = _Progress(g=g_of_p[a_p], p=a_p, owner=np.concatenate([progress.owner, *act_o]).astype(np.int64),
                         t=np.concatenate([progress.t, *act_t]))
    owned = _Progress(g=g_of_p[rp[owned_rows]] if len(owned_rows) else np.zeros(0, np.int64), p=rp[owned_rows],
                      owner=ro[owned_rows].astype(np.int64), t=row_t[owned_rows])
    return progress, pe, ep_owner, activity, ep_lost, owned


def _tenures(owned: _Progress, ep_p: _I, lo: _F, hi: _F) -> tuple[_I, _F, _I, _B]:
    """The owners' tenures inside each episode (partition code ``ep_p``, from ``lo`` to ``hi``):
    per run of the partition's owned rows ``owned`` in ``[lo, hi]`` with the same owner (rows
    without an owner between them do not end it), its episode's index, its first row's time, its
    owner, and whether it is the episode's last; an episode without an owned row there has none."""
    empty = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64), np.zeros(0, bool))
    if not len(owned.p) or not len(ep_p):
        return empty
    o = np.lexsort((owned.t, owned.p))
    p, t, who = owned.p[o], owned.t[o], owned.owner[o]
    base = float(min(np.min(t[np.isfinite(t)], initial=0.0), float(np.min(lo))))
    span = int(np.ceil((max(float(np.max(t[np.isfinite(t)], initial=0.0)), float(np.max(hi))) - base) * 1e6)) + 2

    def comp(c: _I, at: _F) -> _I:
        return c * span + np.rint((np.clip(at, base, base + (span - 1) / 1e6) - base) * 1e6).astype(np.int64)

    keys = comp(p, t)
    first = np.searchsorted(keys, comp(ep_p, lo), side="left")
    stop = np.searchsorted(keys, comp(ep_p, hi), side="right")
    n = np.maximum(stop - first, 0)
    if not n.sum():
        return empty
    ep = np.repeat(np.arange(len(ep_p)), n)
    offsets = np.cumsum(n) - n
    j = first[ep] + (np.arange(len(ep)) - offsets[ep])
    new = (j == first[ep]) | (who[j] != who[np.maximum(j - 1, 0)])
    ep, j = ep[new], j[new]
    last = np.ones(len(ep), bool)
    last[:-1] = ep[1:] != ep[:-1]
    return ep, t[j], who[j], last


def _timeout_of(gens: pa.Table | None, groups: pa.Array, eg: _I, t: _F, default_s: float,
                column: str = "session_timeout_s") -> _F:
    """Per episode (its group ``eg``, at ``t``), the timeout ``column`` in force: of the group's
    latest generation record with one at or before ``t``, else its first (as
    :func:`record_timeouts` takes them for a window), else ``default_s``."""
    out = np.full(len(eg), float(default_s))
    if gens is None or not gens.num_rows or not len(eg):
        return out
    g = gens.filter(pc.is_valid(gens.column(column)))
    if not g.num_rows:
        return out
    code, ok = _codes(_gkey(g), groups)
    gt = np.asarray(g.column("gen_t"), dtype=np.float64)[ok]
    sv = np.asarray(g.column(column), dtype=np.float64)[ok]
    code = code[ok]
    if not len(code):
        return out
    order = np.lexsort((gt, code))
    first_of = np.full(len(groups), np.nan)
    firsts = order[np.r_[True, code[order][1:] != code[order][:-1]]]
    first_of[code[firsts]] = sv[firsts]
    i = asof(code, gt, eg, t)
    out = np.where(i >= 0, sv[np.maximum(i, 0)], first_of[eg])
    return np.where(np.isnan(out), float(default_s), out)


def _rebalancing_until(sw: _Sweeps | None, ep_groups: pa.Array, t: _F, cap: _F, *, empty_ends: bool = False) -> _F:
    """Per episode (its group key in ``ep_groups``, at ``t``): ``t`` unless the group was
    rebalancing then — its latest member sweep at or before ``t``, or its first after ``t`` (the
    first that can show what the broker did by ``t``), is not settled — and else the time of its
    first settled sweep after that, at most ``cap`` (the rebalance ends there). ``empty_ends``: an
    Empty sweep counts as settled (the broker has removed every member: nothing is left to
    rebalance)."""
    if sw is None or not len(sw.t) or not len(t):
        return t.copy()
    if empty_ends:
        empty = np.asarray(pc.fill_null(pc.equal(sw.ms.column("group_state"), "Empty"), False), dtype=bool)
        sw = _Sweeps(ms=sw.ms, g=sw.g, groups=sw.groups, t=sw.t, settled=sw.settled | empty)
    g, ok = _codes(ep_groups, sw.groups)
    g = np.where(ok, g, -1)
    i = asof(sw.g, sw.t, g, t)
    before = ok & (i >= 0) & ~sw.settled[np.maximum(i, 0)]
    t_next = _first_from(sw.g, sw.t, g, t)
    has_next = ok & ~np.isnan(t_next)
    j = asof(sw.g, sw.t, g, np.where(has_next, t_next, t))
    after = has_next & (j >= 0) & ~sw.settled[np.maximum(j, 0)]
    settled_next = _first_from(sw.g[sw.settled], sw.t[sw.settled], g, np.where(after, t_next, t))
    return np.where(before | after, np.fmin(settled_next, cap), t)


def _episodes(anomalies: pa.Table, kinds: tuple[str, ...]) -> tuple[pa.Array, _I, pa.Table, pa.Array, _I, _F, _F]:
    """The anomalies of ``kinds`` to judge across their groups: every row's kind, their row
    indices, the rows, their distinct groups (:func:`_gkey`), each row's group index, start and
    end (s; NaN: open). No such row: empty indices (the rest then says nothing)."""
    kind = _plain(anomalies.column("kind")).cast(pa.string())
    idx = np.flatnonzero(_flag(pc.is_in(kind, value_set=pa.array(kinds, pa.string()))))
    ep = anomalies.take(pa.array(idx, pa.int64()))
    groups = pc.unique(_gkey(ep))
    eg, _ = _codes(_gkey(ep), groups)
    return (kind, idx, ep, groups, eg, seconds(_plain(ep.column("start_ts"))),
            seconds(_plain(ep.column("end_ts"))))


def judge_gaps(anomalies: pa.Table, series: pa.Table, carried: pa.Table | None, *,
               forget_after_s: float = math.inf) -> pa.Table:
    """``anomalies`` without the ``commit_gap`` findings that sweeps alone misread (module doc,
    **Served gaps**): from the sweeps (no commit stream), a gap whose partition's owner changed
    the committed offset of another of its partitions strictly inside it is dropped. Call it only
    when the step has no commit stream: a stream's gaps are the exact times between commits."""
    _, idx, ep, groups, eg, start, end = _episodes(anomalies, ("commit_gap",))
    if not len(idx):
        return anomalies
    # strictly inside: the sweep the gap starts at (a change on another partition in the same sweep
    # is the same commit) and the one that closes it (both moved together) are not evidence
    lo, hi = start + 1e-6, end - 1e-6
    ev, ep_p, ep_owner, _, _, _ = _progress_events(series, carried, None, groups, ep.column("topic"),
                                                   ep.column("partition"), eg, hi, start, forget_after_s)
    no = int(max(ev.owner.max(initial=-1), ep_owner.max(initial=-1))) + 2
    np_ = int(max(ev.p.max(initial=-1), ep_p.max(initial=-1))) + 1
    ev_go = ev.g * no + (ev.owner + 1)
    ep_go = eg * no + (ep_owner + 1)
    elsewhere = _count_within(ev_go, ev.t, ep_go, lo, hi) - _count_within(ev_go * np_ + ev.p, ev.t,
                                                                          ep_go * np_ + ep_p, lo, hi)
    served = (ep_owner >= 0) & (elsewhere > 0)
    if not served.any():
        return anomalies
    keep = np.ones(anomalies.num_rows, dtype=bool)
    keep[idx[served]] = False
    return anomalies.filter(pa.array(keep))


def judge_idle(anomalies: pa.Table, series: pa.Table, carried: pa.Table | None, commits: pa.Table | None, *,
               stall_after_s: float, gens: pa.Table | None = None, session_timeout_s: float = 0.0,
               heartbeat_s: float = 0.0, network_s: float = 0.0, rebalance_timeout_s: float = 0.0,
               sweeps: _Sweeps | None = None, forget_after_s: float = math.inf) -> tuple[pa.Table, pa.Table, pa.Table]:
    """``anomalies`` with each stall and stop judged across its group (module doc, **Starved**)
    and those a crashed-looking owner's session may still explain held back (module doc,
    **Held**), the ``starved`` episodes (:data:`STARVED_SCHEMA`) and the ``held`` ones
    (:data:`HELD_SCHEMA`) for the status table. ``series``: :data:`SERIES_COLUMNS` rows of the
    step; ``carried``: the carried series rows (:data:`CARRIED_SERIES_COLUMNS`); ``commits``:
    :data:`COMMIT_COLUMNS` rows, or None; ``gens``: :func:`generation_records` (the session
    and rebalance timeouts; None: ``session_timeout_s`` and ``rebalance_timeout_s`` for every
    group), ``heartbeat_s`` and ``network_s`` the rest of the session bound (:func:`bound_of`);
    ``sweeps``: the member sweeps (a group rebalancing at the release holds on until it settles)."""
    kind, idx, ep, groups, eg, start, end = _episodes(anomalies, _IDLE_KINDS)
    if not len(idx):
        return anomalies, STARVED_SCHEMA.empty_table(), HELD_SCHEMA.empty_table()
    mag = np.asarray(_plain(ep.column("magnitude")).cast(pa.float64()).fill_null(0.0), dtype=np.float64)
    closed = ~np.isnan(end)
    seen = np.where(closed, end, start + mag)
    # the owner: of the partition's last row inside the episode (before the sweep that ended it)
    q_t = np.where(closed, end - 1e-6, seen)
    ev, ep_p, ep_owner, act, lost, owned = _progress_events(series, carried, commits, groups, ep.column("topic"),
                                                         ep.column("partition"), eg, q_t, start,
                                                         forget_after_s, tenures=True)
    # events of the same owner (group, owner) and of the whole group, on other partitions
    no = int(max(ev.owner.max(initial=-1), ep_owner.max(initial=-1), act.owner.max(initial=-1),
                 owned.owner.max(initial=-1))) + 2
    np_ = int(max(ev.p.max(initial=-1), ep_p.max(initial=-1))) + 1
    ev_go = ev.g * no + (ev.owner + 1)
    ep_go = eg * no + (ep_owner + 1)
    # progress strictly after the start: the change the episode starts at (other partitions of a
    # member that stopped moved in the same sweep as this one) is no progress during it
    after = start + 1e-6
    by_owner = _count_within(ev_go, ev.t, ep_go, after, seen) - _count_within(
        ev_go * np_ + ev.p, ev.t, ep_go * np_ + ep_p, after, seen)
    by_group = _count_within(ev.g, ev.t, eg, after, seen) - _count_within(ev.p, ev.t, ep_p, after, seen)
    starved = (ep_owner >= 0) & (by_owner > 0)
    others = by_group > 0
    # the status rows, judged by what was known at their own time: a row at t is starved when the
    # partition's owner at t (of its latest owned row in the episode at or before t) has made
    # progress on another of its partitions since the episode's start, up to t. One segment per
    # owner's tenure in the episode, starved from max(its first row, that owner's first progress
    # elsewhere) to the next tenure (a later step, a batch and a live step say the same for each
    # row: an owner who takes the partition over later does not change what an earlier row was)
    t_ep, t_a, t_owner, t_last = _tenures(owned, ep_p, start, seen)
    t_go = eg[t_ep] * no + (t_owner + 1)
    t_first = _first_elsewhere(ev_go, ev_go * np_ + ev.p, ev.t, t_go, t_go * np_ + ep_p[t_ep], after[t_ep])
    t_from = np.fmax(t_a, t_first)
    t_next = np.full(len(t_a), np.inf)
    t_next[:-1] = t_a[1:]
    # a tenure's rows: up to the next tenure's first row (exclusive), the last one's to the episode's end
    t_end = np.where(t_last, end[t_ep], t_next - 1e-3)
    t_starved = ~np.isnan(t_first) & ~(t_from > np.where(t_last, seen[t_ep], t_next - 1e-3))

    # held: an owner with no activity on any partition since the episode's start (no progress, no
    # commit record) looks crashed; until its session bound has passed since then, the broker may
    # still remove it, and the rebalance that follows owns the outage (module doc, **Held**)
    release = start + _timeout_of(gens, groups, eg, start, session_timeout_s) + (heartbeat_s + network_s)
    # the broker removed it within the bound: the group is rebalancing at the release; the hold
    # lasts until it settles (the window then owns the outage) or goes Empty (its only members
    # crashed: nothing is left to rebalance), at most the rebalance timeout
    release = _rebalancing_until(sweeps, _gkey(ep), release, release + _timeout_of(
        gens, groups, eg, start, rebalance_timeout_s, "rebalance_timeout_s"), empty_ends=True)
    # a partition seen without an owner outside a rebalance: its member is gone, nobody is left
    # for the broker to expire (a stop)
    lost_ok = ~np.isnan(lost)
    lost_t = np.where(lost_ok, lost, start)  # (a time near the others: the searches' keys stay small)
    in_rebalance = lost_ok & (_rebalancing_until(sweeps, _gkey(ep), lost_t, np.full(len(lost), np.inf)) != lost_t)
    release = np.where(lost_ok & ~in_rebalance, np.fmin(release, lost), release)
    first_act = _first_from(act.g * no + (act.owner + 1), act.t, ep_go, after)
    silent = (ep_owner >= 0) & ~(first_act <= seen)
    held = silent & ~starved & ~closed & (seen < release)
    # a status row is held while its owner (at its time, as for starved rows) looked crashed, until
    # the release (or that owner's first activity since the start, which shows it alive)
    t_until = np.fmin(release[t_ep], _first_from(act.g * no + (act.owner + 1), act.t, t_go, after[t_ep]))
    t_held = t_until > t_a

    k_all = np.asarray(kind.to_pylist(), dtype=object)
    sev_all = np.asarray(_plain(anomalies.column("severity")).cast(pa.string()).to_pylist(), dtype=object)
    det_all = np.asarray(_plain(anomalies.column("detail")).cast(pa.string()).to_pylist(), dtype=object)
    long_ = mag >= ESCALATE_AFTER * stall_after_s
    sev = sev_all[idx]
    k_all[idx] = np.where(starved, "starved", k_all[idx])
    sev_all[idx] = np.where(starved, np.where(long_, "warning", "info"),
                            np.where(others & (sev == "critical"), "warning", sev))
    det = det_all[idx].copy()
    for i in np.flatnonzero(starved):
        det[i] = (f"no commit progress for {java_fixed(float(mag[i]), 1)} s with lag pending while its owner "
                  "committed progress on its other partitions (starved)")
    for i in np.flatnonzero(~starved & others):
        det[i] = f"{det[i]}; other members of the group progressed"
    det_all[idx] = det
    out = anomalies
    for name, values in (("kind", k_all), ("severity", sev_all), ("detail", det_all)):
        i = out.schema.get_field_index(name)
        out = out.set_column(i, out.schema.field(name), pa.array(values.tolist(), out.schema.field(name).type))
    if held.any():
        keep = np.ones(out.num_rows, dtype=bool)
        keep[idx[held]] = False
        out = out.filter(pa.array(keep))
    hi_ = np.flatnonzero(t_held)
    held_eps = pa.table({**_episode_columns(ep, t_ep[hi_]), "start_ts": timestamps(t_a[hi_]),
                         "end_ts": timestamps(t_end[hi_]), "until_ts": timestamps(t_until[hi_])}, schema=HELD_SCHEMA)
    si = np.flatnonzero(t_starved)
    seg = {**_episode_columns(ep, t_ep[si]), "start_ts": timestamps(t_a[si]), "end_ts": timestamps(t_end[si])}
    return out, pa.table({
        **seg, "from_ts": timestamps(t_from[si]),
        "warn_ts": timestamps(start[t_ep[si]] + ESCALATE_AFTER * stall_after_s)}, schema=STARVED_SCHEMA), held_eps


def _episode_columns(ep: pa.Table, rows: np.ndarray) -> dict[str, pa.Array]:
    """The identity of the idle episodes at ``rows`` (cluster, group, topic, partition, start and
    end), as the starved and held tables carry it."""
    sub = ep.take(pa.array(rows))
    return {"cluster": _plain(sub.column("cluster")).cast(pa.string()),
            "group_id": _plain(sub.column("group_id")).cast(pa.string()),
            "topic": _plain(sub.column("topic")).cast(pa.string()),
            "partition": _plain(sub.column("partition")).cast(pa.int32()),
            "start_ts": _plain(sub.column("start_ts")).cast(_MS, safe=False),
            "end_ts": _plain(sub.column("end_ts")).cast(_MS, safe=False)}


def drop_rebalance_outages(anomalies: pa.Table, outages: pa.Table, idle_after_s: float = 0.0) -> pa.Table:
    """``anomalies`` without the stalls, stops and commit gaps inside one of their group's
    rebalance outages (``outages``: ``cluster, group_id, q0_us`` (the outage's start, µs),
    ``q1_us`` (the window's end, else start)): starting at or after q0 − 1 s (a stall or stop:
    or less than ``idle_after_s``, the smaller of the two rules' thresholds, before q0: it was
    no stall or stop yet when the outage began) and ending (an open one: start + magnitude in s)
    by q1 + 1 s; a commit gap starting by q1 + 1 s, however it ends (the rebalance's processing
    gap). Every row with a dropped row's key goes."""
    if not outages.num_rows or not anomalies.num_rows:
        return anomalies
    groups = pc.unique(_gkey(outages))
    g, ok = _codes(_gkey(anomalies), groups)
    kind = _plain(anomalies.column("kind")).cast(pa.string())
    cand = ok & _flag(pc.is_in(kind, value_set=pa.array(OUTAGE_KINDS)))
    if not cand.any():
        return anomalies
    idx = np.flatnonzero(cand)
    sub = anomalies.take(pa.array(idx))
    s_us, _ = longs(_plain(sub.column("start_ts")).cast(_US).cast(pa.int64()))
    e_us, e_ok = longs(_plain(sub.column("end_ts")).cast(_US).cast(pa.int64()))
    mag = np.asarray(_plain(sub.column("magnitude")).cast(pa.float64()).fill_null(0.0), dtype=np.float64)
    seen_to = np.where(e_ok, e_us, s_us + np.trunc(mag * 1e6).astype(np.int64))
    sg = g[idx]
    og, _ = _codes(_gkey(outages), groups)
    q0, _ = longs(outages.column("q0_us"))
    q1, _ = longs(outages.column("q1_us"))
    # a commit gap that began inside the outage is the rebalance's processing gap (its row keeps
    # the largest), however long the new owner took to commit first; a stall or stop must also
    # end by the window's end: lasting past it, it is a problem of its own
    is_gap = np.asarray(pc.equal(_plain(sub.column("kind")).cast(pa.string()), "commit_gap").to_numpy(
        zero_copy_only=False), dtype=bool)
    # a stall or stop that began before the outage but had not lasted its threshold by then was
    # nothing of its own: the rest of it is the outage's
    before_us = np.where(is_gap, 0, _us(idle_after_s))
    inside = np.zeros(len(idx), bool)
    for k in range(outages.num_rows):
        began = (sg == og[k]) & ((s_us >= q0[k] - 1_000_000) | (s_us > q0[k] - before_us))
        inside |= began & ((seen_to <= q1[k] + 1_000_000) | (is_gap & (s_us <= q1[k] + 1_000_000)))
    if not inside.any():
        return anomalies
    keys = pc.unique(sub.column("key").filter(pa.array(inside)))
    return anomalies.filter(pc.invert(pc.is_in(anomalies.column("key"), value_set=keys)))


# --------------------------------------------------------------------------------------------
# the pass
# --------------------------------------------------------------------------------------------

def _us(s: float) -> int:
    return int(np.trunc(np.float64(s) * 1e6))


def group_pass(inp: GroupInputs, settings: AnalyticsConfig) -> GroupOutputs:
    """The per-group pass over one step's rows of whole groups (module doc).

    >>> out = group_pass(GroupInputs(members=m, series=s, carried_series=None, carried_msweeps=None,
    ...                              recent_rebalances=None, group_events=None, commits=None,
    ...                              anomalies=a), settings)  # doctest: +SKIP
    >>> out.rebalances.column("cause")  # doctest: +SKIP
    """
    p = settings.rules
    fresh = member_sweeps(inp.members.select(list(MEMBER_COLUMNS)))
    sw = _sorted_sweeps(fresh, inp.carried_msweeps)
    gens = generation_records(inp.group_events) if inp.group_events is not None else None
    empty = empty_records(inp.group_events) if inp.group_events is not None else {}
    if gens is not None:  # with the records of earlier days the step does not read (module doc)
        gens = with_carried_records(gens, inp.carried_generations)
    # once: the windows, the formation at a records window's A, the carried sweeps
    ch = _changes(sw, p.forget_horizon_s())
    seen = _seen_sweeps(sw, ch)
    windows = sweep_windows(sw, ch)
    lives = group_lives(sw, ch, p.forget_horizon_s())
    for w in windows:
        w.life_lo = life_start(lives, w.g, w.a.t)
    wanted = {w.g for w in windows}
    recs = _records(gens, sw.groups, wanted) if gens is not None and wanted else _Records({})
    if gens is not None:
        for w in windows:
            generation_end(w, recs.by_group.get(w.g, []))
        missed = missed_generations(sw, gens, windows, lives)
        windows += missed
        start_after_missed(windows)
        if missed:
            recs = _records(gens, sw.groups, {w.g for w in windows})
            for w in missed:
                w.life_lo = life_start(lives, w.g, w.a.t)
        # the group seen forming by the sweeps at a record's A as at a sweep's (of its life)
        at_rec = [w for w in windows if w.a_from_record]
        j = asof(sw.g, sw.t, np.array([w.g for w in at_rec], np.int64), np.array([w.a.t for w in at_rec]))
        for w, jj in zip(at_rec, j.tolist(), strict=True):
            w.a_after_empty = jj >= 0 and sw.t[jj] > w.life_lo and bool(ch.formed[jj])
    # the first sight of each window's group Empty after A (records and sweeps)
    for w in windows:
        a, b = np.searchsorted(sw.g, [w.g, w.g + 1])
        empty_sights(w, empty.get((w.cluster, w.group_id), []), sw.t[a:b][ch.is_empty[a:b]])
    # the groups of the windows, and of the carried windows still waiting for a first commit
    carried_g, carried_ok = (_codes(_gkey(inp.pending_gaps), sw.groups) if inp.pending_gaps is not None
                             else (np.zeros(0, np.int64), np.zeros(0, bool)))
    wanted_g = np.fromiter({w.g for w in windows} | set(carried_g[carried_ok].tolist()), np.int64)
    keep_state, current, life_ends = _carried_sweeps(
        sw, ch, -math.inf if inp.until is None else inp.until - p.forget_horizon_s())
    # from sweeps alone, the changes a later step's window may need (those before the step: the
    # state part gap_times) of the groups whose earliest such start is before their last sweep,
    # and of those carried
    gap_g = np.zeros(0, np.int64)
    gap_bound = np.zeros(0)
    if inp.commits is None and inp.until is not None and len(sw.t):
        gap_bound = gap_bounds(sw, keep_state & current, gens, inp.until, p.forget_horizon_s())
        # the group's latest member sweep or offset row (a change after the bound is carried)
        latest = np.full(len(sw.groups), -np.inf)
        np.maximum.at(latest, sw.g, sw.t)
        sg, sok = _codes(_gkey(inp.series), sw.groups)
        st_t = np.asarray(_plain(inp.series.column("t")).cast(pa.float64()).fill_null(-np.inf), dtype=np.float64)
        np.maximum.at(latest, sg[sok], st_t[sok])
        gap_g = np.flatnonzero(gap_bound < latest)
        if inp.gap_times is not None and inp.gap_times.num_rows:
            cg, cok = _codes(_gkey(inp.gap_times), sw.groups)
            gap_g = np.union1d(gap_g, cg[cok])
    alive: dict[tuple[int, str], float] = {}
    changes = commits = None
    progress = _PROGRESS.empty_table()
    if len(sw.t):  # every group's (the state part member_progress); the changes of those read
        read_g = np.union1d(wanted_g, gap_g)
        progress, changes = _progress(inp.series, inp.carried_series, sw.groups, read_g)
        progress = with_member_progress(progress, inp.member_progress, sw.groups)
        if len(wanted_g):
            mine = progress.filter(pa.array(np.isin(np.asarray(progress.column("g"), dtype=np.int64), wanted_g)))
            alive = dict(zip(zip(mine.column("g").to_pylist(), mine.column("owner").to_pylist(), strict=True),
                             mine.column("t").to_pylist(), strict=True))
        changes = with_gap_times(changes, inp.gap_times, sw.groups, read_g)
        if inp.commits is not None and len(wanted_g):
            commits = _member_commits(_commit_times(inp.commits, sw.groups, wanted_g), gens, empty, sw.groups)
    # a window's processing gap: from the commits, else from the committed-offset changes
    gaps_from = commits if commits is not None else changes

    # group lags: at the windows' ends and at the sweeps the state carries
    at_rows: dict[str, list[Any]] = {"cluster": [], "group_id": [], "_tu": []}
    for w in windows:
        for t in (w.a.t, w.b.t):
            at_rows["cluster"].append(w.cluster)
            at_rows["group_id"].append(w.group_id)
            at_rows["_tu"].append(int(_tu(np.array([t]))[0]))
    kept = _with_claims(sw, keep_state, windows)
    kept = kept.set_column(kept.schema.get_field_index("life_end"), "life_end", pa.array(life_ends[keep_state]))
    need = pa.concat_tables([
        pa.table({"cluster": pa.array(at_rows["cluster"], pa.string()),
                  "group_id": pa.array(at_rows["group_id"], pa.string()),
                  "_tu": pa.array(at_rows["_tu"], pa.int64())}),
        pa.table({"cluster": kept.column("cluster"), "group_id": kept.column("group_id"),
                  "_tu": pa.array(_tu(np.asarray(kept.column("t"), dtype=np.float64)), pa.int64())})])
    lags = _group_lags(inp.series, need)
    carried_lag = sw.ms.filter(pc.and_(_bool(sw.ms.column("is_state")), pc.is_valid(_plain(sw.ms.column("group_lag")))))
    carried_lag = pa.table({"cluster": carried_lag.column("cluster"), "group_id": carried_lag.column("group_id"),
                            "_tu": pa.array(_tu(np.asarray(carried_lag.column("t"), dtype=np.float64)), pa.int64()),
                            "group_lag": carried_lag.column("group_lag")})
    lag_at: dict[tuple[str, str, int], int | None] = {}
    if windows:
        for r in carried_lag.to_pylist() + lags.to_pylist():
            lag_at[(r["cluster"], r["group_id"], r["_tu"])] = r["group_lag"]

    rows: list[dict[str, Any]] = []
    outages: list[tuple[str, str, int, int]] = []
    for w in windows:
        _details(w, settings, recs.by_group.get(w.g, []) if gens is not None else None, alive, commits)
        bound = bound_of(w.cause, w.session, w.rebal, settings.heartbeat_s, settings.network_s)
        duration = max(0.0, w.end - w.start)
        observed = max(0.0, w.end - min(w.quiet_from, w.start))
        la = lag_at.get((w.cluster, w.group_id, int(_tu(np.array([w.a.t]))[0])))
        lb = lag_at.get((w.cluster, w.group_id, int(_tu(np.array([w.b.t]))[0])))
        acc = max(0, lb - la) if la is not None and lb is not None else None
        assert gaps_from is not None
        gap, waiting_tp, waiting_lb = processing_gap(w, gaps_from)
        rows.append({
            "cluster": w.cluster, "group_id": w.group_id, "_start": w.start, "_end": w.end, "duration_s": duration,
            "cause": w.cause, "source": w.source,
            "generation_before": w.a.generation if w.a.generation is not None else w.a_gen,
            "generation_after": w.b.generation if w.b.generation is not None else w.b_gen,
            "members_before": w.a.member_ids, "members_after": w.b.member_ids,
            "partitions_moved": partitions_moved(w), "bound_s": bound,
            "observed_over_bound": observed / bound if bound != 0 else None, "messages_accumulated": acc,
            "max_processing_gap_s": gap, "_waiting": (waiting_tp, waiting_lb),
            "_formed_in_view": w.a_after_empty or formed_in_records(
                [r for r in recs.by_group.get(w.g, []) if life_start(lives, w.g, r["gen_t"]) == w.life_lo]
                if gens is not None else [], w.a.t,
                [e for e in empty.get((w.cluster, w.group_id), []) if life_start(lives, w.g, e) == w.life_lo]),
            "_life_lo": w.life_lo,
            "_through_empty": w.through_empty or any(
                w.a.t < e < w.b.t for e in empty.get((w.cluster, w.group_id), []))})
        outages.append((w.cluster, w.group_id, _us(w.quiet_from), _us(w.end)))
    rebalances = _rebalance_table(rows)  # sorts ``rows`` as the table
    # a window whose processing gap may still rise: a partition's first commit after its start may
    # come in a later step (within the look-around), which re-publishes the window's row with it;
    # the carried ones completed with this step's times
    waits = np.array([bool(r["_waiting"][0]) and (inp.until is None or r["_end"] + LOOKAROUND_S >= inp.until)
                      for r in rows], bool)
    waiting_rows = [r for r, k in zip(rows, waits, strict=True) if k]
    waiting = rebalances.filter(pa.array(waits, pa.bool_())).append_column(
        "start_s", pa.array([r["_start"] for r in waiting_rows], pa.float64())).append_column(
        "end_s", pa.array([r["_end"] for r in waiting_rows], pa.float64())).append_column(
        "pending_tp", pa.array([r["_waiting"][0] for r in waiting_rows], pa.list_(pa.string()))).append_column(
        "pending_lb", pa.array([r["_waiting"][1] for r in waiting_rows], pa.list_(pa.float64())))
    regapped, still = complete_pending(inp.pending_gaps, gaps_from, sw.groups, inp.until)
    if rebalances.num_rows:  # a window this step found again is its own row, and its own wait
        ident = ["cluster", "group_id", "start_ts"]
        found_again = set(zip(*(rebalances.column(c).to_pylist() for c in ident), strict=True))

        def other(t: pa.Table) -> pa.Table:
            return t.filter(pa.array([k not in found_again for k in zip(
                *(t.column(c).to_pylist() for c in ident), strict=True)], pa.bool_()))

        regapped, still = other(regapped), other(still)

    # storms over this step's windows and the carried ones; a static member's bounce is no
    # rebalance (the member is replaced in place, the group's generation stays): it never counts,
    # nor does a rebalance of the group's formation
    forming = formation(rows)
    rebalanced = rebalances.filter(pc.and_(
        pc.invert(pc.fill_null(pc.equal(rebalances.column("cause"), "static_member_bounce"), False)),
        pa.array(~forming)))
    parts = [rebalanced.select(["cluster", "group_id", "start_ts", "end_ts"])]
    flags = [np.zeros(rebalanced.num_rows, bool)]
    if inp.recent_rebalances is not None and inp.recent_rebalances.num_rows:
        r = inp.recent_rebalances
        parts.append(pa.table({"cluster": _plain(r.column("cluster")).cast(pa.string()),
                               "group_id": _plain(r.column("group_id")).cast(pa.string()),
                               "start_ts": _plain(r.column("start_ts")).cast(_MS, safe=False),
                               "end_ts": _plain(r.column("end_ts")).cast(_MS, safe=False)}))
        flags.append(np.ones(r.num_rows, bool))
    recent_in = pa.concat_tables(parts)
    is_state = np.concatenate(flags)
    storm_rows = storms(recent_in, is_state, count=p.storm_count, window_s=p.storm_window_s,
                        schema=inp.anomalies.schema)
    out_q = pa.table({"cluster": pa.array([o[0] for o in outages], pa.string()),
                      "group_id": pa.array([o[1] for o in outages], pa.string()),
                      "q0_us": pa.array([o[2] for o in outages], pa.int64()),
                      "q1_us": pa.array([o[3] for o in outages], pa.int64())}, schema=OUTAGE_SCHEMA)
    # with the outages an earlier step found: an anomaly that ends after its step (a commit gap
    # closed by the next commit, an episode closed by the next sweep) is explained as one pass
    # explains it
    if inp.outages is not None and inp.outages.num_rows:
        carried_q = pa.table({name: _plain(inp.outages.column(name)).cast(f.type)
                              for name, f in zip(OUTAGE_SCHEMA.names, OUTAGE_SCHEMA, strict=True)})
        out_q = pa.concat_tables([out_q, carried_q]).group_by(OUTAGE_SCHEMA.names, use_threads=False).aggregate(
            []).select(OUTAGE_SCHEMA.names).cast(OUTAGE_SCHEMA)
    # judged before the outages are dropped: whether an episode ends inside an outage may be known
    # only after the step (an open one), while the status rows of a starved partition must say the
    # same whatever a later sweep shows
    found = inp.anomalies if inp.commits is not None else judge_gaps(
        inp.anomalies, inp.series, inp.carried_series, forget_after_s=p.forget_horizon_s())
    judged, starved, held = judge_idle(found, inp.series, inp.carried_series, inp.commits,
                                       stall_after_s=p.stall_after_s, gens=gens,
                                       session_timeout_s=settings.session_timeout_s,
                                       heartbeat_s=settings.heartbeat_s, network_s=settings.network_s,
                                       rebalance_timeout_s=settings.rebalance_timeout_s, sweeps=seen,
                                       forget_after_s=p.forget_horizon_s())
    judged = drop_rebalance_outages(judged, out_q, min(p.stall_after_s, p.stop_after_s))
    anomalies = pa.concat_tables([judged, storm_rows.cast(judged.schema)]) if storm_rows.num_rows else judged
    # skips (and the rewinds an empty group's reset wrote): judged with the group's membership
    members = skips.membership(seen.ms, inp.group_events, skips.wanted_groups(anomalies, inp.advances))
    anomalies = skips.rewind_causes(anomalies, members)
    if inp.advances is not None and inp.advances.num_rows:
        found = skips.skip_rows(inp.advances.select(list(skips.ADVANCE_COLUMNS)), members,
                                inp.capacities, sw.ms, skip_factor=p.skip_factor,
                                schema=anomalies.schema)
        if found.num_rows:
            anomalies = pa.concat_tables([anomalies, found])

    next_gens = (generation_state(gens, sw, inp.series, inp.carried_generations, until=inp.until,
                                  horizon_s=p.forget_horizon_s()) if gens is not None else
                 GENERATION_STATE_SCHEMA.empty_table())
    # of the groups whose sweeps the state carries only (a group gone past the horizon leaves
    # nothing: its next sweep starts a new life, which no window, storm or outage of the last one
    # reaches, as the horizon is longer than each of their windows)
    live = of_groups(kept, kept.filter(pa.array(current[keep_state])))  # (the gone groups' marks left out)

    def of_live(t: pa.Table) -> pa.Table:
        return t if inp.until is None else of_groups(t, live)

    return GroupOutputs(rebalances=rebalances, regapped=regapped.cast(REBALANCE_SCHEMA),
                        gap_times=gap_time_state(changes, sw.groups, gap_bound, gap_g),
                        anomalies=anomalies, msweeps=_msweeps_state(kept, lags, carried_lag),
                        pending_gaps=of_live(pa.concat_tables([waiting.cast(PENDING_GAP_SCHEMA), still])),
                        outages=of_live(_outage_state(out_q, inp.series,
                                                      max(OUTAGE_CARRY_S, min(p.stall_after_s, p.stop_after_s) + 1.0))),
                        recent_rebalances=of_live(storm_state(recent_in, is_state, count=p.storm_count,
                                                              window_s=p.storm_window_s)), starved=starved, held=held,
                        generations=next_gens,
                        member_progress=member_progress_state(progress, sw.groups, live, next_gens))


def _outage_state(outages: pa.Table, series: pa.Table, carry_s: float = OUTAGE_CARRY_S) -> pa.Table:
    """The outages the next step carries: those ending within ``carry_s`` of the step's last
    sweep (all of them when the step has none)."""
    if not outages.num_rows or not series.num_rows:
        return outages
    t = np.asarray(_plain(series.column("t")).cast(pa.float64()).fill_null(np.nan), dtype=np.float64)
    last = float(np.nanmax(t)) if np.isfinite(t).any() else np.nan
    if np.isnan(last):
        return outages
    q1, _ = longs(outages.column("q1_us"))
    return outages.filter(pa.array(q1 >= _us(last - carry_s)))


def _bool(col: pa.ChunkedArray) -> pa.Array:
    return _plain(col).fill_null(False)


def _details(w: _Window, settings: AnalyticsConfig, recs: list[dict[str, Any]] | None,
             alive: dict[tuple[int, str], float], commits: _Times | None) -> None:
    """Every rule of one window, in order: timeouts, membership change, the departed members'
    last progress, cause, sweep boundaries, exact boundaries."""
    if recs is not None:
        record_timeouts(w, recs, settings.session_timeout_s, settings.rebalance_timeout_s)
    else:
        w.session, w.rebal = settings.session_timeout_s, settings.rebalance_timeout_s
    membership_change(w)
    # the departed members' last progress at or before A⁺: the earliest of them (an owner whose
    # latest progress is after A⁺ does not count)
    last = [alive.get((w.g, m)) for m in w.gone]
    known = [x for x in last if x is not None and x <= w.a_next_t]
    w.last_alive = min(known) if known else None
    w.cause = cause_of(w, LEAVE_GAP_S, settings.heartbeat_s, settings.network_s)
    w.start = (w.a.t + w.change_by) / 2
    w.end = w.b_gen_t if w.a_from_record and w.b_gen_t is not None else (w.b_prev_t + w.b.t) / 2
    w.quiet_from = w.last_alive if w.cause in _TIMED_OUT and w.last_alive is not None else w.start
    if commits is not None:
        exact_bounds(w, commits)
    if w.from_records:  # its end is a record's time, with or without the commits
        w.source = "commit_stream"


def _rebalance_table(rows: list[dict[str, Any]]) -> pa.Table:
    if not rows:
        return REBALANCE_SCHEMA.empty_table()
    rows.sort(key=lambda r: (r["cluster"], r["group_id"], r["_start"], r["_end"]))
    start = timestamps(np.array([r["_start"] for r in rows], np.float64))
    end = timestamps(np.array([r["_end"] for r in rows], np.float64))
    cols: dict[str, Any] = {c: [r.get(c) for r in rows] for c in REBALANCE_COLUMNS if c not in (
        "start_ts", "end_ts", "date")}
    return pa.table({**{c: pa.array(v, REBALANCE_SCHEMA.field(c).type) for c, v in cols.items()},
                     "start_ts": start, "end_ts": end, "date": dates(start)}).select(
        REBALANCE_COLUMNS).cast(REBALANCE_SCHEMA)


#: the marks of a group's past life (its last sweep and last settled one) are carried this long
#: past the horizon (s): a step reads the ``group_events`` of the UTC days from its start's, whole,
#: so the records of that life may be read again for up to a day
GONE_HOLD_S = 86_400.0


def _carried_sweeps(sw: _Sweeps, ch: _Changes, gone_before: float = -math.inf) -> tuple[_B, _B, _B]:
    """The sweeps the state carries: of each group's latest life (:attr:`_Changes.new_group`)
    those since its last settled one (all when none is), and the Empty sweep before that one
    while the group is still forming from it (:attr:`_Changes.formed`: the next step's windows see
    the group forming in view, :func:`formation`). A group whose latest sweep is before
    ``gone_before`` (the step's end less the horizon) is gone: a sweep of it after that starts a
    new life, paired with nothing carried. Of a past life (a gone group's, or one before the
    latest) only its *marks*: its last sweep and its last settled one (with what its window
    claimed of the records), while the last is within :data:`GONE_HOLD_S` of ``gone_before`` —
    a step reads that life's records again with the rest of their day, and the marks keep them
    apart from the next life's and from the windows already found (:func:`missed_generations`),
    as one pass over both lives keeps them. Returns ``(keep, current, ends)``: the sweeps carried,
    those of a group's current life (not gone), and the marks that end a past life (``life_end``)."""
    n = len(sw.t)
    if not n:
        return np.zeros(0, bool), np.zeros(0, bool), np.zeros(0, bool)
    idx = np.arange(n)
    life = np.cumsum(ch.new_group) - 1  # one id per life of a group (``sw``: by group, then time)
    nl = int(life[-1]) + 1
    last = np.full(nl, -1, np.int64)
    np.maximum.at(last, life, idx)
    last_settled = np.full(nl, -1, np.int64)
    np.maximum.at(last_settled, life[sw.settled], idx[sw.settled])
    first = np.full(nl, n, np.int64)
    np.minimum.at(first, life, idx)
    latest_life = np.ones(nl, bool)  # the group's latest life
    latest_life[:-1] = sw.g[first[1:]] != sw.g[first[:-1]]
    gone = sw.t[last] < gone_before
    current = latest_life & ~gone
    frm = np.where(last_settled >= 0, last_settled, first)
    keep: _B = current[life] & (idx >= frm[life])
    li = last_settled[current & (last_settled >= 0)]
    keep[ch.last_empty[li][ch.formed[li]]] = True
    past = ~current & (sw.t[last] >= gone_before - GONE_HOLD_S)
    keep[last[past]] = True
    keep[last_settled[past & (last_settled >= 0)]] = True
    ends = np.zeros(n, bool)
    ends[last[past]] = True
    return keep, current[life], ends


def _with_claims(sw: _Sweeps, keep: _B, windows: list[_Window]) -> pa.Table:
    """The sweeps ``keep`` (:func:`_carried_sweeps`), each settled one that ended a sweep window
    (its B) with what the window claimed of the records (:data:`MSWEEP_SCHEMA`); a carried one
    keeps its own."""
    kept = sw.ms.filter(pa.array(keep))
    claims = {(w.g, w.b.t): (w.b_gen_t, None if w.b_gen_t is not None else w.hi)
              for w in windows if not w.from_records}
    if not claims or not kept.num_rows:
        return kept
    at = [claims.get(k, (None, None)) for k in zip(sw.g[keep].tolist(), sw.t[keep].tolist(), strict=True)]
    for j, c in enumerate(_CLAIMS):
        kept = kept.set_column(kept.schema.get_field_index(c), c, pc.coalesce(
            _plain(kept.column(c)).cast(pa.float64()), pa.array([x[j] for x in at], pa.float64())))
    return kept


def _msweeps_state(kept: pa.Table, lags: pa.Table, carried_lag: pa.Table) -> pa.Table:
    """The state part ``msweeps``: the carried sweeps with the group lag at each (its own when
    carried with one, else the step's at that sweep)."""
    k = kept.append_column("_i", pa.array(np.arange(kept.num_rows), pa.int64())).append_column(
        "_tu", pa.array(_tu(np.asarray(kept.column("t"), dtype=np.float64)), pa.int64()))
    j = k.select(["_i", "cluster", "group_id", "_tu"]).join(lags, ["cluster", "group_id", "_tu"],
                                                            join_type="left outer")
    j = j.join(carried_lag.rename_columns(["cluster", "group_id", "_tu", "_cl"]), ["cluster", "group_id", "_tu"],
               join_type="left outer").sort_by("_i")
    own = _plain(kept.column("group_lag"))
    fresh = pc.coalesce(j.column("group_lag"), j.column("_cl"))
    lag = pc.if_else(_bool(kept.column("is_state")), pc.coalesce(own, fresh), fresh)
    out = kept.set_column(kept.schema.get_field_index("group_lag"), "group_lag", lag.cast(pa.int64()))
    out = out.set_column(out.schema.get_field_index("is_state"), "is_state", pa.array(np.ones(out.num_rows, bool)))
    return out.select(MSWEEP_SCHEMA.names).cast(MSWEEP_SCHEMA)
