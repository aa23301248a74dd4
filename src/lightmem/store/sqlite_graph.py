"""FluxMem's graph in the lightmem SQLite file: same connection, lock and transactions."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from lightmem.fluxmem.types import Node, NodeKind
from lightmem.store.base import ScoredId, Vector
from lightmem.store.graph_sql import NODE_COLS, SQLGraphStore, node_params, top_k
from lightmem.store.sql import SQLITE, scope_sql
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import Scope


class SQLiteGraphStore(SQLGraphStore):
    """A :class:`~lightmem.store.graph.GraphStore` sharing a :class:`SQLiteStore`'s file.

    Node vectors are searched exactly from an in-memory matrix per (kind, scope), rebuilt
    when the file changed (any process); full text is FTS5 with BM25."""

    dialect = SQLITE

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn = store._conn
        self._cache: dict[tuple[str, Scope], tuple[list[str], Vector]] = {}
        self._cache_version: int | None = None

    def _tx(self) -> Any:
        return self._store._tx()

    @contextmanager
    def _read(self) -> Iterator[Any]:
        with self._store._lock:
            yield self._conn

    def _changed(self) -> None:
        self._cache.clear()

    def _insert_row(self, c: Any, n: Node, vec: Vector) -> None:
        cur = c.execute(
            f"INSERT INTO graph_nodes ({NODE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)", node_params(n)
        )
        rid = cur.lastrowid
        c.execute("INSERT INTO graph_vectors (rid, vec) VALUES (?, ?)", (rid, vec.tobytes()))
        c.execute("INSERT INTO graph_fts (rowid, body) VALUES (?, ?)", (rid, n.text))

    def _delete_row(self, c: Any, node_id: str) -> None:
        row = c.execute("SELECT rid FROM graph_nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            return
        c.execute("DELETE FROM graph_fts WHERE rowid = ?", (row[0],))
        c.execute("DELETE FROM graph_vectors WHERE rid = ?", (row[0],))
        c.execute("DELETE FROM graph_nodes WHERE rid = ?", (row[0],))

    # -- search -----------------------------------------------------------------------------
    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]:
        with self._store._lock:
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._cache_version:
                self._cache.clear()
                self._cache_version = version
            key = (kind, scope)
            if key not in self._cache:
                where, params = scope_sql(SQLITE, scope, "n.")
                rows = self._conn.execute(
                    "SELECT n.id, v.vec FROM graph_nodes n JOIN graph_vectors v ON v.rid = n.rid "
                    f"WHERE n.kind = ? AND {where} ORDER BY n.rid",
                    (kind, *params),
                ).fetchall()
                ids = [r[0] for r in rows]
                if rows:
                    matrix = np.vstack([np.frombuffer(r[1], dtype=np.float32) for r in rows])
                else:
                    matrix = np.zeros((0, 0), dtype=np.float32)
                self._cache[key] = (ids, matrix)
            return self._cache[key]

    def vector_search(self, kind: NodeKind, query: Vector, scope: Scope, k: int) -> list[ScoredId]:
        ids, matrix = self.node_vectors(kind, scope)
        return top_k(ids, matrix, query, k)

    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]:
        if not terms or k <= 0:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        where, params = scope_sql(SQLITE, scope, "n.")
        with self._store._lock:
            rows = self._conn.execute(
                "SELECT n.id, bm25(graph_fts) AS s FROM graph_fts "
                "JOIN graph_nodes n ON n.rid = graph_fts.rowid "
                f"WHERE graph_fts MATCH ? AND n.kind = ? AND {where} ORDER BY s LIMIT ?",
                (match, kind, *params, k),
            ).fetchall()
        return [(r[0], -float(r[1])) for r in rows]
