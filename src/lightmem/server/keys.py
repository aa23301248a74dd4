"""API keys, kept hashed beside the tenants: in a SQLite file (``<data_dir>/keys.db``) or
a PostgreSQL schema, each run on the store's :class:`~lightmem.store.db.Database`."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightmem.errors import InvalidInputError, NotFoundError
from lightmem.store.db import Database, Migration
from lightmem.store.postgres_db import PostgresDatabase
from lightmem.store.sqlite_db import SQLiteDatabase, SQLiteFile

__all__ = [
    "KEYS_APP_ID",
    "KEYS_FILE",
    "SERVER_MIGRATIONS",
    "SERVER_SCHEMA",
    "KeyInfo",
    "KeyRegistry",
    "PostgresKeyRegistry",
    "SQLiteKeyRegistry",
    "check_tenant",
    "postgres_keys_db",
    "sqlite_keys_db",
]

_TENANT = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

_KEYS_TABLE = (
    "CREATE TABLE IF NOT EXISTS api_keys (prefix TEXT PRIMARY KEY, hash TEXT NOT NULL, "
    "tenant TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, revoked INTEGER NOT NULL)"
)
#: Where a PostgreSQL-backed server keeps its keys; each tenant has a schema of its own.
SERVER_SCHEMA = "lightmem_server"
#: The steps of the server schema (run by :class:`PostgresDatabase`).
SERVER_MIGRATIONS: tuple[Migration, ...] = (Migration("api_keys", _KEYS_TABLE),)

KEYS_APP_ID = 0x4C4D4B59  # "LMKY", written to PRAGMA application_id
#: A key file. Files written before it had a ``meta`` table hold only ``api_keys``: they
#: are adopted (the step is idempotent). FULL sync: a revocation must survive a power cut.
KEYS_FILE = SQLiteFile(
    KEYS_APP_ID,
    (
        Migration(
            "api_keys",
            ";\n".join(
                (
                    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
                    "name TEXT NOT NULL, applied_at REAL NOT NULL)",
                    _KEYS_TABLE,
                )
            ),
        ),
    ),
    setting="keys",
    label="keys: {path!r}",
    adopts="api_keys",
    synchronous="FULL",
)


def check_tenant(tenant: object) -> str:
    """``tenant`` if it is a valid tenant name, else an :class:`InvalidInputError`."""
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


def sqlite_keys_db(path: str | Path) -> SQLiteDatabase:
    """The key file at ``path``, created or migrated (see :data:`KEYS_FILE`)."""
    return SQLiteDatabase(path, kind=KEYS_FILE)


def postgres_keys_db(
    dsn: str, schema: str = SERVER_SCHEMA, *, timeout_s: float = 10.0
) -> PostgresDatabase:
    """The server schema ``schema`` of the PostgreSQL database at ``dsn``, created or
    migrated with :data:`SERVER_MIGRATIONS`."""
    return PostgresDatabase(
        dsn,
        schema,
        SERVER_MIGRATIONS,
        pool_size=4,
        connect_timeout_s=timeout_s,
        label=f"keys: {schema!r}",
    )


class KeyRegistry:
    """API keys on ``db``, a database holding the ``api_keys`` table (a key file, or a
    schema migrated with :data:`SERVER_MIGRATIONS`). Only a SHA-256 of each key is kept
    (keys are 256 random bits, so a slow hash adds nothing); the prefix identifies a key for
    revocation. Safe to share between threads, as its database is."""

    def __init__(self, db: Database) -> None:
        self.db = db

    # Before list(): a method named list hides the type in the annotations after it.
    def _query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The rows of a ``?``-SQL query, in one read."""
        with self.db.read() as s:
            return [tuple(r) for r in s.all(sql, params)]

    def create(self, tenant: str) -> str:
        """A new key for ``tenant``; the only time the key itself is visible."""
        check_tenant(tenant)
        prefix = secrets.token_hex(4)
        key = f"lm_{prefix}_{secrets.token_urlsafe(32)}"
        with self.db.transaction() as s:
            s.execute(
                "INSERT INTO api_keys VALUES (?, ?, ?, ?, 0)",
                (prefix, _hash(key), tenant, time.time()),
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
        with self.db.transaction() as s:
            changed = int(
                s.execute("UPDATE api_keys SET revoked = 1 WHERE prefix = ?", (prefix,)).rowcount
            )
        if changed == 0:
            raise NotFoundError(f"prefix: no key {prefix!r}")

    def close(self) -> None:
        self.db.close()


class SQLiteKeyRegistry(KeyRegistry):
    """Keys in the SQLite file ``path`` (``<data_dir>/keys.db``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        super().__init__(sqlite_keys_db(path))


class PostgresKeyRegistry(KeyRegistry):
    """Keys in the server schema of a PostgreSQL database (created and migrated here)."""

    def __init__(self, dsn: str, schema: str = SERVER_SCHEMA, *, timeout_s: float = 10.0) -> None:
        self.schema = schema
        super().__init__(postgres_keys_db(dsn, schema, timeout_s=timeout_s))


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
