"""Structured output for StructMem event extraction (:mod:`extract_event`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightmem.llm.schema import OutputSchema, bounded, fit_output
from lightmem.pipeline.prompts.extract_event import RELATION_TYPES
from lightmem.pipeline.prompts.extract_flat_schema import fact_schema

__all__ = ["FACTS_PER_EVENT", "PARTICIPANTS", "TEXT_CHARS", "output"]

#: longest summary, fact, cause or effect asked for
TEXT_CHARS = 160
FACTS_PER_EVENT = 3
PARTICIPANTS = 4


def output(turn_ids: Sequence[str], max_events: int, limit: int | None) -> OutputSchema:
    """At most ``max_events`` events (fewer, or with shorter texts, when ``limit`` tokens
    cannot hold them); event keys are "e1".."eN" so relations can only name real events."""

    def make(n: int, chars: int) -> OutputSchema:
        keys = [f"e{i + 1}" for i in range(n)]
        short = max(8, chars // 4)
        full = chars >= TEXT_CHARS  # below that, the compact form for a small answer limit
        text = {"type": "string", "maxLength": chars if full else short}
        event = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "enum": keys},
                "summary": {"type": "string", "minLength": 1, "maxLength": chars},
                "time": {"type": "string", "maxLength": short},
                "participants": {
                    "type": "array",
                    "maxItems": PARTICIPANTS if full else 2,
                    "items": {"type": "string", "maxLength": short},
                },
                "cause": text,
                "effect": text,
                "facts": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": FACTS_PER_EVENT if full else 1,
                    "items": fact_schema(turn_ids, chars, 4 if full else 1),
                },
            },
            "required": ["id", "summary", "time", "participants", "cause", "effect", "facts"],
            "additionalProperties": False,
        }
        relation = {
            "type": "object",
            "properties": {
                "from": {"type": "string", "enum": keys},
                "to": {"type": "string", "enum": keys},
                "type": {"type": "string", "enum": list(RELATION_TYPES)},
            },
            "required": ["from", "to", "type"],
            "additionalProperties": False,
        }
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {
                "events": {"type": "array", "maxItems": n, "items": event},
                "relations": {"type": "array", "maxItems": max(0, n - 1), "items": relation},
            },
            "required": ["events", "relations"],
            "additionalProperties": False,
        }
        return bounded("lightmem_extract_event", schema)

    return fit_output(make, max(1, max_events), TEXT_CHARS, limit)
