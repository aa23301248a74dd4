"""Does answers-first (``retrieval.answer_reach``) ever push a real answer down? 91 short
conversations written by three outside reviews to break it
(``benchmarks/data/answer_kind_cases.json``): chat that holds names and numbers, answers
in lower case, as bare noun phrases or as roles, replies to a question, two people
talking (LoCoMo style), loose times, Chinese, questions asking for a source or a degree.

    python benchmarks/answer_kind_cases.py [FILE]

Each conversation is stored twice in fresh SQLite files (``answer_reach`` 0 and the
default) and asked its question; the answer's place is the first retrieved memory whose
text holds the answer's words. Prints JSON: per case both places, and how many cases the
step put lower, higher or at the same place.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from lightmem import LightMemory
from lightmem.pipeline.answer_kind import REACH

Turn = tuple[str, str, str]  # role, speaker, text
Conversation = list[tuple[str, list[Turn]]]  # (day, turns) per session
DATA = Path(__file__).resolve().parent / "data" / "answer_kind_cases.json"


def load(path: Path) -> list[tuple[str, Conversation, str, str]]:
    """Each case's source, conversation, question and words of the answer."""
    return [
        (
            c["source"],
            [(s["date"], [(r, w, t) for r, w, t in s["turns"]]) for s in c["sessions"]],
            c["question"],
            c["answer"],
        )
        for c in json.loads(path.read_text(encoding="utf-8"))
    ]


def place(conversation: Conversation, question: str, answer: str, reach: int, db: Path) -> int:
    """Where the answer comes in the retrieved memories (-1: not among them)."""
    with LightMemory.from_config(
        {"store": {"path": str(db)}, "retrieval": {"answer_reach": reach}}
    ) as mem:
        for s, (day, turns) in enumerate(conversation):
            mem.add_memory(
                [
                    {"id": f"s{s}t{k}", "role": role, "speaker_name": who,
                     "content": text, "timestamp": f"{day}T09:{k:02d}:00"}
                    for k, (role, who, text) in enumerate(turns)
                ],
                user_id="u",
                force_extract=True,
            )  # fmt: skip
        got = [r.entry.original_text or r.entry.text for r in mem.retrieve(question, user_id="u")]
    return next((k for k, text in enumerate(got) if answer in text), -1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", type=Path, nargs="?", default=DATA)
    cases = load(ap.parse_args().cases)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n, (source, conversation, question, answer) in enumerate(cases):
            off, on = (
                place(conversation, question, answer, reach, Path(tmp) / f"{n}-{reach}.db")
                for reach in (0, REACH)
            )
            rows.append({"source": source, "question": question, "off": off, "on": on})

    def rank(k: int) -> int:
        return k if k >= 0 else 99

    out = {
        "cases": len(rows),
        "lower": sum(rank(r["on"]) > rank(r["off"]) for r in rows),
        "higher": sum(rank(r["on"]) < rank(r["off"]) for r in rows),
        "same": sum(r["on"] == r["off"] for r in rows),
        "rows": rows,
    }
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
