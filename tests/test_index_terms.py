"""The keyword index holds a memory's first MAX_DOCUMENT_TERMS words on both backends, so a
memory of megabytes of distinct words costs the in-memory index a bounded amount."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pytest

from lightmem import MemoryEntry, SQLiteStore
from lightmem.store.base import MemoryStore
from lightmem.store.text_index import MAX_DOCUMENT_TERMS, Stemmer, document_terms
from lightmem.types import Filters, Scope

DIM = 8
WHEN = datetime(2024, 1, 1, tzinfo=UTC)


def _entry(eid: str, text: str) -> MemoryEntry:
    return MemoryEntry(eid, text[:100], text, Scope(), WHEN, speaker_name="Ann")


def _fill(store: MemoryStore) -> None:
    store.bind_embedder("test", DIM)
    long = " ".join(f"zq{i}" for i in range(MAX_DOCUMENT_TERMS + 2_000))
    vec = (np.ones(DIM) / np.sqrt(DIM)).astype(np.float32)
    store.import_entries([(_entry("long", long), vec), (_entry("short", "zq10500 apple"), vec)])


def _found(store: MemoryStore, word: str) -> list[str]:
    return [i for i, _ in store.text_search([word], Scope(), Filters(), 10)]


def _check(store: MemoryStore) -> None:
    _fill(store)
    # "Ann: " opens the indexed text, so the long memory's words are terms 2, 3, ...
    assert _found(store, f"zq{MAX_DOCUMENT_TERMS - 3}") == ["long"]
    assert _found(store, "zq10500") == ["short"]  # past the long memory's first words
    assert _found(store, "apple") == ["short"]


def test_document_terms_are_the_first_max_document_terms() -> None:
    stemmer = Stemmer()
    text = " ".join(f"zq{i}" for i in range(MAX_DOCUMENT_TERMS + 5))
    terms = document_terms(text, stemmer)
    assert len(terms) == MAX_DOCUMENT_TERMS and terms[-1] == f"zq{MAX_DOCUMENT_TERMS - 1}"
    assert document_terms("Ann: a short one", stemmer) == stemmer.tokens("Ann: a short one")


def test_sqlite_indexes_the_first_words_of_a_long_memory() -> None:
    store = SQLiteStore(":memory:")
    try:
        _check(store)
    finally:
        store.close()


@pytest.fixture
def pg_store() -> Iterator[MemoryStore]:
    from conftest import drop_schema, require_postgres
    from lightmem.store.postgres import PostgresStore

    dsn = require_postgres()
    schema = f"terms_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(dsn, schema=schema, pool_size=2)
    try:
        yield store
    finally:
        store.close()
        drop_schema(schema)


def test_postgres_indexes_the_same_first_words(pg_store: MemoryStore) -> None:
    _check(pg_store)


def test_postgres_cuts_the_terms_of_entries_stored_before_the_cap(
    pg_store: MemoryStore,
) -> None:
    """The migration step cuts an entry written with every term to the first ones, and
    its postings follow (the step's SQL run again over such a row)."""
    from lightmem.store.postgres import PostgresStore
    from lightmem.store.postgres_terms import CAP_ENTRY_TERMS_SQL

    assert isinstance(pg_store, PostgresStore)
    pg_store.bind_embedder("test", DIM)
    vec = (np.ones(DIM) / np.sqrt(DIM)).astype(np.float32)
    pg_store.import_entries([(_entry("long", "zq0"), vec), (_entry("short", "zq10003"), vec)])
    every = " ".join(f"zq{i}" for i in range(MAX_DOCUMENT_TERMS + 5))
    with pg_store.db.transaction() as s:  # as an entry was stored before the cap
        s.execute("UPDATE entries SET search_terms = ? WHERE id = 'long'", (every,))
    assert set(_found(pg_store, "zq10003")) == {"long", "short"}
    with pg_store.db.transaction() as s:
        s.execute(CAP_ENTRY_TERMS_SQL)
    assert _found(pg_store, "zq10003") == ["short"]
    assert _found(pg_store, f"zq{MAX_DOCUMENT_TERMS - 1}") == ["long"]


def test_postgres_writes_a_long_memory_in_time(pg_store: MemoryStore) -> None:
    """A memory of MAX_DOCUMENT_TERMS terms is written in well under a second: its postings
    trigger splits its terms once (it split them again for each term: 4 s here, 9 s for
    the cap's update). A store made before the fix gets it from its migration step."""
    from conftest import require_postgres
    from lightmem.store.postgres import PostgresStore
    from lightmem.store.postgres_schema import MIGRATIONS
    from lightmem.store.postgres_terms import POSTINGS_FUNCTION_SQL

    assert isinstance(pg_store, PostgresStore)
    old = POSTINGS_FUNCTION_SQL.replace(" OFFSET 0", "")
    assert old != POSTINGS_FUNCTION_SQL
    step = next(n for n, m in enumerate(MIGRATIONS, 1) if m.name == "pg_postings_split_once")
    with pg_store.db.transaction() as s:  # the store as the step before left it
        s.execute(old)
        s.execute("DELETE FROM schema_migrations WHERE version >= ?", (step,))
    store = PostgresStore(require_postgres(), schema=pg_store.schema, pool_size=2)
    try:
        store.bind_embedder("test", DIM)
        vec = (np.ones(DIM) / np.sqrt(DIM)).astype(np.float32)
        every = " ".join(f"zq{i}" for i in range(MAX_DOCUMENT_TERMS))
        t0 = time.perf_counter()
        store.import_entries([(_entry("long", every), vec)])
        store.update_entry(_entry("long", every.replace("zq7 ", "zq7x ")), vec, "edited")
        assert time.perf_counter() - t0 < 1.5  # ~0.1 s; 2 x 4 s before
        assert _found(store, "zq7x") == ["long"] and _found(store, "zq7") == []
    finally:
        store.close()
