"""Storage backends. The store is the single source of truth; caches are rebuilt from it."""

from lightmem.store.base import BufferedMessage, MemoryStore, ScoredId
from lightmem.store.sqlite import SQLiteStore

__all__ = ["BufferedMessage", "MemoryStore", "SQLiteStore", "ScoredId"]
