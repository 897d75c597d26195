"""Scoring lagscope's findings against a simulator run's truth: the one place that decides what
was found, what was missed and what was false, for the accuracy benchmark and the demo's summary.

    >>> ti = truth.TruthIndex(truth.load(path))                              # doctest: +SKIP
    >>> expected = expected_findings(ti, rules)
    >>> s = score_run(expected, [Finding.from_anomaly(a) for a in anomalies], tolerance_s=2.0)
    >>> s.unmatched                      # findings that match no injected fault: false alarms
    >>> figures(scores, budgets)         # per kind: precision, recall, false alarms / h, delays

What the truth calls for (:func:`expected_findings`), each an :class:`Expected` naming its kind,
group, partitions and time, and the injected fault it stems from:

- stop, also for a crash of a group's last member (no other member holds partitions, and nobody is
  assigned its partitions before the end): on its partitions, from the crash. A member that
  joins later makes a rebalance, which owns the outage (the crash is its cause), as a crash with
  a survivor does;
- stall, stop, commit_gap, rewind, skip: the injected fault of that kind, on the partitions the
  member held when it began; a stall also on those it was assigned while it lasted (a stalled
  member that a rebalance gives a partition stalls that one too), and so does a stop (a stopped
  member never commits what it is given: its commits there never began, so none stopped; a stall,
  docs/analytics.md "Stall or stop"). A commit gap only
  once the partition has ``gap_min_samples`` gaps before it (the commits of the truth): a gap is
  abnormal against the partition's learned normal, and before that there is none; and only on
  the partitions where the truth's gap is above the floor the rule states for them
  (:func:`gap_verdicts`: median + ``gap_k`` × max(1.4826 × MAD, ``gap_mad_floor_s``) of the
  partition's gaps, and ≥ ``gap_min_s``): a pause whose gap stays within that is normal by the
  rule's definition. Such gaps are real events (:func:`real_events`), counted apart as *below
  the rule's floor* (:func:`gap_faults`), as the skip matrix counts the skips offsets cannot
  prove;
- retention_loss: the runner's ``retention_overrun`` fault (committed below the log start at the
  end); in a truth without one, derived from the end state over the whole run;
- rebalance: every rebalance of the truth (:meth:`TruthIndex.rebalances`) after the group formed
  (its members' first assignments; or ``first_settled``, the first sweep that saw it settled,
  when later), its cause the membership fault before it, if any;
- rebalance_storm: ``storm_count`` or more of those starting within ``storm_window_s``;
- lag_growth: ``growth_min_minutes`` or more minutes in a row whose lag at the end (the run's
  end, for the last, partial minute) is above the minute before's, as the analytics' minute rows
  see it.

A static member's bounce, a join and a clean leave call for nothing but the rebalance they cause
(a bounce within the session causes none). Real events the truth calls for nothing about
(:func:`real_events`: the rebalances of a group's formation, a static member's bounce) make a
``rebalance`` finding that matches one *informational*: neither found nor false.

A finding **matches** an expected one when the kind and group are the same, the partition is one
the expected names (or either is group-level), and their times overlap within ``tolerance_s``
(``finding.start ≤ expected.end + tolerance`` and ``finding.end ≥ expected.start − tolerance``; an
open finding has no end). A finding that matches nothing is **false**. A finding *credits* the
one expected it matches that is nearest it in time (their ends where the finding has one, else
their starts; the first of equals): two faults close in time (commit gaps 3 s apart, within the
tolerance) are each found only by their own finding, never one by the other's. An expected one
no finding credits is **missed**. Its **detection delay** is the start of the earliest finding
that credits it minus its start, 0 when the finding dates itself earlier (a stall dates from the
last commit that moved).
Per kind (:func:`figures`): precision = matching findings / findings; recall = expected found /
expected; false warnings and false criticals per hour of no-fault traffic (the durations of the
scenarios marked ``no_fault``); delay p50 and p95, against a budget of 2 sweep intervals + the
rule's own threshold (:func:`delay_budgets`).

**Advice** (:func:`score_advice`): the scenario's ``expect_advice`` (group, rule, setting) against
the ``advice`` rows of the run's groups. An expected advice is **found** when a row of its group
(the run's real name, ``<prefix>-<group>``) has its rule and names its setting, else **missing**;
every other row of the run's groups is **unexpected** (false advice), listed by rule. A scenario
that lists none (every no-fault scenario) must lead to no advice at all. Over many runs
(:func:`advice_figures`), per rule: expected, found (recall) and unexpected.

    >>> a = score_advice(sc.expect_advice, advice_rows, prefix=names.prefix)  # doctest: +SKIP
    >>> a.missing, a.unexpected
"""

from __future__ import annotations

import datetime as dt
import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from lagscope.config import AnalyticsRulesConfig
from lagscope.devtools.sim.truth import Assign, Commit, Fault, TruthIndex, held_partitions, record_ts

__all__ = [
    "AdviceFigures",
    "AdviceScore",
    "Expected",
    "Finding",
    "GapFault",
    "GapVerdict",
    "KindFigures",
    "Match",
    "RunScore",
    "SkipCell",
    "SkipCellFigures",
    "advice_figures",
    "delay_budgets",
    "expected_findings",
    "fault_verdicts",
    "figures",
    "gap_faults",
    "gap_verdicts",
    "own_thresholds",
    "partition_gaps",
    "real_events",
    "score_advice",
    "score_run",
    "skip_cells",
    "skip_faults",
    "stated_gap_floor",
]

#: injected fault kind → the finding kind that reports it (the membership faults: a rebalance)
FINDING_OF = {"stall": "stall", "stop": "stop", "rewind": "rewind", "skip": "skip", "commit_gap": "commit_gap",
              "retention_overrun": "retention_loss"}
