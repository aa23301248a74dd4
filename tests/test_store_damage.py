"""What a store does to rows that are not its own to touch, and with rows it cannot read.

Purging one FluxMem node erases the history of the node's own scope only (another user's
event that holds the same words is not the node's). A SQLite file damaged by another tool
(malformed JSON in a row, a scribbled schema or schema version) gives a StoreError naming
what is damaged, and one bad row (or one bad vector) never makes a list, search or history
fail: it is skipped, logged and reported by ``integrity_check()``."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lightmem import LightMemory, StoreError
from lightmem.fluxmem import FluxMemAgent
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import Filters, Scope

SECRET = "Maya's locker combination is 31-07-1994 behind the blue door"


def _texts(agent: FluxMemAgent) -> str:
    return json.dumps(agent.history(1000))


def test_purging_a_node_leaves_other_scopes_history_alone(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "two.db"))
    try:
        alice = FluxMemAgent.on_store(store, agent_id="alice-bot", user_id="alice")
        bob = FluxMemAgent.on_store(store, agent_id="bob-bot", user_id="bob")
        bob.add_knowledge(["Bob's wifi password is hunter2 and the router is in the hall."])
        bob.add_knowledge([SECRET])  # the same words, stored by bob himself
        [short] = alice.add_knowledge(["is"])
        [secret] = alice.add_knowledge([SECRET])
        alice.add_knowledge(["This list exists"])  # "is" only inside longer words
        alice.start_task(f"remember that {SECRET}")  # an episode quoting the secret
        bobs = bob.history(1000)
        assert len(bobs) == 2 and SECRET in _texts(alice)
        alice.purge(secret)
        # Every copy in alice's scope is gone (the episode quoting it too); bob keeps his.
        assert "31-07-1994" not in _texts(alice)
        assert bob.history(1000) == bobs
        report = alice.purge(short)
        assert report.removed["graph_nodes"] == 1
        assert bob.history(1000) == bobs  # a short text erases nothing of bob's
        bob.undo(bobs[0]["seq"])  # and bob can still undo his change
        assert "This list exists" in _texts(alice)  # not a copy of "is"
    finally:
        store.close()


def _filled(path: Path) -> list[str]:
    """A store of maya's 6 entries; their ids."""
    turns = [
        {"id": f"t{i}", "content": f"My knee hurt after run {i}", "timestamp": "2024-03-02T09:15"}
        for i in range(6)
    ]
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.add_memory(turns, user_id="maya", force_extract=True)
        return [e.id for e in mem.list_entries(user_id="maya")]


def _scribble(path: Path, *sql: str) -> None:
    conn = sqlite3.connect(path)
    try:
        for stmt in sql:
            conn.execute(stmt)
        conn.commit()
    finally:
        conn.close()


@pytest.mark.parametrize("column, bad", [("source_ids", "{not json"), ("metadata", "[1,2")])
def test_one_row_of_malformed_json_is_skipped_by_lists_and_searches(
    tmp_path: Path, column: str, bad: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "bad.db"
    ids = _filled(path)
    _scribble(path, f"UPDATE entries SET {column} = '{bad}' WHERE id = '{ids[2]}'")
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        listed = [e.id for e in mem.list_entries(user_id="maya")]
        assert listed == ids[:2] + ids[3:]
        found = {h.entry.id for h in mem.retrieve("knee hurt run", user_id="maya", limit=10)}
        assert found and ids[2] not in found
        assert "entries row" in caplog.text and ids[2] in caplog.text
        with pytest.raises(StoreError, match=rf"entries row '{ids[2]}' is damaged.*{column}"):
            mem.get(ids[2], user_id="maya")
        assert [p for p in mem.store.integrity_check() if ids[2] in p and column in p]


def test_a_short_vector_leaves_its_entry_out_of_vector_search_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "vec.db"
    ids = _filled(path)
    _scribble(
        path,
        "UPDATE vectors SET vec = x'0102' WHERE rid = "
        f"(SELECT rid FROM entries WHERE id = '{ids[1]}')",
    )
    maya = Scope(user_id="maya")
    for _ in range(2):  # the second time from the index saved on close
        with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
            [vec] = mem.embedder.embed(["My knee hurt after run 1"])
            dense = [i for i, _ in mem.store.vector_search(vec, maya, Filters(), 10)]
            assert set(ids) - {ids[1]} <= set(dense) and ids[1] not in dense
            # Full-text search still finds it (only its vector is damaged), so retrieve does.
            assert ids[1] in [
                i for i, _ in mem.store.text_search(["run", "1"], maya, Filters(), 10)
            ]
            assert ids[1] in {h.entry.id for h in mem.retrieve("knee run 1", user_id="maya")}
            assert [p for p in mem.store.integrity_check() if p.startswith("vectors row")]
    assert "left a damaged vector out of vector search" in caplog.text
    assert "its vector has 2 bytes" in caplog.text
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.store.reembed(mem.embedder)  # rewrites every vector, the damaged one too
        dense = [i for i, _ in mem.store.vector_search(vec, maya, Filters(), 10)]
        assert set(ids) <= set(dense)
        assert not [p for p in mem.store.integrity_check() if p.startswith("vectors row")]


def test_a_short_graph_vector_leaves_only_its_node_out_of_dense_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "graph.db"
    facts = [
        "The cookbook says to slice the carrot and fry it.",
        "The map says the kitchen is north of the hallway.",
        "Coins are found in the backyard under the bench.",
    ]
    store = SQLiteStore(str(path))
    try:
        agent = FluxMemAgent.on_store(store)
        ids = agent.add_knowledge(facts)
    finally:
        store.close()
    _scribble(
        path,
        f"UPDATE graph_vectors SET vec = x'0102' WHERE rid = "
        f"(SELECT rid FROM graph_nodes WHERE id = '{ids[1]}')",
    )
    store = SQLiteStore(str(path))
    try:
        agent = FluxMemAgent.on_store(store)
        context = agent.context("Where are the coins? Slice the carrot.")
        assert facts[2] in context and facts[0] in context
        assert "skipped a damaged row" in caplog.text and ids[1] in caplog.text
    finally:
        store.close()


@pytest.mark.parametrize(
    "sql, message",
    [
        ("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'", "the schema version 'abc'"),
        ("DELETE FROM meta WHERE key = 'schema_version'", "no schema version"),
    ],
)
def test_a_damaged_schema_version_is_refused(tmp_path: Path, sql: str, message: str) -> None:
    path = tmp_path / "ver.db"
    _filled(path)
    _scribble(path, sql)
    with pytest.raises(StoreError, match=rf"is damaged: its meta table holds {message}"):
        LightMemory.from_config({"store": {"path": str(path)}})


def test_a_scribbled_schema_table_is_a_store_error(tmp_path: Path) -> None:
    path = tmp_path / "schema.db"
    _filled(path)
    # A schema row scribbled with bytes that are not UTF-8: sqlite3 fails decoding its own
    # "malformed database schema (...)" message, which quotes them.
    _scribble(
        path,
        "PRAGMA writable_schema = ON",
        "UPDATE sqlite_master SET sql = CAST(x'435245415445ff9d' AS TEXT), "
        "name = CAST(x'6dff9d' AS TEXT) WHERE name = 'graph_history_scope'",
    )
    with pytest.raises(StoreError, match="is not a readable SQLite file"):
        LightMemory.from_config({"store": {"path": str(path)}})
