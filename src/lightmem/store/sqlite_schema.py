"""The SQLite schema as named, versioned steps (the one place SQLite tables are defined).

A store records the steps it has applied in ``meta.schema_version`` (and, from step 2 on,
by name in ``schema_migrations``); opening it applies the missing ones in one transaction.
Stores written before the runner existed are at step 1.
"""

from __future__ import annotations

from lightmem.store.db import Migration

APP_ID = 0x4C4D454D  # "LMEM", written to PRAGMA application_id

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "initial",
        """
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
""",
    ),
    # FluxMem scope: edges and graph history carry the scope of the node they concern, so
    # history, undo, edges and counts can be filtered by it. Rows written before are given
    # their node's scope; an edge whose source node is gone keeps the default scope.
    Migration(
        "graph_scope",
        """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL
);
ALTER TABLE graph_edges ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE graph_edges ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE graph_edges ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE graph_history ADD COLUMN user_id TEXT NOT NULL DEFAULT '';
ALTER TABLE graph_history ADD COLUMN agent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE graph_history ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
UPDATE graph_edges SET user_id = n.user_id, agent_id = n.agent_id, run_id = n.run_id
    FROM graph_nodes n WHERE n.id = graph_edges.src;
UPDATE graph_history SET
    user_id = coalesce(json_extract(coalesce(after, before), '$.user_id'), ''),
    agent_id = coalesce(json_extract(coalesce(after, before), '$.agent_id'), ''),
    run_id = coalesce(json_extract(coalesce(after, before), '$.run_id'), '')
    WHERE target = 'node' AND json_valid(coalesce(after, before));
UPDATE graph_history SET user_id = n.user_id, agent_id = n.agent_id, run_id = n.run_id
    FROM graph_nodes n
    WHERE graph_history.target = 'edge'
    AND json_valid(coalesce(after, before))
    AND n.id = json_extract(coalesce(after, before), '$.src');
CREATE INDEX IF NOT EXISTS graph_history_scope ON graph_history (user_id, agent_id, run_id);
CREATE INDEX IF NOT EXISTS graph_edges_scope ON graph_edges (user_id, agent_id, run_id)
""",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)
