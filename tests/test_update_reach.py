"""An entry new or changed reaches exactly the later entries whose review it joins: those
whose ``k`` nearest earlier entries, built again with it, hold it."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lightmem.pipeline.update import build_queue
from lightmem.pipeline.update_reach import moved_reach, review_floor


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(2, 40),
    k=st.integers(1, 6),
    dated=st.booleans(),
)
def test_reach_is_the_later_entries_whose_nearest_it_joins(
    seed: int, n: int, k: int, dated: bool
) -> None:
    rng = np.random.default_rng(seed)
    matrix = rng.normal(size=(n, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    ids = [f"e{i}" for i in range(n)]
    groups = [("a", "b")[int(x)] for x in rng.integers(0, 2, n)]
    # said in any order (a backlog stored late), some at the same time or at none
    times = [float(x) if x < 7 else None for x in rng.integers(0, 9 if dated else 1, n)]
    moved = int(rng.integers(0, n))
    others = [i for i in range(n) if i != moved]
    # each other entry's review as recorded before the moved entry was there (or like this)
    before = build_queue(
        [ids[i] for i in others],
        matrix[others],
        [groups[i] for i in others],
        k,
        k,
        times=[times[i] for i in others],
    )
    floors = {i: review_floor(before.get(ids[i], []), k) for i in others}
    after = build_queue(ids, matrix, groups, k, k, times=times)
    joins = {i for i in others if ids[moved] in {c for c, _ in after.get(ids[i], [])}}
    assert moved_reach(matrix, groups, times, [moved], floors) == joins


def test_an_entry_without_a_recorded_floor_is_not_reached() -> None:
    matrix = np.eye(3, dtype=np.float32)
    groups, times = ["a"] * 3, [None] * 3
    assert moved_reach(matrix, groups, times, [0], {1: None, 2: None}) == {1, 2}
    assert moved_reach(matrix, groups, times, [0], {1: None}) == {1}  # 2 is pending anyway
    assert moved_reach(matrix, groups, times, [0], {1: 0.5, 2: None}) == {2}  # 1 is far
    assert moved_reach(matrix, groups, times, [2], {0: None, 1: None}) == set()  # said last