#: severities that alarm (a rebalance window is information, not an alarm)
ALARMS = ("warning", "critical")
#: the kinds a truth can call for: a finding of another kind at ``info`` (a partition starved by
#: its own live consumer) says how the consumer works, not that something failed; it is kept
#: apart as informational, and scored as a false alarm only once it alarms (warning, critical)
SCORED_KINDS = frozenset({*FINDING_OF.values(), "rebalance", "rebalance_storm", "lag_growth"})


@dataclass(frozen=True)
class Expected:
    """A finding the truth calls for: ``kind`` (a finding kind), ``group``, ``partitions`` (empty:
    the group as a whole), the interval ``[start, end]`` (epoch s) and the injected ``fault``
    it stems from (None for what the run's traffic itself makes: a lag growth)."""

    kind: str
    group: str
    partitions: tuple[tuple[str, int], ...]
    start: float
    end: float
    fault: Fault | None = None


@dataclass(frozen=True)
class Finding:
    """Something lagscope reported: an anomaly or a rebalance window (epoch s; ``end`` None while
    open; ``topic``/``partition`` None for a group-level one). ``severity`` is the anomaly's, or
    ``info`` for a rebalance window."""

    kind: str
    group: str
    topic: str | None
    partition: int | None
    start: float
    end: float | None
    severity: str
    detail: str = ""
    #: the anomaly's magnitude and cause (None for a rebalance window, or a row without them)
    magnitude: float | None = None
    cause: str | None = None

    @classmethod
    def from_anomaly(cls, row: Mapping[str, Any]) -> Finding:
        """A row of the ``anomalies`` table."""
        mag = row.get("magnitude")
        return cls(str(row["kind"]), str(row["group_id"]), row.get("topic"), row.get("partition"),
                   _start(row), _epoch(row.get("end_ts")), str(row.get("severity") or "warning"),
                   str(row.get("detail") or ""), None if mag is None else float(mag),
                   None if row.get("cause") is None else str(row["cause"]))

    @classmethod
    def from_rebalance(cls, row: Mapping[str, Any]) -> Finding:
        """A row of the ``rebalances`` table: a rebalance window, kind ``rebalance``."""
        return cls("rebalance", str(row["group_id"]), None, None, _start(row),
                   _epoch(row.get("end_ts")), "info", str(row.get("cause") or ""))

    def where(self) -> str:
        return "group" if self.partition is None else f"{self.topic}:{self.partition}"


@dataclass(frozen=True)
class Match:
    """One expected finding and the first finding that matches it (None: missed)."""

    expected: Expected
    finding: Finding | None

    @property
    def delay(self) -> float | None:
        """Seconds from the expected start to the start of the earliest finding credited to it (≥ 0)."""
        return None if self.finding is None else max(0.0, self.finding.start - self.expected.start)


@dataclass
class RunScore:
    """One run scored: every expected finding with its match, the findings that matched, the
    ones that matched nothing (false), the informational ones, and how much no-fault traffic the
    run was."""

    scenario: str
    seed: int | None
    no_fault: bool
    duration_s: float
    matches: list[Match] = field(default_factory=list)
    matched: list[Finding] = field(default_factory=list)
    unmatched: list[Finding] = field(default_factory=list)
    #: info findings of a kind no truth calls for (:data:`SCORED_KINDS`): neither right nor false
    informational: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class KindFigures:
    """Per finding kind, over many runs (see the module docstring)."""

    kind: str
    expected: int
    found: int
    findings: int
    true_findings: int
    false_warnings_per_h: float
    false_criticals_per_h: float
    false_criticals: int
    delay_p50: float
    delay_p95: float
    delay_budget: float

    @property
    def precision(self) -> float:
        return self.true_findings / self.findings if self.findings else math.nan

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else math.nan


def _epoch(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, dt.datetime):
        return v.timestamp()
    return float(v)


def _start(row: Mapping[str, Any]) -> float:
    t = _epoch(row["start_ts"])
    if t is None:
        raise ValueError(f"a finding without a start: {dict(row)!r}")
    return t


def _formed(ti: TruthIndex, group: str) -> float:
    """When the group formed: the last first assignment with partitions of the members there
    from the start (those without a join fault); its rebalances before that are its formation
    (kafka-python's first join may assign nothing)."""
    joined = {f.member for f in ti.faults("join") if f.group == group}
    firsts: dict[str, float] = {}
    for r in ti.assignments(group):
        if isinstance(r, Assign) and r.partitions and r.member not in joined:
            firsts.setdefault(r.member, r.ts)
    return max(firsts.values(), default=-math.inf)


def _gap_partitions(ti: TruthIndex, f: Fault, rules: AnalyticsRulesConfig, until: float | None,
                    detectable: bool) -> tuple[tuple[str, int], ...]:
    """The partitions of a commit-gap fault whose gap the rule can report (``detectable``: above its
    floor, or a stall by its length) or cannot (below the floor, or no normal yet)."""
    return tuple((v.topic, v.partition) for v in gap_verdicts(ti, f, rules, until)
                 if (v.verdict in (GAP_ABOVE, GAP_STALL)) is detectable)


