"""What ``bench locomo`` reports beside evidence recall: answer-word cover on the exact
formatted context, figures per conversation, and the run's configuration (so a run can be
repeated from its JSON alone)."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lightmem import __version__
from lightmem.config import Settings

__all__ = [
    "COVER_STOPWORDS",
    "answer_cover",
    "answer_words",
    "by_conversation",
    "mean_cover",
    "redacted",
    "run_config",
]

_ALNUM = re.compile(r"[^\W_]+")

#: Words that carry no part of an answer ("the", "a", "and" ...): removed from the gold
#: answer before its cover is measured.
COVER_STOPWORDS: frozenset[str] = frozenset(
    "a an the and or of to in on at for with by from is are was were be been it its as that "
    "this her his their she he they".split()
)


def answer_words(answer: Any) -> set[str]:
    """The gold answer's content words: lower-cased alphanumeric runs minus stopwords."""
    return {w for w in _ALNUM.findall(str(answer).lower()) if w not in COVER_STOPWORDS}


def answer_cover(answer: Any, context: str) -> float | None:
    """Share of the answer's content words present in ``context`` (None when the answer
    has none, e.g. an adversarial question)."""
    want = answer_words(answer)
    if not want:
        return None
    have = set(_ALNUM.findall(context.lower()))
    return len(want & have) / len(want)


def mean_cover(questions: Sequence[Mapping[str, Any]]) -> float:
    """Mean answer-word cover over the questions that have one."""
    vals = [q["answer_cover"] for q in questions if q.get("answer_cover") is not None]
    return round(statistics.fmean(vals), 4) if vals else 0.0


def by_conversation(questions: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """All-evidence recall, multi-hop recall and cover per conversation, and their spread
    (the dev split is small: a change that helps one conversation only shows here)."""
    out: dict[str, Any] = {}
    for sid in dict.fromkeys(q["sample_id"] for q in questions):
        qs = [q for q in questions if q["sample_id"] == sid]
        multi = [q for q in qs if q["category"] == 1]
        out[sid] = {
            "n": len(qs),
            "all_evidence_recall": _rate(qs),
            "multi_hop_recall": _rate(multi),
            "answer_word_cover": mean_cover(qs),
        }
    recalls = [v["all_evidence_recall"] for v in out.values()]
    return {
        "conversations": out,
        "all_evidence_recall_min": min(recalls, default=0.0),
        "all_evidence_recall_max": max(recalls, default=0.0),
        "all_evidence_recall_stdev": round(statistics.pstdev(recalls), 4) if recalls else 0.0,
    }


def _rate(qs: Sequence[Mapping[str, Any]]) -> float:
    return round(sum(bool(q["all_evidence"]) for q in qs) / len(qs), 4) if qs else 0.0


def run_config(
    path: str | Path,
    *,
    config: Mapping[str, Any] | None,
    settings: Settings,
    embedder: str,
    budget_tokens: int,
    limit: int,
    samples: int | None,
    limit_turns: int | None,
) -> dict[str, Any]:
    """Everything that decides the run's figures: the data file (name and SHA-256), the
    config given (secrets redacted), the settings it resolved to (embedder, compression,
    retrieval) and the benchmark's own arguments."""
    data = Path(path)
    return {
        "lightmem_version": __version__,
        "data_file": data.name,
        "data_sha256": hashlib.sha256(data.read_bytes()).hexdigest(),
        "config": redacted({k: v for k, v in (config or {}).items() if k != "store"}),
        "embedder": embedder,
        "pre_compress": settings.pre_compress,
        "compressor": settings.compressor,
        "compress_rate": settings.compress_rate,
        "text_summary": settings.text_summary,
        "context_window": settings.context_window,
        "memory_manager": settings.memory_manager,
        "retrieve": dataclasses.asdict(settings.retrieve),
        "budget_tokens": budget_tokens,
        "limit": limit,
        "samples": samples,
        "limit_turns": limit_turns,
    }


_SECRET_KEYS = ("api_key", "password", "dsn", "token")


def redacted(value: Any) -> Any:
    """``value`` with every mapping entry whose key names a secret replaced, recursively."""
    if isinstance(value, Mapping):
        return {
            k: "<redacted>" if any(w in str(k).lower() for w in _SECRET_KEYS) else redacted(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redacted(v) for v in value]
    return value
