"""A seeded family of table tool-use tasks and a simulated analyst, for FluxMem's demo and
benchmark (the paper's worked case: "which country has the most medals per athlete").

The analyst is a fixed, deterministic policy that only sees the FluxMem context: it follows
the top skill if one is given, otherwise the documents it was given, otherwise it guesses.
The environment grades the answer and, on failure, gives structured feedback the way a tool
environment would (a misleading document, missing know-how, a skill of the wrong grain).
Nothing in it reads the graph: memory helps only through the context.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Literal

from lightmem.fluxmem.reasoner import step_key, terms
from lightmem.fluxmem.types import Feedback, StepResult

__all__ = [
    "ANALYSIS_DOC",
    "DISTRACTORS",
    "SEEN",
    "SPREADSHEET_DOC",
    "SimulatedAnalyst",
    "TableTask",
    "TaskKind",
    "make_task",
]

SPREADSHEET_DOC = (
    "Spreadsheet tool for tables of countries, teams, schools or cities with their medals, "
    "goals, awards or patents and their athletes, players, students or engineers: it sums "
    "the column for each row and sorts the rows by that total to find which one has the most "
    "or the fewest."
)
ANALYSIS_DOC = (
    "Group the rows by key, derive the ratio of each measure to its denominator, normalise "
    "the ratios to a common scale, then compare them."
)
DISTRACTORS = (
    "The medal table on the website lists countries by gold medals first, then silver.",
    "Athlete profiles show each athlete's country, sport, height and date of birth.",
    "Team rosters list every player with their position and shirt number.",
    "The chart tool draws bar charts of medals, goals or sales from two columns.",
    "School reports list students, teachers and awards for each term.",
    "The office printer on floor three needs a badge to release print jobs.",
    "Quarterly reports are archived in the finance share after the board meeting.",
    "Use the ticketing system to request a new laptop or a monitor.",
    "Passwords must be rotated every ninety days and may not repeat.",
    "Travel expenses above five hundred euros need a manager's approval.",
    "The weather API returns temperatures in Celsius with hourly resolution.",
    "Backups of the shared drive run nightly and are kept for thirty days.",
)
_FAMILIES = (
    ("country", "countries", ("Norway", "Kenya", "Japan", "Brazil", "Chile", "Ghana", "Peru")),
    ("team", "teams", ("Lions", "Hawks", "Wolves", "Sharks", "Bears", "Eagles", "Foxes")),
    ("school", "schools", ("Oakridge", "Riverside", "Hillcrest", "Lakeside", "Westfield")),
    ("city", "cities", ("Lyon", "Porto", "Graz", "Turin", "Ghent", "Malmo", "Split")),
    ("region", "regions", ("Alpine", "Coastal", "Northern", "Central", "Delta", "Upland")),
    ("club", "clubs", ("Rovers", "United", "Athletic", "Wanderers", "Rangers", "Albion")),
)
_MEASURES = (
    ("medals", "athlete", "athletes"),
    ("goals", "player", "players"),
    ("awards", "student", "students"),
    ("patents", "engineer", "engineers"),
    ("sales", "store", "stores"),
    ("citations", "researcher", "researchers"),
)
#: Training draws from the first four families and measures; held-out tasks from all six,
#: so some combine an entity and a measure never seen in training.
SEEN = 4

TaskKind = Literal["rate", "total"]


@dataclass(frozen=True)
class TableTask:
    kind: TaskKind
    direction: Literal["most", "fewest"]
    entity: str
    entities: str
    measure: str
    unit: str
    units: str
    rows: tuple[tuple[str, int, int], ...]  # (name, measure, denominator)

    @property
    def question(self) -> str:
        if self.kind == "rate":
            return f"Which {self.entity} has the {self.direction} {self.measure} per {self.unit}?"
        return f"Which {self.entity} has the {self.direction} {self.measure} in total?"

    def answer_by(self, strategy: str, rng: random.Random) -> str:
        if strategy == "rate":
            values = {n: m / d for n, m, d in self.rows}
        elif strategy == "total":
            values = {n: float(m) for n, m, _ in self.rows}
        else:
            return rng.choice([n for n, _, _ in self.rows])
        pick = max if self.direction == "most" else min
        return pick(values, key=values.__getitem__)

    @property
    def answer(self) -> str:
        return self.answer_by(self.kind, random.Random(0))

    def csv(self) -> str:
        lines = [f"{self.entity},{self.units},{self.measure}"]
        lines += [f"{n},{d},{m}" for n, m, d in self.rows]
        return "\n".join(lines)


def make_task(
    rng: random.Random, kind: TaskKind | None = None, *, held_out: bool = False
) -> TableTask:
    """A task whose total ranking and rate ranking disagree, so the method matters.
    ``held_out`` draws from every family and measure, not only the ones seen in training."""
    chosen: TaskKind = kind if kind is not None else rng.choice(("rate", "total"))
    n = len(_FAMILIES) if held_out else SEEN
    entity, entities, names = rng.choice(_FAMILIES[:n])
    measure, unit, units = rng.choice(_MEASURES[: len(_MEASURES) if held_out else SEEN])
    direction: Literal["most", "fewest"] = rng.choice(("most", "fewest"))
    while True:
        picked = rng.sample(names, 5)
        rows = tuple((n, rng.randint(5, 120), rng.randint(10, 400)) for n in picked)
        t = TableTask(chosen, direction, entity, entities, measure, unit, units, rows)
        if t.answer_by("rate", rng) != t.answer_by("total", rng):
            return t


_FACT = re.compile(r"<fact [^>]*>(.*?)</fact>", re.S)
_SKILL = re.compile(r"<skill [^>]*>(.*?)</skill>", re.S)
_STEP = re.compile(r"<step>(.*?)</step>", re.S)


class SimulatedAnalyst:
    """The agent step: picks a method from the context, answers, and gets graded.

    ``fair=True`` (the benchmark): the analyst reads the question and applies the method
    of the context item that best matches it (a skill first; else the fact sharing most
    words with the question; it knows no method of its own), and a wrong answer gets only
    the plain verdict "wrong answer". ``fair=False`` (the demo): the original analyst,
    which reads only the context, with structured feedback naming the cause."""

    def __init__(self, seed: int = 0, *, fair: bool = False) -> None:
        self._rng = random.Random(seed)
        self.fair = fair

    def __call__(self, task: TableTask, context: str) -> StepResult:
        if self.fair:
            return self._fair(task, context)
        facts = [f.lower() for f in _FACT.findall(context)]
        skills = _SKILL.findall(context)
        has_sheet = any("spreadsheet tool" in f for f in facts)
        has_analysis = any("derive the ratio" in f for f in facts)
        coarse = False
        if skills:
            keys = {step_key(s) for s in _STEP.findall(skills[0])}
            if {"derive", "normalise"} <= keys:
                strategy = "rate"
            elif keys & {"sum", "sort"}:
                strategy = "total"
            else:
                strategy, coarse = "total", True
        elif has_analysis and not has_sheet:
            strategy = "rate"
        elif has_sheet and not has_analysis:
            strategy = "total"
        elif has_sheet and has_analysis:
            first_sheet = min(i for i, f in enumerate(facts) if "spreadsheet tool" in f)
            first_rate = min(i for i, f in enumerate(facts) if "derive the ratio" in f)
            strategy = "total" if first_sheet < first_rate else "rate"
        else:
            strategy = "guess"
        answer = task.answer_by(strategy, self._rng)
        actions = _actions(task, strategy)
        if answer == task.answer:
            return StepResult(answer, None, True, actions)
        return StepResult(
            answer, _feedback(task, strategy, has_sheet, has_analysis, coarse), False, actions
        )

    def _fair(self, task: TableTask, context: str) -> StepResult:
        skills = _SKILL.findall(context)
        strategy = "guess"
        if skills:
            keys = {step_key(s) for s in _STEP.findall(skills[0])}
            if {"derive", "normalise"} <= keys:
                strategy = "rate"
            elif keys & {"sum", "sort"}:
                strategy = "total"
        else:
            want = terms(task.question)
            methods = [
                (len(want & terms(f)), -i, "total" if "spreadsheet tool" in f.lower() else "rate")
                for i, f in enumerate(_FACT.findall(context))
                if "spreadsheet tool" in f.lower() or "derive the ratio" in f.lower()
            ]
            if methods:
                strategy = max(methods)[2]
        answer = task.answer_by(strategy, self._rng)
        ok = answer == task.answer
        return StepResult(answer, None if ok else "wrong answer", ok, _actions(task, strategy))


def _actions(t: TableTask, strategy: str) -> tuple[str, ...]:
    if strategy == "rate":
        return (
            f"group rows by {t.entity}",
            f"derive {t.measure} per {t.unit}",
            "normalise the ratios",
            f"compare the {t.entities}",
        )
    if strategy == "total":
        return (
            f"sum {t.measure} for each {t.entity}",
            "sort rows by total",
            f"compare the {t.entities}",
        )
    return (f"guess a {t.entity}",)


def _feedback(
    t: TableTask, strategy: str, has_sheet: bool, has_analysis: bool, coarse: bool
) -> Feedback:
    if t.kind == "rate":
        if has_sheet and strategy != "rate":
            return Feedback("noise", f"the spreadsheet tool totals ignore the number of {t.units}")
        if not has_analysis:
            return Feedback("missing", f"how to compare {t.measure} per {t.unit} as a rate")
        return Feedback(
            "granularity", f"the skill is too coarse: it never derives the ratio per {t.unit}"
        )
    if has_analysis and strategy == "rate":
        return Feedback("noise", f"a ratio per {t.unit} is not asked: rank by the total")
    if not has_sheet:
        return Feedback("missing", f"how to sum {t.measure} in total and sort by the total")
    return Feedback("granularity", "the skill is too coarse: it never sums and sorts by total")
