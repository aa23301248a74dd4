"""Topic segmentation of the sensory buffer by embedding similarity between turns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

__all__ = ["SegmenterConfig", "segment"]


@dataclass(frozen=True, slots=True)
class SegmenterConfig:
    """``window``: turns averaged on each side of a candidate boundary; ``sensitivity``: a
    boundary needs similarity below mean - sensitivity * std of the buffer's similarities;
    ``max_gap_s``: a silence this long always starts a new topic (a new session)."""

    window: int = 2
    sensitivity: float = 0.5
    min_turns: int = 2
    max_turns: int = 24
    max_gap_s: float = 1800.0


def segment(
    vectors: npt.NDArray[np.float32],
    timestamps: Sequence[datetime | None],
    cfg: SegmenterConfig,
) -> list[list[int]]:
    """Split turns ``0..n-1`` into contiguous topic segments.

    Works for any speaker order: it compares windows of neighbouring turns, not
    user/assistant pairs. The threshold adapts to each buffer's own similarity spread.
    """
    n = vectors.shape[0]
    if n == 0:
        return []
    forced = {i for i in range(1, n) if _gap(timestamps[i - 1], timestamps[i]) > cfg.max_gap_s}
    sims = _window_similarity(vectors, cfg.window)  # sims[i]: boundary before turn i+1
    candidates: set[int] = set()
    if sims.size >= 3:
        threshold = float(sims.mean() - cfg.sensitivity * sims.std())
        for i in range(sims.size):
            left = sims[i - 1] if i > 0 else np.inf
            right = sims[i + 1] if i + 1 < sims.size else np.inf
            if sims[i] < threshold and sims[i] <= left and sims[i] <= right:
                candidates.add(i + 1)
    cuts = sorted(forced | candidates)
    segments = _apply(n, cuts, forced, cfg.min_turns)
    out: list[list[int]] = []
    for seg in segments:
        out.extend(_split_long(seg, sims, cfg.max_turns))
    return out


def _gap(a: datetime | None, b: datetime | None) -> float:
    return (b - a).total_seconds() if a is not None and b is not None else 0.0


def _window_similarity(v: npt.NDArray[np.float32], w: int) -> npt.NDArray[np.float64]:
    n = v.shape[0]
    if n < 2:
        return np.zeros(0)
    csum = np.vstack([np.zeros((1, v.shape[1]), dtype=np.float64), np.cumsum(v, axis=0)])
    out = np.empty(n - 1)
    for i in range(n - 1):
        lo, hi = max(0, i + 1 - w), min(n, i + 1 + w)
        left = csum[i + 1] - csum[lo]
        right = csum[hi] - csum[i + 1]
        denom = np.linalg.norm(left) * np.linalg.norm(right)
        out[i] = float(left @ right / denom) if denom > 0 else 1.0
    return out


def _apply(n: int, cuts: list[int], forced: set[int], min_turns: int) -> list[list[int]]:
    segments: list[list[int]] = []
    start = 0
    for c in cuts:
        # A semantic cut that would leave a tiny segment is skipped; a time gap never is.
        if c in forced or c - start >= min_turns:
            segments.append(list(range(start, c)))
            start = c
    segments.append(list(range(start, n)))
    return [s for s in segments if s]


def _split_long(seg: list[int], sims: npt.NDArray[np.float64], max_turns: int) -> list[list[int]]:
    if len(seg) <= max_turns:
        return [seg]
    # Cut at the least similar inner boundary, then recurse on both halves.
    inner = seg[1:]
    cut = min(inner, key=lambda i: sims[i - 1])
    k = seg.index(cut)
    return _split_long(seg[:k], sims, max_turns) + _split_long(seg[k:], sims, max_turns)
