"""Real tokens of what `bench locomo` packed into a budget: the retrieved memories' text,
one "- " line each, counted with the LLaMA-3 tokenizer that ships inside wordllama (offline),
beside the library's own estimate (words x 1.3) that the budget is measured in. Prints one
JSON row per file.

    python benchmarks/context_real_tokens.py before.json after.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import wordllama
from wordllama import WordLlama


def main(paths: list[str]) -> None:
    model = WordLlama.load(
        config="l2_supercat",
        cache_dir=Path(wordllama.__file__).parent,
        disable_download=True,
        dim=256,
    )
    for path in paths:
        questions = json.loads(Path(path).read_text())["questions"]
        estimated, real, shown = [], [], []
        for q in questions:
            lines = "\n".join("- " + r["text"] for r in q["retrieved"])
            real.append(len(model.tokenizer.encode(lines, add_special_tokens=False).ids))
            estimated.append(q["tokens"])
            shown.append(len(q["retrieved"]))
        print(
            json.dumps(
                {
                    "file": path,
                    "questions": len(questions),
                    "estimated_tokens_mean": round(statistics.fmean(estimated), 1),
                    "llama3_tokens_mean": round(statistics.fmean(real), 1),
                    "memories_mean": round(statistics.fmean(shown), 1),
                }
            )
        )


if __name__ == "__main__":
    main(sys.argv[1:])
