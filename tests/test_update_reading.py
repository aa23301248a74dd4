"""How sentences are split (titles, e-mail addresses and decimals inside a sentence,
full-width ends); a question is about the past only where it asks what came before, not
where it names a deadline; and a speaker's newer statement that answers the question as
well as their older one is ranked before it even where no change was detected. (What the
detector reads of such sentences: tests/test_supersede_rules.py.)"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from lightmem import ConfigError, LightMemory
from lightmem.config import parse_config
from lightmem.pipeline import statements
from lightmem.pipeline.validity import Likeness, about_past, newer_first
from lightmem.types import MemoryEntry, Scope

START = datetime(2023, 3, 1, 10, tzinfo=UTC)


def test_a_sentence_does_not_end_at_a_title_an_address_or_a_decimal() -> None:
    assert statements.sentences("My dentist is Dr. Moreau. I like her.") == [
        "My dentist is Dr. Moreau.",
        "I like her.",
    ]
    assert len(statements.sentences("Write to lotte.v@example.org now! It costs 3.5 euros.")) == 2
    assert statements.sentences("我搬到了上海。现在很好！你呢？") == [
        "我搬到了上海。",
        "现在很好！",
        "你呢？",
    ]


@pytest.mark.parametrize(
    ("question", "past"),
    [
        ("What car does Ana drive? I need to book parking before Friday.", False),
        ("Which car should I put first on the form for Ana?", False),
        ("What car does Ana drive until the lease ends?", False),
        ("What car did Ana drive before?", True),
        ("Where did Ana live before she moved?", True),
        ("Where did Ana work before moving to Lisbon?", True),
        ("What was Ana's first car?", True),
    ],
)
def test_a_question_is_about_the_past_where_it_asks_what_came_before(
    question: str, past: bool
) -> None:
    assert about_past(question) is past


def _entry(eid: str, text: str, days: float, who: str = "Lotte") -> MemoryEntry:
    return MemoryEntry(
        eid, text, text, Scope(user_id="u"), START + timedelta(days=days), speaker_name=who
    )


def test_a_newer_statement_answering_as_well_comes_first() -> None:
    old = _entry("old", "Our flat in Ghent has a tiny balcony.", 0)
    new = _entry("new", "Our flat in Porto gets sun all morning.", 90)
    other = _entry("oth", "My bedroom is painted blue.", 120)
    plan = _entry("plan", "I might rent a flat in Madrid next year.", 150)
    by_id = {e.id: e for e in (old, new, other, plan)}
    ranked = [("old", 0.9), ("new", 0.8)]
    assert [i for i, _ in newer_first(ranked, by_id, "Where is Lotte's flat?")] == ["new", "old"]
    # a newer statement sharing less of the question, a plan, another speaker's: no pass
    for later in (other, plan, _entry("ben", "Our flat in Porto is bright.", 90, "Ben")):
        by_id[later.id] = later
        got = newer_first([("old", 0.9), (later.id, 0.8)], by_id, "Where is Lotte's flat?")
        assert [i for i, _ in got] == ["old", later.id], later.text
    # it passes only within reach, and not over what the question favours more
    kitchen = _entry("kit", "Our flat's kitchen is yellow.", 60)
    by_id["kit"] = kitchen
    got = newer_first(
        [("old", 0.9), ("kit", 0.85), ("new", 0.8)],
        by_id,
        "What colour is the kitchen in Lotte's flat?",
    )
    assert [i for i, _ in got] == ["old", "kit", "new"]


def test_when_asks_of_the_present_in_the_present_tense() -> None:
    old = _entry("old", "My flight to Oslo is on a Monday.", 0)
    new = _entry("new", "The airline put my flight to Oslo on a Tuesday.", 30)
    ranked, by_id = _ranked(old, new)
    now = newer_first(ranked, by_id, "When is Lotte's flight to Oslo?")
    assert [i for i, _ in now] == ["new", "old"]
    then = newer_first(ranked, by_id, "When did Lotte fly to Oslo?")  # an event: as searched
    assert [i for i, _ in then] == ["old", "new"]


def test_retrieval_puts_the_newer_statement_first_where_the_detector_found_no_change(
    tmp_path: Path,
) -> None:
    turns = [
        ("t1", "2023-01-10T09:00", "My flat is in Ghent."),
        (
            "t2",
            "2023-06-02T09:00",
            "The flat in Porto gets sun all morning and the street below is quiet at night.",
        ),
    ]
    with LightMemory.from_config({"store": {"path": str(tmp_path / "m.db")}}) as mem:
        mem.add_memory(
            [
                {"id": i, "role": "user", "speaker_name": "Lotte", "timestamp": ts, "content": c}
                for i, ts, c in turns
            ],
            user_id="u",
            force_extract=True,
        )
        stored = mem.list_entries({"kind": "entry"}, user_id="u")
        assert not any(e.superseded_by for e in stored)  # the detector saw no change here
        first, second = mem.retrieve("Where is Lotte's flat?", limit=2, user_id="u")
        assert first.source_ids == ("t2",) and first.score >= second.score
        # a question about the past keeps the search's order
        past = mem.retrieve("Where was Lotte's flat before?", limit=2, user_id="u")
        assert past[0].source_ids == ("t1",)


class _Meanings:
    """A scripted embedder: each text's unit vector is given, and every call is counted."""

    def __init__(self, vectors: dict[str, list[float]]) -> None:
        self.vectors = vectors
        self.embedded: list[str] = []

    def __call__(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.embedded += texts
        rows = np.array([self.vectors[t] for t in texts], dtype=np.float32)
        unit: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return unit


BARISTA = "I'm a barista at Kettle and Crumb on Elm Street."
LIBRARY = "Day three as an assistant librarian at the Riverside Library, so quiet."
SMALL_TALK = "Long day, but a good one."
WORK = [1.0, 0.0, 0.0]


def _ranked(*entries: MemoryEntry) -> tuple[list[tuple[str, float]], dict[str, MemoryEntry]]:
    return [(e.id, 1.0 - k / 10) for k, e in enumerate(entries)], {e.id: e for e in entries}


def test_a_newer_statement_alike_in_meaning_comes_first_though_it_shares_no_word() -> None:
    # "work" is in neither statement, and they share no word: only their meaning ties them
    # (small talk and an acknowledgement between them, as in a conversation: three places)
    old, chat, ack, new = (
        _entry("old", BARISTA, 0),
        _entry("chat", SMALL_TALK, 90),
        _entry("ack", "Noted.", 90, who="Assistant"),
        _entry("new", LIBRARY, 90),
    )
    meanings = _Meanings(
        {BARISTA: WORK, LIBRARY: [0.8, 0.6, 0.0], SMALL_TALK: [0.1, 0.0, 1.0], "Noted.": [0, 1, 0]}
    )
    ranked, by_id = _ranked(old, chat, ack, new)
    question = "Where does Lotte work?"
    as_searched = ["old", "chat", "ack", "new"]
    assert [i for i, _ in newer_first(ranked, by_id, question)] == as_searched
    got = newer_first(ranked, by_id, question, Likeness(meanings, 0.3))
    assert [i for i, _ in got] == ["new", "old", "chat", "ack"]
    # the newer statement takes the score of the one it passed: scores stay in order
    assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)
    # a threshold above their likeness: no pass
    got = newer_first(ranked, by_id, question, Likeness(meanings, 0.9))
    assert [i for i, _ in got] == as_searched


