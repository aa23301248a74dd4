"""A memory that holds what a question asks for (a name, a number, a time) or one of its
words comes before the small talk just above it, within reach; nothing else moves."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import reranked
from lightmem import LightMemory
from lightmem.config import parse_config
from lightmem.errors import ConfigError
from lightmem.pipeline.answer_kind import (
    REACH,
    Asked,
    answers_first,
    asked_for,
    holds,
    small_talk,
)
from lightmem.store.text_index import Stemmer
from lightmem.timespan import TimeSpan
from lightmem.types import MemoryEntry, Scope

ANSWER = "Day three at Riverside Library, I'm shelving returns all morning."
CHAT = ["Can you remind me to water the plants later?", "I need a recipe idea for tonight."]


def _entry(eid: str, text: str, who: str = "Wren") -> MemoryEntry:
    when = datetime(2023, 3, 4, tzinfo=UTC)
    return MemoryEntry(eid, text, text, Scope(user_id="u"), when, speaker_name=who)


def _first(entries: list[MemoryEntry], query: str) -> list[str]:
    return reranked(answers_first, entries, query)


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Where does Wren work?", Asked.PLACE),
        ("And where's Wren working now?", Asked.PLACE),
        ("Which city does Aleksi live in?", Asked.PLACE),
        ("What company does Perpetua work for?", Asked.PLACE),
        ("Who is Saoirse's manager?", Asked.PERSON),
        ("Who\u2019s Saoirse's manager?", Asked.PERSON),
        ("Whose car did Tom borrow?", Asked.PERSON),
        ("What's the name of Casimir's sister?", Asked.PERSON),
        ("How old is Oswin?", Asked.NUMBER),
        ("How many kids does Zuzana have?", Asked.NUMBER),
        ("When is Levente's physio appointment?", Asked.TIME),
        ("So when's the party?", Asked.TIME),
        ("What time is Pernille's party?", Asked.TIME),
        ("Which day is Solveig's flight to Oslo?", Asked.TIME),
        # no kind a word tells apart: yes / no, "what" of everyday things, a source, a
        # degree, durations, named things answered in everyday words ("a minivan")
        ("Does Matthias smoke?", None),
        ("When Caroline moved, did she sell her house?", None),
        ("What does Gunnhild do for a living?", None),
        ("What new content is Nate creating?", None),
        ("Which events has Jon been to?", None),
        ("What school subjects does Caroline teach?", None),
        ("Where does Melanie get her motivation?", None),
        ("How much does Caroline like pottery?", None),
        ("How long did the book take?", None),
        ("What was the name of the book Melanie read?", None),
        ("What car does Melanie drive?", None),
        # Chinese by its question words; Japanese not read
        ("吴昊住在哪里？", Asked.PLACE),
        ("她的经理是谁？", Asked.PERSON),
        ("赵敏多大了？", Asked.NUMBER),
        ("你哪天有空？", Asked.TIME),
        ("马丽开什么车？", None),
        ("老陈抽烟吗？", None),
        ("高雪现在做什么工作？", None),
        ("彼はどこに住んでいますか？", None),
    ],
)
def test_what_a_question_asks_for(question: str, kind: Asked | None) -> None:
    assert asked_for(question) is kind


def test_what_a_memory_could_hold() -> None:
    place, person = Asked.PLACE, Asked.PERSON
    # somewhere: put there by a preposition or a joining verb, whatever its case, or a
    # name not of someone met
    assert holds(place, ANSWER)
    assert holds(place, "i live in leeds lol")
    assert holds(place, "quit tesco!! im at aldi now")
    assert holds(place, "moved to bristol last month, loving it")
    assert holds(place, "I finally started at the little bakery on the corner.")
    assert holds(place, "got hired by deloitte last week!!")
    assert holds(place, "i'm an accountant for deloitte now")
    assert holds(place, "Rashid joined KPMG in March.")
    assert holds(place, "just joined kpmg, so happy")
    assert holds(place, "KPMG hired me last week!")  # a rare word opening a sentence
    assert not holds(place, "Had pizza with Tom and Jess.")  # people met
    assert not holds(place, "I ran 5 miles this morning.")  # a number is nowhere
    assert not holds(place, "I'll be there in 10 minutes.")
    assert not holds(place, "I need a recipe idea for tonight.")  # a time
    assert not holds(place, "Got it, thanks for letting me know.")  # an -ing form
    assert not any(holds(place, c) for c in CHAT)  # "to" but after a move
    # someone: a name (a rare word opening a sentence too), or kin
    assert holds(person, "Oksana is brilliant at shielding us.")
    assert holds(person, "Gerald, who took over in May, wants reports.")
    assert holds(person, "my boyfriend is a nurse")
    assert not holds(person, "Practice went well today.")  # a common opening word
    assert not holds(person, "Ugh, Mondays.")  # a day is no name, "Ugh" no opener
    assert not holds(person, "Wren, can you help?", {"wren"})  # whom it speaks to
    assert not holds(person, "Wren's plants need water.", {"wren"})
    assert holds(person, "Wren, can you help?")
    assert not holds(person, "I saw Wren Hollis today.", {"wren", "hollis"})
    # numbers and times
    assert holds(Asked.NUMBER, "Zuzana: we have three kids now.")
    assert holds(Asked.NUMBER, "Turned 30 on Saturday!")
    assert holds(Asked.NUMBER, "I'm an only child actually.")
    assert holds(Asked.NUMBER, "twins, both boys")
    assert not holds(Asked.NUMBER, CHAT[0])
    assert holds(Asked.TIME, "It moved to Thursdays.")
    assert holds(Asked.TIME, "We got her two weeks ago.")
    assert holds(Asked.TIME, "Right after Christmas.")
    assert not holds(Asked.TIME, CHAT[0])
    # a long memory is no small talk (and is not read through)
    assert holds(place, "blah " * 1000)


def test_what_a_chinese_memory_holds() -> None:
    speakers = {"吴昊"}
    small_talk = ["早上好！", "帮我想想晚饭吃什么吧。", "吴昊，你好！"]
    for kind in (Asked.PLACE, Asked.PERSON, Asked.NUMBER):
        assert not any(holds(kind, t, speakers) for t in small_talk), kind
    assert holds(Asked.PLACE, "我住在南京。", speakers)
    assert holds(Asked.PLACE, "我在华为上班。", speakers)  # 华为 tagged a person: after 在
    assert holds(Asked.PERSON, "我的经理是王芳。", speakers)
    assert holds(Asked.PERSON, "我男朋友是护士。", speakers)
    assert holds(Asked.NUMBER, "我今年二十九岁。", speakers)
    assert holds(Asked.TIME, "提醒我明天交电费。", speakers)


def test_the_answer_passes_the_small_talk_above_it() -> None:
    chat = [_entry(f"c{k}", t) for k, t in enumerate(CHAT)]
    answer = _entry("a", ANSWER)
    question = "Where does Wren work?"
    assert _first([*chat, answer], question) == ["a", "c0", "c1"]
    lower = _entry("l", "moved to bristol last month, loving it")
    assert _first([*chat, lower], "Where does Wren live?") == ["l", "c0", "c1"]
    zh = [_entry("z0", "早上好！", who="吴昊"), _entry("z1", "我住在南京。", who="吴昊")]
    assert _first(zh, "吴昊住在哪里？") == ["z1", "z0"]
    # a memory holding a word of the question is no small talk, though it names nothing
    said = _entry("w", "I really love my work.")
    assert _first([said, answer], question) == ["w", "a"]
    # a question asking for no kind of value moves nothing
    assert _first([*chat, answer], "What does Wren do all day?") == ["c0", "c1", "a"]
    # the speaker's own name is no word of the question ("Wren, can you ...")
    named = _entry("n", "Wren, can you remind me to call mum?", who="Tom")
    assert _first([named, answer], question) == ["a", "n"]
    # the answer's own text is read, not the stored (compressed) one
    stored = replace(_entry("s", CHAT[0]), original_text="I work at the library now.")
    assert _first([chat[0], stored], question) == ["s", "c0"]


@pytest.mark.parametrize(
    ("text", "chat"),
    [
        ("Can you remind me to water the plants later?", True),  # a question, a request
        ("I need a recipe idea for tonight.", True),
        ("Please book it.", True),
        ("Got it, thanks for letting me know.", True),  # acknowledgements, thanks, greetings
        ("Okay, good to know.", True),
        ("Noted.", True),
        ("Hey! Morning!", True),
        ("早上好！", True),
        ("好的，记住了。", True),
        ("帮我想想晚饭吃什么吧。", True),
        # anything that may say something of the speaker is no small talk
        ("Mike is my new manager, seems chill so far.", False),
        ("remote now", False),
        ("Sweden, originally.", False),
        ("Thanks! It's the little bakery on the corner.", False),
        ("Long day, but a good one.", False),
        ("今天好累。", False),
        ("", False),
    ],
)
def test_what_is_plainly_small_talk(text: str, chat: bool) -> None:
    assert small_talk(text) is chat


def test_only_plain_small_talk_is_passed() -> None:
    # an answer the reading misses (a common name opening it) stays above a statement
    # holding a name: only small talk is passed, never a statement that may be the answer
    answer = _entry("a", "Mike is my new manager, seems chill so far.")
    chat = _entry("c", "Had pizza with Tom and Jess.")
    assert _first([answer, chat], "Who is Wren's boss?") == ["a", "c"]
    remote = _entry("r", "remote now, loving it")
    assert _first([remote, _entry("b", ANSWER)], "Where does Wren work?") == ["r", "b"]
    assert _first([_entry("q", CHAT[0]), _entry("b", ANSWER)], "Where does Wren work?") == [
        "b",
        "q",
    ]


def test_a_reply_to_a_question_beside_it_is_an_answer_an_acknowledgement_is_not() -> None:
    chat = _entry("c", CHAT[0])
    # the question beside it holds a word of the query
    reply = replace(
        _entry("r", "The one with the blue door."),
        context="So where are you working these days?",
    )
    assert _first([chat, reply], "Where does Wren work?") == ["r", "c"]
    assert _first([chat, replace(reply, context="")], "Where does Wren work?") == ["c", "r"]
    # or asks for the same kind of value (a place), in other words
    fragment = replace(
        _entry("f", "France, originally."), context="Wow! Where are you from, by the way?"
    )
    assert _first([chat, fragment], "Which country is Wren from?") == ["f", "c"]
    # a question inside the line, followed by more, and in Chinese
    inside = replace(fragment, context="Where are you from? I'm so curious!")
    assert _first([chat, inside], "Which country is Wren from?") == ["f", "c"]
    zh_chat = _entry("zc", "早上好！", who="吴昊")
    zh = _entry("z", "疫情期间领的证。", who="吴昊")
    assert _first([zh_chat, zh], "吴昊什么时候结婚的？") == ["zc", "z"]
    assert _first(
        [zh_chat, replace(zh, context="你们什么时候结的婚？")], "吴昊什么时候结婚的？"
    ) == [
        "z",
        "zc",
    ]
    assert _first([chat, replace(fragment, context="")], "Which country is Wren from?") == [
        "c",
        "f",
    ]
    ack = _entry("k", "Okay, good to know.", who="Assistant")
    fact = _entry("f", "My manager is Oksana, she's great.")
    ack = replace(ack, context=fact.original_text)
    assert _first([ack, fact], "Who is Wren's manager?") == ["f", "k"]


def test_a_time_the_resolver_read_is_a_time() -> None:
    said = _entry("t", "We brought the puppy home right after the move.")
    chat = _entry("c", CHAT[0])
    question = "When did Wren adopt her dog?"
    assert _first([chat, said], question) == ["c", "t"]
    when = TimeSpan(date(2023, 1, 2), date(2023, 1, 2), "day", "right after the move")
    assert _first([chat, replace(said, event_time=when)], question) == ["t", "c"]


def test_an_id_the_fetch_does_not_return_neither_moves_nor_is_passed() -> None:
    chat, answer = _entry("c", CHAT[0]), _entry("a", ANSWER)
    by_id = {e.id: e for e in (chat, answer)}
    fetch = lambda ids: {i: by_id[i] for i in ids if i in by_id}  # noqa: E731
    ranked = [("gone", 0.9), ("c", 0.8), ("a", 0.7)]
    got = answers_first(ranked, fetch, "Where does Wren work?", Stemmer())
    assert [i for i, _ in got] == ["gone", "a", "c"]
    ranked = [("c", 0.9), ("gone", 0.8), ("a", 0.7)]
    got = answers_first(ranked, fetch, "Where does Wren work?", Stemmer())
    assert [i for i, _ in got] == ["c", "gone", "a"]


def test_small_talk_goes_down_at_most_reach_places() -> None:
    chat = _entry("c", CHAT[0])
    answers = [_entry(f"a{k}", f"I met Sam {k} times at Riverside Library.") for k in range(6)]
    got = _first([chat, *answers], "Where does Wren work?")
    assert got.index("c") == REACH
    # and an answer passes at most REACH of it
    chats = [_entry(f"c{k}", CHAT[k % 2]) for k in range(REACH + 2)]
    got = _first([*chats, _entry("a", ANSWER)], "Where does Wren work?")
    assert got.index("a") == 2


@given(
    st.lists(st.sampled_from([ANSWER, *CHAT, "I love my work.", "Turned 30!"]), max_size=30),
    st.sampled_from(["Where does Wren work?", "How old is Wren?", "Does Wren cook?"]),
)
def test_a_permutation_that_sinks_nothing_past_reach(texts: list[str], question: str) -> None:
    entries = [_entry(f"e{k}", t) for k, t in enumerate(texts)]
    got = _first(entries, question)
    assert sorted(got) == sorted(e.id for e in entries)
    for k, e in enumerate(entries):
        assert got.index(e.id) <= k + REACH


@pytest.mark.parametrize("reach", [REACH, 0])
def test_retrieval_puts_the_answer_before_the_small_talk(tmp_path: Path, reach: int) -> None:
    # the small talk, embedded with the speaker's name, came first and second
    answer = (
        "Day three as an assistant librarian at the Riverside Library, so much quieter than"
        " steaming milk."
    )
    reply, ack = ("assistant", "Assistant", "Happy to help."), ("assistant", "Assistant", "Noted.")
    sessions = [
        ("2023-02-20", [("user", "Wren", CHAT[0]), reply, ("user", "Wren", answer), ack]),
        ("2023-03-01", [("user", "Wren", CHAT[1]), reply]),
    ]
    cfg = {"store": {"path": str(tmp_path / "m.db")}, "retrieval": {"answer_reach": reach}}
    with LightMemory.from_config(cfg) as mem:
        for s, (day, turns) in enumerate(sessions):
            mem.add_memory(
                [
                    {"id": f"s{s}t{k}", "role": role, "speaker_name": who,
                     "timestamp": f"{day}T09:0{k}", "content": text}
                    for k, (role, who, text) in enumerate(turns)
                ],
                user_id="u",
                force_extract=True,
            )  # fmt: skip
        got = [r.source_ids[0] for r in mem.retrieve("Where does Wren work?", user_id="u")]
    # retrieval.answer_reach: 0 turns it off
    assert (got[0] == "s0t2") is (reach > 0)


@pytest.mark.parametrize("bad", [-1, 25, 2.5, "4"])
def test_a_bad_answer_reach_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ConfigError, match="answer_reach"):
        parse_config({"retrieval": {"answer_reach": bad}})
