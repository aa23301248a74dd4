"""Prompt: extract events with their bound facts and cross-event relations (StructMem)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lightmem.llm.base import InvalidReply
from lightmem.pipeline.prompts.extract_flat import SYSTEM_INPUT, TIME_RULE, Fact
from lightmem.pipeline.prompts.reply import set_aside, stored
from lightmem.sanitize import DATA_RULE

__all__ = ["RELATION_TYPES", "SYSTEM", "VERSION", "Event", "EventExtraction", "parse"]

VERSION = "extract_event/2"

SYSTEM = f"""You turn conversation turns into structured long-term memory.
{DATA_RULE}
{SYSTEM_INPUT}
Group what happened into events. For each event give a one-sentence "summary" naming the
people, its "time" (resolved like the facts' times below, or ""), "participants", its
"cause" and "effect" when stated (else ""), and the self-contained "facts" it binds, each
citing the ids of its turns. Then list "relations" between events ("causes", "follows",
"contradicts", "updates", "related"). Skip greetings and small talk.
{TIME_RULE}
Answer with only a JSON object:
{{"events": [{{"id": "e1", "summary": "...", "time": "...", "participants": ["..."],
"cause": "...", "effect": "...",
"facts": [{{"fact": "...", "source_ids": ["..."], "time": "..."}}]}}],
"relations": [{{"from": "e1", "to": "e2", "type": "causes"}}]}}"""

RELATION_TYPES = ("causes", "follows", "contradicts", "updates", "related")


@dataclass(frozen=True, slots=True)
class Event:
    key: str
    summary: str
    time: str
    participants: tuple[str, ...]
    cause: str
    effect: str
    facts: tuple[Fact, ...]


@dataclass(frozen=True, slots=True)
class EventExtraction:
    events: list[Event]
    relations: list[tuple[str, str, str]]
    rejected: list[dict[str, Any]]


def parse(obj: Any, allowed_ids: set[str], *, strict: bool = False) -> EventExtraction:
    """Facts citing turns outside the batch are rejected; an event left with no fact is
    dropped with them, and so are relations naming unknown events. Text the store refuses
    is refused with ``strict``; on the last answer it rejects only its fact, or its event
    when it is the event's own field. Event keys are unique: an event without an ``id``
    gets a key no other event of the reply names, and an ``id`` given twice is refused
    (``strict``) or, on the last answer, replaced by a fresh key (relations naming it then
    mean its first event)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("events"), list):
        raise InvalidReply('expected an object with an "events" list')
    events: list[Event] = []
    rejected: list[dict[str, Any]] = []
    aside = None if strict else rejected
    keys = _keys(obj["events"], strict)
    for i, ev in enumerate(obj["events"]):
        where = f"events[{i}]"
        with set_aside(ev, aside):  # the event's own fields first: its facts go with it
            if ev.get("id"):
                stored(str(ev["id"]), f"{where}.id")
            summary = _text(ev, "summary", where, required=True)
            time, cause, effect = (_text(ev, k, where) for k in ("time", "cause", "effect"))
            participants = ev.get("participants") or []
            if not isinstance(participants, list) or not all(
                isinstance(p, str) for p in participants
            ):
                raise InvalidReply(f"{where}.participants must be a list of names")
            stored(participants, f"{where}.participants")
            facts_raw = ev.get("facts")
            if not isinstance(facts_raw, list):
                raise InvalidReply(f"{where}.facts must be a list")
            facts = [
                fact
                for j, f in enumerate(facts_raw)
                if (fact := _fact(f, f"{where}.facts[{j}]", allowed_ids, rejected, aside))
            ]
            if facts:
                events.append(
                    Event(keys[i], summary, time, tuple(participants), cause, effect, tuple(facts))
                )
    kept = {e.key for e in events}
    relations = []
    for k, rel in enumerate(obj.get("relations") or []):
        if not isinstance(rel, dict):
            raise InvalidReply(f"relations[{k}] must be an object")
        src, dst, typ = rel.get("from"), rel.get("to"), rel.get("type")
        if typ not in RELATION_TYPES:
            raise InvalidReply(f"relations[{k}].type must be one of {', '.join(RELATION_TYPES)}")
        if isinstance(src, str) and isinstance(dst, str) and {src, dst} <= kept and src != dst:
            relations.append((str(src), str(dst), str(typ)))
    if strict and rejected:
        raise InvalidReply("facts cite turn ids that are not in the input")
    return EventExtraction(events, relations, rejected)


def _fact(
    f: Any,
    where: str,
    allowed_ids: set[str],
    rejected: list[dict[str, Any]],
    aside: list[dict[str, Any]] | None,
) -> Fact | None:
    """One fact of an event, or None when it is rejected (into ``rejected``)."""
    if not isinstance(f, dict):
        raise InvalidReply(f"{where} must be an object")
    with set_aside(f, aside):
        text = _text(f, "fact", where, required=True)
        ids = f.get("source_ids")
        if not isinstance(ids, list) or not ids or not all(isinstance(x, str) for x in ids):
            raise InvalidReply(f"{where}.source_ids must list turn ids")
        stored(ids, f"{where}.source_ids")
        if not set(ids) <= allowed_ids:
            rejected.append(f)
            return None
        return Fact(text, tuple(dict.fromkeys(ids)), _text(f, "time", where))
    return None  # set aside


def _keys(events: list[Any], strict: bool) -> list[str]:
    """One distinct key per event of the reply: its ``id``, else "e<n>" for the first n
    (from its position on) that no event names."""
    given: list[str | None] = []
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise InvalidReply(f"events[{i}] must be an object")
        raw = ev.get("id")
        given.append(str(raw) if raw else None)
    taken = {k for k in given if k is not None}
    keys: list[str] = []
    seen: set[str] = set()
    for i, key in enumerate(given):
        if key is not None and key in seen and strict:
            raise InvalidReply(f"events[{i}].id: duplicate event id {key!r}")
        if key is None or key in seen:
            n = i + 1
            while f"e{n}" in taken:
                n += 1
            key = f"e{n}"
            taken.add(key)
        seen.add(key)
        keys.append(key)
    return keys


def _text(obj: dict[str, Any], key: str, where: str, *, required: bool = False) -> str:
    value = obj.get(key)
    if value is None or value == "":
        if required:
            raise InvalidReply(f"{where}.{key} must be a non-empty string")
        return ""
    if not isinstance(value, str):
        raise InvalidReply(f"{where}.{key} must be a string")
    return stored(value, f"{where}.{key}").strip()
