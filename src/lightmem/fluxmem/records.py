"""What a task run records: attempts, repairs, crashed steps, and knowledge documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightmem.errors import InvalidInputError
from lightmem.fluxmem.types import Repair, StepResult, Subgraph
from lightmem.sanitize import check_text


@dataclass(frozen=True, slots=True)
class Crash:
    """A step that raised or returned something other than a StepResult.

    ``cause``: the exception ``execute_fn`` raised, kept in memory only (what is stored is
    ``error``), so the driver can raise its own error *from* it."""

    error: str
    cause: BaseException | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, error: str, cause: BaseException | None = None) -> Crash:
        """A crash whose message every backend can store (an exception's text may hold a
        lone surrogate or a NUL: they are written as escapes)."""
        text = error.encode("utf-8", "backslashreplace").decode("utf-8")
        return cls(text.replace("\x00", "\\x00")[:2000], cause)


def attempt_record(attempt: int, sub: Subgraph, reply: StepResult | Crash) -> dict[str, Any]:
    if isinstance(reply, Crash):
        return {"attempt": attempt, "context": sorted(sub.node_ids()), "error": reply.error}
    fb = reply.feedback
    return {
        "attempt": attempt,
        "context": sorted(sub.node_ids()),
        "success": bool(reply.success),
        "result": repr(reply.result)[:500],
        "feedback": fb if isinstance(fb, str | None) else {"kind": fb.kind, "detail": fb.detail},
        "actions": list(reply.actions),
    }


def repair_record(r: Repair) -> dict[str, str]:
    return {"op": r.op, "node_id": r.node_id, "detail": r.detail}


def documents(
    raw: str | Sequence[str] | Sequence[Mapping[str, str]], source: str
) -> list[tuple[str, str]]:
    if not isinstance(source, str):
        raise InvalidInputError("source: expected a string")
    items: Sequence[Any] = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, Sequence):
        raise InvalidInputError("text_or_docs: expected text, a list of texts or of dicts")
    out = []
    for i, d in enumerate(items):
        if isinstance(d, str):
            out.append((d, source))
        elif isinstance(d, Mapping) and isinstance(d.get("text"), str):
            out.append((d["text"], str(d.get("source", source))))
        else:
            raise InvalidInputError(f"text_or_docs[{i}]: expected a string or {{'text': ...}}")
        check_text(out[-1][0], f"text_or_docs[{i}]")
    return out
