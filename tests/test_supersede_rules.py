"""The update detector on conversations in general: what is a change (a marked change of
the same subject's value, the same statement with another value, read past titles,
object pronouns and corrections) and what is not (plans, questions, additions, reported
speech, events, a listener addressed by name, recency words, another person's change);
the online update compares a new entry with a bounded number of earlier ones and decides
as the offline pass does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import weekly_entries
from lightmem import LightMemory
from lightmem.pipeline.supersede import Detector
from lightmem.pipeline.update import REVIEW_K

START = datetime(2023, 3, 1, 10, tzinfo=UTC)


def _pairs(detector: Detector, turns: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(f.old.id, f.new.id) for f in detector.detect(weekly_entries(turns))]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I live in Porto with my sister.", "We moved to Lisbon last month!"),
        ("I play tennis every Saturday.", "I gave up tennis, I'm into chess now."),
        ("I study accounting at the college.", "I'm studying biology now."),
        ("My favourite band is Muse.", "My favourite band is Blur."),
        ("I'm dating Theo.", "Theo and I split up, my new boyfriend is Omar."),
        ("I work as a nurse at Mass General.", "I started a new job at Denver Health."),
    ],
)
def test_changes_of_one_value_supersede(detector: Detector, old: str, new: str) -> None:
    assert _pairs(detector, [("Ana", old), ("Ana", new)]) == [("e0", "e1")]


BASE = ("Ana", "I live in Porto with my sister.")


@pytest.mark.parametrize(
    ("who", "new"),
    [
        ("Ana", "Should I move to Lisbon now?"),  # a question
        ("Ana", "I'm thinking of moving to Lisbon now."),  # a plan
        ("Ana", "If the job works out, I'll move to Lisbon."),  # a condition
        ("Ana", "I won't move to Lisbon, I love it here now."),  # a negated future
        ("Ana", "We never moved to Lisbon last year."),  # a negated change
        ("Ana", "My friend said she moved to Lisbon now."),  # reported speech
        ("Ana", "I also live in Lisbon now, half the week."),  # an addition
        ("Ana", "Since we last talked, I finally visited Lisbon."),  # recency, an event
        ("Ben", "I moved to Lisbon now."),  # another subject
        ("Ben", "Hey Ana, I moved to Lisbon now!"),  # Ana addressed, not the subject
        ("Ana", "Wow, that's cool, Ben! Lisbon sounds great now."),  # a reaction
    ],
)
def test_what_is_not_a_change_supersedes_nothing(detector: Detector, who: str, new: str) -> None:
    assert _pairs(detector, [BASE, ("Ben", "I work at a bakery in Faro."), (who, new)]) == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("My dentist is Dr. Moreau.", "My dentist is Dr. Haddad now."),
        ("I live in Porto.", "Moved to Lisbon last month, loving it."),
        ("My flight lands at Heathrow.", "Sorry, I meant Gatwick, not Heathrow."),
        # an addition in a clause of its own does not make the change an addition
        ("I live in Porto.", "I moved to Lisbon last month, so I need a warmer coat too."),
        ("I live in Porto.", "We moved to Lisbon; the cat came along as well."),
        ("I live in Porto.", "I moved to Lisbon last month, and I also got a dog."),
        # a name whose number differs is another value ("KL" alone is no match)
        ("My licence plate is KL 4471.", "Scratch that, the plate is KL 4417."),
        ("My phone is a Pixel 6.", "I switched, my phone is a Pixel 8 now."),
    ],
)
def test_changes_read_past_titles_pronouns_corrections_clauses_and_numbers(
    detector: Detector, old: str, new: str
) -> None:
    assert _pairs(detector, [("Ana", old), ("Ana", new)]) == [("e0", "e1")]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        # the addition is in the change's own clause, or there is no change at all
        ("I live in Porto.", "I also moved to Lisbon, so I split the week now."),
        ("I live in Porto.", "I have a flat in Lisbon too, so I split the week."),
        # "and" and "but" go on with what the change says; a colon is no clause's end
        ("I work at Mass General.", "I started at Kaiser, and I kept Mass General too."),
        ("I work at Mass General.", "I started at Kaiser, but I kept my shifts there as well."),
        ("I take a spin class at 6:30.", "I started a yoga class at 7:30 as well."),
        # the same name with and without its number; a time of day is no value
        ("My phone is a Pixel 6.", "I got a new case for my Pixel now."),
        ("I work at Kaiser.", "I start work at 7am now."),
    ],
)
def test_additions_and_the_same_numbered_value_supersede_nothing(
    detector: Detector, old: str, new: str
) -> None:
    assert _pairs(detector, [("Ana", old), ("Ana", new)]) == []


@pytest.mark.parametrize(
    "new",
    [
        "My colleague Ruth moved to Lisbon last month.",
        "Hendrik, my cousin, moved to Lisbon now.",
        "My best friend Yvette lives in Lisbon now.",
        "Ruth moved to Lisbon now.",
    ],
)
def test_another_persons_change_is_not_the_speakers(detector: Detector, new: str) -> None:
    assert _pairs(detector, [("Ana", "I live in Porto."), ("Ana", new)]) == []


def test_events_and_turns_saying_several_things_are_not_replaced(detector: Detector) -> None:
    turns = [
        ("Ana", "I grew up in Porto."),  # an event: no later value replaces it
        ("Ana", "I live in Porto. My sister lives in Braga."),  # two facts in one turn
        ("Ana", "We moved to Lisbon last month!"),
    ]
    assert _pairs(detector, turns) == []


def test_a_change_ends_every_restatement_of_the_value(detector: Detector) -> None:
    turns = [
        ("Ana", "I play kayaking every Saturday."),
        ("Ana", "My kayaking group meets twice a week."),
        ("Ana", "No more kayaking for me, I'm into fencing now."),
    ]
    assert sorted(_pairs(detector, turns)) == [("e0", "e2"), ("e1", "e2")]


def _turn(k: int, who: str, text: str) -> dict[str, Any]:
    when = (START + timedelta(days=k)).isoformat()
    return {"id": f"t{k}", "speaker_name": who, "content": text, "timestamp": when}


SMALL_TALK = [
    "I watched a documentary about {} last night.",
    "The {} at the market looked great today.",
    "My neighbour keeps talking about {}.",
    "Do you know anything about {}?",
]
TOPICS = "octopuses volcanoes bread chess jazz tomatoes trains comets bees tulips".split()


def _filler(n: int) -> list[dict[str, Any]]:
    return [
        _turn(k, "Sam", SMALL_TALK[k % 4].format(f"{TOPICS[k % 10]} {k} and room {k * 7 + 3}"))
        for k in range(n)
    ]


def _reviewed(mem: LightMemory) -> int:
    ops = {(r["kind"], r["op"]): r for r in mem.stats()["usage"]["by_operation"]}
    return int(ops[("update", "review")]["items"]) if ("update", "review") in ops else 0


def test_online_insertion_compares_a_bounded_number_of_entries(tmp_path: Path) -> None:
    """The pairs one insertion's review compares (the usage ledger's ``update``/``review``
    items) stay at ``REVIEW_K`` however many entries the scope holds."""
    work = {}
    for n in (80, 320):
        cfg = {"store": {"path": str(tmp_path / f"{n}.db")}, "update": "online"}
        with LightMemory.from_config(cfg) as mem:
            mem.add_memory(_filler(n), force_extract=True)
            work[n] = len(mem.list_entries({"kind": "entry"}, limit=1000))
            before = _reviewed(mem)
            mem.add_memory(_turn(n + 1, "Sam", "I moved to Lisbon last month!"), force_extract=True)
            assert _reviewed(mem) - before == REVIEW_K
    assert work[320] > 3 * work[80] > 3 * REVIEW_K  # the scopes differ, the work does not


CHAIN = [
    ("Lena", "I drive an old Honda Civic, it still runs great."),
    ("Marc", "I live in Ghent with my wife."),
    ("Lena", "My sister Hana is a pilot."),
    ("Lena", "I sold the old car, I drive a Subaru Outback now."),
    ("Marc", "We moved to Antwerp last month!"),
    ("Lena", "Traded in the Subaru yesterday, my car is a Tesla now!"),
    ("Lena", "I'm thinking of moving to Berlin next year."),
]


def _decisions(mem: LightMemory) -> dict[str, str]:
    """Each entry's first source turn -> the first source turn of what superseded it."""
    entries = mem.list_entries({"kind": "entry"}, limit=1000)
    by_id = {e.id: e.source_ids[0] for e in entries}
    return {e.source_ids[0]: by_id.get(e.superseded_by, "") for e in entries}


