"""Shared vocabulary: messages, scopes, memory entries, retrieval results and the FluxMem
graph's nodes and edges (a leaf module: the store and FluxMem both import it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from lightmem.errors import StoreError
from lightmem.timespan import TimeSpan, span_from_dict, span_to_dict

__all__ = [
    "WINDOW_SUMMARY",
    "Edge",
    "EdgeKind",
    "EntryKind",
    "Filters",
    "HistoryEvent",
    "MemoryEntry",
    "Message",
    "Node",
    "NodeKind",
    "RetrievalResult",
    "RetrievalResults",
    "RetrieveMode",
    "Scope",
    "entry_search_text",
]

EntryKind = Literal["entry", "summary", "event"]
RetrieveMode = Literal["embedding", "context", "hybrid", "hierarchical"]
NodeKind = Literal["semantic", "episodic", "procedural"]
EdgeKind = Literal["ground", "distill", "step"]


@dataclass(frozen=True, slots=True)
class Scope:
    """Who a memory belongs to. Empty strings mean "not set" (the default scope)."""

    user_id: str = ""
    agent_id: str = ""
    run_id: str = ""

    def label(self) -> str:
        parts = [f"{k}={v}" for k, v in self.as_dict().items() if v]
        return ",".join(parts) or "default"

    def as_dict(self) -> dict[str, str]:
        return {"user_id": self.user_id, "agent_id": self.agent_id, "run_id": self.run_id}


@dataclass(frozen=True, slots=True)
class Message:
    """One normalised conversation turn."""

    id: str
    role: str
    content: str
    timestamp: datetime | None = None
    time_text: str = ""
    speaker_id: str = ""
    speaker_name: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def speaker(self) -> str:
        return self.speaker_name or self.speaker_id or self.role

    @property
    def search_text(self) -> str:
        """What indexes see: the speaker and the full content."""
        return f"{self.speaker}: {self.content}"


def entry_search_text(speaker: str, original_text: str, context: str) -> str:
    """The text an entry is indexed under (one definition for every index and store)."""
    own = f"{speaker}: {original_text}" if speaker else original_text
    return f"{own}\n{context}" if context else own


#: ``metadata["summary_of"]`` of a summary written per time window (not per topic)
WINDOW_SUMMARY = "time_window"


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """A stored memory: compact ``text`` for prompts, ``original_text`` for search and audit,
    and ``context`` (e.g. the neighbouring turns) that helps find it but is not its content."""

    id: str
    text: str
    original_text: str
    scope: Scope
    timestamp: datetime | None = None
    speaker_id: str = ""
    speaker_name: str = ""
    topic_id: str = ""
    source_ids: tuple[str, ...] = ()
    kind: EntryKind = "entry"
    context: str = ""
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    # -- resolved time (timeresolve): when what the entry says happened, e.g. "yesterday"
    # said on 8 May 2023 -> 7 May 2023; the text itself is never rewritten.
    event_time: TimeSpan | None = None
    # -- validity (knowledge updates): a superseded entry is kept, never deleted ----------
    #: the id of the later entry that replaced this one ("" while it is current)
    superseded_by: str = ""
    #: when it stopped being true (the superseding entry's time); None while current
    valid_to: datetime | None = None

    @property
    def speaker(self) -> str:
        return self.speaker_name or self.speaker_id

    @property
    def mark(self) -> str:
        """How lists and prompt context tag a memory that is not one speaker's own:
        "(topic)" for a topic summary, "(window)" for a time window's summary (made by
        ``summarize``), "(event)" for an event; "" for a plain entry."""
        if self.kind == "summary":
            return "(window)" if self.metadata.get("summary_of") == WINDOW_SUMMARY else "(topic)"
        return "(event)" if self.kind == "event" else ""

    @property
    def valid_from(self) -> datetime | None:
        """When it became true: the time it was said."""
        return self.timestamp

    def current_at(self, when: datetime | None = None) -> bool:
        """Not superseded (at ``when``: not superseded at or before it)."""
        if not self.superseded_by:
            return True
        return when is not None and self.valid_to is not None and self.valid_to > when

    @property
    def search_text(self) -> str:
        """What the vector and full-text indexes see: the content, then its context."""
        return entry_search_text(self.speaker, self.original_text, self.context)

    @property
    def chars(self) -> int:
        """The characters of its stored, original and context text (what pages and
        answers of a server are bounded by)."""
        return len(self.text) + len(self.original_text) + len(self.context)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            "original_text": self.original_text,
            **self.scope.as_dict(),
            "timestamp": self.timestamp.isoformat() if self.timestamp else None,
            "speaker_id": self.speaker_id,
            "speaker_name": self.speaker_name,
            "topic_id": self.topic_id,
            "source_ids": list(self.source_ids),
            "context": self.context,
            "version": self.version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
            "metadata": dict(self.metadata),
            "event_time": span_to_dict(self.event_time),
            "superseded_by": self.superseded_by or None,
            "valid_from": self.timestamp.isoformat() if self.timestamp else None,
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MemoryEntry:
        """Rebuild an entry from a :meth:`to_dict` snapshot (as kept in the history)."""
        return cls(
            id=d["id"],
            kind=d["kind"],
            scope=Scope(d["user_id"], d["agent_id"], d["run_id"]),
            text=d["text"],
            original_text=d["original_text"],
            timestamp=_when(d["timestamp"]),
            speaker_id=d["speaker_id"],
            speaker_name=d["speaker_name"],
            topic_id=d["topic_id"],
            source_ids=tuple(d["source_ids"]),
            context=d.get("context", ""),
            version=d["version"],
            created_at=_when(d["created_at"]),
            updated_at=_when(d["updated_at"]),
            metadata=d["metadata"],
            event_time=span_from_dict(d.get("event_time")),
            superseded_by=d.get("superseded_by") or "",
            valid_to=_when(d.get("valid_to")),
        )


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    """One retrieved memory with its fused relevance score (higher is better).

    For an event (StructMem), ``related`` holds the facts bound to it. ``tokens``: the
    tokens (as the budget counts them, ``retrieval.token_counter``) this result adds to the
    formatted context (its line, its facts' lines and a new date header). With the default
    estimate a packing's results sum to the whole context's estimate: each is its share of
    the running total rounded up, and a date header is charged to the first result of that
    day packed, so a subset or another order sums differently. With a tokenizer they are
    its counts of the lines, within a few tokens of the whole context's count, which is
    what the budget is checked against."""

    entry: MemoryEntry
    score: float
    tokens: int
    related: tuple[MemoryEntry, ...] = ()

    @property
    def id(self) -> str:
        return self.entry.id

    @property
    def text(self) -> str:
        return self.entry.text

    @property
    def timestamp(self) -> datetime | None:
        return self.entry.timestamp

    @property
    def speaker(self) -> str:
        return self.entry.speaker

    @property
    def source_ids(self) -> tuple[str, ...]:
        return self.entry.source_ids

    def to_dict(self) -> dict[str, Any]:
        out = {"score": self.score, "tokens": self.tokens, **self.entry.to_dict()}
        if self.related:
            out["related"] = [e.to_dict() for e in self.related]
        return out

    @property
    def chars(self) -> int:
        """The characters of memory text this result holds (what ``max_chars`` counts):
        its entry's and its facts'."""
        return self.entry.chars + sum(e.chars for e in self.related)


class RetrievalResults(list[RetrievalResult]):
    """One retrieval's results, best first (a list). ``truncated``: they ended at the
    retrieval's ``max_chars`` while more memories were ranked within its limit."""

    truncated: bool = False

    def __init__(self, results: Iterable[RetrievalResult] = (), *, truncated: bool = False) -> None:
        super().__init__(results)
        self.truncated = truncated


@dataclass(frozen=True, slots=True)
class Filters:
    """Validated retrieval filters; every field is optional."""

    time_from: datetime | None = None
    time_to: datetime | None = None
    speaker: str | None = None
    topic_id: str | None = None
    kinds: tuple[EntryKind, ...] | None = None
    event_id: str | None = None
    #: only what was valid then: said at or before it and not superseded by then
    as_of: datetime | None = None


@dataclass(frozen=True, slots=True)
class HistoryEvent:
    """One change to an entry, oldest first; ``before``/``after`` are entry snapshots."""

    seq: int
    entry_id: str
    op: Literal["add", "update", "delete", "restore"]
    version: int
    at: datetime
    reason: str
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "entry_id": self.entry_id,
            "op": self.op,
            "version": self.version,
            "at": self.at.isoformat(),
            "reason": self.reason,
            "before": self.before,
            "after": self.after,
        }


