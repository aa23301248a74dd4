"""The embedded store: one SQLite file (WAL) holding everything lightmem knows."""

from __future__ import annotations

from pathlib import Path

from lightmem.store.ann_index import IndexPolicy
from lightmem.store.entries import SQLStore
from lightmem.store.graph_sql import SQLGraphStore
from lightmem.store.purge import PurgeReport
from lightmem.store.size_limit import SizeLimit
from lightmem.store.sqlite_db import SQLiteDatabase
from lightmem.store.sqlite_schema import APP_ID, SCHEMA_VERSION
from lightmem.store.sqlite_search import SQLiteEntryIndex, SQLiteNodeIndex
from lightmem.types import Scope

__all__ = ["APP_ID", "SCHEMA_VERSION", "SQLiteStore"]


class SQLiteStore(SQLStore):
    """A :class:`~lightmem.store.base.MemoryStore` in one SQLite file.

    Opening an existing store never deletes anything; a file that is not a lightmem store,
    or was written by a newer schema, is refused with :class:`StoreError`, and an older one
    is migrated (:mod:`lightmem.store.sqlite_schema`). A file this process cannot write
    (or ``read_only=True``) opens read-only: reads and searches work, writes raise
    :class:`StoreError`, and the usage ledger is kept in memory. One connection per
    instance, serialised by a lock, so an instance may be shared by threads; several
    processes may open the same file (WAL mode, busy timeout).

    Searches run on in-memory columns kept in step with the file; a large store searches
    approximately (``index_policy``, :class:`~lightmem.store.ann_index.IndexPolicy`) and
    saves its search index beside the file as ``<path>.index``, derived data that is
    checked against the file when read and rebuilt when it does not match.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        busy_timeout_s: float = 30.0,
        read_only: bool = False,
        index_policy: IndexPolicy | None = None,
        max_bytes: int | None = None,
    ) -> None:
        db = SQLiteDatabase(path, busy_timeout_s=busy_timeout_s, read_only=read_only)
        self.entry_index = SQLiteEntryIndex(db, index_policy)
        self._closed = False
        limit = SizeLimit(db, max_bytes)
        graph = SQLGraphStore(db, SQLiteNodeIndex(db), limit)
        super().__init__(db, self.entry_index, graph, limit)

    def close(self) -> None:
        if self._closed:  # a second close (the store and its owner both closing it)
            return
        self._closed = True
        try:
            self.entry_index.close()
        finally:
            super().close()

    def purge(self, scope: Scope, entry_id: str | None = None) -> PurgeReport:
        """As :meth:`SQLStore.purge`; the saved search index is rewritten (or removed)
        too, so no copy of a purged entry's vector or words stays beside the file."""
        report = super().purge(scope, entry_id)
        self.entry_index.after_purge()
        return report
