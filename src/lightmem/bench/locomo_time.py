"""Whether a temporal answer can be read off the context: LoCoMo answers such as
"7 May 2023", "The week before 9 June 2023" or "2022" are resolved to days (by
:func:`lightmem.timeresolve.find_times`) and looked for in the formatted context, as
written or as any time expression there that names the same days."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from lightmem.timeresolve import Resolved, find_times
from lightmem.timespan import TimeSpan, YearlessSpan, year_span

__all__ = ["answer_in_context", "answer_span", "share"]


def answer_span(answer: object) -> tuple[str, Resolved] | None:
    """The first time expression of an answer and what it resolves to (a bare year such as
    2022 included); None when the answer names no absolute time ("10 years ago")."""
    text = str(answer).strip() if answer is not None else ""
    if re.fullmatch(r"\d{4}", text):
        return text, year_span(int(text))
    found = find_times(text)
    return (found[0].phrase, found[0].span) if found else None


def _same(target: Resolved, span: Resolved) -> bool:
    if not isinstance(span, TimeSpan):
        return target == span
    if isinstance(target, YearlessSpan):
        return target.in_year(span.start.year).same_days(span)
    return target.same_days(span)


def answer_in_context(answer: object, context: str) -> dict[str, Any]:
    """``answer_time`` (the answer's time expression) and ``answer_time_in_context``;
    nothing for an answer that names no time."""
    found = answer_span(answer)
    if found is None:
        return {}
    phrase, target = found
    literal = " ".join(phrase.lower().split()) in " ".join(context.lower().split())
    hit = literal or any(_same(target, m.span) for m in find_times(context))
    return {"answer_time": phrase, "answer_time_in_context": hit}


def share(questions: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Of the questions whose answer names a time: how many, and the share found."""
    timed = [q for q in questions if "answer_time_in_context" in q]
    hits = sum(bool(q["answer_time_in_context"]) for q in timed)
    return {
        "timed_answers": len(timed),
        "answer_time_in_context": round(hits / len(timed), 4) if timed else 0.0,
    }
