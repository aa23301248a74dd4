"""The tables both SQL backends share, written once; each backend's schema module fills in
its column types and adds what only it has (vector tables, generated full-text columns)."""

from __future__ import annotations

from dataclasses import dataclass

from lightmem.store.sql import Dialect

__all__ = [
    "POSTGRES_TYPES",
    "SQLITE_TYPES",
    "ColumnTypes",
    "core_tables",
    "entry_validity",
    "graph_scope",
    "graph_tables",
    "reembed_vectors",
    "update_check_reach",
    "update_checks",
]


@dataclass(frozen=True, slots=True)
class ColumnTypes:
    serial: str  # an auto-numbered primary key
    history_serial: str  # one whose numbers are never reused (undo finds events by them)
    real: str
    json: str
    counter: str  # a count that may grow large
    entry_extra: str = ""  # further entries columns, each line starting with ",\n"
    node_extra: str = ""  # further graph_nodes columns
    #: how a step adds a column (where the backend can, one that is there already is kept)
    add_column: str = "ADD COLUMN"


#: Column types per backend (each schema module adds its own extras).
SQLITE_TYPES = ColumnTypes(
    "INTEGER PRIMARY KEY", "INTEGER PRIMARY KEY AUTOINCREMENT", "REAL", "TEXT", "INTEGER"
)
POSTGRES_TYPES = ColumnTypes(
    "BIGSERIAL PRIMARY KEY",
    "BIGSERIAL PRIMARY KEY",
    "DOUBLE PRECISION",
    "JSONB",
    "BIGINT",
    add_column="ADD COLUMN IF NOT EXISTS",
)


def core_tables(t: ColumnTypes) -> str:
    """Messages, entries, history, update queue and usage ledger."""
    return f"""
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    seq {t.serial},
    msg_id TEXT NOT NULL,
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    role TEXT NOT NULL, content TEXT NOT NULL, compressed TEXT NOT NULL,
    ts {t.real}, time_text TEXT NOT NULL,
    speaker_id TEXT NOT NULL, speaker_name TEXT NOT NULL,
    metadata {t.json} NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'segmented', 'extracted')),
    topic_id TEXT NOT NULL DEFAULT '',
    created_at {t.real} NOT NULL,
    UNIQUE (user_id, agent_id, run_id, msg_id)
);
CREATE INDEX IF NOT EXISTS messages_status ON messages (status, user_id, agent_id, run_id);
CREATE TABLE IF NOT EXISTS entries (
    rid {t.serial},
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('entry', 'summary', 'event')),
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    text TEXT NOT NULL, original_text TEXT NOT NULL,
    ts {t.real},
    speaker_id TEXT NOT NULL, speaker_name TEXT NOT NULL, speaker_key TEXT NOT NULL,
    topic_id TEXT NOT NULL,
    source_ids {t.json} NOT NULL,
    context TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at {t.real} NOT NULL, updated_at {t.real} NOT NULL,
    metadata {t.json} NOT NULL{t.entry_extra}
);
CREATE INDEX IF NOT EXISTS entries_scope ON entries (user_id, agent_id, run_id);
CREATE INDEX IF NOT EXISTS entries_topic ON entries (topic_id);
CREATE TABLE IF NOT EXISTS history (
    seq {t.history_serial},
    entry_id TEXT NOT NULL,
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('add', 'update', 'delete', 'restore')),
    version INTEGER NOT NULL,
    before {t.json}, after {t.json},
    at {t.real} NOT NULL, reason TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS history_entry ON history (entry_id, seq);
CREATE TABLE IF NOT EXISTS update_queue (
    entry_id TEXT PRIMARY KEY, candidates {t.json} NOT NULL, built_at {t.real} NOT NULL
);
CREATE TABLE IF NOT EXISTS usage (
    kind TEXT NOT NULL, op TEXT NOT NULL,
    calls {t.counter} NOT NULL, items {t.counter} NOT NULL,
    prompt_tokens {t.counter} NOT NULL, completion_tokens {t.counter} NOT NULL,
    latency_s {t.real} NOT NULL, errors {t.counter} NOT NULL,
    PRIMARY KEY (kind, op)
)
"""


