"""Buffered turns searchable at once: provisional entries written at add time.

Why this design (and not extraction on read, or on a timer): a provisional entry is an
ordinary row of the entries table, so every way of reading (retrieve in every mode, list,
get, REST, MCP, the viewer, other processes and workers sharing the store, both backends)
finds a turn on the very next call, with no model call and no extra work per read.
Extraction keeps its batching (the LLM sees whole topic segments, ``batch_tokens`` at a
time) and, when it commits, removes the provisional entries of the turns it extracted in
the same transaction (see :mod:`lightmem.store.provisional`).

A provisional entry is exactly the offline manager's per-turn entry (compressed text for
prompts, full text for search, speaker, time, source id) without neighbouring context or
topic, marked ``metadata.extractor == "provisional"`` and with an id starting ``p-``.

Crashes: the turns are persisted first; their provisional entries follow in a second
transaction. A process killed between the two leaves turns that are buffered but not yet
searchable; the next add in their scope writes the missing provisional entries (every add
checks the whole buffer of its scope), and the next flush extracts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lightmem.embed.base import Embedder
from lightmem.pipeline.extract import Draft, OfflineMemoryManager, Segment
from lightmem.store.base import BufferedMessage, MemoryStore, Vector
from lightmem.store.provisional import is_provisional, provisional_id
from lightmem.types import Filters, MemoryEntry, Scope

__all__ = ["ProvisionalEntries", "draft_vectors", "extracted_vectors", "replaced_by_extraction"]


class ProvisionalEntries:
    """Writes the provisional entries of a scope's buffered turns (those still missing)."""

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        manager: OfflineMemoryManager,
        roles: frozenset[str] | None,
    ) -> None:
        """``manager`` builds the per-turn entries (without neighbour context); ``roles``:
        the roles extraction reads (``messages_use``), None for all."""
        self._store = store
        self._embedder = embedder
        self._manager = manager
        self._roles = roles

    def ensure(
        self, scope: Scope, buffered: Sequence[BufferedMessage]
    ) -> tuple[tuple[str, ...], dict[int, Vector]]:
        """Write the missing provisional entries of ``buffered`` (messages of ``scope``);
        returns the ids written and the turns' vectors by message seq (the embedding of
        ``Message.search_text``, which segmentation can reuse)."""
        wanted = [b for b in buffered if self._roles is None or b.message.role in self._roles]
        ids = {b.seq: provisional_id(scope, b.message.id) for b in wanted}
        have = self._store.get_entries(list(ids.values()))
        missing = [b for b in wanted if ids[b.seq] not in have]
        if not missing:
            return (), {}
        vectors = self._embedder.embed([b.message.search_text for b in missing], op="provisional")
        seg = Segment("", scope, missing, vectors)
        seq_of = {b.message.id: b.seq for b in missing}
        rows: list[tuple[MemoryEntry, Vector]] = []
        seqs: list[int] = []
        drafts = [d for d in self._manager.extract([seg], _unused_id) if d.entry.kind == "entry"]
        for d, vec in zip(
            drafts, draft_vectors(drafts, self._embedder, "provisional"), strict=True
        ):
            seq = seq_of[d.entry.source_ids[0]]
            metadata = {**dict(d.entry.metadata), "extractor": "provisional"}
            rows.append((replace(d.entry, id=ids[seq], metadata=metadata), vec))
            seqs.append(seq)
        written = self._store.commit_provisional(rows, seqs)
        return written, {b.seq: v for b, v in zip(missing, vectors, strict=True)}


def replaced_by_extraction(scope: Scope, extracted: Sequence[BufferedMessage]) -> list[str]:
    """The provisional entry ids an extraction of ``extracted`` removes."""
    return [provisional_id(scope, b.message.id) for b in extracted]


def draft_vectors(drafts: Sequence[Draft], embedder: Embedder, op: str) -> list[Vector]:
    """Each draft's vector: its own, or the embedding of its search text (one call)."""
    fresh = iter(embedder.embed([d.entry.search_text for d in drafts if d.vector is None], op=op))
    return [d.vector if d.vector is not None else next(fresh) for d in drafts]


def _unused_id() -> str:
    return ""  # every provisional draft gets its derived id instead


def extracted_vectors(store: MemoryStore, scope: Scope) -> tuple[list[str], Vector, list[str]]:
    """Ids, vectors and scope keys of the scope's facts, provisional entries left out (the
    offline update compares extracted entries; a provisional one is replaced anyway)."""
    ids, matrix, groups = store.vectors(scope, Filters(kinds=("entry",)))
    keep = [i for i, eid in enumerate(ids) if not is_provisional(eid)]
    if len(keep) == len(ids):
        return ids, matrix, groups
    return [ids[i] for i in keep], matrix[keep], [groups[i] for i in keep]
