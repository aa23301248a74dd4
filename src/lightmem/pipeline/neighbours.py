"""The store's own words nearest in meaning to a query's words (word-neighbour expansion).

A list or persona question names a kind ("What pets does Nate have?", "What sports does
John like?") while the turns that answer it name its members ("my dog", "a soccer game"):
no query word is in them, and the question's whole-sentence vector is far from each. Word
by word the embedder puts "pets" near "dog" (wordllama cosine 0.40), "sports" near
"soccer", "basketball" and "tennis", "instruments" near "guitar", "books" near "novel". The
store's words nearest to each query word are searched for (BM25) with the query's words
among the memories of each speaker the query names, and that ranking is fused behind the
best plain hits (:meth:`lightmem.pipeline.retrieve.Retriever.retrieve`).

The vocabulary is the store's: the content words of a scope's stored entry text, speakers'
names left out (a name that is also a word, "Rose", would be found for "flowers" and match
every memory that addresses her), embedded once per word and read again once the scope's
entries have changed by more than a twentieth. Nothing is invented: the search returns
stored memories, ranked by the words they hold.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lightmem.embed.base import Embedder
from lightmem.store.base import MemoryStore
from lightmem.text import content_terms
from lightmem.types import EntryKind, Filters, Scope

__all__ = ["RECHECK_S", "NearWords"]

#: Words embedded for vocabularies and kept across rebuilds (a store's vocabulary grows
#: by a few words per turn; embedding it all again on every change would not scale).
#: Memory is bounded: a vector is ~1 KB (256 floats), so at most ~20 MB here, and at most
#: _KEEP_SCOPES vocabularies of _VOCABULARY words (~80 MB) per retriever, whatever a
#: request or a tenant stores.
_KEEP_WORDS = 20_000
#: Words a scope's vocabulary keeps at most: its most frequent content words.
_VOCABULARY = 10_000
#: Entries a vocabulary is read from, at most (reading is linear in them: a scope of a
#: million memories would take seconds at its first budgeted query).
_READ_ENTRIES = 50_000
#: Seconds between two looks at whether a scope's vocabulary is stale.
RECHECK_S = 2.0
#: Scopes whose vocabularies are kept (a server sees many users' scopes).
_KEEP_SCOPES = 8
_ENTRIES: tuple[EntryKind, ...] = ("entry",)


@dataclass(frozen=True, slots=True)
class _Vocabulary:
    version: tuple[int, int]  # (entries, history events) when it was read
    words: list[str]
    vectors: npt.NDArray[np.float32]  # one unit row per word
    names: frozenset[str]  # speakers' name words, never expanded or added


class NearWords:
    """Per-scope vocabularies of one store and embedder; ``near`` finds neighbours."""

    def __init__(
        self,
        embedder: Embedder,
        recheck_s: float = RECHECK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._embedder = embedder
        self._recheck_s, self._clock = recheck_s, clock
        self._checked: dict[Scope, float] = {}  # when each vocabulary was last checked
        self._vocabularies: dict[Scope, _Vocabulary] = {}
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}

    def near(
        self,
        store: MemoryStore,
        scope: Scope,
        query: str,
        per_word: int,
        min_similarity: float,
    ) -> list[str]:
        """The store's words (of ``scope``) among the ``per_word`` nearest to each content
        word of ``query`` with cosine similarity at least ``min_similarity``, the query's
        own words and speakers' names left out, nearest first for each query word."""
        vocab = self._vocabulary(store, scope)
        own = [t for t in content_terms(query) if _expandable(t, vocab.names)]
        if not own or not vocab.words:
            return []
        k = min(per_word + 1, len(vocab.words))  # +1: the word itself is usually nearest
        out: list[str] = []
        for q in self._unit(own, op="retrieve"):
            # one matrix-vector product per word: a threaded matrix product of these
            # sizes spends ~100x the CPU time (BLAS threads spinning)
            row = vocab.vectors @ q
            best = np.argpartition(-row, k - 1)[:k]
            for i in best[np.argsort(-row[best])]:
                if row[i] >= min_similarity and vocab.words[i] not in own:
                    out.append(vocab.words[i])
        return list(dict.fromkeys(out))

    def _vocabulary(self, store: MemoryStore, scope: Scope) -> _Vocabulary:
        """The scope's vocabulary, read again once its entries changed by more than a
        twentieth (their count or the history of changes): reading is linear in the
        scope's entries, and an agent adds entries between queries; a new word missing
        for a while only leaves a ranking as it was. Whether it changed is looked at most
        every ``recheck_s`` seconds: counting is linear in the scope too (~45 ms at 200,000
        entries on SQLite), too much for every query of a large store."""
        vocab = self._vocabularies.get(scope)
        now = self._clock()
        if vocab is not None and now - self._checked.get(scope, -math.inf) < self._recheck_s:
            return vocab
        counts = store.counts(scope)
        version = (counts["entries"], counts["history_events"])
        if vocab is None or _stale(vocab.version, version):
            vocab = self._read(store, scope, version)
            if len(self._vocabularies) >= _KEEP_SCOPES:  # many users: forget the oldest
                oldest = next(iter(self._vocabularies))
                self._vocabularies.pop(oldest, None)
                self._checked.pop(oldest, None)
            self._vocabularies[scope] = vocab
        self._checked[scope] = now
        return vocab

    def _read(self, store: MemoryStore, scope: Scope, version: tuple[int, int]) -> _Vocabulary:
        limit = max(1, min(version[0], _READ_ENTRIES))
        entries = store.list_entries(scope, Filters(kinds=_ENTRIES), limit, 0)
        names = frozenset(w for e in entries for w in content_terms(e.speaker))
        seen = Counter(w for e in entries for w in content_terms(e.text) if _expandable(w, names))
        words = [w for w, _ in seen.most_common(_VOCABULARY)]
        vectors = self._unit(words, op="vocabulary") if words else np.zeros((0, 1), np.float32)
        return _Vocabulary(version, words, vectors, names)

    def _unit(self, words: Sequence[str], op: str) -> npt.NDArray[np.float32]:
        """Unit vectors of ``words``, each embedded once (query words too: they recur).
        Read into a local map first, so another thread clearing the cache cannot fail it."""
        have = {w: v for w in dict.fromkeys(words) if (v := self._vectors.get(w)) is not None}
        new = [w for w in dict.fromkeys(words) if w not in have]
        if new:
            got = np.asarray(self._embedder.embed(new, op=op), dtype=np.float32)
            got /= np.linalg.norm(got, axis=1, keepdims=True) + 1e-9
            have.update(zip(new, got, strict=True))
            if len(self._vectors) + len(new) > _KEEP_WORDS:
                self._vectors.clear()
            self._vectors.update(zip(new, got, strict=True))
        return np.stack([have[w] for w in words])


def _stale(old: tuple[int, int], new: tuple[int, int]) -> bool:
    """Whether counts moved from ``old`` to ``new`` by more than a twentieth (any change
    of a small store)."""
    return any(abs(n - o) > o // 20 for o, n in zip(old, new, strict=True))


def _expandable(word: str, names: frozenset[str]) -> bool:
    """A word worth a neighbour search: alphabetic (no numbers, no possessives), three
    letters at least, not a speaker's name: short words and names are near too much."""
    return word.isalpha() and len(word) > 2 and word not in names
