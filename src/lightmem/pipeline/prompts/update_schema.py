"""Structured output for the update decision (:mod:`update`): one action per earlier memory."""

from __future__ import annotations

from collections.abc import Sequence

from lightmem.llm.schema import OutputSchema, bounded, fit_output

__all__ = ["TEXT_CHARS", "output"]

#: longest rewritten memory asked for
TEXT_CHARS = 300


def output(
    earlier_ids: Sequence[str], limit: int | None, newer_ids: Sequence[str] = ()
) -> OutputSchema:
    """Actions naming only the earlier memories of the request, each superseded only by one
    of its newer memories (rewritten text shortened when ``limit`` tokens cannot hold one
    per memory)."""
    ids = list(dict.fromkeys(earlier_ids)) or [""]
    by = ["", *dict.fromkeys(newer_ids)]

    def make(n: int, chars: int) -> OutputSchema:
        action = {
            "type": "object",
            "properties": {
                "id": {"type": "string", "enum": ids},
                "action": {"type": "string", "enum": ["keep", "supersede", "merge"]},
                "by": {"type": "string", "enum": by},
                "text": {"type": "string", "maxLength": chars},
            },
            "required": ["id", "action", "by", "text"],
            "additionalProperties": False,
        }
        return bounded(
            "lightmem_update",
            {
                "type": "object",
                "properties": {"actions": {"type": "array", "maxItems": n, "items": action}},
                "required": ["actions"],
                "additionalProperties": False,
            },
        )

    return fit_output(make, len(ids), TEXT_CHARS, limit)
