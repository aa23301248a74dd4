"""Exact in-memory vector search (and the BM25 index) over a snapshot of the store.

The cache is derived state: the owning store rebuilds it whenever the database changed
(its own writes, or another process's commits seen through ``PRAGMA data_version``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from lightmem.store.text_index import BM25Index
from lightmem.types import Filters, Scope


@dataclass(slots=True)
class VectorRows:
    """Column arrays for every stored entry, aligned with the rows of ``matrix``.

    A snapshot: :meth:`extended` returns a new one with rows appended and leaves this one
    as it was, so a search running on another thread never sees columns of two lengths.
    """

    ids: npt.NDArray[np.object_]
    matrix: npt.NDArray[np.float32]
    user: npt.NDArray[np.object_]
    agent: npt.NDArray[np.object_]
    run: npt.NDArray[np.object_]
    ts: npt.NDArray[np.float64]
    speaker: npt.NDArray[np.object_]
    topic: npt.NDArray[np.object_]
    kind: npt.NDArray[np.object_]
    event: npt.NDArray[np.object_]
    text: BM25Index
    _kind_masks: dict[tuple[str, ...], npt.NDArray[np.bool_]] = field(default_factory=dict)
    # ``matrix`` is a view of the first rows of this buffer; appends fill the spare rows
    # (which no older snapshot can see) instead of copying the whole matrix each time.
    # ``_filled`` (shared by the snapshots of one buffer) says how many rows are taken, so
    # only the newest snapshot may append in place.
    _buffer: npt.NDArray[np.float32] | None = None
    _filled: list[int] = field(default_factory=lambda: [0])

    @classmethod
    def build(cls, rows: Sequence[tuple[object, ...]], dim: int, text: BM25Index) -> VectorRows:
        """``rows``: (id, user, agent, run, ts, speaker_lower, topic, kind, vector_blob,
        event_id, ...); ``text`` indexes the same rows in the same order."""
        empty = np.zeros(0, dtype=object)
        start = cls(
            empty,
            np.zeros((0, dim), dtype=np.float32),
            empty,
            empty,
            empty,
            np.zeros(0, dtype=np.float64),
            empty,
            empty,
            empty,
            empty,
            BM25Index.empty(),
        )
        return start.extended(rows, text)

    def extended(self, rows: Sequence[tuple[object, ...]], text: BM25Index) -> VectorRows:
        """A snapshot with ``rows`` appended (same layout as :meth:`build`); ``text`` is the
        BM25 index over all rows, old and new."""
        n, m, dim = len(self.ids), len(rows), self.matrix.shape[1]
        buf, filled = self._buffer, self._filled
        if buf is None or buf.shape[0] < n + m or filled[0] != n:
            buf = np.empty((max(n + m, 2 * n, 1024), dim), dtype=np.float32)
            buf[:n] = self.matrix
            filled = [n]
        for i, r in enumerate(rows, start=n):
            buf[i] = np.frombuffer(r[8], dtype=np.float32)  # type: ignore[call-overload]

        def col(j: int, old: npt.NDArray[np.object_]) -> npt.NDArray[np.object_]:
            return np.concatenate([old, np.array([r[j] for r in rows], dtype=object)])

        ts = np.array([np.nan if r[4] is None else r[4] for r in rows], dtype=np.float64)
        filled[0] = n + m
        kind = col(7, self.kind)
        # Kind masks are asked for on every query: extend them rather than recompute.
        masks = {
            kinds: np.concatenate([mask, np.isin(kind[n:], np.array(kinds, dtype=object))])
            for kinds, mask in self._kind_masks.items()
        }
        return VectorRows(
            col(0, self.ids),
            buf[: n + m],
            col(1, self.user),
            col(2, self.agent),
            col(3, self.run),
            np.concatenate([self.ts, ts]),
            col(5, self.speaker),
            col(6, self.topic),
            kind,
            col(9, self.event),
            text,
            _kind_masks=masks,
            _buffer=buf,
            _filled=filled,
        )

    def mask(self, scope: Scope, filters: Filters) -> npt.NDArray[np.bool_] | None:
        """Rows that pass the scope and filters; None when nothing is filtered."""
        m: npt.NDArray[np.bool_] | None = None

        def both(new: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
            return new if m is None else m & new

        if scope.user_id:
            m = both(self.user == scope.user_id)
        if scope.agent_id:
            m = both(self.agent == scope.agent_id)
        if scope.run_id:
            m = both(self.run == scope.run_id)
        if filters.time_from is not None:
            m = both(self.ts >= filters.time_from.timestamp())
        if filters.time_to is not None:
            m = both(self.ts <= filters.time_to.timestamp())
        if filters.speaker is not None:
            m = both(self.speaker == filters.speaker.lower())
        if filters.topic_id is not None:
            m = both(self.topic == filters.topic_id)
        if filters.kinds is not None:
            km = self._kind_masks.get(filters.kinds)
            if km is None:  # a handful of kind sets recur on every query: compute once
                km = self._kind_masks[filters.kinds] = np.isin(
                    self.kind, np.array(filters.kinds, dtype=object)
                )
            m = both(km)
        if filters.event_id is not None:
            m = both(self.event == filters.event_id)
        return m

    def groups(self) -> npt.NDArray[np.object_]:
        """Exact scope of each row as one comparable key."""
        return np.array(
            [f"{u}\x1f{a}\x1f{r}" for u, a, r in zip(self.user, self.agent, self.run, strict=True)],
            dtype=object,
        )

    def search(
        self, query: npt.NDArray[np.float32], scope: Scope, filters: Filters, k: int
    ) -> list[tuple[str, float]]:
        if len(self.ids) == 0 or k <= 0:
            return []
        m = self.mask(scope, filters)
        # Score every row (one matrix-vector product, as brute force would) and mask the
        # scores: gathering the allowed rows first would copy the matrix on every query.
        # A float64 query would upcast the whole matrix on every search.
        scores = self.matrix @ np.asarray(query, dtype=np.float32)
        if m is not None:
            allowed = int(m.sum())
            if allowed == 0:
                return []
            scores = np.where(m, scores, -np.inf)
            k = min(k, allowed)
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(str(self.ids[i]), float(scores[i])) for i in top]
