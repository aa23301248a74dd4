"""The relative-time resolver: examples from real conversations, and properties over any
anchor day (weeks, weekdays, months, labels that read back to the same days)."""

from __future__ import annotations

import itertools
import re
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lightmem.timeparse import parse_timestamp
from lightmem.timeresolve import find_times, resolve, said_label
from lightmem.timespan import (
    SEASONS,
    TimeSpan,
    YearlessSpan,
    day_span,
    month_span,
    parse_iso_span,
    season_span,
    span_from_dict,
    span_from_epochs,
    span_to_dict,
    span_to_epochs,
    week_span,
    weekend_span,
    year_span,
)

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
anchors = st.dates(min_value=date(1901, 1, 1), max_value=date(2098, 12, 31))


@pytest.mark.parametrize(
    ("said_at", "text", "phrase", "label"),
    [
        ("1:56 pm on 8 May, 2023", "I went to a support group yesterday.", "yesterday",
         "on 7 May 2023"),
        ("1:14 pm on 25 May, 2023", "I ran a charity race last Saturday", "last Saturday",
         "on 20 May 2023"),
        ("1:14 pm on 25 May, 2023", "We're thinking about camping next month", "next month",
         "in June 2023"),
        ("7:55 pm on 9 June, 2023", "my school event last week was awesome", "last week",
         "week of 29 May 2023"),
        ("2:31 pm on 17 July, 2023", "we went camping two weekends ago", "two weekends ago",
         "weekend of 8 July 2023"),
        ("2:31 pm on 17 July, 2023", "Last weekend I joined a program", "Last weekend",
         "weekend of 15 July 2023"),
        ("8:56 pm on 20 July, 2023", "I joined a new group last Tues.", "last Tues",
         "on 18 July 2023"),
        ("6:55 pm on 20 October, 2023", "that roadtrip this past weekend", "this past weekend",
         "weekend of 14 October 2023"),
        ("1:50 pm on 17 August, 2023", "We had a blast last year at Pride", "last year",
         "in 2022"),
        ("1:50 pm on 17 August, 2023", "that was back in 2019", "back in 2019", "in 2019"),
        ("1:50 pm on 17 August, 2023", "three days ago I fell", "three days ago",
         "on 14 August 2023"),
        ("1:50 pm on 17 August, 2023", "I'm seeing her this Friday", "this Friday",
         "on 18 August 2023"),
        ("1:50 pm on 17 August, 2023", "it rained the week before", "the week before",
         "week of 7 August 2023"),
        ("1:50 pm on 17 August, 2023", "a few weeks ago we met", "a few weeks ago",
         "17 July 2023 to 6 August 2023"),
        ("1:50 pm on 17 August, 2023", "we went in June", "in June", "in June 2023"),
        ("1:50 pm on 17 August, 2023", "last summer was hot", "last summer", "in summer 2022"),
        ("3:00 pm on 10 January, 2024", "this winter is cold", "this winter", "in winter 2023"),
        ("1:50 pm on 17 August, 2023", "on 3 March 2021 it began", "3 March 2021",
         "on 3 March 2021"),
        ("1:50 pm on 17 August, 2023", "my birthday is on March 3rd", "March 3rd",
         "on 3 March 2023"),
    ],
)  # fmt: skip
def test_expressions_from_conversations(said_at: str, text: str, phrase: str, label: str) -> None:
    found = find_times(text, parse_timestamp(said_at))
    assert [m.phrase for m in found] == [phrase]
    span = found[0].span
    assert isinstance(span, TimeSpan) and span.label() == label and span.phrase == phrase
    assert text[found[0].start : found[0].end] == phrase


