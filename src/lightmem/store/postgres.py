"""The PostgreSQL + pgvector backend: the same MemoryStore, for many processes and machines.

Vectors live in a pgvector column with an HNSW index (inner product on unit vectors,
``ef_search`` tunable); full text in a generated ``tsvector`` ranked with ``ts_rank_cd``
(cover density: it rewards query words close together, where BM25 rewards rare words and
normalises by length, so rankings differ). The schema is created and migrated by the
library (versioned, safe to run twice); every operation is one transaction.
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from lightmem.errors import InvalidInputError, NotFoundError, StoreError
from lightmem.ledger import UsageRecord
from lightmem.store.base import BufferedMessage, MessageStatus, ScoredId, Vector
from lightmem.store.sql import (
    ENTRY_COLS,
    POSTGRES,
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
from lightmem.types import (
    Filters,
    HistoryEvent,
    MemoryEntry,
    Message,
    Scope,
)

if TYPE_CHECKING:
    from lightmem.store.postgres_graph import PostgresGraphStore

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_TERM = re.compile(r"^\w+$", re.UNICODE)

# Each migration is applied once, in order, inside one transaction; the list only grows.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS messages (
        seq BIGSERIAL PRIMARY KEY,
        msg_id TEXT NOT NULL,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
        role TEXT NOT NULL, content TEXT NOT NULL, compressed TEXT NOT NULL,
        ts DOUBLE PRECISION, time_text TEXT NOT NULL,
        speaker_id TEXT NOT NULL, speaker_name TEXT NOT NULL,
        metadata JSONB NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pending', 'segmented', 'extracted')),
        topic_id TEXT NOT NULL DEFAULT '',
        created_at DOUBLE PRECISION NOT NULL,
        UNIQUE (user_id, agent_id, run_id, msg_id)
    );
    CREATE INDEX IF NOT EXISTS messages_status ON messages (status, user_id, agent_id, run_id);
    CREATE TABLE IF NOT EXISTS entries (
        rid BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('entry', 'summary', 'event')),
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
        text TEXT NOT NULL, original_text TEXT NOT NULL,
        ts DOUBLE PRECISION,
        speaker_id TEXT NOT NULL, speaker_name TEXT NOT NULL, speaker_key TEXT NOT NULL,
        topic_id TEXT NOT NULL,
        source_ids JSONB NOT NULL,
        context TEXT NOT NULL,
        version INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
        metadata JSONB NOT NULL,
        search_text TEXT NOT NULL,
        tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED
    );
    CREATE INDEX IF NOT EXISTS entries_scope ON entries (user_id, agent_id, run_id);
    CREATE INDEX IF NOT EXISTS entries_topic ON entries (topic_id);
    CREATE INDEX IF NOT EXISTS entries_tsv ON entries USING gin (tsv);
    CREATE TABLE IF NOT EXISTS history (
        seq BIGSERIAL PRIMARY KEY,
        entry_id TEXT NOT NULL,
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
        op TEXT NOT NULL CHECK (op IN ('add', 'update', 'delete', 'restore')),
        version INTEGER NOT NULL,
        before JSONB, after JSONB,
        at DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL
    );
    CREATE INDEX IF NOT EXISTS history_entry ON history (entry_id, seq);
    CREATE TABLE IF NOT EXISTS update_queue (
        entry_id TEXT PRIMARY KEY, candidates JSONB NOT NULL, built_at DOUBLE PRECISION NOT NULL
    );
    CREATE TABLE IF NOT EXISTS usage (
        kind TEXT NOT NULL, op TEXT NOT NULL,
        calls BIGINT NOT NULL, items BIGINT NOT NULL,
        prompt_tokens BIGINT NOT NULL, completion_tokens BIGINT NOT NULL,
        latency_s DOUBLE PRECISION NOT NULL, errors BIGINT NOT NULL,
        PRIMARY KEY (kind, op)
    );
    """,
    # 2: the FluxMem graph. Node vectors are searched exactly (graphs hold thousands of
    # nodes, and an unsized column takes any embedder's dimension).
    """
    CREATE TABLE IF NOT EXISTS graph_nodes (
        rid BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL CHECK (kind IN ('semantic', 'episodic', 'procedural')),
        user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
        text TEXT NOT NULL,
        data JSONB NOT NULL,
        version INTEGER NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, updated_at DOUBLE PRECISION NOT NULL,
        embedding vector NOT NULL,
        tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED
    );
    CREATE INDEX IF NOT EXISTS graph_nodes_kind ON graph_nodes (kind, user_id, agent_id, run_id);
    CREATE INDEX IF NOT EXISTS graph_nodes_tsv ON graph_nodes USING gin (tsv);
    CREATE TABLE IF NOT EXISTS graph_edges (
        kind TEXT NOT NULL CHECK (kind IN ('ground', 'distill', 'step')),
        src TEXT NOT NULL, dst TEXT NOT NULL,
        weight DOUBLE PRECISION NOT NULL,
        data JSONB NOT NULL,
        created_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (kind, src, dst)
    );
    CREATE INDEX IF NOT EXISTS graph_edges_dst ON graph_edges (dst, kind);
    CREATE TABLE IF NOT EXISTS graph_history (
        seq BIGSERIAL PRIMARY KEY,
        op TEXT NOT NULL,
        target TEXT NOT NULL CHECK (target IN ('node', 'edge')),
        target_id TEXT NOT NULL,
        before JSONB, after JSONB,
        at DOUBLE PRECISION NOT NULL, reason TEXT NOT NULL
    );
    """,
)


