"""The in-memory search columns of the embedded store: vectors, filter columns and the
BM25 index, one row per stored entry version, searched exactly or through the IVF index.

Derived state, kept in step with the file by its owner (:mod:`lightmem.store.sqlite_search`):
rows are appended in place into spare capacity, and a deleted or replaced entry's row is
tombstoned (``alive`` false), never moved, so row positions stay the keys of the BM25
postings and the IVF index. A search on another thread reads the first ``n`` rows as they
were when it started.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

from lightmem.store.ann_index import IndexPolicy, IVFIndex
from lightmem.store.sql import DamagedRowError, vector_from_blob
from lightmem.store.text_index import BM25Index, Stemmer
from lightmem.store.topk import top_positions
from lightmem.types import Filters, Scope

__all__ = ["COLUMNS", "VectorRows"]

#: Filter columns (object arrays) and their place in a row of
#: :data:`lightmem.store.sqlite_search.ROW_SQL`.
COLUMNS: Mapping[str, int] = MappingProxyType(
    {"user": 1, "agent": 2, "run": 3, "speaker": 5, "topic": 6, "kind": 7, "event": 9}
)
#: Query vectors whose scores over every row are kept (see :meth:`VectorRows._scores`).
_KEPT_QUERIES = 2
VEC, TS, RID = 8, 4, 13
log = logging.getLogger("lightmem.store")


def _grown(buf: npt.NDArray[Any], need: int) -> npt.NDArray[Any]:
    """``buf`` if it holds ``need`` rows, else a larger copy (old readers keep the old)."""
    if buf.shape[0] >= need:
        return buf
    out = np.empty((max(need, 2 * buf.shape[0], 1024), *buf.shape[1:]), dtype=buf.dtype)
    out[: buf.shape[0]] = buf
    return out


class VectorRows:
    """Column buffers with spare capacity; the first ``n`` rows are the data."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.n = 0
        self.n_dead = 0
        self._ids = np.empty(0, dtype=object)
        self._rids = np.empty(0, dtype=np.int64)
        self._matrix = np.empty((0, dim), dtype=np.float32)
        self._ts = np.empty(0, dtype=np.float64)
        self._alive = np.empty(0, dtype=np.bool_)
        self._cols = {name: np.empty(0, dtype=object) for name in COLUMNS}
        self._kind_masks: dict[tuple[str, ...], tuple[npt.NDArray[np.bool_], int]] = {}
        #: Rows whose stored vector is damaged (another tool wrote it): kept for full-text
        #: search, left out of every vector search. Usually empty.
        self._vectorless = np.empty(0, dtype=np.int64)
        self.text = BM25Index()
        self.ann: IVFIndex | None = None
        #: The latest exact queries' scores over the first n rows, newest last:
        #: (query bytes, n, scores), at most :data:`_KEPT_QUERIES`.
        self._recent: list[tuple[bytes, int, npt.NDArray[np.float32]]] = []
        self.scorings = 0  # exact scorings of every row, for tests and profiles

    # -- views ------------------------------------------------------------------------
    @property
    def ids(self) -> npt.NDArray[np.object_]:
        return self._ids[: self.n]

    @property
    def rids(self) -> npt.NDArray[np.int64]:
        return self._rids[: self.n]

    @property
    def matrix(self) -> npt.NDArray[np.float32]:
        return self._matrix[: self.n]

    @property
    def alive(self) -> npt.NDArray[np.bool_]:
        return self._alive[: self.n]

    @property
    def n_alive(self) -> int:
        return self.n - self.n_dead

    def column(self, name: str) -> npt.NDArray[np.object_]:
        return self._cols[name][: self.n]

    # -- changes ----------------------------------------------------------------------
    def append(
        self, rows: Sequence[tuple[Any, ...]], texts: Sequence[str], stemmer: Stemmer
    ) -> None:
        """Append ``rows`` (the layout of ``ROW_SQL``) whose search texts are ``texts``."""
        n, m = self.n, len(rows)
        if m == 0:
            return
        end = n + m
        self._matrix = _grown(self._matrix, end)
        damaged: list[int] = []
        for i, r in enumerate(rows, start=n):
            try:
                self._matrix[i] = vector_from_blob(r[VEC], self.dim, "vectors", r[RID])
            except DamagedRowError as exc:
                # Like a damaged JSON row (lightmem.store.sql.readable): one bad row never
                # makes a search fail; integrity_check() lists it, re-embed rewrites it.
                log.warning("left a damaged vector out of vector search: %s", exc)
                self._matrix[i] = 0.0
                damaged.append(i)
        if damaged:
            self._vectorless = np.concatenate([self._vectorless, np.array(damaged, np.int64)])
        self._ids = _grown(self._ids, end)
        self._ids[n:end] = [r[0] for r in rows]
        self._rids = _grown(self._rids, end)
        self._rids[n:end] = [r[RID] for r in rows]
        self._ts = _grown(self._ts, end)
        self._ts[n:end] = [np.nan if r[TS] is None else r[TS] for r in rows]
        self._alive = _grown(self._alive, end)
        self._alive[n:end] = True
        for name, j in COLUMNS.items():
            buf = self._cols[name] = _grown(self._cols[name], end)
            buf[n:end] = [r[j] for r in rows]
        self.text.append(texts, stemmer)
        if self.ann is not None:
            self.ann.add(n, self._matrix[n:end])
        self.n = end

    def remove(self, rids: Sequence[int]) -> int:
        """Tombstone the live rows of these row ids; how many there were."""
        if not rids:
            return 0
        wanted = np.array(rids, dtype=np.int64)
        # kind="table": one pass over the rows (the default sorts them for long lists)
        pos = np.flatnonzero(np.isin(self.rids, wanted, kind="table") & self.alive)
        self._alive[pos] = False
        self._matrix[pos] = 0.0  # never read again; and a purged vector leaves memory
        self.text.remove(pos)
        self.n_dead += int(pos.size)
        return int(pos.size)

    def build_ann(self, lists_per_sqrt: int) -> None:
        """Train the IVF index on the current rows (removed rows are trained on too and
        skipped by every search)."""
        self.ann = IVFIndex.train(self.matrix, lists_per_sqrt)

    # -- filters ----------------------------------------------------------------------
    def mask(
        self, scope: Scope, filters: Filters, n: int | None = None
    ) -> npt.NDArray[np.bool_] | None:
        """Live rows (of the first ``n``) that pass the scope and filters; None when every
        row passes."""
        n = self.n if n is None else n
        m: npt.NDArray[np.bool_] | None = self._alive[:n].copy() if self.n_dead else None

        def both(new: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
            return new if m is None else m & new

        for name, value in (
            ("user", scope.user_id),
            ("agent", scope.agent_id),
            ("run", scope.run_id),
            ("topic", filters.topic_id),
            ("event", filters.event_id),
        ):
            if value:
                m = both(self._cols[name][:n] == value)
        ts = self._ts[:n]
        if filters.time_from is not None:
            m = both(ts >= filters.time_from.timestamp())
        if filters.time_to is not None:
            m = both(ts <= filters.time_to.timestamp())
        if filters.speaker is not None:
            m = both(self._cols["speaker"][:n] == filters.speaker.lower())
        if filters.kinds is not None:
            m = both(self._kind_mask(filters.kinds, n))
        return m

    def dense_mask(
        self, scope: Scope, filters: Filters, n: int | None = None
    ) -> npt.NDArray[np.bool_] | None:
        """:meth:`mask` without the rows that have no readable vector."""
        n = self.n if n is None else n
        m = self.mask(scope, filters, n)
        gone = self._vectorless[self._vectorless < n]
        if gone.size == 0:
            return m
        m = self._alive[:n].copy() if m is None else m.copy()
        m[gone] = False
        return m

    def _kind_mask(self, kinds: tuple[str, ...], n: int) -> npt.NDArray[np.bool_]:
        # A handful of kind sets recur on every query: compute once, extend on appends.
        buf, filled = self._kind_masks.get(kinds, (np.empty(0, dtype=np.bool_), 0))
        if filled < n:
            buf = _grown(buf, n)
            buf[filled:n] = np.isin(self._cols["kind"][filled:n], np.array(kinds, dtype=object))
            self._kind_masks[kinds] = (buf, n)
        return buf[:n]

    def groups(self, m: npt.NDArray[np.bool_] | None) -> list[str]:
        """Exact scope of each row (of those ``m`` allows) as one comparable key."""
        cols = [
            self.column(c) if m is None else self.column(c)[m] for c in ("user", "agent", "run")
        ]
        return [f"{u}\x1f{a}\x1f{r}" for u, a, r in zip(*cols, strict=True)]

    # -- search -----------------------------------------------------------------------
    def search(
        self,
        query: npt.NDArray[np.float32],
        scope: Scope,
        filters: Filters,
        k: int,
        policy: IndexPolicy,
    ) -> list[tuple[str, float]]:
        n = self.n
        if n == 0 or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32)  # a float64 query would upcast the matrix
        m = self.dense_mask(scope, filters, n)
        allowed = self.n_alive if m is None else int(np.count_nonzero(m))
        if allowed == 0:
            return []
        if m is not None and allowed == n:
            m = None
        k = min(k, allowed)
        matrix = self._matrix[:n]
        if self.ann is not None:
            # A large store: IVF candidates, or (few rows pass the filter) those rows.
            if allowed > policy.exact_allowed:
                cand = np.sort(self._candidates(q, m, n, k, policy))  # ties: earlier row
            else:
                cand = np.arange(n) if m is None else np.flatnonzero(m)
            scores = matrix[cand] @ q
        else:
            # Score every row and mask the scores: gathering rows would copy the matrix.
            cand = np.arange(n)
            scores = self._scores(q, n)
            if m is not None:
                scores = np.where(m, scores, -np.inf)
        k = min(k, cand.size)
        if k == 0:
            return []
        top = top_positions(scores, k)  # cand is ascending: ties go to the earlier row
        ids = self._ids
        return [(str(ids[cand[i]]), float(scores[i])) for i in top]

    def _scores(self, q: npt.NDArray[np.float32], n: int) -> npt.NDArray[np.float32]:
        """Every row's score for ``q`` (not to be written to). The latest two queries' are
        kept: a retrieval searches with the query and with the query without the speakers
        it names, then again with the latter under a speaker filter (speaker focus), which
        then scores no row twice. Rows are only appended or tombstoned (masked by every
        search), so the scores of the first ``n`` rows stay valid."""
        key = q.tobytes()
        for kept in self._recent:
            if kept[1] == n and kept[0] == key:
                return kept[2]
        scores = self._matrix[:n] @ q
        self.scorings += 1
        self._recent = [*self._recent, (key, n, scores)][-_KEPT_QUERIES:]
        return scores

    def _candidates(
        self,
        q: npt.NDArray[np.float32],
        m: npt.NDArray[np.bool_] | None,
        n: int,
        k: int,
        policy: IndexPolicy,
    ) -> npt.NDArray[np.int64]:
        """IVF candidates (live rows that ``m`` allows) to re-rank: the probe is widened
        until the pool is full (or holds every allowed row), so a filter that leaves few
        rows still gets ``k`` results."""
        ann = self.ann
        assert ann is not None
        allowed = n if m is None else int(np.count_nonzero(m))
        want = max(policy.rerank * k, policy.min_candidates)
        nprobe = policy.nprobe
        while True:
            cand = ann.candidates(q, want, m, nprobe)
            cand = cand[cand < n]
            if cand.size >= min(want, allowed) or nprobe >= ann.nlist:
                return cand
            nprobe *= 4

    # -- persistence ------------------------------------------------------------------
    def to_arrays(self) -> dict[str, npt.NDArray[Any]]:
        """Every section of the saved index (removed rows keep their slot, emptied)."""
        n, alive = self.n, self.alive
        dead = np.flatnonzero(~alive)
        ids = ["" if not a else str(i) for i, a in zip(self.ids, alive, strict=True)]
        out: dict[str, npt.NDArray[Any]] = {
            "matrix": self.matrix,  # removed rows were zeroed
            "rids": self.rids,
            "ts": self._ts[:n],
            "alive": alive,
            "ids": np.frombuffer("\x00".join(ids).encode(), dtype=np.uint8),
        }
        for name in COLUMNS:
            codes, vocab = _encode(self.column(name))
            out[f"col_{name}"] = codes
            out[f"vocab_{name}"] = np.frombuffer(json.dumps(vocab).encode(), dtype=np.uint8)
        out.update(self.text.to_arrays(alive))
        if self._vectorless.size:
            out["vectorless"] = self._vectorless
        if self.ann is not None:
            self.ann.remove(dead)  # removed rows' codes go with the rows
            out["ivf"] = self.ann.to_bytes()
        return out

    @classmethod
    def from_arrays(cls, dim: int, n: int, arrays: dict[str, npt.NDArray[Any]]) -> VectorRows:
        """The columns saved by :meth:`to_arrays` (buffers with spare rows past ``n``)."""
        return cls(dim).load_arrays(n, arrays)

    def load_arrays(self, n: int, arrays: dict[str, npt.NDArray[Any]]) -> VectorRows:
        """Take the ``n`` rows of ``arrays`` (this object is new and empty)."""
        matrix = arrays["matrix"]
        if matrix.ndim != 2 or matrix.shape[1] != self.dim or matrix.shape[0] < n:
            raise ValueError("saved vectors have the wrong shape")
        ids = arrays["ids"][:].tobytes().decode().split("\x00") if n else []
        if len(ids) != n:
            raise ValueError("saved ids disagree with the row count")
        self._matrix = matrix
        self._rids = arrays["rids"]
        self._ts = arrays["ts"]
        self._alive = arrays["alive"]
        for buf in (self._rids, self._ts, self._alive):
            if buf.shape[0] < n:
                raise ValueError("saved columns disagree with the row count")
        self._ids = _with_spare(np.array(ids, dtype=object), matrix.shape[0])
        for name in COLUMNS:
            vocab = json.loads(arrays[f"vocab_{name}"].tobytes().decode())
            codes = arrays[f"col_{name}"]
            if codes.shape[0] != n or (n and int(codes.max()) >= len(vocab)):
                raise ValueError(f"saved column {name!r} is inconsistent")
            values = np.empty(len(vocab), dtype=object)
            values[:] = vocab
            self._cols[name] = _with_spare(values[codes], matrix.shape[0])
        self.n = n
        self.n_dead = n - int(np.count_nonzero(self.alive))
        self.text = BM25Index.from_arrays(arrays, self.alive)
        if "vectorless" in arrays:
            gone = np.array(arrays["vectorless"], dtype=np.int64)
            if gone.ndim != 1 or (gone.size and (gone.min() < 0 or gone.max() >= n)):
                raise ValueError("saved vectorless rows are out of range")
            self._vectorless = gone
        if "ivf" in arrays:
            self.ann = IVFIndex.from_bytes(arrays["ivf"], n)
            if self.ann.ntotal != self.n_alive:
                raise ValueError("saved vector index disagrees with the rows")
        return self


def _encode(col: npt.NDArray[np.object_]) -> tuple[npt.NDArray[np.int32], list[Any]]:
    """Codes into a list of the distinct values (JSON-able: str, int, float, None)."""
    lookup: dict[Any, int] = {}
    codes = np.fromiter(
        (lookup.setdefault(v, len(lookup)) for v in col.tolist()), dtype=np.int32, count=col.size
    )
    return codes, list(lookup)


def _with_spare(values: npt.NDArray[np.object_], capacity: int) -> npt.NDArray[np.object_]:
    out = np.empty(max(capacity, values.shape[0]), dtype=object)
    out[: values.shape[0]] = values
    return out
