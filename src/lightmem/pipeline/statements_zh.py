"""How the update detector reads one Chinese sentence: rules over jieba's words and
part-of-speech tags, giving the same :class:`~lightmem.pipeline.reading.Reading` as the
English reader (:mod:`lightmem.pipeline.statements`), so the detector's decisions are
written once.

- **subject**: the speaker for a first-person word (我, 我们) or no person at all
  (涨工资了，现在月薪一万五); another speaker of the scope named before any first-person word
  (张伟已经毕业了), or a person named in a sentence with no first-person word (小王搬到了深圳:
  小王's); nobody tracked for the listener, a third-person pronoun or a demonstrative
  (你, 他, 这个). A relation opening the sentence (我邻居刚买了..., 我的好朋友小林住在杭州) is a
  subject of its own: the relative, or the person it names (小林); 我男朋友叫李明 says who the
  boyfriend is, the speaker's fact.
- **mood**: a plan, wish, guess or condition (想, 打算, 准备, 如果, 可能), or a sentence set
  ahead (明天回广州, 下个月搬家), asserts no change yet;
  an addition (也, 另外, 又 not before a change verb: 我们又领养了一只狗) adds; reported speech
  (听说, or 说 in the clause that holds the change) is someone else's claim.
- **change**: a change verb (搬到, 跳槽, 辞职, 戒烟, 分手, 卖, 换成, 涨到, 说错 for a
  correction), a present-state adverb (现在, 如今; not 到现在), 不再, a negation whose clause ends
  in 了 (不吃辣了: no longer; not for today only: 我今天不上班了), or 我的新... (not 新年). A
  change verb after a negation (没搬, 不想换), or a clause saying it still holds (还, 仍然),
  marks none. A stop (不再, 不...了) ends only what it names: its heads are left out, so it
  is tied to an earlier statement by what it ended (我不学钢琴了 ends no 日语).
- **state vs event**: a sentence set in the past (以前, 小时候, 曾经, or the experiential 过)
  with nothing in the present narrates an event, which no later value replaces.
- **values** (:func:`slots`): places, names, brands and organisations (jieba's ns / nr / nt /
  nz / eng tags), what 叫 names, and amounts (二十九岁, 四千五; not 一辆 or 三个, which count),
  each with the slot it fills: "at" after a locative (在, 到, 去, 回, 住), else the word
  before it; an amount, the noun it measures (月薪, 房租).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from lightmem import lang
from lightmem.pipeline.reading import SELF, Reading

__all__ = [
    "ADVERBS",
    "KIN",
    "LOCATIVES",
    "MARKERS",
    "NAME_TAGS",
    "applies",
    "other_predicate",
    "read",
    "shared_chars",
    "slots",
]

_FIRST = frozenset("我 我们 咱 咱们 俺 俺们".split())
_LISTENER = frozenset("你 您 你们".split())
_OTHERS = frozenset("他 她 它 他们 她们 它们 这 那 这个 那个 这些 那些 大家 别人".split())
KIN = frozenset(
    """爸爸 妈妈 爸妈 父母 父亲 母亲 哥哥 姐姐 弟弟 妹妹 老公 老婆 丈夫 妻子 太太 男朋友 女朋友
    对象 儿子 女儿 孩子 朋友 好友 好朋友 同事 邻居 室友 舍友 同学 老板 领导 上司 爷爷 奶奶
    外公 外婆 姥姥 姥爷 叔叔 阿姨 舅舅 姑姑 表哥 表姐 表弟 表妹 堂哥 堂姐 家人 未婚夫
    未婚妻 前男友 前女友 前妻 前夫""".split()
)
_KIN_MODIFIERS = frozenset("的 好 最好 亲 大 小 老 新 前".split())
_NAMING = frozenset("叫 名叫 名字叫".split())
_IRREALIS = frozenset(
    """想 想要 打算 准备 计划 考虑 希望 可能 也许 或许 如果 要是 假如 万一 要 将 将要 或者
    应该""".split()
)
_ADDITIVE = frozenset("也 另外 此外 还有 同时".split())
_REPORTS = frozenset("说 告诉 提到 表示".split())
_HEARSAY = frozenset("听说 据说 说是".split())
#: Verbs that change a state; those that end one (:data:`_ENDING`) say what ended.
_ENDING = frozenset(
    """戒 戒掉 戒烟 戒酒 卖 卖掉 卖给 放弃 分手 离开 辞职 离职 辞掉 退出 离婚 退休 毕业 不再
    停 停止 取消 退掉 扔掉 送人""".split()
)
_CHANGE = _ENDING | frozenset(
    """搬 搬到 搬去 搬回 搬进 搬家 搬走 跳槽 转到 调到 转行 换 换成 换到 换了 改成 改为 改
    变成 成为 涨 涨到 降 降到 升职 升为 回到 说错 口误 更正 纠正""".split()
)
_NOW = frozenset("现在 如今 现如今".split())
_STILL = frozenset("还 还在 仍然 依然 仍 还是 依旧 照样".split())
#: A day or a stretch said as the only time something is not done: 我今天不上班了.
_FOR_NOW = frozenset("今天 今晚 今早 今儿 明天 这周 这几天 这会儿 这次 暂时 先".split())
#: Words opening with 新 that say nothing new of the speaker's (新年 is tagged a time).
_NEW_WORDS = frozenset("新闻 新鲜 新疆 新加坡 新西兰 新娘 新郎 新手 新生 新春 新人".split())
#: Times ahead: a sentence set there tells a plan (明天回广州, 下个月搬到深圳).
_AHEAD = frozenset("明天 后天 明年 后年 下周 下星期 下个月 下月 将来 到时候 下次".split())
_NEGATIONS = frozenset("不 没 没有 别 从没 从来不 从来没 未 不会 不想 不要 不用".split())
_PAST = frozenset("以前 小时候 曾经 当年 那时候 那时 过去 从前 当时 原来".split())
_PRESENT = _NOW | frozenset("还 仍然 依然 一直 每天 每周 每月 平时 经常 总是 目前 正在".split())
LOCATIVES = frozenset(
    "在 到 去 回 住 往 从 来 于 住在 搬到 搬去 搬回 搬进 跳槽 转到 调到 回到 来到".split()
)
_PREPOSITIONS = frozenset("在 到 去 回 往 从 来 于".split())
_CLAUSE_ENDS = frozenset("， , ； ; ： : 、 。 ！ ？ ! ?".split())
NAME_TAGS = frozenset("ns nr nrt nrfg nt nz eng".split())
#: Measure words and durations: "一辆", "三个" count things and "三个月" is how long, no
#: value (an age, 二十九岁, or an amount, 四千五, is one).
_MEASURES = frozenset(
    """辆 家 只 个 包 条 本 位 件 台 次 种 双 张 杯 瓶 份 套 部 所 间 头 匹 支 块 些 点 月 天 年
    周 小时 分钟 星期""".split()
)
#: Adverbs that only mark a change: left out of the words two statements are matched on.
ADVERBS = _NOW | frozenset("已经 又 再 刚".split())
#: And the change verbs (搬到 is near 住, so they take part in the word match, as in
#: English): left out of the stems that tell a repeat from a new value.
MARKERS = _CHANGE | ADVERBS

_Tagged = list[tuple[str, str]]


def applies(text: str) -> bool:
    """Is ``text`` read by these rules (Chinese) rather than the English ones?"""
    return lang.has_cjk(text) and lang.detect(text) == "zh"


def read(sentence: str, speaker: str, names: Collection[str]) -> Reading:
    """Read ``sentence`` said by ``speaker`` (lower-case) among the scope's speaker
    ``names`` (lower-case)."""
    tagged = [(w.lower(), f) for w, f in lang.tagged_words(sentence) if w.strip()]
    clauses = _clauses(tagged)
    words = [w for w, _ in tagged]
    subject, named = _subject(tagged, speaker, names)
    kinds = [(c, _marks_change(c, tagged)) for c in clauses]
    changed = [c for c, kind in kinds if kind]
    # 我不学钢琴了 ends the piano, not whatever else is learnt: a stop alone says nothing
    # else of the predicate, so it is tied to the earlier statement by what it ended only
    stopped_only = bool(changed) and all(kind in ("", "stopped") for _, kind in kinds)
    reported = bool(set(words) & _HEARSAY) or any(
        {w for w, _ in c} & _REPORTS for c in changed or clauses
    )
    return Reading(
        sentence,
        subject,
        irrealis=bool(set(words) & (_IRREALIS | _AHEAD)),
        additive=_additive(words),
        reported=reported,
        change=bool(changed),
        past_event=_past(tagged),
        ended=_ended(changed, names),
        heads=() if stopped_only else _heads(tagged, speaker, names),
        named=named,
    )


def slots(text: str) -> dict[str, str]:
    """Each value a Chinese ``text`` names (module docstring), with the slot it fills."""
    out: dict[str, str] = {}
    for clause in _clauses([(w.lower(), f) for w, f in lang.tagged_words(text) if w.strip()]):
        k = 0
        while k < len(clause):
            if clause[k][0] in _NAMING and k + 1 < len(clause):
                # 叫小美: what is named is a name, however the tagger splits it
                name = "".join(w for w, f in clause[k + 1 :] if f[:1] not in "ux")
                if name:  # the slot is what is named: 猫叫 is not 女朋友叫
                    what = next((w for w, f in reversed(clause[:k]) if f[:1] == "n"), "")
                    out.setdefault(name, f"{what}{clause[k][0]}")
                break
            if not _value(clause[k]):
                k += 1
                continue
            j, amount = k, _amount(clause[k])
            while j < len(clause) and _value(clause[j]) and _amount(clause[j]) == amount:
                j += 1
            value = " ".join(w for w, _ in clause[k:j])
            out.setdefault(value, _slot(clause, k))
            k = j
    return out


def other_predicate(old: Reading, new: Reading) -> bool:
    """Do two Chinese statements say their values of different predicates (我在华为上班 /
    我现在住在深圳: 上班, 住)? 在 gives a workplace and a home alike, so the slot alone
    cannot tell them apart. False when either names no predicate or either is not
    Chinese."""
    if not (old.heads and new.heads and applies(old.text) and applies(new.text)):
        return False
    return not set(old.heads) & set(new.heads)


def shared_chars(ended: Iterable[str], stems: Iterable[str]) -> set[str]:
    """The words a change ended whose every Han character is in an earlier statement's
    words: jieba segments 戒烟 and 抽一包烟, or 吃辣 and 不吃 + 辣, differently. A whole
    word, not one shared character: 我不喝茶了 ends no 喝咖啡."""
    chars = {ch for w in stems for ch in w}
    return {
        w
        for w in ended
        if lang.CJK_RE.match(w[:1]) and all(ch in chars for ch in w if lang.CJK_RE.match(ch))
    }


def _clauses(tagged: _Tagged) -> list[_Tagged]:
    out: list[_Tagged] = [[]]
    for w, f in tagged:
        if w in _CLAUSE_ENDS:
            out.append([])
        else:
            out[-1].append((w, f))
    return [c for c in out if c]


def _first_person(word: str) -> bool:
    # jieba sometimes joins the pronoun to its verb ("我开")
    return word in _FIRST or (word[:1] == "我" and word not in KIN)


def _subject(tagged: _Tagged, speaker: str, names: Collection[str]) -> tuple[str, str]:
    """(subject, the person a relation names) of the sentence (module docstring)."""
    for k, (w, f) in enumerate(tagged):
        if _first_person(w):
            j = k + 1
            while j < len(tagged) and tagged[j][0] in _KIN_MODIFIERS:
                j += 1
            if j < len(tagged) - 1 and tagged[j][0] in KIN:
                nxt, flag = tagged[j + 1]
                if flag.startswith("nr") and nxt not in names:
                    return SELF, nxt  # 我的好朋友小林住在杭州: 小林's
                if nxt not in _NAMING:
                    return f"{w} {tagged[j][0]}", ""  # 我邻居刚买了: the neighbour's
            return SELF, ""
        if w in names and w != speaker:
            return w, ""
        if f.startswith("nr") and w not in names and not any(_first_person(v) for v, _ in tagged):
            return w, ""  # 小王搬到了深圳: 小王's, as English reads "Ruth moved"
        prev = tagged[k - 1][1] if k else ""
        if (w in _LISTENER or w in _OTHERS) and not prev.startswith(("v", "p")):
            return "", ""  # about the listener or a thing; after a verb it is the object
    return SELF, ""


def _negated(clause: _Tagged, k: int) -> bool:
    return any(w in _NEGATIONS for w, _ in clause[max(0, k - 2) : k])


def _marks_change(clause: _Tagged, sentence: _Tagged) -> str:
    """How ``clause`` (of ``sentence``) marks a change (module docstring): "marker" (a
    change verb, 现在, 我的新...), "stopped" (不再, or a negation closed by 了), or ""."""
    words = [w for w, _ in clause]
    if set(words) & _STILL:
        return ""  # 还在上海, 仍然住在北京: what held still holds
    for k, (w, f) in enumerate(clause):
        prev = words[k - 1] if k else ""
        if w in _CHANGE and not _negated(clause, k):
            return "stopped" if w == "不再" else "marker"
        if w in _NOW and prev not in ("到", "直到"):
            return "marker"
        new = w == "新" or (w[:1] == "新" and f != "t" and w not in _NEW_WORDS)
        if new and (prev == "的" or _first_person(prev)):
            return "marker"  # 我的新车, 我的新工作; not 我的新年
    # 不吃辣了 / 没在那儿上班了: a negated state that has come about, "no longer"; not for
    # today only (我今天不上班了)
    negation = any(w in _NEGATIONS or (w[:1] in "不没" and len(w) > 1) for w in words)
    for_now = any(w in _FOR_NOW for w, _ in sentence)
    return "stopped" if negation and words[-1] == "了" and not for_now else ""


def _additive(words: list[str]) -> bool:
    if set(words) & _ADDITIVE:
        return True
    return any(
        w == "又" and (k + 1 == len(words) or words[k + 1] not in _CHANGE)
        for k, w in enumerate(words)
    )


def _past(tagged: _Tagged) -> bool:
    words = {w for w, _ in tagged}
    past = bool(words & _PAST) or any(w == "过" and f == "ug" for w, f in tagged)
    return past and not words & _PRESENT


def _ended(changed: list[_Tagged], names: Collection[str]) -> tuple[str, ...]:
    """What a clause with an ending marker (or a negation closed by 了) says ended: its
    content words, and what follows 戒 or 卖 inside one word (戒烟: 烟)."""
    out: list[str] = []
    for clause in changed:
        words = [w for w, _ in clause]
        negated_state = words[-1] == "了" and any(w[:1] in "不没" for w in words)
        if not set(words) & _ENDING and not any(w[:1] == "戒" for w in words) and not negated_state:
            continue
        for k, (w, f) in enumerate(clause):
            if _first_person(w) or w in names or f[:1] in "upcdrmtqx" or w in _NOW:
                continue
            # what 戒 or 卖 ended is inside the word (戒烟: 烟); a verb after 不 with an
            # object is the verb of the stop, not what stopped (我不学钢琴了 ends the piano;
            # 我不游泳了 ends the swimming)
            rest = w[1:] if w[:1] in "戒卖" and len(w) > 1 else ""
            objects = any(g[:1] == "n" for _, g in clause[k + 1 :])
            after_no = k > 0 and clause[k - 1][0] in _NEGATIONS and f[:1] == "v" and objects
            if w not in _CHANGE and w not in _NEGATIONS and w[:1] not in "不没" and not after_no:
                out.append(w)
            if rest:
                out.append(rest)
    return tuple(dict.fromkeys(out))


def _heads(tagged: _Tagged, speaker: str, names: Collection[str]) -> tuple[str, ...]:
    """The first content word after each subject mention (我住在成都: 住; 我的月薪是...: 月薪)."""
    out = []
    for k, (w, _) in enumerate(tagged):
        if not _first_person(w) and not (w in names and w != speaker):
            continue
        for v, f in tagged[k + 1 :]:
            if _first_person(v) or v in names or v in _LISTENER or v in _OTHERS:
                break
            if v in _CHANGE or v in _PRESENT or v in MARKERS or _value((v, f)):
                continue
            if f[:1] in "vn" and v != "是" and v not in _PREPOSITIONS:
                out.append(v)
                break
    return tuple(out)


def _amount(item: tuple[str, str]) -> bool:
    word, flag = item
    return flag == "m" and bool(word) and word[-1] not in _MEASURES


def _value(item: tuple[str, str]) -> bool:
    word, flag = item
    return (flag in NAME_TAGS and not _first_person(word)) or _amount(item)


def _slot(clause: _Tagged, k: int) -> str:
    if _amount(clause[k]):  # the noun it measures: 月薪一万五, 房租涨到了四千五, 生日是五号
        return next(
            (w for w, f in reversed(clause[:k]) if f[:1] in "nt" and not _value((w, f))),
            "",
        )
    for w, f in reversed(clause[:k]):
        if f in ("ul", "uj", "m", "q") or w in ("了", "的"):
            continue  # 搬到了杭州, 开了一辆比亚迪
        return "at" if w in LOCATIVES else w
    return ""
