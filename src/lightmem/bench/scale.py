"""``lightmem bench scale --n N [--dsn DSN] [--out FILE]``: load and search N synthetic
memories with real-dimension (384-d) vectors on each backend, against exact numpy search on
the same vectors in the same run. Vectors are clustered (about 50 per cluster, as real
embeddings are); queries are perturbed stored vectors; text queries are words from the same
vocabulary. Per backend also: an update, delete or restore followed by a search
(``edit_then_search``), and a fresh process that opens the loaded store, answers one search
(``open_first_query_s``) and 100 more, and reports its resident memory (``rss_mb``)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from lightmem.pipeline.retrieve import rrf
from lightmem.pipeline.side_by_side import run_both
from lightmem.store.base import MemoryStore
from lightmem.types import Filters, MemoryEntry, Scope

__all__ = ["DIM", "K", "run"]

DIM = 384
K = 10


def _data(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    # Clustered, like real embeddings: on uniform random vectors every neighbour past the
    # first is a near-tie and recall@10 would measure noise.
    centres = rng.standard_normal((max(1, n // 50), DIM)).astype(np.float32)
    noise = rng.standard_normal((n, DIM)).astype(np.float32)
    m = centres[rng.integers(0, len(centres), n)] + np.float32(0.7) * noise
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    vocab = np.array([f"w{i}" for i in range(20_000)])
    texts = [" ".join(vocab[rng.integers(0, len(vocab), 12)]) for _ in range(n)]
    return m, texts


def run(
    n: int,
    *,
    dsn: str | None = None,
    queries: int = 200,
    seed: int = 0,
    ef_search: tuple[int, ...] = (40, 100, 200, 400),
) -> dict[str, Any]:
    """Load ``n`` memories into each backend and search them. PostgreSQL's HNSW search is
    measured at every ``ef_search`` value (the recall/latency trade-off)."""
    matrix, texts = _data(n, seed)
    rng = np.random.default_rng(seed + 1)
    picks = rng.integers(0, n, queries)
    qs = matrix[picks] + 0.3 * rng.standard_normal((queries, DIM)).astype(np.float32) / np.sqrt(DIM)
    qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)
    exact = [np.argpartition(-(matrix @ q), K)[:K] for q in qs]  # the true top K, any order
    brute = []
    for q in qs:
        t1 = time.perf_counter()
        s = matrix @ q
        np.argpartition(-s, K)[:K]
        brute.append(time.perf_counter() - t1)
    out: dict[str, Any] = {
        "n": n,
        "dim": DIM,
        "raw_vectors_mb": round(matrix.nbytes / 2**20, 1),
        "numpy_brute_force": _lat(brute),
    }
    with tempfile.TemporaryDirectory(prefix="lightmem-scale-") as tmp:
        from lightmem.store.sqlite import SQLiteStore

        np.save(Path(tmp) / "queries.npy", qs)
        path = Path(tmp) / "scale.db"
        sqlite = SQLiteStore(path)
        try:
            load = _load(sqlite, matrix, texts)
            out["sqlite"] = {
                **load,
                **_search(sqlite, texts, qs, exact, picks),
                **_write_then_search(sqlite, qs),
                "edit_then_search": _edit_then_search(sqlite, qs),
            }
        finally:
            sqlite.close()
        out["sqlite"].update(_fresh_process("sqlite", str(path), Path(tmp) / "queries.npy"))
        if dsn:
            from lightmem.store.postgres import PostgresStore

            schema = f"scale_{uuid.uuid4().hex[:8]}"
            pg = PostgresStore(dsn, schema=schema)
            try:
                result = _load(pg, matrix, texts)
                for ef in ef_search:
                    pg.ef_search = ef
                    result[f"ef_search={ef}"] = _search(pg, texts, qs, exact, picks)
                result.update(_write_then_search(pg, qs))
                result["edit_then_search"] = _edit_then_search(pg, qs)
                result.update(_fresh_process("postgres", dsn, Path(tmp) / "queries.npy", schema))
                out["postgres"] = result
            finally:
                pg.drop()
                pg.close()
    return out


def _load(store: MemoryStore, matrix: np.ndarray, texts: list[str]) -> dict[str, Any]:
    store.bind_embedder("bench:random:384", DIM)
    now = datetime.now(UTC)
    t0 = time.perf_counter()
    store.import_entries((_entry(f"e{i}", text, now), matrix[i]) for i, text in enumerate(texts))
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    store.vector_search(matrix[0], Scope(), Filters(kinds=("entry",)), K)
    return {
        "load_s": round(load_s, 1),
        "load_per_s": round(len(texts) / load_s),
        # SQLite builds its search columns (and IVF index, and saves them) on the first query.
        "first_query_s": round(time.perf_counter() - t0, 2),
    }


def _search(
    store: MemoryStore,
    texts: list[str],
    qs: np.ndarray,
    exact: list[np.ndarray],
    picks: np.ndarray,
) -> dict[str, Any]:
    f = Filters(kinds=("entry",))
    dense, hybrid, recalls = [], [], []
    for q, truth, p in zip(qs, exact, picks, strict=True):
        t1 = time.perf_counter()
        hits = store.vector_search(q, Scope(), f, K)
        dense.append(time.perf_counter() - t1)
        got = {int(h[0][1:]) for h in hits}
        recalls.append(len(got & {int(x) for x in truth}) / K)
        t2 = time.perf_counter()
        terms = texts[int(p)].split()[:3]
        # as a retrieval runs them: side by side where the store serves both at once
        ranked = run_both(
            store,
            partial(store.vector_search, q, Scope(), f, 100),
            partial(store.text_search, terms, Scope(), f, 100),
        )
        rrf([(1.0, ranked[0]), (1.0, ranked[1])], 60)
        hybrid.append(time.perf_counter() - t2)
    return {
        "embedding": _lat(dense),
        "hybrid": _lat(hybrid),
        "recall_at_10_vs_exact": round(statistics.fmean(recalls), 4),
    }


def _write_then_search(store: MemoryStore, qs: np.ndarray, reps: int = 5) -> dict[str, Any]:
    """A search right after an added entry: the price of keeping derived indexes fresh."""
    now = datetime.now(UTC)
    times = []
    for r in range(reps):
        store.commit_extraction([(_entry(f"late{r}", "late", now), qs[r])], [])
        t0 = time.perf_counter()
        store.vector_search(qs[r], Scope(), Filters(kinds=("entry",)), K)
        times.append(time.perf_counter() - t0)
    return {"search_after_add_p50_ms": round(1000 * statistics.median(times), 2)}


def _edit_then_search(store: MemoryStore, qs: np.ndarray) -> dict[str, Any]:
    """An update, a delete and a restore of stored memories, each followed by a search
    (timed together): the price of keeping the indexes in step with an edit."""
    f, times, reps = Filters(kinds=("entry",)), [], min(20, len(qs) // 2)
    for r in range(reps):
        t0 = time.perf_counter()
        old = store.get_entry(f"e{r}", Scope())
        assert old is not None
        store.update_entry(replace(old, text=f"edited {r}"), qs[r], "bench")
        store.vector_search(qs[r], Scope(), f, K)
        t1 = time.perf_counter()
        gone = store.delete_entry(f"e{reps + r}", Scope(), "bench")
        store.vector_search(qs[r], Scope(), f, K)
        t2 = time.perf_counter()
        store.restore_entry(gone, qs[reps + r], "bench")
        store.vector_search(qs[r], Scope(), f, K)
        times += [t1 - t0, t2 - t1, time.perf_counter() - t2]
    return {**_lat(times), "edits": len(times)}


def _fresh_process(backend: str, target: str, queries: Path, schema: str = "") -> dict[str, Any]:
    """Open the loaded store in a new process: time to the first answer, then its RSS."""
    cmd = [sys.executable, "-m", "lightmem.bench.scale_child", backend, target, str(queries)]
    done = subprocess.run(
        [*cmd, schema] if schema else cmd, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench child failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _entry(entry_id: str, text: str, now: datetime) -> MemoryEntry:
    return MemoryEntry(
        id=entry_id, text=text, original_text=text, scope=Scope(), created_at=now, updated_at=now
    )


def _lat(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "p50_ms": round(1000 * statistics.median(xs), 2),
        "p95_ms": round(1000 * xs[int(0.95 * len(xs))], 2),
    }
