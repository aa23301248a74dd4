"""The dense and full-text searches of a retrieval run side by side on a store that serves
reads at once (PostgreSQL's pool), and in turn on the embedded store."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lightmem import LightMemory
from lightmem.pipeline.side_by_side import run_both
from lightmem.store.base import ScoredId, Vector
from lightmem.store.sqlite import SQLiteStore
from lightmem.types import Filters, Scope


@dataclass
class _Reads:
    parallel_reads: bool
    started: dict[str, threading.Event] = field(
        default_factory=lambda: {"dense": threading.Event(), "text": threading.Event()}
    )
    overlapped: list[str] = field(default_factory=list)

    def search(self, name: str, other: str) -> list[ScoredId]:
        """Says it started, then waits (briefly) for the other search to start too."""
        self.started[name].set()
        if self.started[other].wait(2.0 if self.parallel_reads else 0.05):
            self.overlapped.append(name)
        return [(name, 1.0)]

    # The rest of :class:`~lightmem.store.base.EntrySearch`: ``run_both`` reads only
    # ``parallel_reads`` and runs the searches it is handed, never these.
    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        raise AssertionError("run_both searched the store itself")

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        raise AssertionError("run_both searched the store itself")

    def vectors(self, scope: Scope, filters: Filters) -> tuple[list[str], Vector, list[str]]:
        raise AssertionError("run_both searched the store itself")


def test_searches_overlap_only_where_the_store_serves_reads_at_once() -> None:
    both = _Reads(parallel_reads=True)
    got = run_both(both, lambda: both.search("dense", "text"), lambda: both.search("text", "dense"))
    assert got == ([("dense", 1.0)], [("text", 1.0)])
    assert sorted(both.overlapped) == ["dense", "text"]
    turns = _Reads(parallel_reads=False)
    run_both(turns, lambda: turns.search("dense", "text"), lambda: turns.search("text", "dense"))
    assert turns.overlapped == ["text"]  # the text search started after the dense one ended


@pytest.mark.parametrize("parallel", [True, False])
def test_a_failing_search_raises_in_the_caller(parallel: bool) -> None:
    store = _Reads(parallel_reads=parallel)

    def fail() -> list[ScoredId]:
        raise RuntimeError("search failed")

    with pytest.raises(RuntimeError, match="search failed"):
        run_both(store, lambda: [], fail)
    with pytest.raises(RuntimeError, match="search failed"):
        run_both(store, fail, lambda: [])


class _ParallelSQLite(SQLiteStore):
    """The embedded store declared able to serve reads at once, recording the threads of
    its searches."""

    parallel_reads = True

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.threads: set[str] = set()

    def vector_search(
        self, query: Vector, scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        self.threads.add(threading.current_thread().name)
        return super().vector_search(query, scope, filters, k)

    def text_search(
        self, terms: Sequence[str], scope: Scope, filters: Filters, k: int
    ) -> list[ScoredId]:
        self.threads.add(threading.current_thread().name)
        return super().text_search(terms, scope, filters, k)


def test_a_hybrid_retrieval_searches_on_two_threads_with_the_same_results(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "I adopted a beagle named Biscuit last spring."},
        {"role": "user", "content": "My sister Ana moved to Lisbon for work."},
        {"role": "user", "content": "Biscuit hates thunderstorms and hides under the bed."},
    ]
    path = tmp_path / "m.db"
    with LightMemory.from_config({"store": {"path": str(path)}}) as mem:
        mem.add_memory(msgs, force_extract=True)
        plain = [r.id for r in mem.retrieve("What is my dog afraid of?", limit=3)]
        embedder, settings = mem.embedder, mem.settings
    store = _ParallelSQLite(path)
    with LightMemory(store, embedder, settings=settings) as mem:
        side = [r.id for r in mem.retrieve("What is my dog afraid of?", limit=3)]
    assert side == plain
    assert "lightmem-search" in store.threads and len(store.threads) == 2
