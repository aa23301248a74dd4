"""``lightmem demo``: ingest a small shipped conversation offline, then answer questions."""

from __future__ import annotations

import json
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

from lightmem.cli.output import memory_line
from lightmem.memory import LightMemory

__all__ = ["QUESTIONS", "demo_messages", "run"]

QUESTIONS = (
    "What race did Maya sign up for?",
    "Does Maya have any injuries?",
    "What does Maya eat? Any diet restrictions?",
    "Which project does Maya lead at work now?",
    "How fast did Maya finish the half marathon?",
)


def demo_messages() -> list[dict[str, Any]]:
    data = resources.files("lightmem").joinpath("data/demo_conversation.json").read_text("utf-8")
    messages: list[dict[str, Any]] = json.loads(data)
    return messages


def run(out: TextIO, store_path: str | None = None) -> None:
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="lightmem-demo-") as tmp:
        path = store_path or str(Path(tmp) / "demo.db")
        with LightMemory.from_config({"store": {"path": path}}) as mem:
            msgs = demo_messages()
            result = mem.add_memory(msgs, force_extract=True, user_id="maya")
            created = mem.store.get_entries(list(result.entries_created)).values()
            summaries = sum(e.kind == "summary" for e in created)
            out.write(
                f"Ingested {result.messages_added} messages into {path}: "
                f"{len(result.entries_created) - summaries} memories and {summaries} topic "
                f"summaries ({time.perf_counter() - start:.1f}s, no model server, no "
                "network).\nBest match first; each line ends with its short id and the turn "
                "it came from.\n"
            )
            for q in QUESTIONS:
                out.write(f"\nQ: {q}\n")
                for rank, r in enumerate(mem.retrieve(q, limit=3, user_id="maya"), 1):
                    out.write(
                        f"  {rank}. {memory_line(r.entry)}  <- source turn "
                        f"{', '.join(r.source_ids)}\n"
                    )
            q = QUESTIONS[1]
            out.write(f"\nPrompt context for {q!r} within 60 tokens:\n")
            out.write(mem.retrieve_context(q, budget_tokens=60, user_id="maya") + "\n")
            stats = mem.stats(user_id="maya")
            usage = stats["usage"]["total"]
            out.write(
                f"\n{stats['entries']} entries, {stats['summaries']} topic summaries, "
                f"{usage['calls']} embedding calls ({usage['items']} texts), 0 LLM calls. "
                f"Done in {time.perf_counter() - start:.1f}s.\n"
            )
