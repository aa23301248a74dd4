"""The approximate vector index of the embedded store: faiss IVF with 8-bit codes.

Rows are clustered around ``sqrt(n)`` trained centroids; a search scans the codes of the
``nprobe`` nearest clusters, and the caller re-ranks the candidates with the exact float
vectors it keeps, so returned scores are exact. IVF was chosen by measurement
(``benchmarks/ann_choice.py``): it builds in seconds where HNSW takes minutes on two cores,
adds rows in place, and takes an allowed-rows bitmap, so a filtered search still fills its
``limit`` (widening the probe until it does). faiss is the optional ``ann`` extra; without
it the store searches exactly.
"""

from __future__ import annotations

import importlib.util
import threading
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.errors import InvalidInputError

__all__ = ["IVFIndex", "IndexPolicy", "ann_available"]


@dataclass(frozen=True, slots=True)
class IndexPolicy:
    """When the embedded store searches approximately, and how hard.

    Below ``ann_min_rows`` live rows (or when a filter leaves at most ``exact_allowed``
    rows) the search is exact. The index has ``lists_per_sqrt`` times the square root of
    the row count clusters (at least 8 rows each); ``nprobe`` of them are scanned first;
    ``rerank`` times ``k`` candidates (at least ``min_candidates``) are re-ranked exactly.
    The index and
    the BM25 postings are saved beside a store of ``persist_min_rows`` rows or more, and
    again on close once ``save_after`` rows changed since the saved copy."""

    ann_min_rows: int = 50_000
    exact_allowed: int = 5_000
    lists_per_sqrt: int = 4
    nprobe: int = 16
    rerank: int = 3
    min_candidates: int = 40
    persist_min_rows: int = 50_000
    save_after: int = 1_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidInputError(f"index_policy.{f.name}: a positive integer, not {value!r}")


def ann_available() -> bool:
    """Whether the ``ann`` extra (faiss) is installed."""
    return importlib.util.find_spec("faiss") is not None


class IVFIndex:
    """faiss ``IndexIVFScalarQuantizer`` (inner product, 8-bit) keyed by row position.

    faiss indexes are not safe for an add during a search: a lock serialises them."""

    def __init__(self, index: Any, trained_rows: int) -> None:
        self._index = index
        self.trained_rows = trained_rows
        self.next_id = trained_rows  # one past the largest row id added
        self._lock = threading.Lock()

    @property
    def nlist(self) -> int:
        return int(self._index.nlist)

    @property
    def ntotal(self) -> int:
        return int(self._index.ntotal)

    @classmethod
    def train(
        cls, matrix: npt.NDArray[np.float32], lists_per_sqrt: int = 4, seed: int = 0
    ) -> IVFIndex:
        """Cluster ``matrix`` (a sample of it) into ``lists_per_sqrt * sqrt(n)`` lists and
        add every row, ids ``0..n-1``. Finer lists than faiss's minimum (``sqrt(n)``) keep
        a neighbourhood in fewer lists: at 1M clustered rows, 16 of 1,000 lists found
        0.87 of the true top 10 and 8 of 4,000 lists 0.995, scanning half as many codes."""
        import faiss

        n, dim = matrix.shape
        nlist = max(1, min(int(lists_per_sqrt * np.sqrt(n)), n // 8))
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFScalarQuantizer(
            quantizer, dim, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
        )
        rng = np.random.default_rng(seed)
        size = min(n, 40 * nlist)  # faiss's advice: 39 or more training points a list
        sample = matrix if size == n else matrix[np.sort(rng.choice(n, size, replace=False))]
        index.cp.seed = seed
        index.cp.niter = 10  # k-means iterations: recall levels off well before the default 25
        index.cp.min_points_per_centroid = 1  # small stores: no warnings, still trained
        index.train(np.ascontiguousarray(sample))
        out = cls(index, 0)
        out.trained_rows = n
        out.add(0, matrix)
        return out

    def add(self, start: int, vectors: npt.NDArray[np.float32]) -> None:
        """Add ``vectors`` as rows ``start, start + 1, ...``."""
        if vectors.shape[0] == 0:
            return
        ids = np.arange(start, start + vectors.shape[0], dtype=np.int64)
        with self._lock:
            self._index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
            self.next_id = max(self.next_id, start + vectors.shape[0])

    def remove(self, rows: npt.NDArray[np.int64]) -> None:
        """Drop ``rows``' codes (removed rows are already skipped; this frees them)."""
        if rows.size == 0:
            return
        import faiss

        with self._lock:
            self._index.remove_ids(faiss.IDSelectorBatch(rows.astype(np.int64)))

    def candidates(
        self,
        query: npt.NDArray[np.float32],
        k: int,
        allowed: npt.NDArray[np.bool_] | None,
        nprobe: int,
    ) -> npt.NDArray[np.int64]:
        """Up to ``k`` approximate nearest rows, only rows where ``allowed`` is set."""
        import faiss

        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        with self._lock:
            params = faiss.SearchParametersIVF()
            params.nprobe = min(nprobe, self.nlist)
            if allowed is not None:
                # Every id the index holds must fall inside the bitmap.
                size = max(self.next_id, allowed.shape[0], 1)
                bits = np.zeros(size, dtype=np.bool_)
                bits[: allowed.shape[0]] = allowed
                packed = np.packbits(bits, bitorder="little")
                sel = faiss.IDSelectorBitmap(size, faiss.swig_ptr(packed))
                params.sel = sel
            _, ids = self._index.search(q, k, params=params)
        found: npt.NDArray[np.int64] = ids[0]
        return found[found >= 0]

    def to_bytes(self) -> npt.NDArray[np.uint8]:
        import faiss

        with self._lock:
            return np.asarray(faiss.serialize_index(self._index), dtype=np.uint8)

    @classmethod
    def from_bytes(cls, data: npt.NDArray[np.uint8], trained_rows: int) -> IVFIndex:
        import faiss

        # Read in chunks straight from ``data`` (a mapped file): deserialize_index would
        # first copy all of it into a vector of its own.
        pos = 0

        def chunk(size: int) -> bytes:
            nonlocal pos
            out = data[pos : pos + size].tobytes()
            pos += len(out)
            return out

        reader = faiss.PyCallbackIOReader(chunk, 1 << 22)  # type: ignore[attr-defined]  # (missing from faiss's stubs)
        index = faiss.read_index(reader)
        if not hasattr(index, "nlist"):
            raise ValueError("the saved vector index is not an IVF index")
        return cls(index, trained_rows)
