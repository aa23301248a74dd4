"""Retrieval: dense, full-text (BM25) and hybrid search, hierarchical expansion, and the
re-ranking steps after fusion; the budget is packed by :mod:`lightmem.pipeline.packing`,
the context written by :mod:`lightmem.pipeline.context_format`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from lightmem.embed.base import Embedder
from lightmem.pipeline import time_match, validity
from lightmem.pipeline.answer_kind import answers_first
from lightmem.pipeline.candidates import Candidates
from lightmem.pipeline.expand import (
    expansion_terms,
    named_speakers,
    without_names,
    without_possessive,
)
from lightmem.pipeline.neighbours import NearWords
from lightmem.pipeline.own_words import own_words_first
from lightmem.pipeline.packing import Packer
from lightmem.pipeline.pending import buffered_first
from lightmem.pipeline.retrieve_params import RetrieveParams
from lightmem.pipeline.side_by_side import Search, run_both
from lightmem.pipeline.supersede import Detector
from lightmem.pipeline.token_count import TokenCounter
from lightmem.store.base import MemoryStore, ScoredId, Vector
from lightmem.store.text_index import Stemmer
from lightmem.text import content_terms
from lightmem.types import (
    EntryKind,
    Filters,
    RetrievalResults,
    Scope,
)

__all__ = ["Retriever", "behind_head", "rrf"]

# Searched unless the caller names kinds: facts and events. Topic summaries are reached
# through hierarchical mode or an explicit kind filter.
_SEARCHED: tuple[EntryKind, ...] = ("entry", "event")
#: Candidates whose speakers are matched against the names in a query.
_PROBE = 50
#: The share of the hybrid ranking's dense weight given to a query without the speakers it
#: names (see :meth:`Retriever._nameless`), whose vector the speaker focus also searches
#: with. 0.5 and that against neither (measured when added): the outside update sets'
#: current value first 0.278 -> 0.370 (held-out) and 0.352 -> 0.352, kept facts first
#: 0.654 -> 0.769 and 0.704 -> 0.815, list items 0.844 -> 0.938; LoCoMo dev all-evidence
#: recall 0.783 -> 0.804 at 400 tokens and 0.868 -> 0.870 at 800. All of it (1.0, no
#: focus change) lost LoCoMo at 800 tokens (0.860).
NAMELESS_SHARE = 0.5


class Retriever:
    """Runs one query against a store with the configured indexes."""

    def __init__(
        self, store: MemoryStore, embedder: Embedder, counter: TokenCounter | None = None
    ) -> None:
        """``counter``: what a token budget counts (default: the library's estimate)."""
        self._store = store
        self._embedder = embedder
        self._stemmer = Stemmer()
        self._packer = Packer(store, counter, self._stemmer)
        self._near = NearWords(embedder)
        #: the update pass's model-free detector, for buffered turns (:mod:`.pending`)
        self._detector = Detector(lambda words: embedder.embed(words, op="retrieve.pending"))

    def retrieve(
        self, query: str, scope: Scope, filters: Filters, p: RetrieveParams
    ) -> RetrievalResults:
        if p.mode == "hierarchical":
            return self._hierarchical(query, scope, filters, p)
        f = filters if filters.kinds is not None else replace(filters, kinds=_SEARCHED)
        qv = self._embedder.embed([query], op="retrieve")[0] if p.mode != "context" else None
        got = Candidates(self._store)
        lists = self._rankings(query, scope, f, p, p.mode, qv)
        fused = _fuse(lists, p.rrf_k)
        own_qv = qv
        if fused and qv is not None and len(lists) == 2:  # hybrid: rank fusion already
            again = self._nameless(query, scope, f, p, lists, fused, got)
            if again:
                fused, own_qv = again
        if fused and p.speaker_focus > 0 and f.speaker is None:
            fused = behind_head(
                fused, self._speaker_focus(query, scope, f, p, own_qv, fused, got), p
            )
        if fused and p.expand_weight > 0:
            grown = self._expanded(content_terms(query), scope, f, p, fused, got)
            fused = behind_head(fused, [(p.expand_weight, grown)], p)
        if fused and p.near_weight > 0 and p.limit > p.keep_first:
            # (with limit <= keep_first the head alone is returned: nothing to re-rank)
            fused = behind_head(fused, self._near_words(query, scope, f, p, fused, got), p)
        ranked = own_words_first(self._timed(query, fused, p, got), got.get, query, self._stemmer)
        ranked = answers_first(ranked, got.get, query, self._stemmer, p.answer_reach)
        ranked = buffered_first(ranked, got.get, query, self._detector, f.as_of)
        current = validity.rank(got.get, query, ranked, f.as_of, self._likeness(p))
        return self._packer.pack(current, p, query, got)

    def _likeness(self, p: RetrieveParams) -> validity.Likeness | None:
        """How the validity ranking tells statements alike in meaning (None: words only, as
        in BM25-only retrieval, which embeds nothing)."""
        if p.recency_similarity >= 1.0 or p.mode == "context":
            return None
        embed = self._embedder.embed
        return validity.Likeness(
            lambda texts: embed(texts, op="retrieve.likeness"), p.recency_similarity
        )

    def _speaker_focus(
        self,
        query: str,
        scope: Scope,
        f: Filters,
        p: RetrieveParams,
        qv: Vector | None,
        fused: list[ScoredId],
        got: Candidates,
    ) -> list[tuple[float, Sequence[ScoredId]]]:
        """The rankings among each named speaker's own memories, to fuse in (none when the
        query names every speaker of the best candidates: that would rank nothing apart).
        Speakers are looked for among the best :data:`_PROBE` candidates only."""
        names, speakers = self._named(query, fused, got)
        if not names or len(names) >= speakers:
            return []
        # Among a speaker's own memories their name only matches where they say it.
        named = {w for n in names for w in content_terms(n)}
        terms = [t for t in content_terms(query) if without_possessive(t) not in named]
        own = [replace(f, speaker=n) for n in names]
        return [
            (p.speaker_focus, _fuse(self._rankings(query, scope, g, p, p.mode, qv, terms), p.rrf_k))
            for g in own
        ]

    def _nameless(
        self,
        query: str,
        scope: Scope,
        f: Filters,
        p: RetrieveParams,
        lists: list[tuple[float, list[ScoredId]]],
        fused: list[ScoredId],
        got: Candidates,
    ) -> tuple[list[ScoredId], Vector] | None:
        """The hybrid ranking (``lists``, fused as ``fused``) again with
        :data:`NAMELESS_SHARE` of its dense weight given to the query without the speakers
        it names, and that query's vector (what the speaker focus searches their own
        memories with); nothing when it names none (or nothing else). A memory is embedded
        with its speaker ("Ingrid: Ugh, Mondays."), so a query naming them is nearest to
        their shortest turns, where the name weighs most: small talk came first for "Which
        city does Ingrid live in now?". The rest of the dense weight keeps the name's pull
        towards the named speaker's own turns."""
        names = self._named(query, fused, got)[0]
        bare = without_names(query, names) if names else ""
        if not bare or not content_terms(bare):
            return None
        vec = self._embedder.embed([bare], op="retrieve")[0]
        (dense_w, dense), text = lists
        return rrf(
            [
                (dense_w * (1 - NAMELESS_SHARE), dense),
                (dense_w * NAMELESS_SHARE, self._store.vector_search(vec, scope, f, p.candidates)),
                text,
            ],
            p.rrf_k,
        ), vec

    def _named(self, query: str, fused: list[ScoredId], got: Candidates) -> tuple[list[str], int]:
        """The speakers of the best :data:`_PROBE` candidates that ``query`` names, and how
        many speakers those candidates have."""
        probe = fused[:_PROBE]
        entries = got.get([i for i, _ in probe])
        ranked = [entries[i] for i, _ in probe if i in entries]
        return named_speakers(query, ranked), len({e.speaker for e in ranked})

    def _near_words(
        self,
        query: str,
        scope: Scope,
        f: Filters,
        p: RetrieveParams,
        fused: list[ScoredId],
        got: Candidates,
    ) -> list[tuple[float, Sequence[ScoredId]]]:
        """BM25 rankings for the query's words and their nearest words in the store, one
        among each speaker the query names (every one: a question about two people needs
        both people's turns), or one among all memories; none without near words. Only a
        named speaker's own memories: unrestricted, the near words' other senses pull in
        the other speaker's turns (dev split, 800 tokens: 0.847 against 0.862)."""
        near = self._near.near(self._store, scope, query, p.near_words, p.near_similarity)
        if not near:
            return []
        terms = [*content_terms(query), *near]
        names = self._named(query, fused, got)[0] if f.speaker is None else [f.speaker]
        only = [replace(f, speaker=n) for n in names] or [f]
        search = self._store.text_search
        return [(p.near_weight, search(terms, scope, g, p.candidates)) for g in only]

    def _expanded(
        self,
        words: Sequence[str],
        scope: Scope,
        f: Filters,
        p: RetrieveParams,
        fused: list[ScoredId],
        got: Candidates,
    ) -> list[ScoredId]:
        """A BM25 search for ``words`` plus the words of the best hits of ``fused`` that hold
        one of ``words`` (their stored text: the rare words the compressor kept), speakers'
        names left out; nothing when none of those hits holds a query word."""
        top = got.get([i for i, _ in fused[: p.expand_hits]])
        # only hits that hold a query word: a dense-only guess would spread its own topic
        stems = set(self._stemmer.tokens(" ".join(words)))
        best = [
            top[i]
            for i, _ in fused[: p.expand_hits]
            if i in top and stems.intersection(self._stemmer.tokens(top[i].original_text))
        ]
        if not best:
            return []
        terms = expansion_terms(words, best)
        return self._store.text_search(terms, scope, f, p.candidates)

    def _timed(
        self, query: str, ranked: list[ScoredId], p: RetrieveParams, got: Candidates
    ) -> list[ScoredId]:
        tq = time_match.TimeQuery.of(query)
        return time_match.lift(ranked, tq, got.get, p.time_weight, p.rrf_k)

    def _rankings(
        self,
        query: str,
        scope: Scope,
        f: Filters,
        p: RetrieveParams,
        mode: str,
        qv: Vector | None = None,
        terms: Sequence[str] | None = None,
    ) -> list[tuple[float, list[ScoredId]]]:
        """Dense and BM25 rankings of ``query`` with their weights, the dense one first, for
        :func:`_fuse` (``qv``: its vector if already computed; ``terms``: BM25 terms instead
        of the query's content words)."""
        dense: Search | None = None
        text: Search | None = None
        if mode in ("embedding", "hybrid"):
            vec = self._embedder.embed([query], op="retrieve")[0] if qv is None else qv
            dense = lambda: self._store.vector_search(vec, scope, f, p.candidates)  # noqa: E731
        if mode in ("context", "hybrid"):
            words = content_terms(query) if terms is None else terms
            text = lambda: self._store.text_search(words, scope, f, p.candidates)  # noqa: E731
        if dense is None or text is None:
            only = dense or text
            return [(1.0, only())] if only is not None else []
        ranked = run_both(self._store, dense, text)
        return [(p.dense_weight, ranked[0]), (p.text_weight, ranked[1])]

    def _hierarchical(
        self, query: str, scope: Scope, filters: Filters, p: RetrieveParams
    ) -> RetrievalResults:
        got = Candidates(self._store)
        qv = self._embedder.embed([query], op="retrieve")[0]  # one vector for both searches
        summaries = replace(filters, kinds=("summary",))
        topics = _fuse(self._rankings(query, scope, summaries, p, "hybrid", qv), p.rrf_k)
        top = topics[: p.topics]
        bonus = {}
        entries = got.get([i for i, _ in top])
        for rank, (sid, _) in enumerate(top):
            if sid in entries:
                bonus[entries[sid].topic_id] = p.topic_bonus / (p.rrf_k + rank)
        searched = replace(filters, kinds=filters.kinds or _SEARCHED)
        hits = _fuse(self._rankings(query, scope, searched, p, "hybrid", qv), p.rrf_k)
        if bonus:
            topic_of = {i: e.topic_id for i, e in got.get([i for i, _ in hits]).items()}
            hits = sorted(
                ((i, s + bonus.get(topic_of.get(i, ""), 0.0)) for i, s in hits),
                key=lambda x: -x[1],
            )
        ranked = top + self._timed(query, hits, p, got)
        ranked = buffered_first(ranked, got.get, query, self._detector, filters.as_of)
        current = validity.rank(got.get, query, ranked, filters.as_of, self._likeness(p))
        return self._packer.pack(current, p, query, got)


def behind_head(
    fused: list[ScoredId], others: Sequence[tuple[float, Sequence[ScoredId]]], p: RetrieveParams
) -> list[ScoredId]:
    """``fused`` fused with the ``others`` rankings (weight, ranking), its best
    ``keep_first`` hits kept in place ahead of them: ``retrieve(limit=10)`` is unchanged and a
    larger budget is filled with the re-ranking."""
    if not others:
        return fused
    head = fused[: p.keep_first]
    kept = {i for i, _ in head}
    both = rrf([(1.0, fused), *others], p.rrf_k)
    return head + [h for h in both if h[0] not in kept]


def _fuse(lists: Sequence[tuple[float, list[ScoredId]]], k: int) -> list[ScoredId]:
    """One ranking as it is (its own scores), several by :func:`rrf`."""
    if len(lists) == 1:
        return lists[0][1]
    return rrf(lists, k) if lists else []


def rrf(lists: Sequence[tuple[float, Sequence[ScoredId]]], k: int) -> list[ScoredId]:
    """Weighted reciprocal rank fusion: sum of weight / (k + rank) over the input rankings
    (each best first).

    Hits with equal scores share the best of their ranks: a list that cannot tell them apart
    gives them the same reward (e.g. BM25 hits on a name every other memory holds, which
    all score 0; see :data:`~lightmem.store.text_index.IDF_FLOOR`), instead of one by
    their arbitrary order. Equal sums (one memory ranked i-th by one list and j-th by the
    other, another the other way round) are ordered by the weighted sum of each list's
    scores scaled to [0, 1] within the list, so the larger score gap decides, not list order.
    """
    fused: dict[str, float] = {}
    scaled: dict[str, float] = {}
    for weight, hits in lists:
        if not hits:
            continue
        scores = [s for _, s in hits]
        lo = min(scores)
        span = max(scores) - lo
        rank, last = 0, None
        for pos, (eid, score) in enumerate(hits):
            if score != last:
                rank, last = pos, score
            fused[eid] = fused.get(eid, 0.0) + weight / (k + rank)
            part = (score - lo) / span if span > 0 else 1.0
            scaled[eid] = scaled.get(eid, 0.0) + weight * part
    return sorted(fused.items(), key=lambda x: (-x[1], -scaled[x[0]]))
