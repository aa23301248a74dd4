"""How sentences are split (titles, e-mail addresses and decimals inside a sentence,
full-width ends); a question is about the past only where it asks what came before, not
where it names a deadline; and a speaker's newer statement that answers the question as
well as their older one is ranked before it even where no change was detected. (What the
detector reads of such sentences: tests/test_supersede_rules.py.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lightmem import LightMemory
from lightmem.pipeline import statements
from lightmem.pipeline.validity import about_past, newer_first
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


def _entry(eid: str, text: str, days: int, who: str = "Lotte") -> MemoryEntry:
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
