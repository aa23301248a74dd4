"""The key registries on the store's Database objects: key files written before the key
file had a ``meta`` table, foreign and unreadable files, the file's settings, a registry
on an injected database, and a PostgreSQL server schema made before named steps."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest

from lightmem.errors import NotFoundError, StoreError
from lightmem.server.keys import (
    KEYS_APP_ID,
    KEYS_FILE,
    KeyRegistry,
    PostgresKeyRegistry,
    SQLiteKeyRegistry,
    postgres_keys_db,
)
from lightmem.store.sqlite_db import SQLiteDatabase

OLD_KEY = "lm_0badc0de_an-old-key-of-acme"
OLD_REVOKED = "lm_5eed5eed_an-old-revoked-key"
#: The api_keys table exactly as the key registries created it before this module.
OLD_TABLE = (
    "CREATE TABLE IF NOT EXISTS api_keys (prefix TEXT PRIMARY KEY, hash TEXT NOT NULL, "
    "tenant TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, revoked INTEGER NOT NULL)"
)


def _old_rows() -> list[tuple[str, str, str, float, int]]:
    return [
        (key.split("_")[1], hashlib.sha256(key.encode()).hexdigest(), "acme", t, revoked)
        for key, t, revoked in ((OLD_KEY, 1.0, 0), (OLD_REVOKED, 2.0, 1))
    ]


def _old_key_file(path: Path) -> None:
    """A key file as the registry wrote it before it ran on SQLiteDatabase (no meta)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA application_id = {KEYS_APP_ID}")
    conn.execute(OLD_TABLE)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.executemany("INSERT INTO api_keys VALUES (?, ?, ?, ?, ?)", _old_rows())
    conn.close()


def test_a_key_file_written_before_the_meta_table_is_adopted(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    _old_key_file(path)
    keys = SQLiteKeyRegistry(path)
    assert keys.tenant_for(OLD_KEY) == "acme"
    assert keys.tenant_for(OLD_REVOKED) is None
    assert [(k.prefix, k.revoked) for k in keys.list()] == [("0badc0de", False), ("5eed5eed", True)]
    new = keys.create("beta")
    keys.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("1",)
    assert conn.execute("PRAGMA application_id").fetchone() == (KEYS_APP_ID,)
    conn.close()
    again = SQLiteKeyRegistry(path)  # now a versioned file: opened without migrating
    assert (again.tenant_for(OLD_KEY), again.tenant_for(new)) == ("acme", "beta")
    again.revoke("0badc0de")
    assert again.tenant_for(OLD_KEY) is None
    again.close()


def test_an_old_key_file_the_server_cannot_write_is_read_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only key file written before the meta table still gives its keys (it cannot
    be adopted, and needs not be to be read); a new key is refused as a read-only store's
    writes are."""
    from conftest import read_only_file

    path = tmp_path / "keys.db"
    _old_key_file(path)
    try:
        read_only_file(path, monkeypatch)
        keys = SQLiteKeyRegistry(path)
        try:
            assert keys.tenant_for(OLD_KEY) == "acme" and keys.tenant_for(OLD_REVOKED) is None
            with pytest.raises(StoreError, match="read-only"):
                keys.create("beta")
        finally:
            keys.close()
    finally:
        path.chmod(0o644)
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    conn.close()
    assert tables == {"api_keys"}  # untouched


def test_a_foreign_sqlite_file_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE api_keys (n INTEGER)")  # even with a table of that name
    conn.close()
    with pytest.raises(StoreError, match=r"^keys: .* of another application"):
        SQLiteKeyRegistry(path)
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT name FROM sqlite_master")] == ["api_keys"]
    assert conn.execute("PRAGMA application_id").fetchone() == (0,)
    conn.close()


def test_a_file_that_is_no_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    path.write_bytes(b"not a database at all\n" * 100)
    with pytest.raises(StoreError, match=r"^keys: .* is not a readable SQLite file"):
        SQLiteKeyRegistry(path)


def test_a_new_key_file_is_marked_in_wal_mode_and_synced_fully(tmp_path: Path) -> None:
    path = tmp_path / "keys.db"
    keys = SQLiteKeyRegistry(path)
    with keys.db.read() as s:
        assert s.one("PRAGMA synchronous")[0] == 2  # FULL: a revocation survives a power cut
    keys.close()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA application_id").fetchone() == (KEYS_APP_ID,)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


def test_the_registry_runs_on_an_injected_sqlite_database(tmp_path: Path) -> None:
    db = SQLiteDatabase(tmp_path / "keys.db", kind=KEYS_FILE)
    keys = KeyRegistry(db)
    key = keys.create("acme")
    with db.read() as s:  # the registry wrote through the database it was given
        assert s.one("SELECT tenant FROM api_keys") == ("acme",)
    assert keys.tenant_for(key) == "acme"
    keys.revoke(key.split("_")[1])
    assert keys.tenant_for(key) is None
    with pytest.raises(NotFoundError, match=r"^prefix: no key 'nosuch'"):
        keys.revoke("nosuch")
    keys.close()
    with pytest.raises(StoreError, match=r"^keys: .*: closed; open it again"), db.read():
        pass


def test_a_registry_shared_by_threads_answers_each_of_them(tmp_path: Path) -> None:
    keys = SQLiteKeyRegistry(tmp_path / "keys.db")
    failures: list[BaseException] = []
    start = threading.Barrier(8)

    def work(n: int) -> None:
        try:
            start.wait()
            for _ in range(25):
                key = keys.create(f"t{n}")
                if keys.tenant_for(key) != f"t{n}":
                    raise AssertionError(f"thread {n}: wrong tenant")
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(keys.list()) == 200
    keys.close()


def test_the_registry_runs_on_an_injected_postgres_database() -> None:
    from conftest import drop_schema, require_postgres

    schema = f"keys_{uuid.uuid4().hex[:12]}"
    db = postgres_keys_db(require_postgres(), schema)
    try:
        keys = KeyRegistry(db)
        key = keys.create("acme")
        with db.read() as s:
            assert s.one("SELECT tenant FROM api_keys") == ("acme",)
        assert keys.tenant_for(key) == "acme"
        with pytest.raises(NotFoundError, match=r"^prefix: no key"):
            keys.revoke("nosuch")
        keys.close()
        with pytest.raises(StoreError, match=rf"^keys: '{schema}': closed; open it again"):
            keys.list()
    finally:
        drop_schema(schema)


def test_a_server_schema_made_before_named_steps_opens_with_its_keys() -> None:
    """A server schema as the registry migrated it from a plain SQL string (version 1 in
    a ``schema_migrations`` table of its own) is at the current step, keys and all."""
    import psycopg

    from conftest import drop_schema, require_postgres

    dsn = require_postgres()
    schema = f"keys_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"SET search_path TO {schema}")
            conn.execute(
                "CREATE TABLE schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            conn.execute("INSERT INTO schema_migrations VALUES (1, %s)", (time.time(),))
            conn.execute(OLD_TABLE)
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO api_keys VALUES (%s, %s, %s, %s, %s)", _old_rows())
        keys = PostgresKeyRegistry(dsn, schema)
        assert (keys.tenant_for(OLD_KEY), keys.tenant_for(OLD_REVOKED)) == ("acme", None)
        keys.close()
        with psycopg.connect(dsn) as conn:
            versions = conn.execute(f"SELECT version FROM {schema}.schema_migrations").fetchall()
        assert versions == [(1,)]
    finally:
        drop_schema(schema)
