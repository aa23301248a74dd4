"""The PostgreSQL schema as named, versioned steps (the one place its tables are defined).

Applied by :func:`lightmem.store.postgres_db.apply_migrations`: each missing step once, in
order, in one transaction, one migrator at a time; the list only grows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from lightmem.store import entry_time
from lightmem.store.db import Migration
from lightmem.store.postgres_terms import (
    CAP_ENTRY_TERMS_SQL,
    POSTINGS_FUNCTION_SQL,
    POSTINGS_SQL,
    entry_terms,
    fill_search_terms,
)
from lightmem.store.schema_tables import (
    POSTGRES_TYPES,
    core_tables,
    entry_validity,
    graph_scope,
    graph_tables,
    reembed_vectors,
    update_check_reach,
    update_checks,
)
from lightmem.store.sessions import task_session_steps, task_sessions_table
from lightmem.store.sql import POSTGRES
from lightmem.store.text_index import Stemmer

__all__ = ["MIGRATIONS", "FilledMigration", "hnsw_build_settings"]

_TYPES = replace(
    POSTGRES_TYPES,
    # The entry vector column is added when the embedder is bound (it fixes the size).
    entry_extra=",\n    search_text TEXT NOT NULL,\n"
    "    tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', search_text)) STORED",
    # Node vectors are unsized (any embedder) and ranked exactly in the database.
    node_extra=",\n    embedding vector NOT NULL,\n"
    "    tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text)) STORED",
)


@dataclass(frozen=True, slots=True)
class FilledMigration(Migration):
    """A step whose SQL is followed, in the same transaction, by ``fill``: Python that
    computes values for existing rows (and finishes the step), given the connection."""

    fill: Callable[[Any], None]


def hnsw_build_settings(rows: int, vector_bytes: int, workers: int = 2) -> str:
    """``SET LOCAL`` statements for an HNSW build over ``rows`` vectors: the build is
    several times faster when its graph fits in memory, so ask for what the table needs
    (vectors plus neighbour lists), within bounds."""
    need_mb = rows * (vector_bytes + 1024) // 2**20
    return (
        f"SET LOCAL maintenance_work_mem = '{min(max(need_mb, 64), 8192)}MB'; "
        f"SET LOCAL max_parallel_maintenance_workers = {int(workers)}"
    )


# Full text from pre-segmented, Snowball-stemmed terms (lightmem.store.postgres_terms),
# for Chinese and Japanese and for the same terms as the SQLite BM25 index: the tsvector
# holds them verbatim (no parser, no locale). BM25 needs each table's document count and
# total length, kept exact by statement triggers in a few rows per table (writers spread
# over them by backend, so they rarely wait on each other). A generated column's
# expression cannot be altered: it is dropped, the terms are filled in, and it is added
# again over them.
_TEXT_TABLES = ("entries", "graph_nodes")
_SEARCH_TERMS_BEFORE = """
CREATE TABLE IF NOT EXISTS text_stats (
    tbl TEXT NOT NULL, shard INTEGER NOT NULL,
    docs BIGINT NOT NULL, terms BIGINT NOT NULL,
    PRIMARY KEY (tbl, shard)
);
CREATE OR REPLACE FUNCTION text_stats_count() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    d_docs BIGINT := 0;
    d_terms BIGINT := 0;
BEGIN
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        SELECT d_docs + count(*),
               d_terms + coalesce(sum(cardinality(string_to_array(search_terms, ' '))), 0)
          INTO d_docs, d_terms FROM new_rows;
    END IF;
    IF TG_OP IN ('DELETE', 'UPDATE') THEN
        SELECT d_docs - count(*),
               d_terms - coalesce(sum(cardinality(string_to_array(search_terms, ' '))), 0)
          INTO d_docs, d_terms FROM old_rows;
    END IF;
    IF d_docs <> 0 OR d_terms <> 0 THEN
        UPDATE text_stats SET docs = docs + d_docs, terms = terms + d_terms
         WHERE tbl = TG_TABLE_NAME AND shard = mod(pg_backend_pid(), 8);
    END IF;
    RETURN NULL;
END
$$""" + "".join(
    f""";
DROP INDEX IF EXISTS {t}_tsv;
ALTER TABLE {t} DROP COLUMN IF EXISTS tsv;
ALTER TABLE {t} ADD COLUMN IF NOT EXISTS search_terms TEXT;
INSERT INTO text_stats SELECT '{t}', g, 0, 0 FROM generate_series(0, 7) AS g
    ON CONFLICT DO NOTHING;
UPDATE text_stats SET docs = (SELECT count(*) FROM {t}) WHERE tbl = '{t}' AND shard = 0;
CREATE OR REPLACE TRIGGER {t}_stats_insert AFTER INSERT ON {t} REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_stats_count();
CREATE OR REPLACE TRIGGER {t}_stats_delete AFTER DELETE ON {t} REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_stats_count();
CREATE OR REPLACE TRIGGER {t}_stats_update AFTER UPDATE ON {t}
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION text_stats_count()"""
    for t in _TEXT_TABLES
)
_SEARCH_TERMS_AFTER = ";\n".join(
    f"""ALTER TABLE {t} ADD COLUMN tsv TSVECTOR GENERATED ALWAYS AS
    (array_to_tsvector(string_to_array(coalesce(search_terms, ''), ' '))) STORED;
CREATE INDEX IF NOT EXISTS {t}_tsv ON {t} USING gin (tsv)"""
    for t in _TEXT_TABLES
)


def _fill_terms(conn: Any) -> None:
    # Filling a column rewrites every row, and each new row version would be inserted into
    # the HNSW index one at a time (about a millisecond each): drop it and build it once.
    found = conn.execute(
        "SELECT indexdef FROM pg_indexes "
        "WHERE schemaname = current_schema() AND indexname = 'entries_hnsw'"
    ).fetchone()
    if found is not None:  # the embedding column exists too
        size = conn.execute(
            "SELECT count(*), max(pg_column_size(embedding)) FROM entries"
        ).fetchone()
        conn.execute("DROP INDEX entries_hnsw")
    stemmer = Stemmer()
    fill_search_terms(conn, "entries", "search_text", stemmer, entry_terms)
    fill_search_terms(conn, "graph_nodes", "text", stemmer)
    conn.execute(_SEARCH_TERMS_AFTER)
    if found is not None:
        conn.execute(hnsw_build_settings(int(size[0]), int(size[1] or 0)))
        conn.execute(found[0])


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
    Migration(entry_time.STEP, entry_time.add_columns(_TYPES.real)),
    Migration("entry_validity", entry_validity(_TYPES)),
    FilledMigration("pg_search_terms", _SEARCH_TERMS_BEFORE, _fill_terms),
    Migration("task_sessions", task_sessions_table(_TYPES)),
    Migration("task_session_steps", task_session_steps(_TYPES)),
    Migration("reembed_vectors", reembed_vectors("BYTEA")),
    # Entries ranked from postings (lightmem.store.postgres_terms): filled from the terms
    # existing entries hold; their GIN index and tsvector are no longer read.
    Migration("pg_entry_postings", POSTINGS_SQL),
    # An entry's keyword terms are its first MAX_DOCUMENT_TERMS (lightmem.store.text_index).
    Migration("pg_entry_terms_cap", CAP_ENTRY_TERMS_SQL),
    Migration("update_checks", update_checks(_TYPES)),
    # The postings trigger splits each row's terms once (it split them once per term).
    Migration("pg_postings_split_once", POSTINGS_FUNCTION_SQL),
    Migration("update_check_reach", update_check_reach(_TYPES)),
)
