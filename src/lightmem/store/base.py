"""The storage interfaces: small protocols for callers that need part of the store, and
:class:`MemoryStore`, all of them together, which every backend implements."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from types import TracebackType
from typing import Protocol

from lightmem.ledger import UsageRecord
from lightmem.store.graph import GraphStore
from lightmem.store.purge import PurgeReport
from lightmem.store.reembed import ReembedReport, TextEmbedder
from lightmem.store.values import BufferedMessage, MessageStatus, PendingEntry, ScoredId, Vector
from lightmem.types import Filters, HistoryEvent, MemoryEntry, Message, Scope

__all__ = [
    "Bookkeeping",
    "BufferedMessage",
    "EntrySearch",
    "EntryStore",
    "MemoryStore",
    "MessageBuffer",
    "MessageStatus",
    "PendingEntry",
    "ScoredId",
    "Vector",
]


class MessageBuffer(Protocol):
    """Raw turns and their sensory / short-term buffer state (the ingestion pipeline)."""

    def add_messages(self, scope: Scope, items: Sequence[tuple[Message, str]]) -> int: ...
    def buffered(self, scope: Scope, status: MessageStatus) -> list[BufferedMessage]: ...
    def buffered_scopes(self) -> list[Scope]: ...
    def mark_segmented(self, assignments: Sequence[tuple[int, str]]) -> bool:
        """Move pending messages to the short-term buffer; False (and no change) if another
        writer moved any of them first."""

    def get_messages(self, scope: Scope, ids: Sequence[str]) -> list[Message]: ...


class EntryStore(Protocol):
    """Memory entries with their versioned, restorable history."""

    def commit_extraction(
        self,
        entries: Sequence[tuple[MemoryEntry, Vector]],
        message_seqs: Sequence[int],
        replaces: Sequence[str] = (),
    ) -> bool:
        """Store entries, mark their messages extracted and remove the ``replaces`` entries
        (the messages' provisional ones), atomically; False (and no change) if another
        writer extracted any of those messages first."""

    def commit_provisional(
        self, entries: Sequence[tuple[MemoryEntry, Vector]], message_seqs: Sequence[int]
    ) -> tuple[str, ...]:
        """Store provisional entries (see :mod:`lightmem.store.provisional`), one per
        message of ``message_seqs`` (aligned), skipping messages extracted meanwhile and
        entries already stored; returns the ids written."""

    def user_ids(self, limit: int) -> list[str]:
        """Up to ``limit`` distinct user ids holding entries ('' for none), in order."""

    def import_entries(
        self, rows: Iterable[tuple[MemoryEntry, Vector]], reason: str = "imported"
    ) -> int:
        """Bulk-load entries, each with an ``add`` history event, in one transaction;
        returns how many were stored (the migration tool and bulk loads use it)."""

    def entries_citing(self, scope: Scope, message_ids: Sequence[str]) -> list[str]:
        """Ids of the entries of exactly ``scope`` extracted from any of ``message_ids``."""

    def get_entry(self, entry_id: str, scope: Scope) -> MemoryEntry | None: ...
    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]: ...
    def list_entries(
        self, scope: Scope, filters: Filters, limit: int, offset: int
    ) -> list[MemoryEntry]: ...
    def iter_entries(self, scope: Scope, filters: Filters, page: int) -> Iterator[MemoryEntry]:
        """Every entry the filters select, read ``page`` at a time and paged by key (the
        last row's place in :meth:`list_entries`' order), not by offset: an entry deleted or
        rewritten between two reads moves no other across a page boundary, so each entry
        present throughout is yielded (one changed meanwhile may come twice, by id once per
        version; one whose time changed meanwhile may be missed)."""

    def update_entry(self, entry: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry: ...
    def delete_entry(self, entry_id: str, scope: Scope, reason: str) -> MemoryEntry: ...
    def restore_entry(self, snapshot: MemoryEntry, vector: Vector, reason: str) -> MemoryEntry: ...
    def set_validity(
        self, entry_id: str, scope: Scope, by: str, valid_to: datetime | None, reason: str
    ) -> MemoryEntry:
        """Mark an entry superseded by entry ``by`` from ``valid_to`` ("": current again);
        deleting ``by`` later makes it current again."""

    def history(self, entry_id: str, scope: Scope) -> list[HistoryEvent]: ...
    def purge(self, scope: Scope, entry_id: str | None = None) -> PurgeReport:
        """Erase an entry (with its history, source messages, vectors, index and queue
        rows) or, without an id, everything in ``scope`` including its FluxMem graph, and
        leave no copy in the database (see :mod:`lightmem.store.purge`)."""


class EntrySearch(Protocol):
    """Vector and full-text search over entries (retrieval, offline update).

    ``parallel_reads``: two searches may run at once on two threads and gain from it (a
    server store with a connection pool); a retrieval then runs its dense and full-text
    searches side by side (:mod:`lightmem.pipeline.side_by_side`)."""

    parallel_reads: bool

    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]: ...
    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]: ...
    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        """Ids, vectors and exact-scope keys of matching entries, in insertion order."""


class Bookkeeping(Protocol):
    """The update queue, the usage ledger, counts and checks."""

    @property
    def max_bytes(self) -> int | None:
        """The size limit :meth:`check_room` holds the store to (None: none)."""

    def check_room(self) -> None:
        """Raise :class:`~lightmem.errors.StoreFullError` when the store holds its
        ``max_bytes``: called before an operation that adds what a caller gives."""

    def size_bytes(self) -> int:
        """The bytes its data holds on disk (what ``max_bytes`` is compared with)."""

    def save_update_queue(self, queue: dict[str, list[ScoredId]]) -> None: ...
    def load_update_queue(self, scope: Scope) -> dict[str, list[ScoredId]]: ...
    def save_update_checks(self, stage: str, digests: Mapping[str, str]) -> None:
        """Record, by entry id, the digest of what the offline update asked at ``stage``
        (whether the entry is up to date is :meth:`mark_update_checked`'s)."""

    def load_update_checks(self, stage: str, ids: Sequence[str]) -> dict[str, str]:
        """The digests recorded at ``stage`` for those of ``ids`` that have one."""

    def mark_update_checked(
        self, stage: str, key: str, min_scores: Mapping[str, float | None], checked_at: float
    ) -> None:
        """Note that the entries ``min_scores`` is keyed by were brought up to date at
        ``stage`` under ``key`` (the updater and code) from a view of the store taken at
        ``checked_at`` (epoch seconds; what changed after it is still pending), a digest
        recorded for them staying, and at the review the likeness of the last earlier entry
        each was shown (None: fewer were shown than asked for)."""

    def forget_update_checks(self, scope: Scope) -> None:
        """Remove every check recorded for the scope's entries (at both stages): the
        offline update shows all of them again."""

    def flag_update_checks(self, stage: str, ids: Sequence[str], moved_at: float) -> None:
        """Note that an earlier entry like each of ``ids`` changed at ``moved_at``: their
        checks at ``stage`` made from an older view are out of date."""

    def unchecked_entries(
        self, scope: Scope, stage: str, key: str, after: int, limit: int
    ) -> list[PendingEntry]:
        """The scope's extracted entries past row ``after`` with no check at ``stage`` under
        ``key``, changed since theirs, or flagged since, in the order stored, at most
        ``limit``."""

    def load_update_reach(self, scope: Scope, stage: str, key: str) -> dict[str, float | None]:
        """By entry id, the ``min_scores`` of the scope's checks at ``stage`` that are up to
        date under ``key`` (the entries :meth:`unchecked_entries` does not return)."""

    def record_usage(self, records: Sequence[UsageRecord]) -> None:
        """Add to the persisted usage ledger (kept in memory on a read-only store)."""

    def usage(self) -> list[UsageRecord]: ...
    def counts(self, scope: Scope) -> dict[str, int]: ...
    def integrity_check(self) -> list[str]:
        """Problems with the stored state (empty when sound)."""


class MemoryStore(MessageBuffer, EntryStore, EntrySearch, Bookkeeping, Protocol):
    """Entries, vectors, full-text index, message buffer and history, behind one interface.

    Every method that changes state does so in one transaction: a reader never sees half of
    it. Scope arguments match rows whose fields equal the scope's non-empty fields. Storage
    failures raise :class:`~lightmem.errors.StoreError` with the database's own message.
    """

    path: str

    def bind_embedder(self, name: str, dim: int) -> None:
        """Record (first open) or check (later opens) which embedder built the vectors."""

    def embedder_identity(self) -> tuple[str, int] | None:
        """The (name, dimensions) of the embedder that built the vectors (None before the
        first :meth:`bind_embedder`)."""

    def graph(self) -> GraphStore:
        """The FluxMem graph kept in the same database."""

    def reembed(self, embedder: TextEmbedder, *, batch: int = 256) -> ReembedReport:
        """Recompute every stored vector with ``embedder`` and switch the store to it (see
        :mod:`lightmem.store.reembed`)."""

    def close(self) -> None: ...
    def __enter__(self) -> MemoryStore: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
