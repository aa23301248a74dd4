"""Structured output for window summaries (:mod:`summarize`)."""

from __future__ import annotations

from lightmem.llm.schema import OutputSchema, bounded, fit_output

__all__ = ["SUMMARY_CHARS", "output"]

#: the prompt asks for at most 120 words
SUMMARY_CHARS = 900


def output(limit: int | None) -> OutputSchema:
    """One summary string, shortened when ``limit`` tokens cannot hold 120 words."""

    def make(_: int, chars: int) -> OutputSchema:
        return bounded(
            "lightmem_summary",
            {
                "type": "object",
                "properties": {"summary": {"type": "string", "minLength": 1, "maxLength": chars}},
                "required": ["summary"],
                "additionalProperties": False,
            },
        )

    return fit_output(make, 1, SUMMARY_CHARS, limit)
