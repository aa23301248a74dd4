"""Isolation: random multi-tenant workloads through the library (scopes), REST and MCP;
nothing one tenant sees (results, counts, ids, errors) carries another tenant's data."""

from __future__ import annotations

import asyncio
import functools
import tempfile
from pathlib import Path

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem import LightMemError, LightMemory
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