@dataclass(frozen=True, slots=True)
class Node:
    """A FluxMem graph node. ``data`` holds the kind's structure: a semantic node's
    ``source``; an episode's ``task``, ``steps`` and ``success``; a skill's ``steps``,
    ``versions``, ``source_episodes`` and ``pems``."""

    id: str
    kind: NodeKind
    text: str
    scope: Scope = field(default_factory=Scope)
    data: Mapping[str, Any] = field(default_factory=dict)
    version: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def steps(self) -> list[str]:
        """A skill's steps; a node whose stored steps are malformed raises StoreError."""
        raw = self.data.get("steps", [])
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise StoreError(
                f"graph node {self.id}: corrupted skill version {self.version} "
                "(steps must be a list of strings); undo the change that wrote it"
            )
        return list(raw)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "text": self.text,
            **self.scope.as_dict(),
            "data": dict(self.data),
            "version": self.version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "updated_at": self.updated_at.isoformat() if self.updated_at else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Node:
        """Rebuild a node from a :meth:`to_dict` snapshot (as kept in the graph history)."""
        return cls(
            id=d["id"],
            kind=d["kind"],
            scope=Scope(d["user_id"], d["agent_id"], d["run_id"]),
            text=d["text"],
            data=d["data"],
            version=d["version"],
            created_at=_when(d.get("created_at")),
            updated_at=_when(d.get("updated_at")),
        )


@dataclass(frozen=True, slots=True)
class Edge:
    """``ground``: semantic -> episodic (this fact served this episode); ``distill``:
    episodic -> procedural (this episode taught this skill); ``step``: a node active in a
    step of an episode (src = node, dst = episode, ``data["step"]`` = index)."""

    kind: EdgeKind
    src: str
    dst: str
    weight: float = 1.0
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "src": self.src,
            "dst": self.dst,
            "weight": self.weight,
            "data": dict(self.data),
        }
