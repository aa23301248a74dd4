"""Both storage backends fail alike: a store or key registry used after ``close()`` is a
StoreError saying it is closed (not "database unavailable"), and every driver error of a
key registry is a StoreError. PostgreSQL cases run where LIGHTMEM_TEST_PG_DSN is set."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lightmem import LightMemory, StoreError
from lightmem.server.tenancy import KeyRegistry, PostgresKeyRegistry, SQLiteKeyRegistry

CLOSED = r"closed; open it again"


def test_a_closed_memory_says_it_is_closed_on_either_backend(
    store_config: dict[str, Any],
) -> None:
    mem = LightMemory.from_config({"store": store_config})
    mem.add_memory([{"id": "t1", "content": "I like green tea."}], force_extract=True)
    mem.close()
    for use in (
        lambda: mem.retrieve("tea"),
        lambda: mem.add_memory([{"id": "t2", "content": "And oolong."}], force_extract=True),
    ):
        with pytest.raises(StoreError, match=CLOSED) as caught:
            use()
        assert "unavailable" not in str(caught.value)


@pytest.fixture(params=["sqlite", "postgres"])
def registry(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KeyRegistry]:
    """A key registry of each backend, with a key for tenant "acme"."""
    if request.param == "sqlite":
        keys: KeyRegistry = SQLiteKeyRegistry(tmp_path / "keys.db")
        yield keys
        keys.close()
        return
    from conftest import drop_schema, require_postgres

    schema = f"keys_{uuid.uuid4().hex[:12]}"
    keys = PostgresKeyRegistry(require_postgres(), schema)
    try:
        yield keys
    finally:
        keys.close()
        drop_schema(schema)


def _drop_keys_table(keys: KeyRegistry) -> None:
    """Remove the registry's table behind its back (a driver error on the next call)."""
    if isinstance(keys, SQLiteKeyRegistry):
        with sqlite3.connect(keys.path) as conn:
            conn.execute("DROP TABLE api_keys")
        return
    import psycopg

    from conftest import PG_DSN

    assert isinstance(keys, PostgresKeyRegistry)
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {keys.schema}.api_keys")


def test_a_closed_key_registry_says_it_is_closed(registry: KeyRegistry) -> None:
    key = registry.create("acme")
    assert registry.tenant_for(key) == "acme"
    registry.close()
    with pytest.raises(StoreError, match=CLOSED) as caught:
        registry.tenant_for(key)
    assert "unavailable" not in str(caught.value)
    with pytest.raises(StoreError, match=CLOSED):
        registry.create("acme")
    registry.close()  # a second close is harmless


def test_any_driver_error_of_a_key_registry_is_a_store_error(registry: KeyRegistry) -> None:
    """A missing table is no outage (PostgreSQL reports it as a ProgrammingError): it is a
    StoreError naming the registry and the driver's message, on both backends."""
    registry.create("acme")
    _drop_keys_table(registry)
    with pytest.raises(StoreError, match=r"keys: .*api_keys"):
        registry.list()