def expected_findings(ti: TruthIndex, rules: AnalyticsRulesConfig, *,
                      first_settled: Mapping[str, float] | None = None,
                      gap_until: float | None = None, until: float | None = None) -> list[Expected]:
    """Every finding the run's truth calls for (see the module docstring), in time order
    (``gap_until``: where the commit gaps' normal is learned up to, :func:`gap_verdicts`;
    ``until``: judge the run up to then only, when it was analysed up to then: nothing that
    starts later is called for, an interval ends there at the latest, and the last minute of a
    lag growth is the one that ends there)."""
    out: list[Expected] = []
    faults = ti.faults()
    es = ti.end_state
    t0 = ti.run.ts if ti.run is not None else min((record_ts(r) for r in ti.records), default=0.0)
    t_end = es.ts if es is not None else t0
    if until is not None:
        t_end = min(t_end, until)
    for f in faults:
        if f.kind == "crash" and f.partitions and _last_member(ti, f, faults, t_end):
            out.append(Expected("stop", f.group, f.partitions, f.start, t_end, f))
        if f.kind in FINDING_OF:
            held = f.partitions
            if f.kind == "commit_gap":
                held = _gap_partitions(ti, f, rules, gap_until, True)
                if not held:
                    continue
            if f.kind in ("stall", "stop"):
                gains = [r for r in ti.assignments(f.group, f.member)
                         if isinstance(r, Assign) and f.start < r.ts <= max(f.start, f.end)]
                gained = {tp for r in gains for tp in r.partitions} - set(held)
                if f.kind == "stall":
                    held = tuple(sorted(set(held) | gained))
                elif gained:
                    # a stopped member never commits what it is given: a stall there (its owner's
                    # commits never began, so none stopped), from the first assignment that gave one
                    out.append(Expected("stall", f.group, tuple(sorted(gained)),
                                        min(r.ts for r in gains if gained & set(r.partitions)), max(f.start, f.end), f))
                    if not held:  # it held nothing when it stopped: no stop (an empty list names the group)
                        continue
            out.append(Expected(FINDING_OF[f.kind], f.group, held, f.start, max(f.start, f.end), f))
    if es is not None and not any(f.kind == "retention_overrun" for f in faults):
        # a truth from before the runner recorded overruns: the loss is somewhere in the run
        for g in sorted({c.group for c in es.committed}):
            lost = tuple(tp for tp, o in sorted(es.committed_of(g).items()) if o < es.end_of(*tp).log_start)
            if lost:
                out.append(Expected("retention_loss", g, lost, t0, t_end))
    groups = sorted({r.group for r in ti.records if isinstance(r, Assign)})
    for g in groups:
        formed = max(_formed(ti, g), (first_settled or {}).get(g, -math.inf))
        rbs = [r for r in ti.rebalances(g) if r.start > formed]
        out += [Expected("rebalance", g, (), r.start, r.end, r.cause) for r in rbs]
        stormy = [r for i, r in enumerate(rbs)
                  if sum(1 for q in rbs[: i + 1] if q.start >= r.start - rules.storm_window_s) >= rules.storm_count]
        if stormy:
            first = min(q.start for q in rbs if q.start >= stormy[0].start - rules.storm_window_s)
            out.append(Expected("rebalance_storm", g, (), first, max(r.end for r in stormy)))
    parts = sorted({(c.group, c.topic, c.partition) for c in (es.committed if es is not None else ())})
    for g, topic, p in parts:
        # minute buckets as the analytics' minute rows: each bucket's lag is the lag at its end
        # (or the run's, for the last, partial one); a bucket whose lag is above the one
        # before it is a rising minute
        rising: list[float] = []
        b = math.floor(t0 / 60) * 60
        prev = ti.lag_at(g, topic, p, min(b + 60, t_end))
        b += 60

        def close(run: list[float], g: str = g, topic: str = topic, p: int = p) -> None:
            if len(run) >= rules.growth_min_minutes:
                out.append(Expected("lag_growth", g, ((topic, p),), run[0], min(run[-1] + 60, t_end)))

        while b < t_end:
            cur = ti.lag_at(g, topic, p, min(b + 60, t_end))
            if prev is not None and cur is not None and cur > prev:
                rising.append(b)
            else:
                close(rising)
                rising = []
            prev, b = cur, b + 60
        close(rising)
    if until is not None:
        out = [replace(e, end=min(e.end, until)) for e in out if e.start < until]
    return sorted(out, key=lambda e: (e.start, e.kind, e.group))


def _last_member(ti: TruthIndex, f: Fault, faults: list[Fault], t_end: float) -> bool:
    """Was the crashed member of ``f`` its group's last one holding partitions (every other
    member's held partitions at the crash none, or the member crashed or left before it), with
    nobody assigned its partitions up to ``t_end``? Then its group stopped: no member is left to
    consume, and no rebalance (a member joining later would make one) owns the outage."""
    gone = {g.member for g in faults if g.group == f.group and g.kind in ("crash", "leave") and g.start < f.start}
    upto = [r for r in ti.assignments(f.group) if r.ts <= f.start]
    others = {r.member for r in upto} - {f.member} - gone
    if any(held_partitions(list(upto), f.group, m) for m in others):
        return False
    mine = set(f.partitions)
    return not any(isinstance(r, Assign) and f.start < r.ts <= t_end and mine & set(r.partitions)
                   for r in ti.assignments(f.group))


def matches(e: Expected, f: Finding, tolerance_s: float) -> bool:
    """Does finding ``f`` report expected ``e`` (see the module docstring)?"""
    if f.kind != e.kind or f.group != e.group:
        return False
    if e.partitions and f.partition is not None and (f.topic, f.partition) not in e.partitions:
        return False
    f_end = math.inf if f.end is None else f.end
    return f.start <= e.end + tolerance_s and f_end >= e.start - tolerance_s


def _unlearned(ti: TruthIndex, f: Fault, rules: AnalyticsRulesConfig) -> bool:
    """A commit-gap fault before any of its partitions had ``gap_min_samples`` commit gaps."""
    n: dict[tuple[str, int], int] = {}
    for r in ti.records:
        if isinstance(r, Commit) and r.group == f.group and r.ts < f.start:
            n[(r.topic, r.partition)] = n.get((r.topic, r.partition), 0) + 1
    return all(n.get(tp, 0) - 1 < rules.gap_min_samples for tp in f.partitions)


# --------------------------------------------------------------------------------------------
# commit gaps against the rule's floor
# --------------------------------------------------------------------------------------------

#: a commit-gap fault's verdict on one partition (:func:`gap_verdicts`)
GAP_ABOVE = "above the rule's floor"
GAP_BELOW = "below the rule's floor"
GAP_UNLEARNED = "no normal yet"
GAP_STALL = "a stall by the rule"