def test_likeness_lets_only_the_most_alike_later_statement_pass() -> None:
    # A weak embedder finds small talk somewhat alike too; the statement that replaced the
    # old one is the one most about it, so small talk never passes when something is nearer.
    old, chat, plan = (
        _entry("old", BARISTA, 0),
        _entry("chat", SMALL_TALK, 90),
        _entry("plan", "If the library job comes through, I'd leave the café.", 90),
    )
    meanings = _Meanings({BARISTA: WORK, SMALL_TALK: [0.6, 0.8, 0.0], plan.text: [0.9, 0.0, 0.4]})
    ranked, by_id = _ranked(old, chat, plan)
    got = newer_first(ranked, by_id, "Where does Lotte work?", Likeness(meanings, 0.3))
    assert [i for i, _ in got] == ["old", "chat", "plan"]  # the plan is no assertion either


def test_likeness_is_not_asked_within_one_conversation_nor_across_speakers() -> None:
    # A list told in one sitting: "My dog is Rex." then "My cat is Tom." adds a fact.
    dog, cat = _entry("dog", "My dog is called Rex.", 0), _entry("cat", "My cat Tom sleeps.", 0.01)
    meanings = _Meanings({dog.text: WORK, cat.text: WORK})
    ranked, by_id = _ranked(dog, cat)
    got = newer_first(ranked, by_id, "What is Lotte's dog called?", Likeness(meanings, 0.3))
    assert [i for i, _ in got] == ["dog", "cat"]
    # another speaker's statement, however alike, says nothing of Lotte's
    ben = _entry("ben", LIBRARY, 90, who="Ben")
    meanings.vectors[LIBRARY] = WORK
    ranked, by_id = _ranked(_entry("old", BARISTA, 0), ben)
    meanings.vectors[BARISTA] = WORK
    got = newer_first(ranked, by_id, "Where does Lotte work?", Likeness(meanings, 0.3))
    assert [i for i, _ in got] == ["old", "ben"]
    # neither case needed a vector: the cheap tests decided first
    assert meanings.embedded == []


