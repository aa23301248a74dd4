"""Tenants and API keys. Each tenant's memory lives in its own store file, so one tenant's
key can never reach, count or even name another tenant's items; keys are stored hashed."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lightmem.config import build_embedder, parse_config
from lightmem.embed.base import Embedder
from lightmem.errors import InvalidInputError, NotFoundError, StoreError
from lightmem.fluxmem.agent import FluxMemAgent, TaskSession
from lightmem.ledger import Ledger
from lightmem.memory import LightMemory
from lightmem.store.sqlite import SQLiteStore

_TENANT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_APP_ID = 0x4C4D4B59  # "LMKY"


def single_threaded_blas() -> None:
    """Servers answer many small queries on many threads: a multi-threaded BLAS then spends
    its time contending (measured: 79 vs 537 queries/s on 8 threads), so one thread each."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def check_tenant(tenant: object) -> str:
    if not isinstance(tenant, str) or not _TENANT.match(tenant):
        raise InvalidInputError(
            "tenant: 1-64 characters of a-z, 0-9, '_' or '-', starting with a letter or digit"
        )
    return tenant


@dataclass(frozen=True, slots=True)
class KeyInfo:
    prefix: str
    tenant: str
    created_at: float
    revoked: bool


class KeyRegistry:
    """API keys in ``<data_dir>/keys.db``: only a SHA-256 of each key is kept (keys are 256
    random bits, so a slow hash adds nothing); the prefix identifies a key for revocation."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master")}
            app = self._conn.execute("PRAGMA application_id").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"keys: {self.path!r} is not a readable SQLite file ({exc})") from exc
        if tables and app != _APP_ID:
            raise StoreError(f"keys: {self.path!r} belongs to another application")
        if not tables:
            self._conn.execute(f"PRAGMA application_id = {_APP_ID}")
            self._conn.execute(
                "CREATE TABLE api_keys (prefix TEXT PRIMARY KEY, hash TEXT NOT NULL, "
                "tenant TEXT NOT NULL, created_at REAL NOT NULL, revoked INTEGER NOT NULL)"
            )
        self._conn.execute("PRAGMA journal_mode = WAL")

    def create(self, tenant: str) -> str:
        """A new key for ``tenant``; the only time the key itself is visible."""
        check_tenant(tenant)
        prefix = secrets.token_hex(4)
        key = f"lm_{prefix}_{secrets.token_urlsafe(32)}"
        with self._lock:
            self._conn.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, 0)",
                (prefix, _hash(key), tenant, time.time()),
            )
        return key

    def tenant_for(self, key: str | None) -> str | None:
        """The tenant a valid, unrevoked key belongs to, else None."""
        if not key or not key.startswith("lm_") or key.count("_") < 2:
            return None
        prefix = key.split("_", 2)[1]
        with self._lock:
            row = self._conn.execute(
                "SELECT hash, tenant, revoked FROM api_keys WHERE prefix = ?", (prefix,)
            ).fetchone()
        if row is None or row[2] or not hmac.compare_digest(row[0], _hash(key)):
            return None
        return str(row[1])

    def list(self) -> list[KeyInfo]:
        with self._lock:
            rows = self._conn.execute(
                "SELECT prefix, tenant, created_at, revoked FROM api_keys ORDER BY created_at"
            ).fetchall()
        return [KeyInfo(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def revoke(self, prefix: str) -> None:
        with self._lock:
            cur = self._conn.execute("UPDATE api_keys SET revoked = 1 WHERE prefix = ?", (prefix,))
        if cur.rowcount == 0:
            raise NotFoundError(f"prefix: no key {prefix!r}")

    def close(self) -> None:
        self._conn.close()


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class LiveSession:
    """A FluxMem task driven by a remote client, and when it last spoke."""

    session: TaskSession
    last_used: float


@dataclass
class Tenant:
    """One tenant's memory, FluxMem agent and task sessions in progress."""

    name: str
    memory: LightMemory
    agent: FluxMemAgent
    sessions: dict[str, LiveSession] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def open_tenant(name: str, config: dict[str, Any], embedder: Embedder | None = None) -> Tenant:
    """A tenant on the store the config names (also used alone by the stdio MCP server)."""
    if embedder is not None:
        config = {k: v for k, v in config.items() if k != "text_embedder"}
    memory = LightMemory.from_config(config, embedder=embedder)
    if not isinstance(memory.store, SQLiteStore):  # pragma: no cover - config edge
        raise StoreError("store: the server needs the SQLite store")
    return Tenant(name, memory, FluxMemAgent(memory.store.graph(), memory.embedder))


class TenantPool:
    """Opens each tenant's store once (``<data_dir>/tenants/<tenant>.db``) and keeps it."""

    def __init__(self, data_dir: str | Path, config: dict[str, Any] | None = None) -> None:
        single_threaded_blas()
        self.data_dir = Path(data_dir)
        (self.data_dir / "tenants").mkdir(parents=True, exist_ok=True)
        self._config = dict(config or {})
        self._tenants: dict[str, Tenant] = {}
        self._lock = threading.Lock()
        self._embedder: Embedder | None = None

    def get(self, tenant: str) -> Tenant:
        check_tenant(tenant)
        with self._lock:
            t = self._tenants.get(tenant)
            if t is None:
                path = self.data_dir / "tenants" / f"{tenant}.db"
                # One model for all tenants, one ledger each: usage never mixes.
                if self._embedder is None:
                    self._embedder = build_embedder(parse_config(self._config), Ledger())
                t = self._tenants[tenant] = open_tenant(
                    tenant,
                    {**self._config, "store": {"path": str(path)}},
                    self._embedder.with_ledger(Ledger()),
                )
            return t

    def close(self) -> None:
        with self._lock:
            for t in self._tenants.values():
                t.memory.close()
            self._tenants.clear()
