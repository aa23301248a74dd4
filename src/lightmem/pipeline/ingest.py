"""Ingestion: persist messages, then move them through the sensory and short-term buffers."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from lightmem.embed.base import Embedder
from lightmem.errors import LightMemError
from lightmem.pipeline.compress import Compressor
from lightmem.pipeline.extract import MemoryManager, Segment
from lightmem.pipeline.provisional import (
    ProvisionalEntries,
    draft_vectors,
    replaced_by_extraction,
)
from lightmem.pipeline.segment import SegmenterConfig, segment
from lightmem.store.base import BufferedMessage, MemoryStore, Vector
from lightmem.text import estimate_tokens
from lightmem.types import Message, Scope

__all__ = ["IngestOptions", "IngestResult", "Ingestor"]


@dataclass(frozen=True, slots=True)
class IngestOptions:
    topic_segment: bool = True
    precomp_topic_shared: bool = False
    segmenter: SegmenterConfig = field(default_factory=SegmenterConfig)
    sensory_buffer_tokens: int = 512
    short_term_tokens: int = 1024


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What one ``add_memory`` call did. ``entries_provisional``: the provisional entries
    this call wrote for turns still buffered (searchable now; extraction replaces them)."""

    messages_added: int
    messages_buffered: int
    segments_created: int
    entries_created: tuple[str, ...]
    entries_provisional: tuple[str, ...] = ()
    #: Entries already stored from messages of this call (a retried add stores nothing new).
    entries_existing: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {
            "messages_added": self.messages_added,
            "messages_buffered": self.messages_buffered,
            "segments_created": self.segments_created,
            "entries_created": list(self.entries_created),
            "entries_provisional": list(self.entries_provisional),
            "entries_existing": list(self.entries_existing),
        }


