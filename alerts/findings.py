"""Findings: the analytics' result tables turned into alert candidates with a stable key.

A :class:`Finding` is one thing worth telling someone about, in one state:

The result tables hold an open window or anomaly once per analytics step until it closes;
only the current row of each identity counts (:func:`lagscope.results.current_rows`).

- ``anomalies``: every anomaly; key = the row's own ``key`` column (kind|cluster|group|topic|
  partition|start); firing while ``end_ts`` is null, resolved once it is set. Severity is
  the row's. A skip, retention loss or rewind carries its delivery accounting
  (:mod:`lagscope.delivery`): ``messages_lost``, ``messages_reprocessed``, ``cause`` (also a
  label), ``exact`` and ``bound``.
- ``rebalances``: every window; key = ``rebalance|cluster|group|start``; firing while open,
  resolved once closed. Severity ``warning`` when the window outlasts the bound its settings
  imply (closed: ``observed_over_bound > 1``; open: already longer than ``bound_s``), else
  ``info``.
- ``status``: the latest group-level row (topic and partition null) per group; key =
  ``status|cluster|group|STATUS``; firing while the group is in a bad status (WARN, REWIND:
  warning; ERR, STOP, STALL: critical); OK and IDLE fire nothing. A change from WARN to STALL
  resolves the WARN key and fires the STALL key. Status has no explicit end: its resolution
  is detected by the dispatcher (a key that was firing and is no longer reported). **Full
  steps only**: :func:`findings_from_results` reads the status rows of the full (incremental or
  batch) steps, never a provisional step's (``pre-…`` files, docs/analytics.md "Provisional
  steps"). A group status is a point in time — a provisional step's is its last sweep's, a
  full step's the minute's last sweep's — so a lag spike or rewind over by the minute's end
  would fire and resolve within the minute; a provisional status row is shown (the app, the
  results exporter's metrics) but neither fires nor resolves an alert. The anomalies and the
  rebalance windows of a provisional step alert as they come (the fast path).

Findings of rebalance-related kinds (:data:`ADVICE_KINDS`: ``rebalance``, ``rebalance_storm``)
carry their group's current advice as one line (:func:`advice_line`, from
:func:`lagscope.results.current_advice`), None when the group has none.

Pure: rows in, findings out (the clock is a parameter).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from lagscope.delivery import account_rows
from lagscope.errors import LakeError
from lagscope.lake import object_store
from lagscope.results import (
    EVENT_IDENTITY,
    TableTail,
    current_advice,
    current_rows,
    default_gone_after_s,
    event_rank,
    latest_rows,
    live_series,
)
from lagscope.storage import Store

__all__ = [
    "ADVICE_KINDS",
    "SEVERITIES",
    "Finding",
    "FindingsReader",
    "advice_line",
    "findings_from_anomalies",
    "findings_from_rebalances",
    "findings_from_results",
    "findings_from_status",
    "severity_rank",
    "with_advice",
]

State = Literal["firing", "resolved"]

#: severities in increasing order
SEVERITIES: tuple[str, ...] = ("info", "warning", "critical")

_STATUS_SEVERITY = {"WARN": "warning", "REWIND": "warning", "ERR": "critical", "STOP": "critical",
                    "STALL": "critical"}


def severity_rank(severity: str) -> int:
    """0 for info, 1 for warning, 2 for critical; unknown severities rank as critical."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES) - 1