@pytest.mark.parametrize(
    ("said_at", "text", "label"),
    [
        ("7:55 pm on 9 June, 2023", "my school event last week was awesome",
         "week before 9 June 2023"),
        ("2:31 pm on 17 July, 2023", "we went camping two weekends ago",
         "two weekends before 17 July 2023"),
        ("2:31 pm on 17 July, 2023", "Last weekend I joined a program",
         "weekend before 17 July 2023"),
        ("6:55 pm on 20 October, 2023", "that roadtrip this past weekend",
         "weekend before 20 October 2023"),
        # the day's own week keeps its Monday ("week of 26 June" said on Monday 26 June
        # could be read as the weekend just gone)
        ("1:50 pm on 23 August, 2023", "so busy this week", "week of 21 August 2023"),
        ("1:50 pm on 26 June, 2023", "camping this weekend", "weekend of 1 July 2023"),
        ("1:50 pm on 17 August, 2023", "we fly out next week", "week after 17 August 2023"),
        ("8:56 pm on 20 July, 2023", "I joined a new group last Tues.",
         "Tuesday before 20 July 2023"),
        ("1:50 pm on 17 August, 2023", "I'm seeing her this Friday", "Friday after 17 August 2023"),
        # days, months and years have names of their own
        ("1:56 pm on 8 May, 2023", "I went to a support group yesterday.", "on 7 May 2023"),
        ("1:14 pm on 25 May, 2023", "camping next month", "in June 2023"),
        ("1:50 pm on 17 August, 2023", "We had a blast last year", "in 2022"),
        # a phrase naming its own days keeps that name, however far from the day said
        ("1:50 pm on 17 August, 2023", "the week of 1 May 2023 was long", "week of 1 May 2023"),
        ("1:50 pm on 17 August, 2023", "on Friday 11 August 2023 we met", "on 11 August 2023"),
        ("1:50 pm on 17 August, 2023", "a few weeks ago we met", "17 July 2023 to 6 August 2023"),
    ],
)  # fmt: skip
def test_relative_weeks_and_weekdays_read_relative_to_the_day_said(
    said_at: str, text: str, label: str
) -> None:
    said = parse_timestamp(said_at)
    span = resolve(text, said)
    assert span is not None and said_label(span, said) == label
    back = resolve(label, None)  # the label alone names its days
    assert back is not None and back.same_days(span)


def test_a_span_without_a_phrase_or_a_day_said_keeps_its_calendar_label() -> None:
    week = week_span(date(2023, 5, 29))
    assert said_label(week, date(2023, 6, 9)) == "week of 29 May 2023"  # no phrase
    assert said_label(week.with_phrase("last week"), None) == "week of 29 May 2023"
    far = week_span(date(2023, 1, 2)).with_phrase("that week")  # 22 weeks: no count word
    assert said_label(far, date(2023, 6, 9)) == "week of 2 January 2023"
    iso = week_span(date(2023, 5, 29)).with_phrase("2023-05-29/2023-06-04")  # names its year
    assert said_label(iso, date(2023, 6, 9)) == "week of 29 May 2023"
    fri = day_span(date(2023, 8, 4)).with_phrase("last Friday")  # 13 days: not "the" Friday
    assert said_label(fri, date(2023, 8, 17)) == "on 4 August 2023"
    fri = day_span(date(2023, 8, 11)).with_phrase("last Friday")
    assert said_label(fri, date(2023, 8, 18)) == "Friday before 18 August 2023"  # 7 days


_PHRASES = (
    "yesterday", "last week", "two weekends ago", "this Friday", "the week before",
    "next month", "in June", "13 August", "a few weeks ago", "last summer", "8 May 2023",
    "the week of 1 May 2023", "in 2022", "2023-05-07", "summer 2021", "May 2023",
    "the Friday before 15 July 2023", "1 May 2023 to 12 May 2023", "March 3rd, 2021",
    "the last week of June 2023", "back in 2019",
)  # fmt: skip


@given(st.lists(st.sampled_from(_PHRASES), min_size=1, max_size=4), anchors)
def test_a_phrase_names_its_own_days_exactly_when_it_names_a_year(
    parts: list[str], anchor: date
) -> None:
    # what said_label relies on to keep a phrase's calendar name without reading it again
    for m in find_times(" and then ".join(parts), anchor):
        alone = any(isinstance(x.span, TimeSpan) for x in find_times(m.phrase))
        assert alone == bool(re.search(r"\d{4}", m.phrase)), m.phrase