def test_online_and_offline_decide_alike(tmp_path: Path) -> None:
    turns = [_turn(10 * k, who, text) for k, (who, text) in enumerate(CHAIN)]
    online = {"store": {"path": str(tmp_path / "on.db")}, "update": "online"}
    with LightMemory.from_config(online) as mem:
        for t in turns:  # one turn per insertion: each reviewed as it arrives
            mem.add_memory(t, force_extract=True)
        arrived = _decisions(mem)
    with LightMemory.from_config({"store": {"path": str(tmp_path / "off.db")}}) as mem:
        mem.add_memory(turns, force_extract=True)
        mem.construct_update_queue_all_entries()
        mem.offline_update_all_entries()
        mem.offline_update_all_entries()  # a second pass changes nothing
        at_once = _decisions(mem)
    assert arrived == at_once
    assert {k: v for k, v in at_once.items() if v} == {"t0": "t30", "t10": "t40", "t30": "t50"}


def test_a_relative_is_a_subject_of_their_own(detector: Detector) -> None:
    parents = ("Ana", "My parents still live in Porto.")
    assert _pairs(detector, [parents, ("Ana", "We moved to Lisbon last month!")]) == []
    moved = ("Ana", "My parents moved to Lisbon now.")
    assert _pairs(detector, [parents, moved]) == [("e0", "e1")]


