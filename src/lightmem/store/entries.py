"""The memory logic, written once for every SQL backend: entries, history and restore,
and the commits that move buffered messages into entries; the message buffer
(:mod:`lightmem.store.message_buffer`) and the bookkeeping (:mod:`lightmem.store.bookkeeping`)
are its base classes.

A backend supplies a :class:`~lightmem.store.db.Database` (connection, transactions,
dialect, error translation) and an :class:`EntryIndex` (how vectors and full text are kept,
searched and bulk-loaded); :class:`SQLStore` composes them into a
:class:`~lightmem.store.base.MemoryStore`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Protocol

from lightmem.embed.identity import how_to_open
from lightmem.errors import InvalidInputError, NotFoundError, StoreError
from lightmem.store import provisional, scopes
from lightmem.store.bookkeeping import SQLBookkeeping
from lightmem.store.db import Claimed, Database, Session
from lightmem.store.graph_sql import SQLGraphStore
from lightmem.store.message_buffer import SQLMessageBuffer
from lightmem.store.provenance import entries_citing
from lightmem.store.purge import PurgeReport, purge
from lightmem.store.reembed import (
    EntryVectors,
    ReembedReport,
    TextEmbedder,
    recorded_embedder,
    reembed,
)
from lightmem.store.size_limit import SizeLimit
from lightmem.store.sql import (
    ENTRY_COLS,
    IN_CHUNK,
    check_vector,
    dumps,
    entry_from_row,
    entry_params,
    filter_sql,
    history_from_row,
    placeholders,
    readable,
    scope_sql,
    ts,
)
from lightmem.store.values import ScoredId, Vector
from lightmem.types import Filters, HistoryEvent, MemoryEntry, Scope

__all__ = ["BulkLoad", "EntryIndex", "History", "SQLStore", "WriteEntry"]

#: Stores one entry (row, vector, full text) with its ``add`` event (reason) in a transaction.
WriteEntry = Callable[[Session, MemoryEntry, Vector, str], None]
#: The values of an entry's ``add`` history event: (entry, reason, JSON encoder).
History = Callable[[MemoryEntry, str, Callable[[Any], Any]], tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class BulkLoad:
    """One bulk load, as the store hands it to its search piece."""

    session: Session
    rows: Iterable[tuple[MemoryEntry, Vector]]
    reason: str
    add: WriteEntry  # the per-row path: row, vector, text and event
    event: History  # the values of a row's event, for backends that stream them


_HISTORY_COLS = "entry_id, user_id, agent_id, run_id, op, version, before, after, at, reason"


class EntryIndex(EntryVectors, Protocol):
    """The backend's search piece: vectors and full text of entries."""

    #: Entry columns the piece fills besides :data:`~lightmem.store.sql.ENTRY_COLS`.
    extra_columns: tuple[str, ...]
    #: The bound embedder's dimension (set by the store).
    dim: int | None

    def extra_values(self, e: MemoryEntry, vec: Vector) -> tuple[Any, ...]: ...
    def on_first_bind(self, s: Session, dim: int) -> None:
        """The embedder was just bound (in transaction ``s``): create columns, indexes."""

    def after_insert(self, s: Session, rid: int, e: MemoryEntry, vec: Vector) -> None: ...
    def before_delete(self, s: Session, rid: int) -> None: ...

    #: the tables of rows derived from entries (a search index) a purge compacts with them
    derived_tables: tuple[str, ...]

    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]: ...
    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]: ...
    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]: ...
    def bulk_load(self, load: BulkLoad) -> int:
        """Store ``load.rows`` with an ``add`` event each; returns how many."""

    def integrity(self, s: Session) -> list[str]: ...


