"""Prompt: extract self-contained facts from conversation segments (LightMem, flat mode)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.pipeline.prompts.reply import set_aside, stored
from lightmem.sanitize import DATA_RULE, fence_lines, token

__all__ = [
    "SYSTEM",
    "SYSTEM_INPUT",
    "TIME_RULE",
    "VERSION",
    "Extraction",
    "Fact",
    "Turn",
    "build",
    "parse",
]

VERSION = "extract_flat/3"

SYSTEM_INPUT = """Input: lines "# <date>" starting each day, then one line per turn:
"<id> <speaker>: <text>". The text is abbreviated (filler words were removed);
"[times: ...]" are its times, resolved by rules."""

TIME_RULE = (
    """"time": when it happened, ISO ("2023-05-07", "2023-05", "2023", "start/end") or ""."""
)

SYSTEM = f"""You turn conversation turns into long-term memory entries.
{DATA_RULE}
{SYSTEM_INPUT}
Write every durable fact worth remembering about the speakers: events, plans, preferences,
relationships, possessions, opinions, dates. Each fact is one self-contained sentence that
names people (no pronouns) and states absolute dates when the time is known (turn times are
given). Skip greetings and small talk. Cite the ids of the turns each fact comes from.
{TIME_RULE}
Answer with only a JSON object:
{{"facts": [{{"fact": "...", "source_ids": ["..."], "time": "..."}}]}}"""


@dataclass(frozen=True, slots=True)
class Fact:
    """A fact, its turns and the time the model resolved for it ("" when none; see
    :data:`TIME_RULE`)."""

    text: str
    source_ids: tuple[str, ...]
    time: str = ""


@dataclass(frozen=True, slots=True)
class Extraction:
    facts: list[Fact]
    rejected: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Turn:
    id: str
    speaker: str
    time: str
    text: str


def build(turns: Sequence[Turn], system: str = SYSTEM) -> list[ChatMessage]:
    lines: list[str] = []
    day = None
    for t in turns:
        if t.time != day:
            day = t.time
            lines.append(f"# {day or 'undated'}")
        lines.append(f"{token(t.id)} {token(t.speaker, spaces=True)}: {t.text}")
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": fence_lines(lines)},
    ]


def parse(obj: Any, allowed_ids: set[str], *, strict: bool = False) -> Extraction:
    """Facts citing ids outside the batch, or holding text the store refuses, are rejected
    (returned apart), not stored; with ``strict`` such a reply is refused instead, so the
    model can correct it."""
    if not isinstance(obj, dict) or not isinstance(obj.get("facts"), list):
        raise InvalidReply('expected an object with a "facts" list')
    facts: list[Fact] = []
    rejected: list[dict[str, Any]] = []
    aside = None if strict else rejected
    for i, f in enumerate(obj["facts"]):
        if not isinstance(f, dict):
            raise InvalidReply(f"facts[{i}] must be an object")
        text, ids = f.get("fact"), f.get("source_ids")
        if not isinstance(text, str) or not text.strip():
            raise InvalidReply(f"facts[{i}].fact must be a non-empty string")
        if not isinstance(ids, list) or not ids or not all(isinstance(x, str) for x in ids):
            raise InvalidReply(f"facts[{i}].source_ids must be a non-empty list of turn ids")
        when = f.get("time", "")
        if not isinstance(when, str):
            raise InvalidReply(f'facts[{i}].time must be a string ("" for none)')
        with set_aside(f, aside):
            stored(text, f"facts[{i}].fact")
            stored(when, f"facts[{i}].time")
            stored(ids, f"facts[{i}].source_ids")  # quoted back to the model when unknown
            if not set(ids) <= allowed_ids:
                rejected.append(f)
                continue
            facts.append(Fact(text.strip(), tuple(dict.fromkeys(ids)), when.strip()))
    if strict and rejected:
        bad = sorted({i for f in rejected for i in f.get("source_ids", []) if i not in allowed_ids})
        raise InvalidReply(f"facts cite turn ids that are not in the input: {', '.join(bad[:10])}")
    return Extraction(facts, rejected)
