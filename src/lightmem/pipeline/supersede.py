"""The model-free update detector: does a newer memory replace an earlier one?

A newer entry supersedes an earlier one when both are statements (not questions) about the
same subject (the same speaker talking about themselves, or the same named person), they
speak of the same thing, and they give it different values. Either the newer one marks a
change in the words any conversation uses for one ("now", "moved", "no longer",
"switched", "anymore") and its words match the earlier one's (each word to its closest
counterpart, by the embedder's word vectors: "live"/"moved", "job"/"work", a value named
again when it is given up), or the two share most of their words and differ in the rest
("my favourite band is X" / "my favourite band is Y"). Nothing here lists attributes.

The earlier entry is never deleted: it is marked ``superseded_by`` the newer one from the
newer one's time, which :mod:`lightmem.pipeline.validity` uses to rank and label it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from lightmem.text import NEGATIONS, STOPWORDS, content_terms
from lightmem.types import MemoryEntry

#: Words that mark a statement as a change of something said before (general language of
#: change, not of any attribute). The markers say only that something changed; the verbs
#: also say what kind of change, so they take part in matching statements.
CHANGE_MARKERS: frozenset[str] = frozenset(
    "now anymore longer new newly recently lately nowadays instead finally since".split()
)
CHANGE_VERBS: frozenset[str] = frozenset(
    """moved move moving relocated switched switch changed change started start quit left
    leaving became become becoming transferred replaced gave giving stopped stop dropped""".split()
)
CHANGE_WORDS = CHANGE_MARKERS | CHANGE_VERBS
CHANGE_PHRASES = ("these days", "used to", "any more", "no more", "not anymore", "from now on")

_FIRST_PERSON = frozenset(
    "i i'm i've i'll i'd me my mine myself we we're we've us our ours".split()
)
_PRESENT = frozenset(
    "am is are i'm it's he's she's we're they're you're have has i've we've do does don't "
    "doesn't now still currently every usually always".split()
)
_PAST = frozenset(
    "was were did had grew went got came took saw made gave told felt met won ran bought "
    "sold found knew thought said wrote born spent lost".split()
)
_SENTENCE = re.compile(r"[^.!?\n]+[.!?]*")
_STEM = re.compile(r"(?:ing|ed|es|s)$")

#: Embeds words for similarity: ``texts -> unit vectors`` (one row each).
EmbedTexts = Callable[[Sequence[str]], npt.NDArray[np.float32]]


@dataclass(frozen=True, slots=True)
class DetectorRules:
    """``cue_similarity``: least word match (see :func:`word_match`) for a newer statement
    that marks a change; ``frame_overlap``: for one without a change word, the least share
    of shared words (Jaccard of stems) for "same thing, other value"."""

    cue_similarity: float = 0.1
    frame_overlap: float = 0.5


@dataclass(frozen=True, slots=True)
class Supersession:
    old: MemoryEntry
    new: MemoryEntry
    similarity: float
    why: str

    @property
    def reason(self) -> str:
        return f"superseded by {self.new.id} ({self.why}, similarity {self.similarity:.2f})"


def assertion(text: str) -> str:
    """The statements of a text: its sentences that are not questions."""
    parts = [p.strip() for p in _SENTENCE.findall(text)]
    return " ".join(p for p in parts if p and not p.endswith("?"))


def stems(text: str) -> set[str]:
    """Content words, crudely stemmed, without change words (they mark, not describe)."""
    out = set()
    for w in content_terms(text):
        if w in CHANGE_WORDS or w in NEGATIONS or w in STOPWORDS:
            continue
        out.add(_STEM.sub("", w) if len(w) > 4 else w)
    return out


def narrates_past(text: str) -> bool:
    """Told in the past tense with nothing in the present ("I grew up in Ohio", "we went
    hiking"): an event, which no later value replaces."""
    tokens = [t.lower() for t in re.findall(r"[\w']+", text)]
    if any(t in _PRESENT for t in tokens):
        return False
    return any(t in _PAST or (len(t) > 4 and t.endswith("ed")) for t in tokens)


def marks_change(text: str) -> bool:
    low = text.lower()
    return bool(set(content_terms(low)) & CHANGE_WORDS) or any(p in low for p in CHANGE_PHRASES)


def subjects(entry: MemoryEntry, names: Sequence[str]) -> set[str]:
    """Who a statement is about: its speaker when it speaks of themselves, and every known
    person (a speaker of the scope) it names; its speaker when it names nobody."""
    text = assertion(entry.original_text)
    tokens = set(re.findall(r"[\w']+", text.lower()))
    own = entry.speaker.lower()
    found = {n for n in names if n and n != own and n in tokens}
    if tokens & _FIRST_PERSON or not found:
        found.add(own)
    return found


def words_of(text: str, names: Collection[str] = ()) -> list[str]:
    """The words matched between statements: content words without change markers,
    negations, stopwords and the words of ``names`` (values differ, the frame matches)."""
    named = {w for n in names for w in n.split()}
    return [
        w
        for w in content_terms(text)
        if w not in NEGATIONS and w not in STOPWORDS and w not in CHANGE_MARKERS and w not in named
    ]


def names_in(text: str) -> set[str]:
    """Runs of capitalised words not opening a sentence (names, places, brands: "Denver
    Health" is one) and numbers, lower-cased: the values a statement names."""
    out = set()
    for sentence in _SENTENCE.findall(text):
        run: list[str] = []
        for k, t in enumerate(re.findall(r"[\w']+", sentence)):
            named = t.isdigit() or (k > 0 and t[0].isupper() and t.lower() not in _FIRST_PERSON)
            if named:
                run.append(t.lower())
                continue
            if run:
                out.add(" ".join(run))
            run = []
        if run:
            out.add(" ".join(run))
    return out


def word_match(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> float:
    """How well two statements' words (unit vectors, one row each) match: each word's best
    cosine in the other statement, averaged, both ways."""
    if not len(a) or not len(b):
        return 0.0
    m = a @ b.T
    return float((m.max(axis=1).mean() + m.max(axis=0).mean()) / 2)


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the detector needs of one entry, computed once."""

    entry: MemoryEntry
    text: str
    stems: frozenset[str]
    words: tuple[str, ...]
    names: frozenset[str]
    subjects: frozenset[str]
    cue: bool
    #: it states one value that holds until changed: one sentence, not a past event (a
    #: turn saying several things is not replaced whole for a change of one of them)
    holds: bool


class Detector:
    """Finds, for each newer entry, the earlier entry (if any) it supersedes."""

    def __init__(self, embed: EmbedTexts | None, rules: DetectorRules | None = None) -> None:
        self.embed = embed
        self.rules = rules or DetectorRules()

    def detect(
        self, entries: Sequence[MemoryEntry], only: Collection[str] | None = None
    ) -> list[Supersession]:
        """``entries`` oldest first (one or more scopes); for each newer one (of ``only``
        when given), the earlier entry of its scope it supersedes, if any. A value changed
        twice is a chain: the second change supersedes the first, not the original."""
        names = sorted({e.speaker.lower() for e in entries if e.speaker})
        facts = [self._facts(e, names) for e in entries if e.kind == "entry"]
        facts = [f for f in facts if f.text]
        if len(facts) < 2:
            return []
        vectors = self._word_vectors(facts)
        found: list[Supersession] = []
        for j, new in enumerate(facts):
            if only is not None and new.entry.id not in only:
                continue
            found += [
                hit
                for old in facts[:j]
                if not old.entry.superseded_by
                and (hit := self._judge(old, new, vectors)) is not None
            ]
        # The strongest matches first, each earlier entry replaced once and each newer one
        # replacing one: a value changed twice pairs each change with its own predecessor.
        out: list[Supersession] = []
        olds: set[str] = set()
        news: set[str] = set()
        for hit in sorted(found, key=lambda h: -h.similarity):
            if hit.old.id not in olds and hit.new.id not in news:
                olds.add(hit.old.id)
                news.add(hit.new.id)
                out.append(hit)
        return out

    def _facts(self, e: MemoryEntry, names: Sequence[str]) -> _Facts:
        whole = assertion(e.original_text)
        sentences = [x.strip() for x in _SENTENCE.findall(whole) if x.strip()]
        # a turn that marks a change is matched on the sentence that does
        changing = [x for x in sentences if marks_change(x)]
        text = changing[0] if changing else whole
        cue = bool(changing)
        named = frozenset(names_in(text) - set(names))  # a speaker addressed is no value
        return _Facts(
            e,
            text,
            frozenset(stems(text)),
            tuple(words_of(text, named)),
            named,
            frozenset(subjects(e, names)),
            cue,
            len(sentences) == 1 and (cue or not narrates_past(text)),
        )

    def _word_vectors(self, facts: Sequence[_Facts]) -> dict[str, npt.NDArray[np.float32]]:
        """Each statement's word vectors (one row per word), by entry id; {} without an
        embedder."""
        vocab = sorted({w for f in facts for w in f.words})
        if self.embed is None or not vocab:
            return {}
        rows = dict(zip(vocab, self.embed(vocab), strict=True))
        dim = len(next(iter(rows.values())))
        return {
            f.entry.id: np.array([rows[w] for w in f.words], dtype=np.float32).reshape(-1, dim)
            for f in facts
        }

    def _match(
        self, old: _Facts, new: _Facts, vectors: dict[str, npt.NDArray[np.float32]]
    ) -> float:
        if not vectors:
            return len(old.stems & new.stems) / max(1, len(old.stems | new.stems))
        return word_match(vectors[old.entry.id], vectors[new.entry.id])

    def _judge(
        self, old: _Facts, new: _Facts, vectors: dict[str, npt.NDArray[np.float32]]
    ) -> Supersession | None:
        o, n = old.entry, new.entry
        if not old.holds or not old.stems - new.stems or not old.subjects & new.subjects:
            return None
        if o.scope != n.scope or not _earlier(o, n):
            return None
        novel = new.names - old.names if new.names else new.stems - old.stems
        if not novel:
            return None  # nothing new: a repeat, not a change
        if new.cue:
            if old.names & new.names and new.names - old.names:
                return Supersession(o, n, 1.0, "old value named in a marked change")
            # a named value replaces a named value; an unnamed one names the old one again
            linked = bool(old.names) if new.names else bool(old.stems & new.stems)
            sim = self._match(old, new, vectors) if linked else 0.0
            if linked and sim >= self.rules.cue_similarity:
                return Supersession(o, n, sim, "marked change")
            return None
        overlap = len(old.stems & new.stems) / len(old.stems | new.stems)
        if overlap >= self.rules.frame_overlap:
            return Supersession(o, n, overlap, "same statement, other value")
        return None


def _earlier(old: MemoryEntry, newer: MemoryEntry) -> bool:
    """Said before by time when both have one; at the same time, the queue's insertion
    order (candidates are always stored earlier) decides."""
    if old.timestamp is not None and newer.timestamp is not None:
        return old.timestamp <= newer.timestamp
    return True
