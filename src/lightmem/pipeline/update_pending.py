"""The offline update of what is new or changed since it was last brought up to date, a part
at a time to a deadline: what a server's update request runs.

The whole-scope pass (:func:`~lightmem.pipeline.update.run_update` after
:func:`~lightmem.pipeline.update.scope_queue`) builds the queue and the review's neighbours
of every entry before it starts, work that grows with the square of the scope and does not
stop at a deadline. Here only the pending entries are taken, :data:`PENDING_STEP` at a time
in the order stored: their queue rows and review neighbours over the scope (the work grows
with those entries times the scope), then the pass over just them. An entry is pending at
the review when it has no check there, changed after the view its check was made from,
was checked under another updater or code (:func:`~lightmem.pipeline.update_checks.checks_key`),
or an earlier entry new or changed after that view reaches it: joins the nearest earlier
entries its review and decide stage show
(:func:`~lightmem.pipeline.update_reach.moved_reach`; a backlog imported late is offered
to the later entries, an edited or restored memory to those that may replace it). Past the
deadline no further step starts, and the next call goes on with what is still pending. A
step that completed marks its entries (but those the updater deferred) as of the call's
view of the store, taken before it read the vectors, and flags the later entries its new or
changed ones reach; a call looks again from the start for what its own steps made pending
behind them, and takes no entry twice: one that changed after the view (edited meanwhile,
rewritten or superseded by this call) is the next call's, which reads it as it is then.

What it does not see, and the whole-scope pass does: a memory deleted, or edited into one
less like a later memory than before, leaves the later memories that showed it with what
they were shown (the whole pass would show them the next nearest); an edit of a memory
without a time stores it as the newest, so those after it lose it as after a deletion; an
edit whose write straddles the moment a call takes its view is settled from the vector
before it. The times compared are the clocks of the processes that wrote and checked:
servers sharing a PostgreSQL store should keep theirs in step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from lightmem.embed.base import Embedder
from lightmem.pipeline.update import (
    REVIEW_K,
    Updater,
    UpdateReport,
    build_queue,
    in_time_order,
    run_update,
    scope_vectors,
    updater_key,
)
from lightmem.pipeline.update_checks import REVIEW
from lightmem.pipeline.update_reach import moved_reach, review_floors
from lightmem.store.base import MemoryStore
from lightmem.types import Scope

__all__ = ["PENDING_STEP", "PendingUpdate", "update_pending"]

#: Entries brought up to date per step (each step's work: these times the scope).
PENDING_STEP = 256
#: Looks over the pending entries from the start a call takes at most: a step makes
#: entries pending behind it (a supersession changes the memory it replaces, which later
#: memories were shown; a backlog reaches later memories stored before it), which the next
#: look takes; an updater that keeps changing what it decided cannot hold a call longer.
_LOOKS = 4


@dataclass(frozen=True, slots=True)
class PendingUpdate:
    """What :func:`update_pending` did: entries brought up to date (reviewed and marked,
    each counted once; one that changed after the call's view is pending again), and the
    passes' sum (``complete``: nothing is pending any more but what the updater
    deferred)."""

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
    # The view's time: what changes after it (an edit while this call runs, a rewrite or
    # a supersession by this call) may not be in the vectors read, so stays pending.
    view_at = datetime.now(UTC).timestamp()
    ids, matrix, groups, said = scope_vectors(store, scope)
    position = {i: n for n, i in enumerate(ids)}
    times = [said.get(i) for i in ids]
    key = updater_key(updater) or ""  # an updater without one: checks are marked under ""
    reach = store.load_update_reach(scope, REVIEW, key)
    floors = {position[i]: f for i, f in reach.items() if i in position}
    keep = min(top_k, keep_top_n)
    k = max(keep, REVIEW_K)  # one build gives both: a row's first k are its k nearest
    total: UpdateReport | None = None
    brought: set[str] = set()
    after, looks, took, left = 0, 1, False, False
    complete = True
    while True:
        first = total is None
        if not first and time.monotonic() > deadline:
            complete = False
            break
        found = store.unchecked_entries(scope, REVIEW, key, after, step)
        if not found:
            if not took:
                break  # a look from the start found nothing to take
            if looks == _LOOKS:
                left = True
                break
            # from the start again, for what this look's steps made pending behind them
            after, looks, took = 0, looks + 1, False
            continue
        after = found[-1].rid
        # Not those stored since the vectors were read, nor those deferred in this call,
        # nor those it took already: pending again, they changed after the view (a later
        # call takes them from a view that has the change).
        deferred = set(total.deferred) if total else set()
        left = left or any(p.id in brought for p in found)
        pending = [
            p for p in found if p.id in position and p.id not in brought and p.id not in deferred
        ]
        if not pending:
            continue
        took = True
        chunk = [p.id for p in pending]
        rows = [position[i] for i in chunk]
        near = build_queue(ids, matrix, groups, k, k, times=times, rows=rows)
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
        gone = {*report.deferred, *report.deleted}
        # the floor over what the decide stage was shown too (k >= REVIEW_K)
        kept = review_floors([i for i in chunk if i not in gone], near, k)
        moved = [p for p in pending if p.moved]
        reached = moved_reach(matrix, groups, times, [position[p.id] for p in moved], floors)
        reached -= set(rows)
        if reached:
            changed = max(p.updated_at for p in moved)
            store.flag_update_checks(REVIEW, [ids[n] for n in reached], changed)
        store.mark_update_checked(REVIEW, key, kept, view_at)
        for n in reached:
            del floors[n]
        floors.update((position[i], f) for i, f in kept.items())
        brought.update(kept)
    complete = complete and not left
    report = total or UpdateReport(0, (), ())
    return PendingUpdate(len(brought), replace(report, complete=complete))
