"""FluxMem's graph on a SQL backend: nodes, typed edges and the reversible history.

Everything but how a node row (with its vector and full text) is written, removed and
searched is the same on SQLite and PostgreSQL, so it lives here once; each backend
subclass supplies the dialect, its transactions and those few statements.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from lightmem.errors import NotFoundError, StoreError
from lightmem.fluxmem.types import Edge, EdgeKind, Node, NodeKind
from lightmem.store.base import ScoredId, Vector
from lightmem.store.sql import Dialect, json_value, scope_sql
from lightmem.types import Scope

NODE_COLS = "id, kind, user_id, agent_id, run_id, text, data, version, created_at, updated_at"


class SQLGraphStore(ABC):
    """A :class:`~lightmem.store.graph.GraphStore` in the same database as the entries.

    SQL is written with ``?`` placeholders and adapted to the backend's dialect."""

    dialect: Dialect
    #: What makes a SELECT lock the rows it reads until the transaction ends ("" where the
    #: transaction already holds the whole database, as SQLite's BEGIN IMMEDIATE does).
    row_lock: str = ""

    # -- what a backend supplies ----------------------------------------------------------
    @abstractmethod
    def _tx(self) -> AbstractContextManager[Any]:
        """A write transaction; yields a connection with ``execute``."""

    @abstractmethod
    def _read(self) -> AbstractContextManager[Any]:
        """A consistent read; yields a connection with ``execute``."""

    @abstractmethod
    def _insert_row(self, c: Any, n: Node, vec: Vector) -> None:
        """Write the node row with its vector and full text."""

    @abstractmethod
    def _delete_row(self, c: Any, node_id: str) -> None:
        """Remove the node row with its vector and full text (no-op when absent)."""

    @abstractmethod
    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]: ...

    @abstractmethod
    def vector_search(
        self, kind: NodeKind, query: Vector, scope: Scope, k: int
    ) -> list[ScoredId]: ...

    @abstractmethod
    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]: ...

    @abstractmethod
    def _changed(self) -> None:
        """Called after every committed change (backends with caches drop them)."""

    # -- SQL helpers ----------------------------------------------------------------------
    def _sql(self, sql: str) -> str:
        return sql.replace("?", self.dialect.placeholder)

    def _exec(self, c: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return c.execute(self._sql(sql), params)

    # -- nodes ------------------------------------------------------------------------------
    def add_node(self, node: Node, vector: Vector, reason: str) -> Node:
        now = datetime.now(UTC)
        node = replace(node, created_at=node.created_at or now, updated_at=now)
        with self._tx() as c:
            self._insert(c, node, vector)
            self._log(c, "add", "node", node.id, None, node.to_dict(), reason)
        self._changed()
        return node

    def update_node(self, node: Node, vector: Vector, reason: str) -> Node:
        with self._tx() as c:
            old = self._fetch(c, node.id, lock=True)
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
        self._changed()
        return new

    def _insert(self, c: Any, n: Node, vec: Vector) -> None:
        if vec.dtype != np.float32 or vec.ndim != 1:
            raise StoreError(f"graph vector must be 1-d float32, got {vec.dtype} {vec.shape}")
        self._insert_row(c, n, vec)

    def _fetch(self, c: Any, node_id: str, *, lock: bool = False) -> Node | None:
        tail = self.row_lock if lock else ""
        row = self._exec(
            c, f"SELECT {NODE_COLS} FROM graph_nodes WHERE id = ?{tail}", (node_id,)
        ).fetchone()
        return node_from_row(row) if row else None

    def get_node(self, node_id: str) -> Node | None:
        with self._read() as c:
            return self._fetch(c, node_id)

    def get_nodes(self, node_ids: Sequence[str]) -> dict[str, Node]:
        out: dict[str, Node] = {}
        with self._read() as c:
            for start in range(0, len(node_ids), 500):
                chunk = list(node_ids[start : start + 500])
                marks = ",".join("?" * len(chunk))
                for row in self._exec(
                    c, f"SELECT {NODE_COLS} FROM graph_nodes WHERE id IN ({marks})", chunk
                ).fetchall():
                    n = node_from_row(row)
                    out[n.id] = n
        return out

    def nodes(self, kind: NodeKind, scope: Scope, limit: int = 1_000_000) -> list[Node]:
        where, params = scope_sql(self.dialect, scope)
        with self._read() as c:
            rows = c.execute(
                self._sql(f"SELECT {NODE_COLS} FROM graph_nodes WHERE kind = ? AND ")
                + f"{where} ORDER BY rid LIMIT {self.dialect.placeholder}",
                (kind, *params, limit),
            ).fetchall()
        return [node_from_row(r) for r in rows]

    # -- edges ------------------------------------------------------------------------------
    def add_edge(self, edge: Edge, reason: str) -> None:
        with self._tx() as c:
            old = self._edge(c, edge.kind, edge.src, edge.dst)
            self._exec(
                c,
                "INSERT INTO graph_edges VALUES (?,?,?,?,?,?) ON CONFLICT (kind, src, dst) DO "
                "UPDATE SET weight = excluded.weight, data = excluded.data, "
                "created_at = excluded.created_at",
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
        with self._tx() as c:
            old = self._edge(c, kind, src, dst)
            if old is None:
                raise NotFoundError(f"edge: no {kind} edge {src} -> {dst}")
            self._delete_edge(c, kind, src, dst)
            self._log(c, "delete", "edge", _edge_id(kind, src, dst), old.to_dict(), None, reason)

    def _delete_edge(self, c: Any, kind: str, src: str, dst: str) -> None:
        self._exec(
            c, "DELETE FROM graph_edges WHERE kind = ? AND src = ? AND dst = ?", (kind, src, dst)
        )

    def _edge(self, c: Any, kind: str, src: str, dst: str) -> Edge | None:
        row = self._exec(
            c,
            "SELECT kind, src, dst, weight, data FROM graph_edges "
            "WHERE kind = ? AND src = ? AND dst = ?",
            (kind, src, dst),
        ).fetchone()
        return edge_from_row(row) if row else None

    def edges(
        self,
        kind: EdgeKind | None = None,
        src: Sequence[str] | None = None,
        dst: Sequence[str] | None = None,
    ) -> list[Edge]:
        clauses: list[str] = [self.dialect.true]
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
        with self._read() as c:
            rows = self._exec(
                c,
                "SELECT kind, src, dst, weight, data FROM graph_edges WHERE "
                + " AND ".join(clauses)
                + " ORDER BY created_at, src, dst",
                params,
            ).fetchall()
        return [edge_from_row(r) for r in rows]

    # -- history ----------------------------------------------------------------------------
    def _log(
        self,
        c: Any,
        op: str,
        target: str,
        target_id: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        reason: str,
    ) -> None:
        self._exec(
            c,
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
        with self._read() as c:
            rows = self._exec(
                c,
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
                "before": json_value(r[4]) if r[4] else None,
                "after": json_value(r[5]) if r[5] else None,
                "at": datetime.fromtimestamp(r[6], tz=UTC).isoformat(),
                "reason": r[7],
            }
            for r in reversed(rows)
        ]

    def undo(self, seq: int, embed: Callable[[str], Vector]) -> None:
        """Revert history event ``seq``: the target goes back to its ``before`` state
        (``embed`` gives a restored node its vector again). The undo is itself an event."""
        with self._tx() as c:
            row = self._exec(
                c,
                "SELECT target, target_id, before, after FROM graph_history WHERE seq = ?",
                (seq,),
            ).fetchone()
            if row is None:
                raise NotFoundError(f"seq: no graph history event {seq}")
            target, target_id, before_raw, _after = row
            before = json_value(before_raw) if before_raw else None
            why = f"undo of event {seq}"
            if target == "edge":
                kind, src, dst = target_id.split("|", 2)
                edge_now = self._edge(c, kind, src, dst)
                self._delete_edge(c, kind, src, dst)
                if before is not None:
                    self._exec(
                        c,
                        "INSERT INTO graph_edges VALUES (?,?,?,?,?,?)",
                        (
                            before["kind"],
                            before["src"],
                            before["dst"],
                            before["weight"],
                            json.dumps(before["data"]),
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
                    why,
                )
            else:
                node_now = self._fetch(c, target_id, lock=True)
                self._delete_row(c, target_id)
                if before is not None:
                    node = node_from_dict(before)
                    self._insert(c, node, embed(node.text))
                else:  # undoing a creation: its edges go with it
                    for e in self._exec(
                        c,
                        "SELECT kind, src, dst, weight, data FROM graph_edges "
                        "WHERE src = ? OR dst = ? ORDER BY kind, src, dst",
                        (target_id, target_id),
                    ).fetchall():
                        edge = edge_from_row(e)
                        self._delete_edge(c, edge.kind, edge.src, edge.dst)
                        eid = _edge_id(edge.kind, edge.src, edge.dst)
                        self._log(c, "undo", "edge", eid, edge.to_dict(), None, why)
                self._log(
                    c,
                    "undo",
                    "node",
                    target_id,
                    node_now.to_dict() if node_now else None,
                    before,
                    why,
                )
        self._changed()

    def graph_counts(self, scope: Scope) -> dict[str, int]:
        where, params = scope_sql(self.dialect, scope)
        with self._read() as c:
            kinds = dict(
                c.execute(
                    f"SELECT kind, count(*) FROM graph_nodes WHERE {where} GROUP BY kind", params
                ).fetchall()
            )
            edges = dict(
                c.execute("SELECT kind, count(*) FROM graph_edges GROUP BY kind").fetchall()
            )
        return {
            **{f"{k}_nodes": int(kinds.get(k, 0)) for k in ("semantic", "episodic", "procedural")},
            **{f"{k}_edges": int(edges.get(k, 0)) for k in ("ground", "distill", "step")},
        }


def _edge_id(kind: str, src: str, dst: str) -> str:
    return f"{kind}|{src}|{dst}"


def node_params(n: Node) -> tuple[Any, ...]:
    """Values for :data:`NODE_COLS` (``data`` as JSON text)."""
    return (
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
    )


def node_from_row(r: Sequence[Any]) -> Node:
    return Node(
        id=r[0],
        kind=r[1],
        scope=Scope(r[2], r[3], r[4]),
        text=r[5],
        data=json_value(r[6]),
        version=r[7],
        created_at=datetime.fromtimestamp(r[8], tz=UTC),
        updated_at=datetime.fromtimestamp(r[9], tz=UTC),
    )


def node_from_dict(d: dict[str, Any]) -> Node:
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


def edge_from_row(r: Sequence[Any]) -> Edge:
    return Edge(kind=r[0], src=r[1], dst=r[2], weight=float(r[3]), data=json_value(r[4]))


def top_k(ids: list[str], matrix: Vector, query: Vector, k: int) -> list[ScoredId]:
    """Exact inner-product top ``k``, best first."""
    if not ids or k <= 0:
        return []
    scores = matrix @ query
    k = min(k, len(ids))
    top = np.argpartition(-scores, k - 1)[:k]
    top = top[np.argsort(-scores[top], kind="stable")]
    return [(ids[i], float(scores[i])) for i in top]
