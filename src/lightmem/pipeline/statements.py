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

from lightmem.pipeline import statements_zh
from lightmem.pipeline.reading import SELF, Reading
from lightmem.text import NEGATIONS

__all__ = [
    "FIRST_PERSON",
    "KIN",
    "NOT_NAMES",
    "READ_CHARS",
    "SELF",
    "TITLES",
    "Reading",
    "contrast",
    "denied",
    "ended",
    "heads",
    "is_negation",
    "is_question",
    "marks_change",
    "named_relation",
    "narrates_past",
    "negated",
    "opening",
    "past_verbs",
    "present_words",
    "read",
    "relative",
    "sentences",
    "subject_of",
    "subjects",
    "third_person",
    "tokens",
    "without_vocatives",
]

_WORD = re.compile(r"[\w']+")
#: Where a sentence may end: . ! ? before a space or the end (not inside "3.5" or an
#: e-mail address), the full-width ends of Chinese and Japanese, and line breaks.
_END = re.compile(r"[.!?]+(?=\s|$)|[\u3002\uff01\uff1f\uff1b]+|\n+")
#: Words a dot abbreviates ("Dr. Moreau", "Mrs. Albrecht"): no sentence ends there.
#: Titles before a name ("Dr. Moreau"): part of no value a name is.
TITLES = frozenset("dr mr mrs ms mx prof sir madam".split())
_ABBREVIATIONS = TITLES | frozenset(
    "st mt jr sr vs etc approx dept est inc ltd co corp ave rd".split()
)
_LAST_WORD = re.compile(r"(\w+)\W*$")

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
#: Where a clause parts from the sentence: a semicolon, or a comma before a conjunction
#: ("I moved to Oslo, so I need a coat too": the addition is the coat's).
_CLAUSE_SPLIT = re.compile(r";|,\s*(?=(?:so|because|since|and|but)\b)", re.IGNORECASE)
#: Words of an addition that keeps what was held: the whole sentence adds ("I started at
#: Kaiser, and I kept Mass General too").
_RETAINS = frozenset("kept keep keeps keeping still remain remains stayed stay stays".split())
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
    # corrections of what was said: the newer value replaces the one just given
    "i meant",
    "i misspoke",
    "correction",
    "scratch that",
    # a return to an earlier value ("moved back to Innsbruck", "back to being vegetarian")
    "back to",
)
#: Change phrases that close a negation rather than fall under one.
_DENIALS = frozenset({"anymore", "any more"})
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
#: Capitalised sentence openers that are never a person's name.
NOT_NAMES = (
    frozenset(
        """the a an everyone everybody someone somebody nobody nothing everything something all
    both each people""".split()
    )
    | FIRST_PERSON
    | _OTHER_PERSON
    | _DEMONSTRATIVES
    | _INTERJECTIONS
    | _POSSESSIVES
)
#: Nouns for people someone has (closed class: kin and social relations): a sentence
#: about "my <one of these>" is about that person.
KIN = frozenset(
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


#: How much of a memory's text its statements are read from: a turn is read whole, a
#: pasted document only at its start (reading Chinese tags every word, ~30,000 characters
#: a second, far fewer for some texts; see :func:`lightmem.lang.tagged_words`).
READ_CHARS = 2_000


def opening(text: str) -> str:
    """The part of a memory's ``text`` whose statements the update reading reads."""
    return text[:READ_CHARS]


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, non-empty: split at . ! ? followed by a space
    (not after a title such as "Dr." or a single letter, as in "e.g." or "J. Smith"), at
    。！？； and at line breaks."""
    out: list[str] = []
    start = 0
    for m in _END.finditer(text):
        if m.group() == ".":
            last = _LAST_WORD.search(text[start : m.start()])
            word = last.group(1) if last else ""
            if word.lower() in _ABBREVIATIONS or (len(word) == 1 and word.isalpha()):
                continue
        piece = text[start : m.end()].strip()
        if piece:
            out.append(piece)
        start = m.end()
    tail = text[start:].strip()
    return [*out, tail] if tail else out


def is_question(sentence: str) -> bool:
    """Ends with a question mark, or (Chinese) with the question particle 吗."""
    return sentence.endswith(("?", "\uff1f")) or sentence.rstrip("。.!！ ").endswith("吗")


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


def read(sentence: str, speaker: str, names: Collection[str]) -> Reading:
    """Read ``sentence`` said by ``speaker`` (lower-case) among the scope's speaker
    ``names`` (lower-case); a Chinese one by :mod:`lightmem.pipeline.statements_zh`."""
    if statements_zh.applies(sentence):
        return statements_zh.read(sentence, speaker, names)
    core, toks, who, irrealis, additive, reported = _who_and_mood(sentence, speaker, names)
    corrected = contrast(core)  # "X, not Y" takes back Y: a change with no other marker
    return Reading(
        core,
        who,
        irrealis,
        additive,
        reported,
        marks_change(toks) or bool(corrected),
        narrates_past(toks),
        ended(core),
        heads(toks, names),
        named_relation(core, names),
        corrected,
    )


def _who_and_mood(
    sentence: str, speaker: str, names: Collection[str]
) -> tuple[str, list[str], str, bool, bool, bool]:
    """The sentence without vocatives, its tokens, its subject, and whether it is a plan
    or guess, an addition, reported speech: the part of :func:`read` that
    :func:`subjects` needs."""
    core = without_vocatives(sentence, names)
    toks = tokens(core)
    low = " ".join(toks)
    words = set(toks)
    return (
        core,
        toks,
        relative(core) or third_person(core, names) or subject_of(toks, speaker, names),
        bool(words & _IRREALIS) or _has_phrase(low, _IRREALIS_PHRASES),
        _additive(core, toks),
        bool(words & _REPORTED),
    )


def _adds(text: str, toks: list[str]) -> bool:
    """Does ``text`` hold an addition marker ("also", "another", a clause-final "too")?"""
    return (
        bool(set(toks) & _ADDITIVE)
        or _has_phrase(" ".join(toks), _ADDITIVE_PHRASES)
        or bool(_TOO.search(text))
    )


def _additive(core: str, toks: list[str]) -> bool:
    """An addition (see :func:`_adds`), unless the sentence marks a change in a clause of
    its own that adds nothing, and its adding clause keeps nothing ("kept", "still"): "I
    moved to Trondheim for a new job, so I need a coat that handles wind too" and "I moved
    to Oslo, and I also got a dog" are moves; "I also moved", "I have a cat too" and "I
    started at Kaiser, and I kept Mass General too" add."""
    if not _adds(core, toks):
        return False
    parts = [c for c in _CLAUSE_SPLIT.split(core) if c.strip()]
    if len(parts) < 2:
        return True
    read = [(_adds(c, t), marks_change(t), bool(_RETAINS.intersection(t))) for c in parts
            for t in [tokens(c)]]  # fmt: skip
    changes = [adds for adds, change, _ in read if change]
    return not changes or any(changes) or any(adds and keeps for adds, _, keeps in read)


def subjects(text: str, speaker: str, *, newer: bool) -> frozenset[str]:
    """Who the statements of ``text`` (said by ``speaker``) are about: for each sentence
    asserting something (not a question, plan, guess, report or, for a ``newer`` one, an
    addition), its subject (``SELF`` for the speaker). A person named by their relation
    counts as themselves; of an older statement, also as the speaker's fact ("Leon, my
    roommate, cooks": who the roommate is)."""
    me = speaker.lower()
    out: set[str] = set()
    for sentence in sentences(opening(text)):
        if is_question(sentence):
            continue
        if statements_zh.applies(sentence):
            r = statements_zh.read(sentence, me, {me})
            who, irrealis, additive, reported = r.subject, r.irrealis, r.additive, r.reported
            named = r.named
        else:  # the part of read() this needs: it runs per candidate at retrieval time
            core, _, who, irrealis, additive, reported = _who_and_mood(sentence, me, {me})
            named = named_relation(core, {me})
        if not who or irrealis or reported or (newer and additive):
            continue  # asserts nothing (Reading.asserts), or adds rather than replaces
        out.update({named} if newer and named else {who, named} - {""})
    return frozenset(out)


def ended(text: str, *, leaving: bool = True) -> tuple[str, ...]:
    """The words a termination marker applies to, up to the end of its clause ("I
    dropped accounting and switched to biology": accounting). ``leaving=False`` leaves
    out what "left" applies to: one leaves a job, but also a city at the end of a visit."""
    parts = _parts(text)
    markers = _ENDING if leaving else [m for m in _ENDING if m != ("left",)]
    out: list[str] = []
    k = 0
    while k < len(parts):
        n = next((len(m) for m in markers if parts[k : k + len(m)] == list(m)), 0)
        if not n:
            k += 1
            continue
        k += n
        while k < len(parts) and parts[k] not in _CLAUSE_ENDS:
            out.append(parts[k])
            k += 1
    return tuple(out)


def _parts(text: str) -> list[str]:
    """Lower-cased words and the punctuation that ends a clause."""
    return re.findall(r"[\w']+|[,;:()\u2013\u2014-]", text.lower().replace("\u2019", "'"))


def denied(text: str) -> tuple[str, ...]:
    """The words between a negation and the "anymore", "any more" or "now" closing it in
    one clause ("I don't eat meat anymore": eat meat; "Not a biker anymore": a biker; "I
    never take the bus now": take the bus)."""
    parts = _parts(text)
    out: list[str] = []
    for k, t in enumerate(parts):
        if t in ("anymore", "now") or (t == "more" and k and parts[k - 1] == "any"):
            end = k - 1 if t == "more" else k
            j = end - 1
            while j >= 0 and parts[j] not in _CLAUSE_ENDS and not is_negation(parts[j]):
                j -= 1
            if j >= 0 and is_negation(parts[j]):
                out.extend(parts[j + 1 : end])
    return tuple(out)


def negated(text: str) -> bool:
    """Does ``text`` hold a negation ("not", "never", "don't", ...)?"""
    return any(is_negation(w) for w in _parts(text))


def is_negation(word: str) -> bool:
    """Is the (lower-cased) word a negation: "not", "never", "no", "don't", ...?"""
    return word in NEGATIONS or word.endswith("n't")


def contrast(text: str) -> tuple[str, ...]:
    """What a correction says was not so: the words of a clause that opens with "not"
    after a comma, up to three ("I meant Gatwick, not Heathrow": heathrow; "the party
    starts at 8pm, not 7": 7)."""
    parts = _parts(text)
    for k in range(1, len(parts) - 1):
        if parts[k] == "not" and parts[k - 1] == ",":
            words = []
            for w in parts[k + 1 :]:
                if w in _CLAUSE_ENDS:
                    break
                words.append(w)
            if 0 < len(words) <= 3:
                return tuple(words)
    return ()


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
    speaker); "" otherwise. Named ("My sister Hana is a pilot"), who the sister is is the
    speaker's fact (:func:`named_relation` says whose the rest is)."""
    k = _kin_at(text)
    if not k:
        return ""
    words: list[str] = _WORD.findall(text)
    if words[k + 1][:1].isupper():
        return ""
    return f"{words[0].lower()} {words[k].lower()}"


