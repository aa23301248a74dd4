"""What one connection can hold on the REST server: a request without a valid key is
answered 401 before any of its body is read, and a body not sent in time is a 408, so a
stalled upload pins neither a buffer nor a connection. Raw sockets against a real server on
loopback."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lightmem import ConfigError, InvalidInputError
from lightmem.server.rest import create_app
from lightmem.server.tenancy import KeyRegistry, Tenant, TenantPool
from lightmem.testing.live_server import LiveServer


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, int, KeyRegistry]]:
    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    try:
        with LiveServer(create_app(pool, keys, body_deadline_s=0.5)) as url:
            host, port = url.removeprefix("http://").rsplit(":", 1)
            yield host, int(port), keys
    finally:
        keys.close()
        pool.close()


def _stalled_post(
    host: str, port: int, headers: str, declared: int, sent: bytes, path: str = "/v1/memories"
) -> bytes:
    """Send a POST declaring ``declared`` body bytes but only ``sent``; the reply read
    within 10 s (empty if the server is still waiting for the body)."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(
            f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"{headers}Content-Length: {declared}\r\n\r\n".encode()
            + sent
        )
        return _response(s)


def _response(s: socket.socket) -> bytes:
    """One whole HTTP response (head and its Content-Length of body, which may come in
    several packets), or what came before 10 s passed."""
    data = b""
    try:
        while True:
            head, sep, body = data.partition(b"\r\n\r\n")
            if sep:
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                if len(body) >= length:
                    return data
            chunk = s.recv(65536)
            if not chunk:
                return data
            data += chunk
    except TimeoutError:
        return data


def _status_and_error(reply: bytes) -> tuple[int, dict[str, str]]:
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)["error"]


def test_no_body_is_read_for_a_request_without_a_valid_key(
    served: tuple[str, int, KeyRegistry],
) -> None:
    host, port, _ = served
    requests = [
        *(
            (h, "/v1/memories")
            for h in ("", "Authorization: Bearer lm_no_no\r\n", "X-API-Key: x\r\n")
        ),
        *(("", path) for path in ("/nope", "/v1", "//v1/memories", "/ui/")),  # any path
    ]
    for headers, path in requests:
        # 8 MB declared, 1 KB sent: answered at once, not after the body (never sent).
        reply = _stalled_post(host, port, headers, 8 * 1024 * 1024, b"a" * 1024, path)
        status, error = _status_and_error(reply)
        assert status == 401 and error["type"] == "Unauthorized", reply
        assert b"www-authenticate: bearer" in reply.lower()


def test_a_body_not_sent_in_time_is_a_408(served: tuple[str, int, KeyRegistry]) -> None:
    host, port, keys = served
    key = keys.create("acme")
    reply = _stalled_post(host, port, f"X-API-Key: {key}\r\n", 1000, b'{"messages": [')
    status, error = _status_and_error(reply)
    assert status == 408 and error == {
        "type": "RequestTimeout",
        "message": "body: not received within 0.5 s",
    }
    whole = json.dumps({"messages": [{"content": "Ana likes tea."}]}).encode()
    reply = _stalled_post(host, port, f"X-API-Key: {key}\r\n", len(whole), whole)
    assert reply.split()[1] == b"200", reply  # a body sent in time is served


def test_the_deadline_must_be_positive(tmp_path: Path) -> None:
    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    try:
        for bad in (0.0, -1.0, float("nan")):
            with pytest.raises(ConfigError, match="body_deadline_s"):
                create_app(pool, keys, body_deadline_s=bad)
    finally:
        keys.close()
        pool.close()


