"""BM25 over an in-memory inverted index (numpy), aligned with the vector cache's rows.

Like the vector cache it is derived state, rebuilt from the store's entries. Scoring is
Okapi BM25 with FTS5's constants (k1 = 1.2, b = 0.75) on Snowball-stemmed words; a query
costs a few array additions instead of scoring every matching row in SQL.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lightmem.lang import index_terms

K1 = 1.2
B = 0.75


class Stemmer:
    """Snowball English stems, memoised (vocabularies are small, texts are not)."""

    def __init__(self) -> None:
        import Stemmer as snowball

        self._stem = snowball.Stemmer("english").stemWord
        self._cache: dict[str, str] = {}

    def tokens(self, text: str) -> list[str]:
        """Stemmed index terms; Chinese, Japanese and Korean are segmented first
        (:func:`lightmem.lang.index_terms`; English terms are the same ``\\w+`` runs)."""
        out = []
        cache = self._cache
        for word in index_terms(text):
            stem = cache.get(word)
            if stem is None:
                stem = self._stem(word)
                if len(cache) < 500_000:
                    cache[word] = stem
            out.append(stem)
        return out


@dataclass(frozen=True, slots=True)
class BM25Index:
    """Term frequencies per term and document lengths; BM25 weights are computed at query
    time from the current collection statistics, so appending documents is cheap."""

    n_docs: int
    postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]
    lengths: npt.NDArray[np.float32]
    total_length: float

    @classmethod
    def empty(cls) -> BM25Index:
        return cls(0, {}, np.zeros(0, dtype=np.float32), 0.0)

    @classmethod
    def build(cls, texts: Sequence[str], stemmer: Stemmer) -> BM25Index:
        return cls.empty().extended(texts, stemmer)

    def extended(self, texts: Sequence[str], stemmer: Stemmer) -> BM25Index:
        """A new index with ``texts`` appended as rows ``n_docs, n_docs + 1, ...``; this
        one is left unchanged (readers may still hold it)."""
        docs = [Counter(stemmer.tokens(t)) for t in texts]
        by_term: dict[str, tuple[list[int], list[int]]] = {}
        for i, counts in enumerate(docs, start=self.n_docs):
            for term, tf in counts.items():
                entry = by_term.setdefault(term, ([], []))
                entry[0].append(i)
                entry[1].append(tf)
        postings = dict(self.postings)
        for term, (rows, tfs) in by_term.items():
            r = np.array(rows, dtype=np.int64)
            f = np.array(tfs, dtype=np.float32)
            old = postings.get(term)
            postings[term] = (
                (r, f)
                if old is None
                else (
                    np.concatenate([old[0], r]),
                    np.concatenate([old[1], f]),
                )
            )
        new_lengths = np.array([sum(d.values()) for d in docs], dtype=np.float32)
        return BM25Index(
            self.n_docs + len(docs),
            postings,
            np.concatenate([self.lengths, new_lengths]),
            self.total_length + float(new_lengths.sum()),
        )

    def search(
        self,
        terms: Sequence[str],
        stemmer: Stemmer,
        mask: npt.NDArray[np.bool_] | None,
        k: int,
    ) -> list[tuple[int, float]]:
        """Top ``k`` (row, score) for the query terms among rows allowed by ``mask``."""
        stems = {s for t in terms for s in stemmer.tokens(t)}
        hits = [self.postings[s] for s in stems if s in self.postings]
        if not hits or k <= 0:
            return []
        n = self.n_docs
        avg = self.total_length / n or 1.0
        scores = np.zeros(n, dtype=np.float32)
        for rows, tf in hits:
            # FTS5's idf, floored so very common terms still count a little
            idf = max(1e-6, math.log((n - rows.size + 0.5) / (rows.size + 0.5)))
            norm = K1 * (1 - B + B * self.lengths[rows] / avg)
            scores[rows] += idf * tf * (K1 + 1) / (tf + norm)  # rows unique within a term
        cand = np.unique(np.concatenate([rows for rows, _ in hits]))
        if mask is not None:
            cand = cand[mask[cand]]
        if cand.size == 0:
            return []
        k = min(k, cand.size)
        sub = scores[cand]
        top = np.argpartition(-sub, k - 1)[:k]
        top = top[np.argsort(-sub[top], kind="stable")]
        return [(int(cand[i]), float(sub[i])) for i in top]