def test_days_said_where_labels_do_not_read_back_keep_the_calendar_label() -> None:
    # the week of a day said at the calendar's end runs past it: no error, no relation
    last = week_span(date(9999, 12, 20)).with_phrase("last week")
    assert said_label(last, date(9999, 12, 30)) == "week of 20 December 9999"
    old = week_span(date(2199, 12, 23)).with_phrase("last week")
    assert said_label(old, date(2200, 1, 2)) == "week of 23 December 2199"


@pytest.mark.parametrize(
    ("answer", "days"),
    [
        ("The week before 9 June 2023", (date(2023, 5, 29), date(2023, 6, 4))),
        ("The sunday before 25 May 2023", (date(2023, 5, 21), date(2023, 5, 21))),
        ("two weekends before 17 July 2023", (date(2023, 7, 8), date(2023, 7, 9))),
        ("The week of 23 August 2023", (date(2023, 8, 21), date(2023, 8, 27))),
        ("The Friday before 15 July 2023", (date(2023, 7, 14), date(2023, 7, 14))),
        ("19 January, 2023", (date(2023, 1, 19), date(2023, 1, 19))),
        ("January, 2023", (date(2023, 1, 1), date(2023, 1, 31))),
        ("Since 2016", (date(2016, 1, 1), date(2016, 12, 31))),
        ("May 8, 2023", (date(2023, 5, 8), date(2023, 5, 8))),
        ("2023-05-07", (date(2023, 5, 7), date(2023, 5, 7))),
    ],
)
def test_absolute_expressions_need_no_anchor(answer: str, days: tuple[date, date]) -> None:
    found = find_times(answer)
    assert len(found) == 1 and isinstance(found[0].span, TimeSpan)
    assert (found[0].span.start, found[0].span.end) == days


def test_times_without_a_year_stay_yearless_until_anchored() -> None:
    assert [m.span for m in find_times("When did she go camping in June?")] == [YearlessSpan(6)]
    assert [m.span for m in find_times("the last week of June")] == [YearlessSpan(6, -7, -1)]
    assert [m.span for m in find_times("on 13 August")] == [YearlessSpan(8, 13, 13)]
    june = find_times("in June", date(2023, 8, 17))[0].span
    assert june == month_span(2023, 6).with_phrase("in June")
    assert YearlessSpan(6, -7, -1).in_year(2023).label() == "24 June 2023 to 30 June 2023"
    # relative expressions need the time they were said
    assert find_times("I went there yesterday and last week") == []


