"""How the ``lightmem`` commands print for people: one line per memory (date, speaker, text,
short id), a plain sentence when nothing matches, and ``--json`` for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, TextIO

from lightmem.pipeline import validity
from lightmem.types import HistoryEvent, MemoryEntry, RetrievalResult

__all__ = [
    "SHORT_ID",
    "TEXT_WIDTH",
    "memory_line",
    "one_line",
    "print_entries",
    "print_entry",
    "print_history",
    "print_json",
    "print_results",
    "short_id",
]

SHORT_ID = 8
TEXT_WIDTH = 110


def short_id(entry_id: str) -> str:
    return entry_id[:SHORT_ID]


def one_line(text: str, width: int = TEXT_WIDTH) -> str:
    """``text`` on one line, cut with an ellipsis past ``width`` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def memory_line(entry: MemoryEntry) -> str:
    """``2024-03-02  Maya: I'm vegetarian ...  [a5dc822e]``: what was said, in its words
    (the compact prompt text only when no original is kept), with ``(until 9 June 2023)``
    when a later memory superseded it."""
    when = entry.timestamp.date().isoformat() if entry.timestamp else "undated   "
    who = f"{entry.speaker}: " if entry.speaker and entry.kind == "entry" else ""
    text = one_line(entry.original_text or entry.text)
    mark = f"{entry.mark} " if entry.mark else ""
    return f"{when}  {mark}{who}{text}{validity.label(entry)}  [{short_id(entry.id)}]"


def print_json(out: TextIO, data: Any) -> None:
    out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def print_results(out: TextIO, results: Sequence[RetrievalResult], as_json: bool) -> None:
    """Ranked hits. People see the rank (1 = best), which means the same in every mode;
    ``--json`` adds ``rank`` beside the mode's own ``score``."""
    if as_json:
        print_json(out, [{"rank": i, **r.to_dict()} for i, r in enumerate(results, 1)])
        return
    if not results:
        out.write("No memory matches this query in this scope.\n")
        return
    for rank, r in enumerate(results, 1):
        out.write(f"{rank:>3}. {memory_line(r.entry)}\n")


def print_entries(out: TextIO, entries: Sequence[MemoryEntry], as_json: bool, empty: str) -> None:
    if as_json:
        print_json(out, [e.to_dict() for e in entries])
        return
    if not entries:
        out.write(empty + "\n")
    for e in entries:
        out.write(memory_line(e) + "\n")


def print_entry(out: TextIO, entry: MemoryEntry, sources: Sequence[dict[str, Any]]) -> None:
    """One memory in full, with the turns it came from."""
    out.write(memory_line(entry) + "\n")
    fields: tuple[tuple[str, str], ...] = (
        ("id", entry.id),
        ("kind", entry.kind),
        ("version", str(entry.version)),
        ("scope", entry.scope.label()),
        ("prompt text", entry.text),
    )
    if entry.superseded_by:  # what replaced it, and from when
        fields += (("superseded by", f"{entry.superseded_by}{validity.label(entry)}"),)
    for name, value in fields:
        out.write(f"  {name + ':':<15}{value}\n")
    if sources:
        out.write("  source turns:\n")
    for m in sources:
        when = f" ({m['time']})" if m.get("time") else ""
        out.write(f"    {m['id']}{when} {m['speaker']}: {one_line(m['content'])}\n")


def print_history(out: TextIO, events: Sequence[HistoryEvent]) -> None:
    for ev in events:
        after = ev.after or ev.before or {}
        text = one_line(str(after.get("original_text") or after.get("text") or ""), 80)
        reason = f" ({ev.reason})" if ev.reason else ""
        out.write(
            f"v{ev.version} {ev.op:<8}{ev.at.isoformat(timespec='seconds')}{reason}  {text}\n"
        )