def named_relation(text: str, names: Collection[str]) -> str:
    """The lower-cased name of a person the speaker names by their relation at the start
    of a sentence: "My colleague Ruth moved to Ghent", "Hendrik, my cousin, moved to
    Ghent" (ruth, hendrik); "" otherwise."""
    words: list[str] = re.findall(r"[\w']+|,", text)
    k = _kin_at(text)
    if k:
        plain: list[str] = _WORD.findall(text)
        after = plain[k + 1]
        return after.lower().removesuffix("'s") if after[:1].isupper() else ""
    if len(words) < 4 or words[1] != ",":
        return ""
    first, low = words[0], words[0].lower().removesuffix("'s")
    if not first[:1].isupper() or low in names or low in NOT_NAMES:
        return ""
    return low if words[2].lower() in _POSSESSIVES and words[3].lower() in KIN else ""


def _kin_at(text: str) -> int:
    """Where the noun for a person stands in a sentence opening "my <kin>" (past
    modifiers: "my best friend", "my older sister"), with a word after it; 0 if none."""
    words: list[str] = _WORD.findall(text)
    if not words or words[0].lower() not in _POSSESSIVES:
        return 0
    k = 1
    while k < len(words) - 1 and words[k].lower() in _KIN_MODIFIERS:
        k += 1
    return k if k + 1 < len(words) and words[k].lower() in KIN else 0


