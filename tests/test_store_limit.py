"""A store's size limit (``store.max_mb``, a server's ``tenant_max_mb``): past it, what adds
is refused with StoreFullError (507 over REST, a tool error over MCP) and the rest goes on; a
purge makes room again, on both backends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError

from conftest import backend_store_config, require_postgres
from lightmem import LightMemory, StoreFullError
from lightmem.errors import ConfigError, InvalidInputError
from lightmem.fluxmem.agent import FluxMemAgent
from lightmem.fluxmem.types import StepResult
from lightmem.server.env import SERVER_CONFIG_VAR, TENANT_MAX_MB_VAR, tenant_max_mb_from_env
from lightmem.server.mcp import create_mcp
from lightmem.server.rest import app_from_env, create_app
from lightmem.server.tenancy import TenantPool
from lightmem.store.size_limit import SizeLimit
from lightmem.store.sqlite_db import SQLiteDatabase
from lightmem.testing.live_server import LiveServer

_WORDS = " ".join(f"word{i}" for i in range(300))  # ~2.5 KB a turn, distinct terms


def _turns(batch: int) -> list[dict[str, Any]]:
    return [{"content": f"note {batch} {j}: {_WORDS}", "speaker_name": "Ana"} for j in range(20)]


def _fill(mem: LightMemory) -> int:
    """Add batches until the store refuses one; the batches it took."""
    for batch in range(40):
        try:
            mem.add_memory(_turns(batch), force_extract=True, user_id="ana")
        except StoreFullError as exc:
            assert "store.max_mb" in str(exc) and "limit of 1.0 MiB" in str(exc)
            return batch
    raise AssertionError("a store limited to 1 MB took 40 batches of 60 KB")


def test_a_full_store_refuses_what_adds_and_keeps_the_rest(
    store_config: dict[str, Any],
) -> None:
    with LightMemory.from_config({"store": {**store_config, "max_mb": 1}}) as mem:
        assert mem.store.max_bytes == 1024 * 1024
        empty = mem.store.size_bytes()
        agent = FluxMemAgent.on_store(mem.store, mem.embedder)
        agent.add_knowledge("Greet the team by name every morning.")
        session = agent.start_task("greet the team")  # open before the store fills
        took = _fill(mem)
        stats = mem.stats()
        assert stats["max_bytes"] == mem.store.max_bytes <= stats["size_bytes"]
        assert took >= 1 and mem.store.size_bytes() >= mem.store.max_bytes
        entries = mem.list_entries(limit=1000, user_id="ana")
        n = len(entries)
        # what adds is refused, and nothing of it was stored
        first = entries[0]
        graph = agent.stats()
        for refused in (
            lambda: mem.update(first.id, "edited", user_id="ana"),
            lambda: mem.summarize(user_id="ana"),
            lambda: agent.add_knowledge("the handbook says hello"),
            lambda: agent.add_skill("greet", ["say hello"]),
            lambda: agent.start_task("greet the team"),
            lambda: session.report(StepResult("said hi", None, False, ("wave",) * 50)),
        ):
            with pytest.raises(StoreFullError):
                refused()
        assert agent.stats() == graph
        session.abandon("the store is full")  # ending a task is never refused
        assert session.outcome is not None
        assert len(mem.list_entries(limit=1000, user_id="ana")) == n
        # reads, deletes and the offline update go on
        assert mem.retrieve("note w0x1x7", limit=3, user_id="ana")
        mem.delete(entries[1].id, user_id="ana")
        with pytest.raises(StoreFullError):  # a restore is one more version
            mem.restore(entries[1].id, user_id="ana")
        mem.construct_update_queue_all_entries(user_id="ana")
        mem.offline_update_all_entries(0.999, user_id="ana")  # few pairs: quick
        # a purge makes room (PostgreSQL: VACUUM FULL, so the measure goes down)
        mem.purge(user_id="ana")
        assert mem.store.size_bytes() < empty + mem.store.max_bytes / 4
        mem.add_memory(_turns(99), force_extract=True, user_id="ana")
        assert len(mem.list_entries({"kind": "entry"}, limit=1000, user_id="ana")) == 20


def test_a_purge_reclaims_once_the_transactions_older_than_it_end(
    store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL keeps deleted rows that a transaction begun before the purge's commit may
    still see, through a VACUUM FULL too: a purge waits for such transactions (written
    ones hold every database back), and says when it could not wait long enough."""
    import psycopg

    from lightmem.store import postgres_db

    with (
        backend_store_config("postgres", store_path) as config,
        LightMemory.from_config({"store": {**config, "max_mb": 1}}) as mem,
    ):
        empty = mem.store.size_bytes()
        _fill(mem)
        first = mem.list_entries(limit=1, user_id="ana")[0]
        with psycopg.connect(require_postgres()) as other:
            other.execute("SELECT txid_current()")  # a write transaction, open meanwhile
            monkeypatch.setattr(postgres_db, "RECLAIM_LOCK_S", 0.3)
            assert not mem.purge(first.id, user_id="ana").compacted  # it waited 0.3 s
            monkeypatch.undo()
            ended: list[float] = []

            def end_it() -> None:
                time.sleep(1.0)
                other.commit()
                ended.append(time.monotonic())

            ender = threading.Thread(target=end_it)
            ender.start()
            try:
                report = mem.purge(user_id="ana")
                done = time.monotonic()
            finally:
                ender.join()
        assert report.compacted and ended and ended[0] < done
        assert mem.store.size_bytes() < empty + 1024 * 1024 / 4


