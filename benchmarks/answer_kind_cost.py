"""CPU time of the answer-kind step (``lightmem.pipeline.answer_kind.answers_first``) per
question, on a LoCoMo file's questions with 24 of the same conversation's turns each (the
window the step looks at), drawn at random (seed 1):

    python benchmarks/answer_kind_cost.py locomo_dev.json [--samples 1]

Prints JSON: how many questions ask for a kind of value, and the step's CPU milliseconds
(median and 95th percentile) over those that do (the others return at once), on a second
pass (the first loads word lists and fills caches).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from lightmem.pipeline.answer_kind import answers_first, asked_for
from lightmem.pipeline.candidates import RERANK_WINDOW
from lightmem.store.text_index import Stemmer
from lightmem.types import MemoryEntry, Scope


def _fetch(entries: dict[str, MemoryEntry], ids: list[str]) -> dict[str, MemoryEntry]:
    return {i: entries[i] for i in ids if i in entries}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("locomo", type=Path)
    ap.add_argument("--samples", type=int, default=1, help="conversations used (first N)")
    a = ap.parse_args()
    data = json.loads(a.locomo.read_text(encoding="utf-8"))[: a.samples]
    stemmer = Stemmer()
    when = datetime(2023, 1, 1, tzinfo=UTC)
    cases: list[tuple[str, dict[str, MemoryEntry]]] = []
    total = 0
    rng = random.Random(1)
    for sample in data:
        conv = sample["conversation"]
        turns = [t for k, v in conv.items() if k.startswith("session_") and isinstance(v, list)
                 for t in v]  # fmt: skip
        for qa in sample["qa"]:
            total += 1
            if asked_for(qa["question"]) is None:
                continue
            picked = rng.sample(turns, min(RERANK_WINDOW, len(turns)))
            entries = {
                f"e{k}": MemoryEntry(f"e{k}", t["text"], t["text"], Scope(user_id="u"), when,
                                     speaker_name=t["speaker"])
                for k, t in enumerate(picked)
            }  # fmt: skip
            cases.append((qa["question"], entries))
    times: list[float] = []
    for _ in range(2):  # the first pass loads word lists and fills caches: the second counts
        times = []
        for question, entries in cases:
            ranked = [(i, 1.0 - n / 100) for n, i in enumerate(entries)]
            start = time.process_time()
            answers_first(ranked, partial(_fetch, entries), question, stemmer)
            times.append((time.process_time() - start) * 1000)
    times.sort()
    out = {
        "questions": total,
        "asking_a_kind": len(times),
        "cpu_ms_p50": round(statistics.median(times), 3) if times else None,
        "cpu_ms_p95": round(times[int(0.95 * (len(times) - 1))], 3) if times else None,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
