"""A memory that holds what a question asks for (a name, a number, a time) or one of its
words comes before the small talk just above it, within reach; nothing else moves."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lightmem import LightMemory
from lightmem.config import parse_config
from lightmem.errors import ConfigError
from lightmem.pipeline.answer_kind import REACH, Asked, answers_first, asked_for, holds
from lightmem.store.text_index import Stemmer
from lightmem.types import MemoryEntry, Scope

ANSWER = "Day three at Riverside Library, I'm shelving returns all morning."
CHAT = ["Can you remind me to water the plants later?", "I need a recipe idea for tonight."]


def _entry(eid: str, text: str, who: str = "Wren") -> MemoryEntry:
    when = datetime(2023, 3, 4, tzinfo=UTC)
    return MemoryEntry(eid, text, text, Scope(user_id="u"), when, speaker_name=who)


def _first(entries: list[MemoryEntry], query: str) -> list[str]:
    by_id = {e.id: e for e in entries}
    ranked = [(e.id, 1.0 - k / 100) for k, e in enumerate(entries)]
    fetch = lambda ids: {i: by_id[i] for i in ids if i in by_id}  # noqa: E731
    got = answers_first(ranked, fetch, query, Stemmer())
    assert [s for _, s in got] == [s for _, s in ranked]  # each place keeps its score
    return [i for i, _ in got]


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Where does Wren work?", Asked.NAME),
        ("Who is Saoirse's manager?", Asked.NAME),
        ("Whose car did Tom borrow?", Asked.NAME),
        ("Which city does Aleksi live in?", Asked.NAME),
        ("What company does Perpetua work for?", Asked.NAME),
        ("What is the name of Casimir's sister?", Asked.NAME),
        ("How old is Oswin?", Asked.NUMBER),
        ("How many kids does Zuzana have?", Asked.NUMBER),
        ("When is Levente's physio appointment?", Asked.TIME),
        ("What time is Pernille's party?", Asked.TIME),
        ("Which day is Solveig's flight to Oslo?", Asked.TIME),
        # no kind a word tells apart: yes / no, "what" of everyday things, durations, Chinese
        ("Does Matthias smoke?", None),
        ("What does Gunnhild do for a living?", None),
        ("What new content is Nate creating?", None),
        ("Which events has Jon been to?", None),
        ("How long did the book take?", None),
        ("吴昊住在哪里？", None),
    ],
)
def test_what_a_question_asks_for(question: str, kind: Asked | None) -> None:
    assert asked_for(question) is kind


def test_what_a_memory_holds() -> None:
    assert holds(Asked.NAME, ANSWER)  # a name inside a sentence
    assert holds(Asked.NAME, "Oksana is brilliant at shielding us.")  # a rare opening word
    assert not holds(Asked.NAME, "Practice went well today.")  # a common one
    assert not any(holds(Asked.NAME, c) for c in CHAT)
    assert holds(Asked.NUMBER, "Zuzana: we have three kids now.")
    assert holds(Asked.NUMBER, "Turned 30 on Saturday!")
    assert not holds(Asked.NUMBER, "Long day, but a good one.")  # "one" counts nothing
    assert holds(Asked.TIME, "It moved to Thursdays.")
    assert not holds(Asked.TIME, CHAT[0])


def test_the_answer_passes_the_small_talk_above_it() -> None:
    chat = [_entry(f"c{k}", t) for k, t in enumerate(CHAT)]
    answer = _entry("a", ANSWER)
    question = "Where does Wren work?"
    assert _first([*chat, answer], question) == ["a", "c0", "c1"]
    # a memory holding a word of the question is no small talk, though it names nothing
    said = _entry("w", "I really love my work.")
    assert _first([said, answer], question) == ["w", "a"]
    # a question asking for no kind of value moves nothing
    assert _first([*chat, answer], "What does Wren do all day?") == ["c0", "c1", "a"]
    # the speaker's own name is no word of the question ("Wren, can you ...")
    named = _entry("n", "Wren, can you remind me to call mum?", who="Tom")
    assert _first([named, answer], question) == ["a", "n"]


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
