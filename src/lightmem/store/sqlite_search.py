"""SQLite's search pieces: vector search (exact, or IVF on a large store) and BM25 over
in-memory columns of the entries, kept in step with the file in place and saved beside
it; and FTS5 + exact vectors for the FluxMem graph's nodes."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from lightmem.store.ann_index import IndexPolicy, ann_available
from lightmem.store.db import Session
from lightmem.store.entries import BulkLoad
from lightmem.store.graph_sql import NODE_COLS, node_params, top_k
from lightmem.store.saved_index import SavedIndex, renew_epoch, store_epoch
from lightmem.store.sql import (
    SQLITE,
    DamagedRowError,
    json_value,
    readable,
    scope_sql,
    vector_from_blob,
)
from lightmem.store.sqlite_db import SQLiteDatabase
from lightmem.store.text_index import Stemmer
from lightmem.store.values import ScoredId, Vector
from lightmem.store.vector_cache import VectorRows
from lightmem.types import Filters, MemoryEntry, Node, NodeKind, Scope

__all__ = ["SQLiteEntryIndex", "SQLiteNodeIndex"]


class SQLiteEntryIndex:
    """Vectors in a ``vectors`` table; searched from in-memory columns (exactly, or
    through the IVF index once the store is large), with BM25 over the same rows.

    The SQLite file is the source of truth: the ``index_log`` of written and removed row
    ids, which every process appends to in the transaction that writes, brings the
    columns up to date in place, whichever process wrote. A large store's columns are
    saved beside it (:mod:`lightmem.store.saved_index`) and read back on open instead of
    rebuilt."""

    extra_columns: tuple[str, ...] = ()

    def __init__(self, db: SQLiteDatabase, policy: IndexPolicy | None = None) -> None:
        self.db = db
        self.policy = policy or IndexPolicy()
        self.dim: int | None = None
        self.stemmer = Stemmer()
        self.cache: VectorRows | None = None
        self.saved = SavedIndex(db, self.policy)
        self._seen: tuple[int, int] | None = None  # (data_version, own commits)

    def extra_values(self, e: MemoryEntry, vec: Vector) -> tuple[Any, ...]:
        return ()

    def on_first_bind(self, s: Session, dim: int) -> None:
        pass  # vectors are blobs: nothing to create

    def after_insert(self, s: Session, rid: int, e: MemoryEntry, vec: Vector) -> None:
        s.execute("INSERT INTO vectors (rid, vec) VALUES (?, ?)", (rid, vec.tobytes()))
        s.execute("INSERT INTO index_log (rid, added) VALUES (?, 1)", (rid,))

    def before_delete(self, s: Session, rid: int) -> None:
        s.execute("DELETE FROM vectors WHERE rid = ?", (rid,))
        s.execute("INSERT INTO index_log (rid, added) VALUES (?, 0)", (rid,))

    #: none apart: a purge VACUUMs the whole file
    derived_tables: tuple[str, ...] = ()

    def bulk_load(self, load: BulkLoad) -> int:
        n = 0
        for entry, vec in load.rows:
            load.add(load.session, entry, vec, load.reason)
            n += 1
        return n

    # -- re-embedding (lightmem.store.reembed) -------------------------------------------
    def begin_reembed(self, s: Session, dim: int) -> None:
        pass  # the write transaction holds the whole file; blobs take any size

    def set_vectors(self, s: Session, rows: Sequence[tuple[int, Vector]]) -> None:
        s.many("UPDATE vectors SET vec = ? WHERE rid = ?", [(v.tobytes(), rid) for rid, v in rows])

    def end_reembed(self, s: Session, dim: int, rows: int) -> None:
        # Vectors changed in place, which the index log does not record: a new epoch makes
        # every process (and the saved file) rebuild its search columns from the file.
        renew_epoch(s)

    def after_reembed(self, dim: int) -> None:
        """Rebuild this process's columns (and IVF index) now; a large store's build is
        saved over the old file."""
        with self.db.read():
            self.dim, self.cache, self._seen = dim, None, None
            self.rows()

    def integrity(self, s: Session) -> list[str]:
        problems: list[str] = []
        res = s.all("PRAGMA integrity_check")
        if [tuple(r) for r in res] != [("ok",)]:
            problems += [str(r[0]) for r in res]
        n_e = s.one("SELECT count(*) FROM entries")[0]
        n_v = s.one("SELECT count(*) FROM vectors")[0]
        if n_e != n_v:
            problems.append(f"index mismatch: {n_e} entries, {n_v} vectors")
        return problems + _damaged_rows(s, self.dim)

    # -- keeping the columns in step with the file ----------------------------------------
    def rows(self) -> VectorRows:
        """The search columns, brought up to date with the file."""
        # Under the database's lock (a read): one snapshot for the counters and the rows,
        # and one catch-up (or save) at a time.
        with self.db.read() as s:
            seen = (self.db.data_version(), self.db.commits)
            cache = self.cache
            if cache is not None and seen == self._seen:
                return cache
            built = False
            if cache is not None and self.saved.state.epoch != store_epoch(s):
                cache = None  # the file was replaced under us
            if cache is None:
                cache = self.saved.load(s, self.dim, self.stemmer)
            if cache is None:
                cache, built = self.saved.build(s, self.dim, self.stemmer), True
            else:
                self.saved.catch_up(s, cache, self.stemmer)
            if cache.n_dead >= 1024 and cache.n_dead > cache.n_alive:
                cache, built = self.saved.build(s, self.dim, self.stemmer), True  # compact
            built = self._grow_ann(cache) or built
            self.cache, self._seen = cache, seen
            if built:
                self.saved.save(cache, force=True)
            return cache

    def _grow_ann(self, cache: VectorRows) -> bool:
        """Train the IVF index once the store is large (again when it grew fourfold)."""
        ann = cache.ann
        if cache.n_alive < self.policy.ann_min_rows or not ann_available():
            return False
        if ann is not None and cache.n <= 4 * ann.trained_rows:
            return False
        cache.build_ann(self.policy.lists_per_sqrt)
        return True

    def close(self) -> None:
        """Save the columns if they moved on enough from the saved copy."""
        with self.db.read():
            if self.cache is not None:
                self.saved.save(self.cache, force=False)

    def after_purge(self) -> None:
        """Purged rows are tombstoned and zeroed in memory by the catch-up; the saved file
        is rewritten without them (or removed, if the store is no longer large), and the
        columns are read again from it, letting go of the old file's mapping."""
        with self.db.read():
            rows = self.rows()
        if self.saved.rewrite(rows):
            with self.db.read():
                self.cache, self._seen = None, None

    # -- search -------------------------------------------------------------------------
    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        return self.rows().search(query, scope, filters, k, self.policy)

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        if not terms or k <= 0:
            return []
        rows = self.rows()
        alive = rows.alive if rows.n_dead else None
        hits = rows.text.search(terms, self.stemmer, rows.mask(scope, filters), k, alive)
        return [(str(rows.ids[i]), score) for i, score in hits]

    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        rows = self.rows()
        m = rows.dense_mask(scope, filters)
        if m is None:
            return [str(i) for i in rows.ids], rows.matrix, rows.groups(None)
        return [str(i) for i in rows.ids[m]], rows.matrix[m], rows.groups(m)


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

    def set_node_vectors(self, s: Session, rows: Sequence[tuple[int, Vector]]) -> None:
        s.many(
            "UPDATE graph_vectors SET vec = ? WHERE rid = ?",
            [(v.tobytes(), rid) for rid, v in rows],
        )

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
                # The size most of them have; a damaged one is skipped with a warning.
                dim = Counter(len(r[1]) for r in rows).most_common(1)[0][0] // 4 if rows else 0
                kept = readable(
                    rows, lambda r: (r[0], vector_from_blob(r[1], dim, "graph_vectors", r[0]))
                )
                ids = [i for i, _ in kept]
                matrix = np.vstack([v for _, v in kept]) if kept else np.zeros((0, 0), np.float32)
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


#: The JSON columns of the SQLite store, by table, with the column naming a row.
_JSON_COLUMNS = (
    ("entries", "id", ("source_ids", "metadata")),
    ("history", "seq", ("before", "after")),
    ("messages", "msg_id", ("metadata",)),
    ("graph_nodes", "id", ("data",)),
    ("graph_history", "seq", ("before", "after")),
)


def _damaged_rows(s: Session, dim: int | None) -> list[str]:
    """The rows lists and searches skip (see lightmem.store.sql.readable): JSON no decoder
    reads, and vectors of another size than the store's."""
    problems: list[str] = []
    for table, key, columns in _JSON_COLUMNS:
        for col in columns:
            # json_valid refuses NaN too, which reads back fine: decoded to be sure.
            for row_id, raw in s.all(
                f"SELECT {key}, {col} FROM {table} WHERE {col} IS NOT NULL "
                f"AND NOT json_valid({col})"
            ):
                try:
                    json_value(raw, table, row_id, col)
                except DamagedRowError as exc:
                    problems.append(str(exc))
    if dim:
        for (rid,) in s.all("SELECT rid FROM vectors WHERE length(vec) != ?", (4 * dim,)):
            problems.append(f"vectors row {rid}: not a {dim}-d float32 vector")
    return problems
