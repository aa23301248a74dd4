"""One random workload on SQLite and on PostgreSQL: the results must be the same.

Text search is compared here as the set of matching ids (``test_pg_fulltext.py`` compares
the BM25 rankings and scores); store-assigned timestamps are compared for presence only."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem import MemoryEntry, NotFoundError, SQLiteStore
from lightmem.store.base import MemoryStore
from lightmem.types import Filters, Scope

DIM = 8
WORDS = ("apple", "river", "piano", "garden", "tunnel", "violet")
SCOPES = (Scope("ann"), Scope("bob"), Scope("ann", "agent1"))
T0 = datetime(2024, 1, 1, tzinfo=UTC)

OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "add", "update", "delete", "restore", "queue", "checks", "search"]),
        st.integers(0, 7),
        st.integers(0, len(SCOPES) - 1),
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    ),
    min_size=1,
    max_size=25,
)


def _vec(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return v / np.linalg.norm(v)


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from conftest import require_postgres

    yield require_postgres()


def _stores(dsn: str) -> tuple[MemoryStore, MemoryStore, str]:
    from lightmem.store.postgres import PostgresStore

    schema = f"cong_{uuid.uuid4().hex[:10]}"
    lite: MemoryStore = SQLiteStore(":memory:")
    pg: MemoryStore = PostgresStore(dsn, schema=schema, pool_size=2)
    for s in (lite, pg):
        s.bind_embedder("test", DIM)
    return lite, pg, schema


def _plain(e: MemoryEntry | None) -> Any:
    if e is None:
        return None
    d = e.to_dict()
    assert d.pop("created_at") and d.pop("updated_at")
    return d


def _history(store: MemoryStore, eid: str, scope: Scope) -> list[Any]:
    out = []
    for h in store.history(eid, scope):
        snaps = [
            {k: v for k, v in (s or {}).items() if not k.endswith("ed_at")}
            for s in (h.before, h.after)
        ]
        out.append((h.op, h.version, h.reason, snaps))
    return out


def _step(store: MemoryStore, op: str, i: int, scope: Scope, words: list[str]) -> Any:
    """One operation; returns what a caller would see."""
    eid = f"e{i}"
    text = " ".join(words)
    try:
        if op == "add":
            if store.get_entries([eid]):
                return "exists"
            e = MemoryEntry(
                id=eid,
                text=text,
                original_text=text,
                scope=scope,
                timestamp=T0 + timedelta(days=i),
                speaker_name="Ann" if i % 2 else "Bob",
                topic_id=f"t{i % 3}",
                metadata={"event_id": f"ev{i % 2}"},
            )
            store.commit_extraction([(e, _vec(i))], [])
            return "added"
        if op == "update":
            cur = store.get_entry(eid, scope)
            if cur is None:
                return "missing"
            return _plain(
                store.update_entry(replace(cur, text=text, original_text=text), _vec(i + 50), "u")
            )
        if op == "delete":
            return _plain(store.delete_entry(eid, scope, "d"))
        if op == "restore":
            snaps = [h.after or h.before for h in store.history(eid, scope)]
            if not snaps or store.get_entry(eid, scope) is not None:
                return "nothing"
            return _plain(store.restore_entry(MemoryEntry.from_dict(snaps[0]), _vec(i), "r"))  # type: ignore[arg-type]
        if op == "queue":
            ids, _m, _g = store.vectors(scope, Filters(kinds=("entry",)))
            store.save_update_queue({x: [(y, 0.5) for y in ids if y != x][:2] for x in ids})
            return store.load_update_queue(scope)
        if op == "checks":  # recorded per stage and updater, read back by id and scope
            stage, key = ("decide", "review")[i % 2], ("k1", "k2")[i % 3 == 0]
            digests = {f"e{j}": f"{text} {j}" for j in range(i % 4)}
            store.save_update_checks(stage, digests)
            # a view after every change (1e12) or before them (0.0); a flag after the view
            later = {f"e{j}": 0.5 for j in range(i % 4, i % 6)}
            store.mark_update_checked(stage, key, later, 1e12)
            store.mark_update_checked(stage, key, {"e0": 0.25 * (i % 3), "e1": None}, i % 2 * 1e12)
            store.flag_update_checks(stage, [f"e{i % 5}", "unknown"], 2e12 if i % 3 else 1.0)
            unchecked = [(p.id, p.moved) for p in store.unchecked_entries(scope, stage, key, 0, 5)]
            reach = store.load_update_reach(scope, stage, "k1")
            return store.load_update_checks(stage, [f"e{j}" for j in range(8)]), unchecked, reach
        filters = (
            Filters(),
            Filters(speaker="ann"),
            Filters(topic_id="t1"),
            Filters(event_id="ev0"),
            Filters(time_from=T0 + timedelta(days=2), time_to=T0 + timedelta(days=6)),
        )
        out = []
        for f in filters:
            vec_hits = [h[0] for h in store.vector_search(_vec(i), scope, f, 3)]
            text_hits = sorted(h[0] for h in store.text_search(words, scope, f, 50))
            listed = [_plain(e) for e in store.list_entries(scope, f, 50, 0)]
            out.append((vec_hits, text_hits, listed))
        return out
    except NotFoundError as exc:
        return f"not found: {exc}"


def _state(store: MemoryStore) -> Any:
    return (
        [store.counts(s) for s in (*SCOPES, Scope())],
        [(f"e{i}", _plain(store.get_entry(f"e{i}", Scope()))) for i in range(8)],
        [_history(store, f"e{i}", s) for i in range(8) for s in SCOPES],
        store.vectors(Scope(), Filters())[0],
    )


@settings(max_examples=8, deadline=None)
@given(OPS)
def test_sqlite_and_postgres_agree_on_a_random_workload(
    pg_dsn: str, ops: list[tuple[str, int, int, list[str]]]
) -> None:
    from conftest import drop_schema

    lite, pg, schema = _stores(pg_dsn)
    preamble = [("add", i, i % 2, [WORDS[i % 6], WORDS[(i * 5) % 6]]) for i in range(6)]
    try:
        for op, i, si, words in [*preamble, *ops, ("search", 3, 0, ["apple", "river"])]:
            a = _step(lite, op, i, SCOPES[si], words)
            b = _step(pg, op, i, SCOPES[si], words)
            assert a == b, (op, i, SCOPES[si], words)
        assert _state(lite) == _state(pg)
    finally:
        lite.close()
        pg.close()
        drop_schema(schema)
