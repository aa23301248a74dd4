"""The embedded store: one SQLite file (WAL) holding everything lightmem knows."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lightmem.errors import InvalidInputError, NotFoundError, StoreError
from lightmem.ledger import UsageRecord
from lightmem.store.base import BufferedMessage, MessageStatus, ScoredId, Vector
from lightmem.store.sql import (
    ENTRY_COLS,
    SQLITE,
    buffered_from_rows,
    buffered_params,
    buffered_sql,
    counts_dict,
    entry_from_row,
    entry_params,
    filter_sql,
    history_from_row,
    message_from_row,
    scope_sql,
)
from lightmem.store.text_index import BM25Index, Stemmer
from lightmem.store.vector_cache import VectorRows
from lightmem.types import (
    Filters,
    HistoryEvent,
    MemoryEntry,
    Message,
    Scope,
    entry_search_text,
)

if TYPE_CHECKING:
    from lightmem.store.sqlite_graph import SQLiteGraphStore

SCHEMA_VERSION = 1
APP_ID = 0x4C4D454D  # "LMEM", written to PRAGMA application_id

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY,
    msg_id TEXT NOT NULL,
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    role TEXT NOT NULL, content TEXT NOT NULL, compressed TEXT NOT NULL,
    ts REAL, time_text TEXT NOT NULL,
    speaker_id TEXT NOT NULL, speaker_name TEXT NOT NULL,
    metadata TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'segmented', 'extracted')),
    topic_id TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    UNIQUE (user_id, agent_id, run_id, msg_id)
);
CREATE INDEX IF NOT EXISTS messages_status ON messages (status, user_id, agent_id, run_id);
CREATE TABLE IF NOT EXISTS entries (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('entry', 'summary', 'event')),
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    text TEXT NOT NULL, original_text TEXT NOT NULL,
    ts REAL,
    speaker_id TEXT NOT NULL, speaker_name TEXT NOT NULL, speaker_key TEXT NOT NULL,
    topic_id TEXT NOT NULL,
    source_ids TEXT NOT NULL,
    context TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL,
    metadata TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_scope ON entries (user_id, agent_id, run_id);
CREATE INDEX IF NOT EXISTS entries_topic ON entries (topic_id);
CREATE TABLE IF NOT EXISTS vectors (
    rid INTEGER PRIMARY KEY REFERENCES entries (rid) ON DELETE CASCADE,
    vec BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id TEXT NOT NULL,
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('add', 'update', 'delete', 'restore')),
    version INTEGER NOT NULL,
    before TEXT, after TEXT,
    at REAL NOT NULL, reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS history_entry ON history (entry_id, seq);
CREATE TABLE IF NOT EXISTS update_queue (
    entry_id TEXT PRIMARY KEY, candidates TEXT NOT NULL, built_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS graph_nodes (
    rid INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('semantic', 'episodic', 'procedural')),
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    text TEXT NOT NULL,
    data TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL, updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS graph_nodes_kind ON graph_nodes (kind, user_id, agent_id, run_id);
CREATE TABLE IF NOT EXISTS graph_vectors (
    rid INTEGER PRIMARY KEY REFERENCES graph_nodes (rid) ON DELETE CASCADE,
    vec BLOB NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS graph_fts USING fts5 (body, tokenize = 'porter unicode61');
CREATE TABLE IF NOT EXISTS graph_edges (
    kind TEXT NOT NULL CHECK (kind IN ('ground', 'distill', 'step')),
    src TEXT NOT NULL, dst TEXT NOT NULL,
    weight REAL NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (kind, src, dst)
);
CREATE INDEX IF NOT EXISTS graph_edges_dst ON graph_edges (dst, kind);
CREATE TABLE IF NOT EXISTS graph_history (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL,
    target TEXT NOT NULL CHECK (target IN ('node', 'edge')),
    target_id TEXT NOT NULL,
    before TEXT, after TEXT,
    at REAL NOT NULL, reason TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
    kind TEXT NOT NULL, op TEXT NOT NULL,
    calls INTEGER NOT NULL, items INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL,
    latency_s REAL NOT NULL, errors INTEGER NOT NULL,
    PRIMARY KEY (kind, op)
);
"""


