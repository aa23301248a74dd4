"""The update queue, the usage ledger, counts and checks, written once for SQL backends."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from lightmem.ledger import UsageRecord
from lightmem.store.db import Database, Session
from lightmem.store.provisional import PREFIX
from lightmem.store.size_limit import SizeLimit
from lightmem.store.sql import IN_CHUNK, counts_dict, dumps, json_value, placeholders, scope_sql
from lightmem.store.values import PendingEntry, ScoredId
from lightmem.types import Scope

__all__ = ["SQLBookkeeping"]

_USAGE_FIELDS = ("calls", "items", "prompt_tokens", "completion_tokens", "latency_s", "errors")


class _Checks(Protocol):
    def integrity(self, s: Session) -> list[str]: ...


class SQLBookkeeping:
    """The bookkeeping half of :class:`~lightmem.store.entries.SQLStore`."""

    def __init__(self, db: Database, index: _Checks, limit: SizeLimit) -> None:
        self.db = db
        self._checks = index
        self.limit = limit
        self._usage_lock = threading.Lock()
        self._unsaved: dict[tuple[str, str], UsageRecord] = {}

    # -- bookkeeping ------------------------------------------------------------------------
    def save_update_queue(self, queue: dict[str, list[ScoredId]]) -> None:
        now = time.time()
        with self.db.transaction() as s:
            s.many(
                "INSERT INTO update_queue VALUES (?, ?, ?) ON CONFLICT (entry_id) DO UPDATE "
                "SET candidates = excluded.candidates, built_at = excluded.built_at",
                [(eid, dumps(cands, "queue"), now) for eid, cands in queue.items()],
            )

    def load_update_queue(self, scope: Scope) -> dict[str, list[ScoredId]]:
        where, params = scope_sql(self.db.dialect, scope, "e.")
        with self.db.read() as s:
            rows = s.all(
                "SELECT q.entry_id, q.candidates FROM update_queue q JOIN entries e "
                f"ON e.id = q.entry_id WHERE {where} ORDER BY e.rid",
                params,
            )
        return {r[0]: [(c[0], float(c[1])) for c in json_value(r[1])] for r in rows}

    def check_room(self) -> None:
        """Raise :class:`StoreFullError` when the store holds its size limit."""
        self.limit.check()

    @property
    def max_bytes(self) -> int | None:
        return self.limit.max_bytes

    def size_bytes(self) -> int:
        return self.db.size_bytes()

    def save_update_checks(self, stage: str, digests: Mapping[str, str]) -> None:
        """Record what the offline update asked of these entries at ``stage``, by entry id
        (a read-only store keeps none: its next pass asks again). Whether an entry is up
        to date is :meth:`mark_update_checked`'s: a row it has not marked is pending."""
        self._write_checks(
            stage,
            "ON CONFLICT (entry_id, stage) DO UPDATE SET digest = excluded.digest",
            [(eid, d, 0.0, "", None) for eid, d in digests.items()],
        )

    def mark_update_checked(
        self, stage: str, key: str, min_scores: Mapping[str, float | None], checked_at: float
    ) -> None:
        """Note that these entries were brought up to date at ``stage`` from a view taken
        at ``checked_at`` (a digest recorded for them stays; one with none gets an empty
        one, which no item matches; a flag set after that view stays in force)."""
        self._write_checks(
            stage,
            "ON CONFLICT (entry_id, stage) DO UPDATE SET checked_at = excluded.checked_at, "
            "updater_key = excluded.updater_key, min_score = excluded.min_score",
            [(eid, "", checked_at, key, score) for eid, score in min_scores.items()],
        )

    def _write_checks(
        self,
        stage: str,
        on_conflict: str,
        rows: Sequence[tuple[str, str, float, str, float | None]],
    ) -> None:
        if not rows or self.db.read_only:
            return
        with self.db.transaction() as s:
            s.many(
                "INSERT INTO update_checks (entry_id, stage, digest, checked_at, updater_key, "
                f"min_score, moved_at) VALUES (?, ?, ?, ?, ?, ?, 0) {on_conflict}",
                [(eid, stage, *rest) for eid, *rest in rows],
            )

    def forget_update_checks(self, scope: Scope) -> None:
        if self.db.read_only:
            return
        where, params = scope_sql(self.db.dialect, scope, "e.")
        with self.db.transaction() as s:
            s.execute(
                "DELETE FROM update_checks WHERE entry_id IN "
                f"(SELECT e.id FROM entries e WHERE {where})",
                params,
            )

    def flag_update_checks(self, stage: str, ids: Sequence[str], moved_at: float) -> None:
        if not ids or self.db.read_only:
            return
        with self.db.transaction() as s:
            for start in range(0, len(ids), IN_CHUNK):
                chunk = ids[start : start + IN_CHUNK]
                s.execute(
                    "UPDATE update_checks SET moved_at = ? WHERE stage = ? AND moved_at < ? "
                    f"AND entry_id IN ({placeholders(chunk)})",
                    (moved_at, stage, moved_at, *chunk),
                )

    def unchecked_entries(
        self, scope: Scope, stage: str, key: str, after: int, limit: int
    ) -> list[PendingEntry]:
        where, params = scope_sql(self.db.dialect, scope, "e.")
        with self.db.read() as s:
            rows = s.all(
                "SELECT e.rid, e.id, c.entry_id IS NULL OR e.updated_at > c.checked_at, "
                "e.updated_at FROM entries e LEFT JOIN update_checks c "
                "ON c.entry_id = e.id AND c.stage = ? "
                f"WHERE {where} AND e.kind = 'entry' AND e.id NOT LIKE ? AND e.rid > ? "
                "AND (c.entry_id IS NULL OR e.updated_at > c.checked_at "
                "OR c.updater_key <> ? OR c.moved_at > c.checked_at) "
                "ORDER BY e.rid LIMIT ?",
                (stage, *params, PREFIX + "%", after, key, limit),
            )
        return [PendingEntry(int(r[0]), str(r[1]), bool(r[2]), float(r[3])) for r in rows]

    def load_update_reach(self, scope: Scope, stage: str, key: str) -> dict[str, float | None]:
        where, params = scope_sql(self.db.dialect, scope, "e.")
        with self.db.read() as s:
            rows = s.all(
                "SELECT e.id, c.min_score FROM entries e JOIN update_checks c "
                "ON c.entry_id = e.id AND c.stage = ? "
                f"WHERE {where} AND e.kind = 'entry' AND e.updated_at <= c.checked_at "
                "AND c.updater_key = ? AND c.moved_at <= c.checked_at",
                (stage, *params, key),
            )
        return {str(r[0]): None if r[1] is None else float(r[1]) for r in rows}

    def load_update_checks(self, stage: str, ids: Sequence[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        with self.db.read() as s:
            for start in range(0, len(ids), IN_CHUNK):
                chunk = ids[start : start + IN_CHUNK]
                rows = s.all(
                    "SELECT entry_id, digest FROM update_checks WHERE stage = ? "
                    f"AND entry_id IN ({placeholders(chunk)})",
                    (stage, *chunk),
                )
                out.update((str(r[0]), str(r[1])) for r in rows)
        return out

    def record_usage(self, records: Sequence[UsageRecord]) -> None:
        """Add to the usage ledger; on a read-only store the records are kept in this
        process's memory (and shown by :meth:`usage`) instead of failing the read."""
        if not records:
            return
        if self.db.read_only:
            with self._usage_lock:
                for r in records:
                    self._unsaved.setdefault((r.kind, r.op), UsageRecord(r.kind, r.op)).add(r)
            return
        updates = ", ".join(f"{f} = usage.{f} + excluded.{f}" for f in _USAGE_FIELDS)
        with self.db.transaction() as s:
            s.many(
                f"INSERT INTO usage VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (kind, op) DO UPDATE "
                f"SET {updates}",
                [(r.kind, r.op, *(getattr(r, f) for f in _USAGE_FIELDS)) for r in records],
            )

    def usage(self) -> list[UsageRecord]:
        with self.db.read() as s:
            rows = s.all("SELECT * FROM usage ORDER BY kind, op")
        out = {
            (r[0], r[1]): UsageRecord(
                r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]), int(r[7])
            )
            for r in rows
        }
        with self._usage_lock:
            for key, rec in self._unsaved.items():
                out.setdefault(key, UsageRecord(*key)).add(rec)
        return [out[k] for k in sorted(out)]

    def counts(self, scope: Scope) -> dict[str, int]:
        where, params = scope_sql(self.db.dialect, scope)
        with self.db.read() as s:
            kinds = dict(
                s.all(f"SELECT kind, count(*) FROM entries WHERE {where} GROUP BY kind", params)
            )
            status = dict(
                s.all(
                    f"SELECT status, count(*) FROM messages WHERE {where} GROUP BY status", params
                )
            )
            hist = s.one(f"SELECT count(*) FROM history WHERE {where}", params)[0]
        return counts_dict(kinds, status, hist)

    def integrity_check(self) -> list[str]:
        """Problems found by the backend's and lightmem's own checks (empty = sound)."""
        with self.db.read() as s:
            problems = self._checks.integrity(s)
            orphan = s.one(
                "SELECT count(*) FROM entries e WHERE NOT EXISTS "
                "(SELECT 1 FROM history h WHERE h.entry_id = e.id) AND e.id NOT LIKE ?",
                (PREFIX + "%",),  # provisional entries have no history
            )[0]
        if orphan:
            problems.append(f"{orphan} entries without history")
        return problems
