"""The fresh process of ``lightmem bench scale``: open an existing store, answer one search
(timed from before the open), answer 100 more, and report its own resident memory.

    python -m lightmem.bench.scale_child sqlite PATH QUERIES.npy
    python -m lightmem.bench.scale_child postgres DSN QUERIES.npy SCHEMA
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from lightmem.store.base import MemoryStore
from lightmem.types import Filters, Scope

__all__ = ["main", "measure"]

DIM, K, SEARCHES = 384, 10, 100


def _rss_mb() -> float:
    """This process's resident set (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS in /proc/self/status")


def measure(backend: str, target: str, queries: Path, schema: str = "") -> dict[str, Any]:
    qs = np.load(queries)
    f = Filters(kinds=("entry",))
    store: MemoryStore
    if backend == "sqlite":
        from lightmem.store.sqlite import SQLiteStore

        t0 = time.perf_counter()  # the open, not the interpreter's start-up
        store = SQLiteStore(target)
    else:
        from lightmem.store.postgres import PostgresStore

        t0 = time.perf_counter()
        store = PostgresStore(target, schema=schema)
    try:
        store.bind_embedder("bench:random:384", DIM)
        store.vector_search(qs[0], Scope(), f, K)
        open_first = time.perf_counter() - t0
        for i in range(SEARCHES):
            store.vector_search(qs[i % len(qs)], Scope(), f, K)
        return {"open_first_query_s": round(open_first, 2), "rss_mb": _rss_mb()}
    finally:
        store.close()


def main() -> None:
    backend, target, queries = sys.argv[1:4]
    schema = sys.argv[4] if len(sys.argv) > 4 else ""
    print(json.dumps(measure(backend, target, Path(queries), schema)))


if __name__ == "__main__":
    main()
