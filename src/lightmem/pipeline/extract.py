"""Memory managers: turn topic segments of the short-term buffer into memory entries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from lightmem.lang import CJK_FUNCTION_WORDS, CJK_QUESTION_WORDS
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.store.base import BufferedMessage, Vector
from lightmem.text import STOPWORDS, words
from lightmem.timeparse import format_date
from lightmem.timeresolve import resolve
from lightmem.timespan import TimeSpan
from lightmem.types import MemoryEntry, Scope

__all__ = [
    "Draft",
    "IdFactory",
    "MemoryManager",
    "OfflineMemoryManager",
    "Segment",
    "retimed",
    "topic_summary",
]


@dataclass(frozen=True, slots=True)
class Segment:
    """One topic segment: its messages (in order) and their vectors (rows aligned)."""

    topic_id: str
    scope: Scope
    messages: Sequence[BufferedMessage]
    vectors: Vector


@dataclass(frozen=True, slots=True)
class Draft:
    """An entry to store; ``vector`` None means "embed ``entry.search_text``"."""

    entry: MemoryEntry
    vector: Vector | None


class MemoryManager(Protocol):
    """Extracts memory entries from segments (offline rules now, an LLM in ``llm/``)."""

    name: str

    def extract(self, segments: Sequence[Segment], new_id: IdFactory) -> list[Draft]: ...


class IdFactory(Protocol):
    def __call__(self) -> str: ...


class OfflineMemoryManager:
    """Extraction with no generative model.

    Each turn becomes one attributed entry: its pre-compressed text for prompts, its full
    text for search, its speaker, time and source id. The ``context_window`` turns on each
    side (within the topic) are indexed with it as context, so an answer is found by the
    words of its question ("What did you paint?" -> "A sunrise.") and vice versa. Each
    segment also gets a summary entry (time, speakers, its most informative words) whose
    vector is the segment centroid, which is what hierarchical retrieval ranks first.

    With ``resolve_time`` (the default) the first time expression of a turn ("yesterday",
    "last Saturday", "in 2022") is resolved against the turn's time by
    :func:`lightmem.timeresolve.resolve` and kept as the entry's ``event_time``; the text
    stays as it was said.
    """

    name = "offline"

    def __init__(
        self,
        keyword_scorer: EntropyCompressor,
        *,
        summary_keywords: int = 12,
        compressed_text: bool = True,
        roles: frozenset[str] | None = None,
        context_window: int = 1,
        resolve_time: bool = True,
    ) -> None:
        self._scorer = keyword_scorer
        self._k = summary_keywords
        self._compressed = compressed_text
        self._roles = roles
        self._window = context_window
        self._resolve_time = resolve_time

    def extract(self, segments: Sequence[Segment], new_id: IdFactory) -> list[Draft]:
        now = datetime.now(UTC)
        drafts: list[Draft] = []
        for seg in segments:
            msgs = [bm.message for bm in seg.messages]
            for i, (bm, vec) in enumerate(zip(seg.messages, seg.vectors, strict=True)):
                m = bm.message
                if self._roles is not None and m.role not in self._roles:
                    continue
                lo, hi = max(0, i - self._window), min(len(msgs), i + self._window + 1)
                context = "\n".join(n.content for n in msgs[lo:hi] if n is not m)
                drafts.append(
                    Draft(
                        MemoryEntry(
                            id=new_id(),
                            text=bm.compressed if self._compressed else m.content,
                            original_text=m.content,
                            scope=seg.scope,
                            timestamp=m.timestamp,
                            speaker_id=m.speaker_id or m.role,
                            speaker_name=m.speaker_name,
                            topic_id=seg.topic_id,
                            source_ids=(m.id,),
                            context=context,
                            created_at=now,
                            updated_at=now,
                            metadata={**dict(m.metadata), "role": m.role},
                            event_time=resolve(m.content, m.timestamp)
                            if self._resolve_time
                            else None,
                        ),
                        None if context else vec,
                    )
                )
            drafts.append(topic_summary(seg, self._scorer, self._k, new_id(), now))
        return drafts


def topic_summary(
    seg: Segment, scorer: EntropyCompressor, keywords: int, entry_id: str, now: datetime
) -> Draft:
    """A model-free summary entry for one topic: time, speakers and its most informative
    words; its vector is the centroid of the topic's turns."""
    msgs = [bm.message for bm in seg.messages]
    speakers = list(dict.fromkeys(m.speaker for m in msgs))
    counts: Counter[str] = Counter()
    for m in msgs:
        counts.update(w for w in (w.lower() for w in words(m.content)) if not _function_word(w))
    ranked = sorted(counts, key=lambda w: -(scorer.surprisal(w) * (1 + counts[w])))
    first = next((m.timestamp for m in msgs if m.timestamp), None)
    text = f"{' & '.join(speakers)} ({format_date(first) or 'undated'}): " + ", ".join(
        ranked[:keywords]
    )
    centroid = seg.vectors.mean(axis=0).astype(np.float32)
    norm = float(np.linalg.norm(centroid))
    if norm > 0:
        centroid /= norm
    return Draft(
        MemoryEntry(
            id=entry_id,
            kind="summary",
            text=text,
            original_text="\n".join(m.search_text for m in msgs),
            scope=seg.scope,
            timestamp=first,
            topic_id=seg.topic_id,
            source_ids=tuple(m.id for m in msgs),
            created_at=now,
            updated_at=now,
        ),
        centroid,
    )


def _function_word(w: str) -> bool:
    """Words no summary should list: English stopwords, CJK particles and question words
    (a Chinese topic's keywords are its segmented words, see :mod:`lightmem.lang`)."""
    return w in STOPWORDS or w in CJK_FUNCTION_WORDS or w in CJK_QUESTION_WORDS


def retimed(entry: MemoryEntry, text: str, resolve_time: bool) -> TimeSpan | None:
    """The resolved time of ``entry`` once its text becomes ``text`` (a manual edit): the
    time the new text names, against the entry's time, else the one it had."""
    if not resolve_time:
        return entry.event_time
    return resolve(text, entry.timestamp) or entry.event_time
