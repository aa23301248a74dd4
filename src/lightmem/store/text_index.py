"""BM25 over an in-memory inverted index (numpy), aligned with the vector cache's rows.

Like the vector cache it is derived state, rebuilt from the store's entries. Scoring is
Okapi BM25 with FTS5's constants (k1 = 1.2, b = 0.75) on Snowball-stemmed words; a query
costs a few array additions instead of scoring every matching row in SQL.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.lang import index_terms
from lightmem.store.topk import top_positions

__all__ = ["IDF_FLOOR", "K1", "MAX_DOCUMENT_TERMS", "B", "BM25Index", "Stemmer", "document_terms"]

K1 = 1.2
B = 0.75
#: The smallest idf a matching term adds. BM25's idf is negative for a term in at least
#: half of the documents; FTS5 floors it at 1e-6 so such terms "still count a little", which
#: orders the rows that match only such terms by length, and rank fusion rewards that
#: order as if it were evidence. At 0 those rows all score 0, and the fusion
#: (:func:`lightmem.pipeline.retrieve.rrf`) gives equal scores the same rank.
IDF_FLOOR = 0.0
#: The words of a memory the keyword index holds: its first 10,000 (Lucene's long-standing
#: field default), the memory's own words before its context's. Each distinct term costs
#: the in-memory index ~400 bytes, so 100 memories of 400,000 characters of distinct words
#: held 2.5 GB for what 40 MB of text stored; a longer memory is found by its beginning
#: (and by its vector, which samples the whole text).
MAX_DOCUMENT_TERMS = 10_000


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


def document_terms(text: str, stemmer: Stemmer) -> list[str]:
    """The stemmed terms a document is indexed under (both backends): its first
    :data:`MAX_DOCUMENT_TERMS`."""
    return stemmer.tokens(text)[:MAX_DOCUMENT_TERMS]


class BM25Index:
    """Term frequencies per term and document lengths; BM25 weights are computed at query
    time from the current collection statistics, so appending documents is cheap.

    Rows are appended in place (:meth:`append`) and removed by tombstone
    (:meth:`remove`): a removed row stays in the postings but leaves the collection
    statistics, and searches given the ``alive`` mask skip it and leave it out of the
    document frequencies, so scores equal those of an index built over the live rows. A
    search on another thread sees the rows that were complete when it started.
    """

    def __init__(self) -> None:
        self.postings: dict[str, tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]] = {}
        self._lengths = np.zeros(1024, dtype=np.float32)
        self.n_rows = 0  # rows ever appended (live and removed)
        self.n_docs = 0  # live rows
        self.total_length = 0.0  # of live rows

    @property
    def lengths(self) -> npt.NDArray[np.float32]:
        return self._lengths[: self.n_rows]

    @classmethod
    def empty(cls) -> BM25Index:
        return cls()

    @classmethod
    def build(cls, texts: Sequence[str], stemmer: Stemmer) -> BM25Index:
        index = cls()
        index.append(texts, stemmer)
        return index

    def append(self, texts: Sequence[str], stemmer: Stemmer) -> None:
        """Index ``texts`` as rows ``n_rows, n_rows + 1, ...``."""
        docs = [Counter(document_terms(t, stemmer)) for t in texts]
        start, m = self.n_rows, len(docs)
        by_term: dict[str, tuple[list[int], list[int]]] = {}
        for i, counts in enumerate(docs, start=start):
            for term, tf in counts.items():
                entry = by_term.setdefault(term, ([], []))
                entry[0].append(i)
                entry[1].append(tf)
        new_lengths = np.array([sum(d.values()) for d in docs], dtype=np.float32)
        lengths = self._lengths
        if lengths.shape[0] < start + m:
            lengths = np.zeros(max(start + m, 2 * lengths.shape[0]), dtype=np.float32)
            lengths[:start] = self._lengths[:start]
        lengths[start : start + m] = new_lengths
        self._lengths = lengths  # before the postings that point at the new rows
        postings = self.postings
        for term, (rows, tfs) in by_term.items():
            r = np.array(rows, dtype=np.int64)
            f = np.array(tfs, dtype=np.float32)
            old = postings.get(term)
            postings[term] = (
                (r, f)
                if old is None
                else (np.concatenate([old[0], r]), np.concatenate([old[1], f]))
            )
        self.n_rows = start + m
        self.n_docs += m
        self.total_length += float(new_lengths.sum())

    def remove(self, rows: npt.NDArray[np.int64]) -> None:
        """Take live ``rows`` out of the statistics (the caller's alive mask hides them)."""
        self.n_docs -= int(rows.size)
        self.total_length -= float(self._lengths[rows].sum())

    def search(
        self,
        terms: Sequence[str],
        stemmer: Stemmer,
        mask: npt.NDArray[np.bool_] | None,
        k: int,
        alive: npt.NDArray[np.bool_] | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` (row, score) for the query terms among rows allowed by ``mask``;
        ``alive`` marks the rows not removed (None: all are)."""
        # In query order, not a set's: float32 sums in a per-process hash order made scores
        # differ in the last bit between runs, and near-equal hits swap places.
        stems = dict.fromkeys(s for t in terms for s in stemmer.tokens(t))
        hits = [self.postings[s] for s in stems if s in self.postings]
        n = self.n_docs
        if not hits or k <= 0 or n <= 0:
            return []
        lengths = self._lengths
        avg = self.total_length / n or 1.0
        scores = np.zeros(lengths.shape[0], dtype=np.float32)
        for rows, tf in hits:
            df = rows.size if alive is None else int(np.count_nonzero(alive[rows]))
            # FTS5's idf, floored at IDF_FLOOR (a term in half the documents tells nothing)
            idf = max(IDF_FLOOR, math.log((n - df + 0.5) / (df + 0.5)))
            norm = K1 * (1 - B + B * lengths[rows] / avg)
            scores[rows] += idf * tf * (K1 + 1) / (tf + norm)  # rows unique within a term
        cand = np.unique(np.concatenate([rows for rows, _ in hits]))
        for allowed in (alive, mask):
            if allowed is not None:
                cand = cand[cand < allowed.shape[0]]
                cand = cand[allowed[cand]]
        if cand.size == 0:
            return []
        k = min(k, cand.size)
        sub = scores[cand]
        top = top_positions(sub, k)  # cand is ascending: ties go to the earlier row
        return [(int(cand[i]), float(sub[i])) for i in top]

    # -- persistence ------------------------------------------------------------------
    def to_arrays(self, alive: npt.NDArray[np.bool_]) -> dict[str, npt.NDArray[Any]]:
        """The postings of the ``alive`` rows and every row's length (0 for the others) as
        flat arrays; :meth:`from_arrays` reads them back."""
        names, counts, all_rows, all_tfs = [], [], [], []
        for term, (rows, tfs) in self.postings.items():
            live = alive[rows]
            if not live.any():
                continue
            names.append(term)
            counts.append(int(np.count_nonzero(live)))
            all_rows.append(rows[live])
            all_tfs.append(tfs[live])
        return {
            "bm25_terms": np.frombuffer("\x00".join(names).encode(), dtype=np.uint8),
            "bm25_counts": np.array(counts, dtype=np.int64),
            "bm25_rows": np.concatenate(all_rows) if all_rows else np.zeros(0, np.int64),
            "bm25_tfs": np.concatenate(all_tfs) if all_tfs else np.zeros(0, np.float32),
            "bm25_lengths": np.where(alive, self.lengths, np.float32(0)),
        }

    @classmethod
    def from_arrays(
        cls, arrays: dict[str, npt.NDArray[Any]], alive: npt.NDArray[np.bool_]
    ) -> BM25Index:
        return cls().load_arrays(arrays, alive)

    def load_arrays(
        self, arrays: dict[str, npt.NDArray[Any]], alive: npt.NDArray[np.bool_]
    ) -> BM25Index:
        """Take the index saved by :meth:`to_arrays` (this object is new and empty)."""
        raw = arrays["bm25_terms"].tobytes().decode()
        names = raw.split("\x00") if raw else []
        counts = arrays["bm25_counts"]
        rows = arrays["bm25_rows"].astype(np.int64, copy=False)
        tfs = arrays["bm25_tfs"].astype(np.float32, copy=False)
        lengths = arrays["bm25_lengths"].astype(np.float32, copy=False)
        if (
            len(names) != counts.size
            or int(counts.sum()) != rows.size
            or rows.size != tfs.size
            or lengths.size != alive.size
        ):
            raise ValueError("BM25 sections disagree in size")
        if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= lengths.size):
            raise ValueError("BM25 postings point past the rows")
        start = 0
        for name, end in zip(names, np.cumsum(counts).tolist(), strict=True):
            self.postings[name] = (rows[start:end], tfs[start:end])
            start = end
        self._lengths = np.concatenate([lengths, np.zeros(1024, dtype=np.float32)])
        self.n_rows = lengths.size
        self.n_docs = int(np.count_nonzero(alive))
        self.total_length = float(lengths[alive].sum())
        return self
