"""LoCoMo retrieval benchmark (Maharana et al., ACL 2024; data CC BY-NC 4.0).

Each conversation is ingested into a fresh store with the configured pipeline; every
question of categories 1-4 is answered with retrieval only, within a token budget, and
scored on whether the retrieved memories cite the question's evidence turns.
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lightmem.bench import locomo_kinds, locomo_time, qa_prompts
from lightmem.bench.locomo_report import answer_cover, by_conversation, mean_cover, run_config
from lightmem.errors import InvalidInputError
from lightmem.ledger import UsageRecord, token_sources
from lightmem.llm.base import LLMClient
from lightmem.memory import LightMemory
from lightmem.store.postgres import PostgresStore
from lightmem.text import estimate_tokens
from lightmem.types import RetrievalResult

__all__ = ["evidence_ids", "load", "run", "score", "scored_questions", "sessions", "summarize"]

_EVIDENCE = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_(\d+)")


def load(path: str | Path) -> list[dict[str, Any]]:
    """Read a LoCoMo file (the ``locomo10.json`` format)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"file: cannot read LoCoMo data from {path}: {exc}") from exc
    if not isinstance(data, list) or not all(isinstance(s, dict) for s in data):
        raise InvalidInputError("file: expected a JSON list of LoCoMo samples")
    return data


