"""Answer and judge prompts for LoCoMo QA (the published LLM-judge protocol, categories 1-4)."""

from __future__ import annotations

from typing import Any

from lightmem.llm.base import ChatMessage, InvalidReply
from lightmem.sanitize import DATA_RULE

__all__ = [
    "ANSWER_SYSTEM",
    "ANSWER_VERSION",
    "JUDGE_SYSTEM",
    "JUDGE_VERSION",
    "answer_messages",
    "judge_messages",
    "parse_answer",
    "parse_label",
]

ANSWER_VERSION = "locomo_answer/2"
JUDGE_VERSION = "locomo_judge/1"

ANSWER_SYSTEM = f"""You answer questions about a long conversation using only the memories
given. {DATA_RULE} Memories are grouped under their dates; resolve relative dates ("last
week") against them. Answer in a few words. If the memories do not say, answer "unknown".
Answer with only a JSON object: {{"answer": "..."}}"""

JUDGE_SYSTEM = f"""You grade answers to questions about a conversation. {DATA_RULE}
The generated answer is CORRECT if it refers to the same thing as the gold answer, even if
worded differently, shorter or longer; dates are correct if they denote the same date or
period. Otherwise it is WRONG.
Answer with only a JSON object: {{"label": "CORRECT"}} or {{"label": "WRONG"}}"""


def answer_messages(question: str, context: str) -> list[ChatMessage]:
    # The memories come last: no line of theirs (a speaker named "QUESTION") can pass for
    # a part of the prompt that follows them.
    body = f"<data>\nQUESTION: {_flat(question)}\nMEMORIES:\n{context}\n</data>"
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": body}]


def judge_messages(question: str, gold: str, generated: str) -> list[ChatMessage]:
    body = (
        f"<data>\nQUESTION: {_flat(question)}\nGOLD: {_flat(gold)}\n"
        f"GENERATED: {_flat(generated)}\n</data>"
    )
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": body}]


def parse_answer(obj: Any) -> str:
    ans = obj.get("answer") if isinstance(obj, dict) else None
    if not isinstance(ans, str | int | float) or isinstance(ans, bool):
        raise InvalidReply('expected an object with an "answer" string')
    return str(ans).strip()


def parse_label(obj: Any) -> bool:
    label = obj.get("label") if isinstance(obj, dict) else None
    if label not in ("CORRECT", "WRONG"):
        raise InvalidReply('expected {"label": "CORRECT"} or {"label": "WRONG"}')
    return bool(label == "CORRECT")


def _flat(text: str) -> str:
    return " ".join(str(text).split()).replace("<", "&lt;").replace(">", "&gt;")
