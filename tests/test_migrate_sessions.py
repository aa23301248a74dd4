"""``lightmem migrate`` copies every table and column of the SQLite schema (the lists are
read from a store's own schema, so a table or column added later without being migrated
fails here), FluxMem task sessions included: a task started on SQLite is finished on
PostgreSQL after the move."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import drop_schema, require_postgres
from lightmem import LightMemory, WordLlamaEmbedder
from lightmem.cli.fluxmem_tables import ANALYSIS_DOC, DISTRACTORS, SPREADSHEET_DOC
from lightmem.fluxmem import Feedback, FluxMemAgent, StepResult
from lightmem.store.migrate import COPIED, NOT_COPIED, migrate
from lightmem.store.postgres import PostgresStore
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import Scope

DOCS = [SPREADSHEET_DOC, ANALYSIS_DOC, *DISTRACTORS]
TASK = "Which team has the most goals per player?"
MISLED = StepResult("x", Feedback("noise", "the spreadsheet tool misled me"), False)


def _tables(conn: sqlite3.Connection) -> set[str]:
    """The tables of a SQLite store as its schema defines them (FTS5 shadow tables and
    SQLite's own schema tables aside)."""
    return {
        str(r[1])
        for r in conn.execute("PRAGMA table_list")
        if r[2] in ("table", "virtual") and r[1] not in ("sqlite_schema", "sqlite_temp_schema")
    }


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def test_every_table_of_the_schema_is_copied_or_named_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.add_memory({"id": "m1", "content": "a first message"}, force_extract=True)
    conn = sqlite3.connect(path)
    try:
        tables = _tables(conn)
    finally:
        conn.close()
    copied = {t.table for t in COPIED}
    assert not copied & set(NOT_COPIED)
    assert tables - copied - set(NOT_COPIED) == set(), "tables migrate does not know"
    assert (copied | set(NOT_COPIED)) - tables == set(), "tables the schema no longer has"


@pytest.fixture
def pg_schemas() -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for schema in made:
        drop_schema(schema)


def _full_store(path: Path, embedder: WordLlamaEmbedder) -> dict[str, str]:
    """A store with a row in every copied table and a non-default value in every column
    added since ``migrate`` was first written; returns the ids the test follows."""
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.add_memory(
            [{"id": f"t{i}", "content": f"fact {i} about the garden"} for i in range(8)],
            force_extract=True,
            user_id="u",
        )
        first, second = mem.list_entries(limit=2, user_id="u")
        mem.update(first.id, "edited fact about the garden", user_id="u")
        mem.construct_update_queue_all_entries(5, 3, user_id="u")
        shown = {second.id: "what the updater was shown"}
        mem.store.save_update_checks("review", shown)
        mem.store.mark_update_checked("review", "the updater's key", {second.id: 0.75}, 1e9)
        mem.store.flag_update_checks("review", [second.id], 2e9)  # an earlier entry moved
        mem.add_memory({"id": "late", "content": "not extracted yet"}, user_id="u")
        agent = FluxMemAgent.on_store(mem.store, embedder)
        agent.add_knowledge(DOCS, source="handbook")
        agent.run_task("count the goals", lambda c: StepResult("ok", None, True, ("sum",)))
        stepped = agent.start_task(TASK)
        stepped.report(MISLED)
        finished = agent.start_task("count the goals again")  # kept with its outcome
        finished.report(StepResult("ok", None, True))
        assert finished.outcome is not None
        claimed = agent.start_task("brush the cat")
        assert stepped.id and claimed.id and stepped.outcome is None
        # A worker on the old store is in the middle of a step of this one.
        sessions = agent.graph.task_sessions()
        assert sessions.claim(claimed.id, Scope(), "old-worker", time.time(), 600.0)
    conn = sqlite3.connect(path)
    with conn:  # the newer columns, as the knowledge-update and time code write them
        conn.execute(
            "UPDATE entries SET superseded_by = ?, valid_to = 1700000000.5, "
            "time_start = 1699920000.0, time_end = 1700006400.0, time_unit = 'day', "
            "time_phrase = 'yesterday' WHERE id = ?",
            (second.id, first.id),
        )
    conn.close()
    return {"stepped": stepped.id, "claimed": claimed.id, "entry": first.id}


def _values(rows: list[tuple[Any, ...]], json_col: bool) -> Counter[str]:
    out: Counter[str] = Counter()
    for (v,) in rows:
        if json_col and isinstance(v, str):
            v = json.loads(v)
        out[json.dumps(v, sort_keys=True)] += 1
    return out


def test_every_column_of_every_copied_table_arrives(
    tmp_path: Path, embedder: WordLlamaEmbedder, pg_schemas: list[str]
) -> None:
    dsn = require_postgres()
    src = tmp_path / "full.db"
    _full_store(src, embedder)
    schema = f"test_{uuid.uuid4().hex[:12]}"
    pg_schemas.append(schema)
    report = migrate(f"sqlite:{src}", f"postgres:{dsn}", schema=schema)
    assert report["verified"], report
    assert report["task_sessions"] == {"rows": 3, "copied": 3, "checksum_match": True}
    released = {c for t in COPIED for c in t.released}
    lite = sqlite3.connect(src)
    store = PostgresStore(dsn, schema=schema)
    try:
        with store.db.read() as s:
            for spec in COPIED:
                rows = lite.execute(f"SELECT count(*) FROM {spec.table}").fetchone()[0]
                assert rows > 0, f"{spec.table}: the source holds no row to check"
                for col in _columns(lite, spec.table):
                    if col in released and spec.released:
                        continue
                    got = s.raw.execute(f"SELECT {col} FROM {spec.table}").fetchall()
                    json_col = any(isinstance(v, dict | list) for (v,) in got)
                    want = lite.execute(f"SELECT {col} FROM {spec.table}").fetchall()
                    assert _values(got, False) == _values(want, json_col), f"{spec.table}.{col}"
            (n,) = s.one("SELECT count(*) FROM task_sessions WHERE claim <> ''")
            assert n == 0  # claims released
            for table in ("entries", "graph_nodes"):  # full-text terms computed on arrival
                (terms,) = s.one(f"SELECT count(*) FROM {table} WHERE search_terms IS NULL")
                assert terms == 0, table
    finally:
        lite.close()
        store.close()


def test_a_session_started_on_sqlite_is_finished_on_postgres(
    tmp_path: Path, embedder: WordLlamaEmbedder, pg_schemas: list[str]
) -> None:
    dsn = require_postgres()
    src = tmp_path / "tasks.db"
    ids = _full_store(src, embedder)
    with FluxMemAgent.open(src) as old:
        before = old.resume_task(ids["stepped"]).context
    schema = f"test_{uuid.uuid4().hex[:12]}"
    pg_schemas.append(schema)
    assert migrate(f"sqlite:{src}", f"postgres:{dsn}", schema=schema)["verified"]
    store = PostgresStore(dsn, schema=schema)
    try:
        moved = FluxMemAgent.on_store(store, embedder)
        s = moved.resume_task(ids["stepped"])
        assert s.context == before and s.step == 1
        s.report(StepResult("Kenya", None, True, ("divide goals by players",)))
        assert s.outcome is not None and s.outcome.success and s.outcome.attempts == 2
        episode = moved.graph.get_node(s.outcome.episode_id)
        assert episode is not None and episode.data["status"] == "done"
        assert [a["attempt"] for a in episode.data["attempts"]] == [0, 1]
        # The session a worker of the old store held is free on the new one at once.
        held = moved.resume_task(ids["claimed"])
        held.report(StepResult("brushed", None, True))
        assert held.outcome is not None and held.outcome.success
        # New graph events continue after the copied ones.
        seqs = [e["seq"] for e in moved.history(1000)]
        assert seqs == sorted(set(seqs))
    finally:
        store.close()


def test_the_copy_stays_verified_when_the_graph_is_skipped(
    tmp_path: Path, embedder: WordLlamaEmbedder, pg_schemas: list[str]
) -> None:
    dsn = require_postgres()
    src = tmp_path / "skip.db"
    _full_store(src, embedder)
    schema = f"test_{uuid.uuid4().hex[:12]}"
    pg_schemas.append(schema)
    report = migrate(f"sqlite:{src}", f"postgres:{dsn}", schema=schema, skip_graph=True)
    assert report["verified"] and "task_sessions" not in report and "graph_nodes" not in report
    assert report["entries"]["rows"] == report["entries"]["copied"] > 0
    SQLiteStore(src).close()  # the source is left as it was
