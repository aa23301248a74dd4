"""Chinese time expressions resolve like the English ones: relative days, weeks, weekends,
months and years against the day said, counted ones (三天前, 几个月前), weekdays of a
calendar week (上周三), dates with and without a year; they date the memories that state
them, and a Chinese question naming a time or asking when lifts the memories of it."""

from __future__ import annotations

import itertools
from datetime import date
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from lightmem import LightMemory
from lightmem.timeresolve import find_times
from lightmem.timeresolve_zh import number
from lightmem.timespan import TimeSpan, YearlessSpan

FRIDAY = date(2023, 6, 9)


@pytest.mark.parametrize(
    ("text", "phrase", "start", "end", "unit"),
    [
        ("昨天我搬到了杭州。", "昨天", "2023-06-08", "2023-06-08", "day"),
        ("大前天下雨了", "大前天", "2023-06-06", "2023-06-06", "day"),
        ("后天见", "后天", "2023-06-11", "2023-06-11", "day"),
        ("上周末我们去爬山了。", "上周末", "2023-06-03", "2023-06-04", "weekend"),
        ("这周末有空吗", "这周末", "2023-06-10", "2023-06-11", "weekend"),
        ("上个星期很忙", "上个星期", "2023-05-29", "2023-06-04", "week"),
        ("上上周我病了", "上上周", "2023-05-22", "2023-05-28", "week"),
        ("上周三我见了小林", "上周三", "2023-05-31", "2023-05-31", "day"),  # last week's
        ("下礼拜天回来", "下礼拜天", "2023-06-18", "2023-06-18", "day"),
        ("上个月我换了工作", "上个月", "2023-05-01", "2023-05-31", "month"),
        ("本月很热", "本月", "2023-06-01", "2023-06-30", "month"),
        ("去年我在北京", "去年", "2022-01-01", "2022-12-31", "year"),
        ("前年结的婚", "前年", "2021-01-01", "2021-12-31", "year"),
        ("我三天前开始学游泳", "三天前", "2023-06-06", "2023-06-06", "day"),
        ("两个星期前我辞职了", "两个星期前", "2023-05-22", "2023-05-28", "week"),
        ("十二年前我来到上海", "十二年前", "2011-01-01", "2011-12-31", "year"),
        ("二十三天前", "二十三天前", "2023-05-17", "2023-05-17", "day"),
        ("3个月后我毕业", "3个月后", "2023-09-01", "2023-09-30", "month"),
        ("几个月前他们结婚了", "几个月前", "2023-02-01", "2023-04-30", "span"),
        ("半年前我去了日本", "半年前", "2022-12-01", "2022-12-31", "month"),
        ("我2022年5月8日生了孩子", "2022年5月8日", "2022-05-08", "2022-05-08", "day"),
        ("2021年3月我在北京", "2021年3月", "2021-03-01", "2021-03-31", "month"),
        ("2019年我毕业了", "2019年", "2019-01-01", "2019-12-31", "year"),
        ("我五月三号回来的", "五月三号", "2023-05-03", "2023-05-03", "day"),  # nearest
        ("十二月我去了上海", "十二月", "2022-12-01", "2022-12-31", "month"),
        ("去年九月我们结婚了", "去年九月", "2022-09-01", "2022-09-30", "month"),
        ("明年三月毕业", "明年三月", "2024-03-01", "2024-03-31", "month"),
        ("去年5月8日", "去年5月8日", "2022-05-08", "2022-05-08", "day"),
        ("2022年的九月", "2022年的九月", "2022-09-01", "2022-09-30", "month"),
        ("2023年2月29日", "2023年2月29日", "2023-02-01", "2023-02-28", "month"),  # no such day
        ("五个月前", "五个月前", "2023-01-01", "2023-01-31", "month"),
        ("我要在五月前交报告", "五月", "2023-05-01", "2023-05-31", "month"),  # before May
        ("前天下午下雨了", "前天", "2023-06-07", "2023-06-07", "day"),
        ("今天性价比很高", "今天", "2023-06-09", "2023-06-09", "day"),
    ],
)
def test_chinese_expressions(text: str, phrase: str, start: str, end: str, unit: str) -> None:
    found = find_times(text, FRIDAY)
    assert [m.phrase for m in found] == [phrase]
    span = found[0].span
    assert isinstance(span, TimeSpan)
    assert (span.start.isoformat(), span.end.isoformat(), span.unit) == (start, end, unit)


