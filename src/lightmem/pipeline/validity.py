"""What is current: ranking, ``as_of`` and labels for superseded memories.

A superseded memory stays retrievable. For a question about the present, the memory that
replaced it (followed to the newest in its chain) is placed before it, fetched when the
search did not find it; for a question about the past ("before", "used to", "in 2022") the
ranking is left as the search made it. ``as_of`` keeps only what was valid then. In the
context a superseded memory carries ``(until 12 June 2023)``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import numpy as np
import numpy.typing as npt

from lightmem import lang, validate
from lightmem.errors import InvalidInputError
from lightmem.pipeline import statements
from lightmem.pipeline.candidates import RERANK_WINDOW, Fetch
from lightmem.pipeline.supersede import EmbedTexts, stems
from lightmem.pipeline.time_match import TimeQuery
from lightmem.store.base import MemoryStore, ScoredId
from lightmem.timeparse import format_date, parse_timestamp
from lightmem.types import Filters, MemoryEntry

__all__ = [
    "Fetch",
    "Likeness",
    "about_past",
    "as_of_filters",
    "label",
    "newer_first",
    "rank",
    "unsupersede",
]

#: Words and forms of a question about an earlier state (English).
_PAST = re.compile(
    r"\b(used to|did \w+ use to|previous(ly)?|formerly|former|originally|at first|"
    r"(the|her|his|their|my|your|our|'s) first|earlier|in the past|back (then|when|in)|prior|ago|"
    r"last year|(in|during) (19|20)\d\d)\b"
    # "before" that asks what came before ("What car did he drive before?", "before
    # Denver", "before moving"), not a deadline ("book parking before Friday")
    r"|\bbefore\b(?!\s+(?:the\s+)?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"january|february|march|april|may|june|july|august|september|october|november|"
    r"december|today|tonight|tomorrow|next|noon|midnight|end|weekend|deadline|\d))",
    re.IGNORECASE,
)
_RECENCY_REACH = 4  # how many places a newer statement may pass older ones
#: A statement made within this long after another is part of the same conversation: without
#: a marked change it adds a fact ("I have a dog." then "My cat is Tom.": a list) rather
#: than replacing one, so only the question's words let it pass, not likeness in meaning.
_SAME_CONVERSATION = timedelta(hours=1)
#: What of a statement's text the likeness reads (one embedder window: a statement is a
#: turn, and a longer text costs up to eight).
_LIKENESS_CHARS = 2_000
_WINDOW = 64  # candidates looked at for a present question (fetching all costs latency)
_CHAIN_DEPTH = 8  # a value changed more often than this is followed no further


def about_past(question: str) -> bool:
    """Does the question ask about an earlier state rather than the present one?"""
    return bool(_PAST.search(question))


def label(entry: MemoryEntry) -> str:
    """`` (until 12 June 2023)`` for a superseded memory, "" for a current one."""
    if not entry.superseded_by:
        return ""
    return f" (until {format_date(entry.valid_to)})" if entry.valid_to else " (superseded)"


def as_of_filters(filters: Filters, as_of: object) -> Filters:
    """``filters`` restricted to what was valid at ``as_of`` (a datetime or ISO text)."""
    if as_of is None:
        return filters
    try:
        when = parse_timestamp(as_of)
    except ValueError as exc:
        raise InvalidInputError(f"as_of: {exc}") from exc
    until = min(filters.time_to, when) if filters.time_to else when
    return replace(filters, as_of=when, time_to=until)


@dataclass(frozen=True, slots=True)
class Likeness:
    """How :func:`newer_first` tells that two statements are about the same thing when the
    question's words do not tie them: ``embed`` (texts -> unit vectors, the store's embedder,
    recorded in its ledger) gives each statement's own text a vector, and a cosine of at
    least ``threshold`` counts as alike."""

    embed: EmbedTexts
    threshold: float


def rank(
    fetch: Fetch,
    question: str,
    ranked: Sequence[ScoredId],
    as_of: datetime | None,
    likeness: Likeness | None = None,
) -> list[ScoredId]:
    """``ranked`` (best first) with what was not valid at ``as_of`` dropped and, for a
    question about the present, each superseded memory after the one that replaced it
    (and newer statements first: :func:`newer_first`)."""
    if not ranked:
        return []
    if as_of is None and len(ranked) > _WINDOW:  # below the window nothing is reordered
        top = rank(fetch, question, ranked[:_WINDOW], None, likeness)
        seen = {i for i, _ in top}
        return top + [(i, sc) for i, sc in ranked[_WINDOW:] if i not in seen]
    entries = dict(fetch([i for i, _ in ranked]))
    if as_of is not None:
        ranked = [(i, s) for i, s in ranked if i not in entries or entries[i].current_at(as_of)]
    if about_past(question):
        return list(ranked)
    ranked = newer_first(ranked, entries, question, likeness)
    stale = [entries[i] for i, _ in ranked if i in entries and not entries[i].current_at(as_of)]
    if not stale:
        return ranked
    heads = _heads(fetch, stale, entries, as_of)
    out: list[ScoredId] = []
    placed: set[str] = set()
    for eid, score in ranked:
        head = heads.get(eid)
        if head is not None and head not in placed:
            out.append((head, score))
            placed.add(head)
        if eid not in placed:
            out.append((eid, score))
            placed.add(eid)
    return out


def newer_first(
    ranked: Sequence[ScoredId],
    entries: Mapping[str, MemoryEntry],
    question: str,
    likeness: Likeness | None = None,
) -> list[ScoredId]:
    """For a question about the present (in the present tense): a speaker's newer
    statement moved up past their older ones, at most ``_RECENCY_REACH`` places, when it
    asserts something of a subject the older one is about (not a plan, question, report
    or addition) and is about the same thing: it shares every word of the question the
    older one shares (or, where the older one shares none, a word with the older one), or,
    said in a later conversation (:data:`_SAME_CONVERSATION`), it is alike in meaning
    (``likeness``: "I'm up to 45 km a week now" after "I run about 20 km a week", for
    "How many kilometres does she run?"). It passes nothing between that
    the question's words favour more. What the update detector missed ("Our flat in Porto
    gets sun all morning" after "My flat is in Ghent") then still comes first, while a
    statement about another thing the question names ("my bedroom is blue" for "what
    colour is my kitchen?") does not pass the older one."""
    if _asks_of_event(question):
        return list(ranked)
    out = list(ranked)
    window = [entries[i] for i, _ in out[:RERANK_WINDOW] if i in entries]
    read = _Readings(question, likeness, window)
    for k in range(1, min(len(out), RERANK_WINDOW)):
        new = entries.get(out[k][0])
        if new is None or not new.speaker:
            continue
        # the highest older statement it may pass within reach, over nothing between that
        # the question's words favour more than the newer one
        to = None
        for i in range(k - 1, max(-1, k - 1 - _RECENCY_REACH), -1):
            old = entries.get(out[i][0])
            if old is None:
                break
            if _newer_answer(old, new, read):
                to = i
            elif not read.asked & read.words(old) <= read.words(new):
                break
        if to is not None:  # with the score of the one it passed: scores stay in order
            out.insert(to, (out.pop(k)[0], out[to][1]))
    return out


class _Readings:
    """What :func:`newer_first` reads of a question's candidates, each read once."""

    def __init__(
        self,
        question: str,
        likeness: Likeness | None = None,
        window: Sequence[MemoryEntry] = (),
    ) -> None:
        self.asked = _keys(question)
        #: what the question names: its words but its verbs ("What is Lotte's dog called?":
        #: dog), of which a statement alike in meaning must share some with the older one
        self.things = self.asked - _keys(" ".join(_verbs(question)))
        self.likeness = likeness
        self.window = window  # the candidates that may move, best first
        self._words: dict[str, frozenset[str]] = {}
        self._subjects: dict[tuple[str, bool], frozenset[str]] = {}
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}
        self._most_alike: dict[str, str | None] = {}  # by older statement, once

    def words(self, e: MemoryEntry) -> frozenset[str]:
        if e.id not in self._words:
            self._words[e.id] = _keys(e.original_text)
        return self._words[e.id]

    def subjects(self, e: MemoryEntry, newer: bool) -> frozenset[str]:
        key = (e.id, newer)
        if key not in self._subjects:
            self._subjects[key] = statements.subjects(e.original_text, e.speaker, newer=newer)
        return self._subjects[key]

    def alike(self, old: MemoryEntry, new: MemoryEntry) -> bool:
        """Is ``new`` the statement most alike in meaning to ``old`` (their own texts, at
        least the likeness threshold) among what the speaker said in later conversations
        within the window? Never without a likeness. The most alike, not any alike one:
        what replaced a statement is the one most about its subject, while small talk can
        be somewhat alike too. Stored vectors are not used: they hold the speaker and the
        neighbouring turns, which make any two turns of one small talk alike. Chinese,
        Japanese and Korean statements are never alike here: wordllama puts their short
        sentences 0.3-0.6 apart whatever they say (帮我想想晚饭吃什么吧, "help me think of
        dinner", came before 我住在上海, "I live in Shanghai", for 她现在住在哪里)."""
        if lang.has_cjk(new.original_text):
            return False  # the default embedder finds short CJK sentences all alike
        if old.id not in self._most_alike:
            self._most_alike[old.id] = self._find_most_alike(old)
        return self._most_alike[old.id] == new.id

    def _find_most_alike(self, old: MemoryEntry) -> str | None:
        """The id of :meth:`alike`'s statement for ``old``, if one is alike enough."""
        if self.likeness is None or old.timestamp is None or lang.has_cjk(old.original_text):
            return None
        said = old.timestamp + _SAME_CONVERSATION
        later = [
            e
            for e in self.window
            if e.kind == "entry" and e.speaker == old.speaker and e.timestamp is not None
            if e.timestamp >= said and e.scope == old.scope
        ]
        todo = [e for e in (old, *later) if e.id not in self._vectors]
        if todo:  # each text at most once per question, its first 2,000 characters
            rows = self.likeness.embed([e.original_text[:_LIKENESS_CHARS] for e in todo])
            self._vectors.update(zip((e.id for e in todo), rows, strict=True))
        mine = self._vectors[old.id]
        likeness = {e.id: float(mine @ self._vectors[e.id]) for e in later}
        best = max(likeness, key=likeness.__getitem__, default=None)
        return best if best is not None and likeness[best] >= self.likeness.threshold else None


