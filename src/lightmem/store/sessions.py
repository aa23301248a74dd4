"""FluxMem task sessions in the store: one row per task a remote client is driving.

A session's state (episode, phase, attempts, repairs, the Stage I subgraph it was shown,
the context, times) is a row, so any service instance on the same store continues it and
it survives a restart. A step *claims* the row for a lease (so two instances never advance
one task at once), does its work, then saves the new state and releases the claim in one
statement that checks the claim is still its own. Rows expire ``ttl`` seconds after their
last step; :mod:`lightmem.fluxmem.session` records an expired task's episode as failed.

Steps are idempotent: the row keeps a digest of the last step it applied (``step_key``),
and a finished task keeps its row, with its ``outcome``, until it expires, so a step
reported again after its answer was lost is recognised and answered from the row instead
of being applied twice. Only unfinished rows count as open sessions.

The table is defined once here for both SQL backends (as in :mod:`.schema_tables`); each
backend's schema appends it as its ``task_sessions`` migration step, and the two columns
above as its ``task_session_steps`` step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lightmem.store.db import Database
from lightmem.store.schema_tables import ColumnTypes
from lightmem.store.sql import dumps, json_value, placeholders, scope_sql
from lightmem.types import Scope

__all__ = [
    "SQLTaskSessions",
    "SessionRow",
    "TaskSessionStore",
    "session_shows",
    "task_session_steps",
    "task_sessions_table",
]

_LOCK_KEY = "task_sessions"  # the meta row that serialises cap checks


def task_sessions_table(t: ColumnTypes) -> str:
    """The ``task_sessions`` table (a migration step of each backend)."""
    return f"""
CREATE TABLE IF NOT EXISTS task_sessions (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    episode_id TEXT NOT NULL,
    task TEXT NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN ('mature', 'search')),
    attempt INTEGER NOT NULL,
    rounds_left INTEGER NOT NULL,
    attempts {t.json} NOT NULL,
    repairs {t.json} NOT NULL,
    subgraph {t.json} NOT NULL,
    context TEXT NOT NULL,
    claim TEXT NOT NULL DEFAULT '',
    claimed_until {t.real} NOT NULL DEFAULT 0,
    created_at {t.real} NOT NULL, updated_at {t.real} NOT NULL, expires_at {t.real} NOT NULL
);
CREATE INDEX IF NOT EXISTS task_sessions_scope ON task_sessions (user_id, agent_id, run_id);
CREATE INDEX IF NOT EXISTS task_sessions_expiry ON task_sessions (expires_at);
INSERT INTO meta (key, value) VALUES ('{_LOCK_KEY}', '') ON CONFLICT (key) DO NOTHING
"""


def task_session_steps(t: ColumnTypes) -> str:
    """The ``task_session_steps`` migration step: the digest of the last step applied and
    the outcome of a finished task (NULL while it runs)."""
    return f"""
ALTER TABLE task_sessions ADD COLUMN step_key TEXT NOT NULL DEFAULT '';
ALTER TABLE task_sessions ADD COLUMN outcome {t.json}
"""


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session's stored state. ``subgraph`` maps each node kind to its
    ``[node_id, score, why]`` triples; ``attempts`` and ``repairs`` are the episode's
    records so far. ``step_key`` identifies the last step applied (``attempt`` steps
    were); ``outcome`` is set once the task has finished."""

    id: str
    scope: Scope
    episode_id: str
    task: str
    phase: str
    attempt: int
    rounds_left: int
    attempts: list[dict[str, Any]] = field(default_factory=list)
    repairs: list[dict[str, str]] = field(default_factory=list)
    subgraph: dict[str, list[list[Any]]] = field(default_factory=dict)
    context: str = ""
    created_at: float = 0.0
    updated_at: float = 0.0
    expires_at: float = 0.0
    claimed_until: float = 0.0
    step_key: str = ""
    outcome: dict[str, Any] | None = None


