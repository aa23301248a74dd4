"""Readable memories within a budget: whole sentences of a memory's original text, chosen
for the question at hand, instead of its keyword-compressed text.

A memory is shown whole when it is at most ``max_words`` words; a longer one keeps the
sentences that share the most (stemmed) words with the query, then the earliest, in their
original order, up to ``max_words`` words (a single longer sentence is cut at a word
boundary and marked with an ellipsis).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = ["select_sentences", "sentences"]

_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+")
_WORDS = re.compile(r"\S+")


def sentences(text: str) -> list[str]:
    """``text`` split after sentence-final punctuation followed by white space."""
    return [s for s in _SENTENCE_END.split(text.strip()) if s]


def select_sentences(
    text: str,
    query_stems: set[str],
    max_words: int,
    stems: Callable[[str], Iterable[str]],
) -> str:
    """The sentences of ``text`` most about the query, within ``max_words`` words."""
    if len(_WORDS.findall(text)) <= max_words:
        return text
    parts = sentences(text)
    scored = sorted(
        range(len(parts)),
        key=lambda i: (-len(query_stems.intersection(stems(parts[i]))), i),
    )
    chosen: list[int] = []
    used = 0
    for i in scored:
        n = len(_WORDS.findall(parts[i]))
        if used + n <= max_words:
            chosen.append(i)
            used += n
    if not chosen:  # even the best sentence is too long: its first words
        first = _WORDS.findall(parts[scored[0]])[:max_words]
        return " ".join(first) + " …"
    return " ".join(parts[i] for i in sorted(chosen))
