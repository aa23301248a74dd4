"""``as_of`` through the REST search endpoint and the MCP retrieve tool, over a real HTTP
server on loopback and a real MCP client: what was valid then, and dates off the calendar
refused naming the field."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from lightmem.server.mcp import create_mcp
from lightmem.server.rest import create_app
from lightmem.server.tenancy import KeyRegistry, TenantPool
from lightmem.testing.live_server import LiveServer

TURNS = [
    {
        "id": "p1",
        "speaker_name": "Priya",
        "content": "I live in Boston with my husband Raj.",
        "timestamp": "2023-03-02T10:00:00",
    },
    {
        "id": "p2",
        "speaker_name": "Priya",
        "content": "Big news, we moved to Denver last month!",
        "timestamp": "2023-06-12T10:00:00",
    },
]
QUERY = "Where does Priya live?"
#: Dates that are not on the calendar, or not ISO 8601.
OFF_CALENDAR = ["2023-02-30", "2023-13-01", "2023-06-01T24:00", "2023-02-29", "12 June 2023"]


@pytest.fixture
def client(pool: TenantPool) -> Iterator[httpx.Client]:
    keys: KeyRegistry = pool.keys()
    key = keys.create("alpha")
    with (
        LiveServer(create_app(pool, keys)) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as c,
    ):
        r = c.post("/v1/memories", json={"messages": TURNS, "force_extract": True})
        assert r.status_code == 200, r.text
        r = c.post("/v1/update", json={})
        assert r.status_code == 200, r.text
        assert r.json()["superseded"], r.text  # Boston superseded by Denver
        yield c
    keys.close()


def _search(c: httpx.Client, **extra: Any) -> httpx.Response:
    return c.post("/v1/memories/search", json={"query": QUERY, "limit": 10, **extra})


def test_rest_search_as_of_returns_what_was_valid_then(client: httpx.Client) -> None:
    then = _search(client, as_of="2023-05-01")
    assert then.status_code == 200, then.text
    assert "Boston" in then.json()["context"] and "Denver" not in then.json()["context"]
    now = _search(client, as_of="2024-01-01T00:00:00Z").json()["context"]
    assert "Denver" in now and "Boston" not in now
    # without as_of both stay retrievable, the replaced one labelled
    plain = _search(client).json()["context"]
    assert "Denver" in plain and "(until 12 June 2023)" in plain


@pytest.mark.parametrize("when", OFF_CALENDAR)
def test_rest_refuses_dates_off_the_calendar_naming_the_field(
    client: httpx.Client, when: str
) -> None:
    r = _search(client, as_of=when)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["message"].startswith("as_of:"), r.text
    assert repr(when) in r.json()["error"]["message"]


def test_rest_as_of_must_be_text(client: httpx.Client) -> None:
    r = _search(client, as_of=20230501)
    assert r.status_code == 422 and "as_of" in r.text


def test_rest_as_of_is_in_the_openapi_schema(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()["components"]["schemas"]["SearchBody"]
    assert "ISO 8601" in schema["properties"]["as_of"]["description"]


def test_mcp_retrieve_as_of(pool: TenantPool) -> None:
    from fastmcp import Client

    tenant = pool.get("local")
    server = create_mcp(lambda: tenant)

    async def main() -> None:
        async with Client(server) as c:
            await c.call_tool("add_memory", {"messages": TURNS, "force_extract": True})
            await c.call_tool("offline_update", {})
            tools = {t.name: t for t in await c.list_tools()}
            assert (
                "ISO 8601"
                in tools["retrieve_memory"].input_schema["properties"]["as_of"]["description"]
            )
            then = await c.call_tool("retrieve_memory", {"query": QUERY, "as_of": "2023-05-01"})
            assert "Boston" in then.structured_content["context"]
            assert "Denver" not in then.structured_content["context"]
            now = await c.call_tool("retrieve_memory", {"query": QUERY, "as_of": "2024-01-01"})
            assert "Boston" not in now.structured_content["context"]
            for when in OFF_CALENDAR:
                with pytest.raises(Exception, match="as_of: expected an ISO 8601"):
                    await c.call_tool("retrieve_memory", {"query": QUERY, "as_of": when})

    asyncio.run(main())
