"""Two searches of one retrieval side by side, where the store can serve them at once.

A server-backed store (PostgreSQL: a connection pool, each search a round trip to a backend
process of its own) answers a dense and a full-text search in parallel, so a hybrid query
costs the slower of the two instead of their sum. The embedded store searches in-process
under one lock, where a second thread would only add a switch: it runs them in turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from lightmem.store.base import EntrySearch, ScoredId

__all__ = ["Search", "run_both"]

Search = Callable[[], list[ScoredId]]


def run_both(
    store: EntrySearch, first: Search, second: Search
) -> tuple[list[ScoredId], list[ScoredId]]:
    """``(first(), second())``; ``second`` on a thread of its own meanwhile when
    ``store.parallel_reads``. An exception of either is raised here (the first's first)."""
    if not store.parallel_reads:
        return first(), second()
    out: list[list[ScoredId]] = []
    failed: list[BaseException] = []

    def run() -> None:
        try:
            out.append(second())
        except BaseException as exc:  # handed to the caller below
            failed.append(exc)

    worker = threading.Thread(target=run, name="lightmem-search", daemon=True)
    worker.start()
    try:
        got = first()
    finally:
        worker.join()
    if failed:
        raise failed[0]
    return got, out[0]
