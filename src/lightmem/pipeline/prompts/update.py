"""Prompt: decide how newer memories change earlier overlapping ones (LightMem update)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.pipeline.prompts.reply import set_aside, stored
from lightmem.sanitize import DATA_RULE, fence
from lightmem.timeparse import format_date
from lightmem.types import MemoryEntry

__all__ = ["REVIEW_SYSTEM", "SYSTEM", "VERSION", "build", "parse"]

VERSION = "update/2"

SYSTEM = f"""You maintain a long-term memory. {DATA_RULE}
Input: a JSON list of items; each has a newer memory and earlier memories similar to it.
For each earlier memory decide:
- "keep" when both can stand as they are (different facts, or a fact that did not change);
- "supersede" when the newer memory changes what the earlier one said (a value that is no
  longer true: a new city, job, partner, habit); the earlier one is kept as history; give
  "by", the id of the newer memory that replaces it;
- "merge" when the earlier one overlaps the newer one: without "text" it is removed as a
  repeat, with "text" it is rewritten to stay true given the newer one.
Answer with only a JSON object:
{{"actions": [{{"id": "<earlier id>", "action": "keep|supersede|merge", "by": "<newer id>",
"text": "..."}}]}}"""

#: The supersession review (:meth:`~lightmem.pipeline.update_llm.LLMUpdater.review`): the
#: nearest earlier memories, however similar, for changes only (merges are decided above).
REVIEW_SYSTEM = f"""You maintain a long-term memory. {DATA_RULE}
Input: a JSON list of items; each has a newer memory and earlier memories near it.
For each earlier memory decide:
- "keep" when both can stand as they are (different facts, a fact that did not change, or
  a repeat);
- "supersede" when the newer memory changes what the earlier one said (a value that is no
  longer true: a new city, job, partner, habit); the earlier one is kept as history; give
  "by", the id of the newer memory that replaces it.
Answer with only a JSON object:
{{"actions": [{{"id": "<earlier id>", "action": "keep|supersede", "by": "<newer id>"}}]}}"""

#: Earlier answer names, still understood.
_ALIASES = {"ignore": "keep", "delete": "merge", "update": "merge"}


def build(
    items: Sequence[tuple[MemoryEntry, Sequence[MemoryEntry]]], *, merge: bool = True
) -> list[ChatMessage]:
    """The request for ``items`` (newer memory, earlier ones): every action, or with
    ``merge=False`` the supersession review's keep / supersede only."""
    payload = [
        {
            "newer": _view(newer),
            "earlier": [_view(e) for e in earlier],
        }
        for newer, earlier in items
    ]
    return [
        {"role": "system", "content": SYSTEM if merge else REVIEW_SYSTEM},
        {"role": "user", "content": fence(payload)},
    ]


def _view(e: MemoryEntry) -> dict[str, str]:
    return {"id": e.id, "time": format_date(e.timestamp), "text": e.text}


def parse(obj: Any, rejected: list[Any] | None = None) -> list[dict[str, str]]:
    """Structurally valid actions (``action`` one of keep / supersede / merge, ``by`` and
    ``text`` strings, "" when absent); whether each id may be touched is checked by the
    caller. An action holding text the store refuses refuses the answer, or with
    ``rejected`` (the last allowed answer) is put there and left out."""
    if not isinstance(obj, dict) or not isinstance(obj.get("actions"), list):
        raise InvalidReply('expected an object with an "actions" list')
    out = []
    for i, a in enumerate(obj["actions"]):
        if not isinstance(a, dict) or not isinstance(a.get("id"), str):
            raise InvalidReply(f'actions[{i}] must be an object with a string "id"')
        raw = a.get("action")
        act = _ALIASES.get(raw, raw) if isinstance(raw, str) else raw
        if act not in ("keep", "supersede", "merge"):
            raise InvalidReply(f'actions[{i}].action must be "keep", "supersede" or "merge"')
        text = a.get("text") if raw != "delete" else ""
        by = a.get("by")
        if raw == "update" and not (isinstance(text, str) and text.strip()):
            raise InvalidReply(f'actions[{i}].text is required for "update"')
        if act == "supersede" and not (isinstance(by, str) and by):
            raise InvalidReply(f'actions[{i}].by is required for "supersede"')
        action = {
            "id": a["id"],
            "action": act,
            "by": by if act == "supersede" and isinstance(by, str) else "",
            "text": text.strip() if act == "merge" and isinstance(text, str) else "",
        }
        with set_aside(a, rejected):
            out.append(stored(action, f"actions[{i}]"))
    return out
