"""A memory that could answer the question comes before one that could not.

"Where does Wren work?" asks for a name (of a place, a firm); "How old is Oswin?" for a
number; "When is the party?" for a time. Embedded with their speaker, a speaker's small talk
("Can you remind me to water the plants later?") is as near to a question naming them as
the turn that answers it ("Day three at Riverside Library"), and neither shares a word of
the question. So, among the first :data:`~lightmem.pipeline.candidates.RERANK_WINDOW` hits,
an entry that holds what the question asks for, or one of its words, passes up to
:data:`REACH` entries just above it that hold neither (``retrieval.answer_reach``), and
none of those goes down more than :data:`REACH` places in all. A question that asks for no kind of
value (yes / no, "What ...", every question in a script without spaces) is left as it is;
so is an entry holding a word of the question: "We camped at the beach" answers "Where
has Melanie camped?" without naming a place. The query's words are its content words but
the speakers' names. Each place keeps its score, so scores stay in rank order.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from enum import Enum

from lightmem import lang
from lightmem.pipeline import statements
from lightmem.pipeline.candidates import RERANK_WINDOW, Fetch
from lightmem.pipeline.supersede import names_in
from lightmem.store.base import ScoredId
from lightmem.store.text_index import Stemmer
from lightmem.text import STOPWORDS, content_terms

__all__ = ["REACH", "Asked", "answers_first", "asked_for", "holds"]

#: How many entries holding neither may be passed, by default: past a run of small talk,
#: not past the rest of the first results.
REACH = 4


class Asked(Enum):
    """What kind of value a question asks for."""

    NAME = "name"  # who, where, which <noun>: a person, a place, an organisation, a brand
    NUMBER = "number"  # how many, how old, how much
    TIME = "time"  # when, what time, which day


_NUMBER_WORDS = frozenset(
    """zero two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy
    eighty ninety hundred thousand million dozen couple several half""".split()
)
_TIME_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
    thursdays fridays saturdays sundays january february march april may june july august
    september october november december today tonight tomorrow yesterday morning afternoon
    evening night noon midnight weekend week month year spring summer autumn fall winter
    am pm o'clock""".split()
)
#: Words at least this common (zipf: log10 of uses per billion words) are no name.
_COMMON_ZIPF = 4.5
_DIGIT = re.compile(r"\d")
_NAMED_AFTER = re.compile(r"^(?:what|which)\s+(?:is|was|are)\s+(?:the\s+)?name\b")
_WHICH = re.compile(r"^(?:which|what)\s+(\w+)")
_TIME_NOUNS = frozenset("time day date year month hour weekday".split())
#: "Which <noun>" / "What <noun>" asks for a name when the noun is a kind of named place or
#: body ("Which city", "What company"); "Which events", "What sport" are answered in
#: everyday words as often.
_NAMED_NOUNS = frozenset(
    """city town country state village neighbourhood neighborhood district suburb company
    firm employer hotel school university college restaurant cafe shop store bank hospital
    clinic gym team club band brand airline street road church office agency studio car phone
    laptop""".split()
)


def asked_for(question: str) -> Asked | None:
    """The kind of value ``question`` asks for (English; None when it asks for none that
    a word can tell apart)."""
    if lang.has_cjk(question):
        return None
    low = " ".join(statements.tokens(question))
    first = low.split(" ", 1)[0] if low else ""
    if first == "when":
        return Asked.TIME
    if first in ("who", "whom", "whose", "where") or _NAMED_AFTER.match(low):
        return Asked.NAME
    if re.match(r"^how\s+(?:many|much|old)\b", low):
        return Asked.NUMBER  # not "how long / far / often": "a while", "every week"
    which = _WHICH.match(low)
    noun = which.group(1) if which else ""
    if noun in _TIME_NOUNS:
        return Asked.TIME
    if noun in _NAMED_NOUNS:
        return Asked.NAME
    return None


def holds(asked: Asked, text: str, speakers: Collection[str] = ()) -> bool:
    """Does ``text`` hold a value of the kind asked for? Generous on purpose: a memory
    taken to hold one is left where it is. The names of ``speakers`` (lower-cased) are
    no value: "Wren, can you remind me?" names whom it speaks to."""
    toks = set(statements.tokens(text))
    if _DIGIT.search(text):
        return True
    if asked is Asked.NUMBER:
        return bool(toks & _NUMBER_WORDS)
    if asked is Asked.TIME:
        return bool(toks & _TIME_WORDS)
    return bool(names_in(text) - set(speakers)) or _opens_with_name(text, speakers)


def _opens_with_name(text: str, speakers: Collection[str]) -> bool:
    """Does a sentence open with a capitalised word that is no common opener ("Oksana is
    brilliant")?"""
    for sentence in statements.sentences(text):
        word = next(iter(statements.tokens(sentence)), "")
        capital = sentence.lstrip(" \"'(")[:1].isupper()
        if capital and word and word not in STOPWORDS and word not in speakers and _rare(word):
            return True
    return False


def _rare(word: str) -> bool:
    """Is ``word`` rarer than everyday English words (names are: "Oksana", "Gerald";
    "Practice", "Morning" are not)?"""
    import wordfreq  # a dependency (its lists cache themselves); loaded when first needed

    return bool(wordfreq.zipf_frequency(word, "en") < _COMMON_ZIPF)


def answers_first(
    ranked: Sequence[ScoredId], fetch: Fetch, query: str, stemmer: Stemmer, reach: int = REACH
) -> list[ScoredId]:
    """``ranked`` (best first) with each entry that could answer ``query`` moved above the
    entries just above it that could not, at most ``reach`` of them, none of which goes
    down more than ``reach`` places (see the module docstring; 0: nothing moves)."""
    asked = asked_for(query)
    head = list(ranked[:RERANK_WINDOW])
    if asked is None or reach <= 0 or len(head) < 2:
        return list(ranked)
    entries = fetch([i for i, _ in head])
    speakers = {e.speaker.lower() for e in entries.values()}
    names = {w for e in entries.values() for w in stemmer.tokens(e.speaker)}
    words = {w for w in stemmer.tokens(" ".join(content_terms(query))) if len(w) > 1} - names
    answers: dict[str, bool] = {}
    for i, e in entries.items():
        text = e.original_text or e.text
        worded = bool(words.intersection(stemmer.tokens(text)))
        answers[i] = worded or holds(asked, text, speakers)
    ids = [i for i, _ in head]
    sunk: dict[str, int] = {}  # how many places each entry holding neither went down
    for k in range(1, len(ids)):
        if not answers.get(ids[k], True):
            continue
        j = k
        while j > 0 and k - j < reach and not answers.get(ids[j - 1], True):
            if sunk.get(ids[j - 1], 0) >= reach:
                break
            j -= 1
        for passed in ids[j:k]:
            sunk[passed] = sunk.get(passed, 0) + 1
        ids.insert(j, ids.pop(k))
    return [*zip(ids, (s for _, s in head), strict=True), *ranked[RERANK_WINDOW:]]