def sessions(sample: Mapping[str, Any]) -> list[list[dict[str, Any]]]:
    """The conversation as lightmem messages, one list per session, in session order."""
    conv = sample["conversation"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
    out = []
    for n in numbers:
        when = conv.get(f"session_{n}_date_time")
        msgs = []
        for turn in conv[f"session_{n}"]:
            text = turn["text"]
            if turn.get("blip_caption"):
                text = f"{text} [shares a photo: {turn['blip_caption']}]"
            msgs.append(
                {
                    "id": turn["dia_id"],
                    "content": text,
                    "speaker_name": turn["speaker"],
                    "timestamp": when,
                }
            )
        out.append(msgs)
    return out


def evidence_ids(raw: Iterable[Any]) -> set[str]:
    """Evidence ids, parsed defensively ("D8:6; D9:17" holds two, "D" none)."""
    return {m for item in raw for m in _EVIDENCE.findall(str(item))}


def run(
    path: str | Path,
    *,
    budget_tokens: int,
    config: Mapping[str, Any] | None = None,
    limit: int = 200,
    qa_client: LLMClient | None = None,
    progress: Callable[[str], None] | None = None,
    samples: int | None = None,
    limit_turns: int | None = None,
    count_tokens: Callable[[str], int] | None = None,
    dsn: str | None = None,
    update: bool = True,
) -> dict[str, Any]:
    """Run the benchmark; returns ``{"summary": ..., "questions": [...]}``.

    ``config`` selects the pipeline (an LLM ``memory_manager`` makes it the LLM path; its
    calls, tokens, unusable answers and fallback turns are reported). With ``qa_client``,
    each question is also answered from the retrieved context and graded by the same model
    as judge (LoCoMo LLM-judge protocol). ``samples`` keeps the first conversations only;
    ``limit_turns`` ingests the first turns of each and asks only the questions whose
    evidence lies within them. ``count_tokens`` counts raw tokens with the model's own
    tokenizer (words x 1.3 otherwise) for the prompt-tokens-per-raw-token ratio. With
    ``dsn``, each conversation goes into a fresh PostgreSQL schema there (dropped after).
    ``update`` and the offline update configured, each conversation gets the pipeline's
    offline update pass after ingestion; questions with a ``kind`` are scored by
    :mod:`lightmem.bench.locomo_kinds`.
    """
    data = load(path)[:samples] if samples else load(path)
    questions: list[dict[str, Any]] = []
    ingest_s = 0.0
    turns = 0
    raw_tokens = 0
    latencies: list[float] = []
    usage: dict[tuple[str, str], dict[str, Any]] = {}
    run_cfg: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="lightmem-bench-") as tmp:
        for sample in data:
            sid = str(sample.get("sample_id", len(questions)))
            store: dict[str, Any] = {"path": str(Path(tmp) / f"{sid}.db")}
            if dsn:
                store = {"provider": "postgres", "dsn": dsn, "schema": f"locomo_{uuid.uuid4().hex}"}
            cfg = {**(config or {}), "store": store}
            convo = _first_turns(sessions(sample), limit_turns)
            ingested = {m["id"] for msgs in convo for m in msgs}
            with LightMemory.from_config(cfg) as mem:
                run_cfg = run_cfg or run_config(
                    path,
                    config=config,
                    settings=mem.settings,
                    embedder=mem.embedder.name,
                    budget_tokens=budget_tokens,
                    limit=limit,
                    samples=samples,
                    limit_turns=limit_turns,
                )
                t0 = time.perf_counter()
                for msgs in convo:
                    mem.add_memory(msgs, force_segment=True)
                    turns += len(msgs)
                    raw_tokens += sum((count_tokens or estimate_tokens)(m["content"]) for m in msgs)
                mem.flush()
                if update and mem.settings.update == "offline":  # the pipeline's update stage
                    mem.construct_update_queue_all_entries()
                    mem.offline_update_all_entries()
                ingest_s += time.perf_counter() - t0
                stored = locomo_kinds.stored_entries(mem, sample)
                for qa, ev in scored_questions(sample, ingested):
                    t1 = time.perf_counter()
                    results = mem.retrieve(
                        str(qa["question"]), limit=limit, budget_tokens=budget_tokens
                    )
                    latencies.append(time.perf_counter() - t1)
                    context = mem.format_context(results)
                    row = score(sid, qa, ev, results, context)
                    for rank, (item, hit) in enumerate(zip(row["retrieved"], results, strict=True)):
                        item.update(rank=rank + 1, **locomo_kinds.memory_fields(hit))
                    row["context"] = context
                    stale = evidence_ids(qa.get("stale_evidence", []))
                    row.update(locomo_kinds.score(qa, ev, results, stored, stale))
                    row.update(locomo_time.answer_in_context(qa.get("answer"), context))
                    questions.append(row)
                    if qa_client is not None:
                        questions[-1].update(_qa(qa_client, qa, context))
                for rec in mem.stats()["usage"]["by_operation"]:
                    agg = usage.setdefault((rec["kind"], rec["op"]), dict.fromkeys(_USAGE, 0))
                    for k in _USAGE:
                        agg[k] += rec[k]
                if isinstance(mem.store, PostgresStore):
                    mem.store.drop()
            if progress:
                progress(f"{sid}: {len(questions)} questions so far")
    if qa_client is not None:
        for r in qa_client.ledger.totals():
            agg = usage.setdefault((r.kind, r.op), dict.fromkeys(_USAGE, 0))
            for k in _USAGE:
                agg[k] += getattr(r, k)
    summary = summarize(questions, ingest_s, turns, latencies, budget_tokens)
    summary["by_conversation"] = by_conversation(questions)
    summary["config"] = run_cfg
    if any("kind" in q for q in questions):
        summary.update(locomo_kinds.summary(questions))
    summary["usage"] = [{"kind": k, "op": o, **v} for (k, o), v in sorted(usage.items())]
    llm_extract = usage.get(("llm", "extract"))
    if llm_extract:
        summary["llm_calls_per_100_turns"] = round(100 * llm_extract["calls"] / max(1, turns), 3)
        summary["llm"] = _llm_summary(usage, turns, raw_tokens, count_tokens is not None)
    if qa_client is not None:
        graded = [q for q in questions if "correct" in q]
        summary["qa_accuracy"] = round(sum(q["correct"] for q in graded) / max(1, len(graded)), 4)
        for cat in (1, 2, 3, 4):
            qs = [q for q in graded if q["category"] == cat]
            summary["by_category"][str(cat)]["qa_accuracy"] = round(
                sum(q["correct"] for q in qs) / max(1, len(qs)), 4
            )
        summary["qa_model"] = qa_client.name
    return {"summary": summary, "questions": questions}


def scored_questions(
    sample: Mapping[str, Any], ingested: set[str]
) -> Iterator[tuple[Mapping[str, Any], set[str]]]:
    """The questions of categories 1-4 whose evidence (parsed) was all ingested."""
    for qa in sample.get("qa", []):
        if qa.get("category") not in (1, 2, 3, 4):
            continue
        ev = evidence_ids(qa.get("evidence", []))
        if ev and ev <= ingested:
            yield qa, ev


def score(
    sid: str,
    qa: Mapping[str, Any],
    ev: set[str],
    results: Sequence[RetrievalResult],
    context: str,
) -> dict[str, Any]:
    """One question's row: what was retrieved, whether it holds the evidence turns, and
    the answer-word cover of the formatted ``context``."""
    # A topic summary lists its whole segment as sources but holds only keywords, so
    # only entries count as retrieving a turn's content.
    got = {
        s for r in results for e in (r.entry, *r.related) if e.kind == "entry" for s in e.source_ids
    }
    return {
        "sample_id": sid,
        "question": qa["question"],
        "category": qa["category"],
        "evidence": sorted(ev),
        "answer": qa.get("answer"),
        "retrieved": [
            {
                "text": r.text,
                "kind": r.entry.kind,
                "source_ids": list(r.source_ids),
                "score": r.score,
            }
            for r in results
        ],
        "tokens": sum(r.tokens for r in results),
        "all_evidence": ev <= got,
        "any_evidence": bool(ev & got),
        "answer_cover": answer_cover(qa.get("answer", ""), context),
    }


