"""Retrieval by time: a question that names a time ("in May 2023", "the last week of June")
or asks when something happened lifts the memories whose time fits it.

An entry's time is its resolved ``event_time`` when it has one, else the day it was said.
A question's times are the absolute expressions :func:`lightmem.timeresolve.find_times`
reads in it, English or Chinese ("in May 2023", 2023年5月; a month or day without a year
fits that month or day in any year): each distinct time once, the first
:data:`MAX_QUERY_TIMES` of them. It asks when with "when", "what date", ..., or 什么时候,
哪天, 几号, .... The lift is added to the
fused reciprocal-rank score: ``weight / k`` for an entry whose time overlaps one the
question names, half that, for a "when" question, for an entry that states a time
of its own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from lightmem.store.values import ScoredId
from lightmem.timeresolve import Resolved, iter_times
from lightmem.timespan import TimeSpan, YearlessSpan, day_span
from lightmem.types import MemoryEntry

__all__ = ["MAX_QUERY_TIMES", "TimeQuery", "entry_time", "lift"]

#: Distinct times of a question the lift compares each candidate with, at most (see
#: :meth:`TimeQuery.of`).
MAX_QUERY_TIMES = 32

_WHEN = re.compile(
    r"\b(?:when|what\s+(?:date|day|month|year|time)|which\s+(?:date|day|month|year)"
    r"|how\s+long\s+ago)\b"
    r"|什么时候|哪一?天|哪一?年|哪个月|几月|几号(?![楼线房车位])|多久(?:以前|之前|前)",
    re.I,
)


@dataclass(frozen=True, slots=True)
class TimeQuery:
    """What a question says about time: the times it names, and whether it asks when."""

    spans: tuple[Resolved, ...]
    asks_when: bool

    @classmethod
    def of(cls, question: str) -> TimeQuery:
        """The distinct times ``question`` names (the same days said twice are one), and
        whether it asks when.

        Only the first :data:`MAX_QUERY_TIMES` (32) distinct times are kept, and the text
        is read no further. Why: the lift compares every candidate with every time, so
        without a cap a 100,000-character question naming 16,000 times held a core for tens
        of seconds per call; a real question names one or two times ("in May 2023",
        "between March and June"), and one naming dozens is a pasted list, not a question
        about a time."""
        spans: dict[object, Resolved] = {}
        for m in iter_times(question):
            q = m.span
            spans.setdefault((q.start, q.end) if isinstance(q, TimeSpan) else q, q)
            if len(spans) == MAX_QUERY_TIMES:
                break
        return cls(tuple(spans.values()), bool(_WHEN.search(question)))

    @property
    def active(self) -> bool:
        return bool(self.spans) or self.asks_when

    def fits(self, e: MemoryEntry) -> bool:
        """The entry's time overlaps a time the question names."""
        own = entry_time(e)
        if own is None:
            return False
        return any(_overlaps(q, own) for q in self.spans)


def entry_time(e: MemoryEntry) -> TimeSpan | None:
    """When what the entry says happened: its resolved time, else the day it was said."""
    if e.event_time is not None:
        return e.event_time
    return day_span(e.timestamp.date()) if e.timestamp else None


def _overlaps(q: Resolved, span: TimeSpan) -> bool:
    if isinstance(q, YearlessSpan):
        years = range(span.start.year, span.end.year + 1)
        return any(q.in_year(y).overlaps(span) for y in years)
    return q.overlaps(span)


def lift(
    ranked: Sequence[ScoredId],
    query: TimeQuery,
    fetch: Callable[[list[str]], Mapping[str, MemoryEntry]],
    weight: float,
    k: int,
) -> list[ScoredId]:
    """``ranked`` with the time lift added, re-sorted (best first)."""
    if weight <= 0 or not query.active or not ranked:
        return list(ranked)
    entries = fetch([i for i, _ in ranked])
    out = []
    for eid, score in ranked:
        e = entries.get(eid)
        bonus = 0.0
        if e is not None:
            if query.fits(e):
                bonus += weight / k
            if query.asks_when and e.event_time is not None:
                bonus += weight / (2 * k)
        out.append((eid, score + bonus))
    return sorted(out, key=lambda x: -x[1])
