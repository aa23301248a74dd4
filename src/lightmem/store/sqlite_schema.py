"""The SQLite schema as named, versioned steps (the one place SQLite tables are defined).

A store records the steps it has applied in ``meta.schema_version`` (and, from step 2 on,
by name in ``schema_migrations``); opening it applies the missing ones in one transaction.
Stores written before the runner existed are at step 1.
"""

from __future__ import annotations

from lightmem.store import entry_time
from lightmem.store.db import Migration
from lightmem.store.schema_tables import (
    SQLITE_TYPES,
    core_tables,
    entry_validity,
    graph_scope,
    graph_tables,
    reembed_vectors,
    update_check_reach,
    update_checks,
)
from lightmem.store.sessions import task_session_steps, task_sessions_table
from lightmem.store.sql import SQLITE

__all__ = ["APP_ID", "MIGRATIONS", "SCHEMA_VERSION"]

APP_ID = 0x4C4D454D  # "LMEM", written to PRAGMA application_id

_TYPES = SQLITE_TYPES

# Vectors as blobs beside their rows; node full text in FTS5.
_OWN_TABLES = """
CREATE TABLE IF NOT EXISTS vectors (
    rid INTEGER PRIMARY KEY REFERENCES entries (rid) ON DELETE CASCADE,
    vec BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS graph_vectors (
    rid INTEGER PRIMARY KEY REFERENCES graph_nodes (rid) ON DELETE CASCADE,
    vec BLOB NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS graph_fts USING fts5 (body, tokenize = 'porter unicode61')
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "initial",
        ";\n".join((core_tables(_TYPES), graph_tables(_TYPES), _OWN_TABLES)),
    ),
    Migration(
        "graph_scope",
        """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL
);
"""
        + graph_scope(SQLITE),
    ),
    Migration("task_sessions", task_sessions_table(_TYPES)),
    # The row id of every entry row written (added = 1) or removed (0), in commit order, so
    # every process updates its search columns in place (SQLite may reuse a removed row's
    # id); and the store's identity for its saved search index.
    Migration(
        "entry_index_log",
        """
CREATE TABLE IF NOT EXISTS index_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, rid INTEGER NOT NULL, added INTEGER NOT NULL
);
INSERT INTO meta VALUES ('index_epoch', lower(hex(randomblob(16)))) ON CONFLICT (key) DO NOTHING
""",
    ),
    Migration(entry_time.STEP, entry_time.add_columns(_TYPES.real)),
    Migration("entry_validity", entry_validity(_TYPES)),
    Migration("task_session_steps", task_session_steps(_TYPES)),
    Migration("reembed_vectors", reembed_vectors("BLOB")),
    Migration("update_checks", update_checks(_TYPES)),
    Migration("update_check_reach", update_check_reach(_TYPES)),
)

SCHEMA_VERSION = len(MIGRATIONS)