class PostgresStore:
    """A :class:`~lightmem.store.base.MemoryStore` in PostgreSQL (schema ``schema``)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "lightmem",
        pool_size: int = 8,
        ef_search: int = 200,
        connect_timeout_s: float = 10.0,
        build_workers: int = 2,
        bulk_reindex_min: int = 20_000,
    ) -> None:
        try:
            from pgvector.psycopg import register_vector
        except ImportError as exc:
            raise StoreError("the postgres store needs: pip install 'lightmem[postgres]'") from exc
        self.schema = schema
        self.path = f"postgres:{_redact(dsn)}#{schema}"
        self.ef_search = ef_search
        self.build_workers = build_workers
        self.bulk_reindex_min = bulk_reindex_min
        self._register_vector = register_vector
        self._dim: int | None = None
        apply_migrations(dsn, schema, MIGRATIONS, connect_timeout_s)
        self._pool = open_pool(dsn, pool_size, connect_timeout_s, self._configure)

    # -- connections and schema -----------------------------------------------------------
    def _configure(self, conn: Any) -> None:
        conn.execute(f"SET search_path TO {self.schema}, public")
        self._register_vector(conn)
        conn.commit()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        import psycopg

        try:
            with self._pool.connection() as conn, conn.transaction():
                yield conn
        except psycopg.errors.UniqueViolation:
            raise
        except psycopg.DataError as exc:  # e.g. a NUL character, which PostgreSQL refuses
            raise InvalidInputError(f"value: PostgreSQL cannot store it ({exc})") from exc
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"store: database unavailable ({exc}); the operation was rolled back"
            ) from exc

    def graph(self) -> PostgresGraphStore:
        """The FluxMem graph kept in this store."""
        from lightmem.store.postgres_graph import PostgresGraphStore

        return PostgresGraphStore(self)

    def close(self) -> None:
        self._pool.close()

    def bind_embedder(self, name: str, dim: int) -> None:
        with self._tx() as c:
            row = c.execute("SELECT value FROM meta WHERE key = 'embedder' FOR UPDATE").fetchone()
            if row is None:
                c.execute(
                    "INSERT INTO meta VALUES ('embedder', %s) ON CONFLICT DO NOTHING",
                    (json.dumps({"name": name, "dim": dim}),),
                )
                c.execute(f"ALTER TABLE entries ADD COLUMN IF NOT EXISTS embedding vector({dim})")
                c.execute(_CREATE_HNSW_INDEX)
            else:
                bound = json.loads(row[0])
                if bound["name"] != name or bound["dim"] != dim:
                    raise StoreError(
                        f"text_embedder: store {self.path!r} was built with {bound['name']} "
                        f"({bound['dim']}-d) and cannot be searched with {name} ({dim}-d); "
                        "use the same embedder or a new store"
                    )
        self._dim = dim

    # -- message buffer ---------------------------------------------------------------------
    def add_messages(self, scope: Scope, items: Sequence[tuple[Message, str]]) -> None:
        import psycopg

        now = time.time()
        with self._tx() as c:
            for i, (m, compressed) in enumerate(items):
                try:
                    with c.transaction():  # a savepoint: name the duplicate, keep the rest
                        c.execute(
                            "INSERT INTO messages (msg_id, user_id, agent_id, run_id, role, "
                            "content, compressed, ts, time_text, speaker_id, speaker_name, "
                            "metadata, status, created_at) VALUES "
                            "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,'pending',%s)",
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
                            ),
                        )
                except psycopg.errors.UniqueViolation as exc:
                    raise InvalidInputError(
                        f"messages[{i}].id: {m.id!r} already exists in scope {scope.label()}"
                    ) from exc

    def buffered(self, scope: Scope, status: MessageStatus) -> list[BufferedMessage]:
        with self._tx() as c:
            rows = c.execute(buffered_sql(POSTGRES), buffered_params(scope, status)).fetchall()
        return buffered_from_rows(rows, scope)

    def buffered_scopes(self) -> list[Scope]:
        with self._tx() as c:
            rows = c.execute(
                "SELECT DISTINCT user_id, agent_id, run_id FROM messages "
                "WHERE status != 'extracted'"
            ).fetchall()
        return [Scope(*r) for r in rows]

    def mark_segmented(self, assignments: Sequence[tuple[int, str]]) -> bool:
        try:
            with self._tx() as c:
                _lock_in_order(c, [seq for seq, _ in assignments])
                done = c.execute(
                    "UPDATE messages AS m SET status = 'segmented', topic_id = a.topic "
                    "FROM unnest(%s::bigint[], %s::text[]) AS a(seq, topic) "
                    "WHERE m.seq = a.seq AND m.status = 'pending'",
                    ([seq for seq, _ in assignments], [t for _, t in assignments]),
                ).rowcount
                if done != len(assignments):
                    raise _Claimed()
        except _Claimed:
            return False
        return True

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[Message]:
        if not ids:
            return []
        where, params = scope_sql(POSTGRES, scope)
        with self._tx() as c:
            rows = c.execute(
                "SELECT msg_id, role, content, compressed, ts, time_text, speaker_id, "
                f"speaker_name, metadata FROM messages WHERE msg_id = ANY(%s) AND {where} "
                "ORDER BY seq",
                (list(ids), *params),
            ).fetchall()
        return [message_from_row(r) for r in rows]

    # -- entries ----------------------------------------------------------------------------
    def commit_extraction(
        self, entries: Sequence[tuple[MemoryEntry, Vector]], message_seqs: Sequence[int]
    ) -> bool:
        try:
            with self._tx() as c:
                if message_seqs:
                    _lock_in_order(c, message_seqs)
                    done = c.execute(
                        "UPDATE messages SET status = 'extracted' "
                        "WHERE seq = ANY(%s) AND status = 'segmented'",
                        (list(message_seqs),),
                    ).rowcount
                    if done != len(set(message_seqs)):
                        raise _Claimed()
                for _, vec in entries:
                    self._check_vector(vec)
                # One batched round trip per table (psycopg pipelines executemany).
                with c.cursor() as cur:
                    cur.executemany(_INSERT_ENTRY, [_entry_values(e, v) for e, v in entries])
                    cur.executemany(
                        _INSERT_HISTORY,
                        [_history_values(e, "add", None, e, "extracted") for e, _ in entries],
                    )
        except _Claimed:
            return False
        return True

    def import_entries(
        self, rows: Iterable[tuple[MemoryEntry, Vector]], reason: str = "imported"
    ) -> int:
        """Bulk-load entries (with an ``add`` history event each) in one transaction.

        Streams rows with binary COPY. A load at least as large as the table (and
        >= ``bulk_reindex_min`` rows) drops the vector and full-text indexes first and builds
        them once at the end, which is several times faster than maintaining them per row;
        the table is locked against other writers and readers meanwhile."""
        from psycopg.types.json import Jsonb

        with self._tx() as c:
            rows = iter(rows)
            first = list(itertools.islice(rows, self.bulk_reindex_min))
            existing = 0
            if len(first) >= self.bulk_reindex_min:  # only then is the table size needed
                existing = int(c.execute("SELECT count(*) FROM entries").fetchone()[0])
            reindex = len(first) >= self.bulk_reindex_min and len(first) >= existing
            if reindex:
                self.drop_search_indexes(c)
            history: list[tuple[Any, ...]] = []
            with c.cursor().copy(_COPY_ENTRIES) as copy:
                copy.set_types(_COPY_ENTRY_TYPES)
                for e, vec in itertools.chain(first, rows):
                    self._check_vector(vec)
                    copy.write_row(_entry_values(e, vec, Jsonb))
                    history.append(_history_values(e, "add", None, e, reason, Jsonb))
            with c.cursor().copy(_COPY_HISTORY) as copy:
                copy.set_types(_COPY_HISTORY_TYPES)
                for h in history:
                    copy.write_row(h)
            n = len(history)
            if reindex:
                self.build_search_indexes(c, existing + n)
            # Fresh statistics, or the planner may scan instead of using the indexes.
            c.execute("ANALYZE entries")
            c.execute("ANALYZE history")
        return n

    def drop_search_indexes(self, c: Any) -> None:
        """Before a bulk load in transaction ``c``: drop the HNSW and GIN indexes (building
        them once afterwards is several times faster than maintaining them per row). Locks
        the entries table until the transaction ends."""
        c.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
        c.execute("DROP INDEX IF EXISTS entries_hnsw")
        c.execute("DROP INDEX IF EXISTS entries_tsv")

    def build_search_indexes(self, c: Any, rows: int) -> None:
        """After a bulk load: build the indexes dropped by :meth:`drop_search_indexes`."""
        # The HNSW build is several times faster when its graph fits in memory: ask for what
        # this table needs (vectors plus neighbour lists), within bounds.
        need_mb = rows * (4 * (self._dim or 0) + 1024) // 2**20
        c.execute(f"SET LOCAL maintenance_work_mem = '{min(max(need_mb, 64), 8192)}MB'")
        c.execute(f"SET LOCAL max_parallel_maintenance_workers = {self.build_workers}")
        c.execute(_CREATE_TSV_INDEX)
        if self._dim is not None:
            c.execute(_CREATE_HNSW_INDEX)

    def _insert(self, c: Any, e: MemoryEntry, vec: Vector) -> None:
        self._check_vector(vec)
        c.execute(_INSERT_ENTRY, _entry_values(e, vec))

    def _check_vector(self, vec: Vector) -> None:
        if vec.dtype != np.float32 or vec.ndim != 1 or (self._dim and vec.shape[0] != self._dim):
            raise StoreError(
                f"vector of shape {vec.shape} ({vec.dtype}) does not match the store "
                f"({self._dim}-d float32)"
            )

    def get_entry(self, entry_id: str, scope: Scope) -> MemoryEntry | None:
        where, params = scope_sql(POSTGRES, scope)
        with self._tx() as c:
            row = c.execute(
                f"SELECT {ENTRY_COLS} FROM entries WHERE id = %s AND {where}", (entry_id, *params)
            ).fetchone()
        return entry_from_row(row) if row else None

    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]:
        if not entry_ids:
            return {}
        with self._tx() as c:
            rows = c.execute(
                f"SELECT {ENTRY_COLS} FROM entries WHERE id = ANY(%s)", (list(entry_ids),)
            ).fetchall()
        return {r[0]: entry_from_row(r) for r in rows}

    def list_entries(
        self, scope: Scope, filters: Filters, limit: int, offset: int
    ) -> list[MemoryEntry]:
        where, params = filter_sql(POSTGRES, scope, filters)
        with self._tx() as c:
            rows = c.execute(
                f"SELECT {ENTRY_COLS} FROM entries WHERE {where} "
                "ORDER BY coalesce(ts, created_at), rid LIMIT %s OFFSET %s",
                (*params, limit, offset),
            ).fetchall()
        return [entry_from_row(r) for r in rows]

    def update_entry(self, entry: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry:
        with self._tx() as c:
            old = self._require(c, entry.id, entry.scope)
            new = replace(
                entry,
                version=old.version + 1,
                created_at=old.created_at,
                updated_at=datetime.now(UTC),
            )
            c.execute("DELETE FROM entries WHERE id = %s", (entry.id,))
            self._insert(c, new, vector)
            self._log(c, new, "update", old, new, reason)
        return new

    def delete_entry(self, entry_id: str, scope: Scope, reason: str) -> MemoryEntry:
        with self._tx() as c:
            old = self._require(c, entry_id, scope)
            c.execute("DELETE FROM entries WHERE id = %s", (entry_id,))
            self._log(c, old, "delete", old, None, reason)
        return old

    def restore_entry(self, snapshot: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry:
        with self._tx() as c:
            row = c.execute(
                f"SELECT {ENTRY_COLS} FROM entries WHERE id = %s FOR UPDATE", (snapshot.id,)
            ).fetchone()
            current = entry_from_row(row) if row else None
            if current is not None and current.scope != snapshot.scope:
                raise NotFoundError(f"id: no memory entry {snapshot.id!r} in this scope")
            top = c.execute(
                "SELECT max(version) FROM history WHERE entry_id = %s", (snapshot.id,)
            ).fetchone()
            new = replace(snapshot, version=int(top[0] or 0) + 1, updated_at=datetime.now(UTC))
            if current is not None:
                c.execute("DELETE FROM entries WHERE id = %s", (snapshot.id,))
            self._insert(c, new, vector)
            self._log(c, new, "restore", current, new, reason)
        return new

    def history(self, entry_id: str, scope: Scope) -> list[HistoryEvent]:
        where, params = scope_sql(POSTGRES, scope)
        with self._tx() as c:
            rows = c.execute(
                "SELECT seq, entry_id, op, version, at, reason, before, after FROM history "
                f"WHERE entry_id = %s AND {where} ORDER BY seq",
                (entry_id, *params),
            ).fetchall()
        return [history_from_row(r) for r in rows]

    def _require(self, c: Any, entry_id: str, scope: Scope) -> MemoryEntry:
        where, params = scope_sql(POSTGRES, scope)
        row = c.execute(
            f"SELECT {ENTRY_COLS} FROM entries WHERE id = %s AND {where} FOR UPDATE",
            (entry_id, *params),
        ).fetchone()
        if row is None:
            raise NotFoundError(f"id: no memory entry {entry_id!r} in this scope")
        return entry_from_row(row)

    def _log(
        self,
        c: Any,
        e: MemoryEntry,
        op: str,
        before: MemoryEntry | None,
        after: MemoryEntry | None,
        reason: str,
    ) -> None:
        c.execute(_INSERT_HISTORY, _history_values(e, op, before, after, reason))

    # -- search -----------------------------------------------------------------------------
    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        if k <= 0:
            return []
        where, params = filter_sql(POSTGRES, scope, filters)
        with self._tx() as c:
            c.execute(f"SET LOCAL hnsw.ef_search = {int(max(self.ef_search, k))}")
            # Filtered queries keep scanning the graph until k rows pass the filter.
            c.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = c.execute(
                f"SELECT id, -(embedding <#> %s) AS score FROM entries WHERE {where} "
                "ORDER BY embedding <#> %s LIMIT %s",
                (query, *params, query, k),
            ).fetchall()
        return sorted(((r[0], float(r[1])) for r in rows), key=lambda x: -x[1])

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        query = search_terms(terms)
        if not query or k <= 0:
            return []
        where, params = filter_sql(POSTGRES, scope, filters)
        with self._tx() as c:
            rows = c.execute(
                "SELECT id, ts_rank_cd(tsv, q) AS score FROM entries, "
                "to_tsquery('english', %s) AS q "
                f"WHERE tsv @@ q AND {where} ORDER BY score DESC, rid LIMIT %s",
                (query, *params, k),
            ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        where, params = filter_sql(POSTGRES, scope, filters)
        with self._tx() as c:
            rows = c.execute(
                f"SELECT id, embedding, user_id, agent_id, run_id FROM entries WHERE {where} "
                "ORDER BY rid",
                params,
            ).fetchall()
        if not rows:
            return [], np.zeros((0, self._dim or 0), dtype=np.float32), []
        matrix = np.vstack([to_numpy(r[1]) for r in rows])
        return [r[0] for r in rows], matrix, [f"{r[2]}\x1f{r[3]}\x1f{r[4]}" for r in rows]

    # -- bookkeeping ------------------------------------------------------------------------
    def save_update_queue(self, queue: dict[str, list[ScoredId]]) -> None:
        now = time.time()
        with self._tx() as c, c.cursor() as cur:
            cur.executemany(
                "INSERT INTO update_queue VALUES (%s, %s, %s) ON CONFLICT (entry_id) DO UPDATE "
                "SET candidates = excluded.candidates, built_at = excluded.built_at",
                [(eid, json.dumps(cands), now) for eid, cands in queue.items()],
            )

    def load_update_queue(self, scope: Scope) -> dict[str, list[ScoredId]]:
        where, params = scope_sql(POSTGRES, scope, "e.")
        with self._tx() as c:
            rows = c.execute(
                "SELECT q.entry_id, q.candidates FROM update_queue q JOIN entries e "
                f"ON e.id = q.entry_id WHERE {where} ORDER BY e.rid",
                params,
            ).fetchall()
        return {r[0]: [(x[0], float(x[1])) for x in r[1]] for r in rows}

    def record_usage(self, records: Sequence[UsageRecord]) -> None:
        if not records:
            return
        with self._tx() as c, c.cursor() as cur:
            cur.executemany(
                "INSERT INTO usage VALUES (%s,%s,%s,%s,%s,%s,%s,%s) ON CONFLICT (kind, op) DO "
                "UPDATE SET calls = usage.calls + excluded.calls, "
                "items = usage.items + excluded.items, "
                "prompt_tokens = usage.prompt_tokens + excluded.prompt_tokens, "
                "completion_tokens = usage.completion_tokens + excluded.completion_tokens, "
                "latency_s = usage.latency_s + excluded.latency_s, "
                "errors = usage.errors + excluded.errors",
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
        with self._tx() as c:
            rows = c.execute("SELECT * FROM usage ORDER BY kind, op").fetchall()
        return [
            UsageRecord(
                r[0], r[1], int(r[2]), int(r[3]), int(r[4]), int(r[5]), float(r[6]), int(r[7])
            )
            for r in rows
        ]

    def counts(self, scope: Scope) -> dict[str, int]:
        where, params = scope_sql(POSTGRES, scope)
        with self._tx() as c:
            kinds = dict(
                c.execute(
                    f"SELECT kind, count(*) FROM entries WHERE {where} GROUP BY kind", params
                ).fetchall()
            )
            status = dict(
                c.execute(
                    f"SELECT status, count(*) FROM messages WHERE {where} GROUP BY status", params
                ).fetchall()
            )
            hist = c.execute(f"SELECT count(*) FROM history WHERE {where}", params).fetchone()[0]
        return counts_dict(kinds, status, hist)

    def integrity_check(self) -> list[str]:
        problems: list[str] = []
        with self._tx() as c:
            missing = c.execute("SELECT count(*) FROM entries WHERE embedding IS NULL").fetchone()[
                0
            ]
            if missing:
                problems.append(f"{missing} entries without a vector")
            stale = c.execute(
                "SELECT count(*) FROM entries WHERE tsv IS NULL OR search_text = ''"
            ).fetchone()[0]
            if stale:
                problems.append(f"{stale} entries without full text")
            orphan = c.execute(
                "SELECT count(*) FROM entries e WHERE NOT EXISTS "
                "(SELECT 1 FROM history h WHERE h.entry_id = e.id)"
            ).fetchone()[0]
            if orphan:
                problems.append(f"{orphan} entries without history")
        return problems

    def drop(self) -> None:
        """Delete this store's schema and everything in it (tests, benchmarks)."""
        with self._tx() as c:
            c.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