def _asks_of_event(question: str) -> bool:
    """ "When did she go hiking?", "Who went hiking in June?": a question of when or of
    something done in the past asks of an event, not of what holds now ("Which year was
    he born?", "What was her e-mail address?", "When is her flight?" do). So does one
    naming a time ("... in March 2023?", 2023年6月): it asks of then, which the time lift
    serves."""
    toks = statements.tokens(question)
    if toks[:1] == ["when"] and not _NOW_AUXILIARIES.intersection(toks[1:2]):
        return True  # "When did ..."; "When is her birthday?" asks of what holds now
    if TimeQuery.of(question).spans:
        return True
    done = statements.past_verbs(toks) - {"was", "were", "born", "had"}
    return bool(done) and not statements.present_words(toks)


#: "When is / are / does / do ...": a question of when that asks of the present.
_NOW_AUXILIARIES = frozenset("is are does do".split())
#: Auxiliaries after which a question's subject and then its verb come ("does Wren run").
_AUXILIARIES = frozenset("do does did can could will would should".split())
#: Words before the subject's noun ("does her dog eat").
_DETERMINERS = frozenset("the a an my your his her its our their this that".split())


def _verbs(question: str) -> list[str]:
    """The verbs of an English question: the word after an auxiliary and its subject
    ("How far does Wren's sister / her dog run?": run) and the -ed / -ing forms ("called",
    "doing"). (Statements in scripts without spaces are never compared by likeness.)"""
    toks = statements.tokens(question)
    out = [t for t in toks if len(t) > 4 and t.endswith(("ed", "ing"))]
    for k, t in enumerate(toks[:-2]):
        if t in _AUXILIARIES:
            j = k + 1
            while j + 1 < len(toks) and (toks[j].endswith("'s") or toks[j] in _DETERMINERS):
                j += 1  # "Wren's sister", "her dog"
            if j + 1 < len(toks):
                out.append(toks[j + 1])
    return out


