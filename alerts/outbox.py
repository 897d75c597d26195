"""The durable outbox: notifications wait here (SQLite, WAL, synchronous=FULL) until delivered.

Two tables in one file:

- ``outbox``: one row per notification to one route: its idempotency key (UNIQUE, so
  enqueueing the same notification twice stores it once), the rendered body, the attempt
  count, the next attempt time, and when it was delivered (or given up on: ``dead_at``, only
  for answers that retrying cannot fix, such as 400/401/404).
- ``alert_state``: per finding key, whether it is firing and in which episode (a key that
  fires again after it resolved starts a new episode, so its notifications get new
  idempotency keys).

A file that is not an outbox (or cannot be created) raises ConfigError with one line.
Every change is one transaction committed before the call returns, so a crash or a restart
(a new :class:`Outbox` on the same file) loses nothing that was enqueued or delivered.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from lagscope.errors import ConfigError

__all__ = ["Entry", "Outbox", "OutboxCounts"]

#: keys per ``IN (...)`` of one query (SQLite allows at least 999 parameters)
_IN_CHUNK = 500

_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    idempotency_key  TEXT NOT NULL UNIQUE,
    route            TEXT NOT NULL,
    finding_key      TEXT NOT NULL,
    state            TEXT NOT NULL,
    body             BLOB NOT NULL,
    created_at       REAL NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_at  REAL NOT NULL,
    delivered_at     REAL,
    dead_at          REAL,
    last_error       TEXT
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (next_attempt_at) WHERE delivered_at IS NULL AND dead_at IS NULL;
CREATE INDEX IF NOT EXISTS outbox_route_delivered ON outbox (route, delivered_at);
CREATE TABLE IF NOT EXISTS alert_state (
    key         TEXT PRIMARY KEY,
    state       TEXT NOT NULL,
    episode     INTEGER NOT NULL,
    finding     TEXT NOT NULL,
    updated_at  REAL NOT NULL
);
"""


@dataclass(frozen=True)
class Entry:
    """One pending notification as read from the outbox."""

    id: int
    idempotency_key: str
    route: str
    finding_key: str
    state: str
    body: bytes
    attempts: int
    next_attempt_at: float


@dataclass(frozen=True)
class OutboxCounts:
    pending: int
    delivered: int
    dead: int


@dataclass(frozen=True)
class AlertState:
    key: str
    state: str
    episode: int
    finding: str