def apply_migrations(
    dsn: str, schema: str, migrations: Sequence[str], timeout: float = 10.0
) -> None:
    """Bring ``schema`` up to ``len(migrations)``: each missing step once, in order, in one
    transaction, one migrator at a time across processes; a newer schema is refused."""
    import psycopg

    if not _SCHEMA_NAME.match(schema):
        raise StoreError(f"store.schema: {schema!r} is not a plain lower-case identifier")
    try:
        conn = psycopg.connect(dsn, autocommit=False, connect_timeout=int(timeout))
    except psycopg.Error as exc:
        raise StoreError(f"store.dsn: cannot connect to {_redact(dsn)} ({exc})") from exc
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (schema,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(f"SET LOCAL search_path TO {schema}, public")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
            current = int(row[0] or 0) if row else 0
            if current > len(migrations):
                raise StoreError(
                    f"store: schema {schema!r} is at version {current}; this lightmem "
                    f"knows up to {len(migrations)}: upgrade lightmem"
                )
            for version in range(current + 1, len(migrations) + 1):
                conn.execute(migrations[version - 1])
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (%s, %s)", (version, time.time())
                )
    except psycopg.Error as exc:
        raise StoreError(f"store: cannot create or migrate schema {schema!r}: {exc}") from exc
    finally:
        conn.close()


