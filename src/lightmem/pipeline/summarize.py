"""Cross-event summaries over time windows (StructMem), stored for hierarchical retrieval."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from lightmem.embed.base import Embedder
from lightmem.llm.base import LLMClient
from lightmem.llm.packing import cut_reported, pack
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.prompts import summarize as prompt
from lightmem.pipeline.prompts import summarize_schema
from lightmem.store.base import MemoryStore
from lightmem.text import STOPWORDS, words
from lightmem.timeparse import format_date
from lightmem.types import WINDOW_SUMMARY, Filters, MemoryEntry, Scope

__all__ = [
    "KeywordSummarizer",
    "LLMSummarizer",
    "RetrievalScope",
    "Summarizer",
    "SummaryReport",
    "summarize_windows",
]

RetrievalScope = Literal["global", "historical"]


class Summarizer(Protocol):
    """Writes a window's summary; ``name`` and ``prompt_version`` ("" for a model-free
    one) are recorded in each summary's metadata."""

    name: str
    prompt_version: str

    def summarize(self, entries: Sequence[MemoryEntry], previous: str) -> str: ...


class KeywordSummarizer:
    """Model-free: speakers, date range and the window's most informative words."""

    name = "offline"
    prompt_version = ""

    def __init__(self, scorer: EntropyCompressor, keywords: int = 20) -> None:
        self._scorer = scorer
        self._k = keywords

    def summarize(self, entries: Sequence[MemoryEntry], previous: str) -> str:
        counts: Counter[str] = Counter()
        for e in entries:
            counts.update(w.lower() for w in words(e.text) if w.lower() not in STOPWORDS)
        ranked = sorted(counts, key=lambda w: -(self._scorer.surprisal(w) * (1 + counts[w])))
        speakers = list(dict.fromkeys(e.speaker for e in entries if e.speaker))
        who = " & ".join(speakers) or "memories"
        return f"{who}, {len(entries)} memories: " + ", ".join(ranked[: self._k])


class LLMSummarizer:
    """Summaries by an LLM, with a bounded schema. A window too long for the model's
    ``context_tokens`` is summarised in consecutive parts, each seeing the summary so far
    (texts too long for any request are cut in the prompt)."""

    name = "llm"
    prompt_version = prompt.VERSION

    def __init__(self, client: LLMClient) -> None:
        self.client = client

    def summarize(self, entries: Sequence[MemoryEntry], previous: str) -> str:
        output = summarize_schema.output(self.client.answer_limit())
        # the summary so far is at most the schema's length, so leave room for it
        room = "x" * int(output.schema["properties"]["summary"]["maxLength"])

        def fits(group: Sequence[MemoryEntry], prev: str = room) -> bool:
            return self.client.fits(prompt.build(group, prev), output)

        texts = cut_reported(
            self.client,
            "summarize",
            [e.text for e in entries],
            lambda t: all(fits([replace(e, text=x)]) for e, x in zip(entries, t, strict=True)),
        )
        short = [replace(e, text=t) for e, t in zip(entries, texts, strict=True)]
        summary = previous
        for group in pack(short, fits):
            summary = self.client.complete_json(
                prompt.build(group, summary), prompt.parse, op="summarize", output=output
            )
        return summary


@dataclass(frozen=True, slots=True)
class SummaryReport:
    windows: int
    created: tuple[str, ...]
    updated: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "windows": self.windows,
            "created": list(self.created),
            "updated": list(self.updated),
        }


