"""Evidence from several places: speaker focus, a re-ranking between fusion and packing.

A question about a person ("What books has Melanie read?") is answered by many turns of that
person spread over many sessions, while the nearest turns are often the *other* speaker
saying the name ("Melanie, did you ..."). When the query names a speaker of the candidate
memories, the same query is searched again among that speaker's memories only (without the
name as a keyword) and that ranking is fused with the first one, so the person's own turns
rise.

Expansion from the best hits: the other memories about the same thing share the best hits'
rare words (a person's name the question does not give, a place, an object), not the
question's. A second BM25 search for the query's words plus those of the best hits' stored
text is fused with the first ranking (pseudo-relevance feedback).

Both only re-order what the indexes return: nothing is invented, nothing dropped.

(Measured on the LoCoMo dev split and left out: a per-topic diversity penalty, -0.10
all-evidence recall at 400 tokens, since a question's evidence usually shares a topic; a
per-day penalty, the n-th hit of one day moved 2, 5 or 10 places down, -0.002 to -0.008;
speaker focus for a query naming every speaker (one search per speaker), -0.001 at 400 and
800; the expansion repeated inside each named speaker's own memories, -0.007 at 400 and
+0.007 at 800 for one more search.)
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from lightmem.lang import WORD_RE, has_cjk
from lightmem.text import content_terms
from lightmem.types import MemoryEntry

__all__ = ["expansion_terms", "named_speakers", "without_names", "without_possessive"]


def named_speakers(query: str, entries: Iterable[MemoryEntry]) -> list[str]:
    """Speakers of ``entries`` that ``query`` names, by full name or first name, with or
    without a possessive ("Melanie's"); in the order the entries rank them."""
    said = [without_possessive(w) for w in WORD_RE.findall(query.lower())]
    said_set, said_text = set(said), f" {' '.join(said)} "
    found: list[str] = []
    for e in entries:
        name = e.speaker
        parts = WORD_RE.findall(name.lower())
        if not parts or name in found:
            continue
        full = " ".join(parts)
        if (len(parts) > 1 and f" {full} " in said_text) or (
            len(parts[0]) > 1 and parts[0] in said_set
        ):
            found.append(name)
    return found


def without_names(query: str, names: Sequence[str]) -> str:
    """``query`` without ``names`` and their words, possessives included ("Where does
    Ingrid's sister live?" -> "Where does sister live?"); a name in a script written
    without spaces is cut out wherever it stands."""
    out = query
    for name in names:
        for part in sorted({name, *name.split()}, key=len, reverse=True):
            if len(part) < 2:
                continue
            edge = ("", "") if has_cjk(part) else (r"(?<!\w)", r"(?:['’]s)?(?!\w)")
            out = re.sub(f"{edge[0]}{re.escape(part)}{edge[1]}", " ", out, flags=re.IGNORECASE)
    return " ".join(out.split())


def without_possessive(word: str) -> str:
    """A word without its possessive ending ("melanie's" -> "melanie")."""
    for tail in ("'s", "’s"):
        if word.endswith(tail):
            return word[: -len(tail)]
    return word


def expansion_terms(words: Sequence[str], best: Sequence[MemoryEntry]) -> list[str]:
    """``words`` (a query's search terms) plus the content words of the ``best`` hits'
    stored text, without their speakers' names, each once, in that order.

    The stored text is the pre-compressed one: the words the compressor kept are the rare
    ones (names, places, objects), which are what other memories about the same thing share.
    """
    names = {w for e in best for w in content_terms(e.speaker)}
    terms = list(words)
    for e in best:
        terms.extend(t for t in content_terms(e.text) if t not in names)
    return list(dict.fromkeys(terms))