_USAGE = ("calls", "items", "prompt_tokens", "completion_tokens", "latency_s", "errors")


def _first_turns(
    convo: list[list[dict[str, Any]]], limit: int | None
) -> list[list[dict[str, Any]]]:
    if limit is None:
        return convo
    out: list[list[dict[str, Any]]] = []
    left = limit
    for msgs in convo:
        if left <= 0:
            break
        out.append(msgs[:left])
        left -= len(out[-1])
    return out


def _llm_summary(
    usage: Mapping[tuple[str, str], Mapping[str, Any]],
    turns: int,
    raw_tokens: int,
    model_tokenizer: bool,
) -> dict[str, Any]:
    """Extraction cost and robustness: calls, real (server-reported) prompt tokens per raw
    token, unusable answers and turns kept by the per-turn fallback."""
    records = [UsageRecord(k, o, **{f: v[f] for f in _USAGE}) for (k, o), v in usage.items()]
    ext = [r for r in records if r.op.split(".")[0] == "extract"]
    split = token_sources(ext)

    def items(op: str) -> int:
        return int(usage.get(("llm", op), {}).get("items", 0))

    calls = int(usage.get(("llm", "extract"), {}).get("calls", 0))
    return {
        "extract_calls": calls,
        "calls_per_100_turns": round(100 * calls / max(1, turns), 3),
        "unusable_outputs": items("extract.unusable"),
        "unusable_share": round(items("extract.unusable") / max(1, calls), 4),
        "rejected_facts": items("extract.rejected"),
        "fallback_turns": items("extract.fallback"),
        "cut_turns": items("extract.cut"),
        "raw_tokens": raw_tokens,
        "raw_tokens_counted_by": "model tokenizer" if model_tokenizer else "words x 1.3",
        "reported_prompt_tokens": split["reported"]["prompt_tokens"],
        "estimated_prompt_tokens": split["estimated"]["prompt_tokens"],
        "prompt_tokens_per_raw_token": round(
            (split["reported"]["prompt_tokens"] + split["estimated"]["prompt_tokens"])
            / max(1, raw_tokens),
            3,
        ),
        "tokens": split,
    }


def _qa(client: LLMClient, qa: Mapping[str, Any], context: str) -> dict[str, Any]:
    question, gold = str(qa["question"]), str(qa.get("answer", ""))
    answer = client.complete_json(
        qa_prompts.answer_messages(question, context), qa_prompts.parse_answer, op="qa.answer"
    )
    correct = client.complete_json(
        qa_prompts.judge_messages(question, gold, answer), qa_prompts.parse_label, op="qa.judge"
    )
    return {"generated_answer": answer, "correct": correct}


def summarize(
    questions: list[dict[str, Any]],
    ingest_s: float,
    turns: int,
    latencies: list[float],
    budget_tokens: int,
) -> dict[str, Any]:
    def rate(key: str, qs: list[dict[str, Any]]) -> float:
        return round(sum(q[key] for q in qs) / len(qs), 4) if qs else 0.0

    by_cat = {}
    for cat in (1, 2, 3, 4):
        qs = [q for q in questions if q["category"] == cat]
        by_cat[str(cat)] = {
            "n": len(qs),
            "all_evidence_recall": rate("all_evidence", qs),
            "answer_word_cover": mean_cover(qs),
            **locomo_time.share(qs),
        }
    lat = sorted(latencies)
    return {
        "questions": len(questions),
        "budget_tokens": budget_tokens,
        "all_evidence_recall": rate("all_evidence", questions),
        "any_evidence_recall": rate("any_evidence", questions),
        "answer_word_cover": mean_cover(questions),
        "mean_retrieved_tokens": round(statistics.fmean(q["tokens"] for q in questions), 1)
        if questions
        else 0.0,
        "by_category": by_cat,
        "turns": turns,
        "ingest_s": round(ingest_s, 3),
        "retrieval_ms_p50": round(1000 * _pct(lat, 0.50), 3),
        "retrieval_ms_p95": round(1000 * _pct(lat, 0.95), 3),
    }


def _pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]
