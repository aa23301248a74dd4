"""The model-free update detector: does a newer memory replace an earlier one?

Each newer entry is compared with a bounded set of candidates: its most similar earlier
entries of the same scope (:func:`lightmem.pipeline.update.nearest_earlier`), so the
work per entry does not grow with the scope. How a sentence is read (its subject, plans,
additions, reported speech, change markers, events vs states) is
:mod:`lightmem.pipeline.statements`. A newer entry supersedes an earlier one when:

- the earlier one holds one value: a single asserted sentence (not a question, plan or
  guess) about a tracked subject, stating something that holds, not narrating an event
  ("I grew up in Ohio" is never replaced);
- the newer one asserts, of the same subject, either a **marked change** (a sentence
  with a change marker, not an addition or a plan) tied to what the earlier one said:
  it names the earlier value again while giving another ("I left Mass General, I'm at
  Kaiser now"), or repeats its predicate with another value ("I'm studying biology now"
  after "I study accounting"), or gives another named value for words that match the
  earlier one's (each word to its closest counterpart by the embedder's word vectors:
  "moved to Denver" after "I live in Boston"); or the **same statement with another
  value** (no marker needed: "my favourite band is Muse" / "... is Blur": most words
  shared and exactly the value words differ); or a marked change that **takes the
  earlier value back** without giving another: it ends or denies exactly what the earlier
  one held ("I quit Deloitte", "I don't eat meat anymore") or says it was "not" so ("I
  meant Tuesday, not Monday");
- the newer one says something new (a repeat is not a change).

Newer entries are decided oldest first, each against earlier entries not yet replaced,
so a value changed twice is a chain (the second change supersedes the first), and the
same decisions come out whether entries are reviewed all at once (offline) or as they
arrive (online). A change supersedes its best match and every other match stating the
same named value ("I live in Boston", "our flat in Boston is tiny" -> "we moved to
Denver"). Nothing here lists attributes. The earlier entry is never deleted: it is
marked ``superseded_by`` the newer one, which :mod:`lightmem.pipeline.validity` ranks and
labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lightmem.pipeline import statements, statements_zh
from lightmem.pipeline.reading import SELF, Reading
from lightmem.text import NEGATIONS, STOPWORDS, content_terms
from lightmem.types import MemoryEntry

__all__ = [
    "CALENDAR",
    "Detector",
    "DetectorRules",
    "EmbedTexts",
    "Review",
    "Supersession",
    "assertion",
    "names_in",
    "said_at",
    "slots_in",
    "stems",
    "word_match",
    "words_of",
]

_STEM = re.compile(r"(?:ing|ed|es|s)$")
#: Words that only mark a change: left out of the words two statements are matched on.
_MARKERS = frozenset("now anymore longer new instead nowadays used".split())
#: Change verbs say what kind of change it was ("moved" is close to "live"), so they take
#: part in the word match, but not in the stems that tell a repeat from a new value.
_VERBS = frozenset(
    """moved relocated switched changed quit left became transferred replaced dropped sold
    traded cancelled canceled stopped started gave given giving broke split rid took""".split()
)

#: Left out of the stems: markers and change verbs (English and Chinese), negations.
_NOT_STEMS = _MARKERS | _VERBS | NEGATIONS | STOPWORDS | statements_zh.MARKERS

#: Deictic time words ("last month", "yesterday"): when, not what, a statement says.
_TIME = frozenset(
    """last next ago yesterday today tonight tomorrow week weeks month months year years day
    days weekend morning evening night""".split()
)
#: The names of the days and months (times, not values).
CALENDAR = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december""".split()
)
#: Common modifiers between a case word and a name ("an old Honda", "my dear Hana").
_MODIFIERS = frozenset(
    "old new little big dear beloved own first second current former favourite favorite".split()
)
#: Prepositions and determiners by the case role they give the value after them.
_SLOTS = {
    **dict.fromkeys("in to into from near around".split(), "place"),
    **dict.fromkeys("at for of".split(), "organisation"),
    **dict.fromkeys("a an the my our his her their".split(), "thing"),
}