@pytest.mark.parametrize(
    "text",
    [
        *("三个月", "我一个月都没休息", "月薪一万二", "我每个月都去", "十三月", "2022年13月"),
        *("马上周末了", "看一下周围的环境", "晚上月亮很圆", "后天性疾病", "他做事很周到"),
        *("我以前天天跑步", "我以前年轻的时候", "然后天就黑了", "之后天气转晴", "以后年纪大了"),
        *("除去年终奖", "他是前年级长", "聪明天才", "这个月饼", "本月刊", "上周刊登", "加上周末"),
        *("第三天后", "先天后天"),
    ],
)
def test_words_that_are_no_chinese_time(text: str) -> None:
    assert find_times(text, FRIDAY) == []


def test_without_the_day_said_only_dates_resolve() -> None:
    assert find_times("昨天", None) == []
    assert [m.span for m in find_times("5月3号", None)] == [YearlessSpan(5, 3, 3)]
    english = find_times("I went there yesterday, 昨天也去了。", FRIDAY)
    assert [m.phrase for m in english] == ["yesterday", "昨天"]


def test_chinese_numbers() -> None:
    assert [number(t) for t in ("三", "两", "十", "十二", "二十", "二十五", "12", "几")] == [
        (3, 3),
        (2, 2),
        (10, 10),
        (12, 12),
        (20, 20),
        (25, 25),
        (12, 12),
        (2, 4),
    ]
    assert number("十二三") is None and number("百") is None


# one asks when, one names a time
@pytest.mark.parametrize(
    "question", ["小雨什么时候和小狗去山里徒步？", "小雨2023年6月和小狗去山里徒步了吗？"]
)
def test_a_chinese_question_about_time_lifts_the_memory_of_that_time(
    tmp_path: Path, question: str
) -> None:
    first = {}
    for weight in (0.0, 0.5):
        cfg = {
            "store": {"path": str(tmp_path / f"w{weight}.db")},
            "retrieval": {"time_weight": weight},
            "memory_manager": {"configs": {"context_window": 0}},
        }
        with LightMemory.from_config(cfg) as mem:
            mem.add_memory(
                [
                    {"id": "likes", "content": "我和小狗很喜欢去山里徒步，山里风景特别好。",
                     "speaker": "小雨", "time": "2023-03-01T09:00"},
                    {"id": "hike", "content": "上周末我去徒步了。", "speaker": "小雨",
                     "time": "2023-06-20T09:00"},
                ],
                force_extract=True,
            )  # fmt: skip
            hike = next(e for e in mem.list_entries({"kind": "entry"}) if e.source_ids == ("hike",))
            assert hike.event_time is not None
            assert hike.event_time.label() == "weekend of 17 June 2023"
            first[weight] = mem.retrieve(question, limit=2)[0].source_ids
    assert first == {0.0: ("likes",), 0.5: ("hike",)}


_PIECES = hs.sampled_from(
    [
        *"上下这本去今明前后大个周月年天日号第的了我以之然两几十一二三九",
        *("星期", "礼拜", "半年", "2023年", "5月", "8日", "末", "前", "后", "12", "x", " "),
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    hs.lists(_PIECES, max_size=25).map("".join),
    hs.one_of(hs.none(), hs.dates(min_value=date(2, 1, 1), max_value=date(9998, 1, 1))),
)
def test_any_chinese_text_resolves_in_order_without_raising(text: str, anchor: date | None) -> None:
    found = find_times(text, anchor)
    assert all(text[m.start : m.end] == m.phrase for m in found)
    assert all(a.end <= b.start for a, b in itertools.pairwise(found))
