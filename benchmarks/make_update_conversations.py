"""Write ``benchmarks/data/knowledge_updates.json``: multi-session conversations in the
LoCoMo file format where facts change once or twice, others stay, and a second speaker
talks about the same kinds of things (distractors). With ``--heldout``, write
``knowledge_updates_heldout.json`` instead: the same design from another family of
templates (other attributes, other words for a change: "these days", "switched to", "no
longer", "since I left ...", "now that ..."), other people, fillers and seed, never used
to tune the detector.

Each question is a LoCoMo QA item (category 4, single-hop) with ``kind``: ``current``
(with ``stale_evidence``: the turns of values no longer true), ``history`` (an earlier
value) or ``stable`` (a fact that never changed). Deterministic: the same file every run.

    python benchmarks/make_update_conversations.py [--heldout]
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "data" / "knowledge_updates.json"
HELDOUT = Path(__file__).parent / "data" / "knowledge_updates_heldout.json"


@dataclass(frozen=True)
class Changing:
    """A fact with values over time: the first is said plainly, each later one as a change.
    ``said``/``changed`` are phrasings ({v}: value, {o}: the previous value)."""

    said: tuple[str, ...]
    changed: tuple[str, ...]
    values: tuple[str, ...]
    current_q: tuple[str, ...]
    history_q: tuple[str, ...]


@dataclass(frozen=True)
class Stable:
    said: tuple[str, ...]
    values: tuple[str, ...]
    question: tuple[str, ...]


CHANGING = [
    Changing(
        ("I live in {v} with my partner.", "Our apartment in {v} is tiny but I love it.",
         "Life in {v} is pretty good, the winters are long though."),
        ("Big news, we moved to {v} last month!", "We finally relocated to {v}, boxes everywhere.",
         "I'm living in {v} now, the move went fine."),
        ("Boston", "Denver", "Seattle", "Austin", "Portland", "Chicago", "Atlanta", "Tucson",
         "Madison", "Raleigh"),
        ("Where does {p} live?", "Which city is {p} living in now?"),
        ("Where did {p} live before {v}?", "Which city did {p} use to live in?"),
    ),
    Changing(
        ("I work as a nurse at {v}.", "My shifts at {v} have been brutal this month.",
         "I've been at {v} for three years, mostly in the pharmacy."),
        ("I started a new job at {v} on Monday.", "I left my old job, I'm at {v} now.",
         "I switched employers, I work for {v} these days."),
        ("Mass General", "Denver Health", "Kaiser", "Mercy Hospital", "Acme Labs", "Globex",
         "Initech", "Stark Logistics", "Wayne Foods", "Umbrella Pharma"),
        ("Where does {p} work?", "Who is {p}'s employer now?"),
        ("Where did {p} work before {v}?", "Which employer did {p} use to work for?"),
    ),
    Changing(
        ("I drive an old {v}, it still runs great.", "My {v} needed new tires again.",
         "I take my {v} everywhere on weekends."),
        ("I sold the old car, I drive a {v} now.", "Traded in my car for a {v} yesterday!",
         "Got rid of the old car, my new ride is a {v}."),
        ("Honda Civic", "Subaru Outback", "Tesla Model 3", "Ford Focus", "Toyota Prius",
         "Jeep Wrangler", "Mazda Miata", "Kia Soul"),
        ("What car does {p} drive?", "Which car does {p} have now?"),
        ("What car did {p} drive before the {v}?", "Which car did {p} use to drive?"),
    ),
    Changing(
        ("I play {v} every Saturday morning.", "My {v} group meets twice a week.",
         "I'm pretty obsessed with {v} lately, it keeps me sane."),
        ("I gave up {o}, I'm into {v} now.", "I stopped doing {o} and took up {v} instead.",
         "These days it's all {v} for me, no more {o}."),
        ("tennis", "rock climbing", "swimming", "chess", "pottery", "salsa dancing",
         "volleyball", "kayaking", "fencing", "archery"),
        ("What hobby is {p} into?", "What does {p} do for fun now?"),
        ("What hobby did {p} have before {v}?", "What did {p} use to do for fun?"),
    ),
    Changing(
        ("My boyfriend {v} is a chef.", "{v} and I have been dating for two years.",
         "I'm cooking dinner with {v}, my boyfriend, tonight."),
        ("I broke up with {o}, I'm seeing {v} now.", "I'm dating {v} now, things with {o} ended.",
         "{o} and I split up, my new boyfriend is {v}."),
        ("Marco", "Theo", "Jonas", "Ravi", "Diego", "Felix", "Omar", "Lukas"),
        ("Who is {p} dating?", "What is the name of {p}'s boyfriend?"),
        ("Who was {p} dating before {v}?", "What was the name of {p}'s previous boyfriend?"),
    ),
    Changing(
        ("I study {v} at the community college.", "My {v} classes are eating all my time.",
         "I'm taking {v} courses in the evenings."),
        ("I changed my major, I'm studying {v} now.", "I dropped {o} and switched to {v}.",
         "No more {o} for me, I'm doing {v} now."),
        ("accounting", "graphic design", "nursing", "computer science", "biology",
         "photography", "marketing", "architecture"),
        ("What does {p} study?", "Which subject is {p} studying now?"),
        ("What did {p} study before {v}?", "What subject did {p} use to study?"),
    ),
    Changing(
        ("I go to {v} for my workouts.", "The trainers at {v} are super friendly.",
         "I have a membership at {v} down the street."),
        ("I cancelled {o}, I joined {v} instead.", "I switched gyms, I'm a member of {v} now.",
         "I quit {o}, now I train at {v}."),
        ("Gold's Gym", "Planet Fitness", "Iron Temple", "CrossFit Harbor", "YogaWorks",
         "Equinox", "Anytime Fitness", "the YMCA"),
        ("Which gym does {p} go to?", "Where does {p} work out now?"),
        ("Which gym did {p} go to before {v}?", "Where did {p} use to work out?"),
    ),
]

STABLE = [
    Stable(("I grew up in {v}, a small town.", "Back in {v}, where I grew up, everyone knew everyone."),
           ("Maple Falls", "Cedar Creek", "Pine Hollow", "Silver Lake", "Elk Ridge", "Fox Run"),
           ("Where did {p} grow up?", "What town is {p} from?")),
    Stable(("My dog {v} is a golden retriever.", "I took my dog {v} to the vet today."),
           ("Biscuit", "Pepper", "Rocket", "Mochi", "Waffles", "Juniper", "Ziggy", "Nala"),
           ("What is the name of {p}'s dog?", "What is {p}'s dog called?")),
    Stable(("My sister {v} is a pilot.", "My sister {v} flies for a cargo airline."),
           ("Hana", "Greta", "Ines", "Yara", "Lena", "Sofia", "Tamsin", "Nora"),
           ("What is the name of {p}'s sister?", "What does {p}'s sister {v} do?")),
    Stable(("I'm allergic to {v}, so I always check menus.", "My {v} allergy flared up again."),
           ("peanuts", "shellfish", "cats", "pollen", "strawberries", "penicillin"),
           ("What is {p} allergic to?", "Which allergy does {p} have?")),
    Stable(("I speak {v} with my grandparents.", "My grandmother taught me {v} as a kid."),
           ("Portuguese", "Korean", "Polish", "Tagalog", "Greek", "Swahili"),
           ("What language does {p} speak with family?", "Which language did {p} learn from their grandmother?")),
]

FILLER = [
    "Haha, that sounds like a lot of fun.",
    "How was your week? Anything exciting?",
    "I watched a great documentary about octopuses last night.",
    "The weather has been so strange lately.",
    "Did you see the game on Sunday?",
    "I've been trying to drink more water, it's harder than it sounds.",
    "That's wonderful, I'm really happy for you!",
    "Oh no, I hope it gets better soon.",
    "I finally finished that book you recommended.",
    "We should grab coffee sometime soon.",
    "My neighbor's kids were so loud this morning.",
    "Honestly I just need a long nap.",
    "I made lasagna yesterday and it turned out great.",
    "Work has been busy but manageable.",
    "Tell me more, I'm curious!",
    "I'm thinking about repainting the living room.",
]

PEOPLE = [
    ("Priya", "Sam"), ("Lena", "Marcus"), ("Aisha", "Tom"), ("Chen", "Rosa"), ("Maya", "Ken"),
    ("Olivia", "Jamal"), ("Sara", "Nikos"), ("Fatima", "Ben"), ("Grace", "Ivan"),
    ("Zoe", "Pedro"), ("Elena", "Kofi"), ("Mia", "Arjun"), ("Hannah", "Luis"),
    ("Noor", "Erik"), ("Julia", "Tariq"), ("Ava", "Dmitri"), ("Leah", "Hiro"),
]


# -- the held-out family: other attributes, other phrasings of a change ---------------------
HELDOUT_CHANGING = [
    Changing(
        ("My phone is a {v}, it works fine.", "I text everyone from my {v}.",
         "The camera on my {v} is decent."),
        ("I switched to a {v} last week.", "These days I use a {v}, the old phone died.",
         "I no longer use the {o}, I got a {v}."),
        ("Pixel 7", "iPhone 12", "Galaxy S21", "Moto G", "Nokia 8", "Xperia 5"),
        ("What phone does {p} use?", "Which phone does {p} have these days?"),
        ("What phone did {p} use before the {v}?", "Which phone did {p} have before?"),
    ),
    Changing(
        ("I'm a huge {v} fan, never miss a match.", "I watch every {v} game with my dad.",
         "Supporting {v} is a family thing for me."),
        ("Since I left home I root for {v} instead.",
         "I no longer follow {o}, I'm all about {v} these days.",
         "I switched to supporting {v}, {o} broke my heart too often."),
        ("Arsenal", "Celtic", "Ajax", "Benfica", "Juventus", "Porto", "Everton"),
        ("Which team does {p} support?", "Which club is {p} a fan of now?"),
        ("Which team did {p} support before {v}?", "Which club did {p} follow before?"),
    ),
    Changing(
        ("My flat is in {v}, near the river.", "I rent a room in {v}, it's cheap.",
         "The cafes in {v} are why I stay."),
        ("Now that the lease ended, we're in {v}.", "I no longer live in {o}, home is {v} now.",
         "Since I left {o} I've been renting in {v}."),
        ("Brixton", "Camden", "Hackney", "Leith", "Clifton", "Jericho", "Ancoats"),
        ("Which neighbourhood does {p} live in?", "Where is {p}'s home these days?"),
        ("Where did {p} live before {v}?", "Which neighbourhood was {p}'s home before?"),
    ),
    Changing(
        ("I'm learning {v} on my phone every night.", "My {v} lessons are on Thursdays.",
         "I practise {v} with a tutor online."),
        ("I switched to {v}, the {o} lessons were too hard.",
         "These days I'm studying {v} instead of {o}.",
         "I no longer study {o}, I'm learning {v} now."),
        ("Spanish", "Japanese", "Italian", "German", "Turkish", "Dutch"),
        ("Which language is {p} learning?", "What language does {p} study now?"),
        ("Which language did {p} learn before {v}?", "What language was {p} studying before?"),
    ),
    Changing(
        ("My roommate {v} is a night owl.", "I share the flat with {v}, my roommate.",
         "{v}, my roommate, cooks every Sunday."),
        ("{o} moved out, my new roommate is {v}.", "I no longer live with {o}, {v} took the room.",
         "Now that {o} is gone, I share the place with {v}."),
        ("Hugo", "Amir", "Bea", "Kasia", "Dario", "Leon", "Mina"),
        ("Who is {p}'s roommate?", "Who does {p} share the flat with now?"),
        ("Who was {p}'s roommate before {v}?", "Who did {p} share the flat with before?"),
    ),
]

HELDOUT_STABLE = [
    Stable(("My parents live in {v}, I visit at Christmas.", "My parents still live in {v}."),
           ("Galway", "Lyon", "Krakow", "Bergen", "Cork", "Turin"),
           ("Where do {p}'s parents live?", "In which city do {p}'s parents live?")),
    Stable(("My cat {v} sleeps all day.", "My cat {v} knocked a glass off the table."),
           ("Miso", "Tofu", "Luna", "Pickles", "Olive", "Socks"),
           ("What is the name of {p}'s cat?", "What is {p}'s cat called?")),
    Stable(("My brother {v} is a dentist.", "My brother {v} fixed my tooth for free."),
           ("Malik", "Jonah", "Pavel", "Rafael", "Tomas", "Eli"),
           ("What is the name of {p}'s brother?", "What does {p}'s brother {v} do?")),
    Stable(("I was born in {v}.", "Back in {v}, where I was born, it rains a lot."),
           ("Dundee", "Bilbao", "Gdansk", "Utrecht", "Aarhus", "Graz"),
           ("Where was {p} born?", "Which city is {p} from?")),
    Stable(("I'm vegetarian, I don't eat {v}.", "No {v} for me, I'm vegetarian."),
           ("meat", "fish", "chicken", "bacon"),
           ("What does {p} not eat?", "Which food does {p} avoid?")),
]

HELDOUT_FILLER = [
    "Ha, classic.",
    "What are you up to this weekend?",
    "I binged a cooking show last night, now I'm hungry.",
    "It rained all day here, again.",
    "Did you catch the news this morning?",
    "I'm trying to read more before bed.",
    "That is amazing, well done!",
    "Ugh, sorry, that sounds stressful.",
    "I finally cleaned out the garage.",
    "Let's do lunch sometime next week.",
    "The bus was late three times this week.",
    "I could sleep for a whole day.",
    "I baked bread, it came out a bit flat.",
    "Work is fine, nothing special.",
    "Go on, what happened next?",
    "I'm thinking about getting a plant or two.",
]

HELDOUT_PEOPLE = [
    ("Ines", "Callum"), ("Rhea", "Owen"), ("Sofia", "Declan"), ("Yuki", "Marta"),
    ("Nadia", "Finn"), ("Clara", "Obi"), ("Tessa", "Ruben"), ("Amara", "Joel"),
]


@dataclass(frozen=True)
class Family:
    """One family of templates: what the conversations are made of."""

    changing: list[Changing]
    stable: list[Stable]
    filler: list[str]
    people: list[tuple[str, str]]
    seed: int
    out: Path


TUNING = Family(CHANGING, STABLE, FILLER, PEOPLE, 13, OUT)
HELD_OUT = Family(
    HELDOUT_CHANGING, HELDOUT_STABLE, HELDOUT_FILLER, HELDOUT_PEOPLE, 2026, HELDOUT
)


def _date(d: datetime) -> str:
    hour = d.hour % 12 or 12
    return f"{hour}:{d.minute:02d} {'am' if d.hour < 12 else 'pm'} on {d.day} {d:%B}, {d.year}"


def conversation(n: int, rng: random.Random, family: Family = TUNING) -> dict[str, Any]:
    a, b = family.people[n]
    sessions: list[list[tuple[str, str]]] = [[] for _ in range(5)]
    qa: list[dict[str, Any]] = []

    def say(session: int, speaker: str, text: str) -> tuple[int, int]:
        sessions[session].append((speaker, text))
        return (session, len(sessions[session]))

    def dia(pos: tuple[int, int]) -> str:
        return f"D{pos[0] + 1}:{pos[1]}"

    changing = rng.sample(family.changing, 3)
    stable = rng.sample(family.stable, 4)
    plans: list[tuple[Changing, list[str], list[tuple[int, int]]]] = []
    # a: two facts change (one twice), b: one fact of the same kind stays (distractor)
    for k, fact in enumerate(changing[:2]):
        values = rng.sample(fact.values, 3 if k == 0 else 2)
        first = say(0, a, rng.choice(fact.said).format(v=values[0]))
        when = [first]
        for j, v in enumerate(values[1:]):
            session = 2 + 2 * j if k == 0 else 3
            when.append(say(session, a, rng.choice(fact.changed).format(v=v, o=values[j])))
        plans.append((fact, values, when))
        other = rng.choice([v for v in fact.values if v not in values])
        say(rng.choice([1, 2]), b, rng.choice(fact.said).format(v=other))
    # a mentions the first value once more before it changes (more stale evidence)
    fact, values, when = plans[0]
    again = say(1, a, rng.choice([s for s in fact.said]).format(v=values[0]))
    when.insert(1, again)
    for s, fact2 in enumerate(stable):
        who = a if s < 3 else b
        v = rng.choice(fact2.values)
        pos = say(rng.choice([0, 1, 2]), who, rng.choice(fact2.said).format(v=v))
        again = say(rng.choice([3, 4]), who, rng.choice(fact2.said).format(v=v)) if s == 0 else None
        qa.append({
            "question": rng.choice(fact2.question).format(p=who, v=v),
            "answer": v,
            "evidence": [dia(pos)],
            "category": 4,
            "kind": "stable",
        })
    for fact, values, when in plans:
        current, stale = when[-1], when[:-1]
        qa.append({
            "question": rng.choice(fact.current_q).format(p=a),
            "answer": values[-1],
            "evidence": [dia(current)],
            "stale_evidence": [dia(p) for p in stale],
            "category": 4,
            "kind": "current",
        })
        qa.append({
            "question": rng.choice(fact.history_q).format(p=a, v=values[-1]),
            "answer": values[-2],
            "evidence": [dia(when[-2])],
            "category": 4,
            "kind": "history",
        })
    # fillers and replies between the facts, alternating speakers
    conv: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    start = datetime(2022, 1, 10, 9, 30) + timedelta(days=37 * n)
    remap: dict[str, str] = {}
    for s, turns in enumerate(sessions):
        out: list[dict[str, str]] = []
        pool = rng.sample(family.filler, 6)
        for i, (speaker, text) in enumerate(turns):
            if out and out[-1]["speaker"] == speaker:
                out.append({"speaker": b if speaker == a else a, "text": pool.pop()})
            remap[f"D{s + 1}:{i + 1}"] = f"D{s + 1}:{len(out) + 1}"
            out.append({"speaker": speaker, "text": text})
        while len(out) < 8 and pool:
            out.append({"speaker": b if out[-1]["speaker"] == a else a, "text": pool.pop()})
        for j, t in enumerate(out):
            t["dia_id"] = f"D{s + 1}:{j + 1}"
        conv[f"session_{s + 1}"] = out
        when_s = start + timedelta(days=60 * s, hours=rng.randint(0, 9))
        conv[f"session_{s + 1}_date_time"] = _date(when_s)
    for q in qa:
        for key in ("evidence", "stale_evidence"):
            if key in q:
                q[key] = [remap[x] for x in q[key]]
    return {"sample_id": f"ku-{n + 1:02d}", "conversation": conv, "qa": qa}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heldout", action="store_true", help="write the held-out set")
    family = HELD_OUT if ap.parse_args().heldout else TUNING
    rng = random.Random(family.seed)
    data = [conversation(n, rng, family) for n in range(len(family.people))]
    family.out.parent.mkdir(parents=True, exist_ok=True)
    family.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps({"file": str(family.out), "conversations": len(data),
                      "questions": sum(len(s["qa"]) for s in data)}))


if __name__ == "__main__":
    main()
