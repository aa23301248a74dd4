"""Isolation: random multi-tenant workloads through the library (scopes), REST and MCP;
nothing one tenant sees (results, counts, ids, errors) carries another tenant's data."""

from __future__ import annotations

import asyncio
import functools
import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem import LightMemError, LightMemory, NotFoundError
from lightmem.server.mcp import KeyVerifier, create_mcp, http_resolver
from lightmem.server.rest import create_app
from lightmem.server.tenancy import TenantPool
from lightmem.testing.live_server import LiveServer

TENANTS = ("alpha", "beta", "gamma")
WORDS = ("tuna", "vault", "Porto", "piano", "garden")
OPS = st.lists(
    st.tuples(
        st.sampled_from(TENANTS),
        st.sampled_from(["add", "search", "list", "get_other", "delete_other", "stats"]),
        st.sampled_from(WORDS),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=12,
)


def marker(tenant: str, n: int) -> str:
    return f"zq{tenant}{n}x"  # one token, unique to its tenant


def _leaks(tenant: str, payload: str) -> bool:
    return any(f"zq{other}" in payload for other in TENANTS if other != tenant)


@settings(max_examples=20, deadline=None)
@given(OPS)
def test_library_scopes(ops: list[tuple[str, str, str, int]]) -> None:
    with (
        tempfile.TemporaryDirectory() as tmp,
        LightMemory.from_config({"store": {"path": str(Path(tmp) / "s.db")}}) as mem,
    ):
        owned: dict[str, list[str]] = {t: [] for t in TENANTS}
        for tenant, op, word, n in ops:
            others = [i for t, ids in owned.items() if t != tenant for i in ids]
            if op == "add":
                r = mem.add_memory(
                    {"content": f"{marker(tenant, n)} likes the {word}"},
                    force_extract=True,
                    user_id=tenant,
                )
                owned[tenant] += r.entries_created
            elif op == "search":
                hits = mem.retrieve(f"{word} zqalpha zqbeta zqgamma", 50, user_id=tenant)
                assert not any(_leaks(tenant, h.entry.original_text) for h in hits)
                assert not {h.id for h in hits} & set(others)
            elif op == "list":
                listed = mem.list_entries(limit=1000, user_id=tenant)
                assert not {e.id for e in listed} & set(others)
            elif op in ("get_other", "delete_other") and others:
                target = others[n % len(others)]
                call = mem.get if op == "get_other" else mem.delete
                try:
                    call(target, user_id=tenant)
                    raise AssertionError("another scope's entry was reachable")
                except LightMemError as exc:
                    assert not _leaks(tenant, str(exc))
            elif op == "stats":
                stats = mem.stats(user_id=tenant)
                assert stats["entries"] + stats["summaries"] == len(owned[tenant])


@functools.cache
def _servers() -> tuple[str, str, dict[str, str]]:
    tmp = Path(tempfile.mkdtemp(prefix="lightmem-iso-"))
    pool = TenantPool(tmp / "data")
    keys = pool.keys()
    api_keys = {t: keys.create(t) for t in TENANTS}
    rest = LiveServer(create_app(pool, keys))
    mcp = LiveServer(create_mcp(http_resolver(pool), auth=KeyVerifier(keys)).http_app(path="/mcp"))
    return rest.__enter__(), mcp.__enter__(), api_keys  # live for the whole test session


@settings(max_examples=15, deadline=None)
@given(OPS)
def test_rest_tenants(ops: list[tuple[str, str, str, int]]) -> None:
    url, _, keys = _servers()
    clients = {
        t: httpx.Client(base_url=url, headers={"Authorization": f"Bearer {keys[t]}"})
        for t in TENANTS
    }
    seen: dict[str, list[str]] = {t: [] for t in TENANTS}
    for tenant, op, word, n in ops:
        c = clients[tenant]
        others = [i for t, ids in seen.items() if t != tenant for i in ids]
        if op == "add":
            r = c.post(
                "/v1/memories",
                json={
                    "messages": [{"content": f"{marker(tenant, n)} {word}"}],
                    "force_extract": True,
                },
            )
            seen[tenant] += r.json()["entries_created"]
            body = r.text
        elif op == "search":
            body = c.post(
                "/v1/memories/search", json={"query": f"{word} zqalpha zqbeta zqgamma", "limit": 50}
            ).text
        elif op == "list":
            body = c.get("/v1/memories", params={"limit": 1000}).text
        elif op == "stats":
            body = c.get("/v1/stats").text
        elif others:
            target = others[n % len(others)]
            r = (
                c.get(f"/v1/memories/{target}")
                if op == "get_other"
                else c.delete(f"/v1/memories/{target}")
            )
            assert r.status_code == 404
            body = r.text
        else:
            continue
        assert not _leaks(tenant, body)
        assert not any(i in body for i in others if op not in ("get_other", "delete_other"))
    for c in clients.values():
        c.close()


@settings(max_examples=3, deadline=None)
@given(OPS)
def test_mcp_tenants(ops: list[tuple[str, str, str, int]]) -> None:
    from fastmcp import Client

    _, url, keys = _servers()

    async def main() -> None:
        for tenant, op, word, n in ops:
            async with Client(f"{url}/mcp", auth=keys[tenant]) as c:
                if op == "add":
                    r = await c.call_tool(
                        "add_memory",
                        {"user_message": f"{marker(tenant, n)} {word}", "force_extract": True},
                    )
                elif op == "search":
                    r = await c.call_tool(
                        "retrieve_memory", {"query": f"{word} zqalpha zqbeta", "limit": 50}
                    )
                else:
                    r = await c.call_tool("stats", {})
                assert not _leaks(tenant, str(r.structured_content))

    asyncio.run(main())


# -- FluxMem: two agents on one store ------------------------------------------------------
FLUX_OPS = st.lists(
    st.tuples(
        st.sampled_from(TENANTS[:2]),
        st.sampled_from(["know", "task", "skill", "history", "undo_other", "stats"]),
        st.sampled_from(WORDS),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=10,
)


def _flux_store(backend: str, tmp: str) -> tuple[Any, str | None]:
    from lightmem import SQLiteStore

    if backend == "sqlite":
        return SQLiteStore(Path(tmp) / "g.db"), None
    from conftest import require_postgres
    from lightmem.store.postgres import PostgresStore

    schema = f"iso_{uuid.uuid4().hex[:10]}"
    return PostgresStore(require_postgres(), schema=schema, pool_size=2), schema


def _edges_from(agent: Any) -> list[Any]:
    """Every edge (of any scope) leaving one of ``agent``'s nodes."""
    ids = [
        n.id
        for k in ("semantic", "episodic", "procedural")
        for n in agent.graph.nodes(k, agent.scope)
    ]
    return agent.graph.edges(src=ids) if ids else []


def _edge_keys(edges: list[Any]) -> set[tuple[str, str, str]]:
    return {(e.kind, e.src, e.dst) for e in edges}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_fluxmem_edges_carry_their_nodes_scope(backend: str, embedder: Any) -> None:
    """The edges an agent's tasks draw are in its scope: its edge list, counts and history
    show them, another agent's do not."""
    from conftest import drop_schema
    from lightmem.fluxmem import FluxMemAgent, StepResult

    if backend == "postgres":
        from conftest import require_postgres

        require_postgres()
    with tempfile.TemporaryDirectory() as tmp:
        store, schema = _flux_store(backend, tmp)
        try:
            agents = [FluxMemAgent.on_store(store, embedder, user_id=u) for u in TENANTS[:2]]
            for a in agents:
                a.add_knowledge(f"{a.scope.user_id} keeps the spare key under the blue mat")
                a.run_task("find the spare key", lambda _c: StepResult("ok", None, True, ("look",)))
            for me, other in (agents, agents[::-1]):
                drawn = _edges_from(me)
                assert {e.kind for e in drawn} >= {"ground", "step"}
                assert _edge_keys(me.graph.edges(scope=me.scope)) == _edge_keys(drawn)
                stats = me.stats()
                assert sum(v for k, v in stats.items() if k.endswith("_edges")) == len(drawn)
                events = {e["target_id"] for e in me.history(1000) if e["target"] == "edge"}
                assert events >= {"|".join(k) for k in _edge_keys(drawn)}
                assert not events & {"|".join(k) for k in _edge_keys(_edges_from(other))}
        finally:
            store.close()
            if schema:
                drop_schema(schema)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_fluxmem_scopes(backend: str, embedder: Any) -> None:
    """History, undo, edges and counts of one agent never show or touch another's graph."""
    from conftest import drop_schema
    from lightmem.fluxmem import FluxMemAgent, StepResult

    if backend == "postgres":
        from conftest import require_postgres

        require_postgres()

    @settings(max_examples=5 if backend == "postgres" else 12, deadline=None)
    @given(FLUX_OPS)
    def run(ops: list[tuple[str, str, str, int]]) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            store, schema = _flux_store(backend, tmp)
            try:
                agents = {t: FluxMemAgent.on_store(store, embedder, user_id=t) for t in TENANTS[:2]}
                episodes: dict[str, list[str]] = {t: [] for t in agents}
                for tenant, op, word, n in ops:
                    me = agents[tenant]
                    other = agents[next(t for t in agents if t != tenant)]
                    if op == "know":
                        me.add_knowledge(f"{marker(tenant, n)} keeps the {word}", source=tenant)
                    elif op == "task":
                        done = me.run_task(
                            f"{marker(tenant, n)} find the {word}",
                            lambda _ctx: StepResult("ok", success=True, actions=("look",)),
                        )
                        episodes[tenant].append(done.episode_id)
                    elif op == "skill" and episodes[tenant]:
                        me.add_skill(
                            f"{marker(tenant, n)}", ["open", word], episodes=episodes[tenant]
                        )
                    elif op == "history":
                        assert not _leaks(tenant, json.dumps(me.history(1000)))
                    elif op == "undo_other" and other.history(1000):
                        with pytest.raises(NotFoundError):
                            me.undo(other.history(1000)[-1]["seq"])
                    elif op == "stats":  # counts agree with what the agent can list
                        stats, edges = me.stats(), me.graph.edges(scope=me.scope)
                        assert sum(v for k, v in stats.items() if k.endswith("_edges")) == len(
                            edges
                        )
                for tenant, me in agents.items():
                    mine = me.history(1000)
                    assert not _leaks(tenant, json.dumps(mine))
                    other = agents[next(t for t in agents if t != tenant)]
                    theirs = {e["seq"] for e in other.history(1000)}
                    assert theirs.isdisjoint(e["seq"] for e in mine)
                    for seq in sorted(theirs)[-3:]:
                        with pytest.raises(NotFoundError):
                            me.undo(seq)
                    edges = me.graph.edges(scope=me.scope)
                    ends = me.graph.get_nodes([x for e in edges for x in (e.src, e.dst)])
                    assert all(nd.scope == me.scope for nd in ends.values())
                    assert _edge_keys(_edges_from(me)) <= _edge_keys(edges)
                    stats = me.stats()
                    assert sum(v for k, v in stats.items() if k.endswith("_edges")) == len(edges)
                    nodes = sum(v for k, v in stats.items() if k.endswith("_nodes"))
                    assert nodes == sum(
                        len(me.graph.nodes(kind, me.scope))
                        for kind in ("semantic", "episodic", "procedural")
                    )
            finally:
                store.close()
                if schema:
                    drop_schema(schema)

    run()
