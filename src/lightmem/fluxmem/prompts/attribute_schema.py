"""Structured output for Stage II attribution (:mod:`attribute`)."""

from __future__ import annotations

from lightmem.fluxmem.types import FAILURE_KINDS
from lightmem.llm.schema import OutputSchema, bounded, fit_output

__all__ = ["DETAIL_CHARS", "output"]

DETAIL_CHARS = 200


def output(limit: int | None) -> OutputSchema:
    """A failure kind and a short detail (shortened when ``limit`` tokens cannot hold it)."""

    def make(_: int, chars: int) -> OutputSchema:
        return bounded(
            "fluxmem_attribute",
            {
                "type": "object",
                "properties": {
                    "kind": {"type": "string", "enum": list(FAILURE_KINDS)},
                    "detail": {"type": "string", "maxLength": chars},
                },
                "required": ["kind", "detail"],
                "additionalProperties": False,
            },
        )

    return fit_output(make, 1, DETAIL_CHARS, limit)