@dataclass(frozen=True)
class GapVerdict:
    """One commit-gap fault on one of its partitions, against the rule (:func:`gap_verdicts`):
    the truth's gap, the partition's normal as the rule learns it from the truth's gaps, the
    threshold the rule states for it, and whether the rule can report the gap at all."""

    fault: Fault
    topic: str
    partition: int
    #: the truth's gap: from the partition's last commit at or before the pause's start to its
    #: first commit after it (to ``until`` when none came: ``open``); None without a commit before
    gap_s: float | None
    open: bool
    #: the median and MAD of the partition's gaps with work pending, and their number
    median_s: float
    mad_s: float
    samples: int
    #: the rule's floor for this partition: max(median + gap_k × max(1.4826 × MAD, gap_mad_floor_s), gap_min_s)
    floor_s: float
    verdict: str

    @property
    def margin_s(self) -> float:
        """How far the gap is above (> 0) or below the floor."""
        return math.nan if self.gap_s is None else self.gap_s - self.floor_s


def _median(xs: list[float]) -> float:
    """The rule's median (analytics/np_gaps.py): the mean of the two middle values of an even count."""
    s = sorted(xs)
    n = len(s)
    return (s[(n - 1) // 2] + s[n // 2]) / 2 if n else math.nan


def partition_gaps(ti: TruthIndex, group: str, topic: str, partition: int,
                   until: float = math.inf) -> list[tuple[float, float]]:
    """The truth's commit gaps of one partition with work pending, as the rule takes them from the
    commit stream: ``(end, gap_s)`` for each commit up to ``until`` after a previous commit of the
    group, when the group had lag just before it (analytics/np_gaps.py: the last sweep before the
    commit had lag > 0; the truth knows the lag at every instant)."""
    cs = [c for c in ti.commits(group, topic, partition) if c.ts <= until]
    return [(b.ts, b.ts - a.ts) for a, b in itertools.pairwise(cs)
            if (ti.lag_at(group, topic, partition, math.nextafter(b.ts, -math.inf)) or 0) > 0]


def stated_gap_floor(rules: AnalyticsRulesConfig, cadence_s: float) -> float:
    """The commit-gap threshold the rule states for a partition committing exactly every
    ``cadence_s`` (median = the cadence, MAD 0): max(cadence + gap_k × gap_mad_floor_s, gap_min_s)."""
    return max(cadence_s + rules.gap_k * rules.gap_mad_floor_s, rules.gap_min_s)


def gap_verdicts(ti: TruthIndex, f: Fault, rules: AnalyticsRulesConfig,
                 until: float | None = None) -> list[GapVerdict]:
    """Per partition of a ``commit_gap`` fault: the truth's gap spanning the pause against the
    floor the rule states for that partition (:class:`GapVerdict`).

    The partition's normal is learned as one step over the run learns it (the accuracy
    benchmark's): the median and MAD of every gap of the truth's commits with work pending up to
    ``until`` (default: the truth's end), the injected ones included. The verdict:
    ``GAP_UNLEARNED`` when the partition had fewer than ``gap_min_samples`` gaps before the fault
    (the causal rule has no normal yet; as :func:`expected_findings`); ``GAP_STALL`` when the gap
    is at least ``min(stall_after_s, stop_after_s)`` (the stall or stop rule reports it);
    ``GAP_ABOVE`` when it is beyond the floor (``gap > median + gap_k × max(1.4826 × MAD,
    gap_mad_floor_s)`` and ``≥ gap_min_s``), ``GAP_BELOW`` otherwise (the rule calls it normal:
    no commit_gap finding can report it)."""
    t_end = until if until is not None else (ti.end_state.ts if ti.end_state is not None else math.inf)
    unlearned = _unlearned(ti, f, rules)
    out = []
    for topic, p in f.partitions:
        cs = [c.ts for c in ti.commits(f.group, topic, p) if c.ts <= t_end]
        before = [t for t in cs if t <= f.start]
        after = [t for t in cs if t > f.start]
        gap = None if not before else (after[0] if after else t_end) - before[-1]
        gaps = [g for _, g in partition_gaps(ti, f.group, topic, p, t_end)]
        med = _median(gaps)
        mad = _median([abs(g - med) for g in gaps])
        threshold = med + rules.gap_k * max(1.4826 * mad, rules.gap_mad_floor_s) if gaps else math.nan
        if unlearned or gap is None or len(gaps) < rules.gap_min_samples:
            verdict = GAP_UNLEARNED
        elif gap >= min(rules.stall_after_s, rules.stop_after_s):
            verdict = GAP_STALL
        elif gap > threshold and gap >= rules.gap_min_s:
            verdict = GAP_ABOVE
        else:
            verdict = GAP_BELOW
        out.append(GapVerdict(f, topic, p, gap, bool(before) and not after, med, mad, len(gaps),
                              max(threshold, rules.gap_min_s), verdict))
    return out


@dataclass(frozen=True)
class GapFault:
    """A commit-gap fault of one run scored against the rule's floor (:func:`gap_faults`)."""

    fault: Fault
    verdicts: tuple[GapVerdict, ...]
    #: a commit_gap finding reported it (credited to it when it was expected, else one matching it)
    found: bool
    #: from the fault's start to that finding's start (≥ 0; None: not found)
    delay: float | None
    #: that finding's magnitude: the gap the rule measured (s; None: not found, or none given)
    measured_s: float | None = None

    @property
    def verdict(self) -> str:
        """The fault's: the first of above, a stall, below, no normal yet that one of its partitions has."""
        got = {v.verdict for v in self.verdicts}
        return next((v for v in (GAP_ABOVE, GAP_STALL, GAP_BELOW) if v in got), GAP_UNLEARNED)

    @property
    def gap_s(self) -> float:
        """The largest of its partitions' gaps (NaN: none known)."""
        return max((v.gap_s for v in self.verdicts if v.gap_s is not None), default=math.nan)

    @property
    def floor_s(self) -> float:
        """The floor of the partition with the largest gap."""
        known = [v for v in self.verdicts if v.gap_s is not None]
        return max(known, key=lambda v: v.gap_s or 0.0).floor_s if known else math.nan


def gap_faults(ti: TruthIndex, rules: AnalyticsRulesConfig, scored: RunScore, *, tolerance_s: float,
               gap_until: float | None = None) -> list[GapFault]:
    """Every ``commit_gap`` fault of a run with its verdicts (:func:`gap_verdicts`) and whether it
    was found: by the finding credited to it when the truth called for one (``scored``, from
    :func:`score_run` with :func:`expected_findings` and the same ``gap_until``), else by any
    commit_gap finding that matches it on the partitions the rule cannot report it on (found
    anyway: a finding below the rule's own floor)."""
    out = []
    faults = ti.faults("commit_gap")
    whole = [Expected("commit_gap", f.group, f.partitions, f.start, max(f.start, f.end), f) for f in faults]
    # each commit_gap finding belongs to the fault it matches that is nearest it in time (as
    # score_run credits): pauses a tolerance apart are not found by each other's findings
    nearest: dict[int, list[Finding]] = {}
    for x in sorted((x for x in [*scored.matched, *scored.unmatched, *scored.informational]
                     if x.kind == "commit_gap"), key=lambda x: x.start):
        near = min((i for i, e in enumerate(whole) if matches(e, x, tolerance_s)),
                   key=lambda i: _distance(whole[i], x), default=None)
        if near is not None:
            nearest.setdefault(near, []).append(x)
    for i, f in enumerate(faults):
        vs = tuple(gap_verdicts(ti, f, rules, gap_until))
        credited = [m.finding for m in scored.matches if m.expected.fault == f and m.finding is not None]
        if not credited:
            apart = {(v.topic, v.partition) for v in vs if v.verdict not in (GAP_ABOVE, GAP_STALL)}
            credited = [x for x in nearest.get(i, []) if x.partition is None or (x.topic, x.partition) in apart]
        first = credited[0] if credited else None
        out.append(GapFault(f, vs, first is not None, None if first is None else max(0.0, first.start - f.start),
                            None if first is None else first.magnitude))
    return out


def real_events(ti: TruthIndex, *, first_settled: Mapping[str, float] | None = None,
                rules: AnalyticsRulesConfig | None = None, gap_until: float | None = None) -> list[Expected]:
    """What really happened that the truth calls for no finding about (module docstring): as
    group-level ``rebalance`` events, each group's rebalances up to its formation (the members'
    first assignments, or ``first_settled``) and each static member's bounce; with ``rules``,
    the commit gaps the rule cannot report (:func:`gap_verdicts`: before their partitions had a
    learned normal, or below the rule's floor), on those partitions."""
    out = []
    if rules is not None:
        for f in ti.faults("commit_gap"):
            apart = _gap_partitions(ti, f, rules, gap_until, False)
            if apart:
                out.append(Expected("commit_gap", f.group, apart, f.start, max(f.start, f.end), f))
    for g in sorted({r.group for r in ti.records if isinstance(r, Assign)}):
        formed = max(_formed(ti, g), (first_settled or {}).get(g, -math.inf))
        out += [Expected("rebalance", g, (), r.start, r.end) for r in ti.rebalances(g) if r.start <= formed]
    out += [Expected("rebalance", f.group, (), f.start, max(f.start, f.end), f) for f in ti.faults("bounce")
            if f.detail.get("static")]
    return out


def _distance(e: Expected, f: Finding) -> float:
    """How far apart in time: their ends where both have one (a finding's end, when its condition
    cleared, is observed; its start often dates back, to the last progress or the last
    generation), else their starts."""
    if f.end is not None:
        return abs(f.end - e.end)
    return abs(f.start - e.start)


def score_run(expected: Iterable[Expected], findings: Iterable[Finding], *, tolerance_s: float,
              scenario: str = "", seed: int | None = None, no_fault: bool = False,
              duration_s: float = 0.0, real: Iterable[Expected] = ()) -> RunScore:
    """Match one run's findings to what its truth calls for; a finding that matches only one of
    the ``real`` events (:func:`real_events`) is informational."""
    exp = list(expected)
    real = list(real)
    found = sorted(findings, key=lambda f: (f.start, f.kind, f.group))
    out = RunScore(scenario, seed, no_fault, duration_s)
    # each finding credits the one expected it matches that is nearest it in time
    credits: dict[int, list[Finding]] = {}
    for f in found:
        near = min((i for i, e in enumerate(exp) if matches(e, f, tolerance_s)),
                   key=lambda i: _distance(exp[i], f), default=None)
        if near is not None:
            credits.setdefault(near, []).append(f)
    for i, e in enumerate(exp):
        out.matches.append(Match(e, credits[i][0] if i in credits else None))  # the earliest (found is sorted)
    for f in found:
        if any(matches(e, f, tolerance_s) for e in exp):
            out.matched.append(f)
        elif (f.kind not in SCORED_KINDS and f.severity not in ALARMS) or any(
                matches(e, f, tolerance_s) for e in real):
            out.informational.append(f)
        else:
            out.unmatched.append(f)
    return out


def own_thresholds(rules: AnalyticsRulesConfig) -> dict[str, float]:
    """Per kind, the rule's own threshold (s): how long after a fault begins its finding can exist
    at all (a stall is one only after ``stall_after_s`` without progress); 0 for a finding the
    fault makes at once."""
    return {"stall": rules.stall_after_s, "stop": rules.stop_after_s, "commit_gap": rules.gap_min_s,
            "rewind": 0.0, "skip": 0.0, "retention_loss": 0.0, "rebalance": 0.0,
            "rebalance_storm": rules.storm_window_s, "lag_growth": 60.0 * rules.growth_min_minutes}


def delay_budgets(rules: AnalyticsRulesConfig, interval_s: float) -> dict[str, float]:
    """The delay target per kind: 2 sweep intervals + the rule's own threshold."""
    return {k: 2 * interval_s + v for k, v in own_thresholds(rules).items()}


def _pctl(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def figures(scores: Iterable[RunScore], budgets: Mapping[str, float]) -> list[KindFigures]:
    """Per kind over ``scores``: precision, recall, false alarms per hour of no-fault traffic,
    detection delay p50/p95 (one row per kind expected or found, sorted by kind)."""
    runs = list(scores)
    hours = sum(r.duration_s for r in runs if r.no_fault) / 3600.0
    kinds = sorted({m.expected.kind for r in runs for m in r.matches}
                   | {f.kind for r in runs for f in [*r.matched, *r.unmatched]})
    out = []
    for k in kinds:
        ms = [m for r in runs for m in r.matches if m.expected.kind == k]
        true = sum(1 for r in runs for f in r.matched if f.kind == k)
        false = [(r, f) for r in runs for f in r.unmatched if f.kind == k]
        quiet = [f for r, f in false if r.no_fault]
        delays = [m.delay for m in ms if m.delay is not None]
        out.append(KindFigures(
            k, len(ms), sum(1 for m in ms if m.finding is not None), true + len(false), true,
            sum(f.severity == "warning" for f in quiet) / hours if hours else math.nan,
            sum(f.severity == "critical" for f in quiet) / hours if hours else math.nan,
            sum(f.severity == "critical" for _, f in false),
            _pctl(delays, 0.5), _pctl(delays, 0.95), budgets.get(k, math.nan)))
    return out


def fault_verdicts(score: RunScore, faults: Iterable[Fault]) -> list[tuple[Fault, list[Match]]]:
    """Per injected fault, the expected findings it calls for and their matches (empty: it calls
    for none, as a static member's bounce within its session)."""
    return [(f, [m for m in score.matches if m.expected.fault == f]) for f in faults]


# --------------------------------------------------------------------------------------------
# advice
# --------------------------------------------------------------------------------------------

class _AdviceSpec(Protocol):
    """What an expected advice names (:class:`lagscope.devtools.sim.model.ExpectedAdvice`)."""

    @property
    def group(self) -> str: ...
    @property
    def rule(self) -> str: ...
    @property
    def setting(self) -> str: ...


#: one advice as scored: (logical group, rule, setting)
AdviceKey = tuple[str, str, str]


@dataclass(frozen=True)
class AdviceScore:
    """One run's advice scored (module docstring): each a (logical group, rule, setting)."""

    scenario: str
    seed: int | None
    expected: tuple[AdviceKey, ...]
    found: tuple[AdviceKey, ...]
    missing: tuple[AdviceKey, ...]
    unexpected: tuple[AdviceKey, ...]

    @property
    def recall(self) -> float:
        return len(self.found) / len(self.expected) if self.expected else math.nan


def score_advice(expected: Iterable[_AdviceSpec], advice: Iterable[Mapping[str, Any]], *, prefix: str,
                 scenario: str = "", seed: int | None = None) -> AdviceScore:
    """The ``advice`` rows of the run whose real names start with ``prefix`` (``sim-<scenario>-<run
    id>``) against what it expects; rows of other groups are not the run's and are ignored."""
    want = [(e.group, e.rule, e.setting) for e in expected]
    mine = f"{prefix}-"
    got = sorted({(str(r["group_id"])[len(mine):], str(r["rule"]), str(r["setting"]))
                  for r in advice if str(r["group_id"]).startswith(mine)})
    return AdviceScore(scenario, seed, tuple(want), tuple(k for k in want if k in got),
                       tuple(k for k in want if k not in got), tuple(k for k in got if k not in want))


@dataclass(frozen=True)
class AdviceFigures:
    """Per rule, over many runs: advice expected, found, and given unexpectedly."""

    rule: str
    expected: int
    found: int
    unexpected: int

    @property
    def recall(self) -> float:
        return self.found / self.expected if self.expected else math.nan


def advice_figures(scores: Iterable[AdviceScore]) -> list[AdviceFigures]:
    """Per rule expected or given (sorted by rule): expected, found, unexpected."""
    runs = list(scores)
    rules = sorted({k[1] for r in runs for k in (*r.expected, *r.unexpected)})
    return [AdviceFigures(rule, sum(k[1] == rule for r in runs for k in r.expected),
                          sum(k[1] == rule for r in runs for k in r.found),
                          sum(k[1] == rule for r in runs for k in r.unexpected)) for rule in rules]


# --------------------------------------------------------------------------------------------
# the skip matrix
# --------------------------------------------------------------------------------------------

#: a skip fault's mechanism → the ``cause`` its finding must give
SKIP_CAUSE = {"seek": "seek", "admin_reset": "admin_reset", "out_of_range": "out_of_range_reset"}


@dataclass(frozen=True, order=True)
class SkipCell:
    """One cell of the skip matrix: the skip's ``mechanism``, nominal ``size`` (the backlog its
    action waited for; 0 when it named none), ``spread`` (``one`` partition or ``all``) and the
    consumer's ``state`` before it (``-`` when unlabelled)."""

    mechanism: str
    size: int
    spread: str
    state: str


@dataclass
class SkipCellFigures:
    """A cell over many runs (:func:`skip_cells`): its skips, the partitions that lost messages
    (each one finding the truth calls for) and how many were found, the messages lost (the truth's
    exact counts, summed per skip: min and max) against the magnitudes reported, the relative
    count error per skip found (|reported − truth| / truth), the findings that match no skip
    (false), the detection delay per skip found (its first finding's start − the skip's start,
    ≥ 0), and the found findings whose cause is the mechanism's."""

    cell: SkipCell
    skips: int = 0
    partitions: int = 0
    found: int = 0
    lost: list[int] = field(default_factory=list)
    reported: list[float] = field(default_factory=list)
    count_errors: list[float] = field(default_factory=list)
    false_skips: int = 0
    delays: list[float] = field(default_factory=list)
    findings: int = 0
    cause_right: int = 0
    #: the skips (and their partitions, and those found) the offsets cannot prove
    #: (:func:`skip_bounds`), counted apart from the figures above
    apart_skips: int = 0
    apart_partitions: int = 0
    apart_found: int = 0

    @property
    def recall(self) -> float:
        return self.found / self.partitions if self.partitions else math.nan

    @property
    def count_error_max(self) -> float:
        return max(self.count_errors, default=math.nan)

    @property
    def count_error_mean(self) -> float:
        return sum(self.count_errors) / len(self.count_errors) if self.count_errors else math.nan

    def delay(self, q: float) -> float:
        return _pctl(self.delays, q)


def skip_faults(faults: Iterable[Fault]) -> list[Fault]:
    """The skip faults that lost messages and say how many (``detail.skipped``: ``topic:partition``
    → messages never processed), in time order."""
    return sorted((f for f in faults if f.kind == "skip" and any(
        int(n) > 0 for n in (f.detail.get("skipped") or {}).values())), key=lambda f: f.start)


def skip_cell(f: Fault) -> SkipCell:
    """The matrix cell of a skip fault."""
    d = f.detail
    return SkipCell(str(d.get("mechanism") or "seek"), int(d.get("size") or 0), str(d.get("partitions") or "all"),
                    str(d.get("state") or "-"))


def _lost(f: Fault) -> dict[tuple[str, int], int]:
    out = {}
    for k, n in (f.detail.get("skipped") or {}).items():
        topic, _, p = str(k).rpartition(":")
        if int(n) > 0:
            out[(topic, int(p))] = int(n)
    return out


def skip_cells(runs: Iterable[tuple[Iterable[Fault], Iterable[Finding]]], *, tolerance_s: float,
               provable: Callable[[Fault], bool] | None = None) -> tuple[list[SkipCellFigures], dict[str, int]]:
    """The skip matrix over ``runs`` (each: the truth's faults, the run's findings): per cell
    (:class:`SkipCell`) its figures (:class:`SkipCellFigures`), sorted by cell; and the false skips
    of groups that had no skip (the negatives: bursts, catch-ups), per group. A skip ``provable``
    rejects (:func:`skip_bounds`) counts in its cell's ``apart_*`` figures only, found or not.

    A ``skip`` finding belongs to the skip of its group, on a partition that lost messages, whose
    interval (within ``tolerance_s``) holds it — the nearest in time when several do; it is then
    true for that skip (counted once per partition found, its magnitude added to the skip's
    reported count). A skip finding that belongs to no skip is false: in the cell of its group's
    nearest skip in time, or, in a group without skips, a negative's."""
    cells: dict[SkipCell, SkipCellFigures] = {}
    negatives: dict[str, int] = {}
    for faults, findings in runs:
        skips = skip_faults(faults)
        by_group: dict[str, list[Fault]] = {}
        for f in skips:
            by_group.setdefault(f.group, []).append(f)
        hits: dict[int, list[Finding]] = {i: [] for i in range(len(skips))}
        index = {id(f): i for i, f in enumerate(skips)}
        for x in findings:
            if x.kind != "skip":
                continue
            mine = by_group.get(x.group, [])
            if not mine:
                negatives[x.group] = negatives.get(x.group, 0) + 1
                continue
            x_end = x.start if x.end is None else x.end

            def gap(f: Fault, x: Finding = x, x_end: float = x_end) -> float:
                return max(0.0, f.start - x_end, x.start - max(f.start, f.end))

            owners = [f for f in mine if x.topic is not None and x.partition is not None
                      and (x.topic, x.partition) in _lost(f) and gap(f) <= tolerance_s]
            if owners:
                hits[index[id(min(owners, key=gap))]].append(x)
            else:
                near = min(mine, key=gap)
                fig = cells.setdefault(skip_cell(near), SkipCellFigures(skip_cell(near)))
                fig.false_skips += 1
        for i, f in enumerate(skips):
            fig = cells.setdefault(skip_cell(f), SkipCellFigures(skip_cell(f)))
            lost = _lost(f)
            got = hits[i]
            if provable is not None and not provable(f):
                fig.apart_skips += 1
                fig.apart_partitions += len(lost)
                fig.apart_found += len({(x.topic, x.partition) for x in got})
                continue
            fig.skips += 1
            fig.partitions += len(lost)
            fig.found += len({(x.topic, x.partition) for x in got})
            fig.lost.append(sum(lost.values()))
            fig.findings += len(got)
            fig.cause_right += sum(1 for x in got if x.cause == SKIP_CAUSE.get(fig.cell.mechanism))
            if got:
                rep = sum(x.magnitude or 0.0 for x in got)
                fig.reported.append(rep)
                fig.count_errors.append(abs(rep - sum(lost.values())) / sum(lost.values()))
                fig.delays.append(max(0.0, min(x.start for x in got) - f.start))
    return sorted(cells.values(), key=lambda c: (c.cell.mechanism, c.cell.size, c.cell.spread, c.cell.state)), negatives


@dataclass(frozen=True)
class SkipBound:
    """What offsets showed before a skip, read from the truth's exact commits and produce times (the
    most any observer of offsets can see; :func:`skip_bounds`).

    ``pace``: the demonstrated capacity in messages/s that the skip is judged against (a seek: the
    member's, the most it processed at once over one commit request on the partitions it committed
    last before the skip, where one of them showed a pace in it, or one partition's pace if more;
    an out-of-range reset: the group's, Σ over all its partitions), a partition's pace the largest
    rate over its *saturated* commit intervals before the skip (0: none showed one);
    ``interval_s``: the longest time from a skipped partition's commit before the jump to the
    commit of the jump; ``lost``: the messages
    the skip left unprocessed (Σ over its partitions); ``bound``: ``factor`` × ``pace`` ×
    ``interval_s``, the advance consumption at that pace can explain; ``reason``: ``membership``
    (an admin reset: the group was empty, any size is provable), ``no pace`` (the consumer never
    showed what it can process: a caught-up consumer taking a burst in one commit looks the same),
    ``within the bound``, ``beyond the bound`` or ``no jump commit``."""

    pace: float
    interval_s: float
    lost: int
    bound: float
    reason: str

    @property
    def provable(self) -> bool:
        return self.reason in ("membership", "beyond the bound")


def skip_bounds(ti: TruthIndex, factor: float) -> dict[tuple[str, str, float], SkipBound]:
    """Per skip of the truth that lost messages (key: group, member, start), whether offsets can
    prove it (:class:`SkipBound`), with the skip definition's margin ``factor`` (the rules'
    ``skip_factor``).

    A commit interval of a partition (two consecutive commits of its group, ``o0`` at ``t0`` and
    ``o1`` at ``t1``, advance ``a = o1 − o0`` > 0) is *busy* when messages waited at both ends,
    and *saturated* when ``o1 + a`` is below the log end at ``t0`` as well: more than a commit's
    worth of progress stayed waiting, so the consumer's rate ``a / (t1 − t0)`` measures what it can
    do rather than what was written. As the rule does, a partition's pace counts from its
    saturated intervals after an earlier busy one. A jump to the end is never saturated (``o1`` ≥
    the end at ``t0``). A caught-up consumer shows no
    saturated interval; a consumer a commit behind neither. A skip smaller than ``factor`` × what
    the pace processes over the jump's interval is consumption as far as offsets can tell: the
    margin is the rule's, which keeps a consumer's faster interval (a larger fetch, a cheaper
    batch) from reading as a loss. An interval whose commit request (the member's commits at that
    time) advanced another partition more than ``factor`` × faster is *starved*, as the rule
    has it: the member served the other one meanwhile, and this one's advance is what it left over
    (a partition held back while the rest are read), not its pace."""
    # each group's commits in time order, and per partition
    groups: dict[str, list[Commit]] = {}
    for r in ti.records:
        if isinstance(r, Commit):
            groups.setdefault(r.group, []).append(r)
    parts: dict[str, dict[tuple[str, int], list[Commit]]] = {}
    for g, cs in groups.items():
        cs.sort(key=lambda c: c.ts)
        for c in cs:
            parts.setdefault(g, {}).setdefault((c.topic, c.partition), []).append(c)
    # each commit request's fastest advance (one group, member and commit time): a partition that
    # advanced more than ``factor`` × slower than another of the same request was starved, its owner
    # busy elsewhere, and shows what was left over for it, not the consumer's pace
    requests: dict[str, dict[tuple[str, float], float]] = {}
    for g, by_tp in parts.items():
        fastest = requests.setdefault(g, {})
        for tcs in by_tp.values():
            for c0, c1 in itertools.pairwise(tcs):
                if c1.offset > c0.offset and c1.ts > c0.ts:
                    k = (c1.member, c1.ts)
                    fastest[k] = max(fastest.get(k, 0.0), (c1.offset - c0.offset) / (c1.ts - c0.ts))

    out: dict[tuple[str, str, float], SkipBound] = {}
    for f in skip_faults(ti.faults()):
        lost = _lost(f)
        key = (f.group, f.member, f.start)
        if f.detail.get("mechanism") == "admin_reset":
            out[key] = SkipBound(math.nan, math.nan, sum(lost.values()), 0.0, "membership")
            continue
        cs = groups.get(f.group, [])
        by_tp = parts.get(f.group, {})
        fastest = requests.get(f.group, {})
        oor = f.detail.get("mechanism") == "out_of_range"
        if oor:
            mine = set(by_tp)
        else:
            before = [c for c in cs if c.member == f.member and c.ts < f.start]
            mine = {(c.topic, c.partition) for c in before if c.ts == before[-1].ts} if before else set(lost)
        # the pace: saturated intervals strictly before the skip; per commit request, what the
        # member processed at once on its partitions that stayed behind throughout (the rule's
        # member capacity), where one of them showed a pace in it
        rates: dict[tuple[str, int], float] = {}
        at_once: dict[tuple[str, float], float] = {}
        paced: set[tuple[str, float]] = set()
        for tp, tcs in by_tp.items():
            busy = False
            for c0, c1 in itertools.pairwise(c for c in tcs if c.ts < f.start):
                a = c1.offset - c0.offset
                if a <= 0 or c1.ts <= c0.ts or c1.offset >= ti.end_at(*tp, c1.ts) or c0.offset >= ti.end_at(*tp, c0.ts):
                    continue
                req, own = (c1.member, c1.ts), a / (c1.ts - c0.ts)
                if c1.offset < ti.end_at(*tp, c0.ts) and tp in mine | set(lost):
                    at_once[req] = at_once.get(req, 0.0) + own
                top = fastest.get(req, 0.0)
                if top > factor * own and top > own:  # another was faster (a factor below 1 starves nothing by itself)
                    continue
                if busy and c1.offset + a < ti.end_at(*tp, c0.ts):
                    rates[tp] = max(rates.get(tp, 0.0), own)
                    paced.add(req)
                busy = True
        if oor:
            pace = sum(rates.get(tp, 0.0) for tp in mine)
        else:
            shown = [v for k, v in at_once.items() if k in paced]
            pace = max([*shown, *(rates.get(tp, 0.0) for tp in mine | set(lost))], default=0.0)
        # the jump's interval: from each skipped partition's commit before its jump to the jump
        after = {}
        for k, v in (f.detail.get("after") or {}).items():
            topic, _, part = str(k).rpartition(":")
            after[(topic, int(part))] = int(v)
        spans = []
        for tp in lost:
            new = after.get(tp)
            tcs = by_tp.get(tp, [])
            j = next((i for i, c in enumerate(tcs) if i and c.ts >= f.start and new is not None
                      and c.offset >= new), None)
            if j is not None:
                spans.append(tcs[j].ts - tcs[j - 1].ts)
        total = sum(lost.values())
        if not spans:
            out[key] = SkipBound(pace, math.nan, total, math.nan, "no jump commit")
            continue
        span = max(spans)
        bound = factor * pace * span
        reason = "no pace" if pace <= 0 else ("beyond the bound" if total > bound else "within the bound")
        out[key] = SkipBound(pace, span, total, bound, reason)
    return out
