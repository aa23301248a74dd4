"""The PostgreSQL schema as named, versioned steps (the one place its tables are defined).

Applied by :func:`lightmem.store.postgres_db.apply_migrations`: each missing step once, in
order, in one transaction, one migrator at a time; the list only grows.
"""

from __future__ import annotations

from lightmem.store.db import Migration

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        "initial",
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
    ),
    # 2: the FluxMem graph. Node vectors are searched exactly (graphs hold thousands of
    # nodes, and an unsized column takes any embedder's dimension).
    Migration(
        "graph",
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
    ),
    # 3: FluxMem scope: edges and graph history carry the scope of the node they concern,
    # so history, undo, edges and counts filter by it (rows written before get their node's).
    Migration(
        "graph_scope",
        """
    ALTER TABLE graph_edges ADD COLUMN IF NOT EXISTS user_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE graph_edges ADD COLUMN IF NOT EXISTS agent_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE graph_edges ADD COLUMN IF NOT EXISTS run_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE graph_history ADD COLUMN IF NOT EXISTS user_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE graph_history ADD COLUMN IF NOT EXISTS agent_id TEXT NOT NULL DEFAULT '';
    ALTER TABLE graph_history ADD COLUMN IF NOT EXISTS run_id TEXT NOT NULL DEFAULT '';
    UPDATE graph_edges SET user_id = n.user_id, agent_id = n.agent_id, run_id = n.run_id
        FROM graph_nodes n WHERE n.id = graph_edges.src;
    UPDATE graph_history SET
        user_id = coalesce(coalesce(after, before)->>'user_id', ''),
        agent_id = coalesce(coalesce(after, before)->>'agent_id', ''),
        run_id = coalesce(coalesce(after, before)->>'run_id', '')
        WHERE target = 'node';
    UPDATE graph_history SET user_id = n.user_id, agent_id = n.agent_id, run_id = n.run_id
        FROM graph_nodes n
        WHERE graph_history.target = 'edge' AND n.id = coalesce(after, before)->>'src';
    CREATE INDEX IF NOT EXISTS graph_history_scope ON graph_history (user_id, agent_id, run_id);
    CREATE INDEX IF NOT EXISTS graph_edges_scope ON graph_edges (user_id, agent_id, run_id);
    """,
    ),
)
