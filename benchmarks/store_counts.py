"""Milliseconds of one ``store.counts(scope)`` (the check near words make at most every
``NearWords.recheck_s`` seconds) on an SQLite store bulk-loaded with N entries (random
vectors, as ``lightmem bench scale`` loads them). Prints one JSON row.

    python benchmarks/store_counts.py 200000
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from lightmem.store.sqlite import SQLiteStore
from lightmem.types import MemoryEntry, Scope

DIM = 384


def main(n: int, repeats: int = 20) -> None:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((n, DIM)).astype(np.float32)
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "counts.db")
        try:
            store.bind_embedder("bench:random:384", DIM)
            t0 = time.perf_counter()
            store.import_entries(
                (
                    MemoryEntry(
                        id=f"e{i}",
                        text=(text := f"memory {i} about topic {i % 97} and words {i % 31}"),
                        original_text=text,
                        scope=Scope(),
                        created_at=now,
                        updated_at=now,
                    ),
                    matrix[i],
                )
                for i in range(n)
            )
            load = {"load_s": round(time.perf_counter() - t0, 1)}
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                store.counts(Scope())
                times.append(1000 * (time.perf_counter() - t0))
        finally:
            store.close()
    times.sort()
    print(
        json.dumps(
            {
                "entries": n,
                **load,
                "counts_ms_p50": round(statistics.median(times), 1),
                "counts_ms_p95": round(times[int(0.95 * (len(times) - 1))], 1),
            }
        )
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
