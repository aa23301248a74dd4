"""Each retrieval idea of issue 16 on its own and together, beside the defaults, by
category, with answer-word cover and the spread over conversations.

    python benchmarks/locomo_ablation.py FILE [--budgets 400,800] [--variants a,b,...]
        [--out OUT.json]

Every variant is a ``LightMemory`` config (listed in ``VARIANTS``) run through
``lightmem.bench.locomo.run``: the same ingest, questions and scoring as ``lightmem bench
locomo FILE --config CFG``. Prints one JSON row per (variant, budget).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lightmem.bench import locomo

VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "speaker_focus": {"retrieval": {"speaker_focus": 1.0}},
    "topic_diversity": {"retrieval": {"topic_diversity": 0.5}},
    "focus+diversity": {"retrieval": {"speaker_focus": 1.0, "topic_diversity": 0.5}},
    "original_text": {"text_summary": False},
    "sentences_20": {"retrieval": {"context_text": "sentences", "sentence_words": 20}},
    "sentences_30": {"retrieval": {"context_text": "sentences", "sentence_words": 30}},
    "context_window_2": {"memory_manager": {"configs": {"context_window": 2}}},
    "rate_0.5": {"pre_compressor": {"configs": {"compress_config": {"rate": 0.5}}}},
}


def row(name: str, budget: int, summary: dict[str, Any]) -> dict[str, Any]:
    conv = summary["by_conversation"]
    return {
        "variant": name,
        "budget": budget,
        "all_evidence_recall": summary["all_evidence_recall"],
        "answer_word_cover": summary["answer_word_cover"],
        "by_category": {
            c: (v["all_evidence_recall"], v["answer_word_cover"])
            for c, v in summary["by_category"].items()
        },
        "per_conversation": {s: v["all_evidence_recall"] for s, v in conv["conversations"].items()},
        "mean_retrieved_tokens": summary["mean_retrieved_tokens"],
        "ingest_s": summary["ingest_s"],
        "retrieval_ms_p95": summary["retrieval_ms_p95"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--budgets", default="400,800")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--config", type=Path, help="a JSON config every variant starts from")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    base = json.loads(args.config.read_text()) if args.config else {}
    rows = []
    for name in args.variants.split(","):
        if name not in VARIANTS:
            ap.error(f"--variants: unknown {name!r}; known: {', '.join(VARIANTS)}")
        cfg = _merge(base, VARIANTS[name])
        for budget in (int(b) for b in args.budgets.split(",")):
            summary = locomo.run(args.file, budget_tokens=budget, config=cfg)["summary"]
            rows.append(row(name, budget, summary))
            print(json.dumps(rows[-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


if __name__ == "__main__":
    sys.exit(main())
