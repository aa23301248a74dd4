"""FluxMem's graph in the lightmem SQLite file: same connection, lock and transactions."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from lightmem.errors import NotFoundError, StoreError
from lightmem.fluxmem.types import Edge, EdgeKind, Node, NodeKind
from lightmem.store.base import ScoredId, Vector
from lightmem.store.sql import SQLITE, scope_sql
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import Scope

_COLS = "id, kind, user_id, agent_id, run_id, text, data, version, created_at, updated_at"


class SQLiteGraphStore:
    """A :class:`~lightmem.store.graph.GraphStore` sharing a :class:`SQLiteStore`'s file."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn = store._conn
        self._lock = threading.RLock()
        self._cache: dict[tuple[str, Scope], tuple[list[str], Vector]] = {}
        self._cache_version: int | None = None

    # -- nodes ------------------------------------------------------------------------------
    def add_node(self, node: Node, vector: Vector, reason: str) -> Node:
        now = datetime.now(UTC)
        node = replace(node, created_at=node.created_at or now, updated_at=now)
        with self._store._tx() as c:
            self._insert(c, node, vector)
            self._log(c, "add", "node", node.id, None, node.to_dict(), reason)
        self._cache.clear()
        return node

    def update_node(self, node: Node, vector: Vector, reason: str) -> Node:
        with self._store._tx() as c:
            old = self._fetch(c, node.id)
            if old is None:
                raise NotFoundError(f"id: no graph node {node.id!r}")
            new = replace(
                node,
                version=old.version + 1,
                created_at=old.created_at,
                updated_at=datetime.now(UTC),
            )
            self._delete_row(c, node.id)
            self._insert(c, new, vector)
            self._log(c, "update", "node", node.id, old.to_dict(), new.to_dict(), reason)
        self._cache.clear()
        return new

    def _insert(self, c: sqlite3.Connection, n: Node, vec: Vector) -> None:
        if vec.dtype != np.float32 or vec.ndim != 1:
            raise StoreError(f"graph vector must be 1-d float32, got {vec.dtype} {vec.shape}")
        cur = c.execute(
            f"INSERT INTO graph_nodes ({_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                n.id,
                n.kind,
                n.scope.user_id,
                n.scope.agent_id,
                n.scope.run_id,
                n.text,
                json.dumps(dict(n.data)),
                n.version,
                (n.created_at or datetime.now(UTC)).timestamp(),
                (n.updated_at or datetime.now(UTC)).timestamp(),
            ),
        )
        rid = cur.lastrowid
        c.execute("INSERT INTO graph_vectors (rid, vec) VALUES (?, ?)", (rid, vec.tobytes()))
        c.execute("INSERT INTO graph_fts (rowid, body) VALUES (?, ?)", (rid, n.text))

    def _delete_row(self, c: sqlite3.Connection, node_id: str) -> None:
        row = c.execute("SELECT rid FROM graph_nodes WHERE id = ?", (node_id,)).fetchone()
        if row is None:
            return
        c.execute("DELETE FROM graph_fts WHERE rowid = ?", (row[0],))
        c.execute("DELETE FROM graph_vectors WHERE rid = ?", (row[0],))
        c.execute("DELETE FROM graph_nodes WHERE rid = ?", (row[0],))

    def _fetch(self, c: sqlite3.Connection, node_id: str) -> Node | None:
        row = c.execute(f"SELECT {_COLS} FROM graph_nodes WHERE id = ?", (node_id,)).fetchone()
        return _node(row) if row else None

    def get_node(self, node_id: str) -> Node | None:
        with self._store._lock:
            return self._fetch(self._conn, node_id)

    def get_nodes(self, node_ids: Sequence[str]) -> dict[str, Node]:
        out: dict[str, Node] = {}
        with self._store._lock:
            for start in range(0, len(node_ids), 500):
                chunk = list(node_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(
                    f"SELECT {_COLS} FROM graph_nodes WHERE id IN ({marks})", chunk
                ):
                    n = _node(row)
                    out[n.id] = n
        return out

    def nodes(self, kind: NodeKind, scope: Scope, limit: int = 1_000_000) -> list[Node]:
        where, params = _scope_sql(scope)
        with self._store._lock:
            rows = self._conn.execute(
                f"SELECT {_COLS} FROM graph_nodes WHERE kind = ? AND {where} ORDER BY rid LIMIT ?",
                (kind, *params, limit),
            ).fetchall()
        return [_node(r) for r in rows]

    # -- search -----------------------------------------------------------------------------
    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]:
        with self._store._lock:
            version = self._conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._cache_version:
                self._cache.clear()
                self._cache_version = version
            key = (kind, scope)
            if key not in self._cache:
                where, params = _scope_sql(scope, "n.")
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
        if not ids or k <= 0:
            return []
        scores = matrix @ query
        k = min(k, len(ids))
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(ids[i], float(scores[i])) for i in top]

    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]:
        if not terms or k <= 0:
            return []
        match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
        where, params = _scope_sql(scope, "n.")
        with self._store._lock:
            rows = self._conn.execute(
                "SELECT n.id, bm25(graph_fts) AS s FROM graph_fts "
                "JOIN graph_nodes n ON n.rid = graph_fts.rowid "
                f"WHERE graph_fts MATCH ? AND n.kind = ? AND {where} ORDER BY s LIMIT ?",
                (match, kind, *params, k),
            ).fetchall()
        return [(r[0], -float(r[1])) for r in rows]

    # -- edges ------------------------------------------------------------------------------
    def add_edge(self, edge: Edge, reason: str) -> None:
        with self._store._tx() as c:
            old = self._edge(c, edge.kind, edge.src, edge.dst)
            c.execute(
                "INSERT OR REPLACE INTO graph_edges VALUES (?,?,?,?,?,?)",
                (
                    edge.kind,
                    edge.src,
                    edge.dst,
                    edge.weight,
                    json.dumps(dict(edge.data)),
                    time.time(),
                ),
            )
            self._log(
                c,
                "add" if old is None else "update",
                "edge",
                _edge_id(edge.kind, edge.src, edge.dst),
                old.to_dict() if old else None,
                edge.to_dict(),
                reason,
            )

    def remove_edge(self, kind: EdgeKind, src: str, dst: str, reason: str) -> None:
        with self._store._tx() as c:
            old = self._edge(c, kind, src, dst)
            if old is None:
                raise NotFoundError(f"edge: no {kind} edge {src} -> {dst}")
            c.execute(
                "DELETE FROM graph_edges WHERE kind = ? AND src = ? AND dst = ?", (kind, src, dst)
            )
            self._log(c, "delete", "edge", _edge_id(kind, src, dst), old.to_dict(), None, reason)

    def _edge(self, c: sqlite3.Connection, kind: str, src: str, dst: str) -> Edge | None:
        row = c.execute(
            "SELECT kind, src, dst, weight, data FROM graph_edges "
            "WHERE kind = ? AND src = ? AND dst = ?",
            (kind, src, dst),
        ).fetchone()
        return _edge_row(row) if row else None

    def edges(
        self,
        kind: EdgeKind | None = None,
        src: Sequence[str] | None = None,
        dst: Sequence[str] | None = None,
    ) -> list[Edge]:
        clauses: list[str] = ["1"]
        params: list[str] = []
        if kind is not None:
            clauses.append("kind = ?")
            params.append(kind)
        for col, values in (("src", src), ("dst", dst)):
            if values is not None:
                if not values:
                    return []
                clauses.append(f"{col} IN ({','.join('?' * len(values))})")
                params.extend(values)
        with self._store._lock:
            rows = self._conn.execute(
                "SELECT kind, src, dst, weight, data FROM graph_edges WHERE "
                + " AND ".join(clauses)
                + " ORDER BY created_at, src, dst",
                params,
            ).fetchall()
        return [_edge_row(r) for r in rows]

    # -- history ----------------------------------------------------------------------------
    def _log(
        self,
        c: sqlite3.Connection,
        op: str,
        target: str,
        target_id: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        reason: str,
    ) -> None:
        c.execute(
            "INSERT INTO graph_history (op, target, target_id, before, after, at, reason) "
            "VALUES (?,?,?,?,?,?,?)",
            (
                op,
                target,
                target_id,
                json.dumps(before) if before is not None else None,
                json.dumps(after) if after is not None else None,
                time.time(),
                reason,
            ),
        )

    def graph_history(self, limit: int = 100) -> list[dict[str, Any]]:
        with self._store._lock:
            rows = self._conn.execute(
                "SELECT seq, op, target, target_id, before, after, at, reason FROM graph_history "
                "ORDER BY seq DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            {
                "seq": r[0],
                "op": r[1],
                "target": r[2],
                "target_id": r[3],
                "before": json.loads(r[4]) if r[4] else None,
                "after": json.loads(r[5]) if r[5] else None,
                "at": datetime.fromtimestamp(r[6], tz=UTC).isoformat(),
                "reason": r[7],
            }
            for r in reversed(rows)
        ]

    def undo(self, seq: int, embed: Callable[[str], Vector]) -> None:
        """Revert history event ``seq``: the target goes back to its ``before`` state
        (``embed`` gives a restored node its vector again). The undo is itself an event."""
        with self._store._tx() as c:
            row = c.execute(
                "SELECT target, target_id, before, after FROM graph_history WHERE seq = ?",
                (seq,),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"seq: no graph history event {seq}")
            target, target_id, before_s, _after = row
            before = json.loads(before_s) if before_s else None
            if target == "edge":
                kind, src, dst = target_id.split("|", 2)
                edge_now = self._edge(c, kind, src, dst)
                c.execute(
                    "DELETE FROM graph_edges WHERE kind = ? AND src = ? AND dst = ?",
                    (kind, src, dst),
                )
                if before is not None:
                    e = before
                    c.execute(
                        "INSERT INTO graph_edges VALUES (?,?,?,?,?,?)",
                        (
                            e["kind"],
                            e["src"],
                            e["dst"],
                            e["weight"],
                            json.dumps(e["data"]),
                            time.time(),
                        ),
                    )
                self._log(
                    c,
                    "undo",
                    "edge",
                    target_id,
                    edge_now.to_dict() if edge_now else None,
                    before,
                    f"undo of event {seq}",
                )
            else:
                node_now = self._fetch(c, target_id)
                self._delete_row(c, target_id)
                if before is not None:
                    node = _node_from_dict(before)
                    self._insert(c, node, embed(node.text))
                else:  # undoing a creation: its edges go with it
                    for e in c.execute(
                        "SELECT kind, src, dst, weight, data FROM graph_edges "
                        "WHERE src = ? OR dst = ?",
                        (target_id, target_id),
                    ).fetchall():
                        edge = _edge_row(e)
                        c.execute(
                            "DELETE FROM graph_edges WHERE kind = ? AND src = ? AND dst = ?",
                            (edge.kind, edge.src, edge.dst),
                        )
                        self._log(
                            c,
                            "undo",
                            "edge",
                            _edge_id(edge.kind, edge.src, edge.dst),
                            edge.to_dict(),
                            None,
                            f"undo of event {seq}",
                        )
                self._log(
                    c,
                    "undo",
                    "node",
                    target_id,
                    node_now.to_dict() if node_now else None,
                    before,
                    f"undo of event {seq}",
                )
        self._cache.clear()

    def graph_counts(self, scope: Scope) -> dict[str, int]:
        where, params = _scope_sql(scope)
        with self._store._lock:
            kinds = dict(
                self._conn.execute(
                    f"SELECT kind, count(*) FROM graph_nodes WHERE {where} GROUP BY kind", params
                ).fetchall()
            )
            edges = dict(
                self._conn.execute(
                    "SELECT kind, count(*) FROM graph_edges GROUP BY kind"
                ).fetchall()
            )
        return {
            **{f"{k}_nodes": int(kinds.get(k, 0)) for k in ("semantic", "episodic", "procedural")},
            **{f"{k}_edges": int(edges.get(k, 0)) for k in ("ground", "distill", "step")},
        }


