"""FluxMem's graph in the lightmem PostgreSQL schema: same pool and transactions."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lightmem.fluxmem.types import Node, NodeKind
from lightmem.store.base import ScoredId, Vector
from lightmem.store.graph_sql import NODE_COLS, SQLGraphStore, node_params
from lightmem.store.postgres import PostgresStore, search_terms, to_numpy
from lightmem.store.sql import POSTGRES, scope_sql
from lightmem.types import Scope


class PostgresGraphStore(SQLGraphStore):
    """A :class:`~lightmem.store.graph.GraphStore` in a :class:`PostgresStore`'s schema.

    Vectors are ranked exactly in the database (inner product); full text is a ``tsvector``
    ranked with ``ts_rank_cd``. Several processes may share the graph."""

    dialect = POSTGRES
    row_lock = " FOR UPDATE"

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    def _tx(self) -> Any:
        return self._store._tx()

    def _read(self) -> Any:
        return self._store._tx()

    def _changed(self) -> None:
        pass  # nothing cached in this process

    def _insert_row(self, c: Any, n: Node, vec: Vector) -> None:
        c.execute(
            f"INSERT INTO graph_nodes ({NODE_COLS}, embedding) VALUES "
            "(%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)",
            (*node_params(n), vec),
        )

    def _delete_row(self, c: Any, node_id: str) -> None:
        c.execute("DELETE FROM graph_nodes WHERE id = %s", (node_id,))

    # -- search -----------------------------------------------------------------------------
    def node_vectors(self, kind: NodeKind, scope: Scope) -> tuple[list[str], Vector]:
        where, params = scope_sql(POSTGRES, scope)
        with self._store._tx() as c:
            rows = c.execute(
                f"SELECT id, embedding FROM graph_nodes WHERE kind = %s AND {where} ORDER BY rid",
                (kind, *params),
            ).fetchall()
        if not rows:
            return [], np.zeros((0, 0), dtype=np.float32)
        return [r[0] for r in rows], np.vstack([to_numpy(r[1]) for r in rows])

    def vector_search(self, kind: NodeKind, query: Vector, scope: Scope, k: int) -> list[ScoredId]:
        if k <= 0:
            return []
        where, params = scope_sql(POSTGRES, scope)
        with self._store._tx() as c:
            rows = c.execute(
                "SELECT id, -(embedding <#> %s) AS score FROM graph_nodes "
                f"WHERE kind = %s AND {where} ORDER BY embedding <#> %s, rid LIMIT %s",
                (query, kind, *params, query, k),
            ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def text_search(
        self, kind: NodeKind, terms: Sequence[str], scope: Scope, k: int
    ) -> list[ScoredId]:
        query = search_terms(terms)
        if not query or k <= 0:
            return []
        where, params = scope_sql(POSTGRES, scope)
        with self._store._tx() as c:
            rows = c.execute(
                "SELECT id, ts_rank_cd(tsv, q) AS score FROM graph_nodes, "
                "to_tsquery('english', %s) AS q "
                f"WHERE tsv @@ q AND kind = %s AND {where} ORDER BY score DESC, rid LIMIT %s",
                (query, kind, *params, k),
            ).fetchall()
        return [(r[0], float(r[1])) for r in rows]
