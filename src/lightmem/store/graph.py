"""The graph storage interface (FluxMem), kept in the same store as the memory entries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from lightmem.store.purge import PurgeReport
from lightmem.store.sessions import TaskSessionStore
from lightmem.store.values import ScoredId, Vector
from lightmem.types import Edge, EdgeKind, Node, NodeKind, Scope

__all__ = ["GraphStore"]


class GraphStore(Protocol):
    """Nodes with vectors and full text, typed weighted edges, and a reversible history.

    Every change is one transaction and one history event; :meth:`undo` reverts an event
    (and is itself recorded). An edge and a history event belong to the scope of the node
    they concern (an edge: its source node's); ``scope`` arguments restrict reads and undo
    to it (the default scope sees everything)."""

    def check_room(self) -> None:
        """Raise :class:`~lightmem.errors.StoreFullError` when the store holding the graph
        holds its size limit: called before adding what a caller gives."""

    def add_node(self, node: Node, vector: Vector, reason: str) -> Node: ...
    def update_node(self, node: Node, vector: Vector, reason: str) -> Node: ...
    def get_node(self, node_id: str) -> Node | None: ...
    def get_nodes(self, node_ids: Sequence[str]) -> dict[str, Node]: ...
    def nodes(
        self, kind: NodeKind, scope: Scope, limit: int = 1_000_000, newest: bool = False
    ) -> list[Node]:
        """Nodes of ``kind`` in ``scope``, oldest first: the first ``limit``, or with
        ``newest`` the last ``limit`` (read as such, not all of them then cut)."""
        ...

    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]: ...
    def vector_search(
        self, kind: NodeKind, query: Vector, scope: Scope, k: int
    ) -> list[ScoredId]: ...
    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]: ...
    def add_edge(self, edge: Edge, reason: str) -> None: ...
    def remove_edge(self, kind: EdgeKind, src: str, dst: str, reason: str) -> None: ...
    def edges(
        self,
        kind: EdgeKind | None = None,
        src: Sequence[str] | None = None,
        dst: Sequence[str] | None = None,
        scope: Scope | None = None,
    ) -> list[Edge]: ...
    def graph_history(
        self, limit: int = 100, scope: Scope | None = None
    ) -> list[dict[str, Any]]: ...
    def undo(self, seq: int, embed: Callable[[str], Vector], scope: Scope | None = None) -> None:
        """Revert event ``seq``; NotFoundError when it is not in ``scope``."""

    def graph_counts(self, scope: Scope) -> dict[str, int]: ...
    def purge(self, scope: Scope) -> PurgeReport:
        """Erase the graph of ``scope`` for good (see :func:`lightmem.store.purge.purge_graph`)."""

    def purge_node(self, scope: Scope, node_id: str) -> PurgeReport:
        """Erase one node of ``scope`` for good (see :func:`lightmem.store.purge.purge_node`)."""

    def task_sessions(self) -> TaskSessionStore:
        """Where FluxMem task sessions in progress are kept, beside the graph."""
