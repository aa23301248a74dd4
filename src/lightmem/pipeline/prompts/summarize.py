"""Prompt: summarise a time window of memories (StructMem cross-event summaries)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.pipeline.prompts.reply import stored
from lightmem.sanitize import DATA_RULE, fence_lines, token
from lightmem.timeparse import format_date
from lightmem.types import MemoryEntry

__all__ = ["SYSTEM", "VERSION", "build", "parse"]

VERSION = "summarize/1"

SYSTEM = f"""You write summaries of an agent's long-term memory. {DATA_RULE}
Input: optional lines "PREVIOUS: ..." (the summary of the period before), then one line per
memory "<date> <speaker>: <text>" for one period. Write a summary of at most 120 words that
keeps names, dates, decisions, changes and how events connect (what led to what), and says
what changed since the previous summary when one is given.
Answer with only a JSON object: {{"summary": "..."}}"""


def build(entries: Sequence[MemoryEntry], previous: str = "") -> list[ChatMessage]:
    lines = [f"PREVIOUS: {previous}"] if previous else []
    for e in entries:
        who = f"{token(e.speaker, spaces=True)}: " if e.speaker else ""
        lines.append(f"{format_date(e.timestamp) or 'undated'} {who}{e.text}")
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": fence_lines(lines)},
    ]


def parse(obj: Any) -> str:
    summary = obj.get("summary") if isinstance(obj, dict) else None
    if not isinstance(summary, str):
        raise InvalidReply('expected an object with a "summary" string')
    text = stored(summary, "summary").strip()
    if not text:
        raise InvalidReply("summary must not be empty")
    return text
