"""Structured output for skill steps (:mod:`steps`: induce, refine, reshape)."""

from __future__ import annotations

from lightmem.llm.schema import OutputSchema, bounded, fit_output

__all__ = ["MAX_STEPS", "STEP_CHARS", "output"]

MAX_STEPS = 12
STEP_CHARS = 120


def output(limit: int | None) -> OutputSchema:
    """1 to 12 short steps (fewer, or shorter, when ``limit`` tokens cannot hold them)."""

    def make(n: int, chars: int) -> OutputSchema:
        return bounded(
            "fluxmem_steps",
            {
                "type": "object",
                "properties": {
                    "steps": {
                        "type": "array",
                        "minItems": 1,
                        "maxItems": n,
                        "items": {"type": "string", "minLength": 1, "maxLength": chars},
                    }
                },
                "required": ["steps"],
                "additionalProperties": False,
            },
        )

    return fit_output(make, MAX_STEPS, STEP_CHARS, limit)
