"""Relative time in text, resolved by rules against the time the text was said.

:func:`find_times` reads the time expressions of English text ("yesterday", "last
Saturday", "two weekends ago", "next month", "in 2022", "the week before 9 June 2023",
"8 May 2023") and resolves each to a :class:`~lightmem.timespan.TimeSpan` against an
``anchor`` day (the message's date). Without an anchor only absolute expressions resolve,
and a month or day named without a year stays a :class:`~lightmem.timespan.YearlessSpan`
(how questions name times: "in June", "the last week of June"). Every label
:meth:`TimeSpan.label` writes reads back to the same days.

Chinese expressions (昨天, 上周末, 三天前, 2023年5月8日, ...) are read by the rules of
:mod:`lightmem.timeresolve_zh`, run beside these.

Conventions: weeks run Monday to Sunday; "last <weekday>" is the latest such day before the
anchor, "next <weekday>" the first after it, "this <weekday>" the one in the anchor's week;
"last week/weekend/month/year" is the calendar unit before the anchor's; "N weeks ago" is the
week holding the day N weeks back; "a few" is 2-4 and "several" 3-6 units (a "span");
"the past week/month/year" is the days up to the anchor; a month or day named without a
year is its occurrence nearest the anchor unless the nearest cue of its clause places it
ahead ("will", "signed up for the race") or behind ("went", "since"). Month names count
only when capitalised ("May", not "may").

:func:`said_label` writes a span for the context beside the day it was said: a week, a
weekend or a weekday named relative to that day as that relation ("week before 9 June
2023"), everything else by its calendar label.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from itertools import islice

from lightmem.lang import has_cjk
from lightmem.timeparse import format_date
from lightmem.timeresolve_zh import RULES as ZH_RULES
from lightmem.timespan import (
    SEASONS,
    TimeSpan,
    YearlessSpan,
    day_span,
    month_span,
    season_span,
    shifted_range,
    shifted_span,
    week_span,
    weekend_span,
    year_span,
)

__all__ = [
    "DATE",
    "MONTH",
    "NUM",
    "SEASON",
    "UNIT",
    "WEEKDAY",
    "YEAR",
    "Mention",
    "Resolved",
    "Rule",
    "find_times",
    "iter_times",
    "resolve",
    "said_label",
]

Resolved = TimeSpan | YearlessSpan


@dataclass(frozen=True, slots=True)
class Mention:
    """One time expression: where it is in the text (``start``..``end``) and what it means."""

    phrase: str
    start: int
    end: int
    span: Resolved


_MONTH_NAMES = (
    "january february march april may june july august september october november december"
).split()
_DAY_NAMES = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTHS = {
    **{m: i + 1 for i, m in enumerate(_MONTH_NAMES)},
    **{m[:3]: i + 1 for i, m in enumerate(_MONTH_NAMES)},
    "sept": 9,
}
_WEEKDAYS = {
    **{d: i for i, d in enumerate(_DAY_NAMES)},
    **{d[:3]: i for i, d in enumerate(_DAY_NAMES)},
    "tues": 1,
    "thur": 3,
    "thurs": 3,
}
_NUMBERS = {
    w: i + 1
    for i, w in enumerate("one two three four five six seven eight nine ten eleven twelve".split())
}
_FUZZY = {"few": (2, 4), "several": (3, 6)}


def _alt(words: Iterable[str]) -> str:
    return "|".join(sorted(words, key=len, reverse=True))


MONTH = rf"(?:{_alt(_MONTHS)})\.?"
WEEKDAY = rf"(?:{_alt(_WEEKDAYS)})"
SEASON = rf"(?:{_alt(SEASONS)})"
YEAR = r"(?:1[89]\d\d|2[01]\d\d)"
NUM = rf"(?:\d{{1,3}}|an?|{_alt(_NUMBERS)}|a\s+couple(?:\s+of)?|couple\s+of|a\s+few|few|several)"
UNIT = r"(?:day|weekend|week|month|year)"
# A date with its year, the anchor of "the week before <date>".
DATE = (
    rf"(?:(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{MONTH},?\s+{YEAR}"
    rf"|{MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+{YEAR}|\d{{4}}-\d{{2}}-\d{{2}})"
)
_PREP = r"(?:in|during|of|around|early|mid|late|since|from|by|until|till|back\s+in)"

Rule = Callable[[re.Match[str], date | None], Resolved | None]


def _count(word: str) -> tuple[int, int]:
    w = " ".join(word.lower().split())
    if w.isdigit():
        return int(w), int(w)
    if w in ("a", "an"):
        return 1, 1
    if "couple" in w:
        return 2, 2
    for key, lo_hi in _FUZZY.items():
        if key in w:
            return lo_hi
    return _NUMBERS[w], _NUMBERS[w]


def _month(token: str) -> int | None:
    """A month name's number; None unless capitalised (so "may" the verb is no month)."""
    t = token.rstrip(".")
    return _MONTHS.get(t.lower()) if t[:1].isupper() else None


