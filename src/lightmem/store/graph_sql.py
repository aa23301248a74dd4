"""FluxMem's graph on a SQL backend: nodes, typed edges and the reversible history.

Everything but how a node row (with its vector and full text) is written, removed and
searched is the same on SQLite and PostgreSQL, so it lives here once; each backend
subclass supplies the dialect, its transactions and those few statements.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from lightmem.errors import NotFoundError, StoreError
from lightmem.store.db import Database, Session
from lightmem.store.purge import PurgeReport, purge_graph, purge_node
from lightmem.store.sessions import SQLTaskSessions
from lightmem.store.size_limit import SizeLimit
from lightmem.store.sql import dumps, json_value, placeholders, readable, scope_sql, ts
from lightmem.store.topk import top_positions
from lightmem.store.values import ScoredId, Vector
from lightmem.types import Edge, EdgeKind, Node, NodeKind, Scope

__all__ = [
    "NODE_COLS",
    "NodeIndex",
    "SQLGraphStore",
    "edge_from_row",
    "node_from_row",
    "node_params",
    "top_k",
]

NODE_COLS = "id, kind, user_id, agent_id, run_id, text, data, version, created_at, updated_at"
_SCOPE_COLS = "user_id, agent_id, run_id"


class NodeIndex(Protocol):
    """The backend's search piece for graph nodes: how a node row with its vector and full
    text is written, removed and searched."""

    def insert(self, s: Session, n: Node, vec: Vector) -> None: ...
    def delete(self, s: Session, node_id: str) -> None:
        """Remove the node row with its vector and full text (no-op when absent)."""

    def set_node_vectors(self, s: Session, rows: Sequence[tuple[int, Vector]]) -> None:
        """Replace the vectors of node rows (rid, vector): a re-embed's switch."""

    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]: ...
    def vector_search(
        self, kind: NodeKind, query: Vector, scope: Scope, k: int
    ) -> list[ScoredId]: ...
    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]: ...


