"""Adds one turn per call, as a chat does, on LoCoMo conversations through the counting LLM
stub: LLM calls per 100 turns (extraction must keep batching) and the share of turns that
the very next retrieve finds (immediate search).

    PYTHONPATH=src python benchmarks/per_turn_adds.py FILE [--samples 1]

Prints JSON. Run it beside main's code (PYTHONPATH=<main>/src) for the baseline.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from lightmem import LightMemory
from lightmem.testing import OpenAIStubServer, ScriptedLLM


def turns_of(sample: dict[str, Any]) -> list[dict[str, Any]]:
    conv = sample["conversation"]
    out: list[dict[str, Any]] = []
    n = 1
    while f"session_{n}" in conv:
        for t in conv[f"session_{n}"]:
            out.append(
                {
                    "id": t["dia_id"],
                    "content": t["text"],
                    "speaker_name": t["speaker"],
                    "timestamp": conv[f"session_{n}_date_time"],
                }
            )
        n += 1
    return out


def run(sample: dict[str, Any]) -> dict[str, Any]:
    turns = turns_of(sample)
    with OpenAIStubServer(chat_handler=ScriptedLLM()) as stub, tempfile.TemporaryDirectory() as d:
        llm = {"model": "stub", "openai_base_url": stub.base_url, "api_key": "k"}
        cfg = {
            "store": {"path": str(Path(d) / "m.db")},
            "memory_manager": {"model_name": "openai", "configs": llm},
        }
        found = 0
        with LightMemory.from_config(cfg) as mem:
            for t in turns:
                mem.add_memory(t)
                hits = mem.retrieve(t["content"], limit=5)
                found += any(t["id"] in r.source_ids for r in hits)
            mem.flush()
        calls = stub.counters.requests.get("/v1/chat/completions", 0)
    return {
        "sample": sample["sample_id"],
        "turns": len(turns),
        "llm_calls": calls,
        "calls_per_100_turns": round(100 * calls / len(turns), 3),
        "found_right_after_add": round(found / len(turns), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("file", type=Path)
    ap.add_argument("--samples", type=int, default=1)
    args = ap.parse_args()
    data = json.loads(args.file.read_text())[: args.samples]
    print(json.dumps([run(s) for s in data], indent=2))


if __name__ == "__main__":
    main()
