"""Structured output for the update decision (:mod:`update`): one action per earlier memory."""

from __future__ import annotations

from collections.abc import Sequence

from lightmem.llm.schema import OutputSchema, bounded, fit_output

__all__ = ["TEXT_CHARS", "output"]

#: longest rewritten memory asked for
TEXT_CHARS = 300


def output(
    earlier_ids: Sequence[str],
    limit: int | None,
    newer_ids: Sequence[str] = (),
    *,
    merge: bool = True,
) -> OutputSchema:
    """Actions naming only the earlier memories of the request, each superseded only by one
    of its newer memories (rewritten text shortened when ``limit`` tokens cannot hold one
    per memory); with ``merge=False`` (the supersession review) keep or supersede only,
    with no text."""
    ids = list(dict.fromkeys(earlier_ids)) or [""]
    by = ["", *dict.fromkeys(newer_ids)]

    def make(n: int, chars: int) -> OutputSchema:
        props: dict[str, object] = {
            "id": {"type": "string", "enum": ids},
            "action": {
                "type": "string",
                "enum": ["keep", "supersede", "merge"] if merge else ["keep", "supersede"],
            },
            "by": {"type": "string", "enum": by},
        }
        if merge:
            props["text"] = {"type": "string", "maxLength": chars}
        action = {
            "type": "object",
            "properties": props,
            "required": list(props),
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