class Ingestor:
    """Pre-compress -> persist -> segment (sensory buffer) -> extract (short-term buffer).

    Messages are written to the store before any model runs, so a failure later (or a
    crash) loses nothing: buffered messages are picked up by the next flush. Until then
    they are searchable through provisional entries (``provisional``; None: not at all).
    """

    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder,
        compressor: Compressor,
        manager: MemoryManager,
        options: IngestOptions,
        provisional: ProvisionalEntries | None = None,
    ) -> None:
        self._store = store
        self._embedder = embedder
        self._compressor = compressor
        self._manager = manager
        self._opt = options
        self._provisional = provisional

    def add(
        self,
        scope: Scope,
        messages: Sequence[Message],
        *,
        force_segment: bool,
        force_extract: bool,
    ) -> IngestResult:
        items = [(m, self._compressor.compress(m.content)) for m in messages]
        added = self._store.add_messages(scope, items)  # a retried message counts 0
        written: tuple[str, ...] = ()
        known: dict[int, Vector] = {}
        if not force_extract:  # a forced add extracts its turns now: nothing to bridge
            written, known = self._ensure_provisional(scope)
        try:
            n_seg, memo = self._segment_all(
                scope, force=force_segment or force_extract, known=known
            )
            created = self._extract_all(scope, force=force_extract, memo=memo)
        except LightMemError:
            if force_extract:  # the turns stay buffered (next flush): searchable meanwhile
                self._ensure_provisional(scope)
            raise
        # After a forced add, what is left is being extracted by another writer: no bridge.
        left = self._buffered(scope)
        live = set(replaced_by_extraction(scope, left))
        kept = tuple(i for i in written if i in live)
        return IngestResult(added, len(left), n_seg, created, kept)

    def _buffered(self, scope: Scope) -> list[BufferedMessage]:
        return self._store.buffered(scope, "pending") + self._store.buffered(scope, "segmented")

    def _ensure_provisional(self, scope: Scope) -> tuple[tuple[str, ...], dict[int, Vector]]:
        if self._provisional is None:
            return (), {}
        return self._provisional.ensure(scope, self._buffered(scope))

    def flush(self, scope: Scope) -> IngestResult:
        """Segment and extract everything still buffered in ``scope``."""
        n_seg, memo = self._segment_all(scope, force=True, known={})
        created = self._extract_all(scope, force=True, memo=memo)
        return IngestResult(0, 0, n_seg, created)

    # Another writer on the same scope may claim part of what this one read from a buffer;
    # the store then refuses the whole transition. Reading again and retrying picks up what
    # is left (the other writer finishes its part), so a forced add returns only once its
    # own messages have moved on. Each refusal means another writer progressed, so the loop
    # ends; the bound only guards against a pathological pile-up (leftovers stay buffered
    # for the next flush).
    def _segment_all(
        self, scope: Scope, *, force: bool, known: dict[int, Vector]
    ) -> tuple[int, dict[int, Vector]]:
        n_seg, memo = 0, {}
        for _ in range(_MAX_RACES):
            n, m, claimed = self._segment(scope, force=force, known=known)
            n_seg += n
            memo.update(m)
            if not claimed:
                break
        return n_seg, memo

    def _extract_all(
        self, scope: Scope, *, force: bool, memo: dict[int, Vector]
    ) -> tuple[str, ...]:
        created: tuple[str, ...] = ()
        for _ in range(_MAX_RACES):
            ids, claimed = self._extract(scope, force=force, memo=memo)
            created += ids
            if not claimed:
                break
        return created

    def _segment(
        self, scope: Scope, *, force: bool, known: dict[int, Vector]
    ) -> tuple[int, dict[int, Vector], bool]:
        """Segments made, their vectors by message seq, and whether another writer claimed
        some of the messages first (nothing was changed then). ``known``: vectors of
        ``Message.search_text`` already computed, by seq."""
        pending = self._store.buffered(scope, "pending")
        tokens = sum(estimate_tokens(b.message.content) for b in pending)
        if not pending or (not force and tokens < self._opt.sensory_buffer_tokens):
            return 0, {}, False
        shared = self._opt.precomp_topic_shared
        reuse = {} if shared else known
        todo = [b for b in pending if b.seq not in reuse]
        texts = [b.compressed if shared else b.message.search_text for b in todo]
        fresh = zip([b.seq for b in todo], self._embedder.embed(texts, op="segment"), strict=True)
        found = {**reuse, **dict(fresh)}
        vectors = np.stack([found[b.seq] for b in pending])
        if self._opt.topic_segment:
            groups = segment(vectors, [b.message.timestamp for b in pending], self._opt.segmenter)
        else:
            groups = [list(range(len(pending)))]
        if not force and len(groups) > 1:
            groups = groups[:-1]  # the last topic may continue in the next messages
        assignments = [(pending[i].seq, topic) for g in groups for topic in [_new_id()] for i in g]
        if not self._store.mark_segmented(assignments):
            return 0, {}, True
        memo = {} if shared else {pending[i].seq: vectors[i] for g in groups for i in g}
        return len(groups), memo, False

    def _extract(
        self, scope: Scope, *, force: bool, memo: dict[int, Vector]
    ) -> tuple[tuple[str, ...], bool]:
        """Entries created, and whether another writer claimed some messages first."""
        buffered = self._store.buffered(scope, "segmented")
        tokens = sum(estimate_tokens(b.message.content) for b in buffered)
        if not buffered or (not force and tokens < self._opt.short_term_tokens):
            return (), False
        missing = [b for b in buffered if b.seq not in memo]
        if missing:
            vecs = self._embedder.embed([b.message.search_text for b in missing], op="extract")
            memo = {**memo, **{b.seq: v for b, v in zip(missing, vecs, strict=True)}}
        by_topic: dict[str, list[BufferedMessage]] = {}
        for b in buffered:
            by_topic.setdefault(b.topic_id, []).append(b)
        segments = [
            Segment(topic, scope, msgs, np.stack([memo[b.seq] for b in msgs]))
            for topic, msgs in by_topic.items()
        ]
        drafts = self._manager.extract(segments, _new_id)
        vectors = draft_vectors(drafts, self._embedder, "extract")
        rows = [(d.entry, v) for d, v in zip(drafts, vectors, strict=True)]
        replaces = replaced_by_extraction(scope, buffered)
        if not self._store.commit_extraction(rows, [b.seq for b in buffered], replaces):
            return (), True  # its entries stand; ours are dropped unwritten
        return tuple(e.id for e, _ in rows), False


_MAX_RACES = 20


def _new_id() -> str:
    return uuid.uuid4().hex
