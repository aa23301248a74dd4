"""How retrieved memories are written into prompt context: one header per day, one line
per memory (what a token budget weighs), its facts under an event, markup escaped."""

from __future__ import annotations

from collections.abc import Sequence

from lightmem.pipeline import validity
from lightmem.sanitize import inline, line_speaker, token
from lightmem.timeparse import format_date
from lightmem.timeresolve import said_label
from lightmem.types import MemoryEntry, RetrievalResult

__all__ = [
    "context_line",
    "date_header",
    "escape",
    "format_context",
    "format_line",
    "related_line",
]


def format_line(entry: MemoryEntry) -> str:
    """How one memory appears under its date header in prompt context: on one line, opened
    by its speaker as one token (quoted when it holds a colon, a quote or a line break, or
    starts like a bullet or a header) or, without one, by a bullet ("- "), then the time
    it speaks of when one was resolved, e.g. "(week before 9 June 2023)" (see
    :func:`~lightmem.timeresolve.said_label`). A speaker's line
    has no bullet: it would cost a token per memory and tell the reader nothing."""
    if entry.kind == "summary":
        return f"- {entry.mark} {inline(entry.text)}"
    when = f" ({said_label(entry.event_time, entry.timestamp)})" if entry.event_time else ""
    if entry.kind == "event":
        return f"- {entry.mark} {inline(entry.text)}{when}"
    lead = f"{line_speaker(entry.speaker)}: " if entry.speaker else "- "
    return f"{lead}{inline(entry.text)}{when}{validity.label(entry)}"


def date_header(entry: MemoryEntry) -> str:
    return f"[{format_date(entry.timestamp) or 'undated'}]"


def format_context(results: Sequence[RetrievalResult], *, cite: bool = False) -> str:
    """Results as prompt context, grouped under one header per day in time order. A
    retrieval's token budget is measured on exactly this text (headers included;
    :mod:`lightmem.pipeline.packing`); ``cite=True`` appends each line's source ids, which
    costs extra tokens.

    Memory text is data: angle brackets are escaped so stored text cannot open or close
    markup in the prompt around it, and every field stays on its own line (no stored text can
    start a line, a date header or a speaker of its own).
    """
    groups: dict[str, list[RetrievalResult]] = {}
    for r in sorted(
        results, key=lambda r: r.entry.timestamp.timestamp() if r.entry.timestamp else float("inf")
    ):
        groups.setdefault(date_header(r.entry), []).append(r)
    lines = []
    for header, rs in groups.items():
        lines.append(header)
        for r in rs:
            ids = ", ".join(token(i) for i in r.source_ids)
            cited = f" (source: {ids})" if cite and r.source_ids else ""
            lines.append(context_line(r.entry) + escape(cited))
            lines.extend(escape(related_line(f)) for f in r.related)
    return "\n".join(lines)


def related_line(fact: MemoryEntry) -> str:
    """A fact shown under its event."""
    return f"  - {inline(fact.text)}"


def context_line(entry: MemoryEntry) -> str:
    """``format_line`` as the context writes it (escaped), which is what a budget weighs."""
    return escape(format_line(entry))


def escape(text: str) -> str:
    """``text`` with ``&``, ``<`` and ``>`` escaped: memory text is data in a prompt."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
