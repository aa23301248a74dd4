"""SQLite's search pieces: exact numpy vector search and BM25 over an in-memory snapshot of
the entries (rebuilt or extended when the file changed), and FTS5 + exact vectors for the
FluxMem graph's nodes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lightmem.store.db import Session
from lightmem.store.entries import BulkLoad
from lightmem.store.graph_sql import NODE_COLS, node_params, top_k
from lightmem.store.sql import SQLITE, scope_sql
from lightmem.store.sqlite_db import SQLiteDatabase
from lightmem.store.text_index import BM25Index, Stemmer
from lightmem.store.values import ScoredId, Vector
from lightmem.store.vector_cache import VectorRows
from lightmem.types import Filters, MemoryEntry, Node, NodeKind, Scope, entry_search_text

_CACHE_ROWS = (
    "SELECT e.id, e.user_id, e.agent_id, e.run_id, e.ts, e.speaker_key, "
    "e.topic_id, e.kind, v.vec, "
    "CASE WHEN json_valid(e.metadata) THEN json_extract(e.metadata, '$.event_id') END, "
    "CASE WHEN e.speaker_name != '' THEN e.speaker_name ELSE e.speaker_id END, "
    "e.original_text, e.context, e.rid "
    "FROM entries e JOIN vectors v ON v.rid = e.rid WHERE e.rid > ? ORDER BY e.rid"
)


class SQLiteEntryIndex:
    """Vectors in a ``vectors`` table, searched exactly from a cached matrix; BM25 over the
    same snapshot. Appended entries extend the cache; any other change (an update, delete
    or restore, counted in ``meta.rewrites`` so other processes see it too) rebuilds it."""

    extra_columns: tuple[str, ...] = ()

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db
        self.dim: int | None = None
        self.stemmer = Stemmer()
        self.cache: VectorRows | None = None
        self._seen: tuple[int, int] | None = None  # (data_version, own commits)
        self._rewrites = 0
        self._max_rid = 0

    def extra_values(self, e: MemoryEntry, vec: Vector) -> tuple[Any, ...]:
        return ()

    def on_first_bind(self, s: Session, dim: int) -> None:
        pass  # vectors are blobs: nothing to create

    def after_insert(self, s: Session, rid: int, e: MemoryEntry, vec: Vector) -> None:
        s.execute("INSERT INTO vectors (rid, vec) VALUES (?, ?)", (rid, vec.tobytes()))

    def before_delete(self, s: Session, rid: int) -> None:
        s.execute("DELETE FROM vectors WHERE rid = ?", (rid,))
        s.execute(
            "INSERT INTO meta VALUES ('rewrites', '1') ON CONFLICT (key) DO UPDATE "
            "SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)"
        )

    def bulk_load(self, load: BulkLoad) -> int:
        n = 0
        for entry, vec in load.rows:
            load.add(load.session, entry, vec, load.reason)
            n += 1
        return n

    def integrity(self, s: Session) -> list[str]:
        problems: list[str] = []
        res = s.all("PRAGMA integrity_check")
        if [tuple(r) for r in res] != [("ok",)]:
            problems += [str(r[0]) for r in res]
        n_e = s.one("SELECT count(*) FROM entries")[0]
        n_v = s.one("SELECT count(*) FROM vectors")[0]
        if n_e != n_v:
            problems.append(f"index mismatch: {n_e} entries, {n_v} vectors")
        return problems

    # -- search -------------------------------------------------------------------------
    def rows(self) -> VectorRows:
        """The search cache, brought up to date with the file."""
        # Under the database's lock (a read): one snapshot for the counter and the rows.
        with self.db.read() as s:
            seen = (self.db.data_version(), self.db.commits)
            cache = self.cache
            if cache is not None and seen == self._seen:
                return cache
            found = s.one("SELECT value FROM meta WHERE key = 'rewrites'")
            rewrites = int(found[0]) if found else 0
            if cache is None or rewrites != self._rewrites:
                cache, self._max_rid = None, 0
            rows = s.all(_CACHE_ROWS, (self._max_rid,))
            texts = [entry_search_text(r[10], r[11], r[12]) for r in rows]
            if cache is None:
                dim = self.dim or (len(rows[0][8]) // 4 if rows else 0)
                cache = VectorRows.build(rows, dim, BM25Index.build(texts, self.stemmer))
            elif rows:
                cache = cache.extended(rows, cache.text.extended(texts, self.stemmer))
            if rows:
                self._max_rid = int(rows[-1][13])
            self.cache, self._seen, self._rewrites = cache, seen, rewrites
            return cache

    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        return self.rows().search(query, scope, filters, k)

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        if not terms or k <= 0:
            return []
        rows = self.rows()
        hits = rows.text.search(terms, self.stemmer, rows.mask(scope, filters), k)
        return [(str(rows.ids[i]), score) for i, score in hits]

    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        rows = self.rows()
        m = rows.mask(scope, filters)
        groups = rows.groups()
        if m is None:
            return [str(i) for i in rows.ids], rows.matrix, [str(g) for g in groups]
        return [str(i) for i in rows.ids[m]], rows.matrix[m], [str(g) for g in groups[m]]


class SQLiteNodeIndex:
    """Graph nodes: exact vectors from an in-memory matrix per (kind, scope), rebuilt when
    the file changed (any process); full text in FTS5 ranked with BM25."""

    def __init__(self, db: SQLiteDatabase) -> None:
        self.db = db
        self._cache: dict[tuple[str, Scope], tuple[list[str], Vector]] = {}
        self._seen: tuple[int, int] | None = None

    def insert(self, s: Session, n: Node, vec: Vector) -> None:
        rid = s.one(
            f"INSERT INTO graph_nodes ({NODE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?) RETURNING rid",
            node_params(n),
        )[0]
        s.execute("INSERT INTO graph_vectors (rid, vec) VALUES (?, ?)", (rid, vec.tobytes()))
        s.execute("INSERT INTO graph_fts (rowid, body) VALUES (?, ?)", (rid, n.text))

    def delete(self, s: Session, node_id: str) -> None:
        row = s.one("SELECT rid FROM graph_nodes WHERE id = ?", (node_id,))
        if row is None:
            return
        for table, col in (
            ("graph_fts", "rowid"),
            ("graph_vectors", "rid"),
            ("graph_nodes", "rid"),
        ):
            s.execute(f"DELETE FROM {table} WHERE {col} = ?", (row[0],))

    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]:
        with self.db.read() as s:
            seen = (self.db.data_version(), self.db.commits)
            if seen != self._seen:
                self._cache.clear()
                self._seen = seen
            key = (kind, scope)
            if key not in self._cache:
                where, params = scope_sql(SQLITE, scope, "n.")
                rows = s.all(
                    "SELECT n.id, v.vec FROM graph_nodes n JOIN graph_vectors v "
                    f"ON v.rid = n.rid WHERE n.kind = ? AND {where} ORDER BY n.rid",
                    (kind, *params),
                )
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
        with self.db.read() as s:
            rows = s.all(
                "SELECT n.id, bm25(graph_fts) AS s FROM graph_fts "
                "JOIN graph_nodes n ON n.rid = graph_fts.rowid "
                f"WHERE graph_fts MATCH ? AND n.kind = ? AND {where} ORDER BY s LIMIT ?",
                (match, kind, *params, k),
            )
        return [(r[0], -float(r[1])) for r in rows]
