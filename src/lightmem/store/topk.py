"""Top-k selection shared by the in-memory indexes."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["top_positions"]


def top_positions(scores: npt.NDArray[np.floating], k: int) -> npt.NDArray[np.intp]:
    """Positions of the ``k`` best ``scores``, best first; equal scores in position order.

    Ties are resolved by position at the cut too (``argpartition`` alone keeps an arbitrary
    one of the rows tied with the k-th), so the same rows in the same order always give the
    same answer, whatever the array's history.
    """
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.empty(0, dtype=np.intp)
    kth = scores[np.argpartition(-scores, k - 1)[k - 1]]
    pool = np.flatnonzero(scores >= kth)
    order = np.lexsort((pool, -scores[pool]))
    return pool[order[:k]]
