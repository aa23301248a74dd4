"""The PostgreSQL database object: a connection pool, transactions, migrations, errors."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lightmem.errors import InvalidInputError, StoreError
from lightmem.store.db import Migration, Session, closed_error
from lightmem.store.postgres_schema import FilledMigration
from lightmem.store.sql import POSTGRES

__all__ = ["PostgresDatabase", "apply_migrations", "open_pool", "redact"]

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
#: How long a purge's VACUUM FULL waits for each table's lock before it settles for a plain
#: VACUUM (requests queued behind its lock wait as long).
RECLAIM_LOCK_S = 5.0
log = logging.getLogger("lightmem.store")


class _LockTimeout(Exception):
    """A VACUUM did not get its lock within its timeout."""


class PostgresDatabase:
    """A :class:`~lightmem.store.db.Database` on one schema of a PostgreSQL server.

    Connections come from a pool and are checked before use, so a restarted server is
    reconnected on the next call; every block is one transaction. Errors begin with
    ``label`` (by default ``store`` and the redacted DSN and schema)."""

    dialect = POSTGRES
    row_lock = " FOR UPDATE"
    read_only = False

    def __init__(
        self,
        dsn: str,
        schema: str,
        migrations: Sequence[Migration | str],
        *,
        pool_size: int = 8,
        connect_timeout_s: float = 10.0,
        label: str | None = None,
    ) -> None:
        try:
            from pgvector.psycopg import register_vector
        except ImportError as exc:
            raise StoreError("the postgres store needs: pip install 'lightmem[postgres]'") from exc
        self.schema = schema
        self.path = f"postgres:{redact(dsn)}#{schema}"
        self.label = f"store {self.path}" if label is None else label
        self._register_vector = register_vector
        apply_migrations(dsn, schema, migrations, connect_timeout_s)
        self._pool = open_pool(dsn, pool_size, connect_timeout_s, self._configure)

    @property
    def commits(self) -> int:
        return 0  # nothing is cached in this process

    def _configure(self, conn: Any) -> None:
        conn.execute(f"SET search_path TO {self.schema}, public")
        self._register_vector(conn)
        conn.commit()

    @contextmanager
    def transaction(self) -> Iterator[Session]:
        import psycopg
        from psycopg_pool import PoolClosed

        try:
            with self._pool.connection() as conn, conn.transaction():
                yield Session(conn, POSTGRES)
        except PoolClosed as exc:  # an OperationalError, but no outage: close() was called
            raise closed_error(self.label) from exc
        except psycopg.DataError as exc:  # e.g. a NUL character, which PostgreSQL refuses
            raise InvalidInputError(f"value: PostgreSQL cannot store it ({exc})") from exc
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"value: text with a lone surrogate cannot be stored ({exc})"
            ) from exc
        except psycopg.OperationalError as exc:
            raise StoreError(
                f"{self.label}: database unavailable ({exc}); the operation was rolled back"
            ) from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self.label}: {exc}") from exc

    def read(self) -> Any:
        return self.transaction()

    # -- erasure (the PostgreSQL tail of lightmem.store.purge) ----------------------------
    @contextmanager
    def erasing(self) -> Iterator[None]:
        """Nothing to switch on: PostgreSQL frees rows by VACUUM (see :meth:`compact`)."""
        yield

    def compact(self, tables: Sequence[str], reclaim: bool = False) -> bool:
        """VACUUM the touched tables (with their TOAST and indexes) after the commit, so the
        removed rows' space is pruned and reused. ``reclaim`` (a store near its size limit):
        VACUUM FULL, which rewrites each table and its indexes (the HNSW one too) holding
        its lock meanwhile, so :meth:`size_bytes` goes down; a table whose lock is not had
        within :data:`RECLAIM_LOCK_S` (a long transaction elsewhere) gets the plain VACUUM
        instead and the answer is False. A VACUUM keeps the rows that a transaction begun
        before the purge's commit may still see (one with a write or a snapshot open, in any
        database of the server): it first waits up to :data:`RECLAIM_LOCK_S` for those to
        end, and the answer is False if some were still open. VACUUM cannot run in a
        transaction: one pooled connection is switched to autocommit for it."""
        if reclaim:
            try:
                return self.vacuum(tables, "VACUUM FULL", "purge committed", RECLAIM_LOCK_S)
            except _LockTimeout:
                log.warning("%s: VACUUM FULL waited too long for a lock; plain VACUUM", self.label)
        settled = self.vacuum(tables, "VACUUM", "purge committed", settle_s=RECLAIM_LOCK_S)
        return settled and not reclaim

    def size_bytes(self) -> int:
        """The size of the schema's tables with their indexes and TOAST, as allocated:
        deleted rows and the space a plain VACUUM freed inside them (reused by later rows)
        count until a VACUUM FULL."""
        with self.read() as s:
            return int(
                s.one(
                    "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = ? AND c.relkind = 'r'",
                    (self.schema,),
                )[0]
            )

    def vacuum(
        self,
        tables: Sequence[str],
        command: str,
        done: str,
        lock_timeout_s: float = 0.0,
        *,
        settle_s: float | None = None,
    ) -> bool:
        """Run ``command`` (``VACUUM`` with its options) on ``tables`` of this schema, outside
        a transaction (on one pooled connection switched to autocommit); a failure is a
        :class:`StoreError` saying what had been ``done`` already. ``lock_timeout_s`` (0:
        wait): a lock not had by then raises ``_LockTimeout``. First, up to ``settle_s``
        (default ``lock_timeout_s``) for the transactions open now to end (see
        :meth:`compact`); False when some had not."""
        import psycopg
        from psycopg_pool import PoolClosed

        if not tables:
            return True
        try:
            with self._pool.connection() as conn:
                conn.autocommit = True
                settled = _older_transactions_ended(
                    conn, lock_timeout_s if settle_s is None else settle_s
                )
                if lock_timeout_s:
                    conn.execute(f"SET lock_timeout = {int(lock_timeout_s * 1000)}")
                try:
                    for table in tables:
                        conn.execute(f"{command} {self.schema}.{table}")
                finally:
                    if lock_timeout_s and not conn.closed:
                        conn.execute("RESET lock_timeout")
                    conn.autocommit = False
        except PoolClosed as exc:
            raise closed_error(self.label) from exc
        except psycopg.errors.LockNotAvailable as exc:
            raise _LockTimeout from exc
        except psycopg.Error as exc:
            raise StoreError(f"{self.label}: {done}, {command} failed: {exc}") from exc
        return settled

    def close(self) -> None:
        try:
            self._pool.close()
        except Exception as exc:
            raise StoreError(f"cannot close {self.path}: {exc}") from exc

    def drop(self) -> None:
        """Delete this schema and everything in it (tests, benchmarks)."""
        with self.transaction() as s:
            s.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")


# Other clients' transactions that began before now: their xid or their snapshot's xmin is
# older than the next xid as of now (age() counts back from the next xid, so wrap-around is
# handled). Autovacuum and other VACUUMs do not hold rows back: client backends only.
_OLDER_TRANSACTIONS = (
    "SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
    "AND backend_type = 'client backend' "
    "AND greatest(age(backend_xid), age(backend_xmin)) > age(xid(%s::text::xid8))"
)


def _older_transactions_ended(conn: Any, timeout_s: float) -> bool:
    """Wait up to ``timeout_s`` until no transaction open now on the server is still open (in
    any database: one that has written holds every database's horizon back); whether none
    is."""
    mark = conn.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()[0]
    deadline = time.monotonic() + timeout_s
    while conn.execute(_OLDER_TRANSACTIONS, (mark,)).fetchone()[0]:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def apply_migrations(
    dsn: str, schema: str, migrations: Sequence[Migration | str], timeout: float = 10.0
) -> None:
    """Bring ``schema`` up to ``len(migrations)``: each missing step once, in order, in one
    transaction, one migrator at a time across processes; a newer schema is refused."""
    import psycopg

    if not _SCHEMA_NAME.match(schema):
        raise StoreError(f"store.schema: {schema!r} is not a plain lower-case identifier")
    try:
        conn = psycopg.connect(dsn, autocommit=False, connect_timeout=int(timeout))
    except psycopg.Error as exc:
        raise StoreError(f"store.dsn: cannot connect to {redact(dsn)} ({exc})") from exc
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (schema,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            conn.execute(f"SET LOCAL search_path TO {schema}, public")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, applied_at DOUBLE PRECISION NOT NULL)"
            )
            row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
            current = int(row[0] or 0) if row else 0
            if current > len(migrations):
                raise StoreError(
                    f"store: schema {schema!r} is at version {current}; this lightmem "
                    f"knows up to {len(migrations)}: upgrade lightmem"
                )
            for version in range(current + 1, len(migrations) + 1):
                step = migrations[version - 1]
                conn.execute(step.sql if isinstance(step, Migration) else step)
                if isinstance(step, FilledMigration):  # a step that also computes values
                    step.fill(conn)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (%s, %s)", (version, time.time())
                )
    except psycopg.Error as exc:
        raise StoreError(f"store: cannot create or migrate schema {schema!r}: {exc}") from exc
    finally:
        conn.close()


def open_pool(dsn: str, size: int, timeout: float, configure: Callable[[Any], None]) -> Any:
    """An open psycopg connection pool whose connections are checked before use (so a
    restarted server is reconnected on the next call)."""
    from psycopg_pool import ConnectionPool

    pool = ConnectionPool(
        dsn,
        min_size=1,
        max_size=size,
        kwargs={"autocommit": False, "connect_timeout": int(timeout)},
        configure=configure,
        check=ConnectionPool.check_connection,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=timeout)
    except Exception as exc:
        pool.close()
        raise StoreError(f"store.dsn: cannot connect to {redact(dsn)} ({exc})") from exc
    return pool


def redact(dsn: str) -> str:
    """The DSN with its password masked."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", dsn)
