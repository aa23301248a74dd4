"""``lightmem bench serve``: REST retrieval under concurrent clients, and MCP stdio latency.

Bounded by construction: a fixed number of requests over loopback, then it stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lightmem.server.tenancy import TenantPool

__all__ = ["TOPICS", "run", "synthetic_messages"]

#: Conversation topics of the synthetic workloads (shared with the soak benchmark).
TOPICS = (
    "jazz concert",
    "marathon training",
    "sourdough bread",
    "python project",
    "trip to Porto",
    "knee injury",
    "new puppy",
    "chess club",
    "garden tomatoes",
    "piano lessons",
    "tax return",
    "birthday party",
    "job interview",
    "camping gear",
    "vegan recipes",
    "climbing wall",
)
_PEOPLE = ("Ana", "Ben", "Caro", "Dev", "Eli", "Fay", "Gus", "Hana")


def synthetic_messages(n: int, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topic = rng.choice(TOPICS)
        other = rng.choice(TOPICS)
        out.append(
            {
                "id": f"m{i}",
                "speaker_name": rng.choice(_PEOPLE),
                "timestamp": 1_700_000_000 + i * 600,
                "content": f"Update {i}: talked about the {topic} and later the {other}, "
                f"rated it {rng.randint(1, 10)} out of 10.",
            }
        )
    return out


def run(
    *,
    memories: int = 10_000,
    clients: int = 20,
    requests: int = 2_000,
    workers: int = 1,
    mcp_calls: int = 200,
    dsn: str | None = None,
) -> dict[str, Any]:
    """With ``dsn``, tenants and keys live in PostgreSQL (a throwaway server schema)."""
    from lightmem.server.tenancy import TenantPool, tenant_schema

    server_schema = f"bench_srv_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="lightmem-serve-bench-") as tmp:
        data = Path(tmp) / "data"
        pool = TenantPool(None if dsn else data, dsn=dsn, server_schema=server_schema)
        try:
            return _run(pool, data, tmp, memories, clients, requests, workers, mcp_calls)
        finally:
            if dsn:
                _drop_schemas(dsn, [tenant_schema("bench", server_schema), server_schema])


def _drop_schemas(dsn: str, schemas: list[str]) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in schemas:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _run(
    pool: TenantPool,
    data: Path,
    tmp: str,
    memories: int,
    clients: int,
    requests: int,
    workers: int,
    mcp_calls: int,
) -> dict[str, Any]:
    keys = pool.keys()
    key = keys.create("bench")
    tenant = pool.get("bench")
    msgs = synthetic_messages(memories)
    t0 = time.perf_counter()
    for start in range(0, len(msgs), 1000):
        tenant.memory.add_memory(msgs[start : start + 1000], force_extract=True)
    load_s = time.perf_counter() - t0
    pool.close()
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    per_client = max(1, requests // clients)

    def client(url: str, seed: int) -> None:
        # stdlib keep-alive connections: a light load generator, so the figure measures
        # the server rather than the client library.
        nonlocal errors
        rng = random.Random(seed)
        host, port = url.removeprefix("http://").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        for _ in range(per_client):
            body = json.dumps({"query": f"how was the {rng.choice(TOPICS)}?", "limit": 10})
            t1 = time.perf_counter()
            try:
                conn.request("POST", "/v1/memories/search", body, headers)
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
            dt = time.perf_counter() - t1
            with lock:
                latencies.append(dt)
                errors += not ok
        conn.close()

    # The server runs in its own process, as it would in production; the clients here.
    with _server_process(pool, data, workers) as url:
        threads = [threading.Thread(target=client, args=(url, i)) for i in range(clients)]
        t2 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        wall = time.perf_counter() - t2
    latencies.sort()
    rest = {
        "memories": memories,
        "clients": clients,
        "workers": workers,
        "requests": len(latencies),
        "errors": errors,
        "load_s": round(load_s, 2),
        "throughput_rps": round(len(latencies) / wall, 1),
        "p50_ms": round(1000 * statistics.median(latencies), 2),
        "p95_ms": round(1000 * latencies[int(0.95 * len(latencies))], 2),
    }
    mcp = asyncio.run(_mcp_stdio(Path(tmp) / "mcp.db", mcp_calls, min(memories, 1000)))
    return {"rest_retrieve": rest, "mcp_stdio_retrieve": mcp}


async def _mcp_stdio(path: Path, calls: int, memories: int) -> dict[str, Any]:
    """``calls`` retrievals over MCP stdio from a store of ``memories`` messages (at most
    1000: the figure is a call's latency, not a large store's)."""
    from fastmcp import Client
    from fastmcp.client.transports import StdioTransport

    from lightmem.memory import LightMemory

    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.add_memory(synthetic_messages(memories, seed=1), force_extract=True)
    transport = StdioTransport(  # this environment, so the server runs this same code
        sys.executable,
        ["-m", "lightmem.cli.main", "--store", str(path), "mcp"],
        env=dict(os.environ),
    )
    lat = []
    async with Client(transport) as c:
        await c.call_tool("retrieve_memory", {"query": "warm up"})
        for i in range(calls):
            t0 = time.perf_counter()
            await c.call_tool("retrieve_memory", {"query": f"the {TOPICS[i % len(TOPICS)]}"})
            lat.append(time.perf_counter() - t0)
    lat.sort()
    return {
        "calls": calls,
        "p50_ms": round(1000 * statistics.median(lat), 2),
        "p95_ms": round(1000 * lat[int(0.95 * len(lat))], 2),
    }


@contextlib.contextmanager
def _server_process(pool: TenantPool, data: Path, workers: int) -> Iterator[str]:
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "lightmem.cli.main",
        "serve",
        *(["--dsn", pool.dsn] if pool.dsn else ["--data-dir", str(data)]),
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--no-access-log",  # a line per request measures the log, not the server
    ]
    env = {**os.environ, "LIGHTMEM_SERVER_SCHEMA": pool.server_schema}
    # What the server says goes to a file, not a pipe: a pipe nobody reads fills up (64 KiB)
    # and then blocks the server mid-benchmark.
    with tempfile.TemporaryFile() as said:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=said, env=env)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/openapi.json", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    said.seek(0)
                    raise RuntimeError(f"server did not start: {said.read().decode()}")
                time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=20)
