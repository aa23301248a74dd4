"""The offline update of what is new or changed since it was last brought up to date, a part
at a time to a deadline: what a server's update request runs.

The whole-scope pass (:func:`~lightmem.pipeline.update.run_update` after
:func:`~lightmem.pipeline.update.scope_queue`) builds the queue and the review's neighbours
of every entry before it starts, work that grows with the square of the scope and does not
stop at a deadline. Here only the entries with nothing recorded at the review, or changed
since, are taken, :data:`PENDING_STEP` at a time in the order stored: their queue rows and
review neighbours over the scope (the work grows with those entries times the scope), then
the pass over just them. Past the deadline no further step starts, and the next call goes
on with what is still pending. A step that completed marks its entries brought up to date
(but those the updater deferred).

What it does not see, and the whole-scope pass does: an entry stored now but said before
entries already brought up to date (a backlog imported late) is compared with the earlier
ones, not offered to the later ones as what they may replace. "Changed since" compares the
clocks of the processes that wrote and checked: servers sharing a PostgreSQL store should
keep theirs in step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from lightmem.embed.base import Embedder
from lightmem.pipeline.update import (
    REVIEW_K,
    Updater,
    UpdateReport,
    build_queue,
    in_time_order,
    run_update,
    scope_vectors,
)
from lightmem.pipeline.update_checks import REVIEW
from lightmem.store.base import MemoryStore
from lightmem.types import Scope

__all__ = ["PENDING_STEP", "PendingUpdate", "update_pending"]

#: Entries brought up to date per step (each step's work: these times the scope).
PENDING_STEP = 256


@dataclass(frozen=True, slots=True)
class PendingUpdate:
    """What :func:`update_pending` did: entries brought up to date, and the passes' sum
    (``complete``: nothing is pending any more, as far as this call looked)."""

    brought_up_to_date: int
    report: UpdateReport


def update_pending(
    store: MemoryStore,
    embedder: Embedder,
    updater: Updater,
    scope: Scope,
    top_k: int,
    keep_top_n: int,
    score_threshold: float,
    deadline: float,
    step: int = PENDING_STEP,
) -> PendingUpdate:
    """Bring the entries of ``scope`` pending at the review up to date, ``step`` at a
    time, starting no step past ``deadline`` (``time.monotonic()``) but the first, so
    every call goes on even where reading the scope took longer than the deadline."""
    ids, matrix, groups, said = scope_vectors(store, scope)
    position = {i: n for n, i in enumerate(ids)}
    times = [said.get(i) for i in ids]
    keep = min(top_k, keep_top_n)
    k = max(keep, REVIEW_K)  # one build gives both: a row's first k are its k nearest
    total: UpdateReport | None = None
    done, after = 0, 0
    complete = True
    while True:
        first = total is None
        if not first and time.monotonic() > deadline:
            complete = False
            break
        found = store.unchecked_entries(scope, REVIEW, after, step)
        if not found:
            break
        after = found[-1][0]
        chunk = [i for _, i in found if i in position]  # stored since the vectors were read
        near = build_queue(
            ids, matrix, groups, k, k, times=times, rows=[position[i] for i in chunk]
        )
        queue = {i: row[:keep] for i, row in near.items()}  # given to the pass, not stored
        report = run_update(
            store,
            embedder,
            updater,
            scope,
            score_threshold,
            only=chunk,
            nearest={i: near[i][:REVIEW_K] for i in in_time_order(chunk, said.get) if i in near},
            deadline=None if first else deadline,
            queue=queue,
        )
        total = report if total is None else total.then(report)
        if not report.complete:
            complete = False
            break
        kept = [i for i in chunk if i not in report.deferred and i not in report.deleted]
        store.mark_update_checked(REVIEW, kept)
        done += len(kept)
    report = total or UpdateReport(0, (), ())
    return PendingUpdate(done, replace(report, complete=complete))