def _newer_answer(old: MemoryEntry, new: MemoryEntry, read: _Readings) -> bool:
    """Does ``new`` answer the question instead of ``old`` (the cheap tests first)?"""
    if old.scope != new.scope or old.kind != "entry" or new.kind != "entry":
        return False
    if old.speaker != new.speaker or not old.current_at():
        return False
    if old.timestamp is None or new.timestamp is None or old.timestamp >= new.timestamp:
        return False
    theirs, words = read.words(old), read.words(new)
    shared = read.asked & theirs
    if not (shared <= words if shared else theirs & words):
        later = new.timestamp - old.timestamp >= _SAME_CONVERSATION
        # of what the question names that the older one says, the newer one says some:
        # "My cat is called Tom" is alike "My dog is called Rex" but no answer to "What is
        # her dog called?", while "24 minutes for the 5k" answers "What is her 5k time?"
        named = read.things & theirs
        if not later or (named and not named & words):
            return False
        # then likeness (each text embedded once per question), before the subjects
        if not read.alike(old, new):
            return False
    return bool(read.subjects(new, True) & read.subjects(old, False))


def _keys(text: str) -> frozenset[str]:
    """Content words cut to six letters past their endings ("intolerance",
    "intolerant"): how a question's words are found in a statement."""
    return frozenset(w[:6] for w in stems(text))


def _heads(
    fetch: Fetch,
    stale: Sequence[MemoryEntry],
    known: dict[str, MemoryEntry],
    as_of: datetime | None,
) -> dict[str, str]:
    """For each stale memory, the newest memory of its chain valid at ``as_of``."""
    heads: dict[str, str] = {}
    for e in stale:
        cur = e
        for _ in range(_CHAIN_DEPTH):
            nxt = cur.superseded_by
            if not nxt:
                break
            if nxt not in known:
                known.update(fetch([nxt]))
            if nxt not in known or known[nxt].scope != e.scope:
                break  # its successor is gone: it stands for itself
            cur = known[nxt]
            if cur.current_at(as_of):
                heads[e.id] = cur.id
                break
    return heads


def unsupersede(
    store: MemoryStore, entry_id: str, version: int | None, *scope: str | None
) -> MemoryEntry | None:
    """``restore`` without a version of a superseded entry: make it current again. None
    (nothing done) with a version or for an entry that is not superseded."""
    sc = validate.scope(*scope)
    entry = None if version is not None else store.get_entry(validate.entry_id(entry_id), sc)
    if entry is None or not entry.superseded_by:
        return None
    why = f"restored: supersession by {entry.superseded_by} undone"
    return store.set_validity(entry.id, sc, "", None, why)
