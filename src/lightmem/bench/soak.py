"""``lightmem bench soak``: a long mixed workload at steady state, watching memory and latency.

Each cycle ingests a batch, deletes the oldest batch once the store holds ``keep`` batches
(so the data size stays level), runs the offline update, a FluxMem task, retrieval
queries, and periodically consolidates and restarts (closes and reopens the store).
Reports RSS growth and retrieval p95 drift between the first and the last windows.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from lightmem.bench.serve import TOPICS, synthetic_messages
from lightmem.embed.base import Embedder
from lightmem.errors import NotFoundError
from lightmem.fluxmem.agent import FluxMemAgent
from lightmem.fluxmem.types import StepResult
from lightmem.ledger import Ledger
from lightmem.memory import LightMemory
from lightmem.store.sqlite import SQLiteStore

__all__ = ["rss_mb", "run"]


def rss_mb() -> float:
    """Resident set size of this process (Linux /proc), in MiB."""
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(
    *, minutes: float, batch: int = 200, keep: int = 20, queries: int = 40, seed: int = 0
) -> dict[str, Any]:
    rng = random.Random(seed)
    deadline = time.monotonic() + minutes * 60
    with tempfile.TemporaryDirectory(prefix="lightmem-soak-") as tmp:
        path = Path(tmp) / "soak.db"
        mem, agent = _open(path, None)
        agent.add_knowledge([f"Tip {i}: the {t} needs care." for i, t in enumerate(TOPICS)])
        batches: list[list[str]] = []
        windows: list[dict[str, float]] = []
        cycle = 0
        start = time.monotonic()
        while time.monotonic() < deadline or cycle < 3:
            msgs = synthetic_messages(batch, seed=seed * 1_000_003 + cycle)
            for m in msgs:
                m["id"] = f"c{cycle}-{m['id']}"
            created = mem.add_memory(msgs, force_extract=True).entries_created
            batches.append(list(created))
            if len(batches) > keep:
                for eid in batches.pop(0):
                    # an entry may already be merged away by the offline update
                    with contextlib.suppress(NotFoundError):
                        mem.delete(eid)
            if cycle % 5 == 4:
                mem.construct_update_queue_all_entries(top_k=5, keep_top_n=5)
                mem.offline_update_all_entries(score_threshold=0.95)
            if cycle % 10 == 0:  # the graph grows by one episode per ten cycles
                agent.run_task(f"plan the {rng.choice(TOPICS)}", _plan)
            if cycle % 50 == 49:
                agent.consolidate()
            lat = []
            for _ in range(queries):
                t0 = time.perf_counter()
                mem.retrieve(f"how was the {rng.choice(TOPICS)}?", 10)
                lat.append(time.perf_counter() - t0)
            if cycle % 10 == 9:  # restart: close the store and reopen it from the file,
                mem.close()  # keeping the loaded model, as a long-lived server does
                mem, agent = _open(path, mem.embedder)
            gc.collect()
            lat.sort()
            windows.append(
                {
                    "t_s": round(time.monotonic() - start, 1),
                    "rss_mb": round(rss_mb(), 1),
                    "p95_ms": round(1000 * lat[int(0.95 * len(lat))], 3),
                    "entries": mem.stats()["entries"],
                }
            )
            cycle += 1
        mem.close()
    # Compare the first and the last fifth of the steady state (the store full at `keep`
    # batches), so growth of the data set is not mistaken for a leak.
    steady = windows[keep + 1 :] or windows
    n = max(1, len(steady) // 5)
    warm, last = steady[:n], steady[-n:]
    rss0 = statistics.median(w["rss_mb"] for w in warm)
    rss1 = statistics.median(w["rss_mb"] for w in last)
    p0 = statistics.median(w["p95_ms"] for w in warm)
    p1 = statistics.median(w["p95_ms"] for w in last)
    return {
        "minutes": minutes,
        "cycles": len(windows),
        "rss_mb_start": rss0,
        "rss_mb_end": rss1,
        "rss_growth_pct": round(100 * (rss1 - rss0) / rss0, 2),
        "retrieve_p95_ms_start": p0,
        "retrieve_p95_ms_end": p1,
        "retrieve_p95_drift_pct": round(100 * (p1 - p0) / p0, 2),
        "entries_end": windows[-1]["entries"],
        "windows": windows,
    }


def _plan(context: str) -> StepResult:
    return StepResult("ok", None, True, ("check the plan", "write the plan"))


def _open(path: Path, embedder: Embedder | None) -> tuple[LightMemory, FluxMemAgent]:
    shared = embedder.with_ledger(Ledger()) if embedder is not None else None
    mem = LightMemory.from_config({"store": {"path": str(path)}}, embedder=shared)
    assert isinstance(mem.store, SQLiteStore)
    return mem, FluxMemAgent(mem.store.graph(), mem.embedder)
