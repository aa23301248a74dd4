"""What one retrieval is asked to do: :class:`RetrieveParams`, filled from the config's
``retrieval`` section and a call's arguments (:mod:`lightmem.memory.params`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lightmem.pipeline.answer_kind import REACH
from lightmem.types import RetrieveMode

__all__ = ["CONTEXT_TEXTS", "READABLE_TEXTS", "ContextText", "ReadableText", "RetrieveParams"]

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
    #: the characters of memory text (stored, original and context, with an event's facts)
    #: the results may hold: they end once the next would pass it, at least one kept, and
    #: are marked ``truncated`` (None: no limit; a server answering untrusted callers sets
    #: one, as stored memories may each hold megabytes).
    max_chars: int | None = None
