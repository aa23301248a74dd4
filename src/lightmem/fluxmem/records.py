"""What a task run records: attempts, repairs, crashed steps, and knowledge documents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightmem.errors import InvalidInputError
from lightmem.fluxmem.types import Repair, StepResult, Subgraph
from lightmem.pipeline.messages import MAX_CONTENT_CHARS
from lightmem.sanitize import check_text

__all__ = [
    "MAX_DOCUMENTS",
    "MAX_SOURCE_CHARS",
    "Crash",
    "attempt_record",
    "documents",
    "repair_record",
]

#: Documents in one ``add_knowledge`` call (each becomes one or more nodes); each document
#: holds at most :data:`~lightmem.pipeline.messages.MAX_CONTENT_CHARS` characters.
MAX_DOCUMENTS = 10_000


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


#: The longest ``source`` label of a document (a title, a file name, a URL).
MAX_SOURCE_CHARS = 2_000


def _source(src: object, where: str) -> str:
    """``src`` if it is a string of at most :data:`MAX_SOURCE_CHARS` characters."""
    if not isinstance(src, str):
        raise InvalidInputError(f"{where}: expected a string, got {_tname(src)}")
    if len(src) > MAX_SOURCE_CHARS:
        raise InvalidInputError(f"{where}: longer than {MAX_SOURCE_CHARS} characters")
    return src


def documents(
    raw: str | Sequence[str] | Sequence[Mapping[str, str]], source: str
) -> list[tuple[str, str]]:
    """``(text, source)`` of each document given to ``add_knowledge``: a string, or a
    mapping of ``text`` and optionally ``source`` (a string; default ``source``). Every
    document must hold text: one that would add nothing is refused, not skipped."""
    source = _source(source, "source")
    if isinstance(raw, str):
        _check_text(raw, "text_or_docs")
        if not raw.strip():
            raise InvalidInputError("text_or_docs: no text to add (empty knowledge)")
        return [(raw, source)]
    if not isinstance(raw, Sequence):
        raise InvalidInputError("text_or_docs: expected text, a list of texts or of dicts")
    if not raw:
        raise InvalidInputError("text_or_docs: no text to add (empty knowledge)")
    if len(raw) > MAX_DOCUMENTS:
        raise InvalidInputError(
            f"text_or_docs: {len(raw)} documents in one call, at most {MAX_DOCUMENTS}; "
            "add them in several calls"
        )
    out = []
    for i, d in enumerate(raw):
        where = f"text_or_docs[{i}]"
        text: object
        src: object
        if isinstance(d, str):
            text, src = d, source
        elif isinstance(d, Mapping):
            for key in d:
                if key not in ("text", "source"):
                    raise InvalidInputError(
                        f"{where}.{key}: unknown field (a document has 'text' and 'source')"
                    )
            text, src = d.get("text"), d.get("source", source)
            if not isinstance(text, str):
                raise InvalidInputError(f"{where}.text: expected a string, got {_tname(text)}")
            src = _source(src, f"{where}.source")
            where += ".text"
        else:
            raise InvalidInputError(f"{where}: expected a string or {{'text': ...}}")
        _check_text(text, where)
        if not text.strip():
            raise InvalidInputError(f"{where}: no text (every document must have some)")
        out.append((text, src))
    return out


def _check_text(text: str, where: str) -> None:
    check_text(text, where)
    if len(text) > MAX_CONTENT_CHARS:
        raise InvalidInputError(f"{where}: longer than {MAX_CONTENT_CHARS} characters")


def _tname(value: object) -> str:
    return "None" if value is None else type(value).__name__
