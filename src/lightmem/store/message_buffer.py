"""The message buffer, written once for SQL backends: raw turns and their sensory /
short-term buffer state (:class:`~lightmem.store.base.MessageBuffer`)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from lightmem.errors import InvalidInputError
from lightmem.store.db import Claimed, Database, Session
from lightmem.store.sql import (
    IN_CHUNK,
    buffered_from_rows,
    buffered_params,
    buffered_sql,
    dumps,
    json_value,
    message_from_row,
    placeholders,
    readable,
    scope_sql,
)
from lightmem.store.values import BufferedMessage, MessageStatus
from lightmem.types import Message, Scope

__all__ = ["SQLMessageBuffer"]

_MESSAGE_COLS = (
    "msg_id, user_id, agent_id, run_id, role, content, compressed, ts, time_text, "
    "speaker_id, speaker_name, metadata, status, created_at"
)


class SQLMessageBuffer:
    """The message-buffer part of :class:`~lightmem.store.entries.SQLStore`.

    :meth:`lock_messages` and :meth:`mark_extracted` work inside a caller's transaction,
    for the store's commits that write entries and move messages together."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add_messages(self, scope: Scope, items: Sequence[tuple[Message, str]]) -> int:
        """Store new messages; one already stored under the same id in ``scope`` with the
        same role, content, time, speaker and metadata is skipped (a retried add is a
        no-op), with anything different it is an ``InvalidInputError``. Returns how many
        were new."""
        now = time.time()
        ids = [m.id for m, _ in items]
        fresh: list[tuple[int, Message, str]] = []
        with self.db.transaction() as s:
            stored = self._existing_messages(s, scope, ids)
            for i, (m, compressed) in enumerate(items):
                old = stored.get(m.id)
                if old is None:
                    fresh.append((i, m, compressed))
                elif old != _identity(m, f"messages[{i}].metadata"):
                    raise InvalidInputError(
                        f"messages[{i}].id: {m.id!r} already exists in scope {scope.label()} "
                        "with different content"
                    )
            s.many(
                f"INSERT INTO messages ({_MESSAGE_COLS}) VALUES "
                "(?,?,?,?,?,?,?,?,?,?,?,?,'pending',?)",
                [
                    (
                        m.id,
                        scope.user_id,
                        scope.agent_id,
                        scope.run_id,
                        m.role,
                        m.content,
                        compressed,
                        m.timestamp.timestamp() if m.timestamp else None,
                        m.time_text,
                        m.speaker_id,
                        m.speaker_name,
                        dumps(dict(m.metadata), f"messages[{i}].metadata"),
                        now,
                    )
                    for i, m, compressed in fresh
                ],
            )
        return len(fresh)

    def _existing_messages(
        self, s: Session, scope: Scope, ids: Sequence[str]
    ) -> dict[str, tuple[Any, ...]]:
        found: dict[str, tuple[Any, ...]] = {}
        for start in range(0, len(ids), IN_CHUNK):
            chunk = list(ids[start : start + IN_CHUNK])
            for r in s.all(
                "SELECT msg_id, role, content, ts, time_text, speaker_id, speaker_name, "
                f"metadata FROM messages WHERE msg_id IN ({placeholders(chunk)}) AND "
                "user_id = ? AND agent_id = ? AND run_id = ?",
                (*chunk, scope.user_id, scope.agent_id, scope.run_id),
            ):
                meta = json_value(r[7], "messages", r[0], "metadata") if r[7] else {}
                found[r[0]] = (*r[1:7], meta)
        return found

    def buffered(self, scope: Scope, status: MessageStatus) -> list[BufferedMessage]:
        with self.db.read() as s:
            rows = s.all(buffered_sql(self.db.dialect), buffered_params(scope, status))
        return buffered_from_rows(rows, scope)

    def buffered_scopes(self) -> list[Scope]:
        with self.db.read() as s:
            rows = s.all(
                "SELECT DISTINCT user_id, agent_id, run_id FROM messages "
                "WHERE status != 'extracted'"
            )
        return [Scope(*r) for r in rows]

    def mark_segmented(self, assignments: Sequence[tuple[int, str]]) -> bool:
        try:
            with self.db.transaction() as s:
                self.lock_messages(s, [seq for seq, _ in assignments])
                done = s.many(
                    "UPDATE messages SET status = 'segmented', topic_id = ? "
                    "WHERE seq = ? AND status = 'pending'",
                    [(topic, seq) for seq, topic in assignments],
                )
                if done != len(assignments):
                    raise Claimed()
        except Claimed:
            return False
        return True

    def mark_extracted(self, s: Session, seqs: Sequence[int]) -> None:
        """In transaction ``s``: move segmented messages out of the buffer; raises
        :class:`~lightmem.store.db.Claimed` if another writer extracted any first."""
        if not seqs:
            return
        self.lock_messages(s, seqs)
        done = s.many(
            "UPDATE messages SET status = 'extracted' WHERE seq = ? AND status = 'segmented'",
            [(seq,) for seq in sorted(set(seqs))],
        )
        if done != len(set(seqs)):
            raise Claimed()

    def lock_messages(self, s: Session, seqs: Sequence[int]) -> None:
        """In transaction ``s``: lock the messages' rows, in one global order, so racing
        writers wait, not deadlock (no-op on a backend without row locks)."""
        if self.db.row_lock:
            ordered = sorted(seqs)
            for start in range(0, len(ordered), IN_CHUNK):
                chunk = ordered[start : start + IN_CHUNK]
                s.all(
                    f"SELECT seq FROM messages WHERE seq IN ({placeholders(chunk)}) ORDER BY seq"
                    + self.db.row_lock,
                    chunk,
                )

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[Message]:
        if not ids:
            return []
        where, params = scope_sql(self.db.dialect, scope)
        rows: list[Any] = []
        with self.db.read() as s:
            for start in range(0, len(ids), IN_CHUNK):
                chunk = list(ids[start : start + IN_CHUNK])
                rows += s.all(
                    "SELECT seq, msg_id, role, content, compressed, ts, time_text, speaker_id, "
                    f"speaker_name, metadata FROM messages WHERE msg_id IN ({placeholders(chunk)}) "
                    f"AND {where}",
                    (*chunk, *params),
                )
        return readable(sorted(rows, key=lambda r: int(r[0])), lambda r: message_from_row(r[1:]))


def _identity(m: Message, where: str) -> tuple[Any, ...]:
    """What must match for a re-added message to count as the same one (as stored)."""
    ts = m.timestamp.timestamp() if m.timestamp else None
    meta = json.loads(dumps(dict(m.metadata), where))
    return (m.role, m.content, ts, m.time_text, m.speaker_id, m.speaker_name, meta)
