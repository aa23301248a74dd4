"""PostgreSQL's search pieces: pgvector (HNSW, inner product on unit vectors, ``ef_search``
tunable); entry postings kept from pre-segmented ``search_terms``
(:mod:`lightmem.store.postgres_terms`) and ranked by the same BM25 as SQLite's (graph
nodes: a ``tsvector`` over them); exact in-database vector ranking for graph nodes;
binary COPY for bulk loads.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from lightmem.errors import ConfigError
from lightmem.store import entry_time
from lightmem.store.db import Session
from lightmem.store.entries import BulkLoad
from lightmem.store.graph_sql import NODE_COLS, node_params
from lightmem.store.postgres_db import PostgresDatabase
from lightmem.store.postgres_schema import hnsw_build_settings
from lightmem.store.postgres_terms import (
    POSTINGS_INDEX,
    bm25_sql,
    entry_terms,
    index_text,
    postings_bm25_sql,
    query_lexemes,
    tsquery_text,
)
from lightmem.store.sql import (
    ENTRY_COLS,
    POSTGRES,
    check_vector,
    entry_params,
    filter_sql,
    scope_sql,
)
from lightmem.store.text_index import Stemmer
from lightmem.store.values import DEFAULT_EF_SEARCH, ScoredId, Vector
from lightmem.types import Filters, MemoryEntry, Node, NodeKind, Scope

__all__ = ["VECTOR_INDEXES", "PostgresEntryIndex", "PostgresNodeIndex", "to_numpy"]

#: What the HNSW index holds: the vectors as stored, or half-precision copies (half the
#: index size and build memory; results are re-scored from the stored vectors).
VECTOR_INDEXES = ("vector", "halfvec")
_COPY_ENTRIES = (
    f"COPY entries ({ENTRY_COLS}, speaker_key, search_text, search_terms, embedding) "
    "FROM STDIN (FORMAT BINARY)"
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
    *entry_time.COPY_TYPES,
    "text",  # superseded_by
    "float8",  # valid_to
    "text",  # speaker_key
    "text",  # search_text
    "text",  # search_terms
    "vector",
]
_COPY_HISTORY = (
    "COPY history (entry_id, user_id, agent_id, run_id, op, version, before, after, at, "
    "reason) FROM STDIN (FORMAT BINARY)"
)
_COPY_HISTORY_TYPES = [*["text"] * 5, "int4", "jsonb", "jsonb", "float8", "text"]


class PostgresEntryIndex:
    """Entry vectors in an ``embedding`` column (added when the embedder is bound, with its
    HNSW index), full text in ``entry_postings`` kept from ``search_terms`` by triggers."""

    extra_columns: tuple[str, ...] = ("search_text", "search_terms", "embedding")

    def __init__(
        self,
        db: PostgresDatabase,
        stemmer: Stemmer,
        *,
        ef_search: int = DEFAULT_EF_SEARCH,
        build_workers: int = 2,
        bulk_reindex_min: int = 20_000,
        vector_index: str = "halfvec",
    ) -> None:
        if vector_index not in VECTOR_INDEXES:
            raise ConfigError(
                f"store.vector_index: {vector_index!r} is not one of {', '.join(VECTOR_INDEXES)}"
            )
        self.db = db
        self.stemmer = stemmer
        self.vector_index = vector_index
        self._indexed: str | None = None  # what the existing index holds, once read
        self.dim: int | None = None
        self.ef_search = ef_search
        self.build_workers = build_workers
        self.bulk_reindex_min = bulk_reindex_min

    def extra_values(self, e: MemoryEntry, vec: Vector) -> tuple[Any, ...]:
        text = e.search_text
        return (text, entry_terms(text, self.stemmer), vec)

    def on_first_bind(self, s: Session, dim: int) -> None:
        s.execute(f"ALTER TABLE entries ADD COLUMN IF NOT EXISTS embedding vector({dim})")
        s.execute(self._hnsw(dim))
        self._indexed = None

    def _hnsw(self, dim: int) -> str:
        on = f"(embedding::halfvec({dim})) halfvec_ip_ops"
        if self.vector_index == "vector":
            on = "embedding vector_ip_ops"
        return f"CREATE INDEX IF NOT EXISTS entries_hnsw ON entries USING hnsw ({on})"

    def _order(self, s: Session) -> str:
        """The ORDER BY expression the existing HNSW index serves (stores made before
        half-precision indexes keep theirs: the search follows the index)."""
        if self._indexed is None:
            row = s.one(
                "SELECT indexdef FROM pg_indexes "
                "WHERE schemaname = current_schema() AND indexname = 'entries_hnsw'"
            )
            if row is None:  # no vectors yet (or another process is adding the index)
                return "embedding <#> %s"
            self._indexed = "halfvec" if "halfvec" in row[0] else "vector"
        if self._indexed == "halfvec" and self.dim is not None:
            return f"embedding::halfvec({self.dim}) <#> %s::halfvec({self.dim})"
        return "embedding <#> %s"

    def after_insert(self, s: Session, rid: int, e: MemoryEntry, vec: Vector) -> None:
        pass  # the row holds its vector and text

    def before_delete(self, s: Session, rid: int) -> None:
        pass  # the row's postings go with it (a trigger, see postgres_terms)

    #: an entry's keyword postings (its stemmed terms)
    derived_tables: tuple[str, ...] = ("entry_postings",)

    def bulk_load(self, load: BulkLoad) -> int:
        """Streams rows with binary COPY. A load at least as large as the table (and
        >= ``bulk_reindex_min`` rows) drops the vector and full-text indexes first and
        builds them once at the end, several times faster than maintaining them per row
        (the postings rows are still written, by the insert trigger, in one statement);
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
                text = e.search_text
                terms = entry_terms(text, self.stemmer)
                copy.write_row((*entry_params(e, Jsonb), e.speaker.lower(), text, terms, vec))
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
        """Before a bulk load in transaction ``c``: drop the HNSW and postings indexes.
        Locks the entries table (and its postings) until the transaction ends."""
        c.execute("LOCK TABLE entries, entry_postings IN ACCESS EXCLUSIVE MODE")
        c.execute("DROP INDEX IF EXISTS entries_hnsw")
        c.execute("DROP INDEX IF EXISTS entry_postings_term")

    def build_search_indexes(self, c: Any, rows: int) -> None:
        """After a bulk load: build the indexes dropped by :meth:`drop_search_indexes`."""
        width = 2 if self.vector_index == "halfvec" else 4
        c.execute(hnsw_build_settings(rows, width * (self.dim or 0), self.build_workers))
        c.execute(POSTINGS_INDEX)
        if self.dim is not None:
            c.execute(self._hnsw(self.dim))
        self._indexed = None

    # -- re-embedding (lightmem.store.reembed) -------------------------------------------
    def begin_reembed(self, s: Session, dim: int) -> None:
        """Lock out writers (and readers of entries), and give the vector column the new
        dimension: dropped with its HNSW index, added empty, filled by ``set_vectors``."""
        s.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
        s.execute("LOCK TABLE graph_nodes, graph_history IN EXCLUSIVE MODE")
        s.execute("DROP INDEX IF EXISTS entries_hnsw")
        s.execute("ALTER TABLE entries DROP COLUMN IF EXISTS embedding")
        s.execute(f"ALTER TABLE entries ADD COLUMN embedding vector({int(dim)})")

    def set_vectors(self, s: Session, rows: Sequence[tuple[int, Vector]]) -> None:
        s.many("UPDATE entries SET embedding = ? WHERE rid = ?", [(v, rid) for rid, v in rows])

    def end_reembed(self, s: Session, dim: int, rows: int) -> None:
        width = 2 if self.vector_index == "halfvec" else 4
        s.execute(hnsw_build_settings(rows, width * dim, self.build_workers))
        s.execute(self._hnsw(dim))
        s.execute("ANALYZE entries")

    def after_reembed(self, dim: int) -> None:
        self.dim, self._indexed = dim, None

    def integrity(self, s: Session) -> list[str]:
        problems: list[str] = []
        missing = s.one("SELECT count(*) FROM entries WHERE embedding IS NULL")[0]
        if missing:
            problems.append(f"{missing} entries without a vector")
        stale = s.one(
            "SELECT count(*) FROM entries WHERE search_terms IS NULL OR search_text = ''"
        )[0]
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
                f"ORDER BY {self._order(s)} LIMIT %s",
                (query, *params, query, k),
            ).fetchall()
        return sorted(((r[0], float(r[1])) for r in rows), key=lambda x: -x[1])

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        lexemes = query_lexemes(terms, self.stemmer)
        if not lexemes or k <= 0:
            return []
        where, params = filter_sql(POSTGRES, scope, filters, prefix="e.")
        with self.db.read() as s:
            rows = s.raw.execute(postings_bm25_sql(where), (lexemes, *params, k)).fetchall()
        return [(r[0], float(r[1])) for r in rows]

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
    (graphs hold thousands of nodes) and a ``tsvector`` over ``search_terms`` ranked by
    BM25."""

    def __init__(self, db: PostgresDatabase, stemmer: Stemmer) -> None:
        self.db = db
        self.stemmer = stemmer

    def insert(self, s: Session, n: Node, vec: Vector) -> None:
        s.execute(
            f"INSERT INTO graph_nodes ({NODE_COLS}, search_terms, embedding) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (*node_params(n), index_text(n.text, self.stemmer), vec),
        )

    def delete(self, s: Session, node_id: str) -> None:
        s.execute("DELETE FROM graph_nodes WHERE id = ?", (node_id,))

    def set_node_vectors(self, s: Session, rows: Sequence[tuple[int, Vector]]) -> None:
        s.many("UPDATE graph_nodes SET embedding = ? WHERE rid = ?", [(v, rid) for rid, v in rows])

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
            self.db,
            "graph_nodes",
            query_lexemes(terms, self.stemmer),
            (f"kind = %s AND {where}", [kind, *params]),
            k,
        )


def _ranked_text(
    db: PostgresDatabase, table: str, lexemes: Sequence[str], where: tuple[str, list[Any]], k: int
) -> list[ScoredId]:
    if not lexemes or k <= 0:
        return []
    with db.read() as s:
        rows = s.raw.execute(
            bm25_sql(table, len(lexemes), where[0]),
            (*lexemes, *where[1], tsquery_text(lexemes), table, k),
        ).fetchall()
    return [(r[0], float(r[1])) for r in rows]


def to_numpy(value: Any) -> Vector:
    """A pgvector value as float32 numpy (the driver may hand back its own Vector type)."""
    raw = value.to_numpy() if hasattr(value, "to_numpy") else value
    return np.asarray(raw, dtype=np.float32)
