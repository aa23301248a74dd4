"""Erasure: ``purge`` removes an entry or a whole scope for good, on both backends, and
leaves no copy of the text in the SQLite file or its WAL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import acme_rest
from lightmem import InvalidInputError, LightMemory, NotFoundError
from lightmem.fluxmem import FluxMemAgent, StepResult
from lightmem.server.tenancy import TenantPool

SECRET = "Maya's locker combination is 31-07-1994 behind the blue door"
OTHER = "Bob keeps his bicycle in the garage beside the red ladder"


def _turns(text: str, tag: str) -> list[dict[str, Any]]:
    return [
        {"id": f"{tag}1", "role": "user", "content": text},
        {"id": f"{tag}2", "role": "assistant", "content": "Noted, I will remember that."},
    ]


def _fill(mem: LightMemory) -> tuple[list[str], list[str]]:
    a = mem.add_memory(_turns(SECRET, "m"), force_extract=True, user_id="maya")
    b = mem.add_memory(_turns(OTHER, "b"), force_extract=True, user_id="bob")
    assert a.entries_created and b.entries_created
    return list(a.entries_created), list(b.entries_created)


def _all_text(mem: LightMemory, user: str) -> str:
    entries = mem.list_entries(user_id=user)
    return " ".join(e.text + " " + e.original_text for e in entries)


def test_purge_needs_an_id_or_a_scope(memory: LightMemory) -> None:
    with pytest.raises(InvalidInputError, match=r"^entry_id"):
        memory.purge()
    with pytest.raises(NotFoundError):
        memory.purge("no-such-entry", user_id="maya")


def test_purge_by_id_removes_entry_history_sources_and_index(memory: LightMemory) -> None:
    _maya, bob = _fill(memory)
    target = next(e.id for e in memory.list_entries(user_id="maya") if "1994" in e.text)
    memory.update(target, SECRET + " (updated)", user_id="maya")
    assert memory.retrieve("locker combination", user_id="maya", mode="context")
    report = memory.purge(target, user_id="maya")
    # The entry and what repeats its turn (the topic summary, a neighbour quoting it).
    assert report.removed["entries"] >= 2
    assert "1994" not in _all_text(memory, "maya") and "locker" not in _all_text(memory, "maya")
    assert report.removed["history"] >= 2  # add + update
    assert report.removed["messages"] >= 1
    with pytest.raises(NotFoundError):
        memory.get(target, user_id="maya")
    with pytest.raises(NotFoundError):
        memory.history(target, user_id="maya")
    with pytest.raises(NotFoundError):
        memory.restore(target, user_id="maya")
    hits = memory.retrieve("locker combination", user_id="maya", mode="context")
    assert target not in [h.entry.id for h in hits]
    hits = memory.retrieve(SECRET, user_id="maya", mode="embedding")
    assert target not in [h.entry.id for h in hits]
    # Bob's data is untouched.
    assert {e.id for e in memory.list_entries(user_id="bob")} == set(bob)
    assert "bicycle" in _all_text(memory, "bob")


def test_purge_of_a_deleted_entry_removes_its_history(memory: LightMemory) -> None:
    maya, _ = _fill(memory)
    memory.delete(maya[0], user_id="maya")
    report = memory.purge(maya[0], user_id="maya")
    assert report.removed["history"] >= 2  # its add and delete (+ derived entries' adds)
    assert maya[0] not in {e.id for e in memory.list_entries(user_id="maya")}
    with pytest.raises(NotFoundError):
        memory.restore(maya[0], user_id="maya")


def test_purge_by_id_respects_the_scope(memory: LightMemory) -> None:
    maya, _ = _fill(memory)
    with pytest.raises(NotFoundError):
        memory.purge(maya[0], user_id="bob")
    assert memory.get(maya[0], user_id="maya")


def test_purge_scope_removes_everything_of_it_and_nothing_else(memory: LightMemory) -> None:
    maya, bob = _fill(memory)
    memory.add_memory(_turns("Maya is still typing", "p"), user_id="maya")  # buffered turns
    memory.construct_update_queue_all_entries(user_id="maya")
    graph = memory.store.graph()
    flux_maya = FluxMemAgent.on_store(memory.store, memory.embedder, user_id="maya")
    flux_bob = FluxMemAgent.on_store(memory.store, memory.embedder, user_id="bob")
    flux_maya.add_knowledge(SECRET, source="maya")
    flux_bob.add_knowledge(OTHER, source="bob")
    bob_counts = memory.store.counts(memory_scope("bob"))
    bob_graph = graph.graph_counts(memory_scope("bob"))
    bob_history = flux_bob.history()

    report = memory.purge(user_id="maya")
    assert report.removed["entries"] == len(maya) + 2  # and the buffered turns' provisional
    assert report.removed["messages"] == 4  # two extracted, two buffered
    assert report.removed["graph_nodes"] >= 1 and report.removed["graph_history"] >= 1
    assert memory.list_entries(user_id="maya") == []
    assert memory.store.buffered_scopes() == []
    assert flux_maya.history() == []
    assert graph.graph_counts(memory_scope("maya")).get("semantic", 0) == 0
    assert not memory.retrieve("locker", user_id="maya", mode="context")
    # Bob: exactly as before.
    assert {e.id for e in memory.list_entries(user_id="bob")} == set(bob)
    assert memory.store.counts(memory_scope("bob")) == bob_counts
    assert graph.graph_counts(memory_scope("bob")) == bob_graph
    assert flux_bob.history() == bob_history


def memory_scope(user: str) -> Any:
    from lightmem.types import Scope

    return Scope(user_id=user)


def _file_bytes(path: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal"):
        p = Path(str(path) + suffix)
        if p.exists():
            data += p.read_bytes()
    return data


@pytest.mark.parametrize("how", ["id", "scope"])
def test_no_copy_left_in_the_sqlite_file(tmp_path: Path, how: str) -> None:
    path = tmp_path / "erase.db"
    needle = b"31-07-1994"
    with LightMemory.from_config({"store": {"provider": "sqlite", "path": str(path)}}) as mem:
        # As on SQLite builds whose default is off: the purge must switch it on itself.
        with mem.store.db.read() as s:  # type: ignore[attr-defined]
            s.raw.execute("PRAGMA secure_delete = OFF")
        _maya, _ = _fill(mem)
        target = next(e.id for e in mem.list_entries(user_id="maya") if "1994" in e.text)
        if how == "scope":
            FluxMemAgent.on_store(mem.store, mem.embedder, user_id="maya").add_knowledge(
                SECRET, source="maya"
            )
        mem.delete(target, user_id="maya")
        # A plain delete keeps the text (history, raw turns): the check below can fail.
        assert needle in _file_bytes(path)
        report = mem.purge(target, user_id="maya") if how == "id" else mem.purge(user_id="maya")
        assert report.compacted
        assert needle not in _file_bytes(path)
        assert b"bicycle" in _file_bytes(path)
    assert needle not in _file_bytes(path)


def test_rest_purge_round_trip(tmp_path: Path) -> None:
    with acme_rest(tmp_path, timeout=60) as (c, _pool):
        for user, text, tag in (("maya", SECRET, "m"), ("bob", OTHER, "b")):
            body = {"messages": _turns(text, tag), "force_extract": True, "user_id": user}
            assert c.post("/v1/memories", json=body).status_code == 200
        assert c.delete("/v1/purge").status_code == 422
        assert c.delete("/v1/purge", params={"entry_id": "nope"}).status_code == 404
        eid = c.get("/v1/memories", params={"user_id": "bob"}).json()["items"][0]["id"]
        one = c.delete("/v1/purge", params={"entry_id": eid}).json()
        assert one["removed"]["entries"] >= 1 and one["compacted"]
        assert c.get(f"/v1/memories/{eid}/history").status_code == 404
        # Bob's two turns and all that repeats them are gone; Maya's are untouched.
        assert c.get("/v1/memories", params={"user_id": "maya"}).json()["items"]
        r = c.delete("/v1/purge", params={"user_id": "maya"})
        assert r.status_code == 200 and r.json()["removed"]["entries"] >= 1
        assert c.get("/v1/memories", params={"user_id": "maya"}).json()["items"] == []
        assert c.get("/v1/memories", params={"user_id": "bob"}).json()["items"] == []
        assert "/v1/purge" in c.get("/openapi.json").json()["paths"]


def test_mcp_purge_memory_tool(tmp_path: Path) -> None:
    import asyncio

    from fastmcp import Client

    from lightmem.server.mcp import create_mcp

    pool = TenantPool(tmp_path / "data")
    tenant = pool.get("local")
    server = create_mcp(lambda: tenant)

    async def main() -> None:
        async with Client(server) as c:
            assert "purge_memory" in {t.name for t in await c.list_tools()}
            await c.call_tool(
                "add_memory",
                {"messages": _turns(SECRET, "m"), "user_id": "maya", "force_extract": True},
            )
            with pytest.raises(Exception, match="entry_id"):
                await c.call_tool("purge_memory", {})
            r = await c.call_tool("purge_memory", {"user_id": "maya"})
            assert r.structured_content["removed"]["entries"] >= 1
            assert tenant.memory.list_entries(user_id="maya") == []

    try:
        asyncio.run(main())
    finally:
        pool.close()


def test_cli_purge(tmp_path: Path) -> None:
    import json

    from inprocess_cli import CliResult, run

    db = tmp_path / "cli.db"
    conv = tmp_path / "conv.json"
    conv.write_text(json.dumps(_turns(SECRET, "m")))

    def cli(*args: str) -> CliResult:
        return run("--store", str(db), *args)

    assert cli("--user-id", "maya", "add", str(conv)).returncode == 0
    refused = cli("purge")
    assert refused.returncode != 0 and "entry_id" in refused.stderr
    out = cli("--user-id", "maya", "purge", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["removed"]["entries"] >= 1
    assert b"31-07-1994" not in db.read_bytes()


@pytest.mark.parametrize("store_config", ["postgres"], indirect=True)
def test_postgres_purge_vacuums_the_touched_tables(store_config: dict[str, Any]) -> None:
    import psycopg

    with LightMemory.from_config({"store": store_config}) as mem:
        _fill(mem)
        mem.purge(user_id="maya")
    with psycopg.connect(store_config["dsn"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, last_vacuum FROM pg_stat_user_tables WHERE schemaname = %s",
            (store_config["schema"],),
        ).fetchall()
    vacuumed = {name for name, at in rows if at is not None}
    assert {"entries", "history", "messages"} <= vacuumed


# -- FluxMem: task sessions and an unscoped graph (issue 11) --------------------------------
def test_purge_scope_removes_its_task_sessions(memory: LightMemory) -> None:
    maya = FluxMemAgent.on_store(memory.store, memory.embedder, user_id="maya")
    bob = FluxMemAgent.on_store(memory.store, memory.embedder, user_id="bob")
    open_maya = maya.start_task(f"open the locker: {SECRET}")
    open_bob = bob.start_task("fetch the bicycle")
    assert open_maya.id and open_bob.id
    report = memory.purge(user_id="maya")
    assert report.removed["task_sessions"] == 1 and report.removed["graph_nodes"] == 1
    with pytest.raises(NotFoundError, match="session_id"):
        maya.resume_task(open_maya.id)
    bob.resume_task(open_bob.id).report(StepResult("ok", None, True))


def test_an_unscoped_graph_is_purged_by_its_agent_and_nothing_else(tmp_path: Path) -> None:
    """A server tenant's FluxMem graph has no scope: a scope purge never reaches it, the
    agent's purge erases all of it (sessions included) and leaves the memories alone."""
    path = tmp_path / "graph.db"
    needle = b"31-07-1994"
    with LightMemory.from_config({"store": {"provider": "sqlite", "path": str(path)}}) as mem:
        _fill(mem)
        agent = FluxMemAgent.on_store(mem.store, mem.embedder)  # as TenantPool builds it
        agent.add_knowledge(f"{SECRET}.", source="note")
        agent.run_task(f"recall: {SECRET}", lambda ctx: StepResult("ok", None, True))
        left_open = agent.start_task(f"open the locker {SECRET}")
        mem.purge(user_id="bob")
        assert agent.stats()["semantic_nodes"] == 1 and needle in _file_bytes(path)
        report = agent.purge()
        assert report.target == "graph of default" and report.compacted
        assert report.removed["graph_nodes"] == 3 and report.removed["task_sessions"] == 1
        assert report.removed["entries"] == report.removed["messages"] == 0
        assert agent.stats() == {k: 0 for k in agent.stats()} and agent.history() == []
        with pytest.raises(NotFoundError):
            agent.resume_task(left_open.id or "")
        assert mem.list_entries(user_id="maya")  # the memories stay
        mem.purge(user_id="maya")
        assert needle not in _file_bytes(path)


def test_rest_and_mcp_purge_the_tenants_graph(tmp_path: Path) -> None:
    import asyncio

    from fastmcp import Client

    from lightmem.server.mcp import create_mcp

    with acme_rest(tmp_path, timeout=60) as (c, pool):
        assert c.post("/v1/fluxmem/knowledge", json={"docs": SECRET}).status_code == 200
        sid = c.post("/v1/fluxmem/tasks", json={"task": SECRET}).json()["session_id"]
        r = c.delete("/v1/fluxmem/graph")
        assert r.status_code == 200, r.text
        assert r.json()["removed"]["graph_nodes"] == 2
        assert r.json()["removed"]["task_sessions"] == 1
        assert c.get("/v1/fluxmem/graph").json() == {"nodes": [], "edges": []}
        assert c.post(f"/v1/fluxmem/tasks/{sid}/steps", json={"success": True}).status_code == 404
        tenant = pool.get("local")
        tenant.agent.add_knowledge(OTHER)

        async def main() -> None:
            async with Client(create_mcp(lambda: tenant)) as m:
                r = await m.call_tool("purge_graph", {})
                assert r.structured_content["removed"]["graph_nodes"] == 1

        asyncio.run(main())
        assert tenant.agent.stats()["semantic_nodes"] == 0
