"""Erasing one FluxMem node by id: its row, vector and full text, its edges, its graph
history and every event holding its text, and the task sessions showing it; scoped (another
user's node is NotFound); no copy left in the SQLite file; over the library, REST, MCP and
CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import acme_rest
from lightmem import InvalidInputError, LightMemory, NotFoundError
from lightmem.fluxmem import FluxMemAgent, StepResult
from lightmem.server.tenancy import TenantPool
from lightmem.store import purge

SECRET = "Maya's locker combination is 31-07-1994 behind the blue door"
NEEDLE = b"31-07-1994"
OTHER = "The gym opens at six and the pool closes at nine on weekdays"
TASK = "open the locker behind the blue door"


def _file_bytes(path: Path) -> bytes:
    return b"".join(
        Path(str(path) + suffix).read_bytes()
        for suffix in ("", "-wal")
        if Path(str(path) + suffix).exists()
    )


def _graph(mem: LightMemory) -> tuple[FluxMemAgent, FluxMemAgent, str, str]:
    """Maya's agent with the secret fact, a finished task that used it, an episode whose
    observations quote it and an open session showing it; Bob's agent with his own fact."""
    maya = FluxMemAgent.on_store(mem.store, mem.embedder, user_id="maya")
    bob = FluxMemAgent.on_store(mem.store, mem.embedder, user_id="bob")
    secret = maya.add_knowledge(SECRET, source="maya")[0]
    maya.add_knowledge(OTHER, source="gym")
    bobs = bob.add_knowledge(OTHER, source="bob")[0]
    assert secret in {s.node.id for s in maya.subgraph(TASK).semantic}
    maya.run_task(TASK, lambda ctx: StepResult("open", None, True, ("read the note",), (SECRET,)))
    return maya, bob, secret, bobs


