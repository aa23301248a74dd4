"""Tenants and API keys. Each tenant's memory lives in its own store (a SQLite file, or a
PostgreSQL schema), so one tenant's key can never reach, count or even name another
tenant's items; keys are stored hashed, beside the tenants."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightmem.config import EmbedderBuilder, SharedEmbedders, build_compressor, parse_config
from lightmem.errors import ConfigError, InvalidInputError, NotFoundError, StoreError
from lightmem.fluxmem.agent import FluxMemAgent
from lightmem.ledger import Ledger
from lightmem.memory import LightMemory
from lightmem.pipeline.compress import Compressor
from lightmem.store.db import closed_error

__all__ = [
    "SERVER_MIGRATIONS",
    "SERVER_OWNED",
    "SERVER_SCHEMA",
    "KeyInfo",
    "KeyRegistry",
    "PostgresKeyRegistry",
    "SQLiteKeyRegistry",
    "Tenant",
    "TenantPool",
    "check_server_config",
    "check_tenant",
    "open_tenant",
    "single_threaded_blas",
    "tenant_schema",
]

#: Config sections the server fills in for each tenant (its store); a config naming one is
#: refused rather than silently replaced.
SERVER_OWNED = ("store", "embedding_retriever", "summary_retriever")
_TENANT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
_APP_ID = 0x4C4D4B59  # "LMKY"


def single_threaded_blas() -> None:
    """Servers answer many small queries on many threads: a multi-threaded BLAS then spends
    its time contending (measured: 79 vs 537 queries/s on 8 threads), so one thread each.
    It changes the whole process, so only the server entry points call it (``lightmem
    serve``/``mcp`` and :func:`lightmem.server.rest.app_from_env`), never a library object."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


def check_server_config(config: Mapping[str, Any]) -> None:
    """Refuse a server config naming a store: the server chooses each tenant's store, and
    replacing the user's silently would serve other files than the config names."""
    for key in SERVER_OWNED:
        if key in config:
            raise ConfigError(
                f"{key}: the server keeps each tenant's store under its data directory (or "
                "DSN); remove it from the server config"
            )


def check_tenant(tenant: object) -> str:
    if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant):
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


_KEYS_TABLE = (
    "CREATE TABLE IF NOT EXISTS api_keys (prefix TEXT PRIMARY KEY, hash TEXT NOT NULL, "
    "tenant TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, revoked INTEGER NOT NULL)"
)
#: Where a PostgreSQL-backed server keeps its keys; each tenant has a schema of its own.
SERVER_SCHEMA = "lightmem_server"
SERVER_MIGRATIONS: tuple[str, ...] = (_KEYS_TABLE,)


class KeyRegistry(ABC):
    """API keys: only a SHA-256 of each key is kept (keys are 256 random bits, so a slow
    hash adds nothing); the prefix identifies a key for revocation. SQL is written with
    ``?`` placeholders; each backend runs it."""

    @abstractmethod
    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...

    @abstractmethod
    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        """Run a statement in its own transaction; returns the affected row count."""

    @abstractmethod
    def close(self) -> None: ...

    def create(self, tenant: str) -> str:
        """A new key for ``tenant``; the only time the key itself is visible."""
        check_tenant(tenant)
        prefix = secrets.token_hex(4)
        key = f"lm_{prefix}_{secrets.token_urlsafe(32)}"
        self._execute(
            "INSERT INTO api_keys VALUES (?, ?, ?, ?, 0)", (prefix, _hash(key), tenant, time.time())
        )
        return key

    def tenant_for(self, key: str | None) -> str | None:
        """The tenant a valid, unrevoked key belongs to, else None."""
        if not key or not key.startswith("lm_") or key.count("_") < 2:
            return None
        prefix = key.split("_", 2)[1]
        rows = self._query("SELECT hash, tenant, revoked FROM api_keys WHERE prefix = ?", (prefix,))
        if not rows or rows[0][2] or not hmac.compare_digest(rows[0][0], _hash(key)):
            return None
        return str(rows[0][1])

    def list(self) -> list[KeyInfo]:
        rows = self._query(
            "SELECT prefix, tenant, created_at, revoked FROM api_keys ORDER BY created_at", ()
        )
        return [KeyInfo(r[0], r[1], r[2], bool(r[3])) for r in rows]

    def revoke(self, prefix: str) -> None:
        if self._execute("UPDATE api_keys SET revoked = 1 WHERE prefix = ?", (prefix,)) == 0:
            raise NotFoundError(f"prefix: no key {prefix!r}")


