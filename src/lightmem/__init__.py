"""lightmem: light, structured, self-healing long-term memory for LLM agents."""

from lightmem.embed import Embedder, OpenAIEmbedder, SentenceTransformerEmbedder, WordLlamaEmbedder
from lightmem.errors import (
    BackendError,
    ConfigError,
    InvalidInputError,
    LightMemError,
    NotFoundError,
    StoreError,
)
from lightmem.ledger import Ledger, UsageRecord
from lightmem.memory import LightMemory
from lightmem.pipeline.compress import EntropyCompressor, LLMLingua2Compressor, NoCompressor
from lightmem.pipeline.ingest import IngestResult
from lightmem.pipeline.update import UpdateReport
from lightmem.store import MemoryStore, SQLiteStore
from lightmem.types import HistoryEvent, MemoryEntry, Message, RetrievalResult, Scope

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "ConfigError",
    "Embedder",
    "EntropyCompressor",
    "HistoryEvent",
    "IngestResult",
    "InvalidInputError",
    "LLMLingua2Compressor",
    "Ledger",
    "LightMemError",
    "LightMemory",
    "MemoryEntry",
    "MemoryStore",
    "Message",
    "NoCompressor",
    "NotFoundError",
    "OpenAIEmbedder",
    "RetrievalResult",
    "SQLiteStore",
    "Scope",
    "SentenceTransformerEmbedder",
    "StoreError",
    "UpdateReport",
    "UsageRecord",
    "WordLlamaEmbedder",
]
