"""A memory that could answer the question comes before small talk just above it.

"Where does Wren work?" asks for a place; "Who is her manager?" for a person; "How old is
Oswin?" for a number; "When is the party?" for a time. Embedded with their speaker, a
speaker's small talk ("Can you remind me to water the plants later?") is as near to a
question naming them as the turn that answers it ("Day three at the Riverside Library"),
and neither shares a word of the question. So, among the first
:data:`~lightmem.pipeline.candidates.RERANK_WINDOW` hits, an entry that could answer (it
may hold a value of the kind asked for, or a word of the question in its own text or in a
question beside it, or it replies to a question asking for the same kind) passes up to
``reach`` entries just above it that are plainly small talk and could not answer
(``retrieval.answer_reach``, :data:`REACH` by default), and none of those goes down more
than ``reach`` places in all. Plainly small talk: every sentence a question, a request or
greetings, thanks and acknowledgements only (:func:`small_talk`). Only such entries are
passed, never a statement the reading of values missed ("Mike is my new manager", "remote
now"): telling an answer from chat by its values alone put real answers below chat that
names a friend or a number. A question that asks for no kind of value (yes / no, "What
does she do ...", "Which events ...") moves nothing. Chinese is read by its question words
(谁, 哪里, 多大, 什么时候) and the tagger's parts of speech; Japanese and Korean questions
move nothing. The query's words are its content words but the speakers' names. Each place
keeps its score, so scores stay in rank order.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Mapping, Sequence
from enum import Enum

from lightmem import lang
from lightmem.pipeline import statements, statements_zh
from lightmem.pipeline.candidates import RERANK_WINDOW, Fetch, query_words
from lightmem.pipeline.supersede import CALENDAR, slots_in
from lightmem.store.base import ScoredId
from lightmem.store.text_index import Stemmer
from lightmem.text import QUANTITIES, STOPWORDS
from lightmem.types import MemoryEntry

__all__ = ["REACH", "Asked", "answers_first", "asked_for", "holds", "small_talk"]

#: How many entries that could not answer may be passed, by default: past a run of small
#: talk, not past the rest of the first results.
REACH = 4


class Asked(Enum):
    """What kind of value a question asks for."""

    PERSON = "person"  # who, whose, what's the name of her sister
    PLACE = "place"  # where, which city / company / school: somewhere to be or work
    NUMBER = "number"  # how many, how old
    TIME = "time"  # when, what time, which day


_NUMBER_WORDS = QUANTITIES | frozenset(
    "only none no few several couple many both twins triplets pair".split()
)
_TIME_WORDS = CALENDAR | frozenset(
    """mondays tuesdays wednesdays thursdays fridays saturdays sundays today tonight tomorrow
    yesterday morning afternoon evening night noon midnight weekend week weeks month months
    year years spring summer autumn fall winter am pm o'clock ago soon recently christmas
    easter thanksgiving halloween birthday holiday holidays""".split()
)
#: Words at least this common (zipf: log10 of uses per billion words) are no name.
_COMMON_ZIPF = 4.5
#: Prepositions that place what follows ("on the corner", "hired by deloitte", "an
#: accountant for deloitte"), verbs whose object is where one is now ("joined kpmg",
#: "quit tesco"), the verbs of a move that "to" places after, and the words between a
#: preposition and what it places ("at the little bakery").
_PLACING = frozenset("in at from near on by for".split())
_JOINS = frozenset("joined join joining quit left leaving".split())
_MOVES = frozenset("moved move moving moves relocated relocating went going back".split())
_BEFORE_PLACE = frozenset(
    "the a an my our his her their this that little big new old local".split()
)
#: Words before a name that make it someone met, not somewhere ("with Tom and Jess").
_WITH = frozenset("with and or met".split())
_DIGIT = re.compile(r"\d")
#: Said before the question proper ("And where ...", "So, when ...").
_LEAD_INS = frozenset("and so but ok okay then also well hey".split())
#: "Which / what <noun>" followed by the verb ("Which city does she live in?"), not by
#: another noun ("What school subjects ...", "What office chair ...").
_WHICH = re.compile(
    r"^(?:which|what)\s+(\w+)\s+(?:does|did|do|is|was|are|were|has|have|had|will|would)\b"
)
_NAME_OF = re.compile(r"^(?:what|which)\s+(?:is|was|are)\s+(?:the\s+)?names?\s+of\b")
_HOW = re.compile(r"^how\s+(?:many|old)\b")  # not "how much": a degree as often
#: "Where does she get her motivation?" asks for a source, not a place.
_SOURCE_VERBS = frozenset("get gets got find finds found learn learned learnt hear heard".split())
#: "When she moved, did she sell her car?": a clause of time, then a yes / no question.
_YES_NO_AFTER = re.compile(
    r",\s*(?:did|does|do|is|are|was|were|has|have|had|can|could|will|would)\b"
)
_TIME_NOUNS = frozenset("time day date year month hour weekday".split())
#: "Which <noun>" / "What <noun>" asks for somewhere when the noun is a kind of place or
#: body one lives or works in; "Which events", "What sport", "What car" are answered in
#: everyday words as often ("we finally bought a minivan").
_PLACE_NOUNS = frozenset(
    """city town country village neighbourhood neighborhood district suburb company firm
    employer hotel school university college restaurant cafe shop store bank hospital
    clinic gym office agency studio church street road""".split()
)
#: Words of greetings, thanks and acknowledgements: a sentence of these only says nothing
#: of the speaker ("Got it, thanks for letting me know.", "Happy to help.").
_PLEASANTRIES = frozenset(
    """hi hello hey morning good evening afternoon night gm thanks thank you so much very for
    letting me know got it ok okay noted understood sure great cool nice perfect awesome
    happy to help glad you're welcome no problem will do sounds i'll remember that bye see
    later ttyl lol haha hahaha ugh yay wow oh ah aw cheers np yes yeah yep alright all right
    right exactly totally definitely""".split()
)
#: How a request to the listener opens ("Can you remind me ...", "Please ...").
_REQUESTS = (
    "can you ", "could you ", "would you ", "will you ", "please ", "remind me ",
    "help me ", "let me know", "tell me ", "give me ", "show me ", "find me ", "suggest ",
)  # fmt: skip
#: "I need a recipe idea for tonight": asking for help, not saying what holds.
_NEED_HELP = re.compile(
    r"^i (?:need|want|'d like|would like) (?:a |an |some )?(?:\w+ )?"
    r"(?:ideas?|suggestions?|recommendations?|help|advice|tips?|recipes?)\b"
)
_PLEASANTRIES_ZH = frozenset(
    """早 早上好 早安 你好 您好 嗨 晚安 谢谢 多谢 谢啦 好的 好 嗯 收到 明白 明白了 知道了 没问题
    记住了 好吧""".split()
)
_REQUESTS_ZH = ("帮我", "提醒我", "请", "麻烦", "能不能", "可以帮", "能帮")
#: Chinese questions by what they ask for; the first that matches wins (哪天 asks for a
#: time, 哪里 for a place).
_ASKED_ZH = (
    (Asked.TIME, re.compile(r"什么时候|哪一?天|哪一?年|哪个月|几月|几号|几点|星期几|周几")),
    (Asked.PERSON, re.compile(r"谁")),
    (Asked.NUMBER, re.compile(r"多大|几岁|多少岁|几个|几位|几口")),
    (
        Asked.PLACE,
        re.compile(r"哪里|哪儿|在哪|去哪|住哪|什么地方|哪个(?:城市|国家|公司|学校)|哪座|哪家|哪所"),
    ),
)


def asked_for(question: str) -> Asked | None:
    """The kind of value ``question`` asks for (English or Chinese; None when it asks for
    none that a word can tell apart)."""
    if lang.has_cjk(question):
        return next((kind for kind, cue in _ASKED_ZH if cue.search(question)), None)
    toks = [t.replace("\u2019", "'") for t in statements.tokens(question)]
    while toks and toks[0] in _LEAD_INS:
        toks = toks[1:]
    if toks and toks[0].endswith("'s"):  # "what's", "who's", "when's"
        toks = [toks[0].removesuffix("'s"), "is", *toks[1:]]
    low = " ".join(toks)
    first = toks[0] if toks else ""
    if first == "when":
        return None if _YES_NO_AFTER.search(question.lower()) else Asked.TIME
    if first in ("who", "whom", "whose"):
        return Asked.PERSON
    if _NAME_OF.match(low) and not statements.KIN.isdisjoint(toks):
        return Asked.PERSON  # "What's the name of Casimir's sister?", not "... of the book"
    if first == "where":
        return None if _SOURCE_VERBS.intersection(toks) else Asked.PLACE
    if _HOW.match(low):
        return Asked.NUMBER  # not "how long / far / often": "a while", "every week"
    which = _WHICH.match(low)
    noun = which.group(1) if which else ""
    if noun in _TIME_NOUNS:
        return Asked.TIME
    if noun in _PLACE_NOUNS:
        return Asked.PLACE
    return None


def holds(asked: Asked, text: str, speakers: Collection[str] = ()) -> bool:
    """Could ``text`` hold a value of the kind asked for? Generous on purpose: what is
    taken to hold none is moved down, so a real answer must not be missed; what is taken
    to hold one only stays where it is. The words of ``speakers``' names (lower-cased)
    are no value ("Wren, can you remind me?" names whom it speaks to), nor is a day or a
    month a name ("Ugh, Mondays."). A text longer than ``statements.READ_CHARS`` holds
    one (it is no small talk, and reading it all would cost more than the step saves)."""
    if len(text) > statements.READ_CHARS:
        return True
    if lang.has_cjk(text):
        return _holds_zh(asked, text, speakers)
    toks = [t.removesuffix("'s") for t in statements.tokens(text)]
    if asked is Asked.NUMBER:
        return bool(_DIGIT.search(text)) or not _NUMBER_WORDS.isdisjoint(toks)
    if asked is Asked.TIME:
        return bool(_DIGIT.search(text)) or not _TIME_WORDS.isdisjoint(toks)
    if asked is Asked.PLACE and _placed(toks):  # "in leeds", "hired by deloitte"
        return True
    if asked is Asked.PERSON and not statements.KIN.isdisjoint(toks):  # "my boyfriend"
        return True
    return _names_one(text, asked, speakers) or _opens_with_name(text, speakers)


def _names_one(text: str, asked: Asked, speakers: Collection[str]) -> bool:
    """Does ``text`` name something not opening a sentence (names, places, firms), but the
    speakers, days and months; for a place, not a number ("I ran 5 miles") nor someone
    met ("with Tom and Jess")?"""
    for value, slot in slots_in(text).items():
        if value in _TIME_WORDS or set(value.split()) <= set(speakers):
            continue
        if asked is Asked.PLACE and (value.isdigit() or slot in _WITH):
            continue
        return True
    return False


def _holds_zh(asked: Asked, text: str, speakers: Collection[str]) -> bool:
    """:func:`holds` for Chinese, by jieba's part-of-speech tags: "ns" a place, "nt" an
    organisation, "nr" a person, "m" a number, "t" a time."""
    tagged = [(w.lower(), f) for w, f in lang.tagged_words(text) if w.strip()]
    flags = {f for _, f in tagged}
    if asked is Asked.NUMBER:
        return "m" in flags or bool(_DIGIT.search(text))
    if asked is Asked.TIME:
        return bool(flags & {"t", "m"}) or bool(_DIGIT.search(text))
    named = [
        (w, f)
        for w, f in tagged
        if f in statements_zh.NAME_TAGS and not any(w in s or s in w for s in speakers)
    ]
    if asked is Asked.PERSON:  # 王芳; 我男朋友
        kin = any(w in statements_zh.KIN for w, _ in tagged)
        return kin or any(f.startswith("nr") for _, f in named)
    # a place: 南京, 华为; 在华为 (the tagger takes 华为 for a person)
    after = itertools.pairwise(tagged)
    put = any(w in statements_zh.LOCATIVES and g[:1] == "n" for (w, _), (_, g) in after)
    return put or any(f in ("ns", "nt") for _, f in named)


def _placed(toks: Sequence[str]) -> bool:
    """Is a word put somewhere by a preposition or a joining verb ("i live in leeds", "im
    at aldi now", "at the little bakery", "moved to bristol", "joined kpmg"), whatever its
    case? Not a time ("for tonight"), a number, a verb's -ing form ("for letting me
    know"), nor after "to" but after a move ("remind me to water the plants")."""
    for k, t in enumerate(toks):
        moved_to = t == "to" and k > 0 and toks[k - 1] in _MOVES
        if t not in _PLACING and t not in _JOINS and not moved_to:
            continue
        j = k + 1
        while j < len(toks) and toks[j] in _BEFORE_PLACE:
            j += 1
        if j == len(toks):
            continue
        word = toks[j]
        if word in STOPWORDS or word in _TIME_WORDS or word.endswith("ing") or word.isdigit():
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
    small talk just above it that could not, at most ``reach`` entries, none of which goes
    down more than ``reach`` places (see the module docstring; 0: nothing moves). An id
    the fetch does not return (deleted meanwhile) neither moves nor is passed."""
    asked = asked_for(query)
    head = list(ranked[:RERANK_WINDOW])
    if asked is None or reach <= 0 or len(head) < 2:
        return list(ranked)
    entries = fetch([i for i, _ in head])
    answers = _could_answer(asked, entries, query, stemmer)
    chat: dict[str, bool] = {}  # read only for what an answer below could pass
    sunk: dict[str, int] = {}  # how many places each passed entry went down

    def passable(i: str) -> bool:
        if i not in chat:
            e = entries.get(i)
            text = (e.original_text or e.text) if e is not None else ""
            chat[i] = answers.get(i) is False and small_talk(text)
        return chat[i] and sunk.get(i, 0) < reach

    ids = [i for i, _ in head]
    for k in range(1, len(ids)):
        if not answers.get(ids[k]):
            continue
        j = k
        while j > 0 and k - j < reach and passable(ids[j - 1]):
            j -= 1
        for passed in ids[j:k]:
            sunk[passed] = sunk.get(passed, 0) + 1
        ids.insert(j, ids.pop(k))
    return [*zip(ids, (s for _, s in head), strict=True), *ranked[RERANK_WINDOW:]]


def small_talk(text: str) -> bool:
    """Is every sentence of ``text`` plainly no statement of fact: a question, a request
    ("Can you remind me ...", "I need a recipe idea ..."), or greetings, thanks and
    acknowledgements only ("Morning!", "Got it, thanks for letting me know.")? Chinese
    likewise (问句, 帮我 / 提醒我 / 请 ..., 早上好, 谢谢, 好的)."""
    said = statements.sentences(text) if len(text) <= statements.READ_CHARS else []
    return bool(said) and all(_chat_sentence(s) for s in said)


def _chat_sentence(sentence: str) -> bool:
    if statements.is_question(sentence):
        return True
    if lang.has_cjk(sentence):
        core = sentence.rstrip("。！!~～ ")
        if core.startswith(_REQUESTS_ZH):
            return True
        return all(c.strip() in _PLEASANTRIES_ZH for c in re.split(r"[，,、]", core))
    toks = [t.replace("\u2019", "'") for t in statements.tokens(sentence)]
    if not toks:
        return True  # an emoji, "..."
    if all(t in _PLEASANTRIES for t in toks):
        return True
    low = " ".join(toks)
    return low.startswith(_REQUESTS) or bool(_NEED_HELP.match(low))


def _could_answer(
    asked: Asked, entries: Mapping[str, MemoryEntry], query: str, stemmer: Stemmer
) -> dict[str, bool]:
    """For each entry: does it hold a value of the kind asked for (for a time, one the
    resolver read in it counts: ``event_time``), or a word of the question in its own
    text or in a question beside it, which it may answer ("So where are you working these
    days?"; not a statement beside it: "Okay, good to know." after "My manager is Oksana"
    answers nothing), or is a question asking for the same kind beside it ("Sweden,
    originally." after "Where are you from originally?")?"""
    words = query_words(query, entries.values(), stemmer)
    speakers = {w for e in entries.values() for w in statements.tokens(e.speaker)}
    out: dict[str, bool] = {}
    for i, e in entries.items():
        text = e.original_text or e.text
        beside = [q for line in e.context.splitlines() for q in _questions_in(line)]
        said = stemmer.tokens("\n".join([text, *beside]))
        timed = asked is Asked.TIME and e.event_time is not None  # a time the resolver read
        replies = any(asked_for(q) is asked for q in beside)
        out[i] = timed or replies or not words.isdisjoint(said) or holds(asked, text, speakers)
    return out


def _questions_in(line: str) -> list[str]:
    """The questions of a line of context, a neighbouring message's own text ("Wow! Where
    are you from? Tell me!" -> ["Where are you from?"]; "你们什么时候结的婚？")."""
    return [q for q in statements.sentences(line) if statements.is_question(q)]
