"""The entries of one query's candidates, fetched once and shared by the retrieval steps.

Speaker focus, the time lift, the validity ranking and budget packing each look at candidate
entries; fetching and decoding them is most of a query's cost. A :class:`Candidates` asks
the store only for the ids it has not fetched yet (one ``get_entries`` call per step that
needs new ones) and hands every step the same entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from lightmem.store.text_index import Stemmer
from lightmem.text import content_terms
from lightmem.types import MemoryEntry

__all__ = ["RERANK_WINDOW", "Candidates", "EntrySource", "Fetch", "query_words"]

#: The first ranks the steps after the search may reorder (what a context of 800 tokens
#: holds): newer statements first, own words first.
RERANK_WINDOW = 24

#: Entries by id, those that exist (a query's shared fetch: :meth:`Candidates.get`).
Fetch = Callable[[list[str]], Mapping[str, MemoryEntry]]


def query_words(query: str, entries: Iterable[MemoryEntry], stemmer: Stemmer) -> frozenset[str]:
    """The stems of ``query``'s content words that a candidate's own text is matched on:
    not the speakers' names of ``entries`` (every turn of a speaker is about them) nor
    one-letter stems ("s")."""
    names = {w for e in entries for w in stemmer.tokens(e.speaker)}
    stems = stemmer.tokens(" ".join(content_terms(query)))
    return frozenset(w for w in stems if len(w) > 1 and w not in names)


class EntrySource(Protocol):
    """What is read from the store: entries by id (a missing id is left out)."""

    def get_entries(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]: ...


class Candidates:
    """A per-query memo over :meth:`EntrySource.get_entries` (not shared between queries:
    an entry written meanwhile is seen by the next query)."""

    def __init__(self, store: EntrySource) -> None:
        self._store = store
        self._entries: dict[str, MemoryEntry] = {}
        self._missing: set[str] = set()  # asked for and not in the store
        self.fetches = 0  # store calls made, for tests and profiles

    def get(self, entry_ids: Sequence[str]) -> dict[str, MemoryEntry]:
        """The entries of ``entry_ids`` that exist, fetching those not seen before."""
        known, missing = self._entries, self._missing
        new = [i for i in dict.fromkeys(entry_ids) if i not in known and i not in missing]
        if new:
            self.fetches += 1
            found = self._store.get_entries(new)
            known.update(found)
            missing.update(i for i in new if i not in found)
        return {i: known[i] for i in entry_ids if i in known}