def test_one_call_adds_at_most_max_messages_and_max_documents(tmp_path: Path) -> None:
    from lightmem import InvalidInputError, LightMemory
    from lightmem.fluxmem import FluxMemAgent
    from lightmem.fluxmem.records import MAX_DOCUMENTS
    from lightmem.pipeline.messages import MAX_CONTENT_CHARS, MAX_MESSAGES

    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        many = [{"content": f"w{i}"} for i in range(MAX_MESSAGES + 1)]
        with pytest.raises(InvalidInputError, match=rf"^messages: {MAX_MESSAGES + 1} in one"):
            mem.add_memory(many)
        assert mem.stats()["messages"] == 0  # refused whole, not added in part
        assert mem.add_memory(many[:3]).messages_added == 3
    with FluxMemAgent.open(tmp_path / "g.db") as agent:
        with pytest.raises(InvalidInputError, match=r"^text_or_docs: 10001 documents"):
            agent.add_knowledge([f"fact {i}" for i in range(MAX_DOCUMENTS + 1)])
        with pytest.raises(InvalidInputError, match=r"^text_or_docs\[1\]\.text: longer than"):
            agent.add_knowledge([{"text": "short"}, {"text": "x" * (MAX_CONTENT_CHARS + 1)}])
        assert agent.stats()["semantic_nodes"] == 0


def test_a_step_reports_at_most_max_step_items(tmp_path: Path) -> None:
    from lightmem import InvalidInputError
    from lightmem.server import service
    from lightmem.server.service import MAX_STEP_ITEMS

    pool = TenantPool(tmp_path / "data")
    try:
        tenant = pool.get("acme")
        started = service.start_task(tenant, "Make tea.", 2)
        too_many = [f"step {i}" for i in range(MAX_STEP_ITEMS + 1)]
        with pytest.raises(InvalidInputError, match=r"^actions: 1001 items, at most 1000"):
            service.record_step(
                tenant, started["session_id"], result=None, success=True, actions=too_many
            )
        feedback = {"kind": "missing", "steps": too_many}
        with pytest.raises(InvalidInputError, match=r"^feedback\.steps: 1001 items"):
            service.record_step(
                tenant, started["session_id"], result=None, success=False, feedback=feedback
            )
        with pytest.raises(InvalidInputError, match=r"^feedback\.steps: expected a list"):
            service.record_step(
                tenant,
                started["session_id"],
                result=None,
                success=False,
                feedback={"kind": "missing", "steps": 5},
            )
    finally:
        pool.close()


