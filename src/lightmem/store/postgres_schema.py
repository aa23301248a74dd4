"""The PostgreSQL schema as named, versioned steps (the one place its tables are defined).

Applied by :func:`lightmem.store.postgres_db.apply_migrations`: each missing step once, in
order, in one transaction, one migrator at a time; the list only grows.
"""

from __future__ import annotations

from dataclasses import replace

from lightmem.store.db import Migration
from lightmem.store.schema_tables import (
    POSTGRES_TYPES,
    core_tables,
    entry_validity,
    graph_scope,
    graph_tables,
)
from lightmem.store.sql import POSTGRES

_TYPES = replace(
    POSTGRES_TYPES,
    # The entry vector column is added when the embedder is bound (it fixes the size).
    entry_extra=",\n    search_text TEXT NOT NULL,\n"
    "    tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED",
    # Node vectors are unsized (any embedder) and ranked exactly in the database.
    node_extra=",\n    embedding vector NOT NULL,\n"
    "    tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "initial",
        core_tables(_TYPES)
        + ";\nCREATE INDEX IF NOT EXISTS entries_tsv ON entries USING gin (tsv)",
    ),
    Migration(
        "graph",
        graph_tables(_TYPES)
        + ";\nCREATE INDEX IF NOT EXISTS graph_nodes_tsv ON graph_nodes USING gin (tsv)",
    ),
    Migration("graph_scope", graph_scope(POSTGRES)),
    Migration("entry_validity", entry_validity(_TYPES)),
)
