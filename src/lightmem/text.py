"""Small text utilities shared by the pipeline and the stores (pure functions)."""

from __future__ import annotations

import math

from lightmem import lang
from lightmem.lang import WORD_RE

__all__ = [
    "MEANING_STOPWORDS",
    "NEGATIONS",
    "QUANTITIES",
    "STOPWORDS",
    "TOKENS_PER_WORD",
    "WORD_RE",
    "content_terms",
    "estimate_tokens",
    "token_weight",
    "whole_tokens",
    "words",
]

# Function words that carry no retrievable content. Negations are deliberately absent:
# dropping "not" or "never" would invert a memory's meaning.
STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself of off on once only or other our ours ourselves out over own same
    she should so some such than that the their theirs them themselves then there these they this
    those through to too under until up very was we were what when where which while who whom why
    will with would you your yours yourself yourselves oh hey hi wow yeah ok okay um uh hmm also
    really i'm it's that's i've i'll i'd you're you've we're they're
    """.split()
)

#: Stopwords that still say something in a line of keywords: some particles and
#: prepositions of direction and time ("gave up", "reached out", "before the move"), of
#: degree and quantity ("only", "more", "too", "own"). Search ignores them; readable text
#: keeps them. Not every such word: adding "until", "during", "from", "through", "between",
#: "than", "once", "then" changed no figure on the LoCoMo dev split (cover 0.792 at 800).
MEANING_STOPWORDS: frozenset[str] = frozenset(
    "up down out off over under about against before after above below again own more most "
    "few some each other same too very only".split()
)

NEGATIONS: frozenset[str] = frozenset(
    "no not never nor none nobody nothing nowhere neither cannot can't don't doesn't didn't "
    "won't wouldn't isn't aren't wasn't weren't haven't hasn't hadn't shouldn't couldn't".split()
)

# Quantities are facts even when common words: "half marathon", "three weeks", "first medal".
QUANTITIES: frozenset[str] = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty "
    "ninety hundred thousand million billion first second third fourth fifth last half quarter "
    "double twice once dozen hour hours minute minutes week weeks month months year years day "
    "days yesterday today tomorrow".split()
)

TOKENS_PER_WORD = 1.3


def words(text: str) -> list[str]:
    """Word tokens of ``text`` in order, case preserved (Chinese and Japanese segmented,
    see :mod:`lightmem.lang`)."""
    return lang.words(text)


def content_terms(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stopwords, in order, duplicates removed."""
    seen: dict[str, None] = {}
    for w in words(text.lower()):
        if w in STOPWORDS or w in seen:
            continue
        if w in lang.CJK_FUNCTION_WORDS or w in lang.CJK_QUESTION_WORDS:
            continue
        seen[w] = None
    return list(seen)


def estimate_tokens(text: str) -> int:
    """Approximate LLM tokens of ``text``, counted per script.

    Space-delimited text: whitespace words x 1.3 (the LoCoMo convention, so English budgets
    and baselines are unchanged). Han, kana and Hangul: one token per character, which is
    what an LLM tokenizer spends on them (cl100k_base: about 1.2 per Chinese character on
    the Chinese fixtures, see the README), plus the words x 1.3 of whatever else the text
    holds.
    """
    return whole_tokens(token_weight(text))


def token_weight(text: str) -> float:
    """:func:`estimate_tokens` of ``text`` before it is rounded up: texts joined by line
    breaks estimate at :func:`whole_tokens` of the sum of their weights, which is less
    than the sum of their rounded estimates."""
    cjk = lang.cjk_chars(text)
    rest = lang.strip_cjk(text) if cjk else text
    return len(rest.split()) * TOKENS_PER_WORD + cjk


def whole_tokens(weight: float) -> int:
    """A token weight rounded up to whole tokens (after rounding away float noise:
    3 x 1.3 is 3.9000000000000004, not more than 3.9)."""
    return math.ceil(round(weight, 6))