@dataclass(frozen=True)
class Finding:
    """One alert candidate in one state (see the module docstring for keys and severities)."""

    key: str
    source: str  # anomalies | rebalances | status
    state: State
    kind: str  # the anomaly kind, 'rebalance', or 'status'
    severity: str  # info | warning | critical
    cluster: str
    group: str
    summary: str
    starts_at: dt.datetime
    ends_at: dt.datetime | None = None
    topic: str | None = None
    partition: int | None = None
    detail: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    #: the delivery accounting of a skip, retention loss or rewind (None for other findings):
    #: messages never processed, messages processed twice, the cause, whether the counts are
    #: exact (one commit shows them whole) or a bound, and which (lagscope.delivery.BOUNDS)
    messages_lost: int | None = None
    messages_reprocessed: int | None = None
    cause: str | None = None
    exact: bool | None = None
    bound: str | None = None
    #: rebalance-related kinds: the group's current advice in one line (:func:`advice_line`)
    advice: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["starts_at"] = self.starts_at.isoformat()
        data["ends_at"] = self.ends_at.isoformat() if self.ends_at else None
        data["labels"] = dict(self.labels)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        values = dict(data)
        values["starts_at"] = dt.datetime.fromisoformat(values["starts_at"])
        values["ends_at"] = dt.datetime.fromisoformat(values["ends_at"]) if values.get("ends_at") else None
        return cls(**values)

    def resolved(self, at: dt.datetime) -> Finding:
        """The same finding, resolved at ``at`` (used when a firing key is no longer reported)."""
        return Finding(**{**asdict(self), "state": "resolved", "ends_at": self.ends_at or at,
                          "labels": dict(self.labels)})


