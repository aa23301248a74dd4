"""PostgreSQL's HNSW index over half-precision copies or over the stored vectors."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from lightmem import ConfigError, MemoryEntry, SQLiteStore
from lightmem.types import Filters, Scope

DIM = 16


@pytest.mark.parametrize("kind", ["halfvec", "vector"])
def test_both_index_kinds_find_the_exact_neighbours(kind: str) -> None:
    from conftest import require_postgres
    from lightmem.store.postgres import PostgresStore

    dsn = require_postgres()
    rng = np.random.default_rng(7)
    m = rng.standard_normal((200, DIM)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    rows = [
        (MemoryEntry(id=f"v{i}", text=f"t{i}", original_text=f"t{i}", scope=Scope()), m[i])
        for i in range(200)
    ]
    lite = SQLiteStore(":memory:")
    pg = PostgresStore(dsn, schema=f"vec_{uuid.uuid4().hex[:10]}", pool_size=2, vector_index=kind)
    try:
        for s in (lite, pg):
            s.bind_embedder("test", DIM)
            s.commit_extraction(rows, [])
        with pg.db.read() as tx:
            indexdef = tx.one(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'entries_hnsw' "
                "AND schemaname = current_schema()"
            )[0]
        assert ("halfvec" in indexdef) == (kind == "halfvec")
        for q in m[:20]:
            want = lite.vector_search(q, Scope(), Filters(), 5)
            got = pg.vector_search(q, Scope(), Filters(), 5)
            assert [i for i, _ in got] == [i for i, _ in want]
            # scores come from the stored full-precision vectors, not the index's copies
            assert np.allclose([x for _, x in got], [x for _, x in want], atol=1e-6)
    finally:
        lite.close()
        pg.drop()
        pg.close()


def test_an_unknown_index_kind_is_refused_by_name() -> None:
    from lightmem.store.postgres_search import PostgresEntryIndex
    from lightmem.store.text_index import Stemmer

    with pytest.raises(ConfigError, match=r"store\.vector_index"):
        PostgresEntryIndex(None, Stemmer(), vector_index="float16")  # type: ignore[arg-type]
