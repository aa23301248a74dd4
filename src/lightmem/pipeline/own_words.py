"""A memory found through its neighbour's words comes after that neighbour.

An entry is indexed with the turns around it (``MemoryEntry.context``), so that an answer
is found by the words of its question ("What did you paint?" -> "A sunrise."). The same
context lets a turn that says nothing of the query outrank the turn that does: "Okay, good
to know." right after "I live in Bergen" came first for "Which city does Ingrid live in?".
So, among the first :data:`WINDOW` hits, an entry whose own text holds no word of the query
moves to just after the first lower-ranked neighbour whose own text does (one of its topic
segment whose text is in its context: the same few words said in another session, "Ha,
classic.", are no neighbour). Both stay found; only their order changes, and the scores
stay in rank order (each place keeps its score).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from lightmem.store.base import ScoredId
from lightmem.store.text_index import Stemmer
from lightmem.text import content_terms
from lightmem.types import MemoryEntry

__all__ = ["WINDOW", "own_words_first"]

#: The ranks that may move (what a context of 800 tokens holds).
WINDOW = 24

Fetch = Callable[[list[str]], Mapping[str, MemoryEntry]]


def own_words_first(
    ranked: Sequence[ScoredId], fetch: Fetch, query: str, stemmer: Stemmer
) -> list[ScoredId]:
    """``ranked`` (best first) with each entry matched only through its context placed
    after the neighbour that holds the query's words (see the module docstring)."""
    head = list(ranked[:WINDOW])
    asked = set(stemmer.tokens(" ".join(content_terms(query))))
    if len(head) < 2 or not asked:
        return list(ranked)
    entries = fetch([i for i, _ in head])
    own = {i: bool(asked.intersection(stemmer.tokens(e.original_text))) for i, e in entries.items()}
    ids = [i for i, _ in head]
    moved: set[str] = set()
    k = 0
    while k < len(ids):
        x = entries.get(ids[k])
        if x is None or own[x.id] or not x.context or x.id in moved:
            k += 1
            continue
        to = next((j for j in range(k + 1, len(ids)) if _holds(entries, own, ids[j], x)), None)
        if to is None:
            k += 1
            continue
        moved.add(x.id)
        ids.insert(to, ids.pop(k))  # after its neighbour; what was at k+1 is now at k
    return [*zip(ids, (s for _, s in head), strict=True), *ranked[WINDOW:]]


def _holds(
    entries: Mapping[str, MemoryEntry], own: Mapping[str, bool], eid: str, x: MemoryEntry
) -> bool:
    """Is ``eid`` a neighbour of ``x`` (of its segment, its text in ``x``'s context)
    holding the query's words in its own text?"""
    y = entries.get(eid)
    return (
        y is not None
        and own[eid]
        and y.scope == x.scope
        and y.topic_id == x.topic_id  # a turn of another segment that only reads the same
        and bool(y.original_text)  # ("Ha, classic.") is no neighbour
        and y.original_text in x.context
    )