@pytest.mark.parametrize(
    ("said", "text", "label"),
    [
        # the nearest October is behind 2 March 2024, but one signs up for what is ahead
        (date(2024, 3, 2), "I finally signed up for the half marathon in October.", "2024"),
        (date(2024, 3, 2), "I ran a race in October.", "2023"),  # nearest, and no cue
        (date(2024, 3, 2), "We'll be in Porto on 12 November", "2024"),
        # the nearest January is ahead of 20 November 2023, but "went" is behind
        (date(2023, 11, 20), "We went to Japan in January.", "2023"),
        (date(2023, 11, 20), "It was cold in the first week of January", "2023"),
        # an -ed adjective is no past: the nearest April stays
        (date(2024, 3, 2), "I am so excited about the trip in April.", "2024"),
        # "booked" without "for" is no cue: "went" decides
        (date(2024, 3, 2), "I went and booked the race in October.", "2023"),
        (date(2024, 3, 2), "The trip was booked for the 3rd of May.", "3 May 2024"),
        # two cues of both kinds as near: the nearest occurrence
        (date(2023, 11, 20), "Who went in January will tell you", "January 2024"),
        # the cue of another clause does not count, though it stands nearer
        (date(2024, 3, 2), "We went. In October we will run it.", "2024"),
        (date(2023, 11, 20), "It was in the paper, but in January the race is on", "2024"),
        (date(2023, 11, 20), "I saw Dr. Reyes in January", "2023"),  # an abbreviation's dot
        # the cue nearest the month decides
        (date(2023, 11, 20), "I'll never forget when we went to Paris in January", "2023"),
        (date(2024, 3, 2), "I'm going to run in October", "2024"),
        # "since" and "back in" are behind, whatever the verb
        (date(2023, 11, 20), "I've been going to the gym since January", "2023"),
        (date(2023, 11, 20), "Back in January we will have known", "2023"),
        (date(2023, 11, 20), "I haven't run since 3 January", "3 January 2023"),
        (date(2024, 3, 2), "Since May is busy, I will go in June.", "May 2024"),  # causal
        (date(2024, 3, 2), "I'll be back in January.", "January 2025"),  # not opening it
        (date(2024, 3, 2), "In October, I will run the race.", "October 2024"),
        (date(2024, 3, 2), "We'll see, in October it was wet", "October 2023"),  # new subject
        (date(2023, 11, 20), "We went at 9 a.m. in January", "2023"),
        (date(2024, 3, 2), "I was going to visit Rome in January, but got sick.", "2024"),
        (date(2024, 3, 2), "I kept going to yoga in January.", "January 2024"),
        (date(2024, 3, 2), "I started going to Pilates in January.", "January 2024"),
        (date(2024, 3, 2), "WE WILL GO IN JANUARY.", "2025"),
        (date(2023, 11, 20), "It wasn't warm in January", "2023"),
        # no cue: a name, a noun, a plan of the past, what was found or signed up for
        (date(2024, 3, 2), "Will and I love the beach in October", "2023"),
        (date(2023, 11, 20), "There are only two spots left in January", "2024"),
        (date(2024, 6, 2), "I planned to go to Rome in May, but got sick", "May 2024"),
        (date(2023, 11, 20), "I found out the race is in January", "2024"),
        (date(2024, 3, 2), "I signed up for the gym in January", "January 2024"),
        # a day that is not in every year: the next year that has it
        (date(2025, 3, 1), "I'll run on 29 February", "29 February 2028"),
        (date(2025, 3, 1), "I ran on 29 February", "29 February 2024"),
        # the month said in is itself, whatever the clause says
        (date(2024, 3, 2), "I will rest in March.", "March 2024"),
    ],
)
def test_a_month_without_its_year_takes_the_side_its_clause_says(
    said: date, text: str, label: str
) -> None:
    mention = find_times(text, said)[0]
    assert isinstance(mention.span, TimeSpan) and label in mention.span.label()


@pytest.mark.parametrize(
    "text",
    [
        "I may go, you may not",  # the verb, not the month
        "we will march on",
        "since we last spoke",
        "a while ago",
        "the sun is out",
        "Saturdays are for chess",
        "I paid 2000 dollars",
        "room 2022 is free",
    ],
)
def test_words_that_are_no_time(text: str) -> None:
    assert find_times(text, date(2023, 5, 8)) == []


@given(anchors, st.integers(1, 12))
def test_days_ago_and_from_now(d: date, n: int) -> None:
    assert resolve(f"{n} days ago", d) == day_span(d - timedelta(days=n)).with_phrase(
        f"{n} days ago"
    )
    later = resolve(f"{n} days from now", d)
    assert later is not None and later.start == d + timedelta(days=n)
    assert resolve("yesterday", d).start == d - timedelta(days=1)  # type: ignore[union-attr]
    assert resolve("tomorrow", d).start == d + timedelta(days=1)  # type: ignore[union-attr]
    assert resolve("today", d).start == d  # type: ignore[union-attr]


@given(anchors, st.integers(0, 6))
def test_weekdays(d: date, wd: int) -> None:
    name = DAYS[wd]
    last, this, nxt = (resolve(f"{w} {name}", d) for w in ("last", "this", "next"))
    assert last is not None and this is not None and nxt is not None
    assert {last.start.weekday(), this.start.weekday(), nxt.start.weekday()} == {wd}
    assert 1 <= (d - last.start).days <= 7
    assert 1 <= (nxt.start - d).days <= 7
    assert week_span(this.start) == week_span(d)
    assert resolve(f"the {name} before {d.day} {d:%B %Y}", None) == last.with_phrase(
        f"the {name} before {d.day} {d:%B %Y}"
    )
    assert resolve(f"last {name[:3]}", d) == last.with_phrase(f"last {name[:3]}")