def open_pool(dsn: str, size: int, timeout: float, configure: Callable[[Any], None]) -> Any:
    """An open psycopg connection pool whose connections are checked before use (so a
    restarted server is reconnected on the next call)."""
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        dsn,
        min_size=1,
        max_size=size,
        kwargs={"autocommit": False, "connect_timeout": int(timeout)},
        configure=configure,
        check=ConnectionPool.check_connection,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        pool.close()
        raise StoreError(f"store.dsn: cannot connect to {_redact(dsn)} ({exc})") from exc
    return pool


def _lock_in_order(c: Any, seqs: Sequence[int]) -> None:
    """Row locks taken in one global order, so racing writers wait instead of deadlocking."""
    c.execute(
        "SELECT seq FROM messages WHERE seq = ANY(%s) ORDER BY seq FOR UPDATE", (list(seqs),)
    ).fetchall()


# Rows as _entry_values and _history_values give them, for INSERT and for COPY alike.
_ENTRY_ROW = f"entries ({ENTRY_COLS}, speaker_key, search_text, embedding)"
_HISTORY_ROW = (
    "history (entry_id, user_id, agent_id, run_id, op, version, before, after, at, reason)"
)
_INSERT_ENTRY = f"INSERT INTO {_ENTRY_ROW} VALUES ({','.join(['%s'] * 20)})"
_CREATE_HNSW_INDEX = (
    "CREATE INDEX IF NOT EXISTS entries_hnsw ON entries USING hnsw (embedding vector_ip_ops)"
)
_CREATE_TSV_INDEX = "CREATE INDEX IF NOT EXISTS entries_tsv ON entries USING gin (tsv)"
_COPY_ENTRIES = f"COPY {_ENTRY_ROW} FROM STDIN (FORMAT BINARY)"
_COPY_ENTRY_TYPES = [
    *["text"] * 7,
    "float8",
    *["text"] * 3,
    "jsonb",
    "text",
    "int4",
    "float8",
    "float8",
    "jsonb",
    "text",
    "text",
    "vector",
]
_COPY_HISTORY = f"COPY {_HISTORY_ROW} FROM STDIN (FORMAT BINARY)"
_COPY_HISTORY_TYPES = [*["text"] * 5, "int4", "jsonb", "jsonb", "float8", "text"]
_INSERT_HISTORY = f"INSERT INTO {_HISTORY_ROW} VALUES ({','.join(['%s'] * 10)})"


def _entry_values(
    e: MemoryEntry, vec: Vector, as_json: Callable[[Any], Any] = json.dumps
) -> tuple[Any, ...]:
    return (*entry_params(e, as_json), e.speaker.lower(), e.search_text, vec)


def _history_values(
    e: MemoryEntry,
    op: str,
    before: MemoryEntry | None,
    after: MemoryEntry | None,
    reason: str,
    as_json: Callable[[Any], Any] = json.dumps,
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


class _Claimed(Exception):
    """Another writer moved these messages on first: roll back, it did the work."""


def search_terms(terms: Sequence[str]) -> str:
    """A ``to_tsquery`` OR-query of the plain words among ``terms`` ("" when none)."""
    return " | ".join(t for t in terms if _TERM.match(t))


def to_numpy(value: Any) -> Vector:
    """A pgvector value as float32 numpy (the driver may hand back its own Vector type)."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)


def _redact(dsn: str) -> str:
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