class TaskSessionStore(Protocol):
    """Where a store keeps its FluxMem task sessions (see the module docstring)."""

    def open(self, row: SessionRow, cap: int, now: float) -> bool:
        """Insert ``row`` unless ``cap`` unexpired unfinished sessions are open (False)."""

    def get(self, session_id: str, scope: Scope) -> SessionRow | None: ...
    def claim(
        self, session_id: str, scope: Scope, token: str, now: float, lease_s: float
    ) -> SessionRow | None:
        """Claim an unexpired, unfinished, unclaimed session for ``lease_s``; None if it
        is not one."""

    def claim_expired(
        self, session_id: str, token: str, now: float, lease_s: float
    ) -> SessionRow | None:
        """Claim a session whose time is up (to record its episode); None if it is not."""

    def save(self, row: SessionRow, token: str) -> bool:
        """Store the new state (a finished task's too) and release the claim; False if the
        claim was lost."""

    def release(self, session_id: str, token: str) -> None: ...
    def finish(self, session_id: str, token: str) -> None:
        """Remove a claimed session (its time is up)."""

    def expired(self, now: float, limit: int) -> list[str]:
        """Ids of sessions whose time is up and that no one holds, oldest first."""

    def count(self, now: float) -> int:
        """Open (unexpired, unfinished) sessions in the store."""

    def showing(self, node_id: str, scope: Scope, now: float) -> list[str]:
        """Ids of the open sessions of ``scope`` that show graph node ``node_id``
        (:func:`session_shows`)."""


_COLS = (
    "id, user_id, agent_id, run_id, episode_id, task, phase, attempt, rounds_left, attempts, "
    "repairs, subgraph, context, created_at, updated_at, expires_at, claimed_until, "
    "step_key, outcome"
)
_STATE = (
    "phase = ?, attempt = ?, rounds_left = ?, attempts = ?, repairs = ?, subgraph = ?, "
    "context = ?, updated_at = ?, expires_at = ?, step_key = ?, outcome = ?"
)
_OPEN = "expires_at > ? AND outcome IS NULL"  # an unexpired, unfinished session


