"""How :class:`~lightmem.memory.LightMemory` assembles its pipeline from settings and the
backend instances it was given (the offline defaults for what it was not)."""

from __future__ import annotations

from lightmem.config import Settings
from lightmem.embed.base import Embedder
from lightmem.llm.base import LLMClient
from lightmem.memory.params import ROLES, scorer
from lightmem.pipeline.compress import Compressor
from lightmem.pipeline.extract import MemoryManager, OfflineMemoryManager
from lightmem.pipeline.extract_llm import LLMMemoryManager
from lightmem.pipeline.ingest import IngestOptions, Ingestor
from lightmem.pipeline.provisional import ProvisionalEntries
from lightmem.store.base import MemoryStore

__all__ = ["ingestor", "llm_manager", "offline_manager"]


def offline_manager(compressor: Compressor, s: Settings) -> OfflineMemoryManager:
    """The default memory manager: one entry per turn (with neighbour context) per topic."""
    return OfflineMemoryManager(
        scorer(compressor, s),
        compressed_text=s.text_summary,
        roles=ROLES.get(s.messages_use),
        context_window=s.context_window,
        resolve_time=s.resolve_time,
    )


def llm_manager(llm: LLMClient, compressor: Compressor, s: Settings) -> LLMMemoryManager:
    """The LLM memory manager of an ``openai`` config: it extracts the turns of
    ``messages_use`` only, and its per-turn fallback is :func:`offline_manager` (so
    ``text_summary`` and ``messages_use`` hold for the entries it writes too)."""
    assert s.llm is not None
    return LLMMemoryManager(
        llm,
        scorer(compressor, s),
        batch_tokens=s.llm.batch_tokens,
        mode="event" if s.extraction_mode == "event" else "flat",
        fallback=offline_manager(compressor, s),
        resolve_time=s.resolve_time,
        roles=ROLES.get(s.messages_use),
    )


def ingestor(
    store: MemoryStore,
    embedder: Embedder,
    compressor: Compressor,
    manager: MemoryManager,
    s: Settings,
) -> Ingestor:
    """The ingestion pipeline, with provisional entries for turns still buffered (the
    offline per-turn entries, without neighbour context: the neighbours may not exist yet)."""
    turns = OfflineMemoryManager(
        scorer(compressor, s), compressed_text=s.text_summary, context_window=0
    )
    return Ingestor(
        store,
        embedder,
        compressor,
        manager,
        IngestOptions(
            topic_segment=s.topic_segment,
            precomp_topic_shared=s.precomp_topic_shared,
            segmenter=s.segmenter,
            sensory_buffer_tokens=s.sensory_buffer_tokens,
            short_term_tokens=s.short_term_tokens,
        ),
        ProvisionalEntries(store, embedder, turns, ROLES.get(s.messages_use)),
    )
