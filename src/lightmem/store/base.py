"""The storage interface every backend implements (SQLite now; PostgreSQL plugs in here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
import numpy.typing as npt

from lightmem.ledger import UsageRecord
from lightmem.types import Filters, HistoryEvent, MemoryEntry, Message, Scope

if TYPE_CHECKING:
    from lightmem.store.graph import GraphStore

MessageStatus = Literal["pending", "segmented", "extracted"]
ScoredId = tuple[str, float]
Vector = npt.NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class BufferedMessage:
    """A persisted message with its place in the sensory / short-term buffers."""

    seq: int
    scope: Scope
    message: Message
    compressed: str
    status: MessageStatus
    topic_id: str


class MemoryStore(Protocol):
    """Entries, vectors, full-text index, message buffer and history, behind one interface.

    Every method that changes state does so in one transaction: a reader never sees half of it.
    Scope arguments match entries whose fields equal the scope's non-empty fields.
    """

    path: str

    def bind_embedder(self, name: str, dim: int) -> None:
        """Record (first open) or check (later opens) which embedder built the vectors."""

    # -- message buffer -------------------------------------------------------------
    def add_messages(self, scope: Scope, items: Sequence[tuple[Message, str]]) -> None: ...
    def buffered(self, scope: Scope, status: MessageStatus) -> list[BufferedMessage]: ...
    def buffered_scopes(self) -> list[Scope]: ...
    def mark_segmented(self, assignments: Sequence[tuple[int, str]]) -> bool:
        """Move pending messages to the short-term buffer; False (and no change) if another
        writer moved any of them first."""

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[Message]: ...

    # -- entries --------------------------------------------------------------------
    def commit_extraction(
        self, entries: Sequence[tuple[MemoryEntry, Vector]], message_seqs: Sequence[int]
    ) -> bool:
        """Store entries and mark their messages extracted, atomically; False (and no
        change) if another writer extracted any of those messages first."""

    def import_entries(
        self, rows: Iterable[tuple[MemoryEntry, Vector]], reason: str = "imported"
    ) -> int:
        """Bulk-load entries, each with an ``add`` history event, in one transaction;
        returns how many were stored (the migration tool and bulk loads use it)."""

    def get_entry(self, entry_id: str, scope: Scope) -> MemoryEntry | None: ...
    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]: ...
    def list_entries(
        self, scope: Scope, filters: Filters, limit: int, offset: int
    ) -> list[MemoryEntry]: ...
    def update_entry(self, entry: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry: ...
    def delete_entry(self, entry_id: str, scope: Scope, reason: str) -> MemoryEntry: ...
    def restore_entry(self, snapshot: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry: ...
    def history(self, entry_id: str, scope: Scope) -> list[HistoryEvent]: ...

    # -- search ---------------------------------------------------------------------
    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]: ...
    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]: ...
    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        """Ids, vectors and exact-scope keys of matching entries, in insertion order."""

    # -- bookkeeping ----------------------------------------------------------------
    def save_update_queue(self, queue: dict[str, list[ScoredId]]) -> None: ...
    def load_update_queue(self, scope: Scope) -> dict[str, list[ScoredId]]: ...
    def record_usage(self, records: Sequence[UsageRecord]) -> None: ...
    def usage(self) -> list[UsageRecord]: ...
    def counts(self, scope: Scope) -> dict[str, int]: ...
    def integrity_check(self) -> list[str]:
        """Problems with the stored state (empty when sound)."""

    def graph(self) -> GraphStore:
        """The FluxMem graph kept in the same database."""

    def close(self) -> None: ...
