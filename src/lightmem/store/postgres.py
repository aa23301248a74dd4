"""The PostgreSQL + pgvector backend: the same MemoryStore, for many processes and machines.

Vectors live in a pgvector column with an HNSW index (inner product on unit vectors,
``ef_search`` tunable); full text in a generated ``tsvector`` ranked with ``ts_rank_cd``
(see :mod:`lightmem.store.postgres_search` for how rankings differ from SQLite's BM25).
The schema is created and migrated by the library (:mod:`lightmem.store.postgres_schema`,
versioned, safe to run twice); every operation is one transaction.
"""

from __future__ import annotations

from lightmem.store.entries import SQLStore
from lightmem.store.graph_sql import SQLGraphStore
from lightmem.store.postgres_db import PostgresDatabase, apply_migrations, open_pool
from lightmem.store.postgres_schema import MIGRATIONS
from lightmem.store.postgres_search import (
    PostgresEntryIndex,
    PostgresNodeIndex,
    search_terms,
    to_numpy,
)

__all__ = [
    "MIGRATIONS",
    "PostgresStore",
    "apply_migrations",
    "open_pool",
    "search_terms",
    "to_numpy",
]


class PostgresStore(SQLStore):
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
        db = PostgresDatabase(
            dsn, schema, MIGRATIONS, pool_size=pool_size, connect_timeout_s=connect_timeout_s
        )
        self.schema = schema
        self.entry_index = PostgresEntryIndex(
            db, ef_search=ef_search, build_workers=build_workers, bulk_reindex_min=bulk_reindex_min
        )
        super().__init__(db, self.entry_index, SQLGraphStore(db, PostgresNodeIndex(db)))
        self.pg = db

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