def _edge_id(kind: str, src: str, dst: str) -> str:
    return f"{kind}|{src}|{dst}"


def _scope_sql(scope: Scope, prefix: str = "") -> tuple[str, list[Any]]:
    return scope_sql(SQLITE, scope, prefix)


def _node(r: Sequence[Any]) -> Node:
    return Node(
        id=r[0],
        kind=r[1],
        scope=Scope(r[2], r[3], r[4]),
        text=r[5],
        data=json.loads(r[6]),
        version=r[7],
        created_at=datetime.fromtimestamp(r[8], tz=UTC),
        updated_at=datetime.fromtimestamp(r[9], tz=UTC),
    )


def _node_from_dict(d: dict[str, Any]) -> Node:
    return Node(
        id=d["id"],
        kind=d["kind"],
        scope=Scope(d["user_id"], d["agent_id"], d["run_id"]),
        text=d["text"],
        data=d["data"],
        version=d["version"],
        created_at=datetime.fromisoformat(d["created_at"]) if d.get("created_at") else None,
        updated_at=datetime.fromisoformat(d["updated_at"]) if d.get("updated_at") else None,
    )


def _edge_row(r: Sequence[Any]) -> Edge:
    return Edge(kind=r[0], src=r[1], dst=r[2], weight=float(r[3]), data=json.loads(r[4]))