_KIN_MODIFIERS = frozenset(
    """best old older elder eldest oldest young younger youngest little big baby twin ex
    new former late dear step half""".split()
)


def third_person(text: str, names: Collection[str]) -> str:
    """The lower-cased name of a person who is not a speaker of the scope when the
    sentence is about them: it opens with the name followed by a verb in the past or
    third person ("Ruth moved", "Ruth works at ...") and has no first-person word; ""
    otherwise. A capitalised opening word that is a verb ("Moved to Bristol") or any
    other word is not a name."""
    words: list[str] = re.findall(r"[\w']+|,", text)
    if len(words) < 3:
        return ""
    first, nxt = words[0], words[1].lower()
    low = first.lower().removesuffix("'s")
    if not first[:1].isupper() or low in names or low in NOT_NAMES:
        return ""
    if FIRST_PERSON & {w.lower() for w in words}:
        return ""  # "Kaiser is where I work now", "Ruth and I moved": the speaker's
    # Not "is": "Denver is home now", "Life is good" say nothing of a person.
    verb = nxt in _THIRD_PERSON_VERBS or (
        len(nxt) > 3 and (nxt.endswith("ed") or (nxt.endswith("s") and not nxt.endswith("ss")))
    )
    return low if verb and not low.endswith(("ed", "ing")) else ""


