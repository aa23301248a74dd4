"""The PostgreSQL + pgvector backend: the same MemoryStore, for many processes and machines.

Vectors live in a pgvector column with an HNSW index (inner product on unit vectors,
``ef_search`` tunable); full text from pre-segmented, stemmed ``search_terms`` (the SQLite
BM25 index's terms, :mod:`lightmem.store.postgres_terms`), entries through a postings table
and graph nodes through a ``tsvector``, ranked by the same BM25 as the SQLite store's.
The schema is created and migrated by the library (:mod:`lightmem.store.postgres_schema`,
versioned, safe to run twice); every operation is one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lightmem.store.entries import SQLStore
from lightmem.store.graph_sql import SQLGraphStore
from lightmem.store.postgres_db import PostgresDatabase, apply_migrations, open_pool
from lightmem.store.postgres_schema import MIGRATIONS
from lightmem.store.postgres_search import PostgresEntryIndex, PostgresNodeIndex, to_numpy
from lightmem.store.postgres_terms import (
    entry_terms,
    fill_search_terms,
    query_lexemes,
    tsquery_text,
)
from lightmem.store.size_limit import SizeLimit
from lightmem.store.text_index import Stemmer
from lightmem.store.values import DEFAULT_EF_SEARCH, Vector
from lightmem.types import MemoryEntry

__all__ = [
    "MIGRATIONS",
    "PostgresStore",
    "apply_migrations",
    "open_pool",
    "query_lexemes",
    "to_numpy",
    "tsquery_text",
]


class PostgresStore(SQLStore):
    """A :class:`~lightmem.store.base.MemoryStore` in PostgreSQL (schema ``schema``).

    ``vector_index``: what a new HNSW index holds, ``"halfvec"`` (half-precision copies of
    the vectors: half the index size and build memory, results re-scored from the stored
    full-precision vectors) or ``"vector"`` (the vectors as stored); searches follow the
    index a store already has."""

    parallel_reads = True  # each search on a pooled connection, in a backend of its own

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "lightmem",
        pool_size: int = 8,
        ef_search: int = DEFAULT_EF_SEARCH,
        connect_timeout_s: float = 10.0,
        build_workers: int = 2,
        bulk_reindex_min: int = 20_000,
        vector_index: str = "halfvec",
        max_bytes: int | None = None,
    ) -> None:
        db = PostgresDatabase(
            dsn,
            schema,
            MIGRATIONS,
            pool_size=pool_size,
            connect_timeout_s=connect_timeout_s,
        )
        limit = SizeLimit(db, max_bytes)
        self.schema = schema
        self.stemmer = Stemmer()  # one per store: it memoises stems
        self.entry_index = PostgresEntryIndex(
            db,
            self.stemmer,
            ef_search=ef_search,
            build_workers=build_workers,
            bulk_reindex_min=bulk_reindex_min,
            vector_index=vector_index,
        )
        graph = SQLGraphStore(db, PostgresNodeIndex(db, self.stemmer), limit)
        super().__init__(db, self.entry_index, graph, limit)
        self.pg = db

    def import_entries(
        self, rows: Iterable[tuple[MemoryEntry, Vector]], reason: str = "imported"
    ) -> int:
        """As :meth:`SQLStore.import_entries`, then ``VACUUM (ANALYZE)`` of the postings: a
        bulk load leaves their visibility map empty, and until autovacuum came by every
        index-only read of a query word's postings would visit the table too (at 1M
        entries a 3-word text search took 23 ms instead of 4)."""
        n = super().import_entries(rows, reason)
        self.pg.vacuum(("entry_postings",), "VACUUM (ANALYZE)", f"{n} entries imported")
        return n

    def fill_search_terms(self, conn: Any) -> int:
        """In transaction ``conn``: compute ``search_terms`` for entries and graph nodes
        written without them (rows copied in by SQL); returns how many."""
        return fill_search_terms(conn, "entries", "search_text", self.stemmer, entry_terms) + (
            fill_search_terms(conn, "graph_nodes", "text", self.stemmer)
        )

    @property
    def bulk_reindex_min(self) -> int:
        """Bulk loads at least this large (and as large as the table) rebuild the indexes."""
        return self.entry_index.bulk_reindex_min

    @bulk_reindex_min.setter
    def bulk_reindex_min(self, value: int) -> None:
        self.entry_index.bulk_reindex_min = value

    @property
    def ef_search(self) -> int:
        """HNSW candidate list size of vector searches (recall against speed)."""
        return self.entry_index.ef_search

    @ef_search.setter
    def ef_search(self, value: int) -> None:
        self.entry_index.ef_search = value

    def drop(self) -> None:
        """Delete this store's schema and everything in it (tests, benchmarks)."""
        self.pg.drop()
