"""A store's size limit (``store.max_mb``), held by its entries and its graph alike."""

from __future__ import annotations

from lightmem import validate
from lightmem.errors import StoreFullError
from lightmem.store.db import Database

__all__ = ["SizeLimit"]

_MB = 1024 * 1024
#: The share of the limit from which a purge gives the freed space back (PostgreSQL's
#: VACUUM FULL rewrites the tables and their indexes: not worth it far below the limit).
RECLAIM_FROM = 0.9


class SizeLimit:
    """Checked before an operation adds what a caller gives (memories, knowledge, tasks):
    past ``max_bytes`` of stored data (:meth:`Database.size_bytes`) it is refused with
    :class:`StoreFullError`. An operation checked in time may pass the limit by what it
    stores (a few times its text with indexes and history; a request's text is bounded),
    and operations running at once each pass the check; reads, deletes, purges, the
    offline update and extraction of turns already buffered go on. None: no limit."""

    def __init__(self, db: Database, max_bytes: int | None = None) -> None:
        if max_bytes is not None:
            validate.positive_int("max_bytes", max_bytes, 1 << 60)
        self.db = db
        self.max_bytes = max_bytes

    def check(self) -> None:
        if self.max_bytes is None:
            return
        held = self.db.size_bytes()
        if held >= self.max_bytes:
            raise StoreFullError(
                f"store.max_mb: the store holds {held / _MB:.1f} MiB of its limit of "
                f"{self.max_bytes / _MB:.1f} MiB; purge memories to add more (a delete is "
                "restorable and keeps the text) or raise the limit"
            )

    def near(self) -> bool:
        """True when the store holds :data:`RECLAIM_FROM` of its limit or more."""
        return self.max_bytes is not None and self.db.size_bytes() >= RECLAIM_FROM * self.max_bytes