#: Verbs said of a third person that no -ed or -s rule finds.
_THIRD_PERSON_VERBS = frozenset("has had got went left took became".split())


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
        prev = toks[k - 1] if k else ""
        if _object_of(prev):
            continue  # "Moved to Bristol, loving it": "it" is what is loved
        if t in _OTHER_PERSON or (
            t in _DEMONSTRATIVES and (not nxt or nxt in _DEMONSTRATIVE_VERBS)
        ):
            return ""
    return SELF


#: Verbs whose next word is their object, not a subject ("love it", "got them").
_TRANSITIVE = frozenset(
    "love hate miss got get make made see saw take took bought sold keep kept found want".split()
)


def _object_of(prev: str) -> bool:
    """Is a word after ``prev`` its object (a pronoun there is not who the sentence is
    about)?"""
    return prev in _TRANSITIVE or (len(prev) > 4 and prev.endswith(("ing", "ed")))


def marks_change(toks: list[str]) -> bool:
    """Does the sentence mark a change of state (see the module docstring)? A change
    verb or phrase under a negation ("I'm not giving up", "we never moved") marks none."""
    for phrase in _CHANGE_PHRASES:
        words = phrase.split()
        for k in range(len(toks) - len(words) + 1):
            # "anymore" wants a negation ("I don't smoke anymore"): not one it is under
            if toks[k : k + len(words)] == words and (phrase in _DENIALS or not _negated(toks, k)):
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
    return any(is_negation(t) for t in toks[max(0, k - 2) : k])


def narrates_past(toks: list[str]) -> bool:
    """Told in the past tense with nothing in the present: an event, not a state."""
    return bool(past_verbs(toks)) and not present_words(toks)


def past_verbs(toks: list[str]) -> set[str]:
    """The words of ``toks`` in the past tense (irregular forms, and -ed)."""
    return {t for t in toks if t in _PAST or (len(t) > 4 and t.endswith("ed"))}


def present_words(toks: list[str]) -> set[str]:
    """The words of ``toks`` that speak of the present ("is", "have", "now", ...)."""
    return set(toks) & _PRESENT