@pytest.mark.parametrize(
    ("old", "new", "why"),
    [
        # a denial closed by "anymore" or "now" takes back the earlier predicate
        ("I eat meat.", "I don't eat meat anymore.", "earlier statement denied"),
        ("I smoke about ten cigarettes a day.", "I don't smoke anymore.", "denied"),
        ("I take the bus to work.", "I never take the bus now, I cycle everywhere.", "denied"),
        # what a termination ends, or a denial denies, is the earlier named value
        ("I'm on the audit team at Deloitte.", "I quit Deloitte.", "earlier value ended"),
        ("I drive a Saab 9-3.", "I sold the Saab.", "earlier value ended"),
        ("I work at Spotify.", "I\u2019m not at Spotify anymore.", "earlier value ended"),
        # a correction names the earlier value after "not" and gives another
        ("My flight to Oslo is on Monday.", "Sorry, I meant Tuesday, not Monday.", "corrected"),
        ("The party is at 7pm.", "Correction: the party starts at 8pm, not 7.", "corrected"),
        ("I'm vegan.", "I'm vegetarian, not vegan.", "corrected"),
    ],
)
def test_a_change_takes_back_an_earlier_value_without_giving_another(
    detector: Detector, old: str, new: str, why: str
) -> None:
    found = detector.detect(weekly_entries([("Ana", old), ("Ana", new)]))
    assert [(f.old.id, f.new.id) for f in found] == [("e0", "e1")]
    assert why in found[0].why


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("I work at Spotify.", "I don't work on weekends anymore."),  # says more than it
        ("I work at Spotify.", "I don't like Spotify anymore."),  # another predicate
        ("I live in Lisbon.", "I don't like Lisbon now."),
        ("I live in Paris.", "I left Paris."),  # a visit's end as much as a move
        ("I don't eat meat.", "I don't eat meat anymore."),  # the same negation
        ("I eat fish.", "I don't eat meat anymore, just fish."),  # another thing denied
        ("I live in Porto.", "I love it here, not going to lie."),  # no earlier value
    ],
)
def test_what_is_denied_or_ended_must_be_what_was_held(
    detector: Detector, old: str, new: str
) -> None:
    assert _pairs(detector, [("Ana", old), ("Ana", new)]) == []
