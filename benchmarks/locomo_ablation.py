"""Each retrieval idea of issue 16 on its own and together, beside the baseline, by
category, with answer-word cover and the spread over conversations.

    python benchmarks/locomo_ablation.py FILE [--budgets 400,800] [--variants a,b,...]
        [--config BASE.json] [--out OUT.json]

A variant is an ingest config (``INGEST``: what is stored) plus retrieval settings
(``VARIANTS``); each conversation is ingested once per ingest config and every variant
on it is scored with the same questions and scoring as ``lightmem bench locomo``
(:func:`lightmem.bench.locomo.scored_questions` and :func:`~lightmem.bench.locomo.score`).
Prints one JSON row per (variant, budget).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lightmem import LightMemory
from lightmem.bench import locomo
from lightmem.bench.locomo_report import by_conversation

OFF = {
    "speaker_focus": 0.0,
    "keep_first": 0,
    "context_text": "stored",
    "expand_weight": 0.0,
    "readable_first": 0,
    "readable_text": "sentences",
    "tail_rate": 1.0,
    "sentence_words": 30,
}
#: the defaults before expansion and readable text (speaker focus on)
FOCUS = {**OFF, "speaker_focus": 1.0, "keep_first": 10}
#: the best memories' readable text before every-word-but-stopwords (readable_text "words")
SENTENCES_HEAD = {
    "readable_text": "sentences",
    "readable_first": 5,
    "readable_share": 0.1,
    "tail_after": 10,
}
INGEST: dict[str, dict[str, Any]] = {
    "default": {},
    "original_text": {"text_summary": False},
    "context_window_2": {"memory_manager": {"configs": {"context_window": 2}}},
    "rate_0.5": {"pre_compressor": {"configs": {"compress_config": {"rate": 0.5}}}},
}
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "baseline": ("default", OFF),
    "speaker_focus": ("default", {**OFF, "speaker_focus": 1.0}),
    "focus_keep10": ("default", {**OFF, "speaker_focus": 1.0, "keep_first": 10}),
    "focus_0.5": ("default", {**OFF, "speaker_focus": 0.5}),
    "focus2_keep10": ("default", {**OFF, "speaker_focus": 2.0, "keep_first": 10}),
    "sentences_20": ("default", {**OFF, "context_text": "sentences", "sentence_words": 20}),
    "sentences_30": ("default", {**OFF, "context_text": "sentences", "sentence_words": 30}),
    "focus_only": ("default", FOCUS),
    "expand_0.25": ("default", {**FOCUS, "expand_weight": 0.25}),
    "expand_0.5": ("default", {**FOCUS, "expand_weight": 0.5}),
    "expand_1.0": ("default", {**FOCUS, "expand_weight": 1.0}),
    "expand_0.5_hits1": ("default", {**FOCUS, "expand_weight": 0.5, "expand_hits": 1}),
    "expand_0.5_hits5": ("default", {**FOCUS, "expand_weight": 0.5, "expand_hits": 5}),
    "readable_2": (
        "default",
        {**FOCUS, "expand_weight": 0.5, "readable_first": 2, "readable_share": 1.0},
    ),
    "readable_5": (
        "default",
        {**FOCUS, "expand_weight": 0.5, "readable_first": 5, "readable_share": 1.0},
    ),
    # expansion 0.5 and readable_first 5 within 10%, before the tail cut
    "before_tail": ("default", {"tail_rate": 1.0, "sentence_words": 30, **SENTENCES_HEAD}),
    "tail_0.4": ("default", {"tail_rate": 0.4, **SENTENCES_HEAD}),
    # + the tail cut (tail_after 10, tail_rate 0.2), before the head's words
    "before_words": ("default", SENTENCES_HEAD),
    # + the best 15 with every word but stopwords within 15 %, the tail after 12
    "defaults": ("default", {}),
    "original_text": ("original_text", OFF),
    "context_window_2": ("context_window_2", OFF),
    "rate_0.5": ("rate_0.5", OFF),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--budgets", default="400,800")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--config", type=Path, help="a JSON config every variant starts from")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--samples", type=int, help="only the first N conversations")
    args = ap.parse_args(argv)
    base = json.loads(args.config.read_text()) if args.config else {}
    names = args.variants.split(",")
    for name in names:
        if name not in VARIANTS:
            ap.error(f"--variants: unknown {name!r}; known: {', '.join(VARIANTS)}")
    budgets = [int(b) for b in args.budgets.split(",")]
    data = locomo.load(args.file)[: args.samples]
    rows = []
    for ingest in dict.fromkeys(VARIANTS[n][0] for n in names):
        with tempfile.TemporaryDirectory(prefix="lightmem-ablation-") as tmp:
            cfg = _merge(base, INGEST[ingest])
            ingest_s, turns = _ingest(data, cfg, Path(tmp))
            for name in (n for n in names if VARIANTS[n][0] == ingest):
                variant = _merge(cfg, {"retrieval": VARIANTS[name][1]})
                for budget in budgets:
                    summary = _score(data, variant, Path(tmp), budget, ingest_s, turns)
                    rows.append(_row(name, budget, summary, variant))
                    print(json.dumps(rows[-1]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


def _ingest(data: list[dict[str, Any]], cfg: dict[str, Any], tmp: Path) -> tuple[float, int]:
    seconds, turns = 0.0, 0
    for sample in data:
        with LightMemory.from_config(_store(cfg, tmp, sample)) as mem:
            t0 = time.perf_counter()
            for msgs in locomo.sessions(sample):
                mem.add_memory(msgs, force_segment=True)
                turns += len(msgs)
            mem.flush()
            seconds += time.perf_counter() - t0
    return seconds, turns


def _score(
    data: list[dict[str, Any]],
    cfg: dict[str, Any],
    tmp: Path,
    budget: int,
    ingest_s: float,
    turns: int,
) -> dict[str, Any]:
    questions, latencies = [], []
    for sample in data:
        ingested = {m["id"] for msgs in locomo.sessions(sample) for m in msgs}
        sid = str(sample.get("sample_id"))
        with LightMemory.from_config(_store(cfg, tmp, sample)) as mem:
            for qa, ev in locomo.scored_questions(sample, ingested):
                t0 = time.perf_counter()
                results = mem.retrieve(str(qa["question"]), limit=200, budget_tokens=budget)
                latencies.append(time.perf_counter() - t0)
                questions.append(locomo.score(sid, qa, ev, results, mem.format_context(results)))
    summary = locomo.summarize(questions, ingest_s, turns, sorted(latencies), budget)
    summary["by_conversation"] = by_conversation(questions)
    return summary


def _row(name: str, budget: int, summary: dict[str, Any], cfg: dict[str, Any]) -> dict[str, Any]:
    conv = summary["by_conversation"]["conversations"]
    return {
        "variant": name,
        "budget": budget,
        "all_evidence_recall": summary["all_evidence_recall"],
        "answer_word_cover": summary["answer_word_cover"],
        "by_category_recall_cover": {
            c: (v["all_evidence_recall"], v["answer_word_cover"])
            for c, v in summary["by_category"].items()
        },
        "per_conversation_recall": {s: v["all_evidence_recall"] for s, v in conv.items()},
        "per_conversation_multi_hop": {s: v["multi_hop_recall"] for s, v in conv.items()},
        "mean_retrieved_tokens": summary["mean_retrieved_tokens"],
        "ingest_s": summary["ingest_s"],
        "retrieval_ms_p50": summary["retrieval_ms_p50"],
        "retrieval_ms_p95": summary["retrieval_ms_p95"],
        "config": cfg,
    }


def _store(cfg: dict[str, Any], tmp: Path, sample: dict[str, Any]) -> dict[str, Any]:
    return {**cfg, "store": {"path": str(tmp / f"{sample.get('sample_id')}.db")}}


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


if __name__ == "__main__":
    sys.exit(main())
