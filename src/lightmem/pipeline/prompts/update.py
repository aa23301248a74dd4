"""Prompt: decide how newer memories change earlier overlapping ones (LightMem update)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.sanitize import DATA_RULE, fence
from lightmem.timeparse import format_date
from lightmem.types import MemoryEntry

VERSION = "update/1"

SYSTEM = f"""You maintain a long-term memory. {DATA_RULE}
Input: a JSON list of items; each has a newer memory and earlier memories similar to it.
For each earlier memory decide:
- "delete" when the newer memory makes it wrong or fully repeats it;
- "update" when it should be rewritten to stay true given the newer memory (give "text");
- "ignore" when both can stand as they are.
Answer with only a JSON object:
{{"actions": [{{"id": "<earlier memory id>", "action": "delete|update|ignore", "text": "..."}}]}}"""


def build(items: Sequence[tuple[MemoryEntry, Sequence[MemoryEntry]]]) -> list[ChatMessage]:
    payload = [
        {
            "newer": _view(newer),
            "earlier": [_view(e) for e in earlier],
        }
        for newer, earlier in items
    ]
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": fence(payload)},
    ]


def _view(e: MemoryEntry) -> dict[str, str]:
    return {"id": e.id, "time": format_date(e.timestamp), "text": e.text}


def parse(obj: Any) -> list[dict[str, str]]:
    """Structurally valid actions; whether each id may be touched is checked by the caller."""
    if not isinstance(obj, dict) or not isinstance(obj.get("actions"), list):
        raise InvalidReply('expected an object with an "actions" list')
    out = []
    for i, a in enumerate(obj["actions"]):
        if not isinstance(a, dict) or not isinstance(a.get("id"), str):
            raise InvalidReply(f'actions[{i}] must be an object with a string "id"')
        act = a.get("action")
        if act not in ("delete", "update", "ignore"):
            raise InvalidReply(f'actions[{i}].action must be "delete", "update" or "ignore"')
        text = a.get("text")
        if act == "update":
            if not isinstance(text, str) or not text.strip():
                raise InvalidReply(f'actions[{i}].text is required for "update"')
            text = text.strip()
        out.append({"id": a["id"], "action": act, "text": text if act == "update" else ""})
    return out
