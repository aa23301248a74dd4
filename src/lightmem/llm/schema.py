"""Bounded JSON schemas for structured outputs, and the token arithmetic around them.

A schema whose every array has ``maxItems`` and every string ``maxLength`` has a longest
possible answer; :func:`bounded` computes a ``max_tokens`` from it, so a constrained model
can always close its JSON before the limit. :func:`prompt_tokens_bound` is a deliberately
high estimate of how many tokens a text costs, used to pack prompts into a model's context
(the words x 1.3 estimate of :mod:`lightmem.text` is for reporting, not for fitting).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANSWER_CHARS_PER_TOKEN",
    "CHARS_PER_TOKEN",
    "MESSAGE_OVERHEAD",
    "OutputSchema",
    "bounded",
    "cut_to_tokens",
    "fit_output",
    "max_chars",
    "messages_tokens_bound",
    "prompt_tokens_bound",
]

#: characters per token assumed when bounding a prompt (real tokenizers give 3.5-4.5 for
#: English; ids, digits and JSON punctuation are denser, hence the margin)
CHARS_PER_TOKEN = 2.5
#: characters per token assumed when sizing ``max_tokens`` for an answer (generated prose;
#: an answer denser than this can be cut, and is then counted as unusable)
ANSWER_CHARS_PER_TOKEN = 3.0
#: tokens a chat template adds around each message (role markers, separators)
MESSAGE_OVERHEAD = 8


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """What a call asks the model to answer: a named JSON schema and the largest answer."""

    name: str
    schema: Mapping[str, Any]
    max_tokens: int


def bounded(name: str, schema: Mapping[str, Any], *, slack: int = 16) -> OutputSchema:
    """An :class:`OutputSchema` whose ``max_tokens`` fits the longest answer ``schema``
    allows (raises ``ValueError`` for an unbounded array or string)."""
    chars = max_chars(schema)
    # constrained decoders let the model indent: allow a token of whitespace per separator
    tokens = math.ceil(chars / ANSWER_CHARS_PER_TOKEN) + _separators(schema) + slack
    return OutputSchema(name, schema, tokens)


def _separators(schema: Mapping[str, Any]) -> int:
    kind = schema.get("type")
    if kind == "object" and "enum" not in schema:
        props: Mapping[str, Mapping[str, Any]] = schema.get("properties", {})
        return 1 + sum(1 + _separators(v) for v in props.values())
    if kind == "array":
        return 1 + int(schema.get("maxItems", 0)) * (1 + _separators(schema["items"]))
    return 0


def fit_output(
    make: Callable[[int, int], OutputSchema], items: int, chars: int, limit: int | None
) -> OutputSchema:
    """The largest ``make(items, chars)`` whose ``max_tokens`` is within ``limit``: fewer
    items first, then shorter strings (down to 16 characters), so an answer the model is
    allowed to give always fits the tokens it is allowed to use."""
    out = make(items, chars)
    if limit is None:
        return out
    while out.max_tokens > limit and (items > 1 or chars > 16):
        if items > 1:
            items -= 1
        else:
            chars = max(16, chars * 2 // 3)
        out = make(items, chars)
    return out


def max_chars(schema: Mapping[str, Any]) -> int:
    """Characters of the longest compact JSON value ``schema`` accepts."""
    if "enum" in schema:
        return max(len(json.dumps(v, ensure_ascii=False)) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "object":
        props: Mapping[str, Mapping[str, Any]] = schema.get("properties", {})
        inner = sum(len(json.dumps(k)) + 2 + max_chars(v) for k, v in props.items())
        return 2 + inner + max(0, len(props) - 1) * 2
    if kind == "array":
        if "maxItems" not in schema:
            raise ValueError(f"{schema!r}: an array needs maxItems to be bounded")
        n = int(schema["maxItems"])
        return 2 + n * (max_chars(schema["items"]) + 2)
    if kind == "string":
        if "maxLength" not in schema:
            raise ValueError(f"{schema!r}: a string needs maxLength to be bounded")
        return 2 + int(schema["maxLength"])
    if kind in ("number", "integer"):
        return 24
    if kind == "boolean":
        return 5
    raise ValueError(f"{schema!r}: unsupported schema type for a bounded answer")


def prompt_tokens_bound(text: str) -> int:
    """A high estimate of the tokens ``text`` costs in a prompt."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def messages_tokens_bound(messages: Sequence[Mapping[str, str]]) -> int:
    """A high estimate of the prompt tokens of a chat request."""
    return sum(prompt_tokens_bound(m["content"]) + MESSAGE_OVERHEAD for m in messages) + 8


def cut_to_tokens(text: str, tokens: int) -> str:
    """``text`` cut (on a word boundary when one is near) to at most ``tokens`` by
    :func:`prompt_tokens_bound`, marked with an ellipsis when cut."""
    limit = max(0, int(tokens * CHARS_PER_TOKEN))
    if len(text) <= limit:
        return text
    if limit <= 1:
        return "…"[:limit]
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head + "…"
