"""``lightmem migrate --from sqlite:PATH --to postgres:DSN``: copy a store, then prove it.

Copies messages (with their buffer state), entries with vectors, the history, the update
queue, the usage ledger and the FluxMem graph (nodes with vectors, edges, and the graph
history with its event numbers, so undo still finds them) in one PostgreSQL transaction,
then compares row counts and content checksums table by table.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Iterable
from typing import Any

from lightmem.errors import InvalidInputError, StoreError
from lightmem.store.graph_sql import NODE_COLS
from lightmem.store.postgres import PostgresStore
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import entry_search_text

_CHECKS = {
    "messages": "SELECT msg_id, user_id, agent_id, run_id, content, status FROM messages",
    "entries": "SELECT id, kind, text, original_text, version, source_ids, context FROM entries",
    "history": "SELECT entry_id, op, version, reason FROM history",
    "graph_nodes": "SELECT id, kind, user_id, agent_id, run_id, text, data, version "
    "FROM graph_nodes",
    "graph_edges": "SELECT kind, src, dst, weight, data FROM graph_edges",
    "graph_history": "SELECT seq, op, target, target_id, before, after, reason FROM graph_history",
}


def migrate(
    src: str,
    dst: str,
    *,
    schema: str = "lightmem",
    skip_graph: bool = False,
    bulk_reindex_min: int = 20_000,
) -> dict[str, Any]:
    if not src.startswith("sqlite:") or not dst.startswith("postgres"):
        raise InvalidInputError("--from: expected sqlite:PATH; --to: expected postgres:DSN")
    path = src.removeprefix("sqlite:")
    dsn = dst.removeprefix("postgres:") if dst.startswith("postgres:postgres") else dst
    source = SQLiteStore(path)  # refuses foreign or newer files, migrates older ones
    try:
        with source.db.read() as snapshot:
            return _migrate(snapshot.raw, schema, dsn, skip_graph, bulk_reindex_min)
    finally:
        source.close()


def _migrate(
    s: sqlite3.Connection,
    schema: str,
    dsn: str,
    skip_graph: bool,
    bulk_reindex_min: int,
) -> dict[str, Any]:
    graph_nodes = s.execute("SELECT count(*) FROM graph_nodes").fetchone()[0]
    bound = s.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    target = PostgresStore(dsn, schema=schema, bulk_reindex_min=bulk_reindex_min)
    try:
        if bound:
            meta = json.loads(bound[0])
            target.bind_embedder(meta["name"], meta["dim"])
        with target.db.transaction() as tx:
            c = tx.raw
            if c.execute("SELECT count(*) FROM entries").fetchone()[0]:
                raise StoreError(f"--to: schema {schema!r} already holds entries")
            _copy_messages(s, c)
            n_entries = s.execute("SELECT count(*) FROM entries").fetchone()[0]
            bulk = n_entries >= target.bulk_reindex_min
            if bulk:
                target.entry_index.drop_search_indexes(c)
            _copy_entries(s, c)
            if bulk:
                target.entry_index.build_search_indexes(c, n_entries)
            _copy_rows(
                c,
                "INSERT INTO history (entry_id, user_id, agent_id, run_id, op, version, "
                "before, after, at, reason) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
                s.execute(
                    "SELECT entry_id, user_id, agent_id, run_id, op, version, before, "
                    "after, at, reason FROM history ORDER BY seq"
                ),
            )
            _copy_rows(
                c,
                "INSERT INTO update_queue VALUES (%s,%s,%s)",
                s.execute("SELECT entry_id, candidates, built_at FROM update_queue"),
            )
            _copy_rows(
                c,
                "INSERT INTO usage VALUES (%s,%s,%s,%s,%s,%s,%s,%s)",
                s.execute("SELECT * FROM usage"),
            )
            if not skip_graph:
                _copy_graph(s, c)
            c.execute("ANALYZE messages, entries, history, graph_nodes, graph_edges, graph_history")
        tables: dict[str, dict[str, Any]] = {}
        with target.db.transaction() as tx:
            c = tx.raw
            for table, sql in _CHECKS.items():
                if skip_graph and table.startswith("graph_"):
                    continue
                a = _digest(s.execute(sql).fetchall(), sqlite_rows=True)
                b = _digest(c.execute(sql).fetchall(), sqlite_rows=False)
                tables[table] = {"rows": a[0], "copied": b[0], "checksum_match": a[1] == b[1]}
        return {
            "schema": schema,
            "graph_nodes_skipped": graph_nodes if skip_graph else 0,
            **tables,
            "verified": all(
                t["rows"] == t["copied"] and t["checksum_match"] for t in tables.values()
            ),
        }
    finally:
        target.close()


def _copy_rows(c: Any, sql: str, rows: Iterable[tuple[Any, ...]]) -> None:
    with c.cursor() as cur:
        cur.executemany(sql, list(rows))


def _copy_messages(s: sqlite3.Connection, c: Any) -> None:
    _copy_rows(
        c,
        "INSERT INTO messages (msg_id, user_id, agent_id, run_id, role, content, compressed, "
        "ts, time_text, speaker_id, speaker_name, metadata, status, topic_id, created_at) "
        "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
        s.execute(
            "SELECT msg_id, user_id, agent_id, run_id, role, content, compressed, ts, "
            "time_text, speaker_id, speaker_name, metadata, status, topic_id, created_at "
            "FROM messages ORDER BY seq"
        ),
    )


def _copy_entries(s: sqlite3.Connection, c: Any) -> None:
    import numpy as np

    rows = []
    for r in s.execute(
        "SELECT e.id, e.kind, e.user_id, e.agent_id, e.run_id, e.text, e.original_text, e.ts, "
        "e.speaker_id, e.speaker_name, e.topic_id, e.source_ids, e.context, e.version, "
        "e.created_at, e.updated_at, e.metadata, e.superseded_by, e.valid_to, e.speaker_key, "
        "v.vec FROM entries e JOIN vectors v ON v.rid = e.rid ORDER BY e.rid"
    ):
        speaker = r[9] or r[8]
        rows.append(
            (
                *r[:20],
                entry_search_text(speaker, r[6], r[12]),
                np.frombuffer(r[20], dtype=np.float32),
            )
        )
    _copy_rows(
        c,
        "INSERT INTO entries (id, kind, user_id, agent_id, run_id, text, original_text, ts, "
        "speaker_id, speaker_name, topic_id, source_ids, context, version, created_at, "
        "updated_at, metadata, superseded_by, valid_to, speaker_key, search_text, embedding) "
        "VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
        rows,
    )


def _copy_graph(s: sqlite3.Connection, c: Any) -> None:
    import numpy as np

    _copy_rows(
        c,
        f"INSERT INTO graph_nodes ({NODE_COLS}, embedding) VALUES "
        "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
        (
            (*r[:10], np.frombuffer(r[10], dtype=np.float32))
            for r in s.execute(
                f"SELECT {', '.join('n.' + col for col in NODE_COLS.split(', '))}, v.vec "
                "FROM graph_nodes n JOIN graph_vectors v ON v.rid = n.rid ORDER BY n.rid"
            )
        ),
    )
    _copy_rows(
        c,
        "INSERT INTO graph_edges (kind, src, dst, weight, data, created_at, user_id, agent_id, "
        "run_id) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s)",
        s.execute(
            "SELECT kind, src, dst, weight, data, created_at, user_id, agent_id, run_id "
            "FROM graph_edges"
        ),
    )
    _copy_rows(
        c,
        "INSERT INTO graph_history (seq, op, target, target_id, before, after, at, reason, "
        "user_id, agent_id, run_id) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
        s.execute(
            "SELECT seq, op, target, target_id, before, after, at, reason, user_id, agent_id, "
            "run_id FROM graph_history ORDER BY seq"
        ),
    )
    # New events continue after the copied ones.
    c.execute(
        "SELECT setval(pg_get_serial_sequence('graph_history', 'seq'), "
        "coalesce(max(seq), 0) + 1, false) FROM graph_history"
    )


def _digest(rows: list[tuple[Any, ...]], *, sqlite_rows: bool) -> tuple[int, str]:
    """Row count and an order-independent checksum; JSON columns compared as values."""
    canon = []
    for r in rows:
        values = []
        for v in r:
            if sqlite_rows and isinstance(v, str) and v[:1] in "[{":
                with contextlib.suppress(ValueError):
                    v = json.loads(v)
            values.append(json.dumps(v, sort_keys=True, ensure_ascii=False))
        canon.append("\x1f".join(values))
    h = hashlib.sha256("\n".join(sorted(canon)).encode()).hexdigest()
    return len(rows), h
