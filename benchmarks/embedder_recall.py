"""Embedders side by side in the library's own pipeline on a LoCoMo file: each embedder
ingests every conversation once (today's defaults otherwise, turns indexed with their
neighbours) and is scored at each budget with the questions and scoring of
``lightmem bench locomo``. Reports per embedder the ingest wall and CPU seconds (the
process's CPU time over all its threads, which a loaded machine does not inflate),
retrieval wall and CPU p50/p95 per question, and all-evidence recall and answer-word
cover by category. Prints one JSON row per (embedder, budget).

    python benchmarks/embedder_recall.py locomo_dev.json --embedders wordllama,minilm,minilm-lines

Embedders: ``wordllama``; ``minilm`` (whole texts); ``minilm-lines`` (line by line,
remembered lines); ``minilm-1w`` (whole texts, one thread).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lightmem import LightMemory
from lightmem.bench import locomo
from lightmem.config import build_embedder, parse_config
from lightmem.embed.base import Embedder
from lightmem.embed.minilm import MiniLMEmbedder
from lightmem.ledger import Ledger


def make(name: str) -> Embedder:
    if name == "minilm":
        return MiniLMEmbedder()
    if name == "minilm-lines":
        return MiniLMEmbedder(lines=True)
    if name == "minilm-1w":
        return MiniLMEmbedder(workers=1)
    return build_embedder(parse_config({"text_embedder": {"model_name": name}}), Ledger())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--budgets", default="400,800")
    ap.add_argument("--embedders", default="wordllama,minilm,minilm-lines")
    ap.add_argument("--samples", type=int, help="only the first N conversations")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    data = locomo.load(args.file)[: args.samples]
    rows = []
    for name in args.embedders.split(","):
        emb = make(name)
        emb.embed(["load the model outside the measurement"])
        with tempfile.TemporaryDirectory(prefix="lightmem-embedder-recall-") as tmp:
            ingest = _ingest(data, emb, Path(tmp))
            for budget in (int(b) for b in args.budgets.split(",")):
                row = {"embedder": name, "name": emb.name, **ingest}
                row.update(_score(data, emb, Path(tmp), budget))
                row["load_average"] = [round(x, 2) for x in os.getloadavg()]
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


def _ingest(data: list[dict[str, Any]], emb: Embedder, tmp: Path) -> dict[str, Any]:
    wall = cpu = 0.0
    turns = 0
    load = os.getloadavg()[0]
    for sample in data:
        with LightMemory.from_config(_store(tmp, sample), embedder=emb) as mem:
            w, c = time.perf_counter(), time.process_time()
            for msgs in locomo.sessions(sample):
                mem.add_memory(msgs, force_segment=True)
                turns += len(msgs)
            mem.flush()
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
    return {
        "turns": turns,
        "ingest_wall_s": round(wall, 1),
        "ingest_cpu_s": round(cpu, 1),
        "load_average_at_ingest_start": round(load, 2),
    }


def _score(data: list[dict[str, Any]], emb: Embedder, tmp: Path, budget: int) -> dict[str, Any]:
    questions, walls, cpus = [], [], []
    for sample in data:
        ingested = {m["id"] for msgs in locomo.sessions(sample) for m in msgs}
        sid = str(sample.get("sample_id"))
        with LightMemory.from_config(_store(tmp, sample), embedder=emb) as mem:
            for qa, ev in locomo.scored_questions(sample, ingested):
                w, c = time.perf_counter(), time.process_time()
                results = mem.retrieve(str(qa["question"]), limit=200, budget_tokens=budget)
                walls.append(time.perf_counter() - w)
                cpus.append(time.process_time() - c)
                questions.append(locomo.score(sid, qa, ev, results, mem.format_context(results)))
    s = locomo.summarize(questions, 0.0, 0, sorted(walls), budget)
    cpus.sort()
    return {
        "budget": budget,
        "questions": s["questions"],
        "all_evidence_recall": s["all_evidence_recall"],
        "answer_word_cover": s["answer_word_cover"],
        "by_category_recall": {c: v["all_evidence_recall"] for c, v in s["by_category"].items()},
        "by_category_cover": {c: v["answer_word_cover"] for c, v in s["by_category"].items()},
        "mean_retrieved_tokens": s["mean_retrieved_tokens"],
        "retrieval_ms_p50": s["retrieval_ms_p50"],
        "retrieval_ms_p95": s["retrieval_ms_p95"],
        "retrieval_cpu_ms_p50": round(1000 * cpus[len(cpus) // 2], 2) if cpus else 0.0,
        "retrieval_cpu_ms_p95": round(1000 * cpus[int(0.95 * len(cpus))], 2) if cpus else 0.0,
    }


def _store(tmp: Path, sample: dict[str, Any]) -> dict[str, Any]:
    return {"store": {"path": str(tmp / f"{sample.get('sample_id')}.db")}}


if __name__ == "__main__":
    sys.exit(main())