class SQLiteStore:
    """A :class:`~lightmem.store.base.MemoryStore` in one SQLite file.

    Opening an existing store never deletes or rewrites anything; a file that is not a
    lightmem store, or was written by a newer schema, is refused with :class:`StoreError`.
    One connection per instance, serialised by a lock, so an instance may be shared by threads;
    several processes may open the same file (WAL mode, busy timeout).
    """

    def __init__(self, path: str | Path = ":memory:", *, busy_timeout_s: float = 30.0) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._cache: VectorRows | None = None
        self._cache_version: int | None = None
        self._cache_rewrites = 0
        self._cache_max_rid = 0
        self._stale = False
        self._dim: int | None = None
        self._stemmer = Stemmer()
        self._conn = self._connect(busy_timeout_s)

    # -- opening ----------------------------------------------------------------------
    def _connect(self, busy_timeout_s: float) -> sqlite3.Connection:
        if self.path != ":memory:":
            p = Path(self.path)
            if p.exists() and not p.is_file():
                raise StoreError(f"store.path: {self.path!r} is not a file")
            if not p.parent.exists():
                raise StoreError(f"store.path: folder {str(p.parent)!r} does not exist")
        try:
            conn = sqlite3.connect(
                self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA foreign_keys = ON")
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"store.path: {self.path!r} is not a readable SQLite file ({exc})"
            ) from exc
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        if tables and (app_id != APP_ID or "meta" not in tables):
            conn.close()
            raise StoreError(
                f"store.path: {self.path!r} is a SQLite database of another application; "
                "lightmem will not touch it"
            )
        try:
            if self.path != ":memory:":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            if not tables:
                with self._tx(conn):
                    conn.execute(f"PRAGMA application_id = {APP_ID}")
                    for stmt in _SCHEMA.split(";\n"):
                        if stmt.strip():
                            conn.execute(stmt)
                    conn.execute(
                        "INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
                    )
            version = int(
                conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
            )
        except sqlite3.Error as exc:
            conn.close()
            raise StoreError(f"store.path: cannot initialise {self.path!r}: {exc}") from exc
        if version > SCHEMA_VERSION:
            conn.close()
            raise StoreError(
                f"store.path: {self.path!r} has schema version {version}; this lightmem reads "
                f"up to {SCHEMA_VERSION}: upgrade lightmem"
            )
        return conn

    @contextmanager
    def _tx(self, conn: sqlite3.Connection | None = None) -> Iterator[sqlite3.Connection]:
        c = conn if conn is not None else self._conn
        with self._lock:
            try:
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot start a transaction on {self.path!r}: {exc}") from exc
            try:
                yield c
            except BaseException:
                c.execute("ROLLBACK")
                raise
            try:
                c.execute("COMMIT")
            except sqlite3.Error as exc:
                c.execute("ROLLBACK")
                raise StoreError(f"commit failed on {self.path!r}: {exc}") from exc
            # PRAGMA data_version does not change for this connection's own commits.
            self._stale = True

    def graph(self) -> SQLiteGraphStore:
        """The FluxMem graph kept in this store."""
        from lightmem.store.sqlite_graph import SQLiteGraphStore

        return SQLiteGraphStore(self)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def bind_embedder(self, name: str, dim: int) -> None:
        with self._tx() as c:
            row = c.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
            if row is None:
                c.execute(
                    "INSERT INTO meta VALUES ('embedder', ?)",
                    (json.dumps({"name": name, "dim": dim}),),
                )
            else:
                bound = json.loads(row[0])
                if bound["name"] != name or bound["dim"] != dim:
                    raise StoreError(
                        f"text_embedder: store {self.path!r} was built with {bound['name']} "
                        f"({bound['dim']}-d) and cannot be searched with {name} ({dim}-d); "
                        "use the same embedder or a new store"
                    )
        self._dim = dim

    # -- message buffer ---------------------------------------------------------------
    def add_messages(self, scope: Scope, items: Sequence[tuple[Message, str]]) -> None:
        now = time.time()
        rows = [
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
                json.dumps(dict(m.metadata)),
                now,
            )
            for m, compressed in items
        ]
        with self._tx() as c:
            for i, row in enumerate(rows):
                try:
                    c.execute(
                        "INSERT INTO messages (msg_id, user_id, agent_id, run_id, role, content, "
                        "compressed, ts, time_text, speaker_id, speaker_name, metadata, status, "
                        "created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,'pending',?)",
                        row,
                    )
                except sqlite3.IntegrityError as exc:
                    raise InvalidInputError(
                        f"messages[{i}].id: {row[0]!r} already exists in scope {scope.label()}"
                    ) from exc

    def buffered(self, scope: Scope, status: MessageStatus) -> list[BufferedMessage]:
        with self._lock:
            rows = self._conn.execute(
                buffered_sql(SQLITE), buffered_params(scope, status)
            ).fetchall()
        return buffered_from_rows(rows, scope)

    def buffered_scopes(self) -> list[Scope]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT DISTINCT user_id, agent_id, run_id FROM messages "
                "WHERE status != 'extracted'"
            ).fetchall()
        return [Scope(*r) for r in rows]

    def mark_segmented(self, assignments: Sequence[tuple[int, str]]) -> bool:
        try:
            with self._tx() as c:
                cur = c.executemany(
                    "UPDATE messages SET status = 'segmented', topic_id = ? "
                    "WHERE seq = ? AND status = 'pending'",
                    [(topic, seq) for seq, topic in assignments],
                )
                if cur.rowcount != len(assignments):
                    raise _Claimed()
        except _Claimed:
            return False
        return True

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[Message]:
        if not ids:
            return []
        where, params = _scope_sql(scope, "")
        marks = ",".join("?" * len(ids))
        with self._lock:
            rows = self._conn.execute(
                "SELECT msg_id, role, content, compressed, ts, time_text, speaker_id, "
                f"speaker_name, metadata FROM messages WHERE msg_id IN ({marks}) AND {where} "
                "ORDER BY seq",
                (*ids, *params),
            ).fetchall()
        return [message_from_row(r) for r in rows]

    # -- entries ----------------------------------------------------------------------
    def commit_extraction(
        self, entries: Sequence[tuple[MemoryEntry, Vector]], message_seqs: Sequence[int]
    ) -> bool:
        try:
            with self._tx() as c:
                cur = c.executemany(
                    "UPDATE messages SET status = 'extracted' "
                    "WHERE seq = ? AND status = 'segmented'",
                    [(s,) for s in message_seqs],
                )
                if cur.rowcount != len(message_seqs):
                    raise _Claimed()
                for entry, vec in entries:
                    self._insert_entry(c, entry, vec)
                    self._log(c, entry, "add", None, entry, "extracted")
        except _Claimed:
            return False
        return True

    def import_entries(
        self, rows: Iterable[tuple[MemoryEntry, Vector]], reason: str = "imported"
    ) -> int:
        """Bulk-load entries (with an ``add`` history event each) in one transaction."""
        n = 0
        with self._tx() as c:
            for entry, vec in rows:
                self._insert_entry(c, entry, vec)
                self._log(c, entry, "add", None, entry, reason)
                n += 1
        return n

    def _insert_entry(self, c: sqlite3.Connection, e: MemoryEntry, vec: Vector) -> None:
        self._check_vec(vec)
        cur = c.execute(
            f"INSERT INTO entries ({ENTRY_COLS}, speaker_key) VALUES "
            "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (*entry_params(e), e.speaker.lower()),
        )
        rid = cur.lastrowid
        c.execute("INSERT INTO vectors (rid, vec) VALUES (?, ?)", (rid, vec.tobytes()))

    def _check_vec(self, vec: Vector) -> None:
        if vec.dtype != np.float32 or vec.ndim != 1 or (self._dim and vec.shape[0] != self._dim):
            raise StoreError(
                f"vector of shape {vec.shape} ({vec.dtype}) does not match the store "
                f"({self._dim}-d float32)"
            )

    def get_entry(self, entry_id: str, scope: Scope) -> MemoryEntry | None:
        where, params = _scope_sql(scope, "")
        with self._lock:
            row = self._conn.execute(
                f"SELECT {ENTRY_COLS} FROM entries WHERE id = ? AND {where}", (entry_id, *params)
            ).fetchone()
        return entry_from_row(row) if row else None

    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]:
        out: dict[str, MemoryEntry] = {}
        with self._lock:
            for start in range(0, len(entry_ids), 500):
                chunk = list(entry_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(
                    f"SELECT {ENTRY_COLS} FROM entries WHERE id IN ({marks})", chunk
                ):
                    e = entry_from_row(row)
                    out[e.id] = e
        return out

    def list_entries(
        self, scope: Scope, filters: Filters, limit: int, offset: int
    ) -> list[MemoryEntry]:
        where, params = _filter_sql(scope, filters, "")
        with self._lock:
            rows = self._conn.execute(
                f"SELECT {ENTRY_COLS} FROM entries WHERE {where} "
                "ORDER BY coalesce(ts, created_at), rid LIMIT ? OFFSET ?",
                (*params, limit, offset),
            ).fetchall()
        return [entry_from_row(r) for r in rows]

    def update_entry(self, entry: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry:
        with self._tx() as c:
            old = self._require(c, entry.id, entry.scope)
            new = _replace(entry, version=old.version + 1, created_at=old.created_at)
            self._delete_row(c, entry.id)
            self._insert_entry(c, new, vector)
            self._log(c, new, "update", old, new, reason)
        return new

    def delete_entry(self, entry_id: str, scope: Scope, reason: str) -> MemoryEntry:
        with self._tx() as c:
            old = self._require(c, entry_id, scope)
            self._delete_row(c, entry_id)
            self._log(c, old, "delete", old, None, reason)
        return old

    def restore_entry(self, snapshot: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry:
        with self._tx() as c:
            current = self._fetch(c, snapshot.id)
            if current is not None and current.scope != snapshot.scope:
                raise NotFoundError(f"id: no memory entry {snapshot.id!r} in this scope")
            new = _replace(snapshot, version=_max_version(c, snapshot.id) + 1)
            if current is not None:
                self._delete_row(c, snapshot.id)
            self._insert_entry(c, new, vector)
            self._log(c, new, "restore", current, new, reason)
        return new

    def history(self, entry_id: str, scope: Scope) -> list[HistoryEvent]:
        where, params = _scope_sql(scope, "")
        with self._lock:
            rows = self._conn.execute(
                "SELECT seq, entry_id, op, version, at, reason, before, after FROM history "
                f"WHERE entry_id = ? AND {where} ORDER BY seq",
                (entry_id, *params),
            ).fetchall()
        return [history_from_row(r) for r in rows]

    def _fetch(self, c: sqlite3.Connection, entry_id: str) -> MemoryEntry | None:
        row = c.execute(f"SELECT {ENTRY_COLS} FROM entries WHERE id = ?", (entry_id,)).fetchone()
        return entry_from_row(row) if row else None

    def _require(self, c: sqlite3.Connection, entry_id: str, scope: Scope) -> MemoryEntry:
        where, params = _scope_sql(scope, "")
        row = c.execute(
            f"SELECT {ENTRY_COLS} FROM entries WHERE id = ? AND {where}", (entry_id, *params)
        ).fetchone()
        if row is None:
            raise NotFoundError(f"id: no memory entry {entry_id!r} in this scope")
        return entry_from_row(row)

    def _delete_row(self, c: sqlite3.Connection, entry_id: str) -> None:
        rid = c.execute("SELECT rid FROM entries WHERE id = ?", (entry_id,)).fetchone()[0]
        c.execute("DELETE FROM vectors WHERE rid = ?", (rid,))
        c.execute("DELETE FROM entries WHERE rid = ?", (rid,))
        # Search caches (this process's and others') rebuild after a rewrite; appends they
        # add incrementally.
        c.execute(
            "INSERT INTO meta VALUES ('rewrites', '1') ON CONFLICT (key) DO UPDATE "
            "SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
        )

    def _log(
        self,
        c: sqlite3.Connection,
        e: MemoryEntry,
        op: str,
        before: MemoryEntry | None,
        after: MemoryEntry | None,
        reason: str,
    ) -> None:
        c.execute(
            "INSERT INTO history (entry_id, user_id, agent_id, run_id, op, version, before, "
            "after, at, reason) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                e.id,
                e.scope.user_id,
                e.scope.agent_id,
                e.scope.run_id,
                op,
                e.version,
                json.dumps(before.to_dict()) if before else None,
                json.dumps(after.to_dict()) if after else None,
                time.time(),
                reason,
            ),
        )

    # -- search -----------------------------------------------------------------------
    def _rows(self) -> VectorRows:
        """The search cache, brought up to date: appended entries are added to it; any
        other change (an update, delete or restore, counted in ``meta.rewrites``) rebuilds
        it, as does a first use."""
        with self._lock:
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            cache = self._cache
            if cache is not None and version == self._cache_version and not self._stale:
                return cache
            # One snapshot for the counter and the rows (unless already inside one).
            own = not self._conn.in_transaction
            if own:
                self._conn.execute("BEGIN")
            try:
                found = self._conn.execute(
                    "SELECT value FROM meta WHERE key = 'rewrites'"
                ).fetchone()
                rewrites = int(found[0]) if found else 0
                if cache is None or rewrites != self._cache_rewrites:
                    cache, self._cache_max_rid = None, 0
                rows = self._conn.execute(_CACHE_ROWS, (self._cache_max_rid,)).fetchall()
            finally:
                if own:
                    self._conn.execute("COMMIT")
            texts = [entry_search_text(r[10], r[11], r[12]) for r in rows]
            if cache is None:
                dim = self._dim or (len(rows[0][8]) // 4 if rows else 0)
                cache = VectorRows.build(rows, dim, BM25Index.build(texts, self._stemmer))
            elif rows:
                cache = cache.extended(rows, cache.text.extended(texts, self._stemmer))
            if rows:
                self._cache_max_rid = int(rows[-1][13])
            self._cache, self._cache_version = cache, version
            self._cache_rewrites, self._stale = rewrites, False
            return cache

    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        return self._rows().search(query, scope, filters, k)

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        if not terms or k <= 0:
            return []
        rows = self._rows()
        hits = rows.text.search(terms, self._stemmer, rows.mask(scope, filters), k)
        return [(str(rows.ids[i]), score) for i, score in hits]

    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        rows = self._rows()
        m = rows.mask(scope, filters)
        groups = rows.groups()
        if m is None:
            return [str(i) for i in rows.ids], rows.matrix, [str(g) for g in groups]
        return [str(i) for i in rows.ids[m]], rows.matrix[m], [str(g) for g in groups[m]]

    # -- bookkeeping --------------------------------------------------------------------
    def save_update_queue(self, queue: dict[str, list[ScoredId]]) -> None:
        now = time.time()
        with self._tx() as c:
            c.executemany(
                "INSERT OR REPLACE INTO update_queue VALUES (?, ?, ?)",
                [(eid, json.dumps(cands), now) for eid, cands in queue.items()],
            )

    def load_update_queue(self, scope: Scope) -> dict[str, list[ScoredId]]:
        where, params = _scope_sql(scope, "e.")
        with self._lock:
            rows = self._conn.execute(
                "SELECT q.entry_id, q.candidates FROM update_queue q JOIN entries e "
                f"ON e.id = q.entry_id WHERE {where} ORDER BY e.rid",
                params,
            ).fetchall()
        return {r[0]: [(c[0], float(c[1])) for c in json.loads(r[1])] for r in rows}

    def record_usage(self, records: Sequence[UsageRecord]) -> None:
        if not records:
            return
        with self._tx() as c:
            c.executemany(
                "INSERT INTO usage VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (kind, op) DO UPDATE SET "
                "calls = calls + excluded.calls, items = items + excluded.items, "
                "prompt_tokens = prompt_tokens + excluded.prompt_tokens, "
                "completion_tokens = completion_tokens + excluded.completion_tokens, "
                "latency_s = latency_s + excluded.latency_s, errors = errors + excluded.errors",
                [
                    (
                        r.kind,
                        r.op,
                        r.calls,
                        r.items,
                        r.prompt_tokens,
                        r.completion_tokens,
                        r.latency_s,
                        r.errors,
                    )
                    for r in records
                ],
            )

    def usage(self) -> list[UsageRecord]:
        with self._lock:
            rows = self._conn.execute("SELECT * FROM usage ORDER BY kind, op").fetchall()
        return [UsageRecord(*r) for r in rows]

    def counts(self, scope: Scope) -> dict[str, int]:
        where, params = _scope_sql(scope, "")
        with self._lock:
            kinds = dict(
                self._conn.execute(
                    f"SELECT kind, count(*) FROM entries WHERE {where} GROUP BY kind", params
                ).fetchall()
            )
            status = dict(
                self._conn.execute(
                    f"SELECT status, count(*) FROM messages WHERE {where} GROUP BY status", params
                ).fetchall()
            )
            hist = self._conn.execute(
                f"SELECT count(*) FROM history WHERE {where}", params
            ).fetchone()[0]
        return counts_dict(kinds, status, hist)

    def integrity_check(self) -> list[str]:
        """Problems found by SQLite's and lightmem's own consistency checks (empty = sound)."""
        problems: list[str] = []
        with self._lock:
            c = self._conn
            res = c.execute("PRAGMA integrity_check").fetchall()
            if res != [("ok",)]:
                problems += [str(r[0]) for r in res]
            n_e = c.execute("SELECT count(*) FROM entries").fetchone()[0]
            n_v = c.execute("SELECT count(*) FROM vectors").fetchone()[0]
            if n_e != n_v:
                problems.append(f"index mismatch: {n_e} entries, {n_v} vectors")
            orphan = c.execute(
                "SELECT count(*) FROM entries e WHERE NOT EXISTS "
                "(SELECT 1 FROM history h WHERE h.entry_id = e.id)"
            ).fetchone()[0]
            if orphan:
                problems.append(f"{orphan} entries without history")
        return problems


_CACHE_ROWS = (
    "SELECT e.id, e.user_id, e.agent_id, e.run_id, e.ts, e.speaker_key, "
    "e.topic_id, e.kind, v.vec, json_extract(e.metadata, '$.event_id'), "
    "CASE WHEN e.speaker_name != '' THEN e.speaker_name ELSE e.speaker_id END, "
    "e.original_text, e.context, e.rid "
    "FROM entries e JOIN vectors v ON v.rid = e.rid WHERE e.rid > ? ORDER BY e.rid"
)


class _Claimed(Exception):
    """Another writer moved these messages on first: roll back, it did the work."""


# -- row mapping helpers ------------------------------------------------------------------
def _scope_sql(scope: Scope, prefix: str) -> tuple[str, list[Any]]:
    return scope_sql(SQLITE, scope, prefix)


def _filter_sql(scope: Scope, f: Filters, prefix: str) -> tuple[str, list[Any]]:
    return filter_sql(SQLITE, scope, f, prefix)


def entry_from_dict(d: Mapping[str, Any]) -> MemoryEntry:
    """Rebuild an entry from a :meth:`MemoryEntry.to_dict` snapshot (as kept in history)."""

    def dt(v: str | None) -> datetime | None:
        return datetime.fromisoformat(v) if v else None

    return MemoryEntry(
        id=d["id"],
        kind=d["kind"],
        scope=Scope(d["user_id"], d["agent_id"], d["run_id"]),
        text=d["text"],
        original_text=d["original_text"],
        timestamp=dt(d["timestamp"]),
        speaker_id=d["speaker_id"],
        speaker_name=d["speaker_name"],
        topic_id=d["topic_id"],
        source_ids=tuple(d["source_ids"]),
        context=d.get("context", ""),
        version=d["version"],
        created_at=dt(d["created_at"]),
        updated_at=dt(d["updated_at"]),
        metadata=d["metadata"],
    )


def _replace(e: MemoryEntry, **changes: Any) -> MemoryEntry:
    return replace(e, updated_at=datetime.now(UTC), **changes)


def _max_version(c: sqlite3.Connection, entry_id: str) -> int:
    row = c.execute("SELECT max(version) FROM history WHERE entry_id = ?", (entry_id,)).fetchone()
    return int(row[0] or 0)
