"""A memory that could answer the question comes before small talk just above it.

"Where does Wren work?" asks for a place; "Who is her manager?" for a person; "How old is
Oswin?" for a number; "When is the party?" for a time. Embedded with their speaker, a
speaker's small talk ("Can you remind me to water the plants later?") is as near to a
question naming them as the turn that answers it ("Day three at the Riverside Library"),
and neither shares a word of the question. So, among the first
:data:`~lightmem.pipeline.candidates.RERANK_WINDOW` hits, an entry that could answer (it
holds a value of the kind asked for, or a word of the question in its own text or in a
question beside it, which it may answer) passes up to ``reach`` entries just above it that
could not (``retrieval.answer_reach``, :data:`REACH` by default), and none of those goes
down more than ``reach`` places in all. A question that asks for no kind of value (yes /
no, "What does she do ...", "Which events ...", every question in Chinese or Japanese,
which have no capitals to tell names by) moves nothing. What counts as a value is generous
on purpose (an entry taken to hold one stays where it is): the step only moves what is
plainly no answer. The query's words are its content words but the speakers' names. Each
place keeps its score, so scores stay in rank order.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from enum import Enum

from lightmem.pipeline import statements
from lightmem.pipeline.candidates import RERANK_WINDOW, Fetch, query_words
from lightmem.pipeline.supersede import slots_in
from lightmem.store.base import ScoredId
from lightmem.store.text_index import Stemmer
from lightmem.text import QUANTITIES, STOPWORDS
from lightmem.types import MemoryEntry

__all__ = ["REACH", "Asked", "answers_first", "asked_for", "holds"]

#: How many entries that could not answer may be passed, by default: past a run of small
#: talk, not past the rest of the first results.
REACH = 4


class Asked(Enum):
    """What kind of value a question asks for."""

    PERSON = "person"  # who, whose, what is the name of
    PLACE = "place"  # where, which city / company / school: somewhere to be or work
    THING = "thing"  # which team / brand / car / phone: a named thing
    NUMBER = "number"  # how many, how much, how old
    TIME = "time"  # when, what time, which day


_NUMBER_WORDS = QUANTITIES | frozenset("only none few several couple many".split())
_TIME_WORDS = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays
    thursdays fridays saturdays sundays january february march april may june july august
    september october november december today tonight tomorrow yesterday morning afternoon
    evening night noon midnight weekend week weeks month months year years spring summer
    autumn fall winter am pm o'clock ago soon recently christmas easter thanksgiving
    halloween birthday holiday holidays""".split()
)
#: Words at least this common (zipf: log10 of uses per billion words) are no name.
_COMMON_ZIPF = 4.5
#: Prepositions that place what follows, the verbs of a move that "to" places after, and
#: the words between a preposition and what it places ("at the little bakery").
_PLACING = frozenset("in at from near".split())
_MOVES = frozenset("moved move moving moves relocated relocating went going back".split())
_BEFORE_PLACE = frozenset(
    "the a an my our his her their this that little big new old local".split()
)
#: Words before a name that make it someone met, not somewhere ("with Tom and Jess").
_WITH = frozenset("with and or met".split())
_DIGIT = re.compile(r"\d")
#: Said before the question proper ("And where ...", "So, when ...").
_LEAD_INS = frozenset("and so but ok okay then also well hey".split())
_NAME_OF = re.compile(r"^(?:what|which)\s+(?:is|was|are)\s+(?:the\s+)?names?\b")
_WHICH = re.compile(r"^(?:which|what)\s+(\w+)")
_TIME_NOUNS = frozenset("time day date year month hour weekday".split())
#: "Which <noun>" / "What <noun>" asks for somewhere when the noun is a kind of place or
#: body one lives or works in, for a named thing when it is a kind of named thing;
#: "Which events", "What sport" are answered in everyday words as often.
_PLACE_NOUNS = frozenset(
    """city town country state village neighbourhood neighborhood district suburb area
    company firm employer hotel school university college restaurant cafe shop store bank
    hospital clinic gym office agency studio church street road""".split()
)
_THING_NOUNS = frozenset("team club band brand airline car phone laptop".split())


def asked_for(question: str) -> Asked | None:
    """The kind of value ``question`` asks for (English; None when it asks for none that
    a word can tell apart)."""
    toks = [t.replace("\u2019", "'") for t in statements.tokens(question)]
    while toks and toks[0] in _LEAD_INS:
        toks = toks[1:]
    if toks and toks[0].endswith("'s"):  # "what's", "who's", "when's"
        toks = [toks[0].removesuffix("'s"), "is", *toks[1:]]
    low = " ".join(toks)
    first = toks[0] if toks else ""
    if first == "when":
        return Asked.TIME
    if first in ("who", "whom", "whose") or _NAME_OF.match(low):
        return Asked.PERSON
    if first == "where":
        return Asked.PLACE
    if re.match(r"^how\s+(?:many|much|old)\b", low):
        return Asked.NUMBER  # not "how long / far / often": "a while", "every week"
    which = _WHICH.match(low)
    noun = which.group(1) if which else ""
    if noun in _TIME_NOUNS:
        return Asked.TIME
    if noun in _PLACE_NOUNS:
        return Asked.PLACE
    if noun in _THING_NOUNS:
        return Asked.THING
    return None