def _weekday(token: str) -> int:
    return _WEEKDAYS[token.lower()]


def _ago(m: re.Match[str], anchor: date | None) -> Resolved | None:
    if anchor is None:
        return None
    lo, hi = _count(m["n"])
    sign = -1 if m["dir"].lower() in ("ago", "back", "before") else 1
    return shifted_range(m["unit"].lower(), anchor, sign * lo, sign * hi)


def _relative_unit(m: re.Match[str], anchor: date | None) -> Resolved | None:
    if anchor is None:
        return None
    which = " ".join(m["which"].lower().split())
    unit = m["unit"].lower()
    if which in ("past", "the past") and unit != "weekend":
        back = {"week": 7, "month": 30, "year": 365}.get(unit, 1)
        return TimeSpan(anchor - timedelta(days=back - 1), anchor, "span")
    step = _STEP.get(which.removeprefix("the ").removeprefix("this "), 0)
    return shifted_span(unit, anchor, step)


_STEP = {
    "last": -1,
    "past": -1,
    "previous": -1,
    "before": -1,
    "next": 1,
    "coming": 1,
    "following": 1,
    "after": 1,
}


def _unit_before(m: re.Match[str], anchor: date | None) -> Resolved | None:
    """ "the week before" (said on its own: before the anchor's)."""
    if anchor is None:
        return None
    return shifted_span(m["unit"].lower(), anchor, _STEP[m["which"].lower()])


def _weekday_rel(m: re.Match[str], anchor: date | None) -> Resolved | None:
    if anchor is None:
        return None
    which = " ".join(m["which"].lower().split()).removeprefix("the ").removeprefix("this ")
    return day_span(_weekday_from(anchor, _weekday(m["day"]), _STEP.get(which, 0)))


def _weekday_from(anchor: date, weekday: int, step: int) -> date:
    """The latest ``weekday`` before ``anchor`` (step -1), the first after (1), or the one in
    its week (0)."""
    if step < 0:
        return anchor - timedelta(days=(anchor.weekday() - weekday - 1) % 7 + 1)
    if step > 0:
        return anchor + timedelta(days=(weekday - anchor.weekday() - 1) % 7 + 1)
    return anchor + timedelta(days=weekday - anchor.weekday())


def _season_rel(m: re.Match[str], anchor: date | None) -> Resolved | None:
    if anchor is None:
        return None
    name = m["season"].lower()
    which = m["which"].lower()
    spans = [season_span(name, anchor.year + k) for k in (-2, -1, 0, 1)]
    if which in ("last", "past"):
        return max((s for s in spans if s.end < anchor), key=_first_day)
    if which == "next":
        return min((s for s in spans if s.start > anchor), key=_first_day)
    # "this winter" in January or February is the one that began in December
    return season_span(
        name, anchor.year - 1 if name == "winter" and anchor.month < 3 else anchor.year
    )


