"""The database object a backend supplies: transactions, reads, dialect, error translation.

The memory logic (:mod:`lightmem.store.entries`) and the graph (:mod:`lightmem.store.graph_sql`)
are written once against :class:`Database`; SQL is written with ``?`` placeholders and
:class:`Session` adapts it to the backend's dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from lightmem.errors import StoreError
from lightmem.store.sql import Dialect

__all__ = ["Claimed", "Database", "Migration", "Session", "closed_error"]


def closed_error(what: str) -> StoreError:
    """The one error of every backend's store (and key registry) used after ``close()``."""
    return StoreError(f"{what}: closed; open it again to use it")


@dataclass(frozen=True, slots=True)
class Migration:
    """One named schema step; applied once, in order, in one transaction."""

    name: str
    sql: str

    def statements(self) -> list[str]:
        return [s for s in self.sql.split(";\n") if s.strip()]


class Claimed(Exception):
    """Another writer moved these messages on first: roll back, it did the work."""


class Session:
    """One connection inside a transaction or a read: ``?``-SQL in the backend's dialect."""

    def __init__(self, raw: Any, dialect: Dialect) -> None:
        self.raw = raw  # the driver's connection, for backend-specific statements
        self.dialect = dialect

    def sql(self, sql: str) -> str:
        p = self.dialect.placeholder
        return sql if p == "?" else sql.replace("?", p)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.raw.execute(self.sql(sql), params)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self.execute(sql, params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return list(self.execute(sql, params).fetchall())

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> int:
        """Run ``sql`` once per row (batched by the driver); the rows it changed in all."""
        if not rows:
            return 0
        cur = self.raw.cursor()
        try:
            cur.executemany(self.sql(sql), rows)
            return int(cur.rowcount)
        finally:
            cur.close()


class Database(Protocol):
    """A backend's connection (or pool) with its transactions, reads and dialect.

    Errors of the driver leave :meth:`transaction` and :meth:`read` as
    :class:`~lightmem.errors.StoreError` (bad values as
    :class:`~lightmem.errors.InvalidInputError`), the driver's message included; after
    :meth:`close`, every use is the :func:`closed_error` of the store."""

    dialect: Dialect
    #: Appended to a SELECT to lock its rows until the transaction ends ("" where a write
    #: transaction already holds the whole database).
    row_lock: str
    path: str
    read_only: bool

    @property
    def commits(self) -> int:
        """Transactions this object committed (caches compare it)."""

    def transaction(self) -> AbstractContextManager[Session]:
        """A write transaction: committed when the block ends, rolled back on an error."""

    def read(self) -> AbstractContextManager[Session]:
        """A consistent read snapshot."""

    def erasing(self) -> AbstractContextManager[None]:
        """Around a purge's transaction: deleted content must not stay in freed space."""

    def size_bytes(self) -> int:
        """The bytes the stored data holds on disk (tables, their indexes and large values):
        SQLite leaves its free pages out, PostgreSQL counts what its tables hold allocated."""

    def compact(self, tables: Sequence[str], reclaim: bool = False) -> bool:
        """After a purge's commit: rewrite ``tables`` so no copy of removed rows stays
        behind, and with ``reclaim`` give their space back so :meth:`size_bytes` goes
        down; False when that could not be completed now (another reader held the WAL, a
        lock was not had)."""

    def close(self) -> None: ...