def test_no_limit_by_default_and_bad_limits_are_named(store_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        assert mem.store.max_bytes is None
        mem.add_memory(_turns(0), force_extract=True)
    for bad in (0, -1, "10", 1.5, True):
        with pytest.raises(ConfigError, match=r"store\.max_mb"):
            LightMemory.from_config({"store": {"path": str(store_path), "max_mb": bad}})
        with pytest.raises(InvalidInputError, match="tenant_max_mb"):
            TenantPool(store_path.parent / "srv", tenant_max_mb=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="max_bytes"):
        SizeLimit(SQLiteDatabase(":memory:"), 0)


@pytest.fixture
def limited_pool(tmp_path: Path) -> Iterator[TenantPool]:
    """Tenants in SQLite files (the limit on both backends is tested above)."""
    p = TenantPool(tmp_path / "data", tenant_max_mb=1)
    yield p
    p.close()


def test_a_tenant_at_its_limit_gets_507_and_can_purge(limited_pool: TenantPool) -> None:
    keys = limited_pool.keys()
    try:
        key = keys.create("acme")
        with LiveServer(create_app(limited_pool, keys)) as url:
            c = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
            body = {"messages": _turns(0), "force_extract": True, "user_id": "ana"}
            for batch in range(40):
                r = c.post("/v1/memories", json={**body, "messages": _turns(batch)})
                if r.status_code != 200:
                    break
            assert r.status_code == 507, r.text
            error = r.json()["error"]
            assert error["type"] == "StoreFullError" and "store.max_mb" in error["message"]
            assert "tenants" not in error["message"]  # no server path
            # MCP: the same refusal as a tool error
            tenant = limited_pool.get("acme")

            async def mcp_add() -> None:
                async with Client(create_mcp(lambda: tenant)) as m:
                    await m.call_tool("add_memory", {"messages": _turns(98), "user_id": "ana"})

            with pytest.raises(ToolError, match=r"StoreFullError: store\.max_mb"):
                asyncio.run(mcp_add())
            assert (
                c.post("/v1/memories/search", json={"query": "note", "user_id": "ana"}).status_code
                == 200
            )
            assert c.delete("/v1/purge", params={"user_id": "ana"}).status_code == 200
            assert c.post("/v1/memories", json=body).status_code == 200
    finally:
        keys.close()


def test_the_servers_read_the_limit_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LIGHTMEM_SERVER_DSN", raising=False)
    monkeypatch.delenv(SERVER_CONFIG_VAR, raising=False)
    monkeypatch.setenv("LIGHTMEM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(TENANT_MAX_MB_VAR, raising=False)
    assert tenant_max_mb_from_env() is None
    for bad in ("0", "-3", "1.5", "lots", str(1 << 40)):
        monkeypatch.setenv(TENANT_MAX_MB_VAR, bad)
        with pytest.raises(ConfigError, match=TENANT_MAX_MB_VAR):
            tenant_max_mb_from_env()
    monkeypatch.setenv(TENANT_MAX_MB_VAR, "3")
    app = app_from_env()
    try:
        assert app.state.pool.tenant_max_mb == 3
        assert app.state.pool.get("acme").memory.store.max_bytes == 3 * 1024 * 1024
    finally:
        app.state.pool.close()


def test_sqlite_counts_pages_in_use_not_free_ones(store_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(store_path)}}) as mem:
        db = mem.store.db  # type: ignore[attr-defined]
        with db.transaction() as s:
            s.execute("CREATE TABLE scratch (body TEXT)")
            s.many("INSERT INTO scratch VALUES (?)", [("x" * 4000,)] * 500)
        full = mem.store.size_bytes()
        with db.transaction() as s:
            s.execute("DELETE FROM scratch")
        assert store_path.stat().st_size >= full > mem.store.size_bytes() + 1_000_000
