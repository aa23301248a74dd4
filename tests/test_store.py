"""The SQLite store: transactions, history, search indexes, and a model-based property test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem import MemoryStore, SQLiteStore, StoreError
from lightmem.store.sqlite import APP_ID
from lightmem.types import Filters, MemoryEntry, Scope

DIM = 8


def _entry(i: int, text: str, scope: Scope | None = None) -> MemoryEntry:
    now = datetime.now(UTC)
    return MemoryEntry(
        id=f"e{i}",
        text=text,
        original_text=text,
        scope=scope or Scope(),
        timestamp=now,
        speaker_name="Ann",
        source_ids=(f"m{i}",),
        created_at=now,
        updated_at=now,
    )


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def test_new_store_is_marked_and_sound(mem_store: SQLiteStore) -> None:
    mem_store.bind_embedder("test", DIM)
    mem_store.commit_extraction([(_entry(1, "alpha beta"), _vec(1))], [])
    with mem_store.db.read() as s:
        assert s.one("PRAGMA application_id")[0] == APP_ID
    assert mem_store.integrity_check() == []


def test_vector_and_text_search(mem_store: SQLiteStore) -> None:
    mem_store.bind_embedder("test", DIM)
    rows = [(_entry(i, f"word{i} common"), _vec(i)) for i in range(20)]
    mem_store.commit_extraction(rows, [])
    hits = mem_store.vector_search(_vec(7), Scope(), Filters(), 3)
    assert hits[0][0] == "e7" and abs(hits[0][1] - 1.0) < 1e-5
    assert mem_store.text_search(["word12"], Scope(), Filters(), 5)[0][0] == "e12"
    assert mem_store.text_search(["absent"], Scope(), Filters(), 5) == []


def test_failed_transaction_leaves_nothing(mem_store: SQLiteStore) -> None:
    mem_store.bind_embedder("test", DIM)
    bad = np.zeros(DIM + 1, dtype=np.float32)
    with pytest.raises(StoreError, match="does not match the store"):
        mem_store.commit_extraction([(_entry(1, "ok"), _vec(1)), (_entry(2, "bad"), bad)], [])
    assert mem_store.counts(Scope())["entries"] == 0
    assert mem_store.integrity_check() == []


def test_search_sees_another_connections_writes(tmp_path: Path) -> None:
    path = str(tmp_path) + "/shared.db"
    a, b = SQLiteStore(path), SQLiteStore(path)
    a.bind_embedder("test", DIM)
    b.bind_embedder("test", DIM)
    assert b.vector_search(_vec(1), Scope(), Filters(), 1) == []
    a.commit_extraction([(_entry(1, "x"), _vec(1))], [])
    assert b.vector_search(_vec(1), Scope(), Filters(), 1)[0][0] == "e1"
    a.close()
    b.close()


ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "update", "delete", "restore"]),
        st.integers(0, 5),
        st.text(
            st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"]),
            min_size=1,
            max_size=30,
        ),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(ops)
def test_random_operations_match_a_dict_model(sequence: list[tuple[str, int, str]]) -> None:
    store = SQLiteStore(":memory:")
    store.bind_embedder("test", DIM)
    _check_against_model(store, sequence)
    store.close()


def _check_against_model(store: MemoryStore, sequence: list[tuple[str, int, str]]) -> None:
    model: dict[str, str] = {}
    last: dict[str, str] = {}
    scope = Scope()
    for op, i, text in sequence:
        eid = f"e{i}"
        if op == "add" and eid not in model and eid not in last:
            store.commit_extraction([(_entry(i, text), _vec(i))], [])
            model[eid] = last[eid] = text
        elif op == "update" and eid in model:
            cur = store.get_entry(eid, scope)
            assert cur is not None
            store.update_entry(replace(cur, text=text, original_text=text), _vec(i + 100), "t")
            model[eid] = last[eid] = text
        elif op == "delete" and eid in model:
            store.delete_entry(eid, scope, "t")
            del model[eid]
        elif op == "restore" and eid in last and eid not in model:
            snap = [h.after for h in store.history(eid, scope) if h.after][-1]
            store.restore_entry(MemoryEntry.from_dict(snap), _vec(i), "t")
            model[eid] = last[eid]
    stored = {e.id: e.text for e in store.list_entries(scope, Filters(), 1000, 0)}
    assert stored == model
    assert store.integrity_check() == []
    ids, matrix, _ = store.vectors(scope, Filters())
    assert sorted(ids) == sorted(model) and matrix.shape[0] == len(model)


cache_ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["add", "add_elsewhere", "add_summary", "update", "delete", "restore", "search"]
        ),
        st.integers(0, 7),
        st.sampled_from(["red apple", "green apple tree", "blue sky", "apple pie recipe"]),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(cache_ops)
def test_incremental_search_cache_matches_a_fresh_one(
    tmp_path_factory: pytest.TempPathFactory, sequence: list[tuple[str, int, str]]
) -> None:
    """Appends, updates, deletes and restores change the SQLite search cache in place.
    Whatever the mix, and whichever process wrote, searches equal those of a fresh cache."""
    path = tmp_path_factory.mktemp("cache") / "c.db"
    mine, other = SQLiteStore(path), SQLiteStore(path)
    for s in (mine, other):
        s.bind_embedder("test", DIM)
    scope, n = Scope(), 0
    try:
        for op, i, text in sequence:
            eid = f"e{i}"
            current = mine.get_entry(eid, scope)
            if op == "add" and current is None:
                mine.commit_extraction([(_entry(i, text), _vec(i))], [])
            elif op in ("add", "add_elsewhere", "add_summary"):
                n += 1
                writer = other if op == "add_elsewhere" else mine
                e = _entry(1000 + n, f"{text} {n}")
                if op == "add_summary":
                    e = replace(e, kind="summary")
                writer.commit_extraction([(e, _vec(n))], [])
            elif op == "update" and current is not None:
                new = replace(current, text=text, original_text=text)
                mine.update_entry(new, _vec(i + 100), "t")
            elif op == "delete" and current is not None:
                other.delete_entry(eid, scope, "t")
            elif op == "restore" and current is None and mine.history(eid, scope):
                snap = [h.after for h in mine.history(eid, scope) if h.after][-1]
                mine.restore_entry(MemoryEntry.from_dict(snap), _vec(i), "t")
            before = mine.entry_index.cache
            fresh = SQLiteStore(path)
            fresh.bind_embedder("test", DIM)
            (ids, scores), (fresh_ids, fresh_scores) = _search_state(mine), _search_state(fresh)
            assert ids == fresh_ids
            # BLAS may round the last bit differently for a matrix of another row count
            assert scores == pytest.approx(fresh_scores, abs=1e-6)
            fresh.close()
            if before is not None:
                # every change is applied to the cache in place, none rebuilds it
                assert mine.entry_index.cache is before
    finally:
        mine.close()
        other.close()


def _search_state(store: SQLiteStore) -> tuple[list[object], list[float]]:
    """The ids of a few searches, and their scores."""
    f = Filters()
    summaries = Filters(kinds=("summary",))
    results = [
        *[store.vector_search(_vec(q), Scope(), f, 4) for q in (1, 3, 103)],
        *[store.vector_search(_vec(q), Scope(), summaries, 2) for q in (2, 5)],
        store.text_search(["apple"], Scope(), summaries, 3),
        *[store.text_search([w], Scope(), f, 5) for w in ("apple", "sky", "pie")],
    ]
    limits = [4, 4, 4, 2, 2, 3, 5, 5, 5]
    ids: list[object] = [_ranked(r, k) for r, k in zip(results, limits, strict=True)]
    ids.append(store.vectors(Scope(), f)[0])
    return ids, [s for r in results for _, s in r]


def _ranked(hits: list[tuple[str, float]], k: int) -> list[object]:
    """The ids in rank order, hits whose scores differ by at most 1e-6 as one set: BLAS
    may round the last bit of equal vectors' scores differently for a matrix of another
    row count, which orders such near-ties either way. When the search was cut at ``k``,
    the last set is compared by its size (the cut may take either of near-equal hits)."""
    groups: list[tuple[set[str], float]] = []
    for i, score in hits:
        if groups and abs(groups[-1][1] - score) <= 1e-6:
            groups[-1][0].add(i)
        else:
            groups.append(({i}, score))
    out: list[object] = [sorted(g) for g, _ in groups]
    if out and len(hits) == k:
        out[-1] = len(groups[-1][0])
    return out


# -- both backends ------------------------------------------------------------------------
@pytest.fixture(params=["sqlite", "postgres"])
def any_store(request: pytest.FixtureRequest) -> Iterator[MemoryStore]:
    if request.param == "sqlite":
        s: MemoryStore = SQLiteStore(":memory:")
        s.bind_embedder("test", DIM)
        yield s
        s.close()
        return
    from conftest import drop_schema, require_postgres
    from lightmem.store.postgres import PostgresStore

    schema = f"test_{uuid.uuid4().hex[:12]}"
    pg = PostgresStore(require_postgres(), schema=schema, pool_size=2)
    pg.bind_embedder("test", DIM)
    yield pg
    pg.close()
    drop_schema(schema)


def test_search_on_both_backends(any_store: MemoryStore) -> None:
    rows = [(_entry(i, f"word{i} common"), _vec(i)) for i in range(20)]
    any_store.commit_extraction(rows, [])
    hits = any_store.vector_search(_vec(7), Scope(), Filters(), 3)
    assert hits[0][0] == "e7" and abs(hits[0][1] - 1.0) < 1e-4
    assert any_store.text_search(["word12"], Scope(), Filters(), 5)[0][0] == "e12"
    assert any_store.text_search(["absent"], Scope(), Filters(), 5) == []
    assert any_store.integrity_check() == []


def test_failed_write_leaves_nothing_on_both_backends(any_store: MemoryStore) -> None:
    bad = np.zeros(DIM + 1, dtype=np.float32)
    with pytest.raises(StoreError, match="does not match the store"):
        any_store.commit_extraction([(_entry(1, "ok"), _vec(1)), (_entry(2, "bad"), bad)], [])
    assert any_store.counts(Scope())["entries"] == 0
    assert any_store.integrity_check() == []


def test_bulk_import_on_both_backends(any_store: MemoryStore) -> None:
    # On PostgreSQL a first load this large drops the indexes and builds them once after.
    if hasattr(any_store, "bulk_reindex_min"):
        any_store.bulk_reindex_min = 30
    rows = [(_entry(i, f"word{i} bulk"), _vec(i)) for i in range(60)]
    assert any_store.import_entries(iter(rows), reason="seeded") == 60
    more = [(_entry(100 + i, f"word{100 + i} later"), _vec(100 + i)) for i in range(5)]
    assert any_store.import_entries(more) == 5  # small: indexes kept and maintained
    assert any_store.vector_search(_vec(42), Scope(), Filters(), 1)[0][0] == "e42"
    assert any_store.vector_search(_vec(103), Scope(), Filters(), 1)[0][0] == "e103"
    assert any_store.text_search(["word17"], Scope(), Filters(), 5)[0][0] == "e17"
    assert [(h.op, h.reason) for h in any_store.history("e17", Scope())] == [("add", "seeded")]
    assert any_store.get_entry("e17", Scope()) == rows[17][0]
    assert any_store.counts(Scope())["entries"] == 65 and any_store.integrity_check() == []
    bad = [(_entry(200, "fine"), _vec(200)), (_entry(201, "bad"), np.zeros(3, np.float32))]
    with pytest.raises(StoreError):
        any_store.import_entries(bad)
    assert any_store.counts(Scope())["entries"] == 65  # all or nothing


@settings(max_examples=25, deadline=None)
@given(ops)
def test_postgres_matches_the_dict_model(sequence: list[tuple[str, int, str]]) -> None:
    from conftest import drop_schema, require_postgres
    from lightmem.store.postgres import PostgresStore

    schema = f"test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(require_postgres(), schema=schema, pool_size=1)
    try:
        store.bind_embedder("test", DIM)
        _check_against_model(store, sequence)
    finally:
        store.close()
        drop_schema(schema)


def test_postgres_refuses_a_newer_schema_and_an_unreachable_server() -> None:
    import psycopg

    from conftest import drop_schema, require_postgres
    from lightmem.errors import StoreError
    from lightmem.store.postgres import MIGRATIONS, PostgresStore

    dsn = require_postgres()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    PostgresStore(dsn, schema=schema).close()
    PostgresStore(dsn, schema=schema).close()  # migrating twice is harmless
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            f"INSERT INTO {schema}.schema_migrations VALUES (%s, 0)", (len(MIGRATIONS) + 1,)
        )
    with pytest.raises(StoreError, match="upgrade lightmem"):
        PostgresStore(dsn, schema=schema)
    drop_schema(schema)
    with pytest.raises(StoreError, match=r"store\.dsn: cannot connect"):
        PostgresStore("postgresql://postgres@127.0.0.1:9/postgres", connect_timeout_s=2)


@pytest.mark.serial
def test_postgres_survives_a_server_restart() -> None:
    import os
    import subprocess

    import psycopg

    from conftest import drop_schema, require_postgres
    from lightmem.store.postgres import PostgresStore

    restart = os.environ.get("LIGHTMEM_TEST_PG_RESTART")
    dsn = require_postgres()
    if not restart:
        pytest.skip("set LIGHTMEM_TEST_PG_RESTART to a command restarting the test server")
    schema = f"test_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema, pool_size=2)
    store.bind_embedder("test", DIM)
    store.commit_extraction([(_entry(1, "before the restart"), _vec(1))], [])
    # A checkpoint now, so the shutdown's own is short: a spread checkpoint of the suite's
    # many schemas took minutes on a loaded machine, past pg_ctl's wait.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
    # no pipes: the restarted server would hold them open
    subprocess.run(
        restart, shell=True, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    store.commit_extraction([(_entry(2, "after the restart"), _vec(2))], [])  # reconnects
    assert store.counts(Scope())["entries"] == 2 and store.integrity_check() == []
    store.close()
    drop_schema(schema)


def test_migrate_sqlite_to_postgres(tmp_path: Any) -> None:
    from conftest import drop_schema, require_postgres
    from lightmem import LightMemory, StoreError
    from lightmem.store.migrate import migrate

    dsn = require_postgres()
    src = tmp_path / "src.db"
    with LightMemory.from_config({"store": {"path": str(src)}}) as m:
        m.add_memory(
            [{"id": f"t{i}", "content": f"fact {i} about the garden"} for i in range(12)],
            force_extract=True,
            user_id="u",
        )
        first = m.list_entries(limit=1)[0]
        m.update(first.id, "edited fact")
        m.add_memory({"id": "late", "content": "not extracted yet"})
    schema = f"test_{uuid.uuid4().hex[:12]}"
    # bulk_reindex_min: exercise the drop-indexes-then-build path on a small store
    report = migrate(f"sqlite:{src}", f"postgres:{dsn}", schema=schema, bulk_reindex_min=5)
    assert report["verified"] and report["entries"]["rows"] == report["entries"]["copied"] > 12
    with LightMemory.from_config(
        {"store": {"provider": "postgres", "dsn": dsn, "schema": schema}}
    ) as pg:
        assert [h.op for h in pg.history(first.id)] == ["add", "update"]
        assert pg.retrieve("garden", 3, user_id="u")
        assert pg.flush().entries_created  # the buffered message carried over
    with pytest.raises(StoreError, match="already holds entries"):
        migrate(f"sqlite:{src}", f"postgres:{dsn}", schema=schema)
    drop_schema(schema)


def test_migrate_copies_the_fluxmem_graph(tmp_path: Any) -> None:
    from conftest import drop_schema, require_postgres
    from lightmem.fluxmem import FluxMemAgent, StepResult
    from lightmem.store.migrate import migrate
    from lightmem.store.postgres import PostgresStore

    dsn = require_postgres()
    src = tmp_path / "graph.db"
    agent = FluxMemAgent.open(src)
    agent.add_knowledge("Pixel the cat eats tuna at noon.")
    done = agent.run_task("feed the cat", lambda c: StepResult("ok", None, True, ("open tuna",)))
    events = agent.history(1000)
    stats = agent.stats()
    agent.graph.db.close()  # type: ignore[attr-defined]
    schema = f"test_{uuid.uuid4().hex[:12]}"
    skipped = f"test_{uuid.uuid4().hex[:12]}"
    try:
        report = migrate(f"sqlite:{src}", f"postgres:{dsn}", schema=schema)
        assert report["verified"] and report["graph_nodes"]["copied"] == 2
        assert report["graph_edges"]["rows"] == report["graph_edges"]["copied"] >= 1
        store = PostgresStore(dsn, schema=schema)
        moved = FluxMemAgent.on_store(store, agent.embedder)
        assert moved.history(1000) == events and moved.stats() == stats
        assert moved.subgraph("feed the cat").episodic[0].node.id == done.episode_id
        moved.undo(events[0]["seq"])  # event numbers survive the move
        assert moved.stats()["semantic_nodes"] == 0
        assert moved.history(1)[0]["seq"] > events[-1]["seq"]
        store.close()
        report = migrate(f"sqlite:{src}", f"postgres:{dsn}", schema=skipped, skip_graph=True)
        assert report["verified"] and report["graph_nodes_skipped"] == 2
        assert "graph_nodes" not in report
    finally:
        drop_schema(schema)
        drop_schema(skipped)


def test_a_restored_entry_keeps_its_creation_time(any_store: MemoryStore) -> None:
    """Restoring a deleted entry from its first snapshot returns (and stores) the time it
    was created, on both backends; the history snapshot carries it too."""
    new = replace(_entry(4, "tunnel piano"), created_at=None, updated_at=None)  # as extracted
    any_store.commit_extraction([(new, _vec(4))], [])
    created = any_store.get_entry("e4", Scope())
    assert created is not None and created.created_at is not None
    added = any_store.history("e4", Scope())[0].after
    assert added is not None and added["created_at"] == created.created_at.isoformat()
    any_store.delete_entry("e4", Scope(), "d")
    restored = any_store.restore_entry(MemoryEntry.from_dict(added), _vec(4), "r")
    assert restored.created_at == created.created_at
    assert any_store.get_entry("e4", Scope()) == restored
