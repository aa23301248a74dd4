"""The model-free update detector reads Chinese: a marked change of the speaker's value
(a move, a new employer, a habit given up, an amount raised, a correction, a break-up)
supersedes the earlier statement, and what is not a change (a plan, a question, hearsay, an
addition, another person's move, a negated change, a value of another predicate or slot)
supersedes nothing. End to end, the current value then comes first."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from conftest import weekly_entries
from lightmem import LightMemory
from lightmem.pipeline import statements, statements_zh
from lightmem.pipeline.reading import SELF
from lightmem.pipeline.supersede import Detector, slots_in


def _pairs(detector: Detector, *texts: str, who: str = "阿明") -> list[tuple[str, str]]:
    entries = weekly_entries([(who, t) for t in texts])
    return [(f.old.id, f.new.id) for f in detector.detect(entries)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在广州。", "去年我们搬到了深圳。"),  # a move: another place in the same slot
        ("我在上海工作。", "我现在在杭州工作。"),  # 现在 marks it
        ("我每周去游泳三次。", "我已经不游泳了。"),  # 不...了: no longer
        ("我喝酒喝得很多。", "我戒酒半年了。"),  # what 戒 ended shares 酒
        ("我的房租是三千。", "房租涨到三千五了。"),  # an amount of the same noun
        ("我开一辆本田。", "我把本田卖了，现在开一辆宝马。"),  # the old value named
        ("我的生日是三月五号。", "我说错了，生日是三月六号。"),  # a correction
        ("我的女朋友叫小美。", "我和小美分手了，现在的女朋友叫小兰。"),  # what 叫 names
    ],
)
def test_a_chinese_change_supersedes(detector: Detector, old: str, new: str) -> None:
    assert _pairs(detector, old, new) == [("e0", "e1")]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("我住在广州。", "我打算明年搬到深圳。"),  # a plan
        ("我住在广州。", "你搬到深圳了吗？"),  # a question
        ("我住在广州。", "你搬到深圳了吗"),  # a question without its mark
        ("我住在广州。", "听说小王搬到了深圳。"),  # hearsay
        ("我养了一只猫。", "我们又养了一只狗。"),  # an addition
        ("我住在广州。", "我姐姐搬到了深圳。"),  # a relative's move
        ("我住在广州。", "我的同事小李搬到了深圳。"),  # a named colleague's
        ("我在广州工作。", "他现在在深圳工作。"),  # someone else's
        ("我在阿里巴巴上班。", "我没有跳槽到腾讯。"),  # a negated change
        ("我住在广州。", "我现在开比亚迪。"),  # another slot
        ("我在华为上班。", "我现在住在深圳。"),  # 在 of another predicate
        ("我的猫叫咪咪。", "现在的女朋友叫小兰。"),  # another thing named
        ("我住在广州。", "我现在在广州的一家公司上班。"),  # nothing new
        ("我住在广州。", "我小时候在深圳住过。"),  # a past event
        ("我住在广州。", "小王搬到了深圳。"),  # a named third person
        ("我开一辆本田。", "张伟把本田卖了。"),
        ("我在华为上班。", "我今天不上班了。"),  # for today only
        ("我每天跑步。", "今天太累了，我不跑了。"),
        ("我喜欢喝咖啡。", "我不喝茶了。"),  # another thing stopped, sharing a verb
        ("我在学日语。", "我不学钢琴了。"),
        ("我住在广州。", "我现在在深圳，明天回广州。"),  # a trip back ahead
        ("我住在广州。", "我的新年是在深圳过的。"),  # 新年 is no "new"
        ("我在上海工作。", "我曾经在深圳工作过，现在还在上海。"),  # still
    ],
)
def test_what_is_not_a_chinese_change_supersedes_nothing(
    detector: Detector, old: str, new: str
) -> None:
    assert _pairs(detector, old, new) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Paris.", "I now live in Paris with Tom."),
        ("I drive a Honda.", "I still drive a Honda, but I bought a Tesla now."),
    ],
)
def test_an_english_restatement_naming_one_more_value_is_no_change(
    detector: Detector, old: str, new: str
) -> None:
    """The revert rule of Chinese (the earlier words all said again, another value in
    their slot) is not applied to English, where it would read restatements as changes."""
    assert _pairs(detector, old, new, who="Ana") == []


def test_a_revert_supersedes_the_value_it_left(detector: Detector) -> None:
    pairs = _pairs(detector, "我住在北京。", "我搬去上海了。", "上海待不惯，我又搬回北京了。")
    assert pairs == [("e0", "e1"), ("e1", "e2")]


def test_another_speaker_of_the_scope_is_the_subject_of_their_change(detector: Detector) -> None:
    entries = weekly_entries([("小芳", "我住在成都。"), ("阿明", "小芳已经搬到重庆了。")])
    assert [(f.old.id, f.new.id) for f in detector.detect(entries)] == [("e0", "e1")]
    # the speaker's own fact is not replaced by what they say of another speaker
    entries = weekly_entries(
        [("阿明", "我住在成都。"), ("小芳", "我住在西安。"), ("阿明", "小芳已经搬到重庆了。")]
    )
    assert [(f.old.id, f.new.id) for f in detector.detect(entries)] == [("e1", "e2")]


def test_the_reading_of_a_chinese_sentence() -> None:
    r = statements.read("医生说我胃不好，我现在不吃辣了。", "阿明", {"阿明"})
    assert (r.subject, r.change, r.reported, r.irrealis) == (SELF, True, False, False)
    assert "辣" in r.ended
    assert statements.read("他说他搬到了深圳。", "阿明", {"阿明"}).asserts is False
    neighbour = statements.read("我邻居刚买了一辆特斯拉。", "阿明", {"阿明"})
    assert neighbour.subject == "我 邻居"
    assert statements.read("我的好朋友小林住在杭州。", "阿明", {"阿明"}).named == "小林"
    assert statements.read("我以前住在成都。", "阿明", {"阿明"}).past_event
    assert slots_in("我们上个月搬到了杭州。") == {"杭州": "at"}
    assert slots_in("涨工资了，现在月薪一万五。") == {"一万五": "月薪"}
    assert slots_in("我已经戒烟三个月了。") == {}  # a duration, no value
    assert not statements_zh.applies("I moved to Hangzhou.")


def test_the_current_chinese_value_comes_first(tmp_path: Path) -> None:
    with LightMemory.from_config({"store": {"path": str(tmp_path / "zh.db")}}) as mem:
        said = (("2023-01-01", "我在华为做软件工程师。"), ("2023-06-01", "我已经跳槽到腾讯了。"))
        for day, text in said:
            mem.add_memory(
                [{"role": "user", "speaker": "王强", "content": text, "time": f"{day}T10:00"}],
                force_extract=True,
            )
        mem.construct_update_queue_all_entries()
        report = mem.offline_update_all_entries()
        assert len(report.superseded) == 1
        old = mem.list_entries({"kind": "entry"}, limit=10)
        gone = [e for e in old if e.superseded_by]
        assert [e.original_text for e in gone] == ["我在华为做软件工程师。"]
        first = mem.retrieve("王强现在在哪家公司工作？", limit=3)[0]
        assert first.entry.original_text == "我已经跳槽到腾讯了。"


# words the rules read, with characters of every kind around them
_PIECES = hs.sampled_from(
    [
        *"我你他的了不没在到叫又也，。？！、 ",
        *("现在", "搬到", "戒烟", "不再", "说错", "上海", "一万五", "三个", "月", "小林", "x", "3"),
    ]
)


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.one_of(_PIECES, hs.text(max_size=3)), max_size=30).map("".join))
def test_any_text_is_read_without_error(text: str) -> None:
    """Whatever jieba makes of a text, reading it and its values never fails."""
    for sentence in statements.sentences(text) or [text]:
        r = statements.read(sentence, "阿明", {"阿明", "小林"})
        assert isinstance(r.change, bool) and all(isinstance(w, str) for w in r.ended)
    assert all(isinstance(v, str) for v in slots_in(text))
