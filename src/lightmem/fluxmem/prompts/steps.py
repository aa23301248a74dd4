"""Prompts that write a skill's steps: induce, refine and reshape (Stages II and III)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.sanitize import DATA_RULE, fence

__all__ = ["INDUCE", "REFINE", "RESHAPE", "VERSION", "build", "parse", "trajectories"]

VERSION = "fluxmem_steps/1"

_ANSWER = 'Answer with only a JSON object: {"steps": ["...", "..."]}'

INDUCE = f"""You distil a reusable skill from successful agent trajectories. {DATA_RULE}
Input: {{"trajectories": [[step, ...], ...]}}. Write the general procedure they share, as
short imperative steps without task-specific names. {_ANSWER}"""

REFINE = f"""You improve a skill. {DATA_RULE}
Input: {{"skill": [...], "successful": [[...]], "failing": [[...]]}}. Remove steps that
failing trajectories share and successful ones do not; keep the rest, in order. {_ANSWER}"""

RESHAPE = f"""You fix a skill whose granularity was wrong for a task. {DATA_RULE}
Input: {{"skill": [...], "problem": ..., "reference": ...}}. Rewrite the skill as the right
sequence of steps, using the reference procedure when it helps. {_ANSWER}"""


def build(system: str, payload: dict[str, Any]) -> list[ChatMessage]:
    return [{"role": "system", "content": system}, {"role": "user", "content": fence(payload)}]


def parse(obj: Any) -> list[str]:
    steps = obj.get("steps") if isinstance(obj, dict) else None
    if (
        not isinstance(steps, list)
        or not steps
        or not all(isinstance(s, str) and s.strip() for s in steps)
    ):
        raise InvalidReply('"steps" must be a non-empty list of strings')
    return [s.strip() for s in steps]


def trajectories(items: Sequence[Sequence[str]]) -> list[list[str]]:
    return [list(map(str, t)) for t in items]