def summarize_windows(
    store: MemoryStore,
    embedder: Embedder,
    summarizer: Summarizer,
    scope: Scope,
    window: timedelta,
    retrieval_scope: RetrievalScope,
    page: int = 10_000,
) -> SummaryReport:
    """Summarise the scope's dated facts and events per ``window`` (aligned to the epoch).

    ``global``: each window is summarised on its own. ``historical``: each window's summary
    also sees the previous window's, so summaries carry how things developed. Summarising a
    window again updates its summary (kept in the history) instead of adding another.
    Summaries are per exact scope: a ``scope`` covering several users (or runs) gets one
    set of summaries for each, stored in it, never one mixing them. Every dated entry is
    read, ``page`` at a time.
    """
    by_scope: dict[Scope, dict[str, MemoryEntry]] = {}
    # Paged by key, so a concurrent delete skips no entry; keyed by id, as an entry
    # rewritten meanwhile may come twice (the later version wins).
    for e in store.iter_entries(scope, Filters(kinds=("entry", "event")), page):
        if e.timestamp is not None:
            by_scope.setdefault(e.scope, {})[e.id] = e
    created: list[str] = []
    updated: list[str] = []
    windows = 0
    for own, entries in by_scope.items():
        windows += _summarize_scope(
            store,
            embedder,
            summarizer,
            own,
            list(entries.values()),
            window,
            retrieval_scope,
            created,
            updated,
        )
    return SummaryReport(windows, tuple(created), tuple(updated))


def _summarize_scope(
    store: MemoryStore,
    embedder: Embedder,
    summarizer: Summarizer,
    scope: Scope,
    entries: Sequence[MemoryEntry],
    window: timedelta,
    retrieval_scope: RetrievalScope,
    created: list[str],
    updated: list[str],
) -> int:
    """Summarise one exact scope's entries; returns its number of windows."""
    buckets: dict[int, list[MemoryEntry]] = {}
    width = window.total_seconds()
    for e in entries:
        assert e.timestamp is not None
        buckets.setdefault(int(e.timestamp.timestamp() // width), []).append(e)
    previous = ""
    for key in sorted(buckets):
        members = buckets[key]
        start = _window_start(key * width)
        text = summarizer.summarize(members, previous if retrieval_scope == "historical" else "")
        previous = text
        entry = _window_entry(scope, members, start, window, text, retrieval_scope, summarizer)
        vec = embedder.embed([entry.search_text], op="summarize")[0]
        existing = store.get_entry(entry.id, scope)
        if existing is None:
            store.commit_extraction([(entry, vec)], [])
            created.append(entry.id)
        elif existing.text != entry.text or existing.source_ids != entry.source_ids:
            store.update_entry(replace(entry, created_at=existing.created_at), vec, "re-summarised")
            updated.append(entry.id)
    return len(buckets)


_FIRST = datetime.min.replace(tzinfo=UTC)
_LAST = datetime.max.replace(tzinfo=UTC)


def _window_start(epoch_seconds: float) -> datetime:
    """A window's start; one that would begin before year 1 begins at the calendar's start."""
    try:
        return datetime.fromtimestamp(epoch_seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return _FIRST


def _window_entry(
    scope: Scope,
    members: Sequence[MemoryEntry],
    start: datetime,
    window: timedelta,
    text: str,
    retrieval_scope: RetrievalScope,
    summarizer: Summarizer,
) -> MemoryEntry:
    # A window reaching past the calendar's last instant ends there (an entry dated
    # 9999-12-31 must not make every summary fail with OverflowError).
    end = start + window if window <= _LAST - start else _LAST
    # A stable id per (scope, window, mode), so re-summarising updates in place.
    key = f"{scope.label()}|{start.isoformat()}|{window.total_seconds()}|{retrieval_scope}"
    now = datetime.now(UTC)
    return MemoryEntry(
        id="win-" + hashlib.sha256(key.encode()).hexdigest()[:24],
        kind="summary",
        text=f"{format_date(start)} to {format_date(end - timedelta(seconds=1))}: {text}",
        original_text=text,
        scope=scope,
        timestamp=start,
        topic_id=f"window:{start.isoformat()}",
        source_ids=tuple(dict.fromkeys(s for e in members for s in e.source_ids)),
        context="\n".join(e.text for e in members),
        created_at=now,
        updated_at=now,
        metadata={
            "summary_of": WINDOW_SUMMARY,
            "window_start": start.isoformat(),
            "window_end": end.isoformat(),
            "retrieval_scope": retrieval_scope,
            "members": [e.id for e in members],
            "summarizer": summarizer.name,
            **({"prompt": summarizer.prompt_version} if summarizer.prompt_version else {}),
        },
    )