def test_likeness_keeps_what_the_question_names() -> None:
    # Alike as they are, a cat's name is no answer about the dog; the 5k time is, though
    # the newer statement leaves out "time" (the question's other noun)
    dog, cat = _entry("dog", "My dog is called Rex.", 0), _entry("cat", "My cat is Tom.", 90)
    old, new = _entry("old", "My 5k time is 27 minutes.", 0), _entry("new", "24:50 in the 5k!", 90)
    meanings = _Meanings({e.text: WORK for e in (dog, cat, old, new)})
    alike = Likeness(meanings, 0.3)
    ranked, by_id = _ranked(dog, cat)
    for question in ("What is Lotte's dog called?", "What does her dog like?"):
        assert [i for i, _ in newer_first(ranked, by_id, question, alike)] == ["dog", "cat"]
    ranked, by_id = _ranked(old, new)
    assert [i for i, _ in newer_first(ranked, by_id, "What is Lotte's 5k time?", alike)] == [
        "new",
        "old",
    ]


@pytest.mark.parametrize(
    ("old", "new", "question"),
    [
        # a question naming a time asks of then (the time lift serves it)
        (BARISTA, LIBRARY, "Where does Lotte work in March 2023?"),
        # short Chinese sentences are all alike to the default embedder: words only
        ("我住在上海。", "帮我想想晚饭吃什么吧。", "Lotte现在住在哪里？"),
    ],
)
def test_likeness_is_not_asked_of_a_dated_question_nor_of_chinese(
    old: str, new: str, question: str
) -> None:
    earlier, later = _entry("old", old, 0), _entry("new", new, 90)
    meanings = _Meanings({old: WORK, new: WORK})
    ranked, by_id = _ranked(earlier, later)
    assert [i for i, _ in newer_first(ranked, by_id, question, Likeness(meanings, 0.3))] == [
        "old",
        "new",
    ]
    assert meanings.embedded == []


def test_retrieval_puts_a_changed_value_first_by_meaning(tmp_path: Path) -> None:
    # "run" is in the question and the older statement only: the words alone keep the
    # older one first, and the detector reads no change ("up to" is no change marker)
    turns = [
        ("t1", "2022-09-03T09:00", "I run about 20 km a week, nothing crazy."),
        ("t2", "2023-02-20T09:00", SMALL_TALK),
        ("t3", "2023-02-20T09:02", "I'm training for the marathon so I'm up to 45 km a week now."),
    ]

    def first(config: dict[str, object], mode: str = "hybrid") -> tuple[tuple[str, ...], int]:
        """The first memory's source, and how many texts the likeness embedded."""
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}.db"
        with LightMemory.from_config({"store": {"path": str(path)}, **config}) as mem:
            mem.add_memory(
                [
                    {"id": i, "role": "user", "speaker_name": "Wren", "timestamp": ts, "content": c}
                    for i, ts, c in turns
                ],
                user_id="u",
                force_extract=True,
            )
            assert not any(e.superseded_by for e in mem.list_entries(user_id="u"))
            question = "How many kilometres does Wren run a week?"
            got = mem.retrieve(question, limit=3, user_id="u", mode=mode)[0].source_ids
            usage = mem.stats()["usage"]["by_operation"]
            alike = [r for r in usage if (r["kind"], r["op"]) == ("embed", "retrieve.likeness")]
            return got, sum(r["items"] for r in alike)

    # the older statement and the speaker's later ones, each once: accounted apart
    assert first({}) == (("t3",), 3)
    assert first({"retrieval": {"recency_similarity": 1.0}}) == (("t1",), 0)  # words only
    assert first({}, mode="context")[1] == 0  # BM25 alone embeds nothing


def test_recency_similarity_is_validated() -> None:
    assert parse_config({}).retrieve.recency_similarity == 0.3
    assert parse_config({"retrieval": {"recency_similarity": 1}}).retrieve.recency_similarity == 1
    with pytest.raises(ConfigError, match=r"retrieval\.recency_similarity"):
        parse_config({"retrieval": {"recency_similarity": 1.5}})
