"""Structured output for flat extraction (:mod:`extract_flat`): facts citing turn ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightmem.llm.schema import OutputSchema, bounded, fit_output

__all__ = ["FACT_CHARS", "MAX_SOURCES", "TIME_CHARS", "fact_schema", "output"]

#: longest fact sentence asked for
FACT_CHARS = 240
#: turns one fact may cite
MAX_SOURCES = 4
#: "YYYY-MM-DD/YYYY-MM-DD", the longest resolved time asked for
TIME_CHARS = 21


def fact_schema(turn_ids: Sequence[str], chars: int, sources: int = MAX_SOURCES) -> dict[str, Any]:
    """One fact: a sentence, the ids (only those of the batch) of up to ``sources`` of its
    turns, and its resolved time (ISO, or "")."""
    return {
        "type": "object",
        "properties": {
            "fact": {"type": "string", "minLength": 1, "maxLength": chars},
            "source_ids": {
                "type": "array",
                "minItems": 1,
                "maxItems": min(sources, max(1, len(turn_ids))),
                "items": {"type": "string", "enum": list(turn_ids)},
            },
            "time": {"type": "string", "maxLength": TIME_CHARS},
        },
        "required": ["fact", "source_ids", "time"],
        "additionalProperties": False,
    }


def output(turn_ids: Sequence[str], max_facts: int, limit: int | None) -> OutputSchema:
    """At most ``max_facts`` facts (fewer, or shorter, when ``limit`` tokens cannot hold
    them)."""

    def make(n: int, chars: int) -> OutputSchema:
        return bounded(
            "lightmem_extract_flat",
            {
                "type": "object",
                "properties": {
                    "facts": {
                        "type": "array",
                        "maxItems": n,
                        "items": fact_schema(turn_ids, chars),
                    }
                },
                "required": ["facts"],
                "additionalProperties": False,
            },
        )

    return fit_output(make, max(1, max_facts), FACT_CHARS, limit)
