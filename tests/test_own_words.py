"""A memory found only through its neighbours' words (its indexed context) comes after the
neighbour that holds them, and nothing else moves."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from lightmem import LightMemory
from lightmem.pipeline.own_words import WINDOW, own_words_first
from lightmem.store.text_index import Stemmer
from lightmem.types import MemoryEntry, Scope

FACT = "I live in Bergen, five minutes from the fish market."
ACK = "Okay, good to know."
CHAT = "Ugh, Mondays."


def _entry(
    eid: str, text: str, context: str = "", scope: str = "u", topic: str = "s1"
) -> MemoryEntry:
    when = datetime(2023, 3, 4, tzinfo=UTC)
    return MemoryEntry(eid, text, text, Scope(user_id=scope), when, topic_id=topic, context=context)


def _first(entries: list[MemoryEntry], query: str) -> list[str]:
    by_id = {e.id: e for e in entries}
    ranked = [(e.id, 1.0 - k / 100) for k, e in enumerate(entries)]
    got = own_words_first(
        ranked, lambda ids: {i: by_id[i] for i in ids if i in by_id}, query, Stemmer()
    )
    assert [s for _, s in got] == [s for _, s in ranked]  # each place keeps its score
    return [i for i, _ in got]


def test_an_entry_matched_through_its_context_comes_after_the_neighbour_it_quotes() -> None:
    ack = _entry("ack", ACK, context=f"{FACT}\n{CHAT}")
    chat = _entry("chat", CHAT, context=ACK)
    fact = _entry("fact", FACT, context=f"{CHAT}\n{ACK}")
    assert _first([ack, chat, fact], "Which city does Ingrid live in?") == ["chat", "fact", "ack"]
    # it goes after the first neighbour holding the query's words, whichever that is
    assert _first([ack, chat, fact], "What does Ingrid say of Mondays?") == ["chat", "ack", "fact"]
    # where no neighbour holds them, nothing moves
    assert _first([ack, chat, fact], "Does Ingrid cook?") == ["ack", "chat", "fact"]


def test_only_a_neighbour_of_the_same_scope_within_the_window_is_passed() -> None:
    ack = _entry("ack", ACK, context=FACT)
    other = _entry("other", FACT, scope="someone else")
    assert _first([ack, other], "Where does Ingrid live?") == ["ack", "other"]
    # the same words said in another segment (another session) are not its neighbour
    again = _entry("again", FACT, topic="s7")
    assert _first([ack, again], "Where does Ingrid live?") == ["ack", "again"]
    # a neighbour below the window is not looked for
    filler = [_entry(f"f{k}", f"Filler number {k}.") for k in range(WINDOW)]
    late = _entry("fact", FACT)
    assert _first([ack, *filler, late], "Where does Ingrid live?")[0] == "ack"


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
        got = [r.source_ids[0] for r in mem.retrieve(question, user_id="u")]
    assert got.index("t3") < got.index("t4")
