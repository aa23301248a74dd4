"""Budget packing: the ranked memories that fit a token budget, each shown as the context
writes it (its stored text, more of its original text for the best few, its text cut
shorter in the tail), weighed on exactly the lines :func:`format_context` writes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from lightmem.errors import ConfigError
from lightmem.pipeline.candidates import Candidates
from lightmem.pipeline.compress import EntropyCompressor
from lightmem.pipeline.context_format import (
    context_line,
    date_header,
    escape,
    format_context,
    related_line,
)
from lightmem.pipeline.extractive import select_sentences
from lightmem.pipeline.retrieve_params import RetrieveParams
from lightmem.pipeline.token_count import TokenCounter, WordEstimate
from lightmem.store.base import MemoryStore, ScoredId
from lightmem.store.text_index import Stemmer
from lightmem.text import MEANING_STOPWORDS, content_terms, estimate_tokens, whole_tokens
from lightmem.types import Filters, MemoryEntry, RetrievalResult, RetrievalResults

__all__ = ["Packer"]

#: Texts remembered cut (see :meth:`Packer._cut`), and the longest remembered: at most
#: 100,000 texts of up to 2,000 characters whatever a tenant stores.
_KEEP_CUTS = 100_000
_CUT_CHARS = 2_000
_MAX_CHUNK = 64  # entries fetched at once while packing


class Packer:
    """Packs one retrieval's ranking into its budget (``store``: where an event's facts are
    read; ``counter``: what the budget counts)."""

    def __init__(
        self,
        store: MemoryStore,
        counter: TokenCounter | None = None,
        stemmer: Stemmer | None = None,
    ) -> None:
        self._store = store
        self._counter = counter or WordEstimate()
        self._stemmer = stemmer or Stemmer()
        self._tails: dict[float, EntropyCompressor] = {}
        self._cuts: dict[tuple[float, frozenset[str], str], str] = {}

    def pack(
        self,
        ranked: list[ScoredId],
        p: RetrieveParams,
        query: str,
        got: Candidates,
    ) -> RetrievalResults:
        """Memories in rank order while they fit the budget, each as shown for ``query``.
        The text of the memories after the first ``tail_after`` is cut (``tail_rate``)
        only where that can help: a budget that held them all as stored, or missed only
        memories before the tail began, keeps every word; and the cut packing is used only
        if it holds at least as many memories (greedy packing with skips is not monotone:
        a long memory that now fits can crowd out several short ones)."""
        packed, tail_missed = self.pack_once(ranked, replace(p, tail_rate=1.0), query, got)
        whole = self._checked(packed, p)
        if p.budget_tokens is None or p.tail_rate >= 1.0 or not tail_missed:
            return whole  # (tail_missed also needs limit > tail_after)
        if p.tail_rate <= 0:
            raise ConfigError(f"retrieval.tail_rate: {p.tail_rate} is outside (0, 1]")
        cut = self._checked(self.pack_once(ranked, p, query, got)[0], p)
        return cut if len(cut) >= len(whole) else whole

    def _checked(self, out: RetrievalResults, p: RetrieveParams) -> RetrievalResults:
        """``out`` without its last memories while the whole context it formats counts
        more than the budget: a real tokenizer's count of joined lines can differ from the
        sum of theirs (the estimate's never does: ``exact_sum``)."""
        if p.budget_tokens is None or self._counter.exact_sum:
            return out
        n = len(out)
        while n and self._counter.count(format_context(out[:n])) > p.budget_tokens:
            n -= 1
        return out if n == len(out) else RetrievalResults(out[:n], truncated=out.truncated)

    def pack_once(
        self,
        ranked: list[ScoredId],
        p: RetrieveParams,
        query: str,
        got: Candidates,
    ) -> tuple[RetrievalResults, bool]:
        """One packing of ``ranked`` into the budget (``truncated`` where ``max_chars``
        ended it), and whether a memory after the first ``tail_after`` packed did not fit
        (where cutting the tail could make room)."""
        full = False
        out = RetrievalResults()
        chars = 0
        shown = self._shown(query, p)
        readable = self._readable(query, p)
        headers: set[str] = set()
        used = more = 0.0  # token weight packed; of it, what readable text added
        # Entries are fetched a few at a time: most queries stop after `limit` of them, and
        # a large limit must not hold every entry's text at once.
        chunk = min(max(2 * p.limit, 16), _MAX_CHUNK)
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
                result = RetrievalResult(entry=e, score=score, tokens=0, related=related)
                if p.max_chars is not None and out and chars + result.chars > p.max_chars:
                    out.truncated = True
                    return out, full
                chars += result.chars
                tokens = whole_tokens(used + cost) - whole_tokens(used)
                used += cost
                more += extra
                headers.add(date_header(e))
                out.append(replace(result, tokens=tokens))
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
            extra = weight(context_line(whole)) - weight(context_line(e))
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
    rest = sum(counter.weight(escape(related_line(f))) for f in related)
    for e, extra in options:
        cost = counter.weight(context_line(e)) + rest
        if date_header(e) not in headers:
            cost += counter.weight(date_header(e))
        if budget is None or whole_tokens(used + cost) <= budget:
            return e, extra, cost
    return None