def _first_day(s: TimeSpan) -> date:
    return s.start


def _season_year(m: re.Match[str], _anchor: date | None) -> Resolved | None:
    return season_span(m["season"].lower(), int(m["year"]))


def _month_rel(m: re.Match[str], anchor: date | None) -> Resolved | None:
    month = _month(m["month"])
    if anchor is None or month is None:
        return None
    which = m["which"].lower()
    if which == "last":
        return YearlessSpan(month).before(anchor)
    if which == "next":
        return YearlessSpan(month).after(anchor)
    return month_span(anchor.year, month)


def _yearless(span: YearlessSpan, anchor: date | None, m: re.Match[str]) -> Resolved:
    """A month or day named without a year: the occurrence nearest the day said, unless
    the words around it say which side of that day it lies on (:func:`_leaning`)."""
    if anchor is None:
        return span
    nearest = span.nearest(anchor)
    if nearest.start <= anchor <= nearest.end:  # the day said is in it: no side to take
        return nearest
    lean = _leaning(m)
    if lean == "future" and nearest.end < anchor:
        return span.after(anchor)
    if lean == "past" and nearest.start > anchor:
        return span.before(anchor)
    return nearest


# Words that place what a clause tells ahead of the day it was said ("we'll be in Porto in
# November", said in March), or behind it ("we went to Japan in January", said in
# November). Only unambiguous ones:
# - a verb in -ed can be an adjective ("excited about the trip in April");
# - "booked", "signed up", "bought", "found" tell when something was done, which may be the
#   month named or not; only the event one signs up for lies ahead (:data:`_SIGNED_UP`);
# - "planned to" is a plan of the past ("planned to go in May, but got sick");
# - "going to" is the verb go before a place or a person ("been going to the gym since
#   January", "started going to Pilates"), and a past plan after "was"/"were";
# - "Will" with a capital is as often a name ("Will and I").
_AHEAD = re.compile(
    r"\b(?:(?-i:will|WILL)|won['’]t|shall|gonna|(?:plans?|planning)\s+(?:to|for|on)"
    r"|(?<!been\s)(?<!was\s)(?<!were\s)(?<!kept\s)(?<!keep\s)(?<!started\s)(?<!stopped\s)"
    r"going\s+to\s+(?!(?:the|a|an|my|your|his|her|its|our|their|this|that|these|those|some"
    r"|school|work|church|bed|town|college|class|sleep)\b)(?-i:[a-z]+)"
    r"|hop(?:e|es|ing)\s+to|can['’]t\s+wait|look(?:ing)?\s+forward|upcoming|coming\s+up"
    r"|scheduled)\b|\w['’]ll\b",
    re.I,
)
_BEHIND = re.compile(
    r"\b(?:was|wasn['’]t|were|weren['’]t|did|didn['’]t|had|hadn['’]t|went|came|saw|took|ran"
    r"|met|spent|gave|finished|visited|attended|celebrated|returned|travell?ed|stayed|ago)\b",
    re.I,
)
# Signing up, registering or booking for an event: the month dates the event, and what one
# signs up for is ahead ("signed up for the Lisbon half marathon in October").
_SIGNED_UP = re.compile(
    r"\b(?:sign(?:ed|ing|s)?\s+up|register(?:ed|ing|s)?|enroll?(?:ed|ing|s)?|booked"
    r"|bought\s+tickets)\s+(?:\w+\s+){0,2}?for\s+(?:\w+\s+){0,4}?"
    r"(?:race|marathon|run|triathlon|class(?:es)?|course|conference|concert|show|tour|trip"
    r"|flight|workshop|retreat|competition|tournament|exam|festival|camp|match|game)s?\b",
    re.I,
)
# What "since" governs is behind, whatever the clause's verb ("since January", "since 3
# May"), unless it is the causal "since" ("Since May is busy, ..."). "Back in" is behind
# only where it opens the clause ("Back in May, ..."): "I'll be back in May" is ahead.
_SINCE = re.compile(r"since\b", re.I)
_SINCE_BEFORE = re.compile(r"\bsince\s+(?:the\s+)?$", re.I)
_CAUSAL = re.compile(r"\s+(?:is|are|was|were|has|have|had|will|would)\b", re.I)
_BACK_IN = re.compile(r"back\s+in\b", re.I)
# What may stand before a time phrase that opens its clause.
_OPENING = " \t,(\"'“"
# What is booked, set or due for a time is ahead ("The trip was booked for 3 May").
_FOR_BEFORE = re.compile(r"\b(?:booked|scheduled|planned|set|due|fixed)\s+for\s+$", re.I)
# A clause ends at a sentence's end (not an abbreviation's dot: "Dr.", "a.m.") or where
# another clause is joined on ("..., but", "because").
_CLAUSE_END = re.compile(
    r"[!?;\n]|(?<!\bDr)(?<!\bMr)(?<!\bMs)(?<!\bMrs)(?<!\bSt)(?<!\bvs)(?<!\b[ap]\.m)"
    r"(?<!\be\.g)(?<!\bi\.e)\.(?=\s|$)"
    r"|,\s*(?=(?:and|but|so|while|whereas|though|although|because)\b)"
    r"|\b(?=(?:but|because|although|though|whereas)\b)",
    re.I,
)
# A comma before a new subject ends a clause too ("... in January, it was great"), but not
# after a time phrase that opens its clause ("In October, I will run").
_COMMA_SUBJECT = re.compile(r",\s*(?=(?:it|we|i|he|she|they|you)\b)", re.I)


