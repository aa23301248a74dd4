"""Tenants and API keys. Each tenant's memory lives in its own store (a SQLite file, or a
PostgreSQL schema), so one tenant's key can never reach, count or even name another
tenant's items; keys are stored hashed, beside the tenants (:mod:`lightmem.server.keys`,
re-exported here)."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightmem import validate
from lightmem.config import (
    MAX_STORE_MB,
    EmbedderBuilder,
    SharedEmbedders,
    build_compressor,
    parse_config,
)
from lightmem.errors import ConfigError, InvalidInputError
from lightmem.fluxmem.agent import FluxMemAgent
from lightmem.ledger import Ledger
from lightmem.memory import LightMemory
from lightmem.pipeline.compress import Compressor
from lightmem.server.keys import (
    SERVER_MIGRATIONS,
    SERVER_SCHEMA,
    KeyInfo,
    KeyRegistry,
    PostgresKeyRegistry,
    SQLiteKeyRegistry,
    check_tenant,
)

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


def tenant_schema(tenant: str, server_schema: str = SERVER_SCHEMA) -> str:
    """The PostgreSQL schema of a tenant of the server whose keys are in ``server_schema``:
    readable, and distinct for distinct tenants and servers (the hash tells ``a-b`` from
    ``a_b``; names fit PostgreSQL's 63-character limit)."""
    digest = hashlib.sha256(f"{server_schema}/{tenant}".encode()).hexdigest()[:10]
    return f"t_{tenant.replace('-', '_')[:44]}_{digest}"


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
        tenant_max_mb: int | None = None,
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
        if tenant_max_mb is not None:
            validate.positive_int("tenant_max_mb", tenant_max_mb, MAX_STORE_MB)
        #: each tenant's store limit (``store.max_mb``): past it, adding is refused (507)
        self.tenant_max_mb = tenant_max_mb
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
        limit = {} if self.tenant_max_mb is None else {"max_mb": self.tenant_max_mb}
        if self.dsn is not None:
            return {
                "provider": "postgres",
                "dsn": self.dsn,
                "schema": tenant_schema(tenant, self.server_schema),
                "pool_size": self._pool_size,
                **limit,
            }
        assert self.data_dir is not None
        return {"path": str(self.data_dir / "tenants" / f"{tenant}.db"), **limit}

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