class SQLGraphStore:
    """A :class:`~lightmem.store.graph.GraphStore` in the same database as the entries.

    Edges and history events carry the scope of the node they concern (an edge: its source
    node's), so reads and undo can be restricted to a scope."""

    def __init__(self, db: Database, index: NodeIndex, limit: SizeLimit | None = None) -> None:
        self.db = db
        self.index = index
        self.sessions = SQLTaskSessions(db)
        self.limit = limit or SizeLimit(db)

    def check_room(self) -> None:
        self.limit.check()

    def task_sessions(self) -> SQLTaskSessions:
        return self.sessions

    def purge(self, scope: Scope) -> PurgeReport:
        return purge_graph(self.db, self.index, scope, reclaim=self.limit.near())

    def purge_node(self, scope: Scope, node_id: str) -> PurgeReport:
        return purge_node(self.db, self.index, scope, node_id, reclaim=self.limit.near())

    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]:
        return self.index.node_vectors(kind, scope)

    def vector_search(self, kind: NodeKind, query: Vector, scope: Scope, k: int) -> list[ScoredId]:
        return self.index.vector_search(kind, query, scope, k)

    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]:
        return self.index.text_search(kind, terms, scope, k)

    # -- nodes ------------------------------------------------------------------------------
    def add_node(self, node: Node, vector: Vector, reason: str) -> Node:
        now = datetime.now(UTC)
        node = replace(node, created_at=node.created_at or now, updated_at=now)
        with self.db.transaction() as s:
            self._insert(s, node, vector)
            self._log(s, "add", "node", node.id, node.scope, None, node.to_dict(), reason)
        return node

    def update_node(self, node: Node, vector: Vector, reason: str) -> Node:
        with self.db.transaction() as s:
            old = self._fetch(s, node.id, lock=True)
            if old is None:
                raise NotFoundError(f"id: no graph node {node.id!r}")
            new = replace(
                node,
                version=old.version + 1,
                created_at=old.created_at,
                updated_at=datetime.now(UTC),
            )
            self.index.delete(s, node.id)
            self._insert(s, new, vector)
            self._log(s, "update", "node", node.id, new.scope, old.to_dict(), new.to_dict(), reason)
        return new

    def _insert(self, s: Session, n: Node, vec: Vector) -> None:
        if vec.dtype != np.float32 or vec.ndim != 1:
            raise StoreError(f"graph vector must be 1-d float32, got {vec.dtype} {vec.shape}")
        self.index.insert(s, n, vec)

    def _fetch(self, s: Session, node_id: str, *, lock: bool = False) -> Node | None:
        tail = self.db.row_lock if lock else ""
        row = s.one(f"SELECT {NODE_COLS} FROM graph_nodes WHERE id = ?{tail}", (node_id,))
        return node_from_row(row) if row else None

    def get_node(self, node_id: str) -> Node | None:
        with self.db.read() as s:
            return self._fetch(s, node_id)

    def get_nodes(self, node_ids: Sequence[str]) -> dict[str, Node]:
        out: dict[str, Node] = {}
        with self.db.read() as s:
            for start in range(0, len(node_ids), 500):
                chunk = list(node_ids[start : start + 500])
                marks = placeholders(chunk)
                rows = s.all(f"SELECT {NODE_COLS} FROM graph_nodes WHERE id IN ({marks})", chunk)
                out.update((n.id, n) for n in readable(rows, node_from_row))
        return out

    def nodes(
        self, kind: NodeKind, scope: Scope, limit: int = 1_000_000, newest: bool = False
    ) -> list[Node]:
        where, params = scope_sql(self.db.dialect, scope)
        order = "DESC" if newest else "ASC"
        with self.db.read() as s:
            rows = s.execute(
                s.sql(f"SELECT {NODE_COLS} FROM graph_nodes WHERE kind = ? AND ")
                + f"{where} ORDER BY rid {order} LIMIT {self.db.dialect.placeholder}",
                (kind, *params, limit),
            ).fetchall()
        found = readable(rows, node_from_row)
        return found[::-1] if newest else found

    # -- edges ------------------------------------------------------------------------------
    def add_edge(self, edge: Edge, reason: str) -> None:
        with self.db.transaction() as s:
            old = self._edge(s, edge.kind, edge.src, edge.dst)
            scope = self._edge_scope(s, edge.src, edge.dst)
            s.execute(
                "INSERT INTO graph_edges (kind, src, dst, weight, data, created_at, "
                f"{_SCOPE_COLS}) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (kind, src, dst) DO "
                "UPDATE SET weight = excluded.weight, data = excluded.data, "
                "created_at = excluded.created_at",
                _edge_values(edge.kind, edge.src, edge.dst, edge.weight, edge.data, scope),
            )
            self._log(
                s,
                "add" if old is None else "update",
                "edge",
                _edge_id(edge.kind, edge.src, edge.dst),
                scope,
                old.to_dict() if old else None,
                edge.to_dict(),
                reason,
            )

    def _edge_scope(self, s: Session, src: str, dst: str) -> Scope:
        """An edge belongs to its source node's scope (its target's if the source is gone)."""
        for node_id in (src, dst):
            row = s.one(f"SELECT {_SCOPE_COLS} FROM graph_nodes WHERE id = ?", (node_id,))
            if row is not None:
                return Scope(*row)
        return Scope()

    def remove_edge(self, kind: EdgeKind, src: str, dst: str, reason: str) -> None:
        with self.db.transaction() as s:
            row = s.one(
                f"SELECT {_SCOPE_COLS} FROM graph_edges WHERE kind = ? AND src = ? AND dst = ?",
                (kind, src, dst),
            )
            old = self._edge(s, kind, src, dst)
            if old is None or row is None:
                raise NotFoundError(f"edge: no {kind} edge {src} -> {dst}")
            self._delete_edge(s, kind, src, dst)
            eid = _edge_id(kind, src, dst)
            self._log(s, "delete", "edge", eid, Scope(*row), old.to_dict(), None, reason)

    def _delete_edge(self, s: Session, kind: str, src: str, dst: str) -> None:
        s.execute(
            "DELETE FROM graph_edges WHERE kind = ? AND src = ? AND dst = ?", (kind, src, dst)
        )

    def _edge(self, s: Session, kind: str, src: str, dst: str) -> Edge | None:
        row = s.one(
            "SELECT kind, src, dst, weight, data FROM graph_edges "
            "WHERE kind = ? AND src = ? AND dst = ?",
            (kind, src, dst),
        )
        return edge_from_row(row) if row else None

    def edges(
        self,
        kind: EdgeKind | None = None,
        src: Sequence[str] | None = None,
        dst: Sequence[str] | None = None,
        scope: Scope | None = None,
    ) -> list[Edge]:
        where, params = scope_sql(self.db.dialect, scope or Scope())
        clauses, args = [where], list(params)
        if kind is not None:
            clauses.append("kind = ?")
            args.append(kind)
        for col, values in (("src", src), ("dst", dst)):
            if values is not None:
                if not values:
                    return []
                clauses.append(f"{col} IN ({','.join('?' * len(values))})")
                args.extend(values)
        with self.db.read() as s:
            sql = " AND ".join(s.sql(c) for c in clauses)
            rows = s.raw.execute(
                f"SELECT kind, src, dst, weight, data FROM graph_edges WHERE {sql} "
                "ORDER BY created_at, src, dst",
                args,
            ).fetchall()
        return readable(rows, edge_from_row)

    # -- history ----------------------------------------------------------------------------
    def _log(
        self,
        s: Session,
        op: str,
        target: str,
        target_id: str,
        scope: Scope,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        reason: str,
    ) -> None:
        s.execute(
            "INSERT INTO graph_history (op, target, target_id, before, after, at, reason, "
            f"{_SCOPE_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?)",
            (
                op,
                target,
                target_id,
                dumps(before, "node") if before is not None else None,
                dumps(after, "node") if after is not None else None,
                time.time(),
                reason,
                scope.user_id,
                scope.agent_id,
                scope.run_id,
            ),
        )

    def graph_history(self, limit: int = 100, scope: Scope | None = None) -> list[dict[str, Any]]:
        """The last ``limit`` events of ``scope`` (all scopes by default), oldest first."""
        where, params = scope_sql(self.db.dialect, scope or Scope())
        with self.db.read() as s:
            rows = s.raw.execute(
                s.sql("SELECT seq, op, target, target_id, before, after, at, reason ")
                + f"FROM graph_history WHERE {where} ORDER BY seq DESC "
                + s.sql("LIMIT ?"),
                (*params, limit),
            ).fetchall()
        return readable(reversed(rows), _event)

    def undo(self, seq: int, embed: Callable[[str], Vector], scope: Scope | None = None) -> None:
        """Revert history event ``seq`` of ``scope``: the target goes back to its ``before``
        state (``embed`` gives a restored node its vector again). The undo is itself an
        event; an event of another scope is refused with NotFoundError."""
        where, params = scope_sql(self.db.dialect, scope or Scope())
        with self.db.transaction() as s:
            row = s.raw.execute(
                s.sql("SELECT target, target_id, before, user_id, agent_id, run_id ")
                + s.sql("FROM graph_history WHERE seq = ? AND ")
                + where,
                (seq, *params),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"seq: no graph history event {seq} in this scope")
            target, target_id, before_raw = row[0], row[1], row[2]
            event_scope = Scope(*row[3:6])
            before = json_value(before_raw, "graph_history", seq, "before") if before_raw else None
            if target == "edge":
                self._undo_edge(s, seq, target_id, event_scope, before)
            else:
                self._undo_node(s, seq, target_id, event_scope, before, embed)

    def _undo_edge(
        self, s: Session, seq: int, target_id: str, scope: Scope, before: dict[str, Any] | None
    ) -> None:
        kind, src, dst = target_id.split("|", 2)
        edge_now = self._edge(s, kind, src, dst)
        self._delete_edge(s, kind, src, dst)
        if before is not None:
            s.execute(
                "INSERT INTO graph_edges (kind, src, dst, weight, data, created_at, "
                f"{_SCOPE_COLS}) VALUES (?,?,?,?,?,?,?,?,?)",
                _edge_values(
                    before["kind"],
                    before["src"],
                    before["dst"],
                    before["weight"],
                    before["data"],
                    scope,
                ),
            )
        now = edge_now.to_dict() if edge_now else None
        self._log(s, "undo", "edge", target_id, scope, now, before, f"undo of event {seq}")

    def _undo_node(
        self,
        s: Session,
        seq: int,
        target_id: str,
        scope: Scope,
        before: dict[str, Any] | None,
        embed: Callable[[str], Vector],
    ) -> None:
        why = f"undo of event {seq}"
        node_now = self._fetch(s, target_id, lock=True)
        self.index.delete(s, target_id)
        if before is not None:
            node = Node.from_dict(before)
            self._insert(s, node, embed(node.text))
        else:  # undoing a creation: its edges go with it
            for e in s.all(
                f"SELECT kind, src, dst, weight, data, {_SCOPE_COLS} FROM graph_edges "
                "WHERE src = ? OR dst = ? ORDER BY kind, src, dst",
                (target_id, target_id),
            ):
                edge = edge_from_row(e)
                self._delete_edge(s, edge.kind, edge.src, edge.dst)
                eid = _edge_id(edge.kind, edge.src, edge.dst)
                self._log(s, "undo", "edge", eid, Scope(*e[5:8]), edge.to_dict(), None, why)
        now = node_now.to_dict() if node_now else None
        self._log(s, "undo", "node", target_id, scope, now, before, why)

    def graph_counts(self, scope: Scope) -> dict[str, int]:
        where, params = scope_sql(self.db.dialect, scope)
        with self.db.read() as s:
            kinds = dict(
                s.all(f"SELECT kind, count(*) FROM graph_nodes WHERE {where} GROUP BY kind", params)
            )
            edges = dict(
                s.all(f"SELECT kind, count(*) FROM graph_edges WHERE {where} GROUP BY kind", params)
            )
        return {
            **{f"{k}_nodes": int(kinds.get(k, 0)) for k in ("semantic", "episodic", "procedural")},
            **{f"{k}_edges": int(edges.get(k, 0)) for k in ("ground", "distill", "step")},
        }