def test_a_path_cannot_forge_an_access_log_line(
    served: tuple[str, int, KeyRegistry], caplog: pytest.LogCaptureFixture
) -> None:
    from lightmem.server.access_log import ACCESS_LOGGER

    host, port, _ = served
    forged = "/v1/memories/x%20200%201.0ms%0A12:00:01%20DELETE%20/v1/purge%20200%203.1ms%1B[2J"
    with caplog.at_level("INFO", logger=ACCESS_LOGGER), socket.create_connection((host, port)) as s:
        s.sendall(f"GET {forged}{'a' * 500} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        s.settimeout(10)
        status = _response(s).split()[1].decode()

        def logged() -> list[str]:
            return [r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER]

        # The line is written once the answer is sent: wait for it, still at INFO level.
        deadline = time.monotonic() + 10
        while not logged() and time.monotonic() < deadline:
            time.sleep(0.01)
        lines = logged()
    assert status in ("401", "404")  # refused (no key), or no such route
    assert len(lines) == 1 and "\n" not in lines[0] and "\x1b" not in lines[0]
    assert lines[0].startswith("GET /v1/memories/x%20200%201.0ms%0A12:00:01")
    assert f" {status} " in lines[0]
    assert len(lines[0]) < 260  # the path is cut to 200 characters


def test_a_server_failure_names_no_file_to_the_client_and_is_logged(
    served: tuple[str, int, KeyRegistry],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import httpx

    from lightmem import StoreError
    from lightmem.server import service

    host, port, keys = served
    key = keys.create("acme")

    def failing(*_args: object, **_kwargs: object) -> None:
        raise StoreError("store '/srv/lightmem/tenants/acme.db': disk I/O error")

    monkeypatch.setattr(service, "stats", failing)
    with caplog.at_level("ERROR", logger="lightmem.server"):
        reply = httpx.get(f"http://{host}:{port}/v1/stats", headers={"X-API-Key": key})
    error = reply.json()["error"]
    assert reply.status_code == 503 and error["type"] == "StoreError"
    assert "/srv" not in error["message"] and "acme.db" not in error["message"]
    ref = error["message"].rsplit("ref ", 1)[1].rstrip(")")
    logged = [r.getMessage() for r in caplog.records if r.name == "lightmem.server"]
    assert any(ref in m and "/srv/lightmem/tenants/acme.db" in m for m in logged)
    # An error about the request itself is answered as it is.
    kind, message = service.public_error(InvalidInputError("limit: must be at least 1"))
    assert (kind, message) == ("InvalidInputError", "limit: must be at least 1")


def test_starlettes_own_errors_come_in_the_documented_shape(
    served: tuple[str, int, KeyRegistry],
) -> None:
    import httpx

    host, port, keys = served
    key = keys.create("acme")
    with httpx.Client(base_url=f"http://{host}:{port}", headers={"X-API-Key": key}) as c:
        missing = c.get("/v1/nothing-here")
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "NotFound"
        wrong = c.put("/v1/stats")
        assert wrong.status_code == 405 and wrong.json()["error"]["type"] == "MethodNotAllowed"
        bad = c.post(
            "/v1/memories",
            content=b"\xff\xfe not utf-8",
            headers={"Content-Type": "application/json"},
        )
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "InvalidInputError"
        deep = c.post(
            "/v1/memories",
            content=b"[" * 5000 + b"]" * 5000,
            headers={"Content-Type": "application/json"},
        )
        assert deep.status_code == 422 and deep.json()["error"]["message"].startswith("body")


def test_errors_name_the_apis_fields(tmp_path: Path) -> None:
    from lightmem.server import service

    pool = TenantPool(tmp_path / "data")
    try:
        tenant = pool.get("acme")
        with pytest.raises(InvalidInputError, match=r"^task: must not be empty"):
            service.start_task(tenant, "  ")
        with pytest.raises(InvalidInputError, match=r"^task: must not be empty"):
            service.show_subgraph(tenant, "")
        with pytest.raises(InvalidInputError, match=r"^docs\[1\]: no text"):
            service.add_knowledge(tenant, ["Tea is hot.", "   "])
        with pytest.raises(InvalidInputError, match=r"^source: "):
            service.add_knowledge(tenant, ["Tea is hot."], source=5)  # type: ignore[arg-type]
    finally:
        pool.close()


def test_one_tenant_cannot_hold_every_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    import httpx

    from lightmem.server import service

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    inside = threading.Semaphore(0)
    release = threading.Event()
    real_stats = service.stats

    def slow_for_acme(t: Tenant, *args: object, **kwargs: object) -> dict[str, object]:
        if t.name == "acme":
            inside.release()
            release.wait(30)
        return real_stats(t, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(service, "stats", slow_for_acme)
    acme, beta = keys.create("acme"), keys.create("beta")
    try:
        with LiveServer(create_app(pool, keys, max_in_flight=2)) as url:

            def get(key: str) -> httpx.Response:
                return httpx.get(f"{url}/v1/stats", headers={"X-API-Key": key}, timeout=30)

            replies: list[httpx.Response] = []
            waiting = [threading.Thread(target=lambda: replies.append(get(acme))) for _ in range(2)]
            for w in waiting:
                w.start()
            for _ in waiting:
                assert inside.acquire(timeout=30)  # both acme requests are being served
            third = get(acme)
            assert third.status_code == 429 and third.headers["retry-after"] == "1"
            assert third.json()["error"]["type"] == "TooManyRequests"
            assert get(beta).status_code == 200  # another tenant is served meanwhile
            release.set()
            for w in waiting:
                w.join(30)
            assert [r.status_code for r in replies] == [200, 200]
            assert get(acme).status_code == 200  # its slots are free again
    finally:
        release.set()
        keys.close()
        pool.close()
    with pytest.raises(ConfigError, match="max_in_flight"):
        create_app(pool, keys, max_in_flight=0)
    from lightmem.server.body_gate import BodyGate
    from lightmem.server.mcp import http_app

    with pytest.raises(ConfigError, match=r"^max_reading: "):  # its own name, not another's
        BodyGate(create_app(pool, keys), max_bytes=1, keys=keys, max_reading=0)
    with pytest.raises(ConfigError, match=r"^max_in_flight: "):
        http_app(pool, keys, max_in_flight=0)


def test_a_failing_key_store_is_a_503_in_the_documented_shape(
    served: tuple[str, int, KeyRegistry],
) -> None:
    import httpx

    host, port, keys = served
    key = keys.create("acme")
    keys.close()  # the key store fails from now on
    with httpx.Client(base_url=f"http://{host}:{port}", headers={"X-API-Key": key}) as c:
        for reply in (c.get("/v1/stats"), c.post("/v1/memories", json={"messages": []})):
            error = reply.json()["error"]
            assert reply.status_code == 503 and error["type"] == "StoreError", reply.text
            assert error["message"].startswith("the store failed on the server")


def test_mcp_over_http_reads_no_body_without_a_key_and_gives_a_body_30_s(tmp_path: Path) -> None:
    from lightmem.server.mcp import http_app

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    try:
        with LiveServer(http_app(pool, keys)) as url:
            host, port = url.removeprefix("http://").rsplit(":", 1)
            reply = _stalled_post(host, int(port), "", 8 * 1024 * 1024, b"a" * 1024, "/mcp")
            assert reply.split()[1] == b"401", reply
            too_big = _stalled_post(
                host,
                int(port),
                f"Authorization: Bearer {keys.create('acme')}\r\n",
                64 * 1024 * 1024,
                b"{",
                "/mcp",
            )
            assert too_big.split()[1] == b"413", too_big
    finally:
        keys.close()
        pool.close()


def test_a_tenants_slot_is_freed_whatever_the_answer(tmp_path: Path) -> None:
    import httpx

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    key = keys.create("acme")
    try:
        with (
            LiveServer(create_app(pool, keys, max_in_flight=1)) as url,
            httpx.Client(base_url=url, headers={"X-API-Key": key}) as c,
        ):
            # One slot, given back before each answer is sent: the next request, sent on
            # reading that answer, is never refused (a slot given back after the answer
            # was sent lost this race in two of three runs of this loop).
            for _ in range(40):
                assert c.get("/v1/memories/no-such-entry").status_code == 404  # NotFoundError
                assert c.post("/v1/memories", json={"messages": 5}).status_code == 422
                assert c.post("/v1/memories/search", json={"query": ""}).status_code == 422
                assert c.get("/v1/stats").status_code == 200
    finally:
        keys.close()
        pool.close()


# -- per-tenant limits outside the REST handlers (attack review) ---------------------------
def test_mcp_calls_of_one_tenant_are_limited_like_rest() -> None:
    """One tenant's 60 concurrent MCP adds made another's stats take 31 s: past the limit
    a tenant gets 429, other tenants are served, and the slot comes back with the answer."""
    import asyncio

    from lightmem.server.body_gate import TenantInFlight
    from lightmem.server.in_flight import InFlight

    release = asyncio.Event()

    async def slow_app(scope: object, receive: object, send: object) -> None:
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})  # type: ignore[operator]

    gate = TenantInFlight(slow_app, InFlight(1))

    async def run() -> list[int]:
        async def one(tenant: str) -> int:
            state = {"lightmem_tenant": tenant}  # as the body gate leaves it
            scope: dict[str, object] = {"type": "http", "method": "POST", "state": state}
            sent: list[dict[str, Any]] = []

            async def receive() -> dict[str, object]:
                return {"type": "http.request", "body": b"{}", "more_body": False}

            async def send(message: dict[str, Any]) -> None:
                sent.append(message)

            await gate(scope, receive, send)
            return int(sent[0]["status"])

        first = asyncio.create_task(one("acme"))
        await asyncio.sleep(0.01)
        second = await asyncio.wait_for(one("acme"), 10)  # acme is at its limit
        release.set()  # (other tenants and the next call are served)
        return [await first, second, await one("acme"), await one("other")]

    assert asyncio.run(run()) == [200, 429, 200, 200]


def test_one_tenant_has_a_few_bodies_read_at_once(tmp_path: Path) -> None:
    """100 slow 8 MB uploads with one key held 1 GB of buffers before any request limit:
    past ``max_reading`` bodies being read, the tenant gets 429 without a byte read."""
    import asyncio

    from lightmem.server.body_gate import BodyGate

    pool = TenantPool(tmp_path / "data")
    keys = pool.keys()
    key = keys.create("acme")
    try:
        reached: list[bytes] = []

        async def app(scope: object, receive: object, send: object) -> None:
            reached.append((await receive())["body"])  # type: ignore[operator]
            await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
            await send({"type": "http.response.body", "body": b"", "more_body": False})  # type: ignore[operator]

        gate = BodyGate(app, max_bytes=1_000, keys=keys, max_reading=1)

        async def run() -> list[int]:
            stalled, done = asyncio.Event(), asyncio.Event()
            headers = [(b"content-length", b"2"), (b"authorization", f"Bearer {key}".encode())]
            scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
            statuses: list[int] = []

            async def slow_receive() -> dict[str, object]:
                stalled.set()
                await done.wait()  # the body's last part comes later
                return {"type": "http.request", "body": b"{}", "more_body": False}

            async def fast_receive() -> dict[str, object]:
                return {"type": "http.request", "body": b"{}", "more_body": False}

            async def send(message: dict[str, object]) -> None:
                if message["type"] == "http.response.start":
                    statuses.append(int(message["status"]))  # type: ignore[call-overload]

            first = asyncio.create_task(gate(dict(scope), slow_receive, send))
            await stalled.wait()
            await gate(dict(scope), fast_receive, send)  # one body of acme is being read
            done.set()
            await first
            await gate(dict(scope), fast_receive, send)  # read again once it is free
            return statuses

        assert asyncio.run(run()) == [429, 200, 200]
        assert reached == [b"{}", b"{}"]
    finally:
        keys.close()
        pool.close()


def test_a_listing_page_ends_before_its_text_passes_the_budget(tmp_path: Path) -> None:
    """1,000 entries of 1 MB fields made a 66 MB answer: a page holds at most
    ``max_chars`` of memory text (at least one entry), and ``next_offset`` goes on from
    where it ended, so paging still reaches every entry once."""
    from lightmem.server import service
    from lightmem.server.tenancy import open_tenant

    tenant = open_tenant("acme", {"store": {"path": str(tmp_path / "t.db")}})
    try:
        texts = [f"Note {i}: " + "word " * (40 if i % 2 else 400) for i in range(120)]
        tenant.memory.add_memory([{"content": t} for t in texts], force_extract=True)
        every = tenant.memory.list_entries({"kind": "entry"}, limit=1000)
        assert len(every) == 120
        seen: list[str] = []
        offset: int | None = 0
        pages = 0
        while offset is not None:
            page = service.list_memories(
                tenant, filters={"kind": "entry"}, limit=100, offset=offset, max_chars=20_000
            )
            chars = sum(len(e["text"]) + len(e["original_text"]) for e in page["items"])
            assert page["items"] and (chars <= 20_000 or len(page["items"]) == 1)
            seen += [e["id"] for e in page["items"]]
            offset, pages = page["next_offset"], pages + 1
        assert seen == [e.id for e in every] and pages > 2
        whole = service.list_memories(tenant, filters={"kind": "entry"}, limit=100)
        assert len(whole["items"]) == 100 and whole["next_offset"] == 100  # as before
        tail = service.list_memories(tenant, filters={"kind": "entry"}, limit=100, offset=100)
        assert len(tail["items"]) == 20 and tail["next_offset"] is None
    finally:
        tenant.memory.close()
