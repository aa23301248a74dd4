"""How the update detector reads one sentence of a conversation (English, by rules).

A sentence can replace an earlier one only when it *asserts* something of a known subject;
this module says who a sentence is about and what kind of speech act it is:

- **subject**: the speaker when it speaks of themselves (a first-person word, or no person
  at all: "Traded in my car", "Life in Boston is good"), another speaker of the scope
  when it is about them ("Ana moved to Lisbon"), nobody we can track when it is about the
  listener or a thing ("your store looks great", "that's awesome"). Names used to address
  someone ("Hey Caroline, ...", "..., John!") are vocatives, not subjects.
- **mood**: a plan, wish, guess or condition ("I'm thinking of moving", "if I quit",
  "I'll switch", "maybe next year") asserts no change yet; an addition ("I also play
  chess", "another dog") adds rather than replaces; reported speech ("she said she
  moved") is someone else's claim.
- **change**: the sentence marks that something stopped holding or now holds instead,
  with a marker tied to its predicate: a change-of-state verb ("moved to", "switched",
  "quit", "gave up", "sold", a "started" that takes an object, not a gerund: "started a
  new job" vs "started learning"), a present-state adverb of contrast ("now", "no longer",
  "anymore", "these days", "instead"; not "right now", "for now", "three years now"), or a
  possessive "new" that presupposes an old one ("my new car"). Recency words alone
  ("finally", "recently", "lately", "since we last talked", "a new idea") mark no change.
- **state vs event**: told in the past tense with nothing in the present, it narrates an
  event ("I grew up in Ohio", "we went hiking"), which no later value replaces.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from lightmem.text import NEGATIONS

__all__ = [
    "FIRST_PERSON",
    "SELF",
    "Reading",
    "ended",
    "heads",
    "marks_change",
    "narrates_past",
    "read",
    "relative",
    "sentences",
    "subject_of",
    "tokens",
    "without_vocatives",
]

SELF = "\x00self"  # the subject "the speaker"; never a name

_WORD = re.compile(r"[\w']+")
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")

FIRST_PERSON = frozenset(
    "i i'm i've i'll i'd we we're we've we'll we'd me my mine myself us our ours ourselves".split()
)
_OTHER_PERSON = frozenset(
    """you you're you've you'll you'd your yours yourself he he's his him she she's her hers
    they they're their them it it's its that's there there's""".split()
)
#: Demonstratives are a subject before a verb ("that looks great"), a determiner before a
#: noun ("these days I ...", "now that the lease ended") or a conjunction.
_DEMONSTRATIVES = frozenset("this that these those".split())
_DEMONSTRATIVE_VERBS = frozenset(
    "is was looks sounds seems feels must has makes made really would could will".split()
)
_INTERJECTIONS = frozenset(
    """hey hi hello wow oh ah aw aww awww yeah yes yep yup no nope ok okay well haha hah lol
    hmm thanks thank omg woah whoa dang cool nice great sure oof ugh yay man dude gosh oops
    congrats congratulations sorry ha hehe""".split()
)
#: Plans, wishes, guesses and conditions: the sentence asserts no change (yet).
_IRREALIS = frozenset(
    """if would could might maybe perhaps should hope hoping hopefully wish wishing want wants
    wanna gonna plan plans planning thinking considering someday will i'll we'll you'll he'll
    she'll they'll i'd we'd unless whether dream dreaming next soon tomorrow won't wouldn't
    try trying tried""".split()
)
_IRREALIS_PHRASES = (
    "going to",
    "about to",
    "looking into",
    "looking for",
    "thinking of",
    "ready to",
)
#: Additions: the sentence adds to what held, it does not replace it.
_ADDITIVE = frozenset("also another additionally besides".split())
#: "too" adds when it closes a clause ("I have a cat too"), not before a word ("too often").
_TOO = re.compile(r"\btoo\s*(?:[,.!;]|$)", re.IGNORECASE)
_ADDITIVE_PHRASES = ("as well",)
#: Reported speech: someone else's claim.
_REPORTED = frozenset(
    "said says told tells heard according mention mentioned mentioning remember".split()
)

#: Change-of-state verbs (every form that reports the change as made).
_CHANGE_VERBS = frozenset(
    """moved relocated switched changed quit became transferred replaced dropped sold traded
    cancelled canceled stopped""".split()
)
_CHANGE_PHRASES = (
    "no longer",
    "no more",
    "any more",
    "anymore",
    "these days",
    "nowadays",
    "instead",
    "from now on",
    "now that",
    "used to",
    "gave up",
    "given up",
    "giving up",
    "broke up",
    "split up",
    "got rid of",
    "took up",
    "moved to",
    "moving to",
)
#: Particles that give a change verb another sense ("dropped off", "stopped by", "moved
#: by the film"): the verb then marks no change.
_NOT_CHANGE_AFTER: dict[str, frozenset[str]] = {
    "dropped": frozenset("off by in".split()),
    "stopped": frozenset("by at in".split()),
    "switched": frozenset("off on".split()),
    "moved": frozenset("by me us him her them".split()),
}
_OBJECT_OPENERS = frozenset("a an the my our at with for his her their".split())
#: Termination markers: what follows them (to the clause's end) is what ended.
_ENDING = [
    tuple(m.split())
    for m in """no more|no longer|gave up|given up|giving up|stopped|quit|left|dropped|sold|
    cancelled|canceled|broke up with|split up with|got rid of|instead of|used to""".replace(
        "\n", ""
    ).split("|")
]
_CLAUSE_ENDS = frozenset(", ; : ( ) - \u2013 \u2014 and but so because now".split())
#: Words between a subject and what is said of it.
_NOT_HEADS = frozenset(
    """am is are was were be been being have has had do does did 'm 're 've 's a an the
    now just still really also very so pretty currently finally recently lately new old
    actually totally always usually never not no don't didn't doesn't longer more""".split()
)
_SUBJECTS = frozenset("i i'm i've i'd i'll we we're we've we'd we'll".split())
_SUBJECT_PRONOUNS = frozenset("i we he she they i've we've".split())
_NOT_NOW_BEFORE = frozenset(
    """right just for by until till to even years year months month weeks week days day while
    time long ago""".split()
)
_POSSESSIVES = frozenset("my our his her their".split())
#: Nouns for people someone has (closed class: kin and social relations): a sentence
#: about "my <one of these>" is about that person.
_KIN = frozenset(
    """mother mom mum father dad parents parent sister sisters brother brothers siblings
    wife husband partner boyfriend girlfriend fiance fiancee son sons daughter daughters
    kids kid children child baby friend friends boss roommate roommates flatmate neighbour
    neighbor neighbours neighbors cousin cousins aunt uncle grandma grandmother grandpa
    grandfather grandparents family coworker coworkers colleague colleagues""".split()
)
_PRESENT = frozenset(
    """am is are i'm it's he's she's we're they're you're have has i've we've do does don't
    doesn't now still currently every usually always""".split()
)
_PAST = frozenset(
    """was were did had grew went got came took saw made gave told felt met won ran bought
    sold found knew thought said wrote born spent lost taught flew drove left began brought
    caught fell held kept led sat stood understood""".split()
)


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (split at . ! ? and line breaks), stripped, non-empty."""
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def tokens(text: str) -> list[str]:
    return [t.lower() for t in _WORD.findall(text)]


def _has_phrase(low: str, phrases: Collection[str]) -> bool:
    return any(re.search(rf"\b{re.escape(p)}\b", low) for p in phrases)


def without_vocatives(sentence: str, names: Collection[str]) -> str:
    """``sentence`` without the interjections and names addressing the listener at its
    start ("Hey Caroline, ...", "Wow, John, ...") or end ("..., Mel!")."""
    parts = [p.strip() for p in sentence.split(",")]

    def addressing(part: str) -> bool:
        words = _WORD.findall(part)
        return 0 < len(words) <= 3 and all(
            w.lower() in _INTERJECTIONS or w.lower() in names or w[:1].isupper() for w in words
        )

    # "Leon, my roommate, cooks": a name before an apposition is the subject, not addressed
    while len(parts) > 1 and addressing(parts[0]) and not _apposition(parts[1]):
        parts.pop(0)
    while len(parts) > 1 and addressing(parts[-1].rstrip(".!?")):
        parts.pop()
    return ", ".join(parts)


def _apposition(part: str) -> bool:
    first = part.split(maxsplit=1)[0].lower() if part.strip() else ""
    return first in _POSSESSIVES or first in {"the", "a", "an"}


@dataclass(frozen=True, slots=True)
class Reading:
    """One sentence as the detector reads it (see the module docstring)."""

    text: str
    #: ``SELF``, another speaker's lower-cased name, "my parents" (see :func:`relative`) or ""
    subject: str
    irrealis: bool
    additive: bool
    reported: bool
    change: bool
    past_event: bool
    #: what a termination marker says ended ("gave up tennis": tennis)
    ended: tuple[str, ...] = ()
    #: the first word said of each subject mention: the predicates ("I study X": study)
    heads: tuple[str, ...] = ()

    @property
    def asserts(self) -> bool:
        """It asserts something of a tracked subject (not a plan, guess or report)."""
        return bool(self.subject) and not self.irrealis and not self.reported


def read(sentence: str, speaker: str, names: Collection[str]) -> Reading:
    """Read ``sentence`` said by ``speaker`` (lower-case) among the scope's speaker
    ``names`` (lower-case)."""
    core = without_vocatives(sentence, names)
    toks = tokens(core)
    low = " ".join(toks)
    return Reading(
        core,
        relative(core) or subject_of(toks, speaker, names),
        bool(set(toks) & _IRREALIS) or _has_phrase(low, _IRREALIS_PHRASES),
        bool(set(toks) & _ADDITIVE)
        or _has_phrase(low, _ADDITIVE_PHRASES)
        or bool(_TOO.search(core)),
        bool(set(toks) & _REPORTED),
        marks_change(toks),
        narrates_past(toks),
        ended(core),
        heads(toks, names),
    )


def ended(text: str) -> tuple[str, ...]:
    """The words a termination marker applies to, up to the end of its clause ("I
    dropped accounting and switched to biology": accounting)."""
    parts = re.findall(r"[\w']+|[,;:()\u2013\u2014-]", text.lower())
    out: list[str] = []
    k = 0
    while k < len(parts):
        n = next((len(m) for m in _ENDING if parts[k : k + len(m)] == list(m)), 0)
        if not n:
            k += 1
            continue
        k += n
        while k < len(parts) and parts[k] not in _CLAUSE_ENDS:
            out.append(parts[k])
            k += 1
    return tuple(out)


def heads(toks: list[str], names: Collection[str]) -> tuple[str, ...]:
    """The first content word after each subject (a first-person subject pronoun, a
    speaker's name, or a sentence-opening "my"/"our" noun phrase), skipping auxiliaries,
    adverbs and change words: what is said of it ("I study X": study; "My X classes":
    X)."""
    out = []
    for k, t in enumerate(toks):
        opening = k == 0 and t in _POSSESSIVES | {"our"}
        if t not in _SUBJECTS and t.removesuffix("'s") not in names and not opening:
            continue
        for w in toks[k + 1 :]:
            if w in FIRST_PERSON or w in _OTHER_PERSON:
                break
            if w not in _NOT_HEADS and w not in _CHANGE_VERBS:
                out.append(w)
                break
    return tuple(out)


def relative(text: str) -> str:
    """ "my parents" when the sentence opens with a possessive and a noun for a person who
    is not named there ("My parents still live in Galway": about the parents, not the
    speaker); "" otherwise. Named ("My sister Hana is a pilot"), the name is the
    speaker's fact (who their sister is)."""
    words = _WORD.findall(text)
    if len(words) < 3 or words[0].lower() not in _POSSESSIVES or words[1].lower() not in _KIN:
        return ""
    return "" if words[2][:1].isupper() else f"{words[0].lower()} {words[1].lower()}"


def subject_of(toks: list[str], speaker: str, names: Collection[str]) -> str:
    """Who the sentence is about: the first person or known name it mentions first; the
    speaker when it mentions nobody; "" when it is about the listener or a thing."""
    for k, t in enumerate(toks):
        if t in FIRST_PERSON:
            return SELF
        base = t.removesuffix("'s")
        if base in names and base != speaker:
            return base
        nxt = toks[k + 1] if k + 1 < len(toks) else ""
        if t in _OTHER_PERSON or (
            t in _DEMONSTRATIVES and (not nxt or nxt in _DEMONSTRATIVE_VERBS)
        ):
            return ""
    return SELF


def marks_change(toks: list[str]) -> bool:
    """Does the sentence mark a change of state (see the module docstring)? A change
    verb or phrase under a negation ("I'm not giving up", "we never moved") marks none."""
    for phrase in _CHANGE_PHRASES:
        words = phrase.split()
        for k in range(len(toks) - len(words) + 1):
            if toks[k : k + len(words)] == words and not _negated(toks, k):
                return True
    for k, t in enumerate(toks):
        prev = toks[k - 1] if k else ""
        nxt = toks[k + 1] if k + 1 < len(toks) else ""
        if _negated(toks, k) and t != "now":
            continue
        if t in _CHANGE_VERBS and nxt not in _NOT_CHANGE_AFTER.get(t, ()):
            return True
        if t == "now" and prev not in _NOT_NOW_BEFORE and nxt != "and":
            return True
        if t == "left" and prev in _SUBJECT_PRONOUNS | {"just", "finally", "recently"}:
            return True
        if t == "started" and nxt in _OBJECT_OPENERS:
            return True  # a new job, at a firm; not "started learning", "started when"
        if t == "new" and (prev in _POSSESSIVES or prev.endswith("'s")):
            return True
    return False


def _negated(toks: list[str], k: int) -> bool:
    """A negation among the two words before ``toks[k]``."""
    return any(t in NEGATIONS or t.endswith("n't") for t in toks[max(0, k - 2) : k])


def narrates_past(toks: list[str]) -> bool:
    """Told in the past tense with nothing in the present: an event, not a state."""
    if any(t in _PRESENT for t in toks):
        return False
    return any(t in _PAST or (len(t) > 4 and t.endswith("ed")) for t in toks)
