"""Calendar spans: what a time expression in a conversation resolves to, and its label.

A :class:`TimeSpan` is a run of whole days (``start`` to ``end``, both included) with the
unit it was named in ("day", "week", "weekend", "month", "season", "year" or "span" for
anything else, e.g. "a few weeks ago"). Its :meth:`~TimeSpan.label` is how it appears in
prompt context ("on 8 May 2023", "week of 1 May 2023"); :func:`lightmem.timeresolve.find_times`
reads every label back to the same span. A :class:`YearlessSpan` is a time named without a
year ("in June", "13 August"), as questions often do.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from types import MappingProxyType
from typing import Any, Literal, get_args

from lightmem.timeparse import format_date, format_month

__all__ = [
    "SEASONS",
    "UNITS",
    "TimeSpan",
    "TimeUnit",
    "YearlessSpan",
    "add_months",
    "day_span",
    "month_span",
    "parse_iso_span",
    "season_span",
    "shifted_range",
    "shifted_span",
    "span_from_dict",
    "span_from_epochs",
    "span_to_dict",
    "span_to_epochs",
    "week_span",
    "weekend_span",
    "year_span",
]

TimeUnit = Literal["day", "week", "weekend", "month", "season", "year", "span"]
UNITS: tuple[TimeUnit, ...] = get_args(TimeUnit)
_UNIT_NAMED: dict[str, TimeUnit] = {u: u for u in UNITS}

#: meteorological seasons of the northern hemisphere: name -> (first month, months)
SEASONS: Mapping[str, int] = MappingProxyType(
    {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
)


@dataclass(frozen=True, slots=True)
class TimeSpan:
    """Days ``start``..``end`` (inclusive), named in ``unit``; ``phrase`` is the text it was
    resolved from ("last Saturday"), empty when it was not read from text."""

    start: date
    end: date
    unit: TimeUnit = "span"
    phrase: str = ""

    def __post_init__(self) -> None:
        if self.end < self.start:
            raise ValueError(f"time span ends ({self.end}) before it starts ({self.start})")
        if self.unit not in UNITS:
            raise ValueError(f"time span unit must be one of {', '.join(UNITS)}: {self.unit!r}")

    @property
    def days(self) -> int:
        return (self.end - self.start).days + 1

    def same_days(self, other: TimeSpan) -> bool:
        return self.start == other.start and self.end == other.end

    def overlaps(self, other: TimeSpan) -> bool:
        return self.start <= other.end and other.start <= self.end

    def start_time(self) -> datetime:
        """Midnight UTC of the first day."""
        return datetime(self.start.year, self.start.month, self.start.day, tzinfo=UTC)

    def end_time(self) -> datetime:
        """Midnight UTC after the last day (the span is half-open in time)."""
        nxt = self.end + timedelta(days=1)
        return datetime(nxt.year, nxt.month, nxt.day, tzinfo=UTC)

    def label(self) -> str:
        """How the span reads in context: "on 8 May 2023", "week of 1 May 2023",
        "weekend of 6 May 2023", "in May 2023", "in summer 2023", "in 2022" or
        "1 May 2023 to 12 May 2023"."""
        s = self.start
        if self.unit == "day" and self.days == 1:
            return f"on {format_date(s)}"
        if self.unit == "week" and self.days == 7 and s.weekday() == 0:
            return f"week of {format_date(s)}"
        if self.unit == "weekend" and self.days == 2 and s.weekday() == 5:
            return f"weekend of {format_date(s)}"
        if self.unit == "month" and self.same_days(month_span(s.year, s.month)):
            return f"in {format_month(s)}"
        if self.unit == "year" and self.same_days(year_span(s.year)):
            return f"in {s.year}"
        if self.unit == "season":
            for name in SEASONS:
                if name != "autumn" and self.same_days(season_span(name, s.year)):
                    return f"in {name} {s.year}"
        return f"{format_date(s)} to {format_date(self.end)}"

    def iso(self) -> str:
        """The ISO form :func:`parse_iso_span` reads: "2023-05-07", "2023-05", "2023" or
        "2023-05-01/2023-05-07"."""
        s = self.start
        if self.days == 1:
            return s.isoformat()
        if self.same_days(month_span(s.year, s.month)):
            return f"{s:%Y-%m}"
        if self.same_days(year_span(s.year)):
            return f"{s:%Y}"
        return f"{s.isoformat()}/{self.end.isoformat()}"

    def with_phrase(self, phrase: str) -> TimeSpan:
        return TimeSpan(self.start, self.end, self.unit, phrase)


@dataclass(frozen=True, slots=True)
class YearlessSpan:
    """Days ``first``..``last`` of ``month`` in no particular year; a negative day counts
    from the month's end (-1 is its last day), so (6, 1, -1) is all of June and (6, -7, -1)
    its last week."""

    month: int
    first: int = 1
    last: int = -1

    def __post_init__(self) -> None:
        if not 1 <= self.month <= 12 or not all(1 <= abs(d) <= 31 for d in (self.first, self.last)):
            raise ValueError(f"no such days of a month: {self.month}, {self.first}..{self.last}")

    def in_year(self, year: int) -> TimeSpan:
        length = calendar.monthrange(year, self.month)[1]
        first, last = (
            min(length, d) if d > 0 else max(1, length + 1 + d) for d in (self.first, self.last)
        )
        if (first, last) == (1, length):
            return month_span(year, self.month)
        start, end = (
            date(year, self.month, min(first, last)),
            date(year, self.month, max(first, last)),
        )
        return TimeSpan(start, end, "day" if start == end else "span")

    def occurs_in(self, year: int) -> bool:
        """Whether every day named exists in ``year`` (29 February does not, most years)."""
        length = calendar.monthrange(year, self.month)[1]
        return all(abs(d) <= length for d in (self.first, self.last))

    def nearest(self, anchor: date) -> TimeSpan:
        """The occurrence closest to ``anchor`` (ties go to the past)."""
        return min(self._around(anchor), key=lambda s: (_distance(s, anchor), s.start > anchor))

    def after(self, anchor: date) -> TimeSpan:
        """The first occurrence that begins after ``anchor``."""
        return min((s for s in self._around(anchor) if s.start > anchor), key=_start)

    def before(self, anchor: date) -> TimeSpan:
        """The latest occurrence that ends before ``anchor``."""
        return max((s for s in self._around(anchor) if s.end < anchor), key=_start)

    def _around(self, anchor: date) -> list[TimeSpan]:
        # Eight years either side hold a leap day each way, even across a century year
        # that has none (2100); days no year has ("31 April") fall back to the month's last
        # day of the neighbouring years.
        years = range(anchor.year - 8, anchor.year + 9)
        real = [y for y in years if self.occurs_in(y)]
        return [self.in_year(y) for y in real or years]


def _start(s: TimeSpan) -> date:
    return s.start


def _distance(s: TimeSpan, d: date) -> int:
    if s.start <= d <= s.end:
        return 0
    return min(abs((s.start - d).days), abs((s.end - d).days))


def day_span(d: date) -> TimeSpan:
    return TimeSpan(d, d, "day")


def week_span(d: date) -> TimeSpan:
    """The Monday-to-Sunday week holding ``d``."""
    monday = d - timedelta(days=d.weekday())
    return TimeSpan(monday, monday + timedelta(days=6), "week")


def weekend_span(d: date) -> TimeSpan:
    """The Saturday and Sunday of the week holding ``d``."""
    saturday = d - timedelta(days=d.weekday()) + timedelta(days=5)
    return TimeSpan(saturday, saturday + timedelta(days=1), "weekend")


def month_span(year: int, month: int) -> TimeSpan:
    last = calendar.monthrange(year, month)[1]
    return TimeSpan(date(year, month, 1), date(year, month, last), "month")


def year_span(year: int) -> TimeSpan:
    return TimeSpan(date(year, 1, 1), date(year, 12, 31), "year")


def season_span(name: str, year: int) -> TimeSpan:
    """``name`` of ``year``; winter is December of ``year`` to February of the next."""
    first = SEASONS[name]
    start = date(year, first, 1)
    end_year, end_month = (year + 1, 2) if first == 12 else (year, first + 2)
    return TimeSpan(start, month_span(end_year, end_month).end, "season")


def add_months(year: int, month: int, delta: int) -> tuple[int, int]:
    n = year * 12 + (month - 1) + delta
    return n // 12, n % 12 + 1


_ISO_DAY = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_ISO_MONTH = re.compile(r"(\d{4})-(\d{2})")
_ISO_YEAR = re.compile(r"(\d{4})")


def shifted_span(unit: str, anchor: date, n: int) -> TimeSpan:
    """The ``unit`` ("day", "week", "weekend", "month" or "year") holding the day ``n``
    units after ``anchor`` (``n`` < 0: before)."""
    if unit == "day":
        return day_span(anchor + timedelta(days=n))
    if unit == "week":
        return week_span(anchor + timedelta(weeks=n))
    if unit == "weekend":
        return weekend_span(anchor + timedelta(weeks=n))
    if unit == "month":
        return month_span(*add_months(anchor.year, anchor.month, n))
    return year_span(anchor.year + n)


def shifted_range(unit: str, anchor: date, lo: int, hi: int) -> TimeSpan:
    """From ``lo`` to ``hi`` units away (one unit when they are equal)."""
    a, b = shifted_span(unit, anchor, lo), shifted_span(unit, anchor, hi)
    if a == b:
        return a
    return TimeSpan(min(a.start, b.start), max(a.end, b.end), "span")


def parse_iso_span(text: str) -> TimeSpan | None:
    """ "2023-05-07" (a day), "2023-05" (a month), "2023" (a year) or "2023-05-01/2023-05-07"
    (a range of days: a Monday-to-Sunday range is a week, Saturday-Sunday a weekend);
    None for anything else, including impossible dates."""
    text = text.strip()
    try:
        if "/" in text:
            a, _, b = text.partition("/")
            first, last = parse_iso_span(a), parse_iso_span(b)
            if first is None or last is None or last.end < first.start:
                return None
            return _classified(first.start, last.end)
        if m := _ISO_DAY.fullmatch(text):
            return day_span(date(int(m[1]), int(m[2]), int(m[3])))
        if m := _ISO_MONTH.fullmatch(text):
            return month_span(int(m[1]), int(m[2]))
        if (m := _ISO_YEAR.fullmatch(text)) and int(m[1]) >= 1:
            return year_span(int(m[1]))
    except ValueError:
        return None
    return None


def _classified(start: date, end: date) -> TimeSpan:
    """A range of days with the unit its shape has."""
    for make in (day_span, week_span, weekend_span):
        s = make(start)
        if s.same_days(TimeSpan(start, end)):
            return s
    if start.day == 1:
        m = month_span(start.year, start.month)
        if m.end == end:
            return m
        if start.month == 1 and year_span(start.year).end == end:
            return year_span(start.year)
    return TimeSpan(start, end, "span")


def span_to_dict(span: TimeSpan | None) -> dict[str, str] | None:
    """A span as JSON values (ISO days, both included), None for None."""
    if span is None:
        return None
    return {
        "start": span.start.isoformat(),
        "end": span.end.isoformat(),
        "unit": span.unit,
        "phrase": span.phrase,
        "label": span.label(),
    }


def span_from_dict(d: Any) -> TimeSpan | None:
    """The span :func:`span_to_dict` wrote (None, or a snapshot without one, gives None)."""
    if not d:
        return None
    return TimeSpan(
        date.fromisoformat(d["start"]), date.fromisoformat(d["end"]), d["unit"], d["phrase"]
    )


def span_to_epochs(span: TimeSpan | None) -> tuple[float | None, float | None]:
    """How a store keeps a span: epoch seconds of its first midnight and of the midnight
    after its last day (half-open, so overlaps compare with < and >)."""
    if span is None:
        return None, None
    return span.start_time().timestamp(), span.end_time().timestamp()


def span_from_epochs(
    start: float | None, end: float | None, unit: str, phrase: str
) -> TimeSpan | None:
    """The span :func:`span_to_epochs` stored (None when either end is missing)."""
    if start is None or end is None:
        return None
    first = datetime.fromtimestamp(start, tz=UTC).date()
    last = datetime.fromtimestamp(end, tz=UTC).date() - timedelta(days=1)
    return TimeSpan(first, max(first, last), _UNIT_NAMED.get(unit, "span"), phrase)