#: How far either side of a time phrase its clause is read (characters). A clause is
#: rarely longer; reading the whole text for each phrase made a long text of many phrases
#: cost the square of its length ("May 3 " x 1400 took 23 s).
CLAUSE_REACH = 300


def _leaning(m: re.Match[str]) -> str | None:
    """``"future"`` or ``"past"`` if the clause holding the match says which, else None.

    The cue nearest the time phrase decides ("I'll never forget when we went to Paris in
    May" is behind); two at the same distance decide nothing. The clause is read at most
    :data:`CLAUSE_REACH` characters either side of the phrase."""
    text = m.string
    first, last = max(0, m.start() - CLAUSE_REACH), min(len(text), m.end() + CLAUSE_REACH)
    since = _SINCE.match(m[0]) or _SINCE_BEFORE.search(text, first, m.start())
    if since and not _CAUSAL.match(text, m.end(), last):
        return "past"
    if _FOR_BEFORE.search(text, first, m.start()):
        return "future"
    starts = [
        x.end() for p in (_CLAUSE_END, _COMMA_SUBJECT) for x in p.finditer(text, first, m.start())
    ]
    lo = max(starts, default=first)
    opens = not text[lo : m.start()].strip(_OPENING)  # the time phrase opens its clause
    if opens and _BACK_IN.match(m[0]):
        return "past"
    ends = [_CLAUSE_END.search(text, m.end(), last)]
    if not opens:
        ends.append(_COMMA_SUBJECT.search(text, m.end(), last))
    hi = min((x.start() for x in ends if x is not None), default=last)
    cues = sorted(
        (_gap(x, m), lean)
        for pattern, lean in ((_AHEAD, "future"), (_SIGNED_UP, "future"), (_BEHIND, "past"))
        for x in pattern.finditer(text, lo, hi)
    )
    if not cues or len({lean for gap, lean in cues if gap == cues[0][0]}) > 1:
        return None
    return cues[0][1]


def _gap(cue: re.Match[str], m: re.Match[str]) -> int:
    """Characters between a cue and the time phrase."""
    return m.start() - cue.end() if cue.end() <= m.start() else max(0, cue.start() - m.end())