def _utc(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def findings_from_anomalies(rows: Iterable[Mapping[str, Any]]) -> Iterator[Finding]:
    current = current_rows(rows, lambda r: (r["cluster"], r["key"]))
    for r, delivery in zip(current, account_rows(current), strict=True):
        end = r.get("end_ts")
        where = r["group_id"] + (f" {r['topic']}" if r.get("topic") else "") + (
            f"[{r['partition']}]" if r.get("partition") is not None else "")
        counts: dict[str, Any] = {} if delivery is None else {
            "messages_lost": delivery["lost"], "messages_reprocessed": delivery["reprocessed"],
            "cause": delivery["cause"], "exact": delivery["exact"], "bound": delivery["bound"],
            "labels": {"cause": delivery["cause"]}}
        yield Finding(
            key=r["key"], source="anomalies", state="resolved" if end is not None else "firing",
            kind=r["kind"], severity=r["severity"], cluster=r["cluster"], group=r["group_id"],
            topic=r.get("topic"), partition=r.get("partition"),
            summary=f"{r['kind']} on {where} ({r['cluster']})",
            detail=r.get("detail") or "", starts_at=_utc(r["start_ts"]),
            ends_at=_utc(end) if end is not None else None, **counts)


def findings_from_rebalances(rows: Iterable[Mapping[str, Any]], now: dt.datetime) -> Iterator[Finding]:
    for r in current_rows(rows, lambda r: (r["cluster"], r["group_id"], r["start_ts"])):
        start = _utc(r["start_ts"])
        end = r.get("end_ts")
        bound = r.get("bound_s")
        if end is not None:
            over = r.get("observed_over_bound")
            slow = over is not None and over > 1
            detail = (f"rebalance ({r.get('cause') or 'unknown'}) took {r.get('duration_s') or 0:.1f} s"
                      + (f", bound {bound:.1f} s" if bound else ""))
        else:
            elapsed = (now - start).total_seconds()
            slow = bound is not None and bound > 0 and elapsed > bound
            detail = f"rebalance ({r.get('cause') or 'unknown'}) open for {elapsed:.0f} s" + (
                f", bound {bound:.1f} s" if bound else "")
        yield Finding(
            key=f"rebalance|{r['cluster']}|{r['group_id']}|{start.isoformat()}", source="rebalances",
            state="resolved" if end is not None else "firing", kind="rebalance",
            severity="warning" if slow else "info", cluster=r["cluster"], group=r["group_id"],
            summary=f"rebalance of {r['group_id']} ({r['cluster']})", detail=detail, starts_at=start,
            ends_at=_utc(end) if end is not None else None,
            labels={"cause": r.get("cause") or "unknown"})


def findings_from_status(rows: Iterable[Mapping[str, Any]]) -> Iterator[Finding]:
    group_rows = (r for r in rows if r.get("topic") is None and r.get("partition") is None)
    latest = latest_rows(group_rows, lambda r: (r["cluster"], r["group_id"]), "eval_ts")
    for r in sorted(latest.values(), key=lambda r: (r["cluster"], r["group_id"])):
        cluster, group = r["cluster"], r["group_id"]
        status = r.get("status") or ""
        severity = _STATUS_SEVERITY.get(status)
        if severity is None:  # OK, IDLE: nothing is wrong
            continue
        yield Finding(
            key=f"status|{cluster}|{group}|{status}", source="status", state="firing",
            kind="status", severity=severity, cluster=cluster, group=group,
            summary=f"{group} is {status} ({cluster})", detail=r.get("reason") or "",
            starts_at=_utc(r["eval_ts"]), labels={"status": status})


#: the finding kinds whose payloads carry the group's advice
ADVICE_KINDS = ("rebalance", "rebalance_storm")
#: the advice rules a rebalance finding's line names, in this order (a retention advice is not
#: about rebalancing)
_REBALANCE_RULES = ("restart_storm", "session_timeout_crash", "max_poll_interval", "eager_large_group",
                    "rewind_after_rebalance")


def advice_line(rows: Iterable[Mapping[str, Any]], kind: str) -> str | None:
    """One group's current advice rows → one line for a ``kind`` finding: per rebalance rule
    (the storm's first for a storm), ``setting → suggested: expected effect (confidence)``,
    joined by ``; ``; None without any."""
    order = list(_REBALANCE_RULES)
    if kind != "rebalance_storm":
        order.remove("restart_storm")
        order.append("restart_storm")
    picked = sorted((r for r in rows if r.get("rule") in order), key=lambda r: order.index(r["rule"]))
    parts = [f"{r['setting']} → {r['suggested']}" + (f": {r['expected_effect']}" if r.get("expected_effect") else "")
             + f" ({r.get('confidence') or 'low'} confidence)" for r in picked]
    return "; ".join(parts) or None


def with_advice(findings: Iterable[Finding], advice: Iterable[Mapping[str, Any]]) -> list[Finding]:
    """``findings`` with the advice line set on those of :data:`ADVICE_KINDS` (``advice``: the
    current advice rows, :func:`lagscope.results.current_advice`)."""
    by_group: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for r in advice:
        by_group.setdefault((r["cluster"], r["group_id"]), []).append(r)
    return [replace(f, advice=advice_line(by_group.get((f.cluster, f.group), []), f.kind))
            if f.kind in ADVICE_KINDS else f for f in findings]


def results_exist(root: Path | str | Store) -> bool:
    """Whether there are result tables to evaluate at ``root``: a local folder that exists, or an
    object-store prefix (a :class:`~lagscope.storage.Store`, an ``s3://`` URL) holding any object
    (a prefix exists only through its objects). Raises LakeError when the store cannot be listed
    (no such bucket, refused credentials)."""
    store = object_store(root)
    if store is None:
        return Path(root.base if isinstance(root, Store) else root).is_dir()
    import pyarrow as pa

    try:
        return bool(store.folders("") or store.names(""))
    except (OSError, pa.ArrowException) as exc:
        raise LakeError(f"cannot list the results at {store.url}: {exc}") from exc


def findings_from_results(root: Path | str | Store, now: dt.datetime, *,
                          gone_after_s: float | None = None) -> list[Finding]:
    """Every finding in the result tables under ``root`` (a folder, or an object store: a
    :class:`~lagscope.storage.Store`; raises LakeError when unreadable): one
    :class:`FindingsReader`'s first evaluation (a long-lived loop keeps the reader instead, and
    reads only what changed).

    A root that does not exist (on an object store: a prefix without any object) is an error, not
    "no findings": that would resolve every alert still firing (a mistyped ``--results``, a volume
    not mounted yet). ``gone_after_s``: :class:`FindingsReader`'s."""
    return FindingsReader(root, gone_after_s=gone_after_s).findings(now)


#: the tables the findings come from
_TABLES = ("anomalies", "rebalances", "status")
_Folder = tuple[str, str]


class FindingsReader:
    """The findings of the result tables under ``root``, read incrementally: each
    :meth:`findings` reads only the files that are new since the one before, per table and date
    folder, through :class:`lagscope.results.TableTail` (the results exporter's follower), and
    folds them into what it keeps — per folder, the current row of each rebalance window and
    anomaly (:func:`lagscope.results.current_rows`) and each group's latest full-step status row —
    so its cost and its memory follow the new files and the identities, not the tables' rows.

    A folder whose files changed under it (a batch replaced a day) is read again whole; a folder
    gone (retention, a batch) is forgotten; a visible provisional step's files are read at every
    evaluation and laid over what is kept, for that evaluation only (the next provisional step or
    the full step replaces them). Status rows come from the full steps only (module docstring).
    The findings equal :func:`findings_from_results`'s over the same files (tested). A read that
    fails keeps the state of the evaluation before, and the next one tries again.

    With ``hold_ended_s`` (a long-lived loop passes the alerts' ``lookback_s``), an anomaly or a
    rebalance window that ended longer ago than that is dropped from what the reader keeps once
    an evaluation that reported it has been queued (:meth:`forget_sent`, which the loop calls after
    :func:`lagscope.alerts.enqueue_findings` committed): it can cause no notification any more (a
    finding first seen already closed is sent only within the lookback; one the outbox had as
    firing was resolved by that evaluation), so the reader's memory follows the open findings and
    the recent ones, not every identity of the retained days. Its later evaluations leave those
    findings out; a day read again whole (a batch) reports them once more, and drops them again.

    A group whose status rows stopped ``gone_after_s`` before the newest of its cluster is gone
    (deleted, no longer swept: :func:`lagscope.results.live_series`; None: the analytics' default
    forget horizon): its status is no finding any more, so a status alert of a deleted group
    resolves instead of firing until retention removes its day."""

    def __init__(self, root: Path | str | Store, *, hold_ended_s: float | None = None,
                 gone_after_s: float | None = None) -> None:
        self.root = root
        self.hold_ended_s = hold_ended_s
        self.gone_after_s = default_gone_after_s() if gone_after_s is None else gone_after_s
        self._evaluated_at: dt.datetime | None = None  # the last evaluation's time, until forget_sent
        self._tails = {t: TableTail(root, t) for t in _TABLES}
        #: per table and (cluster, date): identity → the current row (status: (cluster, group) → latest)
        self._kept: dict[str, dict[_Folder, dict[Any, dict[str, Any]]]] = {t: {} for t in _TABLES}
        #: the files read by the last evaluation (tests, the soak's diagnostics)
        self.files_read = 0

    def _read(self, table: str, files: Iterable[Path], store: Store | None) -> list[dict[str, Any]]:
        import pyarrow.dataset as ds

        from lagscope.lake import read_live, read_objects

        paths = list(files)
        if not paths:
            return []
        self.files_read += len(paths)
        where = ~ds.field("topic").is_valid() & ~ds.field("partition").is_valid() if table == "status" else None
        if store is not None:
            base = store.path().rstrip("/") + "/"
            rels = [str(p).removeprefix(base) for p in paths]
            tbl = read_objects(lambda: rels, store, table, filter=where)
        else:
            root = Path(self.root.base if isinstance(self.root, Store) else self.root)
            # listed again after a file is quarantined or vanishes: the ones still there (a file gone
            # since the poll is the next poll's change: its folder is read again)
            tbl = read_live(lambda: [p for p in paths if p.exists()], root, table, filter=where)
        rows: list[dict[str, Any]] = tbl.to_pylist()
        return rows

    @staticmethod
    def _fold(table: str, into: dict[Any, dict[str, Any]], rows: Iterable[dict[str, Any]]) -> None:
        if table == "status":
            for r in rows:
                if r.get("eval_ts") is None:
                    continue
                k = (r["cluster"], r["group_id"])
                cur = into.get(k)
                if cur is None or r["eval_ts"] >= cur["eval_ts"]:
                    into[k] = r
            return
        cols = EVENT_IDENTITY[table]
        for r in rows:
            k = tuple(r[c] for c in cols)
            cur = into.get(k)
            if cur is None or event_rank(r) >= event_rank(cur):
                into[k] = r

    @property
    def rows_kept(self) -> int:
        """The rows the reader keeps (tests, the soak's diagnostics)."""
        return sum(len(rows) for folders in self._kept.values() for rows in folders.values())

    def forget_sent(self) -> None:
        """The last evaluation's findings are queued: forget the anomalies and rebalance windows
        that had ended more than ``hold_ended_s`` before it (none without ``hold_ended_s``). Not
        called after a failed evaluation or enqueue, so nothing is forgotten before it was queued."""
        if self.hold_ended_s is None or self._evaluated_at is None:
            return
        before = self._evaluated_at - dt.timedelta(seconds=self.hold_ended_s)
        self._evaluated_at = None
        for table in ("anomalies", "rebalances"):
            folders = self._kept[table]
            for folder, rows in list(folders.items()):
                ended = {k for k, r in rows.items() if (end := r.get("end_ts")) is not None and _utc(end) < before}
                if ended:  # a new dict: the folder's may be shared with the state before
                    folders[folder] = {k: r for k, r in rows.items() if k not in ended}

    def _drop_gone_status(self) -> None:
        """Forget the status rows of the groups that are gone (see the class docstring)."""
        folders = self._kept["status"]
        rows = {(folder, k): r for folder, kept in folders.items() for k, r in kept.items()}
        live = live_series(rows, lambda k: k[0][0], lambda r: _utc(r["eval_ts"]).timestamp(), self.gone_after_s)
        if len(live) == len(rows):
            return
        out: dict[_Folder, dict[Any, dict[str, Any]]] = {folder: {} for folder in folders}
        for (folder, k), r in live.items():
            out[folder][k] = r
        self._kept["status"] = out

    def findings(self, now: dt.datetime) -> list[Finding]:
        """The findings now (see the class docstring); raises LakeError when the root does not
        exist or a table cannot be read."""
        root = self.root
        if not results_exist(root):
            raise LakeError(f"no result tables at {root.url if isinstance(root, Store) else root}: "
                            "no such folder" + (" (no object under the prefix)" if object_store(root) else ""))
        self.files_read = 0
        kept: dict[str, dict[_Folder, dict[Any, dict[str, Any]]]] = {}
        provisional: dict[str, list[dict[str, Any]]] = {t: [] for t in _TABLES}
        polls = {}
        for table in _TABLES:  # all read before anything is kept: a failed read changes nothing
            changes = polls[table] = self._tails[table].poll()
            folders = dict(self._kept[table])
            for folder in changes.gone:
                folders.pop(folder, None)
            for ch in changes.changed:
                key = (ch.cluster, ch.date)
                if ch.files or ch.reset:
                    into = {} if ch.reset or key not in folders else dict(folders[key])
                    self._fold(table, into, self._read(table, ch.files, ch.store))
                    folders[key] = into
                if ch.provisional and table != "status":  # status: the full steps' only
                    provisional[table].extend(self._read(table, ch.provisional, ch.store))
            kept[table] = folders
        for table in _TABLES:
            self._tails[table].commit(polls[table])
        self._kept = kept
        if polls["status"].changed:  # the newest status moves only with new rows
            self._drop_gone_status()

        def rows(table: str) -> list[dict[str, Any]]:
            return [r for folder in kept[table].values() for r in folder.values()] + provisional[table]

        def current(table: str) -> list[Mapping[str, Any]]:
            cols = EVENT_IDENTITY[table]
            return current_rows(rows(table), lambda r: tuple(r[c] for c in cols))

        found = [
            *findings_from_anomalies(current("anomalies")),
            *findings_from_rebalances(current("rebalances"), now),
            *findings_from_status(rows("status")),
        ]
        self._evaluated_at = now
        if not any(f.kind in ADVICE_KINDS for f in found):
            return found
        return with_advice(found, current_advice(root))