class Outbox:
    """A SQLite outbox file; safe to share between threads of one process (one lock)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"cannot open the outbox {self.path}: {exc}") from exc
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            self._db.close()
            raise ConfigError(f"cannot open the outbox {self.path}: {exc}") from exc

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> Outbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One IMMEDIATE transaction: committed on success, rolled back on an exception."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # -- notifications --------------------------------------------------------------------

    @staticmethod
    def enqueue_in(db: sqlite3.Connection, *, idempotency_key: str, route: str, finding_key: str,
                   state: str, body: bytes, now: float) -> bool:
        """Insert inside an open transaction; False when that idempotency key is already there."""
        cur = db.execute(
            "INSERT OR IGNORE INTO outbox (idempotency_key, route, finding_key, state, body, created_at, "
            "next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (idempotency_key, route, finding_key, state, body, now, now))
        return cur.rowcount == 1

    def due(self, now: float, limit: int = 100) -> list[Entry]:
        """Pending entries whose next attempt is due, oldest first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, idempotency_key, route, finding_key, state, body, attempts, next_attempt_at "
                "FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL AND next_attempt_at <= ? "
                "ORDER BY next_attempt_at, id LIMIT ?", (now, limit)).fetchall()
        return [Entry(*r) for r in rows]

    def next_due_at(self) -> float | None:
        """When the earliest pending entry is due; None when nothing is pending."""
        with self._lock:
            row = self._db.execute("SELECT MIN(next_attempt_at) FROM outbox "
                                   "WHERE delivered_at IS NULL AND dead_at IS NULL").fetchone()
        return row[0] if row and row[0] is not None else None

    def mark_delivered(self, entry_id: int, now: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE outbox SET delivered_at = ?, attempts = attempts + 1, last_error = NULL "
                       "WHERE id = ?", (now, entry_id))

    def mark_failed(self, entry_id: int, error: str, next_attempt_at: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE outbox SET attempts = attempts + 1, last_error = ?, next_attempt_at = ? "
                       "WHERE id = ?", (error, next_attempt_at, entry_id))

    def soonest_per_route(self) -> dict[str, Entry]:
        """Per route with pending entries, the one whose next attempt comes first."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, idempotency_key, route, finding_key, state, body, attempts, MIN(next_attempt_at) "
                "FROM outbox WHERE delivered_at IS NULL AND dead_at IS NULL GROUP BY route").fetchall()
        return {r[2]: Entry(*r) for r in rows}

    def release(self, route: str, now: float) -> int:
        """Make the pending entries of ``route`` that wait for a retry due at ``now`` (the route
        answers again); returns how many."""
        with self.transaction() as db:
            cur = db.execute("UPDATE outbox SET next_attempt_at = ? WHERE route = ? AND delivered_at IS NULL "
                             "AND dead_at IS NULL AND attempts > 0 AND next_attempt_at > ?", (now, route, now))
            return int(cur.rowcount)

    def defer(self, entry_id: int, next_attempt_at: float) -> None:
        """Push an entry back without counting an attempt (rate limit)."""
        with self.transaction() as db:
            db.execute("UPDATE outbox SET next_attempt_at = ? WHERE id = ?", (next_attempt_at, entry_id))

    def mark_dead(self, entry_id: int, error: str, now: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE outbox SET attempts = attempts + 1, last_error = ?, dead_at = ? WHERE id = ?",
                       (error, now, entry_id))

    def delivered_since(self, route: str, since: float) -> list[float]:
        """Delivery times of ``route`` after ``since``, oldest first (for rate limits)."""
        with self._lock:
            rows = self._db.execute("SELECT delivered_at FROM outbox WHERE route = ? AND delivered_at > ? "
                                    "ORDER BY delivered_at", (route, since)).fetchall()
        return [r[0] for r in rows]

    def counts(self) -> OutboxCounts:
        with self._lock:
            row = self._db.execute(
                "SELECT SUM(delivered_at IS NULL AND dead_at IS NULL), SUM(delivered_at IS NOT NULL), "
                "SUM(dead_at IS NOT NULL) FROM outbox").fetchone()
        return OutboxCounts(*(int(v or 0) for v in row))

    def entries(self) -> list[dict[str, object]]:
        """Every row as a dict (for the CLI and for tests)."""
        with self._lock:
            cur = self._db.execute("SELECT id, idempotency_key, route, finding_key, state, attempts, "
                                   "created_at, next_attempt_at, delivered_at, dead_at, last_error "
                                   "FROM outbox ORDER BY id")
            names = [d[0] for d in cur.description]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    # -- alert state ----------------------------------------------------------------------

    @staticmethod
    def states_in(db: sqlite3.Connection, keys: Collection[str] | None = None) -> dict[str, AlertState]:
        """The alert states: every one, or with ``keys`` the firing ones and those of ``keys`` (what an
        evaluation of those findings reads: the resolved states of other keys, kept for days, are
        not loaded at every evaluation)."""
        select = "SELECT key, state, episode, finding FROM alert_state"
        if keys is None:
            return {r[0]: AlertState(*r) for r in db.execute(select)}
        out = {r[0]: AlertState(*r) for r in db.execute(select + " WHERE state = 'firing'")}
        rest = [k for k in keys if k not in out]
        for i in range(0, len(rest), _IN_CHUNK):
            chunk = rest[i:i + _IN_CHUNK]
            where = f" WHERE key IN ({', '.join('?' * len(chunk))})"
            out.update((r[0], AlertState(*r)) for r in db.execute(select + where, chunk))
        return out

    @staticmethod
    def set_state_in(db: sqlite3.Connection, key: str, state: str, episode: int, finding: str, now: float) -> None:
        db.execute("INSERT INTO alert_state (key, state, episode, finding, updated_at) VALUES (?, ?, ?, ?, ?) "
                   "ON CONFLICT(key) DO UPDATE SET state = excluded.state, episode = excluded.episode, "
                   "finding = excluded.finding, updated_at = excluded.updated_at",
                   (key, state, episode, finding, now))
