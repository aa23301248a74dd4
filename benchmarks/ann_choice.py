"""Which approximate index for the embedded store: build time, query latency and recall@10
of faiss IVF (flat and 8-bit scalar-quantised codes re-ranked exactly) and usearch HNSW,
beside numpy brute force, on the clustered vectors of ``lightmem bench scale``.

    python benchmarks/ann_choice.py --n 200000 > benchmarks/results/ann-choice.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

import numpy as np

from lightmem.bench.scale import DIM, K, _data

Search = Callable[[np.ndarray], np.ndarray]


def _measure(search: Search, qs: np.ndarray, truth: list[set[int]]) -> dict[str, float]:
    times, recalls = [], []
    for q, t in zip(qs, truth, strict=True):
        t0 = time.perf_counter()
        got = search(q)
        times.append(time.perf_counter() - t0)
        recalls.append(len(t & {int(x) for x in got[:K]}) / K)
    times.sort()
    return {
        "p50_ms": round(1000 * statistics.median(times), 3),
        "p95_ms": round(1000 * times[int(0.95 * len(times))], 3),
        "recall_at_10": round(statistics.fmean(recalls), 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    matrix, _ = _data(args.n, 0)
    rng = np.random.default_rng(1)
    picks = rng.integers(0, args.n, args.queries)
    qs = matrix[picks] + 0.3 * rng.standard_normal((args.queries, DIM)).astype(
        np.float32
    ) / np.sqrt(DIM)
    qs = (qs / np.linalg.norm(qs, axis=1, keepdims=True)).astype(np.float32)
    truth = [{int(x) for x in np.argsort(-(matrix @ q))[:K]} for q in qs]
    out: dict[str, object] = {"n": args.n, "dim": DIM}
    out["numpy_brute_force"] = _measure(lambda q: np.argpartition(-(matrix @ q), K)[:K], qs, truth)

    import faiss

    nlist = int(np.sqrt(args.n))
    for name, codes in (("faiss_ivf_flat", None), ("faiss_ivf_sq8_rerank", "sq8")):
        t0 = time.perf_counter()
        quant = faiss.IndexFlatIP(DIM)
        if codes is None:
            index = faiss.IndexIVFFlat(quant, DIM, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            index = faiss.IndexIVFScalarQuantizer(
                quant, DIM, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        sample = matrix[rng.choice(args.n, min(args.n, 64 * nlist), replace=False)]
        index.train(sample)
        index.add(matrix)
        built = time.perf_counter() - t0
        res: dict[str, object] = {"build_s": round(built, 1), "nlist": nlist}
        for nprobe in (4, 8, 16, 32):
            index.nprobe = nprobe

            def search(
                q: np.ndarray, index: faiss.Index = index, codes: str | None = codes
            ) -> np.ndarray:
                _, ids = index.search(q[None, :], 3 * K)
                cand = ids[0][ids[0] >= 0]
                if codes is None:
                    return cand
                exact = matrix[cand] @ q
                return cand[np.argsort(-exact)]

            res[f"nprobe={nprobe}"] = _measure(search, qs, truth)
        out[name] = res

    from usearch.index import Index

    for dtype in ("f32", "i8"):
        t0 = time.perf_counter()
        hnsw = Index(ndim=DIM, metric="ip", dtype=dtype, connectivity=16, expansion_add=128)
        hnsw.add(np.arange(args.n), matrix)
        built = time.perf_counter() - t0
        res = {"build_s": round(built, 1)}
        for ef in (32, 64, 128):
            hnsw.expansion_search = ef
            res[f"ef={ef}"] = _measure(lambda q, h=hnsw: h.search(q, K).keys, qs, truth)
        out[f"usearch_hnsw_{dtype}"] = res
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