def holds(asked: Asked, text: str, speakers: Collection[str] = ()) -> bool:
    """Does ``text`` hold a value of the kind asked for? Generous on purpose. The words of
    ``speakers``' names (lower-cased) are no value: "Wren, can you remind me?" names whom
    it speaks to; nor is a day or a month a name ("Ugh, Mondays.")."""
    toks = [t.removesuffix("'s") for t in statements.tokens(text)]
    if asked is Asked.NUMBER:
        return bool(_DIGIT.search(text)) or not _NUMBER_WORDS.isdisjoint(toks)
    if asked is Asked.TIME:
        return bool(_DIGIT.search(text)) or not _TIME_WORDS.isdisjoint(toks)
    named = {
        n: slot
        for n, slot in slots_in(text).items()
        if n not in _TIME_WORDS and not set(n.split()) <= set(speakers)
    }
    if asked is Asked.PLACE:  # "in Leeds", "at the Riverside Library", "moved to bristol",
        # "joined KPMG"; not people met: "with Tom", "Maya and I" (a name opening a sentence)
        return _placed(toks) or any(slot not in _WITH for slot in named.values())
    if named or _opens_with_name(text, speakers):
        return True
    if asked is Asked.PERSON:
        return not statements.KIN.isdisjoint(toks)  # "my boyfriend is a nurse"
    return bool(_DIGIT.search(text)) or _placed(toks)  # "a pixel 8", "for the rovers"


def _placed(toks: Sequence[str]) -> bool:
    """Is a word put somewhere by a preposition ("i live in leeds", "im at aldi now", "at
    the little bakery", "moved to bristol"), whatever its case? Not a time ("for
    tonight"), a verb's -ing form ("for letting me know"), nor after "to" but after a move
    ("remind me to water the plants")."""
    for k, t in enumerate(toks):
        if t not in _PLACING and not (t == "to" and k and toks[k - 1] in _MOVES):
            continue
        j = k + 1
        while j < len(toks) and toks[j] in _BEFORE_PLACE:
            j += 1
        if j == len(toks):
            continue
        word = toks[j]
        if word in STOPWORDS or word in _TIME_WORDS or word.endswith("ing"):
            continue
        return True
    return False


def _opens_with_name(text: str, speakers: Collection[str]) -> bool:
    """Does a sentence open with a capitalised word that is no common word nor an opener
    that is never a name ("Oksana is brilliant"; not "Practice went well", "Ugh, Mondays")?"""
    for sentence in statements.sentences(text):
        word = next(iter(statements.tokens(sentence)), "").removesuffix("'s")
        capital = sentence.lstrip(" \"'(")[:1].isupper()
        if not capital or not word or word in speakers or word in statements.NOT_NAMES:
            continue
        if word not in STOPWORDS and _rare(word):
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
    down more than ``reach`` places (see the module docstring; 0: nothing moves). An id
    the fetch does not return (deleted meanwhile) neither moves nor is passed."""
    asked = asked_for(query)
    head = list(ranked[:RERANK_WINDOW])
    if asked is None or reach <= 0 or len(head) < 2:
        return list(ranked)
    entries = fetch([i for i, _ in head])
    answers = _could_answer(asked, entries, query, stemmer)
    ids = [i for i, _ in head]
    sunk: dict[str, int] = {}  # how many places each entry that could not answer went down
    for k in range(1, len(ids)):
        if answers.get(ids[k]) is not True:
            continue
        j = k
        while j > 0 and k - j < reach and answers.get(ids[j - 1]) is False:
            if sunk.get(ids[j - 1], 0) >= reach:
                break
            j -= 1
        for passed in ids[j:k]:
            sunk[passed] = sunk.get(passed, 0) + 1
        ids.insert(j, ids.pop(k))
    return [*zip(ids, (s for _, s in head), strict=True), *ranked[RERANK_WINDOW:]]


def _could_answer(
    asked: Asked, entries: Mapping[str, MemoryEntry], query: str, stemmer: Stemmer
) -> dict[str, bool]:
    """For each entry: does it hold a value of the kind asked for (for a time, one the
    resolver read in it counts: ``event_time``), or a word of the question in its own
    text or in a question beside it, which it may answer ("So where are you working these
    days?"; not a statement beside it: "Okay, good to know." after "My manager is Oksana"
    answers nothing)?"""
    words = query_words(query, entries.values(), stemmer)
    speakers = {w for e in entries.values() for w in statements.tokens(e.speaker)}
    out: dict[str, bool] = {}
    for i, e in entries.items():
        text = e.original_text or e.text
        asked_beside = [line for line in e.context.splitlines() if line.rstrip().endswith("?")]
        said = stemmer.tokens("\n".join([text, *asked_beside]))
        timed = asked is Asked.TIME and e.event_time is not None  # a time the resolver read
        out[i] = timed or not words.isdisjoint(said) or holds(asked, text, speakers)
    return out