@given(anchors, st.integers(1, 8))
def test_weeks_and_weekends(d: date, n: int) -> None:
    last = resolve("last week", d)
    assert last is not None and last.unit == "week" and last.days == 7
    assert last.start.weekday() == 0 and last.end == week_span(d).start - timedelta(days=1)
    assert resolve("the week before", d).same_days(last)  # type: ignore[union-attr]
    ago = resolve(f"{n} weeks ago", d)
    assert ago is not None and ago.start <= d - timedelta(weeks=n) <= ago.end
    weekend = resolve("last weekend", d)
    assert weekend is not None and weekend == weekend_span(last.start).with_phrase("last weekend")
    assert weekend.start.weekday() == 5 and weekend.end < d and (d - weekend.start).days <= 13
    this = resolve("this weekend", d)
    assert this is not None and this.start.weekday() == 5 and week_span(this.start) == week_span(d)


@given(anchors, st.integers(1, 11))
def test_months_and_years(d: date, n: int) -> None:
    last = resolve("last month", d)
    assert last is not None and last.end == d.replace(day=1) - timedelta(days=1)
    assert last.start.day == 1 and last.unit == "month"
    nxt = resolve("next month", d)
    assert nxt is not None and nxt.start == last.end + timedelta(days=1) + timedelta(
        days=month_span(d.year, d.month).days
    )
    ago = resolve(f"{n} months ago", d)
    assert ago is not None and ago.unit == "month"
    assert (d.year * 12 + d.month) - (ago.start.year * 12 + ago.start.month) == n
    assert resolve("last year", d) == year_span(d.year - 1).with_phrase("last year")
    assert resolve(f"{n} years ago", d) == year_span(d.year - n).with_phrase(f"{n} years ago")


@given(anchors, st.sampled_from(sorted(SEASONS)))
def test_seasons(d: date, name: str) -> None:
    last, this, nxt = (resolve(f"{w} {name}", d) for w in ("last", "this", "next"))
    assert last is not None and this is not None and nxt is not None
    assert last.end < d < nxt.start
    assert last.start <= this.start <= nxt.start  # "last spring" on 1 June is this one
    assert (nxt.start.year - last.start.year) in (1, 2)


def _spans() -> st.SearchStrategy[TimeSpan]:
    days = st.dates(min_value=date(1900, 1, 1), max_value=date(2099, 12, 1))
    return st.one_of(
        days.map(day_span),
        days.map(week_span),
        days.map(weekend_span),
        days.map(lambda d: month_span(d.year, d.month)),
        days.map(lambda d: year_span(d.year)),
        st.tuples(days, st.sampled_from(["spring", "summer", "fall", "winter"])).map(
            lambda x: season_span(x[1], x[0].year)
        ),
        st.tuples(days, st.integers(1, 400)).map(
            lambda x: TimeSpan(x[0], x[0] + timedelta(days=x[1]))
        ),
    )


def _spans_near() -> st.SearchStrategy[TimeSpan]:
    """Days, weeks and weekends (whatever their distance from the day said)."""
    days = st.dates(min_value=date(1901, 2, 1), max_value=date(2098, 11, 30))
    return st.one_of(days.map(day_span), days.map(week_span), days.map(weekend_span))


@given(_spans_near(), anchors, st.sampled_from(["last week", "that Friday", "the weekend"]))
def test_every_said_label_reads_back_to_its_days(span: TimeSpan, said: date, phrase: str) -> None:
    label = said_label(span.with_phrase(phrase), said)
    found = [m.span for m in find_times(f"Maya went hiking ({label})", said)]
    assert len(found) == 1 and isinstance(found[0], TimeSpan)
    assert found[0].same_days(span)


@given(_spans(), anchors)
def test_every_label_reads_back_to_its_days(span: TimeSpan, anchor: date) -> None:
    for text in (span.label(), f"Maya went hiking ({span.label()})"):
        found = [m.span for m in find_times(text, anchor)]
        assert len(found) == 1 and isinstance(found[0], TimeSpan)
        assert found[0].same_days(span)
        assert found[0].unit == span.unit


