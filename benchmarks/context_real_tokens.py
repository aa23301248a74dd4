"""Real tokens of the exact context a budget packs: every LoCoMo question of FILE retrieved
with the library's defaults (``retrieve(limit=200, budget_tokens=B)`` and
``format_context``, as ``bench locomo`` scores it), its formatted context counted with the
LLaMA-3 tokenizer that ships inside wordllama (offline), beside the library's own estimate
(words x 1.3) that the budget is measured in. Prints one JSON row per budget; run it under
two source trees (``PYTHONPATH=...``) to compare versions.

    python benchmarks/context_real_tokens.py locomo_dev.json [--budgets 400,800]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import wordllama
from wordllama import WordLlama

from lightmem import LightMemory
from lightmem.bench import locomo
from lightmem.text import estimate_tokens


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--budgets", default="400,800")
    args = ap.parse_args(argv)
    model = WordLlama.load(
        config="l2_supercat",
        cache_dir=Path(wordllama.__file__).parent,
        disable_download=True,
        dim=256,
    )
    data = locomo.load(args.file)
    budgets = [int(b) for b in args.budgets.split(",")]
    rows: dict[int, dict[str, list[float]]] = {b: {"est": [], "real": [], "n": []} for b in budgets}
    with tempfile.TemporaryDirectory(prefix="lightmem-real-tokens-") as tmp:
        for sample in data:
            cfg = {"store": {"path": str(Path(tmp) / f"{sample.get('sample_id')}.db")}}
            ingested = {m["id"] for msgs in locomo.sessions(sample) for m in msgs}
            with LightMemory.from_config(cfg) as mem:
                for msgs in locomo.sessions(sample):
                    mem.add_memory(msgs, force_segment=True)
                mem.flush()
                for qa, _ in locomo.scored_questions(sample, ingested):
                    for b in budgets:
                        results = mem.retrieve(str(qa["question"]), limit=200, budget_tokens=b)
                        context = mem.format_context(results)
                        ids = model.tokenizer.encode(context, add_special_tokens=False).ids
                        rows[b]["est"].append(estimate_tokens(context))
                        rows[b]["real"].append(len(ids))
                        rows[b]["n"].append(len(results))
    for b, r in rows.items():
        real = sorted(r["real"])
        print(
            json.dumps(
                {
                    "budget": b,
                    "questions": len(real),
                    "estimated_tokens_mean": round(statistics.fmean(r["est"]), 1),
                    "llama3_tokens_mean": round(statistics.fmean(real), 1),
                    "llama3_tokens_p95": real[int(0.95 * len(real))] if real else 0,
                    "memories_mean": round(statistics.fmean(r["n"]), 1),
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
