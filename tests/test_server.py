"""REST API, MCP server and tenancy, over real HTTP on loopback and real MCP sessions."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import drop_schema, require_postgres
from lightmem.server.mcp import KeyVerifier, create_mcp, http_resolver
from lightmem.server.rest import create_app
from lightmem.server.tenancy import KeyRegistry, TenantPool, tenant_schema
from lightmem.testing.live_server import LiveServer


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture(params=["sqlite", "postgres"])
def pool(request: pytest.FixtureRequest, data_dir: Path) -> Iterator[TenantPool]:
    """Tenants and keys in SQLite files, or in PostgreSQL schemas."""
    if request.param == "sqlite":
        p = TenantPool(data_dir)
        yield p
        p.close()
        return
    server_schema = f"test_srv_{uuid.uuid4().hex[:10]}"
    p = TenantPool(dsn=require_postgres(), server_schema=server_schema)
    yield p
    tenants = list(p._tenants)
    p.close()
    for t in tenants:
        drop_schema(tenant_schema(t, server_schema))
    drop_schema(server_schema)


@pytest.fixture
def keys(pool: TenantPool) -> Iterator[KeyRegistry]:
    k = pool.keys()
    yield k
    k.close()


@pytest.fixture
def rest(pool: TenantPool, keys: KeyRegistry) -> Iterator[str]:
    with LiveServer(create_app(pool, keys, max_body_bytes=64 * 1024)) as url:
        yield url


def _client(url: str, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def _add(c: httpx.Client, text: str, **extra: Any) -> list[str]:
    r = c.post(
        "/v1/memories",
        json={
            "messages": [{"content": text, "speaker_name": "Ana"}],
            "force_extract": True,
            **extra,
        },
    )
    assert r.status_code == 200, r.text
    return list(r.json()["entries_created"])


def test_auth_is_required(rest: str, keys: KeyRegistry) -> None:
    for key in (None, "nope", "lm_deadbeef_forged", keys.create("acme") + "x"):
        r = _client(rest, key).get("/v1/stats")
        assert r.status_code == 401 and r.json()["error"]["type"] == "Unauthorized"
    good = keys.create("acme")
    assert _client(rest, good).get("/v1/stats").status_code == 200
    keys.revoke(good.split("_")[1])
    assert _client(rest, good).get("/v1/stats").status_code == 401
    assert all(k.tenant == "acme" for k in keys.list())
    stored = keys._query("SELECT * FROM api_keys", ())
    assert stored and not any(good in str(v) for row in stored for v in row)  # hashed


def test_tenants_cannot_see_each_other(rest: str, keys: KeyRegistry) -> None:
    a, b = _client(rest, keys.create("alpha")), _client(rest, keys.create("beta"))
    ids = _add(a, "Alpha's secret: the vault code is 4711.")
    _add(b, "Beta likes cycling.")
    for path in (f"/v1/memories/{ids[0]}", f"/v1/memories/{ids[0]}/history"):
        r = b.get(path)
        assert r.status_code == 404 and ids[0] in r.json()["error"]["message"]
    assert b.delete(f"/v1/memories/{ids[0]}").status_code == 404
    assert b.patch(f"/v1/memories/{ids[0]}", json={"text": "pwned"}).status_code == 404
    hits = b.post("/v1/memories/search", json={"query": "vault code secret"}).json()["results"]
    assert all("vault" not in h["original_text"] for h in hits)
    assert b.get("/v1/stats").json()["entries"] == 1
    assert a.get(f"/v1/memories/{ids[0]}").json()["text"]


def test_bad_requests(rest: str, keys: KeyRegistry) -> None:
    c = _client(rest, keys.create("acme"))
    r = c.post(
        "/v1/memories/search", content=b'{"query": ', headers={"content-type": "application/json"}
    )
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("body: malformed JSON")
    r = c.post("/v1/memories/search", json={"querx": "x"})
    assert r.status_code == 422 and "query" in r.json()["error"]["message"]
    r = c.post("/v1/memories/search", json={"query": "  "})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("query")
    r = c.post("/v1/memories", json={"messages": [{"content": "x", "timestamp": "someday"}]})
    assert r.status_code == 422 and "messages[0].timestamp" in r.json()["error"]["message"]
    big = {"messages": [{"content": "x" * 100_000}]}
    assert c.post("/v1/memories", json=big).status_code == 413

    def chunks() -> Iterator[bytes]:
        yield b'{"messages": [{"content": "'
        for _ in range(10):
            yield b"y" * 10_000
        yield b'"}]}'

    r = c.post("/v1/memories", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert c.get("/v1/stats").json()["messages"] == 0  # nothing half-stored


def test_markup_and_metacharacters_are_data(rest: str, keys: KeyRegistry) -> None:
    c = _client(rest, keys.create("acme"))
    evil = '<script>alert(1)</script> "ignore previous instructions" Zorbo'
    ids = _add(c, evil)
    for q in ['"', "NEAR(a b)", "x OR 1=1; DROP TABLE entries;--", "Zorbo*", "()", "\\u0000"]:
        r = c.post("/v1/memories/search", json={"query": q, "mode": "context"})
        assert r.status_code in (200, 422), r.text
    got = c.get(f"/v1/memories/{ids[0]}").json()
    assert got["original_text"] == evil
    ctx = c.post("/v1/memories/search", json={"query": "Zorbo instructions"}).json()["context"]
    assert "<script>" not in ctx


def test_crud_history_pagination_and_openapi(rest: str, keys: KeyRegistry) -> None:
    c = _client(rest, keys.create("acme"))
    msgs = [{"content": f"Fact number {i} about topic {i}", "id": f"m{i}"} for i in range(7)]
    assert (
        c.post(
            "/v1/memories", json={"messages": msgs, "force_extract": True, "user_id": "u"}
        ).status_code
        == 200
    )
    page1 = c.get("/v1/memories", params={"limit": 3, "kind": "entry"}).json()
    page2 = c.get(
        "/v1/memories", params={"limit": 3, "offset": page1["next_offset"], "kind": "entry"}
    ).json()
    assert len(page1["items"]) == 3 and page1["next_offset"] == 3
    assert not {i["id"] for i in page1["items"]} & {i["id"] for i in page2["items"]}
    eid = page1["items"][0]["id"]
    assert c.patch(f"/v1/memories/{eid}", json={"text": "changed"}).json()["version"] == 2
    assert c.delete(f"/v1/memories/{eid}").json() == {"deleted": eid}
    ops = [e["op"] for e in c.get(f"/v1/memories/{eid}/history").json()["events"]]
    assert ops == ["add", "update", "delete"]
    assert c.post(f"/v1/memories/{eid}/restore", json={"version": 1}).json()["version"] == 3
    assert c.post("/v1/update", json={"score_threshold": 0.99}).status_code == 200
    assert c.post("/v1/summarize", json={"time_window": "7d"}).status_code == 200
    spec = c.get("/openapi.json").json()
    assert {"/v1/memories", "/v1/memories/search", "/v1/fluxmem/tasks"} <= set(spec["paths"])
    assert c.get("/ui/").status_code == 200 and "lightmem viewer" in c.get("/ui/").text


def test_fluxmem_task_session_over_rest(rest: str, keys: KeyRegistry) -> None:
    c = _client(rest, keys.create("acme"))
    c.post(
        "/v1/fluxmem/knowledge",
        json={"docs": ["Use the ratio tool to compare rates.", "Printers need badges."]},
    )
    start = c.post("/v1/fluxmem/tasks", json={"task": "compare goals per player"}).json()
    assert "<semantic_memory>" in start["context"] and start["outcome"] is None
    sid = start["session_id"]
    step = c.post(
        f"/v1/fluxmem/tasks/{sid}/steps",
        json={"success": False, "feedback": {"kind": "noise", "detail": "printers badges"}},
    ).json()
    assert step["outcome"] is None and step["context"] != start["context"]
    done = c.post(
        f"/v1/fluxmem/tasks/{sid}/steps", json={"success": True, "actions": ["ratio"]}
    ).json()
    assert done["outcome"]["success"] and done["outcome"]["repairs"][0]["op"] == "link_prune"
    # A finished session keeps its outcome (a lost answer can be asked again with its step).
    again = c.post(f"/v1/fluxmem/tasks/{sid}/steps", json={"success": True})
    assert again.status_code == 422 and "already finished" in again.text
    graph = c.get("/v1/fluxmem/graph").json()
    assert {n["kind"] for n in graph["nodes"]} == {"semantic", "episodic"}
    assert {e["kind"] for e in graph["edges"]} >= {"ground", "step"}
    sub = c.get("/v1/fluxmem/subgraph", params={"task": "compare goals per player"}).json()
    assert sub["episodic"] and c.post("/v1/fluxmem/consolidate").status_code == 200
    bad = c.post(f"/v1/fluxmem/tasks/{sid}/steps", json={"success": "maybe"})
    assert bad.status_code == 422


def test_mcp_in_memory_tools(pool: TenantPool) -> None:
    from fastmcp import Client

    tenant = pool.get("local")
    server = create_mcp(lambda: tenant)

    async def main() -> None:
        async with Client(server) as c:
            names = {t.name for t in await c.list_tools()}
            assert {
                "add_memory",
                "retrieve_memory",
                "get_memory",
                "update_memory",
                "delete_memory",
                "memory_history",
                "offline_update",
                "summarize",
                "stats",
                "add_knowledge",
                "start_task",
                "record_step",
                "consolidate",
                "show_subgraph",
            } <= names
            r = await c.call_tool(
                "add_memory",
                {
                    "user_message": "My cat Pixel eats tuna.",
                    "assistant_message": "Noted.",
                    "force_extract": True,
                },
            )
            assert len(r.structured_content["entries_created"]) >= 2
            hit = (await c.call_tool("retrieve_memory", {"query": "cat food"})).structured_content
            eid = hit["ids"][0]
            assert (await c.call_tool("get_memory", {"entry_id": eid})).structured_content[
                "sources"
            ]
            await c.call_tool("update_memory", {"entry_id": eid, "text": "Pixel eats salmon now"})
            hist = (await c.call_tool("memory_history", {"entry_id": eid})).structured_content
            assert [e["op"] for e in hist["events"]] == ["add", "update"]
            tidied = (await c.call_tool("offline_update", {})).structured_content
            assert tidied["queued"] >= 1 and tidied["complete"]
            assert (await c.call_tool("offline_update", {})).structured_content["queued"] == 0
            again = await c.call_tool("offline_update", {"recheck": True})
            assert again.structured_content["queued"] == tidied["queued"]
            with pytest.raises(Exception, match="recheck"):
                await c.call_tool("offline_update", {"recheck": "yes"})
            with pytest.raises(Exception, match="query: must not be empty"):
                await c.call_tool("retrieve_memory", {"query": ""})
            with pytest.raises(Exception, match="NotFoundError"):
                await c.call_tool("get_memory", {"entry_id": "nope"})
            with pytest.raises(Exception, match="limit"):  # "3" is no integer, as in REST
                await c.call_tool("retrieve_memory", {"query": "cat", "limit": "3"})
            s = (await c.call_tool("start_task", {"task": "feed the cat"})).structured_content
            done = await c.call_tool(
                "record_step", {"session_id": s["session_id"], "success": True}
            )
            assert done.structured_content["outcome"]["success"]

    asyncio.run(main())


def test_mcp_over_stdio(tmp_path: Path) -> None:
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    transport = StdioTransport(
        sys.executable, ["-m", "lightmem.cli.main", "--store", str(tmp_path / "m.db"), "mcp"]
    )

    async def main() -> None:
        async with Client(transport) as c:
            await c.call_tool(
                "add_memory", {"user_message": "I live in Porto.", "force_extract": True}
            )
            r = await c.call_tool("retrieve_memory", {"query": "where do I live", "limit": 1})
            assert "Porto" in r.structured_content["context"]

    asyncio.run(main())


def test_mcp_over_http_needs_a_key_and_isolates_tenants(
    pool: TenantPool, keys: KeyRegistry
) -> None:
    from fastmcp import Client

    server = create_mcp(http_resolver(pool), auth=KeyVerifier(keys))
    ka, kb = keys.create("alpha"), keys.create("beta")
    with LiveServer(server.http_app(path="/mcp")) as url:
        r = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert r.status_code == 401

        async def main() -> None:
            async with Client(f"{url}/mcp", auth=ka) as a:
                added = await a.call_tool(
                    "add_memory", {"user_message": "alpha secret 4711", "force_extract": True}
                )
                eid = added.structured_content["entries_created"][0]
            async with Client(f"{url}/mcp", auth=kb) as b:
                with pytest.raises(Exception, match="NotFoundError"):
                    await b.call_tool("get_memory", {"entry_id": eid})
                stats = (await b.call_tool("stats", {})).structured_content
                assert stats["entries"] == 0 and "store" not in stats

        asyncio.run(main())


def test_keys_cli(tmp_path: Path) -> None:
    from inprocess_cli import run

    out = run("keys", "create", "--tenant", "acme", "--data-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    key = json.loads(out.stdout)["key"]
    listed = run("keys", "list", "--data-dir", str(tmp_path))
    assert listed.returncode == 0, listed.stderr
    assert key not in listed.stdout and '"tenant": "acme"' in listed.stdout
    bad = run("keys", "create", "--tenant", "Bad Name!", "--data-dir", str(tmp_path))
    assert bad.returncode == 2 and "tenant" in bad.stderr


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_bench_serve_runs_on_both_backends(backend: str) -> None:
    import psycopg

    from lightmem.bench import serve as serve_bench

    dsn = require_postgres() if backend == "postgres" else None
    out = serve_bench.run(memories=50, clients=2, requests=20, mcp_calls=5, dsn=dsn)
    rest = out["rest_retrieve"]
    assert rest["requests"] == 20 and rest["errors"] == 0 and rest["p95_ms"] > 0
    assert out["mcp_stdio_retrieve"]["calls"] == 5
    if dsn:  # the throwaway schemas are gone
        with psycopg.connect(dsn) as conn:
            left = conn.execute(
                "SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'bench_srv_%'"
            ).fetchone()
        assert left == (0,)


def test_rest_reads_and_deletes_take_the_scope(rest: str, keys: KeyRegistry) -> None:
    c = _client(rest, keys.create("acme"))
    eid = _add(c, "Maya's bike is red.", user_id="maya")[0]
    _add(c, "Bob's bike is blue.", user_id="bob")
    for path in (f"/v1/memories/{eid}", f"/v1/memories/{eid}/history"):
        assert c.get(path, params={"user_id": "bob"}).status_code == 404
        assert c.get(path, params={"user_id": "maya"}).status_code == 200
    assert c.delete(f"/v1/memories/{eid}", params={"user_id": "bob"}).status_code == 404
    assert c.get("/v1/stats", params={"user_id": "bob"}).json()["scope"] == "user_id=bob"
    assert c.delete(f"/v1/memories/{eid}", params={"user_id": "maya"}).status_code == 200
    r = c.post("/v1/memories/search", json={"query": "bike", "mode": "fuzzy"})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("mode")
    r = c.post("/v1/memories/search", json={"query": "bike", "filters": {"kind": "nope"}})
    assert r.status_code == 422 and "filters.kind" in r.json()["error"]["message"]
    r = c.post("/v1/summarize", json={"retrieval_scope": "everything"})
    assert r.status_code == 422 and "retrieval_scope" in r.json()["error"]["message"]
    spec = c.get("/openapi.json").json()
    stats_params = {p["name"] for p in spec["paths"]["/v1/stats"]["get"]["parameters"]}
    assert {"user_id", "agent_id", "run_id"} <= stats_params


def test_every_request_is_logged_without_the_key(
    pool: TenantPool, keys: KeyRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    key = keys.create("acme")
    caplog.set_level("INFO", logger="lightmem.access")
    with LiveServer(create_app(pool, keys)) as url:
        c = _client(url, key)
        assert c.post("/v1/memories/search", json={"query": "secret words"}).status_code == 200
        assert _client(url, None).get("/v1/stats", params={"user_id": "u"}).status_code == 401
    lines = [r.getMessage() for r in caplog.records if r.name == "lightmem.access"]
    assert re.fullmatch(r"POST /v1/memories/search 200 \d+\.\dms", lines[0]), lines
    assert re.fullmatch(r"GET /v1/stats 401 \d+\.\dms", lines[1]), lines
    logged = "\n".join(caplog.messages)
    assert key not in logged and key.split("_")[1] not in logged and "secret" not in logged


def test_an_unknown_query_parameter_is_refused_naming_it(rest: str, keys: KeyRegistry) -> None:
    """A misspelt ``entry_id`` on purge must not erase the whole user (it was ignored)."""
    c = _client(rest, keys.create("acme"))
    eid = _add(c, "Maya's bike is red.", user_id="maya")[0]
    _add(c, "Maya's car is blue.", user_id="maya")
    r = c.delete("/v1/purge", params={"user_id": "maya", "entryid": eid})
    assert r.status_code == 422, r.text
    message = r.json()["error"]["message"]
    assert message.startswith("entryid: unknown query parameter") and "entry_id" in message
    assert c.get("/v1/stats", params={"user_id": "maya"}).json()["entries"] >= 2
    for method, path in (("GET", "/v1/memories"), ("DELETE", f"/v1/memories/{eid}")):
        r = c.request(method, path, params={"usr_id": "maya"})
        assert r.status_code == 422 and r.json()["error"]["message"].startswith("usr_id")
    assert c.get(f"/v1/memories/{eid}", params={"user_id": "maya"}).status_code == 200
    ok = c.delete("/v1/purge", params={"user_id": "maya", "entry_id": eid})
    assert ok.status_code == 200, ok.text


def test_rest_refuses_what_the_library_refuses(rest: str, keys: KeyRegistry) -> None:
    """ "yes" is no boolean and "3" no integer: refused naming the field, not converted."""
    c = _client(rest, keys.create("acme"))
    msgs = [{"content": "Maya's bike is red.", "speaker_name": "Ana"}]
    r = c.post("/v1/memories", json={"messages": msgs, "force_extract": "yes"})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("force_extract")
    r = c.post("/v1/memories/search", json={"query": "bike", "limit": "3"})
    assert r.status_code == 422 and r.json()["error"]["message"].startswith("limit")
    r = c.post("/v1/memories/search", json={"query": "bike", "filters": {"speaker": 5}})
    assert r.status_code == 422 and "filters.speaker" in r.json()["error"]["message"]
    assert c.post("/v1/memories/search", json={"query": "bike", "limit": 3}).status_code == 200


def test_the_api_docs_load_nothing_from_the_network(rest: str) -> None:
    """``/docs`` is Swagger UI from the installed package, not a CDN: it works offline."""
    html = httpx.get(f"{rest}/docs").text
    assert "https://" not in html and "http://" not in html
    for asset in re.findall(r"""(?:src|href)=['"](/docs/assets/[^'"]+)['"]""", html):
        assert httpx.get(f"{rest}{asset}").status_code == 200, asset
    assert "/docs/assets/swagger-ui-bundle.js" in html


def test_a_client_that_never_finishes_its_headers_is_let_go(tmp_path: Path) -> None:
    """uvicorn alone kept such a connection open for minutes (42,000 of them, with no
    key, used up the workers' file descriptors); one sending its headers is served."""
    import socket
    import time

    from lightmem.server.connections import HeaderDeadline

    class Quick(HeaderDeadline):
        header_deadline_s = 0.5

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    try:
        with LiveServer(create_app(pool, keys), http=Quick) as url:
            port = int(url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port), timeout=10) as slow:
                slow.sendall(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n")  # never ends
                started = time.monotonic()
                assert slow.recv(1024) == b""  # closed by the server
                assert time.monotonic() - started < 8
            assert httpx.get(f"{url}/openapi.json", timeout=10).status_code == 200
    finally:
        keys.close()
        pool.close()
