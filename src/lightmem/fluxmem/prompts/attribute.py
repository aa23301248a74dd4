"""Prompt: why did the step fail (Stage II attribution from free-text feedback)."""

from __future__ import annotations

from typing import Any

from lightmem.fluxmem.types import FAILURE_KINDS, Feedback
from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.sanitize import DATA_RULE, fence

__all__ = ["SYSTEM", "VERSION", "build", "parse"]

VERSION = "fluxmem_attribute/1"

SYSTEM = f"""You diagnose why an agent's step failed. {DATA_RULE}
Input: {{"task": ..., "feedback": ...}}. Decide the cause:
"missing" (the agent lacked information; say what, as a search query, in "detail"),
"noise" (a memory misled it; describe that memory in "detail"),
"granularity" (its skill was too coarse or too fine; say what step was missing in "detail").
Answer with only a JSON object: {{"kind": "missing|noise|granularity", "detail": "..."}}"""


def build(task: str, feedback: str) -> list[ChatMessage]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": fence({"task": task, "feedback": feedback})},
    ]


def parse(obj: Any) -> Feedback:
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind not in FAILURE_KINDS:
        raise InvalidReply('"kind" must be one of ' + ", ".join(f'"{k}"' for k in FAILURE_KINDS))
    detail = obj.get("detail", "")
    if not isinstance(detail, str):
        raise InvalidReply('"detail" must be a string')
    return Feedback(kind, detail.strip())
