"""Prompt: how useful is each candidate fact for the task (Stage I's LLM-verify score)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.sanitize import DATA_RULE, fence

__all__ = ["SYSTEM", "VERSION", "build", "parse"]

VERSION = "fluxmem_verify/1"

SYSTEM = f"""You check which stored facts help an agent with its task. {DATA_RULE}
Input: {{"task": ..., "facts": [...]}}. Score each fact from 0 (useless or misleading for
this task) to 1 (needed), in the same order.
Answer with only a JSON object: {{"scores": [0.0, ...]}}"""


def build(task: str, facts: Sequence[str]) -> list[ChatMessage]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": fence({"task": task, "facts": list(facts)})},
    ]


def parse(obj: Any, n: int) -> list[float]:
    scores = obj.get("scores") if isinstance(obj, dict) else None
    if not isinstance(scores, list) or len(scores) != n:
        raise InvalidReply(f'expected "scores", a list of {n} numbers')
    out = []
    for i, v in enumerate(scores):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 1:
            raise InvalidReply(f"scores[{i}] must be a number in [0, 1]")
        out.append(float(v))
    return out
