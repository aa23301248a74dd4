"""Retrieval: dense, full-text (BM25) and hybrid search, hierarchical expansion, budget packing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from lightmem.embed.base import Embedder
from lightmem.errors import ConfigError
from lightmem.pipeline import time_match, validity
from lightmem.pipeline.answer_kind import REACH, answers_first
from lightmem.pipeline.candidates import Candidates
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.expand import (
    expansion_terms,
    named_speakers,
    without_names,
    without_possessive,
)
from lightmem.pipeline.extractive import select_sentences
from lightmem.pipeline.neighbours import NearWords
from lightmem.pipeline.own_words import own_words_first
from lightmem.pipeline.pending import buffered_first
from lightmem.pipeline.side_by_side import Search, run_both
from lightmem.pipeline.supersede import Detector
from lightmem.pipeline.token_count import TokenCounter, WordEstimate
from lightmem.sanitize import inline, line_speaker, token
from lightmem.store.base import MemoryStore, ScoredId, Vector
from lightmem.store.text_index import Stemmer
from lightmem.text import MEANING_STOPWORDS, content_terms, estimate_tokens, whole_tokens
from lightmem.timeparse import format_date
from lightmem.timeresolve import said_label
from lightmem.types import (
    EntryKind,
    Filters,
    MemoryEntry,
    RetrievalResult,
    RetrieveMode,
    Scope,
)

__all__ = [
    "CONTEXT_TEXTS",
    "READABLE_TEXTS",
    "ContextText",
    "ReadableText",
    "RetrieveParams",
    "Retriever",
    "behind_head",
    "date_header",
    "format_context",
    "format_line",
    "related_line",
    "rrf",
]

ContextText = Literal["stored", "sentences"]
CONTEXT_TEXTS: tuple[ContextText, ...] = ("stored", "sentences")
ReadableText = Literal["words", "sentences"]
READABLE_TEXTS: tuple[ReadableText, ...] = ("words", "sentences")


@dataclass(frozen=True, slots=True)
class RetrieveParams:
    """``candidates``: hits taken from each index before fusion; ``rrf_k``: the reciprocal
    rank fusion constant; ``topics``: summaries placed first in hierarchical mode."""

    mode: RetrieveMode = "hybrid"
    limit: int = 10
    budget_tokens: int | None = None
    candidates: int = 100
    rrf_k: int = 60
    dense_weight: float = 1.0
    text_weight: float = 1.0
    topics: int = 2
    topic_bonus: float = 0.5
    #: weight of the ranking among a named speaker's own memories (0: off; see
    #: :mod:`lightmem.pipeline.expand`), and how many of the best plain hits keep their
    #: place ahead of that re-ranking (so a default ``limit`` of 10 is unchanged; a budget
    #: that holds more is filled with the focused ranking).
    speaker_focus: float = 1.0
    keep_first: int = 10
    #: what a memory shows in the context: its stored (pre-compressed) text, or the
    #: sentences of its original text most about the query, up to ``sentence_words`` words
    #: (see :mod:`lightmem.pipeline.extractive`).
    context_text: ContextText = "stored"
    sentence_words: int = 40
    #: within a token budget, the best ``readable_first`` memories packed show more of
    #: their original text than the stored (pre-compressed) text holds, while what that
    #: adds stays within ``readable_share`` of the budget: the answer is usually among the
    #: first few, and compressed text drops words of it; the rest keep the shorter stored
    #: text, so the budget still holds many memories. ``readable_text``: "words", every
    #: word of the original but stopwords (those saying something in keywords kept:
    #: :data:`~lightmem.text.MEANING_STOPWORDS`), in order, only where that is longer
    #: than the stored text (an LLM-written fact stays as written; text in a language other
    #: than English is shown whole, as the compressor cannot cut it); "sentences", for those holding
    #: a (stemmed) query word, the sentences most about the query (up to
    #: ``sentence_words`` words). Without a budget nothing changes.
    readable_first: int = 15
    readable_share: float = 0.15
    readable_text: ReadableText = "words"
    #: weight of a second BM25 search for the query's words and those of its best
    #: ``expand_hits`` hits' stored text (0: off; see :mod:`lightmem.pipeline.expand`),
    #: fused after the first ``keep_first`` hits
    expand_weight: float = 0.5
    expand_hits: int = 3
    #: weight of a BM25 search, among each named speaker's memories (all memories when the
    #: query names none), for the query's words and the store's ``near_words`` words
    #: nearest to each of them by the embedder (cosine at least ``near_similarity``),
    #: fused after the first ``keep_first`` hits (0: off; see
    #: :mod:`lightmem.pipeline.neighbours`): "pets" finds "dog", "sports" "soccer"
    near_weight: float = 0.5
    near_words: int = 5
    near_similarity: float = 0.35
    time_weight: float = 0.5  # see :mod:`lightmem.pipeline.time_match`
    #: for a question about the present, a speaker's newer statement that the question's
    #: words do not tie to their older one still comes first when the embedder finds the two
    #: statements' own texts at least this alike (cosine; 1.0: words only; see
    #: :func:`lightmem.pipeline.validity.newer_first`). 0.3 was measured with the default
    #: embedder (wordllama); an embedder whose unrelated sentences score higher needs more.
    recency_similarity: float = 0.3
    #: for a question asking for a place, a person, a number or a time, a memory that could
    #: answer (it may hold one, or a word of the question) passes up to this many memories
    #: just above it that are plainly small talk: questions, requests, greetings and
    #: thanks (0: off; see :mod:`lightmem.pipeline.answer_kind`)
    answer_reach: int = REACH
    #: within a token budget, memories packed after the first ``tail_after`` show their
    #: stored text cut again to its ``tail_rate`` share of words (the rarest, names and
    #: numbers always: :class:`~lightmem.pipeline.compress.EntropyCompressor`; 1.0: off).
    #: The answer is usually among the first few; the rest mostly add *which* other turns
    #: exist (a list question's other items), and a few words each let far more of them
    #: fit. Without a budget nothing changes.
    tail_after: int = 12
    tail_rate: float = 0.2


def format_line(entry: MemoryEntry) -> str:
    """How one memory appears under its date header in prompt context: on one line, opened
    by its speaker as one token (quoted when it holds a colon, a quote or a line break, or
    starts like a bullet or a header) or, without one, by a bullet ("- "), then the time
    it speaks of when one was resolved, e.g. "(week before 9 June 2023)" (see
    :func:`~lightmem.timeresolve.said_label`). A speaker's line
    has no bullet: it would cost a token per memory and tell the reader nothing."""
    if entry.kind == "summary":
        return f"- {entry.mark} {inline(entry.text)}"
    when = f" ({said_label(entry.event_time, entry.timestamp)})" if entry.event_time else ""
    if entry.kind == "event":
        return f"- {entry.mark} {inline(entry.text)}{when}"
    lead = f"{line_speaker(entry.speaker)}: " if entry.speaker else "- "
    return f"{lead}{inline(entry.text)}{when}{validity.label(entry)}"


def date_header(entry: MemoryEntry) -> str:
    return f"[{format_date(entry.timestamp) or 'undated'}]"


def format_context(results: Sequence[RetrievalResult], *, cite: bool = False) -> str:
    """Results as prompt context, grouped under one header per day in time order. The token
    budget of :meth:`Retriever.retrieve` is measured on exactly this text (headers included);
    ``cite=True`` appends each line's source ids, which costs extra tokens.

    Memory text is data: angle brackets are escaped so stored text cannot open or close
    markup in the prompt around it, and every field stays on its own line (no stored text can
    start a line, a date header or a speaker of its own).
    """
    groups: dict[str, list[RetrievalResult]] = {}
    for r in sorted(
        results, key=lambda r: r.entry.timestamp.timestamp() if r.entry.timestamp else float("inf")
    ):
        groups.setdefault(date_header(r.entry), []).append(r)
    lines = []
    for header, rs in groups.items():
        lines.append(header)
        for r in rs:
            ids = ", ".join(token(i) for i in r.source_ids)
            cited = f" (source: {ids})" if cite and r.source_ids else ""
            lines.append(_context_line(r.entry) + _escape(cited))
            lines.extend(_escape(related_line(f)) for f in r.related)
    return "\n".join(lines)


def related_line(fact: MemoryEntry) -> str:
    """A fact shown under its event."""
    return f"  - {inline(fact.text)}"


def _context_line(entry: MemoryEntry) -> str:
    """``format_line`` as the context writes it (escaped), which is what a budget weighs."""
    return _escape(format_line(entry))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


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
#: Texts remembered cut (see :meth:`Retriever._cut`), and the longest remembered: at most
#: 100,000 texts of up to 2,000 characters whatever a tenant stores.
_KEEP_CUTS = 100_000
_CUT_CHARS = 2_000


class Retriever:
    """Runs one query against a store with the configured indexes."""

    def __init__(
        self, store: MemoryStore, embedder: Embedder, counter: TokenCounter | None = None
    ) -> None:
        """``counter``: what a token budget counts (default: the library's estimate)."""
        self._store = store
        self._embedder = embedder
        self._counter = counter or WordEstimate()
        self._stemmer = Stemmer()
        self._tails: dict[float, EntropyCompressor] = {}
        self._cuts: dict[tuple[float, frozenset[str], str], str] = {}
        self._near = NearWords(embedder)
        #: the update pass's model-free detector, for buffered turns (:mod:`.pending`)
        self._detector = Detector(lambda words: embedder.embed(words, op="retrieve.pending"))

    def retrieve(
        self, query: str, scope: Scope, filters: Filters, p: RetrieveParams
    ) -> list[RetrievalResult]:
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
        return self._pack(current, p, query, got)

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
    ) -> list[RetrievalResult]:
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
        return self._pack(current, p, query, got)

    def _pack(
        self,
        ranked: list[ScoredId],
        p: RetrieveParams,
        query: str,
        got: Candidates,
    ) -> list[RetrievalResult]:
        """Memories in rank order while they fit the budget, each as shown for ``query``.
        The text of the memories after the first ``tail_after`` is cut (``tail_rate``)
        only where that can help: a budget that held them all as stored, or missed only
        memories before the tail began, keeps every word; and the cut packing is used only
        if it holds at least as many memories (greedy packing with skips is not monotone:
        a long memory that now fits can crowd out several short ones)."""
        whole, tail_missed = self._pack_once(ranked, replace(p, tail_rate=1.0), query, got)
        whole = self._checked(whole, p)
        if p.budget_tokens is None or p.tail_rate >= 1.0 or not tail_missed:
            return whole  # (tail_missed also needs limit > tail_after)
        if p.tail_rate <= 0:
            raise ConfigError(f"retrieval.tail_rate: {p.tail_rate} is outside (0, 1]")
        cut = self._checked(self._pack_once(ranked, p, query, got)[0], p)
        return cut if len(cut) >= len(whole) else whole

    def _checked(self, out: list[RetrievalResult], p: RetrieveParams) -> list[RetrievalResult]:
        """``out`` without its last memories while the whole context it formats counts
        more than the budget: a real tokenizer's count of joined lines can differ from the
        sum of theirs (the estimate's never does: ``exact_sum``)."""
        if p.budget_tokens is None or self._counter.exact_sum:
            return out
        while out and self._counter.count(format_context(out)) > p.budget_tokens:
            out = out[:-1]
        return out

    def _pack_once(
        self,
        ranked: list[ScoredId],
        p: RetrieveParams,
        query: str,
        got: Candidates,
    ) -> tuple[list[RetrievalResult], bool]:
        """One packing of ``ranked`` into the budget, and whether a memory after the first
        ``tail_after`` packed did not fit (where cutting the tail could make room)."""
        full = False
        out: list[RetrievalResult] = []
        shown = self._shown(query, p)
        readable = self._readable(query, p)
        headers: set[str] = set()
        used = more = 0.0  # token weight packed; of it, what readable text added
        # Entries are fetched a few at a time: most queries stop after `limit` of them.
        chunk = max(2 * p.limit, 16)
        for start in range(0, len(ranked), chunk):
            part = ranked[start : start + chunk]
            entries = got.get([i for i, _ in part])
            for eid, score in part:
                e = entries.get(eid)
                if e is None:  # deleted between search and fetch
                    continue
                related: tuple[MemoryEntry, ...] = ()
                if e.kind == "event":
                    related = tuple(
                        self._store.list_entries(e.scope, Filters(event_id=e.id), 50, 0)
                    )
                e = shown(e)
                options = [(e, 0.0)]
                if p.budget_tokens is not None:
                    options = self._within_budget(e, len(out), more, p, readable)
                fit = _first_fit(options, related, headers, (used, p.budget_tokens), self._counter)
                if fit is None:
                    full = full or len(out) >= p.tail_after
                    continue  # a shorter memory further down may still fit
                e, extra, cost = fit
                tokens = whole_tokens(used + cost) - whole_tokens(used)
                used += cost
                more += extra
                headers.add(date_header(e))
                out.append(RetrievalResult(entry=e, score=score, tokens=tokens, related=related))
                if len(out) >= p.limit:
                    return out, full
        return out, full

    def _within_budget(
        self,
        e: MemoryEntry,
        rank: int,
        more: float,
        p: RetrieveParams,
        readable: Callable[[MemoryEntry], MemoryEntry | None],
    ) -> list[tuple[MemoryEntry, float]]:
        """How the memory packed after ``rank`` others into a budget may be shown, best
        first, each with the token weight its readable text adds (``more``: what readable
        text added to the memories packed so far). The best ``readable_first``: their
        ``readable`` text while the additions stay within ``readable_share`` of the budget
        (where this overlaps the tail, readable text comes first). Then the text it has
        anyway, so a readable line that misses the budget does not drop the memory: after
        the first ``tail_after``, the stored text cut to its rarest ``tail_rate`` share of
        words, so more memories fit; before, the stored text."""
        options: list[tuple[MemoryEntry, float]] = []
        whole = readable(e) if rank < p.readable_first else None
        if whole is not None and p.budget_tokens is not None:
            weight = self._counter.weight
            extra = weight(_context_line(whole)) - weight(_context_line(e))
            if more + extra <= p.readable_share * p.budget_tokens:
                options.append((whole, extra))
        if rank >= p.tail_after and p.tail_rate < 1.0 and e.kind == "entry":
            return [*options, (replace(e, text=self._cut(p.tail_rate, e.text)), 0.0)]
        return [*options, (e, 0.0)]

    def _cut(self, rate: float, text: str, keep: frozenset[str] = frozenset()) -> str:
        """``text`` cut to its rarest ``rate`` share of words (stopwords never, but those in
        ``keep``), remembered: a budget looks at a few hundred candidates per query, mostly
        the same memories query after query."""
        if rate not in self._tails:  # one per rate: it caches word scores
            self._tails[rate] = EntropyCompressor(rate)
        if len(text) > _CUT_CHARS:  # rare, and not worth holding in memory
            return self._tails[rate].cut(text, keep)
        key = (rate, keep, text)
        cut = self._cuts.get(key)
        if cut is None:
            if len(self._cuts) >= _KEEP_CUTS:
                self._cuts.clear()
            cut = self._cuts[key] = self._tails[rate].cut(text, keep)
        return cut

    def _readable(
        self, query: str, p: RetrieveParams
    ) -> Callable[[MemoryEntry], MemoryEntry | None]:
        """How one of the best memories packed shows more of its original text (None: it
        stays as stored)."""
        if p.readable_text == "sentences":
            shown = self._shown(query, replace(p, context_text="sentences"))
            qstems = set(self._stemmer.tokens(" ".join(content_terms(query))))

            def sentences(e: MemoryEntry) -> MemoryEntry | None:
                held = qstems.intersection(self._stemmer.tokens(e.original_text))
                return shown(e) if held else None

            return sentences

        def words(e: MemoryEntry) -> MemoryEntry | None:
            if e.kind != "entry" or not e.original_text:
                return None
            text = self._cut(1.0, e.original_text, MEANING_STOPWORDS)
            longer = estimate_tokens(text) > estimate_tokens(e.text)
            return replace(e, text=text) if longer else None

        return words

    def _shown(self, query: str, p: RetrieveParams) -> Callable[[MemoryEntry], MemoryEntry]:
        """How an entry appears in the context (and is counted against the budget)."""
        if p.context_text == "stored":
            return lambda e: e
        stems = set(self._stemmer.tokens(" ".join(content_terms(query))))
        words = p.sentence_words

        def sentences(e: MemoryEntry) -> MemoryEntry:
            if e.kind != "entry" or not e.original_text:
                return e
            text = select_sentences(e.original_text, stems, words, self._stemmer.tokens)
            return replace(e, text=text)

        return sentences


def _first_fit(
    options: Sequence[tuple[MemoryEntry, float]],
    related: Sequence[MemoryEntry],
    headers: set[str],
    packed: tuple[float, int | None],
    counter: TokenCounter,
) -> tuple[MemoryEntry, float, float] | None:
    """The first way of showing a memory (with its readable extra) that fits the budget
    (``packed``: the weight packed so far and the budget), and its token weight: its line,
    its facts' lines and its date header unless one is packed already. Weights, not
    rounded tokens, add up: the budget holds the whole context's count, not the sum of
    each line's rounded-up one."""
    used, budget = packed
    # the lines as the context writes them (escaped: "&lt;" is more tokens than "<")
    rest = sum(counter.weight(_escape(related_line(f))) for f in related)
    for e, extra in options:
        cost = counter.weight(_context_line(e)) + rest
        if date_header(e) not in headers:
            cost += counter.weight(date_header(e))
        if budget is None or whole_tokens(used + cost) <= budget:
            return e, extra, cost
    return None


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
