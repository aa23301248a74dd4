"""lightmem: light, structured, self-healing long-term memory for LLM agents."""

from lightmem.embed import Embedder, OpenAIEmbedder, SentenceTransformerEmbedder, WordLlamaEmbedder
from lightmem.errors import (
    BackendError,
    ConfigError,
    InvalidInputError,
    LightMemError,
    NotFoundError,
    StoreError,
    StoreFullError,
)
from lightmem.ledger import Ledger, UsageRecord
from lightmem.llm import ChatReply, LLMClient, OpenAIChatClient, TransientLLMError
from lightmem.memory import AsyncLightMemory, LightMemory
from lightmem.pipeline.compress import EntropyCompressor, LLMLingua2Compressor, NoCompressor
from lightmem.pipeline.ingest import IngestResult
from lightmem.pipeline.update import UpdateReport
from lightmem.store import GraphStore, MemoryStore, PostgresStore, SQLiteStore
from lightmem.types import (
    Edge,
    Filters,
    HistoryEvent,
    MemoryEntry,
    Message,
    Node,
    RetrievalResult,
    RetrievalResults,
    Scope,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncLightMemory",
    "BackendError",
    "ChatReply",
    "ConfigError",
    "Edge",
    "Embedder",
    "EntropyCompressor",
    "Filters",
    "GraphStore",
    "HistoryEvent",
    "IngestResult",
    "InvalidInputError",
    "LLMClient",
    "LLMLingua2Compressor",
    "Ledger",
    "LightMemError",
    "LightMemory",
    "MemoryEntry",
    "MemoryStore",
    "Message",
    "NoCompressor",
    "Node",
    "NotFoundError",
    "OpenAIChatClient",
    "OpenAIEmbedder",
    "PostgresStore",
    "RetrievalResult",
    "RetrievalResults",
    "SQLiteStore",
    "Scope",
    "SentenceTransformerEmbedder",
    "StoreError",
    "StoreFullError",
    "TransientLLMError",
    "UpdateReport",
    "UsageRecord",
    "WordLlamaEmbedder",
]
