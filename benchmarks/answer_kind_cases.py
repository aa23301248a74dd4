"""Does answers-first (``retrieval.answer_reach``) ever push a real answer down? Short
conversations written by two outside reviews to break it: chat that holds names and
numbers, answers in lower case or as bare noun phrases, replies to a question, two people
talking (LoCoMo style), questions asking for a source or a degree.

    python benchmarks/answer_kind_cases.py

Each conversation is stored twice in fresh SQLite files (``answer_reach`` 0 and the
default) and asked its question; the answer's place is the first retrieved memory whose
text holds the answer's words. Prints JSON: per case both places, and how many cases the
step put lower, higher or at the same place.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from lightmem import LightMemory
from lightmem.pipeline.answer_kind import REACH

Turn = tuple[str, str, str]  # role, speaker, text
Conversation = list[tuple[str, list[Turn]]]  # (day, turns) per session


def _user(text: str) -> Turn:
    return ("user", "Wren", text)


def _bot(text: str) -> Turn:
    return ("assistant", "Assistant", text)


def _caroline(text: str) -> Turn:
    return ("user", "Caroline", text)


def _melanie(text: str) -> Turn:
    return ("user", "Melanie", text)


CHAT = [
    _user("I ran 5 miles this morning, legs are dead."), _bot("Nice work! Rest up."),
    _user("Just watching Netflix tonight, nothing much."), _bot("Enjoy!"),
    _user("That's OK, no worries, I'm just stressed at the moment."), _bot("Take it easy."),
    _user("Can you remind me to water the plants later?"), _bot("Sure."),
]  # fmt: skip


def _said_then_chat(answer: str, reply: str, extra: list[Turn] | None = None) -> Conversation:
    return [("2023-02-01", [_user(answer), _bot(reply)]), ("2023-02-03", CHAT + (extra or []))]


def _one_a_day(answer: str, others: list[str]) -> Conversation:
    return [
        (f"2023-03-{k + 1:02d}", [_user(t), _bot("Got it, thanks for sharing!")])
        for k, t in enumerate([answer, *others])
    ]


TWO_PEOPLE: Conversation = [
    ("2023-05-01", [
        _caroline("Hey Melanie! How have you been?"),
        _melanie("Hey Caroline! Busy as always, I ran 5 miles this morning before work."),
        _caroline("Wow, that's great! Where are you from originally, by the way?"),
        _melanie("Sweden, originally. Came over as a kid."),
        _caroline("That's so cool. I'm off to the support group tonight."),
        _melanie("That's OK, you'll do great! Say hi to Jess for me."),
        _caroline("Thanks, Melanie! Watching Netflix with Tom after."),
        _melanie("Haha enjoy it, I'm stressed at the moment with the kids."),
    ]),
    ("2023-05-08", [
        _caroline("Melanie, what did you end up getting for the family?"),
        _melanie("we finally bought a minivan, the kids love it"),
        _caroline("Nice! I had pizza with Tom and Jess yesterday."),
        _melanie("Fun! my oldest turns 8 next week."),
        _caroline("Aw! How many kids do you have now?"),
        _melanie("three little monsters haha"),
        _caroline("Haha. Who's your favourite painter?"),
        _melanie("monet, always monet"),
        _caroline("Same! I saw Gerald at the gallery in 2019."),
        _melanie("Lucky you!"),
    ]),
]  # fmt: skip
NAMED_CHAT = [
    "Maya and I went hiking on Sunday.", "Watched Dune again last night, still amazing.",
    "I ran 5k this morning before breakfast.", "Priya says hi, by the way.",
    "Had pizza with Tom and Jess.", "Can you remind me to water the plants later?",
]  # fmt: skip

# (conversation, question, words of the answer)
CASES: list[tuple[Conversation, str, str]] = [
    (_said_then_chat("got hired by deloitte last week!! still can't believe it", "Congrats!"),
     "Where does Wren work?", "deloitte"),
    (_said_then_chat("i'm an accountant for deloitte now", "Congratulations!"),
     "Where does Wren work?", "deloitte"),
    (_said_then_chat("Big news: Deloitte hired me!", "Congratulations!"),
     "Which company does Wren work for?", "Deloitte"),
    (_said_then_chat("we finally bought a minivan, the kids love it", "Fun!",
                     [_user("Had pizza with Tom and Jess."), _bot("Yum")]),
     "What car does Wren drive?", "minivan"),
    (_said_then_chat("twins, both boys, they keep me busy", "Wow!"),
     "How many kids does Wren have?", "twins"),
    (_said_then_chat("honestly my grandmother inspires me, she never quit", "Lovely."),
     "Where does Wren get her motivation?", "grandmother"),
    (_said_then_chat("my sister's wedding is a fortnight from saturday", "Exciting."),
     "When is Wren's sister getting married?", "wedding"),
    (_said_then_chat("new boss is called oksana, seems nice", "Good."),
     "Who is Wren's manager?", "oksana"),
    (TWO_PEOPLE, "Where is Melanie from?", "Sweden"),
    (TWO_PEOPLE, "Which country is Melanie from?", "Sweden"),
    (TWO_PEOPLE, "What car does Melanie drive?", "minivan"),
    (TWO_PEOPLE, "Who is Melanie's favourite painter?", "monet"),
    (TWO_PEOPLE, "How many kids does Melanie have?", "monsters"),
    (TWO_PEOPLE, "Who did Caroline have pizza with?", "pizza"),
    (TWO_PEOPLE, "When does Melanie's oldest have a birthday?", "turns 8"),
    (TWO_PEOPLE, "Where did Caroline go tonight?", "support group"),
    (_one_a_day("I finally started at the little bakery on the corner, the blue door.",
                NAMED_CHAT), "Where does Wren work?", "bakery"),
    (_one_a_day("We brought the puppy home right after Christmas, she's a rescue.",
                ["I have yoga on Tuesdays.", "Tonight I'm cooking pasta.",
                 "Going to bed early tonight, so tired.", "My cat hates Mondays.",
                 "Busy week at the office."]), "When did Wren adopt her dog?", "puppy"),
    (_one_a_day("I'm an only child actually, always wanted a brother.",
                ["Walked 10,000 steps today!", "Two coffees already and it's not even noon.",
                 "Bought three new plants.", "Finished 4 chapters of my book."]),
     "How many siblings does Wren have?", "only child"),
    (_one_a_day("my boyfriend is a nurse, we met at the climbing gym last spring",
                ["Went to the market with Priya.", "Maya lent me her bike.",
                 "Watched Dune with my neighbour.", "Tom says the new cafe is great."]),
     "Who is Wren dating?", "boyfriend"),
    ([("2023-03-01", [_bot("So where are you working these days?"),
                      _user("the little bakery on the corner, the one with the blue door")]),
      *[(f"2023-03-{k + 2:02d}", [_user(t), _bot("Nice!")]) for k, t in enumerate(NAMED_CHAT[:4])]],
     "Where does Wren work?", "bakery"),
]  # fmt: skip


def place(conversation: Conversation, question: str, answer: str, reach: int, db: Path) -> int:
    """Where the answer comes in the retrieved memories (-1: not among them)."""
    with LightMemory.from_config(
        {"store": {"path": str(db)}, "retrieval": {"answer_reach": reach}}
    ) as mem:
        for s, (day, turns) in enumerate(conversation):
            mem.add_memory(
                [
                    {"id": f"s{s}t{k}", "role": role, "speaker_name": who,
                     "content": text, "timestamp": f"{day}T09:{k:02d}:00"}
                    for k, (role, who, text) in enumerate(turns)
                ],
                user_id="u",
                force_extract=True,
            )  # fmt: skip
        got = [r.entry.original_text or r.entry.text for r in mem.retrieve(question, user_id="u")]
    return next((k for k, text in enumerate(got) if answer in text), -1)


def main() -> None:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (conversation, question, answer) in enumerate(CASES):
            off, on = (
                place(conversation, question, answer, reach, Path(tmp) / f"{n}-{reach}.db")
                for reach in (0, REACH)
            )
            rows.append({"question": question, "off": off, "on": on})

    def rank(k: int) -> int:
        return k if k >= 0 else 99

    out = {
        "cases": len(rows),
        "lower": sum(rank(r["on"]) > rank(r["off"]) for r in rows),
        "higher": sum(rank(r["on"]) < rank(r["off"]) for r in rows),
        "same": sum(r["on"] == r["off"] for r in rows),
        "rows": rows,
    }
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