def _date(
    day: str, month_token: str, year: str | None, anchor: date | None, m: re.Match[str]
) -> Resolved | None:
    month = _month(month_token)
    if month is None or not 1 <= int(day) <= 31:
        return None
    if year is None:
        return _yearless(YearlessSpan(month, int(day), int(day)), anchor, m)
    try:
        return day_span(date(int(year), month, int(day)))
    except ValueError:
        return None


def _dmy(m: re.Match[str], anchor: date | None) -> Resolved | None:
    return _date(m["day"], m["month"], m["year"], anchor, m)


def _iso(m: re.Match[str], _anchor: date | None) -> Resolved | None:
    try:
        return day_span(date(int(m["y"]), int(m["mo"]), int(m["d"])))
    except ValueError:
        return None


def _month_year(m: re.Match[str], _anchor: date | None) -> Resolved | None:
    month = _month(m["month"])
    return month_span(int(m["year"]), month) if month else None


def _bare_month(m: re.Match[str], anchor: date | None) -> Resolved | None:
    month = _month(m["month"])
    return _yearless(YearlessSpan(month), anchor, m) if month else None


def _week_of_month(m: re.Match[str], anchor: date | None) -> Resolved | None:
    month = _month(m["month"])
    if month is None:
        return None
    first = {"first": 1, "second": 8, "third": 15, "fourth": 22}.get(m["nth"].lower(), -7)
    part = YearlessSpan(month, first, first + 6 if first > 0 else -1)
    return part.in_year(int(m["year"])) if m["year"] else _yearless(part, anchor, m)


def _year(m: re.Match[str], _anchor: date | None) -> Resolved | None:
    return year_span(int(m["year"]))


def _absolute(text: str) -> TimeSpan | None:
    """The day a :data:`DATE` names."""
    return next((x.span for x in iter_times(text, None) if isinstance(x.span, TimeSpan)), None)


def _around_date(m: re.Match[str], _anchor: date | None) -> Resolved | None:
    """ "the Friday before 15 July 2023", "two weekends before 17 July 2023"."""
    at = _absolute(m["date"])
    if at is None:
        return None
    inner = m["what"]
    before = m["dir"].lower() == "before"
    if (w := re.fullmatch(WEEKDAY, inner, re.I)) is not None:
        return day_span(_weekday_from(at.start, _weekday(w[0]), -1 if before else 1))
    if (n := re.fullmatch(rf"(?P<n>{NUM})\s+(?P<unit>{UNIT})s?", inner, re.I)) is not None:
        lo, hi = _count(n["n"])
        sign = -1 if before else 1
        return shifted_range(n["unit"].lower(), at.start, sign * lo, sign * hi)
    return shifted_span(inner.lower(), at.start, -1 if before else 1)


def _unit_of_date(m: re.Match[str], _anchor: date | None) -> Resolved | None:
    """ "the week of 1 May 2023", "weekend of 6 May 2023"."""
    at = _absolute(m["date"])
    if at is None:
        return None
    return week_span(at.start) if m["unit"].lower() == "week" else weekend_span(at.start)


def _range(m: re.Match[str], _anchor: date | None) -> Resolved | None:
    """ "1 May 2023 to 12 May 2023" (how a span without a unit is labelled)."""
    a, b = _absolute(m["a"]), _absolute(m["b"])
    if a is None or b is None or b.end < a.start:
        return None
    return TimeSpan(a.start, b.end, "span")


def _fixed(days: int) -> Rule:
    def rule(_m: re.Match[str], anchor: date | None) -> Resolved | None:
        return day_span(anchor + timedelta(days=days)) if anchor is not None else None

    return rule


_WHICH = r"(?:the\s+)?(?:this\s+past|this\s+coming|last|this|next|past|coming|previous|following)"