#: Embeds words for similarity: ``texts -> unit vectors`` (one row each).
EmbedTexts = Callable[[Sequence[str]], npt.NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class DetectorRules:
    """``cue_similarity``: least word match (see :func:`word_match`) between an earlier
    statement and a marked change giving another named value; ``frame_overlap``: for a
    change without a marker, the least share of shared words (Jaccard of stems);
    ``frame_diff``: the most words either side may differ by in that case (the value)."""

    cue_similarity: float = 0.05
    frame_overlap: float = 0.5
    frame_diff: int = 2


@dataclass(frozen=True, slots=True)
class Supersession:
    old: MemoryEntry
    new: MemoryEntry
    similarity: float
    why: str

    @property
    def reason(self) -> str:
        return f"superseded by {self.new.id} ({self.why}, similarity {self.similarity:.2f})"


@dataclass(frozen=True, slots=True)
class Review:
    """The supersessions found and how many (newer, earlier) pairs were examined."""

    found: tuple[Supersession, ...]
    pairs: int


def assertion(text: str) -> str:
    """The statements of a text: its sentences that are not questions."""
    return " ".join(s for s in statements.sentences(text) if not statements.is_question(s))


def stems(text: str) -> set[str]:
    """Content words, crudely stemmed, without change markers and negations."""
    out = set()
    for w in content_terms(text):
        if w in _NOT_STEMS:
            continue
        out.add(_STEM.sub("", w).removesuffix("e") if len(w) > 4 else w.removesuffix("e"))
    return out


def words_of(text: str, names: Collection[str] = ()) -> list[str]:
    """The words matched between statements: content words without change markers,
    negations, stopwords and the words of ``names`` (values differ, the frame matches)."""
    skip = {w for n in names for w in n.split()} | NEGATIONS | STOPWORDS | _MARKERS | _TIME
    skip |= statements_zh.ADVERBS
    return [w for w in content_terms(text) if w not in skip]


def names_in(text: str) -> set[str]:
    """Runs of capitalised words not opening a sentence (names, places, brands: "Denver
    Health" is one) and numbers, lower-cased: the values a statement names."""
    return set(slots_in(text))


def slots_in(text: str) -> dict[str, str]:
    """Each value :func:`names_in` finds, with the slot it fills: the case role its
    preposition gives it (a place "in", "to", "from" it; an organisation "at", "for",
    "of" it; a thing "a", "my" it) or else the word before it ("my sister Hana": sister,
    "dating Theo": dating). A changed value fills the slot the earlier value filled.
    Days and months are times, not values. Chinese: :func:`statements_zh.slots`."""
    if statements_zh.applies(text):
        return statements_zh.slots(text)
    out: dict[str, str] = {}
    for sentence in statements.sentences(text):
        words = re.findall(r"[\w']+|[,;:()\u2013\u2014]", sentence)  # a comma ends a run
        run: list[str] = []
        before = ""
        for k, t in enumerate([*words, ""]):
            low = t.lower()
            if low in statements.TITLES:
                continue  # "Dr. Moreau" and "Dr. Haddad" differ in the name only
            named = t.isdigit() or (
                k > 0 and t[:1].isupper() and low not in statements.FIRST_PERSON
            )
            if named and low not in CALENDAR:
                if not run:  # the case word, past modifiers ("an old Honda": an)
                    j = k - 1
                    while j > 0 and words[j].lower() in _MODIFIERS:
                        j -= 1
                    before = words[j].lower() if k else ""
                run.append(low.removesuffix("'s"))
                continue
            if run:
                slot = _SLOTS.get(before, before) if before[:1].isalnum() else ""
                out.setdefault(" ".join(run), slot)
            run = []
    return out


def word_match(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    """How well two statements' words (unit vectors, one row each) match: each word's best
    cosine in the other statement, averaged, both ways."""
    if not len(a) or not len(b):
        return 0.0
    m = a @ b.T
    return float((m.max(axis=1).mean() + m.max(axis=0).mean()) / 2)


@dataclass(frozen=True, slots=True)
class _Said:
    """One statement of an entry as the detector compares it."""

    reading: Reading
    subject: str  # the speaker's or a named person's lower-cased name
    stems: frozenset[str]
    words: tuple[str, ...]
    names: frozenset[str]
    slots: frozenset[str]  # the slots its named values fill (see :func:`slots_in`)
    #: its capitalised first word, lower-cased: a name when the other statement names it
    #: ("Omar and I split up" after "I'm dating Omar")
    initial: str = ""

    def named(self, other: _Said) -> frozenset[str]:
        """Its values, with its first word when ``other`` names that word."""
        return self.names | ({self.initial} & other.names)


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the detector needs of one entry."""

    entry: MemoryEntry
    #: the one value it holds (as an earlier entry), if any
    holds: _Said | None
    #: the change it marks (as a newer entry), if any
    change: _Said | None
    #: the single state it asserts without a marker (as a newer entry), if any
    state: _Said | None


class Detector:
    """Decides, for each newer entry, which earlier candidates it supersedes."""

    def __init__(self, embed: EmbedTexts | None, rules: DetectorRules | None = None) -> None:
        self.embed = embed
        self.rules = rules or DetectorRules()

    def detect(
        self, entries: Sequence[MemoryEntry], only: Collection[str] | None = None
    ) -> list[Supersession]:
        """``entries`` oldest first; every earlier entry is a candidate of every newer one
        (of ``only`` when given). For small sets and tests; the update pass bounds the
        candidates with :meth:`review`."""
        facts = [e for e in entries if e.kind == "entry"]
        news = [e for e in facts if only is None or e.id in only]
        cands = {e.id: facts[: facts.index(e)] for e in news}
        return list(self.review(news, cands).found)

    def review(
        self,
        newer: Sequence[MemoryEntry],
        candidates: Mapping[str, Sequence[MemoryEntry]],
    ) -> Review:
        """``newer`` oldest first, each with its earlier ``candidates`` (by id); decided in
        that order, an entry superseded by one decision is no candidate of the next."""
        replaced: set[str] = set()
        found: list[Supersession] = []
        pairs = 0
        vectors: dict[str, npt.NDArray[np.float32]] = {}
        for new in newer:
            cands = [c for c in candidates.get(new.id, ()) if c.kind == "entry" and c.id != new.id]
            pairs += len(cands)
            live = [c for c in cands if not c.superseded_by and c.id not in replaced]
            if not live:
                continue
            # who counts as a named person: the speakers of this comparison only, so the
            # decision depends on the candidates, not on the rest of the scope
            names = {e.speaker.lower() for e in (new, *live) if e.speaker}
            facts = {e.id: _facts(e, names) for e in (new, *live)}
            n = facts[new.id]
            if n.change is None and n.state is None:
                continue
            self._vectors(list(facts.values()), vectors)
            hits = [h for c in live if (h := self._judge(facts[c.id], n, vectors))]
            said = n.change or n.state
            for hit in _chosen(hits, facts, said) if said is not None else ():
                replaced.add(hit.old.id)
                found.append(hit)
        return Review(tuple(found), pairs)

    def _vectors(self, facts: Sequence[_Facts], cache: dict[str, npt.NDArray[np.float32]]) -> None:
        """Word vectors of every word the facts compare, embedded once per review."""
        if self.embed is None:
            return
        vocab = sorted(
            {
                w
                for f in facts
                for said in (f.holds, f.change)
                if said is not None
                for w in said.words
                if w not in cache
            }
        )
        if vocab:
            cache.update(zip(vocab, self.embed(vocab), strict=True))

    def _match(self, old: _Said, new: _Said, vectors: dict[str, npt.NDArray[np.float32]]) -> float:
        if not vectors or not old.words or not new.words:
            return len(old.stems & new.stems) / max(1, len(old.stems | new.stems))
        a = np.array([vectors[w] for w in old.words], dtype=np.float32)
        b = np.array([vectors[w] for w in new.words], dtype=np.float32)
        return word_match(a, b)

    def _judge(
        self, old_f: _Facts, new_f: _Facts, vectors: dict[str, npt.NDArray[np.float32]]
    ) -> Supersession | None:
        o, n, old = old_f.entry, new_f.entry, old_f.holds
        if old is None or o.scope != n.scope or not _earlier(o, n):
            return None
        # "My sister Ragna moved to Oslo" is about the Ragna of "My sister Ragna lives in
        # Bergen", a value the speaker held by naming her
        subjects = {old.subject, old.reading.named} - {""}
        new = new_f.change
        if new is not None and new.subject in subjects:
            return self._marked(old_f, new_f, old, new, vectors)
        state = new_f.state
        if state is not None and state.subject in subjects:
            return self._restated(old_f, new_f, old, state)
        return None

    def _marked(
        self,
        old_f: _Facts,
        new_f: _Facts,
        old: _Said,
        new: _Said,
        vectors: dict[str, npt.NDArray[np.float32]],
    ) -> Supersession | None:
        o, n = old_f.entry, new_f.entry
        old_names, new_names = old.named(new), new.named(old)
        why = _taken_back(old, new, old_names)
        if why:
            return Supersession(o, n, 1.0, why)
        if not old.stems - new.stems and not _returns(old, new, old_names, new_names):
            return None  # it says nothing the change could replace
        if new_names:
            if not _other(new_names, old_names):
                return None  # nothing new: a repeat, not a change
            if _other(new_names, _other(new_names, old_names)):
                return Supersession(o, n, 1.0, "old value named in a marked change")
            if not old.slots & new.slots or statements_zh.other_predicate(old.reading, new.reading):
                return None  # a named value replaces a named value in the same slot
            sim = self._match(old, new, vectors)
            if sim >= self.rules.cue_similarity:
                return Supersession(o, n, sim, "marked change, other named value")
            return None
        # unnamed values: the change ends the earlier value ("gave up tennis") or says
        # something else of the earlier predicate ("I'm studying biology now")
        if not new.stems - old.stems:
            return None
        ends = stems(" ".join(new.reading.ended)) & old.stems
        ends = ends or statements_zh.shared_chars(new.reading.ended, old.stems)
        same_head = stems(" ".join(new.reading.heads)) & stems(" ".join(old.reading.heads))
        if statements.negated(new.reading.text):
            same_head = set()  # "I don't work weekends anymore" says nothing else of "work"
        if not ends and not same_head:
            return None
        sim = self._match(old, new, vectors)
        if sim >= self.rules.cue_similarity:
            return Supersession(o, n, sim, "marked change")
        return None

    def _restated(
        self, old_f: _Facts, new_f: _Facts, old: _Said, new: _Said
    ) -> Supersession | None:
        """The same statement with another value: most stems shared, a few differing on
        each side (the value), and named values differing when either names one."""
        gone, added = old.stems - new.stems, new.stems - old.stems
        if not gone or not added or max(len(gone), len(added)) > self.rules.frame_diff:
            return None
        if (old.names or new.names) and not (new.names - old.names and old.names - new.names):
            return None
        overlap = len(old.stems & new.stems) / len(old.stems | new.stems)
        if overlap < self.rules.frame_overlap:
            return None
        return Supersession(old_f.entry, new_f.entry, overlap, "same statement, other value")


def _facts(e: MemoryEntry, names: Collection[str]) -> _Facts:
    speaker = e.speaker.lower()
    readings = [
        statements.read(s, speaker, names)
        for s in statements.sentences(statements.opening(e.original_text))
        if not statements.is_question(s)
    ]

    def said(r: Reading, newer: bool = False) -> _Said:
        slots = {v: sl for v, sl in slots_in(r.text).items() if v not in names}  # no speaker
        first = r.text.split(maxsplit=1)[0] if r.text.strip() else ""
        # As a change, "My colleague Ruth moved" is Ruth's; as a value held, "Leon, my
        # roommate, cooks" says who the speaker's roommate is.
        subject = r.named if newer and r.named else speaker if r.subject == SELF else r.subject
        return _Said(
            r,
            subject,
            frozenset(stems(r.text)),
            tuple(words_of(r.text, slots)),
            frozenset(slots),
            frozenset(v for v in slots.values() if v),
            first.lower().strip(",.!") if first[:1].isupper() else "",
        )

    one = readings[0] if len(readings) == 1 and readings[0].asserts else None
    holds = one if one is not None and (one.change or not one.past_event) else None
    change = next((r for r in readings if r.asserts and r.change and not r.additive), None)
    state = one if one is not None and not one.past_event and not one.additive else None
    return _Facts(
        e,
        said(holds) if holds else None,
        said(change, newer=True) if change else None,
        said(state, newer=True) if state and not change else None,
    )


def _taken_back(old: _Said, new: _Said, old_names: frozenset[str]) -> str:
    """Why a marked change takes back what an earlier (not negated) statement held, even
    with no other value given, or "": what it ends or denies ("I quit Deloitte", "I sold
    the Saab", "I'm not at Spotify anymore", "I don't eat meat anymore", "I never take the
    bus now") is the earlier named value or predicate, and says nothing the earlier one
    did not ("I don't like Spotify anymore" or "I don't work weekends anymore" take back
    no "I work at Spotify"; what "left" applies to is left out: one leaves a city after a
    visit); or it says, after "not", that the earlier value was not so ("I meant Tuesday,
    not Monday", "8pm, not 7" after "at 7pm")."""
    if statements.negated(old.reading.text):
        return ""  # "I don't eat meat" is not taken back by "I don't eat meat anymore"
    text = new.reading.text
    heads = stems(" ".join(old.reading.heads))
    for span in (statements.ended(text, leaving=False), statements.denied(text)):
        said = stems(" ".join(w for w in span if not any(w in n.split() for n in old_names)))
        if not said <= old.stems:
            continue
        if any(set(n.split()) & set(span) for n in old_names):
            return "earlier value ended"
        if heads and heads <= said:
            return "earlier statement denied"
    taken = [w for w in new.reading.contrast if w not in STOPWORDS]
    if taken and all(_held(w, old) for w in taken):
        return "earlier value corrected"
    return ""


def _held(word: str, old: _Said) -> bool:
    """Is ``word`` of the earlier statement: one of its stems or named values, or the
    number of one ("7" of "7pm")?"""
    own = stems(word)
    if (own and own <= old.stems) or word in old.names:
        return True
    return word.isdigit() and any(re.fullmatch(rf"{word}[a-z]*", s) for s in old.stems)


def _returns(old: _Said, new: _Said, old_names: frozenset[str], new_names: frozenset[str]) -> bool:
    """A Chinese change that names the earlier value while giving another in its slot
    (上海待不惯，我又搬回北京了 after 我搬去上海了): the earlier words are all in it, since the
    change verb is no stem, yet it replaces them. English keeps the stricter rule: "I now
    live in Paris with Tom" restates "I live in Paris"."""
    chinese = statements_zh.applies(new.reading.text)
    return chinese and bool(_other(new_names, old_names)) and bool(old.slots & new.slots)


def _other(names: frozenset[str], known: frozenset[str]) -> frozenset[str]:
    """The ``names`` that are none of ``known``: sharing no word with any ("the Subaru"
    is the "Subaru Outback"), or with another number where both have one ("KL 4417" is not
    "KL 4471", "Pixel 8" not "Pixel 6"; "iPhone" is "iPhone 14")."""
    return frozenset(n for n in names if not any(_same(n, k) for k in known))


def _same(name: str, known: str) -> bool:
    """Is ``name`` the value ``known`` is (a shared word, and no other number)?"""
    words, theirs = set(name.split()), set(known.split())
    numbers = {w for w in words if w[:1].isdigit()}
    their_numbers = {w for w in theirs if w[:1].isdigit()}
    if numbers and their_numbers and numbers != their_numbers:
        return False
    return bool(words & theirs)


def _chosen(
    hits: Sequence[Supersession], facts: Mapping[str, _Facts], new: _Said
) -> list[Supersession]:
    """The best hit (the latest earlier entry among equals: the chain's end), and the
    other hits stating the same value as it: a named value it held, or what the change
    says ended ("no more kayaking" ends every "I play kayaking")."""
    if not hits:
        return []
    best = max(hits, key=lambda h: (h.similarity, said_at(h.old)))
    held = facts[best.old.id].holds
    if held is None:
        return [best]
    value = held.named(new) or (held.stems & stems(" ".join(new.reading.ended)))
    out = [best]
    for h in hits:
        other = facts[h.old.id].holds
        if h is best or other is None:
            continue
        theirs = other.named(new) if held.named(new) else other.stems
        if theirs - _other(theirs, value):
            out.append(h)
    return out


def said_at(e: MemoryEntry) -> float:
    """When ``e`` was said, as a sort key (0 without a time)."""
    return e.timestamp.timestamp() if e.timestamp is not None else 0.0


def _earlier(old: MemoryEntry, newer: MemoryEntry) -> bool:
    """Said before by time when both have one; at the same time, the candidates' order
    (candidates are always stored earlier) decides."""
    if old.timestamp is not None and newer.timestamp is not None:
        return old.timestamp <= newer.timestamp
    return True