def graph_tables(t: ColumnTypes) -> str:
    """The FluxMem graph: nodes, typed weighted edges, the reversible history."""
    return f"""
CREATE TABLE IF NOT EXISTS graph_nodes (
    rid {t.serial},
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('semantic', 'episodic', 'procedural')),
    user_id TEXT NOT NULL, agent_id TEXT NOT NULL, run_id TEXT NOT NULL,
    text TEXT NOT NULL,
    data {t.json} NOT NULL,
    version INTEGER NOT NULL,
    created_at {t.real} NOT NULL, updated_at {t.real} NOT NULL{t.node_extra}
);
CREATE INDEX IF NOT EXISTS graph_nodes_kind ON graph_nodes (kind, user_id, agent_id, run_id);
CREATE TABLE IF NOT EXISTS graph_edges (
    kind TEXT NOT NULL CHECK (kind IN ('ground', 'distill', 'step')),
    src TEXT NOT NULL, dst TEXT NOT NULL,
    weight {t.real} NOT NULL,
    data {t.json} NOT NULL,
    created_at {t.real} NOT NULL,
    PRIMARY KEY (kind, src, dst)
);
CREATE INDEX IF NOT EXISTS graph_edges_dst ON graph_edges (dst, kind);
CREATE TABLE IF NOT EXISTS graph_history (
    seq {t.history_serial},
    op TEXT NOT NULL,
    target TEXT NOT NULL CHECK (target IN ('node', 'edge')),
    target_id TEXT NOT NULL,
    before {t.json}, after {t.json},
    at {t.real} NOT NULL, reason TEXT NOT NULL
)
"""


def graph_scope(d: Dialect) -> str:
    """Edges and graph history carry the scope of the node they concern, so history, undo,
    edges and counts filter by it. Rows written before get their node's scope (an edge
    whose source node is gone keeps the default scope)."""
    snap = "coalesce(after, before)"
    adds = "".join(
        f"ALTER TABLE {table} ADD COLUMN {col} TEXT NOT NULL DEFAULT '';\n"
        for table in ("graph_edges", "graph_history")
        for col in ("user_id", "agent_id", "run_id")
    )
    own = ",\n    ".join(
        f"{col} = coalesce({d.json_text(snap, col)}, '')"
        for col in ("user_id", "agent_id", "run_id")
    )
    return f"""
{adds}UPDATE graph_edges SET user_id = n.user_id, agent_id = n.agent_id, run_id = n.run_id
    FROM graph_nodes n WHERE n.id = graph_edges.src;
UPDATE graph_history SET
    {own}
    WHERE target = 'node';
UPDATE graph_history SET user_id = n.user_id, agent_id = n.agent_id, run_id = n.run_id
    FROM graph_nodes n
    WHERE graph_history.target = 'edge' AND n.id = {d.json_text(snap, "src")};
CREATE INDEX IF NOT EXISTS graph_history_scope ON graph_history (user_id, agent_id, run_id);
CREATE INDEX IF NOT EXISTS graph_edges_scope ON graph_edges (user_id, agent_id, run_id)
"""


def entry_validity(t: ColumnTypes) -> str:
    """Knowledge updates: an entry superseded by a later one keeps its row and says which
    entry replaced it and from when (NULL on every entry written before: all current)."""
    return f"""
ALTER TABLE entries ADD COLUMN superseded_by TEXT;
ALTER TABLE entries ADD COLUMN valid_to {t.real};
CREATE INDEX IF NOT EXISTS entries_superseded_by ON entries (superseded_by)
"""


def reembed_vectors(blob: str) -> str:
    """Vectors computed by an interrupted or running re-embed (:mod:`lightmem.store.reembed`),
    by target embedder and text digest: a rerun resumes from them, the switch clears them."""
    return f"""
CREATE TABLE IF NOT EXISTS reembed_vectors (
    embedder TEXT NOT NULL, digest TEXT NOT NULL, vec {blob} NOT NULL,
    PRIMARY KEY (embedder, digest)
)
"""


def update_checks(t: ColumnTypes) -> str:
    """What the offline update last asked of each entry, per stage (``decide``, ``review``):
    a digest of the updater and of the entries it was shown (ids and versions), so a later
    pass asks again only what changed (:func:`lightmem.pipeline.update.run_update`)."""
    return f"""
CREATE TABLE IF NOT EXISTS update_checks (
    entry_id TEXT NOT NULL, stage TEXT NOT NULL, digest TEXT NOT NULL,
    checked_at {t.real} NOT NULL,
    PRIMARY KEY (entry_id, stage)
)
"""


def update_check_reach(t: ColumnTypes) -> str:
    """What a check says besides its digest, so that what changes reaches the checks it
    concerns (:mod:`lightmem.pipeline.update_pending`): ``updater_key``, the updater and
    code it was made under (:func:`lightmem.pipeline.update_checks.checks_key`; another
    one makes the entry pending); ``min_score``, at the review the likeness of the last of
    the nearest earlier entries shown (NULL: fewer than were asked for, so any earlier
    entry joins them), so an earlier entry new or changed and at least this like it
    changes what it is shown; ``moved_at``, when the latest such entry changed (the check is
    out of date while that is after ``checked_at``, the time of the view it was made from)."""
    return f"""
ALTER TABLE update_checks {t.add_column} updater_key TEXT NOT NULL DEFAULT '';
ALTER TABLE update_checks {t.add_column} min_score {t.real};
ALTER TABLE update_checks {t.add_column} moved_at {t.real} NOT NULL DEFAULT 0
"""