class SQLTaskSessions:
    """:class:`TaskSessionStore` on any :class:`~lightmem.store.db.Database`."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def open(self, row: SessionRow, cap: int, now: float) -> bool:
        with self.db.transaction() as s:
            # Lock one row first, so concurrent openers count one after another.
            s.one(f"SELECT value FROM meta WHERE key = '{_LOCK_KEY}'" + self.db.row_lock)
            (n,) = s.one(f"SELECT count(*) FROM task_sessions WHERE {_OPEN}", (now,))
            if int(n) >= cap:
                return False
            marks = placeholders(_COLS.split(","))
            s.execute(
                f"INSERT INTO task_sessions ({_COLS}) VALUES ({marks})",
                (
                    row.id,
                    row.scope.user_id,
                    row.scope.agent_id,
                    row.scope.run_id,
                    row.episode_id,
                    row.task,
                    *_state(row)[:7],
                    row.created_at,
                    row.updated_at,
                    row.expires_at,
                    0.0,
                    *_state(row)[9:],
                ),
            )
        return True

    def get(self, session_id: str, scope: Scope) -> SessionRow | None:
        where, params = scope_sql(self.db.dialect, scope)
        with self.db.read() as s:
            r = s.one(
                f"SELECT {_COLS} FROM task_sessions WHERE id = ? AND {where}",
                (session_id, *params),
            )
        return _row(r) if r else None

    def claim(
        self, session_id: str, scope: Scope, token: str, now: float, lease_s: float
    ) -> SessionRow | None:
        return self._claim(session_id, scope, token, now, lease_s, _OPEN)

    def claim_expired(
        self, session_id: str, token: str, now: float, lease_s: float
    ) -> SessionRow | None:
        return self._claim(session_id, Scope(), token, now, lease_s, "expires_at <= ?")

    def _claim(
        self, session_id: str, scope: Scope, token: str, now: float, lease_s: float, alive: str
    ) -> SessionRow | None:
        where, params = scope_sql(self.db.dialect, scope)
        with self.db.transaction() as s:
            took = s.execute(
                "UPDATE task_sessions SET claim = ?, claimed_until = ? WHERE id = ? AND "
                f"claimed_until < ? AND {alive} AND {where}",
                (token, now + lease_s, session_id, now, now, *params),
            )
            if _count(took) != 1:
                return None
            r = s.one(f"SELECT {_COLS} FROM task_sessions WHERE id = ?", (session_id,))
        return _row(r) if r else None

    def save(self, row: SessionRow, token: str) -> bool:
        with self.db.transaction() as s:
            done = s.execute(
                f"UPDATE task_sessions SET {_STATE}, claim = '', claimed_until = 0 "
                "WHERE id = ? AND claim = ?",
                (*_state(row), row.id, token),
            )
            return _count(done) == 1

    def release(self, session_id: str, token: str) -> None:
        with self.db.transaction() as s:
            s.execute(
                "UPDATE task_sessions SET claim = '', claimed_until = 0 WHERE id = ? AND claim = ?",
                (session_id, token),
            )

    def finish(self, session_id: str, token: str) -> None:
        with self.db.transaction() as s:
            s.execute("DELETE FROM task_sessions WHERE id = ? AND claim = ?", (session_id, token))

    def expired(self, now: float, limit: int) -> list[str]:
        with self.db.read() as s:
            rows = s.all(
                "SELECT id FROM task_sessions WHERE expires_at <= ? AND claimed_until < ? "
                "ORDER BY expires_at, id LIMIT ?",
                (now, now, limit),
            )
        return [str(r[0]) for r in rows]

    def showing(self, node_id: str, scope: Scope, now: float) -> list[str]:
        where, params = scope_sql(self.db.dialect, scope)
        with self.db.read() as s:
            rows = s.all(
                f"SELECT id, episode_id, subgraph FROM task_sessions WHERE {_OPEN} AND {where} "
                "ORDER BY id",
                (now, *params),
            )
        return [str(r[0]) for r in rows if session_shows(str(r[1]), json_value(r[2]), node_id)]

    def count(self, now: float) -> int:
        with self.db.read() as s:
            (n,) = s.one(f"SELECT count(*) FROM task_sessions WHERE {_OPEN}", (now,))
        return int(n)


def session_shows(episode_id: str, subgraph: Any, node_id: str) -> bool:
    """True when a session (its episode id, its stored subgraph) shows node ``node_id``:
    the node is its episode or one of its subgraph's nodes."""
    if episode_id == node_id:
        return True
    refs = subgraph.values() if isinstance(subgraph, dict) else []
    return any(
        isinstance(r, list) and r and str(r[0]) == node_id
        for kind in refs
        if isinstance(kind, list)
        for r in kind
    )


def _state(row: SessionRow) -> tuple[Any, ...]:
    """Values for ``_STATE`` (the part of a row a step changes)."""
    return (
        row.phase,
        row.attempt,
        row.rounds_left,
        dumps(row.attempts, "attempts"),
        dumps(row.repairs, "repairs"),
        dumps(row.subgraph, "subgraph"),
        row.context,
        row.updated_at,
        row.expires_at,
        row.step_key,
        None if row.outcome is None else dumps(row.outcome, "outcome"),
    )


def _row(r: Sequence[Any]) -> SessionRow:
    return SessionRow(
        id=r[0],
        scope=Scope(r[1], r[2], r[3]),
        episode_id=r[4],
        task=r[5],
        phase=r[6],
        attempt=int(r[7]),
        rounds_left=int(r[8]),
        attempts=list(json_value(r[9])),
        repairs=list(json_value(r[10])),
        subgraph=dict(json_value(r[11])),
        context=r[12],
        created_at=float(r[13]),
        updated_at=float(r[14]),
        expires_at=float(r[15]),
        claimed_until=float(r[16]),
        step_key=str(r[17]),
        outcome=None if r[18] is None else dict(json_value(r[18])),
    )


def _count(cursor: Any) -> int:
    return max(int(cursor.rowcount), 0)
