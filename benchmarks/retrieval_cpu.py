"""CPU time per retrieval on LoCoMo conversations, which a loaded machine does not skew the
way it skews wall-clock latency (``lightmem bench locomo`` reports the latter).

    python benchmarks/retrieval_cpu.py FILE [--samples N] [--budget-tokens 800]
        [--stores DIR] [--profile 30]

Each conversation is ingested once into DIR (kept, and reused by the next run, so two code
versions can be timed on the same stores back to back), then, after one untimed search
that loads the store's search columns, every scored question is retrieved as ``bench
locomo`` retrieves it (limit 200 within the budget). Prints JSON: CPU
and wall milliseconds per question (mean, p50, p95), the load average before and after, and
with ``--profile N`` the N costliest functions by cumulative CPU time (to stderr).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

from lightmem import LightMemory
from lightmem.bench import locomo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--samples", type=int, help="only the first N conversations")
    ap.add_argument("--budget-tokens", type=int, default=800)
    ap.add_argument("--stores", type=Path, help="keep the ingested stores here")
    ap.add_argument("--profile", type=int, default=0, help="print the N costliest functions")
    args = ap.parse_args(argv)
    data = locomo.load(args.file)[: args.samples]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="lightmem-cpu-") as tmp:
        stores = args.stores or Path(tmp)
        stores.mkdir(parents=True, exist_ok=True)
        cpu, wall = _run(data, stores, args.budget_tokens, args.profile)
    report = {
        "questions": len(cpu),
        "budget_tokens": args.budget_tokens,
        "cpu_ms": _stats(cpu),
        "wall_ms": _stats(wall),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(report))
    return 0


def _run(
    data: list[dict[str, object]], stores: Path, budget: int, profile: int
) -> tuple[list[float], list[float]]:
    prof = cProfile.Profile(time.process_time)
    cpu: list[float] = []
    wall: list[float] = []
    for sample in data:
        path = stores / f"{sample.get('sample_id')}.db"
        fresh = not path.exists()
        with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
            if fresh:
                for msgs in locomo.sessions(sample):
                    mem.add_memory(msgs, force_segment=True)
                mem.flush()
            ingested = {m["id"] for msgs in locomo.sessions(sample) for m in msgs}
            questions = [str(qa["question"]) for qa, _ in locomo.scored_questions(sample, ingested)]
            if questions:  # the first search builds the in-memory columns: not timed
                mem.retrieve(questions[0], limit=200, budget_tokens=budget)
            for q in questions:
                c0, w0 = time.process_time(), time.perf_counter()
                if profile:
                    prof.enable()
                mem.retrieve(q, limit=200, budget_tokens=budget)
                if profile:
                    prof.disable()
                cpu.append(time.process_time() - c0)
                wall.append(time.perf_counter() - w0)
    if profile:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(profile)
    return cpu, wall


def _stats(seconds: list[float]) -> dict[str, float]:
    xs = sorted(seconds)
    if not xs:
        return {}

    def pct(f: float) -> float:
        return round(1000 * xs[min(len(xs) - 1, int(f * len(xs)))], 3)

    return {"mean": round(1000 * sum(xs) / len(xs), 3), "p50": pct(0.5), "p95": pct(0.95)}


if __name__ == "__main__":
    sys.exit(main())
