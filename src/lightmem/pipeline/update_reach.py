"""Which entries are earlier than which, and which later entries an entry new or changed
reaches: those whose review it would join.

The review shows each entry its ``k`` nearest earlier entries of the same exact scope. An
entry stored or changed after a later one was reviewed (a backlog imported late, an edit,
a restore) joins that review when it is at least as like the later entry as the last one
shown there (its *floor*; none when fewer than ``k`` were shown: any earlier entry joins).
Finding those later entries from the recorded floors lets the bounded update
(:mod:`.update_pending`) review them again without rebuilding every entry's neighbours.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from lightmem.store.base import ScoredId

__all__ = ["earlier_mask", "moved_reach", "review_floor", "review_floors"]


def earlier_mask(
    at: npt.NDArray[np.int64],
    times: npt.NDArray[np.float64],
    cols: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.bool_]:
    """``mask[r, j]``: entry ``cols[j]`` (all entries by default) is earlier than entry
    ``at[r]`` (positions in the order stored; ``times`` in seconds, NaN where not known).
    Of two entries with a time, the one said first is the earlier, whichever was stored
    first (a backlog imported newest first); otherwise, and at equal times, the one stored
    first."""
    if cols is None:
        cols = np.arange(len(times))
    t_row, t_col = times[at, None], times[None, cols]
    by_time = ~np.isnan(t_row) & ~np.isnan(t_col) & (t_row != t_col)
    mask: npt.NDArray[np.bool_] = np.where(by_time, t_col < t_row, cols[None, :] < at[:, None])
    return mask


def review_floor(shown: Sequence[ScoredId], k: int) -> float | None:
    """The likeness of the last of the ``k`` nearest earlier entries ``shown`` (most like
    first); None when fewer than ``k`` were found."""
    return float(shown[k - 1][1]) if len(shown) >= k else None


def review_floors(
    ids: Iterable[str], shown: Mapping[str, Sequence[ScoredId]], k: int
) -> dict[str, float | None]:
    """:func:`review_floor` of each of ``ids`` from its row of ``shown`` (none: no floor)."""
    return {i: review_floor(shown.get(i, ()), k) for i in ids}


def moved_reach(
    matrix: npt.NDArray[np.float32],
    groups: Sequence[str],
    times: Sequence[float | None],
    rows: Sequence[int],
    floors: Mapping[int, float | None],
    block: int = 512,
) -> set[int]:
    """Positions of the entries whose review the entries at ``rows`` (new or changed)
    join: said after one of them, of its group, and at least as like it as their floor
    (``floors`` by position; an entry without one is not reached: it is reviewed anyway)."""
    if not rows or not floors:
        return set()
    # only the entries with a floor can be reached: the work is those times the rows
    cols = np.fromiter(floors, dtype=np.int64, count=len(floors))
    floor = np.array([-np.inf if floors[c] is None else floors[c] for c in cols])
    g = np.asarray(groups, dtype=object)
    t = np.array([np.nan if x is None else x for x in times], dtype=np.float64)
    wanted = np.asarray(rows, dtype=np.int64)
    reached: set[int] = set()
    for start in range(0, len(wanted), block):
        at = wanted[start : start + block]
        sims = matrix[at] @ matrix[cols].T
        later = ~earlier_mask(at, t, cols) & (cols[None, :] != at[:, None])
        hit = later & (g[None, cols] == g[at, None]) & (sims >= floor[None, :])
        reached.update(int(cols[j]) for j in np.flatnonzero(hit.any(axis=0)))
    return reached - {int(r) for r in rows}
