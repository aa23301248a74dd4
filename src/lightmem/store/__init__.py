"""Storage backends. The store is the single source of truth; caches are rebuilt from it."""

from lightmem.store.base import (
    Bookkeeping,
    BufferedMessage,
    EntrySearch,
    EntryStore,
    MemoryStore,
    MessageBuffer,
    ScoredId,
)
from lightmem.store.graph import GraphStore
from lightmem.store.postgres import PostgresStore
from lightmem.store.sqlite import SQLiteStore

__all__ = [
    "Bookkeeping",
    "BufferedMessage",
    "EntrySearch",
    "EntryStore",
    "GraphStore",
    "MemoryStore",
    "MessageBuffer",
    "PostgresStore",
    "SQLiteStore",
    "ScoredId",
]