class SQLiteKeyRegistry(KeyRegistry):
    """Keys in ``<data_dir>/keys.db``."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._closed = False
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
            self._conn.execute(_KEYS_TABLE)
        self._conn.execute("PRAGMA journal_mode = WAL")

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._lock, self._driver_errors():
            return self._open().execute(sql, params).fetchall()

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        with self._lock, self._driver_errors():
            return self._open().execute(sql, params).rowcount

    def close(self) -> None:
        with self._lock, self._driver_errors():
            self._closed = True
            self._conn.close()

    def _open(self) -> sqlite3.Connection:
        # Checked here, not left to sqlite3: PostgreSQL says "closed" alike (closed_error).
        if self._closed:
            raise closed_error(f"keys: {self.path!r}")
        return self._conn

    @contextmanager
    def _driver_errors(self) -> Iterator[None]:
        """sqlite3 errors (a locked or read-only file, a full disk) as StoreError, as
        :class:`PostgresKeyRegistry` does for its driver."""
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreError(f"keys: {self.path!r}: {exc}") from exc


class PostgresKeyRegistry(KeyRegistry):
    """Keys in the server schema of a PostgreSQL database (created and migrated here)."""

    def __init__(self, dsn: str, schema: str = SERVER_SCHEMA, *, timeout_s: float = 10.0) -> None:
        from lightmem.store.postgres import apply_migrations, open_pool

        self.schema = schema
        apply_migrations(dsn, schema, SERVER_MIGRATIONS, timeout_s)
        self._pool = open_pool(dsn, 4, timeout_s, self._configure)

    def _configure(self, conn: Any) -> None:
        conn.execute(f"SET search_path TO {self.schema}")
        conn.commit()

    @contextmanager
    def _conn(self) -> Iterator[Any]:
        with self._driver_errors(), self._pool.connection() as conn, conn.transaction():
            yield conn

    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        with self._conn() as c:
            return list(c.execute(sql.replace("?", "%s"), params).fetchall())

    def _execute(self, sql: str, params: Sequence[Any]) -> int:
        with self._conn() as c:
            return int(c.execute(sql.replace("?", "%s"), params).rowcount)

    def close(self) -> None:
        with self._driver_errors():
            self._pool.close()

    @contextmanager
    def _driver_errors(self) -> Iterator[None]:
        """psycopg errors (an outage, a missing table, no permission) as StoreError, and a
        closed registry as :func:`~lightmem.store.db.closed_error`, as
        :class:`SQLiteKeyRegistry` does for its driver."""
        import psycopg
        from psycopg_pool import PoolClosed

        try:
            yield
        except PoolClosed as exc:  # an OperationalError, but no outage: close() was called
            raise closed_error(f"keys: {self.schema!r}") from exc
        except psycopg.OperationalError as exc:
            raise StoreError(f"keys: database unavailable ({exc})") from exc
        except psycopg.Error as exc:
            raise StoreError(f"keys: {self.schema!r}: {exc}") from exc


def tenant_schema(tenant: str, server_schema: str = SERVER_SCHEMA) -> str:
    """The PostgreSQL schema of a tenant of the server whose keys are in ``server_schema``:
    readable, and distinct for distinct tenants and servers (the hash tells ``a-b`` from
    ``a_b``; names fit PostgreSQL's 63-character limit)."""
    digest = hashlib.sha256(f"{server_schema}/{tenant}".encode()).hexdigest()[:10]
    return f"t_{tenant.replace('-', '_')[:44]}_{digest}"


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class Tenant:
    """One tenant's memory and FluxMem agent (its task sessions live in its store)."""

    name: str
    memory: LightMemory
    agent: FluxMemAgent


def open_tenant(
    name: str,
    config: dict[str, Any],
    embedders: EmbedderBuilder | None = None,
    compressor: Compressor | None = None,
) -> Tenant:
    """A tenant on the store the config names (also used alone by the stdio MCP server);
    ``embedders`` and ``compressor``, when given, share loaded models with other tenants
    (see :meth:`LightMemory.from_config`)."""
    memory = LightMemory.from_config(config, embedders=embedders, compressor=compressor)
    return Tenant(name, memory, FluxMemAgent.on_store(memory.store, memory.embedder))


class TenantPool:
    """Opens each tenant's store once and keeps it: a SQLite file per tenant under
    ``<data_dir>/tenants/``, or, given ``dsn``, a PostgreSQL schema per tenant
    (:func:`tenant_schema`) with the keys in ``server_schema``. Either way no tenant's key
    can reach another's rows. The pool chooses the stores, so a ``config`` naming one
    (:data:`SERVER_OWNED`) is a ``ConfigError``."""

    def __init__(
        self,
        data_dir: str | Path | None = None,
        config: dict[str, Any] | None = None,
        *,
        dsn: str | None = None,
        server_schema: str = SERVER_SCHEMA,
        tenant_pool_size: int = 4,
    ) -> None:
        if (data_dir is None) == (dsn is None):
            raise InvalidInputError("data_dir, dsn: give exactly one (SQLite files or PostgreSQL)")
        check_server_config(config or {})
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.dsn = dsn
        self.server_schema = server_schema
        if self.data_dir is not None:
            (self.data_dir / "tenants").mkdir(parents=True, exist_ok=True)
        self._config = dict(config or {})
        self._pool_size = tenant_pool_size
        self._tenants: dict[str, Tenant] = {}
        self._lock = threading.Lock()
        # One embedder per embedder setting and one pre-compressor (LLMLingua-2 is a model
        # too) for all tenants, one ledger each: usage never mixes. A tenant store that was
        # re-embedded opens with its own embedder; the config's is for the others.
        self._embedders = SharedEmbedders()
        # Built now: a missing package is a ConfigError at start, before any tenant file.
        self._embedders(parse_config(self._config), Ledger())
        self._compressor: Compressor | None = None

    def keys(self) -> KeyRegistry:
        """The key registry kept beside these tenants."""
        if self.dsn is not None:
            return PostgresKeyRegistry(self.dsn, self.server_schema)
        assert self.data_dir is not None
        return SQLiteKeyRegistry(self.data_dir / "keys.db")

    def _store_config(self, tenant: str) -> dict[str, Any]:
        if self.dsn is not None:
            return {
                "provider": "postgres",
                "dsn": self.dsn,
                "schema": tenant_schema(tenant, self.server_schema),
                "pool_size": self._pool_size,
            }
        assert self.data_dir is not None
        return {"path": str(self.data_dir / "tenants" / f"{tenant}.db")}

    def get(self, tenant: str) -> Tenant:
        check_tenant(tenant)
        with self._lock:
            t = self._tenants.get(tenant)
            if t is None:
                if self._compressor is None:
                    self._compressor = build_compressor(parse_config(self._config), Ledger())
                t = self._tenants[tenant] = open_tenant(
                    tenant,
                    {**self._config, "store": self._store_config(tenant)},
                    self._embedders,
                    self._compressor,  # bound to the tenant's ledger by from_config
                )
            return t

    def close(self) -> None:
        """Close every tenant, even after one fails; the first failure is raised at the end."""
        first: Exception | None = None
        with self._lock:
            for t in self._tenants.values():
                try:
                    t.memory.close()
                except Exception as exc:  # the others still close; this one is raised below
                    first = first or exc
            self._tenants.clear()
        if first is not None:
            raise first
