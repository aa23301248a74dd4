"""PostgreSQL's search pieces: pgvector (HNSW, inner product on unit vectors, ``ef_search``
tunable) and a generated ``tsvector`` ranked with ``ts_rank_cd`` for entries; exact
in-database ranking for graph nodes; binary COPY for bulk loads.

``ts_rank_cd`` (cover density) rewards query words close together, where SQLite's BM25
rewards rare words and normalises by length, so full-text rankings differ between the
backends; which entries match is the same.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from lightmem.store.db import Session
from lightmem.store.entries import BulkLoad
from lightmem.store.graph_sql import NODE_COLS, node_params
from lightmem.store.postgres_db import PostgresDatabase
from lightmem.store.sql import (
    ENTRY_COLS,
    POSTGRES,
    check_vector,
    entry_params,
    filter_sql,
    scope_sql,
)
from lightmem.store.values import ScoredId, Vector
from lightmem.types import Filters, MemoryEntry, Node, NodeKind, Scope

_TERM = re.compile(r"^\w+$", re.UNICODE)
_HNSW = "CREATE INDEX IF NOT EXISTS entries_hnsw ON entries USING hnsw (embedding vector_ip_ops)"
_GIN = "CREATE INDEX IF NOT EXISTS entries_tsv ON entries USING gin (tsv)"
_COPY_ENTRIES = (
    f"COPY entries ({ENTRY_COLS}, speaker_key, search_text, embedding) FROM STDIN (FORMAT BINARY)"
)
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
    "text",  # superseded_by
    "float8",  # valid_to
    "text",
    "text",
    "vector",
]
_COPY_HISTORY = (
    "COPY history (entry_id, user_id, agent_id, run_id, op, version, before, after, at, "
    "reason) FROM STDIN (FORMAT BINARY)"
)
_COPY_HISTORY_TYPES = [*["text"] * 5, "int4", "jsonb", "jsonb", "float8", "text"]


class PostgresEntryIndex:
    """Entry vectors in an ``embedding`` column (added when the embedder is bound, with its
    HNSW index), full text in the ``tsv`` column generated from ``search_text``."""

    extra_columns: tuple[str, ...] = ("search_text", "embedding")

    def __init__(
        self,
        db: PostgresDatabase,
        *,
        ef_search: int = 200,
        build_workers: int = 2,
        bulk_reindex_min: int = 20_000,
    ) -> None:
        self.db = db
        self.dim: int | None = None
        self.ef_search = ef_search
        self.build_workers = build_workers
        self.bulk_reindex_min = bulk_reindex_min

    def extra_values(self, e: MemoryEntry, vec: Vector) -> tuple[Any, ...]:
        return (e.search_text, vec)

    def on_first_bind(self, s: Session, dim: int) -> None:
        s.execute(f"ALTER TABLE entries ADD COLUMN IF NOT EXISTS embedding vector({dim})")
        s.execute(_HNSW)

    def after_insert(self, s: Session, rid: int, e: MemoryEntry, vec: Vector) -> None:
        pass  # the row holds its vector and text

    def before_delete(self, s: Session, rid: int) -> None:
        pass

    def bulk_load(self, load: BulkLoad) -> int:
        """Streams rows with binary COPY. A load at least as large as the table (and
        >= ``bulk_reindex_min`` rows) drops the vector and full-text indexes first and
        builds them once at the end, several times faster than maintaining them per row;
        the table is locked against other writers and readers meanwhile."""
        from psycopg.types.json import Jsonb

        c = load.session.raw
        rows = iter(load.rows)
        first = list(itertools.islice(rows, self.bulk_reindex_min))
        existing = 0
        if len(first) >= self.bulk_reindex_min:  # only then is the table size needed
            existing = int(c.execute("SELECT count(*) FROM entries").fetchone()[0])
        reindex = len(first) >= self.bulk_reindex_min and len(first) >= existing
        if reindex:
            self.drop_search_indexes(c)
        events: list[tuple[Any, ...]] = []
        with c.cursor().copy(_COPY_ENTRIES) as copy:
            copy.set_types(_COPY_ENTRY_TYPES)
            for e, vec in itertools.chain(first, rows):
                check_vector(vec, self.dim)
                copy.write_row((*entry_params(e, Jsonb), e.speaker.lower(), e.search_text, vec))
                events.append(load.event(e, load.reason, Jsonb))
        with c.cursor().copy(_COPY_HISTORY) as copy:
            copy.set_types(_COPY_HISTORY_TYPES)
            for ev in events:
                copy.write_row(ev)
        if reindex:
            self.build_search_indexes(c, existing + len(events))
        # Fresh statistics, or the planner may scan instead of using the indexes.
        c.execute("ANALYZE entries")
        c.execute("ANALYZE history")
        return len(events)

    def drop_search_indexes(self, c: Any) -> None:
        """Before a bulk load in transaction ``c``: drop the HNSW and GIN indexes. Locks
        the entries table until the transaction ends."""
        c.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
        c.execute("DROP INDEX IF EXISTS entries_hnsw")
        c.execute("DROP INDEX IF EXISTS entries_tsv")

    def build_search_indexes(self, c: Any, rows: int) -> None:
        """After a bulk load: build the indexes dropped by :meth:`drop_search_indexes`."""
        # The HNSW build is several times faster when its graph fits in memory: ask for what
        # this table needs (vectors plus neighbour lists), within bounds.
        need_mb = rows * (4 * (self.dim or 0) + 1024) // 2**20
        c.execute(f"SET LOCAL maintenance_work_mem = '{min(max(need_mb, 64), 8192)}MB'")
        c.execute(f"SET LOCAL max_parallel_maintenance_workers = {self.build_workers}")
        c.execute(_GIN)
        if self.dim is not None:
            c.execute(_HNSW)

    def integrity(self, s: Session) -> list[str]:
        problems: list[str] = []
        missing = s.one("SELECT count(*) FROM entries WHERE embedding IS NULL")[0]
        if missing:
            problems.append(f"{missing} entries without a vector")
        stale = s.one("SELECT count(*) FROM entries WHERE tsv IS NULL OR search_text = ''")[0]
        if stale:
            problems.append(f"{stale} entries without full text")
        return problems

    # -- search -------------------------------------------------------------------------
    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        if k <= 0:
            return []
        where, params = filter_sql(POSTGRES, scope, filters)
        with self.db.read() as s:
            c = s.raw
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
        return _ranked_text(self.db, "entries", terms, filter_sql(POSTGRES, scope, filters), k)

    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        where, params = filter_sql(POSTGRES, scope, filters)
        with self.db.read() as s:
            rows = s.raw.execute(
                f"SELECT id, embedding, user_id, agent_id, run_id FROM entries WHERE {where} "
                "ORDER BY rid",
                params,
            ).fetchall()
        if not rows:
            return [], np.zeros((0, self.dim or 0), dtype=np.float32), []
        matrix = np.vstack([to_numpy(r[1]) for r in rows])
        return [r[0] for r in rows], matrix, [f"{r[2]}\x1f{r[3]}\x1f{r[4]}" for r in rows]


class PostgresNodeIndex:
    """Graph nodes with an unsized ``embedding`` column ranked exactly in the database
    (graphs hold thousands of nodes) and a ``tsvector`` ranked with ``ts_rank_cd``."""

    def __init__(self, db: PostgresDatabase) -> None:
        self.db = db

    def insert(self, s: Session, n: Node, vec: Vector) -> None:
        s.execute(
            f"INSERT INTO graph_nodes ({NODE_COLS}, embedding) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (*node_params(n), vec),
        )

    def delete(self, s: Session, node_id: str) -> None:
        s.execute("DELETE FROM graph_nodes WHERE id = ?", (node_id,))

    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]:
        where, params = scope_sql(POSTGRES, scope)
        with self.db.read() as s:
            rows = s.raw.execute(
                f"SELECT id, embedding FROM graph_nodes WHERE kind = %s AND {where} ORDER BY rid",
                (kind, *params),
            ).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [r[0] for r in rows], np.vstack([to_numpy(r[1]) for r in rows])

    def vector_search(self, kind: NodeKind, query: Vector, scope: Scope, k: int) -> list[ScoredId]:
        if k <= 0:
            return []
        where, params = scope_sql(POSTGRES, scope)
        with self.db.read() as s:
            rows = s.raw.execute(
                "SELECT id, -(embedding <#> %s) AS score FROM graph_nodes "
                f"WHERE kind = %s AND {where} ORDER BY embedding <#> %s, rid LIMIT %s",
                (query, kind, *params, query, k),
            ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]:
        where, params = scope_sql(POSTGRES, scope)
        return _ranked_text(
            self.db, "graph_nodes", terms, (f"kind = %s AND {where}", [kind, *params]), k
        )


def _ranked_text(
    db: PostgresDatabase, table: str, terms: Sequence[str], where: tuple[str, list[Any]], k: int
) -> list[ScoredId]:
    query = search_terms(terms)
    if not query or k <= 0:
        return []
    with db.read() as s:
        rows = s.raw.execute(
            f"SELECT id, ts_rank_cd(tsv, q) AS score FROM {table}, "
            "to_tsquery('english', %s) AS q "
            f"WHERE tsv @@ q AND {where[0]} ORDER BY score DESC, rid LIMIT %s",
            (query, *where[1], k),
        ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def search_terms(terms: Sequence[str]) -> str:
    """A ``to_tsquery`` OR-query of the plain words among ``terms`` ("" when none)."""
    return " | ".join(t for t in terms if _TERM.match(t))


def to_numpy(value: Any) -> Vector:
    """A pgvector value as float32 numpy (the driver may hand back its own Vector type)."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)
