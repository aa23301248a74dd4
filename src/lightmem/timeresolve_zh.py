"""Chinese time expressions, resolved by the same conventions as the English ones
(:mod:`lightmem.timeresolve`, which runs these rules beside its own).

- days: 昨天, 前天, 大前天, 今天 / 今晚, 明天, 后天, 大后天;
- weeks, weekends, months, years: 上周 / 上个星期 / 上礼拜, 这周 / 本周, 下周, 上上周; 上周末,
  这周末, 下周末; 上个月, 这个月 / 本月, 下个月, 上上个月; 前年, 去年, 今年, 明年, 后年;
- a weekday of a week: 上周三, 这个星期五, 下礼拜天 (the day of that calendar week, as
  Chinese counts it: 上周三 is the Wednesday of last week, even said on a Friday);
- counted: 三天前, 两个星期前, 五年前, 几个月前 (几 is 2-4, as "a few"), 半年前, 三天后;
- dates: 2023年5月8日 / 号, 2023年5月, 2023年, and 5月8日 or 五月 without a year (the
  occurrence nearest the day said; without one, a :class:`YearlessSpan`).

Numbers are digits or Chinese numerals up to 99 (十二, 二十五, 两).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, timedelta

from lightmem.timespan import (
    TimeSpan,
    YearlessSpan,
    day_span,
    month_span,
    shifted_range,
    shifted_span,
    week_span,
    year_span,
)

__all__ = ["RULES", "number"]

_Rule = Callable[[re.Match[str], date | None], TimeSpan | YearlessSpan | None]

_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6}
_DIGITS |= {"七": 7, "八": 8, "九": 9}
_NUM = r"(?:\d{1,4}|[零〇一二两三四五六七八九十]{1,3}|几)"
_DAY_NUM = r"(?:\d{1,2}|[一二三四五六七八九十]{1,3})"
#: 周 opens other words too: 周围, 周边, 周到, 周年 are no week
_WEEK = r"(?:个)?(?:周(?![围边到全期年遭刊])|星期|礼拜)"
#: not inside a longer number (十三月 is no month, 二十三天前 counts from 二十三)
_NOT_AFTER_NUMBER = r"(?<![\d零〇一二两三四五六七八九十第])"
#: 月 opens other words: 月饼, 月亮, 月光, 月球, 月刊 are no month
_MONTH_WORD = r"月(?![饼亮光球刊])"
_MONTH_DAY = (
    rf"{_NOT_AFTER_NUMBER}(?P<month>\d{{1,2}}|十[一二]?|[一二三四五六七八九]){_MONTH_WORD}"
    rf"(?:(?P<day>{_DAY_NUM})[日号])?"
)
_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_STEP = {"上上": -2, "上": -1, "这": 0, "本": 0, "下": 1, "下下": 2}
#: 上 and 下 end other words (马上, 晚上, 一下, 以下, 身上): 马上周末 is "soon the weekend"
_NOT_A_WORD_END = r"(?<![一马以之身桌路晚早楼地手线网台面底加比赶])"
_WHICH = rf"{_NOT_A_WORD_END}(?P<which>上上|下下|上|这|本|下)"
_UNITS = {"天": "day", "日": "day", "周": "week", "星期": "week", "礼拜": "week"}
_UNITS |= {"月": "month", "年": "year"}
_DAYS = {"大前天": -3, "前天": -2, "昨天": -1, "昨日": -1, "昨晚": -1, "今天": 0, "今日": 0}
_DAYS |= {"今晚": 0, "今早": 0, "明天": 1, "明日": 1, "明晚": 1, "后天": 2, "大后天": 3}
_YEARS = {"大前年": -3, "前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
#: The day and year words end other words too: 以前天天, 然后天黑, 之后天气, 聪明天才,
#: 除去年终奖, 先天后天; and 年 opens some (前年级, 年轻, 年纪, 年龄).
_NOT_IN_A_WORD = r"(?<![以之然最背提先天聪光说证文发表声透分鲜照清阐指英高精失黎除过如])"
_DAY_WORDS = "|".join(sorted(_DAYS, key=len, reverse=True))
_YEAR_WORDS = "|".join(sorted(_YEARS, key=len, reverse=True))


def number(text: str) -> tuple[int, int] | None:
    """A count written in digits or Chinese numerals up to 99, as (low, high): 几 is
    (2, 4); None for anything else."""
    if text.isdigit():
        return int(text), int(text)
    if text == "几":
        return 2, 4
    if "十" in text:
        tens, _, ones = text.partition("十")
        if len(ones) > 1 or (tens and tens not in _DIGITS) or (ones and ones not in _DIGITS):
            return None
        n = (_DIGITS[tens] if tens else 1) * 10 + (_DIGITS[ones] if ones else 0)
        return n, n
    if len(text) == 1 and text in _DIGITS:
        return _DIGITS[text], _DIGITS[text]
    return None


def _fixed(m: re.Match[str], anchor: date | None) -> TimeSpan | None:
    return day_span(anchor + timedelta(days=_DAYS[m[0]])) if anchor is not None else None


def _year_rel(m: re.Match[str], anchor: date | None) -> TimeSpan | None:
    return year_span(anchor.year + _YEARS[m[0]]) if anchor is not None else None


def _unit_rel(unit: str) -> _Rule:
    def rule(m: re.Match[str], anchor: date | None) -> TimeSpan | None:
        return shifted_span(unit, anchor, _STEP[m["which"]]) if anchor is not None else None

    return rule


def _weekday_rel(m: re.Match[str], anchor: date | None) -> TimeSpan | None:
    if anchor is None:
        return None
    monday = week_span(anchor + timedelta(weeks=_STEP[m["which"]])).start
    return day_span(monday + timedelta(days=_WEEKDAYS[m["day"]]))


def _counted(m: re.Match[str], anchor: date | None) -> TimeSpan | None:
    n = number(m["n"])
    if anchor is None or n is None:
        return None
    sign = 1 if m["dir"] in ("后", "以后", "之后") else -1
    unit = _UNITS[m["unit"] or m["months"]]
    return shifted_range(unit, anchor, sign * n[0], sign * n[1])


def _half_year(m: re.Match[str], anchor: date | None) -> TimeSpan | None:
    return shifted_span("month", anchor, -6) if anchor is not None else None


def _month_num(text: str) -> int | None:
    n = number(text)
    return n[0] if n is not None and n[0] == n[1] and 1 <= n[0] <= 12 else None


def _dated(m: re.Match[str], anchor: date | None) -> TimeSpan | YearlessSpan | None:
    said = m.groupdict()
    month = _month_num(said["month"]) if said["month"] else None
    day = number(said["day"]) if said["day"] else None
    if (said["month"] and month is None) or (day is not None and not 1 <= day[0] <= 31):
        return None
    year: int | None = int(said["year"]) if said.get("year") else None
    if said.get("rel"):
        if anchor is None:
            return None
        year = anchor.year + _YEARS[said["rel"]]
    if year is not None:
        if month is None:
            return year_span(year)
        if day is None:
            return month_span(year, month)
        try:
            return day_span(date(year, month, day[0]))
        except ValueError:  # 2023年2月29日: the month is right, the day is not one
            return month_span(year, month)
    if month is None:
        return None
    span = YearlessSpan(month) if day is None else YearlessSpan(month, day[0], day[0])
    return span.nearest(anchor) if anchor is not None else span


RULES: tuple[tuple[str, _Rule], ...] = (
    # 后天性 (acquired) says no day; 今天性价比 does
    (rf"{_NOT_IN_A_WORD}(?:{_DAY_WORDS})(?!性(?!价))", _fixed),
    (rf"{_NOT_IN_A_WORD}(?:{_YEAR_WORDS})(?![级轻纪龄终])", _year_rel),
    (rf"{_NOT_IN_A_WORD}(?P<rel>{_YEAR_WORDS})的?{_MONTH_DAY}", _dated),  # 去年九月
    (rf"{_WHICH}{_WEEK}末", _unit_rel("weekend")),
    (rf"{_WHICH}{_WEEK}(?P<day>[一二三四五六日天])", _weekday_rel),
    (rf"{_WHICH}{_WEEK}", _unit_rel("week")),
    (rf"{_WHICH}(?:个)?{_MONTH_WORD}", _unit_rel("month")),
    (
        # months are counted with 个: 五个月前 is five months ago, 五月前 before May
        rf"{_NOT_AFTER_NUMBER}(?P<n>{_NUM})(?:个?(?P<unit>天|日|周|星期|礼拜|年)|个(?P<months>月))"
        r"(?P<dir>以前|之前|前|以后|之后|后)",
        _counted,
    ),
    (r"半年(?:以前|之前|前)", _half_year),
    # 2022年, 2022年的九月, 2022年5月8日; not 1000年前 (a thousand years ago)
    (rf"(?P<year>\d{{4}})年(?![前后以之])(?:的?{_MONTH_DAY})?", _dated),
    (_MONTH_DAY, _dated),
)