def _edge_id(kind: str, src: str, dst: str) -> str:
    return f"{kind}|{src}|{dst}"


def _edge_values(
    kind: str, src: str, dst: str, weight: float, data: Any, scope: Scope
) -> tuple[Any, ...]:
    return (
        kind,
        src,
        dst,
        weight,
        dumps(dict(data), "edge.data"),
        time.time(),
        scope.user_id,
        scope.agent_id,
        scope.run_id,
    )


def node_params(n: Node) -> tuple[Any, ...]:
    """Values for :data:`NODE_COLS` (``data`` as JSON text)."""
    return (
        n.id,
        n.kind,
        n.scope.user_id,
        n.scope.agent_id,
        n.scope.run_id,
        n.text,
        dumps(dict(n.data), "node.data"),
        n.version,
        (n.created_at or datetime.now(UTC)).timestamp(),
        (n.updated_at or datetime.now(UTC)).timestamp(),
    )


def node_from_row(r: Sequence[Any]) -> Node:
    return Node(
        id=r[0],
        kind=r[1],
        scope=Scope(r[2], r[3], r[4]),
        text=r[5],
        data=json_value(r[6], "graph_nodes", r[0], "data"),
        version=r[7],
        created_at=ts(r[8]),
        updated_at=ts(r[9]),
    )


def edge_from_row(r: Sequence[Any]) -> Edge:
    edge = f"{r[0]}|{r[1]}|{r[2]}"
    data = json_value(r[4], "graph_edges", edge, "data")
    return Edge(kind=r[0], src=r[1], dst=r[2], weight=float(r[3]), data=data)


def _event(r: Sequence[Any]) -> dict[str, Any]:
    """A graph history event from (seq, op, target, target_id, before, after, at, reason)."""
    return {
        "seq": r[0],
        "op": r[1],
        "target": r[2],
        "target_id": r[3],
        "before": json_value(r[4], "graph_history", r[0], "before") if r[4] else None,
        "after": json_value(r[5], "graph_history", r[0], "after") if r[5] else None,
        "at": (ts(r[6]) or datetime.min.replace(tzinfo=UTC)).isoformat(),
        "reason": r[7],
    }


def top_k(ids: list[str], matrix: Vector, query: Vector, k: int) -> list[ScoredId]:
    """Exact inner-product top ``k``, best first."""
    if not ids or k <= 0:
        return []
    scores = matrix @ query
    k = min(k, len(ids))
    top = top_positions(scores, k)
    return [(ids[i], float(scores[i])) for i in top]
