"""Structured output for Stage I verification (:mod:`verify`): one score per fact."""

from __future__ import annotations

from lightmem.llm.schema import OutputSchema, bounded

__all__ = ["output"]


def output(n: int) -> OutputSchema:
    """Exactly ``n`` scores in [0, 1]."""
    return bounded(
        "fluxmem_verify",
        {
            "type": "object",
            "properties": {
                "scores": {
                    "type": "array",
                    "minItems": n,
                    "maxItems": n,
                    "items": {"type": "number", "minimum": 0, "maximum": 1},
                }
            },
            "required": ["scores"],
            "additionalProperties": False,
        },
    )