def test_purge_one_node_removes_what_holds_it_in_its_scope_only(
    memory: LightMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(purge, "_PAGE", 3)  # the history is searched a page at a time
    maya, bob, secret, bobs = _graph(memory)
    left_open = maya.start_task(TASK)
    assert left_open.id is not None
    with pytest.raises(NotFoundError, match=r"^node_id: no graph node"):
        bob.purge(secret)  # another user's node
    with pytest.raises(NotFoundError, match=r"^node_id"):
        maya.purge(bobs)
    with pytest.raises(InvalidInputError, match=r"^node_id"):
        maya.purge("")
    assert any(SECRET in json.dumps(e) for e in maya.history(1000))
    edges = maya.graph.edges(src=[secret]) + maya.graph.edges(dst=[secret])
    assert {e.kind for e in edges} >= {"ground", "step"}
    before = maya.stats()
    report = maya.purge(secret)
    assert report.target == f"node {secret}" and report.compacted
    removed = report.removed
    # Its edges, and the step edge of the open session's last (failed) attempt.
    assert removed["graph_nodes"] == 1 and removed["graph_edges"] == len(edges) + 1
    assert removed["task_sessions"] == 1 and removed["entries"] == 0
    # Its own events, its edges' events and the episode's events quoting it.
    assert removed["graph_history"] >= 2 + len(edges)
    assert maya.graph.get_node(secret) is None
    assert maya.graph.edges(src=[secret]) == maya.graph.edges(dst=[secret]) == []
    assert not any(SECRET in json.dumps(e) for e in maya.history(1000))
    assert not any(secret in e["target_id"] for e in maya.history(1000))
    assert secret not in {s.node.id for s in maya.subgraph(TASK).semantic}
    assert maya.stats()["semantic_nodes"] == before["semantic_nodes"] - 1
    # The open session showing it was ended (its episode recorded as failed), then erased.
    with pytest.raises(NotFoundError, match="session_id"):
        maya.resume_task(left_open.id)
    episodes = [n for n in maya.graph.nodes("episodic", maya.scope) if n.data.get("attempts")]
    failed = [e for e in episodes if e.data["success"] is False]
    assert failed and "purged" in failed[0].data["attempts"][-1]["error"]
    # Bob's node and Maya's other fact stay.
    assert bob.graph.get_node(bobs) is not None and bob.stats()["semantic_nodes"] == 1
    assert maya.stats()["semantic_nodes"] == 1
    with pytest.raises(NotFoundError, match=r"^node_id"):
        maya.purge(secret)  # gone for good


def test_no_copy_of_the_node_left_in_the_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "node.db"
    with LightMemory.from_config({"store": {"provider": "sqlite", "path": str(path)}}) as mem:
        with mem.store.db.read() as s:  # type: ignore[attr-defined]
            s.raw.execute("PRAGMA secure_delete = OFF")  # the purge must switch it on itself
        maya = FluxMemAgent.on_store(mem.store, mem.embedder, user_id="maya")
        secret = maya.add_knowledge(SECRET, source="maya")[0]
        maya.add_knowledge(OTHER, source="gym")
        maya.run_task(TASK, lambda ctx: StepResult("open", None, True, ("read the note",)))
        maya.start_task(TASK)
        # Undone and redone: the text is in the history several times.
        add = next(e["seq"] for e in maya.history(1000) if e["target_id"] == secret)
        maya.undo(add)
        maya.undo(maya.history(1)[0]["seq"])
        assert NEEDLE in _file_bytes(path)
        report = maya.purge(secret)
        assert report.compacted and report.removed["graph_nodes"] == 1
        assert NEEDLE not in _file_bytes(path)
        assert b"weekdays" in _file_bytes(path)
    assert NEEDLE not in _file_bytes(path)


def test_a_node_already_undone_is_purged_from_its_history(tmp_path: Path) -> None:
    path = tmp_path / "undone.db"
    with FluxMemAgent.open(path, user_id="maya") as maya:
        secret = maya.add_knowledge(SECRET)[0]
        maya.undo(maya.history(1)[0]["seq"])
        assert maya.graph.get_node(secret) is None and NEEDLE in _file_bytes(path)
        report = maya.purge(secret)
        assert report.removed["graph_nodes"] == 0 and report.removed["graph_history"] == 2
        assert maya.history(1000) == [] and NEEDLE not in _file_bytes(path)


@pytest.mark.parametrize("store_config", ["postgres"], indirect=True)
def test_postgres_node_purge_vacuums_the_graph_tables(store_config: dict[str, Any]) -> None:
    import psycopg

    with LightMemory.from_config({"store": store_config}) as mem:
        maya, _bob, secret, _ = _graph(mem)
        maya.purge(secret)
    with psycopg.connect(store_config["dsn"], autocommit=True) as conn:
        rows = conn.execute(
            "SELECT relname, last_vacuum FROM pg_stat_user_tables WHERE schemaname = %s",
            (store_config["schema"],),
        ).fetchall()
        left = conn.execute(
            f"SELECT count(*) FROM {store_config['schema']}.graph_history "
            "WHERE before::text LIKE %s OR after::text LIKE %s",
            ("%31-07-1994%", "%31-07-1994%"),
        ).fetchone()
    vacuumed = {name for name, at in rows if at is not None}
    assert {"graph_nodes", "graph_edges", "graph_history"} <= vacuumed
    assert left == (0,)


@pytest.fixture
def rest(tmp_path: Path) -> Iterator[tuple[httpx.Client, TenantPool]]:
    with acme_rest(tmp_path) as pair:
        yield pair


def test_rest_and_mcp_purge_one_node(rest: tuple[httpx.Client, TenantPool]) -> None:
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    from lightmem.server.mcp import create_mcp

    c, pool = rest
    secret = c.post("/v1/fluxmem/knowledge", json={"docs": SECRET}).json()["ids"][0]
    other = c.post("/v1/fluxmem/knowledge", json={"docs": OTHER}).json()["ids"][0]
    assert c.delete("/v1/fluxmem/graph", params={"node_id": "nope"}).status_code == 404
    r = c.delete("/v1/fluxmem/graph", params={"node_id": secret})
    assert r.status_code == 200, r.text
    assert r.json()["removed"]["graph_nodes"] == 1 and r.json()["target"] == f"node {secret}"
    assert c.delete("/v1/fluxmem/graph", params={"node_id": secret}).status_code == 404
    nodes = c.get("/v1/fluxmem/graph").json()["nodes"]
    assert [n["id"] for n in nodes] == [other]
    tenant = pool.get("local")
    mine = tenant.agent.add_knowledge(SECRET)[0]

    async def main() -> None:
        async with Client(create_mcp(lambda: tenant)) as m:
            with pytest.raises(ToolError, match="node_id: no graph node"):
                await m.call_tool("purge_graph", {"node_id": "nope"})
            r = await m.call_tool("purge_graph", {"node_id": mine})
            assert r.structured_content is not None
            assert r.structured_content["removed"]["graph_nodes"] == 1

    asyncio.run(main())
    assert tenant.agent.graph.get_node(mine) is None


def test_cli_purge_node(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with FluxMemAgent.open(db, user_id="maya") as maya:
        secret = maya.add_knowledge(SECRET)[0]
        maya.add_knowledge(OTHER)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "lightmem.cli.main", "--store", str(db), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120)

    refused = cli("--user-id", "bob", "purge", "--node", secret)
    assert refused.returncode == 2 and "error: node_id: no graph node" in refused.stderr
    both = cli("--user-id", "maya", "purge", "some-entry", "--node", secret)
    assert both.returncode == 2 and "error: --node" in both.stderr
    out = cli("--user-id", "maya", "purge", "--node", secret, "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["removed"]["graph_nodes"] == 1
    assert NEEDLE not in _file_bytes(db)
    text = cli("--user-id", "maya", "purge", "--node", secret)
    assert text.returncode == 2


@pytest.mark.parametrize("how", ["scope", "node"])
def test_edges_of_other_scopes_pointing_at_a_purged_node_go_too(tmp_path: Path, how: str) -> None:
    """A skill of Maya's distilled from an episode of the tenant's unscoped agent: the
    distill edge belongs to the episode's scope, yet it goes with Maya's skill."""
    with LightMemory.from_config({"store": {"path": str(tmp_path / "x.db")}}) as mem:
        tenant = FluxMemAgent.on_store(mem.store, mem.embedder)
        maya = FluxMemAgent.on_store(mem.store, mem.embedder, user_id="maya")
        done = tenant.run_task(TASK, lambda ctx: StepResult("ok", None, True, ("open",)))
        skill = maya.add_skill(
            "open lockers", ["find the locker", "open it"], episodes=[done.episode_id]
        )
        assert [e.kind for e in tenant.graph.edges(dst=[skill])] == ["distill"]
        report = mem.purge(user_id="maya") if how == "scope" else maya.purge(skill)
        assert report.removed["graph_nodes"] == 1 and report.removed["graph_edges"] == 1
        assert tenant.graph.edges(dst=[skill]) == tenant.graph.edges(src=[done.episode_id]) == []
        assert tenant.graph.get_node(done.episode_id) is not None
        # No event of the edge is left to draw it again by an undo.
        assert not [e for e in tenant.history(1000) if skill in e["target_id"]]


def test_purging_the_episode_of_an_open_session_ends_the_session(tmp_path: Path) -> None:
    path = tmp_path / "episode.db"
    with FluxMemAgent.open(path, user_id="maya") as maya:
        maya.add_knowledge(OTHER)
        s = maya.start_task(f"remember that {SECRET}")
        assert s.id is not None
        (episode,) = maya.graph.nodes("episodic", maya.scope)
        report = maya.purge(episode.id)
        assert report.removed["graph_nodes"] == 1 and report.removed["task_sessions"] == 1
        with pytest.raises(NotFoundError, match="session_id"):
            maya.resume_task(s.id)
        assert maya.graph.nodes("episodic", maya.scope) == []
        assert NEEDLE not in _file_bytes(path)
