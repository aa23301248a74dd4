"""The MCP tools as an agent sees them, listed and called through a real MCP client: every
argument described, fixed values as enums, one id name with REST, scopes everywhere,
compact retrieval results."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from lightmem.server.mcp import create_mcp
from lightmem.server.rest import create_app
from lightmem.server.tenancy import TenantPool

#: Arguments whose values are a fixed set, by tool (a path into nested objects with '.').
FIXED = {
    "retrieve_memory": {"mode", "filters.kind"},
    "list_memories": {"filters.kind"},
    "summarize": {"retrieval_scope"},
    "record_step": {"feedback.kind"},
}
#: FluxMem keeps one graph per tenant: its tools take no user scope.
FLUXMEM = {
    "add_knowledge",
    "start_task",
    "record_step",
    "consolidate",
    "purge_graph",
    "show_subgraph",
}
SCOPE = {"user_id", "agent_id", "run_id"}


def _tools(pool: TenantPool) -> list[Any]:
    from fastmcp import Client

    tenant = pool.get("local")

    async def main() -> list[Any]:
        async with Client(create_mcp(lambda: tenant)) as c:
            return list(await c.list_tools())

    return asyncio.run(main())


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> list[dict[str, Any]]:
    """The alternatives a property schema allows, with ``$ref``s followed."""
    out = []
    for alt in schema.get("anyOf", [schema]):
        if "$ref" in alt:
            alt = defs[alt["$ref"].rsplit("/", 1)[1]]
        if alt.get("type") == "array" and "items" in alt:
            out += _resolve(alt["items"], defs)
        out.append(alt)
    return out


def _arguments(schema: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
    """(dotted name, property schema, its alternatives) for every argument, nested too."""
    defs = schema.get("$defs", {})

    def walk(props: dict[str, Any], prefix: str) -> Iterator[tuple[str, dict[str, Any], list[Any]]]:
        for name, prop in props.items():
            alts = _resolve(prop, defs)
            yield prefix + name, prop, alts
            for alt in alts:
                if alt.get("type") == "object" and "properties" in alt:
                    yield from walk(alt["properties"], f"{prefix}{name}.")

    yield from walk(schema.get("properties", {}), "")


def test_every_argument_is_described_and_fixed_values_are_enums(pool: TenantPool) -> None:
    tools = _tools(pool)
    assert len(tools) >= 17
    seen_fixed: set[str] = set()
    for tool in tools:
        assert tool.description and len(tool.description) > 40, tool.name
        for name, prop, alts in _arguments(tool.input_schema):
            described = prop.get("description") or any(a.get("description") for a in alts)
            assert described, f"{tool.name}.{name} has no description"
            enums = [a["enum"] for a in alts if "enum" in a]
            if name in FIXED.get(tool.name, set()):
                assert enums, f"{tool.name}.{name} should be an enum"
                seen_fixed.add(f"{tool.name}.{name}")
    assert seen_fixed == {f"{t}.{n}" for t, names in FIXED.items() for n in names}
    by_name = {t.name: t for t in tools}
    modes = _resolve(by_name["retrieve_memory"].input_schema["properties"]["mode"], {})
    assert ["embedding", "context", "hybrid", "hierarchical"] in [a.get("enum") for a in modes]
    window = by_name["summarize"].input_schema["properties"]["time_window"]
    assert window.get("pattern"), "time_window should say its format"
    filters = by_name["retrieve_memory"].input_schema["properties"]["filters"]
    alts = _resolve(filters, by_name["retrieve_memory"].input_schema.get("$defs", {}))
    assert any(a.get("type") == "object" and "speaker" in a["properties"] for a in alts)


def test_scope_on_every_memory_tool_and_ids_named_as_in_rest(pool: TenantPool) -> None:
    tools = _tools(pool)
    for tool in tools:
        props = set(tool.input_schema.get("properties", {}))
        if tool.name in FLUXMEM:
            continue
        assert props >= SCOPE, f"{tool.name} cannot be scoped"
        assert "memory_id" not in props
    id_tools = {t.name for t in tools if "entry_id" in t.input_schema.get("properties", {})}
    assert id_tools >= {"get_memory", "update_memory", "delete_memory", "memory_history"}
    assert {"restore_memory", "purge_memory"} <= id_tools
    add_knowledge = next(t for t in tools if t.name == "add_knowledge")
    assert "per tenant" in add_knowledge.description  # says why it takes no user_id
    spec = create_app(pool, pool.keys()).openapi()
    assert "/v1/memories/{entry_id}" in spec["paths"]  # the same name over REST


def test_scoped_calls_and_compact_results(pool: TenantPool) -> None:
    from fastmcp import Client

    tenant = pool.get("local")

    async def main() -> None:
        async with Client(create_mcp(lambda: tenant)) as c:
            for user, food in (("maya", "tuna"), ("bob", "lasagne")):
                await c.call_tool(
                    "add_memory",
                    {
                        "messages": [{"content": f"My cat only eats {food}.", "id": f"{user}1"}],
                        "force_extract": True,
                        "user_id": user,
                    },
                )
            found = (
                await c.call_tool("retrieve_memory", {"query": "cat food", "user_id": "maya"})
            ).structured_content
            assert set(found) == {"context", "ids", "truncated"}  # compact by default
            assert "tuna" in found["context"] and "lasagne" not in found["context"]
            eid = found["ids"][0]
            full = (
                await c.call_tool(
                    "retrieve_memory", {"query": "cat food", "user_id": "maya", "full": True}
                )
            ).structured_content
            assert full["ids"] == found["ids"] and full["results"][0]["id"] == eid
            for tool, extra in (
                ("get_memory", {}),
                ("memory_history", {}),
                ("update_memory", {"text": "bob's now"}),
                ("delete_memory", {}),
            ):
                with pytest.raises(Exception, match="NotFoundError"):
                    await c.call_tool(tool, {"entry_id": eid, "user_id": "bob", **extra})
            got = await c.call_tool("get_memory", {"entry_id": eid, "user_id": "maya"})
            assert got.structured_content["original_text"] == "My cat only eats tuna."
            stats = (await c.call_tool("stats", {"user_id": "bob"})).structured_content
            assert stats["scope"] == "user_id=bob" and stats["messages"] == 1
            listed = (
                await c.call_tool("list_memories", {"user_id": "bob", "filters": {"kind": "entry"}})
            ).structured_content
            assert [i["original_text"] for i in listed["items"]] == ["My cat only eats lasagne."]
            with pytest.raises(Exception, match="mode"):
                await c.call_tool("retrieve_memory", {"query": "cat", "mode": "fuzzy"})
            with pytest.raises(Exception, match="time_window"):
                await c.call_tool("summarize", {"time_window": "a week"})
            await c.call_tool("delete_memory", {"entry_id": eid, "user_id": "maya"})
            back = await c.call_tool("restore_memory", {"entry_id": eid, "user_id": "maya"})
            assert back.structured_content["id"] == eid

    asyncio.run(main())


def test_reads_across_users_name_all_scopes_over_mcp_and_rest(pool: TenantPool) -> None:
    """On a tenant holding several users a read without user_id is refused, naming
    all_scopes, and both MCP and REST can send it."""
    from fastapi.testclient import TestClient
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    tenant = pool.get("local")

    async def main() -> None:
        async with Client(create_mcp(lambda: tenant)) as c:
            for user, food in (("maya", "tuna"), ("bob", "lasagne")):
                msgs = [{"content": f"My cat only eats {food}.", "id": f"{user}1"}]
                await c.call_tool(
                    "add_memory", {"messages": msgs, "force_extract": True, "user_id": user}
                )
            with pytest.raises(ToolError, match="all_scopes"):
                await c.call_tool("retrieve_memory", {"query": "cat food"})
            both = await c.call_tool("retrieve_memory", {"query": "cat food", "all_scopes": True})
            context = both.structured_content["context"]
            assert "tuna" in context and "lasagne" in context
            with pytest.raises(ToolError, match="all_scopes"):
                await c.call_tool("list_memories", {})
            listed = await c.call_tool("list_memories", {"all_scopes": True})
            users = {e["user_id"] for e in listed.structured_content["items"]}
            assert users == {"maya", "bob"}

    asyncio.run(main())
    keys = pool.keys()
    client = TestClient(create_app(pool, keys))
    client.headers["Authorization"] = f"Bearer {keys.create('local')}"
    refused = client.post("/v1/memories/search", json={"query": "cat food"})
    assert refused.status_code == 422 and "all_scopes" in refused.text
    found = client.post("/v1/memories/search", json={"query": "cat food", "all_scopes": True})
    assert found.status_code == 200 and "lasagne" in found.json()["context"]
    listed = client.get("/v1/memories", params={"all_scopes": "true"})
    assert listed.status_code == 200
    assert {e["user_id"] for e in listed.json()["items"]} == {"maya", "bob"}