# Longer expressions win where two start at the same place, so their order here is free.
_RULES: tuple[tuple[re.Pattern[str], Rule], ...] = tuple(
    (re.compile(p, re.I), rule)
    for p, rule in (
        (rf"(?P<a>{DATE})\s+to\s+(?P<b>{DATE})", _range),
        (
            rf"(?:the\s+)?(?P<what>{WEEKDAY}|{NUM}\s+{UNIT}s?|{UNIT})\s+(?P<dir>before|after)"
            rf"\s+(?P<date>{DATE})",
            _around_date,
        ),
        (rf"(?:the\s+)?(?P<unit>weekend|week)\s+of\s+(?P<date>{DATE})", _unit_of_date),
        (r"(?:the\s+)?day\s+before\s+yesterday", _fixed(-2)),
        (r"(?:the\s+)?day\s+after\s+tomorrow", _fixed(2)),
        (r"yesterday|last\s+night", _fixed(-1)),
        (r"today|tonight|this\s+(?:morning|afternoon|evening)", _fixed(0)),
        (r"tomorrow", _fixed(1)),
        (rf"(?P<n>{NUM})\s+(?P<unit>{UNIT})s?\s+(?P<dir>ago|back|from\s+now)", _ago),
        (rf"(?P<which>{_WHICH}|earlier\s+this|later\s+this)\s+(?P<unit>{UNIT})", _relative_unit),
        (r"the\s+(?P<unit>weekend|week|month|year)\s+(?P<which>before|after)", _unit_before),
        (rf"(?P<which>{_WHICH})\s+(?P<day>{WEEKDAY})", _weekday_rel),
        (rf"(?P<which>last|this|next|past)\s+(?P<season>{SEASON})", _season_rel),
        (rf"(?P<season>{SEASON}),?\s+(?:of\s+)?(?P<year>{YEAR})", _season_year),
        (rf"(?P<which>last|this|next)\s+(?P<month>{MONTH})", _month_rel),
        (
            rf"(?:the\s+)?(?P<nth>first|second|third|fourth|last)\s+week\s+of\s+(?P<month>{MONTH})"
            rf"(?:,?\s+(?P<year>{YEAR}))?",
            _week_of_month,
        ),
        (
            rf"(?:the\s+)?(?P<day>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{MONTH})"
            rf"(?:,?\s+(?P<year>{YEAR}))?",
            _dmy,
        ),
        (
            rf"(?P<month>{MONTH})\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?!\d)"
            rf"(?:,?\s+(?P<year>{YEAR}))?",
            _dmy,
        ),
        (r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})", _iso),
        (rf"(?P<month>{MONTH}),?\s+(?P<year>{YEAR})", _month_year),
        (
            rf"{_PREP}\s+(?:the\s+)?(?:(?:end|beginning|start|middle)\s+of\s+)?(?P<month>{MONTH})(?!,?\s+(?:{YEAR}|\d))",
            _bare_month,
        ),
        (rf"(?:{_PREP}|the\s+year)\s+(?P<year>{YEAR})(?!\s*[-/]\d)", _year),
        *ZH_RULES,
    )
)


def find_times(
    text: str, anchor: date | datetime | None = None, limit: int | None = None
) -> list[Mention]:
    """Every time expression of ``text`` (the first ``limit`` if given), in order, none
    overlapping (where two overlap the one starting first, then the longer, is kept),
    resolved against ``anchor``. An expression that would fall outside the years 1-9999 is
    not one."""
    return list(islice(iter_times(text, anchor), limit))


_Found = tuple[int, int, int, re.Match[str]]  # start, -end, rule, match


def iter_times(text: str, anchor: date | datetime | None = None) -> Iterator[Mention]:
    """:func:`find_times` lazily: the rules' matches are merged in text order as each
    pattern finds them, and a match is resolved (its clause read) only when it is the next
    one that no mention kept before overlaps, so a caller wanting the first few reads no
    further into the text than those."""
    day = anchor.date() if isinstance(anchor, datetime) else anchor

    def found(order: int, pattern: re.Pattern[str]) -> Iterator[_Found]:
        # One pattern's matches come in text order, so the merge below keeps text order.
        for m in pattern.finditer(text):
            if _bounded(text, m.start(), m.end()):
                yield m.start(), -m.end(), order, m

    streams = [found(order, pattern) for order, (pattern, _rule) in enumerate(_RULES)]
    edge = 0
    for start, neg_end, order, m in heapq.merge(*streams, key=lambda x: x[:3]):
        if start < edge:
            continue  # overlaps a mention kept (resolved or not, it would not be kept)
        try:
            span = _RULES[order][1](m, day)
        except (OverflowError, ValueError):  # past the calendar's ends (year 1 or 9999)
            continue
        if span is None:
            continue
        end = -neg_end
        phrase = text[start:end]
        if isinstance(span, TimeSpan):
            span = span.with_phrase(phrase)
        yield Mention(phrase, start, end, span)
        edge = end


