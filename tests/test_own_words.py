"""A memory found only through its neighbours' words (its indexed context) comes after the
neighbour that holds them, within reach, and nothing else moves."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from conftest import reranked
from lightmem import LightMemory
from lightmem.pipeline.own_words import REACH, own_words_first
from lightmem.types import EntryKind, MemoryEntry, Scope

FACT = "I live in Bergen, five minutes from the fish market."
ACK = "Okay, good to know."
CHAT = "Ugh, Mondays."


def _entry(
    eid: str,
    text: str,
    context: str = "",
    *,
    scope: str = "u",
    topic: str = "s1",
    kind: EntryKind = "entry",
    who: str = "Ingrid",
) -> MemoryEntry:
    when = datetime(2023, 3, 4, tzinfo=UTC)
    return MemoryEntry(
        eid,
        text,
        text,
        Scope(user_id=scope),
        when,
        speaker_name=who,
        topic_id=topic,
        kind=kind,
        context=context,
    )


def _first(entries: list[MemoryEntry], query: str) -> list[str]:
    return reranked(own_words_first, entries, query)


def test_an_entry_matched_through_its_context_comes_after_the_neighbour_it_quotes() -> None:
    ack = _entry("ack", ACK, context=f"{FACT}\n{CHAT}", who="Assistant")
    chat = _entry("chat", CHAT, context=ACK)
    fact = _entry("fact", FACT, context=f"{CHAT}\n{ACK}")
    assert _first([ack, chat, fact], "Which city does Ingrid live in?") == ["chat", "fact", "ack"]
    # it goes after the first neighbour holding the query's words, whichever that is
    assert _first([ack, chat, fact], "What does Ingrid say of Mondays?") == ["chat", "ack", "fact"]
    # where no neighbour holds them, nothing moves; nor for a speaker's name alone
    assert _first([ack, chat, fact], "Does Ingrid cook?") == ["ack", "chat", "fact"]
    thanks = _entry("thanks", "Thanks Ingrid, I'll drop by!", who="Tom")
    answer = _entry("answer", "At the bank downtown.", context=thanks.text)
    assert _first([answer, thanks], "Where does Ingrid work now?") == ["answer", "thanks"]


def test_a_neighbour_is_a_whole_line_of_the_same_scope_and_segment_within_reach() -> None:
    ack = _entry("ack", ACK, context=FACT, who="Assistant")
    question = "Where does Ingrid live?"
    assert _first([ack, _entry("fact", FACT)], question) == ["fact", "ack"]  # the control
    # the same words in another user's memory, or said in another segment (session)
    assert _first([ack, _entry("other", FACT, scope="someone")], question) == ["ack", "other"]
    assert _first([ack, _entry("again", FACT, topic="s7")], question) == ["ack", "again"]
    # a part of the line is no neighbour: "I live in Bergen" said alone is another turn
    assert _first([ack, _entry("part", "I live in Bergen")], question) == ["ack", "part"]
    # a neighbour further down than REACH places: the entry keeps its place
    filler = [_entry(f"f{k}", f"Filler number {k}.") for k in range(REACH)]
    far = _first([ack, *filler, _entry("fact", FACT)], question)
    assert far[0] == "ack"
    near = _first([ack, *filler[:-1], _entry("fact", FACT)], question)
    assert near[-1] == "ack"


@pytest.mark.parametrize("kind", ["event", "summary"])
def test_only_turn_entries_move(kind: EntryKind) -> None:
    # an LLM event's context is its facts' text: it is not found through a neighbour
    event = _entry("event", "A trip happened.", context=FACT, kind=kind)
    assert _first([event, _entry("fact", FACT)], "Where does Ingrid live?") == ["event", "fact"]


def test_retrieval_puts_the_turn_that_says_it_before_the_acknowledgement(tmp_path: Path) -> None:
    turns = [
        ("t1", "user", "Ingrid", CHAT),
        ("t2", "assistant", "Assistant", "Happy to help."),
        ("t3", "user", "Ingrid", FACT),
        ("t4", "assistant", "Assistant", ACK),
    ]
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory(
            [
                {"id": i, "role": r, "speaker_name": s, "timestamp": f"2023-03-04T09:0{k}",
                 "content": c}
                for k, (i, r, s, c) in enumerate(turns)
            ],
            user_id="u",
            force_extract=True,
        )  # fmt: skip
        question = "Which city does Ingrid live in now?"  # the acknowledgement came first
        got = [
            r.source_ids[0] for r in mem.retrieve(question, user_id="u") if r.entry.kind == "entry"
        ]
    assert got.index("t3") < got.index("t4")
