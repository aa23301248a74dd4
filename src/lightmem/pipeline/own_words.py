"""A memory found through its neighbour's words comes after that neighbour.

An entry is indexed with the turns around it (``MemoryEntry.context``), so that an answer
is found by the words of its question ("What did you paint?" -> "A sunrise."). The same
context lets a turn that says nothing of the query outrank the turn that does: "Okay, good
to know." right after "I live in Bergen" came first for "Which city does Ingrid live in?".
So, among the first :data:`~lightmem.pipeline.candidates.RERANK_WINDOW` hits, an entry
whose own text holds no word of the query moves to just after a neighbour ranked at most
:data:`REACH` places below it whose own text does. A neighbour is a turn of the same topic
segment whose whole text is a line of the entry's context (the same words said in another
session, or inside a longer line, are no neighbour). The query's words are its content
words but the speakers' names, which every turn of a speaker is about. Only the offline
manager's turn entries (``kind == "entry"``) move; each place keeps its score, so scores
stay in rank order. Hierarchical retrieval, which ranks topic summaries first, is left as
it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from lightmem.pipeline.candidates import RERANK_WINDOW, Fetch, query_words
from lightmem.store.base import ScoredId
from lightmem.store.text_index import Stemmer
from lightmem.types import MemoryEntry

__all__ = ["REACH", "own_words_first"]

#: How many places an entry may move down: past its neighbour and what lies between, not
#: past the rest of the first results ("A sunrise." stays above an unrelated hit).
REACH = 4


def own_words_first(
    ranked: Sequence[ScoredId], fetch: Fetch, query: str, stemmer: Stemmer
) -> list[ScoredId]:
    """``ranked`` (best first) with each entry matched only through its context placed
    after the neighbour that holds the query's words (see the module docstring)."""
    head = list(ranked[:RERANK_WINDOW])
    if len(head) < 2:
        return list(ranked)
    entries = fetch([i for i, _ in head])
    asked = query_words(query, entries.values(), stemmer)
    if not asked:
        return list(ranked)
    own = {i: bool(asked.intersection(stemmer.tokens(e.original_text))) for i, e in entries.items()}
    ids = [i for i, _ in head]
    moved: set[str] = set()
    k = 0
    while k < len(ids):
        x = entries.get(ids[k])
        if x is None or x.kind != "entry" or own[x.id] or not x.context or x.id in moved:
            k += 1
            continue
        reach = range(k + 1, min(len(ids), k + 1 + REACH))
        to = next((j for j in reach if _holds(entries, own, ids[j], x)), None)
        if to is None:
            k += 1
            continue
        moved.add(x.id)
        ids.insert(to, ids.pop(k))  # after its neighbour; what was at k+1 is now at k
    return [*zip(ids, (s for _, s in head), strict=True), *ranked[RERANK_WINDOW:]]


def _holds(
    entries: Mapping[str, MemoryEntry], own: Mapping[str, bool], eid: str, x: MemoryEntry
) -> bool:
    """Is ``eid`` a neighbour of ``x`` (of its segment, its whole text a line of ``x``'s
    context) holding the query's words in its own text?"""
    y = entries.get(eid)
    return (
        y is not None
        and own[eid]
        and y.kind == "entry"
        and y.scope == x.scope
        and y.topic_id == x.topic_id
        and bool(y.original_text)
        and f"\n{y.original_text}\n" in f"\n{x.context}\n"
    )