class SQLStore(SQLMessageBuffer, SQLBookkeeping):
    """A :class:`~lightmem.store.base.MemoryStore` over a database and a search piece."""

    parallel_reads = False  # the embedded store: in-process searches under one lock

    def __init__(
        self,
        db: Database,
        index: EntryIndex,
        graph: SQLGraphStore,
        limit: SizeLimit | None = None,
    ) -> None:
        # Each base takes its own arguments, so they are initialised one by one.
        SQLMessageBuffer.__init__(self, db)
        SQLBookkeeping.__init__(self, db, index, limit or SizeLimit(db))
        self.index = index
        self.path = db.path
        self.dim: int | None = None
        self._graph = graph

    # -- lifecycle ----------------------------------------------------------------------
    def graph(self) -> SQLGraphStore:
        """The FluxMem graph kept in this store."""
        return self._graph

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SQLStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def bind_embedder(self, name: str, dim: int) -> None:
        with self.db.read() as s:
            bound = recorded_embedder(s)
        if bound is None and not self.db.read_only:
            with self.db.transaction() as s:
                bound = recorded_embedder(s, self.db.row_lock)
                if bound is None:
                    s.execute(
                        "INSERT INTO meta VALUES ('embedder', ?) ON CONFLICT DO NOTHING",
                        (json.dumps({"name": name, "dim": dim}),),
                    )
                    self.index.on_first_bind(s, dim)
        if bound is not None and bound != (name, dim):
            raise StoreError(
                f"text_embedder: store {self.path!r} was built with {bound[0]} "
                f"({bound[1]}-d) and cannot be searched with {name} ({dim}-d); to open it, "
                f"{how_to_open(bound[0])}; to move it to {name}, re-embed it "
                "(lightmem re-embed)"
            )
        self.dim = self.index.dim = dim

    def embedder_identity(self) -> tuple[str, int] | None:
        """The (name, dimensions) of the embedder that built this store's vectors (None
        before the first open binds one)."""
        with self.db.read() as s:
            return recorded_embedder(s)

    def reembed(self, embedder: TextEmbedder, *, batch: int = 256) -> ReembedReport:
        """Recompute every stored vector with ``embedder`` and switch the store to it in
        one transaction (resumable; see :mod:`lightmem.store.reembed`). Afterwards the
        store opens with ``embedder`` only."""
        report = reembed(self.db, self.index, self._graph.index, embedder, batch=batch)
        self.dim = self.index.dim = embedder.dim
        return report

    # -- entries ----------------------------------------------------------------------------
    def commit_extraction(
        self,
        entries: Sequence[tuple[MemoryEntry, Vector]],
        message_seqs: Sequence[int],
        replaces: Sequence[str] = (),
    ) -> bool:
        try:
            with self.db.transaction() as s:
                self.mark_extracted(s, message_seqs)
                for eid in provisional.stored_ids(s, replaces):
                    self._remove(s, eid)
                written = [self._write(s, entry, vec) for entry, vec in entries]
                s.many(
                    f"INSERT INTO history ({_HISTORY_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    [self._event(e, "add", None, e, "extracted") for e in written],
                )
        except Claimed:
            return False
        return True

    def commit_provisional(
        self, entries: Sequence[tuple[MemoryEntry, Vector]], message_seqs: Sequence[int]
    ) -> tuple[str, ...]:
        """Store the provisional entries (no history) of messages still buffered."""
        with self.db.transaction() as s:
            self.lock_messages(s, message_seqs)
            rows = provisional.writable(s, entries, message_seqs)
            for entry, vec in rows:
                self._write(s, entry, vec)
        return tuple(e.id for e, _ in rows)

    def user_ids(self, limit: int) -> list[str]:
        """Up to ``limit`` distinct user ids holding entries ('' for none), in order."""
        with self.db.read() as s:
            return scopes.distinct_users(s, limit)

    def import_entries(
        self, rows: Iterable[tuple[MemoryEntry, Vector]], reason: str = "imported"
    ) -> int:
        """Bulk-load entries (with an ``add`` history event each) in one transaction."""
        with self.db.transaction() as s:
            return self.index.bulk_load(
                BulkLoad(
                    s,
                    rows,
                    reason,
                    self._add,
                    lambda e, why, as_json: self._event(e, "add", None, e, why, as_json),
                )
            )

    def _write(self, s: Session, e: MemoryEntry, vec: Vector) -> MemoryEntry:
        """Insert ``e`` and return it as stored: with its creation and update times (the
        history snapshot and a caller's copy must say what the row says)."""
        check_vector(vec, self.dim)
        now = datetime.now(UTC)
        if e.created_at is None or e.updated_at is None:
            e = replace(e, created_at=e.created_at or now, updated_at=e.updated_at or now)
        cols = ", ".join(("speaker_key", *self.index.extra_columns))
        values = (*entry_params(e), e.speaker.lower(), *self.index.extra_values(e, vec))
        marks = placeholders(values)
        row = s.one(
            f"INSERT INTO entries ({ENTRY_COLS}, {cols}) VALUES ({marks}) RETURNING rid", values
        )
        self.index.after_insert(s, int(row[0]), e, vec)
        return e

    def _add(self, s: Session, e: MemoryEntry, vec: Vector, reason: str) -> None:
        e = self._write(s, e, vec)
        self._log(s, e, "add", None, e, reason)

    def _remove(self, s: Session, entry_id: str) -> None:
        rid = int(s.one("SELECT rid FROM entries WHERE id = ?", (entry_id,))[0])
        self.index.before_delete(s, rid)
        s.execute("DELETE FROM entries WHERE rid = ?", (rid,))

    def _event(
        self,
        e: MemoryEntry,
        op: str,
        before: MemoryEntry | None,
        after: MemoryEntry | None,
        reason: str,
        as_json: Callable[[Any], Any] = dumps,
    ) -> tuple[Any, ...]:
        return (
            e.id,
            e.scope.user_id,
            e.scope.agent_id,
            e.scope.run_id,
            op,
            e.version,
            as_json(before.to_dict()) if before else None,
            as_json(after.to_dict()) if after else None,
            time.time(),
            reason,
        )

    def _log(self, s: Session, *event: Any) -> None:
        s.execute(
            f"INSERT INTO history ({_HISTORY_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
            self._event(*event),
        )

    def get_entry(self, entry_id: str, scope: Scope) -> MemoryEntry | None:
        with self.db.read() as s:
            return self._fetch(s, entry_id, scope)

    def _fetch(
        self, s: Session, entry_id: str, scope: Scope, *, lock: bool = False
    ) -> MemoryEntry | None:
        where, params = scope_sql(self.db.dialect, scope)
        row = s.one(
            f"SELECT {ENTRY_COLS} FROM entries WHERE id = ? AND {where}"
            + (self.db.row_lock if lock else ""),
            (entry_id, *params),
        )
        return entry_from_row(row) if row else None

    def _require(self, s: Session, entry_id: str, scope: Scope) -> MemoryEntry:
        found = self._fetch(s, entry_id, scope, lock=True)
        if found is None:
            raise NotFoundError(f"id: no memory entry {entry_id!r} in this scope")
        return found

    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]:
        out: dict[str, MemoryEntry] = {}
        with self.db.read() as s:
            for start in range(0, len(entry_ids), IN_CHUNK):
                chunk = list(entry_ids[start : start + IN_CHUNK])
                rows = s.all(
                    f"SELECT {ENTRY_COLS} FROM entries WHERE id IN ({placeholders(chunk)})", chunk
                )
                out.update((e.id, e) for e in readable(rows, entry_from_row))
        return out

    def list_entries(
        self, scope: Scope, filters: Filters, limit: int, offset: int
    ) -> list[MemoryEntry]:
        where, params = filter_sql(self.db.dialect, scope, filters)
        with self.db.read() as s:
            rows = s.all(
                f"SELECT {ENTRY_COLS} FROM entries WHERE {where} "
                "ORDER BY coalesce(ts, created_at), rid LIMIT ? OFFSET ?",
                (*params, limit, offset),
            )
        return readable(rows, entry_from_row)

    def iter_entries(self, scope: Scope, filters: Filters, page: int) -> Iterator[MemoryEntry]:
        if isinstance(page, bool) or not isinstance(page, int) or page < 1:
            raise InvalidInputError(f"page: expected a positive integer, got {page!r}")
        where, params = filter_sql(self.db.dialect, scope, filters)
        order = "coalesce(ts, created_at)"
        after: list[Any] = []  # the last row's (time, rid): the next page starts behind it
        while True:
            later = f" AND ({order} > ? OR ({order} = ? AND rid > ?))" if after else ""
            with self.db.read() as s:  # each page its own read: no snapshot held while yielding
                rows = s.all(
                    f"SELECT {ENTRY_COLS}, {order}, rid FROM entries WHERE {where}{later} "
                    f"ORDER BY {order}, rid LIMIT ?",
                    (*params, *after, page),
                )
            yield from readable(rows, lambda r: entry_from_row(r[:-2]))
            if len(rows) < page:
                return
            at, rid = rows[-1][-2:]
            after = [at, at, rid]

    def update_entry(self, entry: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry:
        with self.db.transaction() as s:
            old = self._require(s, entry.id, entry.scope)
            new = _touched(entry, version=old.version + 1, created_at=old.created_at)
            self._remove(s, entry.id)
            self._write(s, new, vector)
            self._log(s, new, "update", old, new, reason)
        return new

    def entries_citing(self, scope: Scope, message_ids: Sequence[str]) -> list[str]:
        return entries_citing(self.db, scope, message_ids)

    def purge(self, scope: Scope, entry_id: str | None = None) -> PurgeReport:
        """Erase ``entry_id`` (or, without one, everything in ``scope``) for good."""
        reclaim = self.limit.near()  # before: the measure may only drop after the rewrite
        return purge(self.db, self.index, self._graph.index, scope, entry_id, reclaim=reclaim)

    def delete_entry(self, entry_id: str, scope: Scope, reason: str) -> MemoryEntry:
        """Delete an entry; the entries it superseded become current again (logged)."""
        with self.db.transaction() as s:
            old = self._require(s, entry_id, scope)
            self._remove(s, entry_id)
            self._log(s, old, "delete", old, None, reason)
            for r in s.all("SELECT id FROM entries WHERE superseded_by = ?", (entry_id,)):
                self._validity(s, r[0], Scope(), "", None, f"superseding {entry_id} deleted")
        return old

    def set_validity(
        self, entry_id: str, scope: Scope, by: str, valid_to: datetime | None, reason: str
    ) -> MemoryEntry:
        """Mark an entry superseded by entry ``by`` from ``valid_to`` ("" and None: current
        again), in place (text, vector and index unchanged) with a history event."""
        with self.db.transaction() as s:
            return self._validity(s, entry_id, scope, by, valid_to, reason)

    def _validity(
        self, s: Session, eid: str, scope: Scope, by: str, until: datetime | None, why: str
    ) -> MemoryEntry:
        old = self._require(s, eid, scope)
        now = datetime.now(UTC)
        new = replace(old, version=old.version + 1, updated_at=now, superseded_by=by)
        new = replace(new, valid_to=until)
        s.execute(
            "UPDATE entries SET superseded_by = ?, valid_to = ?, version = ?, updated_at = ? "
            "WHERE id = ?",
            (by or None, until.timestamp() if until else None, new.version, now.timestamp(), eid),
        )
        self._log(s, new, "update", old, new, why)
        return new

    def restore_entry(self, snapshot: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry:
        with self.db.transaction() as s:
            current = self._fetch(s, snapshot.id, Scope(), lock=True)
            if current is not None and current.scope != snapshot.scope:
                raise NotFoundError(f"id: no memory entry {snapshot.id!r} in this scope")
            top = s.one(
                "SELECT max(version), min(at) FROM history WHERE entry_id = ?", (snapshot.id,)
            )
            # A restored memory keeps the time it was first created (snapshots written
            # before creation times were stamped on them have none: the first event's).
            born = snapshot.created_at or (current.created_at if current else None) or ts(top[1])
            new = _touched(snapshot, version=int(top[0] or 0) + 1, created_at=born)
            if current is not None:
                self._remove(s, snapshot.id)
            new = self._write(s, new, vector)
            self._log(s, new, "restore", current, new, reason)
        return new

    def history(self, entry_id: str, scope: Scope) -> list[HistoryEvent]:
        where, params = scope_sql(self.db.dialect, scope)
        with self.db.read() as s:
            rows = s.all(
                "SELECT seq, entry_id, op, version, at, reason, before, after FROM history "
                f"WHERE entry_id = ? AND {where} ORDER BY seq",
                (entry_id, *params),
            )
        return readable(rows, history_from_row)

    # -- search (the backend's piece) -----------------------------------------------------
    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        return self.index.vector_search(query, scope, filters, k)

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        return self.index.text_search(terms, scope, filters, k)

    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        return self.index.vectors(scope, filters)


def _touched(e: MemoryEntry, **changes: Any) -> MemoryEntry:
    return replace(e, updated_at=datetime.now(UTC), **changes)