def _bounded(text: str, start: int, end: int) -> bool:
    """The match is whole words (the patterns carry no word boundaries themselves); an
    edge beside a Chinese character is one (Chinese is written without spaces)."""
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    joined_before = before.isalnum() and not has_cjk(before + text[start])
    return not (joined_before or (after.isalnum() and not has_cjk(text[end - 1] + after)))


def resolve(text: str, anchor: date | datetime | None) -> TimeSpan | None:
    """The first expression of ``text`` that resolves to days, or None."""
    return next((m.span for m in iter_times(text, anchor) if isinstance(m.span, TimeSpan)), None)


_COUNT_WORDS = {v: k for k, v in _NUMBERS.items()}
_WEEKDAY_WORD = re.compile(rf"\b{WEEKDAY}\b", re.I)
_SAID_YEAR = re.compile(YEAR)
_FOUR_DIGITS = re.compile(r"\d{4}")


def said_label(span: TimeSpan, said: date | datetime | None) -> str:
    """How ``span`` reads in context beside text said on ``said``. A week or a weekend
    that its phrase named relative to that day ("last week", "two weekends ago") is
    written as that relation: "week before 9 June 2023", "two weekends before 17 July
    2023"; a day its phrase named by weekday ("last Friday"), within a week of it, as
    "Friday before 15 July 2023". Anything else (the day's own week or weekend too), and
    a span whose phrase names its own year, reads as :meth:`TimeSpan.label`.

    Why: a week or weekend has no name of its own, and the relation is what the speaker
    said and how a person reports it ("the week before 9 June"), not the resolver's
    Monday it starts on. Every label reads back through :func:`find_times` to the same
    days, as the calendar labels do (so only for days said in the years it reads)."""
    day = said.date() if isinstance(said, datetime) else said
    if day is None or not span.phrase or not _SAID_YEAR.fullmatch(str(day.year)):
        return span.label()
    # A phrase resolves to days with no day said only by naming a year: every rule that
    # needs no anchor reads one (a date, "in 2022", an ISO day), and a phrase the rules
    # matched holds four digits only as a year. Such a phrase keeps its calendar name.
    if _FOUR_DIGITS.search(span.phrase):
        return span.label()
    return _relative_to(span, day) or span.label()


def _relative_to(span: TimeSpan, day: date) -> str | None:
    """The span as a relation to ``day`` (None: it has no such wording)."""
    at = format_date(day)
    if span.unit == "day" and span.days == 1 and _WEEKDAY_WORD.search(span.phrase):
        gap = (span.start - day).days
        if 1 <= abs(gap) <= 7:
            name = _DAY_NAMES[span.start.weekday()].capitalize()
            return f"{name} {'before' if gap < 0 else 'after'} {at}"
        return None
    for unit, make in (("week", week_span), ("weekend", weekend_span)):
        if span.unit == unit and make(span.start).same_days(span):
            # counted between Mondays, so no span is built near the calendar's end
            weeks = (_monday(span.start) - _monday(day)).days // 7
            if (n := abs(weeks)) in _COUNT_WORDS:
                count = unit if n == 1 else f"{_COUNT_WORDS[n]} {unit}s"
                return f"{count} {'before' if weeks < 0 else 'after'} {at}"
    return None


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())