@given(_spans())
def test_spans_keep_through_storage_snapshots_and_iso(span: TimeSpan) -> None:
    back = parse_iso_span(span.iso())
    assert back is not None and back.same_days(span)
    assert span_from_epochs(*span_to_epochs(span), span.unit, span.phrase) == span
    assert span_from_dict(span_to_dict(span)) == span
    assert span_from_epochs(None, None, "", "") is None and span_from_dict(None) is None


@given(st.text(max_size=200), st.one_of(st.none(), st.dates()))
def test_any_text_resolves_without_raising(text: str, anchor: date | None) -> None:
    found = find_times(text, anchor)
    ends = [(m.start, m.end) for m in found]
    assert ends == sorted(ends)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ends))
    assert all(text[m.start : m.end] == m.phrase for m in found)


def test_the_calendar_ends_are_no_error() -> None:
    assert find_times("see you tomorrow", date(9999, 12, 31)) == []
    assert find_times("yesterday", datetime(1, 1, 1)) == []


@pytest.mark.parametrize(
    ("iso", "label"),
    [
        ("2023-05-07", "on 7 May 2023"),
        ("2023-05", "in May 2023"),
        ("2022", "in 2022"),
        ("2023-05-01/2023-05-07", "week of 1 May 2023"),
        ("2023-05-06/2023-05-07", "weekend of 6 May 2023"),
        ("2023-05-01/2023-05-31", "in May 2023"),
        ("2023-05-03/2023-05-09", "3 May 2023 to 9 May 2023"),
    ],
)
def test_iso_times_from_a_model(iso: str, label: str) -> None:
    span = parse_iso_span(iso)
    assert span is not None and span.label() == label


@pytest.mark.parametrize(
    "bad", ["", "last week", "2023-02-30", "2023-13", "2023-05-09/2023-05-01", "0000", "May"]
)
def test_unreadable_iso_times_are_none(bad: str) -> None:
    assert parse_iso_span(bad) is None


def test_a_span_refuses_impossible_values() -> None:
    with pytest.raises(ValueError, match="ends"):
        TimeSpan(date(2023, 5, 2), date(2023, 5, 1))
    with pytest.raises(ValueError, match="unit"):
        TimeSpan(date(2023, 5, 2), date(2023, 5, 2), "fortnight")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no such days"):
        YearlessSpan(13)


def test_resolve_reads_no_further_than_its_first_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each phrase's clause was read over the whole text and every phrase resolved before
    the first was taken: "May 3 " x 1400 with a day said took 23 s. Now a phrase is resolved
    only when it is the next one kept, and resolve() stops at the first."""
    import lightmem.timeresolve as tr

    resolved: list[str] = []

    def counting(rule: Any) -> Any:
        def wrapper(m: re.Match[str], anchor: date | None) -> Any:
            resolved.append(m[0])
            return rule(m, anchor)

        return wrapper

    monkeypatch.setattr(tr, "_RULES", tuple((p, counting(r)) for p, r in tr._RULES))
    text = "We met on May 3 " * 2000
    span = resolve(text, date(2023, 6, 1))
    assert span is not None and (span.start, span.phrase) == (date(2023, 5, 3), "May 3")
    assert len(resolved) == 1
    resolved.clear()
    assert [m.phrase for m in find_times(text, date(2023, 6, 1), limit=3)] == ["May 3"] * 3
    assert len(resolved) == 3


def test_a_clause_is_read_only_near_its_time_phrase() -> None:
    said = date(2024, 3, 10)
    near = resolve("I will run the race in October", said)
    assert near is not None and near.start == date(2024, 10, 1)  # "will": ahead
    filler = "and then " * 40  # 360 characters of one clause, past CLAUSE_REACH
    far = resolve(f"I will {filler}run the race in October", said)
    assert far is not None and far.start == date(2023, 10, 1)  # no cue in reach: nearest
